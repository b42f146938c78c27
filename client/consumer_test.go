package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumerFake starts a 3-broker kfake cluster with the given topics.
func consumerFake(t testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, topics...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func consumerCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// kgoProduce produces n records "k<i>"/"v<i>" (with one header) through a
// franz-go producer, the third-party reference client.
func kgoProduce(t testing.TB, addrs []string, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := consumerCtx(t, 30*time.Second)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}}}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kgo produce: %v", err)
	}
}

// newTestConsumer builds a Consumer that the test closes.
func newTestConsumer(t testing.TB, addrs []string, opts ...Opt) *Consumer {
	t.Helper()
	opts = append([]Opt{SeedBrokers(addrs...), RetryBackoff(20*time.Millisecond, 200*time.Millisecond),
		FetchMaxWait(100 * time.Millisecond)}, opts...)
	c, err := NewConsumer(consumerCtx(t, 10*time.Second), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// pollN polls until n records arrived.
func pollN(t testing.TB, c *Consumer, n int, timeout time.Duration) []*Record {
	t.Helper()
	ctx := consumerCtx(t, timeout)
	var out []*Record
	for len(out) < n {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, recs...)
	}
	return out
}

func allPartitions(topic string, n int32, start int64) map[string]map[int32]int64 {
	m := map[string]map[int32]int64{topic: {}}
	for p := range n {
		m[topic][p] = start
	}
	return m
}

// checkRecords verifies every produced record was consumed once, intact,
// and in offset order per partition.
func checkRecords(t *testing.T, recs []*Record, n int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[int32]int64{}
	for _, r := range recs {
		i := strings.TrimPrefix(string(r.Value), "v")
		if string(r.Key) != "k"+i || len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != i {
			t.Fatalf("record %s-%d@%d mangled: key %q value %q headers %v", r.Topic, r.Partition, r.Offset, r.Key, r.Value, r.Headers)
		}
		if seen[i] {
			t.Fatalf("record %s consumed twice", r.Value)
		}
		seen[i] = true
		if o, ok := last[r.Partition]; ok && r.Offset <= o {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, o)
		}
		last[r.Partition] = r.Offset
		if r.Timestamp.IsZero() || time.Since(r.Timestamp) > time.Hour {
			t.Fatalf("record timestamp %v", r.Timestamp)
		}
	}
	if len(seen) != n {
		t.Fatalf("consumed %d distinct records, want %d", len(seen), n)
	}
}

func TestConsumerRoundTripsEveryCodec(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	}
	fake := consumerFake(t, 3, "none", "gzip", "snappy", "lz4", "zstd")
	for _, cc := range codecs {
		t.Run(cc.name, func(t *testing.T) {
			const n = 500
			kgoProduce(t, fake.ListenAddrs(), cc.name, n, kgo.ProducerBatchCompression(cc.codec))
			c := newTestConsumer(t, fake.ListenAddrs(), ConsumePartitions(allPartitions(cc.name, 3, OffsetEarliest)))
			checkRecords(t, pollN(t, c, n, 20*time.Second), n)
		})
	}
}

func TestConsumerDirectAssignmentAndSeek(t *testing.T) {
	fake := consumerFake(t, 1, "t")
	kgoProduce(t, fake.ListenAddrs(), "t", 100)
	c := newTestConsumer(t, fake.ListenAddrs(), MaxPollRecords(10),
		ConsumePartitions(map[string]map[int32]int64{"t": {0: 20}}))
	ctx := consumerCtx(t, 20*time.Second)

	recs, err := c.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || len(recs) > 10 || recs[0].Offset != 20 {
		t.Fatalf("first poll: %d records from offset %d, want 1..10 from 20", len(recs), recs[0].Offset)
	}
	if pos, ok := c.Position("t", 0); !ok || pos != recs[len(recs)-1].Offset+1 {
		t.Fatalf("position %d %v after records up to %d", pos, ok, recs[len(recs)-1].Offset)
	}

	if err := c.Seek("t", 0, 90); err != nil {
		t.Fatal(err)
	}
	recs = pollN(t, c, 10, 10*time.Second)
	if recs[0].Offset != 90 || recs[len(recs)-1].Offset != 99 {
		t.Fatalf("after seek to 90: offsets %d..%d", recs[0].Offset, recs[len(recs)-1].Offset)
	}

	if err := c.Seek("t", 0, OffsetEarliest); err != nil {
		t.Fatal(err)
	}
	if recs = pollN(t, c, 1, 10*time.Second); recs[0].Offset != 0 {
		t.Fatalf("after seek to earliest: offset %d", recs[0].Offset)
	}

	if err := c.Seek("t", 0, OffsetLatest); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	recs, err = c.Poll(short)
	cancel()
	if len(recs) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("at the log end Poll returned %d records, %v", len(recs), err)
	}
	kgoProduce(t, fake.ListenAddrs(), "t", 1)
	if recs = pollN(t, c, 1, 10*time.Second); recs[0].Offset != 100 {
		t.Fatalf("new record at offset %d, want 100", recs[0].Offset)
	}
	if err := c.Seek("t", 7, 0); err == nil {
		t.Fatal("seek of an unassigned partition succeeded")
	}
}

