package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/storage"
)

func TestFollowerTruncationOffset(t *testing.T) {
	// The follower's epochs: 1 from 0, 3 from 50, log end offset 80.
	local := func(requested int32) (int32, int64) {
		switch {
		case requested >= 3:
			return 3, 80
		case requested >= 1:
			return 1, 50
		}
		return storage.UndefinedEpoch, storage.UndefinedEpochOffset
	}
	for _, tc := range []struct {
		name        string
		leaderEpoch int32
		leaderEnd   int64
		want        int64
		done        bool
	}{
		{"follower truncates to the leader's end offset of its epoch (KIP-101)", 3, 70, 70, true},
		{"follower keeps its log when the leader has more of its epoch", 3, 90, 80, true},
		{"follower lacking the leader's epoch truncates to its own end of the epoch below and asks again (KIP-279)", 2, 60, 50, false},
		{"follower with the leader's older epoch truncates to the smaller end", 1, 40, 40, true},
		{"follower with no epoch at or below the leader's truncates to the leader's end", 0, 20, 20, true},
		{"leader with no epoch end: Kafka's high watermark fallback", storage.UndefinedEpoch, storage.UndefinedEpochOffset, 30, true},
		{"leader with an end but no epoch truncates to the end", storage.UndefinedEpoch, 60, 60, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, done := followerTruncationOffset(local, 80, 30, tc.leaderEpoch, tc.leaderEnd)
			if got != tc.want || done != tc.done {
				t.Fatalf("got (%d, %v), want (%d, %v)", got, done, tc.want, tc.done)
			}
		})
	}
}

// followerFetch sends a follower fetch from broker 2 at offset (v15,
// replica id in ReplicaState, KIP-903), without waiting.
func (c *testCluster) followerFetch(t *testing.T, rc *rawClient, topic string, offset int64) *kmsg.FetchResponse {
	t.Helper()
	req := c.fetchRequest(15, 0, 1, 1<<20, fetchPartitionReq{topic, 0, offset, 1 << 20, -1})
	req.ReplicaState.ID = 2
	return roundTrip[*kmsg.FetchResponse](rc, req)
}

// TestLeaderHighWatermarkIsMinimumISRLogEndOffset: the leader learns the
// follower's log end offset from its fetch offset, the high watermark is
// the minimum over the ISR and never moves back, and acks=all completes
// once the follower fetched past the batch.
func TestLeaderHighWatermarkIsMinimumISRLogEndOffset(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("r", []int32{testNodeID, 2})
	c.produceN(t, "r", 0, 3, 10)
	p := c.broker.lookup(tp("r", 0))
	rc := c.dialRaw(t)
	if hw := p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the follower fetched", hw)
	}
	c.followerFetch(t, rc, "r", 2)
	if hw := p.log.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d after a follower fetch at 2", hw)
	}
	c.followerFetch(t, rc, "r", 1)
	if hw := p.log.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark moved back to %d", hw)
	}

	done := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() { done <- c.produceRaw(t, "r", 0, -1, 10*time.Second, buildBatch(t, 1, 10)) }()
	waitFor(t, "the acks=all batch appended", 5*time.Second, func() bool { return p.log.LogEndOffset() == 4 })
	c.followerFetch(t, rc, "r", 3)
	select {
	case r := <-done:
		t.Fatalf("acks=all answered (%v) before the follower had the batch", kerr.ErrorForCode(r.ErrorCode))
	default:
	}
	c.followerFetch(t, rc, "r", 4)
	select {
	case r := <-done:
		if r.ErrorCode != 0 || p.log.HighWatermark() != 4 {
			t.Fatalf("acks=all: %v, high watermark %d", kerr.ErrorForCode(r.ErrorCode), p.log.HighWatermark())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("acks=all still waiting after the follower fetched past it")
	}
}

