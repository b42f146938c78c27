package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/keelstream/keel/network/record"
)

// Behaviour of one partition log: offsets, reads, rolls, reopen, ListOffsets,
// truncation, retention, follower appends. Bad input is in
// log_validation_test.go, crashes in recovery_test.go.

func TestAppendAssignsConsecutiveOffsetsAndRewritesBatchesInPlace(t *testing.T) {
	dir := partitionDir(t)
	l := openTestLog(t, dir, OpenOptions{})
	a := buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 10)
	b := buildBatch(t, record.CompressionGzip, tsRange(testEpochMs, 1), 10)
	c := buildBatch(t, record.CompressionZstd, tsRange(testEpochMs, 5), 10)
	set := append(slices.Clone(b), c...) // two batches in one record set

	for _, step := range []struct {
		name        string
		batches     []byte
		first, last int64
	}{
		{"first batch starts at 0", a, 0, 2},
		{"a record set of two batches takes consecutive offsets", set, 3, 8},
	} {
		info := appendOK(t, l, step.batches, 0)
		if info.FirstOffset != step.first || info.LastOffset != step.last {
			t.Fatalf("%s: offsets %d..%d, want %d..%d", step.name, info.FirstOffset, info.LastOffset, step.first, step.last)
		}
		if info.Bytes != len(step.batches) {
			t.Fatalf("%s: info.Bytes %d, want %d", step.name, info.Bytes, len(step.batches))
		}
	}
	if got := l.LogEndOffset(); got != 9 {
		t.Fatalf("LEO %d, want 9", got)
	}
	file, err := os.ReadFile(segmentLogPaths(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	// The file holds the caller's (rewritten) bytes exactly, each batch
	// with its assigned base offset and a CRC that still verifies.
	if want := append(slices.Clone(a), set...); !bytes.Equal(file, want) {
		t.Fatalf("segment file differs from the rewritten input batches")
	}
	var bases []int64
	for _, h := range batchHeaders(t, file) {
		bases = append(bases, h.BaseOffset)
	}
	if !slices.Equal(bases, []int64{0, 3, 4}) {
		t.Fatalf("base offsets in file %v, want [0 3 4]", bases)
	}
	for i, r := range decodeRecords(t, splitBatches(t, file)[2]) {
		if r.Offset != int64(4+i) {
			t.Fatalf("record %d of the zstd batch has offset %d", i, r.Offset)
		}
	}
	checkLogInvariants(t, l)
}

func TestLeaderEpochIsStampedAndCached(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	for _, step := range []struct {
		epoch   int32
		records int
	}{{3, 2}, {3, 4}, {5, 1}, {7, 3}} {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, step.records), 5), step.epoch)
	}
	var epochs []int32
	for _, h := range batchHeaders(t, readAll(t, l, 0, l.LogEndOffset())) {
		epochs = append(epochs, h.PartitionLeaderEpoch)
	}
	if !slices.Equal(epochs, []int32{3, 3, 5, 7}) {
		t.Fatalf("stamped epochs %v", epochs)
	}
	want := []EpochEntry{{3, 0}, {5, 6}, {7, 7}}
	if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, want) {
		t.Fatalf("epoch cache %v, want %v", got, want)
	}
	if got, err := os.ReadFile(filepath.Join(l.Dir(), leaderEpochCheckpointFile)); err != nil || string(got) != "0\n3\n3 0\n5 6\n7 7\n" {
		t.Fatalf("leader-epoch-checkpoint %q, %v", got, err)
	}
}

// readFixture is a log of four batches in one segment:
//
//	batch 0: offsets 0-4   (5 records)
//	batch 1: offsets 5-5   (1 record)
//	batch 2: offsets 6-15  (10 records, large values)
//	batch 3: offsets 16-18 (3 records)
func readFixture(t *testing.T) (*Log, [][]byte) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	var batches [][]byte
	for _, spec := range []struct{ n, size int }{{5, 20}, {1, 20}, {10, 200}, {3, 20}} {
		b := buildBatch(t, record.CompressionNone, tsRange(testEpochMs, spec.n), spec.size)
		appendOK(t, l, b, 0)
		batches = append(batches, b)
	}
	return l, batches
}

