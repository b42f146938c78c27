package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// ListOffsets, truncation, log start offset and retention.

// listOffsetsFixture: three segments (rolled by hand) with timestamps out of
// order within and across batches; the maximum, 900, is first reached by the
// middle record of a compressed batch. Batch i is written in leader epoch i+1.
// Timestamps are relative to t0.
//
//	segment 0: [0-2] ts 100 300 200   [3-4] ts 250 260
//	segment 1: [5-7] zstd ts 400 900 500   [8] ts 900
//	segment 2: [9-11] ts 600 700 650
const t0 = testEpochMs

func listOffsetsFixture(t *testing.T) *Log {
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: LogConfig{IndexIntervalBytes: 1}})
	epoch := int32(0)
	for _, seg := range [][]struct {
		c  record.Compression
		ts []int64
	}{
		{{record.CompressionNone, []int64{100, 300, 200}}, {record.CompressionNone, []int64{250, 260}}},
		{{record.CompressionZstd, []int64{400, 900, 500}}, {record.CompressionNone, []int64{900}}},
		{{record.CompressionNone, []int64{600, 700, 650}}},
	} {
		for _, b := range seg {
			for i := range b.ts {
				b.ts[i] += t0
			}
		}
		if epoch > 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range seg {
			epoch++
			appendOK(t, l, buildBatch(t, b.c, b.ts, 10), epoch)
		}
	}
	if l.NumSegments() != 3 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	return l
}

func TestListOffsets(t *testing.T) {
	l := listOffsetsFixture(t)
	cases := []struct {
		name       string
		ts         int64
		wantOffset int64
		wantTS     int64
		wantEpoch  int32
	}{
		{"earliest (-2) is the log start offset", EarliestTimestamp, 0, -1, 1},
		{"latest (-1) is the log end offset", LatestTimestamp, 12, -1, 5},
		{"max timestamp (-3) is the exact record, inside a compressed batch", MaxTimestamp, 6, t0 + 900, 3},
		{"a timestamp before every record finds the first record", t0 + 50, 0, t0 + 100, 1},
		{"an exact timestamp finds that record", t0 + 300, 1, t0 + 300, 1},
		{"between timestamps finds the first record at or after it by offset", t0 + 240, 1, t0 + 300, 1},
		{"a timestamp first reached in a later segment", t0 + 350, 5, t0 + 400, 3},
		{"a timestamp first reached inside a compressed batch", t0 + 450, 6, t0 + 900, 3},
		{"the first record by offset wins over a closer timestamp later", t0 + 690, 6, t0 + 900, 3},
		{"past every record is -1", t0 + 901, -1, -1, -1},
	}
	check := func(t *testing.T, l *Log) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, err := l.OffsetForTimestamp(tc.ts)
				if err != nil {
					t.Fatal(err)
				}
				want := OffsetAndTimestamp{Offset: tc.wantOffset, Timestamp: tc.wantTS, LeaderEpoch: tc.wantEpoch}
				if got != want {
					t.Fatalf("OffsetForTimestamp(%d) = %+v, want %+v", tc.ts, got, want)
				}
			})
		}
	}
	check(t, l)
	// Reopening restores the time indexes from disk and answers the same.
	t.Run("after a clean reopen", func(t *testing.T) {
		dir := l.Dir()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		check(t, openTestLog(t, dir, OpenOptions{Config: LogConfig{IndexIntervalBytes: 1}, CleanShutdown: true}))
	})
}

