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
	runClientScript(t, "kafka-python", pythonWith(t, "kafka", "python3-kafka"), "client.py", kafkaPythonScript)
}

// runClientScript starts a one-node cluster and runs script (a file named
// name) with interpreter, the node's address its argument; the script must
// end its output with "ok". env is added to the script's environment.
func runClientScript(t *testing.T, client, interpreter, name, script string, env ...string) {
	t.Helper()
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, path, c.BootstrapServers()[0])
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("%s: %v\n%s", client, err, out)
	}
}

// kafkajsDir is where .ci/run installs kafkajs (npm install --prefix);
// KEEL_KAFKAJS_DIR overrides it.
func kafkajsDir() string {
	if d := os.Getenv("KEEL_KAFKAJS_DIR"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "keel-test-clients")
}

// TestKafkaJS drives the broker with kafkajs, the Node.js client: admin
// create, configs, partitions, DeleteRecords and ListOffsets by time, an
// idempotent producer (gzip and uncompressed, keys and headers), a group
// of two consumers that share the partitions and commit, and deletes.
func TestKafkaJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	modules := filepath.Join(kafkajsDir(), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil {
		t.Skipf("kafkajs is not installed (npm install --prefix %s kafkajs)", kafkajsDir())
	}
	runClientScript(t, "kafkajs", node, "client.js", kafkajsScript, "NODE_PATH="+modules, "KAFKAJS_NO_PARTITIONER_WARNING=1")
}

// kafkajsScript runs against the broker at process.argv[2]; it exits
// non-zero, saying why, on the first difference from what Kafka does.
const kafkajsScript = `
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
const kafka = new Kafka({ clientId: 'kafkajs-test', brokers: [process.argv[2]], logLevel: logLevel.ERROR });
const topic = 'js', group = 'js-group', n = 600;
function fail(msg) { throw new Error(msg); }

async function consumeAll(admin) {
  // Two members share the topic's partitions; each partition's records
  // must first arrive in the order they were produced.
  const seen = new Map(), members = new Set(), lastIndex = new Map();
  const consumers = [kafka.consumer({ groupId: group, maxWaitTimeInMs: 1000 }), kafka.consumer({ groupId: group, maxWaitTimeInMs: 1000 })];
  let done;
  const all = new Promise((resolve) => { done = resolve; });
  for (const [m, consumer] of consumers.entries()) {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    consumer.run({ eachMessage: async ({ partition, message }) => {
      const i = parseInt(message.value.toString().slice(1));
      members.add(m);
      if (seen.has(i)) return; // at least once: a rebalance may hand a partition over before its commit
      if ((lastIndex.get(partition) ?? -1) >= i) fail('partition ' + partition + ': record ' + i + ' after ' + lastIndex.get(partition));
      lastIndex.set(partition, i);
      seen.set(i, message);
      if (seen.size === n) done();
    } });
  }
  await Promise.race([all, new Promise((_, reject) => setTimeout(() => reject(new Error('consumed ' + seen.size + ' of ' + n)), 60000).unref())]);
  for (const consumer of consumers) await consumer.disconnect(); // commits what it consumed
  if (members.size !== 2) fail('records went to ' + members.size + ' of 2 members');
  for (let i = 0; i < n; i++) {
    const r = seen.get(i);
    if (r.key.toString() !== 'k' + (i % 17) || r.headers.h.toString() !== 'h' + i) fail('record ' + i + ': key ' + r.key + ', headers ' + JSON.stringify(r.headers));
  }
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  if (!await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true })) fail('topic not created');
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  if (md.topics[0].partitions.length !== 3) fail('metadata: ' + JSON.stringify(md));

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const before = Date.now();
  for (let b = 0; b < 6; b++) {
    const messages = [];
    for (let i = b * n / 6; i < (b + 1) * n / 6; i++) messages.push({ key: 'k' + (i % 17), value: 'v' + i, headers: { h: 'h' + i } });
    await producer.send({ topic, messages, acks: -1, compression: b % 2 ? CompressionTypes.GZIP : CompressionTypes.None });
  }
  await producer.disconnect();
  const ends = await admin.fetchTopicOffsets(topic);
  if (ends.reduce((s, p) => s + Number(p.high), 0) !== n) fail('end offsets: ' + JSON.stringify(ends));
  const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, before - 60000);
  if (byTime.some((p) => p.offset !== '0')) fail('offsets by timestamp: ' + JSON.stringify(byTime));

  await consumeAll(admin);
  const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  for (const p of committed[0].partitions) {
    if (p.offset !== ends.find((e) => e.partition === p.partition).high) fail('committed ' + JSON.stringify(committed) + ', ends ' + JSON.stringify(ends));
  }
  const described = await admin.describeGroups([group]);
  if (described.groups[0].state !== 'Empty') fail('group after both left: ' + JSON.stringify(described));

  await admin.alterConfigs({ resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] });
  const configs = await admin.describeConfigs({ resources: [{ type: 2, name: topic, configNames: ['retention.ms'] }] });
  const entry = configs.resources[0].configEntries[0];
  if (entry.configValue !== '3600000' || entry.isDefault) fail('retention.ms after alterConfigs: ' + JSON.stringify(entry));

  await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] });
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '1' }] });
  const after = await admin.fetchTopicOffsets(topic);
  if (after.length !== 5 || after.find((p) => p.partition === 0).low !== '1') fail('offsets after createPartitions and deleteTopicRecords: ' + JSON.stringify(after));

  await admin.deleteGroups([group]);
  if ((await admin.listGroups()).groups.some((g) => g.groupId === group)) fail('group listed after deleteGroups');
  await admin.deleteTopics({ topics: [topic] });
  if ((await admin.listTopics()).includes(topic)) fail('topic listed after deleteTopics');
  await admin.disconnect();
}
main().then(() => console.log('ok'), (e) => { console.error(e); process.exit(1); });
`
