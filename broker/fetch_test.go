package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// TestFetchWakesOnProduce: a consumer long-polling with a 10 s max wait
// gets a record produced meanwhile within milliseconds — the purgatory
// wakes it, the timeout does not.
func TestFetchWakesOnProduce(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("wake", 1, nil)
	cons := c.client(kgo.ConsumeTopics("wake"), kgo.FetchMaxWait(10*time.Second), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	prod := c.client(kgo.DefaultProduceTopic("wake"))
	ctx := testCtx(t)

	got := make(chan time.Time, 1)
	go func() {
		for {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			if fs.NumRecords() > 0 {
				got <- time.Now()
				return
			}
		}
	}()
	// Let the consumer reach the broker and park.
	p := c.broker.lookup(tp("wake", 0))
	waitFor(t, "fetch parked", 10*time.Second, func() bool { return p.fetchWatch.n.Load() > 0 })
	time.Sleep(50 * time.Millisecond)
	var worst time.Duration
	for i := 0; i < 1; i++ {
		sent := time.Now()
		if err := prod.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-got:
			worst = max(worst, at.Sub(sent))
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting consumer was not woken by the produce")
		}
	}
	t.Logf("produce to delivery: %v", worst)
	if worst > 500*time.Millisecond {
		t.Fatalf("waiting consumer woken after %v: the purgatory did not wake it", worst)
	}
}

// fetchPartitionReq is one partition of a raw fetch.
type fetchPartitionReq struct {
	topic       string
	partition   int32
	offset      int64
	maxBytes    int32
	leaderEpoch int32
}

