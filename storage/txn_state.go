package storage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/keelstream/keel/network/record"
)

// Transactions (KIP-98) in a partition's log, the transaction half of
// Kafka's ProducerStateManager and UnifiedLog:
//
//   - a transactional data batch of a producer with no open transaction
//     starts one at its base offset (producerEntry.txnFirstOffset);
//   - a control batch (a COMMIT or ABORT marker, written by the
//     transaction coordinator through WriteTxnMarkers) ends it: the
//     transaction is complete, and an aborted one gets an entry in the
//     aborted transaction index of the segment the marker lands in
//     (txn_index.go);
//   - the last stable offset (LSO), below which read_committed consumers
//     read, is the first offset of the oldest transaction that is still
//     open or whose marker is not yet below the high watermark, or the
//     high watermark when there is none.
//
// Every append updates this state the same way, a leader's and a
// follower's, so a follower that becomes leader has it. It is part of the
// producer snapshots (producer_snapshot.go) and rebuilt with the producer
// state on open and truncation.

// Errors of the transaction checks on a leader's appends. The broker maps
// them to the Kafka codes named (ErrorCode does too).
var (
	// ErrInvalidTxnState is a non-transactional batch from a producer whose
	// transaction in the partition is still open, or a transactional batch
	// that would open a transaction the coordinator did not confirm
	// (txn_verify.go): INVALID_TXN_STATE (48).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTransactionCoordinatorFenced is a transaction marker whose
	// coordinator epoch is older than one the partition already saw for
	// the producer (a zombie coordinator): TRANSACTION_COORDINATOR_FENCED (52).
	ErrTransactionCoordinatorFenced = errors.New("transaction coordinator epoch is older than the current one")
)

// endTxnMarker is a decoded control record: Kafka's EndTransactionMarker.
type endTxnMarker struct {
	typ              record.ControlType
	coordinatorEpoch int32
}

// maxControlBatchRecords bounds the decompression of a control batch: a
// marker is one record of a dozen bytes.
const maxControlBatchRecords = 64 << 10

