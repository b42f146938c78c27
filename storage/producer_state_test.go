package storage

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// idemBatch is a batch of n records of producer pid/epoch from sequence
// seq, every record at timestamp ts.
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, epoch, seq
	bb := record.NewBatchBuilder(opts)
	for i := 0; i < n; i++ {
		bb.Append(ts, nil, []byte("value"), nil)
	}
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// idemLog is a test log fed by a few idempotent producers in turn.
type idemLog struct {
	t     testing.TB
	l     *Log
	clock *fakeClock
	seq   map[int64]int32
}

// appendRound appends one 2-record batch of each producer 1..producers, in
// turn, rounds times.
func (il *idemLog) appendRound(producers, rounds int) {
	il.t.Helper()
	for r := 0; r < rounds; r++ {
		for pid := int64(1); pid <= int64(producers); pid++ {
			seq := il.seq[pid]
			appendOK(il.t, il.l, idemBatch(il.t, pid, 0, seq, 2, il.clock.Now().UnixMilli()), 0)
			il.seq[pid] = seq + 2
		}
	}
}

// smallSegments rolls every few batches, so that a test log has many
// segments and snapshots.
func smallSegments() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 100
	return cfg
}

func openIdemLog(t testing.TB, dir string, clock *fakeClock, clean bool) *idemLog {
	t.Helper()
	l := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: clean, Now: clock.Now})
	return &idemLog{t: t, l: l, clock: clock, seq: map[int64]int32{}}
}

// fullScanState is the producer state a scan of the whole log gives: what
// any snapshot-assisted load must reproduce.
func fullScanState(t testing.TB, l *Log) []ProducerState {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	m, txns := producerStateMap{}, newTxnState()
	if _, err := l.scanProducerBatchesLocked(m, &txns, l.logStartOffset, l.active().nextOffset, false); err != nil {
		t.Fatalf("full scan: %v", err)
	}
	m.evictBefore(l.logStartOffset)
	return m.describe()
}

func scanned(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producerBatchesScanned
}

func snapshotOffsets(t testing.TB, dir string) []int64 {
	t.Helper()
	offs, err := listProducerSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

func segmentBases(l *Log) []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.segments {
		out = append(out, s.baseOffset)
	}
	return out
}

func checkStateMatchesFullScan(t testing.TB, l *Log) {
	t.Helper()
	got, want := l.ActiveProducers(), fullScanState(t, l)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("producer state differs from a full scan of the log:\n got  %+v\n want %+v", got, want)
	}
}

func TestProducerSequenceChecks(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	const pid = 7
	steps := []struct {
		name       string
		epoch      int16
		seq        int32
		n          int
		wantErr    error
		wantDup    bool
		wantOffset int64
	}{
		{"unknown producer may start at any sequence", 0, 40, 2, nil, false, 0},
		{"next batch", 0, 42, 3, nil, false, 2},
		{"retry of the last batch is a duplicate", 0, 42, 3, nil, true, 2},
		{"retry of an older batch is a duplicate", 0, 40, 2, nil, true, 0},
		{"gap", 0, 46, 1, ErrOutOfOrderSequence, false, -1},
		{"overlap that is no retry", 0, 43, 2, ErrOutOfOrderSequence, false, -1},
		{"new epoch not at 0", 1, 45, 1, ErrOutOfOrderSequence, false, -1},
		{"new epoch at 0", 1, 0, 1, nil, false, 5},
		{"old epoch is fenced", 0, 45, 1, ErrInvalidProducerEpoch, false, -1},
		{"a retry of the old epoch's batch is fenced too", 0, 42, 3, ErrInvalidProducerEpoch, false, -1},
	}
	for _, s := range steps {
		info, err := l.AppendAsLeader(idemBatch(t, pid, s.epoch, s.seq, s.n, testEpochMs), AppendOptions{})
		if !errors.Is(err, s.wantErr) || (s.wantErr == nil && (info.Duplicate != s.wantDup || info.FirstOffset != s.wantOffset)) {
			t.Fatalf("%s: err %v dup %v offset %d, want %v dup %v offset %d", s.name, err, info.Duplicate, info.FirstOffset, s.wantErr, s.wantDup, s.wantOffset)
		}
	}
	if leo := l.LogEndOffset(); leo != 6 {
		t.Fatalf("log end offset %d, want 6: duplicates and refused batches must not be appended", leo)
	}

	// Only five batches are remembered.
	for seq := int32(1); seq <= 5; seq++ {
		appendOK(t, l, idemBatch(t, pid, 1, seq, 1, testEpochMs), 0)
	}
	if _, err := l.AppendAsLeader(idemBatch(t, pid, 1, 0, 1, testEpochMs), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("retry of the sixth-newest batch: %v, want out of order", err)
	}

	// The sequence wraps from int32 max to 0.
	appendOK(t, l, idemBatch(t, 8, 0, math.MaxInt32, 1, testEpochMs), 0)
	if _, err := l.AppendAsLeader(idemBatch(t, 8, 0, 0, 1, testEpochMs), AppendOptions{}); err != nil {
		t.Fatalf("sequence after int32 max: %v", err)
	}

	// Several batches in one record set are checked against each other.
	set := append(idemBatch(t, 9, 0, 0, 2, testEpochMs), idemBatch(t, 9, 0, 5, 1, testEpochMs)...)
	if _, err := l.AppendAsLeader(set, AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("record set with an inner gap: %v", err)
	}
	set = append(idemBatch(t, 9, 0, 0, 2, testEpochMs), idemBatch(t, 9, 0, 2, 1, testEpochMs)...)
	if _, err := l.AppendAsLeader(set, AppendOptions{}); err != nil {
		t.Fatalf("record set in sequence: %v", err)
	}
	checkStateMatchesFullScan(t, l)
}

