package integration

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// oauthIdP is an identity provider for the test: an RSA key whose JWKS it
// serves over HTTP (or HTTPS, with a certificate from a test CA), and the
// tokens it signs (RS256).
type oauthIdP struct {
	t      *testing.T
	key    *rsa.PrivateKey
	kid    atomic.Value // string
	reads  atomic.Int64 // of the JWKS
	grants atomic.Int64 // tokens given at the token endpoint
	// unavailable is how many token requests from now on are answered
	// 503, as an identity provider briefly down.
	unavailable atomic.Int64
	server      *httptest.Server
	// clientKey verifies the assertions of the JWT bearer grant (RS256):
	// the token is for the assertion's subject.
	clientKey atomic.Pointer[rsa.PublicKey]
}

// newOAuthIdP starts the identity provider: over HTTPS with a certificate
// for 127.0.0.1 from certs' CA, over HTTP when certs is nil.
func newOAuthIdP(t *testing.T, certs *testCerts) *oauthIdP {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &oauthIdP{t: t, key: key}
	p.kid.Store("key-1")
	p.server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" && p.unavailable.Add(-1) >= 0 {
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/token" && r.FormValue("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			sub, err := p.checkAssertion(r.FormValue("assertion"))
			if err != nil {
				http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
				return
			}
			p.grants.Add(1)
			json.NewEncoder(w).Encode(map[string]any{"access_token": p.token(key, p.kid.Load().(string), oauthClaims(sub, nil)),
				"token_type": "Bearer", "expires_in": 3600})
			return
		}
		if r.URL.Path == "/token" { // the client credentials grant: a token for the client id
			id, secret, ok := r.BasicAuth()
			if r.FormValue("grant_type") != "client_credentials" || !ok || secret != id+"-secret" {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			p.grants.Add(1)
			json.NewEncoder(w).Encode(map[string]any{"access_token": p.token(key, p.kid.Load().(string), oauthClaims(id, nil)),
				"token_type": "Bearer", "expires_in": 3600})
			return
		}
		p.reads.Add(1)
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]any{{
			"kty": "RSA", "use": "sig", "alg": "RS256", "kid": p.kid.Load().(string),
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	if certs == nil {
		p.server.Start()
	} else {
		serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		cert := issueCert(t, certs.ca, certs.caKey, &serverKey.PublicKey, &x509.Certificate{
			Subject: pkix.Name{CommonName: "idp"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		p.server.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: serverKey}}}
		p.server.StartTLS()
	}
	t.Cleanup(p.server.Close)
	return p
}

// checkAssertion verifies a JWT bearer grant's assertion with the
// client's key and returns its subject.
func (p *oauthIdP) checkAssertion(assertion string) (string, error) {
	parts := strings.Split(assertion, ".")
	clientKey := p.clientKey.Load()
	if len(parts) != 3 || clientKey == nil {
		return "", fmt.Errorf("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", err
	}
	d := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(clientKey, crypto.SHA256, d[:], sig); err != nil {
		return "", err
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var claims struct {
		Sub string  `json:"sub"`
		Exp float64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Sub == "" || claims.Exp < float64(time.Now().Unix()) {
		return "", fmt.Errorf("claims %s", payload)
	}
	return claims.Sub, nil
}

// token is a JWT of claims, signed with key under kid ("alg":"none" and
// no signature when key is nil).
func (p *oauthIdP) token(key *rsa.PrivateKey, kid string, claims map[string]any) string {
	header := map[string]any{"alg": "none"}
	if key != nil {
		header = map[string]any{"alg": "RS256", "typ": "JWT", "kid": kid}
	}
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	if key == nil {
		return input + "."
	}
	d := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	if err != nil {
		p.t.Fatal(err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// claims are a service's token claims, valid for an hour, with changes
// (a nil value removes a claim).
func oauthClaims(sub string, changes map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"sub": sub, "iss": "https://idp.test", "aud": "kafka", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "kafka"}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// TestSASLOAuthBearer: SASL/OAUTHBEARER through the real binary, with
// franz-go's OAUTHBEARER client. The SASL_PLAINTEXT listener validates
// tokens as Kafka's OAuthBearerValidatorCallbackHandler does: signed by a
// key of the identity provider's JWKS (served over HTTPS with a
// certificate of a private CA, which the listener's JAAS module trusts
// with its ssl.truststore.* options, as Kafka's JaasOptionsUtils reads
// them), with the expected issuer and audience. The SASL_SSL listener keeps Kafka's
// default, unsecured (unsigned) tokens. A service produces and consumes;
// its principal is the token's subject (its user quota throttles it, not
// another service). Refused, each logged while the broker goes on
// serving: an expired token, one signed by another key, an unsigned one
// on the JWKS listener, the wrong audience. A key rotated in at the
// identity provider is picked up on its first use. With
// connections.max.reauth.ms, a session ends when its token expires and
// franz-go re-authenticates on its connection with a new token (KIP-368).
// Keel's CLI gets a token from the token endpoint (client credentials)
// or makes an unsecured one.
func TestSASLOAuthBearer(t *testing.T) {
	certs := newTestCerts(t)
	idp := newOAuthIdP(t, certs)
	const module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
	trustIdP := fmt.Sprintf(`ssl.truststore.type="PEM" ssl.truststore.location="%s"`, certs.caPEM)
	moduleTrustingIdP := "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required " + trustIdP + ";"
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, ProcessOptions{SSL: certs.brokerSSL(), SASL: []string{
		"sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.saslp.oauthbearer.sasl.jaas.config=" + moduleTrustingIdP,
		"listener.name.saslp.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
		"sasl.oauthbearer.jwks.endpoint.url=" + idp.server.URL + "/jwks",
		"sasl.oauthbearer.expected.audience=kafka",
		"sasl.oauthbearer.expected.issuer=https://idp.test",
		"listener.name.sasls.oauthbearer.sasl.jaas.config=" + module,
		"listener.name.saslp.oauthbearer.connections.max.reauth.ms=60000",
	}})
	saslp := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLPlaintextPort)
	sasls := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLSSLPort)
	trust := &tls.Config{RootCAs: certs.pool}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	orders := idp.token(idp.key, "key-1", oauthClaims("svc-orders", nil))
	cl := newSASLClient(t, saslp, nil, oauth.Auth{Token: orders}.AsMechanism())
	adm := kadm.NewClient(cl)
	const topic, n = "oauth-orders", 500
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic as svc-orders: %v %v", err, resp.Err)
	}
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "order-%d", i)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("produce as svc-orders: %v", err)
	}
	// The unsecured listener: an unsigned token, as Kafka's
	// OAuthBearerUnsecuredLoginCallbackHandler writes one.
	unsigned := idp.token(nil, "", map[string]any{"sub": "dev", "exp": time.Now().Add(time.Hour).Unix()})
	consumer := newSASLClient(t, sasls, trust, oauth.Auth{Token: unsigned}.AsMechanism(), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume over the unsecured listener: %v", err)
		}
		got += fs.NumRecords()
	}

	// The principal is the subject: a user quota on svc-orders throttles
	// svc-orders' produces, not svc-billing's.
	user := "svc-orders"
	if alt, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}}); err != nil || alt[0].Err != nil {
		t.Fatalf("set a user quota: %v %v", err, alt)
	}
	throttled := func(token string) time.Duration {
		hook := &throttleHook{}
		p := newSASLClient(t, saslp, nil, oauth.Auth{Token: token}.AsMechanism(), kgo.DefaultProduceTopic(topic), kgo.WithHooks(hook))
		for range 3 {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 64<<10)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		return hook.max()
	}
	waitFor(t, 20*time.Second, "svc-orders throttled by its user quota", func() bool { return throttled(orders) > 0 })
	if d := throttled(idp.token(idp.key, "key-1", oauthClaims("svc-billing", nil))); d > 0 {
		t.Errorf("svc-billing was throttled %v by svc-orders' quota", d)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for what, token := range map[string]string{
		"an expired token":              idp.token(idp.key, "key-1", oauthClaims("svc-orders", map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})),
		"a token signed by another key": idp.token(other, "key-1", oauthClaims("svc-orders", nil)),
		"an unsigned token":             idp.token(nil, "", oauthClaims("svc-orders", nil)),
		"a token for another audience":  idp.token(idp.key, "key-1", oauthClaims("svc-orders", map[string]any{"aud": "billing-api"})),
		"a token without iat":           idp.token(idp.key, "key-1", oauthClaims("svc-orders", map[string]any{"iat": nil})),
	} {
		pingRefused(t, ctx, what, kgo.SeedBrokers(saslp), kgo.SASL(oauth.Auth{Token: token}.AsMechanism()))
	}
	for _, reason := range []string{"SASL authentication failed", "expired at", "signature (kid", `signature algorithm \"none\"`, "audience", "no iat claim"} {
		waitFor(t, 5*time.Second, "a refusal logged with "+reason, func() bool { return strings.Contains(c.Log(1), reason) })
	}

	// Re-authentication (KIP-368): on the JWKS listener a session lasts
	// until its token expires (connections.max.reauth.ms is a minute), and
	// franz-go re-authenticates on the connection with a fresh token.
	var minted atomic.Int64
	fresh := oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		minted.Add(1)
		return oauth.Auth{Token: idp.token(idp.key, "key-1", oauthClaims("svc-orders", map[string]any{"exp": time.Now().Add(2 * time.Second).Unix()}))}, nil
	})
	renewing := newSASLClient(t, saslp, nil, fresh)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := renewing.Ping(ctx); err != nil {
			t.Fatalf("a client whose 2 s tokens it renews: %v", err)
		}
	}
	if n := minted.Load(); n < 4 {
		t.Errorf("%d tokens over 5 s of 2 s sessions: the sessions were not bounded by the tokens' expiry", n)
	}

	// Keel's CLI: a token from the identity provider's token endpoint
	// (client credentials), and Kafka's unsecured login on the unsecured
	// listener.
	dir := t.TempDir()
	clientKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	idp.clientKey.Store(&clientKey.PublicKey)
	clientDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	clientKeyPEM := writePEM(t, dir, "svc-jwt.key", pemBlock("PRIVATE KEY", clientDER))
	cliProps := map[string]string{
		"secured.properties": strings.Join([]string{
			"security.protocol=SASL_PLAINTEXT",
			"sasl.mechanism=OAUTHBEARER",
			"sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
			"sasl.oauthbearer.token.endpoint.url=" + idp.server.URL + "/token",
			`sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="svc-reports" clientSecret="svc-reports-secret" scope="kafka" ` + trustIdP + ";",
		}, "\n"),
		// Kafka 4.1's JWT bearer grant (KIP-1139): the CLI signs an
		// assertion with its private key.
		"jwtbearer.properties": strings.Join([]string{
			"security.protocol=SASL_PLAINTEXT",
			"sasl.mechanism=OAUTHBEARER",
			"sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
			"sasl.oauthbearer.jwt.retriever.class=org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
			"sasl.oauthbearer.token.endpoint.url=" + idp.server.URL + "/token",
			"sasl.oauthbearer.assertion.private.key.file=" + clientKeyPEM,
			"sasl.oauthbearer.assertion.claim.sub=svc-jwt",
			"sasl.oauthbearer.assertion.claim.aud=" + idp.server.URL + "/token",
			"sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required " + trustIdP + ";",
		}, "\n"),
		"unsecured.properties": strings.Join([]string{
			"security.protocol=SASL_SSL",
			"sasl.mechanism=OAUTHBEARER",
			`sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="dev";`,
			"ssl.truststore.type=PEM",
			"ssl.truststore.location=" + certs.caPEM,
		}, "\n"),
	}
	for file, bootstrap := range map[string]string{"secured.properties": saslp, "jwtbearer.properties": saslp, "unsecured.properties": sasls} {
		props := writePEM(t, dir, file, []byte(cliProps[file]+"\n"))
		out, err := exec.CommandContext(ctx, c.bin, "consume", "--bootstrap-server", bootstrap, "--command-config", props,
			"--topic", topic, "--from-beginning", "--max-messages", "5", "--timeout-ms", "20000").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Processed a total of 5 messages") {
			t.Fatalf("keel consume with %s: %v\n%s", file, err, out)
		}
	}
	// The identity provider answers 503 twice: the login retries it
	// (sasl.login.retry.backoff.ms) within one connection's login, and
	// warns of each retry on stderr. A
	// sasl.login.* value out of Kafka's range is refused, named.
	retried := writePEM(t, dir, "retried.properties", []byte(cliProps["secured.properties"]+"\nsasl.login.retry.backoff.ms=50\n"))
	idp.unavailable.Store(2)
	if out, err := exec.CommandContext(ctx, c.bin, "consume", "--bootstrap-server", saslp, "--command-config", retried,
		"--topic", topic, "--from-beginning", "--max-messages", "5", "--timeout-ms", "20000").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "Processed a total of 5 messages") || idp.unavailable.Load() >= 0 ||
		strings.Count(string(out), "warning: an OAUTHBEARER login's request failed; retrying") != 2 {
		t.Fatalf("keel consume with the identity provider down for two requests: %v (%d requests left to refuse)\n%s", err, idp.unavailable.Load(), out)
	}
	idp.unavailable.Store(0)
	badFactor := writePEM(t, dir, "badfactor.properties", []byte(cliProps["secured.properties"]+"\nsasl.login.refresh.window.factor=2\n"))
	if out, err := exec.CommandContext(ctx, c.bin, "consume", "--bootstrap-server", saslp, "--command-config", badFactor,
		"--topic", topic, "--max-messages", "1", "--timeout-ms", "5000").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "sasl.login.refresh.window.factor=2") {
		t.Fatalf("keel consume with sasl.login.refresh.window.factor=2: %v\n%s", err, out)
	}
	for what, tc := range map[string]struct{ from, to, want string }{
		"a wrong client secret": {"svc-reports-secret", "guess", "invalid_client"},
		// The system's roots do not know the identity provider's CA.
		"no truststore for the identity provider": {" " + trustIdP, "", "certificate"},
	} {
		// Retried for half a second, not the default 10 s.
		// The login retries a failed TLS handshake as Kafka's does, here
		// for half a second rather than the default 10 s.
		props := writePEM(t, dir, "refused.properties", []byte(strings.Replace(cliProps["secured.properties"], tc.from, tc.to, 1)+"\nsasl.login.retry.backoff.max.ms=500\n"))
		if out, err := exec.CommandContext(ctx, c.bin, "consume", "--bootstrap-server", saslp, "--command-config", props,
			"--topic", topic, "--from-beginning", "--max-messages", "1", "--timeout-ms", "5000").CombinedOutput(); err == nil || !strings.Contains(string(out), tc.want) {
			t.Fatalf("keel consume with %s: %v\n%s", what, err, out)
		}
	}

	// The identity provider rotates its key: a token under the new kid
	// makes the broker read the JWKS again.
	reads := idp.reads.Load()
	idp.kid.Store("key-2")
	rotated := newSASLClient(t, saslp, nil, oauth.Auth{Token: idp.token(idp.key, "key-2", oauthClaims("svc-orders", nil))}.AsMechanism())
	if err := rotated.Ping(ctx); err != nil {
		t.Fatalf("a token under the rotated kid: %v", err)
	}
	if idp.reads.Load() <= reads {
		t.Error("the JWKS was not read again for the new kid")
	}
}
