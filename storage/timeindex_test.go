package storage

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func openTestTimeIndex(t *testing.T, base int64, maxBytes int) *TimeIndex {
	t.Helper()
	x, err := OpenTimeIndex(filepath.Join(t.TempDir(), "00000000000000000000.timeindex"), base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func mustMaybeAppend(t *testing.T, x *TimeIndex, ts, offset int64) {
	t.Helper()
	if err := x.MaybeAppend(ts, offset); err != nil {
		t.Fatalf("MaybeAppend(%d, %d): %v", ts, offset, err)
	}
}

type timeEntry struct {
	ts  int64
	rel int32
}

// timeIndexBytes encodes entries in Kafka's .timeindex format.
func timeIndexBytes(entries ...timeEntry) []byte {
	b := make([]byte, 0, 12*len(entries))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, uint32(e.rel))
	}
	return b
}

func TestTimeIndexLookup(t *testing.T) {
	const base = 200
	x := openTestTimeIndex(t, base, 1200)
	if ts, off := x.Lookup(math.MaxInt64); ts != -1 || off != base {
		t.Fatalf("empty index: Lookup = (%d, %d), want (-1, %d)", ts, off, base)
	}
	mustMaybeAppend(t, x, 1000, base+3)
	mustMaybeAppend(t, x, 2000, base+9)
	mustMaybeAppend(t, x, 3000, base+9) // same offset, later timestamp: allowed
	mustMaybeAppend(t, x, 4000, base+40)
	tests := []struct {
		name    string
		target  int64
		wantTS  int64
		wantOff int64
	}{
		{"target before first timestamp finds nothing", 999, -1, base},
		{"target at first timestamp", 1000, 1000, base + 3},
		{"target between timestamps gives the entry below", 2999, 2000, base + 9},
		{"target at a timestamp gives that entry", 3000, 3000, base + 9},
		{"target past the end gives the last entry", math.MaxInt64, 4000, base + 40},
		{"negative target finds nothing", -5, -1, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, off := x.Lookup(tt.target)
			if ts != tt.wantTS || off != tt.wantOff {
				t.Fatalf("Lookup(%d) = (%d, %d), want (%d, %d)", tt.target, ts, off, tt.wantTS, tt.wantOff)
			}
		})
	}
}

func TestTimeIndexMaybeAppend(t *testing.T) {
	const base = 10
	tests := []struct {
		name        string
		ts, offset  int64
		wantErr     error
		wantEntries int
	}{
		{"later timestamp and offset is appended", 600, 30, nil, 2},
		{"equal timestamp is ignored, as on roll and close", 500, 20, nil, 1},
		{"equal timestamp at a later offset is ignored", 500, 25, nil, 1},
		{"earlier timestamp is rejected", 499, 25, ErrInvalidIndexEntry, 1},
		{"earlier offset is rejected", 600, 19, ErrInvalidIndexEntry, 1},
		{"relative offset beyond int32 is rejected", 600, base + math.MaxInt32 + 1, ErrInvalidIndexEntry, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := openTestTimeIndex(t, base, 1200)
			mustMaybeAppend(t, x, 500, 20)
			err := x.MaybeAppend(tt.ts, tt.offset)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("MaybeAppend(%d, %d) = %v, want %v", tt.ts, tt.offset, err, tt.wantErr)
			}
			if x.Entries() != tt.wantEntries {
				t.Fatalf("%d entries, want %d", x.Entries(), tt.wantEntries)
			}
		})
	}
	t.Run("no timestamp on an empty index is ignored", func(t *testing.T) {
		x := openTestTimeIndex(t, base, 1200)
		mustMaybeAppend(t, x, -1, base)
		if x.Entries() != 0 {
			t.Fatalf("%d entries, want 0", x.Entries())
		}
		if ts, off := x.LastEntry(); ts != -1 || off != base {
			t.Fatalf("LastEntry = (%d, %d)", ts, off)
		}
	})
	t.Run("offset below base is rejected on an empty index", func(t *testing.T) {
		x := openTestTimeIndex(t, base, 1200)
		if err := x.MaybeAppend(5, base-1); !errors.Is(err, ErrInvalidIndexEntry) {
			t.Fatalf("MaybeAppend = %v, want ErrInvalidIndexEntry", err)
		}
	})
}

func TestTimeIndexIsFullKeepsOneSlotForRoll(t *testing.T) {
	x := openTestTimeIndex(t, 0, 3*12+11) // 3 entries
	mustMaybeAppend(t, x, 10, 1)
	if x.IsFull() {
		t.Fatal("full after 1 of 3 entries")
	}
	mustMaybeAppend(t, x, 20, 2)
	if !x.IsFull() {
		t.Fatal("not full with only the reserved slot left")
	}
	// The segment's final entry on roll still fits...
	mustMaybeAppend(t, x, 30, 3)
	// ...and re-appending it (close after roll) is a no-op, not an error.
	mustMaybeAppend(t, x, 30, 3)
	if err := x.MaybeAppend(40, 4); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("MaybeAppend beyond capacity = %v, want ErrIndexFull", err)
	}
}

