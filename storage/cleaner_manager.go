package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// The log manager's half of the log cleaner (Kafka's LogCleaner thread and
// LogCleanerManager): one goroutine, owned by the Manager, that picks the
// dirtiest compacted log whose dirty ratio reaches
// min.cleanable.dirty.ratio, cleans it (cleaner.go), records how far it is
// clean in the log dir's cleaner-offset-checkpoint, and backs off
// log.cleaner.backoff.ms when no log needs cleaning.

const (
	// cleanerCheckpointFile is Kafka's per-log-dir file of cleaner
	// checkpoints: "<topic> <partition> <offset>", the offset below which
	// the partition is clean.
	cleanerCheckpointFile = "cleaner-offset-checkpoint"
	// DefaultCleanerBackoff is log.cleaner.backoff.ms.
	DefaultCleanerBackoff = 15 * time.Second
	// DefaultCleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size.
	DefaultCleanerDedupeBufferSize = 128 << 20
)

// logCleaner is the cleaner's state. mu guards checkpoints and
// uncleanable; runMu serialises passes, so passes over a log never
// overlap. Lock order: runMu, then Manager.mu, then mu (GetOrCreateLog
// takes mu under Manager.mu); never a Log's lock while holding mu.
type logCleaner struct {
	// runMu serialises passes (the cleaner goroutine and RunCleaner).
	runMu sync.Mutex
	mu    sync.Mutex
	// checkpoints are the cleaner checkpoints by partition, loaded from
	// every log dir at open and written back after each pass.
	checkpoints map[TopicPartition]int64
	// uncleanable are partitions whose pass failed with a corrupt batch:
	// skipped until a restart, as Kafka marks them uncleanable.
	uncleanable map[TopicPartition]bool
}

// loadCleanerCheckpoints reads every dir's cleaner-offset-checkpoint; an
// unreadable file only means those logs are cleaned from their start again.
func (m *Manager) loadCleanerCheckpoints() {
	m.cleaner.checkpoints = map[TopicPartition]int64{}
	m.cleaner.uncleanable = map[TopicPartition]bool{}
	for _, dir := range m.cfg.LogDirs {
		cps, err := NewOffsetCheckpointFile(filepath.Join(dir, cleanerCheckpointFile)).Read()
		if err != nil {
			m.logger.Warn("ignoring an unreadable cleaner checkpoint; compacted logs there are cleaned from their start", "dir", dir, "error", err)
			continue
		}
		for tp, off := range cps {
			m.cleaner.checkpoints[tp] = off
		}
	}
}

// CleanerCheckpoint is the offset below which the partition's log is
// clean, 0 when it was never cleaned. Safe from any goroutine.
func (m *Manager) CleanerCheckpoint(tp TopicPartition) int64 {
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	return m.cleaner.checkpoints[tp]
}

// forgetCleanerCheckpoint drops a partition's checkpoint: its log is new
// (created, or re-created after a deletion) and wholly dirty.
func (m *Manager) forgetCleanerCheckpoint(tp TopicPartition) {
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	delete(m.cleaner.checkpoints, tp)
	delete(m.cleaner.uncleanable, tp)
}

// writeCleanerCheckpoint records a pass's end for the log's dir, writing
// the dir's file with the checkpoints of the logs it still holds.
func (m *Manager) writeCleanerCheckpoint(tp TopicPartition, offset int64) error {
	m.mu.RLock()
	dir, ok := m.dirOf[tp]
	var tps []TopicPartition
	for other, d := range m.dirOf {
		if d == dir {
			tps = append(tps, other)
		}
	}
	m.mu.RUnlock()
	m.cleaner.mu.Lock()
	m.cleaner.checkpoints[tp] = offset
	cps := map[TopicPartition]int64{}
	for _, other := range tps {
		if off, ok := m.cleaner.checkpoints[other]; ok {
			cps[other] = off
		}
	}
	m.cleaner.mu.Unlock()
	if !ok {
		return nil // the log was deleted meanwhile
	}
	return NewOffsetCheckpointFile(filepath.Join(dir, cleanerCheckpointFile)).Write(cps)
}