func TestDuplicateAnswersWithTheOriginalLogAppendTime(t *testing.T) {
	clock := newFakeClock()
	cfg := DefaultLogConfig()
	cfg.MessageTimestampType = "LogAppendTime"
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	first := appendOK(t, l, idemBatch(t, 3, 0, 0, 1, 1), 0)
	clock.Advance(time.Minute)
	dup := appendOK(t, l, idemBatch(t, 3, 0, 0, 1, 1), 0)
	if !dup.Duplicate || dup.FirstOffset != first.FirstOffset || dup.LogAppendTime != first.LogAppendTime {
		t.Fatalf("duplicate answered %+v, first append %+v", dup, first)
	}
}

func TestFollowerAppendsKeepTheProducerState(t *testing.T) {
	leader := openTestLog(t, partitionDir(t), OpenOptions{})
	appendOK(t, leader, idemBatch(t, 1, 0, 0, 2, testEpochMs), 3)
	appendOK(t, leader, idemBatch(t, 2, 0, 0, 1, testEpochMs), 3)
	appendOK(t, leader, idemBatch(t, 1, 0, 2, 2, testEpochMs), 3)
	follower := openTestLog(t, filepath.Join(t.TempDir(), "t-0"), OpenOptions{})
	if _, err := follower.AppendAsFollower(readAll(t, leader, 0, leader.LogEndOffset()), false); err != nil {
		t.Fatal(err)
	}
	if got, want := follower.ActiveProducers(), leader.ActiveProducers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower state %+v, leader's %+v", got, want)
	}
	// The follower, promoted, deduplicates a retry without any scan.
	info := appendOK(t, follower, idemBatch(t, 1, 0, 2, 2, testEpochMs), 4)
	if !info.Duplicate || info.FirstOffset != 3 || scanned(follower) != 0 {
		t.Fatalf("retry on the promoted follower: %+v, %d batches scanned", info, scanned(follower))
	}
}

func TestProducerSnapshotsOnRollAndClose(t *testing.T) {
	dir, clock := partitionDir(t), newFakeClock()
	il := openIdemLog(t, dir, clock, true)
	il.appendRound(3, 60)
	bases := segmentBases(il.l)
	if len(bases) < 6 {
		t.Fatalf("%d segments; the test wants several rolls", len(bases))
	}
	// A snapshot at each of the newest segments' base offsets (the
	// oldest are pruned).
	want := bases[len(bases)-producerSnapshotsKept:]
	if got := snapshotOffsets(t, dir); !slices.Equal(got, want) {
		t.Fatalf("snapshots at %v, want the newest segment bases %v", got, want)
	}
	leo := il.l.LogEndOffset()
	stateBefore := il.l.ActiveProducers()
	if err := il.l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, dir); got[len(got)-1] != leo || len(got) != producerSnapshotsKept {
		t.Fatalf("snapshots after Close at %v, want the newest at the log end offset %d", got, leo)
	}
	// Reopened after a clean shutdown: nothing to scan.
	l := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: true, Now: clock.Now})
	if n := scanned(l); n != 0 {
		t.Fatalf("reopen scanned %d batches, want 0", n)
	}
	if got := l.ActiveProducers(); !reflect.DeepEqual(got, stateBefore) {
		t.Fatalf("state after reopen %+v, before %+v", got, stateBefore)
	}
	// Closing again without appends writes nothing new.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, dir); got[len(got)-1] != leo || len(got) != producerSnapshotsKept {
		t.Fatalf("snapshots after a second Close: %v", got)
	}
}

