package storage

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Log compaction, the Log's half of Kafka's LogCleaner
// (cleanup.policy=compact): a cleaning pass over one log, run by the log
// manager's cleaner goroutine (cleaner_manager.go).
//
// What is cleanable: whole non-active segments below the first uncleanable
// offset, min(active segment base, high watermark, base of the first
// segment newer than min.compaction.lag.ms). The log is clean up to its
// cleaner checkpoint (cleaner-offset-checkpoint, per log dir); the
// cleanable segments from there on are the dirty section. A pass runs when
// dirty bytes / cleanable bytes reaches min.cleanable.dirty.ratio.
//
// A pass (Kafka's Cleaner.doClean):
//
//  1. plan, under the log's read lock: the cleanable segments, their
//     sizes, and the batches the producer state remembers;
//  2. without the lock (cleanable segments are immutable; only retention,
//     truncation and closing change them, and the swap checks for that):
//     build the offset map, key → latest offset, over the dirty section;
//  3. group the cleanable segments by size (groupSegmentsBySize: at most
//     segment.bytes of log and segment.index.bytes of index per group) and
//     rewrite each group into "<base>.log.cleaned" (+ .index.cleaned,
//     .timeindex.cleaned), keeping the survivors of batchFilter, offsets
//     unchanged, fsynced;
//  4. swap, under the write lock, after checking that the group's segments
//     are still the log's and nothing was truncated: rename the cleaned
//     files to ".swap", rename the old segments ".deleted" (removed after
//     file.delete.delay.ms, as retention does), rename ".swap" to the
//     final names;
//  5. the caller moves the cleaner checkpoint to the end of what was cleaned.
//
// Crash safety (Kafka's LogLoader): on open, ".cleaned" files are an
// unfinished rewrite and are deleted; a "<base>.log.swap" is a committed
// swap: the segments it covers are deleted, it is renamed into place, and
// its indexes are rebuilt (completeInterruptedSwaps).
//
// Offsets never move, so the producer-state snapshots and the leader-epoch
// cache stay valid. Nothing at or above the last stable offset is cleaned
// (Kafka's firstUncleanableOffset includes the first unstable offset): an
// open transaction's batches stay as written. The batches of aborted
// transactions are neither mapped nor kept (Kafka's cleaner discards them
// too): an aborted record would otherwise shadow the committed value of
// its key, which read_committed consumers and the coordinators' loading
// (an aborted TxnOffsetCommit in __consumer_offsets) would then lose. A
// cleaned segment keeps the aborted transaction index entries of the
// segments it replaces, and every control batch (batchFilter); Kafka
// removes a marker once its transaction's records are gone and
// delete.retention.ms has passed, which is not done here. One exception: a group at the head of the log left
// with no batch at all disappears, and the log start offset moves to the
// next segment, as a restart would see it.

// File suffixes of compaction, as Kafka's LogFileUtils spells them.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// errCleanAborted reports a pass abandoned because the log changed under
// it (truncation, retention, close) or the cleaner is stopping: nothing
// was lost, the next pass starts over.
var errCleanAborted = errors.New("log cleaning aborted")

// Defaults of the cleaner's settings, Kafka's.
const (
	DefaultDeleteRetentionMs      = 24 * int64(time.Hour/time.Millisecond)
	DefaultMinCleanableDirtyRatio = 0.5
	// cleanerIOBufferBytes is how much of a segment a cleaner read or
	// write moves at once (Kafka's log.cleaner.io.buffer.size is 512 KiB
	// split in two).
	cleanerIOBufferBytes = 1 << 20
)

// cleanSegment is what a plan knows of one cleanable segment, read under
// the log's lock so that the unlocked phases never touch segment fields.
type cleanSegment struct {
	seg              *segment
	base, next, size int64
	indexBytes       int64
	timeIndexBytes   int64
	// abortedTxns are the segment's aborted transaction index entries,
	// copied into the cleaned segment that replaces it.
	abortedTxns []AbortedTxn
}

