package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
// message.max.bytes, a refused transactional producer, seeks, offsets by
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