// crashCopy copies an open log's directory as a crash would leave it (no
// Close: no snapshot at the log end offset).
func crashCopy(t testing.TB, l *Log) string {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(l.Dir()))
	copyDir(t, l.Dir(), dst)
	return dst
}

// batchesFrom counts the batches at or after offset.
func batchesFrom(t testing.TB, l *Log, offset int64) int {
	t.Helper()
	return len(batchHeaders(t, readAll(t, l, offset, l.LogEndOffset())))
}

func TestReopenScansOnlyTheBatchesAfterTheNewestSnapshot(t *testing.T) {
	clock := newFakeClock()
	il := openIdemLog(t, partitionDir(t), clock, true)
	il.appendRound(4, 40)
	snaps := snapshotOffsets(t, il.l.Dir())
	newest := snaps[len(snaps)-1]
	tail := batchesFrom(t, il.l, newest)
	stateBefore := il.l.ActiveProducers()

	dir := crashCopy(t, il.l)
	// Break every batch header below the newest snapshot that opening a
	// cleanly shut down log does not read itself (the first batch of each
	// segment and those past its last index entry): a full scan would
	// fail on the first of them.
	l := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: true, Now: clock.Now})
	l.mu.RLock()
	type spot struct {
		path string
		pos  int64
	}
	var spots []spot
	buf := make([]byte, record.HeaderSize)
	for _, s := range l.segments {
		if s.baseOffset >= newest {
			break
		}
		_, lastIndexed := s.index.Lookup(math.MaxInt64)
		h, err := s.headerAt(0, buf)
		if err != nil {
			t.Fatal(err)
		}
		if pos := int64(h.Size()); pos < int64(lastIndexed) {
			spots = append(spots, spot{s.logPath(), pos})
		}
	}
	l.mu.RUnlock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(spots) == 0 {
		t.Fatal("no batch header to break: the segments are too small for the test")
	}
	for _, s := range spots {
		f, err := os.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0x7f}, s.pos+16); err != nil { // the magic byte
			t.Fatal(err)
		}
		f.Close()
	}
	// Close wrote a snapshot at the log end offset: remove it, so that the
	// reopen is the one after a crash, from the newest roll's snapshot.
	if err := os.Remove(producerSnapshotPath(dir, l.LogEndOffset())); err != nil {
		t.Fatal(err)
	}

	reopened := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: true, Now: clock.Now})
	reopened.mu.RLock()
	_, err := reopened.scanProducerBatchesLocked(producerStateMap{}, &txnState{}, 0, reopened.active().nextOffset, false)
	reopened.mu.RUnlock()
	if !errors.Is(err, record.ErrUnsupportedMagic) {
		t.Fatalf("a full scan of the damaged log gave %v; the test must make it fail", err)
	}
	if n := scanned(reopened); n != int64(tail) {
		t.Fatalf("reopen scanned %d batches, want the %d after the snapshot at %d", n, tail, newest)
	}
	if got := reopened.ActiveProducers(); !reflect.DeepEqual(got, stateBefore) {
		t.Fatalf("state after reopen %+v, before %+v", got, stateBefore)
	}
	// And the state works: the producers' next batches are in sequence.
	il2 := &idemLog{t: t, l: reopened, clock: clock, seq: il.seq}
	il2.appendRound(4, 1)

	// Without any snapshot the scan meets the broken headers: the log
	// still opens, and takes every producer's next batch.
	if err := reopened.Close(); err != nil {
		t.Fatal(err)
	}
	for _, off := range snapshotOffsets(t, dir) {
		os.Remove(producerSnapshotPath(dir, off))
	}
	noSnapshot := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: true, Now: clock.Now})
	il3 := &idemLog{t: t, l: noSnapshot, clock: clock, seq: il.seq}
	il3.appendRound(4, 1)
}

