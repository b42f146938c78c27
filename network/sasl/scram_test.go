package sasl

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	fsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// RFC 7677 §3: SCRAM-SHA-256 for user "user", password "pencil".
const (
	rfc7677ClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfc7677ServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfc7677Salt        = "W22ZaJ0SNY7soEsUEjb6gQ=="
	rfc7677ServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfc7677ClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfc7677ServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
)

// testScramPasswords are the passwords of testScramUsers; no error may
// contain one.
var testScramPasswords = map[string]string{
	"alice":  "alice-secret",
	"admin":  "admin-secret",
	"a,b=c":  "odd-secret",
	"legacy": "legacy-secret",
}

// testScramUsers is a lookup over testScramPasswords (and "legacy", whose
// credential has too few iterations), credentials made once per mechanism.
func testScramUsers(t testing.TB, mechanism string) ScramLookup {
	t.Helper()
	creds := map[string]ScramCredential{}
	for user, pass := range testScramPasswords {
		c, err := NewScramCredential(mechanism, pass, ScramMinIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds[user] = c
	}
	legacy := creds["legacy"]
	legacy.Iterations = 1024
	creds["legacy"] = legacy
	return func(user string) (ScramCredential, bool) {
		c, ok := creds[user]
		return c, ok
	}
}

// testScramClient is a bare RFC 5802 client for messages that real clients
// do not send: it computes the client-final message for any client-first.
type testScramClient struct {
	mechanism string
	pass      string
	gs2       string // gs2 header, e.g. "n,,"
	bare      string // client-first-bare, e.g. "n=alice,r=nonce"
	// noncePrefix goes in front of the nonce in client-final, as
	// librdkafka puts its own nonce there again.
	noncePrefix string
}

func (c testScramClient) first() []byte { return []byte(c.gs2 + c.bare) }

// final answers serverFirst; extensions (",k=v...") go between r= and p=.
// It returns the client-final message and the expected server-final.
func (c testScramClient) final(t testing.TB, serverFirst []byte, extensions string) (clientFinal, serverFinal []byte) {
	t.Helper()
	var nonce, salt64, iters string
	for _, kv := range strings.Split(string(serverFirst), ",") {
		switch kv[:2] {
		case "r=":
			nonce = kv[2:]
		case "s=":
			salt64 = kv[2:]
		case "i=":
			iters = kv[2:]
		}
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil {
		t.Fatalf("server-first %q: %v", serverFirst, err)
	}
	var i int
	fmt.Sscan(iters, &i)
	salted, err := SaltedPassword(c.mechanism, c.pass, salt, i)
	if err != nil {
		t.Fatal(err)
	}
	h := scramHash(c.mechanism)
	clientKey := scramHMAC(h, salted, "Client Key")
	sk := h()
	sk.Write(clientKey)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(c.gs2)) + ",r=" + c.noncePrefix + nonce + extensions
	authMessage := c.bare + "," + string(serverFirst) + "," + withoutProof
	proof := scramHMAC(h, sk.Sum(nil), authMessage)
	for j := range proof {
		proof[j] ^= clientKey[j]
	}
	serverSig := scramHMAC(h, scramHMAC(h, salted, "Server Key"), authMessage)
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)),
		[]byte("v=" + base64.StdEncoding.EncodeToString(serverSig))
}

func newTestScramServer(t testing.TB, mechanism string, lookup ScramLookup) *ScramServer {
	t.Helper()
	s, err := NewScramServer(mechanism, lookup)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkScramError checks that err fails the exchange as want, says what
// it should for the log, tells the client what Kafka would, and shows no
// password.
func checkScramError(t *testing.T, mechanism string, err, want error, text string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	if !strings.Contains(err.Error(), text) || !strings.HasPrefix(err.Error(), "sasl "+mechanism+": ") {
		t.Fatalf("error %q, want it to contain %q", err, text)
	}
	for _, pw := range testScramPasswords {
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("error %q contains a password", err)
		}
	}
	var cm interface{ ClientMessage() string }
	if !errors.As(err, &cm) {
		t.Fatalf("error %v has no ClientMessage", err)
	}
	wantMsg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
	if want == ErrAuthorizationIDMismatch {
		wantMsg = "Authentication failed: Client requested an authorization id that is different from username"
	}
	if got := cm.ClientMessage(); got != wantMsg {
		t.Fatalf("client message %q, want %q", got, wantMsg)
	}
	if got := ClientMessage(mechanism, err); got != wantMsg {
		t.Fatalf("ClientMessage %q, want %q", got, wantMsg)
	}
}

