package storage

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/keelstream/keel/network/record"
)

// File name suffixes, as Kafka's LogFileUtils spells them.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
	// producerSnapshotSuffix (producer_snapshot.go) and txnIndexSuffix
	// (txn_index.go) are the others.
)

// segmentFileName is the 20-digit zero-padded base offset Kafka names
// segment files by, so that a directory listing sorts by offset.
func segmentFileName(baseOffset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", baseOffset, suffix)
}

// parseSegmentBase parses the base offset out of "00000000000000000042.log".
func parseSegmentBase(name string) (int64, bool) {
	i := strings.IndexByte(name, '.')
	if i != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[:i], 10, 64)
	return n, err == nil && n >= 0
}

// segment is one .log file with its sparse offset and time indexes. All of
// its mutable state is guarded by the owning Log's lock: appends, truncation
// and recovery hold it exclusively, reads hold it shared. The file itself is
// read with pread (ReadAt) and sendfile, which are safe concurrently with
// appends past the region read.
type segment struct {
	baseOffset int64
	dir        string
	file       *os.File
	index      *OffsetIndex
	timeIndex  *TimeIndex
	// txn is the aborted transaction index (txn_index.go); txnRebuild says
	// recovery discarded it and the producer state scan at open rebuilds
	// it (producer_snapshot.go).
	txn        *txnIndex
	txnRebuild bool
	// faultLogged is set once the log has reported an index fault.
	faultLogged atomic.Bool

	// size is the number of valid bytes in file; appends write at size.
	size int64
	// writebackFrom is where the bytes not yet handed to the kernel's
	// writeback start (writeback); writebacks counts the hand-overs.
	writebackFrom int64
	writebacks    atomic.Int64
	// nextOffset is the offset after the segment's last batch (baseOffset
	// when empty): the log end offset while the segment is active.
	nextOffset int64
	// maxTimestamp and offsetOfMaxTimestamp track the batch with the largest
	// timestamp (for time retention and ListOffsets -3); -1 when unknown.
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
	// rollingTimestamp is the first batch's max timestamp, which segment.ms
	// counts from (Kafka's rollingBasedTimestamp); -1 when empty.
	rollingTimestamp int64
	// created is when this process created or opened the segment: the
	// fallback clock for segment.ms when batches carry no timestamps.
	created time.Time
	// rollJitterMs is how much earlier than segment.ms this segment rolls
	// (LogConfig.SegmentJitterMs).
	rollJitterMs int64

	indexIntervalBytes       int
	bytesSinceLastIndexEntry int
	// recent holds the headers of the last batches appended, contiguous up
	// to size: those since the sparse index's next-to-last entry (at most
	// maxRecentBatches), recent[recentMark:] those since its last. A
	// consumer or follower near the tail fetches from there, and
	// translateOffset would otherwise pread every header from the index
	// entry on: about index.interval.bytes / batch size reads per fetch.
	// Empty when unknown (after open, recovery start, truncation) and once
	// the segment is no longer active.
	recent     []recentBatch
	recentMark int
	// deleted is set once the files carry the .deleted suffix.
	deleted bool
	// preallocated says the file may hold blocks reserved past size
	// (preallocate): they are released when the segment stops being
	// the active one, or is closed.
	preallocated bool
}

// preallocatedSlack is how many bytes a file's blocks may exceed its size
// by (the last block's rest, a filesystem's own reservations) before
// openSegment takes them for a preallocation left by a crash.
const preallocatedSlack = 64 << 10

func (s *segment) logPath() string {
	return filepath.Join(s.dir, segmentFileName(s.baseOffset, logSuffix))
}