func TestRead(t *testing.T) {
	l, batches := readFixture(t)
	size := func(i ...int) int {
		n := 0
		for _, j := range i {
			n += len(batches[j])
		}
		return n
	}
	const all = int64(1 << 40)
	for _, tc := range []struct {
		name     string
		start    int64
		maxBytes int
		upper    int64
		minOne   bool
		want     []int // batch indexes
		wantErr  error
	}{
		{"reads from the batch holding the start offset", 5, 1 << 20, all, true, []int{1, 2, 3}, nil},
		{"a start in the middle of a batch returns that whole batch", 9, 1 << 20, all, true, []int{2, 3}, nil},
		{"the last offset of a batch returns that batch", 4, 1 << 20, all, true, []int{0, 1, 2, 3}, nil},
		{"maxBytes stops before a batch that does not fit", 0, size(0, 1) + 10, all, true, []int{0, 1}, nil},
		{"maxBytes exactly fitting includes the batch", 0, size(0, 1, 2), all, true, []int{0, 1, 2}, nil},
		{"minOneBatch returns a first batch larger than maxBytes", 6, 10, all, true, []int{2}, nil},
		{"without minOneBatch a first batch larger than maxBytes gives nothing", 6, 10, all, false, nil, nil},
		{"a batch ending past the upper bound is excluded", 0, 1 << 20, 10, true, []int{0, 1}, nil},
		{"an upper bound at a batch boundary includes the batch before it", 0, 1 << 20, 16, true, []int{0, 1, 2}, nil},
		{"a first batch straddling the upper bound gives nothing", 6, 1 << 20, 10, true, nil, nil},
		{"a start at the upper bound gives nothing", 5, 1 << 20, 5, true, nil, nil},
		{"a start at the log end offset gives nothing", 19, 1 << 20, all, true, nil, nil},
		{"a start above the log end offset is out of range", 20, 1 << 20, all, true, nil, ErrOffsetOutOfRange},
		{"a negative start is out of range", -1, 1 << 20, all, true, nil, ErrOffsetOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := l.Read(tc.start, tc.maxBytes, tc.upper, tc.minOne)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if info.LogEndOffset != 19 || info.LogStartOffset != 0 {
				t.Fatalf("ReadInfo offsets: start %d end %d", info.LogStartOffset, info.LogEndOffset)
			}
			var want []byte
			for _, i := range tc.want {
				want = append(want, batches[i]...)
			}
			if got := regionBytes(t, info.Regions); !bytes.Equal(got, want) || info.Bytes != int64(len(want)) {
				t.Fatalf("read %d bytes (info.Bytes %d), want batches %v (%d bytes)", len(got), info.Bytes, tc.want, len(want))
			}
		})
	}
}

func TestReadBelowLogStartIsOutOfRange(t *testing.T) {
	l, _ := readFixture(t)
	l.SetHighWatermark(19)
	if err := l.IncrementLogStartOffset(7); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(6, 1<<20, 19, true); !errors.Is(err, ErrOffsetOutOfRange) || ErrorCode(err) != 1 {
		t.Fatalf("read below log start: %v", err)
	}
	// The log start is inside batch 2 (6-15): reading at it returns that batch.
	if hs := batchHeaders(t, readBytes(t, l, 7, 1, 19, true)); len(hs) != 1 || hs[0].BaseOffset != 6 {
		t.Fatalf("read at log start: %+v", hs)
	}
}

