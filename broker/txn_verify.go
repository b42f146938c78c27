package broker

// Transaction verification (KIP-890 part 1, Kafka 3.6+): before a leader
// appends a producer's first transactional batch to a partition, it asks
// the producer's transaction coordinator whether the partition is in the
// producer's ongoing transaction. A batch that is not (a retry arriving
// after its transaction was aborted, a client that skipped
// AddPartitionsToTxn) would otherwise open a transaction no coordinator
// knows of: no marker would ever end it, and the partition's last stable
// offset, where read_committed consumers stop, would be stuck for good.
//
//   - transaction.partition.verification.enable (default true; dynamic,
//     per broker or cluster-wide, as in Kafka) turns it on.
//   - Only batches that would open a transaction are verified: the log
//     hands out a guard (storage.Log.StartTxnVerification) unless the
//     producer has one open at its epoch, and the append must carry that
//     guard, so an abort marker landing between the coordinator's answer and
//     the append still fails the batch (KAFKA-14884).
//   - The coordinator is asked with AddPartitionsToTxn v4+ and VerifyOnly
//     (broker to broker, CLUSTER_ACTION), or on its shard directly when
//     this broker is the coordinator.
//   - Failures reach the producer in Kafka's codes
//     (ReplicaManager.handleProduceAppend): a partition not in the
//     transaction is INVALID_TXN_STATE ("Partition was not added to the
//     transaction"), TRANSACTION_ABORTABLE from Produce v11 on; a fenced
//     producer INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now
//     (moving, loading, unreachable, or ending the transaction)
//     NOT_ENOUGH_REPLICAS, which every producer retries.
//   - The produce request waits for the answer before the next request on
//     its connection is read, as Kafka processes one request per
//     connection at a time, so a producer's pipelined batches keep their
//     order.
//   - Transaction version 2 (KIP-890 part 2): from Produce v12 and
//     TxnOffsetCommit v5 on the leader asks the coordinator to add the
//     partition (AddPartitionsToTxn v5 without VerifyOnly), whatever the
//     setting says, since the client sends no AddPartitionsToTxn; the
//     guard then survives markers of its epoch or older, which end the
//     previous transaction (storage.Log.StartTxnVerification).
//   - A TxnOffsetCommit is verified the same way (Kafka 3.6's
//     GroupCoordinator.handleTxnCommitOffsets): the group coordinator
//     writes it as a transactional batch of the producer to the group's
//     __consumer_offsets partition, which AddOffsetsToTxn put in the
//     transaction; a late one would hang that partition, and with it
//     every read_committed OffsetFetch of its groups.

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/txn"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// txnVerifyTimeout bounds a verification (Kafka's inter-broker
// request.timeout.ms); a produce request's own timeout bounds it further.
const txnVerifyTimeout = 30 * time.Second

// txnVerificationEnabled is transaction.partition.verification.enable:
// this broker's dynamic config, else the cluster-wide one, else
// server.properties.
func (b *Broker) txnVerificationEnabled(img *metadata.Image) bool {
	v, ok := b.dynamicBrokerConfig(img, "transaction.partition.verification.enable")
	if on, err := strconv.ParseBool(strings.TrimSpace(v)); ok && err == nil {
		return on
	}
	return b.cfg.TransactionPartitionVerificationEnable
}