func TestScramRFC7677TestVector(t *testing.T) {
	salt, err := base64.StdEncoding.DecodeString(rfc7677Salt)
	if err != nil {
		t.Fatal(err)
	}
	salted, err := SaltedPassword(MechanismScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := scramCredentialFromSalted(MechanismScramSHA256, salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestScramServer(t, MechanismScramSHA256, func(user string) (ScramCredential, bool) { return cred, user == "user" })
	s.serverNonce = func() string { return rfc7677ServerNonce }

	msg, done, user, err := s.Next([]byte(rfc7677ClientFirst))
	if err != nil || done || user != "" || string(msg) != rfc7677ServerFirst {
		t.Fatalf("server-first %q %v %q %v, want %q", msg, done, user, err, rfc7677ServerFirst)
	}
	msg, done, user, err = s.Next([]byte(rfc7677ClientFinal))
	if err != nil || !done || user != "user" || string(msg) != rfc7677ServerFinal {
		t.Fatalf("server-final %q %v %q %v, want %q", msg, done, user, err, rfc7677ServerFinal)
	}

	// Our test client computes the RFC's client-final too.
	c := testScramClient{MechanismScramSHA256, "pencil", "n,,", "n=user,r=rOprNGfwEbeRWgbNEkqO", ""}
	final, serverFinal := c.final(t, []byte(rfc7677ServerFirst), "")
	if string(final) != rfc7677ClientFinal || string(serverFinal) != rfc7677ServerFinal {
		t.Fatalf("test client: %q %q", final, serverFinal)
	}
}

func TestScramServerSuccess(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		users := testScramUsers(t, mech)
		for _, tc := range []struct {
			name       string
			gs2, bare  string
			pass       string
			finalExts  string
			wantUser   string
			wantPrefix string // of the server-first's nonce
		}{
			{"Kafka's client", "n,,", "n=alice,r=k9q3v8z1", "alice-secret", "", "alice", "r=k9q3v8z1"},
			{"authorization id equal to the user", "n,a=alice,", "n=alice,r=abc", "alice-secret", "", "alice", "r=abc"},
			{"escaped user name", "n,,", "n=a=2Cb=3Dc,r=abc", "odd-secret", "", "a,b=c", "r=abc"},
			{"escaped authorization id", "n,a=a=2Cb=3Dc,", "n=a=2Cb=3Dc,r=abc", "odd-secret", "", "a,b=c", "r=abc"},
			{"printable nonce", "n,,", "n=admin,r=!\"#$%&'()*+-./:;<=>?@[\\]^_`{|}~", "admin-secret", "", "admin", "r=!\"#"},
			{"unknown extensions are ignored", "n,,", "n=alice,r=abc,foo=bar,Baz=q=x", "alice-secret", "", "alice", "r=abc"},
			{"tokenauth=false is not token authentication", "n,,", "n=alice,r=abc,tokenauth=false", "alice-secret", "", "alice", "r=abc"},
			{"extensions in client-final", "n,,", "n=alice,r=abc", "alice-secret", ",foo=bar,p=x", "alice", "r=abc"},
		} {
			t.Run(mech+"/"+tc.name, func(t *testing.T) {
				s := newTestScramServer(t, mech, users)
				c := testScramClient{mech, tc.pass, tc.gs2, tc.bare, ""}
				serverFirst, done, user, err := s.Next(c.first())
				if err != nil || done || user != "" {
					t.Fatalf("client-first: %v %q %v", done, user, err)
				}
				if !strings.HasPrefix(string(serverFirst), tc.wantPrefix) {
					t.Fatalf("server-first %q, want nonce %q...", serverFirst, tc.wantPrefix)
				}
				final, wantFinal := c.final(t, serverFirst, tc.finalExts)
				serverFinal, done, user, err := s.Next(final)
				if err != nil || !done || user != tc.wantUser {
					t.Fatalf("client-final: %v %q %v", done, user, err)
				}
				if !bytes.Equal(serverFinal, wantFinal) {
					t.Fatalf("server-final %q, want %q", serverFinal, wantFinal)
				}
				if _, _, _, err := s.Next(final); !errors.Is(err, ErrInvalidScramMessage) || !strings.Contains(err.Error(), "after the exchange completed") {
					t.Fatalf("a third message: %v", err)
				}
			})
		}
	}
}

// TestScramServerFirstMessage: the server-first message is Kafka's: the
// client nonce, a printable server nonce without commas, the salt, the
// iterations.
func TestScramServerFirstMessage(t *testing.T) {
	cred, err := NewScramCredential(MechanismScramSHA512, "alice-secret", 8192)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 20 {
		s := newTestScramServer(t, MechanismScramSHA512, func(string) (ScramCredential, bool) { return cred, true })
		msg, _, _, err := s.Next([]byte("n,,n=alice,r=client-nonce"))
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(msg), ",")
		if len(parts) != 3 || parts[1] != "s="+base64.StdEncoding.EncodeToString(cred.Salt) || parts[2] != "i=8192" {
			t.Fatalf("server-first %q", msg)
		}
		serverNonce, ok := strings.CutPrefix(parts[0], "r=client-nonce")
		if !ok || len(serverNonce) < 20 || !printableNonce(serverNonce) || seen[serverNonce] {
			t.Fatalf("server nonce %q (seen before: %v)", serverNonce, seen[serverNonce])
		}
		seen[serverNonce] = true
	}
}

