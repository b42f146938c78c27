package clienttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional producer's suite: client/producer_txn_test.go runs it
// against kfake, integration/sdk_txn_test.go against Keel.

// RunTransactions runs the transactional producer's suite as subtests.
func RunTransactions(t *testing.T, tgt Target) {
	t.Run("CommitAbortCommit", func(t *testing.T) { TxnCommitAbortCommit(t, tgt) })
	t.Run("OffsetsCommitOnlyWithTheTransaction", func(t *testing.T) { TxnOffsetsCommitOnlyWithTheTransaction(t, tgt) })
	t.Run("SecondProducerFencesTheFirst", func(t *testing.T) { TxnSecondProducerFencesTheFirst(t, tgt) })
	t.Run("ProduceOutsideATransactionIsRefused", func(t *testing.T) { TxnProduceOutsideATransactionIsRefused(t, tgt) })
	t.Run("CloseAbortsAnOpenTransaction", func(t *testing.T) { TxnCloseAbortsAnOpenTransaction(t, tgt) })
	t.Run("FailedRecordMakesTheTransactionAbortable", func(t *testing.T) { TxnFailedRecordMakesTheTransactionAbortable(t, tgt) })
	t.Run("LostResponseIsRetriedWithoutDuplicates", func(t *testing.T) { TxnLostResponseIsRetriedWithoutDuplicates(t, tgt) })
}

