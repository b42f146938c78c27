package sasl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// MechanismPlain is the PLAIN mechanism's name in SaslHandshake and
// sasl.enabled.mechanisms.
const MechanismPlain = "PLAIN"

// PlainLoginModule is the class name of Kafka's PLAIN login module, whose
// user_<name>="<password>" options are a broker's PLAIN users.
const PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// plainUserPrefix starts the options of a PlainLoginModule entry that
// define users (Kafka's PlainServerCallbackHandler.JAAS_USER_PREFIX).
const plainUserPrefix = "user_"

// maxPlainMessage bounds a PLAIN client message: RFC 4616 asks servers to
// accept 255 octets for each of its three fields; this allows 16 times that
// per field, plenty for API keys and generated secrets, and bounds the work
// an unauthenticated client can ask for.
const maxPlainMessage = 4096

var (
	// ErrAuthenticationFailed is wrapped by the errors of AuthenticatePlain
	// for a bad credential: an unknown user or a wrong password. Its text
	// is Kafka's message for the client, which does not tell one from the
	// other.
	ErrAuthenticationFailed = errors.New("Authentication failed: Invalid username or password")
	// ErrAuthorizationIDMismatch is wrapped by the error of
	// AuthenticatePlain for a client that authenticated but asked to act
	// as another user (an authorization id that is neither empty nor its
	// user name). Its text is Kafka's message for the client.
	ErrAuthorizationIDMismatch = errors.New("Authentication failed: Client requested an authorization id that is different from username")
	// ErrInvalidPlainMessage is wrapped by the errors of AuthenticatePlain
	// for a message that is not a PLAIN message: not three NUL-separated
	// fields, an empty user name or password, not UTF-8, too long.
	ErrInvalidPlainMessage = errors.New("invalid SASL/PLAIN message")
)

// ClientMessage is the error message a broker puts in its
// SASL_AUTHENTICATION_FAILED (58) SaslAuthenticate answer to a failed
// exchange of mechanism, err being what the mechanism returned (the broker
// logs err itself; it may say more than a client should learn).
//
// As Kafka's SaslServerAuthenticator: the errors a mechanism raises for the
// client (ErrAuthenticationFailed, ErrAuthorizationIDMismatch) give their
// own text; an invalid OAUTHBEARER token RFC 7628's error JSON
// (InvalidTokenError); any other failure gives Kafka's generic "Authentication failed
// during authentication due to invalid credentials with SASL mechanism
// <mechanism>".
func ClientMessage(mechanism string, err error) string {
	var invalid *InvalidTokenError
	switch {
	case errors.As(err, &invalid):
		return invalid.ClientMessage()
	case errors.Is(err, ErrAuthenticationFailed):
		return ErrAuthenticationFailed.Error()
	case errors.Is(err, ErrAuthorizationIDMismatch):
		return ErrAuthorizationIDMismatch.Error()
	default:
		return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
	}
}

// PlainUsers are the users of a listener's PLAIN login module, user name to
// password: its user_<name>="<password>" options (Kafka's PlainLoginModule
// on a broker, checked by PlainServerCallbackHandler).
type PlainUsers map[string]string

// String lists the user names only, so that logging PlainUsers does not
// leak passwords.
func (u PlainUsers) String() string {
	names := make([]string, 0, len(u))
	for name := range u {
		names = append(names, name)
	}
	sort.Strings(names)
	return "PlainUsers[" + strings.Join(names, " ") + "]"
}

// PlainUsersFromJAAS takes the user_<name> options of a PlainLoginModule
// entry (its username and password options are the broker's own
// credentials for inter-broker connections, not users). An error if the
// login module is not org.apache.kafka.common.security.plain.PlainLoginModule.
// An entry without user_ options gives no users: every client is refused.
func PlainUsersFromJAAS(c JAASConfig) (PlainUsers, error) {
	if c.LoginModule != PlainLoginModule {
		return nil, fmt.Errorf("sasl %s: login module %s is not %s", MechanismPlain, c.LoginModule, PlainLoginModule)
	}
	users := PlainUsers{}
	for k, v := range c.Options {
		if name, ok := strings.CutPrefix(k, plainUserPrefix); ok {
			users[name] = v
		}
	}
	return users, nil
}

// AuthenticatePlain checks one PLAIN client message (the SaslAuthenticate
// bytes: [authzid] NUL authcid NUL passwd, RFC 4616) and returns the
// authenticated user name.
//
// As Kafka's PlainSaslServer: the message must have exactly three fields,
// a non-empty user name and password, and the user's password; then an
// authorization id, when not empty, must equal the user name. Errors wrap
// ErrInvalidPlainMessage, ErrAuthenticationFailed or
// ErrAuthorizationIDMismatch; they never contain the password. Answer any
// of them with SASL_AUTHENTICATION_FAILED and ClientMessage(MechanismPlain,
// err), and close the connection.
//
// The password check does not depend on where or whether the passwords
// differ, nor on whether the user exists: the given and the expected
// password (for an unknown user, the given one again) are hashed with
// SHA-256 and the digests compared with crypto/subtle, so lengths do not
// show either. The one difference left is hashing a stored password longer
// than 55 bytes (more than one SHA-256 block) instead of the given one.
func (u PlainUsers) AuthenticatePlain(msg []byte) (user string, err error) {
	if len(msg) > maxPlainMessage {
		return "", fmt.Errorf("sasl %s: %w: %d bytes, more than %d", MechanismPlain, ErrInvalidPlainMessage, len(msg), maxPlainMessage)
	}
	if n := bytes.Count(msg, []byte{0}); n != 2 {
		return "", fmt.Errorf("sasl %s: %w: expected 3 NUL-separated tokens, got %d", MechanismPlain, ErrInvalidPlainMessage, n+1)
	}
	if !utf8.Valid(msg) {
		return "", fmt.Errorf("sasl %s: %w: not valid UTF-8", MechanismPlain, ErrInvalidPlainMessage)
	}
	authzid, rest, _ := bytes.Cut(msg, []byte{0})
	authcid, passwd, _ := bytes.Cut(rest, []byte{0})
	if len(authcid) == 0 {
		return "", fmt.Errorf("sasl %s: %w: username not specified", MechanismPlain, ErrInvalidPlainMessage)
	}
	if len(passwd) == 0 {
		return "", fmt.Errorf("sasl %s: %w: password not specified", MechanismPlain, ErrInvalidPlainMessage)
	}
	user = string(authcid)

	// An unknown user is checked against the given password itself, so it
	// costs the same two hashes and one comparison as a known one; known
	// then refuses it whatever the comparison says.
	want, ok := u[user]
	known := 0
	if ok {
		known = 1
	} else {
		want = string(passwd)
	}
	got := sha256.Sum256(passwd)
	exp := sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(got[:], exp[:])&known != 1 {
		if ok {
			return "", fmt.Errorf("sasl %s: user %q: wrong password: %w", MechanismPlain, user, ErrAuthenticationFailed)
		}
		return "", fmt.Errorf("sasl %s: unknown user %q: %w", MechanismPlain, user, ErrAuthenticationFailed)
	}

	if len(authzid) != 0 && string(authzid) != user {
		return "", fmt.Errorf("sasl %s: user %q asked for authorization id %q: %w", MechanismPlain, user, authzid, ErrAuthorizationIDMismatch)
	}
	return user, nil
}
