package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Special timestamps of ListOffsets (Kafka's ListOffsetsRequest).
const (
	// LatestTimestamp (-1) asks for the log end offset.
	LatestTimestamp int64 = -1
	// EarliestTimestamp (-2) asks for the log start offset.
	EarliestTimestamp int64 = -2
	// MaxTimestamp (-3) asks for the record with the largest timestamp (KIP-734).
	MaxTimestamp int64 = -3
)

// OffsetAndTimestamp answers a ListOffsets lookup; Offset is -1 when no
// record matches (Kafka answers a timestamp past every record that way).
type OffsetAndTimestamp struct {
	Offset    int64
	Timestamp int64
	// LeaderEpoch is the epoch of the batch holding Offset, -1 if unknown.
	LeaderEpoch int32
}

// maxLookupDecompress bounds the decompression a timestamp lookup may do
// on one of our own (already validated) batches.
const maxLookupDecompress = 256 << 20

// OffsetForTimestamp answers ListOffsets: EarliestTimestamp gives the log
// start offset, LatestTimestamp the log end offset (the broker substitutes
// the high watermark or LSO for consumers), MaxTimestamp the record with the
// largest timestamp, and a real timestamp the first record whose timestamp is
// >= it. Lookups go through the time index, then the offset index, then a
// scan of at most index.interval.bytes of batch headers, then the records of
// one batch.
func (l *Log) OffsetForTimestamp(ts int64) (OffsetAndTimestamp, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	none := OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	if l.closed {
		return none, ErrLogClosed
	}
	switch {
	case ts == EarliestTimestamp:
		return OffsetAndTimestamp{Offset: l.logStartOffset, Timestamp: -1, LeaderEpoch: l.epochAt(l.logStartOffset)}, nil
	case ts == LatestTimestamp:
		leo := l.active().nextOffset
		return OffsetAndTimestamp{Offset: leo, Timestamp: -1, LeaderEpoch: l.epochAt(leo)}, nil
	case ts == MaxTimestamp:
		var best *segment
		for _, s := range l.segments {
			if s.maxTimestamp >= 0 && (best == nil || s.maxTimestamp > best.maxTimestamp) {
				best = s
			}
		}
		if best == nil {
			return none, nil
		}
		return l.firstRecordAtOrAfter(best, best.offsetOfMaxTimestamp, best.maxTimestamp)
	case ts < 0:
		return none, fmt.Errorf("list offsets %s: timestamp %d: %w", l.tp, ts, record.ErrInvalidRecord)
	}
	for _, s := range l.segments {
		if s.maxTimestamp < ts || s.nextOffset <= l.logStartOffset {
			continue
		}
		_, from := s.timeIndex.Lookup(ts)
		l.reportIndexFault(s)
		res, err := l.firstRecordAtOrAfter(s, max(from, l.logStartOffset), ts)
		if err != nil || res.Offset >= 0 {
			return res, err
		}
	}
	return none, nil
}

// firstRecordAtOrAfter scans s from the batch containing fromOffset for the
// first record with offset >= fromOffset and timestamp >= ts.
func (l *Log) firstRecordAtOrAfter(s *segment, fromOffset, ts int64) (OffsetAndTimestamp, error) {
	none := OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	head := make([]byte, record.HeaderSize)
	pos, h, err := s.translateOffset(fromOffset, head)
	for ; err == nil; h, err = s.headerAt(pos, head) {
		if h.MaxTimestamp >= ts && !h.IsControl() {
			batch := make([]byte, h.Size())
			if _, err := s.file.ReadAt(batch, pos); err != nil {
				return none, fmt.Errorf("list offsets %s: %w", l.tp, err)
			}
			records := record.RecordsBytes(batch)
			if c := h.Compression(); c != record.CompressionNone {
				if records, err = record.Decompress(c, nil, records, maxLookupDecompress); err != nil {
					return none, fmt.Errorf("list offsets %s: %w", l.tp, err)
				}
			}
			it := record.NewRecordIterator(h, records)
			var r record.Record
			for it.Next(&r) {
				if r.Offset >= fromOffset && r.Timestamp >= ts {
					return OffsetAndTimestamp{Offset: r.Offset, Timestamp: r.Timestamp, LeaderEpoch: h.PartitionLeaderEpoch}, nil
				}
			}
			if it.Err() != nil {
				return none, fmt.Errorf("list offsets %s: %w", l.tp, it.Err())
			}
		}
		pos += int64(h.Size())
	}
	if errors.Is(err, io.EOF) {
		return none, nil
	}
	return none, fmt.Errorf("list offsets %s: %w", l.tp, err)
}

// epochAt is the leader epoch in force at offset, from the epoch cache.
func (l *Log) epochAt(offset int64) int32 {
	epoch := int32(-1)
	for _, e := range l.epochs.Entries() {
		if e.StartOffset <= offset {
			epoch = e.Epoch
		}
	}
	return epoch
}

// TruncateTo discards every batch at or after offset (a follower dropping a
// divergent suffix, KIP-101). Truncation is by whole batches: a batch that
// contains offset is dropped entirely. The high watermark, recovery point
// and leader-epoch cache follow the new log end offset.
//
// An offset at or past the log end offset removes no batch, but the
// leader-epoch cache still drops the epochs starting at the log end, as
// Kafka's UnifiedLog.truncateTo does: a replica that became leader and
// recorded its epoch, then lost the leadership before appending anything,
// holds an epoch the new leader never had. Left in place, it would stay the
// epoch the follower names (LastFetchedEpoch), and the leader would answer
// every fetch with the same DivergingEpoch, never counting the follower's
// log end offset toward the ISR.
func (l *Log) TruncateTo(offset int64) (err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrLogClosed
	}
	if leo := l.active().nextOffset; offset >= leo {
		return l.epochs.TruncateFromEnd(leo)
	}
	if offset <= l.segments[0].baseOffset {
		return l.truncateFullyAndStartAtLocked(offset)
	}
	l.structureVersion++ // a cleaning pass may be reading these segments
	i := l.segmentFor(offset)
	for _, s := range l.segments[i+1:] {
		l.scheduleDelete(s)
	}
	l.segments = l.segments[:i+1]
	s := l.segments[i]
	removed, err := s.truncateTo(offset)
	if err != nil {
		return fmt.Errorf("truncate %s to %d: %w", l.tp, offset, err)
	}
	if err := s.index.Resize(l.cfg.SegmentIndexBytes); err != nil {
		return err
	}
	if err := s.timeIndex.Resize(l.cfg.SegmentIndexBytes); err != nil {
		return err
	}
	// The file shrank to its size, and with it went the blocks reserved
	// past it (or the segment was rolled and gave them back): reserve them
	// again for the appends to come, as a new segment does.
	if l.cfg.Preallocate {
		s.preallocate(l.cfg.SegmentBytes)
	}
	leo := s.nextOffset
	// The markers at or after leo are gone: so are their aborted entries.
	if err := s.txn.truncateTo(leo); err != nil {
		return fmt.Errorf("truncate %s to %d: %w", l.tp, offset, err)
	}
	// Kafka lowers the log start offset with a truncation below it
	// (UnifiedLog.truncateTo): a start above the end would make every read,
	// even at the log end, out of range.
	l.logStartOffset = min(l.logStartOffset, leo)
	l.highWatermark = min(l.highWatermark, leo)
	l.recoveryPoint = min(l.recoveryPoint, leo)
	l.durableOffset = min(l.durableOffset, leo)
	l.rollFlushTarget = min(l.rollFlushTarget, leo)
	l.logger.Info("truncated log", "to_offset", offset, "log_end_offset", leo, "bytes_removed", removed)
	if err := l.truncateProducerStateLocked(); err != nil {
		return fmt.Errorf("truncate %s to %d: %w", l.tp, offset, err)
	}
	return l.epochs.TruncateFromEnd(leo)
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset (a follower whose leader's log starts past its own end).
func (l *Log) TruncateFullyAndStartAt(offset int64) (err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrLogClosed
	}
	return l.truncateFullyAndStartAtLocked(offset)
}

func (l *Log) truncateFullyAndStartAtLocked(offset int64) error {
	l.structureVersion++
	// A segment at offset itself is closed before createSegment replaces
	// its files: closing an index trims its file by path, which afterwards
	// would cut the new index under its live mapping (SIGBUS on the next
	// index write).
	for _, old := range l.segments {
		if old.baseOffset == offset {
			if err := errors.Join(old.index.Close(), old.timeIndex.Close(), old.txn.close(), old.file.Close()); err != nil {
				return err
			}
		}
	}
	s, err := createSegment(l.path(), offset, l.cfg, l.now())
	if err != nil {
		return err
	}
	l.segmentsCreated++
	for _, old := range l.segments {
		if old.baseOffset != offset {
			l.scheduleDelete(old)
		}
	}
	l.segments = []*segment{s}
	l.logStartOffset, l.highWatermark, l.recoveryPoint, l.durableOffset = offset, offset, offset, offset
	l.rollFlushTarget = min(l.rollFlushTarget, offset)
	if err := l.clearProducerStateLocked(); err != nil {
		return err
	}
	if l.epochs != nil {
		return l.epochs.Clear()
	}
	return nil
}

// IncrementLogStartOffset moves the log start offset forward
// (DeleteRecords). It never moves backwards and never past the high
// watermark; whole segments below it are deleted by the next retention run.
func (l *Log) IncrementLogStartOffset(offset int64) (err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrLogClosed
	}
	if offset > l.highWatermark {
		return fmt.Errorf("delete records %s before %d: above the high watermark %d: %w", l.tp, offset, l.highWatermark, ErrOffsetOutOfRange)
	}
	if offset <= l.logStartOffset {
		return nil
	}
	l.logStartOffset = offset
	l.producerStateLogStartMovedLocked()
	l.epochs.TruncateFromStart(offset)
	return nil
}

