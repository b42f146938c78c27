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

// TestLibrdkafkaTransactions runs librdkafka's transactional producer
// (confluent-kafka-python, Debian's python3-confluent-kafka) against three
// brokers: a committed, an aborted and a committed transaction, the last
// with a consumer group's offsets (send_offsets_to_transaction); a
// read_committed consumer (librdkafka's default isolation level) reads only
// the committed records, a read_uncommitted one all three, and the group's
// committed offset is the one sent with the transaction.
func TestLibrdkafkaTransactions(t *testing.T) {
	python := pythonWith(t, "confluent_kafka", "python3-confluent-kafka")
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}, {ID: 3, Roles: "broker"}})
	c.WaitReady(20 * time.Second)
	script := filepath.Join(t.TempDir(), "txn.py")
	if err := os.WriteFile(script, []byte(librdkafkaTxnScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, script, strings.Join(c.BootstrapServers(), ",")).CombinedOutput()
	t.Logf("librdkafka:\n%s", out)
	if err != nil {
		t.Fatalf("transactions through librdkafka: %v", err)
	}
}

const librdkafkaTxnScript = `
import sys, time
from confluent_kafka import Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bs = sys.argv[1]
topic = "rdk-txn"
admin = AdminClient({"bootstrap.servers": bs})
for f in admin.create_topics([NewTopic(topic, 1, 3)]).values():
    f.result()
time.sleep(1)  # the leader applies the new topic

p = Producer({"bootstrap.servers": bs, "transactional.id": "rdk-txn-producer"})
p.init_transactions(30)
group = Consumer({"bootstrap.servers": bs, "group.id": "rdk-txn-group"})

def txn(value, commit, offsets=False):
    p.begin_transaction()
    p.produce(topic, value.encode(), partition=0)
    p.flush(30)  # abort_transaction would purge a record not yet sent
    if offsets:
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 11)], group.consumer_group_metadata(), 30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)

txn("c1", True)
txn("a1", False)
txn("c2", True, offsets=True)
print("three transactions ended")

def read(isolation, want):
    c = Consumer({"bootstrap.servers": bs, "group.id": "rdk-reader-" + isolation,
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 20
    while len(got) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            sys.exit("%s consumer: %s" % (isolation, m.error()))
        got.append(m.value().decode())
    c.close()
    return got

got = read("read_committed", 2)
if got != ["c1", "c2"]:
    sys.exit("read_committed read %s, want c1, c2" % got)
got = read("read_uncommitted", 3)
if got != ["c1", "a1", "c2"]:
    sys.exit("read_uncommitted read %s, want c1, a1, c2" % got)
committed = group.committed([TopicPartition(topic, 0)], timeout=30)
if committed[0].offset != 11:
    sys.exit("the group's offset sent with the transaction: %s" % committed)
group.close()
print("ok")
`
