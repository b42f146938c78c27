package client_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/network/sasl"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newScramFake is newSASLFake with the SCRAM-SHA-256 user
// alice/alice-secret and the SCRAM-SHA-512 user bob/bob-secret.
func newScramFake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	return newSASLFake(t, append([]kfake.Opt{
		kfake.Superuser("SCRAM-SHA-256", "alice", "alice-secret"),
		kfake.Superuser("SCRAM-SHA-512", "bob", "bob-secret"),
	}, opts...)...)
}

func TestScramAuthAgainstKfake(t *testing.T) {
	for _, auth := range []client.ScramAuth{
		{User: "alice", Pass: "alice-secret"}, // SCRAM-SHA-256 by default
		{Mechanism: "SCRAM-SHA-256", User: "alice", Pass: "alice-secret"},
		{Mechanism: "SCRAM-SHA-512", User: "bob", Pass: "bob-secret"},
	} {
		t.Run(auth.Name()+"/"+auth.User, func(t *testing.T) {
			servedOver(t, newScramFake(t, kfake.SeedTopics(1, "orders")), client.SASL(auth))
		})
	}
}

// TestScramAuthFailsAgainstKfake: kfake hangs up on a wrong password, an
// unknown user, or a user without a credential for the mechanism. The SDK
// reports an authentication error at once and does not retry it.
func TestScramAuthFailsAgainstKfake(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth client.ScramAuth
	}{
		{"wrong password", client.ScramAuth{User: "alice", Pass: "wrong-secret"}},
		{"wrong password, SCRAM-SHA-512", client.ScramAuth{Mechanism: "SCRAM-SHA-512", User: "bob", Pass: "wrong-secret"}},
		{"no SCRAM-SHA-512 credential", client.ScramAuth{Mechanism: "SCRAM-SHA-512", User: "alice", Pass: "alice-secret"}},
		{"no SCRAM-SHA-256 credential", client.ScramAuth{Mechanism: "SCRAM-SHA-256", User: "bob", Pass: "bob-secret"}},
		{"unknown user", client.ScramAuth{User: "mallory", Pass: "wrong-secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkScramAuthError(t, refusedAtOnce(t, newScramFake(t), client.SASL(tc.auth)), tc.auth)
		})
	}
}

// TestScramAuthFailedKafkaAnswer: a Kafka broker answers a bad proof with
// SASL_AUTHENTICATION_FAILED and its generic message, which the error
// carries.
func TestScramAuthFailedKafkaAnswer(t *testing.T) {
	fake := newScramFake(t)
	const kafkaMessage = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	fake.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		if !strings.HasPrefix(string(req.SASLAuthBytes), "c=") {
			return nil, nil, false // kfake answers the client-first message
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
		resp.ErrorMessage = kmsg.StringPtr(kafkaMessage)
		return resp, nil, true
	})
	auth := client.ScramAuth{User: "alice", Pass: "wrong-secret"}
	adm, err := client.NewAdmin(saslCtx(t), client.SeedBrokers(fake.ListenAddrs()...), client.SASL(auth))
	if err == nil {
		adm.Close()
		t.Fatal("authenticated with a wrong password")
	}
	checkScramAuthError(t, err, auth)
	if !errors.Is(err, &client.Error{Code: 58}) || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED (58): "+kafkaMessage) {
		t.Fatalf("error %q does not carry the broker's answer", err)
	}
}

func checkScramAuthError(t *testing.T, err error, auth client.ScramAuth) {
	t.Helper()
	t.Logf("error: %v", err)
	if client.IsRetriable(err) {
		t.Fatalf("authentication error %v is retriable", err)
	}
	if !strings.Contains(err.Error(), "sasl "+auth.Name()+" with ") {
		t.Fatalf("error %q does not say SASL %s failed", err, auth.Name())
	}
	if strings.Contains(err.Error(), auth.Pass) {
		t.Fatalf("error %q contains the password", err)
	}
}

