package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"time"
)

// JWTValidator is Kafka's OAuthBearerValidatorCallbackHandler (KIP-768,
// its BrokerJwtValidator): a JWS signed with RS256/384/512, PS256/384/512,
// ES256/384/512 or EdDSA by a key of the identity provider's JWKS (found by
// the token's kid), never "none"; exp and iat required, exp not passed and
// nbf reached within ClockSkew; the subject claim a non-empty string; iss
// Issuer and aud one of Audience when those are set.
type JWTValidator struct {
	Keys       *JWKSCache
	SubClaim   string        // sasl.oauthbearer.sub.claim.name, default sub
	ScopeClaim string        // sasl.oauthbearer.scope.claim.name, default scope
	Audience   []string      // sasl.oauthbearer.expected.audience
	Issuer     string        // sasl.oauthbearer.expected.issuer
	ClockSkew  time.Duration // sasl.oauthbearer.clock.skew.seconds, default 30 s
}

// Validate implements OAuthBearerValidator.
func (v *JWTValidator) Validate(token string, now time.Time) (OAuthBearerToken, error) {
	t, err := parseJWT(token)
	if err != nil {
		return OAuthBearerToken{}, err
	}
	alg, _ := t.header["alg"].(string)
	hash, ok := jwsHashes[alg]
	if !ok {
		return OAuthBearerToken{}, invalidToken("signature algorithm %q is not accepted (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA are)", alg)
	}
	kid, _ := t.header["kid"].(string)
	key, err := v.Keys.Key(kid, alg, now)
	if err != nil {
		return OAuthBearerToken{}, err
	}
	if err := verifyJWS(alg, hash, key, t.signingInput, t.signature); err != nil {
		return OAuthBearerToken{}, invalidToken("signature (kid %q, %s): %v", kid, alg, err)
	}
	if v.Issuer != "" {
		if iss, _ := t.stringClaim("iss"); iss != v.Issuer {
			return OAuthBearerToken{}, invalidToken("issuer %q, expected %q", iss, v.Issuer)
		}
	}
	if len(v.Audience) > 0 {
		aud, err := t.scopeClaim("aud") // a string or a list of strings, as scope
		if err != nil || !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(v.Audience, a) }) {
			return OAuthBearerToken{}, invalidToken("audience %v is none of %v", t.claims["aud"], v.Audience)
		}
	}
	return checkClaims(t, now, v.ClockSkew, v.SubClaim, v.ScopeClaim, nil, true)
}

// jwsHashes are the accepted JWS algorithms and their digests (0 for
// EdDSA, which signs the message itself).
var jwsHashes = map[string]crypto.Hash{
	"RS256": crypto.SHA256, "RS384": crypto.SHA384, "RS512": crypto.SHA512,
	"PS256": crypto.SHA256, "PS384": crypto.SHA384, "PS512": crypto.SHA512,
	"ES256": crypto.SHA256, "ES384": crypto.SHA384, "ES512": crypto.SHA512,
	"EdDSA": 0,
}

// jwsCurves are the curves of the ES algorithms (RFC 7518 §3.4).
var jwsCurves = map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}

func digest(h crypto.Hash, msg string) []byte {
	switch h {
	case crypto.SHA256:
		d := sha256.Sum256([]byte(msg))
		return d[:]
	case crypto.SHA384:
		d := sha512.Sum384([]byte(msg))
		return d[:]
	default:
		d := sha512.Sum512([]byte(msg))
		return d[:]
	}
}

// verifyJWS checks sig over input with key by alg.
func verifyJWS(alg string, h crypto.Hash, key crypto.PublicKey, input string, sig []byte) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch alg[:2] {
		case "RS":
			return rsa.VerifyPKCS1v15(k, h, digest(h, input), sig)
		case "PS":
			return rsa.VerifyPSS(k, h, digest(h, input), sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
	case *ecdsa.PublicKey:
		if c := jwsCurves[alg]; c != nil && c == k.Curve {
			size := (c.Params().BitSize + 7) / 8
			if len(sig) != 2*size {
				return fmt.Errorf("an %s signature is %d bytes, not %d", alg, 2*size, len(sig))
			}
			r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
			if !ecdsa.Verify(k, digest(h, input), r, s) {
				return errors.New("verification failed")
			}
			return nil
		}
	case ed25519.PublicKey:
		if alg == "EdDSA" {
			if !ed25519.Verify(k, []byte(input), sig) {
				return errors.New("verification failed")
			}
			return nil
		}
	}
	return fmt.Errorf("the key (%T) does not fit %s", key, alg)
}

