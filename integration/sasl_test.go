package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslJAAS is a listener's PlainLoginModule with two users, as Kafka's
// docs write it.
const saslJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" password="admin-secret" \
    user_admin="admin-secret" \
    user_alice="alice-secret";`

// brokerSASL are the server properties of the SASL listeners (ProcessOptions.SASL).
func brokerSASL() []string {
	return []string{
		"sasl.enabled.mechanisms=PLAIN",
		"listener.name.saslp.plain.sasl.jaas.config=" + saslJAAS,
		"listener.name.sasls.plain.sasl.jaas.config=" + saslJAAS,
	}
}

// TestSASLPlain: SASL/PLAIN on a SASL_PLAINTEXT and a SASL_SSL listener of
// two brokers, through the real binary. franz-go, librdkafka
// (confluent-kafka-python) and keel's own CLI authenticate with a user of
// the listener's JAAS configuration, create a topic, produce and consume;
// the principal is the user (a user quota throttles it). A wrong password,
// an unknown user, an unsupported mechanism and a request before
// authentication are refused and logged, and the broker goes on serving.
func TestSASLPlain(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{SSL: certs.brokerSSL(), SASL: brokerSASL()})
	saslp := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLPlaintextPort)
	sasls := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLSSLPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	newClient := func(seed string, tlsCfg *tls.Config, auth plain.Auth, opts ...kgo.Opt) *kgo.Client {
		return newSASLClient(t, seed, tlsCfg, auth.AsMechanism(), opts...)
	}
	alice := plain.Auth{User: "alice", Pass: "alice-secret"}
	trust := &tls.Config{RootCAs: certs.pool}

	const topic, n = "sasl-orders", 2000
	for _, tc := range []struct {
		name, seed string
		tls        *tls.Config
	}{{"SASL_PLAINTEXT", saslp, nil}, {"SASL_SSL", sasls, trust}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(tc.seed, tc.tls, alice, kgo.DefaultProduceTopic(topic+"-"+tc.name))
			adm := kadm.NewClient(cl)
			if resp, err := adm.CreateTopic(ctx, 3, 2, nil, topic+"-"+tc.name); err != nil || resp.Err != nil {
				t.Fatalf("create topic: %v %v", err, resp.Err)
			}
			for i := range n {
				cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cons := newClient(tc.seed, tc.tls, alice, kgo.ConsumeTopics(topic+"-"+tc.name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			seen := 0
			for seen < n && ctx.Err() == nil {
				seen += cons.PollFetches(ctx).NumRecords()
			}
			if seen != n {
				t.Fatalf("consumed %d of %d", seen, n)
			}
		})
	}

	// Refused: each answered SASL_AUTHENTICATION_FAILED or
	// UNSUPPORTED_SASL_MECHANISM (or, without SASL, closed) by a broker
	// that goes on serving.
	pingRefused(t, ctx, "a wrong password", kgo.SeedBrokers(saslp), kgo.SASL(plain.Auth{User: "alice", Pass: "guess"}.AsMechanism()))
	pingRefused(t, ctx, "an unknown user", kgo.SeedBrokers(saslp), kgo.SASL(plain.Auth{User: "mallory", Pass: "alice-secret"}.AsMechanism()))
	pingRefused(t, ctx, "SCRAM (not enabled)", kgo.SeedBrokers(saslp), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	pingRefused(t, ctx, "a client without SASL", kgo.SeedBrokers(saslp))
	for _, want := range []string{"SASL authentication failed", "SASL mechanism not enabled", "request before SASL authentication"} {
		waitFor(t, 10*time.Second, "node 1 to log "+want, func() bool { return strings.Contains(c.Log(1), want) })
	}
	if strings.Contains(c.Log(1), "guess") {
		t.Error("a password reached the log")
	}

	// The principal is the SASL user: alice's user quota throttles alice,
	// not admin.
	adm := kadm.NewClient(newClient(saslp, nil, plain.Auth{User: "admin", Pass: "admin-secret"}))
	user := "alice"
	if alt, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}}); err != nil || alt[0].Err != nil {
		t.Fatalf("set a user quota: %v %v", err, alt)
	}
	throttled := func(auth plain.Auth) time.Duration {
		hook := &throttleHook{}
		p := newClient(saslp, nil, auth, kgo.DefaultProduceTopic(topic+"-SASL_PLAINTEXT"), kgo.WithHooks(hook))
		for range 3 {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 64<<10)}).FirstErr(); err != nil {
				t.Fatalf("produce as %s: %v", auth.User, err)
			}
		}
		return hook.max()
	}
	waitFor(t, 20*time.Second, "alice throttled by her user quota", func() bool { return throttled(alice) > 0 })
	if d := throttled(plain.Auth{User: "admin", Pass: "admin-secret"}); d > 0 {
		t.Errorf("admin was throttled %v by alice's quota", d)
	}

	t.Run("keel CLI", func(t *testing.T) {
		props := writePEM(t, t.TempDir(), "client-sasl.properties", []byte(strings.Join([]string{
			"security.protocol=SASL_SSL",
			"sasl.mechanism=PLAIN",
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`,
			"ssl.truststore.type=PEM",
			"ssl.truststore.location=" + certs.caPEM,
		}, "\n")+"\n"))
		out, err := exec.CommandContext(ctx, c.bin, "consume", "--bootstrap-server", sasls, "--command-config", props,
			"--topic", topic+"-SASL_SSL", "--from-beginning", "--max-messages", "5", "--timeout-ms", "20000").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Processed a total of 5 messages") {
			t.Fatalf("keel consume over SASL_SSL: %v\n%s", err, out)
		}
	})

	// sarama over SASL_SSL (SaslHandshake v1, SaslAuthenticate), as admin
	// (alice is throttled by now), and a wrong password refused.
	t.Run("sarama", func(t *testing.T) {
		cfg := func(pass string) *sarama.Config {
			cfg := sarama.NewConfig()
			cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, trust
			cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
			cfg.Net.SASL.User, cfg.Net.SASL.Password = "admin", pass
			cfg.Producer.Return.Successes = true
			cfg.Metadata.Retry.Max, cfg.Metadata.Retry.Backoff = 0, 10*time.Millisecond
			return cfg
		}
		p, err := sarama.NewSyncProducer([]string{sasls}, cfg("admin-secret"))
		if err != nil {
			t.Fatalf("sarama over SASL_SSL: %v", err)
		}
		defer p.Close()
		for i := range 100 {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic + "-SASL_SSL", Value: sarama.StringEncoder(fmt.Sprint("sarama-", i))}); err != nil {
				t.Fatalf("sarama produce: %v", err)
			}
		}
		if _, err := sarama.NewClient([]string{sasls}, cfg("wrong")); err == nil {
			t.Error("sarama with a wrong password was served")
		} else {
			t.Logf("sarama with a wrong password: %v", err)
		}
	})

	// kafka-python 2.0 (Debian's python3-kafka) still authenticates with
	// SaslHandshake v0 and bare tokens.
	t.Run("kafka-python", func(t *testing.T) { runKafkaPythonSASL(t, ctx, saslp, "PLAIN", "alice", "alice-secret", "kp-sasl") })

	t.Run("librdkafka", func(t *testing.T) {
		conf := func(proto, bootstrap, pass string) map[string]string {
			return librdkafkaSASLConf(proto, bootstrap, "PLAIN", "admin", pass, certs.caPEM)
		}
		runLibrdkafkaSecured(t, ctx, []librdkafkaRun{
			{"rdk-sasl_plaintext", conf("SASL_PLAINTEXT", saslp, "admin-secret")},
			{"rdk-sasl_ssl", conf("SASL_SSL", sasls, "admin-secret")},
		}, conf("SASL_PLAINTEXT", saslp, "wrong"))
	})
}

// newSASLClient is a kgo client of seed that authenticates with mechanism
// (over TLS with tlsCfg, if not nil), closed when the test ends.
func newSASLClient(t *testing.T, seed string, tlsCfg *tls.Config, mechanism sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.SASL(mechanism)}, opts...)
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runKafkaPythonSASL runs kafkaPythonSASLScript over SASL_PLAINTEXT.
func runKafkaPythonSASL(t *testing.T, ctx context.Context, bootstrap, mechanism, user, pass, topic string) {
	t.Helper()
	python := pythonWith(t, "kafka", "python3-kafka")
	script := writePEM(t, t.TempDir(), "sasl.py", []byte(kafkaPythonSASLScript))
	out, err := exec.CommandContext(ctx, python, script, bootstrap, mechanism, user, pass, topic).CombinedOutput()
	t.Logf("kafka-python:\n%s", out)
	if err != nil {
		t.Fatalf("kafka-python with %s over SASL_PLAINTEXT: %v", mechanism, err)
	}
}

// librdkafkaSASLConf is a librdkafka client's configuration for a SASL
// listener, trusting caPEM on SASL_SSL.
func librdkafkaSASLConf(proto, bootstrap, mechanism, user, pass, caPEM string) map[string]string {
	c := map[string]string{"bootstrap.servers": bootstrap, "security.protocol": proto, "sasl.mechanism": mechanism,
		"sasl.username": user, "sasl.password": pass}
	if proto == "SASL_SSL" {
		c["ssl.ca.location"] = caPEM
	}
	return c
}

// kafkaPythonSASLScript produces and consumes 200 records with kafka-python
// over SASL_PLAINTEXT, and checks a wrong password is refused. Arguments:
// bootstrap server, mechanism, user, password, topic.
const kafkaPythonSASLScript = `
import sys
from kafka import KafkaProducer, KafkaConsumer
from kafka.errors import KafkaError

bs, mechanism, user, password, topic = sys.argv[1:6]
conf = dict(bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
            sasl_plain_username=user, sasl_plain_password=password)
p = KafkaProducer(**conf)
for i in range(200):
    p.send(topic, ("r%d" % i).encode())
p.flush(30)
p.close()
c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=3000, **conf)
n = sum(1 for _ in c)
c.close()
assert n == 200, "consumed %d of 200" % n
try:
    KafkaProducer(**dict(conf, sasl_plain_password="wrong"))
    raise SystemExit("a wrong password was served")
except KafkaError as e:
    print("wrong password refused:", repr(e))
print("ok: 200 records over SASL/%s with SaslHandshake v0" % mechanism)
`
