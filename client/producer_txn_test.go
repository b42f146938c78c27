package client_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/client/clienttest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnFake(t testing.TB) (*kfake.Cluster, clienttest.Target) {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake, clienttest.Target{Bootstrap: fake.ListenAddrs()}
}

// TestTransactionalProducerAgainstKfake runs the transactional producer's
// suite against franz-go's kfake, which implements Kafka's transaction
// coordinator; integration/sdk_txn_test.go runs it against Keel.
func TestTransactionalProducerAgainstKfake(t *testing.T) {
	_, tgt := txnFake(t)
	clienttest.RunTransactions(t, tgt)
}

// TestTransactionalProducerFailedRecordMakesTheTransactionAbortable: a
// record the broker refuses makes CommitTransaction fail with
// ErrTransactionAbortable (and Produce too) until AbortTransaction, which
// also bumps the epoch over the failed batch's sequence gap (KIP-360) so
// the next transaction commits.
func TestTransactionalProducerFailedRecordMakesTheTransactionAbortable(t *testing.T) {
	fake, tgt := txnFake(t)
	const topic = "abortable"
	clienttest.CreateTopic(t, clienttest.NewAdmin(t, tgt), topic, 1)
	p := clienttest.NewTxnProducer(t, tgt, "abortable")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// The first Produce request is answered INVALID_RECORD (87, not
	// retriable) without reaching the partition.
	fake.ControlKey(0, func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		return client.FailProduce(kreq, 87), nil, true
	})
	var ke *client.Error
	if err := p.ProduceSync(ctx, client.StringRecord(topic, "refused")).FirstErr(); !errors.As(err, &ke) || ke.Code != 87 {
		t.Fatalf("refused record: %v, want INVALID_RECORD", err)
	}
	err := p.CommitTransaction(ctx)
	if !errors.Is(err, client.ErrTransactionAbortable) || !errors.As(err, &ke) || ke.Code != 87 {
		t.Fatalf("commit after a failed record: %v, want ErrTransactionAbortable wrapping INVALID_RECORD", err)
	}
	if err := p.ProduceSync(ctx, client.StringRecord(topic, "late")).FirstErr(); !errors.Is(err, client.ErrTransactionAbortable) {
		t.Fatalf("produce in an abortable transaction: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := p.ProduceSync(ctx, client.StringRecord(topic, v)).FirstErr(); err != nil {
			t.Fatalf("produce after the abort: %v", err)
		}
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit after the abort: %v", err)
	}
	clienttest.ReadCommitted(t, tgt, topic, 1, []string{"a", "b", "c"})
}

// TestTransactionalProducerMetadataTimeoutMakesTheTransactionAbortable: a
// record that fails before it is buffered (its topic never appears) fails
// the transaction too, as in Java.
func TestTransactionalProducerMetadataTimeoutMakesTheTransactionAbortable(t *testing.T) {
	_, tgt := txnFake(t)
	p := clienttest.NewTxnProducer(t, tgt, "no-topic", client.MaxBlock(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, client.StringRecord("does-not-exist", "x")).FirstErr(); !errors.Is(err, client.ErrMaxBlock) {
		t.Fatalf("record to a missing topic: %v", err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, client.ErrTransactionAbortable) || !errors.Is(err, client.ErrMaxBlock) {
		t.Fatalf("commit: %v, want ErrTransactionAbortable wrapping ErrMaxBlock", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTransactionalProducerCloseStopsEveryGoroutine closes a producer whose
// AddPartitionsToTxn the coordinator keeps answering
// CONCURRENT_TRANSACTIONS: Close aborts the transaction, which stops the
// add goroutine's retries, and no goroutine of the producer survives.
func TestTransactionalProducerCloseStopsEveryGoroutine(t *testing.T) {
	fake, tgt := txnFake(t)
	const topic = "close"
	clienttest.CreateTopic(t, clienttest.NewAdmin(t, tgt), topic, 2)
	var adds atomic.Int32
	fake.ControlKey(24, func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		adds.Add(1)
		req := kreq.(*kmsg.AddPartitionsToTxnRequest)
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, part := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = part, 51
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(ctx, client.SeedBrokers(tgt.Bootstrap...), client.TransactionalID("close"),
		client.WithPartitioner(client.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 4)
	for range 4 {
		p.Produce(ctx, client.StringRecord(topic, "never sent"), func(_ *client.Record, err error) { done <- err })
	}
	for deadline := time.Now().Add(10 * time.Second); adds.Load() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d AddPartitionsToTxn requests", adds.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	for range 4 {
		if err := <-done; !errors.Is(err, client.ErrTransactionAborted) {
			t.Fatalf("record buffered at Close: %v, want ErrTransactionAborted", err)
		}
	}
	buf := make([]byte, 1<<20)
	running := func() string {
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, fn := range []string{"client.(*txnManager)", "client.(*Producer)"} {
			if strings.Contains(stacks, fn) {
				return stacks
			}
		}
		return ""
	}
	// A goroutine Close waited for may still be between its Done and
	// its exit: give it a moment, not forever.
	stacks := running()
	for deadline := time.Now().Add(2 * time.Second); stacks != "" && time.Now().Before(deadline); stacks = running() {
		time.Sleep(10 * time.Millisecond)
	}
	if stacks != "" {
		t.Fatalf("producer goroutine still running after Close:\n%s", stacks)
	}
}

// BenchmarkTransactionalProducer measures committed transactions per second
// (10 records each) against kfake.
func BenchmarkTransactionalProducer(b *testing.B) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	clienttest.BenchmarkTransactions(b, clienttest.Target{Bootstrap: fake.ListenAddrs()})
}

// TestTransactionalProducerSendsProduceV11: from Produce v12 a leader adds
// a transactional batch's partition to the transaction itself (KIP-890
// part 2, transaction version 2). This producer adds its partitions with
// AddPartitionsToTxn (version 1), so its Produce requests stay at v11, as
// the Java client's do without version 2; a plain producer's do not.
func TestTransactionalProducerSendsProduceV11(t *testing.T) {
	fake, tgt := txnFake(t)
	const topic = "v11"
	clienttest.CreateTopic(t, clienttest.NewAdmin(t, tgt), topic, 1)
	var maxVersion atomic.Int32
	fake.ControlKey(0, func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if v := int32(kreq.GetVersion()); v > maxVersion.Load() {
			maxVersion.Store(v)
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	plain := clienttest.NewProducer(t, tgt)
	if err := plain.ProduceSync(ctx, client.StringRecord(topic, "plain")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if v := maxVersion.Load(); v < 12 {
		t.Fatalf("a plain producer sent Produce v%d: the broker must serve v12 for this test to tell", v)
	}
	maxVersion.Store(0)
	p := clienttest.NewTxnProducer(t, tgt, "v11")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, client.StringRecord(topic, "txn")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if v := maxVersion.Load(); v != 11 {
		t.Fatalf("the transactional producer sent Produce v%d, want 11", v)
	}
}
