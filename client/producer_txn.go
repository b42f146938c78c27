package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the transactional producer (KIP-98), with the semantics and
// the error classification of Kafka's Java TransactionManager:
//
//   - NewProducer finds the transaction coordinator of transactional.id
//     (FindCoordinator type 1) and calls InitProducerId with the id, which
//     fences older producers with the same id (Java's initTransactions).
//   - BeginTransaction is local. Produce is refused outside a transaction.
//   - The sender holds a partition's batches back until AddPartitionsToTxn
//     accepted the partition; one goroutine sends those requests, with every
//     partition waiting at the time in one request. Batches carry the
//     transactional attribute.
//   - CommitTransaction flushes, then sends EndTxn(commit). AbortTransaction
//     fails what is buffered (ErrTransactionAborted), waits for what is in
//     flight, then sends EndTxn(abort).
//   - A failure inside a transaction makes it abortable: CommitTransaction,
//     Produce and SendOffsetsToTransaction return ErrTransactionAbortable
//     until AbortTransaction. Fencing and authorization failures are fatal:
//     every later call returns ErrProducerFatal.
//
// Transaction version 2 (KIP-890 part 2, Kafka 4.0) is used when the
// cluster's finalized transaction.version is 2 or more, as the Java client
// 4.0+ decides it: from the newest ApiVersions response, when the producer
// is created and again as each transaction ends (the transaction that is
// ending keeps the version it began with). Under it:
//
//   - No AddPartitionsToTxn or AddOffsetsToTxn is sent: a partition joins
//     the transaction with its first Produce (v12+), the group's offsets
//     partition with TxnOffsetCommit v5.
//   - EndTxn (v5) bumps the epoch, and its answer is the producer id and
//     epoch of the next transaction, whose sequences restart at 0. An abort
//     after a failed batch needs no InitProducerId of its own.
//   - A producer that moves from version 1 to version 2 bumps its epoch
//     with InitProducerId after the last version 1 transaction, as Java's
//     does.
//
// Under version 1 (transaction.version below 2, or a cluster that does not
// say) requests use the pre-KIP-890 versions (AddPartitionsToTxn, EndTxn,
// AddOffsetsToTxn and TxnOffsetCommit at most v3, Produce at most v11):
// the producer adds every partition explicitly and keeps its epoch across
// transactions.

// txnState is where a transactional producer is in Java's state machine.
type txnState int32

const (
	txnReady      txnState = iota // no transaction open
	txnInProgress                 // between BeginTransaction and its end
	txnCommitting                 // CommitTransaction is flushing or ending
	txnAborting                   // AbortTransaction is dropping, waiting or ending
	txnAbortable                  // a failure: only AbortTransaction may follow
	txnFatal                      // fenced or not authorized: only Close may follow
)

func (s txnState) String() string {
	switch s {
	case txnReady:
		return "no transaction open"
	case txnInProgress:
		return "transaction in progress"
	case txnCommitting:
		return "committing"
	case txnAborting:
		return "aborting"
	case txnAbortable:
		return "abortable"
	default:
		return "fatal"
	}
}

// Versions above these belong to KIP-890 (implicit partition adds, an
// epoch bump per transaction): transaction version 1 stays below them.
const (
	maxTxnRequestVersion  = 3 // AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
	maxInitProducerIDTxnV = 4
	maxTxnProduceVersion  = 11
)

// Transaction version 2's requests: EndTxn v5 answers the next producer id
// and epoch, TxnOffsetCommit v5 adds the offsets partition, and Produce
// v12 adds the batch's partition.
const (
	minTxnV2ProduceVersion = 12
	txnV2RequestVersion    = 5 // EndTxn, TxnOffsetCommit
	transactionVersionName = "transaction.version"
)

