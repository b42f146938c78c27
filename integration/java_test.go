package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"software.sslmate.com/src/go-pkcs12"
)

// The Java client (kafka-clients), the reference client, driven by the
// programs in testdata/java. Neither Debian nor npm ships it, so these
// tests run only where KEEL_JAVA_CLASSPATH names a Java classpath holding
// kafka-clients 3.x and its dependencies (a Kafka distribution's libs:
// KEEL_JAVA_CLASSPATH='/opt/kafka/libs/*'), and javac and java are on the
// PATH; elsewhere they skip.

// javaCheck compiles testdata/java against KEEL_JAVA_CLASSPATH and returns
// the classpath to run its programs with, or skips the test.
func javaCheck(t *testing.T) string {
	t.Helper()
	cp := os.Getenv("KEEL_JAVA_CLASSPATH")
	if cp == "" {
		t.Skip("KEEL_JAVA_CLASSPATH is not set (kafka-clients 3.x and its dependencies, e.g. '/opt/kafka/libs/*')")
	}
	for _, tool := range []string{"javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on the PATH (apt-get install openjdk-17-jdk-headless)", tool)
		}
	}
	srcs, err := filepath.Glob(filepath.Join("testdata", "java", "*.java"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no Java sources in testdata/java: %v", err)
	}
	classes := t.TempDir()
	args := append([]string{"-nowarn", "-d", classes, "-cp", cp}, srcs...)
	if out, err := exec.Command("javac", args...).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return classes + string(os.PathListSeparator) + cp
}

// runJava runs one of testdata/java's programs until ctx ends.
func runJava(ctx context.Context, cp, class string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "java", append([]string{"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, class}, args...)...)
}

// TestJavaClient runs JavaClientCheck against three keel processes, so
// that the Admin's calls go to the brokers each needs: admin
// calls (topics by name and by id, configs, partitions, log dirs, the
// quorum, groups and their offsets, quotas, producers, reassignments), the
// idempotent producer with every codec and a consumer group checking every
// key, value, header and offset and murmur2's partitioning, acks=0 and 1,
// message.max.bytes, transactions (commit, abort, offsets sent to a
// transaction, read_committed), seeks, offsets by
// time, read_committed and static membership.
func TestJavaClient(t *testing.T) {
	cp := javaCheck(t)
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}}, ProcessOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := runJava(ctx, cp, "JavaClientCheck", strings.Join(c.BootstrapServers(), ",")).CombinedOutput()
	t.Logf("Java client:\n%s", out)
	if err != nil {
		t.Fatalf("JavaClientCheck: %v", err)
	}
}

// TestJavaProducerAcrossLeaderMoves is TestLibrdkafkaProducerAcrossLeaderMoves
// with the Java client's idempotent producer at its defaults (acks=all,
// enable.idempotence=true) and a consumer-group member reading throughout.
func TestJavaProducerAcrossLeaderMoves(t *testing.T) {
	cp := javaCheck(t)
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{Overrides: []string{"replica.lag.time.max.ms=3000"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := runAcrossLeaderMoves(t, c, runJava(ctx, cp, "JavaFailover", strings.Join(c.BootstrapServers(), ",")))
	t.Logf("Java producer:\n%s", out)
	if err != nil {
		t.Fatalf("JavaFailover: %v", err)
	}
}

// TestJavaClientCompatibilityTool runs Kafka's own client compatibility
// check (org.apache.kafka.tools.ClientCompatibilityTest, from kafka-tools,
// which Kafka's system tests run against each broker version) against one
// keel process, declaring every feature it asks about supported. It skips
// when KEEL_JAVA_CLASSPATH lacks kafka-tools.
func TestJavaClientCompatibilityTool(t *testing.T) {
	cp := javaCheck(t)
	const tool = "org.apache.kafka.tools.ClientCompatibilityTest"
	if exec.Command("javap", "-cp", cp, tool).Run() != nil {
		t.Skipf("%s is not on KEEL_JAVA_CLASSPATH (kafka-tools and argparse4j)", tool)
	}
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}}, ProcessOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := runJava(ctx, cp, tool, "--topic", "compat", "--bootstrap-server", strings.Join(c.BootstrapServers(), ","),
		"--num-cluster-nodes", "1", "--cluster-id-supported", "true", "--offsets-for-times-supported", "true",
		"--expect-record-too-large-exception", "false", "--create-topics-supported", "true",
		"--describe-acls-supported", "true", "--describe-configs-supported", "true",
		"--idempotent-producer-supported", "true").CombinedOutput()
	t.Logf("%s:\n%s", tool, out)
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("%s: %v", tool, err)
	}
}

