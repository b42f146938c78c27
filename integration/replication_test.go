package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// partitionState is topic-partition's state in the image of any running node.
func partitionState(c *Cluster, topic string, part int32) (*metadata.Partition, bool) {
	for _, n := range c.Nodes {
		if t, ok := n.Raft().Image().Topic(topic); ok && int(part) < len(t.Partitions) {
			return t.Partitions[part], true
		}
	}
	return nil, false
}

// replicaBytes reads a node's whole replica of topic-partition, batch by
// batch across segments; nil when the node hosts none.
func replicaBytes(c *Cluster, id int32, topic string, part int32) []byte {
	n := c.Nodes[id]
	if n == nil {
		return nil
	}
	l := n.PartitionLog(topic, part)
	if l == nil {
		return nil
	}
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.ReadBytes(off, math.MaxInt32, math.MaxInt64)
		if err != nil || len(b) == 0 {
			return nil
		}
		out = append(out, b...)
		for len(b) >= 61 { // the next offset after the last whole batch
			size := int(binary.BigEndian.Uint32(b[8:12])) + 12
			if size > len(b) {
				break
			}
			off = int64(binary.BigEndian.Uint64(b[0:8])) + int64(int32(binary.BigEndian.Uint32(b[23:27]))) + 1
			b = b[size:]
		}
	}
	return out
}

// replicasConverged reports whether every running replica of the partition
// holds exactly the leader's bytes.
func replicasConverged(c *Cluster, topic string, part int32, replicas []int32) bool {
	var want []byte
	for i, id := range replicas {
		got := replicaBytes(c, id, topic, part)
		if got == nil {
			return false
		}
		if i == 0 {
			want = got
		} else if !bytes.Equal(want, got) {
			return false
		}
	}
	return len(want) > 0
}

// appendDivergentBatch appends, to the stopped node's replica in dir, a
// batch in leaderEpoch that no other replica has.
func appendDivergentBatch(t *testing.T, dir string, leaderEpoch int32) {
	t.Helper()
	l, err := storage.OpenLog(dir, storage.OpenOptions{Config: storage.DefaultLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	bb.Append(time.Now().UnixMilli(), []byte("divergent"), []byte("never acknowledged"), nil)
	batch, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(batch, storage.AppendOptions{LeaderEpoch: leaderEpoch}); err != nil {
		t.Fatal(err)
	}
}

func produceKeyed(t *testing.T, c *Cluster, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, _ := newClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records from %d: %v", n, from, err)
	}
	cl.Close()
}

// consumeAll reads partition 0 of topic from the start until n records
// and checks every acknowledged record is there, in order, at its offset.
func consumeAll(t *testing.T, c *Cluster, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, _ := newClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))
	next := 0
	for next < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", next, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(next) || string(r.Key) != fmt.Sprintf("k%d", next) {
				t.Fatalf("record at offset %d key %q, want offset %d key k%d", r.Offset, r.Key, next, next)
			}
			next++
		})
	}
	cl.Close()
}

