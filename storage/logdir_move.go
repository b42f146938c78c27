package storage

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Moving a replica to another log dir of the same broker: KIP-113's
// AlterReplicaLogDirs, which `kafka-reassign-partitions.sh` sends for the
// "log_dirs" of a reassignment, as Kafka's ReplicaAlterLogDirsThread does
// it. The Manager creates a future log, "<topic>-<partition>.<id>-future",
// in the destination dir and its mover goroutine copies the current log's
// batches into it, byte for byte, while the partition keeps serving. When
// the future log has caught up, the move completes under the current log's
// lock, so that no append lands in between: the last batches are copied,
// the current directory is renamed "-delete" and the future one to the
// partition's name, and the *Log the broker holds takes the new directory's
// segments in place (adoptLocked), keeping its producer state, high
// watermark and leader epoch cache. Reads already handed the old segments
// keep them for file.delete.delay.ms.
//
// A crash leaves the current log and its future, and the move resumes on
// the next start; or, between the two renames, the future alone, complete,
// which the next start takes as the partition's log.

// futureDirSuffix ends the directory of a future log: Kafka's
// "<topic>-<partition>.<32 hex digits>-future".
const futureDirSuffix = "-future"

// Move tuning: the mover copies at most moveChunkBytes a read and
// moveStepBytes a partition before it turns to the next one; it completes
// a move under the current log's lock only when at most promoteMaxBytes
// are left to copy there, and looks again every movePoll while moves are
// running.
const (
	moveChunkBytes  = 1 << 20
	moveStepBytes   = 8 << 20
	promoteMaxBytes = 4 << 20
	movePoll        = 10 * time.Millisecond
)

var (
	// ErrLogDirNotFound is a destination that is not one of log.dirs:
	// LOG_DIR_NOT_FOUND (57).
	ErrLogDirNotFound = errors.New("log dir not found in log.dirs")
	// ErrReplicaNotAvailable is a move of a replica this broker does not
	// have (yet): REPLICA_NOT_AVAILABLE (9). The destination is kept for
	// when it is created, as Kafka does.
	ErrReplicaNotAvailable = errors.New("replica not available on this broker")
)

// futureLog is a replica being moved into dir (a configured log dir).
type futureLog struct {
	log *Log
	dir string
}

// retiredSegments are the segments a completed move left behind, kept open
// for reads in flight until due, and the renamed directory removed then.
type retiredSegments struct {
	segments []*segment
	path     string
	due      time.Time
}

// futureDirName is a new future log's directory name.
func futureDirName(tp TopicPartition) string {
	return tp.DirName() + "." + randomHex() + futureDirSuffix
}

