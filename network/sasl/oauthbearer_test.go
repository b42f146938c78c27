package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseOAuthBearerInitialResponse(t *testing.T) {
	r, err := ParseOAuthBearerInitialResponse([]byte("n,a=user=2Cone=3D,\x01auth=Bearer abc.def-_~+/=\x01traceId=42\x01\x01"))
	if err != nil || r.AuthzID != "user,one=" || r.Token != "abc.def-_~+/=" || r.Extensions["traceId"] != "42" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := ParseOAuthBearerInitialResponse([]byte("n,,\x01auth=bearer   t\x01\x01")); err != nil || r.Token != "t" || r.AuthzID != "" {
		t.Fatalf("lower-case scheme: %+v %v", r, err)
	}
	for _, bad := range []string{
		"",
		"y,,\x01auth=Bearer t\x01\x01",       // channel binding flag
		"n,,\x01auth=Bearer t\x01",           // no final %x01
		"n,,\x01\x01",                        // no auth
		"n,,\x01auth=Basic dXNlcg==\x01\x01", // not Bearer
		"n,,\x01auth=Bearer t t\x01\x01",     // two tokens
		"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
		"n,,\x01auth=Bearer t\x01k1=v\x01\x01", // key not letters
		"n,,\x01auth=Bearer t\x01k=\x01\x01",   // empty value
		"n,,\x01auth=Bearer t\x01\x01\x01",
		"n,a=,\x01auth=Bearer t\x01\x01",
		"n,a=x=2,\x01auth=Bearer t\x01\x01",
		"n,,\x01auth=Bearer t\x01k=v\x00\x01\x01",
		"n,,\x01auth=Bearer " + strings.Repeat("t", maxOAuthBearerMessage) + "\x01\x01",
	} {
		if r, err := ParseOAuthBearerInitialResponse([]byte(bad)); !errors.Is(err, ErrInvalidOAuthBearerMessage) {
			t.Errorf("%q: %+v, %v", bad, r, err)
		}
	}
}

// unsecuredToken is an "alg":"none" JWS of claims, as Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler writes one.
func unsecuredToken(t testing.TB, claims map[string]any) string {
	return signedToken(t, map[string]any{"alg": "none"}, claims, nil)
}