func TestCorruptProducerSnapshotFallsBack(t *testing.T) {
	clock := newFakeClock()
	il := openIdemLog(t, partitionDir(t), clock, true)
	il.appendRound(3, 40)
	snaps := snapshotOffsets(t, il.l.Dir())
	stateBefore := il.l.ActiveProducers()
	corruptions := []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"flipped byte", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 20); err != nil {
				t.Fatal(err)
			}
		}},
		{"unknown version", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{9}, 0)
			f.Close()
		}},
		{"another offset's snapshot", func(t *testing.T, path string) {
			b, err := os.ReadFile(producerSnapshotPath(filepath.Dir(path), snaps[len(snaps)-3]))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			dir := crashCopy(t, il.l)
			newest, older := snaps[len(snaps)-1], snaps[len(snaps)-2]
			c.corrupt(t, producerSnapshotPath(dir, newest))
			l := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: true, Now: clock.Now})
			if n, want := scanned(l), batchesFrom(t, l, older); n != int64(want) {
				t.Fatalf("scanned %d batches, want the %d after the older snapshot at %d", n, want, older)
			}
			if got := l.ActiveProducers(); !reflect.DeepEqual(got, stateBefore) {
				t.Fatalf("state %+v, want %+v", got, stateBefore)
			}
			if got := snapshotOffsets(t, dir); slices.Contains(got, newest) {
				t.Fatalf("the corrupt snapshot %d was kept: %v", newest, got)
			}
		})
	}
	t.Run("every snapshot corrupt: full scan", func(t *testing.T) {
		dir := crashCopy(t, il.l)
		for _, off := range snaps {
			if err := os.WriteFile(producerSnapshotPath(dir, off), []byte("garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		l := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: true, Now: clock.Now})
		if n, want := scanned(l), batchesFrom(t, l, 0); n != int64(want) {
			t.Fatalf("scanned %d batches, want all %d", n, want)
		}
		if got := l.ActiveProducers(); !reflect.DeepEqual(got, stateBefore) {
			t.Fatalf("state %+v, want %+v", got, stateBefore)
		}
	})
}

func TestTruncationBelowASnapshotDeletesIt(t *testing.T) {
	clock := newFakeClock()
	il := openIdemLog(t, partitionDir(t), clock, true)
	il.appendRound(3, 40)
	snaps := snapshotOffsets(t, il.l.Dir())
	// Cut between the two newest snapshots, in the middle of a segment.
	target := (snaps[len(snaps)-2] + snaps[len(snaps)-1]) / 2
	if err := il.l.TruncateTo(target); err != nil {
		t.Fatal(err)
	}
	leo := il.l.LogEndOffset()
	for _, off := range snapshotOffsets(t, il.l.Dir()) {
		if off > leo {
			t.Fatalf("snapshot %d survived a truncation to %d", off, leo)
		}
	}
	checkStateMatchesFullScan(t, il.l)
	// Producer 1's batches after the cut are gone: its retry of the first
	// truncated one is appended anew, not acknowledged as a duplicate.
	var last ProducerState
	for _, p := range il.l.ActiveProducers() {
		if p.ProducerID == 1 {
			last = p
		}
	}
	info := appendOK(t, il.l, idemBatch(t, 1, 0, last.LastSequence+1, 2, clock.Now().UnixMilli()), 0)
	if info.Duplicate || info.FirstOffset != leo {
		t.Fatalf("batch after the truncation point: %+v, want appended at %d", info, leo)
	}
	checkStateMatchesFullScan(t, il.l)

	// A reopen must not load a snapshot from beyond the truncated end.
	if err := il.l.Close(); err != nil {
		t.Fatal(err)
	}
	l := openTestLog(t, il.l.Dir(), OpenOptions{Config: smallSegments(), CleanShutdown: true, Now: clock.Now})
	checkStateMatchesFullScan(t, l)

	// Truncating everything forgets every producer and snapshot.
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if got := l.ActiveProducers(); len(got) != 0 {
		t.Fatalf("producers after a full truncation: %+v", got)
	}
	if got := snapshotOffsets(t, l.Dir()); len(got) != 0 {
		t.Fatalf("snapshots after a full truncation: %v", got)
	}
}

func TestSnapshotAboveTheRecoveredLogEndIsNotLoaded(t *testing.T) {
	clock := newFakeClock()
	il := openIdemLog(t, partitionDir(t), clock, true)
	il.appendRound(2, 20)
	dir := il.l.Dir()
	// A clean Close snapshots at the log end offset; then a crash "loses"
	// the newest segment's tail (its batches were never fsynced).
	closedAt := il.l.LogEndOffset()
	if err := il.l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, dir); !slices.Contains(got, closedAt) {
		t.Fatalf("no snapshot at the log end offset %d after Close: %v", closedAt, got)
	}
	paths := segmentLogPaths(t, dir)
	slices.Sort(paths)
	lastSeg := paths[len(paths)-1]
	st, err := os.Stat(lastSeg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(lastSeg, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	l := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: false, Now: clock.Now})
	leo := l.LogEndOffset()
	if leo >= closedAt {
		t.Fatalf("recovered log end offset %d, want below %d", leo, closedAt)
	}
	for _, off := range snapshotOffsets(t, dir) {
		if off > leo {
			t.Fatalf("snapshot %d kept above the recovered log end offset %d", off, leo)
		}
	}
	checkStateMatchesFullScan(t, l)
}

func TestRetentionDeletesOldSnapshotsAndProducers(t *testing.T) {
	clock := newFakeClock()
	il := openIdemLog(t, partitionDir(t), clock, true)
	// Producer 1 writes only at the start; 2 and 3 go on.
	il.appendRound(1, 3)
	for r := 0; r < 40; r++ {
		for pid := int64(2); pid <= 3; pid++ {
			seq := il.seq[pid]
			appendOK(t, il.l, idemBatch(t, pid, 0, seq, 2, clock.Now().UnixMilli()), 0)
			il.seq[pid] = seq + 2
		}
	}
	snaps := snapshotOffsets(t, il.l.Dir())
	il.l.SetHighWatermark(il.l.LogEndOffset())
	// DeleteRecords up to the second newest snapshot.
	start := snaps[len(snaps)-2]
	if err := il.l.IncrementLogStartOffset(start); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, il.l.Dir()); !slices.Equal(got, snaps[len(snaps)-2:]) {
		t.Fatalf("snapshots %v after the log start moved to %d, want %v", got, start, snaps[len(snaps)-2:])
	}
	for _, p := range il.l.ActiveProducers() {
		if p.ProducerID == 1 {
			t.Fatalf("producer 1, whose batches are all below the log start offset, is still known: %+v", p)
		}
	}
	if n, err := il.l.DeleteOldSegments(); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	checkStateMatchesFullScan(t, il.l)
	// Producer 1 comes back with any sequence: it is a new producer now.
	if _, err := il.l.AppendAsLeader(idemBatch(t, 1, 0, 1000, 1, clock.Now().UnixMilli()), AppendOptions{}); err != nil {
		t.Fatalf("forgotten producer's batch: %v", err)
	}
}

