package sasl

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

// FuzzAuthenticatePlain feeds untrusted SaslAuthenticate bytes to the PLAIN
// check: it must not panic, must accept exactly the right credentials, and
// must not put the password in the client's message, nor in an error
// unless the client sent it as its user name or authorization id (the
// broker's log names those).
func FuzzAuthenticatePlain(f *testing.F) {
	const pass = "alice-secret"
	users := PlainUsers{"alice": pass}
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, err := users.AuthenticatePlain(msg)
		authzid, rest, _ := bytes.Cut(msg, []byte{0})
		authcid, _, _ := bytes.Cut(rest, []byte{0})
		if err == nil {
			if user != "alice" || !bytes.Equal(msg, append(append([]byte{}, authzid...), "\x00alice\x00"+pass...)) ||
				(len(authzid) != 0 && string(authzid) != "alice") {
				t.Fatalf("accepted %q as %q", msg, user)
			}
			return
		}
		if user != "" {
			t.Fatalf("user %q with error %v", user, err)
		}
		if !errors.Is(err, ErrInvalidPlainMessage) && !errors.Is(err, ErrAuthenticationFailed) && !errors.Is(err, ErrAuthorizationIDMismatch) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
		if strings.Contains(ClientMessage(MechanismPlain, err), pass) {
			t.Fatalf("the client's message for %q shows the password", err)
		}
		// The broker's log names the user and authorization id the client
		// sent; those may be anything, the password too.
		if strings.Contains(err.Error(), pass) && !bytes.Contains(authzid, []byte(pass)) && !bytes.Contains(authcid, []byte(pass)) {
			t.Fatalf("error %q shows the password", err)
		}
	})
}

// FuzzParseJAAS checks that ParseJAAS does not panic and that what it
// parses survives writing it back out, fully quoted, and parsing it again.
func FuzzParseJAAS(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseJAAS(s)
		if err != nil {
			if c.LoginModule != "" || c.Flag != "" || c.Options != nil {
				t.Fatalf("error %v with a result %v", err, c)
			}
			return
		}
		switch c.Flag {
		case "required", "requisite", "sufficient", "optional":
		default:
			t.Fatalf("flag %q", c.Flag)
		}
		if c.LoginModule == "" || c.Options == nil {
			t.Fatalf("parsed %q into %v", s, c)
		}
		again, err := ParseJAAS(formatJAAS(c))
		if err != nil {
			t.Fatalf("%q parsed into %q, which does not parse: %v", s, formatJAAS(c), err)
		}
		if again.LoginModule != c.LoginModule || again.Flag != c.Flag || !maps.Equal(again.Options, c.Options) {
			t.Fatalf("%q round trip: %q %q %q, want %q %q %q", s, again.LoginModule, again.Flag, again.Options, c.LoginModule, c.Flag, c.Options)
		}
	})
}

// formatJAAS writes c with every string quoted.
func formatJAAS(c JAASConfig) string {
	var b strings.Builder
	b.WriteString(quoteJAAS(c.LoginModule) + " " + c.Flag)
	for k, v := range c.Options {
		b.WriteString("\n  " + quoteJAAS(k) + "=" + quoteJAAS(v))
	}
	b.WriteString(";")
	return b.String()
}

