package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeAll reads n records from topic with franz-go's kgo (a third-party
// client) and returns them by partition.
func consumeAll(t *testing.T, addrs []string, topic string, n int) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32][]*kgo.Record{}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
	return out
}

func TestProducerRoundTripThroughKfake(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var wg sync.WaitGroup
	var failed atomic.Int32
	wg.Add(n)
	for i := 0; i < n; i++ {
		r := &Record{Topic: "t", Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprintf("v%d", i))}
		p.Produce(ctx, r, func(r *Record, err error) {
			if err != nil {
				t.Errorf("record: %v", err)
				failed.Add(1)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, fake.ListenAddrs(), "t", n)
	total := 0
	for part, rs := range got {
		for i, r := range rs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d at offset %d", part, i, r.Offset)
			}
		}
		total += len(rs)
	}
	if total != n {
		t.Fatalf("consumed %d", total)
	}
}

func TestProducerRetriesNotLeaderOnce(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	var calls atomic.Int32
	fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		calls.Add(1)
		return failProduce(kreq, 6), nil, true // NOT_LEADER_OR_FOLLOWER
	})
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	res := p.ProduceSync(ctx, StringRecord("t", "a"), StringRecord("t", "b"))
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if res[0].Record.Offset != 0 || res[1].Record.Offset != 1 || calls.Load() != 1 {
		t.Fatalf("offsets %d %d after %d produce requests", res[0].Record.Offset, res[1].Record.Offset, calls.Load())
	}
}

func TestProducerFailsNonRetriableErrors(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		st := kmsg.NewProduceResponseTopic()
		st.Topic = req.Topics[0].Topic
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.ErrorCode = 10 // MESSAGE_TOO_LARGE
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	res := p.ProduceSync(ctx, StringRecord("t", "a"))
	var ke *Error
	if err := res.FirstErr(); !errors.As(err, &ke) || ke.Code != 10 || ke.Retriable {
		t.Fatalf("want MESSAGE_TOO_LARGE, got %v", err)
	}
	// The epoch bump after the gap lets the next record through.
	res = p.ProduceSync(ctx, StringRecord("t", "b"))
	if err := res.FirstErr(); err != nil || res[0].Record.Offset != 0 {
		t.Fatalf("after the failure: %v offset %d", err, res[0].Record.Offset)
	}
}