// txnManager is a Producer's transactional state.
//
// Concurrency: opMu serializes the transactional calls (Begin, Commit,
// Abort, SendOffsets, and the re-init after an abort) and is held across
// their requests. mu guards the fields below it and every change of state;
// state is also readable without mu (Produce and the sender check it per
// record and per pass). Lock order: never hold mu while taking a
// partitionState's mu, nor the other way round; opMu may be held while
// taking either.
type txnManager struct {
	p       *Producer
	id      string
	timeout time.Duration

	opMu sync.Mutex

	state atomic.Int32 // txnState
	// v2: transactions use transaction version 2. Changed only with opMu
	// held and no transaction open (NewProducer, afterEnd); the sender
	// reads it.
	v2 atomic.Bool
	// gen counts the transactions ended (finish): the sender fails the
	// buffered batches of the transaction it saw aborting, never those of
	// the next one, which AbortTransaction may have let begin meanwhile.
	gen atomic.Uint64
	mu  sync.Mutex
	err error // the abortable or fatal error
	// touched are the partitions queued for AddPartitionsToTxn in this
	// transaction; their flags are reset when it ends.
	touched []*partitionState
	// added: AddPartitionsToTxn or AddOffsetsToTxn succeeded in this
	// transaction; addSent: one was sent (its outcome may be unknown).
	// Either means the coordinator may hold an open transaction to end.
	added   bool
	addSent bool
	endSent bool // EndTxn(commit) was sent: only a commit may follow
	// The add goroutine: it runs while adding is set and closes addIdle
	// when it exits; addQueue is what it has yet to send.
	addQueue []*partitionState
	adding   bool
	addIdle  chan struct{}
	// txnCtx ends when the transaction starts to end (or the producer
	// closes): it stops the add goroutine's retries.
	txnCtx    context.Context
	txnCancel context.CancelFunc
}

func newTxnManager(p *Producer) *txnManager {
	return &txnManager{p: p, id: p.cfg.transactionalID, timeout: p.cfg.txnTimeout}
}

func (t *txnManager) current() txnState { return txnState(t.state.Load()) }

// failure is the abortable or fatal error, or nil.
func (t *txnManager) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.current() {
	case txnAbortable, txnFatal:
		return t.err
	}
	return nil
}

