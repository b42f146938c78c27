package integration

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestDelegationTokens: delegation tokens (KIP-48) through the real binary,
// two brokers with Kafka's StandardAuthorizer, clients authenticated with
// SCRAM, as a job scheduler hands tokens to its workers:
//
//   - alice creates a token renewable by bob. A client authenticates with
//     it (SCRAM, tokenauth=true: the token id as user, the base64 HMAC as
//     password) on either broker, as alice: it produces to and consumes
//     the topic alice may use, and is refused the one she may not.
//   - The token-authenticated client may not ask for tokens, nor may a
//     PLAINTEXT client (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); alice may
//     not create a token for carol without CREATE_TOKENS on her
//     (DELEGATION_TOKEN_AUTHORIZATION_FAILED); admin, a super user, may.
//     keel acls --user-principal User:carol --operation CreateTokens lets
//     alice do it too.
//   - Describe shows alice and bob (the renewer) the token, eve once she
//     has DescribeTokens on alice, admin every token; bob renews it, eve
//     may not (DELEGATION_TOKEN_OWNER_MISMATCH).
//   - alice expires it: new connections with it are refused, on both
//     brokers, and it is no longer described.
//   - The tokens survive a restart of the controller's node.
func TestDelegationTokens(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{
			SSL:  certs.brokerSSL(),
			SASL: []string{"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512"},
			Overrides: []string{
				"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
				"super.users=User:ANONYMOUS;User:admin",
				"delegation.token.secret.key=the-cluster-token-secret",
			},
			FormatArgs: []string{
				"--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
				"--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
				"--add-scram", "SCRAM-SHA-256=[name=bob,password=bob-secret]",
				"--add-scram", "SCRAM-SHA-256=[name=eve,password=eve-secret]",
			},
		})
	saslp := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLPlaintextPort)
	saslp2 := fmt.Sprintf("127.0.0.1:%d", c.Node(2).SASLPlaintextPort)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	as := func(user, seed string, opts ...kgo.Opt) *kadm.Client {
		return kadm.NewClient(newSASLClient(t, seed, nil, scramMech{"SCRAM-SHA-256", user, user + "-secret"}.kgo(), opts...))
	}
	admin, alice, bob, eve := as("admin", saslp), as("alice", saslp), as("bob", saslp2), as("eve", saslp)
	for _, topic := range []string{"jobs", "payroll"} {
		if resp, err := admin.CreateTopic(ctx, 2, 2, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("admin creates %s: %v %v", topic, err, resp.Err)
		}
	}
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").
		Topics("jobs").Groups("workers").Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || res[0].Err != nil {
		t.Fatalf("alice's ACLs: %v %+v", err, res)
	}

	// alice's token, renewable by bob.
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "User", Name: "bob"}}})
	if err != nil || tok.Owner.Name != "alice" || tok.TokenRequesterPrincipal.Name != "alice" || tok.TokenID == "" || len(tok.HMAC) != 64 ||
		tok.ExpiryTimestamp.Sub(tok.IssueTimestamp) != 24*time.Hour || tok.MaxTimestamp.Sub(tok.IssueTimestamp) != 7*24*time.Hour {
		t.Fatalf("alice creates a token: %v %+v", err, tok)
	}
	password := base64.StdEncoding.EncodeToString(tok.HMAC)
	withToken := func(seed string, mech string, opts ...kgo.Opt) *kgo.Client {
		a := scram.Auth{User: tok.TokenID, Pass: password, IsToken: true}
		m := a.AsSha256Mechanism()
		if mech == "SCRAM-SHA-512" {
			m = a.AsSha512Mechanism()
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.SASL(m)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	authenticates := func(seed string) error {
		cl := withToken(seed, "SCRAM-SHA-512", kgo.RequestRetries(2))
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return cl.Ping(pctx)
	}
	for _, seed := range []string{saslp, saslp2} {
		waitFor(t, 10*time.Second, "the token to authenticate at "+seed, func() bool { return authenticates(seed) == nil })
	}

	// A worker with the token is alice: jobs yes, payroll no.
	worker := withToken(saslp2, "SCRAM-SHA-256", kgo.DefaultProduceTopic("jobs"), kgo.ConsumeTopics("jobs"), kgo.ConsumerGroup("workers"))
	const n = 200
	for i := range n {
		if err := worker.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce with the token: %v", err)
		}
	}
	got := 0
	for got < n {
		fs := worker.PollFetches(ctx)
		for _, fe := range fs.Errors() {
			// The first group of the cluster waits for __consumer_offsets:
			// COORDINATOR_NOT_AVAILABLE meanwhile, which kgo retries.
			if ctx.Err() != nil || !kerr.IsRetriable(fe.Err) {
				t.Fatalf("consume with the token: %v", fe.Err)
			}
		}
		got += fs.NumRecords()
	}
	err = worker.ProduceSync(ctx, &kgo.Record{Topic: "payroll", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to payroll with alice's token: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Who may ask for tokens.
	if _, err := kadm.NewClient(withToken(saslp, "SCRAM-SHA-256")).CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("a token-authenticated client creates a token: %v", err)
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).PlaintextAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	if _, err := kadm.NewClient(plain).DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("describe over PLAINTEXT: %v", err)
	}
	carol := &kadm.Principal{Type: "User", Name: "carol"}
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: carol}); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Fatalf("alice creates a token for carol: %v", err)
	}
	carolTok, err := admin.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: carol, MaxLifetime: time.Hour})
	if err != nil || carolTok.Owner.Name != "carol" || carolTok.TokenRequesterPrincipal.Name != "admin" || carolTok.MaxTimestamp.Sub(carolTok.IssueTimestamp) != time.Hour {
		t.Fatalf("admin creates a token for carol: %v %+v", err, carolTok)
	}
	// keel acls (kafka-acls.sh's --user-principal), as User:ANONYMOUS
	// over PLAINTEXT, a super user here: alice may create carol's tokens,
	// eve describe alice's.
	keel := func(args ...string) string { t.Helper(); return c.Keel(t, ctx, args...) }
	plainAddr := c.Node(1).PlaintextAddr()
	keel("acls", "--bootstrap-server", plainAddr, "--add", "--allow-principal", "User:alice", "--operation", "CreateTokens", "--user-principal", "User:carol")
	keel("acls", "--bootstrap-server", plainAddr, "--add", "--allow-principal", "User:eve", "--operation", "DescribeTokens", "--user-principal", "User:alice")
	var carolTok2 kadm.DelegationToken
	waitFor(t, 10*time.Second, "alice to be allowed to create carol's tokens", func() bool {
		carolTok2, err = alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: carol})
		return err == nil
	})
	if carolTok2.Owner.Name != "carol" || carolTok2.TokenRequesterPrincipal.Name != "alice" {
		t.Fatalf("alice creates a token for carol: %+v", carolTok2)
	}

	// Describe.
	ids := func(cl *kadm.Client, owners ...kadm.Principal) []string {
		t.Helper()
		ts, err := cl.DescribeDelegationTokens(ctx, owners...)
		if err != nil {
			t.Fatalf("describe: %v", err)
		}
		var out []string
		for _, d := range ts {
			out = append(out, d.TokenID)
		}
		slices.Sort(out)
		return out
	}
	all := []string{tok.TokenID, carolTok.TokenID, carolTok2.TokenID}
	carols := []string{carolTok.TokenID, carolTok2.TokenID}
	slices.Sort(all)
	slices.Sort(carols)
	waitFor(t, 10*time.Second, "broker 2 to describe every token to admin", func() bool { return slices.Equal(ids(as("admin", saslp2)), all) })
	if got := ids(alice); !slices.Equal(got, []string{tok.TokenID}) {
		t.Fatalf("alice describes %v", got)
	}
	if got := ids(bob); !slices.Equal(got, []string{tok.TokenID}) {
		t.Fatalf("bob, the renewer, describes %v", got)
	}
	if got := ids(eve); !slices.Equal(got, []string{tok.TokenID}) {
		t.Fatalf("eve, with DescribeTokens on alice, describes %v", got)
	}
	if got := ids(bob, kadm.Principal{Type: "User", Name: "carol"}); len(got) != 0 {
		t.Fatalf("bob describes carol's: %v", got)
	}
	if got := ids(admin, kadm.Principal{Type: "User", Name: "carol"}); !slices.Equal(got, carols) {
		t.Fatalf("admin describes carol's: %v", got)
	}

	// Renewal.
	if _, err := eve.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("eve renews alice's token: %v", err)
	}
	expiry, err := bob.RenewDelegationToken(ctx, tok.HMAC, time.Hour)
	if err != nil || expiry.After(time.Now().Add(time.Hour+time.Minute)) || expiry.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("bob renews for an hour: %v, expiry %v", err, expiry)
	}

	// Restart of the controller's node: the tokens are in the metadata log.
	c.Stop(1)
	c.Start(1)
	c.WaitReady(1)
	waitFor(t, 30*time.Second, "the token to authenticate at broker 1 after its restart", func() bool { return authenticates(saslp) == nil })

	// alice expires her token: refused from the next connection, on both
	// brokers.
	if _, err := as("alice", saslp).ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatalf("alice expires her token: %v", err)
	}
	for _, seed := range []string{saslp, saslp2} {
		waitFor(t, 10*time.Second, "the expired token to be refused at "+seed, func() bool {
			return errors.Is(authenticates(seed), kerr.SaslAuthenticationFailed)
		})
	}
	if got := ids(as("admin", saslp)); !slices.Equal(got, carols) {
		t.Fatalf("tokens after alice's expired: %v", got)
	}
}