// checkProduceTxn prepares a produce request's transactional batches for
// their append (handleProduce runs it before appending): every partition
// of a transactional batch gets the verification requirement, and those
// whose batch would open a transaction are verified with the coordinator
// first. A partition that fails is answered here and left out (skip).
// As Kafka's KafkaApis and ReplicaManager, transactional batches without
// a transactional id fail the whole request with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and batches of more than one
// producer with INVALID_PRODUCER_ID_MAPPING.
func (b *Broker) checkProduceTxn(ctx context.Context, m *kmsg.ProduceRequest, img *metadata.Image, jobs []produceJob) {
	type producer struct {
		id    int64
		epoch int16
	}
	var txnJobs []*produceJob // nil for every non-transactional request
	var pr producer
	several := false
	for i := range jobs {
		h, err := record.ParseHeader(jobs[i].in.Records)
		if err != nil || !h.HasProducerID() || !h.IsTransactional() || h.IsControl() {
			continue // framing errors and control batches fail validation
		}
		this := producer{h.ProducerID, h.ProducerEpoch}
		several = several || (len(txnJobs) > 0 && this != pr)
		txnJobs, pr = append(txnJobs, &jobs[i]), this
	}
	if len(txnJobs) == 0 {
		return
	}
	failAll := func(code int16, msg string) {
		for i := range jobs {
			jobs[i].fail(m.Version, code, msg)
		}
	}
	// From v12 on (transaction version 2) the leader's request is what
	// adds the partition to the transaction: never skipped.
	add := m.Version >= 12
	switch {
	case m.TransactionID == nil:
		failAll(kerr.TransactionalIDAuthorizationFailed.Code, "transactional records need a transactional id")
		return
	case several:
		failAll(kerr.InvalidProducerIDMapping.Code, "transactional records contained more than one producer id")
		return
	case !add && !b.txnVerificationEnabled(img):
		return
	}
	var verify []*produceJob
	var tps []txn.TopicPartition
	for _, j := range txnJobs {
		j.verifyTxn = true
		p := b.lookup(storage.TopicPartition{Topic: j.topic, Partition: j.in.Partition})
		if p == nil || p.removed.Load() || !p.state.Load().isLeader {
			continue // the append answers it
		}
		if j.txnGuard = p.log.StartTxnVerification(pr.id, pr.epoch, add); j.txnGuard != nil {
			verify = append(verify, j)
			tps = append(tps, txn.TopicPartition{Topic: j.topic, Partition: j.in.Partition})
		}
	}
	if len(verify) == 0 {
		return
	}
	timeout := txnVerifyTimeout
	if m.TimeoutMillis > 0 {
		timeout = min(timeout, time.Duration(m.TimeoutMillis)*time.Millisecond)
	}
	vctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	codes := b.verifyTxnPartitions(vctx, *m.TransactionID, pr.id, pr.epoch, tps, add)
	b.metrics.txnVerifyTime.observe(time.Since(start))
	for i, j := range verify {
		if codes[i] == 0 {
			continue
		}
		b.metrics.txnVerifyFailures.Add(1)
		code, msg := produceVerifyError(codes[i], m.Version)
		j.fail(m.Version, code, msg)
		b.log.Debug("transactional batch refused: partition not verified", "partition", tps[i], "transactional_id", *m.TransactionID,
			"producer_id", pr.id, "producer_epoch", pr.epoch, "coordinator_error", kerr.ErrorForCode(codes[i]), "elapsed", time.Since(start))
	}
}

// txnAppendCheck is the transaction verification a transactional append
// carries (storage.AppendOptions' VerifyTxn and TxnGuard).
type txnAppendCheck struct {
	verify bool
	guard  *storage.TxnVerificationGuard
}