// scramUsers is a Keel broker's credential store for the tests.
func scramUsers(t *testing.T, mechanism string, passwords map[string]string) sasl.ScramLookup {
	t.Helper()
	creds := map[string]sasl.ScramCredential{}
	for user, pass := range passwords {
		c, err := sasl.NewScramCredential(mechanism, pass, sasl.ScramMinIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds[user] = c
	}
	return func(user string) (sasl.ScramCredential, bool) {
		c, ok := creds[user]
		return c, ok
	}
}

// TestScramAuthAgainstKeelBroker runs the SDK's side of the exchange against
// the broker's (network/sasl).
func TestScramAuthAgainstKeelBroker(t *testing.T) {
	passwords := map[string]string{"alice": "alice-secret", "a,b=c": "odd-secret"}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		users := scramUsers(t, mech, passwords)
		for _, tc := range []struct {
			auth client.ScramAuth
			err  error // from the broker
		}{
			{client.ScramAuth{User: "alice", Pass: "alice-secret"}, nil},
			{client.ScramAuth{User: "alice", Pass: "alice-secret", Zid: "alice"}, nil},
			{client.ScramAuth{User: "a,b=c", Pass: "odd-secret"}, nil},
			{client.ScramAuth{User: "a,b=c", Pass: "odd-secret", Zid: "a,b=c"}, nil},
			{client.ScramAuth{User: "alice", Pass: "wrong"}, sasl.ErrScramAuthenticationFailed},
			{client.ScramAuth{User: "mallory", Pass: "alice-secret"}, sasl.ErrScramAuthenticationFailed},
			{client.ScramAuth{User: "alice", Pass: "alice-secret", Zid: "admin"}, sasl.ErrAuthorizationIDMismatch},
		} {
			tc.auth.Mechanism = mech
			t.Run(fmt.Sprintf("%s/%s/%s", mech, tc.auth.User, tc.auth.Zid), func(t *testing.T) {
				server, err := sasl.NewScramServer(mech, users)
				if err != nil {
					t.Fatal(err)
				}
				session, msg, err := tc.auth.Authenticate(context.Background(), "broker")
				if err != nil {
					t.Fatal(err)
				}
				for step := 0; ; step++ {
					answer, done, user, err := server.Next(msg)
					if err != nil {
						if tc.err == nil || !errors.Is(err, tc.err) {
							t.Fatalf("broker: %v, want %v", err, tc.err)
						}
						return
					}
					clientDone, next, err := session.Challenge(answer)
					if err != nil || clientDone != done {
						t.Fatalf("step %d: client done %v, broker done %v, %v", step, clientDone, done, err)
					}
					if done {
						if tc.err != nil || user != tc.auth.User {
							t.Fatalf("user %q, want %q", user, tc.auth.User)
						}
						if _, _, err := session.Challenge(nil); err == nil {
							t.Fatal("a message after the exchange was accepted")
						}
						return
					}
					msg = next
				}
			})
		}
	}
}

// scramStart runs ScramAuth to the server-first message of a Keel broker
// and returns the session, the broker, its server-first message and the
// client nonce.
func scramStart(t *testing.T, auth client.ScramAuth, users sasl.ScramLookup) (client.SASLSession, *sasl.ScramServer, string, string) {
	t.Helper()
	server, err := sasl.NewScramServer(auth.Name(), users)
	if err != nil {
		t.Fatal(err)
	}
	session, first, err := auth.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	serverFirst, _, _, err := server.Next(first)
	if err != nil {
		t.Fatal(err)
	}
	_, clientNonce, _ := strings.Cut(string(first), ",r=")
	return session, server, string(serverFirst), clientNonce
}

