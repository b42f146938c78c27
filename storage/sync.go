package storage

import "slices"

// Durable reports the durable mode: flush.messages=1, every message
// fsynced before it is acknowledged. The broker then appends with
// AppendOptions.DeferFlush and group-commits with Sync.
func (c LogConfig) Durable() bool { return c.FlushMessages == 1 }

// Sync fsyncs everything appended so far and advances the recovery point
// (RecoveryPoint) to where it started, like Flush, but without holding the
// log's lock during the fsyncs: appends and reads go on meanwhile, and
// whatever they append is covered by the next Sync (group commit: one fsync
// acknowledges every producer that appended before it started). It returns
// at once when nothing is unflushed.
//
// Concurrency: safe from any goroutine; concurrent Syncs run one after the
// other, and a Sync that finds the work done by the previous one returns
// without an fsync.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrLogClosed
	}
	end := l.active().nextOffset
	if end <= l.recoveryPoint {
		l.mu.RUnlock()
		return nil
	}
	var dirty []*segment
	for _, s := range l.segments {
		if s.nextOffset > l.recoveryPoint || s == l.active() {
			dirty = append(dirty, s)
		}
	}
	l.mu.RUnlock()

	errs := make([]error, len(dirty))
	for i, s := range dirty {
		errs[i] = s.flush()
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrLogClosed
	}
	for i, err := range errs {
		// A segment deleted or truncated away meanwhile (its file closed)
		// is not a failure of the log; one still in it is.
		if err != nil && slices.Contains(l.segments, dirty[i]) {
			return err
		}
	}
	// A truncation meanwhile may have cut below end.
	l.recoveryPoint = max(l.recoveryPoint, min(end, l.active().nextOffset))
	if l.recoveryPoint == l.active().nextOffset {
		l.unflushedMessages = 0
	}
	l.lastFlush = l.now()
	return nil
}
