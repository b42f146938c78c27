package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLibrdkafkaProducerAcrossLeaderMoves runs librdkafka's idempotent
// producer (confluent-kafka-python, Debian's python3-confluent-kafka) with
// acks=all against three keel processes while every node is restarted in
// turn (controlled shutdown: leaderships move), one is killed with
// kill -9 and one's disk fails under it. librdkafka holds the broker to Kafka's idempotence contract
// more strictly than kgo: a sequence or epoch answer it does not expect
// after a leadership move is a fatal producer error, not a silent epoch
// bump. The script fails on any failed delivery, any fatal error, and any
// acknowledged record a consumer cannot read back.
func TestLibrdkafkaProducerAcrossLeaderMoves(t *testing.T) {
	python := pythonWith(t, "confluent_kafka", "python3-confluent-kafka")
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{Overrides: []string{"replica.lag.time.max.ms=3000"}})
	script := filepath.Join(t.TempDir(), "producer.py")
	if err := os.WriteFile(script, []byte(librdkafkaFailoverScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := runAcrossLeaderMoves(t, c, exec.CommandContext(ctx, python, script, strings.Join(c.BootstrapServers(), ",")))
	t.Logf("librdkafka producer:\n%s", out)
	if err != nil {
		t.Fatalf("librdkafka: %v", err)
	}
}

// runAcrossLeaderMoves runs a client program that prints "producing" once
// it produces, produces until its stdin closes, then checks what it
// produced and prints "ok" last if everything held. Meanwhile every node
// of c is restarted in turn (controlled shutdown: leaderships move), one
// is killed with kill -9 and one's disk fails under it. It returns the
// program's output, and an error saying why if it did not end with "ok".
func runAcrossLeaderMoves(t *testing.T, c *ProcessCluster, cmd *exec.Cmd) (string, error) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started, done := make(chan struct{}), make(chan struct{})
	var out strings.Builder // written by the reader until done closes
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "producing" {
				close(started)
			}
			out.WriteString(sc.Text() + "\n")
		}
	}()
	select {
	case <-started:
	case <-done:
		_ = cmd.Wait()
		t.Fatalf("client ended before producing:\n%s\n%s", out.String(), stderr.String())
	}
	time.Sleep(2 * time.Second)
	for _, id := range []int32{1, 2, 3} {
		c.Restart(id)
		time.Sleep(2 * time.Second)
	}
	c.Kill(2)
	time.Sleep(2 * time.Second)
	c.Start(2)
	c.WaitReady(2)
	time.Sleep(2 * time.Second)
	// A disk failure: every write of node 3 fails; it answers
	// KAFKA_STORAGE_ERROR for its partitions, moves its leaderships away
	// and exits; then it starts again on its recovered dirs.
	c.FailWrites(3)
	if err := c.WaitExit(3, 30*time.Second); err == nil {
		t.Fatal("node 3 exited cleanly after its disk failed")
	}
	time.Sleep(2 * time.Second)
	c.Start(3)
	c.WaitReady(3)
	time.Sleep(2 * time.Second)
	stdin.Close() // stop producing, flush, read everything back
	<-done
	err = cmd.Wait()
	if err == nil && !strings.HasSuffix(out.String(), "ok\n") {
		err = errors.New("the last line is not ok")
	}
	if err != nil {
		return out.String(), fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return out.String(), nil
}

// librdkafkaFailoverScript produces to the brokers in sys.argv[1] until
// stdin closes, then reads the topic back; it exits non-zero, saying why,
// on a failed delivery, a fatal producer error or an acknowledged record
// missing.
const librdkafkaFailoverScript = `
import sys, threading, time, collections
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, partitions = sys.argv[1], "rd", 6
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result()
fatal = []
def on_error(err):
    if err.fatal():
        fatal.append(str(err))
producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "linger.ms": 5, "error_cb": on_error})
acked, failed = set(), collections.Counter()
def on_delivery(err, msg):
    if err:
        failed[str(err)] += 1
    else:
        acked.add(msg.value())
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("producing", flush=True)
n = 0
while not stop.is_set() and not fatal:
    for _ in range(20):
        producer.produce(topic, key=b"k%d" % (n % 97), value=b"v%d" % n, on_delivery=on_delivery)
        n += 1
    producer.poll(0.01)
unflushed = producer.flush(120)
print("produced %d, acknowledged %d, failed %s, unflushed %d" % (n, len(acked), dict(failed), unflushed))
if fatal or failed or unflushed:
    sys.exit("fatal errors %s" % fatal)

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rd-check", "enable.auto.commit": False})
consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
seen, deadline = set(), time.time() + 60
while not acked <= seen and time.time() < deadline:
    m = consumer.poll(0.5)
    if m is not None and not m.error():
        seen.add(m.value())
consumer.close()
missing = acked - seen
print("read back %d" % len(seen))
if missing:
    sys.exit("%d acknowledged records missing, e.g. %s" % (len(missing), sorted(missing)[:10]))
print("ok")
`

// pythonWith is a python3 that imports module, or skips the test naming
// the Debian package that provides it.
func pythonWith(t *testing.T, module, debianPackage string) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import "+module).Run() == nil {
			return p
		}
	}
	t.Skipf("python3 cannot import %s (apt-get install %s)", module, debianPackage)
	return ""
}
