package storage

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// kv is one record of a keyed test batch; a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

// keyedBatch builds a producer batch of keyed records, all at timestamp ts.
func keyedBatch(t testing.TB, c record.Compression, ts int64, recs ...kv) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	b := record.NewBatchBuilder(opts)
	for _, r := range recs {
		b.Append(ts, []byte(r.key), r.value, nil)
	}
	out, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compactConfig is a compacted log that cleans whatever is dirty.
func compactConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 256
	cfg.Compact, cfg.NoDelete = true, true
	cfg.MinCleanableDirtyRatio = -1
	cfg.FileDeleteDelayMs = 0
	return cfg
}

// logRecord is what a consumer reading the log sees of one record.
type logRecord struct {
	offset    int64
	key       string
	value     string
	tombstone bool
	timestamp int64
}

// readRecords reads every record of the log from its start to its end.
func readRecords(t testing.TB, l *Log) []logRecord {
	t.Helper()
	var out []logRecord
	for _, b := range splitBatches(t, readAll(t, l, l.LogStartOffset(), l.LogEndOffset())) {
		for _, r := range decodeRecords(t, b) {
			out = append(out, logRecord{offset: r.Offset, key: string(r.Key), value: string(r.Value), tombstone: r.Value == nil, timestamp: r.Timestamp})
		}
	}
	return out
}

// compacted is what cleaning everything below cleanEnd must leave of
// written: below it only the latest record of each key (among those below
// it) and no keyless record, tombstones kept unless dropTombstones; at and
// above it everything.
func compacted(written []logRecord, cleanEnd int64, dropTombstones bool) []logRecord {
	latest := map[string]int64{}
	for _, r := range written {
		if r.offset < cleanEnd {
			latest[r.key] = r.offset
		}
	}
	var out []logRecord
	for _, r := range written {
		if r.offset >= cleanEnd || (latest[r.key] == r.offset && !(r.tombstone && dropTombstones)) {
			out = append(out, r)
		}
	}
	return out
}

// cleanOnce plans and runs one pass from checkpoint.
func cleanOnce(t testing.TB, l *Log, checkpoint int64) cleanStats {
	t.Helper()
	p, ok := l.planClean(checkpoint)
	if !ok {
		t.Fatalf("planClean(%d): nothing cleanable", checkpoint)
	}
	stats, err := l.clean(p, 0, nil)
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	return stats
}

// overwriteLog appends batches of records over keys key-0..key-(keys-1),
// rolling every rollEvery batches, and returns what it wrote.
func overwriteLog(t testing.TB, l *Log, c record.Compression, rng *rand.Rand, batches, keys, rollEvery int, clock *fakeClock) []logRecord {
	t.Helper()
	var written []logRecord
	for i := 0; i < batches; i++ {
		n := 1 + rng.Intn(4)
		recs := make([]kv, n)
		for j := range recs {
			recs[j] = kv{fmt.Sprintf("key-%d", rng.Intn(keys)), fmt.Appendf(nil, "v%d-%d", i, j)}
		}
		ts := clock.Now().UnixMilli()
		info := appendOK(t, l, keyedBatch(t, c, ts, recs...), 0)
		for j, r := range recs {
			written = append(written, logRecord{offset: info.FirstOffset + int64(j), key: r.key, value: string(r.value), timestamp: ts})
		}
		if rollEvery > 0 && (i+1)%rollEvery == 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return written
}

func activeBase(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().baseOffset
}

func TestCleaningKeepsTheLatestValueOfEachKeyAtItsOffset(t *testing.T) {
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		t.Run(c.String(), func(t *testing.T) {
			clock := newFakeClock()
			l := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
			rng := rand.New(rand.NewSource(1))
			written := overwriteLog(t, l, c, rng, 300, 20, 25, clock)
			// The active segment holds some records; it must stay untouched.
			written = append(written, overwriteLog(t, l, c, rng, 10, 20, 0, clock)...)
			l.SetHighWatermark(l.LogEndOffset())
			segsBefore := l.NumSegments()
			stats := cleanOnce(t, l, 0)
			if stats.EndOffset != activeBase(l) {
				t.Fatalf("cleaned up to %d, want the active segment's base %d", stats.EndOffset, activeBase(l))
			}
			checkLogInvariants(t, l)
			if got, want := readRecords(t, l), compacted(written, stats.EndOffset, false); !reflect.DeepEqual(got, want) {
				t.Fatalf("after cleaning:\n got  %v\n want %v", got, want)
			}
			if l.NumSegments() >= segsBefore {
				t.Errorf("%d segments after cleaning, %d before: small cleaned segments are not grouped", l.NumSegments(), segsBefore)
			}
			if _, ok := l.planClean(stats.EndOffset); ok {
				t.Fatal("a clean log is cleanable again with nothing new")
			}
			// More overwrites, and a second pass from the checkpoint.
			written = append(written, overwriteLog(t, l, c, rng, 100, 20, 25, clock)...)
			l.SetHighWatermark(l.LogEndOffset())
			stats = cleanOnce(t, l, stats.EndOffset)
			checkLogInvariants(t, l)
			if got, want := readRecords(t, l), compacted(written, stats.EndOffset, false); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the second pass:\n got  %v\n want %v", got, want)
			}
			// What was cleaned survives a restart, clean or not.
			want := readRecords(t, l)
			for _, clean := range []bool{true, false} {
				dir := crashCopy(t, l)
				l2 := openTestLog(t, dir, OpenOptions{Config: compactConfig(), CleanShutdown: clean, Now: clock.Now})
				checkLogInvariants(t, l2)
				if got := readRecords(t, l2); !reflect.DeepEqual(got, want) {
					t.Fatalf("reopened (clean shutdown %v): records differ", clean)
				}
			}
		})
	}
}