func (c *testCluster) fetchRequest(version int16, maxWait time.Duration, minBytes, maxBytes int32, parts ...fetchPartitionReq) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait/time.Millisecond), minBytes, maxBytes
	img := c.meta.Image()
	for _, p := range parts {
		var rt *kmsg.FetchRequestTopic
		if n := len(req.Topics); n > 0 && req.Topics[n-1].Topic == p.topic {
			rt = &req.Topics[n-1]
		} else {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.topic
			if mt, ok := img.Topic(p.topic); ok {
				t.TopicID = mt.ID
			}
			req.Topics = append(req.Topics, t)
			rt = &req.Topics[len(req.Topics)-1]
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p.partition, p.offset, p.maxBytes, p.leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// produceN appends n batches of one record each to a partition.
func (c *testCluster) produceN(t testing.TB, topic string, partition int32, n, valueSize int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if r := c.produceRaw(t, topic, partition, 1, time.Second, buildBatch(t, 1, valueSize)); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// batchesIn counts the record batches of a fetched partition.
func batchesIn(t testing.TB, records []byte) (n int, last int64) {
	t.Helper()
	last = -1
	it := record.NewBatches(records)
	for _, h, ok := it.Next(); ok; _, h, ok = it.Next() {
		n++
		last = h.LastOffset()
	}
	if err := it.Err(); err != nil {
		t.Fatalf("fetched records: %v", err)
	}
	return n, last
}

func TestFetchLimitsAndErrors(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("f", 2, nil)
	c.produceN(t, "f", 0, 10, 1000) // ten batches of ~1 KB
	c.produceN(t, "f", 1, 10, 1000)
	rc := c.dialRaw(t)
	const v = 12
	epoch := c.broker.lookup(tp("f", 0)).state.Load().leaderEpoch
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		return roundTrip[*kmsg.FetchResponse](rc, req)
	}

	t.Run("partition max bytes bounds each partition", func(t *testing.T) {
		resp := fetch(c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"f", 0, 0, 3000, -1}, fetchPartitionReq{"f", 1, 0, 3000, -1}))
		for _, p := range resp.Topics[0].Partitions {
			if n, last := batchesIn(t, p.RecordBatches); p.ErrorCode != 0 || n != 2 || last != 1 || p.HighWatermark != 10 || p.LastStableOffset != 10 || p.LogStartOffset != 0 {
				t.Fatalf("partition %d: %v, %d batches to %d, hw %d", p.Partition, kerr.ErrorForCode(p.ErrorCode), n, last, p.HighWatermark)
			}
		}
	})
	t.Run("max bytes bounds the response, the first partition with data gets one batch anyway", func(t *testing.T) {
		resp := fetch(c.fetchRequest(v, 0, 1, 10, fetchPartitionReq{"f", 0, 0, 1 << 20, -1}, fetchPartitionReq{"f", 1, 0, 1 << 20, -1}))
		ps := resp.Topics[0].Partitions
		if n, _ := batchesIn(t, ps[0].RecordBatches); n != 1 {
			t.Fatalf("first partition: %d batches, want exactly 1 (KIP-74)", n)
		}
		if n, _ := batchesIn(t, ps[1].RecordBatches); n != 0 || ps[1].HighWatermark != 10 {
			t.Fatalf("second partition: %d batches, hw %d", n, ps[1].HighWatermark)
		}
	})
	t.Run("offset out of range", func(t *testing.T) {
		resp := fetch(c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"f", 0, 11, 1 << 20, -1}))
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 {
			t.Fatalf("%v hw %d", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark)
		}
		// At the log end: nothing, no error.
		resp = fetch(c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"f", 0, 10, 1 << 20, -1}))
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
			t.Fatalf("at the end: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
		}
	})
	t.Run("leader epochs are checked", func(t *testing.T) {
		for _, tc := range []struct {
			epoch int32
			want  int16
		}{{epoch, 0}, {-1, 0}, {epoch + 1, kerr.UnknownLeaderEpoch.Code}} {
			resp := fetch(c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"f", 0, 0, 100, tc.epoch}))
			if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
				t.Fatalf("epoch %d: %v, want %v", tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
			}
		}
		if epoch > 0 {
			resp := fetch(c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"f", 0, 0, 100, epoch - 1}))
			if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.FencedLeaderEpoch.Code {
				t.Fatalf("older epoch: %v", kerr.ErrorForCode(got))
			}
		}
	})
	t.Run("unknown topics", func(t *testing.T) {
		resp := fetch(c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"nope", 0, 0, 100, -1}, fetchPartitionReq{"f", 5, 0, 100, -1}))
		for _, rt := range resp.Topics {
			if got := rt.Partitions[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("%s: %v", rt.Topic, kerr.ErrorForCode(got))
			}
		}
		req := c.fetchRequest(13, 0, 1, 1<<20, fetchPartitionReq{"nope", 0, 0, 100, -1})
		req.Topics[0].TopicID = [16]byte{1, 2, 3}
		resp = fetch(req)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownTopicID.Code {
			t.Fatalf("unknown topic id: %v", kerr.ErrorForCode(got))
		}
	})
	t.Run("v13+ by topic id", func(t *testing.T) {
		resp := fetch(c.fetchRequest(13, 0, 1, 1<<20, fetchPartitionReq{"f", 1, 9, 1 << 20, -1}))
		if n, last := batchesIn(t, resp.Topics[0].Partitions[0].RecordBatches); n != 1 || last != 9 {
			t.Fatalf("%d batches to %d", n, last)
		}
	})
	t.Run("read_committed reads to the LSO with an empty aborted list", func(t *testing.T) {
		req := c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"f", 0, 0, 1 << 20, -1})
		req.IsolationLevel = 1
		p := fetch(req).Topics[0].Partitions[0]
		if n, _ := batchesIn(t, p.RecordBatches); n != 10 || p.LastStableOffset != 10 || p.AbortedTransactions == nil {
			t.Fatalf("%d batches, lso %d, aborted %v", n, p.LastStableOffset, p.AbortedTransactions)
		}
	})
}