// DeleteOldSegments applies retention: whole segments below the log start
// offset, older than retention.ms, or beyond retention.bytes, oldest first,
// never the active segment and never one holding offsets at or above the
// high watermark (Kafka only deletes what every replica has). It returns
// how many segments went. The files are renamed *.deleted and closed after
// file.delete.delay.ms.
func (l *Log) DeleteOldSegments() (_ int, err error) {
	defer l.guardIO(&err)
	if l.Offline() {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, nil
	}
	now := l.now()
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	n := 0
	for len(l.segments) > 1 {
		s, next := l.segments[0], l.segments[1]
		if next.baseOffset > l.highWatermark {
			break
		}
		byStart := next.baseOffset <= l.logStartOffset
		// cleanup.policy=compact alone keeps segments past retention.ms and
		// retention.bytes; compact,delete applies both (Kafka).
		byTime := !l.cfg.NoDelete && l.cfg.RetentionMs >= 0 && now.UnixMilli()-s.largestTimestamp() > l.cfg.RetentionMs
		bySize := !l.cfg.NoDelete && l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes
		if !byStart && !byTime && !bySize {
			break
		}
		reason := "log_start_offset"
		if byTime {
			reason = "retention.ms"
		} else if bySize {
			reason = "retention.bytes"
		}
		l.logger.Info("deleting segment", "base_offset", s.baseOffset, "bytes", s.size, "reason", reason)
		l.scheduleDelete(s)
		l.segments = l.segments[1:]
		total -= s.size
		n++
	}
	if n > 0 {
		l.logStartOffset = max(l.logStartOffset, l.segments[0].baseOffset)
		l.producerStateLogStartMovedLocked()
		l.epochs.TruncateFromStart(l.logStartOffset)
	}
	return n, l.reapDeletedLocked(now, false)
}