// parseFutureDirName parses a future log's directory name.
func parseFutureDirName(name string) (TopicPartition, bool) {
	base, ok := strings.CutSuffix(name, futureDirSuffix)
	if !ok {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(base, '.')
	if i < 0 || len(base)-i-1 != 32 {
		return TopicPartition{}, false
	}
	if _, err := hex.DecodeString(base[i+1:]); err != nil {
		return TopicPartition{}, false
	}
	tp, err := ParseTopicPartitionDir(base[:i])
	return tp, err == nil
}

// partitionOfDir is the partition of a log's directory, current or future.
func partitionOfDir(name string) (TopicPartition, error) {
	if tp, ok := parseFutureDirName(name); ok {
		return tp, nil
	}
	return ParseTopicPartitionDir(name)
}

// configuredDir returns the log.dirs entry naming the same directory as
// dir, which may be written differently (relative, with a trailing slash).
func (m *Manager) configuredDir(dir string) (string, bool) {
	want, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for _, d := range m.cfg.LogDirs {
		if a, err := filepath.Abs(d); err == nil && a == want {
			return d, true
		}
	}
	return "", false
}

// AlterLogDir moves the partition's replica to dir, one of log.dirs, as
// Kafka's ReplicaManager.alterReplicaLogDirs: a future log is created there
// and the mover copies the replica into it. A move already running to
// another dir is abandoned first; a move to the dir the replica is in
// abandons the running one and does nothing else; a move to where it is
// going already is a no-op. For a replica this broker does not have, dir
// is where it will be created, and the error is ErrReplicaNotAvailable.
// Other errors: ErrLogDirNotFound, ErrStorage (dir, or another log dir, is
// offline: a future log is not created then, as in Kafka).
func (m *Manager) AlterLogDir(tp TopicPartition, dir string) error {
	d, ok := m.configuredDir(dir)
	if !ok {
		return fmt.Errorf("move %s to %s: %w", tp, dir, ErrLogDirNotFound)
	}
	if m.dirs[d].isOffline() {
		return fmt.Errorf("move %s to %s: %w", tp, dir, ErrLogDirOffline)
	}
	cur, create, err := m.planMove(tp, d)
	if !create || err != nil {
		if err != nil {
			err = fmt.Errorf("move %s to %s: %w", tp, dir, err)
		}
		return err
	}
	if off := m.OfflineDirs(); len(off) > 0 {
		return fmt.Errorf("move %s to %s: log dir %s is offline: %w", tp, dir, off[0], ErrStorage)
	}
	// The future log is created without m.mu: a completing move holds
	// its current log's lock while it takes m.mu.
	ld := m.dirs[d]
	fut, err := OpenLog(filepath.Join(d, futureDirName(tp)), m.openOptions(d, cur.Config(), OpenOptions{
		LogStartOffset: cur.LogStartOffset(),
		CleanShutdown:  true,
	}))
	if err != nil {
		return fmt.Errorf("move %s to %s: %w", tp, dir, ld.check(err))
	}
	if id, ok := cur.TopicID(); ok {
		err = fut.SetTopicID(id)
	}
	if err == nil {
		err = syncDir(d)
	}
	if err != nil {
		m.dropFuture(fut)
		return fmt.Errorf("move %s to %s: %w", tp, dir, ld.check(err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.logs[tp] != cur || m.futures[tp] != nil || m.dirOf[tp] == d {
		// Deleted, closed, being moved by a concurrent call, or moved
		// there by a move that was completing, meanwhile.
		m.dropFuture(fut)
		return nil
	}
	m.futures[tp] = &futureLog{log: fut, dir: d}
	m.logger.Info("moving a replica to another log dir", "partition", tp, "from", m.dirOf[tp], "to", d)
	m.wakeMover()
	return nil
}

// planMove is AlterLogDir's decision under m.mu: the current log, and
// whether a future log is to be created in d.
func (m *Manager) planMove(tp TopicPartition, d string) (*Log, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false, ErrLogClosed
	}
	cur, hosted := m.logs[tp]
	if f := m.futures[tp]; f != nil && f.dir != d {
		m.abandonFutureLocked(tp, "the replica is to go to another log dir")
	}
	switch {
	case hosted && m.dirOf[tp] == d:
		return cur, false, nil
	case m.futures[tp] != nil:
		return cur, false, nil // already going there
	case !hosted:
		m.preferredDir[tp] = d
		return nil, false, ErrReplicaNotAvailable
	}
	return cur, true, nil
}

// FutureLog is the log a replica is being moved into, and the log dir it
// is in. While the move completes, the log is nil and moving still true.
func (m *Manager) FutureLog(tp TopicPartition) (_ *Log, dir string, moving bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if f := m.futures[tp]; f != nil {
		return f.log, f.dir, true
	}
	return nil, "", m.completing[tp]
}

// FutureLogs lists the replicas being moved, sorted by partition.
func (m *Manager) FutureLogs() []*Log {
	m.mu.RLock()
	out := make([]*Log, 0, len(m.futures))
	for _, f := range m.futures {
		out = append(out, f.log)
	}
	m.mu.RUnlock()
	sortByPartition(out)
	return out
}

// SetAlterLogDirsBytesPerSecond changes
// replica.alter.log.dirs.io.max.bytes.per.second: how many bytes a second
// the mover copies (not positive: unbounded, Kafka's default).
func (m *Manager) SetAlterLogDirsBytesPerSecond(n int64) {
	m.moveRate.Store(n)
	m.wakeMover()
}

// wakeMover has the mover look at once, cutting a pause short.
func (m *Manager) wakeMover() {
	select {
	case m.moveWake <- struct{}{}:
	default:
	}
}

// StartMoves lets the mover run (ManagerConfig.DeferMoves); later calls do
// nothing.
func (m *Manager) StartMoves() { m.startMoves.Do(func() { close(m.movesStart) }) }

// AlterLogDirsBytesPerSecond is the mover's current bound.
func (m *Manager) AlterLogDirsBytesPerSecond() int64 { return m.moveRate.Load() }

// abandonFutureLocked closes a future log and removes its directory. m.mu
// is held.
func (m *Manager) abandonFutureLocked(tp TopicPartition, why string) {
	f := m.futures[tp]
	if f == nil {
		return
	}
	delete(m.futures, tp)
	m.logger.Info("abandoning a replica's move to another log dir", "partition", tp, "to", f.dir, "reason", why)
	m.dropFuture(f.log)
}

// dropFuture removes a future log nobody else holds any more; a failure to
// rename it away takes its dir offline.
func (m *Manager) dropFuture(l *Log) {
	if err := m.removeLog(l); err != nil {
		m.logger.Error("removing a future log failed", "dir", l.Dir(), "error", l.dirState().check(err))
	}
}

// settleFutures decides, once every log dir is loaded, what each future log
// found on disk is: the continuation of a move when its partition has a
// current log (elsewhere: loadDir dropped those beside theirs); the
// partition's log when there is none (a crash between the two renames of a
// completed move).
func (m *Manager) settleFutures() error {
	var errs []error
	for tp, f := range m.futures {
		dir, hosted := m.dirOf[tp]
		switch {
		case hosted:
			// loadDir dropped any future log beside its current one.
			m.logger.Info("resuming a replica's move to another log dir", "partition", tp, "from", dir, "to", f.dir)
		case len(m.OfflineDirs()) > 0:
			// The partition's log may be in a dir offline, and the
			// future log a copy still incomplete: left on disk until
			// the dir is back (KAFKA-16082).
			m.logger.Warn("leaving a future log alone: its partition's log may be in a log dir offline", "partition", tp, "dir", f.dir)
			f.log.Close()
			delete(m.futures, tp)
		default:
			delete(m.futures, tp)
			l, err := m.promoteOnLoad(tp, f)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			m.logs[tp], m.dirOf[tp] = l, f.dir
		}
	}
	return errors.Join(errs...)
}

// promoteOnLoad makes a future log without a current one the partition's
// log: it was complete when the move renamed the current log away.
func (m *Manager) promoteOnLoad(tp TopicPartition, f *futureLog) (*Log, error) {
	fut := f.log
	end, start, hw := fut.LogEndOffset(), fut.LogStartOffset(), fut.HighWatermark()
	if err := fut.Close(); err != nil {
		return nil, fmt.Errorf("complete the move of %s: %w", tp, err)
	}
	path := filepath.Join(f.dir, tp.DirName())
	if err := os.Rename(fut.Dir(), path); err != nil {
		return nil, fmt.Errorf("complete the move of %s: %w", tp, err)
	}
	if err := syncDir(f.dir); err != nil {
		return nil, fmt.Errorf("complete the move of %s: %w", tp, err)
	}
	m.logger.Warn("completed a replica's move to another log dir that a crash interrupted", "partition", tp, "dir", f.dir)
	return OpenLog(path, m.openOptions(f.dir, fut.Config(), OpenOptions{
		CleanShutdown: true, RecoveryPoint: end, LogStartOffset: start, HighWatermark: hw,
	}))
}

// openOptions fills in the Manager's part of a log's OpenOptions.
func (m *Manager) openOptions(dir string, cfg LogConfig, o OpenOptions) OpenOptions {
	o.Config = cfg
	o.writebackQueue = m.writeback
	o.writebackEvery = &m.writebackBytes
	o.dropBehind = &m.dropBehindBytes
	o.deleter = m.deleter
	o.Logger = m.cfg.Logger
	o.Now = m.cfg.Now
	o.logDir = m.dirs[dir]
	return o
}

// moveLoop is the mover's goroutine: while moves are running it copies
// every future log's next batches and completes the moves that caught up;
// it also closes the segments of completed moves once they are due.
func (m *Manager) moveLoop() {
	defer m.wg.Done()
	select {
	case <-m.stop:
		return
	case <-m.movesStart:
	}
	timer := time.NewTimer(movePoll)
	defer timer.Stop()
	for {
		busy, more := m.moveOnce()
		var wait <-chan time.Time
		switch {
		case more:
			select {
			case <-m.stop:
				return
			default:
				continue
			}
		case busy:
			timer.Reset(movePoll)
			wait = timer.C
		}
		select {
		case <-m.stop:
			return
		case <-m.moveWake:
		case <-wait:
		}
	}
}

// moveOnce makes one pass over the moves and the retired segments. It
// reports whether any remain (busy), and whether a move stopped at its
// step's budget with more to copy at once (more).
func (m *Manager) moveOnce() (busy, more bool) {
	m.closeRetired(false)
	m.mu.RLock()
	tps := make([]TopicPartition, 0, len(m.futures))
	for tp := range m.futures {
		tps = append(tps, tp)
	}
	m.mu.RUnlock()
	for _, tp := range tps {
		select {
		case <-m.stop:
			return false, false
		default:
		}
		more = m.moveStep(tp) || more
	}
	m.moveMu.Lock()
	retired := len(m.retired)
	m.moveMu.Unlock()
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.futures) > 0 || retired > 0, more
}

// moveStep copies up to moveStepBytes of one partition into its future
// log, at the bound of replica.alter.log.dirs.io.max.bytes.per.second, and
// completes the move once the copy has reached the log end offset the
// step started at: what was appended since is copied under the log's lock
// (completeMove), so that a partition appended to all the time still
// completes. It reports whether it stopped at its budget, with more to
// copy.
func (m *Manager) moveStep(tp TopicPartition) bool {
	m.mu.RLock()
	cur, f := m.logs[tp], m.futures[tp]
	m.mu.RUnlock()
	if cur == nil || f == nil {
		return false
	}
	target := cur.LogEndOffset()
	copied := 0
	for copied < moveStepBytes && f.log.LogEndOffset() < target {
		// Under a bound, reads of a tenth of a second's bytes keep the
		// copy smooth (a read returns one batch at least).
		chunk := moveChunkBytes
		if rate := m.moveRate.Load(); rate > 0 {
			chunk = int(min(int64(chunk), rate/10))
		}
		n, err := copyToFuture(cur, f.log, chunk, false)
		if err != nil {
			m.moveFailed(tp, f, err)
			return false
		}
		if n == 0 {
			break
		}
		copied += n
		if !m.paceMove(n) {
			return false
		}
	}
	if copied >= moveStepBytes {
		return true // other moves first
	}
	// Make the copy durable outside the current log's lock, so that
	// completing the move under it only flushes its last batches.
	if err := f.log.Flush(); err != nil {
		m.moveFailed(tp, f, err)
		return false
	}
	done, err := m.completeMove(tp, cur, f)
	if err != nil {
		m.moveFailed(tp, f, err)
		return false
	}
	if done {
		m.logger.Info("moved a replica to another log dir", "partition", tp, "dir", f.dir,
			"log_end_offset", cur.LogEndOffset())
	}
	return false
}

// paceMove sleeps as long as n bytes take at the mover's bound, or until
// the bound changes; false when the Manager is closing.
func (m *Manager) paceMove(n int) bool {
	rate := m.moveRate.Load()
	if rate <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	defer t.Stop()
	select {
	case <-m.stop:
		return false
	case <-m.moveWake:
		return true
	case <-t.C:
		return true
	}
}

// moveFailed abandons a move that failed; an I/O error took its dir (or
// the current log's) offline already.
func (m *Manager) moveFailed(tp TopicPartition, f *futureLog, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.futures[tp] != f {
		return
	}
	m.logger.Error("moving a replica to another log dir failed", "partition", tp, "to", f.dir, "error", err)
	m.abandonFutureLocked(tp, "the move failed")
}

// copyToFuture brings fut one step closer to cur: it first makes fut a
// prefix of cur (following cur's log start offset, and truncating what
// differs, by their leader epochs, after a truncation of cur), then copies
// up to maxBytes of cur's next batches. It returns the bytes copied: 0 when
// fut holds all of cur. locked says cur.mu is held.
func copyToFuture(cur, fut *Log, maxBytes int, locked bool) (int, error) {
	var start, end, hw int64
	if locked {
		start, end, hw = cur.logStartOffset, cur.active().nextOffset, cur.highWatermark
	} else {
		start, end, hw = cur.LogStartOffset(), cur.LogEndOffset(), cur.HighWatermark()
	}
	futEnd := fut.LogEndOffset()
	// fut's high watermark is cur's, as far as fut goes (a follower's
	// rule): the log start offset may only follow cur's below it, and a
	// future log completed at the next start never exposes more than cur
	// did.
	fut.SetHighWatermark(min(hw, futEnd))
	switch {
	case futEnd < start:
		if err := fut.TruncateFullyAndStartAt(start); err != nil {
			return 0, err
		}
		futEnd = start
	case fut.LogStartOffset() < start:
		if err := fut.IncrementLogStartOffset(start); err != nil {
			return 0, err
		}
	}
	if d := divergence(fut.epochs.Entries(), cur.epochs.Entries(), fut.LogStartOffset(), futEnd, end); d < futEnd {
		if err := fut.TruncateTo(d); err != nil {
			return 0, err
		}
		futEnd = d
	}
	if futEnd >= end {
		return 0, nil
	}
	var b []byte
	var err error
	if locked {
		var info ReadInfo
		if info, err = cur.readLocked(futEnd, maxBytes, math.MaxInt64, true); err == nil {
			b, err = cur.regionBytes(info)
		}
	} else {
		b, err = cur.ReadBytes(futEnd, maxBytes, math.MaxInt64)
	}
	if errors.Is(err, ErrOffsetOutOfRange) {
		return 0, nil // cur moved under us; the next step follows it
	}
	if err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, nil
	}
	// A batch read at futEnd may start below it: cur was compacted since
	// fut copied those offsets. cur's batch replaces fut's records.
	if h, err := record.ParseHeader(b); err == nil && h.BaseOffset < futEnd {
		if h.BaseOffset < fut.LogStartOffset() {
			err = fut.TruncateFullyAndStartAt(h.BaseOffset)
		} else {
			err = fut.TruncateTo(h.BaseOffset)
		}
		if err != nil {
			return 0, err
		}
	}
	info, err := fut.AppendAsFollower(b, false)
	if err != nil {
		return 0, err
	}
	fut.SetHighWatermark(min(hw, info.LastOffset+1))
	return info.Bytes, nil
}

// divergence is the offset up to which a future log, holding
// [futStart, futEnd) with the leader epochs fe, holds what the current log,
// up to curEnd with the epochs ce, does: min(futEnd, curEnd) unless an
// epoch differs below that. Two replicas' batches at one offset with one
// leader epoch are the same batch (Kafka's log matching, KIP-101), so
// comparing epochs where either log's change is enough.
func divergence(fe, ce []EpochEntry, futStart, futEnd, curEnd int64) int64 {
	limit := min(futEnd, curEnd)
	bounds := []int64{futStart}
	for _, e := range fe {
		bounds = append(bounds, e.StartOffset)
	}
	for _, e := range ce {
		bounds = append(bounds, e.StartOffset)
	}
	slices.Sort(bounds)
	for _, b := range bounds {
		if b < futStart {
			continue
		}
		if b >= limit {
			break
		}
		if epochAt(fe, b) != epochAt(ce, b) {
			return b
		}
	}
	return limit
}

// epochAt is the leader epoch of the batch at offset o: that of the last
// entry starting at or below it (UndefinedEpoch before the first).
func epochAt(es []EpochEntry, o int64) int32 {
	i := sort.Search(len(es), func(i int) bool { return es[i].StartOffset > o }) - 1
	if i < 0 {
		return UndefinedEpoch
	}
	return es[i].Epoch
}

// completeMove ends a move whose future log has (nearly) caught up, under
// cur's lock so that nothing is appended meanwhile: it copies what is left
// (giving up, to try again later, when that is over promoteMaxBytes),
// fsyncs and closes the future log, renames the current directory
// "-delete" and the future one to the partition's name, and has cur take
// the new directory's segments. It reports whether the move completed.
func (m *Manager) completeMove(tp TopicPartition, cur *Log, f *futureLog) (bool, error) {
	fut := f.log
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if cur.closed {
		return false, nil
	}
	for copied := 0; ; {
		n, err := copyToFuture(cur, fut, moveChunkBytes, true)
		if err != nil {
			return false, err
		}
		if n == 0 {
			break
		}
		if copied += n; copied > promoteMaxBytes {
			return false, nil
		}
	}
	end := cur.active().nextOffset
	if fut.LogEndOffset() != end {
		return false, nil
	}
	// The move is this call's from here: nobody else may abandon (close
	// and remove) the future log it renames.
	m.mu.Lock()
	claimed := m.futures[tp] == f && m.logs[tp] == cur && !m.closed
	if claimed {
		delete(m.futures, tp)
		m.completing[tp] = true
	}
	m.mu.Unlock()
	if !claimed {
		return false, nil
	}
	defer func() {
		m.mu.Lock()
		delete(m.completing, tp)
		m.mu.Unlock()
	}()
	if err := errors.Join(fut.Flush(), fut.Close()); err != nil {
		m.dropFuture(fut)
		return false, err
	}
	oldPath, oldDir := cur.path(), cur.dirState()
	newPath := filepath.Join(f.dir, tp.DirName())
	retiredPath := filepath.Join(oldDir.path, tp.DirName()+"."+randomHex()+deleteDirSuffix)
	// The current directory goes first: a crash after it leaves the
	// complete future log alone, which the next start takes as the
	// partition's (settleFutures); never two logs of one partition.
	if err := os.Rename(oldPath, retiredPath); err != nil {
		m.dropFuture(fut)
		return false, oldDir.check(fmt.Errorf("move %s: %w", tp, err))
	}
	if err := syncDir(oldDir.path); err != nil {
		return false, oldDir.check(fmt.Errorf("move %s: %w", tp, err))
	}
	newDir := m.dirs[f.dir]
	if err := os.Rename(fut.Dir(), newPath); err != nil {
		return false, newDir.check(fmt.Errorf("move %s: %w", tp, err))
	}
	if err := syncDir(f.dir); err != nil {
		return false, newDir.check(fmt.Errorf("move %s: %w", tp, err))
	}
	n, err := OpenLog(newPath, m.openOptions(f.dir, cur.cfg, OpenOptions{
		CleanShutdown: true, RecoveryPoint: end, LogStartOffset: cur.logStartOffset, HighWatermark: cur.highWatermark,
	}))
	if err != nil {
		return false, newDir.check(fmt.Errorf("move %s: reopen in %s: %w", tp, f.dir, err))
	}
	old, err := cur.adoptLocked(n)
	m.mu.Lock()
	if m.logs[tp] == cur {
		m.dirOf[tp] = f.dir
	}
	m.mu.Unlock()
	m.moveMu.Lock()
	m.retired = append(m.retired, retiredSegments{segments: old, path: retiredPath,
		due: m.cfg.Now().Add(time.Duration(cur.cfg.FileDeleteDelayMs) * time.Millisecond)})
	m.moveMu.Unlock()
	return true, err
}

// closeRetired closes the segments of completed moves once due (all of them
// with force) and has their old directories removed.
func (m *Manager) closeRetired(force bool) {
	now := m.cfg.Now()
	m.moveMu.Lock()
	var due []retiredSegments
	kept := m.retired[:0]
	for _, r := range m.retired {
		if force || !now.Before(r.due) {
			due = append(due, r)
		} else {
			kept = append(kept, r)
		}
	}
	m.retired = kept
	m.moveMu.Unlock()
	for _, r := range due {
		for _, s := range r.segments {
			// Discarded, not closed: closing trims indexes by path, and
			// the directory was renamed.
			if err := errors.Join(s.index.Discard(), s.timeIndex.Discard(), s.txn.close(), s.file.Close()); err != nil {
				m.logger.Warn("closing a moved replica's old segment failed", "segment", s.baseOffset, "error", err)
			}
		}
		if !force {
			m.removeInBackground(r.path)
		}
	}
}

// adoptLocked makes the log a completed move's: it takes n's directory,
// log dir and segments (n, opened on the future log's renamed directory,
// is dropped), and keeps its own producer and transaction state, high
// watermark, leader epoch cache (moved to the new directory) and config.
// It returns the segments it held, for the caller to close when reads in
// flight are done. l.mu is held; n is used by nobody else.
func (l *Log) adoptLocked(n *Log) ([]*segment, error) {
	old := slices.Clone(l.segments)
	for _, pd := range l.pendingDeletes {
		old = append(old, pd.seg)
	}
	l.pendingDeletes = nil
	l.segments = n.segments
	path := n.path()
	l.dir.Store(&path)
	l.logDir.Store(n.dirState())
	end := l.active().nextOffset
	l.recoveryPoint = max(n.recoveryPoint, l.logStartOffset)
	l.durableOffset = end
	l.unflushedMessages = 0
	l.lastFlush = l.now()
	l.swapRecovered = nil
	// Segments were swapped under any cleaning pass, background flush or
	// group commit that looked at the old ones: they start over.
	l.structureVersion++
	l.segmentsCreated++
	l.dirSynced = l.segmentsCreated
	// The producer state is l's (it saw the whole history; the future log
	// only what was copied): its snapshot replaces the future log's.
	l.producerSnapshots = n.producerSnapshots
	l.deleteProducerSnapshotsLocked(func(off int64) bool { return off >= end })
	l.takeProducerSnapshotLocked(end, true)
	return old, errors.Join(n.epochs.Close(), l.epochs.moveTo(filepath.Join(path, leaderEpochCheckpointFile)))
}