func TestCleaningStopsAtTheHighWatermarkAndTheCompactionLag(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	rng := rand.New(rand.NewSource(2))
	overwriteLog(t, l, record.CompressionNone, rng, 100, 5, 10, clock)
	bases := segmentBases(l)
	l.SetHighWatermark(bases[3] + 1) // inside the fourth segment
	p, ok := l.planClean(0)
	if !ok || p.endOffset != bases[3] {
		t.Fatalf("with the high watermark in segment %d, cleanable up to %v (ok %v), want %d", bases[3], p, ok, bases[3])
	}
	l.SetHighWatermark(l.LogEndOffset())
	cfg.MinCompactionLagMs = time.Hour.Milliseconds()
	l.SetConfig(cfg)
	if p, ok := l.planClean(0); ok {
		t.Fatalf("segments younger than min.compaction.lag.ms are cleanable up to %d", p.endOffset)
	}
	clock.Advance(time.Hour + time.Millisecond)
	if p, ok := l.planClean(0); !ok || p.endOffset != activeBase(l) {
		t.Fatalf("after the lag, cleanable %v (ok %v), want up to %d", p, ok, activeBase(l))
	}
}

func TestDirtyRatio(t *testing.T) {
	clock := newFakeClock()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
	rng := rand.New(rand.NewSource(3))
	overwriteLog(t, l, record.CompressionNone, rng, 100, 1000, 10, clock)
	l.SetHighWatermark(l.LogEndOffset())
	p, _ := l.planClean(0)
	if r := p.dirtyRatio(); r != 1 {
		t.Fatalf("never cleaned: dirty ratio %v, want 1", r)
	}
	bases := segmentBases(l)
	p, _ = l.planClean(bases[5])
	want := float64(p.dirtyBytes) / float64(p.dirtyBytes+p.cleanBytes)
	if p.firstDirtyOffset != bases[5] || p.cleanBytes == 0 || p.dirtyRatio() != want {
		t.Fatalf("checkpoint at segment 5: first dirty %d, clean %d, dirty %d, ratio %v", p.firstDirtyOffset, p.cleanBytes, p.dirtyBytes, p.dirtyRatio())
	}
}

