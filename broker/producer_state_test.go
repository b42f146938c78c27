package broker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network/record"
)

// TestIdempotentRetryAfterRestartIsDeduplicated: the producer state comes
// back from the snapshot a clean shutdown wrote (and those of the rolls
// before it), before any produce: a retry of any of the producer's last
// five batches after the restart is acknowledged with its original
// offsets, not appended again, and the sequence goes on.
func TestIdempotentRetryAfterRestartIsDeduplicated(t *testing.T) {
	c := newTestCluster(t)
	// Small segments: the batches span several rolls, each snapshotted.
	c.createTopic("idem-restart", 1, map[string]*string{"segment.bytes": kmsgStr("300")})
	pid := initProducerID(t, c.dialRaw(t)).ProducerID
	send := func(seq int32) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return c.produceRaw(t, "idem-restart", 0, -1, time.Second, idempotentBatch(t, pid, 0, seq, 2))
	}
	offsets := map[int32]int64{}
	for seq := int32(0); seq < 20; seq += 2 {
		r := send(seq)
		if r.ErrorCode != 0 {
			t.Fatalf("seq %d: %v", seq, kerr.ErrorForCode(r.ErrorCode))
		}
		offsets[seq] = r.BaseOffset
	}
	if n := c.broker.lookup(tp("idem-restart", 0)).log.NumSegments(); n < 3 {
		t.Fatalf("%d segments; the test wants several rolls", n)
	}
	c.restart()
	p := c.broker.lookup(tp("idem-restart", 0))
	leo := p.log.LogEndOffset()
	if _, err := os.Stat(filepath.Join(p.log.Dir(), "00000000000000000020.snapshot")); err != nil {
		t.Fatalf("no producer snapshot at the log end offset after a clean shutdown: %v", err)
	}
	// Loaded when the log opened, not on the first produce.
	if ps := p.log.ActiveProducers(); len(ps) != 1 || ps[0].ProducerID != pid || ps[0].LastSequence != 19 {
		t.Fatalf("producer state after the restart: %+v", ps)
	}
	for _, seq := range []int32{18, 10} {
		if r := send(seq); r.ErrorCode != 0 || r.BaseOffset != offsets[seq] || p.log.LogEndOffset() != leo {
			t.Fatalf("retry of seq %d after restart: %v offset %d (first %d), log end %d (was %d)",
				seq, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, offsets[seq], p.log.LogEndOffset(), leo)
		}
	}
	if r := send(8); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("retry of the sixth-newest batch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := send(20); r.ErrorCode != 0 || r.BaseOffset != leo {
		t.Fatalf("next batch after restart: %v offset %d, want %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, leo)
	}
}

// TestIdleProducersExpire: producer.id.expiration.ms after its last
// batch's timestamp a producer is forgotten by the background check, and
// its next batch is taken as a new producer's, whatever its sequence.
func TestIdleProducersExpire(t *testing.T) {
	c := newTestCluster(t, withConfig("producer.id.expiration.ms=1500", "producer.id.expiration.check.interval.ms=20"))
	c.createTopic("idem-expiry", 1, nil)
	pid := initProducerID(t, c.dialRaw(t)).ProducerID
	p := c.broker.lookup(tp("idem-expiry", 0))
	send := func(seq int32) int16 {
		t.Helper()
		return c.produceRaw(t, "idem-expiry", 0, -1, time.Second, idempotentBatch(t, pid, 0, seq, 1)).ErrorCode
	}
	if code := send(0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := send(7); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap while the producer is known: %v", kerr.ErrorForCode(code))
	}
	waitFor(t, "the producer to expire", 10*time.Second, func() bool { return len(p.log.ActiveProducers()) == 0 })
	if code := send(7); code != 0 {
		t.Fatalf("expired producer's next batch: %v, want it accepted as a new producer's", kerr.ErrorForCode(code))
	}
	if ps := p.log.ActiveProducers(); len(ps) != 1 || ps[0].LastSequence != 7 {
		t.Fatalf("state after the new start: %+v", ps)
	}
}

func TestProducerErrorCodes(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("idem-codes", 1, nil)
	for _, tc := range []struct {
		name string
		seq  int32
		ep   int16
		want *kerr.Error
	}{
		{"first", 0, 1, nil},
		{"gap", 5, 1, kerr.OutOfOrderSequenceNumber},
		{"fenced", 1, 0, kerr.InvalidProducerEpoch},
	} {
		r := c.produceRaw(t, "idem-codes", 0, 1, time.Second, idempotentBatch(t, 42, tc.ep, tc.seq, 1))
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if r.ErrorCode != want || (want != 0 && (r.ErrorMessage == nil || *r.ErrorMessage == "")) {
			t.Fatalf("%s: %v (%v), want %v with a message", tc.name, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, tc.want)
		}
	}
}

