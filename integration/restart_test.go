package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Restart tests run the keel binary and a franz-go producer with its
// defaults (idempotent, acks=all), note the offset of every acknowledged
// record, take the process down and bring it back on the same log dirs,
// then read every partition from the start: each acknowledged record must
// be at its offset with its key and value.
//
// Keel, like Kafka, does not fsync each write (log.flush.interval.* unset):
// acks=all means "in the page cache of every in-sync replica". kill -9 ends
// the process, not the kernel, so nothing acknowledged may be lost.

const restartRecords = 20000

// ackLog records where each acknowledged record landed.
//
// Concurrency: add is called from kgo's promise goroutine; the rest from
// the test goroutine once producing has stopped.
type ackLog struct {
	mu     sync.Mutex
	recs   map[int32]map[int64]ackedRecord // partition → offset → record
	failed atomic.Int64                    // records whose produce failed
}

type ackedRecord struct{ key, value string }

func newAckLog() *ackLog { return &ackLog{recs: map[int32]map[int64]ackedRecord{}} }

func (a *ackLog) add(r *kgo.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.recs[r.Partition]
	if m == nil {
		m = map[int64]ackedRecord{}
		a.recs[r.Partition] = m
	}
	m[r.Offset] = ackedRecord{string(r.Key), string(r.Value)}
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, m := range a.recs {
		n += len(m)
	}
	return n
}

// promise is the kgo produce callback that fills the log.
func (a *ackLog) promise(r *kgo.Record, err error) {
	if err != nil {
		a.failed.Add(1)
		return
	}
	a.add(r)
}

// restartRecord is record i of a run: keyed, so that the default (murmur2)
// partitioner spreads the records over the partitions, with a value that
// names the run and the record.
func restartRecord(run string, i int) *kgo.Record {
	return &kgo.Record{
		Key:   fmt.Appendf(nil, "k%06d", i),
		Value: fmt.Appendf(nil, "%s-%06d-%s", run, i, strings.Repeat("v", 64)),
	}
}

// produceAcked produces n records of run and waits for every promise.
func produceAcked(ctx context.Context, cl *kgo.Client, acks *ackLog, run string, from, n int) {
	for i := from; i < from+n; i++ {
		cl.Produce(ctx, restartRecord(run, i), acks.promise)
	}
	_ = cl.Flush(ctx)
}

func startRestartCluster(t *testing.T, topic string) (*ProcessCluster, *kgo.Client) {
	t.Helper()
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, ProcessOptions{})
	cl := procClient(t, c, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	return c, cl
}

