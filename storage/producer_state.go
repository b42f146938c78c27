package storage

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Idempotent producer state (KIP-98), Kafka's ProducerStateManager: per
// producer id, the producer's epoch and its last five batches (first and
// last sequence, first and last offset, max timestamp). The Log owns it,
// as Kafka's UnifiedLog owns its ProducerStateManager:
//
//   - every append updates it, a leader's (AppendValidated, which first
//     checks the batches' sequences against it) and a follower's
//     (AppendAsFollower, no checks: the leader made them), so a follower
//     that becomes leader has the state already;
//   - a roll writes it to "<offset>.snapshot" (producer_snapshot.go), and
//     so does Close; opening the log loads the newest snapshot at or below
//     the log end offset and scans only the batch headers after it;
//   - a truncation deletes the snapshots above the new end and rebuilds the
//     state from the newest one left (plus a scan);
//   - when the log start offset moves (retention, DeleteRecords) producers
//     whose last batch is below it are forgotten, and so are the snapshots
//     below it;
//   - RemoveExpiredProducers drops producers idle for longer than
//     producer.id.expiration.ms (the broker calls it periodically).
//
// A leader's batch is
//
//   - a duplicate when a remembered batch of the same epoch has its exact
//     sequence range: AppendValidated appends nothing and answers with the
//     original offsets (AppendInfo.Duplicate);
//   - fenced (ErrInvalidProducerEpoch) when its epoch is older than the
//     producer's;
//   - out of order (ErrOutOfOrderSequence) when its first sequence does not
//     follow the last one (with a wrap from int32 max to 0), or when a new
//     epoch does not start at sequence 0.
//
// A producer the partition has no state for (new, expired, or whose
// batches were all deleted) may start at any sequence, as Kafka accepts
// since KIP-360 (2.5).

// Errors of the idempotent producer checks. The broker maps them to the
// Kafka codes named.
var (
	// ErrOutOfOrderSequence is a batch whose first sequence does not follow
	// the producer's last one, or a new epoch not starting at sequence 0:
	// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch is a batch of an epoch older than the
	// producer's current one (a fenced zombie): INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = errors.New("producer epoch is older than the current one")
)

// producerBatchesKept is Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN:
// how many of a producer's latest batches a retry may duplicate.
const producerBatchesKept = 5

// ProducerBatch is what a partition remembers of one appended batch of an
// idempotent producer.
type ProducerBatch struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	// MaxTimestamp is the batch's max timestamp: the broker's clock with
	// LogAppendTime (Kafka's BatchMetadata.timestamp).
	MaxTimestamp int64
	// LogAppendTime says MaxTimestamp is a LogAppendTime.
	LogAppendTime bool
}

// ProducerState describes one producer's state in a partition (Kafka's
// DescribeProducers reports the same).
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence, LastOffset and LastTimestamp are those of the
	// producer's newest batch; LastTimestamp drives expiry.
	LastSequence  int32
	LastOffset    int64
	LastTimestamp int64
	// Batches are the remembered batches, oldest first (at most five).
	Batches []ProducerBatch
	// CurrentTxnStartOffset is the first offset of the producer's open
	// transaction, -1 when none.
	CurrentTxnStartOffset int64
	// CoordinatorEpoch is the transaction coordinator epoch of the last
	// marker written for the producer, -1 when none.
	CoordinatorEpoch int32
}

// producerEntry is one producer's state in one partition.
type producerEntry struct {
	epoch int16
	// batches are oldest first, at most producerBatchesKept; none when a
	// transaction marker of a new epoch cleared them (or the producer's
	// only appends were markers).
	batches []ProducerBatch
	// txnFirstOffset is the first offset of the producer's open
	// transaction, -1 when none; coordinatorEpoch that of the last marker,
	// -1 when none (txn_state.go).
	txnFirstOffset   int64
	coordinatorEpoch int32
	// lastTimestamp is the max timestamp of the newest batch or marker
	// (producer.id.expiration.ms counts from it), lastOffset its last
	// offset (eviction when the log start offset passes it).
	lastTimestamp, lastOffset int64
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, batches: make([]ProducerBatch, 0, 1), txnFirstOffset: -1, coordinatorEpoch: -1, lastTimestamp: -1, lastOffset: -1}
}

func (e *producerEntry) last() *ProducerBatch {
	if len(e.batches) == 0 {
		return nil
	}
	return &e.batches[len(e.batches)-1]
}

func (e *producerEntry) lastSeq() int32 {
	if b := e.last(); b != nil {
		return b.LastSeq
	}
	return record.NoSequence
}