// checkProduce refuses records outside a transaction (Java's
// IllegalStateException) and in a failed one.
func (t *txnManager) checkProduce() error {
	switch s := t.current(); s {
	case txnInProgress:
		return nil
	case txnAbortable, txnFatal:
		if err := t.failure(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s", ErrTransactionState, s)
	case txnReady:
		return fmt.Errorf("%w: produce outside a transaction (call BeginTransaction first)", ErrTransactionState)
	default:
		return fmt.Errorf("%w: produce while the transaction is %s", ErrTransactionState, s)
	}
}

// blocked is the error the sender fails buffered batches with when it must
// not send them: the transaction is aborting, abortable or fatal. Else nil.
func (t *txnManager) blocked() error {
	switch t.current() {
	case txnAborting:
		return ErrTransactionAborted
	case txnAbortable, txnFatal:
		return t.failure()
	}
	return nil
}

// sending reports whether the sender may send (and retry) batches: the
// transaction is not aborting, abortable or fatal. It reads the state
// only, so it may be called under a partitionState's mu.
func (t *txnManager) sending() bool {
	switch t.current() {
	case txnAborting, txnAbortable, txnFatal:
		return false
	}
	return true
}

// isTxnFatalCode reports the codes after which Kafka's TransactionManager
// treats the producer as unusable: it was fenced by a newer instance
// (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH), may not use its id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or the coordinator and the
// producer disagree on its state (INVALID_PRODUCER_ID_MAPPING,
// INVALID_TXN_STATE).
func isTxnFatalCode(code int16) bool {
	switch code {
	case 47, 48, 49, 53, 90:
		return true
	}
	return false
}

// fatalError wraps a fatal cause so that errors.Is matches ErrProducerFatal
// and, for INVALID_PRODUCER_EPOCH, ErrProducerFenced (which it means for a
// transactional producer).
func fatalError(cause error) error {
	if errors.Is(cause, ErrInvalidProducerEpoch) {
		cause = fmt.Errorf("%w (%w)", ErrProducerFenced, cause)
	}
	return fmt.Errorf("%w: %w", ErrProducerFatal, cause)
}

func isFatalKafkaError(err error) bool {
	var ke *Error
	return errors.As(err, &ke) && isTxnFatalCode(ke.Code)
}

// fail records err against the transaction: a fatal code makes the producer
// unusable; anything else makes an open or committing transaction
// abortable (an aborting one is ending anyway). It returns the error the
// caller should report and wakes the sender, which then fails whatever is
// buffered.
func (t *txnManager) fail(err error) error {
	t.mu.Lock()
	s := t.current()
	switch {
	case s == txnFatal:
		err = t.err
	case isFatalKafkaError(err):
		t.err = fatalError(err)
		t.state.Store(int32(txnFatal))
		t.stopAddsLocked()
		err = t.err
	case s == txnInProgress || s == txnCommitting:
		t.err = fmt.Errorf("%w: %w", ErrTransactionAbortable, err)
		t.state.Store(int32(txnAbortable))
		t.stopAddsLocked()
		err = t.err
	case s == txnAbortable:
		err = t.err
	}
	t.mu.Unlock()
	t.p.wakeSender()
	return err
}

// stopAddsLocked ends the transaction's context, which stops the add
// goroutine's retries. t.mu is held.
func (t *txnManager) stopAddsLocked() {
	if t.txnCancel != nil {
		t.txnCancel()
	}
}

// batchFailed is told of every batch that completes with an error.
func (t *txnManager) batchFailed(err error) {
	switch t.current() {
	case txnInProgress, txnCommitting:
		t.fail(err)
	}
}

// request sends req to the transaction coordinator and returns the response
// once code (its error code, 0 if none) is not one that means "later":
// NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE (find the coordinator
// again), COORDINATOR_LOAD_IN_PROGRESS, and CONCURRENT_TRANSACTIONS (the
// previous transaction's markers are still being written; Java retries it
// after 20ms). Dead connections are retried likewise. It gives up only on
// another error or when ctx ends.
func (t *txnManager) request(ctx context.Context, req kmsg.Request, maxVersion int16, code func(kmsg.Response) int16) (kmsg.Response, error) {
	cl := t.p.cl
	capped := versionCapped{Request: req, max: maxVersion}
	name := kmsg.NameForKey(req.Key())
	var last error
	for attempt := 0; ; attempt++ {
		if last != nil {
			d := cl.backoffFor(attempt - 1)
			if errors.Is(last, ErrConcurrentTransactions) {
				d = min(d, 20*time.Millisecond)
			}
			if err := t.sleep(ctx, d); err != nil {
				return nil, fmt.Errorf("%s for transactional id %q: %w (last: %v)", name, t.id, err, last)
			}
		}
		node, err := cl.Coordinator(ctx, TxnCoordinator, t.id)
		if err != nil {
			if !IsRetriable(err) {
				return nil, fmt.Errorf("%s for transactional id %q: %w", name, t.id, err)
			}
			last = err
			continue
		}
		resp, err := cl.BrokerRequest(ctx, node, capped)
		if err != nil {
			cl.InvalidateCoordinator(TxnCoordinator, t.id)
			if !IsRetriable(err) || ctx.Err() != nil {
				return nil, fmt.Errorf("%s to transaction coordinator %d: %w", name, node, err)
			}
			last = err
			continue
		}
		switch c := code(resp); c {
		case 15, 16: // COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
			cl.InvalidateCoordinator(TxnCoordinator, t.id)
			last = codeError(c)
		case 14, 51: // COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS
			last = codeError(c)
		default:
			return resp, nil
		}
	}
}

// sleep waits d, or until ctx ends or the producer closes.
func (t *txnManager) sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.p.closed:
		return ErrClosed
	}
}

// versionCapped caps a request's version below kmsg's maximum.
type versionCapped struct {
	kmsg.Request
	max int16
}

func (r versionCapped) MaxVersion() int16 { return min(r.max, r.Request.MaxVersion()) }

// initProducerID is Java's initTransactions: InitProducerId with the
// transactional id and timeout. After a failed transaction it passes the
// current id and epoch (v3+, KIP-360) so the coordinator bumps the epoch,
// which resets every partition's sequence numbers. Fatal codes make the
// producer unusable. The caller holds opMu or is NewProducer.
func (t *txnManager) initProducerID(ctx context.Context) error {
	cur := t.p.currentID()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &t.id
	req.TransactionTimeoutMillis = int32(t.timeout / time.Millisecond)
	req.ProducerID, req.ProducerEpoch = cur.id, cur.epoch
	kresp, err := t.request(ctx, req, maxInitProducerIDTxnV, func(r kmsg.Response) int16 {
		return r.(*kmsg.InitProducerIDResponse).ErrorCode
	})
	if err != nil {
		err = fmt.Errorf("init transactions: %w", err)
		if isFatalKafkaError(err) {
			return t.fail(err)
		}
		return err
	}
	resp := kresp.(*kmsg.InitProducerIDResponse)
	if err := errorWithMessage(resp.ErrorCode, nil); err != nil {
		if isFatalKafkaError(err) {
			return t.fail(fmt.Errorf("init transactions: %w", err))
		}
		return fmt.Errorf("init transactions: %w", err)
	}
	t.p.idMu.Lock()
	t.p.id = producerID{id: resp.ProducerID, epoch: resp.ProducerEpoch}
	t.p.idMu.Unlock()
	t.p.needBump.Store(false)
	return nil
}