// verifyAcked reads every partition of topic from its start to its high
// watermark with a fresh client and checks that every acknowledged record
// is at its offset, with its key and value. It returns each partition's
// end offset, and how many records carry a value seen before (values are
// unique per run, so these are duplicates).
func verifyAcked(t *testing.T, c *ProcessCluster, topic string, acks *ackLog) (endOffsets map[int32]int64, duplicates int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl := procClient(t, c)
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		offsets[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl := procClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	got := map[int32]map[int64]ackedRecord{}
	next := map[int32]int64{}
	values := map[string]bool{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v of %v: %v", next, want, ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next[r.Partition] {
				t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			if got[r.Partition] == nil {
				got[r.Partition] = map[int64]ackedRecord{}
			}
			got[r.Partition][r.Offset] = ackedRecord{string(r.Key), string(r.Value)}
			if values[string(r.Value)] {
				duplicates++
			}
			values[string(r.Value)] = true
		})
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	missing := 0
	for p, recs := range acks.recs {
		for off, w := range recs {
			g, ok := got[p][off]
			switch {
			case !ok:
				missing++
				if missing <= 10 {
					t.Errorf("partition %d offset %d: acknowledged %s=%s, not in the log (end offset %d)", p, off, w.key, w.value, want[p])
				}
			case g != w:
				t.Errorf("partition %d offset %d: acknowledged %s=%s, read %s=%s", p, off, w.key, w.value, g.key, g.value)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d acknowledged records lost", missing)
	}
	return want, duplicates
}

func TestAcknowledgedRecordsSurviveCleanRestart(t *testing.T) {
	const topic = "restart-clean"
	c, cl := startRestartCluster(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	acks := newAckLog()
	produceAcked(ctx, cl, acks, "clean", 0, restartRecords)
	if n, f := acks.count(), acks.failed.Load(); n != restartRecords || f != 0 {
		t.Fatalf("%d records acknowledged, %d failed; want all %d", n, f, restartRecords)
	}

	c.Stop(1) // SIGTERM: a controlled shutdown, exit status 0
	c.Start(1)
	c.WaitReady(1)
	if log := c.currentRunLog(1); !strings.Contains(log, "clean_shutdown=true") {
		t.Errorf("restart after SIGTERM did not find a clean shutdown:\n%s", log)
	}

	ends, _ := verifyAcked(t, c, topic, acks)
	// A clean run of an idempotent producer leaves nothing else: each
	// partition holds exactly the records acknowledged in it.
	acks.mu.Lock()
	for p, end := range ends {
		if int64(len(acks.recs[p])) != end {
			t.Errorf("partition %d: end offset %d, %d records acknowledged", p, end, len(acks.recs[p]))
		}
	}
	acks.mu.Unlock()

	// The restarted broker takes writes after the recovered ones.
	produceAcked(ctx, cl, acks, "after", restartRecords, 1000)
	if f := acks.failed.Load(); f != 0 {
		t.Fatalf("%d records failed after the restart", f)
	}
	verifyAcked(t, c, topic, acks)
}

func TestAcknowledgedRecordsSurviveKill9(t *testing.T) {
	const topic = "restart-kill"
	c, cl := startRestartCluster(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	acks := newAckLog()
	produceAcked(ctx, cl, acks, "before", 0, restartRecords)
	if n, f := acks.count(), acks.failed.Load(); n != restartRecords || f != 0 {
		t.Fatalf("%d records acknowledged, %d failed; want all %d", n, f, restartRecords)
	}

	// Keep producing while the process is killed: a second client (its own
	// producer id) sends records one after another without waiting, so
	// batches are in flight when SIGKILL lands. Acknowledged ones must
	// survive; the rest may or may not have been appended.
	during := newAckLog()
	live := procClient(t, c, kgo.DefaultProduceTopic(topic))
	prodCtx, stopProducing := context.WithCancel(ctx)
	var produced sync.WaitGroup
	produced.Add(1)
	go func() {
		defer produced.Done()
		for i := 0; prodCtx.Err() == nil; i++ {
			live.Produce(prodCtx, restartRecord("during", i), during.promise)
			if i%100 == 99 {
				time.Sleep(time.Millisecond) // bounded rate: ~100k records/s at most
			}
		}
	}()
	waitFor(t, 30*time.Second, "records acknowledged while producing", func() bool { return during.count() >= 2000 })
	pid, epoch, err := live.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(1)
	ackedBeforeKill := during.count()
	c.Start(1)
	c.WaitReady(1)
	if log := c.currentRunLog(1); !strings.Contains(log, "clean_shutdown=false") {
		t.Errorf("restart after kill -9 did not recover from an unclean shutdown:\n%s", log)
	}
	// The producer resumes against the restarted process.
	waitFor(t, 60*time.Second, "records acknowledged after the restart", func() bool {
		return during.count() >= ackedBeforeKill+2000
	})
	stopProducing()
	produced.Wait()
	flushCtx, cancelFlush := context.WithTimeout(ctx, 30*time.Second)
	_ = live.Flush(flushCtx)
	cancelFlush()
	t.Logf("while killing: %d acknowledged before the kill, %d in all, %d failed", ackedBeforeKill, during.count(), during.failed.Load())

	verifyAcked(t, c, topic, acks)
	_, dups := verifyAcked(t, c, topic, during)
	// Batches in flight at the kill are retried with their sequence
	// numbers; the restarted broker rebuilt the producer state from the log
	// and acknowledges the ones it already has instead of appending them
	// again. (A producer that had to move to a new epoch would lose that
	// guarantee, as with Kafka.)
	if pid2, epoch2, err := live.ProducerID(ctx); err == nil && pid2 == pid && epoch2 == epoch && dups > 0 {
		t.Errorf("%d records appended twice by producer %d epoch %d across the crash", dups, pid, epoch)
	}
}

// A restarted broker does not answer clients from the image of its last
// metadata snapshot (for a young cluster: none, no topics at all) before it
// has caught up with the metadata log: Metadata asked the moment the port
// accepts either waits or names the topic, never UNKNOWN_TOPIC_OR_PARTITION,
// which makes kgo fail a producer's records after four such answers. Kafka's
// broker likewise starts processing requests only after its initial
// catch-up.
func TestRestartedBrokerNeverAnswersFromAnImageBehindTheLog(t *testing.T) {
	const topic = "known"
	c, cl := startRestartCluster(t, topic)
	cl.Close()
	c.Kill(1)
	c.Start(1)
	deadline := time.Now().Add(60 * time.Second)
	answers := 0
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no Metadata answer within 60 s of the restart (%d answers)\n%s", answers, c.LogTail(1, 30))
		}
		probe, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).PlaintextAddr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = false
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, probe)
		cancel()
		probe.Close()
		if err != nil {
			time.Sleep(10 * time.Millisecond) // not listening yet, or the wait outlasted the probe
			continue
		}
		answers++
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("answer %d after the restart: %+v", answers, resp.Topics)
		}
		return
	}
}

