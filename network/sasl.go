package network

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASL on SASL_PLAINTEXT and SASL_SSL listeners, as Kafka's
// SaslServerAuthenticator serves it:
//
//   - Before a connection has authenticated, it may send ApiVersions (to
//     the Handler, which lists SaslHandshake and SaslAuthenticate, at
//     SASLApiVersions' versions), SaslHandshake and SaslAuthenticate (answered
//     here). Any other request closes the connection, as Kafka's
//     "Unexpected Kafka request of type ... during SASL handshake" does.
//   - SaslHandshake names the mechanism: one the listener does not
//     enable is UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the
//     connection closes.
//   - After SaslHandshake v1, SaslAuthenticate requests carry the
//     mechanism's messages: a failed authentication is
//     SASL_AUTHENTICATION_FAILED with what the client may learn, and the
//     connection closes once it is sent.
//   - After SaslHandshake v0 (before KIP-152; kafka-python 2.0 still
//     uses it) the tokens follow as bare size-prefixed frames, answered
//     the same way; a failed authentication closes the connection without
//     an answer, as Kafka does.
//   - Once authenticated, the principal is User:<name> and every request
//     goes to the Handler.
//   - Re-authentication (KIP-368): with connections.max.reauth.ms
//     (SASLListener.MaxReauth) above zero, a client that authenticated
//     with SaslAuthenticate v1 or later is told a session lifetime, at
//     most that long and no longer than its credential lasts (an
//     OAUTHBEARER token's exp: SASLCredentialExpiry). It re-authenticates
//     on the same connection, SaslHandshake v1 then SaslAuthenticate,
//     with the same mechanism and as the same principal, before the
//     session expires; a connection used for anything else after its
//     session expired is closed, as Kafka's "expired-connections-killed".
//     A failed re-authentication closes the connection. Without it (the
//     default), SaslHandshake or SaslAuthenticate again is
//     ILLEGAL_SASL_STATE and sessions do not expire; neither do those of
//     clients on SaslAuthenticate v0, which cannot re-authenticate.

// SASLListener is the SASL side of a SASL_PLAINTEXT or SASL_SSL listener.
type SASLListener struct {
	// Mechanisms are the enabled mechanisms (sasl.enabled.mechanisms).
	Mechanisms []string
	// Start begins one connection's exchange of mechanism, one of
	// Mechanisms.
	Start func(mechanism string) SASLExchange
	// MaxReauth is connections.max.reauth.ms by mechanism: the longest
	// session a client that authenticated with it gets before it must
	// re-authenticate (KIP-368). Zero or absent: sessions do not expire.
	MaxReauth map[string]time.Duration
}

// SASLCredentialExpiry is implemented by an exchange whose credential
// expires, an OAUTHBEARER token or a delegation token: once the exchange
// is done, Expiry is when (zero: never). With re-authentication on, a
// session ends then at the latest.
type SASLCredentialExpiry interface {
	Expiry() time.Time
}

// SASLTokenAuthenticated is implemented by an exchange that may
// authenticate with a delegation token (SCRAM's tokenauth=true): once it
// is done, TokenAuthenticated says whether it did
// (ConnInfo.TokenAuthenticated).
type SASLTokenAuthenticated interface {
	TokenAuthenticated() bool
}

// SASLExchange is one connection's SASL exchange, broker side.
type SASLExchange interface {
	// Next takes the client's next message and returns the answer to
	// send; done, with the authenticated user's name, once the exchange
	// has succeeded. An error fails the authentication: it is logged, and
	// the client gets SASL_AUTHENTICATION_FAILED with the error's
	// ClientMessage() if it has one (what the client may learn: not
	// whether the user exists), a generic message otherwise.
	Next(clientMessage []byte) (serverMessage []byte, done bool, user string, err error)
}

// saslClientMessage is the message a failed exchange's error gives the
// client.
func saslClientMessage(err error) string {
	var m interface{ ClientMessage() string }
	if errors.As(err, &m) {
		return m.ClientMessage()
	}
	return "Authentication failed"
}

// The versions of the SASL APIs served on SASL listeners.
const (
	saslHandshakeMin, saslHandshakeMax       = 0, 1
	saslAuthenticateMin, saslAuthenticateMax = 0, 2
)