// TestReplicationSurvivesLeaderCrash is DESIGN §4 end to end on three
// combined nodes: acks=all records reach every replica byte for byte; when
// the leader crashes another ISR member takes over with every acknowledged
// record; the crashed node comes back, truncates, catches up and rejoins
// the ISR; with too few in-sync replicas acks=all is refused.
func TestReplicationSurvivesLeaderCrash(t *testing.T) {
	specs := []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}}
	c := StartCluster(t, specs, "replica.lag.time.max.ms=2000")
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admClient, adm := newClient(t, c)
	const topic = "replicated"
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &minISR}, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the partition with a leader and a full ISR", func() bool {
		p, ok := partitionState(c, topic, 0)
		return ok && p.Leader >= 0 && len(p.ISR) == 3
	})

	// (a) acks=all records are acknowledged and every replica converges.
	produceKeyed(t, c, topic, 0, 5000)
	waitFor(t, 20*time.Second, "every replica to hold the leader's log", func() bool {
		return replicasConverged(c, topic, 0, []int32{1, 2, 3})
	})

	// (b) the leader crashes: another ISR member leads with everything.
	p, _ := partitionState(c, topic, 0)
	old := p.Leader
	c.Kill(old)
	waitFor(t, 20*time.Second, "a new leader", func() bool {
		p, ok := partitionState(c, topic, 0)
		return ok && p.Leader >= 0 && p.Leader != old
	})
	consumeAll(t, c, topic, 5000)
	// Two replicas left, min.insync.replicas=2: acks=all still works once
	// the ISR dropped the crashed node.
	produceKeyed(t, c, topic, 5000, 1000)

	// (c) the crashed node restarts, truncates the divergent suffix,
	// catches up and rejoins the ISR. The divergence: a batch of its old
	// leader epoch at offset 5000, where the new leader wrote other records
	// in its own epoch (what an acks=all batch appended but never
	// replicated before the crash leaves behind).
	appendDivergentBatch(t, filepath.Join(c.Dir(old), topic+"-0"), p.LeaderEpoch)
	c.Start(old)
	c.WaitReady(30 * time.Second)
	waitFor(t, 30*time.Second, "the restarted node back in the ISR", func() bool {
		p, ok := partitionState(c, topic, 0)
		return ok && slices.Contains(p.ISR, old)
	})
	waitFor(t, 20*time.Second, "every replica to hold the leader's log again", func() bool {
		return replicasConverged(c, topic, 0, []int32{1, 2, 3})
	})
	consumeAll(t, c, topic, 6000)

	// (d) one replica of two alive with min.insync.replicas=2: acks=all
	// is refused with NOT_ENOUGH_REPLICAS.
	const small = "two-replicas"
	if _, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{"min.insync.replicas": &minISR}, small); err != nil {
		t.Fatal(err)
	}
	var sp *metadata.Partition
	waitFor(t, 20*time.Second, "the two-replica partition in sync", func() bool {
		var ok bool
		sp, ok = partitionState(c, small, 0)
		return ok && sp.Leader >= 0 && len(sp.ISR) == 2
	})
	follower := sp.ISR[0]
	if follower == sp.Leader {
		follower = sp.ISR[1]
	}
	c.Kill(follower)
	waitFor(t, 20*time.Second, "the ISR to shrink to the leader", func() bool {
		p, ok := partitionState(c, small, 0)
		return ok && len(p.ISR) == 1
	})
	// Some node's image shows the shrink; the leader may not have applied
	// it yet. Until it has, it appends an acks=all batch and answers
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND once the shrink lands (as Kafka
	// does), and kgo's idempotent producer, which cannot know whether such
	// a batch was written, retries it without limit: it hung the package
	// twice. So first probe the leader until it refuses without appending.
	waitFor(t, 20*time.Second, "the leader to refuse acks=all before appending", func() bool {
		req := produceRequest(small, badBatch(t, nil)) // nil: a well-formed batch
		req.Acks = -1
		if tp, ok := c.Nodes[sp.Leader].Raft().Image().Topic(small); ok {
			req.Topics[0].TopicID = tp.ID // Produce v13 names topics by id
		}
		resp, err := admClient.Broker(int(sp.Leader)).Request(ctx, req)
		if err != nil {
			t.Logf("probe: %v", err)
			return false
		}
		code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
		t.Logf("probe: %v", kerr.ErrorForCode(code))
		return code == kerr.NotEnoughReplicas.Code
	})
	cl, _ := newClient(t, c, kgo.DefaultProduceTopic(small), kgo.RecordRetries(1), kgo.RequestRetries(1))
	// Should the batch still end unsure, closing the client is what fails
	// it: kgo ignores the context for such a batch.
	closer := time.AfterFunc(30*time.Second, cl.Close)
	defer closer.Stop()
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		p, _ := partitionState(c, small, 0)
		t.Fatalf("acks=all with one in-sync replica of min 2: %v, want NOT_ENOUGH_REPLICAS (partition now %+v, follower %d killed)", err, p, follower)
	}
}