// TestDurableLeaderExposesAcknowledgedRecordsAfterKill9: in the durable
// mode (flush.messages=1) a leader's high watermark counts only records it
// has fsynced. After kill -9 its logs reopen durable only up to the last
// recovery point checkpoint (none here: log.flush.offset.checkpoint.interval.ms
// is an hour), although everything acknowledged is on disk. The restarted
// leader fsyncs what it recovered as it takes the leadership, so the
// acknowledged records are readable again at once, not only once a new
// produce makes it sync.
func TestDurableLeaderExposesAcknowledgedRecordsAfterKill9(t *testing.T) {
	const topic, n = "durable-kill", 3000
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}},
		ProcessOptions{Overrides: []string{"log.flush.offset.checkpoint.interval.ms=3600000"}})
	cl := procClient(t, c, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	configs := map[string]*string{"flush.messages": kadm.StringPtr("1")}
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, configs, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	acks := newAckLog()
	produceAcked(ctx, cl, acks, "durable", 0, n)
	if got, f := acks.count(), acks.failed.Load(); got != n || f != 0 {
		t.Fatalf("%d records acknowledged, %d failed; want all %d", got, f, n)
	}

	c.Kill(1)
	c.Start(1)
	c.WaitReady(1)
	if log := c.currentRunLog(1); !strings.Contains(log, "clean_shutdown=false") {
		t.Errorf("restart after kill -9 did not recover from an unclean shutdown:\n%s", log)
	}
	adm := kadm.NewClient(procClient(t, c))
	var total int64
	waitFor(t, 10*time.Second, "the high watermarks to pass every acknowledged record", func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || ends.Error() != nil {
			return false
		}
		total = 0
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		return total >= n
	})
	if total != n {
		t.Errorf("high watermarks add up to %d, want %d", total, n)
	}
	verifyAcked(t, c, topic, acks)
}

// TestRestartAfterAnUnfinishedControlledShutdown: a broker stopped while
// another broker is paused cannot finish its controlled shutdown (the
// controller waits until every active broker has replayed the leadership
// moves), gives up after its grace and exits, still registered in
// controlled shutdown with a live session. Restarted at once, it registers
// at once, as in Kafka 4.1 (KAFKA-19047), instead of being refused with
// DUPLICATE_BROKER_REGISTRATION until broker.session.timeout.ms (2 minutes
// here, well past WaitReady's 30 s) has passed.
func TestRestartAfterAnUnfinishedControlledShutdown(t *testing.T) {
	const topic = "unfinished"
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker"}, {3, "broker"}},
		ProcessOptions{Overrides: []string{"broker.session.timeout.ms=120000"}})
	cl := procClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createAssigned(t, cl, topic, 2, 1, 3)
	adm := kadm.NewClient(cl)
	waitFor(t, 30*time.Second, "node 2 leading with the full ISR", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		p := md.Topics[topic].Partitions[0]
		return p.Leader == 2 && len(p.ISR) == 3
	})

	c.Pause(3)
	c.Stop(2) // SIGTERM: a controlled shutdown that node 3's silence holds up
	if log := c.currentRunLog(2); !strings.Contains(log, "controlled shutdown did not complete in time") {
		t.Fatalf("node 2's controlled shutdown was not held up:\n%s", c.LogTail(2, 30))
	}
	c.Start(2)
	c.WaitReady(2)
	if log := c.currentRunLog(2); strings.Contains(log, "DUPLICATE_BROKER_REGISTRATION") {
		t.Errorf("the restarted node was refused as a duplicate first:\n%s", c.LogTail(2, 30))
	}
	c.Resume(3)
}