// TestFetchFollowerAndNotLeader: consumers read below the high watermark,
// followers to the log end offset; a partition led elsewhere answers
// NOT_LEADER_OR_FOLLOWER with the leader's identity and endpoint.
func TestFetchFollowerAndNotLeader(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("replicated", []int32{testNodeID, 2})
	c.createAssigned("elsewhere", []int32{2})
	c.produceN(t, "replicated", 0, 3, 10)
	rc := c.dialRaw(t)

	consumer := roundTrip[*kmsg.FetchResponse](rc, c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"replicated", 0, 0, 1 << 20, -1}))
	if p := consumer.Topics[0].Partitions[0]; len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("consumer read above the high watermark: %d bytes, hw %d", len(p.RecordBatches), p.HighWatermark)
	}
	req := c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"replicated", 0, 0, 1 << 20, -1})
	req.ReplicaID = 2
	follower := roundTrip[*kmsg.FetchResponse](rc, req)
	if n, last := batchesIn(t, follower.Topics[0].Partitions[0].RecordBatches); n != 3 || last != 2 {
		t.Fatalf("follower: %d batches to %d", n, last)
	}
	// v15+: the replica id travels in ReplicaState (KIP-903).
	req = c.fetchRequest(15, 0, 1, 1<<20, fetchPartitionReq{"replicated", 0, 0, 1 << 20, -1})
	req.ReplicaState.ID = 2
	if n, _ := batchesIn(t, roundTrip[*kmsg.FetchResponse](rc, req).Topics[0].Partitions[0].RecordBatches); n != 3 {
		t.Fatalf("v15 follower: %d batches", n)
	}

	resp := roundTrip[*kmsg.FetchResponse](rc, c.fetchRequest(16, 0, 1, 1<<20, fetchPartitionReq{"elsewhere", 0, 0, 1 << 20, -1}))
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 2 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Port != 1 {
		t.Fatalf("elsewhere: %v leader %+v endpoints %+v", kerr.ErrorForCode(p.ErrorCode), p.CurrentLeader, resp.Brokers)
	}
}