// cleanPlan is one pass's view of a log.
type cleanPlan struct {
	cfg LogConfig
	// version is the log's structureVersion when planned.
	version uint64
	// segments are the cleanable segments, from the log's first;
	// segments[firstDirty:] are dirty.
	segments   []cleanSegment
	firstDirty int
	// firstDirtyOffset is where the dirty section starts (the checkpoint,
	// clamped to the log), endOffset where the cleanable range ends.
	firstDirtyOffset, endOffset int64
	cleanBytes, dirtyBytes      int64
	producerBatches             map[int64]bool
	// aborted are the log's aborted transactions that may have batches in
	// the cleanable range (their markers may lie beyond it).
	aborted []AbortedTxn
	now     time.Time
	// maxCompactionDelayMs is how long ago the oldest dirty batch passed
	// max.compaction.lag.ms (Kafka's maxCompactionDelay); above 0 the log
	// is cleaned whatever its dirty ratio.
	maxCompactionDelayMs int64
	// throttle holds the pass to log.cleaner.io.max.bytes.per.second
	// (nil: unthrottled).
	throttle *ioThrottler
}

// dirtyRatio is Kafka's cleanableRatio: dirty bytes over cleanable bytes.
func (p *cleanPlan) dirtyRatio() float64 {
	if p.dirtyBytes == 0 {
		return 0
	}
	return float64(p.dirtyBytes) / float64(p.cleanBytes+p.dirtyBytes)
}

// cleanStats describes a finished pass.
type cleanStats struct {
	// EndOffset is the new cleaner checkpoint: everything below it is clean.
	EndOffset                int64
	SegmentsBefore           int
	SegmentsAfter            int
	BytesBefore, BytesAfter  int64
	RecordsRead, RecordsKept int64
	TombstonesDropped        int64
	KeysMapped               int
	Duration                 time.Duration
}

// planClean returns the log's cleanable section given its cleaner
// checkpoint, or ok false when the log is not compacted, closed, or has
// nothing cleanable. Safe from any goroutine; takes the read lock.
func (l *Log) planClean(checkpoint int64) (*cleanPlan, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || !l.cfg.Compact {
		return nil, false
	}
	now := l.now()
	firstUncleanable := min(l.active().baseOffset, l.lastStableOffsetLocked())
	lagBound := now.UnixMilli() - l.cfg.MinCompactionLagMs
	p := &cleanPlan{cfg: l.cfg, version: l.structureVersion, now: now}
	firstDirty := checkpoint
	if firstDirty < l.logStartOffset || firstDirty > l.active().nextOffset {
		// Kafka's LogCleanerManager resets a checkpoint the log no longer
		// covers (truncated, or deleted past it) to the log start.
		firstDirty = l.logStartOffset
	}
	for i, s := range l.segments[:len(l.segments)-1] {
		if l.segments[i+1].baseOffset > firstUncleanable {
			break
		}
		if l.cfg.MinCompactionLagMs > 0 && s.largestTimestamp() > lagBound {
			break
		}
		cs := cleanSegment{seg: s, base: s.baseOffset, next: l.segments[i+1].baseOffset, size: s.size,
			indexBytes: int64(s.index.Entries()) * offsetIndexEntrySize, timeIndexBytes: int64(s.timeIndex.Entries()) * timeIndexEntrySize,
			abortedTxns: slices.Clone(s.txn.entries)}
		if cs.base < firstDirty && cs.next > firstDirty {
			// A checkpoint inside a segment (a truncation moved it): the
			// segment counts as dirty.
			firstDirty = cs.base
		}
		if cs.base >= firstDirty {
			p.dirtyBytes += cs.size
		} else {
			p.cleanBytes += cs.size
			p.firstDirty = i + 1
		}
		p.segments = append(p.segments, cs)
	}
	if len(p.segments) == 0 || p.firstDirty == len(p.segments) {
		return nil, false
	}
	p.firstDirtyOffset = p.segments[p.firstDirty].base
	p.endOffset = p.segments[len(p.segments)-1].next
	if l.cfg.MaxCompactionLagMs < math.MaxInt64 {
		// KIP-354: the first batch of each dirty segment is its oldest
		// (timestamps 0 or less, unknown, do not count, as in Kafka).
		cleanUntil := now.UnixMilli() - l.cfg.MaxCompactionLagMs
		for _, cs := range p.segments[p.firstDirty:] {
			if ts := cs.seg.rollingTimestamp; ts > 0 && ts < cleanUntil {
				p.maxCompactionDelayMs = max(p.maxCompactionDelayMs, cleanUntil-ts)
			}
		}
	}
	for _, s := range l.segments {
		for _, a := range s.txn.entries {
			if a.FirstOffset < p.endOffset && a.LastOffset >= l.logStartOffset {
				p.aborted = append(p.aborted, a)
			}
		}
	}
	p.producerBatches = map[int64]bool{}
	for _, e := range l.producers {
		for _, b := range e.batches {
			p.producerBatches[b.FirstOffset] = true
		}
	}
	return p, true
}