func TestConsumerAutoOffsetReset(t *testing.T) {
	fake := consumerFake(t, 1, "t")
	kgoProduce(t, fake.ListenAddrs(), "t", 10)
	tests := []struct {
		name  string
		reset OffsetReset
		check func(t *testing.T, c *Consumer)
	}{
		{"earliest starts at the log start", OffsetResetEarliest, func(t *testing.T, c *Consumer) {
			if recs := pollN(t, c, 1, 10*time.Second); recs[0].Offset != 0 {
				t.Fatalf("offset %d", recs[0].Offset)
			}
		}},
		{"latest starts at the log end", OffsetResetLatest, func(t *testing.T, c *Consumer) {
			waitAssigned(t, c, 1)
			kgoProduce(t, fake.ListenAddrs(), "t", 1)
			if recs := pollN(t, c, 1, 10*time.Second); recs[0].Offset != 10 {
				t.Fatalf("offset %d", recs[0].Offset)
			}
		}},
		{"none fails Poll", OffsetResetNone, func(t *testing.T, c *Consumer) {
			_, err := c.Poll(consumerCtx(t, 10*time.Second))
			if !errors.Is(err, ErrNoOffset) {
				t.Fatalf("poll: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestConsumer(t, fake.ListenAddrs(), ConsumerGroup("reset-"+tt.reset.String()), ConsumeTopics("t"),
				AutoOffsetReset(tt.reset), HeartbeatInterval(100*time.Millisecond), SessionTimeout(3*time.Second))
			tt.check(t, c)
		})
	}
}

// waitAssigned polls (with short deadlines) until c has n partitions and
// positions for all of them.
func waitAssigned(t testing.TB, c *Consumer, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, _ = c.Poll(ctx)
		cancel()
		got, resolved := 0, 0
		for topic, ps := range c.Assignment() {
			for _, p := range ps {
				got++
				if _, ok := c.Position(topic, p); ok {
					resolved++
				}
			}
		}
		if got == n && resolved == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("assignment %v, want %d partitions with positions", c.Assignment(), n)
		}
	}
}

// groupRunner polls a group consumer in a goroutine and records what it
// consumed and how its assignment changed.
type groupRunner struct {
	c      *Consumer
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	recs     []*Record
	revoked  []map[string][]int32
	assigned []map[string][]int32
	lost     []map[string][]int32
	current  map[string][]int32
}

func startGroupRunner(t *testing.T, addrs []string, group string, opts ...Opt) *groupRunner {
	t.Helper()
	g := &groupRunner{done: make(chan struct{}), current: map[string][]int32{}}
	listener := RebalanceListener{
		OnAssigned: func(a map[string][]int32) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.assigned = append(g.assigned, a)
			for tp, ps := range a {
				g.current[tp] = append(g.current[tp], ps...)
			}
		},
		OnRevoked: func(a map[string][]int32) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.revoked = append(g.revoked, a)
			g.current = removeParts(g.current, a)
		},
		OnLost: func(a map[string][]int32) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.lost = append(g.lost, a)
			g.current = removeParts(g.current, a)
		},
	}
	opts = append([]Opt{ConsumerGroup(group), AutoOffsetReset(OffsetResetEarliest), OnRebalance(listener),
		HeartbeatInterval(100 * time.Millisecond), SessionTimeout(3 * time.Second), RebalanceTimeout(3 * time.Second),
	}, opts...)
	g.c = newTestConsumer(t, addrs, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() {
		defer close(g.done)
		for rec, err := range g.c.Records(ctx) {
			if err != nil {
				continue
			}
			g.mu.Lock()
			g.recs = append(g.recs, rec)
			g.mu.Unlock()
		}
	}()
	t.Cleanup(g.stop)
	return g
}

