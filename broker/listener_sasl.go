package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/sasl"
)

// isSASLKey reports whether a server.properties key is a SASL setting:
// sasl.*, or listener-prefixed (listener.name.<listener>.sasl.*,
// listener.name.<listener>.<mechanism>.sasl.jaas.config and
// listener.name.<listener>.<mechanism>.connections.max.reauth.ms).
func isSASLKey(k string) bool {
	if strings.HasPrefix(k, "sasl.") {
		return true
	}
	rest, ok := strings.CutPrefix(k, "listener.name.")
	return ok && (strings.Contains(rest, ".sasl.") || strings.HasSuffix(rest, ".connections.max.reauth.ms"))
}

// loadNodeSASL builds the SASL side of each SASL_PLAINTEXT and SASL_SSL
// listener from its settings, as Kafka's broker does at startup:
//
//   - sasl.enabled.mechanisms (or listener.name.<listener>.sasl.enabled.
//     mechanisms) names the mechanisms; Kafka's default, GSSAPI, is not
//     supported, so a SASL listener must set it. PLAIN, SCRAM-SHA-256,
//     SCRAM-SHA-512 and OAUTHBEARER are supported; GSSAPI is refused with
//     the setting named.
//   - PLAIN's users are the user_<name>="<password>" options of
//     listener.name.<listener>.plain.sasl.jaas.config
//     (org.apache.kafka.common.security.plain.PlainLoginModule).
//   - SCRAM's users are the cluster's SCRAM credentials, in the metadata
//     log (kafka-configs --entity-type users, keel users, keel format
//     --add-scram), looked up in image at each authentication: a
//     credential added, changed or deleted counts from the next
//     connection. listener.name.<listener>.scram-sha-256.sasl.jaas.config
//     may name the ScramLoginModule, as Kafka's brokers need; it has
//     nothing else to say here.
//   - connections.max.reauth.ms (or, per listener and mechanism,
//     listener.name.<listener>.<mechanism>.connections.max.reauth.ms)
//     above zero makes clients re-authenticate on their connections
//     (network.SASLListener.MaxReauth, KIP-368).
//   - OAUTHBEARER needs listener.name.<listener>.oauthbearer.sasl.jaas.config
//     (the OAuthBearerLoginModule). Without
//     listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class
//     tokens are validated as Kafka's default handler does, unsigned
//     ("alg":"none"; the module's unsecuredValidator* options), which is
//     for development only; with Kafka's OAuthBearerValidatorCallbackHandler
//     they must be signed by a key of the identity provider's JWKS
//     (oauthBearerValidator).
//
// The inter-broker and controller listeners may be SASL too: nodes then
// authenticate to each other as internode_sasl.go describes, and the
// mechanism they dial with (sasl.mechanism.inter.broker.protocol,
// sasl.mechanism.controller.protocol) must be enabled on the listener.
func loadNodeSASL(cfg *Config, listeners []network.Listener, isBroker bool, scram scramSource, tokens tokenSource, log hclog.Logger) (map[string]*network.SASLListener, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	out := map[string]*network.SASLListener{}
	for _, l := range listeners {
		if !l.SecurityProtocol.IsSASL() {
			continue
		}
		enabled, ok := listenerSetting(cfg.SASL, l.Name, "sasl.enabled.mechanisms", true)
		if !ok {
			return nil, fmt.Errorf("listener %s is %s: set sasl.enabled.mechanisms (Kafka's default, GSSAPI, is not supported; PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)", l.Name, l.SecurityProtocol)
		}
		var mechs []string
		users := map[string]sasl.PlainUsers{}
		var oauth sasl.OAuthBearerValidator
		for _, m := range strings.Split(enabled, ",") {
			m = strings.ToUpper(strings.TrimSpace(m))
			if m == "" || slices.Contains(mechs, m) {
				continue
			}
			if m != sasl.MechanismPlain && m != sasl.MechanismOAuthBearer && !sasl.IsScram(m) {
				return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not supported yet (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)", l.Name, m)
			}
			key := "listener.name." + strings.ToLower(l.Name) + "." + strings.ToLower(m) + ".sasl.jaas.config"
			text, ok := listenerSetting(cfg.SASL, l.Name, strings.ToLower(m)+".sasl.jaas.config", false)
			switch {
			case !ok && m == sasl.MechanismPlain:
				return nil, fmt.Errorf("listener %s enables %s but %s is not set (the PlainLoginModule with its user_<name>=\"<password>\" options)", l.Name, m, key)
			case !ok && m == sasl.MechanismOAuthBearer:
				return nil, fmt.Errorf("listener %s enables %s but %s is not set (the OAuthBearerLoginModule)", l.Name, m, key)
			case ok:
				jaas, err := sasl.ParseJAAS(text)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				if m == sasl.MechanismOAuthBearer {
					if jaas.LoginModule != sasl.OAuthBearerLoginModule {
						return nil, fmt.Errorf("%s: login module %s is not %s", key, jaas.LoginModule, sasl.OAuthBearerLoginModule)
					}
					if oauth, err = oauthBearerValidator(cfg, l.Name, jaas, log); err != nil {
						return nil, err
					}
				} else if m == sasl.MechanismPlain {
					if users[m], err = sasl.PlainUsersFromJAAS(jaas); err != nil {
						return nil, fmt.Errorf("%s: %w", key, err)
					}
				} else if jaas.LoginModule != sasl.ScramLoginModule {
					return nil, fmt.Errorf("%s: login module %s is not %s", key, jaas.LoginModule, sasl.ScramLoginModule)
				}
			}
			mechs = append(mechs, m)
		}
		if len(mechs) == 0 {
			return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", l.Name)
		}
		if slices.Contains(cfg.ControllerListenerNames, l.Name) {
			if err := checkInternodeMechanism(cfg, l.Name, "sasl.mechanism.controller.protocol", mechs); err != nil {
				return nil, err
			}
		}
		if isBroker && l.Name == cfg.InterBrokerListenerName {
			if err := checkInternodeMechanism(cfg, l.Name, "sasl.mechanism.inter.broker.protocol", mechs); err != nil {
				return nil, err
			}
		}
		maxReauth := map[string]time.Duration{}
		for _, m := range mechs {
			maxReauth[m] = cfg.ConnectionsMaxReauth
			key := strings.ToLower(m) + ".connections.max.reauth.ms"
			if v, ok := listenerSetting(cfg.SASL, l.Name, key, false); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("listener.name.%s.%s=%s: not a number of milliseconds from 0", strings.ToLower(l.Name), key, v)
				}
				maxReauth[m] = time.Duration(n) * time.Millisecond
			}
			if maxReauth[m] > 0 {
				log.Info("SASL clients re-authenticate on their connections (connections.max.reauth.ms)", "listener", l.Name, "mechanism", m, "max", maxReauth[m])
			}
		}
		out[l.Name] = &network.SASLListener{
			Mechanisms: mechs,
			MaxReauth:  maxReauth,
			Start: func(m string) network.SASLExchange {
				switch m {
				case sasl.MechanismPlain:
					return plainExchange{users[m]}
				case sasl.MechanismOAuthBearer:
					return &oauthExchange{server: sasl.OAuthBearerServer{Validator: oauth, Now: time.Now}}
				}
				return newScramExchange(m, scram, tokens)
			},
		}
	}
	return out, nil
}