// clean runs one pass of the plan (steps 2 to 4 above). maxKeys bounds the
// offset map (log.cleaner.dedupe.buffer.size): when the dirty section has
// more keys, only a prefix of it, in whole segments, is cleaned, and the
// returned EndOffset says where it ends. stop aborts the pass between
// segments. It returns errCleanAborted (wrapped) when the log changed under
// it, whatever failed then: the group being rewritten is left as it was (groups swapped before
// stay cleaned, which is correct), and the caller keeps the old
// checkpoint, so the next pass covers everything again.
//
// Concurrency: one pass per log at a time (the manager's one cleaner
// goroutine); appends, reads, retention and truncation run concurrently.
func (l *Log) clean(p *cleanPlan, maxKeys int, stop <-chan struct{}) (cleanStats, error) {
	stats, err := l.cleanPass(p, maxKeys, stop)
	if err != nil && !errors.Is(err, errCleanAborted) && l.changedSince(p.version) {
		// Whatever failed, the log changed under the pass: a move of the
		// replica that completed may have renamed the directory the pass
		// was creating its cleaned segment in. Not a corrupt log: the next
		// pass plans afresh.
		return stats, fmt.Errorf("log changed while cleaning (%w): %w", err, errCleanAborted)
	}
	return stats, err
}

// changedSince reports whether the log's segments changed, other than by a
// cleaning pass's own swaps, since its structureVersion was version.
func (l *Log) changedSince(version uint64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.structureVersion != version
}

func (l *Log) cleanPass(p *cleanPlan, maxKeys int, stop <-chan struct{}) (cleanStats, error) {
	start := time.Now()
	stats := cleanStats{SegmentsBefore: len(p.segments)}
	maxUncompressed := max(64<<20, 16*p.cfg.MaxMessageBytes)
	offsets := newOffsetMap()
	var scratch []byte
	mapped := p.firstDirty
	for _, cs := range p.segments[p.firstDirty:] {
		if mapped > p.firstDirty && maxKeys > 0 && len(offsets.m) >= maxKeys {
			break
		}
		err := readSegmentBatches(cs, stop, func(batch []byte, h record.BatchHeader) error {
			if err := p.throttle.account(len(batch)); err != nil {
				return err
			}
			if abortedBatch(p.aborted, &h) {
				return nil // its records are dropped: they shadow no key
			}
			var err error
			scratch, err = offsets.mapBatch(batch, h, scratch, maxUncompressed)
			return err
		})
		if err != nil {
			return stats, fmt.Errorf("clean %s: build offset map: %w", l.tp, err)
		}
		mapped++
	}
	segs := p.segments[:mapped]
	stats.EndOffset = segs[len(segs)-1].next
	stats.KeysMapped = len(offsets.m)
	f := &batchFilter{offsets: offsets, nowMs: p.now.UnixMilli(), deleteRetentionMs: max(p.cfg.DeleteRetentionMs, 0),
		producerBatches: p.producerBatches, aborted: p.aborted, maxUncompressed: maxUncompressed, scratch: scratch}
	for _, group := range groupSegmentsBySize(segs, p.cfg) {
		before, after, err := l.cleanGroup(p, group, f, stop)
		if err != nil {
			return stats, fmt.Errorf("clean %s: segments %d to %d: %w", l.tp, group[0].base, group[len(group)-1].next, err)
		}
		stats.BytesBefore += before
		stats.BytesAfter += after
		if after > 0 {
			stats.SegmentsAfter++
		}
	}
	stats.RecordsRead, stats.RecordsKept, stats.TombstonesDropped = f.recordsRead, f.recordsKept, f.tombstonesDropped
	stats.Duration = time.Since(start)
	return stats, nil
}