// TestFetchSessions drives KIP-227 by hand: a full fetch opens a session,
// incremental fetches list only what changed, forgotten partitions leave,
// wrong epochs and ids are refused, epoch -1 closes it.
func TestFetchSessions(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("s", 3, nil)
	for p := int32(0); p < 3; p++ {
		c.produceN(t, "s", p, 2, 10)
	}
	rc := c.dialRaw(t)
	const v = 12
	all := []fetchPartitionReq{{"s", 0, 0, 1 << 20, -1}, {"s", 1, 0, 1 << 20, -1}, {"s", 2, 0, 1 << 20, -1}}

	full := c.fetchRequest(v, 0, 1, 1<<20, all...)
	full.SessionID, full.SessionEpoch = 0, 0
	resp := roundTrip[*kmsg.FetchResponse](rc, full)
	if resp.ErrorCode != 0 || resp.SessionID == 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("full fetch: %v session %d, %d partitions", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, len(resp.Topics[0].Partitions))
	}
	id := resp.SessionID
	if c.broker.sessions.Len() != 1 {
		t.Fatalf("%d sessions cached", c.broker.sessions.Len())
	}

	incremental := func(epoch int32, maxWait time.Duration, parts ...fetchPartitionReq) *kmsg.FetchResponse {
		req := c.fetchRequest(v, maxWait, 1, 1<<20, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return roundTrip[*kmsg.FetchResponse](rc, req)
	}
	count := func(resp *kmsg.FetchResponse) (n int) {
		for _, t := range resp.Topics {
			n += len(t.Partitions)
		}
		return n
	}
	// Epoch 1, everything moved to offset 2: nothing new, nothing listed
	// (it waits the max wait, then answers empty).
	resp = incremental(1, 10*time.Millisecond, fetchPartitionReq{"s", 0, 2, 1 << 20, -1}, fetchPartitionReq{"s", 1, 2, 1 << 20, -1}, fetchPartitionReq{"s", 2, 2, 1 << 20, -1})
	if resp.ErrorCode != 0 || resp.SessionID != id || count(resp) != 0 {
		t.Fatalf("epoch 1: %v session %d, %d partitions", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, count(resp))
	}
	// New data on partition 1 only: the incremental fetch lists only it,
	// and a waiting incremental fetch wakes for it.
	done := make(chan *kmsg.FetchResponse, 1)
	go func() { done <- incremental(2, 10*time.Second) }()
	waitFor(t, "session fetch parked", 5*time.Second, func() bool { return c.broker.lookup(tp("s", 1)).fetchWatch.n.Load() > 0 })
	c.produceN(t, "s", 1, 1, 10)
	select {
	case resp = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("incremental fetch not woken")
	}
	if count(resp) != 1 || resp.Topics[0].Partitions[0].Partition != 1 || resp.Topics[0].Partitions[0].HighWatermark != 3 {
		t.Fatalf("epoch 2: %+v", resp.Topics)
	}
	// Wrong epoch, unknown id.
	if resp = incremental(7, 0); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	req := c.fetchRequest(v, 0, 1, 1<<20)
	req.SessionID, req.SessionEpoch = id+1, 1
	if resp = roundTrip[*kmsg.FetchResponse](rc, req); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// Topic-id usage may not change within a session.
	req = c.fetchRequest(13, 0, 1, 1<<20)
	req.SessionID, req.SessionEpoch = id, 3
	if resp = roundTrip[*kmsg.FetchResponse](rc, req); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v13 on a v12 session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// Forgetting partition 1, then producing to it: no longer listed.
	req = c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"s", 1, 3, 1 << 20, -1})
	req.SessionID, req.SessionEpoch = id, 3
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "s", []int32{1}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
	req.Topics = nil
	if resp = roundTrip[*kmsg.FetchResponse](rc, req); resp.ErrorCode != 0 || count(resp) != 0 {
		t.Fatalf("forget: %v, %d partitions", kerr.ErrorForCode(resp.ErrorCode), count(resp))
	}
	c.produceN(t, "s", 1, 1, 10)
	c.produceN(t, "s", 2, 1, 10)
	if resp = incremental(4, 0); count(resp) != 1 || resp.Topics[0].Partitions[0].Partition != 2 {
		t.Fatalf("after forgetting partition 1: %+v", resp.Topics)
	}
	// Epoch -1 closes the session and fetches sessionless.
	req = c.fetchRequest(v, 0, 1, 1<<20, fetchPartitionReq{"s", 0, 0, 1 << 20, -1})
	req.SessionID, req.SessionEpoch = id, -1
	if resp = roundTrip[*kmsg.FetchResponse](rc, req); resp.ErrorCode != 0 || resp.SessionID != 0 || count(resp) != 1 {
		t.Fatalf("close: %v session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	if c.broker.sessions.Len() != 0 {
		t.Fatalf("%d sessions cached after closing", c.broker.sessions.Len())
	}
	if resp = incremental(5, 0); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestFetchSessionCacheEviction: the cache holds max slots; a full fetch
// with more partitions evicts a smaller session, one with fewer gets no
// session (id 0) but its data.
func TestFetchSessionCacheEviction(t *testing.T) {
	now := time.Now()
	cache := newFetchSessionCache(2, time.Minute, func() time.Time { return now })
	parts := func(n int) []*fetchPartition {
		out := make([]*fetchPartition, n)
		for i := range out {
			out[i] = &fetchPartition{key: fetchKey{topic: "t", partition: int32(i)}}
		}
		return out
	}
	small := cache.create(parts(1), false, false)
	mid := cache.create(parts(2), false, false)
	if small == nil || mid == nil {
		t.Fatal("free slots refused")
	}
	if s := cache.create(parts(1), false, false); s != nil {
		t.Fatal("a session no bigger than the smallest evicted it")
	}
	big := cache.create(parts(3), false, false)
	if big == nil || cache.get(small.id) != nil || cache.get(mid.id) == nil {
		t.Fatal("a bigger session did not evict the smallest")
	}
	follower := cache.create(parts(1), true, false)
	if follower == nil || cache.get(mid.id) != nil {
		t.Fatal("a follower's session did not evict a consumer's")
	}
	now = now.Add(2 * time.Minute)
	if s := cache.create(parts(1), false, false); s == nil {
		t.Fatal("stale sessions were not evicted")
	}
}

// TestConsumeManyPartitionsWithSessions consumes a topic of many
// partitions with kgo, which uses incremental fetch sessions by default,
// while producing to it, and checks every record arrives exactly once.
func TestConsumeManyPartitionsWithSessions(t *testing.T) {
	c := newTestCluster(t)
	const partitions, rounds, perRound = 32, 20, 200
	c.createTopic("many", partitions, nil)
	prod := c.client(kgo.DefaultProduceTopic("many"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	cons := c.client(kgo.ConsumeTopics("many"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testCtx(t)
	seen := map[string]bool{}
	for r := 0; r < rounds; r++ {
		var recs []*kgo.Record
		for i := 0; i < perRound; i++ {
			recs = append(recs, kgo.StringRecord(fmt.Sprintf("%d-%d", r, i)))
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for len(seen) < (r+1)*perRound {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("round %d: %d records seen: %v", r, len(seen), ctx.Err())
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
			fs.EachRecord(func(rec *kgo.Record) {
				if seen[string(rec.Value)] {
					t.Fatalf("record %s twice", rec.Value)
				}
				seen[string(rec.Value)] = true
			})
		}
	}
	if n := c.broker.sessions.Len(); n == 0 {
		t.Fatal("kgo fetched without a session")
	}
}

// TestConsumerResetsOnOffsetOutOfRange: kgo asked to start past the end
// gets OFFSET_OUT_OF_RANGE and resets per its policy (to the start here).
func TestConsumerResetsOnOffsetOutOfRange(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("oor", 1, nil)
	c.produceN(t, "oor", 0, 5, 10)
	cons := c.client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"oor": {0: kgo.NewOffset().At(1000)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	ctx := testCtx(t)
	var first int64 = -1
	for first < 0 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, kerr.OffsetOutOfRange) {
				t.Fatal(err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if first < 0 {
				first = r.Offset
			}
		})
	}
	if first != 0 {
		t.Fatalf("reset to %d, want 0", first)
	}
}

var _ = context.Background

// TestBrokerFetchMaxBytes: the broker's fetch.max.bytes caps a consumer's
// Fetch however much the consumer asks for (KIP-541), in whole batches and
// at least one; a follower's is capped by replica.fetch.response.max.bytes
// instead. max.incremental.fetch.session.cache.slots=0 keeps no sessions.
func TestBrokerFetchMaxBytes(t *testing.T) {
	c := newTestCluster(t, withConfig("fetch.max.bytes=2048", "max.incremental.fetch.session.cache.slots=0"))
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("big", []int32{testNodeID, 2})
	c.produceN(t, "big", 0, 10, 500)
	rc := c.dialRaw(t)
	req := c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"big", 0, 0, 1 << 20, -1})
	req.ReplicaID = 2
	follower := roundTrip[*kmsg.FetchResponse](rc, req)
	if n, _ := batchesIn(t, follower.Topics[0].Partitions[0].RecordBatches); n != 10 {
		t.Fatalf("follower: %d batches, want all 10", n)
	}
	req = c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"big", 0, 10, 1 << 20, -1})
	req.ReplicaID = 2
	roundTrip[*kmsg.FetchResponse](rc, req) // the follower caught up: the high watermark is 10
	req = c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"big", 0, 0, 1 << 20, -1})
	req.SessionID, req.SessionEpoch = 0, 0 // asks for a session
	resp := roundTrip[*kmsg.FetchResponse](rc, req)
	p := resp.Topics[0].Partitions[0]
	if n, _ := batchesIn(t, p.RecordBatches); n < 1 || n > 3 || len(p.RecordBatches) > 2048 {
		t.Fatalf("consumer asking for 1 MiB: %d batches, %d bytes; want at most fetch.max.bytes (2048)", n, len(p.RecordBatches))
	}
	if resp.SessionID != 0 {
		t.Fatalf("session %d with no session slots", resp.SessionID)
	}
	big := roundTrip[*kmsg.FetchResponse](rc, c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"big", 0, 0, 100, -1}))
	if n, _ := batchesIn(t, big.Topics[0].Partitions[0].RecordBatches); n != 1 {
		t.Fatalf("a partition max below one batch: %d batches, want the first whole", n)
	}
}
