package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/keelstream/keel/network/sasl"
)

// Nodes authenticate to each other's SASL listeners as Kafka's brokers do:
//
//   - sasl.mechanism.inter.broker.protocol is the mechanism for the
//     inter-broker listener (replica fetchers, transaction markers, and in
//     Keel a controller's Raft to broker observers);
//     sasl.mechanism.controller.protocol the one for the controller
//     listener (a broker's registration, heartbeats and forwarded admin
//     requests, the controllers' Raft). Kafka's default for both, GSSAPI,
//     is not supported, so a node that dials a SASL listener must set the
//     one it uses. PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER
//     are supported.
//   - The node's own user name and password are the username and password
//     options of that listener's
//     listener.name.<listener>.<mechanism>.sasl.jaas.config: the
//     PlainLoginModule entry whose user_<name> options list the users a
//     PLAIN listener accepts, or the ScramLoginModule. A SCRAM user must
//     exist in the cluster's metadata (keel format --add-scram for the
//     first nodes, as Kafka's kafka-storage format --add-scram).
//     OAUTHBEARER logs in with the listener's OAuthBearerLoginModule
//     (oauthInternodeMechanism).
//   - The connection authenticates right after it is opened (after TLS
//     on SASL_SSL), with SaslHandshake v1 and SaslAuthenticate, and Raft
//     connections then send their marker (network.Config.HandoffRaft).
//   - With connections.max.reauth.ms, a connection is replaced by a new,
//     freshly authenticated one once 85 % of its session has passed,
//     before the listener would close it.
//   - A node that receives the connection authorizes its principal as any
//     other: CLUSTER_ACTION on the cluster with an authorizer, so the
//     nodes' user is normally in super.users.

// internodeRoles names, per setting, what a node dials with it.
var internodeRoles = map[string]string{
	"sasl.mechanism.inter.broker.protocol": "the inter-broker listener (inter.broker.listener.name)",
	"sasl.mechanism.controller.protocol":   "the controller listener (controller.listener.names)",
}

