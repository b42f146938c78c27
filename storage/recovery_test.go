package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/keelstream/keel/network/record"
)

// Crash recovery, pebble-style: build a log, "crash" it (close it without
// the log manager, so no clean-shutdown marker, or snapshot its files while
// it is still open), damage the tail the way a crash can, reopen, and prove
// that every batch that was complete before the damage is intact, the
// indexes are right and appends continue at the right offset.

var allCodecs = []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd}

// recoveryFixture is a closed log (the template every case copies) of
// several small segments with mixed compression and a sparse index.
type recoveryFixture struct {
	dir       string
	cfg       LogConfig
	batches   [][]byte // as stored, in offset order
	headers   []record.BatchHeader
	lastSeg   string // the last segment's .log
	lastStart int64  // position of the last batch in lastSeg
	midRP     int64  // a recovery point in the middle of the log
}

func recoveryConfig() LogConfig {
	return LogConfig{SegmentBytes: 1024, IndexIntervalBytes: 100, SegmentIndexBytes: 4096}
}

// buildRecoveryFixture writes n batches (the last one with lastCodec and six
// records) into dir and closes the log.
func buildRecoveryFixture(t testing.TB, dir string, n int, lastCodec record.Compression) recoveryFixture {
	t.Helper()
	fx := recoveryFixture{dir: dir, cfg: recoveryConfig()}
	l, err := OpenLog(dir, OpenOptions{Config: fx.cfg, Now: newFakeClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		c, records, size := allCodecs[i%len(allCodecs)], 1+i%4, 10+(i*7)%50
		if i == n-1 {
			c, records, size = lastCodec, 6, 20
		}
		ts := tsRange(t0+int64(i)*10, records)
		if i%3 == 1 {
			ts[0] -= 25 // timestamps out of order now and then
		}
		b := buildBatch(t, c, ts, size)
		appendOK(t, l, b, int32(i/8))
		fx.batches = append(fx.batches, b)
		fx.headers = append(fx.headers, batchHeaders(t, b)[0])
	}
	l.mu.RLock()
	if len(l.segments) < 4 {
		t.Fatalf("fixture has %d segments, want several", len(l.segments))
	}
	fx.midRP = l.segments[len(l.segments)/2].baseOffset + 1
	l.mu.RUnlock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	paths := segmentLogPaths(t, dir)
	fx.lastSeg = filepath.Base(paths[len(paths)-1])
	st, err := os.Stat(paths[len(paths)-1])
	if err != nil {
		t.Fatal(err)
	}
	fx.lastStart = st.Size() - int64(len(fx.batches[n-1]))
	if fx.lastStart <= 0 {
		t.Fatalf("the last batch is alone in its segment; pick another n")
	}
	return fx
}

// crashCopy copies the template to a fresh partition directory and returns
// it with the path of its last segment.
func (fx recoveryFixture) crashCopy(t testing.TB) (dir, lastSeg string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "t-0")
	copyDir(t, fx.dir, dir)
	return dir, filepath.Join(dir, fx.lastSeg)
}

// verifyRecovered checks that l holds exactly the first keep batches of the
// fixture, finds each through the indexes from its first and last offset,
// and takes an append at the right offset.
func (fx recoveryFixture) verifyRecovered(t testing.TB, l *Log, keep int) {
	t.Helper()
	leo := fx.headers[keep-1].NextOffset()
	if got := l.LogEndOffset(); got != leo {
		t.Fatalf("LEO %d, want %d (after batch %d)", got, leo, keep-1)
	}
	if got := readAll(t, l, 0, leo); !bytes.Equal(got, bytes.Join(fx.batches[:keep], nil)) {
		t.Fatalf("recovered log reads back %d bytes differing from the %d complete batches", len(got), keep)
	}
	for i, h := range fx.headers[:keep] {
		for _, off := range []int64{h.BaseOffset, h.LastOffset()} {
			got, err := l.ReadBytes(off, 1, 1<<62)
			if err != nil || !bytes.Equal(got, fx.batches[i]) {
				t.Fatalf("ReadBytes(%d) = %d bytes, %v; want batch %d", off, len(got), err, i)
			}
		}
	}
	checkLogInvariants(t, l)
	epoch, _ := l.LeaderEpochCache().LatestEpoch() // an unchanged cache writes no checkpoint
	info := appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0, 2), 10), epoch)
	if info.FirstOffset != leo {
		t.Fatalf("append after recovery at %d, want %d", info.FirstOffset, leo)
	}
	if got := batchHeaders(t, readBytes(t, l, leo, 1, 1<<62, true)); len(got) != 1 || got[0].BaseOffset != leo {
		t.Fatalf("appended batch reads back as %+v", got)
	}
	checkLogInvariants(t, l)
}