func (e *producerEntry) add(b ProducerBatch) {
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, b)
}

// producerStateMap is a partition's producers by id. It is guarded by the
// owning Log's mu (write lock for every change).
type producerStateMap map[int64]*producerEntry

// inSequence is Kafka's ProducerStateEntry/ProducerAppendInfo.inSequence.
func inSequence(last, next int32) bool {
	return next == last+1 || (next == 0 && last == math.MaxInt32)
}

// check validates every producer batch of a leader's record set against
// the state without changing it. It returns the first duplicate batch
// found (nothing must then be appended), or an error wrapping
// ErrOutOfOrderSequence, ErrInvalidProducerEpoch, ErrInvalidTxnState or
// ErrTransactionCoordinatorFenced. Framing, and the control records of
// transaction markers, were validated before (ValidateProduce).
func (m producerStateMap) check(batches []byte, fromCoordinator bool) (*ProducerBatch, error) {
	type view struct {
		epoch            int16
		last             int32
		inTxn            bool
		coordinatorEpoch int32
	}
	// pending is the state as the record set's earlier batches leave it.
	var pending map[int64]view
	for pos := 0; pos < len(batches); {
		h, err := record.ParseHeader(batches[pos:])
		if err != nil {
			return nil, err
		}
		batch := batches[pos : pos+h.Size()]
		pos += h.Size()
		if !h.HasProducerID() {
			continue
		}
		v, known := pending[h.ProducerID]
		e := m[h.ProducerID]
		if !known && e != nil {
			v, known = view{epoch: e.epoch, last: e.lastSeq(), inTxn: e.txnFirstOffset >= 0, coordinatorEpoch: e.coordinatorEpoch}, true
		}
		// pending is needed only for a later batch of the same record set:
		// a record set of one batch (nearly every produce) allocates none.
		last := pos == len(batches)
		if pending == nil && !last {
			pending = map[int64]view{}
		}
		if h.IsControl() {
			// Kafka's ProducerAppendInfo.appendEndTxnMarker checks.
			mk, err := parseEndTxnMarker(batch, &h)
			if err != nil {
				return nil, err
			}
			switch {
			case known && h.ProducerEpoch < v.epoch:
				return nil, fmt.Errorf("producer %d: marker epoch %d is older than the current %d: %w", h.ProducerID, h.ProducerEpoch, v.epoch, ErrInvalidProducerEpoch)
			case known && mk.coordinatorEpoch < v.coordinatorEpoch:
				return nil, fmt.Errorf("producer %d: marker coordinator epoch %d is older than %d: %w", h.ProducerID, mk.coordinatorEpoch, v.coordinatorEpoch, ErrTransactionCoordinatorFenced)
			}
			next := view{epoch: h.ProducerEpoch, last: record.NoSequence, coordinatorEpoch: mk.coordinatorEpoch}
			if known && h.ProducerEpoch == v.epoch {
				next.last = v.last
			}
			if !last {
				pending[h.ProducerID] = next
			}
			continue
		}
		if fromCoordinator {
			// Kafka checks a coordinator's batch for its epoch only.
			if known && h.ProducerEpoch < v.epoch {
				return nil, fmt.Errorf("producer %d epoch %d is older than the current %d: %w", h.ProducerID, h.ProducerEpoch, v.epoch, ErrInvalidProducerEpoch)
			}
			if !last {
				next := view{epoch: h.ProducerEpoch, last: h.LastSequence(), inTxn: v.inTxn || h.IsTransactional(), coordinatorEpoch: -1}
				if known {
					next.coordinatorEpoch = v.coordinatorEpoch
				}
				pending[h.ProducerID] = next
			}
			continue
		}
		if e != nil && h.ProducerEpoch == e.epoch {
			for i := range e.batches {
				if b := &e.batches[i]; b.FirstSeq == h.BaseSequence && b.LastSeq == h.LastSequence() {
					dup := *b
					return &dup, nil
				}
			}
		}
		switch {
		case known && h.ProducerEpoch < v.epoch:
			return nil, fmt.Errorf("producer %d epoch %d is older than the current %d: %w", h.ProducerID, h.ProducerEpoch, v.epoch, ErrInvalidProducerEpoch)
		case known && v.inTxn && !h.IsTransactional():
			// Kafka's appendDataBatch: a transaction, once started, ends
			// only with its marker.
			return nil, fmt.Errorf("producer %d: non-transactional batch while its transaction is open: %w", h.ProducerID, ErrInvalidTxnState)
		case known && h.ProducerEpoch > v.epoch:
			if h.BaseSequence != 0 {
				return nil, fmt.Errorf("producer %d: the new epoch %d starts at sequence %d, not 0: %w", h.ProducerID, h.ProducerEpoch, h.BaseSequence, ErrOutOfOrderSequence)
			}
		case known && v.last == record.NoSequence && h.BaseSequence != 0:
			// A producer whose batches a marker of a new epoch cleared
			// starts that epoch at sequence 0 (Kafka's checkSequence);
			// only a producer the partition does not know may start
			// anywhere.
			return nil, fmt.Errorf("producer %d: epoch %d starts at sequence %d, not 0: %w", h.ProducerID, h.ProducerEpoch, h.BaseSequence, ErrOutOfOrderSequence)
		case known && v.last != record.NoSequence && !inSequence(v.last, h.BaseSequence):
			return nil, fmt.Errorf("producer %d: sequence %d after %d: %w", h.ProducerID, h.BaseSequence, v.last, ErrOutOfOrderSequence)
		}
		next := view{epoch: h.ProducerEpoch, last: h.LastSequence(), inTxn: v.inTxn || h.IsTransactional(), coordinatorEpoch: -1}
		if known {
			next.coordinatorEpoch = v.coordinatorEpoch
		}
		if !last {
			pending[h.ProducerID] = next
		}
	}
	return nil, nil
}