func TestTombstonesOutliveDeleteRetentionAfterTheCleanerSawThem(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	ts := clock.Now().UnixMilli() - 5000 // old records: only the cleaner's clock counts
	appendOK(t, l, keyedBatch(t, record.CompressionZstd, ts, kv{"a", []byte("1")}, kv{"b", []byte("1")}, kv{"c", []byte("1")}), 0)
	appendOK(t, l, keyedBatch(t, record.CompressionZstd, ts+1, kv{"b", nil}, kv{"c", []byte("2")}), 0)
	roll := func(recs ...kv) {
		t.Helper()
		appendOK(t, l, keyedBatch(t, record.CompressionNone, clock.Now().UnixMilli(), recs...), 0)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		l.SetHighWatermark(l.LogEndOffset())
	}
	roll(kv{"d", []byte("1")})
	cp := cleanOnce(t, l, 0).EndOffset
	want := []logRecord{
		{offset: 0, key: "a", value: "1", timestamp: ts},
		{offset: 3, key: "b", tombstone: true, timestamp: ts + 1},
		{offset: 4, key: "c", value: "2", timestamp: ts + 1},
		{offset: 5, key: "d", value: "1", timestamp: testEpochMs},
	}
	if got := readRecords(t, l); !reflect.DeepEqual(got, want) {
		t.Fatalf("first pass:\n got  %v\n want %v", got, want)
	}
	// Just before the horizon the tombstone is still there; its timestamp,
	// re-expressed against the horizon (KIP-534), reads the same.
	clock.Advance(time.Hour - time.Millisecond)
	roll(kv{"e", []byte("1")})
	cp = cleanOnce(t, l, cp).EndOffset
	want = append(want, logRecord{offset: 6, key: "e", value: "1", timestamp: clock.Now().UnixMilli()})
	if got := readRecords(t, l); !reflect.DeepEqual(got, want) {
		t.Fatalf("before the horizon:\n got  %v\n want %v", got, want)
	}
	clock.Advance(time.Millisecond)
	roll(kv{"f", []byte("1")})
	stats := cleanOnce(t, l, cp)
	want = append(append(want[:1:1], want[2:]...), logRecord{offset: 7, key: "f", value: "1", timestamp: clock.Now().UnixMilli()})
	if got := readRecords(t, l); !reflect.DeepEqual(got, want) || stats.TombstonesDropped != 1 {
		t.Fatalf("after the horizon (%d tombstones dropped):\n got  %v\n want %v", stats.TombstonesDropped, got, want)
	}
	checkLogInvariants(t, l)
}

func TestCleaningDropsRecordsWithoutKeys(t *testing.T) {
	clock := newFakeClock()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
	appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 4), 0) // keyed key-0..2
	b := record.NewBatchBuilder(record.DefaultBatchOptions())
	b.Append(testEpochMs, nil, []byte("no key"), nil)
	nokey, _ := b.Build(nil)
	appendOK(t, l, nokey, 0)
	appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, kv{"x", []byte("y")}), 0)
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	cleanOnce(t, l, 0)
	for _, r := range readRecords(t, l) {
		if r.key == "" {
			t.Fatalf("a record without a key survived cleaning: %+v", r)
		}
	}
	if n := len(readRecords(t, l)); n != 4 {
		t.Fatalf("%d records after cleaning, want 4", n)
	}
}

