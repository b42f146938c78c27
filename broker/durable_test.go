package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDurableModeAcksOnlyWhatIsFsynced: with flush.messages=1 every
// acknowledged record (acks=1 and acks=all) is below the leader's recovery
// point when the client hears of it, and so is the high watermark
// consumers read up to.
func TestDurableModeAcksOnlyWhatIsFsynced(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("durable", 3, map[string]*string{"flush.messages": kmsg.StringPtr("1")})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for _, acks := range []kgo.Acks{kgo.LeaderAck(), kgo.AllISRAcks(), kgo.LeaderAck(), kgo.AllISRAcks()} {
		opts := []kgo.Opt{kgo.DefaultProduceTopic("durable"), kgo.RequiredAcks(acks)}
		if acks == kgo.LeaderAck() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := c.client(opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inner sync.WaitGroup
			for i := 0; i < 300; i++ {
				inner.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: []byte("v")}, func(r *kgo.Record, err error) {
					defer inner.Done()
					if err != nil {
						t.Error(err)
						return
					}
					l := c.broker.lookup(tp("durable", r.Partition)).log
					if d := l.DurableOffset(); d <= r.Offset {
						t.Errorf("offset %d of partition %d acknowledged with the durable offset at %d", r.Offset, r.Partition, d)
					}
					if hw, d := l.HighWatermark(), l.DurableOffset(); hw > d {
						t.Errorf("high watermark %d above the durable offset %d", hw, d)
					}
				})
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	// Each acknowledgement needed an fsync: LogFlushRateAndTimeMs saw
	// them (group commit shares them, so fewer than the batches).
	if n := c.broker.metrics.flushes.count(); n == 0 {
		t.Error("no fsync counted in the flush histogram")
	}
}

// BenchmarkProduceDurable is BenchmarkProduce with flush.messages=1: every
// batch fsynced before it is acknowledged, concurrent partitions and
// requests sharing fsyncs.
func BenchmarkProduceDurable(b *testing.B) {
	benchmarkProduce(b, map[string]*string{"flush.messages": kmsg.StringPtr("1")})
}

// TestDurableModeAcksOffsetCommitsOnlyOnceFsynced: with
// log.flush.interval.messages=1 the offsets topic is durable too. Groups
// committing at once on one offsets partition are each answered only once
// their commit is below the partition's durable offset: whatever the
// partition's log end was before a commit, the durable offset is past it
// when the commit is acknowledged.
func TestDurableModeAcksOffsetCommitsOnlyOnceFsynced(t *testing.T) {
	c := groupTestCluster(t, "log.flush.interval.messages=1")
	c.createTopic("t", 1, nil)
	adm := c.admin()
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for g := range 8 {
		group := fmt.Sprintf("g%d", g)
		l := c.broker.lookup(tp(offsetsTopic, c.broker.groups.partitionOf(group))).log
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(1); i <= 50; i++ {
				before := l.LogEndOffset()
				if err := commitOffset(ctx, adm, group, i); err != nil {
					t.Errorf("commit %d of %s: %v", i, group, err)
					return
				}
				if d := l.DurableOffset(); d <= before {
					t.Errorf("commit %d of %s acknowledged with the durable offset at %d; the log end was %d before it", i, group, d, before)
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkOffsetCommitDurable: 16 groups on one offsets partition commit
// at once, each synchronously, with log.flush.interval.messages=1; every
// commit is fsynced before it is answered, concurrent commits sharing
// fsyncs.
func BenchmarkOffsetCommitDurable(b *testing.B) {
	c := groupTestCluster(b, "log.flush.interval.messages=1", "offsets.topic.num.partitions=1")
	c.createTopic("t", 1, nil)
	adm := c.admin()
	ctx := testCtx(b)
	const groups = 16
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				if err := commitOffset(ctx, adm, fmt.Sprintf("g%d", g), n); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

// commitOffset commits offset for partition 0 of topic "t" in group.
func commitOffset(ctx context.Context, adm *kadm.Client, group string, offset int64) error {
	var os kadm.Offsets
	os.AddOffset("t", 0, offset, -1)
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return err
	}
	return resp.Error()
}

// TestDurableFollowerReportsOnlyWhatItSynced: a durable-mode follower
// appends what it fetched without an fsync and syncs it before its next
// fetch, so the fetch offset its leader sees, which the leader counts
// toward the high watermark, is always on the follower's disk.
func TestDurableFollowerReportsOnlyWhatItSynced(t *testing.T) {
	c := newTestCluster(t, withConfig("log.flush.interval.messages=1"))
	leader := newScriptedLeader(t)
	c.meta.registerBroker(2, "127.0.0.1", leader.port())
	c.createAssigned("d", []int32{2, testNodeID})
	req := leader.next(t)
	var end int64
	for range 5 {
		batch := withEpoch(buildBatch(t, 3, 10), 0)
		binary.BigEndian.PutUint64(batch, uint64(end)) // the base offset (outside the CRC)
		leader.answers <- answer(req, 0, 0, batch, end)
		end += 3
		req = leader.next(t)
		if got := fetchedPartitions(req); len(got) != 1 || got[0] != fmt.Sprintf("0@%d", end) {
			t.Fatalf("fetch %v, want [0@%d]", got, end)
		}
		if d := c.broker.lookup(tp("d", 0)).log.DurableOffset(); d < end {
			t.Fatalf("the follower reported offset %d with only %d durable", end, d)
		}
	}
	leader.answers <- answer(req, 0, 0, nil, end)
}
