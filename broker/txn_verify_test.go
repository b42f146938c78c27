package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceTxnRaw sends one transactional batch with Produce version.
func produceTxnRaw(t testing.TB, rc *rawClient, version int16, id, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := produceRequest(version, -1, 10*time.Second, topic, partition, batch)
	req.TransactionID = kmsg.StringPtr(id)
	return roundTrip[*kmsg.ProduceResponse](rc, req).Topics[0].Partitions[0]
}

// txnOffsetCommitRequest is a producer's TxnOffsetCommit of offset for
// partition 0 of topic in group, without a generation.
func txnOffsetCommitRequest(version int16, id, group string, pid int64, epoch int16, topic string, offset int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = version, id, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// setTxnVerification sets transaction.partition.verification.enable
// cluster-wide and waits until the broker applies it.
func setTxnVerification(t *testing.T, c *testCluster, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := c.admin().AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "transaction.partition.verification.enable", Value: kadm.StringPtr(v)}})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("set transaction.partition.verification.enable=%s: %v", v, err)
	}
	waitFor(t, "the setting", 10*time.Second, func() bool {
		return c.broker.txnVerificationEnabled(c.broker.currentImage()) == (v == "true")
	})
}

// TestTxnVerification: KIP-890 part 1 on one broker (its own coordinator).
// A transactional batch whose partition is not in the producer's ongoing
// transaction is refused and leaves no transaction open; the stray batch
// of an aborted transaction, which would hang the partition's last stable
// offset for good, too. The setting turns it off at runtime.
func TestTxnVerification(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("v", 2, nil)
	rc := c.dialRaw(t)
	ir := initTransactional(t, rc, "v-txn", 60000)
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	log0 := c.broker.lookup(tp("v", 0)).log
	wantCode := func(what string, got kmsg.ProduceResponseTopicPartition, want int16) {
		t.Helper()
		if got.ErrorCode != want {
			t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(want))
		}
	}
	noOpenTxn := func(what string) {
		t.Helper()
		log0.SetHighWatermark(log0.LogEndOffset()) // one replica: the HW is the end anyway
		if lso, end := log0.LastStableOffset(), log0.LogEndOffset(); lso != end {
			t.Fatalf("%s: a transaction is open: last stable offset %d, log end %d", what, lso, end)
		}
	}

	// Never added: refused, with TRANSACTION_ABORTABLE from Produce v11.
	wantCode("a partition never added (v9)", produceTxnRaw(t, rc, 9, "v-txn", "v", 0, txnBatchOf(t, pid, epoch, 0, 2)), kerr.InvalidTxnState.Code)
	wantCode("a partition never added (v11)", produceTxnRaw(t, rc, 11, "v-txn", "v", 0, txnBatchOf(t, pid, epoch, 0, 2)), kerr.TransactionAbortable.Code)
	if end := log0.LogEndOffset(); end != 0 {
		t.Fatalf("refused batches were appended: log end %d", end)
	}
	noOpenTxn("after the refusals")

	// Added: verified, appended; the transaction's next batch needs no
	// verification.
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch = 3, "v-txn", pid, epoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "v", Partitions: []int32{0}}}
	if r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, add); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	wantCode("an added partition", produceTxnRaw(t, rc, 11, "v-txn", "v", 0, txnBatchOf(t, pid, epoch, 0, 2)), 0)
	wantCode("the transaction's second batch", produceTxnRaw(t, rc, 11, "v-txn", "v", 0, txnBatchOf(t, pid, epoch, 2, 2)), 0)
	// Partition 1 is not in the transaction.
	wantCode("another partition", produceTxnRaw(t, rc, 11, "v-txn", "v", 1, txnBatchOf(t, pid, epoch, 0, 1)), kerr.TransactionAbortable.Code)

	// The coordinator's view, asked as a broker asks (v4 and v5).
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = "v-txn", pid, epoch, true
	tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "v", Partitions: []int32{0, 1}}}
	verify.Transactions = append(verify.Transactions, tr)
	for _, v := range []struct {
		version int16
		notIn   int16
	}{{4, kerr.InvalidTxnState.Code}, {5, kerr.TransactionAbortable.Code}} {
		verify.Version = v.version
		r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, verify)
		if r.ErrorCode != 0 || len(r.Transactions) != 1 || len(r.Transactions[0].Topics) != 1 {
			t.Fatalf("v%d verification: %+v", v.version, r)
		}
		ps := r.Transactions[0].Topics[0].Partitions
		if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != v.notIn {
			t.Fatalf("v%d verification of v-0 (added) and v-1 (not): %+v", v.version, ps)
		}
	}

	// A partition the metadata does not know: nothing checked.
	verify.Version = 5
	verify.Transactions[0].Topics = append(verify.Transactions[0].Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: "nope", Partitions: []int32{0}})
	if r := roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, verify); len(r.Transactions) != 1 || len(r.Transactions[0].Topics) != 2 ||
		r.Transactions[0].Topics[0].Partitions[0].ErrorCode != kerr.OperationNotAttempted.Code ||
		r.Transactions[0].Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("verification naming an unknown topic: %+v", r.Transactions)
	}

	// The transaction is aborted and its markers written; a late batch of
	// it (a retry the network held back) must not open a new one.
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, "v-txn", pid, epoch, false
	if r := roundTrip[*kmsg.EndTxnResponse](rc, end); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, "the abort marker", 10*time.Second, func() bool { return log0.LogEndOffset() == 5 })
	noOpenTxn("after the abort")
	// Until the coordinator has written CompleteAbort it answers
	// CONCURRENT_TRANSACTIONS: NOT_ENOUGH_REPLICAS, which a producer
	// retries, and nothing is appended.
	var late kmsg.ProduceResponseTopicPartition
	waitFor(t, "the coordinator to complete the abort", 10*time.Second, func() bool {
		late = produceTxnRaw(t, rc, 9, "v-txn", "v", 0, txnBatchOf(t, pid, epoch, 4, 2))
		return late.ErrorCode != kerr.NotEnoughReplicas.Code
	})
	wantCode("a late batch of the aborted transaction", late, kerr.InvalidTxnState.Code)
	noOpenTxn("after the late batch")

	// Turned off cluster-wide, the late batch goes in, and hangs the
	// partition: what verification prevents.
	setVerification := func(v string) { setTxnVerification(t, c, v) }
	setVerification("false")
	wantCode("the late batch, unverified", produceTxnRaw(t, rc, 9, "v-txn", "v", 0, txnBatchOf(t, pid, epoch, 4, 2)), 0)
	log0.SetHighWatermark(log0.LogEndOffset())
	if lso := log0.LastStableOffset(); lso != 5 {
		t.Fatalf("without verification the stray batch should hold the last stable offset at 5, got %d", lso)
	}
	setVerification("true")
	wantCode("the next stray batch", produceTxnRaw(t, rc, 9, "v-txn", "v", 1, txnBatchOf(t, pid, epoch, 0, 1)), kerr.InvalidTxnState.Code)

	// The verifications are metered (Kafka's AddPartitionsToTxnManager).
	families := scrapeBroker(t, c)
	// Refused: v9, v11, v-1, the late batch, the next stray batch.
	if f := families["kafka_server_addpartitionstotxnmanager_verificationfailures_total"]; f == nil || f.GetMetric()[0].GetCounter().GetValue() < 5 {
		t.Errorf("verification failures: %v, want at least 5", f)
	}
	if f := families["kafka_server_addpartitionstotxnmanager_verificationtimems"]; f == nil || f.GetMetric()[0].GetHistogram().GetSampleCount() < 6 {
		t.Errorf("verification times: %v, want at least 6 samples", f)
	}

	// Transactional batches need a transactional id.
	req := produceRequest(9, -1, 10*time.Second, "v", 1, txnBatchOf(t, pid, epoch, 0, 1))
	if r := roundTrip[*kmsg.ProduceResponse](rc, req); r.Topics[0].Partitions[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch without a transactional id: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// ... and one producer a request (Kafka's InvalidPidMappingException):
	// every partition of it is refused, nothing appended.
	// (The request's own producer comes last, on v-0 where its stray
	// transaction is open: checked as one producer, that batch would go
	// in unverified.)
	req = produceRequest(9, -1, 10*time.Second, "v", 1, txnBatchOf(t, pid+1, 0, 0, 1))
	req.TransactionID = kmsg.StringPtr("v-txn")
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, txnBatchOf(t, pid, epoch, 6, 1)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	end0, end1 := log0.LogEndOffset(), c.broker.lookup(tp("v", 1)).log.LogEndOffset()
	r := roundTrip[*kmsg.ProduceResponse](rc, req)
	for _, p := range r.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidProducerIDMapping.Code {
			t.Errorf("two producers in one request, partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if log0.LogEndOffset() != end0 || c.broker.lookup(tp("v", 1)).log.LogEndOffset() != end1 {
		t.Error("a request of two producers appended")
	}
}

// TestTxnOffsetCommitVerification: a TxnOffsetCommit writes a transactional
// batch to the group's __consumer_offsets partition, which is verified as
// a produced batch is: without AddOffsetsToTxn, or late after its
// transaction was aborted, it is refused and leaves no transaction open
// there, which would hold every read_committed offset fetch of the
// partition's groups.
func TestTxnOffsetCommitVerification(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("in", 1, nil)
	rc := c.dialRaw(t)
	ir := initTransactional(t, rc, "o-txn", 60000)
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	waitFor(t, "the group coordinator", 10*time.Second, func() bool {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKeys = 4, []string{"g"}
		return roundTrip[*kmsg.FindCoordinatorResponse](rc, fc).Coordinators[0].ErrorCode == 0
	})
	waitFor(t, "the offsets partitions loaded", 10*time.Second, func() bool {
		return len(c.broker.groups.loadedShards()) == int(c.cfg.OffsetsTopicNumPartitions)
	})
	offsets := c.broker.lookup(tp(offsetsTopic, c.broker.groups.partitionOf("g"))).log
	commit := func(offset int64) int16 {
		t.Helper()
		req := txnOffsetCommitRequest(3, "o-txn", "g", pid, epoch, "in", offset)
		return roundTrip[*kmsg.TxnOffsetCommitResponse](rc, req).Topics[0].Partitions[0].ErrorCode
	}
	wantCode := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	openTxn := func() bool {
		offsets.SetHighWatermark(offsets.LogEndOffset()) // one replica
		return offsets.LastStableOffset() != offsets.LogEndOffset()
	}

	// No AddOffsetsToTxn: refused, nothing written.
	end0 := offsets.LogEndOffset()
	wantCode("an offsets partition never added", commit(1), kerr.InvalidTxnState.Code)
	if offsets.LogEndOffset() != end0 || openTxn() {
		t.Fatalf("the refused commit was written: log end %d, was %d", offsets.LogEndOffset(), end0)
	}

	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = 3, "o-txn", pid, epoch, "g"
	if r := roundTrip[*kmsg.AddOffsetsToTxnResponse](rc, add); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	wantCode("an added offsets partition", commit(2), 0)
	wantCode("the transaction's second offset commit", commit(3), 0)
	if !openTxn() {
		t.Fatal("the committed offsets should be in an open transaction")
	}

	// Aborted; a late TxnOffsetCommit of it must not open a new one.
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, "o-txn", pid, epoch, false
	if r := roundTrip[*kmsg.EndTxnResponse](rc, end); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, "the abort marker", 10*time.Second, func() bool { return !openTxn() })
	var late int16
	waitFor(t, "the coordinator to complete the abort", 10*time.Second, func() bool {
		late = commit(4)
		return late != kerr.CoordinatorNotAvailable.Code // CONCURRENT_TRANSACTIONS meanwhile
	})
	wantCode("a late commit of the aborted transaction", late, kerr.InvalidTxnState.Code)
	if openTxn() {
		t.Fatal("the late commit opened a transaction")
	}

	// A fenced producer is told so.
	initTransactional(t, rc, "o-txn", 60000)
	wantCode("the fenced producer's commit", commit(5), kerr.InvalidProducerEpoch.Code)

	// Unverified, the late commit goes in and hangs the partition.
	setTxnVerification(t, c, "false")
	ir = initTransactional(t, rc, "o-txn", 60000)
	pid, epoch = ir.ProducerID, ir.ProducerEpoch
	wantCode("an unverified commit", commit(6), 0)
	if !openTxn() {
		t.Fatal("without verification the stray commit should open a transaction no coordinator knows of")
	}
}
