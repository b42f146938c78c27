package broker

import (
	"context"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/storage"
)

// TestTransactionVersion2: KIP-890 part 2 on one broker (its own
// coordinator), in raw requests. Produce v12 and TxnOffsetCommit v5 add
// their partitions to the transaction themselves; EndTxn v5 bumps the
// epoch, writes the markers at the new one and answers it; a retry of it
// gets the same answer; the zombie's batches of the old epoch are fenced;
// an abort with nothing open bumps the epoch too. With verification off,
// v12 still adds.
func TestTransactionVersion2(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("t2", 2, nil)
	rc := c.dialRaw(t)
	ir := initTransactional(t, rc, "tv2", 60000)
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	logs := []*storage.Log{c.broker.lookup(tp("t2", 0)).log, c.broker.lookup(tp("t2", 1)).log}
	wantCode := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	open := func(l *storage.Log) bool {
		l.SetHighWatermark(l.LogEndOffset()) // one replica
		return l.LastStableOffset() != l.LogEndOffset()
	}
	waitFor(t, "the group coordinator", 10*time.Second, func() bool {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKeys = 4, []string{"g2"}
		return roundTrip[*kmsg.FindCoordinatorResponse](rc, fc).Coordinators[0].ErrorCode == 0
	})
	offsetsPart := c.broker.groups.partitionOf("g2")
	commitOffset := func(version int16, epoch int16, offset int64) int16 {
		t.Helper()
		req := txnOffsetCommitRequest(version, "tv2", "g2", pid, epoch, "t2", offset)
		return roundTrip[*kmsg.TxnOffsetCommitResponse](rc, req).Topics[0].Partitions[0].ErrorCode
	}
	endTxn := func(epoch int16, commit bool) *kmsg.EndTxnResponse {
		t.Helper()
		end := kmsg.NewPtrEndTxnRequest()
		end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 5, "tv2", pid, epoch, commit
		return roundTrip[*kmsg.EndTxnResponse](rc, end)
	}
	describe := func() kmsg.DescribeTransactionsResponseTransactionState {
		t.Helper()
		d := kmsg.NewPtrDescribeTransactionsRequest()
		d.TransactionalIDs = []string{"tv2"}
		return roundTrip[*kmsg.DescribeTransactionsResponse](rc, d).TransactionStates[0]
	}

	// No AddPartitionsToTxn, no AddOffsetsToTxn: the leaders add.
	wantCode("v12 to partition 0", produceTxnRaw(t, rc, 12, "tv2", "t2", 0, txnBatchOf(t, pid, epoch, 0, 2)).ErrorCode, 0)
	wantCode("v12 to partition 1", produceTxnRaw(t, rc, 12, "tv2", "t2", 1, txnBatchOf(t, pid, epoch, 0, 1)).ErrorCode, 0)
	wantCode("TxnOffsetCommit v5", commitOffset(5, epoch, 7), 0)
	d := describe()
	if d.State != "Ongoing" || len(d.Topics) != 2 {
		t.Fatalf("the coordinator's transaction: %+v, want Ongoing with t2-0, t2-1 and __consumer_offsets-%d", d, offsetsPart)
	}

	r := endTxn(epoch, true)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5: %v pid %d epoch %d, want pid %d epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch, pid, epoch+1)
	}
	waitFor(t, "the commit markers", 10*time.Second, func() bool { return !open(logs[0]) && !open(logs[1]) })
	for i, l := range logs {
		if ps := l.ActiveProducers(); len(ps) != 1 || ps[0].ProducerEpoch != epoch+1 {
			t.Fatalf("partition %d's producer after the marker: %+v, want epoch %d", i, ps, epoch+1)
		}
	}
	waitFor(t, "the commit to complete", 10*time.Second, func() bool { return describe().State == "CompleteCommit" })
	if r := endTxn(epoch, true); r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("a retry of the commit: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch)
	}
	wantCode("a commit one epoch ahead", endTxn(epoch+2, true).ErrorCode, kerr.ProducerFenced.Code)

	// The offsets are committed.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group = 7, "g2"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t2", Partitions: []int32{0}}}
	if p := roundTrip[*kmsg.OffsetFetchResponse](rc, of).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 7 {
		t.Fatalf("the committed offset: %v %d, want 7", kerr.ErrorForCode(p.ErrorCode), p.Offset)
	}

	// The zombie: its batch of the old epoch is refused.
	wantCode("the old epoch's batch", produceTxnRaw(t, rc, 12, "tv2", "t2", 0, txnBatchOf(t, pid, epoch, 2, 1)).ErrorCode,
		kerr.InvalidProducerEpoch.Code)
	if open(logs[0]) {
		t.Fatal("the zombie's batch opened a transaction")
	}

	// The next transaction, at the new epoch from sequence 0, aborted.
	epoch++
	wantCode("the next transaction's batch", produceTxnRaw(t, rc, 12, "tv2", "t2", 0, txnBatchOf(t, pid, epoch, 0, 1)).ErrorCode, 0)
	if r := endTxn(epoch, false); r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5 abort: %v epoch %d, want %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch, epoch+1)
	}
	waitFor(t, "the abort marker", 10*time.Second, func() bool { return !open(logs[0]) })
	epoch++

	// An abort with nothing open: the epoch moves on all the same, and a
	// commit with nothing open is refused.
	waitFor(t, "the abort to complete", 10*time.Second, func() bool { return describe().State == "CompleteAbort" })
	wantCode("a commit with nothing open", endTxn(epoch, true).ErrorCode, kerr.InvalidTxnState.Code)
	if r := endTxn(epoch, false); r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("an empty abort: %v epoch %d, want %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch, epoch+1)
	}
	epoch++

	// Verification off: Produce v11 is appended unverified, v12 still
	// adds the partition, so its markers end it.
	setTxnVerification(t, c, "false")
	var pr kmsg.ProduceResponseTopicPartition
	waitFor(t, "a batch of the next transaction", 10*time.Second, func() bool {
		pr = produceTxnRaw(t, rc, 12, "tv2", "t2", 1, txnBatchOf(t, pid, epoch, 0, 1))
		return pr.ErrorCode != kerr.NotEnoughReplicas.Code // the empty abort completing
	})
	wantCode("v12 with verification off", pr.ErrorCode, 0)
	if d := describe(); d.State != "Ongoing" || len(d.Topics) != 1 || d.Topics[0].Partitions[0] != 1 {
		t.Fatalf("the transaction with verification off: %+v", d)
	}
	wantCode("its commit", endTxn(epoch, true).ErrorCode, 0)
	waitFor(t, "its marker", 10*time.Second, func() bool { return !open(logs[1]) })
}

