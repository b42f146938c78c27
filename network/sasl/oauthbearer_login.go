package sasl

import (
	"bytes"
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
	// Log, if set before the first Token, reports failed requests to the
	// identity provider that are retried.
	Log func(msg string, args ...any)
}

// Kafka's JWT retrievers (sasl.oauthbearer.jwt.retriever.class, Kafka
// 4.1, KIP-1139): how OAuthBearerLoginCallbackHandler gets its tokens.
const (
	jwtRetrieverPrefix            = "org.apache.kafka.common.security.oauthbearer."
	jwtRetrieverDefault           = jwtRetrieverPrefix + "DefaultJwtRetriever"
	jwtRetrieverClientCredentials = jwtRetrieverPrefix + "ClientCredentialsJwtRetriever"
	jwtRetrieverFile              = jwtRetrieverPrefix + "FileJwtRetriever"
	jwtRetrieverJWTBearer         = jwtRetrieverPrefix + "JwtBearerJwtRetriever"
)

// NewOAuthBearerLogin is the login of an OAuthBearerLoginModule with the
// JAAS options and the sasl.* settings setting returns ("" when unset;
// for a node, as listener.name.<listener>.oauthbearer.<key> or <key>), as
// Kafka's clients and brokers log in. sasl.login.callback.handler.class,
// if set, is Kafka's OAuthBearerLoginCallbackHandler, whose
// sasl.oauthbearer.jwt.retriever.class (Kafka 4.1) picks how tokens are
// got; its default, DefaultJwtRetriever, goes by
// sasl.oauthbearer.token.endpoint.url:
//
//   - https://... (ClientCredentialsJwtRetriever): tokens from the
//     identity provider's token endpoint with the client credentials grant
//     (ClientCredentials): sasl.oauthbearer.client.credentials.client.id
//     and .client.secret, else the module's clientId and clientSecret;
//     sasl.oauthbearer.scope, else the module's scope; the id and secret
//     URL-encoded with sasl.oauthbearer.header.urlencode=true;
//   - file:... (FileJwtRetriever): the token in that file, read for each
//     connection;
//   - JwtBearerJwtRetriever, named: the JWT bearer grant (JWTBearer) with
//     an assertion from sasl.oauthbearer.assertion.file or made and signed
//     as the sasl.oauthbearer.assertion.* settings say (Assertion);
//   - no endpoint and no handler: Kafka's unsecured login, an unsigned
//     token ("alg":"none") of the module's unsecuredLogin* options
//     (UnsecuredLoginToken), checked now and issued for each connection,
//     so that a long-lived process never presents an expired one. For
//     development only: a broker accepts such tokens only with Kafka's
//     default, unsecured validation.
//
// Requests to the identity provider use HTTPS as the module's ssl.*
// options say (OAuthHTTPClient). They are bounded by
// sasl.login.connect.timeout.ms and sasl.login.read.timeout.ms, retried
// and their tokens renewed as the other sasl.login.* settings say
// (LoginSettingsFrom). The module's extension_<name> options are the
// extensions. Errors name the setting or option at fault but not the
// JAAS setting, which the caller knows.
func NewOAuthBearerLogin(options map[string]string, setting func(key string) string) (*OAuthBearerLogin, error) {
	login := &OAuthBearerLogin{}
	for k, v := range options {
		if name, ok := strings.CutPrefix(k, "extension_"); ok {
			if login.Extensions == nil {
				login.Extensions = map[string]string{}
			}
			login.Extensions[name] = v
		}
	}
	get := func(key string) string { return strings.TrimSpace(setting(key)) }
	handler, endpoint := get("sasl.login.callback.handler.class"), get("sasl.oauthbearer.token.endpoint.url")
	retriever := get("sasl.oauthbearer.jwt.retriever.class")
	settings, connect, read, err := LoginSettingsFrom(get)
	if err != nil {
		return nil, err
	}
	if handler != "" && handler != OAuthLoginHandler && handler != oauthLoginHandlerLegacy {
		return nil, fmt.Errorf("sasl.login.callback.handler.class=%s: custom login handlers are not supported (%s is)", handler, OAuthLoginHandler)
	}
	isFile, isHTTP := strings.HasPrefix(endpoint, "file:"), strings.HasPrefix(endpoint, "https://") || strings.HasPrefix(endpoint, "http://")
	switch retriever {
	case "", jwtRetrieverDefault:
		switch {
		case isFile:
			retriever = jwtRetrieverFile
		case isHTTP:
			retriever = jwtRetrieverClientCredentials
		case endpoint != "":
			return nil, fmt.Errorf("sasl.oauthbearer.token.endpoint.url=%s: not an https://, http:// or file: URL", endpoint)
		case handler != "":
			return nil, fmt.Errorf("sasl.login.callback.handler.class=%s needs sasl.oauthbearer.token.endpoint.url", handler)
		default:
			if _, err := UnsecuredLoginToken(options, time.Now()); err != nil {
				return nil, err
			}
			login.Token = func(context.Context) (string, error) { return UnsecuredLoginToken(options, time.Now()) }
			return login, nil
		}
	case jwtRetrieverFile:
		if !isFile {
			return nil, fmt.Errorf("sasl.oauthbearer.jwt.retriever.class=%s needs a file: sasl.oauthbearer.token.endpoint.url", retriever)
		}
	case jwtRetrieverClientCredentials, jwtRetrieverJWTBearer:
		if !isHTTP {
			return nil, fmt.Errorf("sasl.oauthbearer.jwt.retriever.class=%s needs an https:// or http:// sasl.oauthbearer.token.endpoint.url", retriever)
		}
	default:
		return nil, fmt.Errorf("sasl.oauthbearer.jwt.retriever.class=%s: custom JWT retrievers are not supported (%s, %s, %s and %s are)",
			retriever, jwtRetrieverDefault, jwtRetrieverClientCredentials, jwtRetrieverFile, jwtRetrieverJWTBearer)
	}
	if retriever == jwtRetrieverFile {
		path := strings.TrimPrefix(strings.TrimPrefix(endpoint, "file:"), "//")
		login.Token = func(context.Context) (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("sasl.oauthbearer.token.endpoint.url: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		}
		return login, nil
	}
	hc, err := OAuthHTTPClient(options)
	if err != nil {
		return nil, err
	}
	hc = LoginHTTPClient(hc, connect, read)
	settings.Log = func(msg string, args ...any) {
		if login.Log != nil {
			login.Log(msg, args...)
		}
	}
	if retriever == jwtRetrieverJWTBearer {
		assertion, err := assertionFromSettings(get)
		if err != nil {
			return nil, err
		}
		login.Token = (&JWTBearer{TokenURL: endpoint, Assertion: assertion, HTTPClient: hc, Settings: &settings}).Token
		return login, nil
	}
	id := cmp.Or(get("sasl.oauthbearer.client.credentials.client.id"), options["clientId"])
	secret := cmp.Or(get("sasl.oauthbearer.client.credentials.client.secret"), options["clientSecret"])
	if id == "" || secret == "" {
		return nil, errors.New(`a token endpoint needs sasl.oauthbearer.client.credentials.client.id and .client.secret, or the OAuthBearerLoginModule's clientId="..." and clientSecret="..."`)
	}
	scope := cmp.Or(get("sasl.oauthbearer.scope"), options["scope"])
	creds := &ClientCredentials{TokenURL: endpoint, ClientID: id, ClientSecret: secret, Scope: scope, HTTPClient: hc, Settings: &settings}
	switch v := strings.ToLower(get("sasl.oauthbearer.header.urlencode")); v {
	case "", "false":
	case "true":
		creds.URLEncodeHeader = true
	default:
		return nil, fmt.Errorf("sasl.oauthbearer.header.urlencode=%s: want true or false", v)
	}
	login.Token = creds.Token
	return login, nil
}

// IsOAuthLoginSetting reports the settings NewOAuthBearerLogin reads,
// besides sasl.login.callback.handler.class.
func IsOAuthLoginSetting(key string) bool {
	switch key {
	case "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.jwt.retriever.class", "sasl.oauthbearer.scope", "sasl.oauthbearer.header.urlencode",
		"sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.credentials.client.secret",
		"sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
		"sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
		"sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds":
		return true
	}
	return strings.HasPrefix(key, "sasl.oauthbearer.assertion.")
}

// assertionFromSettings is the JWT bearer grant's assertion as the
// sasl.oauthbearer.assertion.* settings say: the JWT of
// sasl.oauthbearer.assertion.file (all the others ignored, as in Kafka),
// or one made for each request (Assertion) with Kafka's defaults (RS256,
// exp 300 s ahead, nbf 60 s back, no jti). The key and template are read
// once now, so that a setting that cannot work stops the login's setup.
func assertionFromSettings(get func(string) string) (func(time.Time) (string, error), error) {
	const prefix = "sasl.oauthbearer.assertion."
	if path := get(prefix + "file"); path != "" {
		create := assertionFromFile(path)
		if _, err := create(time.Now()); err != nil {
			return nil, fmt.Errorf("%sfile=%s: %w", prefix, path, err)
		}
		return create, nil
	}
	a := &Assertion{
		Algorithm:      strings.ToUpper(cmp.Or(get(prefix+"algorithm"), "RS256")),
		PrivateKeyFile: get(prefix + "private.key.file"),
		Passphrase:     get(prefix + "private.key.passphrase"),
		TemplateFile:   get(prefix + "template.file"),
		Subject:        get(prefix + "claim.sub"),
		Issuer:         get(prefix + "claim.iss"),
		Audience:       get(prefix + "claim.aud"),
	}
	if a.Algorithm != "RS256" && a.Algorithm != "ES256" {
		return nil, fmt.Errorf("%salgorithm=%s: want RS256 or ES256", prefix, a.Algorithm)
	}
	if a.PrivateKeyFile == "" {
		return nil, fmt.Errorf("the JWT bearer grant needs %sprivate.key.file (or %sfile)", prefix, prefix)
	}
	var err error
	if a.ExpSeconds, err = nonNegativeSetting(get, prefix+"claim.exp.seconds", 300); err != nil {
		return nil, err
	}
	if a.NbfSeconds, err = nonNegativeSetting(get, prefix+"claim.nbf.seconds", 60); err != nil {
		return nil, err
	}
	switch v := strings.ToLower(get(prefix + "claim.jti.include")); v {
	case "", "false":
	case "true":
		a.IncludeJTI = true
	default:
		return nil, fmt.Errorf("%sclaim.jti.include=%s: want true or false", prefix, v)
	}
	if _, err := a.Create(time.Now()); err != nil {
		return nil, fmt.Errorf("%s*: %w", prefix, err)
	}
	return a.Create, nil
}

// nonNegativeSetting is an int setting from 0, def when unset.
func nonNegativeSetting(get func(string) string, key string, def int) (int, error) {
	v := get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%s: not a number from 0", key, v)
	}
	return n, nil
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
// and scope (KIP-768). A token is reused until its refresh window has
// passed, and a failed request retried, as Settings say (Kafka's
// sasl.login.refresh.* and sasl.login.retry.* settings).
//
// Concurrency: Token is safe for concurrent use.
type ClientCredentials struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scope        string // optional, space-separated
	// HTTPClient makes the requests; nil is http.DefaultClient.
	HTTPClient *http.Client
	// URLEncodeHeader URL-encodes the id and secret in the Authorization
	// header, as RFC 6749 §2.3.1 says and some identity providers
	// require: Kafka's sasl.oauthbearer.header.urlencode (KIP-1025).
	URLEncodeHeader bool
	// Settings are when the token is renewed and how failed requests are
	// retried; nil: DefaultLoginSettings.
	Settings *LoginSettings

	held heldToken
}

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 1 << 20

// Token returns a token, from the endpoint when none is held or the held
// one is due for renewal.
func (c *ClientCredentials) Token(ctx context.Context) (string, error) {
	return c.held.get(ctx, c.TokenURL, func() (string, time.Time, error) {
		form := url.Values{"grant_type": {"client_credentials"}}
		if c.Scope != "" {
			form.Set("scope", c.Scope)
		}
		return requestToken(ctx, c.HTTPClient, c.Settings, c.TokenURL, form, func(req *http.Request) {
			// HTTP basic authentication with the id and secret as they
			// are, as Kafka sends them by default
			// (sasl.oauthbearer.header.urlencode=false), or URL-encoded.
			if c.URLEncodeHeader {
				req.SetBasicAuth(formEncode(c.ClientID), formEncode(c.ClientSecret))
			} else {
				req.SetBasicAuth(c.ClientID, c.ClientSecret)
			}
		})
	})
}

// formEncode is Java's URLEncoder.encode in UTF-8, which Kafka encodes
// the client id and secret with: letters, digits and ".-*_" stay, a space
// becomes "+", every other byte %XX.
func formEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '*', c == '_':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// requestToken posts form to an identity provider's token endpoint with
// hc (nil: http.DefaultClient), auth adding the client's authentication,
// retrying as settings say (nil: Kafka's defaults), and returns the access
// token and when to renew it (LoginSettings' refresh window over its
// lifetime: expires_in, else the JWT's exp).
func requestToken(ctx context.Context, hc *http.Client, settings *LoginSettings, tokenURL string, form url.Values, auth func(*http.Request)) (string, time.Time, error) {
	settings = loginSettings(settings)
	if hc == nil {
		hc = http.DefaultClient
	}
	var body []byte
	var start time.Time
	err := settings.retry(ctx, tokenURL, func() (err error) {
		start = time.Now()
		body, err = postToken(ctx, hc, tokenURL, form, auth)
		return err
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token endpoint %s: %w", tokenURL, err)
	}
	var tr struct {
		AccessToken string  `json:"access_token"`
		ExpiresIn   float64 `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", time.Time{}, fmt.Errorf("token endpoint %s: no access_token in the answer", tokenURL)
	}
	lifetime := time.Duration(tr.ExpiresIn * float64(time.Second))
	if lifetime <= 0 {
		lifetime = jwtLifetime(tr.AccessToken, start)
	}
	return tr.AccessToken, settings.renewAt(start, start.Add(lifetime)), nil
}

// postToken makes one request to a token endpoint and returns the body
// of its answer: 200 or 201 (Kafka takes both) with a body. An error
// wraps errFinal when retrying cannot help (finalStatus).
func postToken(ctx context.Context, hc *http.Client, tokenURL string, form url.Values, auth func(*http.Request)) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, errFinal)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Cache-Control", "no-cache")
	if auth != nil {
		auth(req)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated:
		err = fmt.Errorf("HTTP %s: %.200s", resp.Status, bytes.TrimSpace(body))
		if finalStatus(resp.StatusCode) {
			err = fmt.Errorf("%w (%w)", err, errFinal)
		}
		return nil, err
	case len(bytes.TrimSpace(body)) == 0:
		return nil, fmt.Errorf("HTTP %s with an empty body", resp.Status)
	}
	return body, nil
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