// apply adds one appended batch (with its final offsets; batch holds at
// least its header, and all of it for a control batch) to the state, the
// same on a leader, a follower and a rebuild, and returns the transaction
// a marker completed, if any. A data batch of a new epoch replaces the
// producer's batches (Kafka's ProducerAppendInfo on an epoch bump); a
// transactional one opens a transaction unless one is open. A marker of a
// newer epoch takes the producer to it and clears its batches; it ends the
// open transaction (Kafka emits no CompletedTxn for a marker without one,
// nor do we). A marker whose control record cannot be read (only a
// follower's or a rebuild's: a leader validated it) changes nothing and
// is returned as an error.
func (m producerStateMap) apply(t *txnState, h *record.BatchHeader, batch []byte) (completedTxn, bool, error) {
	if !h.HasProducerID() {
		return completedTxn{}, false, nil
	}
	e := m[h.ProducerID]
	if h.IsControl() {
		mk, err := parseEndTxnMarker(batch, h)
		if err != nil {
			return completedTxn{}, false, err
		}
		if e == nil {
			e = newProducerEntry(h.ProducerEpoch)
			m[h.ProducerID] = e
		} else if h.ProducerEpoch > e.epoch {
			e.epoch, e.batches = h.ProducerEpoch, make([]ProducerBatch, 0, 1)
		}
		var c completedTxn
		ok := e.txnFirstOffset >= 0
		if ok {
			c = completedTxn{
				txnSpan: txnSpan{producerID: h.ProducerID, firstOffset: e.txnFirstOffset, lastOffset: h.LastOffset()},
				aborted: mk.typ == record.ControlAbort, lastStableOffset: h.LastOffset() + 1,
			}
			if first := t.firstOngoingExcept(h.ProducerID); first >= 0 {
				c.lastStableOffset = first
			}
			t.complete(c.txnSpan)
		}
		e.txnFirstOffset = -1
		e.coordinatorEpoch = mk.coordinatorEpoch
		e.lastTimestamp, e.lastOffset = h.MaxTimestamp, h.LastOffset()
		return c, ok, nil
	}
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		m[h.ProducerID] = e
	} else if h.ProducerEpoch != e.epoch {
		e.epoch, e.batches = h.ProducerEpoch, make([]ProducerBatch, 0, 1)
	}
	e.add(ProducerBatch{
		FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(),
		FirstOffset: h.BaseOffset, LastOffset: h.LastOffset(),
		MaxTimestamp: h.MaxTimestamp, LogAppendTime: h.TimestampType() == record.LogAppendTime,
	})
	e.lastTimestamp, e.lastOffset = h.MaxTimestamp, h.LastOffset()
	if h.IsTransactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = h.BaseOffset
		t.start(h.ProducerID, h.BaseOffset)
	}
	return completedTxn{}, false, nil
}