func TestIdempotentProducerStateSurvivesCleaning(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t)
	l := openTestLog(t, dir, OpenOptions{Config: compactConfig(), Now: clock.Now})
	// Producer 7 overwrites the same two keys batch after batch: all but
	// the newest batches clean to nothing.
	var last []byte
	for seq := int32(0); seq < 60; seq += 2 {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 0, seq
		bb := record.NewBatchBuilder(opts)
		bb.Append(clock.Now().UnixMilli(), []byte("k1"), fmt.Appendf(nil, "%d", seq), nil)
		bb.Append(clock.Now().UnixMilli(), []byte("k2"), fmt.Appendf(nil, "%d", seq), nil)
		batch, _ := bb.Build(nil)
		last = append([]byte(nil), batch...)
		appendOK(t, l, batch, 0)
		if seq%10 == 8 {
			l.Roll()
		}
	}
	// Another producer's batches follow, so producer 7's are all cleanable.
	for i := 0; i < 5; i++ {
		appendOK(t, l, keyedBatch(t, record.CompressionNone, clock.Now().UnixMilli(), kv{"k1", []byte("other")}, kv{"k2", []byte("other")}), 0)
	}
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	before := l.ActiveProducers()
	cleanOnce(t, l, 0)
	if n := len(readRecords(t, l)); n != 2 {
		t.Fatalf("%d records after cleaning, want 2", n)
	}
	checkStateMatchesFullScan(t, l)
	// Reopen with no snapshot: the state comes from the cleaned log alone.
	want := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range filesWithSuffix(t, dir, producerSnapshotSuffix) {
		os.Remove(filepath.Join(dir, s))
	}
	l2 := openTestLog(t, dir, OpenOptions{Config: compactConfig(), CleanShutdown: true, Now: clock.Now})
	if got := l2.ActiveProducers(); !reflect.DeepEqual(got, before) {
		t.Fatalf("producer state rebuilt from the cleaned log:\n got  %+v\n want %+v", got, before)
	}
	info, err := l2.AppendAsLeader(last, AppendOptions{})
	if err != nil || !info.Duplicate {
		t.Fatalf("a retry of the last batch after cleaning and reopening: %+v, %v; want a duplicate", info, err)
	}
	if l2.LogEndOffset() != want {
		t.Fatalf("log end offset %d after a duplicate, want %d", l2.LogEndOffset(), want)
	}
}

func TestCleaningAbortsWhenTheLogIsTruncatedMeanwhile(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t)
	l := openTestLog(t, dir, OpenOptions{Config: compactConfig(), Now: clock.Now})
	overwriteLog(t, l, record.CompressionNone, rand.New(rand.NewSource(4)), 100, 5, 10, clock)
	l.SetHighWatermark(l.LogEndOffset())
	p, ok := l.planClean(0)
	if !ok {
		t.Fatal("nothing cleanable")
	}
	bases := segmentBases(l)
	if err := l.TruncateTo(bases[4] + 1); err != nil {
		t.Fatal(err)
	}
	want := readRecords(t, l)
	if _, err := l.clean(p, 0, nil); !errors.Is(err, errCleanAborted) {
		t.Fatalf("clean after a truncation: %v, want errCleanAborted", err)
	}
	if got := readRecords(t, l); !reflect.DeepEqual(got, want) {
		t.Fatal("an aborted clean changed the log")
	}
	if left := append(filesWithSuffix(t, dir, cleanedSuffix), filesWithSuffix(t, dir, swapSuffix)...); len(left) > 0 {
		t.Fatalf("an aborted clean left %v", left)
	}
	checkLogInvariants(t, l)
}

// A head group whose records are all superseded cleans to an empty
// segment, as in Kafka: the log start offset stays, a reader at it gets the
// next records, not OFFSET_OUT_OF_RANGE; the leader epoch cache keeps its
// start.
func TestAHeadSegmentCleanedToNothingKeepsTheLogStart(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	cfg.SegmentBytes = 100 // one batch per segment, one segment per group
	dir := partitionDir(t)
	l := openTestLog(t, dir, OpenOptions{Config: cfg, Now: clock.Now})
	for _, r := range []kv{{"a", []byte("1")}, {"a", []byte("2")}, {"b", []byte("1")}, {"c", []byte("1")}} {
		appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, r), 3)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if n := l.NumSegments(); n != 4 {
		t.Fatalf("%d segments, want one per batch", n)
	}
	cleanOnce(t, l, 0)
	want := []logRecord{{offset: 1, key: "a", value: "2", timestamp: testEpochMs}, {offset: 2, key: "b", value: "1", timestamp: testEpochMs}, {offset: 3, key: "c", value: "1", timestamp: testEpochMs}}
	if got := readRecords(t, l); !reflect.DeepEqual(got, want) || l.LogStartOffset() != 0 {
		t.Fatalf("log start %d, records %v; want 0 and %v", l.LogStartOffset(), got, want)
	}
	if got := readBytes(t, l, 0, 1<<20, l.LogEndOffset(), true); len(got) == 0 {
		t.Fatal("a read at the log start returned nothing")
	}
	if e := l.LeaderEpochCache().Entries(); len(e) != 1 || e[0].StartOffset != 0 {
		t.Fatalf("leader epoch cache %v, want epoch 3 from offset 0", e)
	}
	checkLogInvariants(t, l)
	l2 := openTestLog(t, crashCopy(t, l), OpenOptions{Config: cfg, Now: clock.Now})
	if got := readRecords(t, l2); !reflect.DeepEqual(got, want) || l2.LogStartOffset() != 0 {
		t.Fatalf("reopened: log start %d, records %v", l2.LogStartOffset(), got)
	}
	checkLogInvariants(t, l2)
	// The empty head segment is cleaned again with the next ones.
	cleanOnce(t, l, 0)
	if got := readRecords(t, l); !reflect.DeepEqual(got, want) || l.LogStartOffset() != 0 {
		t.Fatalf("cleaned again: log start %d, records %v", l.LogStartOffset(), got)
	}
	checkLogInvariants(t, l)
}