// truncationFixture is twelve 5-record batches, three per segment
// (segments at 0, 15, 30, 45), batch i written in epoch i/3+1 with
// timestamps t0+100i+j, except batch 10 (offsets 50-54), which holds the
// log's largest timestamps (t0+100000+j). The high watermark is at the end.
func truncationFixture(t *testing.T, cfg LogConfig) (*Log, [][]byte) {
	t.Helper()
	cfg.SegmentBytes = 700
	cfg.IndexIntervalBytes = 1
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg})
	var batches [][]byte
	for i := range 12 {
		base := t0 + int64(i)*100
		if i == 10 {
			base = t0 + 100000
		}
		b := buildBatch(t, record.CompressionNone, tsRange(base, 5), 20)
		appendOK(t, l, b, int32(i/3+1))
		batches = append(batches, b)
	}
	l.SetHighWatermark(60)
	if l.NumSegments() != 4 {
		t.Fatalf("fixture has %d segments, want 4", l.NumSegments())
	}
	return l, batches
}

func TestTruncateTo(t *testing.T) {
	for _, tc := range []struct {
		name         string
		offset       int64
		wantLEO      int64
		wantSegments int
		wantEpochs   []EpochEntry
		wantMaxTS    OffsetAndTimestamp
	}{
		{"an offset inside a batch drops that whole batch and everything after", 52, 50, 4,
			[]EpochEntry{{1, 0}, {2, 15}, {3, 30}, {4, 45}}, OffsetAndTimestamp{49, t0 + 904, 4}},
		{"an offset at a batch boundary keeps the batch before it", 55, 55, 4,
			[]EpochEntry{{1, 0}, {2, 15}, {3, 30}, {4, 45}}, OffsetAndTimestamp{54, t0 + 100004, 4}},
		{"the base offset of a segment empties that segment", 45, 45, 4,
			[]EpochEntry{{1, 0}, {2, 15}, {3, 30}}, OffsetAndTimestamp{44, t0 + 804, 3}},
		{"an offset in an earlier segment deletes the later segments", 22, 20, 2,
			[]EpochEntry{{1, 0}, {2, 15}}, OffsetAndTimestamp{19, t0 + 304, 2}},
		{"the first offset empties the log", 0, 0, 1, nil, OffsetAndTimestamp{-1, -1, -1}},
		{"the log end offset changes nothing", 60, 60, 4,
			[]EpochEntry{{1, 0}, {2, 15}, {3, 30}, {4, 45}}, OffsetAndTimestamp{54, t0 + 100004, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, batches := truncationFixture(t, LogConfig{})
			if err := l.TruncateTo(tc.offset); err != nil {
				t.Fatal(err)
			}
			check := func(t *testing.T, l *Log) {
				t.Helper()
				if l.LogEndOffset() != tc.wantLEO || l.NumSegments() != tc.wantSegments {
					t.Fatalf("LEO %d segments %d, want %d %d", l.LogEndOffset(), l.NumSegments(), tc.wantLEO, tc.wantSegments)
				}
				if l.HighWatermark() != tc.wantLEO || l.RecoveryPoint() > tc.wantLEO {
					t.Fatalf("HW %d recovery point %d, want both <= LEO %d", l.HighWatermark(), l.RecoveryPoint(), tc.wantLEO)
				}
				if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, tc.wantEpochs) {
					t.Fatalf("epoch cache %v, want %v", got, tc.wantEpochs)
				}
				want := bytes.Join(batches[:tc.wantLEO/5], nil)
				if got := readAll(t, l, 0, l.LogEndOffset()); !bytes.Equal(got, want) {
					t.Fatalf("log holds %d bytes, want the %d bytes of batches below %d", len(got), len(want), tc.wantLEO)
				}
				if _, err := l.Read(tc.wantLEO+1, 1<<20, 1<<40, true); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read past the new LEO: %v", err)
				}
				// The time index and max-timestamp tracking forget the
				// dropped batches: ListOffsets never names a dropped offset.
				if got, err := l.OffsetForTimestamp(MaxTimestamp); err != nil || got != tc.wantMaxTS {
					t.Fatalf("max timestamp %+v (%v), want %+v", got, err, tc.wantMaxTS)
				}
				if got, _ := l.OffsetForTimestamp(t0 + 5000); tc.wantLEO <= 50 && got.Offset != -1 {
					t.Fatalf("timestamp only in dropped batches found at %+v", got)
				}
				checkLogInvariants(t, l)
			}
			check(t, l)
			// Appends continue at the new end, and a reopen agrees.
			info := appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0+1, 5), 20), 9)
			if info.FirstOffset != tc.wantLEO {
				t.Fatalf("append after truncation at %d, want %d", info.FirstOffset, tc.wantLEO)
			}
			if err := l.TruncateTo(tc.wantLEO); err != nil {
				t.Fatal(err)
			}
			tc.wantSegments = l.NumSegments() // the append may have rolled
			dir := l.Dir()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := filesWithSuffix(t, dir, deletedSuffix); len(got) != 0 {
				t.Fatalf("Close left %v", got)
			}
			for _, clean := range []bool{true, false} {
				l := openTestLog(t, dir, OpenOptions{Config: l.Config(), CleanShutdown: clean, HighWatermark: 60})
				check(t, l)
				l.Close()
			}
		})
	}
}

