package storage

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openTestOffsetIndex opens an offset index in a fresh temp dir and closes it
// at cleanup.
func openTestOffsetIndex(t *testing.T, base int64, maxBytes int) *OffsetIndex {
	t.Helper()
	x, err := OpenOffsetIndex(filepath.Join(t.TempDir(), "00000000000000000000.index"), base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func mustAppend(t *testing.T, x *OffsetIndex, offset int64, pos int32) {
	t.Helper()
	if err := x.Append(offset, pos); err != nil {
		t.Fatalf("Append(%d, %d): %v", offset, pos, err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// offsetIndexBytes encodes entries (relative offset, position) in Kafka's
// .index format.
func offsetIndexBytes(entries ...[2]int32) []byte {
	b := make([]byte, 0, 8*len(entries))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
	}
	return b
}

func TestOffsetIndexLookup(t *testing.T) {
	const base = 1000
	x := openTestOffsetIndex(t, base, 1024)
	if off, pos := x.Lookup(base + 5); off != base || pos != 0 {
		t.Fatalf("empty index: Lookup = (%d, %d), want (%d, 0)", off, pos, base)
	}
	mustAppend(t, x, base, 0)
	mustAppend(t, x, base+10, 4096)
	mustAppend(t, x, base+20, 8200)
	tests := []struct {
		name    string
		target  int64
		wantOff int64
		wantPos int32
	}{
		{"target below base offset gives segment start", base - 1, base, 0},
		{"target at first entry gives first entry", base, base, 0},
		{"target between entries gives the entry below", base + 9, base, 0},
		{"target at an entry gives that entry", base + 10, base + 10, 4096},
		{"target just past an entry gives that entry", base + 11, base + 10, 4096},
		{"target at last entry gives last entry", base + 20, base + 20, 8200},
		{"target far past the end gives last entry", math.MaxInt64, base + 20, 8200},
		{"negative target gives segment start", math.MinInt64, base, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, pos := x.Lookup(tt.target)
			if off != tt.wantOff || pos != tt.wantPos {
				t.Fatalf("Lookup(%d) = (%d, %d), want (%d, %d)", tt.target, off, pos, tt.wantOff, tt.wantPos)
			}
		})
	}
}

func TestOffsetIndexLookupWithoutEntryAtBase(t *testing.T) {
	x := openTestOffsetIndex(t, 50, 1024)
	mustAppend(t, x, 60, 300)
	if off, pos := x.Lookup(55); off != 50 || pos != 0 {
		t.Fatalf("Lookup(55) = (%d, %d), want segment start (50, 0)", off, pos)
	}
}

func TestOffsetIndexAppendRejectsInvalidEntries(t *testing.T) {
	const base = 100
	tests := []struct {
		name   string
		offset int64
		pos    int32
	}{
		{"offset equal to last offset", base + 10, 500},
		{"offset below last offset", base + 5, 500},
		{"offset below base offset", base - 1, 500},
		{"relative offset beyond int32", base + math.MaxInt32 + 1, 500},
		{"negative position", base + 11, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := openTestOffsetIndex(t, base, 1024)
			mustAppend(t, x, base+10, 100)
			err := x.Append(tt.offset, tt.pos)
			if !errors.Is(err, ErrInvalidIndexEntry) {
				t.Fatalf("Append(%d, %d) = %v, want ErrInvalidIndexEntry", tt.offset, tt.pos, err)
			}
			if x.Entries() != 1 || x.LastOffset() != base+10 {
				t.Fatalf("rejected append changed the index: %d entries, last %d", x.Entries(), x.LastOffset())
			}
		})
	}
	t.Run("largest relative offset is accepted", func(t *testing.T) {
		x := openTestOffsetIndex(t, base, 1024)
		mustAppend(t, x, base+math.MaxInt32, 7)
		if off, pos := x.Lookup(math.MaxInt64); off != base+math.MaxInt32 || pos != 7 {
			t.Fatalf("Lookup = (%d, %d)", off, pos)
		}
	})
}

func TestOffsetIndexFullAtRoundedDownSize(t *testing.T) {
	// 29 bytes round down to 3 whole entries.
	x := openTestOffsetIndex(t, 0, 3*8+5)
	for i := range 3 {
		if x.IsFull() {
			t.Fatalf("IsFull after %d entries, want room for 3", i)
		}
		mustAppend(t, x, int64(i), int32(i*10))
	}
	if !x.IsFull() {
		t.Fatal("IsFull = false after 3 entries")
	}
	if err := x.Append(3, 30); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("Append to a full index = %v, want ErrIndexFull", err)
	}
	if got := fileSize(t, x.Path()); got != 24 {
		t.Fatalf("preallocated size = %d, want 24", got)
	}
}

func TestOffsetIndexZeroSizeHasNoMapping(t *testing.T) {
	x := openTestOffsetIndex(t, 7, 0)
	if !x.IsFull() {
		t.Fatal("zero-size index not full")
	}
	if err := x.Append(7, 0); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("Append = %v, want ErrIndexFull", err)
	}
	if off, pos := x.Lookup(100); off != 7 || pos != 0 {
		t.Fatalf("Lookup = (%d, %d)", off, pos)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	if err := x.Resize(16); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, x, 7, 0)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, x.Path()); got != 8 {
		t.Fatalf("size after close = %d, want 8", got)
	}
}