func TestGroupSegmentsBySize(t *testing.T) {
	cfg := LogConfig{SegmentBytes: 1000, SegmentIndexBytes: 80}
	seg := func(base, next, size, indexEntries int64) cleanSegment {
		return cleanSegment{base: base, next: next, size: size, indexBytes: indexEntries * 8, timeIndexBytes: indexEntries * 12}
	}
	groups := func(segs ...cleanSegment) [][]int64 {
		var out [][]int64
		for _, g := range groupSegmentsBySize(segs, cfg) {
			var bases []int64
			for _, s := range g {
				bases = append(bases, s.base)
			}
			out = append(out, bases)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		segs []cleanSegment
		want [][]int64
	}{
		{"small segments share a group", []cleanSegment{seg(0, 10, 300, 0), seg(10, 20, 300, 0), seg(20, 30, 300, 0)}, [][]int64{{0, 10, 20}}},
		{"segment.bytes bounds a group", []cleanSegment{seg(0, 10, 600, 0), seg(10, 20, 300, 0), seg(20, 30, 300, 0)}, [][]int64{{0, 10}, {20}}},
		{"the time index bounds a group", []cleanSegment{seg(0, 10, 10, 4), seg(10, 20, 10, 3), seg(20, 30, 10, 1)}, [][]int64{{0}, {10, 20}}},
		{"relative offsets bound a group", []cleanSegment{seg(0, 10, 10, 0), seg(10, 1<<31+1, 10, 0)}, [][]int64{{0}, {10}}},
	} {
		if got := groups(tc.segs...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: groups %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCleaningKeepsControlBatches(t *testing.T) {
	clock := newFakeClock()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
	appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, kv{"a", []byte("1")}), 0)
	marker, err := record.BuildControlBatch(nil, record.ControlCommit, 0, 42, 0, testEpochMs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(marker, AppendOptions{FromCoordinator: true}); err != nil {
		t.Fatal(err)
	}
	appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, kv{"a", []byte("2")}), 0)
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	cleanOnce(t, l, 0)
	hs := batchHeaders(t, readAll(t, l, 0, l.LogEndOffset()))
	if len(hs) != 2 || !hs[0].IsControl() || hs[0].BaseOffset != 1 || hs[1].BaseOffset != 2 {
		t.Fatalf("after cleaning: batches %+v, want the marker at 1 and a=2 at 2", hs)
	}
}

// max.compaction.lag.ms (KIP-354): a log whose dirty section is far below
// min.cleanable.dirty.ratio is still cleaned once its oldest dirty batch is
// older than the lag, and a compacted log's segments roll after the lag so
// that its records leave the active segment, which is never cleaned.
func TestMaxCompactionLagCleansBelowTheDirtyRatio(t *testing.T) {
	clock := newFakeClock()
	m := openTestManager(t, ManagerConfig{LogDirs: []string{t.TempDir()}, Now: clock.Now, DisableLogCleaner: true})
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.5
	tp := TopicPartition{Topic: "compacted", Partition: 0}
	l, err := m.GetOrCreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(11))
	overwriteLog(t, l, record.CompressionNone, rng, 400, 100_000, 50, clock) // distinct keys: cleaning keeps them
	l.SetHighWatermark(l.LogEndOffset())
	if cleaned, err := m.RunCleaner(); !cleaned || err != nil {
		t.Fatalf("first pass (never cleaned: dirty ratio 1): cleaned %v, %v", cleaned, err)
	}
	// A little dirty data after the clean section: far below the ratio.
	overwriteLog(t, l, record.CompressionNone, rng, 5, 100_000, 5, clock)
	l.SetHighWatermark(l.LogEndOffset())
	if p, ok := l.planClean(m.CleanerCheckpoint(tp)); !ok || p.dirtyRatio() >= cfg.MinCleanableDirtyRatio {
		t.Fatalf("setup: want a dirty section below the ratio, got %v (ok %v)", p, ok)
	}
	if cleaned, err := m.RunCleaner(); cleaned || err != nil {
		t.Fatalf("without max.compaction.lag.ms: cleaned %v, %v", cleaned, err)
	}
	cfg.MaxCompactionLagMs = time.Hour.Milliseconds()
	l.SetConfig(cfg)
	if cleaned, err := m.RunCleaner(); cleaned || err != nil {
		t.Fatalf("before the lag passed: cleaned %v, %v", cleaned, err)
	}
	clock.Advance(time.Hour + time.Second)
	if cleaned, err := m.RunCleaner(); !cleaned || err != nil {
		t.Fatalf("after max.compaction.lag.ms: cleaned %v, %v", cleaned, err)
	}
	if got, want := m.CleanerCheckpoint(tp), activeBase(l); got != want {
		t.Fatalf("cleaner checkpoint %d, want %d", got, want)
	}
}