func TestReadsNeverSpanSegmentsButContinueAcrossThem(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: LogConfig{SegmentBytes: 1000}})
	var all []byte
	for i := range 20 {
		b := buildBatch(t, record.CompressionNone, tsRange(testEpochMs+int64(i), 3), 50)
		appendOK(t, l, b, 0)
		all = append(all, b...)
	}
	if l.NumSegments() < 4 {
		t.Fatalf("%d segments, want several", l.NumSegments())
	}
	l.mu.RLock()
	firstNext := l.segments[0].nextOffset
	l.mu.RUnlock()
	first := readBytes(t, l, 0, 1<<20, 1<<40, true)
	hs := batchHeaders(t, first)
	if got := hs[len(hs)-1].NextOffset(); got != firstNext {
		t.Fatalf("first read ended at %d, first segment ends at %d", got, firstNext)
	}
	info, _ := l.Read(0, 1<<20, 1<<40, true)
	if len(info.Regions) != 1 {
		t.Fatalf("%d regions, a read covers one segment", len(info.Regions))
	}
	if got := readAll(t, l, 0, l.LogEndOffset()); !bytes.Equal(got, all) {
		t.Fatalf("reading on across segments returned %d bytes, want %d", len(got), len(all))
	}
	// Every offset, including mid-batch ones, is found through the indexes.
	for off := range l.LogEndOffset() {
		hs := batchHeaders(t, readBytes(t, l, off, 1, 1<<40, true))
		if len(hs) != 1 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
			t.Fatalf("read at %d returned %+v", off, hs)
		}
	}
	checkLogInvariants(t, l)
}

func TestSegmentsRoll(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name string
		cfg  LogConfig
		// step appends one batch (and may move the clock); it returns
		// whether that append should have started a new segment.
		step func(t *testing.T, l *Log, clock *fakeClock, i int) (wantRoll bool)
	}{
		{
			name: "segment.bytes: rolls when the next batch would not fit",
			cfg:  LogConfig{SegmentBytes: 1024},
			step: func(t *testing.T, l *Log, _ *fakeClock, i int) bool {
				b := buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 4), 60)
				l.mu.RLock()
				size := l.active().size
				l.mu.RUnlock()
				appendOK(t, l, b, 0)
				return size > 0 && size+int64(len(b)) > 1024
			},
		},
		{
			name: "segment.ms: rolls once the first batch is older than segment.ms",
			cfg:  LogConfig{SegmentMs: day.Milliseconds()},
			step: func(t *testing.T, l *Log, clock *fakeClock, i int) bool {
				// Appends half a day (and a minute) apart: every third one
				// finds the segment's first batch more than a day old.
				l.mu.RLock()
				s := l.active()
				old := s.size > 0 && clock.Now().UnixMilli()-s.rollingTimestamp > day.Milliseconds()
				l.mu.RUnlock()
				appendOK(t, l, buildBatch(t, record.CompressionNone, []int64{clock.Now().UnixMilli()}, 10), 0)
				clock.Advance(day/2 + time.Minute)
				return old
			},
		},
		{
			name: "a full offset index rolls the segment",
			cfg:  LogConfig{SegmentIndexBytes: 64, IndexIntervalBytes: 1},
			step: func(t *testing.T, l *Log, _ *fakeClock, i int) bool {
				l.mu.RLock()
				full := l.active().index.IsFull() || l.active().timeIndex.IsFull()
				l.mu.RUnlock()
				appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs+int64(i), 1), 10), 0)
				return full
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			l := openTestLog(t, partitionDir(t), OpenOptions{Config: tc.cfg, Now: clock.Now})
			rolls := 0
			for i := range 30 {
				before := l.NumSegments()
				wantRoll := tc.step(t, l, clock, i)
				if got := l.NumSegments() - before; got != map[bool]int{false: 0, true: 1}[wantRoll] {
					t.Fatalf("append %d: %d new segments, want roll %v", i, got, wantRoll)
				}
				if wantRoll {
					rolls++
				}
			}
			if rolls < 3 {
				t.Fatalf("only %d rolls in 30 appends", rolls)
			}
			checkLogInvariants(t, l)
		})
	}
}

