package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The log manager's half of the log cleaner (Kafka's LogCleaner threads and
// LogCleanerManager): log.cleaner.threads goroutines, owned by the
// Manager, each of which picks the dirtiest compacted log whose dirty ratio
// reaches min.cleanable.dirty.ratio and that no other pass is cleaning,
// cleans it (cleaner.go), records how far it is clean in the log dir's
// cleaner-offset-checkpoint, and backs off log.cleaner.backoff.ms when no
// log needs cleaning. The passes share log.cleaner.io.max.bytes.per.second
// and divide log.cleaner.dedupe.buffer.size between them, as Kafka's
// threads do. The thread count, the backoff and the buffer change at
// runtime (Kafka's dynamic cleaner configs); unlike Kafka, which restarts
// its threads (aborting their passes), a change lets passes running finish.

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

// logCleaner is the cleaner's state. mu guards checkpoints, uncleanable,
// inProgress and passes; poolMu the goroutines. Lock order: Manager.mu,
// then mu (GetOrCreateLog takes mu under Manager.mu); never a Log's lock
// while holding mu.
type logCleaner struct {
	mu sync.Mutex
	// checkpoints are the cleaner checkpoints by partition, loaded from
	// every log dir at open and written back after each pass.
	checkpoints map[TopicPartition]int64
	// uncleanable are partitions whose pass failed with a corrupt batch:
	// skipped until a restart, as Kafka marks them uncleanable.
	uncleanable map[TopicPartition]bool
	// inProgress are the partitions passes are cleaning: passes run side
	// by side on different logs, never two on one (Kafka's
	// LogCleaningInProgress).
	inProgress map[TopicPartition]bool
	// passes counts the passes ended; passEnded is broadcast on each (a
	// RunCleaner waiting for a log another pass holds).
	passes    uint64
	passEnded *sync.Cond

	poolMu sync.Mutex
	// workers are the cleaner goroutines' quit channels, one each.
	workers []chan struct{}
	// kick is closed (and replaced) to wake the sleeping goroutines: the
	// backoff changed.
	kick chan struct{}
	// closed: the Manager is closing, no goroutine may start.
	closed bool
	// budget is log.cleaner.io.max.bytes.per.second's count, shared by
	// every pass.
	budget ioBudget
	// backoff is log.cleaner.backoff.ms and dedupe
	// log.cleaner.dedupe.buffer.size, as set last.
	backoff atomic.Int64
	dedupe  atomic.Int64
}

// loadCleanerCheckpoints reads every dir's cleaner-offset-checkpoint; an
// unreadable file only means those logs are cleaned from their start again.
func (m *Manager) loadCleanerCheckpoints() {
	m.cleaner.checkpoints = map[TopicPartition]int64{}
	m.cleaner.uncleanable = map[TopicPartition]bool{}
	m.cleaner.inProgress = map[TopicPartition]bool{}
	m.cleaner.passEnded = sync.NewCond(&m.cleaner.mu)
	m.cleaner.kick = make(chan struct{})
	m.cleaner.backoff.Store(int64(m.cfg.CleanerBackoff))
	m.cleaner.dedupe.Store(m.cfg.CleanerDedupeBufferSize)
	for _, dir := range m.cfg.LogDirs {
		if m.dirs[dir].isOffline() {
			continue
		}
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
// cleaner goroutines call it every log.cleaner.backoff.ms; tests and tools
// may call it from any goroutine. It blocks for the whole pass, and first
// for the pass of another goroutine that holds the log it would clean.
func (m *Manager) RunCleaner() (bool, error) {
	return m.runCleaner(m.stop, true)
}

// cleanCandidate is a log runCleaner may clean, and how.
type cleanCandidate struct {
	log  *Log
	plan *cleanPlan
}

// runCleaner runs one pass over the dirtiest log no other pass holds. When
// the dirtiest logs are all held, it returns false, or with wait it waits
// for a pass to end and looks again.
func (m *Manager) runCleaner(stop <-chan struct{}, wait bool) (bool, error) {
	for {
		m.cleaner.mu.Lock()
		passes := m.cleaner.passes
		m.cleaner.mu.Unlock()
		c, held := m.claimDirtiest()
		if c != nil {
			defer m.release(c.log.tp)
			return m.cleanClaimed(c, stop)
		}
		if !held || !wait {
			return false, nil
		}
		m.cleaner.mu.Lock()
		for m.cleaner.passes == passes {
			m.cleaner.passEnded.Wait()
		}
		m.cleaner.mu.Unlock()
	}
}

// claimDirtiest picks the dirtiest log that needs cleaning and marks it in
// progress; held reports whether a log needing it was skipped because
// another pass holds it.
func (m *Manager) claimDirtiest() (_ *cleanCandidate, held bool) {
	var cands []cleanCandidate
	for _, l := range m.Logs() {
		m.cleaner.mu.Lock()
		cp, skip, busy := m.cleaner.checkpoints[l.tp], m.cleaner.uncleanable[l.tp], m.cleaner.inProgress[l.tp]
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
		if busy {
			held = true
			continue
		}
		cands = append(cands, cleanCandidate{l, p})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].plan.dirtyRatio() > cands[j].plan.dirtyRatio() })
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	for i := range cands {
		// Another pass may have claimed it since it was planned (its
		// plan is then stale too).
		if tp := cands[i].log.tp; !m.cleaner.inProgress[tp] {
			m.cleaner.inProgress[tp] = true
			return &cands[i], held
		}
		held = true
	}
	return nil, held
}