func TestMaxCompactionLagRollsCompactedLogs(t *testing.T) {
	for _, compact := range []bool{true, false} {
		clock := newFakeClock()
		cfg := compactConfig()
		cfg.Compact, cfg.NoDelete = compact, !compact
		cfg.MaxCompactionLagMs = time.Minute.Milliseconds()
		l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
		for range 10 {
			appendOK(t, l, keyedBatch(t, record.CompressionNone, clock.Now().UnixMilli(), kv{"k", []byte("v")}), 0)
			clock.Advance(25 * time.Second)
		}
		// Every third append finds the first batch over a minute old.
		if n, want := l.NumSegments(), map[bool]int{true: 4, false: 1}[compact]; n != want {
			t.Fatalf("compact=%v: %d segments after 10 appends 25 s apart, want %d", compact, n, want)
		}
	}
}

// log.cleaner.io.max.bytes.per.second bounds what a pass reads and writes:
// a pass that moves about 3 × the log's bytes (the offset map's read, the
// rewrite's read and its write) takes at least that divided by the rate,
// and is unslowed without one; a stop during a throttled pass aborts it at
// once.
func TestCleanerIOThrottle(t *testing.T) {
	run := func(rate float64) (time.Duration, int64) {
		clock := newFakeClock()
		m := openTestManager(t, ManagerConfig{LogDirs: []string{t.TempDir()}, Now: clock.Now, DisableLogCleaner: true, CleanerIOMaxBytesPerSecond: rate})
		l, err := m.GetOrCreateLog(TopicPartition{Topic: "compacted", Partition: 0}, compactConfig())
		if err != nil {
			t.Fatal(err)
		}
		overwriteLog(t, l, record.CompressionNone, rand.New(rand.NewSource(5)), 2000, 100, 200, clock)
		l.SetHighWatermark(l.LogEndOffset())
		size := l.Size()
		start := time.Now()
		if cleaned, err := m.RunCleaner(); !cleaned || err != nil {
			t.Fatalf("cleaned %v, %v", cleaned, err)
		}
		return time.Since(start), size
	}
	fast, size := run(0)
	// Reading the log twice alone takes 2 s at this rate.
	slow, _ := run(float64(size))
	t.Logf("%d bytes cleaned in %v unthrottled, %v at %d bytes/s", size, fast, slow, size)
	if slow < 2*time.Second-cleanerThrottlePeriod {
		t.Fatalf("throttled pass took %v, want at least about 2 s", slow)
	}
	if fast > slow/4 {
		t.Fatalf("unthrottled pass took %v against %v throttled", fast, slow)
	}

	stop := make(chan struct{})
	th := &ioThrottler{rate: func() float64 { return 1 }, stop: stop}
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	start := time.Now()
	if err := th.account(1 << 20); !errors.Is(err, errCleanAborted) {
		t.Fatalf("account during a stop: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the stop ended the sleep after %v", took)
	}
}

