package client_test

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/client/clienttest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnFake is a kfake cluster at transaction version 2, its default (as a
// new Kafka 4 cluster's).
func txnFake(t testing.TB) (*kfake.Cluster, clienttest.Target) {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake, clienttest.Target{Bootstrap: fake.ListenAddrs(), FencedV2CommitIsInvalidTxnState: true}
}

// txnFakeV1 is a kfake cluster whose transaction.version is 0 (as a Kafka
// 3.x cluster's): producers use transaction version 1. It is set before
// any producer connects, because the SDK, like Java's client, keeps the
// features of the newest epoch and kfake's stays 1.
func txnFakeV1(t testing.TB) (*kfake.Cluster, clienttest.Target) {
	t.Helper()
	fake, tgt := txnFake(t)
	tgt.FencedV2CommitIsInvalidTxnState = false
	req := kmsg.NewPtrUpdateFeaturesRequest()
	up := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	up.Feature, up.MaxVersionLevel, up.UpgradeType = "transaction.version", 0, 2 // safe downgrade
	req.FeatureUpdates = append(req.FeatureUpdates, up)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kresp, err := clienttest.NewAdmin(t, tgt).Client().Request(ctx, req)
	if err == nil {
		resp := kresp.(*kmsg.UpdateFeaturesResponse)
		err = client.ErrorForCode(resp.ErrorCode)
		for _, r := range resp.Results {
			err = cmp.Or(err, client.ErrorForCode(r.ErrorCode))
		}
	}
	if err != nil {
		t.Fatalf("transaction.version 0: %v", err)
	}
	return fake, tgt
}

// TestTransactionalProducerAgainstKfake runs the transactional producer's
// suite against franz-go's kfake, which implements Kafka's transaction
// coordinator, under each transaction version; integration/sdk_txn_test.go
// runs it against Keel.
func TestTransactionalProducerAgainstKfake(t *testing.T) {
	t.Run("TransactionVersion1", func(t *testing.T) {
		_, tgt := txnFakeV1(t)
		clienttest.RunTransactions(t, tgt)
	})
	t.Run("TransactionVersion2", func(t *testing.T) {
		_, tgt := txnFake(t)
		clienttest.RunTransactions(t, tgt)
	})
}

// TestTransactionalProducerFailedRecordMakesTheTransactionAbortable: a
// record the broker refuses makes CommitTransaction fail with
// ErrTransactionAbortable (and Produce too) until AbortTransaction, which
// also bumps the epoch over the failed batch's sequence gap (KIP-360) so
// the next transaction commits. (Under transaction version 2, EndTxn
// bumps the epoch itself.)
func TestTransactionalProducerFailedRecordMakesTheTransactionAbortable(t *testing.T) {
	t.Run("TransactionVersion1", func(t *testing.T) {
		fake, tgt := txnFakeV1(t)
		failedRecordMakesTheTransactionAbortable(t, fake, tgt)
	})
	t.Run("TransactionVersion2", func(t *testing.T) {
		fake, tgt := txnFake(t)
		failedRecordMakesTheTransactionAbortable(t, fake, tgt)
	})
}

func failedRecordMakesTheTransactionAbortable(t *testing.T, fake *kfake.Cluster, tgt clienttest.Target) {
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
// (Transaction version 1: under version 2 no AddPartitionsToTxn is sent.)
func TestTransactionalProducerCloseStopsEveryGoroutine(t *testing.T) {
	fake, tgt := txnFakeV1(t)
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
// part 2, transaction version 2). Under transaction version 1 this
// producer adds its partitions with AddPartitionsToTxn, so its Produce
// requests stay at v11, as the Java client's do; a plain producer's do not.
func TestTransactionalProducerSendsProduceV11(t *testing.T) {
	fake, tgt := txnFakeV1(t)
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

// TestTransactionalProducerVersion2 checks the producer's requests under
// transaction version 2 (KIP-890 part 2) against kfake: no
// AddPartitionsToTxn or AddOffsetsToTxn, Produce v12+ and TxnOffsetCommit
// v5 (which add their partitions), EndTxn v5, one epoch per transaction
// taken from EndTxn's answer (no InitProducerId after the first, not even
// after an abort) and each transaction's sequences starting at 0.
func TestTransactionalProducerVersion2(t *testing.T) {
	fake, tgt := txnFake(t)
	const topic = "tv2"
	clienttest.CreateTopic(t, clienttest.NewAdmin(t, tgt), topic, 2)

	type batchSeen struct {
		partition int32
		epoch     int16
		seq       int32
	}
	var (
		mu            sync.Mutex
		counts        = map[int16]int{}
		versions      = map[int16][]int16{}
		endEpochs     []int16
		batches       []batchSeen
		badBatch      error
		nonTxnProduce bool
	)
	for _, key := range []int16{0, 22, 24, 25, 26, 28} {
		fake.ControlKey(key, func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			mu.Lock()
			defer mu.Unlock()
			counts[key]++
			versions[key] = append(versions[key], kreq.GetVersion())
			switch req := kreq.(type) {
			case *kmsg.EndTxnRequest:
				endEpochs = append(endEpochs, req.ProducerEpoch)
			case *kmsg.ProduceRequest:
				if req.TransactionID == nil {
					nonTxnProduce = true // not ours
				}
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						var b kmsg.RecordBatch
						if err := b.ReadFrom(rp.Records); err != nil {
							badBatch = err
							continue
						}
						batches = append(batches, batchSeen{rp.Partition, b.ProducerEpoch, b.FirstSequence})
					}
				}
			}
			return nil, nil, false
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := clienttest.NewTxnProducer(t, tgt, "tv2", client.WithPartitioner(client.RoundRobinPartitioner()))
	txn := func(vals []string, offsets bool, commit bool) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := p.ProduceSync(ctx, client.StringRecord(topic, v)).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if offsets {
			if err := p.SendOffsetsToTransaction(ctx, map[string]map[int32]int64{topic: {0: 7}}, client.GroupMetadata{GroupID: "tv2-group"}); err != nil {
				t.Fatalf("send offsets: %v", err)
			}
		}
		end := p.CommitTransaction
		if !commit {
			end = p.AbortTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	txn([]string{"a", "b", "c", "d"}, true, true)
	txn([]string{"x", "y"}, false, false)
	txn([]string{"e", "f"}, false, true)
	clienttest.ReadCommitted(t, tgt, topic, 2, []string{"a", "b", "c", "d", "e", "f"})

	mu.Lock()
	defer mu.Unlock()
	if badBatch != nil || nonTxnProduce {
		t.Fatalf("a Produce request without a transactional id or with a bad batch: %v", badBatch)
	}
	if counts[24] != 0 || counts[25] != 0 {
		t.Fatalf("%d AddPartitionsToTxn and %d AddOffsetsToTxn requests, want none", counts[24], counts[25])
	}
	if counts[22] != 1 {
		t.Fatalf("%d InitProducerId requests, want 1: EndTxn bumps the epoch", counts[22])
	}
	for key, min := range map[int16]int16{0: 12, 26: 5, 28: 5} {
		if len(versions[key]) == 0 {
			t.Fatalf("no %s request", kmsg.NameForKey(key))
		}
		for _, v := range versions[key] {
			if v < min {
				t.Fatalf("%s v%d, want v%d or later", kmsg.NameForKey(key), v, min)
			}
		}
	}
	if len(endEpochs) != 3 || endEpochs[1] != endEpochs[0]+1 || endEpochs[2] != endEpochs[1]+1 {
		t.Fatalf("EndTxn epochs %v, want three in a row", endEpochs)
	}
	// Each transaction's batches carry its epoch, and each partition's
	// sequences restart at 0 with it.
	next := map[[2]int32]int32{}
	for _, b := range batches {
		if b.epoch < endEpochs[0] || b.epoch > endEpochs[2] {
			t.Fatalf("batch at epoch %d, outside the transactions' %v", b.epoch, endEpochs)
		}
		k := [2]int32{b.partition, int32(b.epoch)}
		if b.seq != next[k] {
			t.Fatalf("partition %d epoch %d: batch at sequence %d, want %d", b.partition, b.epoch, b.seq, next[k])
		}
		next[k] = b.seq + 1 // one record per batch (ProduceSync)
	}
}