// release ends a pass over tp.
func (m *Manager) release(tp TopicPartition) {
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	delete(m.cleaner.inProgress, tp)
	m.cleaner.passes++
	m.cleaner.passEnded.Broadcast()
}

// cleanClaimed runs the pass over a claimed log.
func (m *Manager) cleanClaimed(c *cleanCandidate, stop <-chan struct{}) (bool, error) {
	// Kafka gives each thread log.cleaner.dedupe.buffer.size divided by
	// log.cleaner.threads.
	threads := int64(max(m.CleanerThreads(), 1))
	maxKeys := int(max(m.cleaner.dedupe.Load()/threads/offsetMapEntryBytes, 1))
	c.plan.throttle = &ioThrottler{rate: m.CleanerIOMaxBytesPerSecond, stop: stop, budget: &m.cleaner.budget}
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

// CleanerThreads is how many cleaner goroutines run (log.cleaner.threads;
// 0 with log.cleaner.enable=false).
func (m *Manager) CleanerThreads() int {
	m.cleaner.poolMu.Lock()
	defer m.cleaner.poolMu.Unlock()
	return len(m.cleaner.workers)
}

// SetCleanerThreads changes log.cleaner.threads: goroutines are started,
// or told to stop after the pass they are running. It does nothing with
// the cleaner disabled or the Manager closing.
func (m *Manager) SetCleanerThreads(n int) {
	m.cleaner.poolMu.Lock()
	defer m.cleaner.poolMu.Unlock()
	if m.cleaner.closed || m.cfg.DisableLogCleaner {
		return
	}
	for len(m.cleaner.workers) < n {
		quit := make(chan struct{})
		m.cleaner.workers = append(m.cleaner.workers, quit)
		m.wg.Add(1)
		go m.cleanerLoop(quit)
	}
	for len(m.cleaner.workers) > max(n, 0) {
		last := len(m.cleaner.workers) - 1
		close(m.cleaner.workers[last])
		m.cleaner.workers = m.cleaner.workers[:last]
	}
}

// CleanerBackoff is log.cleaner.backoff.ms as set last.
func (m *Manager) CleanerBackoff() time.Duration { return time.Duration(m.cleaner.backoff.Load()) }

// SetCleanerBackoff changes log.cleaner.backoff.ms; sleeping cleaner
// goroutines wake, look for work and sleep the new backoff. Not positive:
// the default.
func (m *Manager) SetCleanerBackoff(d time.Duration) {
	if d <= 0 {
		d = DefaultCleanerBackoff
	}
	if time.Duration(m.cleaner.backoff.Swap(int64(d))) == d {
		return
	}
	m.cleaner.poolMu.Lock()
	defer m.cleaner.poolMu.Unlock()
	close(m.cleaner.kick)
	m.cleaner.kick = make(chan struct{})
}

// CleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size as set last.
func (m *Manager) CleanerDedupeBufferSize() int64 { return m.cleaner.dedupe.Load() }

// SetCleanerDedupeBufferSize changes log.cleaner.dedupe.buffer.size from
// the next pass. Not positive: the default.
func (m *Manager) SetCleanerDedupeBufferSize(n int64) {
	if n <= 0 {
		n = DefaultCleanerDedupeBufferSize
	}
	m.cleaner.dedupe.Store(n)
}

// stopCleaners is Close's: no cleaner goroutine starts after it.
func (m *Manager) stopCleaners() {
	m.cleaner.poolMu.Lock()
	defer m.cleaner.poolMu.Unlock()
	m.cleaner.closed = true
}

// cleanerLoop is a cleaner goroutine, owned by the Manager (started by
// SetCleanerThreads, stopped by Close through m.stop or by
// SetCleanerThreads through quit): it cleans while some log needs it and
// otherwise waits log.cleaner.backoff.ms.
func (m *Manager) cleanerLoop(quit <-chan struct{}) {
	defer m.wg.Done()
	for {
		m.cleaner.poolMu.Lock()
		kick := m.cleaner.kick
		m.cleaner.poolMu.Unlock()
		backoff := time.NewTimer(m.CleanerBackoff())
		select {
		case <-m.stop:
			backoff.Stop()
			return
		case <-quit:
			backoff.Stop()
			return
		case <-kick:
			backoff.Stop()
		case <-backoff.C:
		}
		for {
			cleaned, err := m.runCleaner(m.stop, false)
			if err != nil {
				m.logger.Error("log cleaning failed", "error", err)
			}
			if !cleaned {
				break
			}
			select {
			case <-m.stop:
				return
			case <-quit:
				return
			default:
			}
		}
	}
}

// isClosed reports whether Close was called. Safe from any goroutine.
func (l *Log) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}
