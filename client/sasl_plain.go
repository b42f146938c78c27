package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// PlainAuth is SASL/PLAIN (RFC 4616) with a user name and password: Kafka's
// sasl.mechanism=PLAIN, the client side of a broker's PlainLoginModule.
// Use it over TLS (security.protocol=SASL_SSL): the password travels in the
// clear otherwise.
//
//	client.SASL(client.PlainAuth{User: "alice", Pass: "alice-secret"})
//
// A PlainAuth is a value and safe for concurrent use; its String does not
// show the password.
type PlainAuth struct {
	// User is the user name (RFC 4616's authcid).
	User string
	// Pass is the user's password.
	Pass string
	// Zid is the authorization id, usually empty. Kafka brokers refuse one
	// that is not empty and not User.
	Zid string
}

// Name is "PLAIN".
func (PlainAuth) Name() string { return "PLAIN" }

// Authenticate returns the one PLAIN message, Zid NUL User NUL Pass. User
// and Pass must not be empty, and none of the three may contain NUL or
// invalid UTF-8.
func (a PlainAuth) Authenticate(ctx context.Context, host string) (SASLSession, []byte, error) {
	if a.User == "" || a.Pass == "" {
		return nil, nil, errors.New("sasl PLAIN: empty user name or password")
	}
	for _, f := range []struct{ name, value string }{
		{"user name", a.User},
		{"password", a.Pass},
		{"authorization id", a.Zid},
	} {
		// NUL separates the fields; an invalid UTF-8 one is not a PLAIN
		// message. The error names the field, never its value.
		if strings.IndexByte(f.value, 0) >= 0 {
			return nil, nil, fmt.Errorf("sasl PLAIN: %s contains NUL", f.name)
		}
		if !utf8.ValidString(f.value) {
			return nil, nil, fmt.Errorf("sasl PLAIN: %s is not valid UTF-8", f.name)
		}
	}
	msg := make([]byte, 0, len(a.Zid)+len(a.User)+len(a.Pass)+2)
	msg = append(msg, a.Zid...)
	msg = append(msg, 0)
	msg = append(msg, a.User...)
	msg = append(msg, 0)
	msg = append(msg, a.Pass...)
	return plainSession{}, msg, nil
}

// String shows the user and authorization id, not the password, so that a
// logged configuration does not leak it.
func (a PlainAuth) String() string {
	return fmt.Sprintf("PlainAuth{User: %q, Pass: [redacted], Zid: %q}", a.User, a.Zid)
}

// GoString is String, for %#v.
func (a PlainAuth) GoString() string { return a.String() }

// plainSession is the exchange after the PLAIN message: the broker's
// answer, empty on success, ends it (a failure comes as the
// SaslAuthenticate error code, before Challenge).
type plainSession struct{}

func (plainSession) Challenge([]byte) (bool, []byte, error) { return true, nil, nil }