// TestTransactionVersion2ProducerIDRotation: a kgo producer under
// transaction version 2 commits more transactions than a producer id has
// epochs (each EndTxn bumps it). At the last epoch EndTxn hands out a new
// producer id at epoch 0 (Kafka's producer id rotation), kgo goes on with
// it, and every committed record is read back with read_committed. About
// 33,000 transactions: make test-long (KEEL_LONG=1) runs it.
func TestTransactionVersion2ProducerIDRotation(t *testing.T) {
	if os.Getenv("KEEL_LONG") == "" {
		t.Skip("33,000 transactions: make test-long (KEEL_LONG=1) runs it")
	}
	c := newTxnCluster(t)
	c.createTopic("rot", 1, nil)
	setTransactionVersion(t, c, 2)
	prod := c.client(kgo.TransactionalID("rot"), kgo.DefaultProduceTopic("rot"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	firstID, _, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const txns = math.MaxInt16 + 100
	for i := range txns {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	id, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id == firstID || epoch >= 200 {
		t.Fatalf("after %d transactions the producer is id %d epoch %d, want a new id (the first was %d) at a low epoch", txns, id, epoch, firstID)
	}
	cons := c.client(kgo.ConsumeTopics("rot"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for seen := 0; seen < txns; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d committed records: %v", seen, txns, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(seen) {
				t.Fatalf("record %d is %q", seen, r.Value)
			}
			seen++
		})
	}
}