// groupSegmentsBySize is Kafka's Cleaner.groupSegmentsBySize: consecutive
// segments whose combined log stays within segment.bytes, whose combined
// indexes stay within segment.index.bytes, and whose offsets fit a
// segment's 4-byte relative offsets, are rewritten into one.
func groupSegmentsBySize(segs []cleanSegment, cfg LogConfig) [][]cleanSegment {
	var groups [][]cleanSegment
	for len(segs) > 0 {
		g := segs[:1]
		logBytes, indexBytes, timeBytes := segs[0].size, segs[0].indexBytes, segs[0].timeIndexBytes
		for len(g) < len(segs) {
			n := segs[len(g)]
			if logBytes+n.size > cfg.SegmentBytes ||
				indexBytes+n.indexBytes > int64(cfg.SegmentIndexBytes) ||
				timeBytes+n.timeIndexBytes > int64(cfg.SegmentIndexBytes) ||
				n.next-1-g[0].base > int64(^uint32(0)>>1) {
				break
			}
			logBytes, indexBytes, timeBytes = logBytes+n.size, indexBytes+n.indexBytes, timeBytes+n.timeIndexBytes
			g = segs[:len(g)+1]
		}
		groups = append(groups, g)
		segs = segs[len(g):]
	}
	return groups
}

// cleanGroup rewrites one group of segments into a cleaned segment and
// swaps it in. It returns the bytes before and after.
func (l *Log) cleanGroup(p *cleanPlan, group []cleanSegment, f *batchFilter, stop <-chan struct{}) (int64, int64, error) {
	var before int64
	for _, cs := range group {
		before += cs.size
	}
	dir := l.path()
	if l.cleanGroupHook != nil {
		l.cleanGroupHook()
	}
	cleaned, err := createCleanedSegment(dir, group[0].base, p.cfg, p.now)
	if err != nil {
		return before, 0, err
	}
	out := f.out[:0]
	defer func() { f.out = out[:0] }()
	for _, cs := range group {
		err := readSegmentBatches(cs, stop, func(batch []byte, h record.BatchHeader) error {
			if err := p.throttle.account(len(batch)); err != nil {
				return err
			}
			var err error
			if out, err = f.filter(out, batch, h); err != nil {
				return err
			}
			if len(out) >= cleanerIOBufferBytes {
				if err := p.throttle.account(len(out)); err != nil {
					return err
				}
				err = cleaned.append(out)
				out = out[:0]
			}
			return err
		})
		if err != nil {
			return before, 0, errors.Join(err, discardCleanedSegment(cleaned))
		}
	}
	if len(out) > 0 {
		if err := cleaned.append(out); err != nil {
			return before, 0, errors.Join(err, discardCleanedSegment(cleaned))
		}
	}
	var aborted []AbortedTxn
	for _, cs := range group {
		aborted = append(aborted, cs.abortedTxns...)
	}
	if err := cleaned.txn.appendAll(aborted); err != nil {
		return before, 0, errors.Join(err, discardCleanedSegment(cleaned))
	}
	after := cleaned.size
	// A group with aborted entries holds their markers, which are kept:
	// it never cleans to nothing.
	if after == 0 && !l.isFirstSegment(group[0].seg) {
		// Nothing survived: the group's segments go with no replacement.
		// The log's first group keeps an empty segment instead, as
		// Kafka's cleaner does for every group: the log start offset
		// stays, and a consumer reading from it is not sent out of
		// range by the cleaner.
		if err := discardCleanedSegment(cleaned); err != nil {
			return before, 0, err
		}
		cleaned = nil
	} else if err := errors.Join(cleaned.onBecomeInactive(), cleaned.flush()); err != nil {
		return before, 0, errors.Join(err, discardCleanedSegment(cleaned))
	}
	if err := l.replaceSegments(p, group, cleaned); err != nil {
		if cleaned != nil {
			err = errors.Join(err, discardCleanedSegment(cleaned))
		}
		return before, 0, err
	}
	return before, after, nil
}

