package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"software.sslmate.com/src/go-pkcs12"
)

// testCerts are a CA, a broker certificate for 127.0.0.1 and localhost, and
// a client certificate, written where a Kafka operator keeps them: the
// broker's keystore as PKCS12 (what keytool writes), the CA as a PEM
// truststore, the client's certificate and key as PEM files (what
// librdkafka takes).
type testCerts struct {
	dir                    string
	pool                   *x509.CertPool
	client                 tls.Certificate
	caPEM                  string // path
	brokerP12              string // path, password "broker-secret"
	clientCert, clientKey  string // paths, PEM
	clientKeystorePEM      string // path: key and chain in one file (ssl.keystore.type=PEM)
	clientSubject          string
	untrustedClient        tls.Certificate
	untrustedCert, untrKey string
	ca                     *x509.Certificate
	caKey                  *ecdsa.PrivateKey
}

func newTestCerts(t *testing.T) *testCerts {
	t.Helper()
	dir := t.TempDir()
	c := &testCerts{dir: dir, pool: x509.NewCertPool()}
	ca, caKey := selfSignedCA(t, "keel integration CA")
	c.ca, c.caKey = ca, caKey
	c.pool.AddCert(ca)
	c.caPEM = writePEM(t, dir, "ca.pem", pemBlock("CERTIFICATE", ca.Raw))
	c.brokerP12, _ = c.brokerKeystore(t, "broker.p12", "broker")

	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	client := issueCert(t, ca, caKey, &clientKey.PublicKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "Orders-App", OrganizationalUnit: []string{"services"}, Organization: []string{"Acme"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	c.client = tls.Certificate{Certificate: [][]byte{client.Raw}, PrivateKey: clientKey}
	c.clientSubject = "CN=Orders-App,OU=services,O=Acme"
	c.clientCert = writePEM(t, dir, "client.pem", pemBlock("CERTIFICATE", client.Raw))
	c.clientKey = writePEM(t, dir, "client.key", pemBlock("PRIVATE KEY", keyDER))
	c.clientKeystorePEM = writePEM(t, dir, "client-keystore.pem", append(pemBlock("PRIVATE KEY", keyDER), pemBlock("CERTIFICATE", client.Raw)...))

	// A client certificate from a CA the brokers do not trust.
	other, otherKey := selfSignedCA(t, "someone else's CA")
	uKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	u := issueCert(t, other, otherKey, &uKey.PublicKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "intruder"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	uDER, _ := x509.MarshalPKCS8PrivateKey(uKey)
	c.untrustedClient = tls.Certificate{Certificate: [][]byte{u.Raw}, PrivateKey: uKey}
	c.untrustedCert = writePEM(t, dir, "intruder.pem", pemBlock("CERTIFICATE", u.Raw))
	c.untrKey = writePEM(t, dir, "intruder.key", pemBlock("PRIVATE KEY", uDER))
	return c
}

// brokerKeystore writes a PKCS12 keystore (password "broker-secret") with
// a new key and a certificate from the CA for 127.0.0.1 and localhost,
// with subject CN=cn, and returns its path and certificate.
func (c *testCerts) brokerKeystore(t *testing.T, file, cn string) (string, *x509.Certificate) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cert := issueCert(t, c.ca, c.caKey, &key.PublicKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		// Client authentication too: a node presents it to the nodes it
		// dials over SSL (InternalSSL).
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	p12, err := pkcs12.Modern.Encode(key, cert, []*x509.Certificate{c.ca}, "broker-secret")
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, c.dir, file, p12), cert
}

func selfSignedCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

var certSerial = big.NewInt(100)

func issueCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, pub any, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	certSerial.Add(certSerial, big.NewInt(1))
	tmpl.SerialNumber = new(big.Int).Set(certSerial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writePEM(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// brokerSSL are the server properties of an SSL listener with client
// authentication, as a Kafka operator writes them.
func (c *testCerts) brokerSSL() []string {
	return []string{
		"ssl.keystore.type=PKCS12",
		"ssl.keystore.location=" + c.brokerP12,
		"ssl.keystore.password=broker-secret",
		"ssl.key.password=broker-secret",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + c.caPEM,
		"ssl.client.auth=required",
		`ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=services.*$/$1/L,DEFAULT`,
	}
}

// librdkafkaRun is one librdkafka client configuration and the topic it
// creates, fills and reads back.
type librdkafkaRun struct {
	Topic string            `json:"topic"`
	Conf  map[string]string `json:"conf"`
}

// runLibrdkafkaSecured runs librdkafka (confluent-kafka-python) with each
// of runs: an admin client creates its topic (2 partitions, 2 replicas), a
// producer writes 500 keyed records and a group consumer reads them all
// back. A client with refused's configuration must not be served.
func runLibrdkafkaSecured(t *testing.T, ctx context.Context, runs []librdkafkaRun, refused map[string]string) {
	t.Helper()
	python := pythonWith(t, "confluent_kafka", "python3-confluent-kafka")
	script := writePEM(t, t.TempDir(), "secured.py", []byte(librdkafkaSecuredScript))
	good, err := json.Marshal(runs)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := json.Marshal(refused)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, python, script, string(good), string(bad)).CombinedOutput()
	t.Logf("librdkafka:\n%s", out)
	if err != nil {
		t.Fatalf("librdkafka: %v", err)
	}
}

const librdkafkaSecuredScript = `
import json, sys, time
from confluent_kafka import Producer, Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

runs, refused = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for run in runs:
    topic, conf = run["topic"], run["conf"]
    admin = AdminClient(conf)  # kept: a collected client ends its futures
    for f in admin.create_topics([NewTopic(topic, 2, 2)]).values():
        f.result()
    time.sleep(1)  # the leaders apply the new topic
    p = Producer(conf)
    for i in range(500):
        p.produce(topic, ("r%d" % i).encode(), key=str(i % 7).encode())
    left = p.flush(30)
    assert left == 0, "%s: %d records not delivered" % (topic, left)
    c = Consumer(dict(conf, **{"group.id": topic + "-group", "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    seen, deadline = set(), time.time() + 60
    while len(seen) < 500 and time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            seen.add(m.value())
    c.close()
    assert len(seen) == 500, "%s: consumed %d of 500" % (topic, len(seen))
    print("ok: 500 records produced and consumed:", topic, conf["security.protocol"])

bad = AdminClient(refused)
try:
    bad.list_topics(timeout=5)
    raise SystemExit("a refused client was served")
except KafkaException as e:
    print("refused:", e)
`

// pingRefused fails the test unless a kgo client with opts, not retrying,
// is refused (what says who it is).
func pingRefused(t *testing.T, ctx context.Context, what string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err == nil {
		t.Errorf("%s was served", what)
	} else {
		t.Logf("%s: refused: %v", what, err)
	}
}

// clientProperties writes the Kafka client properties of a client with
// the client certificate (keel's --command-config) and returns their path.
func (c *testCerts) clientProperties(t *testing.T) string {
	return writePEM(t, t.TempDir(), "client-ssl.properties", []byte(strings.Join([]string{
		"security.protocol=SSL",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + c.caPEM,
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + c.clientKeystorePEM,
	}, "\n")+"\n"))
}

// TestSSLListener: a broker with an SSL listener (ssl.client.auth=required)
// next to its PLAINTEXT one, through the real binary. franz-go, librdkafka
// (confluent-kafka-python) and keel's own CLI, each with a client
// certificate, create a topic, produce and consume over TLS; every record
// comes back (Fetch over TLS copies file regions instead of sendfile). A
// client without a certificate, one with an untrusted certificate, and a
// plaintext client on the SSL port are refused, and the broker goes on
// serving.
func TestSSLListener(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{SSL: certs.brokerSSL()})
	ssl := c.Node(1).SSLAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tlsCfg := func(cert *tls.Certificate) *tls.Config {
		cfg := &tls.Config{RootCAs: certs.pool}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return cfg
	}
	newClient := func(cert *tls.Certificate, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ssl), kgo.DialTLSConfig(tlsCfg(cert))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	// franz-go: every broker is advertised on the SSL listener too, so
	// the client reaches both over TLS.
	const topic, n = "tls-orders", 3000
	cl := newClient(&certs.client, kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 4, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic over TLS: %v %v", err, resp.Err)
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		if want := c.Node(b.NodeID).SSLPort; int(b.Port) != want {
			t.Errorf("broker %d advertised on port %d to an SSL client, want its SSL listener's %d", b.NodeID, b.Port, want)
		}
	}
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprintf("v%05d", i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce over TLS: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := newClient(&certs.client, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != n {
		t.Fatalf("consumed %d of %d records over TLS", len(seen), n)
	}

	// Refused: no certificate, an untrusted one, plaintext on the SSL port.
	pingRefused(t, ctx, "a client without a certificate", kgo.SeedBrokers(ssl), kgo.DialTLSConfig(tlsCfg(nil)))
	pingRefused(t, ctx, "a client with an untrusted certificate", kgo.SeedBrokers(ssl), kgo.DialTLSConfig(tlsCfg(&certs.untrustedClient)))
	pingRefused(t, ctx, "a plaintext client", kgo.SeedBrokers(ssl))
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("the SSL listener stopped serving after refused clients: %v", err)
	}
	log, _ := os.ReadFile(c.Node(1).LogPath)
	if !strings.Contains(string(log), "TLS handshake failed") {
		t.Error("the refused handshakes were not logged")
	}

	// The client certificate is the principal: its mapped subject
	// (orders-app, by the listener's rule) is the user a user quota
	// throttles; the same produce from a PLAINTEXT client (ANONYMOUS) is not.
	t.Run("principal", func(t *testing.T) {
		user := "orders-app"
		alt, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
		}})
		if err != nil || alt[0].Err != nil {
			t.Fatalf("set a user quota: %v %v", err, alt)
		}
		throttled := func(seed string, tlsCfg *tls.Config) time.Duration {
			hook := &throttleHook{}
			opts := []kgo.Opt{kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic), kgo.WithHooks(hook)}
			if tlsCfg != nil {
				opts = append(opts, kgo.DialTLSConfig(tlsCfg))
			}
			p, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for range 3 {
				if err := p.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 64<<10)}).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			return hook.max()
		}
		waitFor(t, 20*time.Second, "the mTLS principal throttled by its user quota", func() bool {
			return throttled(ssl, tlsCfg(&certs.client)) > 0
		})
		if d := throttled(c.Node(1).AdvertisedPlaintext, nil); d > 0 {
			t.Errorf("an ANONYMOUS client was throttled %v by orders-app's quota", d)
		}
	})

	t.Run("keel CLI", func(t *testing.T) {
		props := certs.clientProperties(t)
		keel := func(args ...string) string { t.Helper(); return c.Keel(t, ctx, args...) }
		if out := keel("topics", "describe", "--bootstrap-server", ssl, "--command-config", props, "--topic", topic); !strings.Contains(out, "PartitionCount: 4") {
			t.Errorf("keel topics describe over TLS:\n%s", out)
		}
		out := keel("consume", "--bootstrap-server", ssl, "--command-config", props, "--topic", topic,
			"--from-beginning", "--max-messages", "10", "--timeout-ms", "20000")
		if got := strings.Count("\n"+out, "\nv"); got != 10 || !strings.Contains(out, "Processed a total of 10 messages") {
			t.Errorf("keel consume over TLS printed %d records, want 10:\n%s", got, out)
		}
	})

	t.Run("librdkafka", func(t *testing.T) {
		conf := map[string]string{"bootstrap.servers": ssl, "security.protocol": "SSL", "ssl.ca.location": certs.caPEM,
			"ssl.certificate.location": certs.clientCert, "ssl.key.location": certs.clientKey}
		// A certificate the brokers do not trust: the handshake fails.
		untrusted := maps.Clone(conf)
		untrusted["ssl.certificate.location"], untrusted["ssl.key.location"] = certs.untrustedCert, certs.untrKey
		runLibrdkafkaSecured(t, ctx, []librdkafkaRun{{"rdk-tls", conf}}, untrusted)
	})
}