// stop ends the poll loop (the consumer stays open).
func (g *groupRunner) stop() {
	g.cancel()
	<-g.done
}

func (g *groupRunner) snapshot() (assignment map[string][]int32, consumed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return cloneAssignment(g.current), len(g.recs)
}

func removeParts(cur, rm map[string][]int32) map[string][]int32 {
	out := map[string][]int32{}
	for t, ps := range cur {
		for _, p := range ps {
			if !slices.Contains(rm[t], p) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

// waitDisjointCover waits until the runners' assignments are disjoint, cover
// every partition of topic, and have the wanted sizes (nil: any).
func waitDisjointCover(t *testing.T, topic string, n int32, runners []*groupRunner, sizes []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		owner := map[int32]int{}
		ok := true
		for i, r := range runners {
			a, _ := r.snapshot()
			if sizes != nil && len(a[topic]) != sizes[i] {
				ok = false
			}
			for _, p := range a[topic] {
				if _, dup := owner[p]; dup {
					ok = false
				}
				owner[p] = i
			}
		}
		if ok && len(owner) == int(n) {
			return
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, r := range runners {
				a, _ := r.snapshot()
				desc = append(desc, fmt.Sprint(a))
			}
			t.Fatalf("assignments never became a disjoint cover of %d partitions: %v", n, desc)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConsumerGroupsSplitPartitionsWithEveryAssignor(t *testing.T) {
	for _, a := range []Assignor{RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()} {
		t.Run(a.Name(), func(t *testing.T) {
			fake := consumerFake(t, 6, "t")
			const n = 600
			kgoProduce(t, fake.ListenAddrs(), "t", n)
			var runners []*groupRunner
			for range 3 {
				runners = append(runners, startGroupRunner(t, fake.ListenAddrs(), "g-"+a.Name(), ConsumeTopics("t"), Assignors(a)))
			}
			waitDisjointCover(t, "t", 6, runners, []int{2, 2, 2})
			// Everything is consumed; with a rebalance in the middle a
			// record may be seen twice (at least once), never lost.
			deadline := time.Now().Add(30 * time.Second)
			for {
				seen := map[string]bool{}
				for _, r := range runners {
					r.mu.Lock()
					for _, rec := range r.recs {
						seen[string(rec.Value)] = true
					}
					r.mu.Unlock()
				}
				if len(seen) == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("consumed %d of %d records", len(seen), n)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func TestConsumerGroupRebalancesWhenAMemberLeaves(t *testing.T) {
	fake := consumerFake(t, 4, "t")
	a := startGroupRunner(t, fake.ListenAddrs(), "g", ConsumeTopics("t"))
	b := startGroupRunner(t, fake.ListenAddrs(), "g", ConsumeTopics("t"))
	waitDisjointCover(t, "t", 4, []*groupRunner{a, b}, []int{2, 2})
	b.stop()
	if err := b.c.Close(consumerCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("close: %v", err)
	}
	waitDisjointCover(t, "t", 4, []*groupRunner{a}, []int{4})
}

func TestConsumerCommitsResumeAfterRestart(t *testing.T) {
	fake := consumerFake(t, 2, "t")
	const n = 200
	kgoProduce(t, fake.ListenAddrs(), "t", n)
	opts := []Opt{ConsumerGroup("resume"), ConsumeTopics("t"), AutoOffsetReset(OffsetResetEarliest), AutoCommit(false),
		HeartbeatInterval(100 * time.Millisecond), SessionTimeout(3 * time.Second), MaxPollRecords(30)}
	c1 := newTestConsumer(t, fake.ListenAddrs(), opts...)
	first := pollN(t, c1, 60, 20*time.Second)
	if err := c1.CommitSync(consumerCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := c1.Close(consumerCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	c2 := newTestConsumer(t, fake.ListenAddrs(), opts...)
	rest := pollN(t, c2, n-len(first), 20*time.Second)
	checkRecords(t, append(first, rest...), n)
	committed, err := c2.Committed(consumerCtx(t, 10*time.Second), map[string][]int32{"t": {0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range first {
		if committed["t"][r.Partition] <= r.Offset {
			t.Fatalf("committed %v does not cover %d-%d", committed, r.Partition, r.Offset)
		}
	}
}

func TestConsumerAutoCommitsOnlyWhatPollReturned(t *testing.T) {
	fake := consumerFake(t, 1, "t")
	kgoProduce(t, fake.ListenAddrs(), "t", 100)
	c := newTestConsumer(t, fake.ListenAddrs(), ConsumerGroup("auto"), ConsumeTopics("t"), AutoOffsetReset(OffsetResetEarliest),
		HeartbeatInterval(100*time.Millisecond), SessionTimeout(3*time.Second), MaxPollRecords(5),
		AutoCommitInterval(10*time.Millisecond))
	ctx := consumerCtx(t, 20*time.Second)
	first := pollN(t, c, 5, 10*time.Second)
	if first[len(first)-1].Offset != 4 {
		t.Fatalf("first poll ended at %d", first[len(first)-1].Offset)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := c.Poll(ctx); err != nil { // commits offset 5, returns 5..9
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.Committed(ctx, map[string][]int32{"t": {0}})
		if err != nil {
			t.Fatal(err)
		}
		if o := got["t"][0]; o == 5 {
			break
		} else if o > 5 || time.Now().After(deadline) {
			t.Fatalf("committed %d, want 5: only records returned by earlier polls", o)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Close commits what the last Poll returned.
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c2 := newTestConsumer(t, fake.ListenAddrs(), ConsumerGroup("auto"))
	got, err := c2.Committed(ctx, map[string][]int32{"t": {0}})
	if err != nil || got["t"][0] != 10 {
		t.Fatalf("after close committed %v %v, want 10", got, err)
	}
}

func TestConsumerCooperativeStickyRevokesOnlyWhatMoves(t *testing.T) {
	fake := consumerFake(t, 6, "t")
	coop := Assignors(CooperativeStickyAssignor())
	a := startGroupRunner(t, fake.ListenAddrs(), "coop", ConsumeTopics("t"), coop)
	waitDisjointCover(t, "t", 6, []*groupRunner{a}, []int{6})
	before, _ := a.snapshot()

	b := startGroupRunner(t, fake.ListenAddrs(), "coop", ConsumeTopics("t"), coop)
	waitDisjointCover(t, "t", 6, []*groupRunner{a, b}, []int{3, 3})

	a.mu.Lock()
	revoked := slices.Clone(a.revoked)
	a.mu.Unlock()
	total := 0
	for _, r := range revoked {
		total += len(r["t"])
	}
	if total != 3 {
		t.Fatalf("a revoked %v (%d partitions), want exactly the 3 that moved", revoked, total)
	}
	after, _ := a.snapshot()
	for _, p := range after["t"] {
		if !slices.Contains(before["t"], p) {
			t.Fatalf("a gained %d", p)
		}
	}
	bAssigned, _ := b.snapshot()
	for _, r := range revoked {
		for _, p := range r["t"] {
			if !slices.Contains(bAssigned["t"], p) {
				t.Fatalf("a revoked %d, which did not move to b (%v)", p, bAssigned)
			}
		}
	}
}

func TestConsumerLeavesGroupWhenPollingStops(t *testing.T) {
	fake := consumerFake(t, 4, "t")
	a := startGroupRunner(t, fake.ListenAddrs(), "slow", ConsumeTopics("t"))
	b := startGroupRunner(t, fake.ListenAddrs(), "slow", ConsumeTopics("t"), MaxPollInterval(time.Second))
	waitDisjointCover(t, "t", 4, []*groupRunner{a, b}, []int{2, 2})

	// b stops polling: after max.poll.interval.ms it leaves and a takes
	// over everything while b's heartbeats would still keep it alive.
	b.stop()
	waitDisjointCover(t, "t", 4, []*groupRunner{a}, []int{4})
	b.c.group.mu.Lock()
	reason := b.c.group.leftReason
	b.c.group.mu.Unlock()
	if reason == "" {
		t.Fatal("b did not leave because of max.poll.interval.ms")
	}

	// b's next Poll reports its partitions lost and rejoins.
	ctx := consumerCtx(t, 20*time.Second)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, _ = b.c.Poll(short)
	cancel()
	b.mu.Lock()
	lost := len(b.lost)
	b.mu.Unlock()
	if lost != 1 {
		t.Fatalf("b reported %d lost assignments, want 1", lost)
	}
}

func TestConsumerCloseStopsEveryGoroutine(t *testing.T) {
	fake := consumerFake(t, 2, "t")
	kgoProduce(t, fake.ListenAddrs(), "t", 10)
	c := newTestConsumer(t, fake.ListenAddrs(), ConsumerGroup("close"), ConsumeTopics("t"), AutoOffsetReset(OffsetResetEarliest),
		HeartbeatInterval(100*time.Millisecond), SessionTimeout(3*time.Second))
	pollN(t, c, 10, 20*time.Second)
	committed := make(chan error, 1)
	c.CommitAsync(func(err error) { committed <- err })
	if err := <-committed; err != nil {
		t.Fatalf("async commit: %v", err)
	}
	c.CommitAsync(nil)

	// A Poll blocked in another goroutine returns ErrClosed.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Poll(context.Background())
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(consumerCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Poll returned %v", err)
	}
	if _, err := c.Poll(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Poll after Close: %v", err)
	}
	// A goroutine Close waited for may still be between its done signal
	// (a deferred close) and its exit: give it a moment, not forever.
	buf := make([]byte, 1<<20)
	running := func() (string, string) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, fn := range []string{"client.(*Consumer)", "client.(*groupMember)", "client.(*brokerConn)"} {
			if strings.Contains(stacks, fn) {
				return fn, stacks
			}
		}
		return "", ""
	}
	fn, stacks := running()
	for deadline := time.Now().Add(2 * time.Second); fn != "" && time.Now().Before(deadline); fn, stacks = running() {
		time.Sleep(10 * time.Millisecond)
	}
	if fn != "" {
		t.Fatalf("goroutine still running in %s after Close:\n%s", fn, stacks)
	}
}

func TestConsumerIsolationLevels(t *testing.T) {
	fake := consumerFake(t, 1, "t")
	cl, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...), kgo.DefaultProduceTopic("t"), kgo.TransactionalID("tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := consumerCtx(t, 30*time.Second)
	for i, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "txn%d-%d", i, j)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	kgoProduce(t, fake.ListenAddrs(), "t", 1) // a plain record after both transactions

	for _, tt := range []struct {
		level IsolationLevel
		want  int
	}{{ReadUncommitted, 11}, {ReadCommitted, 6}} {
		c := newTestConsumer(t, fake.ListenAddrs(), Isolation(tt.level), ConsumePartitions(allPartitions("t", 1, OffsetEarliest)))
		recs := pollN(t, c, tt.want, 10*time.Second)
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		more, _ := c.Poll(short)
		cancel()
		if len(recs)+len(more) != tt.want {
			t.Fatalf("isolation %d: %d records, want %d", tt.level, len(recs)+len(more), tt.want)
		}
		for _, r := range recs {
			if tt.level == ReadCommitted && strings.HasPrefix(string(r.Value), "txn0") {
				t.Fatalf("read_committed returned aborted record %q", r.Value)
			}
		}
	}
}

func TestConsumerWithoutFetchSessions(t *testing.T) {
	fake := consumerFake(t, 3, "t")
	kgoProduce(t, fake.ListenAddrs(), "t", 300)
	c := newTestConsumer(t, fake.ListenAddrs(), FetchSessions(false), MaxPollRecords(7),
		ConsumePartitions(allPartitions("t", 3, OffsetEarliest)))
	checkRecords(t, pollN(t, c, 300, 20*time.Second), 300)
}

func TestConsumerStaticMemberRestartsWithoutRebalance(t *testing.T) {
	fake := consumerFake(t, 4, "t")
	// kfake skips the rebalance only when the rejoining member's metadata is
	// byte-identical (Kafka compares only the selected protocol), which
	// cooperative-sticky's owned partitions never are after a restart.
	rng := Assignors(RangeAssignor())
	a := startGroupRunner(t, fake.ListenAddrs(), "static", ConsumeTopics("t"), GroupInstanceID("a"), rng)
	b := startGroupRunner(t, fake.ListenAddrs(), "static", ConsumeTopics("t"), GroupInstanceID("b"), rng)
	waitDisjointCover(t, "t", 4, []*groupRunner{a, b}, []int{2, 2})
	before, _ := a.snapshot()
	genB := b.c.Generation()
	b.mu.Lock()
	revokedBefore := len(b.revoked)
	b.mu.Unlock()

	a.stop()
	if err := a.c.Close(consumerCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	a2 := startGroupRunner(t, fake.ListenAddrs(), "static", ConsumeTopics("t"), GroupInstanceID("a"), rng)
	waitDisjointCover(t, "t", 4, []*groupRunner{a2, b}, []int{2, 2})
	after, _ := a2.snapshot()
	if !slices.Equal(before["t"], after["t"]) {
		t.Fatalf("restarted static member got %v, had %v", after, before)
	}
	b.mu.Lock()
	revoked := len(b.revoked) - revokedBefore
	b.mu.Unlock()
	if revoked != 0 || b.c.Generation() != genB {
		t.Fatalf("the other member rebalanced: %d revocations, generation %d -> %d", revoked, genB, b.c.Generation())
	}
}

func TestConsumerLeaderReassignsWhenPartitionsAreAdded(t *testing.T) {
	fake := consumerFake(t, 2, "t")
	r := startGroupRunner(t, fake.ListenAddrs(), "grow", ConsumeTopics("t"), MetadataMaxAge(100*time.Millisecond))
	waitDisjointCover(t, "t", 2, []*groupRunner{r}, []int{2})
	adm, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreatePartitions(consumerCtx(t, 10*time.Second), 2, "t"); err != nil {
		t.Fatal(err)
	}
	waitDisjointCover(t, "t", 4, []*groupRunner{r}, []int{4})
}

func TestConsumerResetsAnOutOfRangePosition(t *testing.T) {
	fake := consumerFake(t, 1, "t")
	kgoProduce(t, fake.ListenAddrs(), "t", 100)
	adm, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx := consumerCtx(t, 20*time.Second)
	if _, err := kadm.NewClient(adm).DeleteRecords(ctx, kadm.Offsets{"t": {0: {At: 50}}}); err != nil {
		t.Fatal(err)
	}
	// Offset 10 is below the log start now: OFFSET_OUT_OF_RANGE, then
	// auto.offset.reset=earliest moves to 50.
	c := newTestConsumer(t, fake.ListenAddrs(), AutoOffsetReset(OffsetResetEarliest),
		ConsumePartitions(map[string]map[int32]int64{"t": {0: 10}}))
	if recs := pollN(t, c, 1, 10*time.Second); recs[0].Offset != 50 {
		t.Fatalf("resumed at %d, want 50", recs[0].Offset)
	}
	strict := newTestConsumer(t, fake.ListenAddrs(), AutoOffsetReset(OffsetResetNone),
		ConsumePartitions(map[string]map[int32]int64{"t": {0: 10}}))
	if _, err := strict.Poll(ctx); !errors.Is(err, ErrNoOffset) {
		t.Fatalf("reset none: %v", err)
	}
}

func TestConsumerFollowsAMovedPartitionLeader(t *testing.T) {
	fake := consumerFake(t, 1, "t")
	kgoProduce(t, fake.ListenAddrs(), "t", 100)
	c := newTestConsumer(t, fake.ListenAddrs(), MaxPollRecords(50), MetadataMinAge(10*time.Millisecond),
		ConsumePartitions(allPartitions("t", 1, OffsetEarliest)))
	first := pollN(t, c, 50, 10*time.Second)[:50]
	leader := fake.LeaderFor("t", 0)
	if err := fake.MoveTopicPartition("t", 0, (leader+1)%3); err != nil {
		t.Fatal(err)
	}
	// Records 0..99 again would mean a bad position; 100 new ones follow.
	cl, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 100; i < 200; i++ {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}}}
		if err := cl.ProduceSync(consumerCtx(t, 10*time.Second), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var rest []*Record
	for _, r := range pollN(t, c, 150, 20*time.Second) {
		if r.Offset >= 50 {
			rest = append(rest, r)
		}
	}
	checkRecords(t, append(first, rest...), 200)
	if got := fake.LeaderFor("t", 0); got == leader {
		t.Fatalf("leader did not move from %d", leader)
	}
}