// SASLApiVersions are the ApiVersions entries of SaslHandshake and
// SaslAuthenticate, which a Handler lists on SASL listeners
// (ConnInfo.SecurityProtocol.IsSASL).
func SASLApiVersions() []kmsg.ApiVersionsResponseApiKey {
	hs, auth := kmsg.NewApiVersionsResponseApiKey(), kmsg.NewApiVersionsResponseApiKey()
	hs.ApiKey, hs.MinVersion, hs.MaxVersion = kmsg.SASLHandshake.Int16(), saslHandshakeMin, saslHandshakeMax
	auth.ApiKey, auth.MinVersion, auth.MaxVersion = kmsg.SASLAuthenticate.Int16(), saslAuthenticateMin, saslAuthenticateMax
	return []kmsg.ApiVersionsResponseApiKey{hs, auth}
}

// IsSASL reports whether the protocol authenticates with SASL.
func (p SecurityProtocol) IsSASL() bool { return p == SASLPlaintext || p == SASLSSL }

// saslVersions are the versions the network serves itself on a SASL
// listener; ok false for the keys it leaves to the Handler.
func saslVersions(key int16) (min, max int16, ok bool) {
	switch key {
	case kmsg.SASLHandshake.Int16():
		return saslHandshakeMin, saslHandshakeMax, true
	case kmsg.SASLAuthenticate.Int16():
		return saslAuthenticateMin, saslAuthenticateMax, true
	}
	return 0, 0, false
}

// saslState is a connection's progress through SASL (reader goroutine only).
type saslState struct {
	exchange      SASLExchange // set by the handshake, nil once done
	raw           bool         // SaslHandshake v0: tokens come as bare frames
	authenticated bool
	mechanism     string    // of the exchange, or of the authentication
	version       int16     // of the SaslAuthenticate requests
	expires       time.Time // the session's end (KIP-368); zero: none
	// classifyNext: authentication has just succeeded, and the next byte
	// may start Raft rather than a request (Server.HandoffRaft).
	classifyNext bool
}

// reauthenticating reports whether a re-authentication is under way.
func (s *saslState) reauthenticating() bool { return s.authenticated && s.exchange != nil }

var (
	errSASLState      = errors.New("request before SASL authentication")
	errSessionExpired = errors.New("SASL session expired without re-authentication")
)

// saslStep serves a request on a SASL listener that the network answers
// itself or refuses: handled is false for a request the Handler serves
// (ApiVersions at any time, anything once authenticated). An error closes
// the connection without an answer.
func (c *conn) saslStep(req *Request) (res *Response, handled bool, err error) {
	key := req.Header.APIKey
	st := &c.saslState
	if st.authenticated && !st.expires.IsZero() && !st.reauthenticating() && time.Now().After(st.expires) {
		c.bl.expiredKilled.Add(1)
		c.log.Info("closing connection: its SASL session expired and the client did not re-authenticate (connections.max.reauth.ms)",
			"remote", c.info.RemoteAddr.String(), "principal", c.info.Principal, "expired", st.expires, "api_key", key)
		return nil, true, errSessionExpired
	}
	switch {
	case key == kmsg.ApiVersions.Int16():
		return nil, false, nil
	case key == kmsg.SASLHandshake.Int16():
		r := req.Msg.(*kmsg.SASLHandshakeRequest)
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = slices.Clone(c.sasl.Mechanisms)
		switch {
		case st.authenticated && st.exchange == nil && !st.expires.IsZero():
			// A re-authentication: the same mechanism, over SaslAuthenticate.
			if r.Mechanism != st.mechanism || r.Version == 0 {
				c.bl.reauthFailed.Add(1)
				c.log.Info("closing connection: re-authentication with another mechanism or SaslHandshake v0", "remote", c.info.RemoteAddr.String(),
					"principal", c.info.Principal, "mechanism", r.Mechanism, "authenticated_with", st.mechanism, "version", r.Version)
				resp.ErrorCode = kerr.IllegalSaslState.Code
				return &Response{Msg: resp, CloseConnection: true}, true, nil
			}
			st.exchange = c.sasl.Start(r.Mechanism)
			return &Response{Msg: resp}, true, nil
		case st.exchange != nil || st.authenticated:
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return &Response{Msg: resp, CloseConnection: !st.authenticated}, true, nil
		case !slices.Contains(c.sasl.Mechanisms, r.Mechanism):
			c.bl.authFailed.Add(1)
			c.log.Info("closing connection: SASL mechanism not enabled (failed authentication)", "remote", c.info.RemoteAddr.String(),
				"mechanism", r.Mechanism, "enabled", c.sasl.Mechanisms)
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return &Response{Msg: resp, CloseConnection: true}, true, nil
		}
		st.exchange, st.mechanism = c.sasl.Start(r.Mechanism), r.Mechanism
		st.raw = r.Version == 0
		return &Response{Msg: resp}, true, nil
	case key == kmsg.SASLAuthenticate.Int16():
		r := req.Msg.(*kmsg.SASLAuthenticateRequest)
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if st.exchange == nil || st.raw {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake, or after authentication")
			return &Response{Msg: resp, CloseConnection: !st.authenticated}, true, nil
		}
		st.version = r.Version
		answer, lifetime, err := c.saslNext(r.SASLAuthBytes)
		if err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr(saslClientMessage(err))
			return &Response{Msg: resp, CloseConnection: true}, true, nil
		}
		resp.SASLAuthBytes = answer
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
		return &Response{Msg: resp}, true, nil
	case !st.authenticated:
		return nil, true, fmt.Errorf("%w: %s", errSASLState, kmsg.NameForKey(key))
	}
	return nil, false, nil
}