func TestRemoveExpiredProducers(t *testing.T) {
	clock := newFakeClock()
	l := openTestLog(t, partitionDir(t), OpenOptions{Now: clock.Now})
	now := clock.Now()
	appendOK(t, l, idemBatch(t, 1, 0, 0, 1, now.Add(-2*time.Hour).UnixMilli()), 0)
	appendOK(t, l, idemBatch(t, 2, 0, 0, 1, now.Add(-30*time.Minute).UnixMilli()), 0)
	// Expiry counts from the producer's newest batch.
	appendOK(t, l, idemBatch(t, 3, 0, 0, 1, now.Add(-3*time.Hour).UnixMilli()), 0)
	appendOK(t, l, idemBatch(t, 3, 0, 1, 1, now.UnixMilli()), 0)
	if n := l.RemoveExpiredProducers(now, time.Hour); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	var ids []int64
	for _, p := range l.ActiveProducers() {
		ids = append(ids, p.ProducerID)
	}
	if !slices.Equal(ids, []int64{2, 3}) {
		t.Fatalf("producers left %v, want [2 3]", ids)
	}
	// The expired producer's next batch, whatever its sequence, is a new
	// producer's; a retry of its old batch is no longer recognised.
	info, err := l.AppendAsLeader(idemBatch(t, 1, 0, 0, 1, now.UnixMilli()), AppendOptions{})
	if err != nil || info.Duplicate {
		t.Fatalf("retry of an expired producer's batch: %+v, %v; want a fresh append", info, err)
	}
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	m := producerStateMap{}
	for pid := int64(0); pid < 50; pid++ {
		for i := int64(0); i < pid%8+1; i++ {
			h := record.BatchHeader{BaseOffset: pid*100 + i*10, LastOffsetDelta: 3, ProducerID: pid, ProducerEpoch: int16(pid % 3),
				BaseSequence: int32(i * 4), MaxTimestamp: testEpochMs + i, RecordCount: 4}
			if pid%2 == 0 {
				h.Attributes = 1 << 3 // LogAppendTime
			}
			m.apply(&txnState{}, &h, nil)
		}
	}
	const offset = 10_000
	b := encodeProducerSnapshot(offset, producerSnapshot{producers: m, releasedMarker: -1})
	got, err := decodeProducerSnapshot(b, offset)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.producers.describe(), m.describe()) {
		t.Fatalf("round trip differs:\n got  %+v\n want %+v", got.producers.describe(), m.describe())
	}
	if _, err := decodeProducerSnapshot(b, offset+1); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("snapshot read as another offset's: %v", err)
	}
	for i := range b {
		c := slices.Clone(b)
		c[i] ^= 0x01
		if _, err := decodeProducerSnapshot(c, offset); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

// FuzzDecodeProducerSnapshot: whatever the bytes, decoding returns a state
// or an ErrCorruptCheckpoint, never panics, and what it accepts encodes
// back to the same bytes.
func FuzzDecodeProducerSnapshot(f *testing.F) {
	m := producerStateMap{}
	h := record.BatchHeader{BaseOffset: 5, LastOffsetDelta: 1, ProducerID: 3, BaseSequence: 0, MaxTimestamp: 9}
	m.apply(&txnState{}, &h, nil)
	f.Add(encodeProducerSnapshot(10, producerSnapshot{producers: m, releasedMarker: -1}))
	f.Add(encodeProducerSnapshot(0, producerSnapshot{producers: producerStateMap{}, releasedMarker: -1}))
	f.Add(encodeProducerSnapshot(10, txnSnapshotSeed()))
	f.Add(encodeProducerSnapshotV1(10, m))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeProducerSnapshot(b, 10)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("error %v does not wrap ErrCorruptCheckpoint", err)
			}
			return
		}
		again := encodeProducerSnapshot(10, got)
		if b[0] == producerSnapshotVersionV1 {
			again = encodeProducerSnapshotV1(10, got.producers)
		}
		if !slices.Equal(again, b) {
			t.Fatalf("accepted bytes do not round-trip")
		}
	})
}