// plainExchange is a connection's SASL/PLAIN exchange: one message.
type plainExchange struct{ users sasl.PlainUsers }

func (e plainExchange) Next(msg []byte) ([]byte, bool, string, error) {
	user, err := e.users.AuthenticatePlain(msg)
	if err != nil {
		return nil, false, "", saslFailure{sasl.MechanismPlain, err}
	}
	return nil, true, user, nil
}

// oauthExchange is a connection's SASL/OAUTHBEARER exchange: one message.
// Its token's expiry bounds the session when re-authentication is on
// (network.SASLCredentialExpiry).
type oauthExchange struct {
	server  sasl.OAuthBearerServer
	expires time.Time
}

func (e *oauthExchange) Next(msg []byte) ([]byte, bool, string, error) {
	tok, err := e.server.Next(msg)
	if err != nil {
		return nil, false, "", saslFailure{sasl.MechanismOAuthBearer, err}
	}
	e.expires = tok.Expires
	return nil, true, tok.Principal, nil
}

// Expiry is when the token expires.
func (e *oauthExchange) Expiry() time.Time { return e.expires }

// Kafka's OAUTHBEARER server callback handlers.
const (
	oauthValidatorHandler       = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	oauthValidatorHandlerLegacy = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler" // before Kafka 3.8
	oauthUnsecuredHandler       = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"

	// Kafka 4.1's JWT validators of OAuthBearerValidatorCallbackHandler.
	oauthJWTValidatorDefault = "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator"
	oauthJWTValidatorBroker  = "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"
)

