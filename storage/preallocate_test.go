package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/keelstream/keel/network/record"
)

// allocated is a file's size and the bytes of disk blocks it holds.
func allocated(t *testing.T, path string) (size, blocks int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size(), st.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestPreallocate checks preallocate: a new segment reserves segment.bytes
// of blocks without changing its size, a rolled segment and a closed log
// give back what they did not fill (a roll, a close), a reopened log reads every batch, and
// a preallocation left by a crash is given back when its segment rolls.
func TestPreallocate(t *testing.T) {
	dir := partitionDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	probe, err := os.Create(filepath.Join(t.TempDir(), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(probe.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
		t.Skipf("this filesystem cannot preallocate: %v", err)
	}
	probe.Close()

	const segmentBytes = 1 << 20
	cfg := LogConfig{SegmentBytes: segmentBytes, Preallocate: true}
	l := openTestLog(t, dir, OpenOptions{Config: cfg})
	batch := buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 100), 100)
	appendOK(t, l, batch, 0)
	first := filepath.Join(dir, segmentFileName(0, logSuffix))
	if size, blocks := allocated(t, first); size != int64(len(batch)) || blocks < segmentBytes {
		t.Fatalf("new segment: size %d, %d bytes allocated; want %d and at least %d", size, blocks, len(batch), segmentBytes)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 100), 100), 0)
	if size, blocks := allocated(t, first); blocks > size+preallocatedSlack {
		t.Fatalf("rolled segment: size %d, still %d bytes allocated", size, blocks)
	}
	second := filepath.Join(dir, segmentFileName(l.LogEndOffset()-100, logSuffix))
	if size, blocks := allocated(t, second); blocks < segmentBytes {
		t.Fatalf("the new active segment: size %d, %d bytes allocated; want at least %d", size, blocks, segmentBytes)
	}
	want := readAll(t, l, 0, l.LogEndOffset())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if size, blocks := allocated(t, second); blocks > size+preallocatedSlack {
		t.Fatalf("closed log's active segment: size %d, still %d bytes allocated", size, blocks)
	}

	// A crash leaves the reservation; the reopened log reads the same
	// batches and gives the blocks back when the segment rolls.
	f, err := os.OpenFile(second, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, segmentBytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openTestLog(t, dir, OpenOptions{Config: LogConfig{SegmentBytes: segmentBytes}})
	if got := readAll(t, l, 0, l.LogEndOffset()); !bytes.Equal(got, want) {
		t.Fatalf("reopened log reads %d bytes, want %d", len(got), len(want))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if size, blocks := allocated(t, second); blocks > size+preallocatedSlack {
		t.Fatalf("segment preallocated before a crash, rolled: size %d, still %d bytes allocated", size, blocks)
	}
	// Without preallocate the new active segment grows as it is written.
	appendOK(t, l, batch, 0)
	active := filepath.Join(dir, segmentFileName(l.LogEndOffset()-100, logSuffix))
	if size, blocks := allocated(t, active); blocks > size+preallocatedSlack {
		t.Fatalf("segment without preallocate: size %d, %d bytes allocated", size, blocks)
	}
}

// TestPreallocateAfterTruncate checks that a follower's truncation keeps
// the active segment reserved: the file shrinking to its new size gives
// back the blocks reserved past it, and a truncation into an older, rolled
// segment makes that one active again.
func TestPreallocateAfterTruncate(t *testing.T) {
	dir := partitionDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const segmentBytes = 1 << 20
	l := openTestLog(t, dir, OpenOptions{Config: LogConfig{SegmentBytes: segmentBytes, Preallocate: true}})
	batch := func() []byte { return buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 100), 100) }
	appendOK(t, l, batch(), 0)
	first := filepath.Join(dir, segmentFileName(0, logSuffix))
	if _, blocks := allocated(t, first); blocks < segmentBytes {
		t.Skipf("this filesystem did not preallocate (%d bytes allocated)", blocks)
	}
	appendOK(t, l, batch(), 0)
	appendOK(t, l, batch(), 0) // offsets 0-299 in the first segment

	// Within the active segment.
	if err := l.TruncateTo(200); err != nil {
		t.Fatal(err)
	}
	if size, blocks := allocated(t, first); blocks < segmentBytes {
		t.Fatalf("active segment truncated: size %d, %d bytes allocated; want at least %d", size, blocks, segmentBytes)
	}

	// Into a rolled segment, which becomes the active one.
	appendOK(t, l, batch(), 0) // 200-299
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendOK(t, l, batch(), 0) // 300-399 in the second segment
	if size, blocks := allocated(t, first); blocks > size+preallocatedSlack {
		t.Fatalf("rolled segment: size %d, still %d bytes allocated", size, blocks)
	}
	if err := l.TruncateTo(100); err != nil {
		t.Fatal(err)
	}
	size, blocks := allocated(t, first)
	if size != int64(len(batch())) || blocks < segmentBytes {
		t.Fatalf("rolled segment truncated into: size %d, %d bytes allocated; want %d and at least %d", size, blocks, len(batch()), segmentBytes)
	}
	appendOK(t, l, batch(), 0)
	if got := l.LogEndOffset(); got != 200 {
		t.Fatalf("log end offset %d after appending to the truncated log, want 200", got)
	}
}
