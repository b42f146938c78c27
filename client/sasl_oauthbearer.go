package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// OAuthBearerAuth is SASL/OAUTHBEARER (RFC 7628, KIP-255): Kafka's
// sasl.mechanism=OAUTHBEARER. Each new connection presents the bearer
// token Token returns (a JWT from the identity provider, which the broker
// validates against the provider's keys); the principal is its subject.
//
//	creds := &client.OAuthClientCredentials{TokenURL: "https://idp/oauth2/token", ClientID: "orders", ClientSecret: "..."}
//	client.SASL(client.OAuthBearerAuth{Token: creds.Token})
//
// Use it over TLS (security.protocol=SASL_SSL): the token travels in the
// clear otherwise. Safe for concurrent use when Token is.
type OAuthBearerAuth struct {
	// Token returns the token for a new connection.
	Token func(ctx context.Context) (string, error)
	// Zid is the authorization id, usually empty. Kafka brokers refuse one
	// that is not empty and not the token's principal.
	Zid string
	// Extensions are SASL extensions (KIP-342) sent with the token, keys
	// of letters only.
	Extensions map[string]string
}

// Name is "OAUTHBEARER".
func (OAuthBearerAuth) Name() string { return "OAUTHBEARER" }

// Authenticate returns the one OAUTHBEARER message: the GS2 header, then
// auth=Bearer <token> and the extensions, each ended by %x01, and a final
// %x01.
func (a OAuthBearerAuth) Authenticate(ctx context.Context, host string) (SASLSession, []byte, error) {
	if a.Token == nil {
		return nil, nil, errors.New("sasl OAUTHBEARER: no Token func")
	}
	token, err := a.Token(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("sasl OAUTHBEARER: get a token: %w", err)
	}
	if token == "" || strings.ContainsAny(token, "\x00\x01 ,") {
		return nil, nil, errors.New("sasl OAUTHBEARER: the token is empty or holds characters a bearer token cannot")
	}
	if strings.ContainsAny(a.Zid, "\x00\x01") {
		return nil, nil, errors.New("sasl OAUTHBEARER: the authorization id contains NUL or %x01")
	}
	zid := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(a.Zid)
	msg := []byte("n,")
	if zid != "" {
		msg = append(msg, "a="+zid...)
	}
	msg = append(msg, ",\x01auth=Bearer "+token+"\x01"...)
	for _, k := range slices.Sorted(maps.Keys(a.Extensions)) {
		if k == "" || k == "auth" || strings.Trim(strings.ToLower(k), "abcdefghijklmnopqrstuvwxyz") != "" {
			return nil, nil, fmt.Errorf("sasl OAUTHBEARER: extension name %q is not letters only (and not auth)", k)
		}
		if v := a.Extensions[k]; v == "" || strings.ContainsAny(v, "\x00\x01") {
			return nil, nil, fmt.Errorf("sasl OAUTHBEARER: extension %s has an empty or invalid value", k)
		}
		msg = append(msg, k+"="+a.Extensions[k]+"\x01"...)
	}
	msg = append(msg, 0x01)
	return &oauthSession{}, msg, nil
}

// oauthSession is the exchange after the OAUTHBEARER message: an empty
// answer is success. A broker that refuses the token may answer with RFC
// 7628's error JSON first (Kafka does); the client acknowledges it with
// %x01 and the broker then fails the exchange with the error code.
type oauthSession struct{ answered bool }

func (s *oauthSession) Challenge(msg []byte) (bool, []byte, error) {
	if len(msg) == 0 {
		return true, nil, nil
	}
	if s.answered {
		return false, nil, fmt.Errorf("sasl OAUTHBEARER: the broker answered again: %q", msg)
	}
	s.answered = true
	return false, []byte{0x01}, nil
}

// OAuthClientCredentials gets tokens from an identity provider's token
// endpoint with the OAuth 2 client credentials grant (RFC 6749 §4.4), as
// Kafka's OAuthBearerLoginCallbackHandler does with
// sasl.oauthbearer.token.endpoint.url and the JAAS clientId, clientSecret
// and scope (KIP-768). A token is reused until 80% of its lifetime has
// passed (Kafka's sasl.login.refresh.window.factor).
//
// Concurrency: Token is safe for concurrent use.
type OAuthClientCredentials struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scope        string // optional, space-separated
	// HTTPClient makes the requests; nil is http.DefaultClient.
	HTTPClient *http.Client

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 1 << 20

// Token returns a token, from the endpoint when none is held or the held
// one is due for renewal.
func (c *OAuthClientCredentials) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && time.Now().Before(c.renewAt) {
		return c.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if c.Scope != "" {
		form.Set("scope", c.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("token endpoint %s: %w", c.TokenURL, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// HTTP basic authentication with the id and secret as they are, as
	// Kafka sends them by default (sasl.oauthbearer.header.urlencode=false).
	req.SetBasicAuth(c.ClientID, c.ClientSecret)
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("token endpoint %s: %w", c.TokenURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return "", fmt.Errorf("token endpoint %s: %w", c.TokenURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint %s: HTTP %s: %.200s", c.TokenURL, resp.Status, body)
	}
	var tr struct {
		AccessToken string  `json:"access_token"`
		ExpiresIn   float64 `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("token endpoint %s: no access_token in the answer", c.TokenURL)
	}
	lifetime := time.Duration(tr.ExpiresIn * float64(time.Second))
	if lifetime <= 0 {
		lifetime = jwtLifetime(tr.AccessToken, start)
	}
	c.token, c.renewAt = tr.AccessToken, start.Add(lifetime*8/10)
	return c.token, nil
}

// jwtLifetime is the time from now to a JWT's exp claim, read without
// verifying it (the broker does that), for an answer without expires_in;
// zero when the token has none, so that it is fetched again each time.
func jwtLifetime(token string, now time.Time) time.Duration {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return 0
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return 0
	}
	var claims struct {
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp <= 0 {
		return 0
	}
	return max(time.Unix(0, int64(claims.Exp*float64(time.Second))).Sub(now), 0)
}

// String does not show the secret.
func (c *OAuthClientCredentials) String() string {
	return fmt.Sprintf("OAuthClientCredentials{TokenURL: %q, ClientID: %q, ClientSecret: [redacted], Scope: %q}", c.TokenURL, c.ClientID, c.Scope)
}