// TestISRShrinksAndExpandsThroughAlterPartition: a follower that does not
// fetch for replica.lag.time.max.ms leaves the ISR, one that catches up
// rejoins; both through AlterPartition, effective once committed.
func TestISRShrinksAndExpandsThroughAlterPartition(t *testing.T) {
	c := newTestCluster(t, withConfig("replica.lag.time.max.ms=300", "replica.fetch.wait.max.ms=200"))
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("r", []int32{testNodeID, 2})
	c.produceN(t, "r", 0, 2, 10)
	isr := func() []int32 {
		tp, _ := c.meta.Image().Topic("r")
		return tp.Partitions[0].ISR
	}
	waitFor(t, "the lagging follower out of the ISR", 10*time.Second, func() bool {
		return slices.Equal(isr(), []int32{testNodeID})
	})
	p := c.broker.lookup(tp("r", 0))
	waitFor(t, "the high watermark at the leader's end with the ISR alone", 5*time.Second, func() bool {
		return p.log.HighWatermark() == 2
	})
	rc := c.dialRaw(t)
	c.followerFetch(t, rc, "r", 2)
	waitFor(t, "the caught-up follower back in the ISR", 10*time.Second, func() bool {
		return slices.Contains(isr(), 2)
	})
}

// TestStoppedFollowerStaysOutOfTheISR: a follower that stopped fetching
// (its broker died) leaves the ISR and does not rejoin it while it sends
// no fetch, even though its last log end offset still equals the high
// watermark of a partition nobody writes to: Kafka expands the ISR only on
// a follower's fetch. Rejoining it would hold every acks=all produce until
// it was dropped again, replica.lag.time.max.ms later.
func TestStoppedFollowerStaysOutOfTheISR(t *testing.T) {
	const lag = 300 * time.Millisecond
	c := newTestCluster(t, withConfig("replica.lag.time.max.ms=300", "replica.fetch.wait.max.ms=200"))
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("r", []int32{testNodeID, 2})
	c.produceN(t, "r", 0, 2, 10)
	rc := c.dialRaw(t)
	c.followerFetch(t, rc, "r", 2) // caught up to the leader's end
	isr := func() []int32 {
		tp, _ := c.meta.Image().Topic("r")
		return tp.Partitions[0].ISR
	}
	waitFor(t, "the stopped follower out of the ISR", 10*time.Second, func() bool {
		return slices.Equal(isr(), []int32{testNodeID})
	})
	for end := time.Now().Add(5 * lag); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if slices.Contains(isr(), 2) {
			t.Fatal("a follower that sends no fetch rejoined the ISR")
		}
	}
	c.followerFetch(t, rc, "r", 2)
	waitFor(t, "the follower back in the ISR once it fetches", 10*time.Second, func() bool {
		return slices.Contains(isr(), 2)
	})
}