// segment.jitter.ms: each segment rolls its own random share of the jitter
// before segment.ms (Kafka's randomSegmentJitter), so partitions created
// together spread their rolls.
func TestSegmentJitter(t *testing.T) {
	day := 24 * time.Hour
	clock := newFakeClock()
	cfg := LogConfig{SegmentMs: day.Milliseconds(), SegmentJitterMs: (day / 2).Milliseconds()}
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	jitters := map[int64]bool{}
	for i := range 200 {
		l.mu.RLock()
		s := l.active()
		jitter := s.rollJitterMs
		due := s.size > 0 && clock.Now().UnixMilli()-s.rollingTimestamp > cfg.SegmentMs-jitter
		l.mu.RUnlock()
		if jitter < 0 || jitter >= cfg.SegmentJitterMs {
			t.Fatalf("segment jitter %d outside [0, %d)", jitter, cfg.SegmentJitterMs)
		}
		jitters[jitter] = true
		before := l.NumSegments()
		appendOK(t, l, buildBatch(t, record.CompressionNone, []int64{clock.Now().UnixMilli()}, 10), 0)
		if rolled := l.NumSegments() > before; rolled != due {
			t.Fatalf("append %d: rolled %v, want %v (jitter %d)", i, rolled, due, jitter)
		}
		clock.Advance(time.Hour + time.Minute)
	}
	if len(jitters) < 3 {
		t.Fatalf("%d distinct jitters over %d segments", len(jitters), l.NumSegments())
	}
}

func TestReopenAfterCloseKeepsTheLog(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(map[bool]string{true: "clean shutdown", false: "unclean shutdown"}[clean], func(t *testing.T) {
			dir := partitionDir(t)
			cfg := LogConfig{SegmentBytes: 2048, IndexIntervalBytes: 200}
			clock := newFakeClock()
			l, err := OpenLog(dir, OpenOptions{Config: cfg, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			codecs := []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd}
			var epochs []EpochEntry
			for i := range 40 {
				info := appendOK(t, l, buildBatch(t, codecs[i%len(codecs)], tsRange(testEpochMs+int64(i)*10, 1+i%6), 40), int32(i/10))
				if i%10 == 0 {
					epochs = append(epochs, EpochEntry{int32(i / 10), info.FirstOffset})
				}
			}
			l.SetHighWatermark(l.LogEndOffset())
			leo, segments, hw := l.LogEndOffset(), l.NumSegments(), l.HighWatermark()
			want := readAll(t, l, 0, leo)
			maxTS, err := l.OffsetForTimestamp(MaxTimestamp)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			l = openTestLog(t, dir, OpenOptions{Config: cfg, CleanShutdown: clean, HighWatermark: hw, Now: clock.Now})
			if l.LogEndOffset() != leo || l.NumSegments() != segments || l.HighWatermark() != hw {
				t.Fatalf("reopened: LEO %d segments %d HW %d, want %d %d %d", l.LogEndOffset(), l.NumSegments(), l.HighWatermark(), leo, segments, hw)
			}
			if got := readAll(t, l, 0, leo); !bytes.Equal(got, want) {
				t.Fatal("reopened log reads back different bytes")
			}
			if got, _ := l.OffsetForTimestamp(MaxTimestamp); got != maxTS {
				t.Fatalf("max timestamp after reopen %+v, before %+v", got, maxTS)
			}
			if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, epochs) {
				t.Fatalf("epoch cache after reopen %v, want %v", got, epochs)
			}
			checkLogInvariants(t, l)
			info := appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 2), 10), 4)
			if info.FirstOffset != leo {
				t.Fatalf("append after reopen at %d, want %d", info.FirstOffset, leo)
			}
			checkLogInvariants(t, l)
		})
	}
}

// leaderBatch builds a batch as a leader would have stored it: base offset
// and leader epoch set (neither is covered by the CRC).
func leaderBatch(t *testing.T, base int64, epoch int32, n int) []byte {
	t.Helper()
	b := buildBatch(t, record.CompressionLZ4, tsRange(t0+base, n), 30)
	record.SetBaseOffset(b, base)
	record.SetPartitionLeaderEpoch(b, epoch)
	return b
}

