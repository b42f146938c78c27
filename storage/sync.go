package storage

import (
	"errors"
	"fmt"
	"slices"
)

// Durable reports the durable mode: flush.messages=1, every message
// fsynced before it is acknowledged. The broker then appends with
// AppendOptions.DeferFlush and group-commits with Sync.
func (c LogConfig) Durable() bool { return c.FlushMessages == 1 }

// Sync makes everything appended so far durable: it fsyncs the segment
// files (and the directory, when a segment was created) and raises
// DurableOffset to where it started. It does not hold the log's lock during
// the fsyncs, so appends and reads go on meanwhile, and whatever they
// append is covered by the next Sync (group commit: one fsync acknowledges
// every producer that appended before it started). It returns at once when
// everything is durable already.
//
// Unlike Flush it leaves the indexes, the producer state snapshots and the
// recovery point alone: a restart after a crash recovers the records past
// the recovery point from the segment files, which Sync made durable, and
// rebuilds their indexes. Flushing the two mmap'd indexes too would cost
// two more writes to the disk per Sync, which measured as twice the fsync
// latency on a disk shared by busy logs.
//
// Concurrency: safe from any goroutine; concurrent Syncs run one after the
// other, and a Sync that finds the work done by the previous one returns
// without an fsync.
func (l *Log) Sync() (err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	for attempt := 0; ; attempt++ {
		again, err := l.syncOnce()
		if !again || attempt == maxRollFlushRetries {
			return err
		}
	}
}

// syncOnce is one Sync pass; again reports that a truncation or compaction
// swap changed the segments during its fsyncs, so what it synced may not
// be what the log holds: a truncated suffix appended again is not covered.
// syncMu is held.
func (l *Log) syncOnce() (again bool, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return false, ErrLogClosed
	}
	end, durable := l.active().nextOffset, l.durableOffsetLocked()
	if end <= durable {
		l.mu.RUnlock()
		return false, nil
	}
	var dirty []*segment
	for _, s := range l.segments {
		if s.nextOffset > durable || s == l.active() {
			dirty = append(dirty, s)
		}
	}
	created, needDir := l.segmentsCreated, l.dirSynced < l.segmentsCreated
	// dir is taken with the version: a completed move between log dirs
	// (logdir_move.go) renames it away and changes both.
	version, dir := l.structureVersion, l.path()
	l.mu.RUnlock()

	errs := flushSegments(dirty, (*segment).syncRecords)
	// A segment rolled since the directory was last synced: its entry
	// must be durable too, or a crash loses the file with what it holds.
	var dirErr error
	if needDir {
		dirErr = syncDir(dir)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, ErrLogClosed
	}
	if err := l.liveFlushErrorLocked(dirty, errs); err != nil {
		return false, err
	}
	if dirErr != nil && dir == l.path() { // else moved meanwhile: the next pass syncs the new dir
		return false, fmt.Errorf("sync %s: %w: %w", l.tp, ErrStorage, dirErr)
	}
	l.dirSynced = max(l.dirSynced, created)
	if l.structureVersion != version {
		return true, nil
	}
	l.durableOffset = max(l.durableOffset, end)
	if l.durableOffset == l.active().nextOffset {
		l.unflushedMessages = 0
	}
	return false, nil
}

// flushSegments runs flush ((*segment).flush, or syncRecords for the
// records alone) on segments the caller chose under l.mu, without it
// (fsyncs must not stall appends and reads), and returns each one's error;
// liveFlushErrorLocked judges them once the lock is taken again.
func flushSegments(segments []*segment, flush func(*segment) error) []error {
	errs := make([]error, len(segments))
	for i, s := range segments {
		errs[i] = flush(s)
	}
	return errs
}

// liveFlushErrorLocked joins the flushSegments errors of segments still in
// the log: one deleted or truncated away meanwhile (its file closed) is not
// a failure of the log. l.mu is held.
func (l *Log) liveFlushErrorLocked(segments []*segment, errs []error) error {
	var err error
	for i, e := range errs {
		if e != nil && slices.Contains(l.segments, segments[i]) {
			err = errors.Join(err, e)
		}
	}
	return err
}