// jwk is one usable key of a JWKS.
type jwk struct {
	kid, alg string
	key      crypto.PublicKey
}

// fits reports whether k may verify a token signed with alg.
func (k jwk) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		return alg[:2] == "RS" || alg[:2] == "PS"
	case *ecdsa.PublicKey:
		return jwsCurves[alg] == key.Curve
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// ParseJWKS reads a JSON Web Key Set (RFC 7517): the signature keys it can
// use (RSA, EC P-256/384/521, OKP Ed25519; not "use":"enc"). A key it
// cannot use is skipped, and reported in skipped.
func ParseJWKS(b []byte) (keys []jwk, skipped []string, err error) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, nil, fmt.Errorf("not a JWKS: %w", err)
	}
	for i, m := range set.Keys {
		str := func(name string) string { s, _ := m[name].(string); return s }
		kid, use := str("kid"), str("use")
		if use != "" && use != "sig" {
			continue
		}
		key, err := jwkPublicKey(str)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %v", i, kid, err))
			continue
		}
		keys = append(keys, jwk{kid: kid, alg: str("alg"), key: key})
	}
	return keys, skipped, nil
}

// jwkPublicKey decodes one JWK's public key.
func jwkPublicKey(str func(string) string) (crypto.PublicKey, error) {
	b64 := func(name string) ([]byte, error) {
		b, err := base64.RawURLEncoding.DecodeString(str(name))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s is not base64url", name)
		}
		return b, nil
	}
	switch kty := str("kty"); kty {
	case "RSA":
		n, err := b64("n")
		if err != nil {
			return nil, err
		}
		e, err := b64("e")
		if err != nil || len(e) > 4 {
			return nil, errors.New("bad exponent e")
		}
		k := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if k.N.BitLen() < 2048 || k.E < 3 {
			return nil, fmt.Errorf("an RSA key of %d bits (exponent %d): at least 2048 bits", k.N.BitLen(), k.E)
		}
		return k, nil
	case "EC":
		var c elliptic.Curve
		switch str("crv") {
		case "P-256":
			c = elliptic.P256()
		case "P-384":
			c = elliptic.P384()
		case "P-521":
			c = elliptic.P521()
		default:
			return nil, fmt.Errorf("curve %q", str("crv"))
		}
		x, err := b64("x")
		if err != nil {
			return nil, err
		}
		y, err := b64("y")
		if err != nil {
			return nil, err
		}
		size := (c.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, errors.New("coordinates of the wrong size")
		}
		// The uncompressed point encoding lets crypto/ecdh check the
		// point is on the curve.
		point := append(append([]byte{4}, x...), y...)
		k, err := ecdsa.ParseUncompressedPublicKey(c, point)
		if err != nil {
			return nil, fmt.Errorf("not a point on %s: %w", str("crv"), err)
		}
		return k, nil
	case "OKP":
		if str("crv") != "Ed25519" {
			return nil, fmt.Errorf("curve %q", str("crv"))
		}
		x, err := b64("x")
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 key x")
		}
		return ed25519.PublicKey(x), nil
	default:
		return nil, fmt.Errorf("key type %q", kty)
	}
}

