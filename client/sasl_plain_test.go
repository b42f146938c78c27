package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newSASLFake starts a kfake cluster of one broker that requires SASL,
// with the users of opts (kfake.Superuser).
func newSASLFake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newPlainFake is newSASLFake with the PLAIN user admin/admin-secret.
func newPlainFake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	return newSASLFake(t, append([]kfake.Opt{kfake.Superuser("PLAIN", "admin", "admin-secret")}, opts...)...)
}

func saslCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPlainAuthAgainstKfake(t *testing.T) {
	fake := newPlainFake(t, kfake.SeedTopics(1, "orders"))
	servedOver(t, fake, client.SASL(client.PlainAuth{User: "admin", Pass: "admin-secret"}))
}

// servedOver checks that an Admin and a Producer connected with opt are
// served by fake, seeded with the one topic "orders".
func servedOver(t *testing.T, fake *kfake.Cluster, opt client.Opt) {
	t.Helper()
	ctx := saslCtx(t)
	adm, err := client.NewAdmin(ctx, client.SeedBrokers(fake.ListenAddrs()...), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	topics, err := adm.ListTopics(ctx, false)
	if err != nil || len(topics) != 1 || topics[0] != "orders" {
		t.Fatalf("topics %v, %v", topics, err)
	}

	p, err := client.NewProducer(ctx, client.SeedBrokers(fake.ListenAddrs()...), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, client.KeyStringRecord("orders", "k", "v")).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// refusedAtOnce returns the error of an Admin connecting with opt, which
// fake must refuse without the SDK retrying it.
func refusedAtOnce(t *testing.T, fake *kfake.Cluster, opt client.Opt) error {
	t.Helper()
	start := time.Now()
	adm, err := client.NewAdmin(saslCtx(t), client.SeedBrokers(fake.ListenAddrs()...), opt)
	if err == nil {
		adm.Close()
		t.Fatal("authenticated")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v: an authentication failure must not be retried", time.Since(start))
	}
	return err
}

// TestPlainAuthWrongPasswordKfake: kfake hangs up on bad credentials.
// The SDK reports an authentication error at once and does not retry it.
func TestPlainAuthWrongPasswordKfake(t *testing.T) {
	err := refusedAtOnce(t, newPlainFake(t), client.SASL(client.PlainAuth{User: "admin", Pass: "wrong-secret"}))
	checkPlainAuthError(t, err, "wrong-secret")
}

// TestPlainAuthFailedKafkaAnswer: a Kafka broker answers bad credentials
// with SASL_AUTHENTICATION_FAILED and the reason, which the error carries.
func TestPlainAuthFailedKafkaAnswer(t *testing.T) {
	fake := newPlainFake(t)
	seen := make(chan []byte, 1)
	fake.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		select {
		case seen <- append([]byte(nil), req.SASLAuthBytes...):
		default:
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
		msg := "Authentication failed: Invalid username or password"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
	ctx := saslCtx(t)
	adm, err := client.NewAdmin(ctx, client.SeedBrokers(fake.ListenAddrs()...),
		client.SASL(client.PlainAuth{User: "alice", Pass: "wrong-secret"}))
	if err == nil {
		adm.Close()
		t.Fatal("authenticated with a wrong password")
	}
	checkPlainAuthError(t, err, "wrong-secret")
	if !errors.Is(err, &client.Error{Code: 58}) {
		t.Fatalf("error %v is not SASL_AUTHENTICATION_FAILED", err)
	}
	if !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED (58): Authentication failed: Invalid username or password") {
		t.Fatalf("error %q does not carry the broker's reason", err)
	}
	select {
	case b := <-seen:
		if string(b) != "\x00alice\x00wrong-secret" {
			t.Fatalf("PLAIN message %q", b)
		}
	default:
		t.Fatal("no SaslAuthenticate request")
	}
}

func checkPlainAuthError(t *testing.T, err error, pass string) {
	t.Helper()
	t.Logf("error: %v", err)
	if client.IsRetriable(err) {
		t.Fatalf("authentication error %v is retriable", err)
	}
	if !strings.Contains(err.Error(), "sasl PLAIN with ") {
		t.Fatalf("error %q does not say SASL PLAIN failed", err)
	}
	if strings.Contains(err.Error(), pass) {
		t.Fatalf("error %q contains the password", err)
	}
}

func TestPlainAuthMessage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		auth client.PlainAuth
		want string
	}{
		{client.PlainAuth{User: "alice", Pass: "alice-secret"}, "\x00alice\x00alice-secret"},
		{client.PlainAuth{User: "alice", Pass: "alice-secret", Zid: "alice"}, "alice\x00alice\x00alice-secret"},
		{client.PlainAuth{User: "ünï", Pass: "pä ss=;\""}, "\x00ünï\x00pä ss=;\""},
	} {
		if tc.auth.Name() != "PLAIN" {
			t.Fatalf("name %q", tc.auth.Name())
		}
		session, msg, err := tc.auth.Authenticate(ctx, "broker")
		if err != nil || string(msg) != tc.want {
			t.Fatalf("message %q, %v; want %q", msg, err, tc.want)
		}
		done, next, err := session.Challenge(nil)
		if !done || next != nil || err != nil {
			t.Fatalf("challenge: %v %q %v", done, next, err)
		}
	}
}

func TestPlainAuthRefusesBadCredentials(t *testing.T) {
	for _, a := range []client.PlainAuth{
		{User: "", Pass: "s3cret"},
		{User: "alice", Pass: ""},
		{User: "ali\x00ce", Pass: "s3cret"},
		{User: "alice", Pass: "s3\x00cret"},
		{User: "alice", Pass: "s3cret", Zid: "a\x00"},
		{User: "alice", Pass: "s3cret\xff"},
		{User: "alice\xff", Pass: "s3cret"},
	} {
		session, msg, err := a.Authenticate(context.Background(), "broker")
		if err == nil || session != nil || msg != nil {
			t.Fatalf("%q/%q/%q: %v %q %v", a.Zid, a.User, a.Pass, session, msg, err)
		}
		if !strings.HasPrefix(err.Error(), "sasl PLAIN: ") || strings.Contains(err.Error(), "s3") {
			t.Fatalf("error %q", err)
		}
	}
}

func TestPlainAuthStringHidesPassword(t *testing.T) {
	a := client.PlainAuth{User: "alice", Pass: "alice-secret"}
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%v %+v %#v %s", a, a, a, a), fmt.Sprint([]client.SASLMechanism{a})} {
		if strings.Contains(s, "alice-secret") || !strings.Contains(s, `"alice"`) {
			t.Fatalf("%q", s)
		}
	}
}