// internodeMechanism is the SASL mechanism and credentials this node dials
// listener with; mechanismKey is sasl.mechanism.inter.broker.protocol or
// sasl.mechanism.controller.protocol.
func internodeMechanism(cfg *Config, listener, mechanismKey string, log hclog.Logger) (franzsasl.Mechanism, error) {
	m := strings.ToUpper(strings.TrimSpace(cfg.SASL[mechanismKey]))
	switch {
	case m == "" || m == "GSSAPI":
		return nil, fmt.Errorf("listener %s, %s, is SASL: set %s (Kafka's default, GSSAPI, is not supported; PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)",
			listener, internodeRoles[mechanismKey], mechanismKey)
	case m == sasl.MechanismOAuthBearer:
		return oauthInternodeMechanism(cfg, listener, mechanismKey, log)
	case m != sasl.MechanismPlain && !sasl.IsScram(m):
		return nil, fmt.Errorf("%s=%s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)", mechanismKey, m)
	}
	module := sasl.ScramLoginModule
	if m == sasl.MechanismPlain {
		module = sasl.PlainLoginModule
	}
	key := "listener.name." + strings.ToLower(listener) + "." + strings.ToLower(m) + ".sasl.jaas.config"
	text, ok := listenerSetting(cfg.SASL, listener, strings.ToLower(m)+".sasl.jaas.config", false)
	if !ok {
		return nil, fmt.Errorf(`%s=%s needs %s=%s required username="..." password="...";: the user this node authenticates as`, mechanismKey, m, key, module)
	}
	jaas, err := sasl.ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if jaas.LoginModule != module {
		return nil, fmt.Errorf("%s: login module %s is not %s", key, jaas.LoginModule, module)
	}
	user, pass := jaas.Options["username"], jaas.Options["password"]
	if user == "" || pass == "" {
		return nil, fmt.Errorf(`%s: %s=%s needs the username and password options, the user this node authenticates as`, key, mechanismKey, m)
	}
	switch m {
	case sasl.MechanismPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// oauthInternodeMechanism is OAUTHBEARER to listener, as Kafka's brokers
// log in to each other with the OAuthBearerLoginModule of
// listener.name.<listener>.oauthbearer.sasl.jaas.config
// (sasl.NewOAuthBearerLogin): with clientId and clientSecret, tokens from
// sasl.oauthbearer.token.endpoint.url by the client credentials grant,
// with listener.name.<listener>.oauthbearer.sasl.login.callback.handler.class
// set to Kafka's OAuthBearerLoginCallbackHandler; with
// unsecuredLoginStringClaim_sub, unsigned tokens that only a listener with
// the default, unsecured validator accepts; Kafka 4.1's
// sasl.oauthbearer.client.credentials.* and jwt.retriever.class (the JWT
// bearer grant) too. Each setting may be given unprefixed, or prefixed as
// the JAAS entry is.
func oauthInternodeMechanism(cfg *Config, listener, mechanismKey string, log hclog.Logger) (franzsasl.Mechanism, error) {
	prefix := "listener.name." + strings.ToLower(listener) + ".oauthbearer."
	text, ok := listenerSetting(cfg.SASL, listener, "oauthbearer.sasl.jaas.config", false)
	if !ok {
		return nil, fmt.Errorf(`%s=OAUTHBEARER needs %ssasl.jaas.config=%s required clientId="..." clientSecret="...";`+
			` with sasl.oauthbearer.token.endpoint.url (or unsecuredLoginStringClaim_sub="..." for unsigned tokens): how this node logs in`,
			mechanismKey, prefix, sasl.OAuthBearerLoginModule)
	}
	jaas, err := sasl.ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("%ssasl.jaas.config: %w", prefix, err)
	}
	if jaas.LoginModule != sasl.OAuthBearerLoginModule {
		return nil, fmt.Errorf("%ssasl.jaas.config: login module %s is not %s", prefix, jaas.LoginModule, sasl.OAuthBearerLoginModule)
	}
	login, err := sasl.NewOAuthBearerLogin(jaas.Options, func(key string) string {
		v, _ := oauthSetting(cfg, listener, key)
		return v
	})
	if err != nil {
		return nil, fmt.Errorf("%s=OAUTHBEARER, listener %s: %w", mechanismKey, listener, err)
	}
	login.Log = func(msg string, args ...any) { log.Warn(msg, append(args, "listener", listener)...) }
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		token, err := login.Token(ctx)
		return oauth.Auth{Token: token, Extensions: login.Extensions}, err
	}), nil
}

// checkInternodeMechanism refuses, as Kafka does, a node that serves the
// listener its peers dial with mechanismKey without enabling that
// mechanism on it.
func checkInternodeMechanism(cfg *Config, listener, mechanismKey string, enabled []string) error {
	m := strings.ToUpper(strings.TrimSpace(cfg.SASL[mechanismKey]))
	if m != "" && !slices.Contains(enabled, m) {
		return fmt.Errorf("%s=%s must be one of listener %s's sasl.enabled.mechanisms (%s)", mechanismKey, m, listener, strings.Join(enabled, ","))
	}
	return nil
}

// saslRenewShare is how much of a session passes before a connection is
// replaced: Kafka's clients re-authenticate at 85–95 % of it.
const saslRenewShare = 0.85

// saslConn is a connection authenticated with SASL; renewAt, when set, is
// when it should be replaced (connections.max.reauth.ms).
type saslConn struct {
	net.Conn
	renewAt time.Time
}

// NetConn returns the connection underneath (a *tls.Conn on SASL_SSL).
func (c *saslConn) NetConn() net.Conn { return c.Conn }

// renewDue reports whether the session is close enough to its end for
// the connection to be replaced before its next request.
func (c *saslConn) renewDue(now time.Time) bool {
	return !c.renewAt.IsZero() && !now.Before(c.renewAt)
}

// dialSASL authenticates each connection inner opens with mech.
func dialSASL(inner DialFunc, listener string, mech franzsasl.Mechanism) DialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := inner(ctx, addr)
		if err != nil {
			return nil, err
		}
		lifetime, err := saslLogin(ctx, nc, addr, mech)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("SASL %s authentication to %s (listener %s): %w", mech.Name(), addr, listener, err)
		}
		sc := &saslConn{Conn: nc}
		if lifetime > 0 {
			sc.renewAt = time.Now().Add(time.Duration(float64(lifetime) * saslRenewShare))
		}
		return sc, nil
	}
}