// Kafka's defaults of the sasl.oauthbearer.* settings oauthBearerValidator
// reads (DescribeConfigs reports them too: securityConfigDefaults).
const (
	oauthJWKSRefreshMs         = 3_600_000
	oauthJWKSRetryBackoffMs    = 100
	oauthJWKSRetryBackoffMaxMs = 10_000
	oauthSubClaim              = "sub"
	oauthScopeClaim            = "scope"
	oauthClockSkewSeconds      = 30
)

// oauthBearerValidator builds listener's OAUTHBEARER validator from its
// server callback handler and, for Kafka's OAuthBearerValidatorCallbackHandler,
// the sasl.oauthbearer.* settings (each also listener- and
// mechanism-prefixed, listener.name.<listener>.oauthbearer.sasl.oauthbearer.*,
// as Kafka reads a callback handler's settings), with Kafka's defaults.
func oauthBearerValidator(cfg *Config, listener string, jaas sasl.JAASConfig, log hclog.Logger) (sasl.OAuthBearerValidator, error) {
	handler, _ := listenerSetting(cfg.SASL, listener, "oauthbearer.sasl.server.callback.handler.class", false)
	handlerKey := "listener.name." + strings.ToLower(listener) + ".oauthbearer.sasl.server.callback.handler.class"
	switch strings.TrimSpace(handler) {
	case "", oauthUnsecuredHandler:
		v, err := sasl.UnsecuredValidatorFromJAAS(jaas)
		if err != nil {
			return nil, fmt.Errorf("listener.name.%s.oauthbearer.sasl.jaas.config: %w", strings.ToLower(listener), err)
		}
		log.Warn("OAUTHBEARER takes unsecured (unsigned) tokens on this listener, as Kafka's default handler does: for development only; "+
			"set "+handlerKey+"="+oauthValidatorHandler+" and sasl.oauthbearer.jwks.endpoint.url for signed ones", "listener", listener)
		return v, nil
	case oauthValidatorHandler, oauthValidatorHandlerLegacy:
	default:
		return nil, fmt.Errorf("%s=%s: custom callback handlers are not supported (%s and Kafka's unsecured default are)", handlerKey, handler, oauthValidatorHandler)
	}
	setting := func(key string) (string, string) { return oauthSetting(cfg, listener, key) }
	// Kafka 4.1's sasl.oauthbearer.jwt.validator.class (KIP-1139): its
	// default and the broker's validator are what follows; another, a
	// custom class, is refused rather than silently not used.
	switch v, name := setting("sasl.oauthbearer.jwt.validator.class"); v {
	case "", oauthJWTValidatorDefault, oauthJWTValidatorBroker:
	default:
		return nil, fmt.Errorf("%s=%s: custom JWT validators are not supported (%s and %s are)", name, v, oauthJWTValidatorDefault, oauthJWTValidatorBroker)
	}
	millis := func(key string, def int64) (time.Duration, error) {
		v, name := setting(key)
		if v == "" {
			return time.Duration(def) * time.Millisecond, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%s: not a number of milliseconds from 0", name, v)
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	url, urlKey := setting("sasl.oauthbearer.jwks.endpoint.url")
	if url == "" {
		return nil, fmt.Errorf("%s=%s needs sasl.oauthbearer.jwks.endpoint.url (the identity provider's JWKS: https://..., or file:/path)", handlerKey, handler)
	}
	hc, err := sasl.OAuthHTTPClient(jaas.Options)
	if err != nil {
		return nil, fmt.Errorf("listener.name.%s.oauthbearer.sasl.jaas.config: %w", strings.ToLower(listener), err)
	}
	fetch, err := jwksFetcher(url, hc)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", urlKey, url, err)
	}
	cache := &sasl.JWKSCache{Fetch: fetch, Timeout: 10 * time.Second,
		Log: func(msg string, args ...any) { log.Info(msg, append(args, "listener", listener, "url", url)...) }}
	if cache.Refresh, err = millis("sasl.oauthbearer.jwks.endpoint.refresh.ms", oauthJWKSRefreshMs); err != nil {
		return nil, err
	}
	if cache.Backoff, err = millis("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", oauthJWKSRetryBackoffMs); err != nil {
		return nil, err
	}
	if cache.MaxBackoff, err = millis("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", oauthJWKSRetryBackoffMaxMs); err != nil {
		return nil, err
	}
	v := &sasl.JWTValidator{Keys: cache, SubClaim: oauthSubClaim, ScopeClaim: oauthScopeClaim, ClockSkew: oauthClockSkewSeconds * time.Second}
	if s, _ := setting("sasl.oauthbearer.sub.claim.name"); s != "" {
		v.SubClaim = s
	}
	if s, _ := setting("sasl.oauthbearer.scope.claim.name"); s != "" {
		v.ScopeClaim = s
	}
	v.Issuer, _ = setting("sasl.oauthbearer.expected.issuer")
	if s, _ := setting("sasl.oauthbearer.expected.audience"); s != "" {
		for a := range strings.SplitSeq(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				v.Audience = append(v.Audience, a)
			}
		}
	}
	if s, name := setting("sasl.oauthbearer.clock.skew.seconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%s: not a number of seconds from 0", name, s)
		}
		v.ClockSkew = time.Duration(n) * time.Second
	}
	log.Info("OAUTHBEARER validates signed tokens against the identity provider's JWKS", "listener", listener, "url", url,
		"issuer", v.Issuer, "audience", v.Audience, "sub_claim", v.SubClaim)
	return v, nil
}