func TestAppendAsFollower(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	var stored []byte
	// Each step runs on the log the previous steps left.
	for _, step := range []struct {
		name      string
		batches   []byte
		wantErr   error
		wantCode  int16
		wantBytes int   // bytes appended
		wantLEO   int64 // after the step
	}{
		{"keeps the leader's offsets and epochs", append(leaderBatch(t, 0, 1, 5), leaderBatch(t, 5, 2, 3)...), nil, 0, -1, 8},
		{"accepts a gap after the log end (compacted leader log)", leaderBatch(t, 20, 2, 2), nil, 0, -1, 22},
		{"rejects a first offset below the log end", leaderBatch(t, 21, 2, 2), ErrUnexpectedAppendOffset, -1, 0, 22},
		{"ignores a trailing partial batch", append(leaderBatch(t, 22, 3, 3), leaderBatch(t, 25, 3, 3)[:40]...), nil, 0, len(leaderBatch(t, 22, 3, 3)), 25},
		{"appends nothing for a lone partial batch", leaderBatch(t, 25, 3, 3)[:70], nil, 0, 0, 25},
		{"rejects a corrupt CRC", func() []byte { b := leaderBatch(t, 25, 3, 3); b[len(b)-1] ^= 1; return b }(), record.ErrCorruptMessage, 2, 0, 25},
		{"rejects batches out of offset order", append(leaderBatch(t, 30, 3, 3), leaderBatch(t, 31, 3, 3)...), record.ErrInvalidRecord, 87, 0, 25},
	} {
		sizeBefore := l.Size()
		info, err := l.AppendAsFollower(slices.Clone(step.batches), false)
		if !errors.Is(err, step.wantErr) || ErrorCode(err) != step.wantCode {
			t.Fatalf("%s: err %v (code %d), want %v (code %d)", step.name, err, ErrorCode(err), step.wantErr, step.wantCode)
		}
		want := step.wantBytes
		if want < 0 {
			want = len(step.batches)
		}
		if got := int(l.Size() - sizeBefore); got != want || (err == nil && info.Bytes != want) {
			t.Fatalf("%s: appended %d bytes (info %d), want %d", step.name, got, info.Bytes, want)
		}
		stored = append(stored, step.batches[:want]...)
		if l.LogEndOffset() != step.wantLEO {
			t.Fatalf("%s: LEO %d, want %d", step.name, l.LogEndOffset(), step.wantLEO)
		}
	}
	if got := readAll(t, l, 0, l.LogEndOffset()); !bytes.Equal(got, stored) {
		t.Fatal("follower log is not byte-for-byte the leader's batches")
	}
	// A read in the gap returns the batch after it.
	if hs := batchHeaders(t, readBytes(t, l, 10, 1, 1<<40, true)); hs[0].BaseOffset != 20 {
		t.Fatalf("read in the gap returned batch %d", hs[0].BaseOffset)
	}
	if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {2, 5}, {3, 22}}) {
		t.Fatalf("epoch cache %v", got)
	}
	checkLogInvariants(t, l)
}

func TestLogAppendTimeRewritesTimestampsWithAValidCRC(t *testing.T) {
	clock := newFakeClock()
	clock.Advance(time.Hour)
	now := clock.Now().UnixMilli()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: LogConfig{MessageTimestampType: "LogAppendTime"}, Now: clock.Now})
	set := append(buildBatch(t, record.CompressionNone, tsRange(t0, 3), 10), buildBatch(t, record.CompressionSnappy, tsRange(t0-5000, 4), 10)...)
	info := appendOK(t, l, set, 0)
	if info.LogAppendTime != now || info.MaxTimestamp != now {
		t.Fatalf("AppendInfo LogAppendTime %d MaxTimestamp %d, want %d", info.LogAppendTime, info.MaxTimestamp, now)
	}
	for _, b := range splitBatches(t, readAll(t, l, 0, 7)) {
		h, err := record.CheckBatch(b) // CRC recomputed over the new attributes and timestamp
		if err != nil {
			t.Fatal(err)
		}
		if h.TimestampType() != record.LogAppendTime || h.MaxTimestamp != now {
			t.Fatalf("batch %d: timestamp type %v max %d", h.BaseOffset, h.TimestampType(), h.MaxTimestamp)
		}
		for _, r := range decodeRecords(t, b) {
			if r.Timestamp != now {
				t.Fatalf("record %d timestamp %d, want the append time %d", r.Offset, r.Timestamp, now)
			}
		}
	}
	if got, _ := l.OffsetForTimestamp(now); got.Offset != 0 || got.Timestamp != now {
		t.Fatalf("lookup by append time: %+v", got)
	}
	if got, _ := l.OffsetForTimestamp(now - 1000); got.Offset != 0 {
		t.Fatalf("lookup before the append time: %+v", got)
	}
	checkLogInvariants(t, l)
}

