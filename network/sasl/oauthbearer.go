package sasl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768) as Kafka's broker serves
// it: the client's one message carries a bearer token, a JWT, which the
// broker validates, and the principal is the token's subject.
//
//   - UnsecuredValidator is Kafka's default on a broker,
//     OAuthBearerUnsecuredValidatorCallbackHandler: unsigned tokens
//     ("alg":"none"), for development only, as in Kafka.
//   - JWTValidator is Kafka's OAuthBearerValidatorCallbackHandler: a
//     token signed by a key of the identity provider's JWKS, with Kafka's
//     claim checks (oauthbearer_jwks.go fetches and refreshes the keys).
//
// An invalid token fails the exchange at once with
// SASL_AUTHENTICATION_FAILED whose message is RFC 7628's error JSON
// ({"status":"invalid_token"}); Kafka sends that JSON as a challenge and
// fails once the client has answered it with %x01, which every client
// then reports the same way.

// MechanismOAuthBearer is the OAUTHBEARER mechanism's name in
// SaslHandshake and sasl.enabled.mechanisms.
const MechanismOAuthBearer = "OAUTHBEARER"

// OAuthBearerLoginModule is the class name of Kafka's OAUTHBEARER login
// module, whose unsecuredValidator* options configure the unsecured
// validator.
const OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

// maxOAuthBearerMessage bounds a client's OAUTHBEARER message (tokens
// with many claims run to a few KiB).
const maxOAuthBearerMessage = 64 << 10

// ErrInvalidOAuthBearerMessage is wrapped by the errors of
// ParseOAuthBearerInitialResponse.
var ErrInvalidOAuthBearerMessage = errors.New("invalid SASL/OAUTHBEARER client message")

// OAuthBearerInitialResponse is a client's OAUTHBEARER message (RFC 7628
// §3.1, Kafka's OAuthBearerClientInitialResponse): the GS2 header with an
// optional authorization id, then key=value pairs separated by %x01, auth
// carrying "Bearer <token>", the others SASL extensions (KIP-342).
type OAuthBearerInitialResponse struct {
	AuthzID    string
	Token      string
	Extensions map[string]string
}

// ParseOAuthBearerInitialResponse parses a client's OAUTHBEARER message.
func ParseOAuthBearerInitialResponse(msg []byte) (OAuthBearerInitialResponse, error) {
	var r OAuthBearerInitialResponse
	bad := func(format string, args ...any) (OAuthBearerInitialResponse, error) {
		return OAuthBearerInitialResponse{}, fmt.Errorf("%w: %s", ErrInvalidOAuthBearerMessage, fmt.Sprintf(format, args...))
	}
	if len(msg) > maxOAuthBearerMessage {
		return bad("%d bytes, more than %d", len(msg), maxOAuthBearerMessage)
	}
	s := string(msg)
	rest, ok := strings.CutPrefix(s, "n,")
	if !ok {
		return bad("it does not start with the GS2 header n,")
	}
	if a, ok := strings.CutPrefix(rest, "a="); ok {
		end := strings.IndexByte(a, ',')
		if end < 0 {
			return bad("the authorization id has no end")
		}
		id, err := decodeSASLName(a[:end])
		if err != nil || id == "" {
			return bad("bad authorization id")
		}
		r.AuthzID, rest = id, a[end:]
	}
	rest, ok = strings.CutPrefix(rest, ",\x01")
	if !ok {
		return bad("the GS2 header does not end with ,%%x01")
	}
	// Each key=value pair ends with %x01, and one more ends the message.
	pairs, ok := strings.CutSuffix(rest, "\x01")
	if !ok || pairs == "" {
		return bad("no auth pair, or no final %%x01")
	}
	if pairs, ok = strings.CutSuffix(pairs, "\x01"); !ok {
		return bad("it does not end with %%x01%%x01")
	}
	for pair := range strings.SplitSeq(pairs, "\x01") {
		if pair == "" {
			return bad("an empty key=value pair")
		}
		key, value, ok := strings.Cut(pair, "=")
		if !ok || !isOAuthKey(key) || !isOAuthValue(value) {
			return bad("a malformed key=value pair")
		}
		if key == "auth" {
			if r.Token != "" {
				return bad("auth twice")
			}
			scheme, token, _ := strings.Cut(value, " ")
			token = strings.TrimLeft(token, " ")
			if !strings.EqualFold(scheme, "bearer") || !isBearerToken(token) {
				return bad("auth is not Bearer <token>")
			}
			r.Token = token
			continue
		}
		if r.Extensions == nil {
			r.Extensions = map[string]string{}
		}
		if _, dup := r.Extensions[key]; dup {
			return bad("extension %s twice", key)
		}
		r.Extensions[key] = value
	}
	if r.Token == "" {
		return bad("no auth pair")
	}
	return r, nil
}