// log.cleaner.threads passes run side by side on different logs and share
// log.cleaner.io.max.bytes.per.second; the thread count, the backoff and
// the key map memory (divided between the threads) change at runtime.
func TestCleanerThreads(t *testing.T) {
	clock := newFakeClock()
	m := openTestManager(t, ManagerConfig{LogDirs: []string{t.TempDir()}, Now: clock.Now, CleanerThreads: 1, CleanerBackoff: time.Hour})
	if n := m.CleanerThreads(); n != 1 {
		t.Fatalf("%d cleaner goroutines, want 1", n)
	}
	newDirtyLog := func(p int32, seed int64) *Log {
		l, err := m.GetOrCreateLog(TopicPartition{Topic: "compacted", Partition: p}, compactConfig())
		if err != nil {
			t.Fatal(err)
		}
		overwriteLog(t, l, record.CompressionNone, rand.New(rand.NewSource(seed)), 2000, 100, 200, clock)
		l.SetHighWatermark(l.LogEndOffset())
		return l
	}
	var logs []*Log
	for p := range int32(3) {
		logs = append(logs, newDirtyLog(p, 7))
	}
	size := logs[0].Size()
	// A pass reads its log at least twice: half a second each at this
	// rate, if the passes did not share it.
	m.SetCleanerIOMaxBytesPerSecond(float64(4 * size))
	m.SetCleanerThreads(3)
	if n := m.CleanerThreads(); n != 3 {
		t.Fatalf("%d cleaner goroutines, want 3", n)
	}
	// The goroutines sleep the hour's backoff: only its change wakes them.
	start := time.Now()
	m.SetCleanerBackoff(20 * time.Millisecond)
	overlap := 0
	for clean := 0; clean < len(logs); {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%d of %d logs cleaned after 30 s", clean, len(logs))
		}
		m.cleaner.mu.Lock()
		overlap = max(overlap, len(m.cleaner.inProgress))
		m.cleaner.mu.Unlock()
		clean = 0
		for _, l := range logs {
			if m.CleanerCheckpoint(l.tp) > 0 {
				clean++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("3 logs of %d bytes cleaned in %v by 3 goroutines at %d bytes/s; at most %d passes at once", size, took, 4*size, overlap)
	if overlap < 2 {
		t.Fatalf("at most %d pass at once with 3 cleaner goroutines", overlap)
	}
	// Together they read at least 6 × size at 4 × size a second.
	if took < 1500*time.Millisecond-cleanerThrottlePeriod {
		t.Fatalf("3 passes took %v: the I/O rate was not shared", took)
	}
	m.SetCleanerThreads(1)
	if n := m.CleanerThreads(); n != 1 {
		t.Fatalf("%d cleaner goroutines after the change to 1", n)
	}

	// The key map memory bounds how far one pass gets: with room for 20
	// keys of the 100, a pass stops short of where a full one ends.
	m = openTestManager(t, ManagerConfig{LogDirs: []string{t.TempDir()}, Now: clock.Now, DisableLogCleaner: true})
	full := newDirtyLog(0, 7)
	if cleaned, err := m.RunCleaner(); !cleaned || err != nil {
		t.Fatalf("cleaned %v, %v", cleaned, err)
	}
	m.SetCleanerDedupeBufferSize(20 * offsetMapEntryBytes)
	small := newDirtyLog(1, 7)
	if cleaned, err := m.RunCleaner(); !cleaned || err != nil {
		t.Fatalf("cleaned %v, %v", cleaned, err)
	}
	if got, want := m.CleanerCheckpoint(small.tp), m.CleanerCheckpoint(full.tp); got <= 0 || got >= want {
		t.Fatalf("with a 20-key map the pass ended at %d; a full pass ends at %d", got, want)
	}
}