// TestSSLBetweenNodes: the nodes talk TLS among themselves, mutual TLS
// required everywhere: Raft and the controller channel over the SSL
// CONTROLLER listener, replica fetching and Raft to the broker observer
// over the SSL inter-broker listener INTERNAL. A controller-only node, two
// combined nodes and a broker-only one; a topic with three replicas and
// min.insync.replicas=2 takes acks=all records while a broker is killed -9
// and restarted: it catches up over TLS and rejoins every ISR, and every
// acknowledged record is read back. keel metadata-quorum describes the
// quorum over the SSL controller listener.
func TestSSLBetweenNodes(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{1, "controller"}, {2, "broker,controller"}, {3, "broker,controller"}, {4, "broker"}},
		ProcessOptions{SSL: certs.brokerSSL(), InternalSSL: true, Overrides: []string{"replica.lag.time.max.ms=3000"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, partitions = "tls-replicated", 3
	if resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	w := StartWorkload(t, c.BootstrapServers(), topic, 2, 200)
	defer w.Stop()
	w.WaitEachPartition(partitions, 50, 30*time.Second, "with every node up")

	c.Kill(4)
	w.WaitAcked(300, 30*time.Second, "with broker 4 killed")
	c.Start(4)
	c.WaitReady(4)
	waitFor(t, 60*time.Second, "broker 4 back in every ISR", func() bool {
		topics, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false
		}
		for _, p := range topics[topic].Partitions {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
	w.WaitAcked(300, 30*time.Second, "after broker 4 rejoined")
	w.Stop()
	if got := w.Check(60 * time.Second); got == 0 {
		t.Fatal("read no records back")
	}

	props := certs.clientProperties(t)
	out, err := exec.CommandContext(ctx, c.bin, "metadata-quorum", "--bootstrap-controller", c.Node(1).AdvertisedController,
		"--command-config", props, "describe", "--status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CurrentVoters:") {
		t.Fatalf("keel metadata-quorum describe over TLS: %v\n%s", err, out)
	}
	for _, id := range []int32{1, 2, 3, 4} {
		if log := c.Log(id); strings.Contains(log, "TLS handshake failed") {
			t.Errorf("node %d refused a TLS handshake:\n%s", id, c.LogTail(id, 20))
		}
	}
	// The controller listener speaks only TLS: a plaintext request is not answered.
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	if _, err := broker.Request(pctx, c.Node(1).AdvertisedController, broker.NewDescribeQuorumRequest()); err == nil {
		t.Error("the SSL controller listener answered a plaintext request")
	}
	pcancel()
}

// throttleHook records the longest throttle a broker asked for.
type throttleHook struct {
	mu      sync.Mutex
	longest time.Duration
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	h.longest = max(h.longest, d)
	h.mu.Unlock()
}

func (h *throttleHook) max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.longest
}