// oauthSetting is an OAUTHBEARER setting of listener, as Kafka reads a
// callback handler's: listener.name.<listener>.oauthbearer.<key>, else
// <key>; with the name it was found under.
func oauthSetting(cfg *Config, listener, key string) (value, name string) {
	if v, ok := listenerSetting(cfg.SASL, listener, "oauthbearer."+key, false); ok {
		return strings.TrimSpace(v), "listener.name." + strings.ToLower(listener) + ".oauthbearer." + key
	}
	return strings.TrimSpace(cfg.SASL[key]), key
}

// maxJWKS bounds a JWKS read.
const maxJWKS = 1 << 20

// jwksFetcher reads the JWKS at url: https:// or http:// (GET, 200) with
// hc, or file: (the file; Kafka reads a local JWKS that way too).
func jwksFetcher(url string, hc *http.Client) (func(ctx context.Context) ([]byte, error), error) {
	if path, ok := strings.CutPrefix(url, "file:"); ok {
		path = strings.TrimPrefix(path, "//")
		return func(context.Context) ([]byte, error) {
			b, err := os.ReadFile(path)
			if err == nil && len(b) > maxJWKS {
				err = fmt.Errorf("more than %d bytes", maxJWKS)
			}
			return b, err
		}, nil
	}
	if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
		return nil, errors.New("not an https://, http:// or file: URL")
	}
	if _, err := neturl.Parse(url); err != nil {
		return nil, err
	}
	return func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKS+1))
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("HTTP %s", resp.Status)
		case len(b) > maxJWKS:
			return nil, fmt.Errorf("more than %d bytes", maxJWKS)
		}
		return b, nil
	}, nil
}

// saslCatchUpWait bounds how long a SCRAM exchange waits for its broker to
// catch up with the metadata log before it looks the user up anyway.
const saslCatchUpWait = 30 * time.Second

// scramSource looks a user's SCRAM credential for a mechanism up.
type scramSource func(mechanism, user string) (sasl.ScramCredential, bool)

// scramFromImage looks credentials up in the image image returns.
func scramFromImage(image func() *metadata.Image) scramSource {
	return func(mechanism, user string) (sasl.ScramCredential, bool) {
		return imageScram(image(), mechanism, user)
	}
}

func imageScram(img *metadata.Image, mechanism, user string) (sasl.ScramCredential, bool) {
	c, ok := img.ScramCredential(user, metadata.ScramMechanismFromName(mechanism))
	return sasl.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, ok
}