// RunCleaner cleans the dirtiest compacted log whose dirty ratio reaches its
// min.cleanable.dirty.ratio, once, and reports whether it cleaned one. The
// cleaner goroutine calls it every log.cleaner.backoff.ms; tests and tools
// may call it from any goroutine. Passes are serialised; it blocks for the
// whole pass.
func (m *Manager) RunCleaner() (bool, error) {
	return m.runCleaner(m.stop)
}

func (m *Manager) runCleaner(stop <-chan struct{}) (bool, error) {
	m.cleaner.runMu.Lock()
	defer m.cleaner.runMu.Unlock()
	type candidate struct {
		log  *Log
		plan *cleanPlan
	}
	var cands []candidate
	for _, l := range m.Logs() {
		m.cleaner.mu.Lock()
		cp, skip := m.cleaner.checkpoints[l.tp], m.cleaner.uncleanable[l.tp]
		m.cleaner.mu.Unlock()
		if skip || l.Offline() {
			continue
		}
		p, ok := l.planClean(cp)
		// Kafka's grabFilthiestCompactedLog: dirty enough, or holding a
		// record past max.compaction.lag.ms.
		if !ok || p.dirtyRatio() < max(p.cfg.MinCleanableDirtyRatio, 0) && p.maxCompactionDelayMs <= 0 {
			continue
		}
		cands = append(cands, candidate{l, p})
	}
	if len(cands) == 0 {
		return false, nil
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].plan.dirtyRatio() > cands[j].plan.dirtyRatio() })
	c := cands[0]
	maxKeys := int(m.cfg.CleanerDedupeBufferSize / offsetMapEntryBytes)
	c.plan.throttle = &ioThrottler{rate: m.CleanerIOMaxBytesPerSecond, stop: stop}
	stats, err := c.log.clean(c.plan, maxKeys, stop)
	if err != nil {
		if errors.Is(err, errCleanAborted) || c.log.isClosed() {
			m.logger.Debug("log cleaning aborted", "partition", c.log.tp, "error", err)
			return false, nil
		}
		// Not checkIO: the cleaner's files are its own, and a log it
		// cannot clean only stops being cleaned (Kafka would take the dir
		// offline).
		m.cleaner.mu.Lock()
		m.cleaner.uncleanable[c.log.tp] = true
		m.cleaner.mu.Unlock()
		return false, fmt.Errorf("clean %s: marked uncleanable until restart: %w", c.log.tp, err)
	}
	if err := m.writeCleanerCheckpoint(c.log.tp, stats.EndOffset); err != nil {
		m.logger.Warn("writing the cleaner checkpoint failed", "partition", c.log.tp, "error", err)
	}
	m.logger.Info("cleaned log", "partition", c.log.tp, "dirty_ratio", c.plan.dirtyRatio(), "max_compaction_delay_ms", c.plan.maxCompactionDelayMs,
		"from_offset", c.plan.firstDirtyOffset, "to_offset", stats.EndOffset,
		"segments", fmt.Sprintf("%d→%d", stats.SegmentsBefore, stats.SegmentsAfter),
		"bytes", fmt.Sprintf("%d→%d", stats.BytesBefore, stats.BytesAfter),
		"records", fmt.Sprintf("%d→%d", stats.RecordsRead, stats.RecordsKept),
		"tombstones_removed", stats.TombstonesDropped, "keys", stats.KeysMapped, "duration", stats.Duration)
	return true, nil
}

// cleanerLoop is the cleaner goroutine, owned by the Manager (started by
// OpenManager, stopped by Close through m.stop): it cleans while some log
// needs it and otherwise waits log.cleaner.backoff.ms.
func (m *Manager) cleanerLoop() {
	defer m.wg.Done()
	backoff := time.NewTimer(m.cfg.CleanerBackoff)
	defer backoff.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-backoff.C:
		}
		for {
			cleaned, err := m.runCleaner(m.stop)
			if err != nil {
				m.logger.Error("log cleaning failed", "error", err)
			}
			if !cleaned {
				break
			}
			select {
			case <-m.stop:
				return
			default:
			}
		}
		backoff.Reset(m.cfg.CleanerBackoff)
	}
}

// isClosed reports whether Close was called. Safe from any goroutine.
func (l *Log) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}