// BeginTransaction opens a transaction (Java's beginTransaction). It is
// local: the coordinator learns of the transaction with the first
// partition or offsets added to it. It fails with ErrTransactionState when
// a transaction is already open or the producer is not transactional, and
// with ErrProducerFatal after a fatal error.
//
// The transactional calls (BeginTransaction, CommitTransaction,
// AbortTransaction, SendOffsetsToTransaction) are safe for concurrent use
// but serialized; none may be called from a produce callback.
func (p *Producer) BeginTransaction() error {
	t, err := p.txnFor("begin transaction")
	if err != nil {
		return err
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	if p.closing.Load() {
		return fmt.Errorf("begin transaction: %w", ErrClosed)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := t.current(); s {
	case txnReady:
	case txnFatal:
		return fmt.Errorf("begin transaction: %w", t.err)
	default:
		return fmt.Errorf("begin transaction: %w: %s", ErrTransactionState, s)
	}
	t.txnCtx, t.txnCancel = context.WithCancel(p.ctx)
	t.state.Store(int32(txnInProgress))
	return nil
}

// CommitTransaction flushes every record produced in the transaction and
// commits it (EndTxn with commit). It blocks until the coordinator has
// accepted the commit or ctx ends.
//
// When a record of the transaction failed, or the offsets could not be
// added, it returns an error matching ErrTransactionAbortable and the
// caller must AbortTransaction. When ctx ends first it returns ctx's error
// and the transaction stays open for another CommitTransaction (or, if
// EndTxn was not sent yet, AbortTransaction). Fatal errors match
// ErrProducerFatal.
func (p *Producer) CommitTransaction(ctx context.Context) error {
	t, err := p.txnFor("commit transaction")
	if err != nil {
		return err
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	t.mu.Lock()
	switch s := t.current(); s {
	case txnInProgress:
		t.state.Store(int32(txnCommitting))
	case txnCommitting: // again after ctx ended
	case txnAbortable, txnFatal:
		err := t.err
		t.mu.Unlock()
		return fmt.Errorf("commit transaction: %w", err)
	default:
		t.mu.Unlock()
		return fmt.Errorf("commit transaction: %w: %s", ErrTransactionState, s)
	}
	endSent := t.endSent
	t.mu.Unlock()
	if !endSent {
		// Every Produce call that saw the transaction open has
		// buffered its record once the write lock is had.
		p.closeMu.Lock()
		p.closeMu.Unlock()
		if err := p.Flush(ctx); err != nil {
			return fmt.Errorf("commit transaction: %w", err)
		}
		if err := t.waitAddIdle(ctx); err != nil {
			return fmt.Errorf("commit transaction: %w", err)
		}
		if err := t.failure(); err != nil {
			return fmt.Errorf("commit transaction: %w", err)
		}
	}
	bumped, err := t.end(ctx, true)
	if err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	if err := t.afterEnd(ctx, bumped); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	t.finish()
	return nil
}

// AbortTransaction aborts the open transaction (EndTxn with abort): records
// still buffered fail with ErrTransactionAborted, records in flight are
// waited for, and a read_committed consumer will never see any record of
// the transaction. It is the way out of an abortable error. After a
// sequence error it also bumps the producer epoch (KIP-360). When ctx ends
// first it returns ctx's error and may be called again.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	t, err := p.txnFor("abort transaction")
	if err != nil {
		return err
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	return t.abort(ctx)
}

func (t *txnManager) abort(ctx context.Context) error {
	p := t.p
	t.mu.Lock()
	switch s := t.current(); {
	case s == txnInProgress || s == txnAbortable || s == txnAborting:
	case s == txnCommitting && !t.endSent:
	case s == txnFatal:
		t.mu.Unlock()
		return fmt.Errorf("abort transaction: %w", t.err)
	case s == txnCommitting:
		t.mu.Unlock()
		return fmt.Errorf("abort transaction: %w: the commit was sent; call CommitTransaction again", ErrTransactionState)
	default:
		t.mu.Unlock()
		return fmt.Errorf("abort transaction: %w: %s", ErrTransactionState, s)
	}
	t.state.Store(int32(txnAborting))
	t.stopAddsLocked() // no more AddPartitionsToTxn retries
	t.mu.Unlock()
	p.wakeSender()
	p.closeMu.Lock()
	p.closeMu.Unlock() // no Produce call is still buffering a record
	if err := p.Flush(ctx); err != nil {
		return fmt.Errorf("abort transaction: %w", err)
	}
	if err := t.waitAddIdle(ctx); err != nil {
		return fmt.Errorf("abort transaction: %w", err)
	}
	bumped, err := t.end(ctx, false)
	if err != nil {
		return fmt.Errorf("abort transaction: %w", err)
	}
	if err := t.afterEnd(ctx, bumped); err != nil {
		return fmt.Errorf("abort transaction: %w", err)
	}
	t.finish()
	return nil
}

// end sends EndTxn when the coordinator may hold an open transaction.
// bumped reports that the coordinator answered with a new producer id and
// epoch (transaction version 2), which the producer now uses.
func (t *txnManager) end(ctx context.Context, commit bool) (bumped bool, err error) {
	t.mu.Lock()
	t.stopAddsLocked()
	added, addSent := t.added, t.addSent
	if !added && !addSent {
		t.mu.Unlock()
		return false, nil // nothing reached the coordinator: nothing to end (as Java)
	}
	if commit {
		t.endSent = true
	}
	t.mu.Unlock()
	id := t.p.currentID()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = t.id
	req.ProducerID, req.ProducerEpoch = id.id, id.epoch
	req.Commit = commit
	kresp, err := t.request(ctx, req, t.endVersion(), func(r kmsg.Response) int16 {
		return r.(*kmsg.EndTxnResponse).ErrorCode
	})
	if err != nil {
		if isFatalKafkaError(err) {
			return false, t.fail(err)
		}
		return false, err // ctx or the client ended: the same end may be tried again
	}
	resp := kresp.(*kmsg.EndTxnResponse)
	code := resp.ErrorCode
	if code == 48 && !added {
		t.ended() // INVALID_TXN_STATE: our only add never reached it
		return false, nil
	}
	if err := errorWithMessage(code, nil); err != nil {
		err = fmt.Errorf("end transaction (commit=%v): %w", commit, err)
		if isFatalKafkaError(err) || commit {
			return false, t.fail(err)
		}
		return false, err
	}
	if req.GetVersion() >= txnV2RequestVersion && resp.ProducerID >= 0 {
		// Transaction version 2: the markers carry a bumped epoch and
		// the next transaction runs at it (or at a new id, epoch 0,
		// when the epoch ran out).
		t.p.idMu.Lock()
		t.p.id = producerID{id: resp.ProducerID, epoch: resp.ProducerEpoch}
		t.p.idMu.Unlock()
		bumped = true
	}
	t.ended()
	return bumped, nil
}

// ended notes that the coordinator has ended the transaction: were the
// commit or abort called again (afterEnd failed), no second EndTxn goes
// out.
func (t *txnManager) ended() {
	t.mu.Lock()
	t.added, t.addSent = false, false
	t.mu.Unlock()
}

// endVersion is the highest EndTxn and TxnOffsetCommit version the
// transaction's version allows: v5 under version 2, v3 under version 1.
func (t *txnManager) endVersion() int16 {
	if t.v2.Load() {
		return txnV2RequestVersion
	}
	return maxTxnRequestVersion
}

// afterEnd prepares the producer's identity for the next transaction once
// the coordinator has ended this one. It reads the cluster's transaction
// version again (Java's maybeUpdateTransactionV2Enabled), and bumps the
// epoch with InitProducerId when EndTxn did not but the next transaction
// needs it: a failed batch left a gap in a partition's sequence numbers
// (KIP-360), or the producer moves from transaction version 1 to 2.
func (t *txnManager) afterEnd(ctx context.Context, bumped bool) error {
	p := t.p
	next := p.cl.finalizedLevel(transactionVersionName) >= 2
	if bumped {
		p.needBump.Store(false)
	} else if p.needBump.Load() || (next && !t.v2.Load() && !p.closing.Load()) { // no move to make at Close
		if err := t.initProducerID(ctx); err != nil {
			return fmt.Errorf("bump epoch: %w", err) // called again, it tries again
		}
	}
	t.v2.Store(next)
	return nil
}

// finish returns to "no transaction open" after a commit or an abort.
func (t *txnManager) finish() {
	t.gen.Add(1) // before the state says ready: failBuffered checks it
	t.mu.Lock()
	touched := t.touched
	t.touched, t.addQueue = nil, nil
	t.added, t.addSent, t.endSent = false, false, false
	t.mu.Unlock()
	for _, ps := range touched {
		ps.mu.Lock()
		ps.txnAdded, ps.txnAdding = false, false
		ps.mu.Unlock()
	}
	t.mu.Lock()
	if t.current() != txnFatal {
		t.state.Store(int32(txnReady))
	}
	t.mu.Unlock()
}

// abortOnClose aborts an unfinished transaction when the producer closes,
// as Java's producer does on a graceful close.
func (t *txnManager) abortOnClose(ctx context.Context) error {
	t.opMu.Lock()
	defer t.opMu.Unlock()
	t.mu.Lock()
	s, endSent := t.current(), t.endSent
	t.mu.Unlock()
	if s == txnReady || s == txnFatal || (s == txnCommitting && endSent) {
		return nil // nothing open, or its outcome is the coordinator's now
	}
	return t.abort(ctx)
}

// txnFor returns the transactional state, or an error if the producer has
// none.
func (p *Producer) txnFor(op string) (*txnManager, error) {
	if p.txn == nil {
		return nil, fmt.Errorf("%s: %w: the producer has no TransactionalID", op, ErrTransactionState)
	}
	return p.txn, nil
}

// queueAdds hands partitions that have records but are not yet in the
// transaction to the add goroutine, starting it if it is not running. Only
// the sender calls it; it has marked the partitions txnAdding.
func (t *txnManager) queueAdds(parts []*partitionState) {
	t.mu.Lock()
	t.addQueue = append(t.addQueue, parts...)
	t.touched = append(t.touched, parts...)
	start := !t.adding
	ctx := t.txnCtx
	if start {
		t.adding = true
		t.addIdle = make(chan struct{})
	}
	t.mu.Unlock()
	if start {
		if ctx == nil {
			ctx = t.p.ctx
		}
		t.p.workers.Add(1)
		go t.addLoop(ctx)
	}
}

// join notes partitions that join the transaction with the Produce about
// to be sent (transaction version 2): the coordinator may then hold an open
// transaction, and finish resets their flags. Only the sender calls it.
func (t *txnManager) join(parts []*partitionState) {
	t.mu.Lock()
	t.touched = append(t.touched, parts...)
	t.addSent, t.added = true, true
	t.mu.Unlock()
}

// addLoop is the add goroutine: it sends AddPartitionsToTxn for everything
// queued, as one request, until the queue is empty. The Producer owns it
// (workers); it stops when the queue is empty or ctx (the transaction's)
// ends.
func (t *txnManager) addLoop(ctx context.Context) {
	defer t.p.workers.Done()
	for {
		t.mu.Lock()
		parts := t.addQueue
		t.addQueue = nil
		if len(parts) == 0 || ctx.Err() != nil {
			t.adding = false
			close(t.addIdle)
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		if err := t.addPartitions(ctx, parts); err != nil && ctx.Err() == nil {
			t.fail(err)
		}
		t.p.wakeSender()
	}
}

// waitAddIdle waits until the add goroutine is not running, so that no
// AddPartitionsToTxn can reach the coordinator after EndTxn.
func (t *txnManager) waitAddIdle(ctx context.Context) error {
	t.mu.Lock()
	adding, idle := t.adding, t.addIdle
	t.mu.Unlock()
	if !adding {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// addPartitions adds parts to the transaction, retrying the partitions the
// coordinator could not add yet, and marks each added one so the sender
// sends its batches.
func (t *txnManager) addPartitions(ctx context.Context, parts []*partitionState) error {
	pending := make(map[groupTP]*partitionState, len(parts))
	for _, ps := range parts {
		pending[groupTP{ps.topic, ps.partition}] = ps
	}
	var last error
	for attempt := 0; len(pending) > 0; attempt++ {
		if t.blocked() != nil {
			return nil // the transaction is ending or failed: its batches are dropped
		}
		if last != nil {
			if err := t.sleep(ctx, t.p.cl.backoffFor(attempt-1)); err != nil {
				return fmt.Errorf("add partitions to transaction: %w (last: %v)", err, last)
			}
		}
		id := t.p.currentID()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID = t.id
		req.ProducerID, req.ProducerEpoch = id.id, id.epoch
		byTopic := map[string]int{}
		for tp := range pending {
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(req.Topics)
				byTopic[tp.Topic] = i
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
		}
		t.mu.Lock()
		t.addSent = true
		t.mu.Unlock()
		kresp, err := t.request(ctx, req, maxTxnRequestVersion, addPartitionsRetryCode)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
		last = nil
		var added []*partitionState
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				tp := groupTP{rt.Topic, rp.Partition}
				ps := pending[tp]
				if ps == nil {
					continue
				}
				switch err := errorWithMessage(rp.ErrorCode, nil); {
				case err == nil:
					added = append(added, ps)
					delete(pending, tp)
				case rp.ErrorCode == 72: // OPERATION_NOT_ATTEMPTED: another partition failed
					last = cmpOr(last, err)
				case IsRetriable(err):
					last = err
				default:
					return fmt.Errorf("add %s-%d to transaction: %w", tp.Topic, tp.Partition, err)
				}
			}
		}
		if len(added) > 0 {
			t.mu.Lock()
			t.added = true
			t.mu.Unlock()
			for _, ps := range added {
				ps.mu.Lock()
				ps.txnAdded = true
				ps.mu.Unlock()
			}
			t.p.wakeSender()
		}
		if len(pending) > 0 && last == nil {
			last = fmt.Errorf("add partitions to transaction: %d partitions missing from the response", len(pending))
		}
	}
	return nil
}

// addPartitionsRetryCode is the first "later" code among the partitions.
func addPartitionsRetryCode(r kmsg.Response) int16 {
	for _, rt := range r.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, rp := range rt.Partitions {
			switch rp.ErrorCode {
			case 14, 15, 16, 51:
				return rp.ErrorCode
			}
		}
	}
	return 0
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// failBuffered fails every batch that is not in flight with err: the
// sender calls it while the transaction is aborting, abortable or fatal.
// A batch that was sent before (a retry) leaves a gap in its partition's
// sequence numbers, so the epoch is bumped when the transaction is aborted.
//
// gen is the transaction blocked() was about, read before it. Once that
// transaction has ended, the rest of the pass is left alone: an
// AbortTransaction that found nothing buffered returns without waiting
// for the sender, and the next transaction may have buffered records
// meanwhile. gen is read under each partition's mu, where Produce
// buffers, and finish moves it on before the state lets a new transaction
// begin: a batch of the next transaction is never in a partition
// failBuffered empties.
func (p *Producer) failBuffered(err error, gen uint64) {
	if hook := testHookFailBuffered.Load(); hook != nil {
		(*hook)()
	}
	var failed []*batch
	defer func() {
		for _, b := range failed {
			if b.seq >= 0 {
				p.needBump.Store(true)
			}
			b.complete(p, -1, -1, fmt.Errorf("produce to %s-%d: %w", b.ps.topic, b.ps.partition, err))
		}
	}()
	for _, ts := range *p.topics.Load() {
		for _, ps := range *ts.parts.Load() {
			ps.mu.Lock()
			if p.txn.gen.Load() != gen {
				ps.mu.Unlock()
				return // that transaction has ended
			}
			if ps.cur == nil && len(ps.queue) == 0 && len(ps.retries) == 0 {
				ps.mu.Unlock()
				continue
			}
			failed = append(failed, ps.queue...)
			ps.queue = nil
			if ps.cur != nil {
				failed = append(failed, ps.cur)
				ps.cur = nil
			}
			failed = append(failed, ps.retries...)
			ps.retries = ps.retries[:0]
			ps.mu.Unlock()
		}
	}
}

// testHookFailBuffered, when set (tests), runs as failBuffered starts.
var testHookFailBuffered atomic.Pointer[func()]