// scramExchange is a connection's SASL/SCRAM exchange: two messages, the
// user's credential looked up at the first.
type scramExchange struct {
	mechanism string
	server    *sasl.ScramServer
}

func newScramExchange(mechanism string, scram scramSource, tokens tokenSource) *scramExchange {
	lookup := func(user string) (sasl.ScramCredential, bool) { return scram(mechanism, user) }
	// Only SCRAM mechanisms reach here: loadNodeSASL enabled no other.
	server, _ := sasl.NewScramServer(mechanism, lookup)
	if tokens != nil {
		server.SetTokenLookup(func(id string) (sasl.ScramToken, bool) { return tokens(mechanism, id) })
	}
	return &scramExchange{mechanism, server}
}

// TokenAuthenticated implements network.SASLTokenAuthenticated.
func (e *scramExchange) TokenAuthenticated() bool { return e.server.TokenAuthenticated() }

// Expiry implements network.SASLCredentialExpiry: a delegation token's.
func (e *scramExchange) Expiry() time.Time { return e.server.Expiry() }

// tokenSource looks a delegation token up for SCRAM authentication (nil:
// delegation tokens are disabled).
type tokenSource func(mechanism, tokenID string) (sasl.ScramToken, bool)

// tokenCredentials derives the SCRAM credentials of the delegation tokens
// in the image (their password is the base64 of their HMAC under
// delegation.token.secret.key), once per token and mechanism, as Kafka's
// DelegationTokenCache does: PBKDF2 at 4096 iterations is too slow to
// repeat at every authentication.
type tokenCredentials struct {
	secret string
	image  func() *metadata.Image
	now    func() time.Time
	mu     sync.Mutex
	cache  map[tokenCredentialKey]sasl.ScramCredential
}

type tokenCredentialKey struct{ mechanism, tokenID string }

// newTokenSource is the tokenSource of a node with delegation tokens
// enabled (a secret key), nil otherwise.
func newTokenSource(secret string, image func() *metadata.Image) tokenSource {
	if secret == "" {
		return nil
	}
	tc := &tokenCredentials{secret: secret, image: image, now: time.Now, cache: map[tokenCredentialKey]sasl.ScramCredential{}}
	return tc.lookup
}

// lookup finds a token that has not expired and its credential.
func (tc *tokenCredentials) lookup(mechanism, id string) (sasl.ScramToken, bool) {
	img := tc.image()
	t, ok := img.DelegationToken(id)
	if !ok || t.Expired(tc.now()) {
		return sasl.ScramToken{}, false
	}
	_, owner := splitPrincipal(t.Owner)
	tok := sasl.ScramToken{Owner: owner, Expiry: time.UnixMilli(t.ExpirationTimestamp)}
	k := tokenCredentialKey{mechanism, id}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if c, ok := tc.cache[k]; ok {
		tok.Credential = c
		return tok, true
	}
	c, err := sasl.NewScramCredential(mechanism, metadata.DelegationTokenPassword(tc.secret, id), sasl.ScramMinIterations)
	if err != nil {
		return sasl.ScramToken{}, false
	}
	if len(tc.cache) >= 2*len(img.DelegationTokens())+16 {
		for k := range tc.cache { // forget the tokens gone
			if _, ok := img.DelegationToken(k.tokenID); !ok {
				delete(tc.cache, k)
			}
		}
	}
	tc.cache[k] = c
	tok.Credential = c
	return tok, true
}

func (e *scramExchange) Next(msg []byte) ([]byte, bool, string, error) {
	answer, done, user, err := e.server.Next(msg)
	if err != nil {
		return nil, false, "", saslFailure{e.mechanism, err}
	}
	return answer, done, user, nil
}

// saslFailure is a failed exchange: the network layer logs the error and
// tells the client only its ClientMessage, as Kafka's broker does (not
// whether the user exists).
type saslFailure struct {
	mechanism string
	err       error
}

func (f saslFailure) Error() string         { return f.err.Error() }
func (f saslFailure) Unwrap() error         { return f.err }
func (f saslFailure) ClientMessage() string { return sasl.ClientMessage(f.mechanism, f.err) }