func TestScramServerClientFirstFailures(t *testing.T) {
	const mech = MechanismScramSHA256
	users := testScramUsers(t, mech)
	for _, tc := range []struct {
		name string
		msg  string
		want error
		text string
	}{
		{"channel binding y", "y,,n=alice,r=abc", ErrInvalidScramMessage, "channel binding is not supported"},
		{"channel binding p=", "p=tls-unique,,n=alice,r=abc", ErrInvalidScramMessage, "channel binding is not supported"},
		{"no gs2 header", "n=alice,r=abc", ErrInvalidScramMessage, `must start with gs2 header "n,"`},
		{"empty message", "", ErrInvalidScramMessage, `must start with gs2 header "n,"`},
		{"gs2 header with another attribute", "n,x=y,n=alice,r=abc", ErrInvalidScramMessage, `want "n,," or "n,a=<authzid>,"`},
		{"authorization id without comma", "n,a=alice", ErrInvalidScramMessage, "authorization id not followed by ','"},
		{"empty authorization id", "n,a=,n=alice,r=abc", ErrInvalidScramMessage, "empty authorization id"},
		{"bad escape in authorization id", "n,a=al=ice,n=alice,r=abc", ErrInvalidScramMessage, "authorization id: '=' must be followed by 2C or 3D"},
		{"reserved m=", "n,,m=ext,n=alice,r=abc", ErrInvalidScramMessage, "mandatory extension m= is not supported"},
		{"no user name", "n,,r=abc", ErrInvalidScramMessage, "want n=<username>,r=<nonce>"},
		{"user name without nonce", "n,,n=alice", ErrInvalidScramMessage, "want n=<username>,r=<nonce>"},
		{"empty user name", "n,,n=,r=abc", ErrInvalidScramMessage, "empty username"},
		{"lower-case escape", "n,,n=a=2cb,r=abc", ErrInvalidScramMessage, "username: '=' must be followed by 2C or 3D"},
		{"bare '='", "n,,n=a=b,r=abc", ErrInvalidScramMessage, "'=' must be followed by 2C or 3D"},
		{"trailing '='", "n,,n=alice=,r=abc", ErrInvalidScramMessage, "'=' must be followed by 2C or 3D"},
		{"truncated escape", "n,,n=alice=2,r=abc", ErrInvalidScramMessage, "'=' must be followed by 2C or 3D"},
		{"no nonce", "n,,n=alice,s=abc", ErrInvalidScramMessage, "want r=<nonce> after the username"},
		{"empty nonce", "n,,n=alice,r=", ErrInvalidScramMessage, "client nonce is empty or not printable"},
		{"nonce with a space", "n,,n=alice,r=a b", ErrInvalidScramMessage, "client nonce is empty or not printable"},
		{"nonce with DEL", "n,,n=alice,r=ab\x7f", ErrInvalidScramMessage, "client nonce is empty or not printable"},
		{"extension without '='", "n,,n=alice,r=abc,foo", ErrInvalidScramMessage, "extension: want <letters>=<value>"},
		{"extension without key", "n,,n=alice,r=abc,=bar", ErrInvalidScramMessage, "extension: want <letters>=<value>"},
		{"extension without value", "n,,n=alice,r=abc,foo=", ErrInvalidScramMessage, "extension: want <letters>=<value>"},
		{"extension key with a digit", "n,,n=alice,r=abc,f1=x", ErrInvalidScramMessage, "extension: want <letters>=<value>"},
		{"empty extension", "n,,n=alice,r=abc,", ErrInvalidScramMessage, "extension: want <letters>=<value>"},
		{"not ASCII", "n,,n=alïce,r=abc", ErrInvalidScramMessage, "byte 7 is not ASCII or is NUL"},
		{"NUL", "n,,n=alice\x00,r=abc", ErrInvalidScramMessage, "byte 10 is not ASCII or is NUL"},
		{"too long", "n,,n=alice,r=" + strings.Repeat("x", maxScramMessage), ErrInvalidScramMessage, "more than 4096"},
		{"delegation token", "n,,n=alice,r=abc,tokenauth=true", ErrScramAuthenticationFailed, "delegation token authentication (tokenauth=true), which is not enabled"},
		{"delegation token, any case", "n,,n=alice,r=abc,tokenauth=TRUE", ErrScramAuthenticationFailed, "tokenauth=true"},
		{"delegation token, last value wins", "n,,n=alice,r=abc,tokenauth=false,tokenauth=true", ErrScramAuthenticationFailed, "tokenauth=true"},
		{"authorization id of another user", "n,a=admin,n=alice,r=abc", ErrAuthorizationIDMismatch, `user "alice" asked for authorization id "admin"`},
		{"authorization id, unknown user", "n,a=admin,n=mallory,r=abc", ErrAuthorizationIDMismatch, `user "mallory" asked for authorization id "admin"`},
		{"authorization id compared unescaped", "n,a=a=2Cb,n=a=3Db,r=abc", ErrAuthorizationIDMismatch, `user "a=b" asked for authorization id "a,b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestScramServer(t, mech, users)
			msg, done, user, err := s.Next([]byte(tc.msg))
			if msg != nil || done || user != "" {
				t.Fatalf("answer %q %v %q", msg, done, user)
			}
			checkScramError(t, mech, err, tc.want, tc.text)
			// The exchange is over: even a good message is refused.
			if _, _, _, err := s.Next([]byte("n,,n=alice,r=abc")); !errors.Is(err, ErrInvalidScramMessage) || !strings.Contains(err.Error(), "after the exchange failed") {
				t.Fatalf("message after failure: %v", err)
			}
		})
	}
}

func TestScramServerClientFinalFailures(t *testing.T) {
	const mech = MechanismScramSHA512
	users := testScramUsers(t, mech)
	c := testScramClient{mech, "alice-secret", "n,,", "n=alice,r=abc", ""}
	for _, tc := range []struct {
		name  string
		final func(good, nonce string) string // good: a valid client-final
		want  error
		text  string
	}{
		{"wrong channel binding", func(good, _ string) string { return strings.Replace(good, "c=biws", "c=eSws", 1) },
			ErrInvalidScramMessage, "channel binding c= is not the base64 of this exchange's gs2 header"},
		{"channel binding of another gs2 header", func(good, _ string) string {
			return strings.Replace(good, "c=biws", "c="+base64.StdEncoding.EncodeToString([]byte("n,a=alice,")), 1)
		}, ErrInvalidScramMessage, "channel binding c="},
		{"no channel binding", func(good, _ string) string { return strings.TrimPrefix(good, "c=biws,") },
			ErrInvalidScramMessage, "must start with c=<channel binding>"},
		{"empty message", func(string, string) string { return "" }, ErrInvalidScramMessage, "must start with c=<channel binding>"},
		{"no nonce", func(string, string) string { return "c=biws" }, ErrInvalidScramMessage, "want r=<nonce> after c="},
		{"client nonce only", func(good, nonce string) string { return strings.Replace(good, nonce, "abc", 1) },
			ErrInvalidScramMessage, "invalid client nonce in the final client message"},
		{"nonce extended", func(good, nonce string) string { return strings.Replace(good, nonce, nonce+"x", 1) },
			ErrInvalidScramMessage, "invalid client nonce"},
		{"something in front of the nonce, after the proof was computed", func(good, nonce string) string { return strings.Replace(good, nonce, "abc"+nonce, 1) },
			ErrScramAuthenticationFailed, "wrong password"},
		{"no proof", func(good, _ string) string { return good[:strings.Index(good, ",p=")] },
			ErrInvalidScramMessage, "want p=<proof> last"},
		{"proof not last", func(good, _ string) string { return good + ",foo=bar" }, ErrInvalidScramMessage, "want p=<proof> last"},
		{"bad extension before the proof", func(good, _ string) string { return strings.Replace(good, ",p=", ",foo,p=", 1) },
			ErrInvalidScramMessage, "extension: want <letters>=<value>"},
		{"empty extension before the proof", func(good, _ string) string { return strings.Replace(good, ",p=", ",,p=", 1) },
			ErrInvalidScramMessage, "extension: want <letters>=<value>"},
		{"proof not base64", func(good, _ string) string { return good[:strings.Index(good, ",p=")] + ",p=!!!!" },
			ErrInvalidScramMessage, "client proof is not the base64 of 64 bytes"},
		{"proof unpadded", func(good, _ string) string { return strings.TrimRight(good, "=") },
			ErrInvalidScramMessage, "client proof is not the base64 of 64 bytes"},
		{"empty proof", func(good, _ string) string { return good[:strings.Index(good, ",p=")] + ",p=" },
			ErrInvalidScramMessage, "client proof is not the base64 of 64 bytes"},
		{"proof too short", func(good, _ string) string {
			return good[:strings.Index(good, ",p=")] + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 32))
		}, ErrInvalidScramMessage, "client proof is not the base64 of 64 bytes"},
		{"proof of zeros", func(good, _ string) string {
			return good[:strings.Index(good, ",p=")] + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 64))
		}, ErrScramAuthenticationFailed, `user "alice": wrong password`},
		{"extension added after the proof was computed", func(good, _ string) string { return strings.Replace(good, ",p=", ",foo=bar,p=", 1) },
			ErrScramAuthenticationFailed, "wrong password"},
		{"not ASCII", func(good, _ string) string { return good + "\xff" }, ErrInvalidScramMessage, "not ASCII"},
		{"too long", func(good, _ string) string { return good + strings.Repeat("A", maxScramMessage) }, ErrInvalidScramMessage, "more than 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestScramServer(t, mech, users)
			serverFirst, _, _, err := s.Next(c.first())
			if err != nil {
				t.Fatal(err)
			}
			good, _ := c.final(t, serverFirst, "")
			nonce := strings.SplitN(string(serverFirst), ",", 2)[0][2:]
			msg, done, user, err := s.Next([]byte(tc.final(string(good), nonce)))
			if msg != nil || done || user != "" {
				t.Fatalf("answer %q %v %q", msg, done, user)
			}
			checkScramError(t, mech, err, tc.want, tc.text)
			if _, _, _, err := s.Next(good); !errors.Is(err, ErrInvalidScramMessage) {
				t.Fatalf("the right message after a failure: %v", err)
			}
		})
	}

	t.Run("wrong password", func(t *testing.T) {
		s := newTestScramServer(t, mech, users)
		wrong := testScramClient{mech, "admin-secret", "n,,", "n=alice,r=abc", ""}
		serverFirst, _, _, err := s.Next(wrong.first())
		if err != nil {
			t.Fatal(err)
		}
		final, _ := wrong.final(t, serverFirst, "")
		_, _, _, err = s.Next(final)
		checkScramError(t, mech, err, ErrScramAuthenticationFailed, `sasl SCRAM-SHA-512: user "alice": wrong password (invalid client proof)`)
	})
}

// TestScramServerUnknownUser: an unknown user gets a server-first message
// like a real one, stable for its name, and fails at the end exactly like a
// wrong password.
func TestScramServerUnknownUser(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			users := testScramUsers(t, mech)
			salt := func(user string) string {
				t.Helper()
				s := newTestScramServer(t, mech, users)
				msg, done, _, err := s.Next([]byte("n,,n=" + user + ",r=abc"))
				if err != nil || done {
					t.Fatalf("%s: %v %v", user, done, err)
				}
				parts := strings.Split(string(msg), ",")
				if len(parts) != 3 || !strings.HasPrefix(parts[0], "r=abc") || parts[2] != "i=4096" {
					t.Fatalf("server-first %q", msg)
				}
				return strings.TrimPrefix(parts[1], "s=")
			}
			mallory := salt("mallory")
			if again := salt("mallory"); again != mallory {
				t.Fatalf("salt of mallory %q then %q", mallory, again)
			}
			if eve := salt("eve"); eve == mallory {
				t.Fatalf("eve and mallory have the same salt %q", eve)
			}
			// Shaped like a Kafka salt: the base-36 text of 130 bits.
			raw, err := base64.StdEncoding.DecodeString(mallory)
			if err != nil || len(raw) < 20 || len(raw) > 26 || strings.Trim(string(raw), "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
				t.Fatalf("fake salt %q (%q), %v", mallory, raw, err)
			}
			other := MechanismScramSHA512
			if mech == other {
				other = MechanismScramSHA256
			}
			s := newTestScramServer(t, other, testScramUsers(t, other))
			msg, _, _, _ := s.Next([]byte("n,,n=mallory,r=abc"))
			if strings.Contains(string(msg), mallory) {
				t.Fatalf("the same fake salt for %s and %s", mech, other)
			}

			// The final message fails like a wrong password, whatever
			// password the client derives from the fake salt.
			var messages []string
			for _, tc := range []struct{ user, pass, text string }{
				{"alice", "wrong", `user "alice": wrong password`},
				{"mallory", "wrong", `unknown user "mallory"`},
				{"mallory", "", `unknown user "mallory"`},
				{"legacy", "legacy-secret", `user "legacy": stored credential has 1024 iterations, fewer than the minimum 4096`},
			} {
				s := newTestScramServer(t, mech, users)
				c := testScramClient{mech, tc.pass, "n,,", "n=" + tc.user + ",r=abc", ""}
				serverFirst, _, _, err := s.Next(c.first())
				if err != nil {
					t.Fatal(err)
				}
				final, _ := c.final(t, serverFirst, "")
				_, done, user, err := s.Next(final)
				if done || user != "" {
					t.Fatalf("%s authenticated", tc.user)
				}
				checkScramError(t, mech, err, ErrScramAuthenticationFailed, tc.text)
				messages = append(messages, ClientMessage(mech, err))
			}
			for _, m := range messages[1:] {
				if m != messages[0] {
					t.Fatalf("client messages differ: %q", messages)
				}
			}
		})
	}
}

// TestScramServerUnusableCredential: a stored credential that cannot be
// right fails at the end, like an unknown user.
func TestScramServerUnusableCredential(t *testing.T) {
	const mech = MechanismScramSHA256
	good, err := NewScramCredential(mech, "alice-secret", ScramMinIterations)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*ScramCredential)
	}{
		{"no salt", func(c *ScramCredential) { c.Salt = nil }},
		{"SHA-512 keys", func(c *ScramCredential) { c.StoredKey = append(c.StoredKey, c.StoredKey...) }},
		{"no server key", func(c *ScramCredential) { c.ServerKey = nil }},
		{"negative iterations", func(c *ScramCredential) { c.Iterations = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cred := good
			tc.edit(&cred)
			s := newTestScramServer(t, mech, func(string) (ScramCredential, bool) { return cred, true })
			msg, _, _, err := s.Next([]byte("n,,n=alice,r=abc"))
			if err != nil || !strings.HasSuffix(string(msg), ",i=4096") {
				t.Fatalf("server-first %q, %v", msg, err)
			}
			_, _, _, err = s.Next([]byte("c=biws,r=" + strings.TrimPrefix(strings.Split(string(msg), ",")[0], "r=") + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 32))))
			if !errors.Is(err, ErrScramAuthenticationFailed) || !strings.Contains(err.Error(), `user "alice": stored credential`) {
				t.Fatalf("error %v", err)
			}
		})
	}
}

func TestNewScramServer(t *testing.T) {
	for _, m := range []string{"PLAIN", "scram-sha-256", "SCRAM-SHA-1", ""} {
		if IsScram(m) {
			t.Errorf("IsScram(%q)", m)
		}
		if s, err := NewScramServer(m, nil); err == nil || s != nil {
			t.Errorf("NewScramServer(%q): %v", m, err)
		}
	}
	if !IsScram(MechanismScramSHA256) || !IsScram(MechanismScramSHA512) {
		t.Fatal("IsScram")
	}
	// A nil lookup knows no user.
	s := newTestScramServer(t, MechanismScramSHA256, nil)
	if _, _, _, err := s.Next([]byte("n,,n=alice,r=abc")); err != nil {
		t.Fatal(err)
	}
}

func TestScramCredentials(t *testing.T) {
	salt := []byte("salt")
	for _, tc := range []struct {
		name string
		err  func() error
		text string
	}{
		{"SaltedPassword: not SCRAM", func() error { _, err := SaltedPassword("PLAIN", "p", salt, 4096); return err }, `mechanism "PLAIN" is not SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"SaltedPassword: no salt", func() error { _, err := SaltedPassword(MechanismScramSHA256, "p", nil, 4096); return err }, "empty salt"},
		{"SaltedPassword: too few iterations", func() error { _, err := SaltedPassword(MechanismScramSHA256, "p", salt, 4095); return err }, "4095 iterations, fewer than the minimum 4096"},
		{"SaltedPassword: too many iterations", func() error { _, err := SaltedPassword(MechanismScramSHA512, "p", salt, 16385); return err }, "16385 iterations, more than the maximum 16384"},
		{"FromSalted: not SCRAM", func() error {
			_, err := scramCredentialFromSalted("SCRAM-SHA-1", salt, make([]byte, 20), 4096)
			return err
		}, "is not SCRAM-SHA-256"},
		{"FromSalted: no salt", func() error {
			_, err := scramCredentialFromSalted(MechanismScramSHA256, nil, make([]byte, 32), 4096)
			return err
		}, "empty salt"},
		{"FromSalted: SHA-512 salted password for SHA-256", func() error {
			_, err := scramCredentialFromSalted(MechanismScramSHA256, salt, make([]byte, 64), 4096)
			return err
		}, "salted password of 64 bytes, want 32"},
		{"FromSalted: too few iterations", func() error {
			_, err := scramCredentialFromSalted(MechanismScramSHA512, salt, make([]byte, 64), 100)
			return err
		}, "100 iterations"},
		{"New: not SCRAM", func() error { _, err := NewScramCredential("PLAIN", "p", 4096); return err }, "is not SCRAM"},
		{"New: too many iterations", func() error { _, err := NewScramCredential(MechanismScramSHA256, "p", 1<<20); return err }, "more than the maximum 16384"},
	} {
		if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.text)
		}
	}

	a, err := NewScramCredential(MechanismScramSHA512, "", ScramMaxIterations)
	if err != nil {
		t.Fatal(err) // Kafka accepts an empty password
	}
	b, err := NewScramCredential(MechanismScramSHA512, "", ScramMaxIterations)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Salt, b.Salt) || bytes.Equal(a.StoredKey, b.StoredKey) {
		t.Fatal("two credentials with the same salt")
	}
	if len(a.Salt) > 26 || strings.Trim(string(a.Salt), "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		t.Fatalf("salt %q is not Kafka's secureRandomBytes", a.Salt)
	}
	if len(a.StoredKey) != 64 || len(a.ServerKey) != 64 || a.Iterations != ScramMaxIterations {
		t.Fatalf("credential %d %d %d", len(a.StoredKey), len(a.ServerKey), a.Iterations)
	}
	// The credential is the one the password and salt give.
	salted, err := SaltedPassword(MechanismScramSHA512, "", a.Salt, ScramMaxIterations)
	if err != nil {
		t.Fatal(err)
	}
	again, err := scramCredentialFromSalted(MechanismScramSHA512, a.Salt, salted, ScramMaxIterations)
	if err != nil || !hmac.Equal(again.StoredKey, a.StoredKey) || !hmac.Equal(again.ServerKey, a.ServerKey) {
		t.Fatalf("credential from salted password differs: %v", err)
	}

	for _, s := range []string{a.String(), fmt.Sprint(a), fmt.Sprintf("%v %+v %#v", a, a, a)} {
		for _, key := range [][]byte{a.StoredKey, a.ServerKey} {
			if strings.Contains(s, base64.StdEncoding.EncodeToString(key)) || strings.Contains(s, fmt.Sprint(key)) || strings.Contains(s, fmt.Sprintf("%x", key)) {
				t.Fatalf("%q shows a key", s)
			}
		}
		if !strings.Contains(s, "Iterations: 16384") || !strings.Contains(s, "StoredKey: [redacted]") {
			t.Fatalf("String() = %q", s)
		}
	}
}