// updateProducerStateLocked records the producer batches and transaction
// markers of a record set just appended to the active segment (with its
// final offsets and timestamps): every append's, a leader's or a
// follower's. An aborted transaction gets its entry in the active
// segment's transaction index, where its marker now is. l.mu is held.
func (l *Log) updateProducerStateLocked(batches []byte) error {
	for pos := 0; pos < len(batches); {
		h, err := record.ParseHeader(batches[pos:])
		if err != nil {
			return nil
		}
		batch := batches[pos : pos+h.Size()]
		pos += h.Size()
		l.dropTxnGuardsLocked(&h)
		c, ok, err := l.producers.apply(&l.txns, &h, batch)
		if err != nil {
			l.logger.Warn("ignoring a transaction marker whose control record cannot be read", "offset", h.BaseOffset, "error", err)
			continue
		}
		if ok && c.aborted {
			if err := l.active().txn.append(c.abortedTxn()); err != nil {
				return fmt.Errorf("append to %s: %w", l.tp, err)
			}
		}
	}
	return nil
}

// evictBefore forgets the producers whose newest batch lies below
// logStartOffset (Kafka's ProducerStateManager.evictUnretainedProducers):
// their batches are gone, so a retry could not be answered anyway.
//
// A producer with an open transaction stays whatever its offsets: its
// transaction holds the LSO until its marker comes, as in Kafka.
func (m producerStateMap) evictBefore(logStartOffset int64) int {
	n := 0
	for id, e := range m {
		if e.txnFirstOffset < 0 && e.lastOffset < logStartOffset {
			delete(m, id)
			n++
		}
	}
	return n
}

// RemoveExpiredProducers forgets every producer without an open
// transaction whose newest batch's (or transaction marker's) timestamp is
// at least expiration older than now (Kafka's
// producer.id.expiration.ms and ProducerStateManager.removeExpiredProducers,
// which also counts from the batch's max timestamp). A later batch of such a
// producer is taken as a new producer's and may carry any sequence. It
// returns how many producers were removed.
//
// Concurrency: safe from any goroutine; it takes the log's lock for the
// sweep (O(producers of this partition)).
func (l *Log) RemoveExpiredProducers(now time.Time, expiration time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0
	}
	cutoff := now.UnixMilli() - expiration.Milliseconds()
	n := 0
	for id, e := range l.producers {
		// An open transaction is never expired (Kafka's isProducerExpired):
		// the transaction coordinator ends it, with a marker, after
		// transaction.timeout.ms.
		if e.txnFirstOffset < 0 && e.lastTimestamp <= cutoff {
			delete(l.producers, id)
			n++
		}
	}
	if n > 0 {
		l.logger.Debug("expired idle producers", "producers", n, "remaining", len(l.producers))
	}
	l.expireTxnGuardsLocked(cutoff)
	return n
}

// ActiveProducers returns the partition's idempotent producer state,
// sorted by producer id (a copy: the caller may keep it).
//
// Concurrency: safe from any goroutine; it takes the log's lock shared.
func (l *Log) ActiveProducers() []ProducerState {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.describe()
}