// TestReplicationWithSeveralFetchers: with num.replica.fetchers=3 each
// follower spreads a leader's partitions over three fetchers, and every
// replica still converges byte for byte.
func TestReplicationWithSeveralFetchers(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		"num.replica.fetchers=3")
	c.WaitReady(30 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 6, 3, nil, "spread"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	cl, _ := newClient(t, c, kgo.DefaultProduceTopic("spread"), kgo.RequiredAcks(kgo.AllISRAcks()))
	recs := make([]*kgo.Record, 0, 600)
	for i := 0; i < 600; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every partition's replicas to converge", func() bool {
		for p := int32(0); p < 6; p++ {
			if !replicasConverged(c, "spread", p, []int32{1, 2, 3}) {
				return false
			}
		}
		return true
	})
}

// TestNewTopicsFirstAcksAllProduceIsNotHeldByLongPolls: the followers'
// fetchers are parked in long polls on an existing topic (the wait here
// 20 s, Kafka's default is 500 ms) when a new RF=3 topic is created. A
// fetcher taking on a new partition aborts its parked fetch and fetches
// again naming it, so the new topic's first acks=all produce is
// acknowledged in well under a long poll, not after one.
func TestNewTopicsFirstAcksAllProduceIsNotHeldByLongPolls(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		"replica.fetch.wait.max.ms=20000")
	c.WaitReady(30 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, _ := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, topic := range []string{"parked-on", "created-later"} {
		if resp, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		for p := int32(0); p < 3; p++ {
			start := time.Now()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, p, err)
			}
			took := time.Since(start)
			t.Logf("first acks=all produce to %s-%d: %v", topic, p, took)
			if topic == "created-later" && took > 10*time.Second {
				t.Errorf("the first acks=all produce to %s-%d took %v: held by a follower's long poll", topic, p, took)
			}
		}
		time.Sleep(200 * time.Millisecond) // the followers park on what they fetch
	}
}

// TestFollowerBelowLeaderLogStartRestarts: a follower that was away while
// the leader's log start moved past its log end (DeleteRecords here,
// retention alike) gets OFFSET_OUT_OF_RANGE, restarts its log empty at the
// leader's log start (Kafka's handleOutOfRangeError) and converges.
func TestFollowerBelowLeaderLogStartRestarts(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		"replica.lag.time.max.ms=1000")
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, adm := newClient(t, c)
	const topic = "trimmed"
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	waitFor(t, 20*time.Second, "a leader and a full ISR", func() bool {
		p, ok := partitionState(c, topic, 0)
		return ok && p.Leader >= 0 && len(p.ISR) == 3
	})
	produceKeyed(t, c, topic, 0, 50)
	p, _ := partitionState(c, topic, 0)
	var away int32
	for _, r := range p.Replicas {
		if r != p.Leader {
			away = r
			break
		}
	}
	waitFor(t, 20*time.Second, "the replicas to converge", func() bool {
		return replicasConverged(c, topic, 0, p.Replicas)
	})
	c.Stop(away)
	waitFor(t, 20*time.Second, "the stopped follower out of the ISR", func() bool {
		p, ok := partitionState(c, topic, 0)
		return ok && !slices.Contains(p.ISR, away)
	})
	produceKeyed(t, c, topic, 50, 100)
	res, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: kadm.Offset{Topic: topic, Partition: 0, At: 120}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	c.Start(away)
	waitFor(t, 30*time.Second, "the returning follower to restart at the leader's log start and catch up", func() bool {
		l := c.Nodes[away].PartitionLog(topic, 0)
		return l != nil && l.LogStartOffset() == 120 && l.LogEndOffset() == 150 &&
			replicasConverged(c, topic, 0, p.Replicas)
	})
}