// reopenUnclean opens dir as after a crash, with the given recovery point.
func (fx recoveryFixture) reopenUnclean(t testing.TB, dir string, rp int64) *Log {
	t.Helper()
	return openTestLog(t, dir, OpenOptions{Config: fx.cfg, RecoveryPoint: rp})
}

func TestRecoveryTruncatesATornLastBatchAtEveryByte(t *testing.T) {
	codecs := []record.Compression{record.CompressionNone, record.CompressionZstd}
	if os.Getenv("KEEL_LONG") != "" {
		codecs = allCodecs
	}
	for _, c := range codecs {
		fx := buildRecoveryFixture(t, filepath.Join(t.TempDir(), "t-0"), 30, c)
		n := len(fx.batches)
		for _, rp := range []int64{0, fx.midRP} {
			for cut := fx.lastStart; cut < fx.lastStart+int64(len(fx.batches[n-1])); cut++ {
				t.Run(fmt.Sprintf("%v/recovery point %d/cut at byte %d", c, rp, cut-fx.lastStart), func(t *testing.T) {
					dir, last := fx.crashCopy(t)
					if err := os.Truncate(last, cut); err != nil {
						t.Fatal(err)
					}
					l := fx.reopenUnclean(t, dir, rp)
					if st, _ := os.Stat(last); st.Size() != fx.lastStart {
						t.Fatalf("segment is %d bytes after recovery, want the torn batch cut at %d", st.Size(), fx.lastStart)
					}
					fx.verifyRecovered(t, l, n-1)
				})
			}
		}
	}
}