// parseEndTxnMarker decodes the one record of a control batch. Anything but
// exactly one record with a 4-byte key (version >= 0, type ABORT or
// COMMIT) and an EndTxnMarker value (version >= 0, coordinator epoch) is
// an error wrapping record.ErrInvalidRecord (Kafka's ControlRecordType and
// EndTransactionMarker parsing: INVALID_RECORD).
func parseEndTxnMarker(batch []byte, h *record.BatchHeader) (endTxnMarker, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("control batch at offset %d: %s: %w", h.BaseOffset, fmt.Sprintf(format, args...), record.ErrInvalidRecord)
	}
	if h.RecordCount != 1 {
		return endTxnMarker{}, invalid("%d records, want 1", h.RecordCount)
	}
	if len(batch) < h.Size() || len(batch) < record.HeaderSize {
		return endTxnMarker{}, invalid("%d bytes of a %d-byte batch", len(batch), h.Size())
	}
	rs := record.RecordsBytes(batch[:h.Size()])
	if c := h.Compression(); c != record.CompressionNone {
		var err error
		if rs, err = record.Decompress(c, nil, rs, maxControlBatchRecords); err != nil {
			return endTxnMarker{}, fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	it := record.NewRecordIterator(*h, rs)
	var r, extra record.Record
	if !it.Next(&r) || it.Next(&extra) || it.Err() != nil {
		return endTxnMarker{}, invalid("record: %v", it.Err())
	}
	be := binary.BigEndian
	if len(r.Key) != 4 || int16(be.Uint16(r.Key)) < 0 {
		return endTxnMarker{}, invalid("control record key %x", r.Key)
	}
	typ := record.ControlType(be.Uint16(r.Key[2:]))
	if typ != record.ControlAbort && typ != record.ControlCommit {
		return endTxnMarker{}, invalid("control record type %d is no transaction marker", typ)
	}
	if len(r.Value) < 6 || int16(be.Uint16(r.Value)) < 0 {
		return endTxnMarker{}, invalid("transaction marker value %x", r.Value)
	}
	return endTxnMarker{typ: typ, coordinatorEpoch: int32(be.Uint32(r.Value[2:]))}, nil
}

// txnSpan is one transaction: its producer, first offset, and marker
// offset (lastOffset, -1 while open).
type txnSpan struct {
	producerID, firstOffset, lastOffset int64
}

// completedTxn is a transaction its marker just ended (Kafka's CompletedTxn).
type completedTxn struct {
	txnSpan
	aborted bool
	// lastStableOffset is the LSO just after the marker, ignoring the high
	// watermark: the first offset of the oldest other open transaction,
	// or the marker's offset + 1 (Kafka's
	// ProducerStateManager.lastStableOffset(CompletedTxn)).
	lastStableOffset int64
}

func (c completedTxn) abortedTxn() AbortedTxn {
	return AbortedTxn{ProducerID: c.producerID, FirstOffset: c.firstOffset, LastOffset: c.lastOffset, LastStableOffset: c.lastStableOffset}
}

// txnState orders a partition's unstable transactions for the LSO: Kafka's
// ongoingTxns and unreplicatedTxns. Guarded by the owning Log's mu.
type txnState struct {
	// ongoing are the open transactions, ascending first offset. A new one
	// starts at the log end offset, after every other, so starting is an
	// append; ending is a binary search and a shift of the few open ones.
	ongoing []txnSpan
	// unstable are the completed transactions whose marker is not yet
	// below the high watermark, in marker order: the high watermark
	// releases them from the front.
	unstable []txnSpan
	// unstableMin holds the entries of unstable that may become the one
	// with the smallest first offset as the front is released: first
	// offsets ascending, markers ascending (a monotonic queue), so the
	// minimum is unstableMin[0] and every change is O(1) amortised.
	unstableMin []txnSpan
	// releasedMarker is the largest marker offset a high watermark move
	// released from unstable (-1: none). A snapshot holds it: the
	// snapshot's unstable list is complete for any high watermark above
	// it (producer_snapshot.go).
	releasedMarker int64
}

func newTxnState() txnState { return txnState{releasedMarker: -1} }

// start records a transaction opened at firstOffset.
func (t *txnState) start(producerID, firstOffset int64) {
	s := txnSpan{producerID: producerID, firstOffset: firstOffset, lastOffset: -1}
	if n := len(t.ongoing); n == 0 || t.ongoing[n-1].firstOffset < firstOffset {
		t.ongoing = append(t.ongoing, s)
		return
	}
	i, _ := slices.BinarySearchFunc(t.ongoing, firstOffset, func(s txnSpan, off int64) int { return cmp.Compare(s.firstOffset, off) })
	t.ongoing = slices.Insert(t.ongoing, i, s)
}

// firstOngoingExcept is the first offset of the oldest open transaction
// of another producer than producerID, or -1.
func (t *txnState) firstOngoingExcept(producerID int64) int64 {
	for i := 0; i < len(t.ongoing) && i < 2; i++ {
		if t.ongoing[i].producerID != producerID {
			return t.ongoing[i].firstOffset
		}
	}
	return -1
}

// complete moves the open transaction starting at s.firstOffset to the
// unstable ones, ended by its marker at s.lastOffset.
func (t *txnState) complete(s txnSpan) {
	if i, ok := slices.BinarySearchFunc(t.ongoing, s.firstOffset, func(o txnSpan, off int64) int { return cmp.Compare(o.firstOffset, off) }); ok {
		t.ongoing = slices.Delete(t.ongoing, i, i+1)
	}
	t.pushUnstable(s)
}

// pushUnstable appends a completed transaction whose marker follows every
// other's.
func (t *txnState) pushUnstable(s txnSpan) {
	t.unstable = append(t.unstable, s)
	n := len(t.unstableMin)
	for n > 0 && t.unstableMin[n-1].firstOffset >= s.firstOffset {
		n--
	}
	t.unstableMin = append(t.unstableMin[:n], s)
}

// onHighWatermark releases the completed transactions whose marker is
// below hw: every replica has them, so they no longer hold the LSO
// (Kafka's removeUnreplicatedTransactions).
func (t *txnState) onHighWatermark(hw int64) {
	for len(t.unstable) > 0 && t.unstable[0].lastOffset < hw {
		s := t.unstable[0]
		t.unstable = t.unstable[1:]
		if len(t.unstableMin) > 0 && t.unstableMin[0].lastOffset == s.lastOffset {
			t.unstableMin = t.unstableMin[1:]
		}
		t.releasedMarker = max(t.releasedMarker, s.lastOffset)
	}
	if len(t.unstable) == 0 {
		t.unstable, t.unstableMin = nil, nil // release the arrays the fronts were cut from
	}
}

// firstUnstableOffset is the first offset of the oldest transaction still
// open or not yet below the high watermark (Kafka's
// ProducerStateManager.firstUnstableOffset).
func (t *txnState) firstUnstableOffset() (int64, bool) {
	first, ok := int64(-1), false
	if len(t.ongoing) > 0 {
		first, ok = t.ongoing[0].firstOffset, true
	}
	if len(t.unstableMin) > 0 && (!ok || t.unstableMin[0].firstOffset < first) {
		first, ok = t.unstableMin[0].firstOffset, true
	}
	return first, ok
}

func (t *txnState) empty() bool { return len(t.ongoing) == 0 && len(t.unstable) == 0 }

// rebuild replaces the state with the open transactions of m and the
// unstable ones given (in marker order).
func (t *txnState) rebuild(m producerStateMap, unstable []txnSpan, releasedMarker int64) {
	*t = txnState{releasedMarker: releasedMarker}
	for id, e := range m {
		if e.txnFirstOffset >= 0 {
			t.ongoing = append(t.ongoing, txnSpan{producerID: id, firstOffset: e.txnFirstOffset, lastOffset: -1})
		}
	}
	slices.SortFunc(t.ongoing, func(a, b txnSpan) int { return cmp.Compare(a.firstOffset, b.firstOffset) })
	for _, s := range unstable {
		t.pushUnstable(s)
	}
}

// LastStableOffset is the offset below which every transaction is decided
// and replicated (LSO, KIP-98): read_committed consumers read below it.
// It is the first offset of the oldest transaction that is open or whose
// marker is not yet below the high watermark, or the high watermark.
//
// An open transaction whose first offset the log start offset passed
// (retention, DeleteRecords) keeps holding the LSO, at the log start
// offset: as in Kafka (UnifiedLog.maybeIncrementFirstUnstableOffset), it
// is forgotten only when its marker arrives, and the LSO never goes below
// the log start offset.
//
// Concurrency: safe from any goroutine; it takes the log's lock shared.
func (l *Log) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastStableOffsetLocked()
}