// produceNumbered produces n records, valued prefix-0 to prefix-(n-1), to
// cl's default topic, and fails the test unless all are acknowledged.
func produceNumbered(ctx context.Context, t *testing.T, cl *kgo.Client, n int, prefix string) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestFollowerTruncatesOnDivergingEpoch: a follower whose log holds more
// of its last epoch than the leader's — here a batch put into its log
// directly — fetches past the leader's end of that epoch, naming it as its
// LastFetchedEpoch (Fetch v12+, KIP-595). The leader answers with a
// DivergingEpoch (the epoch and where it ends) instead of records, and the
// follower truncates the suffix and converges to the leader's log: the
// fetch-path counterpart of the OffsetForLeaderEpoch truncation a follower
// does on becoming one.
func TestFollowerTruncatesOnDivergingEpoch(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}})
	c.WaitReady(30 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, "div"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	cl, _ := newClient(t, c, kgo.DefaultProduceTopic("div"), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(n int, prefix string) { produceNumbered(ctx, t, cl, n, prefix) }
	produce(20, "a")
	waitFor(t, 30*time.Second, "the replicas to converge", func() bool { return replicasConverged(c, "div", 0, []int32{1, 2, 3}) })
	st, _ := partitionState(c, "div", 0)
	follower := st.Replicas[0]
	if follower == st.Leader {
		follower = st.Replicas[1]
	}
	fl := c.Nodes[follower].PartitionLog("div", 0)
	leo := fl.LogEndOffset()

	// Three records in the leader's epoch that the leader never wrote.
	opts := record.DefaultBatchOptions()
	opts.PartitionLeaderEpoch = st.LeaderEpoch
	bb := record.NewBatchBuilder(opts)
	for i := 0; i < 3; i++ {
		bb.Append(time.Now().UnixMilli(), nil, []byte("divergent"), nil)
	}
	batch, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(batch, uint64(leo)) // outside the CRC
	if _, err := fl.AppendAsFollower(batch, false); err != nil {
		t.Fatalf("append the divergent batch: %v", err)
	}
	if fl.LogEndOffset() != leo+3 {
		t.Fatalf("follower log ends at %d, want %d", fl.LogEndOffset(), leo+3)
	}
	// Its next fetch (after the long poll in flight) is answered with a
	// DivergingEpoch: the follower's log is cut back to the leader's.
	waitFor(t, 30*time.Second, "the follower to truncate the divergent batch", func() bool { return fl.LogEndOffset() == leo })
	produce(10, "b")
	waitFor(t, 30*time.Second, "the replicas to converge again", func() bool { return replicasConverged(c, "div", 0, []int32{1, 2, 3}) })
	if b := replicaBytes(c, follower, "div", 0); bytes.Contains(b, []byte("divergent")) {
		t.Fatal("the divergent records survived on the follower")
	}
}

// TestFollowerThatLedWithoutAppendingRejoins: leadership moves to a
// follower and back before anything is produced, as a preferred-leader
// rebalance after a broker's restart does on an idle partition. The
// replica that led for a moment recorded its epoch at its log end without
// appending, so the epoch is in its cache and in no other replica's. As a
// follower again it names that epoch (OffsetForLeaderEpoch, then each
// fetch's LastFetchedEpoch); the leader's answer ends the epoch below at
// the follower's log end, where nothing is left to truncate, but the
// truncation still drops the empty epoch, as Kafka's does. Otherwise every
// fetch was answered with the same DivergingEpoch, and the follower stayed
// out of the ISR and behind the log for good.
func TestFollowerThatLedWithoutAppendingRejoins(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		"replica.lag.time.max.ms=2000")
	c.WaitReady(30 * time.Second)
	const topic = "led"
	cl, adm := newClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	produce := func(n int, prefix string) { produceNumbered(ctx, t, cl, n, prefix) }
	produce(20, "a")
	st, _ := partitionState(c, topic, 0)
	first := st.Replicas
	waitFor(t, 30*time.Second, "the replicas to converge", func() bool { return replicasConverged(c, topic, 0, first) })

	// lead makes replicas[0] the leader: reorder, then a preferred-leader
	// election, and wait until every node's image says so.
	lead := func(replicas []int32) int32 {
		t.Helper()
		req := kadm.AlterPartitionAssignmentsReq{}
		req.Assign(topic, 0, replicas)
		if resp, err := adm.AlterPartitionAssignments(ctx, req); err != nil || resp.Error() != nil {
			t.Fatalf("reassign %v: %v %v", replicas, err, resp.Error())
		}
		inImages := func(cond func(*metadata.Partition) bool) func() bool {
			return func() bool {
				for _, n := range c.Nodes {
					tp, ok := n.Raft().Image().Topic(topic)
					if !ok || !cond(tp.Partitions[0]) {
						return false
					}
				}
				return true
			}
		}
		waitFor(t, 30*time.Second, fmt.Sprintf("replicas %v", replicas), inImages(func(p *metadata.Partition) bool {
			return slices.Equal(p.Replicas, replicas) && len(p.ISR) == 3
		}))
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
		if err != nil || res[topic][0].Err != nil {
			t.Fatalf("elect %d: %v %+v", replicas[0], err, res)
		}
		waitFor(t, 30*time.Second, fmt.Sprintf("%d to lead", replicas[0]), inImages(func(p *metadata.Partition) bool {
			return p.Leader == replicas[0]
		}))
		p, _ := partitionState(c, topic, 0)
		// The new leader has recorded its epoch (at its log end).
		waitFor(t, 30*time.Second, "the leader's epoch recorded", func() bool {
			e, ok := c.Nodes[replicas[0]].PartitionLog(topic, 0).LeaderEpochCache().LatestEpoch()
			return ok && e == p.LeaderEpoch
		})
		return p.LeaderEpoch
	}
	moment := []int32{first[1], first[0], first[2]}
	momentEpoch := lead(moment) // nothing produced in this epoch
	lead(first)
	produce(10, "b")
	waitForState(t, 30*time.Second, "the replica that led for a moment to rejoin", func() (bool, string) {
		p, _ := partitionState(c, topic, 0)
		ok := replicasConverged(c, topic, 0, first) && len(p.ISR) == 3
		l := c.Nodes[moment[0]].PartitionLog(topic, 0)
		return ok, fmt.Sprintf("ISR %v; replica %d ends at %d with epochs %v; leader %d ends at %d",
			p.ISR, moment[0], l.LogEndOffset(), l.LeaderEpochCache().Entries(),
			first[0], c.Nodes[first[0]].PartitionLog(topic, 0).LogEndOffset())
	})
	for _, e := range c.Nodes[moment[0]].PartitionLog(topic, 0).LeaderEpochCache().Entries() {
		if e.Epoch == momentEpoch {
			t.Fatalf("epoch %d, led without records, is still in replica %d's cache", momentEpoch, moment[0])
		}
	}
}