// isFirstSegment reports whether s is the log's first segment.
func (l *Log) isFirstSegment(s *segment) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segments) > 0 && l.segments[0] == s
}

// readSegmentBatches calls fn with each whole batch of cs, CRC checked,
// reading through a buffer and without the log's lock. The batch slice is
// valid only during the call.
func readSegmentBatches(cs cleanSegment, stop <-chan struct{}, fn func([]byte, record.BatchHeader) error) error {
	select {
	case <-stop:
		return errCleanAborted
	default:
	}
	r := bufio.NewReaderSize(io.NewSectionReader(cs.seg.file, 0, cs.size), cleanerIOBufferBytes)
	var buf []byte
	var pos int64
	for pos < cs.size {
		head, err := r.Peek(record.HeaderSize)
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w: %w", cs.base, pos, errCleanAborted, err)
		}
		size, err := record.PeekBatchSize(head)
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w", cs.base, pos, err)
		}
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			// A segment cut by a truncation after the plan was made.
			return fmt.Errorf("segment %d at %d: %w: %w", cs.base, pos, errCleanAborted, err)
		}
		h, err := record.CheckBatch(buf)
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w", cs.base, pos, err)
		}
		if err := fn(buf, h); err != nil {
			return err
		}
		pos += int64(size)
	}
	return nil
}

// createCleanedSegment makes the empty "<base>.log.cleaned" segment a group
// is rewritten into, replacing leftovers of an earlier attempt.
func createCleanedSegment(dir string, base int64, cfg LogConfig, now time.Time) (*segment, error) {
	paths := cleanedPaths(dir, base, cleanedSuffix)
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("create cleaned segment %s: %w", p, err)
		}
	}
	f, err := os.OpenFile(paths[0], os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create cleaned segment %s: %w", paths[0], err)
	}
	s := &segment{baseOffset: base, dir: dir, file: f, nextOffset: base, created: now,
		maxTimestamp: -1, offsetOfMaxTimestamp: -1, rollingTimestamp: -1, indexIntervalBytes: cfg.IndexIntervalBytes,
		txn: newTxnIndex(cleanedTxnIndexPath(dir, base, cleanedSuffix))}
	if err := os.Remove(s.txn.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.Close()
		return nil, fmt.Errorf("create cleaned segment %s: %w", paths[0], err)
	}
	if s.index, err = OpenOffsetIndex(paths[1], base, cfg.SegmentIndexBytes); err != nil {
		f.Close()
		os.Remove(paths[0])
		return nil, fmt.Errorf("create cleaned segment %s: %w", paths[0], err)
	}
	if s.timeIndex, err = OpenTimeIndex(paths[2], base, cfg.SegmentIndexBytes); err != nil {
		s.index.Close()
		f.Close()
		os.Remove(paths[0])
		os.Remove(paths[1])
		return nil, fmt.Errorf("create cleaned segment %s: %w", paths[0], err)
	}
	return s, nil
}

// cleanedPaths are a segment's log, index and time index paths with a
// compaction suffix.
func cleanedPaths(dir string, base int64, suffix string) [3]string {
	return [3]string{
		filepath.Join(dir, segmentFileName(base, logSuffix)+suffix),
		filepath.Join(dir, segmentFileName(base, indexSuffix)+suffix),
		filepath.Join(dir, segmentFileName(base, timeIndexSuffix)+suffix),
	}
}