// TestTruncateToTheFirstSegmentBaseKeepsTheNewIndexesMapped: a truncation
// to the first segment's base offset starts the log afresh there, replacing
// that segment's files; closing the old indexes must not trim the new ones
// under their mappings (it did: SIGBUS at the next index write). Found by
// TestProducerStateUnderRandomOperations.
func TestTruncateToTheFirstSegmentBaseKeepsTheNewIndexesMapped(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	for i := 0; i < 10; i++ {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 10), 0)
	}
	if err := l.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs+int64(i), 3), 10), 0)
	}
	checkLogInvariants(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHeaderScanReadsEveryBatch: the chunked header scan sees exactly the
// batches that reading each header on its own sees, with batches smaller
// than a header's chunk, larger than the large-batch threshold and larger
// than a whole chunk, across segments, from any start offset.
func TestHeaderScanReadsEveryBatch(t *testing.T) {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 256 << 10
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg})
	sizes := []int{5, 5, 500, 9000, 5, 70_000, 5, 5, 3000, 100_000, 5}
	seq := map[int64]int32{}
	for i := 0; i < 60; i++ {
		pid := int64(i % 4)
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, seq[pid]
		bb := record.NewBatchBuilder(opts)
		n := 1 + i%3
		for j := 0; j < n; j++ {
			bb.Append(testEpochMs, nil, make([]byte, sizes[(i+j)%len(sizes)]), nil)
		}
		b, err := bb.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		appendOK(t, l, b, 0)
		seq[pid] += int32(n)
	}
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments; the test wants several", l.NumSegments())
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	var all []record.BatchHeader
	buf := make([]byte, record.HeaderSize)
	for _, s := range l.segments {
		for pos := int64(0); ; {
			h, err := s.headerAt(pos, buf)
			if err != nil {
				break
			}
			all = append(all, h)
			pos += int64(h.Size())
		}
	}
	leo := l.active().nextOffset
	for _, from := range []int64{0, all[1].BaseOffset, all[len(all)/2].BaseOffset + 1, all[len(all)-1].BaseOffset} {
		want := producerStateMap{}
		wantN := 0
		for i := range all {
			if all[i].LastOffset() >= from {
				want.apply(&txnState{}, &all[i], nil)
				wantN++
			}
		}
		got := producerStateMap{}
		n, err := l.scanProducerBatchesLocked(got, &txnState{}, from, leo, false)
		if err != nil || n != wantN || !reflect.DeepEqual(got.describe(), want.describe()) {
			t.Fatalf("scan from %d: %d batches, err %v; want %d batches\n got  %+v\n want %+v", from, n, err, wantN, got.describe(), want.describe())
		}
	}
}