func quoteJAAS(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`)
	return `"` + r.Replace(s) + `"`
}

// FuzzScramServer feeds an untrusted client-first and client-final message
// to a SCRAM-SHA-256 exchange with one user, alice, and one delegation
// token of hers, tok1: it must not panic, must authenticate only alice
// with her proof (or her token's, as a token), must fail with one of its
// errors and Kafka's client message otherwise, and must stop after a
// failure. The server nonce is fixed so that the seeds can hold a valid
// exchange.
func FuzzScramServer(f *testing.F) {
	const pass = "alice-secret"
	salt := []byte("keel-fuzz-salt")
	salted, err := SaltedPassword(MechanismScramSHA256, pass, salt, ScramMinIterations)
	if err != nil {
		f.Fatal(err)
	}
	cred, err := scramCredentialFromSalted(MechanismScramSHA256, salt, salted, ScramMinIterations)
	if err != nil {
		f.Fatal(err)
	}
	lookup := func(user string) (ScramCredential, bool) { return cred, user == "alice" }
	// A delegation token of alice's, tok1, with her credential.
	tokens := func(id string) (ScramToken, bool) { return ScramToken{Credential: cred, Owner: "alice"}, id == "tok1" }
	generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + MechanismScramSHA256
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, err := NewScramServer(MechanismScramSHA256, lookup)
		if err != nil {
			t.Fatal(err)
		}
		s.serverNonce = func() string { return "fuzz-server-nonce" }
		s.SetTokenLookup(tokens)
		failed := false
		for i, msg := range [][]byte{first, final} {
			answer, done, user, err := s.Next(msg)
			if err != nil {
				if answer != nil || done || user != "" {
					t.Fatalf("message %d: %q %v %q with error %v", i, answer, done, user, err)
				}
				if !errors.Is(err, ErrInvalidScramMessage) && !errors.Is(err, ErrScramAuthenticationFailed) && !errors.Is(err, ErrAuthorizationIDMismatch) {
					t.Fatalf("error %v wraps no sentinel", err)
				}
				if failed && !errors.Is(err, ErrInvalidScramMessage) {
					t.Fatalf("message after a failure: %v", err)
				}
				var cm interface{ ClientMessage() string }
				if !errors.As(err, &cm) || (cm.ClientMessage() != generic && cm.ClientMessage() != ErrAuthorizationIDMismatch.Error()) {
					t.Fatalf("error %v: client message %v", err, cm)
				}
				// SCRAM never sends the password: only what the client
				// sent (its user name, say) can put it in an error.
				if strings.Contains(err.Error(), pass) && !bytes.Contains(first, []byte(pass)) && !bytes.Contains(final, []byte(pass)) {
					t.Fatalf("error %q shows the password", err)
				}
				failed = true
				continue
			}
			if failed {
				t.Fatalf("message %d accepted after a failure", i)
			}
			switch {
			case i == 0 && (done || user != "" || !bytes.HasPrefix(answer, []byte("r="))):
				t.Fatalf("client-first %q answered %q %v %q", first, answer, done, user)
			case i == 1 && (!done || user != "alice" || !bytes.HasPrefix(answer, []byte("v="))):
				t.Fatalf("client-final %q answered %q %v %q", final, answer, done, user)
			case i == 1 && s.TokenAuthenticated() != bytes.Contains(first, []byte("n=tok1,")):
				t.Fatalf("client-first %q: token authenticated %v", first, s.TokenAuthenticated())
			}
		}
	})
}

// FuzzOAuthBearer feeds untrusted SaslAuthenticate bytes to an OAUTHBEARER
// exchange with the unsecured validator: it must not panic, must accept
// only a well-formed message whose token names a principal, and must give
// the client RFC 7628's JSON status or a fixed message, never the token.
func FuzzOAuthBearer(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	s := OAuthBearerServer{Validator: &UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}, Now: func() time.Time { return now }}
	// {"alg":"none"}.{"sub":"alice","exp":1900000000}.
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6MTkwMDAwMDAwMH0.\x01\x01"))
	f.Add([]byte("n,a=alice,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6MTkwMDAwMDAwMH0.\x01x=y\x01\x01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		tok, err := s.Next(msg)
		user := tok.Principal
		if err == nil {
			r, perr := ParseOAuthBearerInitialResponse(msg)
			if perr != nil || user == "" || (r.AuthzID != "" && r.AuthzID != user) {
				t.Fatalf("accepted %q as %q (%v)", msg, user, perr)
			}
			return
		}
		if user != "" {
			t.Fatalf("user %q with error %v", user, err)
		}
		cm := ClientMessage(MechanismOAuthBearer, err)
		var invalid *InvalidTokenError
		if errors.As(err, &invalid) && !strings.HasPrefix(cm, `{"status":"`) {
			t.Fatalf("client message %q for %v", cm, err)
		}
		if r, perr := ParseOAuthBearerInitialResponse(msg); perr == nil && len(r.Token) > 8 && strings.Contains(cm, r.Token) {
			t.Fatalf("client message %q shows the token", cm)
		}
	})
}