func TestOffsetIndexTruncateTo(t *testing.T) {
	tests := []struct {
		name        string
		truncateTo  int64
		wantEntries int
		wantLast    int64
	}{
		{"truncate at an entry drops it", 20, 2, 10},
		{"truncate between entries keeps the one below", 15, 2, 10},
		{"truncate past the end keeps everything", 100, 4, 30},
		{"truncate at the first entry empties the index", 0, 0, 0},
		{"truncate below base empties the index", -5, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := openTestOffsetIndex(t, 0, 1024)
			for i := range 4 {
				mustAppend(t, x, int64(i*10), int32(i*100))
			}
			x.TruncateTo(tt.truncateTo)
			if x.Entries() != tt.wantEntries || x.LastOffset() != tt.wantLast {
				t.Fatalf("after TruncateTo(%d): %d entries, last %d; want %d, %d",
					tt.truncateTo, x.Entries(), x.LastOffset(), tt.wantEntries, tt.wantLast)
			}
			// Appending resumes right after the surviving entries.
			mustAppend(t, x, tt.wantLast+1, 999)
			if off, pos := x.Lookup(math.MaxInt64); off != tt.wantLast+1 || pos != 999 {
				t.Fatalf("Lookup after re-append = (%d, %d)", off, pos)
			}
		})
	}
}

func TestOffsetIndexTruncatedEntriesAreZeroedOnDisk(t *testing.T) {
	x := openTestOffsetIndex(t, 0, 1024)
	for i := range 4 {
		mustAppend(t, x, int64(i*10+1), int32(i*100+1))
	}
	x.TruncateTo(21)
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(x.Path())
	if err != nil {
		t.Fatal(err)
	}
	want := offsetIndexBytes([2]int32{1, 1}, [2]int32{11, 101})
	if string(b[:16]) != string(want) {
		t.Fatalf("kept entries = %x, want %x", b[:16], want)
	}
	for i, c := range b[16:] {
		if c != 0 {
			t.Fatalf("byte %d after truncation = %#x, want 0", 16+i, c)
		}
	}
}

func TestOffsetIndexResetDropsEverything(t *testing.T) {
	x := openTestOffsetIndex(t, 10, 1024)
	mustAppend(t, x, 10, 0)
	mustAppend(t, x, 20, 50)
	x.Reset()
	if x.Entries() != 0 || x.LastOffset() != 10 {
		t.Fatalf("after Reset: %d entries, last %d", x.Entries(), x.LastOffset())
	}
	if off, pos := x.Lookup(30); off != 10 || pos != 0 {
		t.Fatalf("Lookup after Reset = (%d, %d)", off, pos)
	}
	mustAppend(t, x, 15, 40)
}