// franzGoExchange runs franz-go's SCRAM client against a ScramServer and
// returns the server's error, if any.
func franzGoExchange(t *testing.T, m fsasl.Mechanism, users ScramLookup) (user string, err error) {
	t.Helper()
	return franzGoExchangeWith(t, m, newTestScramServer(t, m.Name(), users))
}

// franzGoExchangeWith is franzGoExchange with the server s.
func franzGoExchangeWith(t *testing.T, m fsasl.Mechanism, s *ScramServer) (user string, err error) {
	t.Helper()
	session, msg, err := m.Authenticate(context.Background(), "broker.example.com")
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; ; step++ {
		if step > 2 {
			t.Fatal("exchange does not end")
		}
		answer, done, user, err := s.Next(msg)
		if err != nil {
			return "", err
		}
		clientDone, next, cerr := session.Challenge(answer)
		if cerr != nil {
			t.Fatalf("franz-go refused the server's message %q: %v", answer, cerr)
		}
		if done != clientDone {
			t.Fatalf("server done %v, client done %v", done, clientDone)
		}
		if done {
			return user, nil
		}
		msg = next
	}
}

// TestScramServerAgainstFranzGo: franz-go's SCRAM client, the SCRAM of
// most Go Kafka clients, authenticates, and its failures are the ones
// Kafka would give.
func TestScramServerAgainstFranzGo(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		users := testScramUsers(t, mech)
		as := func(a scram.Auth) fsasl.Mechanism {
			if mech == MechanismScramSHA256 {
				return a.AsSha256Mechanism()
			}
			return a.AsSha512Mechanism()
		}
		t.Run(mech, func(t *testing.T) {
			for _, tc := range []struct {
				auth scram.Auth
				user string
			}{
				{scram.Auth{User: "alice", Pass: "alice-secret"}, "alice"},
				{scram.Auth{User: "admin", Pass: "admin-secret"}, "admin"},
				{scram.Auth{User: "a,b=c", Pass: "odd-secret"}, "a,b=c"},
				{scram.Auth{Zid: "alice", User: "alice", Pass: "alice-secret"}, "alice"},
				{scram.Auth{User: "alice", Pass: "alice-secret", Nonce: []byte("fixed client nonce")}, "alice"},
			} {
				user, err := franzGoExchange(t, as(tc.auth), users)
				if err != nil || user != tc.user {
					t.Fatalf("%s: user %q, %v", tc.auth.User, user, err)
				}
			}

			_, wrong := franzGoExchange(t, as(scram.Auth{User: "alice", Pass: "admin-secret"}), users)
			checkScramError(t, mech, wrong, ErrScramAuthenticationFailed, "wrong password")
			_, unknown := franzGoExchange(t, as(scram.Auth{User: "mallory", Pass: "alice-secret"}), users)
			checkScramError(t, mech, unknown, ErrScramAuthenticationFailed, `unknown user "mallory"`)
			if ClientMessage(mech, wrong) != ClientMessage(mech, unknown) {
				t.Fatalf("client messages differ: %q, %q", ClientMessage(mech, wrong), ClientMessage(mech, unknown))
			}

			_, err := franzGoExchange(t, as(scram.Auth{Zid: "admin", User: "alice", Pass: "alice-secret"}), users)
			checkScramError(t, mech, err, ErrAuthorizationIDMismatch, `asked for authorization id "admin"`)
			_, err = franzGoExchange(t, as(scram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}), users)
			checkScramError(t, mech, err, ErrScramAuthenticationFailed, "tokenauth=true")
		})
	}
}