// TestDurableModeAcksOnlyWhatTheISRFsynced: with flush.messages=1 an
// acks=all record is acknowledged only once every replica in the ISR has it
// on disk. Followers append without an fsync and sync before their next
// fetch reports the new log end offset, so whenever a record's
// acknowledgement arrives, every replica then in the ISR (one that rejoined
// since reported at least as much) has a durable offset past it.
func TestDurableModeAcksOnlyWhatTheISRFsynced(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}})
	c.WaitReady(30 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	configs := map[string]*string{"flush.messages": kadm.StringPtr("1"), "min.insync.replicas": kadm.StringPtr("2")}
	if resp, err := adm.CreateTopic(ctx, 3, 3, configs, "durable"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	var checked atomic.Int64
	check := func(r *kgo.Record) {
		p, ok := partitionState(c, "durable", r.Partition)
		if !ok {
			t.Errorf("no metadata for partition %d", r.Partition)
			return
		}
		for _, id := range p.ISR {
			l := c.Nodes[id].PartitionLog("durable", r.Partition)
			if d := l.DurableOffset(); d <= r.Offset {
				t.Errorf("offset %d of partition %d acknowledged; replica %d (in the ISR) is durable only below %d", r.Offset, r.Partition, id, d)
			}
		}
		checked.Add(1)
	}
	var wg sync.WaitGroup
	for range 4 {
		cl, _ := newClient(t, c, kgo.DefaultProduceTopic("durable"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
		wg.Go(func() {
			for i := range 500 {
				r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v")}
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					if err != nil {
						t.Error(err)
						return
					}
					check(r)
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := checked.Load(); n != 2000 {
		t.Fatalf("%d acknowledgements checked, want 2000", n)
	}
}