// createSegment makes a new, empty segment at baseOffset. Existing files of
// the same name (left by a truncation that crashed midway) are replaced.
func createSegment(dir string, baseOffset int64, cfg LogConfig, now time.Time) (*segment, error) {
	path := filepath.Join(dir, segmentFileName(baseOffset, logSuffix))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", path, err)
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := os.Remove(filepath.Join(dir, segmentFileName(baseOffset, suffix))); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.Close()
			return nil, fmt.Errorf("create segment %s: %w", path, err)
		}
	}
	s := &segment{baseOffset: baseOffset, dir: dir, file: f, nextOffset: baseOffset, created: now,
		maxTimestamp: -1, offsetOfMaxTimestamp: -1, rollingTimestamp: -1, indexIntervalBytes: cfg.IndexIntervalBytes,
		rollJitterMs: cfg.randomSegmentJitter()}
	if err := s.openIndexes(cfg); err != nil {
		f.Close()
		return nil, err
	}
	if cfg.Preallocate {
		s.preallocate(cfg.SegmentBytes)
	}
	return s, nil
}

// preallocate reserves the file's blocks up to n bytes (preallocate,
// Kafka's file.preallocate), so that appends fill blocks already
// allocated, in one extent, instead of growing the file a write at a
// time. The reservation keeps the file's size (FALLOC_FL_KEEP_SIZE):
// readers and recovery still see exactly the bytes appended, where
// Kafka's sparse setLength leaves a zero tail for recovery to cut. It
// is an optimisation only: a filesystem without fallocate, or one too
// full to reserve n bytes, appends as without it.
func (s *segment) preallocate(n int64) {
	if err := unix.Fallocate(int(s.file.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, n); err == nil {
		s.preallocated = true
	}
}

// releasePreallocated gives back the blocks reserved past the segment's
// size (preallocate), by truncating the file to its size.
func (s *segment) releasePreallocated() error {
	if !s.preallocated {
		return nil
	}
	if err := s.file.Truncate(s.size); err != nil {
		return fmt.Errorf("release the blocks preallocated past %d in %s: %w", s.size, s.logPath(), err)
	}
	s.preallocated = false
	return nil
}

// openSegment opens an existing segment's files. It does not scan the log:
// the caller either recovers it or calls loadTail.
func openSegment(dir string, baseOffset int64, cfg LogConfig, now time.Time) (*segment, error) {
	path := filepath.Join(dir, segmentFileName(baseOffset, logSuffix))
	f, err := os.OpenFile(path, os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat segment %s: %w", path, err)
	}
	s := &segment{baseOffset: baseOffset, dir: dir, file: f, size: st.Size(), writebackFrom: st.Size() &^ (writebackPage - 1), nextOffset: baseOffset, created: now,
		maxTimestamp: -1, offsetOfMaxTimestamp: -1, rollingTimestamp: -1, indexIntervalBytes: cfg.IndexIntervalBytes,
		rollJitterMs: cfg.randomSegmentJitter()}
	// Blocks past the size are a preallocation a crash left in place:
	// the segment releases them when it stops being the active one.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blocks*512 > st.Size()+preallocatedSlack {
		s.preallocated = true
	}
	if err := s.openIndexes(cfg); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *segment) openIndexes(cfg LogConfig) error {
	s.txn = newTxnIndex(filepath.Join(s.dir, segmentFileName(s.baseOffset, txnIndexSuffix)))
	var err error
	s.index, err = OpenOffsetIndex(filepath.Join(s.dir, segmentFileName(s.baseOffset, indexSuffix)), s.baseOffset, cfg.SegmentIndexBytes)
	if err != nil {
		return fmt.Errorf("segment %d: %w", s.baseOffset, err)
	}
	s.timeIndex, err = OpenTimeIndex(filepath.Join(s.dir, segmentFileName(s.baseOffset, timeIndexSuffix)), s.baseOffset, cfg.SegmentIndexBytes)
	if err != nil {
		s.index.Close()
		return fmt.Errorf("segment %d: %w", s.baseOffset, err)
	}
	return nil
}

// recentBatch is a batch header in segment.recent and its position.
type recentBatch struct {
	pos int64
	h   record.BatchHeader
}