func TestRecoveryDropsALastBatchWithAFlippedByte(t *testing.T) {
	fx := buildRecoveryFixture(t, filepath.Join(t.TempDir(), "t-0"), 30, record.CompressionLZ4)
	n := len(fx.batches)
	last := fx.batches[n-1]
	for pos := range len(last) {
		t.Run(fmt.Sprintf("byte %d", pos), func(t *testing.T) {
			dir, seg := fx.crashCopy(t)
			f, err := os.OpenFile(seg, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{last[pos] ^ 0x5a}, fx.lastStart+int64(pos)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			l := fx.reopenUnclean(t, dir, 0)
			switch {
			case pos < 8 || (pos >= 12 && pos < 16):
				// The base offset and the partition leader epoch are outside
				// the v2 CRC (so a broker can assign them without
				// re-checksumming), in Kafka as here. A flip there survives
				// when it still reads as a later batch; everything before it
				// is intact either way and the log stays consistent.
				got := readAll(t, l, 0, l.LogEndOffset())
				prefix := bytes.Join(fx.batches[:n-1], nil)
				if !bytes.HasPrefix(got, prefix) || (len(got) != len(prefix) && len(got) != len(prefix)+len(last)) {
					t.Fatalf("recovered %d bytes, want the %d-byte prefix and at most the flipped batch", len(got), len(prefix))
				}
				checkLogInvariants(t, l)
			default:
				fx.verifyRecovered(t, l, n-1)
			}
		})
	}
}

func TestRecoveryCutsGarbageAfterTheLastBatch(t *testing.T) {
	fx := buildRecoveryFixture(t, filepath.Join(t.TempDir(), "t-0"), 30, record.CompressionGzip)
	n := len(fx.batches)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(size int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	stale := fx.batches[n-2] // a valid batch whose offsets are already in the log
	tooLong := append(fx.batches[0][:record.HeaderSize:record.HeaderSize], 0, 0, 0)
	for _, tc := range []struct {
		name string
		tail []byte
	}{
		{"one random byte", random(1)},
		{"a partial header of random bytes", random(40)},
		{"random bytes", random(700)},
		{"a zero-filled preallocated tail", make([]byte, 4096)},
		{"a large zero-filled tail", make([]byte, 1<<20)},
		{"a stale copy of an earlier batch", stale},
		{"a header whose batch runs past the end of the file", tooLong},
		{"a stale batch followed by zeros", append(bytes.Clone(stale), make([]byte, 100)...)},
	} {
		for _, open := range []struct {
			name string
			opts OpenOptions
		}{
			{"unclean from the start", OpenOptions{RecoveryPoint: 0}},
			{"unclean from the middle", OpenOptions{RecoveryPoint: fx.midRP}},
			// A marker written although the tail is bad: the cheap open
			// finds batches not ending at the file's end and recovers.
			{"clean marker", OpenOptions{CleanShutdown: true, RecoveryPoint: fx.headers[n-1].NextOffset()}},
		} {
			t.Run(tc.name+"/"+open.name, func(t *testing.T) {
				dir, last := fx.crashCopy(t)
				f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(tc.tail); err != nil {
					t.Fatal(err)
				}
				f.Close()
				opts := open.opts
				opts.Config = fx.cfg
				l := openTestLog(t, dir, opts)
				if st, _ := os.Stat(last); st.Size() != fx.lastStart+int64(len(fx.batches[n-1])) {
					t.Fatalf("segment is %d bytes after recovery, want the garbage cut", st.Size())
				}
				fx.verifyRecovered(t, l, n)
			})
		}
	}
}

func TestRecoveryRebuildsAZeroFilledPreallocatedIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts OpenOptions
	}{
		{"unclean shutdown", OpenOptions{}},
		{"unclean shutdown, recovery point at the end", OpenOptions{RecoveryPoint: 1 << 40}},
		// Even a (wrong) clean marker cannot make the zero-filled index
		// trusted: its sanity check fails and it is rebuilt.
		{"clean marker", OpenOptions{CleanShutdown: true, RecoveryPoint: 1 << 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := partitionDir(t)
			cfg := LogConfig{SegmentBytes: 64 << 10, IndexIntervalBytes: 100} // default 10 MiB indexes
			l := openTestLog(t, dir, OpenOptions{Config: cfg})
			var all []byte
			for i := range 60 {
				b := buildBatch(t, allCodecs[i%len(allCodecs)], tsRange(t0+int64(i), 1+i%5), 40)
				appendOK(t, l, b, 0)
				all = append(all, b...)
			}
			leo := l.LogEndOffset()
			// The process dies here: the active segment's indexes are
			// still preallocated, zeros after their entries.
			crashed := filepath.Join(t.TempDir(), "t-0")
			copyDir(t, dir, crashed)
			idx := filepath.Join(crashed, segmentFileName(0, indexSuffix))
			if st, err := os.Stat(idx); err != nil || st.Size() != DefaultSegmentIndexBytes {
				t.Fatalf("crash left the index at %v bytes (%v), want it preallocated", st.Size(), err)
			}
			opts := tc.opts
			opts.Config = cfg
			r := openTestLog(t, crashed, opts)
			if r.LogEndOffset() != leo || !bytes.Equal(readAll(t, r, 0, leo), all) {
				t.Fatalf("recovered LEO %d, want %d, or different bytes", r.LogEndOffset(), leo)
			}
			checkLogInvariants(t, r)
			r.mu.RLock()
			entries := r.segments[0].index.Entries()
			r.mu.RUnlock()
			if entries == 0 || entries > len(all)/100 {
				t.Fatalf("rebuilt index has %d entries for %d bytes at index.interval.bytes 100", entries, len(all))
			}
			for off := range leo {
				hs := batchHeaders(t, readBytes(t, r, off, 1, leo, true))
				if len(hs) != 1 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
					t.Fatalf("read at %d returned %+v", off, hs)
				}
			}
			if info := appendOK(t, r, buildBatch(t, record.CompressionNone, tsRange(t0, 1), 1), 0); info.FirstOffset != leo {
				t.Fatalf("append at %d, want %d", info.FirstOffset, leo)
			}
			checkLogInvariants(t, r)
		})
	}
}