// TestTruncateToTheLogEndDropsAnEmptyEpoch: a replica that became leader
// recorded its epoch at its log end, then lost the leadership before
// appending anything. A truncation to (or past) the log end removes no
// batch but drops that epoch, as Kafka's UnifiedLog.truncateTo does, and the
// drop survives a reopen; an epoch with records stays.
func TestTruncateToTheLogEndDropsAnEmptyEpoch(t *testing.T) {
	for _, offset := range []int64{60, 75} {
		t.Run(strconv.FormatInt(offset, 10), func(t *testing.T) {
			l, _ := truncationFixture(t, LogConfig{})
			if err := l.LeaderEpochCache().Assign(5, 60); err != nil {
				t.Fatal(err)
			}
			if err := l.TruncateTo(offset); err != nil {
				t.Fatal(err)
			}
			want := []EpochEntry{{1, 0}, {2, 15}, {3, 30}, {4, 45}}
			if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, want) {
				t.Fatalf("epoch cache %v, want %v", got, want)
			}
			if l.LogEndOffset() != 60 || l.HighWatermark() != 60 {
				t.Fatalf("LEO %d HW %d, want both 60", l.LogEndOffset(), l.HighWatermark())
			}
			dir, cfg := l.Dir(), l.Config()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTestLog(t, dir, OpenOptions{Config: cfg, CleanShutdown: true, HighWatermark: 60})
			defer l.Close()
			if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, want) {
				t.Fatalf("after a reopen, epoch cache %v, want %v", got, want)
			}
			checkLogInvariants(t, l)
		})
	}
}