// BenchmarkScramExchange measures one authentication: "exchange" is the
// whole of it with franz-go's client (mostly the client's PBKDF2), "server"
// the broker's part alone.
func BenchmarkScramExchange(b *testing.B) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		users := testScramUsers(b, mech)
		b.Run(mech+"/exchange", func(b *testing.B) {
			auth := scram.Auth{User: "alice", Pass: "alice-secret"}
			m := auth.AsSha256Mechanism()
			if mech == MechanismScramSHA512 {
				m = auth.AsSha512Mechanism()
			}
			for b.Loop() {
				s, _ := NewScramServer(mech, users)
				session, msg, _ := m.Authenticate(context.Background(), "broker")
				serverFirst, _, _, _ := s.Next(msg)
				_, final, _ := session.Challenge(serverFirst)
				serverFinal, done, _, err := s.Next(final)
				if !done || err != nil {
					b.Fatal(err)
				}
				if ok, _, err := session.Challenge(serverFinal); !ok || err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mech+"/server", func(b *testing.B) {
			c := testScramClient{mech, "alice-secret", "n,,", "n=alice,r=k9q3v8z1", ""}
			s := newTestScramServer(b, mech, users)
			s.serverNonce = func() string { return "server-nonce" }
			serverFirst, _, _, _ := s.Next(c.first())
			final, _ := c.final(b, serverFirst, "")
			for b.Loop() {
				s, _ := NewScramServer(mech, users)
				s.serverNonce = func() string { return "server-nonce" }
				s.Next(c.first())
				if _, done, _, err := s.Next(final); !done || err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// librdkafka (2.0 at least) sends its client nonce again in front of the
// nonce in client-final; Kafka's broker accepts any r= that ends with the
// exchange's nonce, so Keel does too, the proof covering what was sent.
func TestScramServerAcceptsLibrdkafkasNonce(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		users := testScramUsers(t, mech)
		s := newTestScramServer(t, mech, users)
		c := testScramClient{mechanism: mech, pass: "alice-secret", gs2: "n,,", bare: "n=alice,r=abc", noncePrefix: "abc"}
		serverFirst, _, _, err := s.Next(c.first())
		if err != nil {
			t.Fatal(err)
		}
		final, want := c.final(t, serverFirst, "")
		if !strings.Contains(string(final), ",r=abcabc") {
			t.Fatalf("client-final %q", final)
		}
		got, done, user, err := s.Next(final)
		if err != nil || !done || user != "alice" || string(got) != string(want) {
			t.Fatalf("%s: %q %v %q %v", mech, got, done, user, err)
		}
	}
}

// TestScramDelegationTokens: with tokenauth=true (franz-go's IsToken, as
// Kafka's ScramLoginModule sends it) the user is a delegation token's id
// and the password the base64 of its HMAC; the exchange checks the token's
// credential and authenticates as its owner, reporting the token and its
// expiry. An unknown or expired token, or a wrong HMAC, fails the way an
// unknown user does; without tokenauth the token id is just a user name.
func TestScramDelegationTokens(t *testing.T) {
	expiry := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			cred, err := NewScramCredential(mech, "the-hmac-base64", ScramMinIterations)
			if err != nil {
				t.Fatal(err)
			}
			tokens := func(id string) (ScramToken, bool) {
				if id != "tok1" {
					return ScramToken{}, false
				}
				return ScramToken{Credential: cred, Owner: "alice", Expiry: expiry}, true
			}
			users := testScramUsers(t, mech)
			as := func(a scram.Auth) fsasl.Mechanism {
				if mech == MechanismScramSHA256 {
					return a.AsSha256Mechanism()
				}
				return a.AsSha512Mechanism()
			}
			server := func() *ScramServer {
				s := newTestScramServer(t, mech, users)
				s.SetTokenLookup(tokens)
				return s
			}

			s := server()
			user, err := franzGoExchangeWith(t, as(scram.Auth{User: "tok1", Pass: "the-hmac-base64", IsToken: true}), s)
			if err != nil || user != "alice" || !s.TokenAuthenticated() || !s.Expiry().Equal(expiry) {
				t.Fatalf("token exchange: user %q, token %v, expiry %v, %v", user, s.TokenAuthenticated(), s.Expiry(), err)
			}
			s = server()
			if user, err := franzGoExchangeWith(t, as(scram.Auth{User: "alice", Pass: "alice-secret"}), s); err != nil || user != "alice" || s.TokenAuthenticated() || !s.Expiry().IsZero() {
				t.Fatalf("a user's exchange beside tokens: %q %v %v", user, s.TokenAuthenticated(), err)
			}

			_, wrong := franzGoExchangeWith(t, as(scram.Auth{User: "tok1", Pass: "not-the-hmac", IsToken: true}), server())
			checkScramError(t, mech, wrong, ErrScramAuthenticationFailed, "wrong password")
			_, unknown := franzGoExchangeWith(t, as(scram.Auth{User: "tok2", Pass: "the-hmac-base64", IsToken: true}), server())
			checkScramError(t, mech, unknown, ErrScramAuthenticationFailed, `delegation token "tok2" is unknown or expired`)
			if ClientMessage(mech, wrong) != ClientMessage(mech, unknown) {
				t.Fatalf("client messages differ: %q, %q", ClientMessage(mech, wrong), ClientMessage(mech, unknown))
			}
			// A user's password does not pass for a token, nor the
			// token's HMAC for a user of the token's name.
			_, err = franzGoExchangeWith(t, as(scram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}), server())
			checkScramError(t, mech, err, ErrScramAuthenticationFailed, `delegation token "alice"`)
			_, err = franzGoExchangeWith(t, as(scram.Auth{User: "tok1", Pass: "the-hmac-base64"}), server())
			checkScramError(t, mech, err, ErrScramAuthenticationFailed, `unknown user "tok1"`)
		})
	}
}