// decodeSASLName undoes RFC 5801's saslname escapes (=2C and =3D).
func decodeSASLName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", errors.New("bad escape")
			}
			i += 2
		case c == 0 || c > 0x7f:
			return "", errors.New("bad character")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isOAuthKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func isOAuthValue(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// isBearerToken reports whether t is a b64token of RFC 6750 §2.1 as Kafka
// takes it: letters, digits, -._~+/ and trailing =.
func isBearerToken(t string) bool {
	body := strings.TrimRight(t, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// OAuthBearerToken is a validated token.
type OAuthBearerToken struct {
	Principal string    // the subject (or the configured principal claim)
	Scope     []string  // the scope claim's values
	Expires   time.Time // exp
}

// OAuthBearerValidator validates a bearer token at now.
type OAuthBearerValidator interface {
	Validate(token string, now time.Time) (OAuthBearerToken, error)
}

// InvalidTokenError is a token that failed validation: Reason is logged,
// the client learns RFC 7628's error status only.
type InvalidTokenError struct {
	Status string // invalid_token, insufficient_scope
	Scope  string // the scope required, for insufficient_scope
	Reason string
}

func (e *InvalidTokenError) Error() string { return "invalid OAUTHBEARER token: " + e.Reason }

// ClientMessage is RFC 7628 §3.2.2's error JSON, as Kafka's
// OAuthBearerSaslServer gives it to the client.
func (e *InvalidTokenError) ClientMessage() string {
	m := map[string]string{"status": e.Status}
	if e.Scope != "" {
		m["scope"] = e.Scope
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func invalidToken(format string, args ...any) *InvalidTokenError {
	return &InvalidTokenError{Status: "invalid_token", Reason: fmt.Sprintf(format, args...)}
}

// jwt is a decoded compact JWS: its header, its claims and what was
// signed.
type jwt struct {
	header       map[string]any
	claims       map[string]any
	signingInput string
	signature    []byte
}

// parseJWT splits and decodes a compact JWS (header.payload.signature,
// base64url without padding).
func parseJWT(token string) (*jwt, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalidToken("not a JWS compact serialization: %d parts", len(parts))
	}
	var t jwt
	for i, out := range []*map[string]any{&t.header, &t.claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return nil, invalidToken("JWS part %d is not base64url: %v", i+1, err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(out); err != nil || *out == nil {
			return nil, invalidToken("JWS part %d is not a JSON object", i+1)
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, invalidToken("the JWS signature is not base64url: %v", err)
	}
	t.signingInput, t.signature = parts[0]+"."+parts[1], sig
	return &t, nil
}

// numericDate reads a NumericDate claim (seconds since the epoch, maybe
// fractional); ok false when absent, an error when not a number.
func (t *jwt) numericDate(name string) (time.Time, bool, error) {
	v, present := t.claims[name]
	if !present {
		return time.Time{}, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return time.Time{}, false, invalidToken("claim %s is not a number", name)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || f < 0 || f > 1e13 {
		return time.Time{}, false, invalidToken("claim %s is not a date: %s", name, n)
	}
	return time.UnixMilli(int64(math.Round(f * 1000))), true, nil
}

// stringClaim reads a string claim; "" when absent.
func (t *jwt) stringClaim(name string) (string, error) {
	v, present := t.claims[name]
	if !present {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalidToken("claim %s is not a string", name)
	}
	return s, nil
}

// scopeClaim reads a scope claim: a space-separated string or a list of
// strings (Kafka's OAuthBearerScopeUtils); nil when absent.
func (t *jwt) scopeClaim(name string) ([]string, error) {
	switch v := t.claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok || strings.TrimSpace(s) == "" {
				return nil, invalidToken("claim %s holds a value that is not a scope", name)
			}
			out = append(out, strings.TrimSpace(s))
		}
		return out, nil
	default:
		return nil, invalidToken("claim %s is neither a string nor a list", name)
	}
}

// UnsecuredValidator is Kafka's OAuthBearerUnsecuredValidatorCallbackHandler,
// the broker's default for OAUTHBEARER: an unsigned JWS ("alg":"none", an
// empty signature) whose principal claim is a string, whose exp has not
// passed and whose iat, if any, has, within ClockSkew; nbf and iat precede
// exp; RequiredScope must be in the scope claim. Not for production, as
// Kafka warns: anyone can write such a token.
type UnsecuredValidator struct {
	PrincipalClaim string // unsecuredValidatorPrincipalClaimName, default sub
	ScopeClaim     string // unsecuredValidatorScopeClaimName, default scope
	RequiredScope  []string
	ClockSkew      time.Duration // unsecuredValidatorAllowableClockSkewMs, default 0
}

// UnsecuredValidatorFromJAAS reads the unsecuredValidator* options of an
// OAuthBearerLoginModule entry.
func UnsecuredValidatorFromJAAS(c JAASConfig) (*UnsecuredValidator, error) {
	v := &UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}
	if s := strings.TrimSpace(c.Options["unsecuredValidatorPrincipalClaimName"]); s != "" {
		v.PrincipalClaim = s
	}
	if s := strings.TrimSpace(c.Options["unsecuredValidatorScopeClaimName"]); s != "" {
		v.ScopeClaim = s
	}
	v.RequiredScope = strings.Fields(c.Options["unsecuredValidatorRequiredScope"])
	if s := strings.TrimSpace(c.Options["unsecuredValidatorAllowableClockSkewMs"]); s != "" {
		ms, err := strconv.ParseInt(s, 10, 32)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs %q: not a number of milliseconds from 0", s)
		}
		v.ClockSkew = time.Duration(ms) * time.Millisecond
	}
	return v, nil
}

// Validate implements OAuthBearerValidator.
func (v *UnsecuredValidator) Validate(token string, now time.Time) (OAuthBearerToken, error) {
	t, err := parseJWT(token)
	if err != nil {
		return OAuthBearerToken{}, err
	}
	if alg, _ := t.header["alg"].(string); alg != "none" || len(t.signature) != 0 {
		return OAuthBearerToken{}, invalidToken("an unsecured token must have \"alg\":\"none\" and no signature (alg %v); this listener has no JWKS (sasl.oauthbearer.jwks.endpoint.url) to verify signed ones", t.header["alg"])
	}
	return checkClaims(t, now, v.ClockSkew, v.PrincipalClaim, v.ScopeClaim, v.RequiredScope, false)
}

// checkClaims applies the time, principal and scope checks common to
// both validators.
func checkClaims(t *jwt, now time.Time, skew time.Duration, principalClaim, scopeClaim string, requiredScope []string, requireIAT bool) (OAuthBearerToken, error) {
	principal, err := t.stringClaim(principalClaim)
	if err != nil {
		return OAuthBearerToken{}, err
	}
	if strings.TrimSpace(principal) == "" {
		return OAuthBearerToken{}, invalidToken("no principal: claim %s is missing or empty", principalClaim)
	}
	exp, ok, err := t.numericDate("exp")
	if err != nil {
		return OAuthBearerToken{}, err
	}
	if !ok {
		return OAuthBearerToken{}, invalidToken("no exp claim")
	}
	if !now.Before(exp.Add(skew)) {
		return OAuthBearerToken{}, invalidToken("expired at %s (now %s)", exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	iat, hasIAT, err := t.numericDate("iat")
	switch {
	case err != nil:
		return OAuthBearerToken{}, err
	case !hasIAT && requireIAT:
		return OAuthBearerToken{}, invalidToken("no iat claim")
	case hasIAT && iat.After(now.Add(skew)):
		return OAuthBearerToken{}, invalidToken("issued in the future, at %s", iat.UTC().Format(time.RFC3339))
	case hasIAT && !iat.Before(exp):
		return OAuthBearerToken{}, invalidToken("iat is not before exp")
	}
	nbf, hasNBF, err := t.numericDate("nbf")
	switch {
	case err != nil:
		return OAuthBearerToken{}, err
	case hasNBF && nbf.After(now.Add(skew)):
		return OAuthBearerToken{}, invalidToken("not valid before %s", nbf.UTC().Format(time.RFC3339))
	case hasNBF && !nbf.Before(exp):
		return OAuthBearerToken{}, invalidToken("nbf is not before exp")
	}
	scope, err := t.scopeClaim(scopeClaim)
	if err != nil {
		return OAuthBearerToken{}, err
	}
	for _, want := range requiredScope {
		if !slices.Contains(scope, want) {
			return OAuthBearerToken{}, &InvalidTokenError{Status: "insufficient_scope", Scope: strings.Join(requiredScope, " "),
				Reason: fmt.Sprintf("scope %q lacks %q", strings.Join(scope, " "), want)}
		}
	}
	return OAuthBearerToken{Principal: principal, Scope: scope, Expires: exp}, nil
}

// OAuthBearerServer is one connection's OAUTHBEARER exchange, broker side:
// one client message, validated.
type OAuthBearerServer struct {
	Validator OAuthBearerValidator
	Now       func() time.Time
}

// Next takes the client's message and returns, on success, the validated
// token (its Principal is the user name). Its errors are the message's
// (ErrInvalidOAuthBearerMessage), the token's (*InvalidTokenError) and an
// authorization id other than the principal (ErrAuthorizationIDMismatch).
func (s OAuthBearerServer) Next(msg []byte) (OAuthBearerToken, error) {
	r, err := ParseOAuthBearerInitialResponse(msg)
	if err != nil {
		return OAuthBearerToken{}, err
	}
	tok, err := s.Validator.Validate(r.Token, s.Now())
	if err != nil {
		return OAuthBearerToken{}, err
	}
	if r.AuthzID != "" && r.AuthzID != tok.Principal {
		return OAuthBearerToken{}, fmt.Errorf("%w: authorization id %q, token principal %q", ErrAuthorizationIDMismatch, r.AuthzID, tok.Principal)
	}
	return tok, nil
}
