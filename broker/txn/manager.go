package txn

import (
	"errors"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	// ErrUnknownRecord is a __transaction_state key or value of a version
	// this build does not read; loading skips unknown keys, as Kafka does.
	ErrUnknownRecord = errors.New("unknown __transaction_state record version")
	// ErrLoaded is a Replay after FinishLoad: records the Manager writes
	// itself are never replayed into it.
	ErrLoaded = errors.New("transaction state partition already loaded")
)

// completeRetryBackoffMs is how long after a failed CompleteCommit or
// CompleteAbort append Tick writes it again (Kafka puts it on the marker
// sender's retry queue, drained on its next poll).
const completeRetryBackoffMs = 100

// Config are the broker settings the state machine follows. Durations are
// milliseconds.
type Config struct {
	// MaxTimeoutMs is transaction.max.timeout.ms: InitProducerId with a
	// longer transaction timeout is refused.
	MaxTimeoutMs int64
	// IDExpirationMs is transactional.id.expiration.ms: an id with no
	// transaction in flight that was not updated for this long is removed.
	IDExpirationMs int64
	// AbortCheckIntervalMs is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms.
	AbortCheckIntervalMs int64
	// ExpireCheckIntervalMs is
	// transaction.remove.expired.transaction.cleanup.interval.ms.
	ExpireCheckIntervalMs int64
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{MaxTimeoutMs: 900000, IDExpirationMs: 7 * 24 * 3600 * 1000,
		AbortCheckIntervalMs: 10000, ExpireCheckIntervalMs: 3600000}
}

// Waiter is the caller's handle for a request the Manager answers: it
// comes back in the Reply. It must not be nil.
type Waiter any

// WriteToken identifies one append the caller must report with Written.
type WriteToken uint64

// Reply answers a request. ProducerID and ProducerEpoch are the answer of an
// InitProducerId (-1 on error) and -1 for other requests.
type Reply struct {
	Waiter        Waiter
	ErrorCode     int16
	ProducerID    int64
	ProducerEpoch int16
}

// MarkerJob asks the caller to write the transaction's COMMIT or ABORT
// marker to each partition (WriteTxnMarkers to their leaders, with
// CoordinatorEpoch), retrying until all are written, then to call
// MarkersWritten with the job. Kafka's TransactionMarkerChannelManager
// drops a partition whose topic no longer exists; the caller may too.
type MarkerJob struct {
	// ID tells this job from a later one of the same producer and epoch.
	ID               uint64
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
}

// Effects is what the caller must do after a call; see the package doc.
// Replies are sent at once. Records, when any, are appended as one batch
// and reported with Written(Token). Markers are marker jobs to start.
type Effects struct {
	Records []Record
	Token   WriteToken
	Replies []Reply
	Markers []MarkerJob
}

func (e *Effects) reply(w Waiter, code int16) {
	e.Replies = append(e.Replies, Reply{Waiter: w, ErrorCode: code, ProducerID: noProducerID, ProducerEpoch: noProducerEpoch})
}

// opKind is what a pending write does once committed.
type opKind uint8

const (
	opInit     opKind = iota // InitProducerId: answered with the producer id and epoch
	opAdd                    // AddPartitionsToTxn: answered OK
	opEnd                    // EndTxn: Prepare*; answered OK, then markers
	opFence                  // epoch fence: PrepareAbort with the bumped epoch, then abort markers
	opComplete               // Complete* after the markers
	opExpire                 // tombstone of an expired id
)

// transition is a pending change of one id (Kafka's TxnTransitMetadata):
// it becomes the id's metadata when its record is committed.
type transition struct {
	kind   opKind
	id     string
	target metadata
	waiter Waiter
	// created: the id was created by this InitProducerId and is dropped if
	// the write fails.
	created bool
}

// write is one append in flight.
type write struct {
	transitions []*transition
}

