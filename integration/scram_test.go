package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/keelstream/keel/client"
)

// TestSASLScram: SASL/SCRAM-SHA-256 and SCRAM-SHA-512 through the real
// binary, with the credentials in the metadata log as KRaft keeps them.
//
//   - The cluster starts with an admin credential given to keel format
//     --add-scram; the admin creates alice with kadm (the Admin API's
//     AlterUserScramCredentials, as kafka-configs does) and bob with keel
//     users alter.
//   - franz-go, librdkafka, kafka-python (SaslHandshake v0), keel's SDK and
//     keel's CLI authenticate with them on the SASL_PLAINTEXT and SASL_SSL
//     listeners of both brokers (broker 2 learns them from the metadata
//     log), produce and consume.
//   - A wrong password, an unknown user and PLAIN (not enabled) are
//     refused; a deleted credential is refused from the next connection.
//   - After a restart the credentials are still there, and a bootstrap
//     credential that was deleted is not brought back.
func TestSASLScram(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{
			SSL: certs.brokerSSL(),
			SASL: []string{
				"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
				"listener.name.saslp.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
			},
			FormatArgs: []string{
				"--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
				"--add-scram", `SCRAM-SHA-512=[name="admin",password="admin-secret",iterations=8192]`,
			},
		})
	saslp := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLPlaintextPort)
	sasls := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLSSLPort)
	saslp2 := fmt.Sprintf("127.0.0.1:%d", c.Node(2).SASLPlaintextPort)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	trust := &tls.Config{RootCAs: certs.pool}

	newClient := func(seed string, tlsCfg *tls.Config, m scramMech, opts ...kgo.Opt) *kgo.Client {
		return newSASLClient(t, seed, tlsCfg, m.kgo(), opts...)
	}
	admin256 := scramMech{"SCRAM-SHA-256", "admin", "admin-secret"}
	adm := kadm.NewClient(newClient(saslp, nil, admin256))

	// The bootstrap credentials, as kafka-configs --describe shows them.
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || described.Sorted()[0].User != "admin" || len(described["admin"].CredInfos) != 2 {
		t.Fatalf("describe the bootstrap credentials: %v %+v", err, described)
	}

	// alice, through the Admin API (kadm salts the password).
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"}})
	if err != nil || altered.Error() != nil {
		t.Fatalf("create alice: %v %v", err, altered.Error())
	}
	alice := scramMech{"SCRAM-SHA-512", "alice", "alice-secret"}

	// bob, through keel users, itself authenticated with SCRAM.
	adminProps := writePEM(t, t.TempDir(), "admin.properties", []byte(strings.Join([]string{
		"security.protocol=SASL_PLAINTEXT",
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";`,
	}, "\n")+"\n"))
	keel := func(args ...string) string { t.Helper(); return c.Keel(t, ctx, args...) }
	keel("users", "--bootstrap-server", saslp, "--command-config", adminProps, "--alter", "--entity-type", "users", "--entity-name", "bob",
		"--add-config", "SCRAM-SHA-256=[iterations=4096,password=bob-secret]")
	// The broker that answers may apply the change a moment after the one
	// that forwarded it.
	waitFor(t, 10*time.Second, "keel users describe to list alice and bob", func() bool {
		out := keel("users", "describe", "--bootstrap-server", saslp, "--command-config", adminProps)
		return strings.Contains(out, "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096") &&
			strings.Contains(out, "'alice' are SCRAM-SHA-512=iterations=8192")
	})
	bob := scramMech{"SCRAM-SHA-256", "bob", "bob-secret"}

	// Each broker reads credentials from its own metadata image: wait
	// until both know alice and bob.
	authenticates := func(seed string, m scramMech) bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.SASL(m.kgo()), kgo.RequestRetries(0))
		if err != nil {
			return false
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return cl.Ping(pctx) == nil
	}
	for _, seed := range []string{saslp, saslp2} {
		for _, m := range []scramMech{alice, bob} {
			waitFor(t, 10*time.Second, m.user+" to authenticate at "+seed, func() bool { return authenticates(seed, m) })
		}
	}

	// franz-go as alice on both listeners of broker 1, and on broker 2,
	// which learnt alice from the metadata log.
	const topic, n = "scram-orders", 1500
	if resp, err := kadm.NewClient(newClient(sasls, trust, alice)).CreateTopic(ctx, 3, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic as alice over SASL_SSL: %v %v", err, resp.Err)
	}
	p := newClient(saslp2, nil, alice, kgo.DefaultProduceTopic(topic))
	for i := range n {
		p.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := newClient(sasls, trust, bob, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < n && ctx.Err() == nil {
		seen += cons.PollFetches(ctx).NumRecords()
	}
	if seen != n {
		t.Fatalf("bob consumed %d of %d", seen, n)
	}

	t.Run("keel SDK", func(t *testing.T) {
		for _, auth := range []client.ScramAuth{{Mechanism: "SCRAM-SHA-512", User: "alice", Pass: "alice-secret"}, {User: "bob", Pass: "bob-secret"}} {
			pr, err := client.NewProducer(ctx, client.SeedBrokers(saslp), client.SASL(auth))
			if err != nil {
				t.Fatalf("%v: %v", auth, err)
			}
			if err := pr.ProduceSync(ctx, &client.Record{Topic: topic, Value: []byte("sdk-" + auth.User)}).FirstErr(); err != nil {
				t.Errorf("produce as %v: %v", auth, err)
			}
			pr.Close(ctx)
		}
		if _, err := client.NewAdmin(ctx, client.SeedBrokers(saslp), client.SASL(client.ScramAuth{User: "bob", Pass: "guess"})); err == nil {
			t.Error("the SDK with a wrong password was served")
		}
	})

	t.Run("keel CLI", func(t *testing.T) {
		props := writePEM(t, t.TempDir(), "bob.properties", []byte(strings.Join([]string{
			"security.protocol=SASL_SSL",
			"sasl.mechanism=SCRAM-SHA-256",
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";`,
			"ssl.truststore.type=PEM",
			"ssl.truststore.location=" + certs.caPEM,
		}, "\n")+"\n"))
		out := keel("consume", "--bootstrap-server", sasls, "--command-config", props,
			"--topic", topic, "--from-beginning", "--max-messages", "5", "--timeout-ms", "20000")
		if !strings.Contains(out, "Processed a total of 5 messages") {
			t.Fatalf("keel consume as bob over SASL_SSL:\n%s", out)
		}
	})

	t.Run("kafka-python", func(t *testing.T) {
		runKafkaPythonSASL(t, ctx, saslp, "SCRAM-SHA-512", "alice", "alice-secret", "kp-scram")
	})

	t.Run("librdkafka", func(t *testing.T) {
		conf := func(proto, bootstrap string, m scramMech) map[string]string {
			return librdkafkaSASLConf(proto, bootstrap, m.mechanism, m.user, m.pass, certs.caPEM)
		}
		runLibrdkafkaSecured(t, ctx, []librdkafkaRun{
			{"rdk-scram-256", conf("SASL_PLAINTEXT", saslp2, bob)},
			{"rdk-scram-512", conf("SASL_SSL", sasls, alice)},
		}, conf("SASL_PLAINTEXT", saslp, scramMech{"SCRAM-SHA-256", "bob", "wrong"}))
	})

	// Refused, and logged without the password.
	pingRefused(t, ctx, "a wrong password", kgo.SeedBrokers(saslp), kgo.SASL(scramMech{"SCRAM-SHA-256", "bob", "guess"}.kgo()))
	pingRefused(t, ctx, "an unknown user", kgo.SeedBrokers(saslp), kgo.SASL(scramMech{"SCRAM-SHA-256", "mallory", "bob-secret"}.kgo()))
	pingRefused(t, ctx, "bob's password with the other mechanism", kgo.SeedBrokers(saslp), kgo.SASL(scramMech{"SCRAM-SHA-512", "bob", "bob-secret"}.kgo()))
	pingRefused(t, ctx, "PLAIN (not enabled)", kgo.SeedBrokers(saslp), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	waitFor(t, 10*time.Second, "node 1 to log the failed SCRAM authentications", func() bool {
		return strings.Count(c.Log(1), "SASL authentication failed") >= 3
	})

	// A deleted credential is refused from the next connection, on
	// either broker; admin's bootstrap SCRAM-SHA-256 credential goes too.
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}, {User: "admin", Mechanism: kadm.ScramSha256}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete alice and admin's SCRAM-SHA-256: %v %v", err, res.Error())
	}
	for _, seed := range []string{saslp, saslp2} {
		waitFor(t, 10*time.Second, seed+" to refuse alice", func() bool { return !authenticates(seed, alice) })
	}

	// After a restart of the whole cluster the metadata log still has bob
	// and admin's SCRAM-SHA-512, and the bootstrap records are not applied
	// again: admin's SCRAM-SHA-256 stays deleted. A client that connects
	// to broker 2 while it catches up with the metadata log waits and is
	// authenticated; it is not refused for a credential the broker has not
	// read yet.
	c.Stop(2)
	c.Restart(1)
	c.Start(2)
	waitFor(t, 30*time.Second, "broker 2 to listen", func() bool {
		conn, err := net.Dial("tcp", saslp2)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	for _, m := range []scramMech{bob, {"SCRAM-SHA-512", "admin", "admin-secret"}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslp2), kgo.SASL(m.kgo()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		if err := cl.Ping(pctx); err != nil {
			t.Errorf("%s with %s on broker 2 after the restart: %v", m.user, m.mechanism, err)
		}
		cancel()
		cl.Close()
	}
	if log := c.Log(2); strings.Contains(log[strings.LastIndex(log, "=== start 2 of node 2"):], "SASL authentication failed") {
		t.Error("broker 2 refused a client while it caught up with the metadata log")
	}
	pingRefused(t, ctx, "admin with SCRAM-SHA-256, deleted before the restart", kgo.SeedBrokers(saslp), kgo.SASL(admin256.kgo()))

	for _, id := range []int32{1, 2} {
		for _, secret := range []string{"admin-secret", "alice-secret", "bob-secret", "guess"} {
			if strings.Contains(c.Log(id), secret) {
				t.Errorf("node %d logged a password (%s)", id, secret)
			}
		}
	}
}

// scramMech is a SCRAM user for a test's clients.
type scramMech struct{ mechanism, user, pass string }

func (m scramMech) kgo() sasl.Mechanism {
	a := scram.Auth{User: m.user, Pass: m.pass}
	if m.mechanism == "SCRAM-SHA-512" {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}
