package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

func newTxnCluster(t *testing.T, kv ...string) *testCluster {
	return newTestCluster(t, withConfig(append([]string{"transaction.state.log.num.partitions=3",
		"offsets.topic.num.partitions=3"}, kv...)...))
}

// produceTxn produces values to topic in one transaction of cl and ends it.
func produceTxn(t *testing.T, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// consumeAll reads topic from the start until it has n records or 10 s
// pass, with the isolation level given.
func consumeAll(t *testing.T, c *testCluster, topic string, level kgo.IsolationLevel, n int) []string {
	t.Helper()
	cl := c.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestTransactionsCommitAndAbort: a kgo transactional producer commits,
// aborts and commits again; read_committed consumers see only the
// committed records, read_uncommitted ones everything; the last stable
// offset holds at an open transaction's first record until it ends.
func TestTransactionsCommitAndAbort(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("tx", 1, nil)
	p := c.client(kgo.TransactionalID("t1"))
	defer p.Close()
	produceTxn(t, p, "tx", true, "a", "b", "c")
	produceTxn(t, p, "tx", false, "x", "y")
	produceTxn(t, p, "tx", true, "d")

	if got := consumeAll(t, c, "tx", kgo.ReadCommitted(), 4); strings.Join(got, "") != "abcd" {
		t.Fatalf("read_committed: %q", got)
	}
	if got := consumeAll(t, c, "tx", kgo.ReadUncommitted(), 6); strings.Join(got, "") != "abcxyd" {
		t.Fatalf("read_uncommitted: %q", got)
	}
	l := c.broker.lookup(tp("tx", 0)).log
	// 6 records and 3 markers.
	if leo, hw, lso := l.LogEndOffset(), l.HighWatermark(), l.LastStableOffset(); leo != 9 || hw != 9 || lso != 9 {
		t.Fatalf("end %d, high watermark %d, last stable %d; want 9", leo, hw, lso)
	}
	if ab := l.AbortedTransactions(0, 9); len(ab) != 1 || ab[0].FirstOffset != 4 || ab[0].LastOffset != 6 {
		t.Fatalf("aborted transactions: %+v", ab)
	}

	// An open transaction holds the last stable offset.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := c.admin()
	ends := func(level kgo.IsolationLevel) int64 {
		t.Helper()
		var lo kadm.ListedOffsets
		var err error
		if level == kgo.ReadCommitted() {
			lo, err = adm.ListCommittedOffsets(ctx, "tx")
		} else {
			lo, err = adm.ListEndOffsets(ctx, "tx")
		}
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("tx", 0)
		return o.Offset
	}
	if committed, end := ends(kgo.ReadCommitted()), ends(kgo.ReadUncommitted()); committed != 9 || end != 10 {
		t.Fatalf("with a transaction open: read_committed end %d (want 9), read_uncommitted end %d (want 10)", committed, end)
	}
	if got := consumeAll(t, c, "tx", kgo.ReadCommitted(), 5); len(got) != 4 {
		t.Fatalf("read_committed saw the open transaction: %q", got)
	}
	// The coordinator describes it.
	described, err := adm.DescribeTransactions(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := described["t1"]
	if !ok || d.State != "Ongoing" || len(d.Topics) != 1 {
		t.Fatalf("described: %+v", described)
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil || len(listed) != 1 {
		t.Fatalf("listed: %+v %v", listed, err)
	}
	// ListTransactions v2 (KIP-1152) filters by a transactional id
	// pattern; one that does not compile is INVALID_REGULAR_EXPRESSION.
	raw := c.dialRaw(t)
	for _, tc := range []struct {
		pattern string
		want    []string
		code    int16
	}{
		{"^t1$", []string{"t1"}, 0},
		{"1", []string{"t1"}, 0},
		{"", []string{"t1"}, 0},
		{"^x", nil, 0},
		{"t[", nil, kerr.InvalidRegularExpression.Code},
	} {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version, req.DurationFilterMillis, req.TransactionalIDPattern = 2, -1, kmsg.StringPtr(tc.pattern)
		resp := roundTrip[*kmsg.ListTransactionsResponse](raw, req)
		var ids []string
		for _, st := range resp.TransactionStates {
			ids = append(ids, st.TransactionalID)
		}
		if resp.ErrorCode != tc.code || !slices.Equal(ids, tc.want) {
			t.Errorf("pattern %q: %v %v, want %v %v", tc.pattern, kerr.ErrorForCode(resp.ErrorCode), ids, kerr.ErrorForCode(tc.code), tc.want)
		}
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeAll(t, c, "tx", kgo.ReadCommitted(), 5); len(got) != 5 || got[4] != "open" {
		t.Fatalf("after commit: %q", got)
	}
}

// TestTransactionsExactlyOnce runs kgo's consume-transform-produce session:
// offsets are committed in the producer's transactions (AddOffsetsToTxn,
// TxnOffsetCommit), so that a second session after the first one closed
// resumes where the committed transactions left off.
func TestTransactionsExactlyOnce(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("in", 2, nil)
	c.createTopic("out", 2, nil)
	src := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 200
	for i := range n {
		if err := src.ProduceSync(ctx, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()

	// One session moves the first part, then closes (committing).
	run := func(limit int) int {
		s, err := kgo.NewGroupTransactSession(append(c.clientOpts(),
			kgo.TransactionalID("eos"), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.RequireStableFetchOffsets())...)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		moved := 0
		for moved < limit && ctx.Err() == nil {
			fs := s.PollRecords(ctx, 50)
			if fs.Empty() {
				continue
			}
			if err := s.Begin(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				moved++
				s.Produce(ctx, &kgo.Record{Topic: "out", Key: r.Key, Value: r.Value}, nil)
			})
			committed, err := s.End(ctx, kgo.TryCommit)
			if err != nil || !committed {
				t.Fatalf("end: committed %v, %v", committed, err)
			}
		}
		return moved
	}
	first := run(n / 2)
	second := run(n - first)
	if first+second != n {
		t.Fatalf("moved %d then %d records, want %d in all", first, second, n)
	}
	got := consumeAll(t, c, "out", kgo.ReadCommitted(), n)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	if len(got) != n || len(seen) != n {
		t.Fatalf("out has %d records, %d distinct; want %d once each", len(got), len(seen), n)
	}
	// The last transaction's offsets become visible once its COMMIT
	// marker reaches the offsets partition, after EndTxn was answered.
	waitFor(t, fmt.Sprintf("the group's committed offsets to sum to %d", n), 10*time.Second, func() bool {
		offs, err := c.admin().FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { total += o.At })
		return total == n
	})
}

// TestTransactionFencing: a second producer with the same transactional id
// fences the first (its open transaction is aborted), and the first gets
// a fatal fenced error.
func TestTransactionFencing(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("fence", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := c.client(kgo.TransactionalID("same"))
	defer old.Close()
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: "fence", Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	young := c.client(kgo.TransactionalID("same"))
	defer young.Close()
	produceTxn(t, young, "fence", true, "young")
	if got := consumeAll(t, c, "fence", kgo.ReadCommitted(), 1); len(got) != 1 || got[0] != "young" {
		t.Fatalf("read_committed: %q", got)
	}
	err := old.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v", err)
	}
}

// TestTransactionTimeoutAborts: a transaction left open past its
// transaction.timeout.ms is aborted by the coordinator, so the last stable
// offset moves on.
func TestTransactionTimeoutAborts(t *testing.T) {
	c := newTxnCluster(t, "transaction.abort.timed.out.transaction.cleanup.interval.ms=100")
	c.createTopic("slow", 1, nil)
	p := c.client(kgo.TransactionalID("slow"), kgo.TransactionTimeout(time.Second))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "slow", Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	l := c.broker.lookup(tp("slow", 0)).log
	waitFor(t, "the coordinator to abort the timed-out transaction", 15*time.Second, func() bool {
		return l.LastStableOffset() == l.LogEndOffset() && l.LogEndOffset() == 2
	})
	if ab := l.AbortedTransactions(0, 2); len(ab) != 1 {
		t.Fatalf("aborted: %+v", ab)
	}
	if got := consumeAll(t, c, "slow", kgo.ReadCommitted(), 1); len(got) != 0 {
		t.Fatalf("read_committed saw %q", got)
	}
}

// TestTransactionsSurviveRestart: the coordinator's state and the
// partitions' transaction state are rebuilt from the logs: an open
// transaction still holds the last stable offset after a restart and can
// be committed by the same producer.
func TestTransactionsSurviveRestart(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("rs", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := c.client(kgo.TransactionalID("rs"))
	produceTxn(t, p, "rs", false, "aborted")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "rs", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.restart()
	l := c.broker.lookup(tp("rs", 0)).log
	if lso := l.LastStableOffset(); lso != 2 {
		t.Fatalf("last stable offset after restart %d, want 2 (the open transaction's first record)", lso)
	}
	// The client's connections died with the broker; it commits on the
	// restarted one.
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if got := consumeAll(t, c, "rs", kgo.ReadCommitted(), 1); len(got) != 1 || got[0] != "open" {
		t.Fatalf("read_committed after restart: %q", got)
	}
}

// TestTxnRequestErrors: what the coordinator answers requests it cannot
// serve.
func TestTxnRequestErrors(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("e", 1, nil)
	rc := c.dialRaw(t)
	// The first FindCoordinator creates __transaction_state.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"e"}
	waitFor(t, "a transaction coordinator", 10*time.Second, func() bool {
		r := roundTrip[*kmsg.FindCoordinatorResponse](rc, fc)
		return len(r.Coordinators) == 1 && r.Coordinators[0].ErrorCode == 0
	})
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.TransactionalID, init.TransactionTimeoutMillis = 4, kmsg.StringPtr(""), 1000
	if r := roundTrip[*kmsg.InitProducerIDResponse](rc, init); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("empty transactional id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("e"), 1<<30
	waitFor(t, "the coordinator to load", 10*time.Second, func() bool {
		r := roundTrip[*kmsg.InitProducerIDResponse](rc, init)
		return r.ErrorCode == kerr.InvalidTransactionTimeout.Code
	})
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch = 3, "e", 99, 0
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "e", Partitions: []int32{0}}, {Topic: "nope", Partitions: []int32{0}}}
	r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, add)
	if len(r.Topics) != 2 || r.Topics[0].Partitions[0].ErrorCode != kerr.OperationNotAttempted.Code ||
		r.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown partition: %+v", r.Topics)
	}
	add.Topics = add.Topics[:1]
	if r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, add); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidProducerIDMapping.Code {
		t.Errorf("unknown transactional id: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.Commit = 3, "e", 99, true
	if r := roundTrip[*kmsg.EndTxnResponse](rc, end); r.ErrorCode != kerr.InvalidProducerIDMapping.Code {
		t.Errorf("EndTxn of an unknown id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A marker for a partition this broker does not have.
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Version = 1
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.Committed = 5, true
	mk.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "nope", Partitions: []int32{0}}}
	wm.Markers = append(wm.Markers, mk)
	if r := roundTrip[*kmsg.WriteTxnMarkersResponse](rc, wm); r.Markers[0].Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("marker for an unknown partition: %+v", r.Markers)
	}
}

// BenchmarkTransactions commits transactions of recordsPerTxn 100-byte
// records over the 6 partitions through kgo (each: AddPartitionsToTxn,
// produce, EndTxn, then the markers) and reports transactions/s and
// records/s; BenchmarkProduce is the non-transactional baseline. With
// verification (KIP-890, the default) the first batch of each
// transaction in a partition waits for the coordinator's answer; off is
// the same run's baseline for that cost. offsets: each transaction also
// commits a consumer group's offset (AddOffsetsToTxn, TxnOffsetCommit:
// consume-transform-produce), whose offsets partition is verified too.
// tv2: the cluster is at transaction.version 2 (KIP-890 part 2), so kgo
// sends no AddPartitionsToTxn or AddOffsetsToTxn (the leaders add the
// partitions on their first batch) and each EndTxn bumps the epoch.
func BenchmarkTransactions(b *testing.B) {
	for _, bc := range []struct {
		perTxn  int
		verify  bool
		offsets bool
		tv2     bool
	}{{10, true, false, false}, {10, false, false, false}, {10, false, false, true}, {10, true, true, false},
		{10, false, true, false}, {10, false, true, true}, {1000, true, false, false}, {1000, false, false, false},
		{1000, false, false, true}} {
		name := fmt.Sprintf("records=%d/verification=%v", bc.perTxn, bc.verify)
		if bc.tv2 {
			// Version 2 always asks the coordinator (to add).
			name = fmt.Sprintf("records=%d/transaction.version=2", bc.perTxn)
		}
		if bc.offsets {
			name += "/offsets"
		}
		b.Run(name, func(b *testing.B) {
			perTxn := bc.perTxn
			c := newTestCluster(b, withConfig("transaction.state.log.num.partitions=3",
				fmt.Sprintf("transaction.partition.verification.enable=%v", bc.verify)))
			c.createTopic("bench", benchPartitions, nil)
			if bc.tv2 {
				setTransactionVersion(b, c, 2)
			}
			prod := c.client(kgo.TransactionalID("bench"), kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(1<<20))
			ctx := context.Background()
			value := make([]byte, benchValueSize)
			txn := func() {
				if err := prod.BeginTransaction(); err != nil {
					b.Fatal(err)
				}
				for range perTxn {
					prod.Produce(ctx, &kgo.Record{Value: value}, nil)
				}
				if err := prod.Flush(ctx); err != nil { // kgo: flush, then end
					b.Fatal(err)
				}
				if bc.offsets {
					commitOffsetInTxn(b, prod, "bench-group", !bc.tv2)
				}
				if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
					b.Fatal(err)
				}
			}
			txn() // the coordinator, its topic and the producer id
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				txn()
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "txn/s")
			reportRate(b, b.N*perTxn, elapsed)
		})
	}
}

// commitOffsetInTxn commits an offset of group in the open transaction of
// the transactional kgo client prod, as a consume-transform-produce
// loop does (AddOffsetsToTxn when addOffsets, then TxnOffsetCommit; kgo
// routes each to its coordinator). Without addOffsets (transaction
// version 2) TxnOffsetCommit v5 adds the offsets partition.
func commitOffsetInTxn(b *testing.B, prod *kgo.Client, group string, addOffsets bool) {
	ctx := context.Background()
	id, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if !addOffsets {
		commitTxnOffset(b, prod, group, id, epoch)
		return
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "bench", id, epoch, group
	resp, err := add.RequestWith(ctx, prod)
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		b.Fatalf("AddOffsetsToTxn: %v", err)
	}
	commitTxnOffset(b, prod, group, id, epoch)
}

// commitTxnOffset sends prod's TxnOffsetCommit of offset 1 of bench-0 for
// group.
func commitTxnOffset(b *testing.B, prod *kgo.Client, group string, id int64, epoch int16) {
	ctx := context.Background()
	commit := txnOffsetCommitRequest(0, "bench", group, id, epoch, "bench", 1) // kgo sets the version
	cresp, err := commit.RequestWith(ctx, prod)
	if err == nil && cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		err = kerr.ErrorForCode(cresp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		b.Fatalf("TxnOffsetCommit: %v", err)
	}
}

// setTransactionVersion finalizes transaction.version at level and waits
// until the broker's image has it (clients read it from ApiVersions).
func setTransactionVersion(t testing.TB, c *testCluster, level int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	up := kadm.FeatureUpdate{Feature: metadata.TransactionVersionFeature, MaxVersionLevel: level, UpgradeType: 1}
	if cur, _ := c.broker.currentImage().FeatureLevel(metadata.TransactionVersionFeature); level < cur {
		up.UpgradeType = 2
	}
	res, err := c.admin().UpdateFeatures(ctx, false, up)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("transaction.version %d: %v", level, err)
	}
	waitFor(t, "the feature level", 10*time.Second, func() bool {
		l, _ := c.broker.currentImage().FeatureLevel(metadata.TransactionVersionFeature)
		return l == level
	})
}