// maxRecentBatches bounds segment.recent when index.interval.bytes is large
// and batches small: past it the oldest half is dropped.
const maxRecentBatches = 256

// remember adds the batch h at pos to s.recent; indexed reports that the
// sparse index got an entry for it, which ends the interval before.
func (s *segment) remember(h record.BatchHeader, pos int64, indexed bool) {
	if n := len(s.recent); n > 0 && s.recent[n-1].pos+int64(s.recent[n-1].h.Size()) != pos {
		s.forgetRecent() // not contiguous: cannot happen, but never serve a wrong header
	}
	drop := 0
	if indexed {
		drop = s.recentMark // keep the interval that just ended
	}
	if len(s.recent)-drop >= maxRecentBatches {
		drop = len(s.recent) / 2
	}
	if drop > 0 {
		s.recent = s.recent[:copy(s.recent, s.recent[drop:])]
		s.recentMark = max(0, s.recentMark-drop)
	}
	if indexed {
		s.recentMark = len(s.recent)
	}
	s.recent = append(s.recent, recentBatch{pos: pos, h: h})
}

// forgetRecent empties s.recent and releases its memory.
func (s *segment) forgetRecent() {
	s.recent, s.recentMark = nil, 0
}

// recentAt is the remembered header of the batch at pos, if any.
func (s *segment) recentAt(pos int64) (record.BatchHeader, bool) {
	if len(s.recent) == 0 || pos < s.recent[0].pos {
		return record.BatchHeader{}, false
	}
	i, ok := slices.BinarySearchFunc(s.recent, pos, func(r recentBatch, p int64) int { return cmp.Compare(r.pos, p) })
	if !ok {
		return record.BatchHeader{}, false
	}
	return s.recent[i].h, true
}

// headerAt reads the batch header at position pos with one pread into buf
// (HeaderSize bytes), or takes it from s.recent. io.EOF means pos is at or
// past the end.
func (s *segment) headerAt(pos int64, buf []byte) (record.BatchHeader, error) {
	if pos+record.HeaderSize > s.size {
		if pos >= s.size {
			return record.BatchHeader{}, io.EOF
		}
		return record.BatchHeader{}, fmt.Errorf("segment %s: partial batch header at %d: %w", s.logPath(), pos, record.ErrCorruptMessage)
	}
	if h, ok := s.recentAt(pos); ok {
		return h, nil
	}
	return s.readHeaderAt(pos, buf)
}

// readHeaderAt is headerAt from the file, never from s.recent; pos+HeaderSize
// must be within size.
func (s *segment) readHeaderAt(pos int64, buf []byte) (record.BatchHeader, error) {
	if _, err := s.file.ReadAt(buf[:record.HeaderSize], pos); err != nil {
		return record.BatchHeader{}, fmt.Errorf("read %s at %d: %w", s.logPath(), pos, err)
	}
	h, err := record.ParseHeader(buf)
	if err != nil {
		return h, fmt.Errorf("segment %s at %d: %w", s.logPath(), pos, err)
	}
	return h, nil
}

// translateOffset finds the first batch whose last offset is >= target,
// starting from the sparse index's hint. It returns that batch's position and
// header, or io.EOF when no batch in the segment reaches target.
func (s *segment) translateOffset(target int64, buf []byte) (int64, record.BatchHeader, error) {
	_, pos := s.index.Lookup(target)
	p := int64(pos)
	for {
		h, err := s.headerAt(p, buf)
		if err != nil {
			return 0, h, err
		}
		if h.LastOffset() >= target {
			return p, h, nil
		}
		p += int64(h.Size())
	}
}