// errSASLFailed wraps a peer's refusal of this node's credentials.
var errSASLFailed = errors.New("authentication refused")

// saslLogin runs SaslHandshake v1 and SaslAuthenticate on a fresh
// connection, bounded by ctx's deadline (30 s without one), and returns
// the session lifetime the peer gave (0: none). The connection is left
// with no deadline.
func saslLogin(ctx context.Context, nc net.Conn, addr string, mech franzsasl.Mechanism) (time.Duration, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	if err := nc.SetDeadline(deadline); err != nil {
		return 0, err
	}
	kc := &kafkaConn{addr: addr, clientID: "keel-node", rd: bufio.NewReaderSize(nc, 4096)}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech.Name()
	r, err := kc.exchange(nc, hs)
	if err != nil {
		return 0, fmt.Errorf("SaslHandshake: %w", err)
	}
	if hr := r.(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		return 0, fmt.Errorf("SaslHandshake: %w (the listener enables %s)", kerr.ErrorForCode(hr.ErrorCode), strings.Join(hr.SupportedMechanisms, ", "))
	}
	host, _, _ := net.SplitHostPort(addr)
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return 0, err
	}
	var lifetime time.Duration
	for done := false; !done; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = msg
		r, err := kc.exchange(nc, req)
		if err != nil {
			return 0, fmt.Errorf("SaslAuthenticate: %w", err)
		}
		ar := r.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			detail := ""
			if ar.ErrorMessage != nil {
				detail = ": " + *ar.ErrorMessage
			}
			return 0, fmt.Errorf("%w: %w%s", errSASLFailed, kerr.ErrorForCode(ar.ErrorCode), detail)
		}
		lifetime = time.Duration(ar.SessionLifetimeMillis) * time.Millisecond
		if done, msg, err = session.Challenge(ar.SASLAuthBytes); err != nil {
			return 0, err
		}
		if done && len(msg) > 0 {
			done = false // one more message, whose answer is empty
			session = finalMessage{}
		}
	}
	if kc.rd.Buffered() != 0 {
		return 0, fmt.Errorf("%d unexpected bytes after SaslAuthenticate", kc.rd.Buffered())
	}
	return lifetime, nc.SetDeadline(time.Time{})
}

// finalMessage is a session whose last client message has been sent: the
// answer ends it.
type finalMessage struct{}

func (finalMessage) Challenge([]byte) (bool, []byte, error) { return true, nil, nil }

// scramUser keys a SCRAM credential by mechanism and user.
type scramUser struct{ mechanism, user string }

// internodeScramCredentials are the SCRAM credentials of the users this
// node authenticates to its peers as (the username and password of its
// internode JAAS configurations), which it accepts from them before it
// has caught up with the metadata log that holds the cluster's
// credentials: that log reaches it over these very connections.
// Misconfigurations are left to internodeMechanism to report.
func internodeScramCredentials(cfg *Config) map[scramUser]sasl.ScramCredential {
	out := map[scramUser]sasl.ScramCredential{}
	add := func(listener, mechanismKey string) {
		m := strings.ToUpper(strings.TrimSpace(cfg.SASL[mechanismKey]))
		if !sasl.IsScram(m) {
			return
		}
		text, ok := listenerSetting(cfg.SASL, listener, strings.ToLower(m)+".sasl.jaas.config", false)
		if !ok {
			return
		}
		jaas, err := sasl.ParseJAAS(text)
		if err != nil || jaas.LoginModule != sasl.ScramLoginModule || jaas.Options["username"] == "" {
			return
		}
		// Kafka's least iteration count: the credential is built once.
		cred, err := sasl.NewScramCredential(m, jaas.Options["password"], 4096)
		if err == nil {
			out[scramUser{m, jaas.Options["username"]}] = cred
		}
	}
	add(cfg.InterBrokerListenerName, "sasl.mechanism.inter.broker.protocol")
	if len(cfg.ControllerListenerNames) > 0 {
		add(cfg.ControllerListenerNames[0], "sasl.mechanism.controller.protocol")
	}
	return out
}