// TestScramAuthSession checks the session against hand-made broker
// messages: it refuses what Kafka's ScramSaslClient refuses.
func TestScramAuthSession(t *testing.T) {
	users := scramUsers(t, "SCRAM-SHA-256", map[string]string{"alice": "alice-secret"})
	auth := client.ScramAuth{User: "alice", Pass: "alice-secret"}
	replaceAttr := func(msg, key, value string) string {
		return regexp.MustCompile(`(^|,)`+key+`=[^,]*`).ReplaceAllString(msg, "${1}"+key+"="+value)
	}
	for _, tc := range []struct {
		name string
		edit func(serverFirst, clientNonce string) string
		text string
	}{
		{"nonce of another client", func(m, _ string) string { return replaceAttr(m, "r", "someoneelse123") }, "invalid server nonce: does not start with the client nonce"},
		{"nonce without the server's part", func(m, cn string) string { return replaceAttr(m, "r", cn) }, "and add to it"},
		{"nonce not printable", func(m, _ string) string { return strings.Replace(m, ",s=", "\x01,s=", 1) }, "invalid server nonce: not printable"},
		{"too few iterations", func(m, _ string) string { return replaceAttr(m, "i", "4095") }, "requested iterations 4095 is less than the minimum 4096"},
		{"too many iterations", func(m, _ string) string { return replaceAttr(m, "i", "2147483647") }, "requested iterations 2147483647 is more than the maximum 1048576"},
		{"iterations not a number", func(m, _ string) string { return replaceAttr(m, "i", "4k") }, `iterations "4k"`},
		{"iterations with a sign", func(m, _ string) string { return replaceAttr(m, "i", "+4096") }, `iterations "+4096"`},
		{"salt not base64", func(m, _ string) string { return replaceAttr(m, "s", "!!!!") }, "salt is empty or not base64"},
		{"empty salt", func(m, _ string) string { return replaceAttr(m, "s", "") }, "salt is empty or not base64"},
		{"attributes out of order", func(m, _ string) string {
			a := strings.Split(m, ",")
			return a[1] + "," + a[0] + "," + a[2]
		}, "invalid server-first message: want r=<nonce>,s=<salt>,i=<iterations>"},
		{"reserved m=", func(m, _ string) string { return "m=x," + m }, "want r=<nonce>"},
		{"empty", func(_, _ string) string { return "" }, "want r=<nonce>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session, _, serverFirst, clientNonce := scramStart(t, auth, users)
			done, final, err := session.Challenge([]byte(tc.edit(serverFirst, clientNonce)))
			if err == nil || done || final != nil {
				t.Fatalf("accepted: %v %q %v", done, final, err)
			}
			if !strings.HasPrefix(err.Error(), "sasl SCRAM-SHA-256: ") || !strings.Contains(err.Error(), tc.text) || strings.Contains(err.Error(), auth.Pass) {
				t.Fatalf("error %q, want it to contain %q", err, tc.text)
			}
			if _, _, err := session.Challenge([]byte(serverFirst)); err == nil {
				t.Fatal("the session goes on after a failure")
			}
		})
	}

	for _, tc := range []struct {
		name string
		edit func(serverFinal string) string
		text string
	}{
		{"server error", func(string) string { return "e=invalid-proof" }, `broker failed the authentication with error "invalid-proof"`},
		{"server error with extensions", func(string) string { return "e=unknown-user,x=y" }, `error "unknown-user"`},
		{"bad server signature", func(m string) string {
			sig, _ := base64.StdEncoding.DecodeString(m[2:])
			sig[0] ^= 1
			return "v=" + base64.StdEncoding.EncodeToString(sig)
		}, "invalid server signature: the broker does not know this user's credential"},
		{"truncated server signature", func(m string) string { return "v=" + base64.StdEncoding.EncodeToString([]byte("short")) }, "invalid server signature"},
		{"signature not base64", func(string) string { return "v=!!!!" }, "signature is not base64"},
		{"neither v= nor e=", func(m string) string { return "x" + m }, "want v=<signature> or e=<error>"},
		{"empty", func(string) string { return "" }, "want v=<signature> or e=<error>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session, server, serverFirst, _ := scramStart(t, auth, users)
			_, final, err := session.Challenge([]byte(serverFirst))
			if err != nil {
				t.Fatal(err)
			}
			serverFinal, done, _, err := server.Next(final)
			if err != nil || !done {
				t.Fatal(err)
			}
			done, next, err := session.Challenge([]byte(tc.edit(string(serverFinal))))
			if err == nil || done || next != nil {
				t.Fatalf("accepted: %v %q %v", done, next, err)
			}
			if !strings.HasPrefix(err.Error(), "sasl SCRAM-SHA-256: ") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q, want it to contain %q", err, tc.text)
			}
		})
	}

	// The server-final may carry extensions after v=, which are ignored.
	session, server, serverFirst, _ := scramStart(t, auth, users)
	_, final, _ := session.Challenge([]byte(serverFirst))
	serverFinal, _, _, _ := server.Next(final)
	if done, next, err := session.Challenge(append(serverFinal, ",x=y"...)); !done || next != nil || err != nil {
		t.Fatalf("v= with an extension: %v %q %v", done, next, err)
	}
}