// initTransactional finds the transaction coordinator of id (creating
// __transaction_state) and gets a producer id and epoch from it.
func initTransactional(t *testing.T, rc *rawClient, id string, timeoutMs int32) *kmsg.InitProducerIDResponse {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{id}
	waitFor(t, "__transaction_state", 10*time.Second, func() bool {
		return roundTrip[*kmsg.FindCoordinatorResponse](rc, fc).Coordinators[0].ErrorCode == 0
	})
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.TransactionalID, init.TransactionTimeoutMillis = 4, kmsg.StringPtr(id), timeoutMs
	var ir *kmsg.InitProducerIDResponse
	waitFor(t, "a producer id from the coordinator", 10*time.Second, func() bool {
		ir = roundTrip[*kmsg.InitProducerIDResponse](rc, init)
		return ir.ErrorCode == 0
	})
	return ir
}

// TestNextTransactionWaitsForMarkers: the AddPartitionsToTxn that begins a
// producer's next transaction right after EndTxn, while the last one's
// markers are still being written, is answered once they are, not with
// CONCURRENT_TRANSACTIONS (which costs a kgo or Java producer a 20 ms
// backoff per transaction).
func TestNextTransactionWaitsForMarkers(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("w", 3, nil)
	rc := c.dialRaw(t)
	ir := initTransactional(t, rc, "w", 10000)
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch = 3, "w", ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "w", Partitions: []int32{0, 1, 2}}}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, "w", ir.ProducerID, ir.ProducerEpoch, true
	for i := range 20 {
		r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, add)
		for _, p := range r.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("transaction %d: AddPartitionsToTxn: %v", i, kerr.ErrorForCode(p.ErrorCode))
			}
		}
		if r := roundTrip[*kmsg.EndTxnResponse](rc, end); r.ErrorCode != 0 {
			t.Fatalf("transaction %d: EndTxn: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// EndTxn is answered before its markers are written.
	for p := range int32(3) {
		l := c.broker.lookup(tp("w", p)).log
		waitFor(t, fmt.Sprintf("partition %d's 20 markers", p), 10*time.Second, func() bool { return l.LogEndOffset() == 20 })
	}
}

// TestStuckMarkersAnswerConcurrentTransactions: while a transaction's
// markers cannot be written (its partition's leader is gone), the
// transaction stays PrepareCommit and the producer's next request waits
// concurrentTxnWait, then gets CONCURRENT_TRANSACTIONS; a transaction
// whose commit is not complete is never reported complete.
func TestStuckMarkersAnswerConcurrentTransactions(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("here", 1, nil)
	rc := c.dialRaw(t)
	ir := initTransactional(t, rc, "stuck", 60000)
	// Once __transaction_state is all here: a partition on a broker that
	// never answers.
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("away", []int32{2})
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch = 3, "stuck", ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "away", Partitions: []int32{0}}}
	if r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, add); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, "stuck", ir.ProducerID, ir.ProducerEpoch, true
	if r := roundTrip[*kmsg.EndTxnResponse](rc, end); r.ErrorCode != 0 {
		t.Fatalf("end: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "here", Partitions: []int32{0}}}
	start := time.Now()
	r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, add)
	if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.ConcurrentTransactions.Code || time.Since(start) < concurrentTxnWait {
		t.Fatalf("next transaction: %v after %v, want CONCURRENT_TRANSACTIONS after %v", kerr.ErrorForCode(code), time.Since(start), concurrentTxnWait)
	}
	desc := kmsg.NewPtrDescribeTransactionsRequest()
	desc.TransactionalIDs = []string{"stuck"}
	if d := roundTrip[*kmsg.DescribeTransactionsResponse](rc, desc); d.TransactionStates[0].State != "PrepareCommit" {
		t.Fatalf("described %+v", d.TransactionStates)
	}
}

// BenchmarkFetchReadCommitted consumes b.N records written in
// transactions of 1,000 (one in ten aborted, which the consumer drops with
// the aborted-transaction list) with read_committed; BenchmarkFetch is the
// read_uncommitted baseline of plain records.
func BenchmarkFetchReadCommitted(b *testing.B) {
	c := newTestCluster(b, withConfig("transaction.state.log.num.partitions=3"))
	c.createTopic("bench", benchPartitions, nil)
	prod := c.client(kgo.TransactionalID("bench"), kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(1<<20))
	ctx := context.Background()
	value := make([]byte, benchValueSize)
	committed := 0
	for i := 0; committed < b.N; i++ {
		if err := prod.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for range 1000 {
			prod.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		commit := i%10 != 9
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			b.Fatal(err)
		}
		if commit {
			committed += 1000
		}
	}
	cons := c.client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	b.ResetTimer()
	start := time.Now()
	got := 0
	for got < committed {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) { b.Fatalf("%s-%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if got != committed {
		b.Fatalf("read %d records, %d committed", got, committed)
	}
	reportRate(b, got, elapsed)
}
