package sasl

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// brokerJAAS is the broker side of Kafka's SASL/PLAIN example.
const brokerJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
	`username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

func testUsers(t *testing.T) PlainUsers {
	t.Helper()
	c, err := ParseJAAS(brokerJAAS)
	if err != nil {
		t.Fatal(err)
	}
	u, err := PlainUsersFromJAAS(c)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPlainUsersFromJAAS(t *testing.T) {
	u := testUsers(t)
	want := PlainUsers{"admin": "admin-secret", "alice": "alice-secret"}
	if !maps.Equal(u, want) {
		t.Fatalf("users %q, want %q", map[string]string(u), map[string]string(want))
	}
	if got := u.String(); got != "PlainUsers[admin alice]" || strings.Contains(got, "secret") {
		t.Fatalf("String() = %q", got)
	}

	none, err := PlainUsersFromJAAS(JAASConfig{LoginModule: PlainLoginModule, Flag: "required", Options: map[string]string{"username": "a", "password": "b"}})
	if err != nil || len(none) != 0 {
		t.Fatalf("no user_ options: %v %v", none, err)
	}
	if _, err := none.AuthenticatePlain([]byte("\x00a\x00b")); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("the broker's own username/password are not a user: %v", err)
	}

	scram, err := ParseJAAS(`org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PlainUsersFromJAAS(scram); err == nil || !strings.Contains(err.Error(), "ScramLoginModule is not org.apache.kafka.common.security.plain.PlainLoginModule") {
		t.Fatalf("SCRAM login module: %v", err)
	}
}

func TestAuthenticatePlainSuccess(t *testing.T) {
	u := testUsers(t)
	for _, msg := range []string{
		"\x00alice\x00alice-secret",
		"alice\x00alice\x00alice-secret", // authzid = user
		"\x00admin\x00admin-secret",
	} {
		user, err := u.AuthenticatePlain([]byte(msg))
		if err != nil {
			t.Fatalf("%q: %v", msg, err)
		}
		if want := strings.Split(msg, "\x00")[1]; user != want {
			t.Fatalf("%q: user %q, want %q", msg, user, want)
		}
	}
}

func TestAuthenticatePlainFailures(t *testing.T) {
	u := testUsers(t)
	u["bob"] = "" // a user with an empty password can never log in
	long := "\x00alice\x00" + strings.Repeat("x", maxPlainMessage)
	for _, tc := range []struct {
		name string
		msg  string
		want error
		text string // in the error
	}{
		{"wrong password", "\x00alice\x00admin-secret", ErrAuthenticationFailed, `user "alice": wrong password`},
		{"password prefix", "\x00alice\x00alice-secre", ErrAuthenticationFailed, "wrong password"},
		{"password extended", "\x00alice\x00alice-secretX", ErrAuthenticationFailed, "wrong password"},
		{"user names are case-sensitive", "\x00Alice\x00alice-secret", ErrAuthenticationFailed, `unknown user "Alice"`},
		{"unknown user", "\x00mallory\x00alice-secret", ErrAuthenticationFailed, `unknown user "mallory"`},
		{"the broker's own username is not a user", "\x00username\x00admin", ErrAuthenticationFailed, "unknown user"},
		{"user with an empty password", "\x00bob\x00x", ErrAuthenticationFailed, "wrong password"},
		{"authzid of another user", "admin\x00alice\x00alice-secret", ErrAuthorizationIDMismatch, `user "alice" asked for authorization id "admin"`},
		{"authzid checked after the password", "alice\x00alice\x00wrong-pw", ErrAuthenticationFailed, "wrong password"},
		{"authzid of another user, wrong password", "admin\x00alice\x00wrong-pw", ErrAuthenticationFailed, "wrong password"},
		{"empty user name", "\x00\x00alice-secret", ErrInvalidPlainMessage, "username not specified"},
		{"empty password", "\x00alice\x00", ErrInvalidPlainMessage, "password not specified"},
		{"empty message", "", ErrInvalidPlainMessage, "expected 3 NUL-separated tokens, got 1"},
		{"no NUL", "alice-secret", ErrInvalidPlainMessage, "got 1"},
		{"one NUL", "alice\x00alice-secret", ErrInvalidPlainMessage, "got 2"},
		{"three NULs", "\x00alice\x00alice-secret\x00", ErrInvalidPlainMessage, "got 4"},
		{"NUL inside the password", "\x00alice\x00alice\x00-secret", ErrInvalidPlainMessage, "got 4"},
		{"invalid UTF-8", "\x00alice\x00alice-secret\xff", ErrInvalidPlainMessage, "not valid UTF-8"},
		{"too long", long, ErrInvalidPlainMessage, "more than 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := u.AuthenticatePlain([]byte(tc.msg))
			if err == nil || user != "" {
				t.Fatalf("authenticated %q", user)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) || !strings.HasPrefix(err.Error(), "sasl PLAIN: ") {
				t.Fatalf("error %q, want it to contain %q", err, tc.text)
			}
			for _, pw := range []string{"alice-secret", "admin-secret", "alice-secre", "wrong-pw"} {
				if strings.Contains(err.Error(), pw) {
					t.Fatalf("error %q contains a password", err)
				}
			}
		})
	}

	var nilUsers PlainUsers
	if _, err := nilUsers.AuthenticatePlain([]byte("\x00alice\x00alice-secret")); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("nil users: %v", err)
	}
}