// TestLingerHoldsRecordsBufferedAfterProduceSync: a record buffered just
// after ProduceSync returned lingers, rather than going out with the
// sender pass the sync produce's completion started (which once read the
// flush as still on for the whole pass). Transactions rely on it:
// AbortTransaction fails what is still buffered. The synced record goes
// to the first of many partitions and the lingering one to the last, so
// that the pass has a long way to go when the lingering one arrives.
func TestLingerHoldsRecordsBufferedAfterProduceSync(t *testing.T) {
	const partitions = 256
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), Linger(time.Hour), WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for part := range int32(partitions) { // every partition known to the sender
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Partition: part, Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 {
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("synced")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		p.Produce(ctx, &Record{Topic: "t", Partition: partitions - 1, Value: []byte("lingering")}, func(_ *Record, err error) { done <- err })
		select {
		case err := <-done:
			t.Fatalf("round %d: a record with linger.ms of an hour completed at once (%v)", i, err)
		case <-time.After(time.Millisecond): // kfake answers in ~0.1 ms
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestAbortPassSparesTheNextTransaction: the sender's pass that fails the
// buffered records of an aborting transaction may still be running when
// AbortTransaction returns (it had nothing buffered to wait for), and the
// next transaction may buffer records meanwhile; that pass leaves them
// alone. (A fresh-clone CI run failed TxnFailedRecordMakesTheTransactionAbortable
// this way: the first record after the abort failed with
// ErrTransactionAborted.)
func TestAbortPassSparesTheNextTransaction(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), TransactionalID("spare"), Linger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	entered, release := pauseAtHook(t, &testHookFailBuffered)
	defer release() // before Close: a failed test must not leave the sender in the hook
	// The abort's EndTxn waits for the sender to see the transaction
	// aborting: without it, an abort that wins the race ends before the
	// sender's pass, which then finds the transaction ready and never
	// calls failBuffered (a fresh-clone CI run hung here for 20 minutes).
	fake.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.DropControl()
		fake.SleepControl(func() {
			select {
			case <-entered:
			case <-time.After(hookWait):
			}
		})
		return nil, nil, false
	})
	aborted := make(chan error, 1)
	go func() { aborted <- p.AbortTransaction(ctx) }()
	waitClosed(t, entered, "the sender to fail the aborting transaction's buffered records")
	if err := <-aborted; err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("next")}, func(_ *Record, err error) { done <- err })
	release() // the stale pass goes on
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a record of the next transaction: %v", err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAbortDuringAPassFailsTheBufferedRecords: a sender pass that began
// before AbortTransaction, and reaches a partition after the abort's Flush
// raised the flush flag, must not take that flag as a reason to send the
// partition's lingering record: the record was buffered at the abort and
// fails with ErrTransactionAborted. (A fresh-clone CI run failed
// TxnCommitAbortCommit this way: a record buffered at the abort completed
// with nil.)
func TestAbortDuringAPassFailsTheBufferedRecords(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), TransactionalID("mid-pass"), Linger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("sent")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	entered, release := pauseAtHook(t, &testHookDrainPartition)
	defer release() // before Close: a failed test must not leave the sender in the hook
	done := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("buffered")}, func(_ *Record, err error) { done <- err })
	waitClosed(t, entered, "a sender pass past its transaction check") // it waits before the partition
	aborted := make(chan error, 1)
	go func() { aborted <- p.AbortTransaction(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); p.flushing.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the abort never flushed")
		}
	}
	release() // the pass goes on, the abort's Flush in force
	if err := <-aborted; err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrTransactionAborted) {
		t.Fatalf("the record buffered at the abort completed with %v, want ErrTransactionAborted", err)
	}
}

// TestNextTransactionSentAtItsEpoch: under transaction version 2 each
// EndTxn moves the producer's epoch on. A sender pass that began before a
// commit's EndTxn was answered, and reaches a partition after the next
// transaction buffered a record there, must send the record at the new
// epoch. (The SDK's transactions benchmark against Keel failed this way
// about once in ten thousand transactions: the record went out at the
// ended transaction's epoch, INVALID_PRODUCER_EPOCH, and the producer was
// fenced.)
func TestNextTransactionSentAtItsEpoch(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), TransactionalID("epoch-pass"), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if !p.txn.v2.Load() {
		t.Fatal("kfake's transaction.version is 2: the producer should use version 2")
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := p.currentID()
	entered, release := pauseAtHook(t, &testHookDrainPartition)
	defer release() // before Close: a failed test must not leave the sender in the hook
	p.wakeSender()
	waitClosed(t, entered, "a sender pass")
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if id := p.currentID(); id.id != before.id || id.epoch != before.epoch+1 {
		t.Fatalf("after the commit the producer is %+v, want %+v one epoch on", id, before)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("next")}, func(_ *Record, err error) { done <- err })
	release() // the pass that began before the commit goes on
	if err := <-done; err != nil {
		t.Fatalf("the next transaction's record: %v", err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// hookWait bounds a test's wait on a paused sender, so that a test whose
// hook never runs fails instead of hanging until the package's timeout.
const hookWait = 10 * time.Second

// pauseAtHook installs a test hook at at that, the first time it runs,
// closes entered and waits there until release is called (release may be
// called more than once). The hook is removed when the test ends.
func pauseAtHook(t *testing.T, at *atomic.Pointer[func()]) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	hook := func() { once.Do(func() { close(in); <-out }) }
	at.Store(&hook)
	t.Cleanup(func() { at.Store(nil) })
	return in, func() { released.Do(func() { close(out) }) }
}

// waitClosed waits for ch to be closed, failing the test after hookWait.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hookWait):
		t.Fatalf("timed out waiting for %s", what)
	}
}
