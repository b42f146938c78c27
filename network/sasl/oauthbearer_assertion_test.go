package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// jwtBearerIdP is a token endpoint for the JWT bearer grant: it verifies
// each assertion with the client's public key and keeps the last one's
// header and claims.
type jwtBearerIdP struct {
	*httptest.Server
	pub crypto.PublicKey

	mu      sync.Mutex
	header  map[string]any
	claims  map[string]any
	granted int
}

func newJWTBearerIdP(t *testing.T, pub crypto.PublicKey) *jwtBearerIdP {
	idp := &jwtBearerIdP{pub: pub}
	idp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := idp.check(r); err != nil {
			http.Error(w, `{"error":"invalid_grant","error_description":"`+err.Error()+`"}`, http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "granted.access.token", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(idp.Close)
	return idp
}

func (idp *jwtBearerIdP) check(r *http.Request) error {
	if r.FormValue("grant_type") != JWTBearerGrant {
		return errors.New("grant_type " + r.FormValue("grant_type"))
	}
	parts := strings.Split(r.FormValue("assertion"), ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	var header, claims map[string]any
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, dst); err != nil {
			return err
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	d := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch pub := idp.pub.(type) {
	case *rsa.PublicKey:
		if header["alg"] != "RS256" || rsa.VerifyPKCS1v15(pub, crypto.SHA256, d[:], sig) != nil {
			return errors.New("bad RS256 signature")
		}
	case *ecdsa.PublicKey:
		if header["alg"] != "ES256" || len(sig) != 64 ||
			!ecdsa.Verify(pub, d[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return errors.New("bad ES256 signature (JWS wants R || S)")
		}
	}
	idp.mu.Lock()
	idp.header, idp.claims = header, claims
	idp.granted++
	idp.mu.Unlock()
	return nil
}

func (idp *jwtBearerIdP) grants() int {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	return idp.granted
}

func (idp *jwtBearerIdP) last() (header, claims map[string]any) {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	return idp.header, idp.claims
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Kafka 4.1's JwtBearerJwtRetriever (KIP-1139): the login signs an
// assertion with the client's private key (RS256 with an RSA key in
// PKCS#8, ES256 with an EC key in SEC 1) and trades it for a token. The
// assertion's claims are the configured sub, iss and aud, then the
// template file's (which win), then iat, exp (300 s on), nbf (60 s back)
// and, when asked, a jti; its header has the template's kid, alg and
// typ. A pre-made assertion file is sent as it is.
func TestJWTBearerLogin(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	rsaPEM := writeFile(t, dir, "rsa.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	template := writeFile(t, dir, "template.json", []byte(`{"header": {"kid": "client-key-1"}, "payload": {"aud": "https://idp/token", "tenant": "acme"}}`))
	idp := newJWTBearerIdP(t, &rsaKey.PublicKey)
	base := map[string]string{
		"sasl.login.callback.handler.class":            OAuthLoginHandler,
		"sasl.oauthbearer.jwt.retriever.class":         jwtRetrieverJWTBearer,
		"sasl.oauthbearer.token.endpoint.url":          idp.URL + "/token",
		"sasl.oauthbearer.assertion.private.key.file":  rsaPEM,
		"sasl.oauthbearer.assertion.template.file":     template,
		"sasl.oauthbearer.assertion.claim.sub":         "svc-orders",
		"sasl.oauthbearer.assertion.claim.iss":         "svc-orders",
		"sasl.oauthbearer.assertion.claim.aud":         "overridden by the template",
		"sasl.oauthbearer.assertion.claim.jti.include": "true",
	}
	login, err := NewOAuthBearerLogin(nil, settings(base))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Unix()
	if tok, err := login.Token(ctx); err != nil || tok != "granted.access.token" {
		t.Fatalf("token: %q %v", tok, err)
	}
	header, claims := idp.last()
	if header["kid"] != "client-key-1" || header["typ"] != "JWT" || header["alg"] != "RS256" {
		t.Errorf("header %v", header)
	}
	iat, _ := claims["iat"].(float64)
	if int64(iat) < before-1 || claims["exp"] != iat+300 || claims["nbf"] != iat-60 {
		t.Errorf("iat %v exp %v nbf %v, want now, +300, -60", claims["iat"], claims["exp"], claims["nbf"])
	}
	if claims["sub"] != "svc-orders" || claims["iss"] != "svc-orders" || claims["aud"] != "https://idp/token" || claims["tenant"] != "acme" {
		t.Errorf("claims %v", claims)
	}
	if jti, _ := claims["jti"].(string); len(jti) != 36 {
		t.Errorf("jti %q, want a UUID", jti)
	}
	if tok, _ := login.Token(ctx); tok != "granted.access.token" || idp.grants() != 1 {
		t.Errorf("the token was not reused: %d grants", idp.grants())
	}

	// ES256 with a SEC 1 key, the claims' lifetimes set, no jti.
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalECPrivateKey(ecKey)
	ecPEM := writeFile(t, dir, "ec.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}))
	ecIdP := newJWTBearerIdP(t, &ecKey.PublicKey)
	es := settings(map[string]string{
		"sasl.oauthbearer.jwt.retriever.class":         jwtRetrieverJWTBearer,
		"sasl.oauthbearer.token.endpoint.url":          ecIdP.URL,
		"sasl.oauthbearer.assertion.algorithm":         "es256",
		"sasl.oauthbearer.assertion.private.key.file":  ecPEM,
		"sasl.oauthbearer.assertion.claim.exp.seconds": "30",
		"sasl.oauthbearer.assertion.claim.nbf.seconds": "0",
	})
	if login, err = NewOAuthBearerLogin(nil, es); err != nil {
		t.Fatal(err)
	}
	if _, err := login.Token(ctx); err != nil {
		t.Fatalf("ES256: %v", err)
	}
	_, claims = ecIdP.last()
	if iat, _ := claims["iat"].(float64); claims["exp"] != iat+30 || claims["nbf"] != iat || claims["jti"] != nil {
		t.Errorf("ES256 claims %v", claims)
	}

	// A pre-made assertion, sent as it is.
	pre, err := (&Assertion{Algorithm: "RS256", PrivateKeyFile: rsaPEM, Subject: "pre-made", ExpSeconds: 60}).Create(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, "assertion.jwt", []byte(pre+"\n"))
	fromFile := map[string]string{"sasl.oauthbearer.assertion.file": file}
	for k, v := range base {
		fromFile[k] = v
	}
	fromFile["sasl.oauthbearer.assertion.private.key.file"] = filepath.Join(dir, "ignored.pem")
	if login, err = NewOAuthBearerLogin(nil, settings(fromFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := login.Token(ctx); err != nil {
		t.Fatal(err)
	}
	if _, claims := idp.last(); claims["sub"] != "pre-made" || claims["tenant"] != nil {
		t.Errorf("the assertion file's claims: %v", claims)
	}

	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		m[k] = v
		return m
	}
	encrypted, err := os.ReadFile("../tlsconf/testdata/encrypted-pkcs8-aes256.pem")
	if err != nil {
		t.Fatal(err)
	}
	encPath := writeFile(t, dir, "encrypted.pem", encrypted)
	for what, tc := range map[string]struct {
		settings map[string]string
		want     string
	}{
		"no private key":                        {with("sasl.oauthbearer.assertion.private.key.file", ""), "needs sasl.oauthbearer.assertion.private.key.file"},
		"a missing private key":                 {with("sasl.oauthbearer.assertion.private.key.file", filepath.Join(dir, "none.pem")), "no such file"},
		"HS256":                                 {with("sasl.oauthbearer.assertion.algorithm", "HS256"), "want RS256 or ES256"},
		"ES256 with an RSA key":                 {with("sasl.oauthbearer.assertion.algorithm", "ES256"), "cannot sign ES256"},
		"an encrypted key":                      {with("sasl.oauthbearer.assertion.private.key.file", encPath), "needs sasl.oauthbearer.assertion.private.key.passphrase"},
		"a bad template":                        {with("sasl.oauthbearer.assertion.template.file", rsaPEM), "the assertion template"},
		"a negative lifetime":                   {with("sasl.oauthbearer.assertion.claim.exp.seconds", "-5"), "claim.exp.seconds=-5"},
		"jti maybe":                             {with("sasl.oauthbearer.assertion.claim.jti.include", "maybe"), "want true or false"},
		"an assertion file that is not a JWT":   {with("sasl.oauthbearer.assertion.file", rsaPEM), "does not hold a JWT"},
		"a file: endpoint":                      {with("sasl.oauthbearer.token.endpoint.url", "file:/tmp/token"), "needs an https:// or http://"},
		"a custom retriever":                    {with("sasl.oauthbearer.jwt.retriever.class", "com.example.Retriever"), "custom JWT retrievers are not supported"},
		"the file retriever, an https endpoint": {with("sasl.oauthbearer.jwt.retriever.class", jwtRetrieverFile), "needs a file:"},
	} {
		if _, err := NewOAuthBearerLogin(nil, settings(tc.settings)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, tc.want)
		}
	}
	// The encrypted key with its passphrase: tlsconf's test key is EC.
	encIdP := newJWTBearerIdP(t, nil)
	m := with("sasl.oauthbearer.assertion.private.key.file", encPath)
	m["sasl.oauthbearer.assertion.private.key.passphrase"] = "keel-key-pass"
	m["sasl.oauthbearer.assertion.algorithm"] = "ES256"
	m["sasl.oauthbearer.token.endpoint.url"] = encIdP.URL
	if login, err = NewOAuthBearerLogin(nil, settings(m)); err != nil {
		t.Fatalf("an encrypted key with its passphrase: %v", err)
	}
	if _, err := login.Token(ctx); err != nil {
		t.Fatal(err)
	}
}

// Kafka 4.1's client credentials settings win over the module's options
// (which stay for compatibility): sasl.oauthbearer.client.credentials.*
// over clientId and clientSecret, sasl.oauthbearer.scope over scope; and
// sasl.oauthbearer.header.urlencode (Kafka 3.9) encodes them.
func TestClientCredentialsSettingsWinOverJAAS(t *testing.T) {
	type request struct{ id, secret, scope string }
	var mu sync.Mutex
	var got request
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got.id, got.secret, _ = r.BasicAuth()
		got.scope = r.FormValue("scope")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "a.b.c", "expires_in": 60})
	}))
	defer idp.Close()
	sent := func(set map[string]string) request {
		t.Helper()
		options := map[string]string{"clientId": "jaas-id", "clientSecret": "jaas-secret", "scope": "jaas-scope"}
		login, err := NewOAuthBearerLogin(options, settings(set))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := login.Token(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	if r := sent(map[string]string{
		"sasl.oauthbearer.token.endpoint.url":               idp.URL,
		"sasl.oauthbearer.client.credentials.client.id":     "cfg-id",
		"sasl.oauthbearer.client.credentials.client.secret": "cfg-secret",
		"sasl.oauthbearer.scope":                            "cfg-scope",
	}); r != (request{"cfg-id", "cfg-secret", "cfg-scope"}) {
		t.Errorf("sent %+v, want the settings'", r)
	}
	if r := sent(map[string]string{
		"sasl.oauthbearer.token.endpoint.url":  idp.URL,
		"sasl.oauthbearer.jwt.retriever.class": jwtRetrieverClientCredentials,
	}); r != (request{"jaas-id", "jaas-secret", "jaas-scope"}) {
		t.Errorf("sent %+v, want the module's options", r)
	}
	// KIP-1025: the id and secret URL-encoded in the header, as Java's
	// URLEncoder does (a space is "+", "*" stays, "~" and "+" are encoded).
	if r := sent(map[string]string{
		"sasl.oauthbearer.token.endpoint.url":               idp.URL,
		"sasl.oauthbearer.header.urlencode":                 "true",
		"sasl.oauthbearer.client.credentials.client.id":     "orders app",
		"sasl.oauthbearer.client.credentials.client.secret": "s3cr:t*~+é",
	}); r != (request{"orders+app", "s3cr%3At*%7E%2B%C3%A9", "jaas-scope"}) {
		t.Errorf("sent %+v with sasl.oauthbearer.header.urlencode=true", r)
	}
	if _, err := NewOAuthBearerLogin(map[string]string{"clientId": "a", "clientSecret": "b"}, settings(map[string]string{
		"sasl.oauthbearer.token.endpoint.url": idp.URL, "sasl.oauthbearer.header.urlencode": "yes"})); err == nil || !strings.Contains(err.Error(), "want true or false") {
		t.Errorf("sasl.oauthbearer.header.urlencode=yes: %v", err)
	}
}