func TestTimeIndexTruncateTo(t *testing.T) {
	tests := []struct {
		name       string
		truncateTo int64
		wantTS     int64
		wantOff    int64
		wantN      int
	}{
		{"truncate at an entry's offset drops it", 120, 2000, 110, 2},
		{"truncate between offsets keeps the entry below", 115, 2000, 110, 2},
		{"truncate at base empties the index", 100, -1, 100, 0},
		{"truncate past the end keeps everything", 1000, 3000, 120, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := openTestTimeIndex(t, 100, 1200)
			mustMaybeAppend(t, x, 1000, 100)
			mustMaybeAppend(t, x, 2000, 110)
			mustMaybeAppend(t, x, 3000, 120)
			x.TruncateTo(tt.truncateTo)
			ts, off := x.LastEntry()
			if x.Entries() != tt.wantN || ts != tt.wantTS || off != tt.wantOff {
				t.Fatalf("after TruncateTo(%d): %d entries, last (%d, %d); want %d, (%d, %d)",
					tt.truncateTo, x.Entries(), ts, off, tt.wantN, tt.wantTS, tt.wantOff)
			}
		})
	}
}

func TestTimeIndexCloseTrimsAndReopenRestores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000050.timeindex")
	x, err := OpenTimeIndex(path, 50, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != 996 {
		t.Fatalf("preallocated size = %d, want 996 (1000 rounded down to 12s)", got)
	}
	mustMaybeAppend(t, x, 1700000000000, 50)
	mustMaybeAppend(t, x, 1700000000500, 77)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := timeIndexBytes(timeEntry{1700000000000, 0}, timeEntry{1700000000500, 27}); string(b) != string(want) {
		t.Fatalf("file after Close = %x, want %x", b, want)
	}
	y, err := OpenTimeIndex(path, 50, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if err := y.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	if ts, off := y.LastEntry(); ts != 1700000000500 || off != 77 {
		t.Fatalf("reopened LastEntry = (%d, %d)", ts, off)
	}
	if ts, off := y.Lookup(1700000000499); ts != 1700000000000 || off != 50 {
		t.Fatalf("reopened Lookup = (%d, %d)", ts, off)
	}
	mustMaybeAppend(t, y, 1700000000600, 80)
	if err := y.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != 36 {
		t.Fatalf("trimmed size = %d, want 36", got)
	}
	if err := y.RenameTo(path + ".deleted"); err != nil {
		t.Fatal(err)
	}
	if err := y.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestTimeIndexSanityCheck(t *testing.T) {
	const base = 1000
	tests := []struct {
		name    string
		file    []byte
		corrupt bool
	}{
		{"empty file is sane", nil, false},
		{"single entry is sane", timeIndexBytes(timeEntry{5, 0}), false},
		{"increasing entries are sane", timeIndexBytes(timeEntry{5, 0}, timeEntry{9, 4}, timeEntry{12, 4}), false},
		{"zeroed tail after a crash is corrupt", append(timeIndexBytes(timeEntry{5, 0}, timeEntry{9, 4}), make([]byte, 120)...), true},
		{"entirely zeroed preallocated file is corrupt", make([]byte, 120), true},
		{"last timestamp below first is corrupt", timeIndexBytes(timeEntry{9, 0}, timeEntry{5, 4}), true},
		{"last offset below first is corrupt", timeIndexBytes(timeEntry{5, 4}, timeEntry{9, 2}), true},
		{"last offset below base is corrupt", timeIndexBytes(timeEntry{5, -1}), true},
		{"torn last entry is corrupt", timeIndexBytes(timeEntry{5, 0}, timeEntry{9, 4})[:20], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.timeindex")
			if err := os.WriteFile(path, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			x, err := OpenTimeIndex(path, base, 1200)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			err = x.SanityCheck()
			if tt.corrupt != errors.Is(err, ErrCorruptIndex) || (!tt.corrupt && err != nil) {
				t.Fatalf("SanityCheck = %v, corrupt want %v", err, tt.corrupt)
			}
			x.Lookup(7)
			x.LastEntry()
			x.Reset()
			mustMaybeAppend(t, x, 1, base)
		})
	}
}

func TestOpenIndexRejectsBadArguments(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenTimeIndex(filepath.Join(dir, "a.timeindex"), 0, -1); err == nil {
		t.Error("negative max size accepted")
	}
	if _, err := OpenOffsetIndex(filepath.Join(dir, "a.index"), -1, 100); err == nil {
		t.Error("negative base offset accepted")
	}
	if _, err := OpenOffsetIndex(filepath.Join(dir, "missing", "a.index"), 0, 100); err == nil {
		t.Error("open in a missing directory succeeded")
	}
}