func TestTruncateToKeepsLogStartAtOrBelowLogEnd(t *testing.T) {
	// A follower may truncate below its log start offset (its leader's log
	// diverged earlier than the follower's DeleteRecords point); Kafka then
	// lowers the log start offset with it.
	l, _ := truncationFixture(t, LogConfig{})
	if err := l.IncrementLogStartOffset(22); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(23); err != nil { // drops batch 20-24
		t.Fatal(err)
	}
	if l.LogEndOffset() != 20 || l.LogStartOffset() > l.LogEndOffset() {
		t.Fatalf("log start %d, LEO %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if _, err := l.Read(l.LogEndOffset(), 1<<20, 1<<40, true); err != nil {
		t.Fatalf("read at the log end: %v", err)
	}
	checkLogInvariants(t, l)
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	l, _ := truncationFixture(t, LogConfig{})
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.HighWatermark() != 1000 || l.NumSegments() != 1 {
		t.Fatalf("start %d end %d HW %d segments %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.NumSegments())
	}
	if got := l.LeaderEpochCache().Entries(); len(got) != 0 {
		t.Fatalf("epoch cache %v, want empty", got)
	}
	if _, err := l.Read(999, 1<<20, 1<<40, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	if got, _ := l.OffsetForTimestamp(MaxTimestamp); got.Offset != -1 {
		t.Fatalf("max timestamp of an empty log: %+v", got)
	}
	info := appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0, 3), 20), 7)
	if info.FirstOffset != 1000 {
		t.Fatalf("first append at %d", info.FirstOffset)
	}
	if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, []EpochEntry{{7, 1000}}) {
		t.Fatalf("epoch cache %v", got)
	}
	checkLogInvariants(t, l)
	dir := l.Dir()
	l.Close()
	if got := segmentLogPaths(t, dir); len(got) != 1 || filepath.Base(got[0]) != segmentFileName(1000, logSuffix) {
		t.Fatalf("segment files after close: %v", got)
	}
	l = openTestLog(t, dir, OpenOptions{CleanShutdown: true})
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1003 {
		t.Fatalf("reopened: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
}

func TestIncrementLogStartOffset(t *testing.T) {
	l, batches := truncationFixture(t, LogConfig{})
	l.SetHighWatermark(30)
	if err := l.IncrementLogStartOffset(31); !errors.Is(err, ErrOffsetOutOfRange) || ErrorCode(err) != 1 {
		t.Fatalf("past the high watermark: %v", err)
	}
	if err := l.IncrementLogStartOffset(22); err != nil {
		t.Fatal(err)
	}
	if err := l.IncrementLogStartOffset(10); err != nil || l.LogStartOffset() != 22 {
		t.Fatalf("moving back: %v, start %d", err, l.LogStartOffset())
	}
	if _, err := l.Read(21, 1<<20, 30, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if got := readBytes(t, l, 22, 1, 30, true); !bytes.Equal(got, batches[4]) {
		t.Fatal("read at the log start does not return the batch holding it")
	}
	if got, _ := l.OffsetForTimestamp(EarliestTimestamp); got.Offset != 22 {
		t.Fatalf("earliest %+v", got)
	}
	if got, _ := l.OffsetForTimestamp(t0); got.Offset != 22 {
		t.Fatalf("a timestamp before the log start finds %+v, want 22", got)
	}
	if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, []EpochEntry{{2, 22}, {3, 30}, {4, 45}}) {
		t.Fatalf("epoch cache %v", got)
	}
	// Retention then deletes the segments wholly below it: only segment 0
	// (next segment starts at 15 <= 22).
	n, err := l.DeleteOldSegments()
	if err != nil || n != 1 || l.NumSegments() != 3 || l.LogStartOffset() != 22 {
		t.Fatalf("deleted %d (%v), %d segments left, start %d", n, err, l.NumSegments(), l.LogStartOffset())
	}
	checkLogInvariants(t, l)
}

// retentionFixture: four segments rolled by hand, segment k holding three
// 5-record batches with timestamps t0 + k*10min (+record index).
func retentionFixture(t *testing.T, cfg LogConfig, clock *fakeClock) *Log {
	t.Helper()
	cfg.IndexIntervalBytes = 1
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	for k := range 4 {
		for range 3 {
			appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0+int64(k)*(10*time.Minute).Milliseconds(), 5), 20), 1)
		}
		if k < 3 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	return l
}