func TestScramAuthMessage(t *testing.T) {
	nonce := regexp.MustCompile(`^[0-9a-z]{20,26}$`)
	seen := map[string]bool{}
	for _, tc := range []struct {
		auth   client.ScramAuth
		name   string
		prefix string
	}{
		{client.ScramAuth{User: "alice", Pass: "s"}, "SCRAM-SHA-256", "n,,n=alice,r="},
		{client.ScramAuth{Mechanism: "SCRAM-SHA-512", User: "alice", Pass: "s"}, "SCRAM-SHA-512", "n,,n=alice,r="},
		{client.ScramAuth{User: "a,b=c", Pass: "s", Zid: "a,b=c"}, "SCRAM-SHA-256", "n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r="},
		{client.ScramAuth{User: "ünï", Pass: "s"}, "SCRAM-SHA-256", "n,,n=ünï,r="},
	} {
		if tc.auth.Name() != tc.name {
			t.Fatalf("name %q, want %q", tc.auth.Name(), tc.name)
		}
		_, msg, err := tc.auth.Authenticate(context.Background(), "broker")
		if err != nil {
			t.Fatal(err)
		}
		r, ok := strings.CutPrefix(string(msg), tc.prefix)
		if !ok || !nonce.MatchString(r) || seen[r] {
			t.Fatalf("client-first %q, want %q<nonce> (nonce seen before: %v)", msg, tc.prefix, seen[r])
		}
		seen[r] = true
	}
}

func TestScramAuthRefusesBadConfig(t *testing.T) {
	for _, a := range []client.ScramAuth{
		{Mechanism: "PLAIN", User: "alice", Pass: "s3cret"},
		{Mechanism: "scram-sha-256", User: "alice", Pass: "s3cret"},
		{Mechanism: "SCRAM-SHA-1", User: "alice", Pass: "s3cret"},
		{User: "", Pass: "s3cret"},
		{User: "alice", Pass: ""},
		{User: "ali\x00ce", Pass: "s3cret"},
		{User: "alice", Pass: "s3\x00cret"},
		{User: "alice", Pass: "s3cret\xff"},
		{User: "alice\xff", Pass: "s3cret"},
		{User: "alice", Pass: "s3cret", Zid: "a\x00"},
	} {
		session, msg, err := a.Authenticate(context.Background(), "broker")
		if err == nil || session != nil || msg != nil {
			t.Fatalf("%+v: %v %q %v", a, session, msg, err)
		}
		if !strings.HasPrefix(err.Error(), "sasl "+a.Name()+": ") || strings.Contains(err.Error(), "s3") {
			t.Fatalf("error %q", err)
		}
	}
}

func TestScramAuthStringHidesPassword(t *testing.T) {
	a := client.ScramAuth{Mechanism: "SCRAM-SHA-512", User: "alice", Pass: "alice-secret"}
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%v %+v %#v %s", a, a, a, a), fmt.Sprint([]client.SASLMechanism{a})} {
		if strings.Contains(s, "alice-secret") || !strings.Contains(s, `"alice"`) || !strings.Contains(s, "SCRAM-SHA-512") {
			t.Fatalf("%q", s)
		}
	}
}