// A segment index the disk can no longer read back (the file cut under its
// mapping here; an EIO in production) must not crash the broker: reads of
// every offset stay correct (the segment is scanned instead), the active
// segment rolls to a new index on the next append, the fault is logged
// once, and the log reopens and rebuilds the index.
func TestLogSurvivesIndexReadFault(t *testing.T) {
	dir := partitionDir(t)
	var logged bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Error})
	cfg := LogConfig{SegmentBytes: 64 << 10, IndexIntervalBytes: 256}
	l, err := OpenLog(dir, OpenOptions{Config: cfg, Logger: logger, Now: newFakeClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	appendSome := func(n int) {
		for i := range n {
			b := buildBatch(t, record.CompressionNone, tsRange(testEpochMs+int64(i), 3), 100)
			appendOK(t, l, b, 0)
			all = append(all, b...)
		}
	}
	appendSome(200) // two segments or more, each with many index entries
	segments := l.NumSegments()
	if segments < 2 {
		t.Fatalf("%d segments, want several", segments)
	}
	l.mu.RLock()
	first, active := l.segments[0], l.active()
	l.mu.RUnlock()
	for _, p := range []string{first.index.Path(), first.timeIndex.Path(), active.index.Path(), active.timeIndex.Path()} {
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
	}

	if got := readAll(t, l, 0, l.LogEndOffset()); !bytes.Equal(got, all) {
		t.Fatalf("reading a log with cut indexes returned %d bytes, want %d", len(got), len(all))
	}
	for off := int64(0); off < l.LogEndOffset(); off += 7 {
		hs := batchHeaders(t, readBytes(t, l, off, 1, 1<<40, true))
		if len(hs) != 1 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
			t.Fatalf("read at %d returned %+v", off, hs)
		}
	}
	if first.indexFault() == nil || active.indexFault() == nil {
		t.Fatalf("faults not recorded: %v, %v", first.indexFault(), active.indexFault())
	}
	if n := strings.Count(logged.String(), "cannot read a segment index"); n != 2 {
		t.Fatalf("%d fault log lines, want one per segment:\n%s", n, logged.String())
	}
	appendSome(5)
	if l.NumSegments() <= segments {
		t.Fatalf("%d segments after appending to a faulted active segment, want a roll past %d", l.NumSegments(), segments)
	}
	if got := readAll(t, l, 0, l.LogEndOffset()); !bytes.Equal(got, all) {
		t.Fatal("reads after the roll differ")
	}
	end := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	l = openTestLog(t, dir, OpenOptions{Config: cfg})
	if l.LogEndOffset() != end {
		t.Fatalf("reopened at %d, want %d", l.LogEndOffset(), end)
	}
	if got := readAll(t, l, 0, end); !bytes.Equal(got, all) {
		t.Fatal("reads after reopening differ")
	}
	checkLogInvariants(t, l)
}