// append writes already-validated batches (with final offsets) at the end of
// the segment and indexes them. batches is a concatenation of whole batches.
func (s *segment) append(batches []byte) error {
	if _, err := s.file.WriteAt(batches, s.size); err != nil {
		return fmt.Errorf("append to %s: %w: %w", s.logPath(), ErrStorage, err)
	}
	pos := s.size
	for rest := batches; len(rest) > 0; {
		h, err := record.ParseHeader(rest)
		if err != nil {
			return fmt.Errorf("append to %s: %w", s.logPath(), err)
		}
		s.indexBatch(h, pos)
		pos += int64(h.Size())
		rest = rest[h.Size():]
	}
	s.size = pos
	return nil
}

// writeback returns the segment's whole pages appended since the last call
// once they are at least every bytes, for the appender to hand to the
// kernel's writeback (writeback.go), and the zero writeback otherwise. The
// page being appended to is left out, so that it is not written twice.
// With dropBehind, the hand-over also drops from the page cache the
// segment's pages from its start to dropBehind bytes before the pages
// handed over: an earlier hand-over sent those to disk. The Log's lock is
// held.
func (s *segment) writeback(every, dropBehind int64) writeback {
	end := s.size &^ (writebackPage - 1)
	s.writebackFrom = min(s.writebackFrom, end) // truncated meanwhile
	if every <= 0 || end-s.writebackFrom < every {
		return writeback{}
	}
	wb := writeback{file: s.file, from: s.writebackFrom, n: end - s.writebackFrom, started: &s.writebacks}
	if dropBehind > 0 {
		wb.dropTo = max((s.writebackFrom-dropBehind)&^(writebackPage-1), 0)
	}
	s.writebackFrom = end
	return wb
}

// indexFault returns the faults met reading the segment's indexes (an I/O
// error, or a file cut under its mapping), nil when there were none. A
// faulted index answers lookups as if empty and makes the segment roll.
//
// Safe to call from any goroutine.
func (s *segment) indexFault() error {
	if !s.index.faulted() && !s.timeIndex.faulted() {
		return nil
	}
	return errors.Join(s.index.Fault(), s.timeIndex.Fault())
}

// indexBatch updates the in-memory trackers and the sparse indexes for the
// batch h at pos, as Kafka's LogSegment.append does: an index entry once
// index.interval.bytes have accumulated since the previous one.
func (s *segment) indexBatch(h record.BatchHeader, pos int64) {
	if s.rollingTimestamp < 0 && s.nextOffset == s.baseOffset {
		s.rollingTimestamp = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp = h.MaxTimestamp
		s.offsetOfMaxTimestamp = h.BaseOffset
	}
	indexed := false
	if s.bytesSinceLastIndexEntry >= s.indexIntervalBytes {
		// Errors (a full index) are impossible here: the log rolls before
		// an index fills. An entry that cannot be written only makes the
		// index sparser, never wrong.
		_ = s.index.Append(h.BaseOffset, int32(pos))
		_ = s.timeIndex.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp)
		s.bytesSinceLastIndexEntry = 0
		indexed = true
	}
	s.remember(h, pos, indexed)
	s.bytesSinceLastIndexEntry += h.Size()
	s.nextOffset = h.NextOffset()
}

// recover re-reads the whole segment, validating every batch (framing, CRC,
// offsets increasing from at least minOffset), rebuilds both indexes, and
// truncates the file at the first invalid byte. It returns how many bytes
// were cut.
func (s *segment) recover(minOffset int64) (truncated int64, err error) {
	s.forgetRecent()
	s.index.Reset()
	s.timeIndex.Reset()
	s.bytesSinceLastIndexEntry = 0
	s.nextOffset = s.baseOffset
	s.maxTimestamp, s.offsetOfMaxTimestamp, s.rollingTimestamp = -1, -1, -1
	if minOffset < s.baseOffset {
		minOffset = s.baseOffset
	}
	r := io.NewSectionReader(s.file, 0, s.size)
	var buf []byte
	head := make([]byte, record.HeaderSize)
	var pos int64
	for pos < s.size {
		if _, err := io.ReadFull(r, head); err != nil {
			break // a torn header at the tail
		}
		size, err := record.PeekBatchSize(head)
		if err != nil || int64(size) > s.size-pos || size < record.HeaderSize {
			break
		}
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		copy(buf, head)
		if _, err := io.ReadFull(r, buf[record.HeaderSize:]); err != nil {
			break
		}
		h, err := record.CheckBatch(buf)
		if err != nil || h.BaseOffset < minOffset || h.LastOffset()-s.baseOffset > int64(^uint32(0)>>1) {
			break
		}
		s.indexBatch(h, pos)
		minOffset = h.NextOffset()
		pos += int64(size)
	}
	truncated = s.size - pos
	if truncated > 0 {
		if err := s.file.Truncate(pos); err != nil {
			return 0, fmt.Errorf("truncate %s to %d: %w", s.logPath(), pos, err)
		}
		s.size = pos
	}
	return truncated, nil
}

