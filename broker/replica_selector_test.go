package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// consumerFetch is a consumer's Fetch of one partition, with its rack.
func (c *testCluster) consumerFetch(rc *rawClient, version int16, rack string, p fetchPartitionReq) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	req := c.fetchRequest(version, 0, 1, 1<<20, p)
	req.Rack = rack
	resp := roundTrip[*kmsg.FetchResponse](rc, req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("fetch: %v, %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// replicaFetch is a follower's Fetch (v12) at offset, its log starting at
// logStart: what records the follower's log end offset at the leader.
func (c *testCluster) replicaFetch(rc *rawClient, id int32, topic string, offset, logStart int64) {
	c.t.Helper()
	req := c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{topic, 0, offset, 1 << 20, -1})
	req.ReplicaID = id
	req.Topics[0].Partitions[0].LogStartOffset = logStart
	if code := roundTrip[*kmsg.FetchResponse](rc, req).Topics[0].Partitions[0].ErrorCode; code != 0 {
		c.t.Fatalf("follower %d fetch: %v", id, kerr.ErrorForCode(code))
	}
}

// TestPreferredReadReplica drives KIP-392's choice at the leader (rack a):
// a consumer in rack b is sent to the in-sync follower of rack b that holds
// its offset and is furthest along, with no records and the partition's
// offsets; a consumer in the leader's rack, in a rack with no replica, or
// with no rack, or a Fetch below v11, reads from the leader; and without
// replica.selector.class nobody is sent anywhere.
func TestPreferredReadReplica(t *testing.T) {
	c := newTestCluster(t, withConfig("broker.rack=a", "replica.selector.class="+RackAwareReplicaSelectorClass))
	c.meta.registerBrokerInRack(2, "127.0.0.1", 1, "b")
	c.meta.registerBrokerInRack(3, "127.0.0.1", 1, "b")
	c.meta.registerBrokerInRack(4, "127.0.0.1", 1, "c")
	c.createAssigned("t", []int32{testNodeID, 2, 3, 4})
	c.produceN(t, "t", 0, 10, 10)
	rc := c.dialRaw(t)
	c.replicaFetch(rc, 2, "t", 10, 0)
	c.replicaFetch(rc, 3, "t", 6, 0)
	c.replicaFetch(rc, 4, "t", 10, 0)

	at := func(offset int64) fetchPartitionReq { return fetchPartitionReq{"t", 0, offset, 1 << 20, -1} }
	sent := func(what string, p kmsg.FetchResponseTopicPartition, want int32) {
		t.Helper()
		if p.ErrorCode != 0 || p.PreferredReadReplica != want {
			t.Fatalf("%s: %v, preferred read replica %d, want %d", what, kerr.ErrorForCode(p.ErrorCode), p.PreferredReadReplica, want)
		}
		if want >= 0 && (len(p.RecordBatches) != 0 || p.HighWatermark != 6 || p.LastStableOffset != 6 || p.LogStartOffset != 0) {
			t.Fatalf("%s: sent to %d with %d bytes of records, hw %d, lso %d, log start %d; want none and 6, 6, 0",
				what, want, len(p.RecordBatches), p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
		}
		if want < 0 {
			if n, last := batchesIn(t, p.RecordBatches); n == 0 || last != 5 {
				t.Fatalf("%s: read from the leader %d batches to %d, want them to the high watermark (6)", what, n, last)
			}
		}
	}
	sent("rack b", c.consumerFetch(rc, 12, "b", at(0)), 2) // 2 is ahead of 3
	sent("rack b past 3's end", c.consumerFetch(rc, 12, "b", at(5)), 2)
	sent("rack c", c.consumerFetch(rc, 11, "c", at(0)), 4)
	sent("rack a, the leader's", c.consumerFetch(rc, 12, "a", at(0)), -1)
	sent("a rack without replicas", c.consumerFetch(rc, 12, "z", at(0)), -1)
	sent("no rack", c.consumerFetch(rc, 12, "", at(0)), -1)
	sent("v10", c.consumerFetch(rc, 10, "", at(0)), -1)

	// A follower whose log no longer holds the offset is not chosen; of
	// two that do, at the same log end offset, the one caught up last.
	c.replicaFetch(rc, 2, "t", 10, 4)
	sent("below 2's log start", c.consumerFetch(rc, 12, "b", at(2)), 3)
	c.replicaFetch(rc, 2, "t", 10, 0)
	time.Sleep(5 * time.Millisecond)
	c.replicaFetch(rc, 3, "t", 10, 0)
	p := c.consumerFetch(rc, 12, "b", at(0))
	if p.PreferredReadReplica != 3 {
		t.Fatalf("tie on log end offset: preferred %d, want 3 (caught up last)", p.PreferredReadReplica)
	}

	// In a fetch session the partition is in every incremental answer
	// while the consumer is to read elsewhere.
	full := c.fetchRequest(12, 0, 1, 1<<20, at(0))
	full.Rack, full.SessionID, full.SessionEpoch = "b", 0, 0
	resp := roundTrip[*kmsg.FetchResponse](rc, full)
	if resp.SessionID == 0 || resp.Topics[0].Partitions[0].PreferredReadReplica != 3 {
		t.Fatalf("full fetch: session %d, preferred %d", resp.SessionID, resp.Topics[0].Partitions[0].PreferredReadReplica)
	}
	inc := kmsg.NewPtrFetchRequest()
	inc.Version, inc.MaxBytes, inc.MinBytes, inc.Rack = 12, 1<<20, 1, "b"
	inc.SessionID, inc.SessionEpoch = resp.SessionID, 1
	resp = roundTrip[*kmsg.FetchResponse](rc, inc)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].PreferredReadReplica != 3 {
		t.Fatalf("incremental fetch: %+v", resp.Topics)
	}
}

// TestNoReplicaSelector: without replica.selector.class (Kafka's default)
// the leader serves every consumer, whatever its rack; a selector Keel
// does not have fails the start.
func TestNoReplicaSelector(t *testing.T) {
	at := func(offset int64) fetchPartitionReq { return fetchPartitionReq{"t", 0, offset, 1 << 20, -1} }
	plain := newTestCluster(t, withConfig("broker.rack=a"))
	plain.meta.registerBrokerInRack(2, "127.0.0.1", 1, "b")
	plain.createAssigned("t", []int32{testNodeID, 2})
	plain.produceN(t, "t", 0, 3, 10)
	prc := plain.dialRaw(t)
	plain.replicaFetch(prc, 2, "t", 3, 0)
	if p := plain.consumerFetch(prc, 12, "b", at(0)); p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Fatalf("no selector: preferred %d, %d bytes", p.PreferredReadReplica, len(p.RecordBatches))
	}

	if _, err := LoadConfig(nil, []string{"replica.selector.class=com.example.NearestSelector"}); err == nil {
		t.Fatal("an unknown replica.selector.class was accepted")
	}
}