// describe lists the state, sorted by producer id, as copies.
func (m producerStateMap) describe() []ProducerState {
	out := make([]ProducerState, 0, len(m))
	for id, e := range m {
		out = append(out, ProducerState{
			ProducerID: id, ProducerEpoch: e.epoch,
			LastSequence: e.lastSeq(), LastOffset: e.lastOffset, LastTimestamp: e.lastTimestamp,
			Batches:               slices.Clone(e.batches),
			CurrentTxnStartOffset: e.txnFirstOffset, CoordinatorEpoch: e.coordinatorEpoch,
		})
	}
	slices.SortFunc(out, func(a, b ProducerState) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// scanProducerBatchesLocked applies to m and t the batches of the log from
// the batch containing from up to (excluding) to, reading only the headers
// (in 64 KiB reads, so that small batches cost no syscall each) and the
// whole of the control batches (transaction markers, a few dozen bytes).
// With rebuildTxnIndex, an aborted transaction whose marker lies in a
// segment whose transaction index recovery discarded (segment.txnRebuild)
// gets its entry there again. It returns how many batches it read. A
// segment it cannot read to the end is reported in the error, the
// producers whose newest batch may lie in its unread part are forgotten
// (but for those with an open transaction, which its marker ends), and
// the scan goes on with the next segment, so that the newest producers are
// known even then. l.mu is held (or the log is being opened).
func (l *Log) scanProducerBatchesLocked(m producerStateMap, t *txnState, from, to int64, rebuildTxnIndex bool) (int, error) {
	if from >= to {
		return 0, nil
	}
	r := headerReader{buf: make([]byte, scanChunkBytes)}
	n := 0
	var errs []error
	for i := l.segmentFor(from); i < len(l.segments); i++ {
		s := l.segments[i]
		if s.baseOffset >= to {
			break
		}
		r.reset(s)
		var pos int64
		var h record.BatchHeader
		var err error
		if s.baseOffset < from {
			pos, h, err = s.translateOffset(from, r.buf[:record.HeaderSize])
			r.reset(s) // translateOffset used the buffer
		} else {
			h, err = r.at(0)
		}
		for ; err == nil; h, err = r.at(pos) {
			if h.BaseOffset >= to {
				return n, errors.Join(errs...)
			}
			var batch []byte
			if h.IsControl() && h.HasProducerID() {
				if batch, err = r.batch(pos, h.Size()); err != nil {
					break
				}
			}
			c, ok, aerr := m.apply(t, &h, batch)
			if aerr != nil {
				l.logger.Warn("ignoring a transaction marker whose control record cannot be read", "segment", s.baseOffset, "offset", h.BaseOffset, "error", aerr)
			}
			if ok && c.aborted && rebuildTxnIndex && s.txnRebuild {
				if err = s.txn.append(c.abortedTxn()); err != nil {
					break
				}
			}
			n++
			pos += int64(h.Size())
		}
		if !errors.Is(err, io.EOF) {
			errs = append(errs, fmt.Errorf("rebuild producer state of %s from segment %d: %w", l.tp, s.baseOffset, err))
			// The unread rest of the segment may hold newer batches of any
			// producer known so far: forget them all rather than keep a
			// stale last sequence that would refuse their next batch.
			m.evictBefore(s.nextOffset)
		}
	}
	return n, errors.Join(errs...)
}

// scanChunkBytes is how much of a segment one read of a header scan takes.
const scanChunkBytes = 64 << 10

// headerReader reads the batch headers of one segment through a buffer: a
// header inside the last chunk read costs no syscall. After a large batch
// it reads the next header alone, as headerAt does, rather than a chunk of
// records it would skip. Same contract as segment.headerAt.
type headerReader struct {
	s     *segment
	buf   []byte
	start int64 // file position of buf[0]
	n     int   // valid bytes in buf
	large bool  // the last header read was of a batch over scanChunkBytes/16
}

func (r *headerReader) reset(s *segment) { r.s, r.start, r.n, r.large = s, 0, 0, false }

// batch returns the size bytes of the batch at pos: from the buffer when
// the last chunk read holds them, else read on their own. The slice is
// valid until the next call.
func (r *headerReader) batch(pos int64, size int) ([]byte, error) {
	if pos >= r.start && pos+int64(size) <= r.start+int64(r.n) {
		off := pos - r.start
		return r.buf[off : off+int64(size)], nil
	}
	if pos+int64(size) > r.s.size {
		return nil, fmt.Errorf("segment %s: batch at %d runs past the end: %w", r.s.logPath(), pos, record.ErrCorruptMessage)
	}
	b := make([]byte, size)
	if _, err := r.s.file.ReadAt(b, pos); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", r.s.logPath(), pos, err)
	}
	return b, nil
}

func (r *headerReader) at(pos int64) (record.BatchHeader, error) {
	s := r.s
	if pos+record.HeaderSize > s.size {
		return s.headerAt(pos, r.buf[:record.HeaderSize]) // io.EOF or a partial header
	}
	if pos < r.start || pos+record.HeaderSize > r.start+int64(r.n) {
		want := min(int64(len(r.buf)), s.size-pos)
		if r.large {
			want = record.HeaderSize
		}
		n, err := s.file.ReadAt(r.buf[:want], pos)
		if int64(n) < record.HeaderSize {
			r.n = 0
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return record.BatchHeader{}, fmt.Errorf("read %s at %d: %w", s.logPath(), pos, err)
		}
		r.start, r.n = pos, n
	}
	off := pos - r.start
	h, err := record.ParseHeader(r.buf[off : off+record.HeaderSize])
	if err != nil {
		return h, fmt.Errorf("segment %s at %d: %w", s.logPath(), pos, err)
	}
	r.large = h.Size() > scanChunkBytes/16
	return h, nil
}

// duplicateAppendInfo is AppendValidated's answer to a retried batch.
func duplicateAppendInfo(dup *ProducerBatch, logStartOffset int64) AppendInfo {
	info := AppendInfo{
		FirstOffset: dup.FirstOffset, LastOffset: dup.LastOffset,
		MaxTimestamp: dup.MaxTimestamp, MinTimestamp: -1, LogAppendTime: -1,
		LogStartOffset: logStartOffset, Duplicate: true,
	}
	if dup.LogAppendTime {
		info.LogAppendTime = dup.MaxTimestamp
	}
	return info
}