// signedToken is a JWS of header and claims signed by sign (nil: no
// signature).
func signedToken(t testing.TB, header, claims map[string]any, sign func(input string) []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	var sig []byte
	if sign != nil {
		sig = sign(input)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestUnsecuredValidator(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	sec := func(d time.Duration) float64 { return float64(now.Add(d).UnixMilli()) / 1000 }
	v, err := UnsecuredValidatorFromJAAS(JAASConfig{LoginModule: OAuthBearerLoginModule, Options: map[string]string{
		"unsecuredValidatorRequiredScope": "kafka", "unsecuredValidatorAllowableClockSkewMs": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := v.Validate(unsecuredToken(t, map[string]any{"sub": "alice", "exp": sec(time.Hour), "iat": sec(0), "scope": "read kafka"}), now)
	if err != nil || tok.Principal != "alice" || !tok.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("%+v %v", tok, err)
	}
	if _, err := v.Validate(unsecuredToken(t, map[string]any{"sub": "alice", "exp": sec(-500 * time.Millisecond), "scope": []string{"kafka"}}), now); err != nil {
		t.Fatalf("expired within the clock skew: %v", err)
	}
	for name, tc := range map[string]struct {
		token  string
		status string
	}{
		"expired":        {unsecuredToken(t, map[string]any{"sub": "alice", "exp": sec(-2 * time.Second), "scope": "kafka"}), "invalid_token"},
		"no exp":         {unsecuredToken(t, map[string]any{"sub": "alice", "scope": "kafka"}), "invalid_token"},
		"exp not a date": {unsecuredToken(t, map[string]any{"sub": "alice", "exp": "soon", "scope": "kafka"}), "invalid_token"},
		"no sub":         {unsecuredToken(t, map[string]any{"exp": sec(time.Hour), "scope": "kafka"}), "invalid_token"},
		"sub not string": {unsecuredToken(t, map[string]any{"sub": 7, "exp": sec(time.Hour), "scope": "kafka"}), "invalid_token"},
		"future iat":     {unsecuredToken(t, map[string]any{"sub": "alice", "exp": sec(time.Hour), "iat": sec(time.Minute), "scope": "kafka"}), "invalid_token"},
		"nbf not reached": {unsecuredToken(t, map[string]any{"sub": "alice", "exp": sec(time.Hour), "nbf": sec(time.Minute), "scope": "kafka"}),
			"invalid_token"},
		"scope lacking": {unsecuredToken(t, map[string]any{"sub": "alice", "exp": sec(time.Hour), "scope": "read"}), "insufficient_scope"},
		"signed": {signedToken(t, map[string]any{"alg": "HS256"}, map[string]any{"sub": "alice", "exp": sec(time.Hour), "scope": "kafka"},
			func(string) []byte { return []byte("sig") }), "invalid_token"},
		"not a JWS":   {"abc", "invalid_token"},
		"not base64":  {"a!b.c.", "invalid_token"},
		"not objects": {base64.RawURLEncoding.EncodeToString([]byte("[1]")) + ".e30.", "invalid_token"},
	} {
		_, err := v.Validate(tc.token, now)
		var invalid *InvalidTokenError
		if !errors.As(err, &invalid) || invalid.Status != tc.status {
			t.Errorf("%s: %v, want %s", name, err, tc.status)
			continue
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(ClientMessage(MechanismOAuthBearer, err)), &m); err != nil || m["status"] != tc.status {
			t.Errorf("%s: client message %q", name, ClientMessage(MechanismOAuthBearer, err))
		}
	}
	if _, err := UnsecuredValidatorFromJAAS(JAASConfig{Options: map[string]string{"unsecuredValidatorAllowableClockSkewMs": "-1"}}); err == nil {
		t.Error("a negative clock skew was accepted")
	}
}

func TestOAuthBearerServer(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := &UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}
	s := OAuthBearerServer{Validator: v, Now: func() time.Time { return now }}
	token := unsecuredToken(t, map[string]any{"sub": "alice", "exp": now.Add(time.Hour).Unix()})
	if tok, err := s.Next([]byte("n,,\x01auth=Bearer " + token + "\x01\x01")); err != nil || tok.Principal != "alice" || !tok.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("%+v %v", tok, err)
	}
	if tok, err := s.Next([]byte("n,a=alice,\x01auth=Bearer " + token + "\x01\x01")); err != nil || tok.Principal != "alice" {
		t.Fatalf("authzid alice: %+v %v", tok, err)
	}
	if _, err := s.Next([]byte("n,a=bob,\x01auth=Bearer " + token + "\x01\x01")); !errors.Is(err, ErrAuthorizationIDMismatch) {
		t.Fatalf("authzid bob: %v", err)
	}
	if _, err := s.Next([]byte("n,,\x01auth=Bearer nope\x01\x01")); err == nil {
		t.Fatal("a token that is not a JWS was accepted")
	}
}

// testIdP is an identity provider's keys: it signs tokens and serves its
// JWKS.
type testIdP struct {
	t      testing.TB
	rsa    *rsa.PrivateKey
	ec     *ecdsa.PrivateKey
	ed     ed25519.PrivateKey
	served atomic.Int64
	jwks   atomic.Value // []byte
}

func newTestIdP(t testing.TB) *testIdP {
	p := &testIdP{t: t}
	var err error
	if p.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if p.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if _, p.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	p.publish("rsa-1", "ec-1", "ed-1")
	return p
}

// publish serves the JWKS with the keys under these kids.
func (p *testIdP) publish(rsaKid, ecKid, edKid string) {
	b64 := base64.RawURLEncoding.EncodeToString
	ecPoint, _ := p.ec.PublicKey.Bytes() // 0x04 || x || y
	keys := []map[string]any{
		{"kty": "RSA", "kid": rsaKid, "use": "sig", "n": b64(p.rsa.N.Bytes()), "e": b64(big.NewInt(int64(p.rsa.E)).Bytes())},
		{"kty": "EC", "kid": ecKid, "crv": "P-256", "x": b64(ecPoint[1:33]), "y": b64(ecPoint[33:])},
		{"kty": "OKP", "kid": edKid, "crv": "Ed25519", "x": b64(p.ed.Public().(ed25519.PublicKey))},
		{"kty": "RSA", "kid": "enc", "use": "enc", "n": b64(p.rsa.N.Bytes()), "e": "AQAB"},
		{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	p.jwks.Store(b)
}

func (p *testIdP) fetch(context.Context) ([]byte, error) {
	p.served.Add(1)
	return p.jwks.Load().([]byte), nil
}

// token signs claims with alg under kid.
func (p *testIdP) token(alg, kid string, claims map[string]any) string {
	sign := func(input string) []byte {
		h := jwsHashes[alg]
		var sig []byte
		var err error
		switch alg[:2] {
		case "RS":
			sig, err = rsa.SignPKCS1v15(rand.Reader, p.rsa, h, digest(h, input))
		case "PS":
			sig, err = rsa.SignPSS(rand.Reader, p.rsa, h, digest(h, input), &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		case "ES":
			var r, s *big.Int
			r, s, err = ecdsa.Sign(rand.Reader, p.ec, digest(h, input))
			sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		case "Ed":
			sig = ed25519.Sign(p.ed, []byte(input))
		}
		if err != nil {
			p.t.Fatal(err)
		}
		return sig
	}
	header := map[string]any{"alg": alg, "typ": "JWT"}
	if kid != "" {
		header["kid"] = kid
	}
	return signedToken(p.t, header, claims, sign)
}

func TestJWTValidator(t *testing.T) {
	idp := newTestIdP(t)
	now := time.Unix(1_800_000_000, 0)
	cache := &JWKSCache{Fetch: idp.fetch, Refresh: time.Hour, Backoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second, Timeout: time.Second}
	v := &JWTValidator{Keys: cache, SubClaim: "sub", ScopeClaim: "scope", Audience: []string{"kafka"}, Issuer: "https://idp", ClockSkew: 30 * time.Second}
	claims := func(mod map[string]any) map[string]any {
		c := map[string]any{"sub": "svc-orders", "iss": "https://idp", "aud": []string{"other", "kafka"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "a b"}
		for k, val := range mod {
			if val == nil {
				delete(c, k)
			} else {
				c[k] = val
			}
		}
		return c
	}
	for _, tc := range []struct{ alg, kid string }{
		{"RS256", "rsa-1"}, {"RS512", "rsa-1"}, {"PS256", "rsa-1"}, {"ES256", "ec-1"}, {"EdDSA", "ed-1"}, {"ES256", ""},
	} {
		tok, err := v.Validate(idp.token(tc.alg, tc.kid, claims(nil)), now)
		if err != nil || tok.Principal != "svc-orders" || strings.Join(tok.Scope, " ") != "a b" {
			t.Errorf("%s kid %q: %+v %v", tc.alg, tc.kid, tok, err)
		}
	}
	if n := idp.served.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want once", n)
	}
	for name, token := range map[string]string{
		"expired":        idp.token("RS256", "rsa-1", claims(map[string]any{"exp": now.Add(-time.Minute).Unix()})),
		"no iat":         idp.token("RS256", "rsa-1", claims(map[string]any{"iat": nil})),
		"no sub":         idp.token("RS256", "rsa-1", claims(map[string]any{"sub": nil})),
		"wrong issuer":   idp.token("RS256", "rsa-1", claims(map[string]any{"iss": "https://evil"})),
		"wrong aud":      idp.token("RS256", "rsa-1", claims(map[string]any{"aud": "other"})),
		"none":           unsecuredToken(t, claims(nil)),
		"HS256":          signedToken(t, map[string]any{"alg": "HS256", "kid": "hmac"}, claims(nil), func(string) []byte { return []byte("x") }),
		"key mismatch":   idp.token("ES256", "rsa-1", claims(nil)),
		"bad signature":  swapSignature(idp.token("RS256", "rsa-1", claims(map[string]any{"sub": "admin"})), idp.token("RS256", "rsa-1", claims(nil))),
		"tampered":       tamper(idp.token("EdDSA", "ed-1", claims(nil))),
		"encryption key": idp.token("RS256", "enc", claims(nil)),
	} {
		var invalid *InvalidTokenError
		if _, err := v.Validate(token, now); !errors.As(err, &invalid) {
			t.Errorf("%s: %v", name, err)
		}
	}

	// A key rotated in: its kid is unknown, so the cache reads the JWKS
	// again, once the backoff has passed since the last read.
	idp.publish("rsa-2", "ec-1", "ed-1")
	rotated := idp.token("RS256", "rsa-2", claims(nil))
	served := idp.served.Load()
	if _, err := v.Validate(rotated, now.Add(time.Minute)); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if idp.served.Load() != served+1 {
		t.Errorf("unknown kid: %d fetches, want 1", idp.served.Load()-served)
	}
	// Unknown kids within the backoff do not fetch again.
	unknown := idp.token("RS256", "rsa-9", claims(nil))
	for range 5 {
		v.Validate(unknown, now.Add(time.Minute+10*time.Millisecond))
	}
	if idp.served.Load() != served+1 {
		t.Errorf("unknown kids within the backoff fetched %d times", idp.served.Load()-served-1)
	}

	// A JWKS endpoint that fails keeps the keys held and backs off.
	failing := &JWKSCache{Refresh: time.Hour, Backoff: time.Second, MaxBackoff: 4 * time.Second, Timeout: time.Second}
	var calls int
	failing.Fetch = func(context.Context) ([]byte, error) { calls++; return nil, errors.New("down") }
	fv := &JWTValidator{Keys: failing, SubClaim: "sub", ClockSkew: time.Second}
	for i := range 10 {
		if _, err := fv.Validate(idp.token("RS256", "rsa-2", claims(nil)), now.Add(time.Duration(i)*100*time.Millisecond)); err == nil {
			t.Fatal("validated without keys")
		}
	}
	if calls != 1 {
		t.Errorf("a failing endpoint was read %d times within its backoff", calls)
	}
}

// swapSignature is token's header and claims with other's signature.
func swapSignature(token, other string) string {
	return token[:strings.LastIndexByte(token, '.')] + other[strings.LastIndexByte(other, '.'):]
}

// tamper flips a character of a token's payload.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	b := []byte(parts[1])
	b[5] ^= 1
	return parts[0] + "." + string(b) + "." + parts[2]
}

// Keys are checked as they are read: a short RSA key, an EC point off its
// curve and unknown types are skipped, not trusted.
func TestParseJWKS(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	set, _ := json.Marshal(map[string]any{"keys": []map[string]any{
		{"kty": "RSA", "kid": "small", "n": b64(small.N.Bytes()), "e": "AQAB"},
		{"kty": "EC", "kid": "off", "crv": "P-256", "x": b64(make([]byte, 32)), "y": b64(append(make([]byte, 31), 1))},
		{"kty": "EC", "kid": "curve", "crv": "secp256k1", "x": "AA", "y": "AA"},
		{"kty": "XYZ", "kid": "type"},
	}})
	keys, skipped, err := ParseJWKS(set)
	if err != nil || len(keys) != 0 || len(skipped) != 4 {
		t.Fatalf("keys %v skipped %v err %v", keys, skipped, err)
	}
	if _, _, err := ParseJWKS([]byte("not json")); err == nil {
		t.Fatal("not JSON parsed")
	}
	var _ crypto.PublicKey = ed25519.PublicKey(nil)
}

// BenchmarkJWTValidate measures validating one token, the broker's work
// per OAUTHBEARER authentication (JWKS cached): signature, claims. The
// unsecured validator is the baseline (parsing and claims alone).
func BenchmarkJWTValidate(b *testing.B) {
	idp := newTestIdP(b)
	now := time.Unix(1_800_000_000, 0)
	cache := &JWKSCache{Fetch: idp.fetch, Refresh: time.Hour, Backoff: time.Second, MaxBackoff: time.Second, Timeout: time.Second}
	v := &JWTValidator{Keys: cache, SubClaim: "sub", ScopeClaim: "scope", ClockSkew: 30 * time.Second}
	claims := map[string]any{"sub": "svc-orders", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "kafka"}
	for _, tc := range []struct{ alg, kid string }{{"RS256", "rsa-1"}, {"ES256", "ec-1"}, {"EdDSA", "ed-1"}, {"none", ""}} {
		b.Run(tc.alg, func(b *testing.B) {
			var validator OAuthBearerValidator = v
			var token string
			if tc.alg == "none" {
				validator = &UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}
				token = signedToken(b, map[string]any{"alg": "none"}, claims, nil)
			} else {
				token = idp.token(tc.alg, tc.kid, claims)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := validator.Validate(token, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A JWKS read does not hold the cache: while a refresh is under way,
// authentications whose kid the cache holds go on with the keys held, and
// one whose kid is unknown waits for that read instead of starting another.
func TestJWKSCacheReadsOutsideTheLock(t *testing.T) {
	idp := newTestIdP(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var blocking atomic.Bool
	cache := &JWKSCache{Refresh: time.Hour, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, Timeout: 10 * time.Second,
		Fetch: func(ctx context.Context) ([]byte, error) {
			if blocking.Load() {
				entered <- struct{}{}
				<-release
			}
			return idp.fetch(ctx)
		}}
	now := time.Now()
	if _, err := cache.Key("rsa-1", "RS256", now); err != nil {
		t.Fatal(err)
	}
	blocking.Store(true)
	later := now.Add(2 * time.Hour) // the keys are stale: the next use refreshes them
	refreshed := make(chan error, 1)
	go func() { _, err := cache.Key("rsa-1", "RS256", later); refreshed <- err }()
	<-entered
	start := time.Now()
	if _, err := cache.Key("ec-1", "ES256", later); err != nil || time.Since(start) > time.Second {
		t.Errorf("a held kid during a refresh: %v after %v", err, time.Since(start))
	}
	rotated := make(chan error, 1)
	go func() { _, err := cache.Key("rsa-2", "RS256", later); rotated <- err }()
	select {
	case err := <-rotated:
		t.Fatalf("an unknown kid did not wait for the read under way: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	idp.publish("rsa-2", "ec-1", "ed-1")
	close(release)
	if err := <-refreshed; err == nil {
		t.Error("rsa-1 was rotated out, yet its refresh found it")
	}
	if err := <-rotated; err != nil {
		t.Errorf("the rotated-in kid after the read: %v", err)
	}
	if n := idp.served.Load(); n != 2 {
		t.Errorf("JWKS read %d times, want 2", n)
	}
}
