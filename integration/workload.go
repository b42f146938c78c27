package integration

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Workload is DESIGN §7's checker load: producers with acks=all record
// every acknowledged (partition, offset, value) while a consumer reads
// along; Check then reads every partition from the start and fails on any
// acknowledged record missing or at another offset, any record a consumer
// saw that later vanished or changed, any reordering of one producer's
// records within a partition, and any duplicate.
//
// Values are "<producer>-<sequence>", so order and duplicates can be
// checked per producer.
//
// Concurrency: Start, Acked, Stop and Check are called from the test
// goroutine; the producers and the consumer run on goroutines Stop ends.
type Workload struct {
	t     testing.TB
	seeds []string
	topic string

	mu    sync.Mutex
	acked map[int32]map[int64]string // partition → offset → value
	seen  map[int32]map[int64]string // what the tailing consumer read
	fails map[string]int             // produce errors by kind

	nacked  atomic.Int64
	perPart map[int32]int64 // acknowledged per partition, under mu
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// StartWorkload starts producers (each a kgo client with acks=all and
// idempotence, kgo's defaults) and a tailing consumer on topic.
func StartWorkload(t testing.TB, seeds []string, topic string, producers int, rate int) *Workload {
	w := &Workload{t: t, seeds: seeds, topic: topic,
		acked: map[int32]map[int64]string{}, seen: map[int32]map[int64]string{}, fails: map[string]int{},
		perPart: map[int32]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for i := 0; i < producers; i++ {
		w.wg.Add(1)
		go w.produce(ctx, i, rate)
	}
	w.wg.Add(1)
	go w.consume(ctx)
	return w
}

func (w *Workload) client(opts ...kgo.Opt) *kgo.Client {
	opts = append([]kgo.Opt{kgo.SeedBrokers(w.seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(20 * time.Second), kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.RetryTimeout(20 * time.Second), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.ConnIdleTimeout(10 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		w.t.Errorf("workload client: %v", err)
		return nil
	}
	return cl
}

// produce sends records at about rate per second, one at a time through
// the async path (so several are in flight), until ctx ends.
func (w *Workload) produce(ctx context.Context, id, rate int) {
	defer w.wg.Done()
	cl := w.client(kgo.DefaultProduceTopic(w.topic))
	if cl == nil {
		return
	}
	defer cl.Close()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var inflight sync.WaitGroup
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			// Let what was sent settle: acknowledged or failed.
			flushCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = cl.Flush(flushCtx)
			cancel()
			inflight.Wait()
			return
		case <-tick.C:
		}
		value := fmt.Sprintf("%d-%d", id, seq)
		inflight.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(value), Value: []byte(value)}, func(r *kgo.Record, err error) {
			defer inflight.Done()
			w.mu.Lock()
			defer w.mu.Unlock()
			if err != nil {
				w.fails[errKind(err)]++
				return
			}
			m := w.acked[r.Partition]
			if m == nil {
				m = map[int64]string{}
				w.acked[r.Partition] = m
			}
			if prev, ok := m[r.Offset]; ok {
				w.t.Errorf("offset %d of partition %d acknowledged twice: %q and %q", r.Offset, r.Partition, prev, value)
			}
			m[r.Offset] = value
			w.perPart[r.Partition]++
			w.nacked.Add(1)
		})
	}
}

func errKind(err error) string {
	s := err.Error()
	if i := strings.Index(s, ":"); i > 0 && i < 60 {
		return s[:i]
	}
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

// consume tails the topic from the start, remembering everything read.
func (w *Workload) consume(ctx context.Context) {
	defer w.wg.Done()
	cl := w.client(kgo.ConsumeTopics(w.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	if cl == nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		w.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			m := w.seen[r.Partition]
			if m == nil {
				m = map[int64]string{}
				w.seen[r.Partition] = m
			}
			m[r.Offset] = string(r.Value)
		})
		w.mu.Unlock()
	}
}

// Acked is the number of records acknowledged so far.
func (w *Workload) Acked() int64 { return w.nacked.Load() }

// WaitAcked waits until n more records than now are acknowledged: the
// cluster makes progress.
func (w *Workload) WaitAcked(n int64, timeout time.Duration, what string) {
	w.t.Helper()
	want := w.Acked() + n
	deadline := time.Now().Add(timeout)
	for w.Acked() < want {
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: %d records acknowledged in %v, want %d more (produce errors: %v)", what, w.Acked()-(want-n), timeout, n, w.failures())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitEachPartition waits until every one of partitions has n more
// records acknowledged than now: each partition has a working leader.
func (w *Workload) WaitEachPartition(partitions int32, n int64, timeout time.Duration, what string) {
	w.t.Helper()
	w.mu.Lock()
	start := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		start[p] = w.perPart[p]
	}
	w.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		var behind []int32
		for p := int32(0); p < partitions; p++ {
			if w.perPart[p] < start[p]+n {
				behind = append(behind, p)
			}
		}
		w.mu.Unlock()
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: partitions %v got fewer than %d acknowledged records in %v (produce errors: %v)", what, behind, n, timeout, w.failures())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *Workload) failures() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.fails {
		out[k] = v
	}
	return out
}

// Stop ends the load and waits for every in-flight record to settle.
func (w *Workload) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Check reads every partition from the start up to its end offset and
// applies the checker's rules. It returns the records read.
func (w *Workload) Check(timeout time.Duration) int {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl := w.client()
	if cl == nil {
		return 0
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	for {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, w.topic); err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			w.t.Fatalf("list end offsets: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	final := map[int32]map[int64]string{}
	want := 0
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		final[o.Partition] = map[int64]string{}
		want += int(o.Offset)
		parts[o.Partition] = kgo.NewOffset().AtStart()
	})
	rd := w.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: parts}))
	defer rd.Close()
	got := 0
	for got < want {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			w.t.Fatalf("final read: %d of %d records after %v", got, want, timeout)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := final[r.Partition][r.Offset]; !dup {
				got++
			}
			final[r.Partition][r.Offset] = string(r.Value)
		})
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	problems := 0
	report := func(format string, args ...any) {
		if problems < 20 {
			w.t.Errorf(format, args...)
		}
		problems++
	}
	for p, m := range w.acked {
		for off, v := range m {
			if got, ok := final[p][off]; !ok {
				report("acknowledged record %q at %d/%d is missing", v, p, off)
			} else if got != v {
				report("acknowledged record %q at %d/%d is now %q", v, p, off, got)
			}
		}
	}
	for p, m := range w.seen {
		for off, v := range m {
			if got, ok := final[p][off]; !ok || got != v {
				report("record %q a consumer read at %d/%d vanished (now %q)", v, p, off, got)
			}
		}
	}
	// Per partition, in offset order: each producer's sequences increase
	// and no value appears twice.
	for p, m := range final {
		offs := make([]int64, 0, len(m))
		for off := range m {
			offs = append(offs, off)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		last := map[string]int{}
		where := map[string]int64{}
		for _, off := range offs {
			v := m[off]
			prod, seqStr, _ := strings.Cut(v, "-")
			seq, _ := strconv.Atoi(seqStr)
			if prev, ok := where[v]; ok {
				report("record %q appears twice in partition %d, at %d and %d", v, p, prev, off)
			}
			where[v] = off
			if l, ok := last[prod]; ok && seq < l {
				report("partition %d: producer %s's record %d at offset %d comes after its record %d", p, prod, seq, off, l)
			}
			last[prod] = seq
		}
	}
	if problems > 0 {
		w.t.Errorf("checker: %d problems (%d acknowledged, %d read at the end)", problems, w.nacked.Load(), got)
	}
	w.t.Logf("checker: %d records acknowledged, %d read back, produce errors %v", w.nacked.Load(), got, w.fails)
	return got
}
