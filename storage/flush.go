package storage

import (
	"errors"
	"fmt"
	"io/fs"
)

// The background flush of rolled segments (Kafka's "flush-log" task that
// UnifiedLog.roll schedules). A roll used to fsync the segment it closed
// under the log lock: up to segment.bytes of dirty pages, during which
// every append and read of the partition waited (150-175 ms per 128 MiB
// segment on the development VM, 100-120 ms per 64 MiB; BenchmarkAppendRoll
// measures the appends that roll). Now the roll only schedules it; a
// goroutine owned by the Log fsyncs the rolled segments, the producer
// snapshots taken at the rolls and the directory without the lock, then
// moves the recovery point past them. Until it has, the recovery point
// stays where it was, so a crash meanwhile re-validates the rolled segment
// like any unflushed data.

// maxRollFlushRetries bounds how often one pass is redone because a
// truncation or compaction swap changed the segments under it.
const maxRollFlushRetries = 3

// rollFlushSlots bounds the background flushes fsyncing at once across
// every log of the process (Kafka runs them on background.threads, 10):
// thousands of partitions rolling together on segment.ms would otherwise
// each hold an OS thread blocked in fsync. Waiting for a slot holds none.
var rollFlushSlots = make(chan struct{}, 10)

// scheduleRollFlushLocked asks for everything below target to be flushed
// in the background, starting the flushing goroutine unless it runs.
// l.mu is held.
func (l *Log) scheduleRollFlushLocked(target int64) {
	l.rollFlushTarget = max(l.rollFlushTarget, target)
	if l.rollFlushRunning {
		return
	}
	l.rollFlushRunning = true
	l.rollFlushes.Add(1)
	go l.flushRolled()
}

// flushRolled is the background flush's goroutine: it runs passes until
// the recovery point reaches the target (rolls meanwhile raise it), the log
// closes, or a flush fails. A failed fsync leaves the recovery point where
// it was and takes the log dir offline (dirfailure.go).
func (l *Log) flushRolled() {
	defer l.rollFlushes.Done()
	retries := 0
	for {
		l.mu.Lock()
		// Only whole inactive segments: a truncation may have cut below
		// the target since the roll that set it.
		target := min(l.rollFlushTarget, l.active().baseOffset)
		if l.closed || target <= l.recoveryPoint || retries > maxRollFlushRetries {
			l.rollFlushRunning = false
			l.mu.Unlock()
			return
		}
		// dir is taken with the version: a completed move between log
		// dirs (logdir_move.go) renames it away and changes both.
		version, created, dir := l.structureVersion, l.segmentsCreated, l.path()
		var dirty []*segment
		for _, s := range l.segments {
			if s != l.active() && s.baseOffset < target && s.nextOffset > l.recoveryPoint {
				dirty = append(dirty, s)
			}
		}
		var snapshots []int64
		for _, off := range l.producerSnapshots {
			if off > l.recoveryPoint && off <= target {
				snapshots = append(snapshots, off)
			}
		}
		l.mu.Unlock()
		if l.rollFlushHook != nil {
			l.rollFlushHook()
		}

		rollFlushSlots <- struct{}{}
		errs := flushSegments(dirty, (*segment).flush)
		for _, off := range snapshots {
			// A snapshot deleted meanwhile (a truncation) is not missed;
			// one that cannot be made durable is only a slower recovery.
			if err := syncFile(producerSnapshotPath(dir, off)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				l.logger.Warn("fsync of a producer state snapshot failed", "offset", off, "error", err)
			}
		}
		dirErr := syncDir(dir)
		<-rollFlushSlots

		l.mu.Lock()
		err := l.liveFlushErrorLocked(dirty, errs)
		if dirErr != nil && dir == l.path() { // else moved meanwhile: the next pass syncs the new dir
			err = errors.Join(err, fmt.Errorf("flush rolled segments of %s: %w: %w", l.tp, ErrStorage, dirErr))
		}
		switch {
		case l.closed:
		case err != nil:
			err = l.checkIO(err)
			l.logger.Error("flushing rolled segments failed; the recovery point stays", "recovery_point", l.recoveryPoint, "error", err)
			l.rollFlushRunning = false
			l.mu.Unlock()
			return
		case l.structureVersion != version:
			// A truncation or compaction swap replaced segments under
			// this pass: what it flushed may not be what the log holds.
			retries++
		default:
			l.dirSynced = max(l.dirSynced, created)
			l.recoveryPoint = max(l.recoveryPoint, target)
			retries = 0
		}
		l.mu.Unlock()
	}
}

// syncDirIfNeeded fsyncs the log's directory when a segment was created
// since it last was (created is l.segmentsCreated as the caller saw it).
// l.mu is held.
func (l *Log) syncDirIfNeeded(created uint64) error {
	if l.dirSynced >= created {
		return nil
	}
	if err := syncDir(l.path()); err != nil {
		return fmt.Errorf("flush %s: %w: %w", l.tp, ErrStorage, err)
	}
	l.dirSynced = created
	return nil
}

// syncFile fsyncs the file at path.
func syncFile(path string) error {
	if err := fsyncPath(path); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

// writeFileNoSync replaces path with data through a temporary file and a
// rename, as writeFileAtomic does but without its fsyncs: a reader sees
// the old file or the new one, never a mix, but a crash may leave either
// or a torn one.
func writeFileNoSync(path string, data []byte) error {
	return replaceFile(path, data, false)
}
