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
//     the Handler, which lists SaslHandshake and SaslAuthenticate:
//     SASLApiVersions), SaslHandshake and SaslAuthenticate (answered
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
//     goes to the Handler; SaslHandshake or SaslAuthenticate again is
//     ILLEGAL_SASL_STATE (re-authentication, KIP-368, is not offered:
//     SessionLifetimeMillis is 0).

// SASLListener is the SASL side of a SASL_PLAINTEXT or SASL_SSL listener.
type SASLListener struct {
	// Mechanisms are the enabled mechanisms (sasl.enabled.mechanisms).
	Mechanisms []string
	// Start begins one connection's exchange of mechanism, one of
	// Mechanisms.
	Start func(mechanism string) SASLExchange
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
	exchange      SASLExchange // set by the handshake
	raw           bool         // SaslHandshake v0: tokens come as bare frames
	authenticated bool
}

var errSASLState = errors.New("request before SASL authentication")

// saslStep serves a request on a SASL listener that the network answers
// itself or refuses: handled is false for a request the Handler serves
// (ApiVersions at any time, anything once authenticated). An error closes
// the connection without an answer.
func (c *conn) saslStep(req *Request) (res *Response, handled bool, err error) {
	key := req.Header.APIKey
	switch {
	case key == kmsg.ApiVersions.Int16():
		return nil, false, nil
	case key == kmsg.SASLHandshake.Int16():
		r := req.Msg.(*kmsg.SASLHandshakeRequest)
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = slices.Clone(c.sasl.Mechanisms)
		switch {
		case c.saslState.exchange != nil || c.saslState.authenticated:
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return &Response{Msg: resp, CloseConnection: !c.saslState.authenticated}, true, nil
		case !slices.Contains(c.sasl.Mechanisms, r.Mechanism):
			c.bl.authFailed.Add(1)
			c.log.Info("closing connection: SASL mechanism not enabled (failed authentication)", "remote", c.info.RemoteAddr.String(),
				"mechanism", r.Mechanism, "enabled", c.sasl.Mechanisms)
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return &Response{Msg: resp, CloseConnection: true}, true, nil
		}
		c.saslState.exchange = c.sasl.Start(r.Mechanism)
		c.saslState.raw = r.Version == 0
		return &Response{Msg: resp}, true, nil
	case key == kmsg.SASLAuthenticate.Int16():
		r := req.Msg.(*kmsg.SASLAuthenticateRequest)
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if c.saslState.exchange == nil || c.saslState.authenticated || c.saslState.raw {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake, or after authentication")
			return &Response{Msg: resp, CloseConnection: !c.saslState.authenticated}, true, nil
		}
		answer, err := c.saslNext(r.SASLAuthBytes)
		if err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr(saslClientMessage(err))
			return &Response{Msg: resp, CloseConnection: true}, true, nil
		}
		resp.SASLAuthBytes = answer
		return &Response{Msg: resp}, true, nil
	case !c.saslState.authenticated:
		return nil, true, fmt.Errorf("%w: %s", errSASLState, kmsg.NameForKey(key))
	}
	return nil, false, nil
}

// saslRawToken serves one bare SASL token after SaslHandshake v0: the
// exchange's answer goes back as a bare frame. A failure closes the
// connection without an answer.
func (c *conn) saslRawToken(frame []byte) error {
	answer, err := c.saslNext(frame)
	if err != nil {
		return err
	}
	p := &pending{req: Request{Conn: c.info, Received: time.Now(), Size: int32(len(frame))}}
	p.resp = &Response{saslToken: answer, rawToken: true}
	if !c.writeReady(p) {
		c.q.push(p)
	}
	return nil
}

// saslNext gives the exchange the client's next message and returns the
// answer; once the exchange is done the connection is authenticated as
// its user. A failure is counted and logged; the caller answers and
// closes.
func (c *conn) saslNext(msg []byte) ([]byte, error) {
	answer, done, user, err := c.saslState.exchange.Next(msg)
	if err != nil {
		c.bl.authFailed.Add(1)
		c.log.Info("closing connection: SASL authentication failed (failed authentication)", "remote", c.info.RemoteAddr.String(), "error", err)
		return nil, err
	}
	if done {
		c.bl.authOK.Add(1)
		c.saslState = saslState{authenticated: true}
		c.info.Principal = "User:" + user
		c.log.Debug("SASL authentication succeeded", "principal", c.info.Principal)
	}
	return answer, nil
}