func TestRetention(t *testing.T) {
	hour := time.Hour.Milliseconds()
	for _, tc := range []struct {
		name        string
		cfg         LogConfig
		advance     time.Duration
		hw          int64 // -1: at the log end
		wantDeleted int
	}{
		{"retention.ms deletes segments whose newest record is older", LogConfig{RetentionMs: hour}, 75 * time.Minute, -1, 2},
		{"retention.ms keeps segments within it", LogConfig{RetentionMs: hour}, 60 * time.Minute, -1, 0},
		{"retention.ms never deletes the active segment", LogConfig{RetentionMs: hour}, 100 * time.Hour, -1, 3},
		{"retention.ms -1 keeps everything", LogConfig{RetentionMs: -1}, 100 * time.Hour, -1, 0},
		{"retention.bytes deletes the oldest segments while over the limit", LogConfig{RetentionMs: -1}, 0, -1, 1},
		{"retention never deletes a segment reaching the high watermark", LogConfig{RetentionMs: hour}, 100 * time.Hour, 16, 1},
		{"retention deletes nothing with the high watermark in the first segment", LogConfig{RetentionMs: hour}, 100 * time.Hour, 14, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			l := retentionFixture(t, tc.cfg, clock)
			if tc.name == "retention.bytes deletes the oldest segments while over the limit" {
				// Just over three segments' worth: only the oldest goes.
				cfg := l.Config()
				cfg.RetentionBytes = l.Size()*3/4 - 10
				l.SetConfig(cfg)
			}
			if tc.hw >= 0 {
				l.SetHighWatermark(tc.hw)
			}
			clock.Advance(tc.advance)
			before := l.NumSegments()
			l.mu.RLock()
			wantStart := l.segments[tc.wantDeleted].baseOffset
			l.mu.RUnlock()
			n, err := l.DeleteOldSegments()
			if err != nil || n != tc.wantDeleted || l.NumSegments() != before-tc.wantDeleted {
				t.Fatalf("deleted %d (%v), segments %d -> %d; want %d deleted", n, err, before, l.NumSegments(), tc.wantDeleted)
			}
			if l.LogStartOffset() != wantStart {
				t.Fatalf("log start %d, want %d (first remaining segment)", l.LogStartOffset(), wantStart)
			}
			checkLogInvariants(t, l)
		})
	}
}