func TestOffsetIndexCloseTrimsAndReopenRestores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000100.index")
	x, err := OpenOffsetIndex(path, 100, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != 4096 {
		t.Fatalf("preallocated size = %d, want 4096", got)
	}
	mustAppend(t, x, 100, 0)
	mustAppend(t, x, 105, 4100)
	mustAppend(t, x, 2000000, 1<<30)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's format, byte for byte: relative offset then position, big-endian.
	want := offsetIndexBytes([2]int32{0, 0}, [2]int32{5, 4100}, [2]int32{2000000 - 100, 1 << 30})
	if string(b) != string(want) {
		t.Fatalf("file after Close = %x, want %x", b, want)
	}

	y, err := OpenOffsetIndex(path, 100, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if err := y.SanityCheck(); err != nil {
		t.Fatalf("SanityCheck of a cleanly closed index: %v", err)
	}
	if y.Entries() != 3 || y.LastOffset() != 2000000 {
		t.Fatalf("reopened: %d entries, last %d", y.Entries(), y.LastOffset())
	}
	if off, pos := y.Lookup(106); off != 105 || pos != 4100 {
		t.Fatalf("reopened Lookup(106) = (%d, %d)", off, pos)
	}
	if got := fileSize(t, path); got != 4096 {
		t.Fatalf("reopened size = %d, want re-extended to 4096", got)
	}
	mustAppend(t, y, 2000001, 1<<30+10)
}

func TestOffsetIndexTrimThenResize(t *testing.T) {
	x := openTestOffsetIndex(t, 0, 1024)
	mustAppend(t, x, 1, 10)
	mustAppend(t, x, 2, 20)
	if err := x.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, x.Path()); got != 16 {
		t.Fatalf("trimmed size = %d, want 16", got)
	}
	if !x.IsFull() {
		t.Fatal("trimmed index not full")
	}
	if err := x.Append(3, 30); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("Append after trim = %v, want ErrIndexFull", err)
	}
	if off, pos := x.Lookup(2); off != 2 || pos != 20 {
		t.Fatalf("Lookup after trim = (%d, %d)", off, pos)
	}
	if err := x.Resize(1024); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, x, 3, 30)
	if off, pos := x.Lookup(5); off != 3 || pos != 30 {
		t.Fatalf("Lookup after resize = (%d, %d)", off, pos)
	}
	// A resize below the entries in use keeps them.
	if err := x.Resize(8); err != nil {
		t.Fatal(err)
	}
	if x.Entries() != 3 || fileSize(t, x.Path()) != 24 {
		t.Fatalf("resize below used size: %d entries, %d bytes", x.Entries(), fileSize(t, x.Path()))
	}
	if err := x.Resize(-1); err == nil {
		t.Fatal("Resize(-1) succeeded")
	}
}

func TestOffsetIndexRenameKeepsMapping(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "00000000000000000000.index")
	x, err := OpenOffsetIndex(path, 0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, x, 1, 10)
	if err := x.RenameTo(path + ".deleted"); err != nil {
		t.Fatal(err)
	}
	if x.Path() != path+".deleted" {
		t.Fatalf("Path = %s", x.Path())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("old path still exists: %v", err)
	}
	mustAppend(t, x, 2, 20)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path + ".deleted")
	if err != nil {
		t.Fatal(err)
	}
	if want := offsetIndexBytes([2]int32{1, 10}, [2]int32{2, 20}); string(b) != string(want) {
		t.Fatalf("renamed file = %x, want %x", b, want)
	}
	if err := x.RenameTo(filepath.Join(dir, "missing", "x.index")); err == nil {
		t.Fatal("rename into a missing directory succeeded")
	}
}

func TestOffsetIndexSanityCheck(t *testing.T) {
	const base = 500
	tests := []struct {
		name    string
		file    []byte
		corrupt bool
	}{
		{"empty file is sane", nil, false},
		{"one entry at base is sane", offsetIndexBytes([2]int32{0, 0}), false},
		{"increasing entries are sane", offsetIndexBytes([2]int32{0, 0}, [2]int32{3, 70}, [2]int32{9, 300}), false},
		{"zeroed tail after a crash is corrupt", append(offsetIndexBytes([2]int32{0, 0}, [2]int32{3, 70}), make([]byte, 64)...), true},
		{"zeroed tail after a crash without entry at base is corrupt", append(offsetIndexBytes([2]int32{4, 0}), make([]byte, 64)...), true},
		{"entirely zeroed preallocated file is corrupt", make([]byte, 64), true},
		{"last offset below base is corrupt", offsetIndexBytes([2]int32{-3, 0}), true},
		{"last offset below first is corrupt", offsetIndexBytes([2]int32{5, 0}, [2]int32{2, 70}), true},
		{"negative position is corrupt", offsetIndexBytes([2]int32{5, -1}), true},
		{"torn last entry is corrupt", offsetIndexBytes([2]int32{0, 0}, [2]int32{3, 70})[:13], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.index")
			if err := os.WriteFile(path, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			x, err := OpenOffsetIndex(path, base, 1024)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			err = x.SanityCheck()
			if tt.corrupt != errors.Is(err, ErrCorruptIndex) || (!tt.corrupt && err != nil) {
				t.Fatalf("SanityCheck = %v, corrupt want %v", err, tt.corrupt)
			}
			// Whatever the file held, lookups must not panic and a rebuild must work.
			x.Lookup(base + 4)
			x.Reset()
			mustAppend(t, x, base, 0)
		})
	}
}