// scheduleDelete renames a segment's files to *.deleted and queues them to
// be closed and removed after file.delete.delay.ms. l.mu is held.
func (l *Log) scheduleDelete(s *segment) {
	if err := s.renameDeleted(); err != nil {
		l.logger.Error("renaming a deleted segment failed; removing it now", "segment", s.baseOffset, "error", err)
		if err := s.closeAndRemove(l.deleter); err != nil {
			l.logger.Error("removing a deleted segment failed", "segment", s.baseOffset, "error", err)
		}
		return
	}
	l.pendingDeletes = append(l.pendingDeletes, pendingDelete{seg: s, deadline: l.now().Add(time.Duration(l.cfg.FileDeleteDelayMs) * time.Millisecond)})
}

// reapDeletedLocked closes and removes deleted segments whose delay has
// passed (all of them with force). l.mu is held.
func (l *Log) reapDeletedLocked(now time.Time, force bool) error {
	var errs []error
	kept := l.pendingDeletes[:0]
	for _, p := range l.pendingDeletes {
		if !force && now.Before(p.deadline) {
			kept = append(kept, p)
			continue
		}
		if err := p.seg.closeAndRemove(l.deleter); err != nil {
			errs = append(errs, err)
		}
	}
	l.pendingDeletes = kept
	return errors.Join(errs...)
}

// Close flushes nothing (the caller decides: the log manager flushes before
// a clean shutdown), snapshots the idempotent producer state at the log end
// offset (so the next open scans nothing), trims the active segment's
// indexes, closes every file and removes segments pending deletion. Reads
// after Close fail. The log of an offline dir only closes its files.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var errs []error
	if l.Offline() {
		// Nothing more is written to a failed dir: no producer snapshot,
		// no index trimming, no deletions. The next start recovers it
		// as after a crash.
		for _, s := range l.segments {
			errs = append(errs, s.index.Discard(), s.timeIndex.Discard(), s.txn.close(), s.file.Close())
		}
	} else {
		l.takeProducerSnapshotLocked(l.active().nextOffset, true)
		errs = append(errs, l.reapDeletedLocked(l.now(), true))
		for _, s := range l.segments {
			errs = append(errs, s.close())
		}
	}
	l.mu.Unlock()
	// A background flush of rolled segments stops at its next look at
	// the log (its fsyncs of closed files fail harmlessly); nothing of
	// the log runs after Close returns.
	l.rollFlushes.Wait()
	if l.epochs != nil {
		errs = append(errs, l.epochs.Close())
	}
	return errors.Join(errs...)
}

// removeAll closes the log and removes its directory (the log manager
// renames the directory first, Kafka-style).
func (l *Log) removeAll(dir string) error {
	if err := l.Close(); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