// TestAcksAllWhenISRShrinksBelowMinimum: an acks=all batch appended while
// the ISR met min.insync.replicas, whose ISR then shrank below it, is never
// committed: below the minimum the high watermark stays (KIP-966's strict
// min ISR, Kafka since 3.7), so the produce times out, and an acks=1 batch
// is not visible to consumers either. The next acks=all one is refused
// before appending with NOT_ENOUGH_REPLICAS (Kafka's appendRecordsToLeader).
func TestAcksAllWhenISRShrinksBelowMinimum(t *testing.T) {
	c := newTestCluster(t, withConfig("replica.lag.time.max.ms=300", "replica.fetch.wait.max.ms=200", "min.insync.replicas=2"))
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("r", []int32{testNodeID, 2})
	// The follower never fetches: it leaves the ISR after the lag.
	r := c.produceRaw(t, "r", 0, -1, 3*time.Second, buildBatch(t, 1, 10))
	if r.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all across an ISR shrink: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	p := c.broker.lookup(tp("r", 0))
	if st := p.state.Load(); len(st.isr) != 1 {
		t.Fatalf("ISR %v, want the leader alone", st.isr)
	}
	if r := c.produceRaw(t, "r", 0, 1, 3*time.Second, buildBatch(t, 1, 10)); r.ErrorCode != 0 {
		t.Fatalf("acks=1 below the minimum: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	leo := p.log.LogEndOffset()
	if hw := p.log.HighWatermark(); hw != 0 || c.broker.advanceHighWatermark(p) {
		t.Fatalf("high watermark %d below min.insync.replicas, want 0 (log end offset %d)", hw, leo)
	}
	r = c.produceRaw(t, "r", 0, -1, 10*time.Second, buildBatch(t, 1, 10))
	if r.ErrorCode != kerr.NotEnoughReplicas.Code || p.log.LogEndOffset() != leo {
		t.Fatalf("acks=all with ISR below the minimum: %v, log end offset %d → %d", kerr.ErrorForCode(r.ErrorCode), leo, p.log.LogEndOffset())
	}
}

// TestHighWatermarkOverMaximalISR: while an ISR change is pending, the
// high watermark is the minimum over the committed ISR and the proposed
// one together (KIP-497), so a pending shrink never lets it pass a
// replica that may still count.
func TestHighWatermarkOverMaximalISR(t *testing.T) {
	b := &Broker{nodeID: 1}
	p := &partition{followers: map[int32]*followerState{2: {logEndOffset: 5}, 3: {logEndOffset: 8}}}
	for _, tc := range []struct {
		name       string
		isr        []int32
		pendingISR []int32
		want       int64
	}{
		{"min over the committed ISR", []int32{1, 3}, nil, 8},
		{"a lagging follower in the ISR holds it", []int32{1, 2, 3}, nil, 5},
		{"pending shrink: still over the larger committed ISR", []int32{1, 2, 3}, []int32{1, 3}, 5},
		{"pending expansion: over the proposed members too", []int32{1, 3}, []int32{1, 2, 3}, 5},
		{"ISR of the leader alone: its log end offset", []int32{1}, nil, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.pendingISR = tc.pendingISR
			st := &partitionState{leader: 1, isLeader: true, replicas: []int32{1, 2, 3}, isr: tc.isr}
			if hw := b.highWatermarkCandidate(p, st, 10); hw != tc.want {
				t.Fatalf("high watermark %d, want %d", hw, tc.want)
			}
		})
	}
}

func TestFetcherIDIsKafkas(t *testing.T) {
	// abs(31 * "orders".hashCode() + p) % 3, computed as Java does (int
	// arithmetic wraps).
	h := int32(-1008770331) // "orders".hashCode()
	for p := int32(0); p < 6; p++ {
		x := 31*h + p
		if x < 0 {
			x = -x
		}
		if got, want := fetcherID(storage.TopicPartition{Topic: "orders", Partition: p}, 3), x%3; got != want {
			t.Fatalf("partition %d: fetcher %d, want %d", p, got, want)
		}
	}
	if got := fetcherID(storage.TopicPartition{Topic: "orders", Partition: 4}, 1); got != 0 {
		t.Fatalf("one fetcher: id %d", got)
	}
}

// A metadata update that makes this node leader of many partitions records
// each one's new leader epoch, at its log end, in its leader-epoch cache
// (the writes run side by side: assignLeaderEpochs), both when the
// partitions arrive and when their leadership comes back in a later epoch.
func TestNewLeaderEpochsRecorded(t *testing.T) {
	c := newTestCluster(t)
	var replicas [][]int32
	for range 40 {
		replicas = append(replicas, []int32{testNodeID})
	}
	c.createAssigned("epochs", replicas...)
	check := func(what string) {
		t.Helper()
		for i := range int32(40) {
			p := c.broker.lookup(tp("epochs", i))
			if p == nil {
				t.Fatalf("%s: epochs-%d not hosted", what, i)
			}
			st := p.state.Load()
			latest, ok := p.log.LeaderEpochCache().LatestEpoch()
			if !st.isLeader || !ok || latest != st.leaderEpoch {
				t.Fatalf("%s: epochs-%d leader %v epoch %d, cache's latest %d (%v)", what, i, st.isLeader, st.leaderEpoch, latest, ok)
			}
			if e := p.log.LeaderEpochCache().Entries(); e[len(e)-1].StartOffset != p.log.LogEndOffset() {
				t.Fatalf("%s: epochs-%d: epoch %d starts at %d, want the log end %d", what, i, latest, e[len(e)-1].StartOffset, p.log.LogEndOffset())
			}
		}
	}
	check("created")
	for i := range int32(40) {
		c.produceN(t, "epochs", i, int(i%3), 10)
	}
	topicID := c.broker.lookup(tp("epochs", 0)).topicID
	for _, leader := range []int32{metadata.NoLeader, testNodeID} {
		var recs []metadata.Record
		for i := range int32(40) {
			recs = append(recs, &metadata.PartitionChangeRecord{TopicID: topicID, PartitionID: i, Leader: leader})
		}
		c.meta.commit(recs...)
	}
	waitFor(t, "the leaderships back in epoch 2", 5*time.Second, func() bool {
		for i := range int32(40) {
			if st := c.broker.lookup(tp("epochs", i)).state.Load(); !st.isLeader || st.leaderEpoch != 2 {
				return false
			}
		}
		return true
	})
	check("back in epoch 2")
}