func uniqueName(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// NewTxnProducer is a transactional producer on tgt (round-robin, so a
// transaction of k*partitions records writes to every partition) that the
// test closes.
func NewTxnProducer(t testing.TB, tgt Target, txnID string, opts ...client.Opt) *client.Producer {
	t.Helper()
	return NewProducer(t, tgt, append([]client.Opt{client.TransactionalID(txnID), client.TransactionTimeout(20 * time.Second),
		client.WithPartitioner(client.RoundRobinPartitioner()), client.RetryBackoff(20*time.Millisecond, 500*time.Millisecond)}, opts...)...)
}

// ReadCommitted reads topic from the start with a read_committed SDK
// consumer until it has every value in want, failing on any other value,
// and then for another 300ms to catch stragglers.
func ReadCommitted(t testing.TB, tgt Target, topic string, partitions int32, want []string) {
	t.Helper()
	readValues(t, tgt, client.ReadCommitted, topic, partitions, want)
}

func readValues(t testing.TB, tgt Target, level client.IsolationLevel, topic string, partitions int32, want []string) {
	t.Helper()
	assign := map[string]map[int32]int64{topic: {}}
	for p := range partitions {
		assign[topic][p] = client.OffsetEarliest
	}
	c, err := client.NewConsumer(ctxFor(t), client.SeedBrokers(tgt.Bootstrap...), client.Isolation(level),
		client.ConsumePartitions(assign), client.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	wanted := map[string]bool{}
	for _, v := range want {
		wanted[v] = true
	}
	seen := map[string]bool{}
	check := func(recs []*client.Record) {
		for _, r := range recs {
			v := string(r.Value)
			if !wanted[v] {
				t.Fatalf("isolation %d read %q from %s-%d@%d, which it must not see", level, v, r.Topic, r.Partition, r.Offset)
			}
			if seen[v] {
				t.Fatalf("isolation %d read %q twice", level, v)
			}
			seen[v] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(seen) < len(want) {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("isolation %d: poll after %d of %d records: %v", level, len(seen), len(want), err)
		}
		check(recs)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	recs, _ := c.Poll(short)
	check(recs)
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func produceValues(t testing.TB, p *client.Producer, topic string, vals []string) {
	t.Helper()
	recs := make([]*client.Record, len(vals))
	for i, v := range vals {
		recs[i] = client.StringRecord(topic, v)
	}
	if err := p.ProduceSync(ctxFor(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce in transaction: %v", err)
	}
}

// TxnCommitAbortCommit: a committed, an aborted and a committed
// transaction over three partitions. Records still buffered at the abort
// fail with ErrTransactionAborted; a read_committed consumer reads exactly
// the committed records, a read_uncommitted one also the aborted records
// that were sent.
func TxnCommitAbortCommit(t *testing.T, tgt Target) {
	topic := uniqueName("txn-cac")
	CreateTopic(t, NewAdmin(t, tgt), topic, 3)
	// linger 1h: a record not forced out stays buffered until the end.
	p := NewTxnProducer(t, tgt, uniqueName("txn-cac"), client.Linger(time.Hour))
	ctx := ctxFor(t)

	first, aborted, last := values("first", 9), values("aborted", 6), values("last", 9)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p, topic, first[:3])
	for _, v := range first[3:] { // buffered: the commit flushes them
		p.Produce(ctx, client.StringRecord(topic, v), func(_ *client.Record, err error) {
			if err != nil {
				t.Errorf("committed record: %v", err)
			}
		})
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p, topic, aborted) // sent, then aborted
	dropped := make(chan error, 3)
	for _, v := range values("dropped", 3) {
		p.Produce(ctx, client.StringRecord(topic, v), func(_ *client.Record, err error) { dropped <- err })
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	for range 3 {
		if err := <-dropped; !errors.Is(err, client.ErrTransactionAborted) {
			t.Fatalf("a record buffered at the abort completed with %v, want ErrTransactionAborted", err)
		}
	}

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p, topic, last)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit after abort: %v", err)
	}

	ReadCommitted(t, tgt, topic, 3, slices.Concat(first, last))
	readValues(t, tgt, client.ReadUncommitted, topic, 3, slices.Concat(first, aborted, last))
}

// TxnOffsetsCommitOnlyWithTheTransaction: offsets sent with a group
// member's metadata become the group's committed offsets when the
// transaction commits and not when it aborts; a member id the group does
// not know makes the transaction abortable (KIP-447).
func TxnOffsetsCommitOnlyWithTheTransaction(t *testing.T, tgt Target) {
	in, out, group := uniqueName("txn-in"), uniqueName("txn-out"), uniqueName("txn-group")
	adm := NewAdmin(t, tgt)
	CreateTopic(t, adm, in, 2)
	CreateTopic(t, adm, out, 1)
	ctx := ctxFor(t)
	plain := NewProducer(t, tgt, client.WithPartitioner(client.RoundRobinPartitioner()))
	for i := range 4 {
		if err := plain.ProduceSync(ctx, client.StringRecord(in, strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.NewConsumer(ctx, client.SeedBrokers(tgt.Bootstrap...), client.ConsumeTopics(in), client.ConsumerGroup(group),
		client.AutoCommit(false), client.Isolation(client.ReadCommitted), client.FetchMaxWait(100*time.Millisecond),
		client.AutoOffsetReset(client.OffsetResetEarliest))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for got := 0; got < 4; { // joined, assigned, and read the input
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}
	md := c.GroupMetadata()
	if md.GroupID != group || md.MemberID == "" || md.GenerationID < 0 {
		t.Fatalf("group metadata %+v", md)
	}

	p := NewTxnProducer(t, tgt, uniqueName("txn-offsets"))
	txn := func(offsets map[string]map[int32]int64, gm client.GroupMetadata, commit bool) error {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceValues(t, p, out, []string{fmt.Sprint(offsets)})
		if err := p.SendOffsetsToTransaction(ctx, offsets, gm); err != nil {
			return err
		}
		if commit {
			return p.CommitTransaction(ctx)
		}
		return p.AbortTransaction(ctx)
	}
	committedOffsets := func() map[int32]int64 {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]int64{}
		for tp, o := range offs {
			if tp.Topic == in && o.Err == nil {
				m[tp.Partition] = o.Offset
			}
		}
		return m
	}
	awaitOffset := func(partition int32, want int64) map[int32]int64 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			m := committedOffsets()
			if m[partition] == want {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %s never committed %d on partition %d: %v", group, want, partition, m)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if err := txn(map[string]map[int32]int64{in: {0: 1}}, md, true); err != nil {
		t.Fatalf("committed transaction with offsets: %v", err)
	}
	awaitOffset(0, 1)
	if err := txn(map[string]map[int32]int64{in: {0: 2}}, md, false); err != nil {
		t.Fatalf("aborted transaction with offsets: %v", err)
	}
	// A later commit on the other partition: once it is visible, the
	// aborted transaction's outcome is settled too.
	if err := txn(map[string]map[int32]int64{in: {1: 2}}, md, true); err != nil {
		t.Fatalf("second committed transaction: %v", err)
	}
	if m := awaitOffset(1, 2); m[0] != 1 {
		t.Fatalf("partition 0 committed offset %d after an aborted transaction sent 2, want 1", m[0])
	}

	stale := md
	stale.MemberID, stale.GenerationID = "not-a-member", md.GenerationID+5
	err = txn(map[string]map[int32]int64{in: {0: 3}}, stale, true)
	if !errors.Is(err, client.ErrTransactionAbortable) || !errors.Is(err, client.ErrCommitFailed) {
		t.Fatalf("offsets of an unknown member: %v, want ErrTransactionAbortable and ErrCommitFailed", err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, client.ErrTransactionAbortable) {
		t.Fatalf("commit after the offsets failed: %v, want ErrTransactionAbortable", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort after the offsets failed: %v", err)
	}
	if err := txn(map[string]map[int32]int64{in: {0: 4}}, client.GroupMetadata{GroupID: group}, true); err != nil {
		t.Fatalf("transaction after the abort: %v", err)
	}
	awaitOffset(0, 4)
}

// TxnSecondProducerFencesTheFirst: a producer initializing the same
// transactional id fences the first, whose open transaction is aborted;
// every later call of the first fails with ErrProducerFatal.
func TxnSecondProducerFencesTheFirst(t *testing.T, tgt Target) {
	topic, id := uniqueName("txn-fence"), uniqueName("txn-fence")
	CreateTopic(t, NewAdmin(t, tgt), topic, 1)
	ctx := ctxFor(t)
	p1 := NewTxnProducer(t, tgt, id)
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p1, topic, values("zombie", 3))
	p2 := NewTxnProducer(t, tgt, id)

	err := p1.CommitTransaction(ctx)
	fenced := errors.Is(err, client.ErrProducerFenced) ||
		(tgt.FencedV2CommitIsInvalidTxnState && errors.Is(err, client.ErrInvalidTxnState))
	if !errors.Is(err, client.ErrProducerFatal) || !fenced {
		t.Fatalf("commit of the fenced producer: %v, want ErrProducerFatal and ErrProducerFenced", err)
	}
	if err := p1.BeginTransaction(); !errors.Is(err, client.ErrProducerFatal) {
		t.Fatalf("begin on the fenced producer: %v, want ErrProducerFatal", err)
	}
	if err := p1.AbortTransaction(ctx); !errors.Is(err, client.ErrProducerFatal) {
		t.Fatalf("abort on the fenced producer: %v, want ErrProducerFatal", err)
	}
	res := p1.ProduceSync(ctx, client.StringRecord(topic, "zombie-late"))
	if err := res.FirstErr(); !errors.Is(err, client.ErrProducerFatal) {
		t.Fatalf("produce on the fenced producer: %v, want ErrProducerFatal", err)
	}

	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p2, topic, values("live", 3))
	if err := p2.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit of the new producer: %v", err)
	}
	if err := p1.Close(ctx); err != nil {
		t.Fatalf("close of the fenced producer: %v", err)
	}
	ReadCommitted(t, tgt, topic, 1, values("live", 3))
}

// TxnProduceOutsideATransactionIsRefused: Java's IllegalStateExceptions,
// and options that contradict transactions.
func TxnProduceOutsideATransactionIsRefused(t *testing.T, tgt Target) {
	topic := uniqueName("txn-refused")
	CreateTopic(t, NewAdmin(t, tgt), topic, 1)
	ctx := ctxFor(t)
	seeds := client.SeedBrokers(tgt.Bootstrap...)
	for _, opt := range []client.Opt{client.RequiredAcks(client.AcksLeader), client.ProducerIdempotence(false)} {
		if p, err := client.NewProducer(ctx, seeds, client.TransactionalID("refused"), opt); err == nil {
			_ = p.Close(ctx)
			t.Fatal("NewProducer accepted a transactional id without idempotence or acks=all")
		}
	}
	if err := NewProducer(t, tgt).BeginTransaction(); !errors.Is(err, client.ErrTransactionState) {
		t.Fatalf("begin on a producer without transactional id: %v", err)
	}

	p := NewTxnProducer(t, tgt, uniqueName("txn-refused"))
	produceRefused := func(when string) {
		t.Helper()
		if err := p.ProduceSync(ctx, client.StringRecord(topic, when)).FirstErr(); !errors.Is(err, client.ErrTransactionState) {
			t.Fatalf("produce %s: %v, want ErrTransactionState", when, err)
		}
	}
	produceRefused("before any transaction")
	if err := p.CommitTransaction(ctx); !errors.Is(err, client.ErrTransactionState) {
		t.Fatalf("commit without a transaction: %v", err)
	}
	if err := p.AbortTransaction(ctx); !errors.Is(err, client.ErrTransactionState) {
		t.Fatalf("abort without a transaction: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, client.ErrTransactionState) {
		t.Fatalf("begin inside a transaction: %v", err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit of an empty transaction: %v", err)
	}
	produceRefused("after the commit")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p, topic, []string{"inside"})
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	ReadCommitted(t, tgt, topic, 1, []string{"inside"})
}

// TxnCloseAbortsAnOpenTransaction: closing a producer in a transaction
// aborts it, as Kafka's producer does.
func TxnCloseAbortsAnOpenTransaction(t *testing.T, tgt Target) {
	topic, id := uniqueName("txn-close"), uniqueName("txn-close")
	adm := NewAdmin(t, tgt)
	CreateTopic(t, adm, topic, 1)
	ctx := ctxFor(t)
	p := NewTxnProducer(t, tgt, id)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p, topic, values("open", 3))
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil || len(ds) != 1 || ds[0].Err != nil {
		t.Fatalf("describe %s: %v %+v", id, err, ds)
	}
	// Kafka and Keel say CompleteAbort (or PrepareAbort while the
	// markers are written); kfake keeps no completed states: Empty.
	if s := ds[0].State; s != "PrepareAbort" && s != "CompleteAbort" && s != "Empty" {
		t.Fatalf("transaction %s is %s after Close, want aborted", id, s)
	}
	p2 := NewTxnProducer(t, tgt, id)
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p2, topic, []string{"after"})
	if err := p2.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	ReadCommitted(t, tgt, topic, 1, []string{"after"})
}

// TxnFailedRecordMakesTheTransactionAbortable: a Produce response with a
// non-retriable error (the proxy turns one into INVALID_RECORD after the
// broker appended the batch) makes CommitTransaction fail with
// ErrTransactionAbortable; AbortTransaction (which also bumps the epoch,
// KIP-360) recovers, and the next transaction commits.
func TxnFailedRecordMakesTheTransactionAbortable(t *testing.T, tgt Target) {
	topic := uniqueName("txn-abortable")
	CreateTopic(t, NewAdmin(t, tgt), topic, 1)
	var failNext atomic.Bool
	fd := &FaultDialer{FailProduce: func(*kmsg.ProduceRequest) int16 {
		if failNext.CompareAndSwap(true, false) {
			return 87 // INVALID_RECORD
		}
		return 0
	}}
	defer fd.Close()
	p := NewTxnProducer(t, tgt, uniqueName("txn-abortable"), client.Dialer(fd.Dial))
	ctx := ctxFor(t)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p, topic, []string{"before"})
	failNext.Store(true)
	var ke *client.Error
	if err := p.ProduceSync(ctx, client.StringRecord(topic, "refused")).FirstErr(); !errors.As(err, &ke) || ke.Code != 87 {
		t.Fatalf("refused record: %v, want INVALID_RECORD", err)
	}
	if err := p.ProduceSync(ctx, client.StringRecord(topic, "late")).FirstErr(); !errors.Is(err, client.ErrTransactionAbortable) {
		t.Fatalf("produce in an abortable transaction: %v, want ErrTransactionAbortable", err)
	}
	err := p.CommitTransaction(ctx)
	if !errors.Is(err, client.ErrTransactionAbortable) || !errors.As(err, &ke) || ke.Code != 87 {
		t.Fatalf("commit after a failed record: %v, want ErrTransactionAbortable wrapping INVALID_RECORD", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p, topic, values("after", 3))
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit after the abort: %v", err)
	}
	ReadCommitted(t, tgt, topic, 1, values("after", 3))
}

// TxnLostResponseIsRetriedWithoutDuplicates: inside a transaction, a
// Produce response lost after the broker appended the batch is retried as
// an idempotent duplicate; the committed transaction holds each record
// once.
func TxnLostResponseIsRetriedWithoutDuplicates(t *testing.T, tgt Target) {
	topic := uniqueName("txn-lost")
	CreateTopic(t, NewAdmin(t, tgt), topic, 1)
	fd := &FaultDialer{}
	defer fd.Close()
	p := NewTxnProducer(t, tgt, uniqueName("txn-lost"), client.Dialer(fd.Dial), client.Linger(time.Millisecond))
	ctx := ctxFor(t)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("once", 30)
	for i := 0; i < len(vals); i += 10 {
		if i == 10 {
			fd.DropNextProduceResponse()
		}
		produceValues(t, p, topic, vals[i:i+10])
	}
	if fd.Dropped() != 1 {
		t.Fatalf("%d responses dropped, want 1", fd.Dropped())
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	ReadCommitted(t, tgt, topic, 1, vals)
}

// BenchmarkTransactions measures committed transactions per second: one op
// is BeginTransaction, 10 records of 100 bytes over 3 partitions, and
// CommitTransaction.
func BenchmarkTransactions(b *testing.B, tgt Target) {
	topic := uniqueName("txn-bench")
	CreateTopic(b, NewAdmin(b, tgt), topic, 3)
	p := NewTxnProducer(b, tgt, uniqueName("txn-bench"), client.Linger(time.Hour))
	ctx := context.Background()
	value := make([]byte, 100)
	failed := make(chan error, 1)
	cb := func(_ *client.Record, err error) {
		if err != nil {
			select {
			case failed <- err:
			default:
			}
		}
	}
	txn := func() {
		if err := p.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for range 10 {
			p.Produce(ctx, &client.Record{Topic: topic, Value: value}, cb)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			b.Fatal(err)
		}
	}
	txn() // warm up: metadata, connections, coordinator
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		txn()
	}
	el := time.Since(start)
	b.StopTimer()
	select {
	case err := <-failed:
		b.Fatalf("a record failed: %v", err)
	default:
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "txns/s")
}