// cleanedTxnIndexPath is a segment's txn index path with a compaction
// suffix (none for the final name).
func cleanedTxnIndexPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segmentFileName(base, txnIndexSuffix)+suffix)
}

// discardCleanedSegment closes and removes a cleaned segment that was not
// swapped in. (segment.closeAndRemove would remove the final names, which
// belong to the live segment.)
func discardCleanedSegment(s *segment) error {
	logPath := filepath.Join(s.dir, segmentFileName(s.baseOffset, logSuffix)+cleanedSuffix)
	paths := []string{s.index.Path(), s.timeIndex.Path(), logPath}
	err := errors.Join(s.index.Close(), s.timeIndex.Close(), s.txn.remove(), s.file.Close())
	for _, p := range paths {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("discard cleaned segment %d: %w", s.baseOffset, err)
	}
	return nil
}

// replaceSegments swaps the cleaned segment (nil: the group cleaned to
// nothing) in for the group, under the log's lock, Kafka's
// UnifiedLog.replaceSegments: cleaned → swap (the commit point), old
// segments → deleted, swap → final. It fails with errCleanAborted, the log
// untouched, when the group's segments are no longer the log's.
func (l *Log) replaceSegments(p *cleanPlan, group []cleanSegment, cleaned *segment) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("log closed: %w", errCleanAborted)
	}
	if l.structureVersion != p.version {
		return fmt.Errorf("log truncated while cleaning: %w", errCleanAborted)
	}
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset >= group[0].base })
	if i+len(group) >= len(l.segments) {
		return fmt.Errorf("segments gone while cleaning: %w", errCleanAborted)
	}
	for k, cs := range group {
		if l.segments[i+k] != cs.seg {
			return fmt.Errorf("segment %d replaced while cleaning: %w", cs.base, errCleanAborted)
		}
	}
	if cleaned != nil {
		if err := renameCleaned(cleaned, cleanedSuffix, swapSuffix); err != nil {
			return err
		}
		if err := syncDir(l.path()); err != nil {
			return err
		}
	}
	// From here the swap is committed: a crash completes it on open, so
	// the in-memory log must follow even if a rename below fails.
	for _, cs := range group {
		l.scheduleDelete(cs.seg)
	}
	var errs []error
	if cleaned != nil {
		errs = append(errs, renameCleaned(cleaned, swapSuffix, ""))
	}
	errs = append(errs, syncDir(l.path()))
	rest := append([]*segment(nil), l.segments[i+len(group):]...)
	l.segments = l.segments[:i]
	if cleaned != nil {
		l.segments = append(l.segments, cleaned)
	}
	l.segments = append(l.segments, rest...)
	l.structureVersion++
	p.version = l.structureVersion // the pass's own change
	if i == 0 && l.segments[0].baseOffset > l.logStartOffset {
		l.logStartOffset = l.segments[0].baseOffset
		l.highWatermark = max(l.highWatermark, l.logStartOffset)
		l.recoveryPoint = max(l.recoveryPoint, l.logStartOffset)
		l.producerStateLogStartMovedLocked()
		l.epochs.TruncateFromStart(l.logStartOffset)
	}
	return errors.Join(errs...)
}

// renameCleaned renames a cleaned segment's files from one suffix to
// another, indexes first and the log last: a "<base>.log.swap" on disk
// then means that the whole swap was committed.
func renameCleaned(s *segment, from, to string) error {
	src, dst := cleanedPaths(s.dir, s.baseOffset, from), cleanedPaths(s.dir, s.baseOffset, to)
	if err := s.index.RenameTo(dst[1]); err != nil {
		return err
	}
	if err := s.timeIndex.RenameTo(dst[2]); err != nil {
		return err
	}
	if err := s.txn.renameTo(cleanedTxnIndexPath(s.dir, s.baseOffset, to)); err != nil {
		return err
	}
	if err := os.Rename(src[0], dst[0]); err != nil {
		return fmt.Errorf("rename %s: %w", src[0], err)
	}
	return nil
}