// TestJavaReplicationPerf is issue 5's measurement with the Java producer,
// the client of Kafka's own replication benchmark (run by `make bench`
// with KEEL_BENCH=1 where KEEL_JAVA_CLASSPATH is set; never asserted):
// three keel processes, 100-byte records, 6 partitions, RF=1 acks=1 and
// RF=3 acks=all (min.insync.replicas=2), each with the Java producer's
// Kafka 4 defaults (linger.ms=5, batch.size=16384, 5 requests in flight),
// first as fast as it goes, then at half of that rate. JavaPerf warms up
// for 5 s (the JVM's JIT and the connections, which otherwise fill the
// first seconds' percentiles) and measures the next KEEL_BENCH_RATE_SECONDS
// (default 15). Rounds alternate the order; the table gives medians.
func TestJavaReplicationPerf(t *testing.T) {
	if os.Getenv("KEEL_BENCH") == "" {
		t.Skip("a load test: set KEEL_BENCH=1 (make bench) to run it")
	}
	cp := javaCheck(t)
	rounds := envInt("KEEL_BENCH_ROUNDS", 3)
	steal := startSteal()
	measure := strconv.Itoa(envInt("KEEL_BENCH_RATE_SECONDS", 15))
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}}, ProcessOptions{})
	seeds := strings.Join(c.BootstrapServers(), ",")
	type variant struct {
		name, topic, acks string
		rf                int16
		full, half        []javaPerfResult
	}
	variants := []*variant{
		{name: "RF=1 acks=1", topic: "jperf-rf1", acks: "1", rf: 1},
		{name: "RF=3 acks=all", topic: "jperf-rf3", acks: "all", rf: 3},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, v := range variants {
		var configs map[string]*string
		if v.rf == 3 {
			configs = map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
		}
		if resp, err := adm.CreateTopic(ctx, 6, v.rf, configs, v.topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", v.topic, err, resp.Err)
		}
	}
	run := func(v *variant, rate float64) javaPerfResult {
		t.Helper()
		out, err := runJava(ctx, cp, "JavaPerf", seeds, v.topic, strconv.FormatFloat(rate, 'f', 0, 64), "5", measure, "100",
			"acks="+v.acks, "linger.ms=5").CombinedOutput()
		r, perr := parseJavaPerf(out)
		if err != nil || perr != nil {
			t.Fatalf("JavaPerf %s at %.0f/s: %v %v\n%s", v.name, rate, err, perr, out)
		}
		t.Logf("JavaPerf %s at %.0f/s (the producer's metrics, then records/s MB/s p50 p99 p99.9 max):\n%s", v.name, rate, out)
		return r
	}
	for round := 0; round < rounds; round++ {
		order := slices.Clone(variants)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			full := run(v, -1)
			half := run(v, full.rate/2)
			v.full, v.half = append(v.full, full), append(v.half, half)
			t.Logf("%s round %d: %.0f records/s, p99 %.2f ms; at half rate p99 %.2f ms", v.name, round+1, full.rate, full.p99, half.p99)
		}
	}
	med := func(rs []javaPerfResult, f func(javaPerfResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		slices.Sort(xs)
		if len(xs)%2 == 0 {
			return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
		}
		return xs[len(xs)/2]
	}
	rate := func(r javaPerfResult) float64 { return r.rate }
	base := med(variants[0].full, rate)
	fmt.Printf("\nReplication cost with the Java producer (Kafka 4 defaults), 3 keel processes, 100-byte records, 6 partitions, median of %d rounds\n", rounds)
	fmt.Printf("%-16s %12s %8s %9s %9s %9s %9s %11s %11s %11s\n", "variant", "records/s", "MB/s", "vs RF=1", "p50 ms", "p99 ms", "p99.9 ms", "half: p50", "half: p99", "half: p99.9")
	for _, v := range variants {
		r := med(v.full, rate)
		fmt.Printf("%-16s %12.0f %8.1f %8.2fx %9.2f %9.2f %9.2f %11.2f %11.2f %11.2f\n", v.name, r, r*100/1e6, r/base,
			med(v.full, func(r javaPerfResult) float64 { return r.p50 }), med(v.full, func(r javaPerfResult) float64 { return r.p99 }),
			med(v.full, func(r javaPerfResult) float64 { return r.p999 }), med(v.half, func(r javaPerfResult) float64 { return r.p50 }),
			med(v.half, func(r javaPerfResult) float64 { return r.p99 }), med(v.half, func(r javaPerfResult) float64 { return r.p999 }))
	}
	fmt.Printf("Load average (1 min) at the end: %s. CPU time taken by the hypervisor (steal) during the rounds: %s.\n", loadAverage(), steal)
}