// loadTail restores the in-memory trackers of a segment that needs no
// recovery: O(index interval), not O(segment). It scans from the last index
// entry to the end for the next offset, and takes the max timestamp from
// the time index (whose last entry close() wrote).
func (s *segment) loadTail() error {
	s.forgetRecent()
	buf := make([]byte, record.HeaderSize)
	if first, err := s.headerAt(0, buf); err == nil {
		s.rollingTimestamp = first.MaxTimestamp
	} else if !errors.Is(err, io.EOF) {
		return err
	}
	ts, off := s.timeIndex.LastEntry()
	s.maxTimestamp, s.offsetOfMaxTimestamp = ts, off
	if ts < 0 {
		s.offsetOfMaxTimestamp = -1
	}
	lastIndexed, pos := s.index.Lookup(int64(^uint64(0) >> 1))
	_ = lastIndexed
	if err := s.indexFault(); err != nil {
		return err // the caller rebuilds the indexes from the log
	}
	p := int64(pos)
	s.nextOffset = s.baseOffset
	for {
		h, err := s.headerAt(p, buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if p+int64(h.Size()) > s.size {
			return fmt.Errorf("segment %s: batch at %d runs past the end: %w", s.logPath(), p, record.ErrCorruptMessage)
		}
		// A whole but stale batch (offsets going backwards) tiles the file
		// as well as a good one; trusting it would move the log end back.
		if h.BaseOffset < s.nextOffset {
			return fmt.Errorf("segment %s: batch at %d has base offset %d below %d: %w", s.logPath(), p, h.BaseOffset, s.nextOffset, record.ErrCorruptMessage)
		}
		if h.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTimestamp = h.MaxTimestamp, h.BaseOffset
		}
		s.nextOffset = h.NextOffset()
		p += int64(h.Size())
	}
	if p != s.size {
		return fmt.Errorf("segment %s: batches end at %d of %d bytes: %w", s.logPath(), p, s.size, record.ErrCorruptMessage)
	}
	s.bytesSinceLastIndexEntry = int(s.size - int64(pos))
	return nil
}

// truncateTo drops every batch whose last offset is >= offset. It returns
// the number of bytes removed.
func (s *segment) truncateTo(offset int64) (int64, error) {
	buf := make([]byte, record.HeaderSize)
	pos, first, err := s.translateOffset(offset, buf)
	if errors.Is(err, io.EOF) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s.forgetRecent() // before the file shrinks under remembered headers
	if err := s.file.Truncate(pos); err != nil {
		return 0, fmt.Errorf("truncate %s to %d: %w", s.logPath(), pos, err)
	}
	removed := s.size - pos
	s.size = pos
	// Index entries name batches by base offset, so an entry for the batch
	// holding offset has an offset below it yet points at bytes just cut:
	// truncate the indexes at that batch's base offset, not at offset.
	s.index.TruncateTo(first.BaseOffset)
	s.timeIndex.TruncateTo(first.BaseOffset)
	// Rebuild the trackers from what is left, cheaply, as after a restart.
	s.rollingTimestamp = -1
	if err := s.loadTail(); err != nil {
		return removed, err
	}
	return removed, nil
}