func TestClientMessage(t *testing.T) {
	u := testUsers(t)
	for _, tc := range []struct{ msg, want string }{
		{"\x00alice\x00wrong-pw", "Authentication failed: Invalid username or password"},
		{"\x00mallory\x00wrong-pw", "Authentication failed: Invalid username or password"},
		{"admin\x00alice\x00alice-secret", "Authentication failed: Client requested an authorization id that is different from username"},
		{"\x00alice\x00", "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"},
		{"garbage", "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"},
	} {
		_, err := u.AuthenticatePlain([]byte(tc.msg))
		if got := ClientMessage(MechanismPlain, err); got != tc.want {
			t.Errorf("%q: client message %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestAuthenticatePlainAcceptsFranzGo checks the messages of franz-go's
// PLAIN client, the SASL/PLAIN of most Go Kafka clients.
func TestAuthenticatePlainAcceptsFranzGo(t *testing.T) {
	u := testUsers(t)
	for _, tc := range []struct {
		auth plain.Auth
		err  error
	}{
		{plain.Auth{User: "alice", Pass: "alice-secret"}, nil},
		{plain.Auth{Zid: "alice", User: "alice", Pass: "alice-secret"}, nil},
		{plain.Auth{User: "admin", Pass: "admin-secret"}, nil},
		{plain.Auth{User: "alice", Pass: "admin-secret"}, ErrAuthenticationFailed},
		{plain.Auth{Zid: "admin", User: "alice", Pass: "alice-secret"}, ErrAuthorizationIDMismatch},
	} {
		session, msg, err := tc.auth.AsMechanism().Authenticate(context.Background(), "broker.example.com")
		if err != nil {
			t.Fatal(err)
		}
		user, err := u.AuthenticatePlain(msg)
		if !errors.Is(err, tc.err) {
			t.Fatalf("%s/%s: %v, want %v", tc.auth.Zid, tc.auth.User, err, tc.err)
		}
		if err != nil {
			continue
		}
		if user != tc.auth.User {
			t.Fatalf("user %q, want %q", user, tc.auth.User)
		}
		// Kafka answers a successful PLAIN exchange with no bytes; the
		// client is then done.
		done, next, err := session.Challenge(nil)
		if !done || next != nil || err != nil {
			t.Fatalf("challenge: %v %q %v", done, next, err)
		}
	}
}