// TestConsumerFetchFromFollower: a follower serves a consumer's Fetch of
// v11 and up (KIP-392) up to its own high watermark; below v11 it answers
// NOT_LEADER_OR_FOLLOWER; past its log end, OFFSET_OUT_OF_RANGE to a
// consumer that sent a leader epoch, and nothing (no error) to one that
// did not (Kafka since apache/kafka#12734).
func TestConsumerFetchFromFollower(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1) // the leader, never reached
	c.createAssigned("f", []int32{2, testNodeID})
	waitFor(t, "following f-0", 10*time.Second, func() bool {
		p := c.broker.lookup(tp("f", 0))
		return p != nil && p.state.Load() != nil && !p.state.Load().isLeader
	})
	p := c.broker.lookup(tp("f", 0))
	var batches []byte
	for i := int64(0); i < 3; i++ {
		b := buildBatch(t, 1, 10)
		record.SetBaseOffset(b, i)
		batches = append(batches, b...)
	}
	if _, err := p.log.AppendAsFollower(batches, false); err != nil {
		t.Fatal(err)
	}
	p.hwMu.Lock()
	p.log.SetHighWatermark(2)
	p.hwMu.Unlock()
	epoch := p.state.Load().leaderEpoch

	rc := c.dialRaw(t)
	got := c.consumerFetch(rc, 12, "", fetchPartitionReq{"f", 0, 0, 1 << 20, epoch})
	if n, last := batchesIn(t, got.RecordBatches); got.ErrorCode != 0 || n != 2 || last != 1 || got.HighWatermark != 2 {
		t.Fatalf("v12 from the follower: %v, %d batches to %d, hw %d; want 2 to offset 1, hw 2", kerr.ErrorForCode(got.ErrorCode), n, last, got.HighWatermark)
	}
	if got = c.consumerFetch(rc, 10, "", fetchPartitionReq{"f", 0, 0, 1 << 20, epoch}); got.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("v10 from the follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(got.ErrorCode))
	}
	if got = c.consumerFetch(rc, 12, "", fetchPartitionReq{"f", 0, 7, 1 << 20, epoch}); got.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("past the follower's end with an epoch: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(got.ErrorCode))
	}
	if got = c.consumerFetch(rc, 12, "", fetchPartitionReq{"f", 0, 7, 1 << 20, -1}); got.ErrorCode != 0 || len(got.RecordBatches) != 0 || got.HighWatermark != 2 {
		t.Fatalf("past the follower's end without an epoch: %v, %d bytes, hw %d; want no error, nothing, hw 2",
			kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches), got.HighWatermark)
	}
	if got = c.consumerFetch(rc, 12, "", fetchPartitionReq{"f", 0, 0, 1 << 20, epoch + 1}); got.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("a newer leader epoch: %v, want UNKNOWN_LEADER_EPOCH", kerr.ErrorForCode(got.ErrorCode))
	}
}
