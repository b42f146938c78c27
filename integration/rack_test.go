package integration

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchBytes counts the bytes of Fetch responses a client read, by broker.
type fetchBytes struct {
	mu     sync.Mutex
	byNode map[int32]int
}

func (h *fetchBytes) OnBrokerRead(meta kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key != 1 || err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byNode[meta.NodeID] += n
}

func (h *fetchBytes) take() map[int32]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.byNode
	h.byNode = map[int32]int{}
	return out
}

// TestFetchFromClosestReplica runs three keel processes in racks r1, r2
// and r3 with replica.selector.class=RackAwareReplicaSelector (KIP-392):
// Metadata names the racks; a kgo consumer with client.rack set to a
// follower's rack reads (nearly) every byte from that follower, and so
// does kcat (librdkafka) with client.rack; when the
// follower is killed, the consumer goes back to the leader and reads on
// without losing or repeating a record; a topic created with two brokers
// in one rack puts each partition's replicas in both racks.
func TestFetchFromClosestReplica(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{
			Overrides: []string{"replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
				"keel.metrics.address=127.0.0.1:0"},
			NodeOverrides: map[int32][]string{1: {"broker.rack=r1"}, 2: {"broker.rack=r2"}, 3: {"broker.rack=r3"}},
		})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		if b.Rack == nil || *b.Rack != fmt.Sprintf("r%d", b.NodeID) {
			t.Fatalf("broker %d: rack %v in Metadata, want r%d", b.NodeID, b.Rack, b.NodeID)
		}
	}

	const topic = "near"
	if resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	var leader, near int32 = -1, -1
	waitFor(t, 30*time.Second, "a leader with three in-sync replicas", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil || md.Topics[topic].Err != nil || len(md.Topics[topic].Partitions) != 1 {
			return false
		}
		p := md.Topics[topic].Partitions[0]
		leader = p.Leader
		return leader >= 0 && len(p.ISR) == 3
	})
	near = leader%3 + 1 // a follower
	t.Logf("leader %d; the consumer is in rack r%d", leader, near)

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%06d-%s", i, make([]byte, 200))}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce(0, 2000)

	hooks := &fetchBytes{byNode: map[int32]int{}}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.Rack(fmt.Sprintf("r%d", near)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.WithHooks(hooks),
		// kgo keeps fetching from a preferred replica until this much
		// time has passed, even once it is dead and gone from Metadata
		// (its default is 30 minutes; the Java consumer goes back to the
		// leader as soon as Metadata calls the replica offline).
		kgo.RecheckPreferredReplicaInterval(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := 0
	consume := func(upTo int) {
		t.Helper()
		for next < upTo {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d: %v", next, upTo, ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				if want := fmt.Sprintf("%06d-", next); string(r.Value[:7]) != want || r.Offset != int64(next) {
					t.Fatalf("record at offset %d is %q, want %q at %d", r.Offset, r.Value[:7], want, next)
				}
				next++
			})
		}
	}
	consume(2000)
	read := hooks.take()
	// The leader answers the first fetch, and each of kgo's rechecks, with
	// ~80 bytes and no records.
	if read[near] < 10_000 || read[leader] > read[near]/10 {
		t.Fatalf("fetch bytes by broker %v: want the records from %d, next to nothing from the leader %d", read, near, leader)
	}

	// librdkafka (kcat) with client.rack: the near follower's
	// BytesOutPerSec for the topic grows by the records, the leader's not.
	if kcat, err := exec.LookPath("kcat"); err == nil {
		bytesOut := func(id int32) float64 {
			return sumSeries(scrape(t, c, id), "kafka_server_brokertopicmetrics_bytesout_total", "topic", topic)
		}
		nearBefore, leaderBefore := bytesOut(near), bytesOut(leader)
		cmd := exec.CommandContext(ctx, kcat, "-b", strings.Join(c.BootstrapServers(), ","), "-C", "-t", topic,
			"-X", fmt.Sprintf("client.rack=r%d", near), "-o", "beginning", "-c", "2000", "-e", "-q", "-f", "%o\n")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat: %v\n%s", err, stderr.String())
		}
		if lines := strings.Fields(string(out)); len(lines) != 2000 || lines[0] != "0" || lines[1999] != "1999" {
			t.Fatalf("kcat read %d records (%.40q...)", len(lines), out)
		}
		nearOut, leaderOut := bytesOut(near)-nearBefore, bytesOut(leader)-leaderBefore
		t.Logf("kcat: %.0f bytes out of broker %d, %.0f of the leader", nearOut, near, leaderOut)
		if nearOut < 10_000 || leaderOut > nearOut/100 {
			t.Fatalf("kcat's fetches: %.0f bytes out of %d, %.0f of the leader %d; want the records from %d", nearOut, near, leaderOut, leader, near)
		}
	}

	// The follower in the consumer's rack dies: the consumer reads on
	// from the leader.
	c.Kill(near)
	produce(2000, 500)
	consume(2500)
	if read = hooks.take(); read[leader] == 0 {
		t.Fatalf("fetch bytes by broker after the follower died: %v, want the leader %d", read, leader)
	}

	// Racks a, a, b: two brokers share a rack, so every partition has a
	// replica in each rack (rack-aware placement, as Kafka's).
	placed := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{NodeOverrides: map[int32][]string{1: {"broker.rack=a"}, 2: {"broker.rack=a"}, 3: {"broker.rack=b"}}})
	pcl, err := kgo.NewClient(kgo.SeedBrokers(placed.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	padm := kadm.NewClient(pcl)
	if resp, err := padm.CreateTopic(ctx, 12, 2, nil, "spread"); err != nil || resp.Err != nil {
		t.Fatalf("create spread: %v %v", err, resp.Err)
	}
	md, err := padm.Metadata(ctx, "spread")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics["spread"].Partitions {
		if len(p.Replicas) != 2 || (p.Replicas[0] != 3 && p.Replicas[1] != 3) {
			t.Fatalf("partition %d on %v: want one replica in rack b (broker 3)", p.Partition, p.Replicas)
		}
	}
}