// verifyTxnOffsetCommit is checkProduceTxn for a TxnOffsetCommit: when the
// batch it writes would open the producer's transaction in the group's
// offsets partition, the coordinator is asked first. It returns the check
// the append must carry, or the code (not 0) that answers every partition
// of the request. An offsets partition this broker does not lead is left
// to the group coordinator's NOT_COORDINATOR.
func (b *Broker) verifyTxnOffsetCommit(ctx context.Context, m *kmsg.TxnOffsetCommitRequest) (txnAppendCheck, int16) {
	add := m.Version >= 5 // transaction version 2: the group coordinator adds the partition
	if !add && !b.txnVerificationEnabled(b.currentImage()) {
		return txnAppendCheck{}, 0
	}
	part := b.groups.partitionOf(m.Group)
	p := b.lookup(storage.TopicPartition{Topic: offsetsTopic, Partition: part})
	if part < 0 || p == nil || p.removed.Load() || !p.state.Load().isLeader {
		return txnAppendCheck{}, 0
	}
	check := txnAppendCheck{verify: true, guard: p.log.StartTxnVerification(m.ProducerID, m.ProducerEpoch, add)}
	if check.guard == nil {
		return check, 0 // the transaction is open there
	}
	vctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	defer cancel()
	start := time.Now()
	code := b.verifyTxnPartitions(vctx, m.TransactionalID, m.ProducerID, m.ProducerEpoch,
		[]txn.TopicPartition{{Topic: offsetsTopic, Partition: part}}, add)[0]
	b.metrics.txnVerifyTime.observe(time.Since(start))
	if code == 0 {
		return check, 0
	}
	b.metrics.txnVerifyFailures.Add(1)
	b.log.Debug("transactional offset commit refused: partition not verified", "group", m.Group, "partition", p.tp,
		"transactional_id", m.TransactionalID, "producer_id", m.ProducerID, "producer_epoch", m.ProducerEpoch,
		"coordinator_error", kerr.ErrorForCode(code), "elapsed", time.Since(start))
	return check, txnOffsetCommitVerifyError(code, m.Version)
}

// txnOffsetCommitVerifyError is the code a TxnOffsetCommit gets for a
// coordinator's verification error: a fenced producer
// INVALID_PRODUCER_EPOCH, a partition not in the transaction
// TRANSACTION_ABORTABLE from v4 on (KIP-890 part 1), INVALID_TXN_STATE
// before, and a coordinator that cannot answer now
// COORDINATOR_NOT_AVAILABLE, which producers retry. Kafka 3.6 handed
// NETWORK_EXCEPTION and CONCURRENT_TRANSACTIONS through, which the Java
// producer takes as fatal ("Unexpected error in TxnOffsetCommitResponse",
// fixed in Kafka by apache/kafka#15559).
func txnOffsetCommitVerifyError(code, version int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.TransactionAbortable.Code:
		if version >= 4 {
			return code
		}
		return kerr.InvalidTxnState.Code
	case kerr.InvalidTxnState.Code, kerr.ClusterAuthorizationFailed.Code:
		return kerr.InvalidTxnState.Code
	case kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	}
	return code
}

// fail answers the job's partition with code (and msg, v8+) and leaves it
// out of the append.
func (j *produceJob) fail(version int16, code int16, msg string) {
	j.skip = true
	j.rp.ErrorCode = code
	if version >= 8 && msg != "" {
		j.rp.ErrorMessage = kmsg.StringPtr(msg)
	}
}

// produceVerifyError is the code a producer gets for a coordinator's
// verification error (Kafka's AddPartitionsToTxnManager and
// ReplicaManager.handleProduceAppend translations).
func produceVerifyError(code, produceVersion int16) (int16, string) {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code, ""
	case kerr.TransactionAbortable.Code:
		if produceVersion >= 11 {
			return code, "Partition was not added to the transaction"
		}
		return kerr.InvalidTxnState.Code, "Partition was not added to the transaction"
	case kerr.InvalidTxnState.Code, kerr.ClusterAuthorizationFailed.Code:
		return kerr.InvalidTxnState.Code, "Partition was not added to the transaction"
	case kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code, kerr.RequestTimedOut.Code:
		return kerr.NotEnoughReplicas.Code, "Unable to verify the partition has been added to the transaction. Underlying error: " +
			kerr.ErrorForCode(code).(*kerr.Error).Message
	}
	return code, ""
}