func TestDeletedSegmentFilesOutliveInFlightReads(t *testing.T) {
	clock := newFakeClock()
	l := retentionFixture(t, LogConfig{FileDeleteDelayMs: 60_000}, clock)
	dir := l.Dir()
	inFlight, err := l.Read(0, 1<<20, l.HighWatermark(), true) // a fetch about to sendfile segment 0
	if err != nil {
		t.Fatal(err)
	}
	want := regionBytes(t, inFlight.Regions)
	if err := l.IncrementLogStartOffset(30); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteOldSegments(); err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	wantDeleted := []string{
		segmentFileName(0, indexSuffix+deletedSuffix), segmentFileName(0, logSuffix+deletedSuffix), segmentFileName(0, timeIndexSuffix+deletedSuffix),
		segmentFileName(15, indexSuffix+deletedSuffix), segmentFileName(15, logSuffix+deletedSuffix), segmentFileName(15, timeIndexSuffix+deletedSuffix),
	}
	if got := filesWithSuffix(t, dir, deletedSuffix); !slices.Equal(got, wantDeleted) {
		t.Fatalf(".deleted files %v, want %v", got, wantDeleted)
	}
	if got := segmentLogPaths(t, dir); len(got) != 2 {
		t.Fatalf("live segments %v", got)
	}
	if got := regionBytes(t, inFlight.Regions); !bytes.Equal(got, want) {
		t.Fatal("an in-flight read of a deleted segment changed")
	}
	clock.Advance(59 * time.Second)
	l.DeleteOldSegments()
	if got := filesWithSuffix(t, dir, deletedSuffix); len(got) != 6 {
		t.Fatalf("files removed before file.delete.delay.ms: %v left", got)
	}
	clock.Advance(2 * time.Second)
	l.DeleteOldSegments()
	if got := filesWithSuffix(t, dir, deletedSuffix); len(got) != 0 {
		t.Fatalf("files kept after file.delete.delay.ms: %v", got)
	}

	// Close removes what is still pending, whatever the delay.
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.IncrementLogStartOffset(45); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.DeleteOldSegments(); n != 1 || len(filesWithSuffix(t, dir, deletedSuffix)) != 3 {
		t.Fatalf("deleted %d", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := filesWithSuffix(t, dir, deletedSuffix); len(got) != 0 {
		t.Fatalf("Close left %v", got)
	}
}

func TestOpenRemovesDeletedFilesACrashLeftBehind(t *testing.T) {
	clock := newFakeClock()
	l := retentionFixture(t, LogConfig{FileDeleteDelayMs: 60_000}, clock)
	if err := l.IncrementLogStartOffset(30); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteOldSegments(); err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	crashed := filepath.Join(t.TempDir(), "t-0")
	copyDir(t, l.Dir(), crashed) // the process dies with deletions pending
	if got := filesWithSuffix(t, crashed, deletedSuffix); len(got) != 6 {
		t.Fatalf("crash copy holds %v", got)
	}
	r := openTestLog(t, crashed, OpenOptions{RecoveryPoint: 30, LogStartOffset: 30, HighWatermark: 60})
	if got := filesWithSuffix(t, crashed, deletedSuffix); len(got) != 0 {
		t.Fatalf("open left %v", got)
	}
	if r.LogStartOffset() != 30 || r.LogEndOffset() != 60 || r.NumSegments() != 2 {
		t.Fatalf("start %d end %d segments %d", r.LogStartOffset(), r.LogEndOffset(), r.NumSegments())
	}
	if _, err := os.Stat(filepath.Join(crashed, segmentFileName(30, logSuffix))); err != nil {
		t.Fatal(err)
	}
	checkLogInvariants(t, r)
}

// Two deleted segments can share their .deleted names: a segment deleted
// (truncated away), its base offset appended to again and that segment
// deleted too before the first was reaped. Reaping either must neither fail
// nor trim the other's index through the shared path.
func TestDeletedSegmentsSharingABaseOffsetAreReaped(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultLogConfig()
	now := time.Now()
	var segs []*segment
	for i := 0; i < 2; i++ {
		s, err := createSegment(dir, 40, cfg, now)
		if err != nil {
			t.Fatal(err)
		}
		batch := buildBatch(t, record.CompressionNone, tsRange(now.UnixMilli(), 3), 10)
		binary.BigEndian.PutUint64(batch, 40)
		if err := s.append(resign(batch)); err != nil {
			t.Fatal(err)
		}
		if err := s.renameDeleted(); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, s)
	}
	for i, s := range segs {
		if err := s.closeAndRemove(nil); err != nil {
			t.Fatalf("reap %d: %v", i, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("files left: %v", left)
	}
}

// A read at the tail takes batch headers from the ones the active segment
// remembers (segment.recent) instead of the file. Past maxRecentBatches,
// across a truncation and a re-append of other batches at the same
// positions, every read must still return exactly the batch at its offset.
func TestTailReadsAfterTruncationReturnTheNewBatches(t *testing.T) {
	cfg := DefaultLogConfig()
	cfg.IndexIntervalBytes = 1 << 20 // no index entries: every header is remembered or read
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg})
	var batches [][]byte
	appendOne := func(i, valueSize int) {
		b := buildBatch(t, record.CompressionNone, tsRange(testEpochMs+int64(i), 1+i%3), valueSize)
		appendOK(t, l, b, 0) // rewrites b's offsets in place
		batches = append(batches, b)
	}
	check := func(stage string) {
		t.Helper()
		off := int64(0)
		for i, b := range batches {
			h := batchHeaders(t, b)[0]
			if h.BaseOffset != off {
				t.Fatalf("%s: batch %d at %d, want %d", stage, i, h.BaseOffset, off)
			}
			// From the batch's base and from its last offset: both find it.
			for _, at := range []int64{h.BaseOffset, h.LastOffset()} {
				if got := readBytes(t, l, at, 1, l.LogEndOffset(), true); !bytes.Equal(got, b) {
					t.Fatalf("%s: read at %d: %d bytes, want batch %d (%d bytes)", stage, at, len(got), i, len(b))
				}
			}
			off = h.NextOffset()
		}
	}
	for i := range 3 * maxRecentBatches {
		appendOne(i, 10)
	}
	check("appended")
	cut := batchHeaders(t, batches[2*maxRecentBatches+5])[0].BaseOffset
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	batches = batches[:2*maxRecentBatches+5]
	for i := range 20 {
		appendOne(1000+i, 17) // other sizes: old positions now fall mid-batch
	}
	check("truncated and re-appended")
}