// completeInterruptedSwaps is the compaction part of opening a log
// (Kafka's LogLoader on .cleaned and .swap files): leftovers of an
// unfinished rewrite are deleted; a committed swap ("<base>.log.swap") is
// completed: every segment whose base lies in its offset range is deleted
// and the swap file becomes "<base>.log". Its indexes are deleted too and
// the returned bases must be recovered in full (the indexes rebuilt).
//
// The range is read from the swap file itself, as Kafka does: a segment
// of the group lying past the swap's last batch (all of its records were
// removed) survives. The log is still correct, offsets increasing, only
// less compacted; the next pass (from the unchanged checkpoint) cleans it.
func completeInterruptedSwaps(dir string, entries []os.DirEntry) (map[int64]bool, error) {
	var swaps []int64
	logs := map[int64]bool{}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, cleanedSuffix):
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		case strings.HasSuffix(name, logSuffix+swapSuffix):
			if base, ok := parseSegmentBase(name); ok {
				swaps = append(swaps, base)
			}
		case strings.HasSuffix(name, logSuffix):
			if base, ok := parseSegmentBase(name); ok {
				logs[base] = true
			}
		}
	}
	// Index swaps without a log swap belong to a rewrite that never
	// committed (the log is renamed last).
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, indexSuffix+swapSuffix) || strings.HasSuffix(name, timeIndexSuffix+swapSuffix) ||
			strings.HasSuffix(name, txnIndexSuffix+swapSuffix) {
			if base, ok := parseSegmentBase(name); ok && !slices.Contains(swaps, base) {
				if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, err
				}
			}
		}
	}
	if len(swaps) == 0 {
		return nil, nil
	}
	recovered := map[int64]bool{}
	for _, base := range swaps {
		swapPath := filepath.Join(dir, segmentFileName(base, logSuffix)+swapSuffix)
		next, err := scanNextOffset(swapPath, base)
		if err != nil {
			return nil, err
		}
		for old := range logs {
			if old > base && old < next {
				for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
					if err := os.Remove(filepath.Join(dir, segmentFileName(old, suffix))); err != nil && !errors.Is(err, os.ErrNotExist) {
						return nil, err
					}
				}
				delete(logs, old)
			}
		}
		for _, name := range []string{segmentFileName(base, indexSuffix), segmentFileName(base, timeIndexSuffix),
			segmentFileName(base, indexSuffix) + swapSuffix, segmentFileName(base, timeIndexSuffix) + swapSuffix} {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		// The cleaned transaction index was fsynced before the swap
		// committed and is kept: a "<base>.txnindex.swap" replaces the old
		// segment's file; without one, either it was renamed into place
		// already (the old file was renamed .deleted before) or the
		// cleaned segment has no aborted transaction, and neither had the
		// segments it replaces.
		txnSwap := cleanedTxnIndexPath(dir, base, swapSuffix)
		if err := os.Rename(txnSwap, cleanedTxnIndexPath(dir, base, "")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("complete swap of segment %d: %w", base, err)
		}
		if err := os.Rename(swapPath, filepath.Join(dir, segmentFileName(base, logSuffix))); err != nil {
			return nil, fmt.Errorf("complete swap of segment %d: %w", base, err)
		}
		logs[base] = true
		recovered[base] = true
	}
	return recovered, syncDir(dir)
}

// scanNextOffset reads the batch headers of a segment file and returns the
// offset after its last whole batch (base when it has none). It stops at
// the first torn or corrupt batch: recovery deals with that tail.
func scanNextOffset(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("scan %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("scan %s: %w", path, err)
	}
	next := base
	head := make([]byte, record.HeaderSize)
	for pos := int64(0); pos+record.HeaderSize <= st.Size(); {
		if _, err := f.ReadAt(head, pos); err != nil {
			return 0, fmt.Errorf("scan %s at %d: %w", path, pos, err)
		}
		h, err := record.ParseHeader(head)
		if err != nil || pos+int64(h.Size()) > st.Size() {
			break
		}
		next = max(next, h.NextOffset())
		pos += int64(h.Size())
	}
	return next, nil
}