func TestOffsetIndexAfterClose(t *testing.T) {
	x := openTestOffsetIndex(t, 3, 1024)
	mustAppend(t, x, 4, 8)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(5, 9); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Append after Close = %v, want os.ErrClosed", err)
	}
	if off, pos := x.Lookup(10); off != 3 || pos != 0 {
		t.Fatalf("Lookup after Close = (%d, %d)", off, pos)
	}
	for name, err := range map[string]error{"Trim": x.TrimToValidSize(), "Resize": x.Resize(64), "Flush": x.Flush()} {
		if name != "Flush" && !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s after Close = %v, want os.ErrClosed", name, err)
		}
		if name == "Flush" && err != nil {
			t.Errorf("Flush after Close = %v, want nil", err)
		}
	}
}

// The warm-tail search must give exactly what a linear scan gives, whatever
// the number of entries and the target.
func TestOffsetIndexLookupMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 1023, 1024, 1025, 1026, 5000} {
		x := openTestOffsetIndex(t, 1<<40, (n+1)*8)
		offs := make([]int64, n)
		next := int64(1 << 40)
		for i := range n {
			next += 1 + rng.Int64N(20)
			offs[i] = next
			mustAppend(t, x, next, int32(i))
		}
		for range 2000 {
			target := (1 << 40) + rng.Int64N(next-(1<<40)+40) - 20
			wantOff, wantPos := int64(1<<40), int32(0)
			for i, o := range offs {
				if o <= target {
					wantOff, wantPos = o, int32(i)
				}
			}
			if off, pos := x.Lookup(target); off != wantOff || pos != wantPos {
				t.Fatalf("n=%d Lookup(%d) = (%d, %d), want (%d, %d)", n, target, off, pos, wantOff, wantPos)
			}
		}
	}
}

// Lookups run on fetch goroutines while the log's writer appends and
// truncates; run with -race.
func TestOffsetIndexConcurrentLookupDuringAppend(t *testing.T) {
	const n = 20000
	x := openTestOffsetIndex(t, 0, 1024)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for target := int64(0); ; target = (target + 7919) % (3 * n) {
				select {
				case <-done:
					return
				default:
				}
				off, pos := x.Lookup(target)
				if off > target && off != 0 || int64(pos) != off*3 {
					t.Errorf("Lookup(%d) = (%d, %d): inconsistent", target, off, pos)
					return
				}
			}
		}()
	}
	for i := int64(1); i <= n; i++ {
		if err := x.Append(i*2, int32(i*6)); errors.Is(err, ErrIndexFull) {
			if err := x.Resize(int(i) * 16); err != nil {
				t.Error(err)
				break
			}
			if err := x.Append(i*2, int32(i*6)); err != nil {
				t.Error(err)
				break
			}
		} else if err != nil {
			t.Error(err)
			break
		}
		if i%5000 == 0 {
			x.TruncateTo(i)
			if err := x.TrimToValidSize(); err != nil {
				t.Error(err)
			}
		}
	}
	close(done)
	wg.Wait()
}