// javaPerfResult is JavaPerf's line: records/s and latencies in ms.
type javaPerfResult struct{ rate, mbs, p50, p99, p999, max float64 }

// parseJavaPerf reads the last line of JavaPerf's output.
func parseJavaPerf(out []byte) (javaPerfResult, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r javaPerfResult
	var failed int
	last := lines[len(lines)-1]
	if _, err := fmt.Sscanf(last, "%f %f %f %f %f %f failed=%d", &r.rate, &r.mbs, &r.p50, &r.p99, &r.p999, &r.max, &failed); err != nil {
		return r, fmt.Errorf("JavaPerf said %q: %w", last, err)
	}
	if failed > 0 {
		return r, fmt.Errorf("%d sends failed", failed)
	}
	return r, nil
}

// TestJavaClientSSL runs JavaSecurityCheck against two keel processes whose SSL
// listener loads stores keytool made, as a Kafka operator's are: the
// brokers' keystore and truststore in JKS (Kafka's default type), the
// client's keystore in PKCS12 with an EC key, every certificate signed by
// a keytool CA. The listener requires a client certificate.
func TestJavaClientSSL(t *testing.T) {
	cp := javaCheck(t)
	keytool, err := exec.LookPath("keytool")
	if err != nil {
		t.Skip("keytool is not on the PATH")
	}
	dir := t.TempDir()
	kt := func(args ...string) {
		t.Helper()
		cmd := exec.Command(keytool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("keytool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kt("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=Keel Test CA", "-ext", "bc:c",
		"-validity", "2", "-keystore", "ca.p12", "-storetype", "PKCS12", "-storepass", "ca-pass")
	kt("-exportcert", "-alias", "ca", "-keystore", "ca.p12", "-storepass", "ca-pass", "-rfc", "-file", "ca.pem")
	// signed makes store hold alias's key pair with a certificate the CA signed.
	signed := func(store, storeType, pass, alias, dname string, keyArgs []string, ext ...string) {
		kt(append([]string{"-genkeypair", "-alias", alias, "-dname", dname, "-validity", "2",
			"-keystore", store, "-storetype", storeType, "-storepass", pass, "-keypass", pass}, keyArgs...)...)
		kt("-certreq", "-alias", alias, "-keystore", store, "-storepass", pass, "-file", alias+".csr")
		kt(append([]string{"-gencert", "-alias", "ca", "-keystore", "ca.p12", "-storepass", "ca-pass",
			"-infile", alias + ".csr", "-outfile", alias + ".crt", "-rfc", "-validity", "2"}, ext...)...)
		kt("-importcert", "-alias", "ca", "-file", "ca.pem", "-keystore", store, "-storepass", pass, "-noprompt")
		kt("-importcert", "-alias", alias, "-file", alias+".crt", "-keystore", store, "-storepass", pass, "-keypass", pass)
	}
	signed("broker.jks", "JKS", "broker-pass", "broker", "CN=broker", []string{"-keyalg", "RSA", "-keysize", "2048"},
		"-ext", "san=ip:127.0.0.1,dns:localhost")
	signed("client.p12", "PKCS12", "client-pass", "client", "CN=java-app,OU=services,O=Acme", []string{"-keyalg", "EC", "-groupname", "secp256r1"})
	kt("-importcert", "-alias", "ca", "-file", "ca.pem", "-keystore", "truststore.jks", "-storetype", "JKS", "-storepass", "trust-pass", "-noprompt")

	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker"}}, ProcessOptions{SSL: []string{
		"ssl.keystore.location=" + filepath.Join(dir, "broker.jks"),
		"ssl.keystore.password=broker-pass",
		"ssl.key.password=broker-pass",
		"ssl.truststore.location=" + filepath.Join(dir, "truststore.jks"),
		"ssl.truststore.password=trust-pass",
		"ssl.client.auth=required",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	trust := []string{"security.protocol=SSL", "ssl.truststore.location=" + filepath.Join(dir, "truststore.jks"), "ssl.truststore.password=trust-pass"}
	withCert := append(slices.Clone(trust), "ssl.keystore.type=PKCS12", "ssl.keystore.location="+filepath.Join(dir, "client.p12"),
		"ssl.keystore.password=client-pass", "ssl.key.password=client-pass")
	runJavaSecurityCheck(t, ctx, cp, c.Node(1).SSLAddr(), "java-tls", withCert, trust) // no certificate: refused

	// The Java Admin rotates broker 1's keystore (KIP-226), a renewed JKS
	// one for the same name; one for another subject is refused.
	props := filepath.Join(dir, "admin.properties")
	if err := os.WriteFile(props, []byte(strings.Join(withCert, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	alter := func(store string) (string, error) {
		out, err := runJava(ctx, cp, "JavaAlterBrokerConfig", c.Node(1).SSLAddr(), props, "1",
			"listener.name.ssl.ssl.keystore.location="+filepath.Join(dir, store), "listener.name.ssl.ssl.keystore.password=broker-pass",
			"listener.name.ssl.ssl.key.password=broker-pass").CombinedOutput()
		return string(out), err
	}
	signed("impostor.jks", "JKS", "broker-pass", "impostor", "CN=impostor", []string{"-keyalg", "RSA", "-keysize", "2048"},
		"-ext", "san=ip:127.0.0.1,dns:localhost")
	if out, err := alter("impostor.jks"); err == nil || !strings.Contains(out, "InvalidConfigurationException") || !strings.Contains(out, "DistinguishedName") {
		t.Fatalf("a keystore for another subject: %v\n%s", err, out)
	}
	signed("broker-renewed.jks", "JKS", "broker-pass", "broker", "CN=broker", []string{"-keyalg", "RSA", "-keysize", "2048"},
		"-ext", "san=ip:127.0.0.1,dns:localhost")
	if out, err := alter("broker-renewed.jks"); err != nil {
		t.Fatalf("JavaAlterBrokerConfig: %v\n%s", err, out)
	}
	renewed, err := os.ReadFile(filepath.Join(dir, "broker.crt")) // signed's, for the renewed one now
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(renewed)
	want, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	p12, err := os.ReadFile(filepath.Join(dir, "client.p12"))
	if err != nil {
		t.Fatal(err)
	}
	key, cert, _, err := pkcs12.DecodeChain(p12, "client-pass")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	roots.AppendCertsFromPEM(caPEM)
	conn, err := tls.Dial("tcp", c.Node(1).SSLAddr(), &tls.Config{RootCAs: roots,
		Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0]; !got.Equal(want) {
		t.Errorf("broker 1 serves serial %v after the Java Admin's update, want the renewed certificate's %v", got.SerialNumber, want.SerialNumber)
	}
}

// runJavaSecurityCheck runs JavaSecurityCheck against bootstrap with the
// client properties secured (which must work) and refused (which the
// broker must refuse).
func runJavaSecurityCheck(t *testing.T, ctx context.Context, cp, bootstrap, topic string, secured, refused []string) {
	t.Helper()
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "secured.properties"), filepath.Join(dir, "refused.properties")}
	for i, props := range [][]string{secured, refused} {
		if err := os.WriteFile(files[i], []byte(strings.Join(props, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runJava(ctx, cp, "JavaSecurityCheck", bootstrap, files[0], files[1], topic).CombinedOutput()
	t.Logf("Java client (%s):\n%s", secured[0], out)
	if err != nil {
		t.Fatalf("JavaSecurityCheck: %v", err)
	}
}

// TestJavaClientSASL runs JavaSecurityCheck over a SASL_SSL listener with
// SASL/PLAIN (Kafka's PlainLoginModule in sasl.jaas.config, a PEM
// truststore); a wrong password is refused.
func TestJavaClientSASL(t *testing.T) {
	cp := javaCheck(t)
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker"}}, ProcessOptions{SSL: certs.brokerSSL(), SASL: brokerSASL()})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	props := func(pass string) []string {
		return []string{"security.protocol=SASL_SSL", "sasl.mechanism=PLAIN",
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + pass + `";`,
			"ssl.truststore.type=PEM", "ssl.truststore.location=" + certs.caPEM}
	}
	runJavaSecurityCheck(t, ctx, cp, fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLSSLPort), "java-sasl", props("alice-secret"), props("wrong"))
}

// TestJavaClientSCRAM: the Java client (admin, idempotent producer,
// consumer group) with SASL/SCRAM-SHA-512 over SASL_SSL, as a user keel
// format --add-scram gave the cluster; a wrong password is refused with
// SaslAuthenticationException.
func TestJavaClientSCRAM(t *testing.T) {
	cp := javaCheck(t)
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker"}}, ProcessOptions{
		SSL:        certs.brokerSSL(),
		SASL:       []string{"sasl.enabled.mechanisms=SCRAM-SHA-512"},
		FormatArgs: []string{"--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	props := func(pass string) []string {
		return []string{"security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="` + pass + `";`,
			"ssl.truststore.type=PEM", "ssl.truststore.location=" + certs.caPEM}
	}
	runJavaSecurityCheck(t, ctx, cp, fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLSSLPort), "java-scram", props("alice-secret"), props("wrong"))
}
