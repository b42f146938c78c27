package sasl

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The client side of OAUTHBEARER, as Kafka's OAuthBearerLoginModule logs
// in: what a Keel node presents to another
// (sasl.mechanism.inter.broker.protocol=OAUTHBEARER) and what the keel
// CLI and the Go SDK present to a broker.

// Kafka's OAUTHBEARER login callback handler, which gets tokens from
// sasl.oauthbearer.token.endpoint.url (KIP-768), under its names since and
// before Kafka 3.8.
const (
	OAuthLoginHandler       = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
	oauthLoginHandlerLegacy = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
)

// OAuthBearerLogin is what an OAUTHBEARER client presents: a token for
// each new connection, and the SASL extensions (KIP-342) sent with it.
type OAuthBearerLogin struct {
	Token      func(context.Context) (string, error)
	Extensions map[string]string
}

// NewOAuthBearerLogin is the login of an OAuthBearerLoginModule with the
// JAAS options, sasl.login.callback.handler.class (handler) and
// sasl.oauthbearer.token.endpoint.url (endpoint), as Kafka's clients and
// brokers log in:
//
//   - endpoint https://... (handler, if set, Kafka's
//     OAuthBearerLoginCallbackHandler): tokens from the identity
//     provider's token endpoint with the client credentials grant and the
//     module's clientId, clientSecret and optional scope (ClientCredentials),
//     over HTTPS as the module's ssl.* options say (OAuthHTTPClient);
//   - endpoint file:...: the token in that file, read for each connection;
//   - no endpoint: Kafka's unsecured login, an unsigned token
//     ("alg":"none") of the module's unsecuredLogin* options
//     (UnsecuredLoginToken), checked now and issued for each connection,
//     so that a long-lived process never presents an expired one. For
//     development only: a broker accepts such tokens only with Kafka's
//     default, unsecured validation.
//
// The module's extension_<name> options are the extensions. Errors about
// the options name them but not the JAAS setting, which the caller knows.
func NewOAuthBearerLogin(options map[string]string, handler, endpoint string) (*OAuthBearerLogin, error) {
	login := &OAuthBearerLogin{}
	for k, v := range options {
		if name, ok := strings.CutPrefix(k, "extension_"); ok {
			if login.Extensions == nil {
				login.Extensions = map[string]string{}
			}
			login.Extensions[name] = v
		}
	}
	handler, endpoint = strings.TrimSpace(handler), strings.TrimSpace(endpoint)
	switch {
	case handler != "" && handler != OAuthLoginHandler && handler != oauthLoginHandlerLegacy:
		return nil, fmt.Errorf("sasl.login.callback.handler.class=%s: custom login handlers are not supported (%s is)", handler, OAuthLoginHandler)
	case handler != "" && endpoint == "":
		return nil, fmt.Errorf("sasl.login.callback.handler.class=%s needs sasl.oauthbearer.token.endpoint.url", handler)
	case strings.HasPrefix(endpoint, "file:"):
		path := strings.TrimPrefix(strings.TrimPrefix(endpoint, "file:"), "//")
		login.Token = func(context.Context) (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("sasl.oauthbearer.token.endpoint.url: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		}
	case endpoint != "":
		if !strings.HasPrefix(endpoint, "https://") && !strings.HasPrefix(endpoint, "http://") {
			return nil, fmt.Errorf("sasl.oauthbearer.token.endpoint.url=%s: not an https://, http:// or file: URL", endpoint)
		}
		id, secret := options["clientId"], options["clientSecret"]
		if id == "" || secret == "" {
			return nil, errors.New(`a token endpoint needs the OAuthBearerLoginModule's clientId="..." and clientSecret="..."`)
		}
		hc, err := OAuthHTTPClient(options)
		if err != nil {
			return nil, err
		}
		creds := &ClientCredentials{TokenURL: endpoint, ClientID: id, ClientSecret: secret, Scope: options["scope"], HTTPClient: hc}
		login.Token = creds.Token
	default:
		if _, err := UnsecuredLoginToken(options, time.Now()); err != nil {
			return nil, err
		}
		login.Token = func(context.Context) (string, error) { return UnsecuredLoginToken(options, time.Now()) }
	}
	return login, nil
}

// UnsecuredLoginToken is the unsigned token of Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler from the module's
// unsecuredLoginStringClaim_<name>, unsecuredLoginNumberClaim_<name> and
// unsecuredLoginListClaim_<name> options (the principal claim,
// unsecuredLoginPrincipalClaimName or sub, required), valid
// unsecuredLoginLifetimeSeconds (3600) from now.
func UnsecuredLoginToken(options map[string]string, now time.Time) (string, error) {
	claims := map[string]any{}
	for k, v := range options {
		switch {
		case strings.HasPrefix(k, "unsecuredLoginStringClaim_"):
			claims[strings.TrimPrefix(k, "unsecuredLoginStringClaim_")] = v
		case strings.HasPrefix(k, "unsecuredLoginNumberClaim_"):
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return "", fmt.Errorf("%s=%q is not a number", k, v)
			}
			claims[strings.TrimPrefix(k, "unsecuredLoginNumberClaim_")] = n
		case strings.HasPrefix(k, "unsecuredLoginListClaim_"):
			// The first character is the delimiter, as in Kafka.
			var list []string
			if v != "" {
				for e := range strings.SplitSeq(v[1:], v[:1]) {
					if e != "" {
						list = append(list, e)
					}
				}
			}
			claims[strings.TrimPrefix(k, "unsecuredLoginListClaim_")] = list
		}
	}
	principal := cmp.Or(options["unsecuredLoginPrincipalClaimName"], "sub")
	if s, _ := claims[principal].(string); strings.TrimSpace(s) == "" {
		return "", fmt.Errorf(`the OAuthBearerLoginModule needs unsecuredLoginStringClaim_%s="<principal>" (or sasl.oauthbearer.token.endpoint.url for a real token)`, principal)
	}
	lifetime := int64(3600)
	if v := options["unsecuredLoginLifetimeSeconds"]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return "", fmt.Errorf("unsecuredLoginLifetimeSeconds=%q: not a positive number of seconds", v)
		}
		lifetime = n
	}
	claims["iat"] = float64(now.UnixMilli()) / 1000
	claims["exp"] = float64(now.UnixMilli())/1000 + float64(lifetime)
	header, _ := json.Marshal(map[string]string{"alg": "none"})
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload) + ".", nil
}

// ClientCredentials gets tokens from an identity provider's token
// endpoint with the OAuth 2 client credentials grant (RFC 6749 §4.4), as
// Kafka's OAuthBearerLoginCallbackHandler does with
// sasl.oauthbearer.token.endpoint.url and the JAAS clientId, clientSecret
// and scope (KIP-768). A token is reused until 80% of its lifetime has
// passed (Kafka's sasl.login.refresh.window.factor).
//
// Concurrency: Token is safe for concurrent use.
type ClientCredentials struct {
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
func (c *ClientCredentials) Token(ctx context.Context) (string, error) {
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
func (c *ClientCredentials) String() string {
	return fmt.Sprintf("OAuthClientCredentials{TokenURL: %q, ClientID: %q, ClientSecret: [redacted], Scope: %q}", c.TokenURL, c.ClientID, c.Scope)
}