// TestPromotedFollowerDeduplicatesRetries: a follower's appends keep the
// producer state, so once it becomes leader a producer's retry of a batch
// the old leader appended is acknowledged with its original offsets.
func TestPromotedFollowerDeduplicatesRetries(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1) // unreachable: nothing fetched
	c.createAssigned("promote", []int32{2, testNodeID})
	p := c.broker.lookup(tp("promote", 0))
	if st := p.state.Load(); st.isLeader {
		t.Fatal("this node leads; the test wants it to follow")
	}
	// What the follower would have fetched from broker 2: two batches of
	// one producer, at offsets 0-2 and 3-4, leader epoch 0.
	const pid = 77
	var fetched []byte
	offset := int64(0)
	for _, b := range [][]byte{idempotentBatch(t, pid, 0, 0, 3), idempotentBatch(t, pid, 0, 3, 2)} {
		record.SetBaseOffset(b, offset)
		record.SetPartitionLeaderEpoch(b, 0)
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		offset = h.NextOffset()
		fetched = append(fetched, b...)
	}
	if _, err := p.log.AppendAsFollower(fetched, false); err != nil {
		t.Fatal(err)
	}
	if ps := p.log.ActiveProducers(); len(ps) != 1 || ps[0].LastSequence != 4 {
		t.Fatalf("follower's producer state: %+v", ps)
	}
	c.meta.commit(&metadata.PartitionChangeRecord{TopicID: p.topicID, PartitionID: 0, ISR: []int32{testNodeID}, Leader: testNodeID})
	waitFor(t, "leadership", 5*time.Second, func() bool { return p.state.Load().isLeader })
	if r := c.produceRaw(t, "promote", 0, 1, time.Second, idempotentBatch(t, pid, 0, 3, 2)); r.ErrorCode != 0 || r.BaseOffset != 3 || p.log.LogEndOffset() != 5 {
		t.Fatalf("retry on the new leader: %v offset %d, log end %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, p.log.LogEndOffset())
	}
	if r := c.produceRaw(t, "promote", 0, 1, time.Second, idempotentBatch(t, pid, 0, 9, 1)); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap on the new leader: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// DescribeProducers (kafka-transactions.sh describe-producers, through
// kadm): the leader lists each idempotent producer with its epoch and last
// sequence; a partition led elsewhere is NOT_LEADER_OR_FOLLOWER, an unknown
// one UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeProducers(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createTopic("described", 1, nil)
	c.createAssigned("elsewhere", []int32{2})
	pid := initProducerID(t, c.dialRaw(t)).ProducerID
	for seq := int32(0); seq < 6; seq += 3 {
		if r := c.produceRaw(t, "described", 0, -1, time.Second, idempotentBatch(t, pid, 0, seq, 3)); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	resp := roundTrip[*kmsg.DescribeProducersResponse](c.dialRaw(t), &kmsg.DescribeProducersRequest{Topics: []kmsg.DescribeProducersRequestTopic{
		{Topic: "described", Partitions: []int32{0, 5}}, {Topic: "elsewhere", Partitions: []int32{0}}}})
	byName := map[string][]kmsg.DescribeProducersResponseTopicPartition{}
	for _, rt := range resp.Topics {
		byName[rt.Topic] = rt.Partitions
	}
	got := byName["described"]
	if len(got) != 2 || got[0].ErrorCode != 0 || len(got[0].ActiveProducers) != 1 {
		t.Fatalf("described: %+v", got)
	}
	if ap := got[0].ActiveProducers[0]; ap.ProducerID != pid || ap.ProducerEpoch != 0 || ap.LastSequence != 5 || ap.LastTimestamp <= 0 || ap.CurrentTxnStartOffset != -1 {
		t.Fatalf("producer %+v", ap)
	}
	if got[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partition 5: %v", kerr.ErrorForCode(got[1].ErrorCode))
	}
	if e := byName["elsewhere"]; len(e) != 1 || e[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("elsewhere: %+v", e)
	}
	// kadm's DescribeProducers finds the leader and decodes it.
	ds, err := c.admin().DescribeProducers(testCtx(t), map[string]map[int32]struct{}{"described": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := ds.SortedProducers(); len(ps) != 1 || ps[0].ProducerID != pid || ps[0].LastSequence != 5 {
		t.Fatalf("kadm: %+v", ps)
	}
}