// verifyTxnPartitions asks the coordinator of transactionalID whether tps
// are in the producer's ongoing transaction, or, with add (KIP-890 part 2:
// Produce v12+, TxnOffsetCommit v5+), to add them to it (beginning the
// transaction when none is open): a code per partition, 0 when it is (or
// was added), the coordinator's code otherwise (NETWORK_EXCEPTION when it
// could not be asked).
func (b *Broker) verifyTxnPartitions(ctx context.Context, transactionalID string, producerID int64, epoch int16, tps []txn.TopicPartition, add bool) []int16 {
	part := b.txns.partitionOf(transactionalID)
	leader := int32(-1)
	if t, ok := b.currentImage().Topic(txnTopic); ok && part >= 0 && int(part) < len(t.Partitions) {
		leader = t.Partitions[part].Leader
	}
	switch {
	case leader < 0:
		return txnCodes(len(tps), kerr.CoordinatorNotAvailable.Code)
	case leader == b.nodeID && add:
		return b.addTxnPartitionsHere(ctx, txn.AddPartitionsRequest{TransactionalID: transactionalID, ProducerID: producerID,
			ProducerEpoch: epoch, Partitions: tps, TV2: true})
	case leader == b.nodeID:
		return b.onTxnShard(ctx, transactionalID, len(tps), func(s *txnShard, _ int64, done func([]int16)) {
			done(s.mgr.VerifyPartitions(transactionalID, producerID, epoch, tps))
		})
	}
	addr, ok := b.brokerAddr(leader)
	if !ok {
		return txnCodes(len(tps), kerr.CoordinatorNotAvailable.Code)
	}
	kc, err := b.txnVerifyConns.conn(leader, addr)
	if err != nil {
		return txnCodes(len(tps), kerr.NetworkException.Code)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = transactionalID, producerID, epoch, !add
	byTopic := map[string]int{}
	for _, tp := range tps {
		t := topicEntry(&tr.Topics, byTopic, tp.Topic, func(name string) kmsg.AddPartitionsToTxnRequestTransactionTopic {
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic = name
			return t
		})
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	req.Transactions = append(req.Transactions, tr)
	kresp, err := kc.request(ctx, req)
	if err != nil {
		// Every transaction's first batches ask while a coordinator is
		// away: one line a second says so.
		if b.txnVerifyLog.allow(time.Second) {
			b.log.Warn("transaction verification: the coordinator could not be asked; producers retry", "coordinator", leader, "error", err)
		}
		return txnCodes(len(tps), kerr.NetworkException.Code)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		b.log.Error("transaction verification refused by the coordinator", "coordinator", leader, "error", kerr.ErrorForCode(resp.ErrorCode))
		return txnCodes(len(tps), resp.ErrorCode)
	}
	answered := map[txn.TopicPartition]int16{}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != transactionalID {
			continue
		}
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				answered[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		code, ok := answered[tp]
		if !ok {
			code = kerr.NetworkException.Code // an answer without it: ask again
		}
		codes[i] = code
	}
	return codes
}

// addTxnPartitionsHere adds req's partitions to its transaction on this
// broker's shard: one code for all of them.
func (b *Broker) addTxnPartitionsHere(ctx context.Context, req txn.AddPartitionsRequest) []int16 {
	n := len(req.Partitions)
	return b.onTxnShard(ctx, req.TransactionalID, n, func(s *txnShard, now int64, done func([]int16)) {
		s.serve(now, func(r txn.Reply) { done(txnCodes(n, r.ErrorCode)) }, func(now int64, reply func(txn.Reply)) {
			req.Waiter = reply
			s.apply(s.mgr.AddPartitions(now, req))
		})
	})
}

// txnCodes is n times code.
func txnCodes(n int, code int16) []int16 {
	codes := make([]int16, n)
	for i := range codes {
		codes[i] = code
	}
	return codes
}

// onTxnShard runs f on the goroutine of the shard coordinating
// transactionalID and waits, bounded by ctx, for the n codes it reports
// with done (once): the shard's refusal (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS) for all when it cannot run,
// COORDINATOR_NOT_AVAILABLE when ctx ends first.
func (b *Broker) onTxnShard(ctx context.Context, transactionalID string, n int, f func(s *txnShard, now int64, done func([]int16))) []int16 {
	s, code := b.txns.shardFor(transactionalID)
	if code != 0 {
		return txnCodes(n, code)
	}
	ch := make(chan []int16, 1)
	var once sync.Once
	done := func(codes []int16) { once.Do(func() { ch <- codes }) }
	if !s.core().submit(func(now int64) { f(s, now, done) }, func() { done(txnCodes(n, kerr.NotCoordinator.Code)) }) {
		return txnCodes(n, kerr.NotCoordinator.Code)
	}
	select {
	case codes := <-ch:
		return codes
	case <-ctx.Done():
		return txnCodes(n, kerr.CoordinatorNotAvailable.Code)
	}
}

// handleAddPartitionsToTxnBatch serves AddPartitionsToTxn v4+, the brokers'
// form (KIP-890): for each transaction, VerifyOnly checks its partitions
// (txn.Manager.VerifyPartitions) and otherwise adds them, as v3 does, one
// code for all. v4 predates TRANSACTION_ABORTABLE: a partition not in the
// transaction is INVALID_TXN_STATE there. A partition the metadata does
// not know is UNKNOWN_TOPIC_OR_PARTITION and its transaction's others
// OPERATION_NOT_ATTEMPTED.
func (b *Broker) handleAddPartitionsToTxnBatch(m *kmsg.AddPartitionsToTxnRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	d := network.NewDeferred()
	if !b.spawn(func() {
		ctx, cancel := context.WithTimeout(b.ctx, txnVerifyTimeout)
		defer cancel()
		img := b.currentImage()
		for _, t := range m.Transactions {
			resp.Transactions = append(resp.Transactions, b.addOrVerifyTxn(ctx, img, m.Version, t))
		}
		d.Complete(&network.Response{Msg: resp})
	}) {
		resp.ErrorCode = kerr.NotCoordinator.Code // closing
		return respond(resp)
	}
	return d
}

// addOrVerifyTxn answers one transaction of an AddPartitionsToTxn v4+.
func (b *Broker) addOrVerifyTxn(ctx context.Context, img *metadata.Image, version int16, t kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
	rt.TransactionalID = t.TransactionalID
	var tps []txn.TopicPartition
	for _, tt := range t.Topics {
		for _, p := range tt.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: tt.Topic, Partition: p})
		}
	}
	codes := unknownTxnPartitions(img, tps)
	switch {
	case t.TransactionalID == "":
		codes = txnCodes(len(tps), kerr.InvalidRequest.Code)
	case codes != nil:
	case t.VerifyOnly:
		codes = b.onTxnShard(ctx, t.TransactionalID, len(tps), func(s *txnShard, _ int64, done func([]int16)) {
			done(s.mgr.VerifyPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps))
		})
	default:
		// A leader adding a partition on a producer's first batch
		// (KIP-890 part 2): the transaction is of version 2.
		codes = b.addTxnPartitionsHere(ctx, txn.AddPartitionsRequest{TransactionalID: t.TransactionalID, ProducerID: t.ProducerID,
			ProducerEpoch: t.ProducerEpoch, Partitions: tps, TV2: true})
	}
	byTopic := map[string]int{}
	for i, tp := range tps {
		code := codes[i]
		if code == kerr.TransactionAbortable.Code && version < 5 {
			code = kerr.InvalidTxnState.Code
		}
		t := topicEntry(&rt.Topics, byTopic, tp.Topic, func(name string) kmsg.AddPartitionsToTxnResponseTransactionTopic {
			t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			t.Topic = name
			return t
		})
		rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		rp.Partition, rp.ErrorCode = tp.Partition, code
		t.Partitions = append(t.Partitions, rp)
	}
	return rt
}