func TestCleanOpenTrustsClosedSegmentsWithoutScanningThem(t *testing.T) {
	fx := buildRecoveryFixture(t, filepath.Join(t.TempDir(), "t-0"), 30, record.CompressionNone)
	n := len(fx.batches)
	// Corrupt a record byte in the middle of segment 0's second batch: a
	// scan would see the CRC fail, an O(segments) open cannot.
	victim := 1
	pos := int64(len(fx.batches[0])) + int64(len(fx.batches[1]))/2
	damage := func(t *testing.T) string {
		dir, _ := fx.crashCopy(t)
		f, err := os.OpenFile(filepath.Join(dir, segmentFileName(0, logSuffix)), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{fx.batches[victim][len(fx.batches[victim])/2] ^ 0xff}, pos); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	leo := fx.headers[n-1].NextOffset()
	t.Run("a clean open does not read closed segments", func(t *testing.T) {
		l := openTestLog(t, damage(t), OpenOptions{Config: fx.cfg, CleanShutdown: true, RecoveryPoint: leo})
		if l.LogEndOffset() != leo {
			t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
		}
		got, err := l.ReadBytes(fx.headers[victim].BaseOffset, 1, leo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := record.CheckBatch(got); err == nil {
			t.Fatal("the corrupted batch reads back valid: the test did not corrupt it")
		}
	})
	t.Run("an unclean open below the damage does not read it either", func(t *testing.T) {
		l := openTestLog(t, damage(t), OpenOptions{Config: fx.cfg, RecoveryPoint: fx.midRP})
		if l.LogEndOffset() != leo {
			t.Fatalf("LEO %d, want %d: segments below the recovery point were scanned", l.LogEndOffset(), leo)
		}
	})
	t.Run("an unclean open from the start finds it and cuts the log there", func(t *testing.T) {
		l := openTestLog(t, damage(t), OpenOptions{Config: fx.cfg, RecoveryPoint: 0})
		fx.verifyRecovered(t, l, victim)
		if l.NumSegments() != 1 {
			t.Fatalf("%d segments: those after the corrupt batch should be gone", l.NumSegments())
		}
	})
}

// FuzzRecovery appends fuzzer bytes to a torn last segment (cut somewhere in
// its last batch, or not at all: the low 15 bits of cut, 0 for no cut; the
// top bit picks a recovery point in the middle of the log rather than 0) and
// reopens after a crash: opening must not
// fail or panic, every batch complete before the cut must survive byte for
// byte, anything recovery kept from the tail must be whole valid batches at
// later offsets, and the log must be self-consistent and writable.
func FuzzRecovery(f *testing.F) {
	fx := buildRecoveryFixture(f, filepath.Join(f.TempDir(), "t-0"), 24, record.CompressionSnappy)
	n := len(fx.batches)
	lastLen := len(fx.batches[n-1])
	f.Fuzz(func(t *testing.T, cut uint16, tail []byte) {
		dir, last := fx.crashCopy(t)
		keep := n
		if c := int(cut & 0x7fff); c != 0 { // 0 keeps the last batch whole
			keep = n - 1
			if err := os.Truncate(last, fx.lastStart+int64((c-1)%lastLen)); err != nil {
				t.Fatal(err)
			}
		}
		file, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.Write(tail); err != nil {
			t.Fatal(err)
		}
		file.Close()
		rp := int64(0)
		if cut&0x8000 != 0 {
			rp = fx.midRP
		}
		l, err := OpenLog(dir, OpenOptions{Config: fx.cfg, RecoveryPoint: rp, Now: newFakeClock().Now})
		if err != nil {
			t.Fatalf("open after a crash: %v", err)
		}
		defer l.Close()
		leo := l.LogEndOffset()
		got := readAll(t, l, 0, leo)
		prefix := bytes.Join(fx.batches[:keep], nil)
		if !bytes.HasPrefix(got, prefix) {
			t.Fatalf("the %d complete batches before the tail did not survive", keep)
		}
		next := fx.headers[keep-1].NextOffset()
		for _, h := range batchHeaders(t, got[len(prefix):]) {
			if h.BaseOffset < next {
				t.Fatalf("recovery kept a tail batch at %d below %d", h.BaseOffset, next)
			}
			next = h.NextOffset()
		}
		if leo != next {
			t.Fatalf("LEO %d, but the batches read end at %d", leo, next)
		}
		checkLogInvariants(t, l)
		if info := appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0, 1), 1), 0); info.FirstOffset != leo {
			t.Fatalf("append at %d, want %d", info.FirstOffset, leo)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := OpenLog(dir, OpenOptions{Config: fx.cfg, CleanShutdown: true, RecoveryPoint: leo + 1, Now: newFakeClock().Now})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.LogEndOffset() != leo+1 || !bytes.HasPrefix(readAll(t, r, 0, leo+1), got) {
			t.Fatalf("clean reopen after recovery: LEO %d, want %d", r.LogEndOffset(), leo+1)
		}
	})
}