// JWKSCache holds the identity provider's keys, fetched from
// sasl.oauthbearer.jwks.endpoint.url (Kafka's RefreshingHttpsJwks): again
// after Refresh, and at once for a kid it does not know, at most once per
// Backoff (doubling up to MaxBackoff while fetches fail), so that tokens
// signed with a rotated key are accepted and a flood of unknown kids does
// not become a flood of fetches.
//
// Concurrency: safe for concurrent use. A fetch happens on the goroutine
// of the authentication that needs it, one at a time, and outside the
// cache's lock: while the keys are refreshed, authentications with a kid
// the cache holds go on with the keys held; only one whose kid is unknown
// waits for the fetch under way (at most Timeout).
type JWKSCache struct {
	Fetch      func(ctx context.Context) ([]byte, error)
	Refresh    time.Duration // sasl.oauthbearer.jwks.endpoint.refresh.ms
	Backoff    time.Duration // .retry.backoff.ms
	MaxBackoff time.Duration // .retry.backoff.max.ms
	Timeout    time.Duration // one fetch's bound
	// Log reports fetches and their failures; nil discards them.
	Log func(msg string, args ...any)

	mu       sync.Mutex
	keys     []jwk
	fetched  time.Time // of the keys held
	tried    time.Time // of the last fetch, successful or not
	failures int
	fetching chan struct{} // closed when the fetch under way ends; nil: none
}

// Key returns the key that verifies a token signed with alg whose header
// names kid ("" when it names none: the one key that fits alg).
func (c *JWKSCache) Key(kid, alg string, now time.Time) (crypto.PublicKey, error) {
	c.mu.Lock()
	stale := c.fetched.IsZero() || now.Sub(c.fetched) >= c.Refresh
	k, found := c.find(kid, alg)
	switch {
	case (stale || !found) && c.fetching == nil && now.Sub(c.tried) >= c.backoff():
		done := make(chan struct{})
		c.fetching, c.tried = done, now
		c.mu.Unlock()
		keys, skipped, err := c.read()
		c.mu.Lock()
		c.install(keys, skipped, err, now)
		c.fetching = nil
		close(done)
		k, found = c.find(kid, alg)
	case !found && c.fetching != nil:
		done := c.fetching
		c.mu.Unlock()
		<-done
		c.mu.Lock()
		k, found = c.find(kid, alg)
	}
	none := c.fetched.IsZero()
	c.mu.Unlock()
	if !found {
		if none {
			return nil, invalidToken("no keys: the JWKS endpoint could not be read")
		}
		return nil, invalidToken("no key in the JWKS for kid %q and %s", kid, alg)
	}
	return k.key, nil
}

// backoff is the wait before the next fetch after the last one: Backoff
// after a success, doubled per failure up to MaxBackoff. c.mu is held.
func (c *JWKSCache) backoff() time.Duration {
	d := c.Backoff
	for i := 0; i < c.failures && d < c.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, max(c.MaxBackoff, c.Backoff))
}

// read fetches and parses the key set, within Timeout; c.mu is not held.
func (c *JWKSCache) read() ([]jwk, []string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	b, err := c.Fetch(ctx)
	if err != nil {
		return nil, nil, err
	}
	keys, skipped, err := ParseJWKS(b)
	if err == nil && len(keys) == 0 {
		err = fmt.Errorf("no usable signature key (%v)", skipped)
	}
	return keys, skipped, err
}

// install takes the outcome of a read begun at now; c.mu is held.
func (c *JWKSCache) install(keys []jwk, skipped []string, err error, now time.Time) {
	if err != nil {
		c.failures++
		c.log("reading the OAUTHBEARER JWKS failed; the keys held are kept", "error", err, "keys", len(c.keys), "retry_in", c.backoff())
		return
	}
	c.keys, c.fetched, c.failures = keys, now, 0
	c.log("read the OAUTHBEARER JWKS", "keys", len(keys), "skipped", skipped)
}

func (c *JWKSCache) log(msg string, args ...any) {
	if c.Log != nil {
		c.Log(msg, args...)
	}
}

// find looks kid up among the keys that fit alg; c.mu is held.
func (c *JWKSCache) find(kid, alg string) (jwk, bool) {
	var match []jwk
	for _, k := range c.keys {
		if (kid == "" || k.kid == kid) && k.fits(alg) {
			match = append(match, k)
		}
	}
	if len(match) == 1 || (len(match) > 1 && kid != "") {
		return match[0], true
	}
	return jwk{}, false
}
