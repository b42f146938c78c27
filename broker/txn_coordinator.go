package broker

// The transaction coordinator (DESIGN §6, KIP-98): the coordinator of
// transactional id T is the leader of __transaction_state partition
// abs(javaHashCode(T)) % its partition count. For every such partition
// this node leads, a txnShard runs a txn.Manager, the pure state machine,
// in the shared coordinator runtime (coordshard.go): it loads the
// partition's log, serves InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn in arrival order, appends the transaction
// records with acks=all, and sends the COMMIT/ABORT markers of prepared
// transactions to the partitions' leaders (txn_markers.go). A new leader
// re-sends the markers of the transactions it finds prepared.

import (
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/broker/txn"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// txnTopic is the internal topic of the transaction coordinator.
const txnTopic = "__transaction_state"

// txnWriteTimeout bounds how long a transaction record waits to be
// committed: Kafka's request.timeout.ms default, which its
// TransactionStateManager uses.
const txnWriteTimeout = 30 * time.Second

// txnCoordinator routes transactional requests to the shard of their
// __transaction_state partition.
type txnCoordinator struct {
	*shardRouter[*txnShard]
}

func newTxnCoordinator(b *Broker) *txnCoordinator {
	topic := func() internalTopic {
		c := b.cfg
		return internalTopic{name: txnTopic, partitions: c.TransactionStateLogNumPartitions,
			replicationFactor: c.TransactionStateLogReplicationFactor, setting: "transaction.state.log.replication.factor",
			// Kafka's TransactionLog topic configs.
			configs: map[string]string{
				"cleanup.policy":                 "compact",
				"compression.type":               "uncompressed",
				"min.insync.replicas":            strconv.Itoa(c.TransactionStateLogMinISR),
				"segment.bytes":                  strconv.Itoa(c.TransactionStateLogSegmentBytes),
				"unclean.leader.election.enable": "false",
			}}
	}
	return &txnCoordinator{newShardRouter(b, topic, func(p *partition, epoch int32) *txnShard {
		s := &txnShard{coordShard: newCoordShard(b, p, epoch)}
		s.markers, s.stopMarkers = context.WithCancel(b.ctx)
		s.m = s
		return s
	})}
}

// txnShard is the coordinator of one __transaction_state partition this
// node leads: the shard goroutine owns mgr and waiting. Marker jobs run on
// goroutines of their own until markers is cancelled (unload).
type txnShard struct {
	*coordShard
	mgr         *txn.Manager
	markers     context.Context
	stopMarkers context.CancelFunc
	// waiting are requests answered CONCURRENT_TRANSACTIONS that run again
	// once a write of the shard completes (serve).
	waiting []waitingTxnOp
	// mgrUnloaded: unload called the Manager's Unload.
	mgrUnloaded bool
}

// concurrentTxnWait is how long a request that would be answered
// CONCURRENT_TRANSACTIONS waits in the coordinator for the transactional
// id's write or markers in flight to complete. A producer beginning its
// next transaction right after EndTxn meets the last one's markers still
// being written; Kafka answers CONCURRENT_TRANSACTIONS at once and the
// client retries after its backoff (20 ms in kgo and the Java client),
// which bounded a producer to about 60 transactions a second here. The
// markers of a healthy cluster take a millisecond or two.
const concurrentTxnWait = 100 * time.Millisecond

// waitingTxnOp is a request parked by serve.
type waitingTxnOp struct {
	deadline int64
	run      func(now int64)
}

// serve runs op, a request on the Manager that answers through the reply
// it is given (op passes it as the request's Waiter). An answer of
// CONCURRENT_TRANSACTIONS before concurrentTxnWait has passed does not
// reach answer: op runs again after the shard's next completed write, as
// a client's retry would, only sooner. (The Manager changed nothing when
// it answered so, but for an InitProducerId's epoch fence, whose retry
// then finds the aborted transaction and gets the new epoch.)
func (s *txnShard) serve(now int64, answer func(txn.Reply), op func(now int64, reply func(txn.Reply))) {
	deadline := now + concurrentTxnWait.Milliseconds()
	var attempt func(now int64)
	attempt = func(now int64) {
		op(now, func(r txn.Reply) {
			if r.ErrorCode == kerr.ConcurrentTransactions.Code && !s.unloading && s.nowMs() < deadline {
				s.waiting = append(s.waiting, waitingTxnOp{deadline: deadline, run: attempt})
				return
			}
			answer(r)
		})
	}
	attempt(now)
}

// retryWaiting runs the parked requests again (a write completed, or
// their time is up). While the shard stops it leaves them to unload, which
// runs them once the Manager answers everything NOT_COORDINATOR.
func (s *txnShard) retryWaiting() {
	if len(s.waiting) == 0 || s.unloading && !s.mgrUnloaded {
		return
	}
	ops := s.waiting
	s.waiting = nil
	now := s.nowMs()
	for _, w := range ops {
		w.run(now)
	}
}

func (s *txnShard) core() *coordShard { return s.coordShard }

func (s *txnShard) reset(int64) {
	c := s.b.cfg
	s.mgr = txn.NewManager(txn.Config{
		MaxTimeoutMs:          c.TransactionMaxTimeout.Milliseconds(),
		IDExpirationMs:        c.TransactionalIDExpiration.Milliseconds(),
		AbortCheckIntervalMs:  max(c.TransactionAbortTimedOutInterval.Milliseconds(), 1),
		ExpireCheckIntervalMs: max(c.TransactionRemoveExpiredInterval.Milliseconds(), 1),
	}, s.leaderEpoch)
}

func (s *txnShard) replay(h *record.BatchHeader, r *record.Record) error {
	if h.IsControl() || r.Key == nil {
		return nil
	}
	return s.mgr.Replay(r.Key, r.Value)
}

func (s *txnShard) loaded(now int64, records int, elapsed time.Duration) {
	eff := s.mgr.FinishLoad(now)
	s.b.log.Info("loaded transactions", "partition", s.p.tp, "coordinator_epoch", s.leaderEpoch, "records", records,
		"completing", len(eff.Markers), "elapsed", elapsed)
	s.apply(eff)
}

func (s *txnShard) nextDeadline() int64 {
	next := s.mgr.NextDeadline()
	if next < 0 {
		next = math.MaxInt64 // not loaded: nothing to do
	}
	for _, w := range s.waiting {
		next = min(next, w.deadline)
	}
	return next
}

func (s *txnShard) tick(now int64) {
	if slices.ContainsFunc(s.waiting, func(w waitingTxnOp) bool { return w.deadline <= now }) {
		s.retryWaiting() // those past their deadline answer now
	}
	if next := s.mgr.NextDeadline(); next >= 0 && next <= now {
		s.apply(s.mgr.Tick(now))
	}
}

func (s *txnShard) unload() {
	s.stopMarkers()
	if s.mgr != nil {
		s.apply(s.mgr.Unload())
		s.mgrUnloaded = true
		s.retryWaiting() // the unloaded Manager answers NOT_COORDINATOR
	}
}

// apply carries out a Manager's Effects: replies now, marker jobs on their
// goroutines, records appended as one batch and reported with Written
// once committed or failed.
func (s *txnShard) apply(eff txn.Effects) {
	for _, r := range eff.Replies {
		if f, ok := r.Waiter.(func(txn.Reply)); ok {
			f(r)
		}
	}
	if s.unloading {
		return // the Manager is being dropped; the next leader loads the log
	}
	for _, job := range eff.Markers {
		s.startMarkers(job)
	}
	if len(eff.Records) == 0 {
		return
	}
	token := eff.Token
	written := func(code int16) {
		s.apply(s.mgr.Written(s.nowMs(), token, code))
		s.retryWaiting()
	}
	now := s.nowMs()
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	for _, r := range eff.Records {
		bb.Append(now, r.Key, r.Value, nil)
	}
	batch, err := bb.Build(nil)
	if err != nil {
		s.b.log.Error("building a transaction state batch failed", "partition", s.p.tp, "error", err)
		written(kerr.UnknownServerError.Code)
		return
	}
	required, code, err := s.appendBatch(batch, txnAppendCheck{})
	if code == 0 && err != nil {
		code = storage.ErrorCode(err)
	}
	if code != 0 {
		written(code)
		return
	}
	s.await(required, txnWriteTimeout, written)
}

// startMarkers writes a marker job's markers on a goroutine of the Broker,
// then hands the job back to the shard. A fenced job is left prepared (a
// newer coordinator owns it); an unloaded shard's jobs stop.
func (s *txnShard) startMarkers(job txn.MarkerJob) {
	mj := markerJob{transactionalID: job.TransactionalID, producerID: job.ProducerID, producerEpoch: job.ProducerEpoch,
		commit: job.Commit, coordinatorEpoch: job.CoordinatorEpoch}
	for _, tp := range job.Partitions {
		mj.partitions = append(mj.partitions, storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	s.b.spawn(func() {
		if err := s.b.writeTxnMarkers(s.markers, mj); err != nil {
			return
		}
		s.submit(func(now int64) { s.apply(s.mgr.MarkersWritten(now, job)) }, func() {})
	})
}

// fencedCode turns PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for request
// versions older than KIP-588's (Kafka's KafkaApis does the same per API).
func fencedCode(code int16, version, firstWithFenced int16) int16 {
	if code == kerr.ProducerFenced.Code && version < firstWithFenced {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
