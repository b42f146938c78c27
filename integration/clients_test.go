package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Clients other than franz-go, run as the programs users run. Each test
// skips when its client is not installed; .ci/run installs them (Debian's
// kcat and python3-kafka) where it can.

// TestKcat drives the broker with librdkafka through kcat: a topic's
// metadata, produce with each codec, a balanced consumer group that reads
// everything back and commits where it stopped, and a static member that
// restarts.
func TestKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, perCodec = "rd", 200
	if resp, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", c.BootstrapServers()[0]}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}

	if md := run("", "-L", "-t", topic); !strings.Contains(md, fmt.Sprintf("topic %q with 4 partitions", topic)) {
		t.Fatalf("kcat -L:\n%s", md)
	}
	want := map[string]bool{}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var in strings.Builder
		for i := range perCodec {
			line := fmt.Sprintf("%s-%d:value %d of %s", codec, i, i, codec)
			in.WriteString(line + "\n")
			want[strings.Replace(line, ":", "=", 1)] = true
		}
		run(in.String(), "-P", "-t", topic, "-K:", "-z", codec, "-X", "enable.idempotence=true")
	}

	out := run("", "-G", "kcat-group", topic, "-o", "beginning", "-e", "-f", `%k=%s\n`)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, line := range got {
		if !want[line] {
			t.Fatalf("consumed %q: not produced, or consumed twice", line)
		}
		delete(want, line)
	}
	if len(want) > 0 {
		t.Fatalf("%d records not consumed (%d were)", len(want), len(got))
	}

	// The group committed the end of every partition when it closed.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, "kcat-group")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if got, ok := committed.Lookup(topic, o.Partition); !ok || got.At != o.Offset {
			t.Errorf("partition %d: committed %+v, end %d", o.Partition, got, o.Offset)
		}
	})

	// A static member (KIP-345) that restarts rejoins a stable group with
	// its instance id and is handed its assignment back; librdkafka's
	// cooperative-sticky assignor crashed the process when the JoinGroup
	// answer (v5) named the new member leader of a group of no members.
	static := []string{"-G", "kcat-static", topic, "-e", "-f", `%k=%s\n`, "-X", "group.instance.id=kcat-1",
		"-X", "partition.assignment.strategy=cooperative-sticky", "-X", "session.timeout.ms=30000",
		"-X", "auto.offset.reset=earliest"}
	if out := run("", static...); strings.Count(out, "\n") != len(got) {
		t.Fatalf("static member read %d records, want %d", strings.Count(out, "\n"), len(got))
	}
	if out := run("", static...); out != "" { // from its committed offsets
		t.Fatalf("restarted static member read %d records, want none", strings.Count(out, "\n"))
	}
}

// kafkaPythonScript runs against the broker at sys.argv[1]; it exits
// non-zero, saying why, on the first difference from what Kafka does.
const kafkaPythonScript = `
import sys, time
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

bootstrap, topic, group, n = sys.argv[1], "py", "py-group", 300
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"})])

producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", acks="all")
for i in range(n):
    producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
producer.flush()
producer.close()

consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, consumer_timeout_ms=20000)
seen = {}
for r in consumer:
    seen[r.key] = (r.value, r.headers)
    if len(seen) == n:
        break
consumer.commit()
consumer.close()
for i in range(n):
    if seen.get(b"k%d" % i) != (b"v%d" % i, [("h", b"%d" % i)]):
        sys.exit("record %d: got %r" % (i, seen.get(b"k%d" % i)))

offsets = admin.list_consumer_group_offsets(group)
if sum(o.offset for o in offsets.values()) != n:
    sys.exit("committed offsets %r" % offsets)

admin.delete_topics([topic])
deadline = time.time() + 15
while topic in admin.list_topics():
    if time.time() > deadline:
        sys.exit("topic still listed after delete_topics")
    time.sleep(0.2)
print("ok")
`

// TestKafkaPython drives the broker with kafka-python (Debian's
// python3-kafka): admin create and delete, a gzip producer with keys and
// headers, a consumer group that commits, the group's offsets.
func TestKafkaPython(t *testing.T) {
	python := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import kafka").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skip("kafka-python is not installed (apt-get install python3-kafka)")
	}
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	script := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(script, []byte(kafkaPythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, script, c.BootstrapServers()[0]).CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("kafka-python: %v\n%s", err, out)
	}
}