// Manager holds the transactional ids of one __transaction_state partition
// (Kafka's TransactionStateManager cache and TransactionCoordinator logic
// for it). See the package doc for its contract.
type Manager struct {
	cfg Config
	// coordinatorEpoch is the partition's leader epoch; markers carry it so
	// that partition leaders refuse a deposed coordinator's markers.
	coordinatorEpoch int32
	txns             map[string]*txnEntry
	writes           map[WriteToken]*write
	lastToken        WriteToken
	lastJob          uint64
	loading          bool
	unloaded         bool
	nextAbortCheck   int64
	nextExpireCheck  int64
}

// NewManager returns a Manager that is loading the partition: call Replay
// for each of its records, then FinishLoad.
func NewManager(cfg Config, coordinatorEpoch int32) *Manager {
	return &Manager{cfg: cfg, coordinatorEpoch: coordinatorEpoch, txns: map[string]*txnEntry{},
		writes: map[WriteToken]*write{}, loading: true}
}

// CoordinatorEpoch is the epoch the Manager was created with.
func (m *Manager) CoordinatorEpoch() int32 { return m.coordinatorEpoch }

func (m *Manager) sortedIDs() []string {
	out := make([]string, 0, len(m.txns))
	for id := range m.txns {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// refusal is the answer to every request before FinishLoad and after
// Unload (Kafka's getTransactionState errors).
func (m *Manager) refusal() int16 {
	switch {
	case m.unloaded:
		return kerr.NotCoordinator.Code
	case m.loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// AppendErrorCode maps the error of an append to __transaction_state to
// the code a client gets (Kafka's TransactionStateManager
// appendTransactionToLog): unavailable partitions and timeouts are
// retriable COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR,
// oversized batches UNKNOWN_SERVER_ERROR; others pass through.
func AppendErrorCode(code int16) int16 {
	switch code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
		return kerr.UnknownServerError.Code
	}
	return code
}

// allocErrorCode is the code of a failed producer id allocation: a Kafka
// error as is, anything else COORDINATOR_LOAD_IN_PROGRESS (retriable), as
// Kafka's RPCProducerIdManager answers while it waits for a block.
func allocErrorCode(err error) int16 {
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.CoordinatorLoadInProgress.Code
}

// write records tr as t's pending transition and adds its record to eff's
// append (one token per Effects).
func (m *Manager) write(eff *Effects, t *txnEntry, tr *transition) {
	tr.id = t.id
	t.pending = tr
	if eff.Token == 0 {
		m.lastToken++
		eff.Token = m.lastToken
		m.writes[eff.Token] = &write{}
	}
	w := m.writes[eff.Token]
	w.transitions = append(w.transitions, tr)
	var value []byte
	if tr.kind != opExpire {
		value = encodeValue(tr.target)
	}
	eff.Records = append(eff.Records, Record{Key: Key(t.id), Value: value})
}

// InitProducerIDRequest is an InitProducerId with a transactional id.
// ProducerID and ProducerEpoch are -1 unless the producer recovers its
// current id (KIP-360, v3+).
type InitProducerIDRequest struct {
	Waiter          Waiter
	TransactionalID string
	TimeoutMs       int32
	ProducerID      int64
	ProducerEpoch   int16
}

// InitProducerID handles an InitProducerId with a non-empty transactional id
// (Kafka's TransactionCoordinator.handleInitProducerId). alloc hands out a
// new producer id; it is called only for a new transactional id or when
// the epoch of the current producer id is exhausted. An alloc error that
// is a *kerr.Error answers its code, any other COORDINATOR_LOAD_IN_PROGRESS.
//
// A producer that finds its id's transaction Ongoing fences it: the epoch is
// bumped, the transaction aborted, and the request answered
// CONCURRENT_TRANSACTIONS once the abort is prepared, so that it retries
// and gets the next epoch when the abort completed.
func (m *Manager) InitProducerID(now int64, req InitProducerIDRequest, alloc func() (int64, error)) Effects {
	var eff Effects
	fail := func(code int16) Effects {
		eff.reply(req.Waiter, code)
		return eff
	}
	if code := m.refusal(); code != 0 {
		return fail(code)
	}
	noID, noEpoch := req.ProducerID == noProducerID, req.ProducerEpoch == noProducerEpoch
	if noID != noEpoch {
		return fail(kerr.InvalidRequest.Code) // KafkaApis: both or neither
	}
	if req.TimeoutMs <= 0 || int64(req.TimeoutMs) > m.cfg.MaxTimeoutMs {
		return fail(kerr.InvalidTransactionTimeout.Code)
	}
	t, created := m.txns[req.TransactionalID], false
	if t == nil {
		pid, err := alloc()
		if err != nil {
			return fail(allocErrorCode(err))
		}
		t = &txnEntry{id: req.TransactionalID, metadata: metadata{producerID: pid, lastProducerID: noProducerID,
			producerEpoch: noProducerEpoch, lastProducerEpoch: noProducerEpoch, nextProducerID: noProducerID, timeoutMs: req.TimeoutMs,
			state: Empty, partitions: map[TopicPartition]struct{}{}, startTimestamp: -1, lastUpdateTimestamp: now}}
		created = true
	}
	target, fence, code := prepareInit(now, t, req, !noID, alloc)
	if code != 0 {
		return fail(code)
	}
	if created {
		m.txns[t.id] = t
	}
	if fence {
		m.fence(&eff, now, t, req.Waiter)
		return eff
	}
	m.write(&eff, t, &transition{kind: opInit, target: target, waiter: req.Waiter, created: created})
	return eff
}

// prepareInit is Kafka's prepareInitProducerIdTransit: the metadata an
// InitProducerId leads to, or fence when the ongoing transaction must be
// aborted first, or an error code.
func prepareInit(now int64, t *txnEntry, req InitProducerIDRequest, expected bool, alloc func() (int64, error)) (target metadata, fence bool, code int16) {
	if t.busy() {
		return metadata{}, false, kerr.ConcurrentTransactions.Code
	}
	// KIP-360: a producer naming an id is fenced unless the id is new, is
	// the current one, or is the previous one whose epoch ran out (a retry
	// of the bump that rotated it).
	if expected && t.producerEpoch != noProducerEpoch && req.ProducerID != t.producerID &&
		(req.ProducerID != t.lastProducerID || !epochExhausted(req.ProducerEpoch)) {
		return metadata{}, false, kerr.ProducerFenced.Code
	}
	switch t.state {
	case PrepareCommit, PrepareAbort:
		return metadata{}, false, kerr.ConcurrentTransactions.Code
	case Ongoing:
		return metadata{}, true, 0
	case Empty, CompleteCommit, CompleteAbort:
	default:
		// Kafka throws IllegalStateException: never held by a loaded id.
		return metadata{}, false, kerr.InvalidTxnState.Code
	}
	target = t.metadata.clone()
	target.lastProducerID = t.producerID
	target.timeoutMs = req.TimeoutMs
	target.state = Empty
	target.partitions = map[TopicPartition]struct{}{}
	target.startTimestamp = -1
	target.lastUpdateTimestamp = now
	if epochExhausted(t.producerEpoch) && (!expected || req.ProducerEpoch == t.producerEpoch) {
		// Kafka's prepareProducerIdRotation.
		pid, err := alloc()
		if err != nil {
			return metadata{}, false, allocErrorCode(err)
		}
		target.producerID, target.producerEpoch, target.lastProducerEpoch = pid, 0, noProducerEpoch
		if expected {
			target.lastProducerEpoch = t.producerEpoch
		}
		return target, false, 0
	}
	// Kafka's prepareIncrementProducerEpoch. The bump cases cannot
	// overflow: an exhausted epoch with these expectations rotated above.
	switch {
	case !expected:
		target.producerEpoch, target.lastProducerEpoch = t.producerEpoch+1, noProducerEpoch
	case t.producerEpoch == noProducerEpoch || req.ProducerEpoch == t.producerEpoch:
		target.producerEpoch, target.lastProducerEpoch = t.producerEpoch+1, t.producerEpoch
	case req.ProducerEpoch == t.lastProducerEpoch:
		// A retry of a bump whose answer was lost: the same epoch again.
	default:
		return metadata{}, false, kerr.ProducerFenced.Code
	}
	return target, false, 0
}

// fence is Kafka's prepareFenceProducerEpoch followed by endTransaction
// (ABORT, not from the client): the epoch is bumped in memory at once, so
// the fenced producer's requests get PRODUCER_FENCED from now on, and
// PrepareAbort is written with it. After a fence whose write failed the
// epoch is not bumped again (hasFailedEpochFence). w, when not nil, is an
// InitProducerId answered CONCURRENT_TRANSACTIONS once the abort is
// prepared.
func (m *Manager) fence(eff *Effects, now int64, t *txnEntry, w Waiter) {
	if !t.failedEpochFence && t.producerEpoch < math.MaxInt16 {
		t.producerEpoch++
	}
	t.lastProducerEpoch = noProducerEpoch
	target := t.metadata.clone()
	target.state = PrepareAbort
	target.lastUpdateTimestamp = now
	if t.tv2 && t.producerEpoch < math.MaxInt16 {
		// Kafka's endTransaction under transaction version 2 bumps the
		// fenced epoch once more, so that the fenced producer's EndTxn
		// (one epoch behind the markers) cannot pass for a retry.
		target.producerEpoch, target.lastProducerEpoch = t.producerEpoch+1, t.producerEpoch
	}
	m.write(eff, t, &transition{kind: opFence, target: target, waiter: w})
}

// AddPartitionsRequest is an AddPartitionsToTxn for one transactional id,
// or the __consumer_offsets partition of an AddOffsetsToTxn's group.
type AddPartitionsRequest struct {
	Waiter          Waiter
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
	// TV2: the add is implicit, by the partition's leader on the
	// producer's first batch (a Produce v12+ or TxnOffsetCommit v5+ of a
	// transaction version 2 client, KIP-890 part 2).
	TV2 bool
}

// AddPartitions handles an AddPartitionsToTxn (Kafka's
// handleAddPartitionsToTransaction): one error code for all the partitions,
// as Kafka answers. PRODUCER_FENCED is for the handler to turn into
// INVALID_PRODUCER_EPOCH for versions that predate it.
func (m *Manager) AddPartitions(now int64, req AddPartitionsRequest) Effects {
	var eff Effects
	fail := func(code int16) Effects {
		eff.reply(req.Waiter, code)
		return eff
	}
	t, code := m.producerTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch)
	switch {
	case code != 0:
		return fail(code)
	case t.busy() || t.state == PrepareCommit || t.state == PrepareAbort:
		return fail(kerr.ConcurrentTransactions.Code)
	case t.state == Dead || t.state == PrepareEpochFence:
		return fail(kerr.InvalidTxnState.Code)
	case t.state == Ongoing && t.hasAll(req.Partitions):
		return fail(0) // nothing new to write
	}
	target := t.metadata.clone()
	if t.state != Ongoing {
		target.startTimestamp = now
	}
	target.state = Ongoing
	target.lastUpdateTimestamp = now
	target.tv2 = req.TV2
	for _, tp := range req.Partitions {
		target.partitions[tp] = struct{}{}
	}
	m.write(&eff, t, &transition{kind: opAdd, target: target, waiter: req.Waiter})
	return eff
}

// VerifyPartitions answers a broker that is about to append a producer's
// first transactional batch to partitions (KIP-890 part 1, an
// AddPartitionsToTxn with VerifyOnly; Kafka's
// handleVerifyPartitionsInTransaction): a code per partition of tps, in
// order. It writes nothing. The producer's checks come first, one code for
// all (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, the load refusals),
// then CONCURRENT_TRANSACTIONS while the transaction is being committed or
// aborted; otherwise each partition is 0 when it is in the transaction
// (its addition committed) and TRANSACTION_ABORTABLE when it is not. A
// pending write is not waited for: the broker's append checks its guard
// again (storage/txn_verify.go).
func (m *Manager) VerifyPartitions(transactionalID string, producerID int64, epoch int16, tps []TopicPartition) []int16 {
	codes := make([]int16, len(tps))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	t, code := m.producerTxn(transactionalID, producerID, epoch)
	switch {
	case code != 0:
		return all(code)
	case t.state == PrepareCommit || t.state == PrepareAbort:
		return all(kerr.ConcurrentTransactions.Code)
	}
	for i, tp := range tps {
		if _, ok := t.partitions[tp]; !ok {
			codes[i] = kerr.TransactionAbortable.Code
		}
	}
	return codes
}

// producerTxn is the transactional id's entry for a request of its
// producer, or the code a request gets first (Kafka's checks shared by
// AddPartitionsToTxn and EndTxn): loading or unloaded, an id this
// coordinator does not know or another producer's
// (INVALID_PRODUCER_ID_MAPPING), an older or newer epoch (PRODUCER_FENCED).
func (m *Manager) producerTxn(id string, producerID int64, epoch int16) (*txnEntry, int16) {
	if code := m.refusal(); code != 0 {
		return nil, code
	}
	t := m.txns[id]
	switch {
	case t != nil && t.rotating(producerID, epoch):
		return nil, kerr.ConcurrentTransactions.Code
	case t == nil || t.producerID != producerID:
		return nil, kerr.InvalidProducerIDMapping.Code
	case t.producerEpoch != epoch:
		return nil, kerr.ProducerFenced.Code
	}
	return t, 0
}

func (t *txnEntry) hasAll(tps []TopicPartition) bool {
	for _, tp := range tps {
		if _, ok := t.partitions[tp]; !ok {
			return false
		}
	}
	return true
}

// EndTxnRequest is an EndTxn.
type EndTxnRequest struct {
	Waiter          Waiter
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// TV2 is an EndTxn v5+, of a transaction version 2 client (KIP-890
	// part 2): the epoch is bumped by every transaction's end, and an
	// abort with no transaction open is allowed. Alloc hands out a new
	// producer id when the epoch runs out (as InitProducerID's).
	TV2   bool
	Alloc func() (int64, error)
}

// EndTxn handles an EndTxn (Kafka's handleEndTransaction, transaction
// version 1): an Ongoing transaction is prepared; once PrepareCommit or
// PrepareAbort is committed the client is answered and the markers start.
// A retry after the transaction completed with the same decision succeeds;
// while it is being completed, CONCURRENT_TRANSACTIONS.
func (m *Manager) EndTxn(now int64, req EndTxnRequest) Effects {
	if req.TV2 {
		return m.endTxnV2(now, req)
	}
	var eff Effects
	fail := func(code int16) Effects {
		eff.reply(req.Waiter, code)
		return eff
	}
	t, code := m.producerTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch)
	switch {
	case code != 0:
		return fail(code)
	case t.busy():
		return fail(kerr.ConcurrentTransactions.Code)
	}
	sameDecision := func(commitState State) int16 {
		if req.Commit == (commitState == CompleteCommit || commitState == PrepareCommit) {
			return 0
		}
		return kerr.InvalidTxnState.Code
	}
	switch t.state {
	case Ongoing:
		target := t.metadata.clone()
		target.state = PrepareAbort
		if req.Commit {
			target.state = PrepareCommit
		}
		target.lastUpdateTimestamp = now
		target.tv2 = false
		m.write(&eff, t, &transition{kind: opEnd, target: target, waiter: req.Waiter})
		return eff
	case CompleteCommit, CompleteAbort:
		return fail(sameDecision(t.state))
	case PrepareCommit, PrepareAbort:
		if code := sameDecision(t.state); code != 0 {
			return fail(code)
		}
		return fail(kerr.ConcurrentTransactions.Code)
	}
	// Empty: no transaction to end (transaction version 1).
	return fail(kerr.InvalidTxnState.Code)
}

// endTxnV2 is Kafka's endTransaction for transaction version 2 clients
// (KIP-890 part 2). Preparing the commit or abort bumps the epoch: the
// markers carry the new one, which is the producer's for its next
// transaction (the EndTxn answer), so a zombie's late batches of the old
// epoch are refused. A retry is an EndTxn one epoch behind the current
// (or, after a producer id rotation, the previous id at the last epoch):
// answered with the current producer id and epoch. Empty, CompleteCommit
// and CompleteAbort accept an abort of the current epoch (nothing open:
// the epoch is bumped all the same); CompleteCommit and CompleteAbort
// accept a retry of the same decision; anything else is
// INVALID_TXN_STATE, PRODUCER_FENCED for other epochs.
func (m *Manager) endTxnV2(now int64, req EndTxnRequest) Effects {
	var eff Effects
	fail := func(code int16) Effects {
		eff.reply(req.Waiter, code)
		return eff
	}
	if code := m.refusal(); code != 0 {
		return fail(code)
	}
	t := m.txns[req.TransactionalID]
	if t == nil {
		return fail(kerr.InvalidProducerIDMapping.Code)
	}
	retryOnOverflow := t.lastProducerID == req.ProducerID && req.ProducerEpoch == math.MaxInt16-1 && t.producerEpoch == 0
	retryOnBump := int32(t.producerEpoch) == int32(req.ProducerEpoch)+1
	var validEpoch bool
	switch t.state {
	case PrepareCommit, PrepareAbort:
		validEpoch = retryOnBump
	case CompleteCommit, CompleteAbort:
		validEpoch = retryOnBump || retryOnOverflow || req.ProducerEpoch == t.producerEpoch
	default:
		validEpoch = req.ProducerEpoch == t.producerEpoch
	}
	isRetry := retryOnBump || retryOnOverflow
	switch {
	case t.rotating(req.ProducerID, req.ProducerEpoch):
		return fail(kerr.ConcurrentTransactions.Code)
	case t.producerID != req.ProducerID && !retryOnOverflow:
		return fail(kerr.InvalidProducerIDMapping.Code)
	case !validEpoch:
		return fail(kerr.ProducerFenced.Code)
	case t.busy():
		return fail(kerr.ConcurrentTransactions.Code)
	}
	succeeded := func() Effects {
		eff.Replies = append(eff.Replies, Reply{Waiter: req.Waiter, ProducerID: t.producerID, ProducerEpoch: t.producerEpoch})
		return eff
	}
	switch t.state {
	case Ongoing:
		state := PrepareAbort
		if req.Commit {
			state = PrepareCommit
		}
		return m.prepareEndV2(now, t, req, state, false)
	case CompleteCommit:
		switch {
		case req.Commit && isRetry:
			return succeeded()
		case !req.Commit && !isRetry:
			return m.prepareEndV2(now, t, req, PrepareAbort, true)
		}
	case CompleteAbort:
		switch {
		case !req.Commit && isRetry:
			return succeeded()
		case !req.Commit:
			return m.prepareEndV2(now, t, req, PrepareAbort, true)
		}
	case PrepareCommit:
		if req.Commit {
			return fail(kerr.ConcurrentTransactions.Code)
		}
	case PrepareAbort:
		if !req.Commit {
			return fail(kerr.ConcurrentTransactions.Code)
		}
	case Empty:
		if !req.Commit {
			return m.prepareEndV2(now, t, req, PrepareAbort, true)
		}
	}
	return fail(kerr.InvalidTxnState.Code)
}

// prepareEndV2 is Kafka's prepareAbortOrCommit for transaction version 2:
// the epoch is bumped (a new producer id is allocated for the Complete
// record when this takes the epoch to its end), and a transaction that
// added nothing starts now.
func (m *Manager) prepareEndV2(now int64, t *txnEntry, req EndTxnRequest, state State, nothingAdded bool) Effects {
	var eff Effects
	next := noProducerID
	if epochExhausted(t.producerEpoch) {
		if req.Alloc == nil {
			eff.reply(req.Waiter, kerr.CoordinatorLoadInProgress.Code)
			return eff
		}
		pid, err := req.Alloc()
		if err != nil {
			eff.reply(req.Waiter, allocErrorCode(err))
			return eff
		}
		next = pid
	}
	target := t.metadata.clone()
	target.state = state
	target.producerEpoch, target.lastProducerEpoch = t.producerEpoch+1, t.producerEpoch
	if nothingAdded {
		target.startTimestamp = now
	}
	target.nextProducerID = next
	target.lastUpdateTimestamp = now
	target.tv2 = true
	m.write(&eff, t, &transition{kind: opEnd, target: target, waiter: req.Waiter})
	return eff
}

// rotating says that producerID at epoch is the id a transaction version 2
// EndTxn handed out when the epoch ran out, while the transaction it ended
// is still being completed: the producer already goes on with it, and its
// requests are answered CONCURRENT_TRANSACTIONS (retried) until the
// Complete record moves the transactional id to it.
func (md metadata) rotating(producerID int64, epoch int16) bool {
	return md.nextProducerID != noProducerID && producerID == md.nextProducerID && epoch == 0
}

// nextIdentity is the producer id and epoch a transaction version 2
// producer continues with once its prepared transaction completes: the
// next producer id at epoch 0 after a rotation, else the current ones.
func (md metadata) nextIdentity() (int64, int16) {
	if md.tv2 && md.nextProducerID != noProducerID {
		return md.nextProducerID, 0
	}
	return md.producerID, md.producerEpoch
}

// Written reports the outcome of the append of the Effects with token: err
// is 0 when the records are committed, or the append's Kafka error code.
// On success the transitions take effect and their requests are answered
// (an EndTxn's marker job starts); on failure they are undone and the
// requests answered with AppendErrorCode(err), except a failed Complete*
// write, which Tick retries. An unknown token (after Unload) is ignored.
func (m *Manager) Written(now int64, token WriteToken, err int16) Effects {
	var eff Effects
	w := m.writes[token]
	if w == nil {
		return eff
	}
	delete(m.writes, token)
	code := AppendErrorCode(err)
	for _, tr := range w.transitions {
		t := m.txns[tr.id]
		if t == nil || t.pending != tr {
			continue
		}
		t.pending = nil
		if code == 0 {
			m.commit(&eff, t, tr)
		} else {
			m.revert(&eff, now, t, tr, code)
		}
	}
	return eff
}

// commit is Kafka's completeTransitionTo and the callbacks that follow.
func (m *Manager) commit(eff *Effects, t *txnEntry, tr *transition) {
	if tr.kind == opExpire {
		delete(m.txns, t.id)
		return
	}
	t.metadata = tr.target
	switch tr.kind {
	case opInit:
		eff.Replies = append(eff.Replies, Reply{Waiter: tr.waiter, ProducerID: t.producerID, ProducerEpoch: t.producerEpoch})
	case opAdd:
		eff.reply(tr.waiter, 0)
	case opEnd, opFence:
		// The fence's bumped epoch is in the log now (Kafka clears
		// hasFailedEpochFence in prepareComplete).
		t.failedEpochFence = false
		switch {
		case tr.waiter == nil:
		case tr.kind == opFence:
			eff.reply(tr.waiter, kerr.ConcurrentTransactions.Code) // the InitProducerId retries
		case t.tv2:
			// EndTxn v5 answers the producer id and epoch of the
			// producer's next transaction.
			pid, epoch := t.nextIdentity()
			eff.Replies = append(eff.Replies, Reply{Waiter: tr.waiter, ProducerID: pid, ProducerEpoch: epoch})
		default:
			eff.reply(tr.waiter, 0)
		}
		eff.Markers = append(eff.Markers, m.startMarkers(t))
	}
}

// revert undoes a transition whose append failed (Kafka resets
// pendingState and answers the error).
func (m *Manager) revert(eff *Effects, now int64, t *txnEntry, tr *transition, code int16) {
	switch tr.kind {
	case opInit:
		if tr.created {
			delete(m.txns, t.id)
		}
		eff.reply(tr.waiter, code)
	case opAdd, opEnd:
		eff.reply(tr.waiter, code)
	case opFence:
		// The epoch stays bumped in memory: the fenced producer stays
		// fenced, and the next fence does not bump again.
		t.failedEpochFence = true
		if tr.waiter != nil {
			eff.reply(tr.waiter, code)
		}
	case opComplete:
		// Kafka retries COORDINATOR_NOT_AVAILABLE and gives up on a lost
		// leadership (the next coordinator completes it on load); retrying
		// every error is the same until the caller unloads.
		t.retryCompleteAt = now + completeRetryBackoffMs
	}
}

// startMarkers is the marker job of a prepared transaction (Kafka's
// addTxnMarkersToSend); t stays busy until MarkersWritten.
func (m *Manager) startMarkers(t *txnEntry) MarkerJob {
	m.lastJob++
	t.markerJob = m.lastJob
	return MarkerJob{ID: m.lastJob, TransactionalID: t.id, ProducerID: t.producerID, ProducerEpoch: t.producerEpoch,
		Commit: t.state == PrepareCommit, CoordinatorEpoch: m.coordinatorEpoch, Partitions: t.sortedPartitions()}
}

// MarkersWritten reports that every partition of job has its marker: the
// transaction's CompleteCommit or CompleteAbort record is written (Kafka's
// maybeWriteTxnCompletion), with no partitions and now as its last update.
// A job that is no longer current (after Unload) is ignored.
func (m *Manager) MarkersWritten(now int64, job MarkerJob) Effects {
	var eff Effects
	t := m.txns[job.TransactionalID]
	if m.unloaded || t == nil || job.ID == 0 || t.markerJob != job.ID {
		return eff
	}
	t.markerJob = 0
	m.writeComplete(&eff, now, t)
	return eff
}

// writeComplete is Kafka's prepareComplete.
func (m *Manager) writeComplete(eff *Effects, now int64, t *txnEntry) {
	target := t.metadata.clone()
	target.state = CompleteAbort
	if t.state == PrepareCommit {
		target.state = CompleteCommit
	}
	target.partitions = map[TopicPartition]struct{}{}
	target.lastUpdateTimestamp = now
	if pid, epoch := t.nextIdentity(); pid != t.producerID {
		// The epoch ran out: the producer continues under the new id
		// (its last epoch stays the one it saw, as in Kafka).
		target.lastProducerID, target.producerID, target.producerEpoch = t.producerID, pid, epoch
	}
	target.nextProducerID = noProducerID
	m.write(eff, t, &transition{kind: opComplete, target: target})
}

// Unload answers every request waiting for a write with NOT_COORDINATOR and
// forgets every id: this node no longer leads the partition. The Manager
// answers NOT_COORDINATOR to anything afterwards.
func (m *Manager) Unload() Effects {
	var eff Effects
	tokens := make([]WriteToken, 0, len(m.writes))
	for tok := range m.writes {
		tokens = append(tokens, tok)
	}
	slices.Sort(tokens)
	for _, tok := range tokens {
		for _, tr := range m.writes[tok].transitions {
			if tr.waiter != nil {
				eff.reply(tr.waiter, kerr.NotCoordinator.Code)
			}
		}
	}
	m.txns, m.writes = map[string]*txnEntry{}, map[WriteToken]*write{}
	m.unloaded, m.loading = true, false
	return eff
}