// With DropBehindBytes, each hand-over to writeback also drops the
// segment's clean pages more than that many bytes behind it from the page
// cache (keel.log.cache.drop.behind.bytes), and the tail stays cached;
// without it, every appended page stays cached.
func TestDropBehindKeepsOnlyTheTailCached(t *testing.T) {
	const every, behind = 64 << 10, 512 << 10
	cached := func(l *Log) (head, tail float64) {
		t.Helper()
		s := l.active()
		dir := filepath.Dir(s.logPath())
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
			t.Skip("the page cache is tmpfs's storage here: nothing can be dropped from it")
		}
		m, err := unix.Mmap(int(s.file.Fd()), 0, int(s.size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		vec := make([]byte, (len(m)+writebackPage-1)/writebackPage)
		if err := mincore(m, vec); err != nil {
			t.Fatal(err)
		}
		// The head: the pages before the last hand-over's drop point; the
		// tail: the last behind bytes.
		headPages := int(s.writebackFrom-2*behind) / writebackPage
		tailFrom := int(s.size-behind) / writebackPage
		var h, tl int
		for i, v := range vec {
			switch {
			case i < headPages && v&1 != 0:
				h++
			case i >= tailFrom && v&1 != 0:
				tl++
			}
		}
		return float64(h) / float64(headPages), float64(tl) / float64(len(vec)-tailFrom)
	}
	fill := func(l *Log) {
		t.Helper()
		for i := range 1500 { // ~4.5 MiB
			appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 1000+i%7), 0)
		}
		// Every page clean, then more hand-overs: they drop what they may.
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 1000+i%7), 0)
		}
	}

	l := openTestLog(t, partitionDir(t), OpenOptions{WritebackBytes: every, DropBehindBytes: behind})
	fill(l)
	if head, tail := cached(l); head > 0.01 || tail < 0.99 {
		t.Fatalf("with drop-behind: %.0f%% of the head's pages cached (want none), %.0f%% of the last %d bytes' (want all)",
			100*head, 100*tail, behind)
	}

	keep := openTestLog(t, partitionDir(t), OpenOptions{WritebackBytes: every})
	fill(keep)
	if head, tail := cached(keep); head < 0.99 || tail < 0.99 {
		t.Fatalf("without drop-behind: %.0f%% of the head's pages and %.0f%% of the tail's cached (want all)", 100*head, 100*tail)
	}
}

// mincore reports which pages of the mapping b are in the page cache (bit 0
// of each of vec's bytes); x/sys/unix has no wrapper for it on Linux.
func mincore(b, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// Appends hand their whole pages to the kernel's writeback once
// WritebackBytes of them have accumulated in the active segment, keeping
// the page still being appended to; a truncation takes the mark back.
func TestAppendStartsWriteback(t *testing.T) {
	const every = 16 << 10
	l := openTestLog(t, partitionDir(t), OpenOptions{WritebackBytes: every})
	handed := false
	for i := range 40 {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 1000+i), 0)
		s := l.active()
		whole := s.size &^ (writebackPage - 1)
		if s.writebackFrom%writebackPage != 0 || s.writebackFrom > whole || whole-s.writebackFrom >= every {
			t.Fatalf("append %d: size %d, writeback started up to %d: want a page boundary within %d bytes of %d",
				i, s.size, s.writebackFrom, every, whole)
		}
		handed = handed || s.writebackFrom > 0
	}
	if !handed || l.active().writebacks.Load() == 0 {
		t.Fatalf("no pages were handed to writeback (%d hand-overs)", l.active().writebacks.Load())
	}
	s := l.active()
	if err := s.writeback(1, 0).start(); err != nil {
		t.Fatalf("sync_file_range on this file system: %v", err)
	}
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	if wb := s.writeback(every, 0); wb.n != 0 || s.writebackFrom > s.size {
		t.Fatalf("after truncating to %d bytes, writeback starts at %d (%+v)", s.size, s.writebackFrom, wb)
	}
	// A segment closed before the appender hands its pages over: nothing
	// happens.
	wb := writeback{file: s.file, from: 0, n: writebackPage}
	l.Close()
	if err := wb.start(); err == nil {
		t.Fatal("writeback of a closed segment file should fail")
	}

	// 0: the kernel's own writeback only.
	off := openTestLog(t, partitionDir(t), OpenOptions{})
	for range 40 {
		appendOK(t, off, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 1000), 0)
	}
	if from := off.active().writebackFrom; from != 0 {
		t.Fatalf("WritebackBytes 0 started writeback up to %d", from)
	}
}