// saslRawToken serves one bare SASL token after SaslHandshake v0: the
// exchange's answer goes back as a bare frame. A failure closes the
// connection without an answer.
func (c *conn) saslRawToken(frame []byte) error {
	answer, _, err := c.saslNext(frame)
	if err != nil {
		return err
	}
	p := &pending{req: Request{Conn: c.info, Received: time.Now(), Size: int32(len(frame))}, raw: true}
	p.resp = &Response{saslToken: answer, rawToken: true}
	if !c.writeReady(p) {
		c.q.push(p)
	}
	return nil
}

// saslNext gives the exchange the client's next message and returns the
// answer and, once the exchange is done, the session lifetime to tell the
// client (0: none): the connection is then authenticated as its user. A
// re-authentication must end as the same user. A failure is counted and
// logged; the caller answers and closes.
func (c *conn) saslNext(msg []byte) ([]byte, time.Duration, error) {
	st := &c.saslState
	reauth := st.reauthenticating()
	answer, done, user, err := st.exchange.Next(msg)
	if err == nil && done && reauth && "User:"+user != c.info.Principal {
		err = fmt.Errorf("cannot change principals during re-authentication: from %s to User:%s", c.info.Principal, user)
	}
	if err != nil {
		if reauth {
			c.bl.reauthFailed.Add(1)
			c.log.Info("closing connection: SASL re-authentication failed", "remote", c.info.RemoteAddr.String(), "principal", c.info.Principal, "error", err)
		} else {
			c.bl.authFailed.Add(1)
			c.log.Info("closing connection: SASL authentication failed (failed authentication)", "remote", c.info.RemoteAddr.String(), "error", err)
		}
		return nil, 0, err
	}
	if !done {
		return answer, 0, nil
	}
	lifetime := c.sessionLifetime(st.exchange)
	exchange := st.exchange
	st.exchange, st.authenticated, st.raw = nil, true, false
	st.expires = time.Time{}
	if lifetime > 0 {
		st.expires = time.Now().Add(lifetime)
	}
	if reauth {
		c.bl.reauthOK.Add(1)
		c.log.Debug("SASL re-authentication succeeded", "principal", c.info.Principal, "session_lifetime", lifetime)
		return answer, lifetime, nil
	}
	c.bl.authOK.Add(1)
	c.info.Principal = "User:" + user
	if t, ok := exchange.(SASLTokenAuthenticated); ok {
		c.info.TokenAuthenticated = t.TokenAuthenticated()
	}
	st.classifyNext = true
	c.log.Debug("SASL authentication succeeded", "principal", c.info.Principal, "session_lifetime", lifetime)
	return answer, lifetime, nil
}

// sessionLifetime is the session a finished exchange gets (KIP-368's
// calcCompletionTimesAndReturnSessionLifetimeMs): with MaxReauth set for
// its mechanism and a client on SaslAuthenticate v1 or later, that long,
// or until its credential expires if sooner (at least 1 ms, so that the
// client re-authenticates at once); none otherwise.
func (c *conn) sessionLifetime(exchange SASLExchange) time.Duration {
	st := &c.saslState
	limit := c.sasl.MaxReauth[st.mechanism]
	if limit <= 0 || st.raw || st.version < 1 {
		return 0
	}
	if e, ok := exchange.(SASLCredentialExpiry); ok && !e.Expiry().IsZero() {
		if until := time.Until(e.Expiry()); until < limit {
			limit = max(until, time.Millisecond)
		}
	}
	return limit
}
