package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Helpers shared by the log, recovery, model and manager tests.

// testEpochMs is the fake clock's start and the base of test timestamps.
const testEpochMs = 1_700_000_000_000

// fakeClock is an injectable Now for segment.ms, retention.ms,
// file.delete.delay.ms and LogAppendTime. Safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(testEpochMs)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// partitionDir is a fresh "<topic>-<partition>" directory path.
func partitionDir(t testing.TB) string {
	return filepath.Join(t.TempDir(), "t-0")
}

// openTestLog opens a log and closes it when the test ends. Without an
// injected clock it gets a fake one standing at testEpochMs, so that test
// timestamps near testEpochMs never look days old (segment.ms would roll on
// every append, retention.ms would delete).
func openTestLog(t testing.TB, dir string, opts OpenOptions) *Log {
	t.Helper()
	if opts.Now == nil {
		opts.Now = newFakeClock().Now
	}
	l, err := OpenLog(dir, opts)
	if err != nil {
		t.Fatalf("OpenLog(%s): %v", dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// tsRange returns n timestamps start, start+1, ...
func tsRange(start int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = start + int64(i)
	}
	return out
}

// buildBatch builds a producer batch (base offset 0, no leader epoch) with
// one record per timestamp. Keys and values are derived from the position
// and timestamp, so equal arguments give equal bytes.
func buildBatch(t testing.TB, c record.Compression, timestamps []int64, valueSize int) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	b := record.NewBatchBuilder(opts)
	for i, ts := range timestamps {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte('a' + (i*7+j+int(ts%13))%26)
		}
		b.Append(ts, fmt.Appendf(nil, "key-%d", i), v, nil)
	}
	out, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// appendOK appends batches as leader in epoch and fails the test on error.
// The batches slice is rewritten in place (offsets, epoch), as the log does.
func appendOK(t testing.TB, l *Log, batches []byte, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(batches, AppendOptions{LeaderEpoch: epoch})
	if err != nil {
		t.Fatalf("AppendAsLeader: %v", err)
	}
	return info
}

// regionBytes copies read regions into memory.
func regionBytes(t testing.TB, regions []FileRegion) []byte {
	t.Helper()
	var out []byte
	for _, r := range regions {
		b := make([]byte, r.Length)
		if _, err := r.File.ReadAt(b, r.Position); err != nil {
			t.Fatalf("read region %s@%d+%d: %v", r.File.Name(), r.Position, r.Length, err)
		}
		out = append(out, b...)
	}
	return out
}

// readBytes is Read + regionBytes.
func readBytes(t testing.TB, l *Log, start int64, maxBytes int, upper int64, minOne bool) []byte {
	t.Helper()
	info, err := l.Read(start, maxBytes, upper, minOne)
	if err != nil {
		t.Fatalf("Read(%d, %d, %d, %v): %v", start, maxBytes, upper, minOne, err)
	}
	b := regionBytes(t, info.Regions)
	if int64(len(b)) != info.Bytes {
		t.Fatalf("Read(%d): ReadInfo.Bytes %d, regions hold %d", start, info.Bytes, len(b))
	}
	return b
}

// readAll reads from start until nothing more comes back below upper,
// continuing across segments as a consumer does.
func readAll(t testing.TB, l *Log, start, upper int64) []byte {
	t.Helper()
	var out []byte
	for {
		b := readBytes(t, l, start, 1<<20, upper, true)
		if len(b) == 0 {
			return out
		}
		hs := batchHeaders(t, b)
		out = append(out, b...)
		start = hs[len(hs)-1].NextOffset()
	}
}

// batchHeaders splits whole batches, checking each CRC; a partial or
// corrupt batch fails the test.
func batchHeaders(t testing.TB, b []byte) []record.BatchHeader {
	t.Helper()
	var hs []record.BatchHeader
	it := record.NewBatches(b)
	n := 0
	for batch, h, ok := it.Next(); ok; batch, h, ok = it.Next() {
		hs = append(hs, h)
		n += len(batch)
	}
	if err := it.Err(); err != nil {
		t.Fatalf("batches: %v", err)
	}
	if n != len(b) {
		t.Fatalf("batches: %d of %d bytes are whole batches", n, len(b))
	}
	return hs
}

// splitBatches returns each whole batch of b.
func splitBatches(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for pos := 0; pos < len(b); {
		size, err := record.PeekBatchSize(b[pos:])
		if err != nil || pos+size > len(b) {
			t.Fatalf("split batches at %d: size %d, err %v", pos, size, err)
		}
		out = append(out, b[pos:pos+size])
		pos += size
	}
	return out
}

// decodeRecords returns the records of one batch, decompressing it.
func decodeRecords(t testing.TB, batch []byte) []record.Record {
	t.Helper()
	h, err := record.CheckBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	rs := record.RecordsBytes(batch)
	if c := h.Compression(); c != record.CompressionNone {
		if rs, err = record.Decompress(c, nil, rs, 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	it := record.NewRecordIterator(h, rs)
	var out []record.Record
	for {
		var r record.Record
		if !it.Next(&r) {
			break
		}
		out = append(out, r)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// resign recomputes a batch's CRC after a test edited bytes it covers.
func resign(b []byte) []byte {
	crc := record.ComputeCRC(b)
	b[17], b[18], b[19], b[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return b
}

// segmentLogPaths lists the .log files of a partition directory, oldest first.
func segmentLogPaths(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// filesWithSuffix lists the names in dir ending in suffix.
func filesWithSuffix(t testing.TB, dir, suffix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if len(e.Name()) >= len(suffix) && e.Name()[len(e.Name())-len(suffix):] == suffix {
			out = append(out, e.Name())
		}
	}
	return out
}

// copyDir copies a partition directory file by file, keeping zero blocks
// as holes so preallocated indexes stay cheap to copy. Copying a log that is
// still open is a crash snapshot: the files hold what the page cache holds,
// mapped index pages included, and no clean-close trimming has happened.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	zero := make([]byte, len(buf))
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // renamed or removed meanwhile (a background checkpoint write): a crash might see either
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var size int64
		for {
			n, err := in.Read(buf)
			if n > 0 {
				if bytes.Equal(buf[:n], zero[:n]) {
					_, err = out.Seek(int64(n), io.SeekCurrent)
				} else {
					_, err = out.Write(buf[:n])
				}
				if err != nil {
					t.Fatal(err)
				}
				size += int64(n)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := out.Truncate(size); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

type indexEntry struct{ offset, position int64 }

type timeIndexEntry struct{ timestamp, offset int64 }

// offsetIndexEntries reads an offset index's live entries.
func offsetIndexEntries(x *OffsetIndex) []indexEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]indexEntry, x.entries)
	for i := range out {
		out[i] = indexEntry{x.offsetAt(i), int64(x.position(i))}
	}
	return out
}

// timeIndexEntries reads a time index's live entries.
func timeIndexEntries(x *TimeIndex) []timeIndexEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]timeIndexEntry, x.entries)
	for i := range out {
		out[i] = timeIndexEntry{x.timestampAt(i), x.offsetAt(i)}
	}
	return out
}

// checkLogInvariants re-derives every segment's state from its bytes and
// compares: batches tile the file exactly with increasing offsets, the
// in-memory trackers (size, next offset, max timestamp) match, every offset
// index entry points at the start of the batch with that base offset, and
// every time index entry (T, O) names the first batch whose max timestamp
// reached T, with every earlier batch below T. It also checks the log-level
// order log start <= high watermark <= log end and recovery point <= log end.
func checkLogInvariants(t testing.TB, l *Log) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	leo := l.active().nextOffset
	if l.logStartOffset < l.segments[0].baseOffset || l.logStartOffset > leo {
		t.Fatalf("log start %d outside [first base %d, LEO %d]", l.logStartOffset, l.segments[0].baseOffset, leo)
	}
	if l.highWatermark < l.logStartOffset || l.highWatermark > leo {
		t.Fatalf("high watermark %d outside [log start %d, LEO %d]", l.highWatermark, l.logStartOffset, leo)
	}
	if l.recoveryPoint > leo {
		t.Fatalf("recovery point %d above LEO %d", l.recoveryPoint, leo)
	}
	if l.durableOffset > leo {
		t.Fatalf("durable offset %d above LEO %d", l.durableOffset, leo)
	}
	prevNext := int64(-1)
	head := make([]byte, record.HeaderSize)
	for i, s := range l.segments {
		if s.baseOffset < prevNext {
			t.Fatalf("segment %d base %d below previous segment's next offset %d", i, s.baseOffset, prevNext)
		}
		starts := map[int64]int64{} // position -> base offset
		byBase := map[int64]record.BatchHeader{}
		var bases []int64
		maxTS, offMaxTS := int64(-1), int64(-1)
		next := s.baseOffset
		var pos int64
		for pos < s.size {
			if pos+record.HeaderSize > s.size {
				t.Fatalf("segment %d: partial batch header at %d of %d", s.baseOffset, pos, s.size)
			}
			h, err := s.readHeaderAt(pos, head) // the file's, not the remembered one
			if err != nil {
				t.Fatalf("segment %d at %d: %v", s.baseOffset, pos, err)
			}
			if rh, ok := s.recentAt(pos); ok && rh != h {
				t.Fatalf("segment %d at %d: remembered header %+v, file has %+v", s.baseOffset, pos, rh, h)
			}
			if h.BaseOffset < next {
				t.Fatalf("segment %d at %d: base offset %d below %d", s.baseOffset, pos, h.BaseOffset, next)
			}
			starts[pos] = h.BaseOffset
			byBase[h.BaseOffset] = h
			bases = append(bases, h.BaseOffset)
			if h.MaxTimestamp > maxTS {
				maxTS, offMaxTS = h.MaxTimestamp, h.BaseOffset
			}
			next = h.NextOffset()
			pos += int64(h.Size())
		}
		if pos != s.size {
			t.Fatalf("segment %d: batches end at %d, size %d", s.baseOffset, pos, s.size)
		}
		for _, r := range s.recent {
			if _, ok := starts[r.pos]; !ok {
				t.Fatalf("segment %d: a remembered header at %d where no batch starts", s.baseOffset, r.pos)
			}
		}
		if st, err := s.file.Stat(); err != nil || st.Size() != s.size {
			t.Fatalf("segment %d: file size %v (err %v), tracked %d", s.baseOffset, st.Size(), err, s.size)
		}
		if next != s.nextOffset {
			t.Fatalf("segment %d: next offset %d, tracked %d", s.baseOffset, next, s.nextOffset)
		}
		if maxTS != s.maxTimestamp || (maxTS >= 0 && offMaxTS != s.offsetOfMaxTimestamp) {
			t.Fatalf("segment %d: max timestamp %d at %d, tracked %d at %d", s.baseOffset, maxTS, offMaxTS, s.maxTimestamp, s.offsetOfMaxTimestamp)
		}
		prevOff := int64(-1)
		for _, e := range offsetIndexEntries(s.index) {
			if e.offset <= prevOff {
				t.Fatalf("segment %d: offset index not increasing at %+v", s.baseOffset, e)
			}
			prevOff = e.offset
			if base, ok := starts[e.position]; !ok || base != e.offset {
				t.Fatalf("segment %d: offset index entry %+v does not point at batch %d's start", s.baseOffset, e, e.offset)
			}
		}
		for _, e := range timeIndexEntries(s.timeIndex) {
			h, ok := byBase[e.offset]
			if !ok || h.MaxTimestamp != e.timestamp {
				t.Fatalf("segment %d: time index entry %+v names no batch with that max timestamp", s.baseOffset, e)
			}
			for _, b := range bases {
				if b >= e.offset {
					break
				}
				if byBase[b].MaxTimestamp >= e.timestamp {
					t.Fatalf("segment %d: time index entry %+v, but batch %d before it reaches %d", s.baseOffset, e, b, byBase[b].MaxTimestamp)
				}
			}
		}
		prevNext = s.nextOffset
	}
}