// largestTimestamp is what time retention compares against: the newest
// record's timestamp, or the file's modification time when the batches carry
// none (Kafka's LogSegment.largestTimestamp).
func (s *segment) largestTimestamp() int64 {
	if s.maxTimestamp > 0 {
		return s.maxTimestamp
	}
	if st, err := s.file.Stat(); err == nil {
		return st.ModTime().UnixMilli()
	}
	return -1
}

// onBecomeInactive is called when the segment stops being the active one:
// the time index gets its final entry and both indexes shrink to their used
// size, as Kafka does on roll.
func (s *segment) onBecomeInactive() error {
	s.forgetRecent() // reads at the tail now go to the next segment
	if s.maxTimestamp >= 0 {
		_ = s.timeIndex.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp)
	}
	if err := s.releasePreallocated(); err != nil {
		return err
	}
	if err := s.index.TrimToValidSize(); err != nil {
		return err
	}
	return s.timeIndex.TrimToValidSize()
}

// flush fsyncs the log file and the indexes.
func (s *segment) flush() error {
	if err := s.syncRecords(); err != nil {
		return err
	}
	if err := s.index.Flush(); err != nil {
		return err
	}
	if err := s.txn.sync(); err != nil {
		return err
	}
	return s.timeIndex.Flush()
}

// syncRecords fsyncs the segment file, not the indexes.
func (s *segment) syncRecords() error {
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w: %w", s.logPath(), ErrStorage, err)
	}
	return nil
}

// close finalises and closes the files (used at clean shutdown).
func (s *segment) close() error {
	if s.maxTimestamp >= 0 {
		_ = s.timeIndex.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp)
	}
	err := errors.Join(s.releasePreallocated(), s.index.Close(), s.timeIndex.Close(), s.txn.close(), s.file.Close())
	if err != nil {
		return fmt.Errorf("close segment %s: %w", s.logPath(), err)
	}
	return nil
}

// renameDeleted renames all the files with the .deleted suffix, marking
// them for asynchronous removal (Kafka's file.delete.delay.ms): open file
// handles, used by in-flight sendfile reads, stay valid.
func (s *segment) renameDeleted() error {
	lp := s.logPath()
	if err := os.Rename(lp, lp+deletedSuffix); err != nil {
		return fmt.Errorf("rename %s: %w", lp, err)
	}
	s.deleted = true
	if err := s.index.RenameTo(s.index.Path() + deletedSuffix); err != nil {
		return err
	}
	if err := s.txn.renameTo(s.txn.path + deletedSuffix); err != nil {
		return err
	}
	return s.timeIndex.RenameTo(s.timeIndex.Path() + deletedSuffix)
}

// closeAndRemove closes the files and removes them (after renameDeleted, or
// directly for a segment dropped by truncation). A deleted segment's log
// file, the large one, goes to the deleter open (deleter.go), which frees
// it a step at a time off the log's lock; a nil deleter removes it here.
func (s *segment) closeAndRemove(d *fileDeleter) error {
	lp := s.logPath()
	if s.deleted {
		lp += deletedSuffix
	}
	paths := []string{s.index.Path(), s.timeIndex.Path()}
	// Another deleted segment with this base offset may have taken these
	// names since (a truncated suffix re-appended and deleted again): its
	// files are removed here too, which is what both wanted, and a file
	// already gone is no error.
	err := errors.Join(s.index.Discard(), s.timeIndex.Discard(), s.txn.remove())
	if s.deleted && d != nil {
		err = errors.Join(err, d.addFile(lp, s.file))
	} else {
		err = errors.Join(err, s.file.Close())
		paths = append(paths, lp)
	}
	for _, p := range paths {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("remove segment %d in %s: %w", s.baseOffset, s.dir, err)
	}
	return nil
}