// After a crash an untrimmed index reads as its whole zero-filled
// preallocation; recovery's Reset must drop those pages, not write zeros
// over them (that would dirty 10 MiB per recovered segment).
func TestResetOfAPreallocatedIndexDoesNotDirtyItsPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 20); err != nil { // sparse, as preallocation leaves it
		t.Fatal(err)
	}
	f.Close()
	x, err := OpenOffsetIndex(path, 0, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Entries() == 0 {
		t.Fatal("the zero-filled file should read as entries before Reset")
	}
	x.Reset()
	if x.Entries() != 0 {
		t.Fatalf("%d entries after Reset", x.Entries())
	}
	if err := x.Append(5, 100); err != nil {
		t.Fatal(err)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if allocated := st.Blocks * 512; allocated > 1<<20 {
		t.Fatalf("Reset left %d bytes allocated", allocated)
	}
	if off, pos := x.Lookup(7); off != 5 || pos != 100 {
		t.Fatalf("lookup after reset: %d %d", off, pos)
	}
}

// A segment's first index entries land in a fresh, sparse 10 MiB index.
// The kernel's default read-ahead around a mapping's fault zero-filled a
// whole window of page cache for the first one, 2–3.5 ms under the log lock
// on this machine's ext4, where one page takes ~20 µs: every new partition
// and every roll stalled its producers. Appending entries must bring in
// only the pages written.
func TestIndexAppendFaultsInOnlyThePagesWritten(t *testing.T) {
	x, ti := openIndexPair(t, 0)
	for i := range 3 {
		mustAppend(t, x, int64(i), int32(4096*i))
		if err := ti.MaybeAppend(int64(1000+i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*mmapIndex{&x.mmapIndex, &ti.mmapIndex} {
		if n := residentPages(t, m.data); n != 1 {
			t.Errorf("%s: %d of its %d pages resident after 3 entries, want 1", filepath.Base(m.path), n, (len(m.data)+os.Getpagesize()-1)/os.Getpagesize())
		}
	}
}

// residentPages counts the pages of a file mapping in the page cache
// (mincore(2)).
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	page := os.Getpagesize()
	vec := make([]byte, (len(b)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestLookupPositionFindsTheLastBoundaryWithinBothBounds(t *testing.T) {
	x := openTestOffsetIndex(t, 100, 1024)
	for i, e := range [][2]int64{{100, 0}, {110, 500}, {120, 1000}, {130, 1500}} {
		if err := x.Append(e[0], int32(e[1])); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	cases := []struct {
		maxPos, maxOff int64
		off            int64
		pos            int32
		ok             bool
	}{
		{1200, 1000, 120, 1000, true}, // bounded by position
		{5000, 115, 110, 500, true},   // bounded by offset
		{1500, 130, 130, 1500, true},  // both bounds inclusive
		{499, 1000, 100, 0, true},
		{-1, 1000, 0, 0, false},
		{5000, 99, 0, 0, false},
	}
	for _, c := range cases {
		off, pos, ok := x.LookupPosition(c.maxPos, c.maxOff)
		if off != c.off || pos != c.pos || ok != c.ok {
			t.Errorf("LookupPosition(%d, %d) = %d, %d, %t; want %d, %d, %t", c.maxPos, c.maxOff, off, pos, ok, c.off, c.pos, c.ok)
		}
	}
}

// A write into the mapping that the file cannot back faults with SIGBUS: on
// a full disk the sparse page gets no block. Cutting the file under the
// mapping after its first page faults the same way for the next page. The
// append must fail with ErrStorage, not kill the process, and leave the
// index as it was.
func TestIndexAppendFaultIsAnError(t *testing.T) {
	x, ti := openIndexPair(t, 0)
	page := os.Getpagesize()
	for i := range page / offsetIndexEntrySize { // the first page, full
		mustAppend(t, x, int64(i), int32(i))
	}
	for i := range page / timeIndexEntrySize { // the next entry straddles the page end
		if err := ti.MaybeAppend(int64(100+i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{x.Path(), ti.Path()} {
		if err := os.Truncate(p, int64(page)); err != nil {
			t.Fatal(err)
		}
	}
	wantX, wantT := x.Entries(), ti.Entries()
	if err := x.Append(int64(wantX), int32(wantX)); !errors.Is(err, ErrStorage) {
		t.Fatalf("offset index append into an unbacked page: %v, want ErrStorage", err)
	}
	if err := ti.MaybeAppend(int64(100+wantT), int64(wantT)); !errors.Is(err, ErrStorage) {
		t.Fatalf("time index append into an unbacked page: %v, want ErrStorage", err)
	}
	if x.Entries() != wantX || ti.Entries() != wantT {
		t.Fatalf("entries %d and %d after failed appends, want %d and %d", x.Entries(), ti.Entries(), wantX, wantT)
	}
	if off, _ := x.Lookup(1 << 30); off != int64(wantX-1) {
		t.Fatalf("lookup after a failed append: %d, want the last entry %d", off, wantX-1)
	}
}

// Reading a page of the mapping that the file no longer backs (cut under
// it, or a disk that fails the read with EIO) faults with SIGBUS. Every
// reader must survive it: the index records the fault, answers as if it
// were empty (a reader scans the segment from the start), reports itself
// full so an active segment rolls, and refuses appends; Reset gives it new
// pages and it works again.
func TestIndexReadFaultDegrades(t *testing.T) {
	x, ti := openIndexPair(t, 100)
	for i := range 1000 { // several pages of each
		mustAppend(t, x, int64(100+i), int32(10*i))
		if err := ti.MaybeAppend(int64(5000+i), int64(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	if off, _ := x.Lookup(600); off != 600 || x.Fault() != nil {
		t.Fatalf("before the cut: lookup %d, fault %v", off, x.Fault())
	}
	for _, p := range []string{x.Path(), ti.Path()} {
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
	}

	// The offset index: the first read faults and is recorded.
	if off, pos := x.Lookup(600); off != 100 || pos != 0 {
		t.Fatalf("lookup of a faulted index: (%d, %d), want the segment start (100, 0)", off, pos)
	}
	if err := x.Fault(); !errors.Is(err, ErrStorage) {
		t.Fatalf("fault after a faulting lookup: %v, want ErrStorage", err)
	}
	if _, _, ok := x.LookupPosition(1<<30, 1<<40); ok {
		t.Fatal("LookupPosition of a faulted index found an entry")
	}
	if got := x.LastOffset(); got != 100 {
		t.Fatalf("LastOffset of a faulted index: %d, want the base offset", got)
	}
	if !x.IsFull() {
		t.Fatal("a faulted index must report full, so that an active segment rolls")
	}
	if err := x.Append(2000, 20000); !errors.Is(err, ErrStorage) {
		t.Fatalf("append to a faulted index: %v, want ErrStorage", err)
	}
	if err := x.SanityCheck(); !errors.Is(err, ErrStorage) {
		t.Fatalf("sanity check of a faulted index: %v, want ErrStorage (the log then rebuilds it)", err)
	}
	x.TruncateTo(500)

	// The time index: the fault comes from the sanity check this time.
	if err := ti.SanityCheck(); !errors.Is(err, ErrStorage) {
		t.Fatalf("sanity check of a cut time index: %v, want ErrStorage", err)
	}
	if ts, off := ti.Lookup(5500); ts != noTimestamp || off != 100 {
		t.Fatalf("time lookup of a faulted index: (%d, %d), want (-1, 100)", ts, off)
	}
	if ts, off := ti.LastEntry(); ts != noTimestamp || off != 100 {
		t.Fatalf("last entry of a faulted index: (%d, %d), want (-1, 100)", ts, off)
	}
	if err := ti.MaybeAppend(9000, 2000); !errors.Is(err, ErrStorage) {
		t.Fatalf("append to a faulted time index: %v, want ErrStorage", err)
	}
	if !ti.IsFull() {
		t.Fatal("a faulted time index must report full")
	}
	ti.TruncateTo(500)

	// Reset (the log's rebuild) gives new pages: the index works again.
	x.Reset()
	ti.Reset()
	if x.Fault() != nil || ti.Fault() != nil || x.IsFull() || ti.IsFull() {
		t.Fatalf("after Reset: faults %v, %v", x.Fault(), ti.Fault())
	}
	mustAppend(t, x, 150, 500)
	if err := ti.MaybeAppend(7000, 150); err != nil {
		t.Fatal(err)
	}
	if off, pos := x.Lookup(160); off != 150 || pos != 500 {
		t.Fatalf("lookup after Reset: (%d, %d)", off, pos)
	}
	if ts, off := ti.Lookup(7001); ts != 7000 || off != 150 {
		t.Fatalf("time lookup after Reset: (%d, %d)", ts, off)
	}
}

// openIndexPair opens a segment's offset and time indexes (1 MiB each) in a
// fresh directory, closed when the test ends.
func openIndexPair(t *testing.T, base int64) (*OffsetIndex, *TimeIndex) {
	t.Helper()
	dir := t.TempDir()
	x, err := OpenOffsetIndex(filepath.Join(dir, segmentFileName(base, indexSuffix)), base, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	ti, err := OpenTimeIndex(filepath.Join(dir, segmentFileName(base, timeIndexSuffix)), base, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ti.Close() })
	return x, ti
}