func (l *Log) lastStableOffsetLocked() int64 {
	lso := l.highWatermark
	if first, ok := l.txns.firstUnstableOffset(); ok {
		lso = min(lso, max(first, l.logStartOffset))
	}
	return lso
}

// AbortedTransactions returns the aborted transactions a read_committed
// fetch from startOffset up to upperBound must filter: every entry of the
// aborted transaction index whose marker is at or after startOffset and
// whose first offset is below upperBound, ordered by first offset (Kafka's
// UnifiedLog.collectAbortedTransactions, which FetchResponse's
// AbortedTransactions carry). It reads no file: the entries are in memory.
// The result is nil when there is none.
//
// Concurrency: safe from any goroutine; it takes the log's lock shared.
func (l *Log) AbortedTransactions(startOffset, upperBound int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || startOffset >= upperBound {
		return nil
	}
	var out []AbortedTxn
	// An entry lives in its marker's segment, at or after the segment
	// holding its first offset: the segments before startOffset's hold
	// only markers below it, but later ones, past upperBound's, may hold
	// the marker of a transaction that started below upperBound.
scan:
	for _, s := range l.segments[l.segmentFor(startOffset):] {
		for _, e := range s.txn.entries {
			if e.LastOffset >= startOffset && e.FirstOffset < upperBound {
				out = append(out, e)
			}
			// Every transaction that started below upperBound was
			// decided when this marker was appended (Kafka's
			// TxnIndexSearchResult.isComplete): later markers end later
			// transactions.
			if e.LastStableOffset >= upperBound {
				break scan
			}
		}
	}
	slices.SortStableFunc(out, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out
}
