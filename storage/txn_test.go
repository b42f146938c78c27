package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/keelstream/keel/network/record"
)

// txnBatch is a transactional batch of n records of producer pid/epoch
// from sequence seq.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, seq, true
	bb := record.NewBatchBuilder(opts)
	for i := 0; i < n; i++ {
		bb.Append(testEpochMs, nil, []byte("txn-value"), nil)
	}
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// markerBatch is a COMMIT or ABORT marker as the coordinator writes it.
func markerBatch(t testing.TB, typ record.ControlType, pid int64, epoch int16, coordinatorEpoch int32) []byte {
	t.Helper()
	b, err := record.BuildControlBatch(nil, typ, coordinatorEpoch, pid, epoch, testEpochMs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appendMarkerOK appends a marker as the coordinator does, failing the test
// on error, and returns the marker's offset.
func appendMarkerOK(t testing.TB, l *Log, typ record.ControlType, pid int64, epoch int16, coordinatorEpoch int32) int64 {
	t.Helper()
	info, err := l.AppendAsLeader(markerBatch(t, typ, pid, epoch, coordinatorEpoch), AppendOptions{FromCoordinator: true})
	if err != nil {
		t.Fatalf("append marker of producer %d: %v", pid, err)
	}
	return info.FirstOffset
}

// txnView is what a consumer and DescribeProducers see of a log's
// transactions: what reopening, recovery and replication must preserve.
type txnView struct {
	LSO       int64
	Aborted   []AbortedTxn
	Producers []ProducerState
}

func viewTxns(l *Log) txnView {
	return txnView{LSO: l.LastStableOffset(), Aborted: l.AbortedTransactions(0, math.MaxInt64), Producers: l.ActiveProducers()}
}

func TestLastStableOffset(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	hwToEnd := func() { l.SetHighWatermark(l.LogEndOffset()) }
	steps := []struct {
		name    string
		do      func()
		wantLSO int64
	}{
		{"non-transactional data does not hold it", func() {
			appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 5), 0) // 0-2
			appendOK(t, l, idemBatch(t, 9, 0, 0, 2, testEpochMs), 0)                             // 3-4
			hwToEnd()
		}, 5},
		{"a transactional batch holds it at its base offset", func() {
			appendOK(t, l, txnBatch(t, 1, 0, 0, 2), 0) // 5-6
			hwToEnd()
		}, 5},
		{"a second producer's transaction starts later", func() {
			appendOK(t, l, txnBatch(t, 2, 0, 0, 1), 0) // 7
			appendOK(t, l, txnBatch(t, 1, 0, 2, 1), 0) // 8
			hwToEnd()
		}, 5},
		{"a marker below the high watermark does not free it yet", func() {
			appendMarkerOK(t, l, record.ControlCommit, 1, 0, 0) // 9
		}, 5},
		{"the high watermark passing the marker frees it up to the next transaction", func() { hwToEnd() }, 7},
		{"a non-transactional batch of a third producer changes nothing", func() {
			appendOK(t, l, idemBatch(t, 9, 0, 2, 1, testEpochMs), 0) // 10
			hwToEnd()
		}, 7},
		{"the last transaction aborted, high watermark on the marker", func() {
			m := appendMarkerOK(t, l, record.ControlAbort, 2, 0, 0) // 11
			l.SetHighWatermark(m)
		}, 7},
		{"high watermark past the marker: the LSO is the high watermark", func() { hwToEnd() }, 12},
		{"a new transaction of the first producer", func() {
			appendOK(t, l, txnBatch(t, 1, 0, 3, 1), 0) // 12
			appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 1), 5), 0)
			hwToEnd()
		}, 12},
	}
	for _, s := range steps {
		s.do()
		if got := l.LastStableOffset(); got != s.wantLSO {
			t.Fatalf("%s: LSO %d, want %d (HW %d, LEO %d)", s.name, got, s.wantLSO, l.HighWatermark(), l.LogEndOffset())
		}
		info, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
		if err != nil || info.LastStableOffset != s.wantLSO {
			t.Fatalf("%s: Read says LSO %d (err %v), want %d", s.name, info.LastStableOffset, err, s.wantLSO)
		}
	}
	want := []ProducerState{
		{ProducerID: 1, CurrentTxnStartOffset: 12, CoordinatorEpoch: 0},
		{ProducerID: 2, CurrentTxnStartOffset: -1, CoordinatorEpoch: 0},
		{ProducerID: 9, CurrentTxnStartOffset: -1, CoordinatorEpoch: -1},
	}
	got := l.ActiveProducers()
	if len(got) != len(want) {
		t.Fatalf("producers %+v", got)
	}
	for i := range want {
		if got[i].ProducerID != want[i].ProducerID || got[i].CurrentTxnStartOffset != want[i].CurrentTxnStartOffset || got[i].CoordinatorEpoch != want[i].CoordinatorEpoch {
			t.Fatalf("producer %d: %+v, want txn start %d coordinator epoch %d", want[i].ProducerID, got[i], want[i].CurrentTxnStartOffset, want[i].CoordinatorEpoch)
		}
	}
	checkStateMatchesFullScan(t, l)
}

// abortFixture writes, with a segment roll every few batches, committed and
// aborted transactions of three producers, interleaved, and returns the
// aborted ones as the index must list them.
func abortFixture(t testing.TB, l *Log) []AbortedTxn {
	t.Helper()
	seq := map[int64]int32{}
	data := func(pid int64) int64 {
		info := appendOK(t, l, txnBatch(t, pid, 0, seq[pid], 2), 0)
		seq[pid] += 2
		return info.FirstOffset
	}
	var want []AbortedTxn
	for round := 0; round < 6; round++ {
		a := data(1)
		b := data(2)
		data(1)
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 2), 5), 0)
		// Producer 1 aborts (producer 2's transaction is still open: the
		// LSO after the marker is its first offset), producer 2 commits.
		m := appendMarkerOK(t, l, record.ControlAbort, 1, 0, 0)
		want = append(want, AbortedTxn{ProducerID: 1, FirstOffset: a, LastOffset: m, LastStableOffset: b})
		c := data(3)
		appendMarkerOK(t, l, record.ControlCommit, 2, 0, 0)
		m = appendMarkerOK(t, l, record.ControlAbort, 3, 0, 0)
		want = append(want, AbortedTxn{ProducerID: 3, FirstOffset: c, LastOffset: m, LastStableOffset: m + 1})
		if round%2 == 1 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	return want
}

func TestAbortedTransactions(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: smallSegments()})
	all := abortFixture(t, l)
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments; the test wants aborts in several", l.NumSegments())
	}
	if got := l.AbortedTransactions(0, l.LogEndOffset()); !reflect.DeepEqual(got, all) {
		t.Fatalf("every aborted transaction:\n got  %+v\n want %+v", got, all)
	}
	if n := len(filesWithSuffix(t, l.Dir(), txnIndexSuffix)); n == 0 || n > l.NumSegments() {
		t.Fatalf("%d txnindex files for %d segments", n, l.NumSegments())
	}
	between := func(from, upper int64) []AbortedTxn {
		var out []AbortedTxn
		for _, a := range all {
			if a.LastOffset >= from && a.FirstOffset < upper {
				out = append(out, a)
			}
		}
		return out
	}
	leo := l.LogEndOffset()
	for _, r := range [][2]int64{
		{0, 1}, {0, all[0].FirstOffset + 1}, {all[0].LastOffset, all[0].LastOffset + 1}, {all[0].LastOffset + 1, all[3].FirstOffset},
		{all[2].FirstOffset, all[5].LastOffset}, {all[4].LastOffset - 1, leo}, {leo - 1, leo},
	} {
		if got, want := l.AbortedTransactions(r[0], r[1]), between(r[0], r[1]); !reflect.DeepEqual(got, want) {
			t.Fatalf("aborted transactions in [%d, %d):\n got  %+v\n want %+v", r[0], r[1], got, want)
		}
	}
	if got := l.AbortedTransactions(5, 5); got != nil {
		t.Fatalf("an empty range: %+v", got)
	}
	// A commit leaves no entry.
	c := openTestLog(t, filepath.Join(t.TempDir(), "c-0"), OpenOptions{})
	appendOK(t, c, txnBatch(t, 1, 0, 0, 2), 0)
	appendMarkerOK(t, c, record.ControlCommit, 1, 0, 0)
	c.SetHighWatermark(c.LogEndOffset())
	if got := c.AbortedTransactions(0, c.LogEndOffset()); got != nil || len(filesWithSuffix(t, c.Dir(), txnIndexSuffix)) != 0 {
		t.Fatalf("a committed transaction left %+v and files %v", got, filesWithSuffix(t, c.Dir(), txnIndexSuffix))
	}
}

// openTxnFixture is a log with committed, aborted, open and completed but
// not yet replicated transactions, and its high watermark.
func openTxnFixture(t testing.TB, dir string) (*Log, int64) {
	t.Helper()
	l := openTestLog(t, dir, OpenOptions{Config: smallSegments()})
	abortFixture(t, l)
	appendOK(t, l, txnBatch(t, 4, 0, 0, 2), 0) // open
	appendOK(t, l, txnBatch(t, 5, 0, 0, 2), 0)
	appendOK(t, l, txnBatch(t, 6, 0, 0, 1), 0)
	appendOK(t, l, idemBatch(t, 7, 0, 0, 1, testEpochMs), 0)
	l.SetHighWatermark(l.LogEndOffset())
	hw := l.LogEndOffset()
	appendMarkerOK(t, l, record.ControlAbort, 5, 0, 0) // complete, not replicated
	appendMarkerOK(t, l, record.ControlCommit, 6, 0, 0)
	return l, hw
}

func TestTransactionStateSurvivesReopen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clean bool
	}{
		{"clean shutdown", true},
		{"unclean shutdown, recovery point 0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, hw := openTxnFixture(t, partitionDir(t))
			before := viewTxns(l)
			if before.LSO >= hw {
				t.Fatalf("fixture: LSO %d is not held below the high watermark %d", before.LSO, hw)
			}
			dir := l.Dir()
			if tc.clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				dir = filepath.Join(t.TempDir(), filepath.Base(l.Dir()))
				copyDir(t, l.Dir(), dir) // a crash: no Close, no snapshot at the end
				// And no index at all: recovery must rebuild them.
				for _, name := range filesWithSuffix(t, dir, txnIndexSuffix) {
					if err := os.Remove(filepath.Join(dir, name)); err != nil {
						t.Fatal(err)
					}
				}
			}
			r := openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: tc.clean, HighWatermark: hw})
			if got := viewTxns(r); !reflect.DeepEqual(got, before) {
				t.Fatalf("after reopening:\n got  %+v\n want %+v", got, before)
			}
			checkStateMatchesFullScan(t, r)
			// The transactions go on where they were.
			appendMarkerOK(t, r, record.ControlCommit, 4, 0, 0)
			r.SetHighWatermark(r.LogEndOffset())
			if lso := r.LastStableOffset(); lso != r.LogEndOffset() {
				t.Fatalf("all transactions decided and replicated: LSO %d, log end %d", lso, r.LogEndOffset())
			}
		})
	}
}

// TestUnstableTransactionsOutliveASnapshot: a snapshot taken after the
// high watermark released a transaction is not used by an open whose
// checkpointed high watermark is older: an older snapshot or the log is.
func TestUnstableTransactionsOutliveASnapshot(t *testing.T) {
	l, _ := openTxnFixture(t, partitionDir(t))
	hwBefore := l.HighWatermark()
	before := viewTxns(l)
	l.SetHighWatermark(l.LogEndOffset()) // releases the last markers
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openTestLog(t, l.Dir(), OpenOptions{Config: smallSegments(), CleanShutdown: true, HighWatermark: hwBefore})
	if got := viewTxns(r); !reflect.DeepEqual(got, before) {
		t.Fatalf("opened with the older high watermark:\n got  %+v\n want %+v", got, before)
	}
}

// encodeProducerSnapshotV1 is the encoder of version 1 snapshots, before
// transactions, kept to prove that their files still load.
func encodeProducerSnapshotV1(offset int64, m producerStateMap) []byte {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	be := binary.BigEndian
	b := make([]byte, producerSnapshotHeaderV1)
	b[0] = producerSnapshotVersionV1
	be.PutUint64(b[5:], uint64(offset))
	be.PutUint32(b[13:], uint32(len(ids)))
	for _, id := range ids {
		e := m[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(len(e.batches)))
		for _, pb := range e.batches {
			b = be.AppendUint32(b, uint32(pb.FirstSeq))
			b = be.AppendUint32(b, uint32(pb.LastSeq))
			b = be.AppendUint64(b, uint64(pb.FirstOffset))
			b = be.AppendUint64(b, uint64(pb.LastOffset))
			b = be.AppendUint64(b, uint64(pb.MaxTimestamp))
			var flags byte
			if pb.LogAppendTime {
				flags |= 1
			}
			b = append(b, flags)
		}
	}
	be.PutUint32(b[1:], crc32.Checksum(b[5:], snapshotCRCTable))
	return b
}

// txnSnapshotSeed is a snapshot state with every transaction field set.
func txnSnapshotSeed() producerSnapshot {
	m := producerStateMap{}
	var txns txnState
	for _, h := range []record.BatchHeader{
		{BaseOffset: 1, ProducerID: 3, BaseSequence: 0, MaxTimestamp: 9, Attributes: 0x10},
		{BaseOffset: 2, ProducerID: 4, BaseSequence: 0, MaxTimestamp: 9, Attributes: 0x10},
	} {
		m.apply(&txns, &h, nil)
	}
	txns.complete(txnSpan{producerID: 4, firstOffset: 2, lastOffset: 3})
	m[4].txnFirstOffset, m[4].coordinatorEpoch, m[4].lastOffset = -1, 2, 3
	return producerSnapshot{producers: m, unstable: txns.unstable, releasedMarker: 0}
}

func TestOldFormatProducerSnapshotLoads(t *testing.T) {
	dir := partitionDir(t)
	l := openTestLog(t, dir, OpenOptions{})
	appendOK(t, l, idemBatch(t, 1, 0, 0, 2, testEpochMs), 0)
	appendOK(t, l, idemBatch(t, 2, 3, 0, 1, testEpochMs+5), 0)
	appendOK(t, l, idemBatch(t, 1, 0, 2, 2, testEpochMs+7), 0)
	want := l.ActiveProducers()
	leo := l.LogEndOffset()
	l.mu.RLock()
	v1 := encodeProducerSnapshotV1(leo, l.producers)
	l.mu.RUnlock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(producerSnapshotPath(dir, leo), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	r := openTestLog(t, dir, OpenOptions{CleanShutdown: true})
	if n := scanned(r); n != 0 {
		t.Fatalf("the version 1 snapshot was not used: %d batches scanned", n)
	}
	if got := r.ActiveProducers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("from a version 1 snapshot:\n got  %+v\n want %+v", got, want)
	}
	if lso := r.LastStableOffset(); lso != r.HighWatermark() {
		t.Fatalf("LSO %d with no transaction, HW %d", lso, r.HighWatermark())
	}
}

func TestTruncateToDropsTransactions(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: smallSegments()})
	appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 2), 5), 0) // 0-1
	appendOK(t, l, txnBatch(t, 1, 0, 0, 2), 0)                                           // 2-3
	l.Roll()
	appendOK(t, l, txnBatch(t, 2, 0, 0, 2), 0)                   // 4-5
	abort1 := appendMarkerOK(t, l, record.ControlAbort, 1, 0, 0) // 6
	l.Roll()
	abort2 := appendMarkerOK(t, l, record.ControlAbort, 2, 0, 0) // 7
	appendOK(t, l, txnBatch(t, 3, 0, 0, 1), 0)                   // 8
	l.SetHighWatermark(l.LogEndOffset())
	steps := []struct {
		to          int64
		wantLSO     int64
		wantAborted []int64 // markers
		wantOpen    map[int64]int64
	}{
		{8, 8, []int64{abort1, abort2}, map[int64]int64{}},
		{7, 4, []int64{abort1}, map[int64]int64{2: 4}},
		{6, 2, nil, map[int64]int64{1: 2, 2: 4}},
		{4, 2, nil, map[int64]int64{1: 2}},
		{2, 2, nil, map[int64]int64{}},
	}
	for _, s := range steps {
		if err := l.TruncateTo(s.to); err != nil {
			t.Fatal(err)
		}
		var markers []int64
		for _, a := range l.AbortedTransactions(0, math.MaxInt64) {
			markers = append(markers, a.LastOffset)
		}
		open := map[int64]int64{}
		for _, p := range l.ActiveProducers() {
			if p.CurrentTxnStartOffset >= 0 {
				open[p.ProducerID] = p.CurrentTxnStartOffset
			}
		}
		if lso := l.LastStableOffset(); lso != s.wantLSO || !slices.Equal(markers, s.wantAborted) || !reflect.DeepEqual(open, s.wantOpen) {
			t.Fatalf("truncated to %d: LSO %d, aborted markers %v, open %v; want %d, %v, %v", s.to, lso, markers, open, s.wantLSO, s.wantAborted, s.wantOpen)
		}
		checkLogInvariants(t, l)
		checkStateMatchesFullScan(t, l)
	}
	// The entries are gone from the files too.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openTestLog(t, l.Dir(), OpenOptions{Config: smallSegments(), CleanShutdown: true})
	if got := r.AbortedTransactions(0, math.MaxInt64); got != nil {
		t.Fatalf("reopened after the truncations: %+v", got)
	}
}

func TestRetentionDeletesTheTxnIndexWithItsSegment(t *testing.T) {
	cfg := smallSegments()
	cfg.FileDeleteDelayMs = 0
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg})
	all := abortFixture(t, l)
	bases := segmentBases(l)
	indexed := filesWithSuffix(t, l.Dir(), txnIndexSuffix)
	if len(indexed) < 2 {
		t.Fatalf("txnindex files %v; the test wants several", indexed)
	}
	// DeleteRecords up to the second segment, then retention.
	if err := l.IncrementLogStartOffset(bases[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteOldSegments(); err != nil {
		t.Fatal(err)
	}
	for _, name := range filesWithSuffix(t, l.Dir(), "") {
		if base, ok := parseSegmentBase(name); ok && base < bases[2] && filepath.Ext(name) != ".snapshot" {
			t.Fatalf("%s of a deleted segment is left", name)
		}
	}
	var want []AbortedTxn
	for _, a := range all {
		if a.LastOffset >= bases[2] {
			want = append(want, a)
		}
	}
	if got := l.AbortedTransactions(bases[2], math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Fatalf("after retention:\n got  %+v\n want %+v", got, want)
	}
}

// TestOpenTransactionBelowTheLogStartHoldsTheLSO: DeleteRecords past an
// open transaction's first offset keeps the transaction (Kafka does): the
// LSO stays at the log start offset until the marker.
func TestOpenTransactionBelowTheLogStartHoldsTheLSO(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: smallSegments()})
	appendOK(t, l, txnBatch(t, 1, 0, 0, 2), 0)
	for i := 0; i < 5; i++ {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 2), 5), 0)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.IncrementLogStartOffset(6); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 6 {
		t.Fatalf("LSO %d, want the log start offset 6", lso)
	}
	appendMarkerOK(t, l, record.ControlCommit, 1, 0, 0)
	l.SetHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d after the marker, want %d", lso, l.LogEndOffset())
	}
}

func TestCompactionKeepsAbortedEntriesAndMarkers(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	keyed := func(pid int64, seq int32, key, value string) []byte {
		b := keyedBatch(t, record.CompressionNone, testEpochMs, kv{key, []byte(value)})
		record.SetProducerFields(b, pid, 0, seq)
		b[22] |= 0x10 // transactional
		return resign(b)
	}
	appendOK(t, l, keyed(1, 0, "a", "1"), 0)
	appendOK(t, l, keyed(2, 0, "b", "1"), 0)
	appendMarkerOK(t, l, record.ControlAbort, 1, 0, 0)
	l.Roll()
	appendOK(t, l, keyed(1, 1, "a", "2"), 0)
	appendMarkerOK(t, l, record.ControlCommit, 2, 0, 0)
	appendMarkerOK(t, l, record.ControlAbort, 1, 0, 0)
	l.Roll()
	appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, kv{"a", []byte("3")}, kv{"b", []byte("3")}), 0)
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	want := l.AbortedTransactions(0, math.MaxInt64)
	if len(want) != 2 {
		t.Fatalf("fixture: %+v", want)
	}
	cleanOnce(t, l, 0)
	if got := l.AbortedTransactions(0, math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Fatalf("after cleaning:\n got  %+v\n want %+v", got, want)
	}
	markers := 0
	for _, h := range batchHeaders(t, readAll(t, l, 0, l.LogEndOffset())) {
		if h.IsControl() {
			markers++
		}
	}
	if markers != 3 {
		t.Fatalf("%d markers after cleaning, want 3", markers)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openTestLog(t, l.Dir(), OpenOptions{Config: cfg, Now: clock.Now, CleanShutdown: true, HighWatermark: l.LogEndOffset()})
	if got := r.AbortedTransactions(0, math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened after cleaning:\n got  %+v\n want %+v", got, want)
	}
}

// TestCompactionDropsAbortedRecords: an aborted transaction's record does
// not shadow the committed value of its key (it would then be lost to
// read_committed readers and to a coordinator loading __consumer_offsets);
// the cleaner drops it, as Kafka's does.
func TestCompactionDropsAbortedRecords(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	txnKeyed := func(pid int64, seq int32, key, value string) []byte {
		b := keyedBatch(t, record.CompressionNone, testEpochMs, kv{key, []byte(value)})
		record.SetProducerFields(b, pid, 0, seq)
		b[22] |= 0x10 // transactional
		return resign(b)
	}
	appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, kv{"a", []byte("committed")}), 0) // 0
	appendOK(t, l, txnKeyed(1, 0, "a", "aborted"), 0)                                                   // 1
	appendOK(t, l, txnKeyed(2, 0, "b", "committed"), 0)                                                 // 2
	l.Roll()
	appendMarkerOK(t, l, record.ControlAbort, 1, 0, 0)  // 3
	appendMarkerOK(t, l, record.ControlCommit, 2, 0, 0) // 4
	appendOK(t, l, txnKeyed(1, 1, "b", "aborted"), 0)   // 5, aborted at 6 in the active segment
	appendMarkerOK(t, l, record.ControlAbort, 1, 0, 0)  // 6
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	cleanOnce(t, l, 0)
	values := map[string]string{}
	for _, r := range readRecords(t, l) {
		if r.key == "a" || r.key == "b" {
			if strings.HasPrefix(r.value, "aborted") {
				t.Errorf("aborted record %s=%s at %d kept", r.key, r.value, r.offset)
			}
			values[r.key] = r.value
		}
	}
	if values["a"] != "committed" || values["b"] != "committed" {
		t.Fatalf("after cleaning: %v, want the committed value of each key", values)
	}
	if got := l.AbortedTransactions(0, math.MaxInt64); len(got) != 2 {
		t.Fatalf("aborted entries after cleaning: %+v", got)
	}
}

// TestCleaningStopsAtTheLastStableOffset: an open transaction's batches
// are not cleaned, like everything after them (Kafka's
// firstUncleanableOffset).
func TestCleaningStopsAtTheLastStableOffset(t *testing.T) {
	clock := newFakeClock()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
	appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, kv{"a", []byte("1")}), 0)
	l.Roll()
	appendOK(t, l, txnBatch(t, 1, 0, 0, 1), 0)
	l.Roll()
	appendOK(t, l, keyedBatch(t, record.CompressionNone, testEpochMs, kv{"a", []byte("2")}), 0)
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	p, ok := l.planClean(0)
	if !ok || p.endOffset != 1 {
		t.Fatalf("plan %+v, %v: want it to end at the open transaction (1)", p, ok)
	}
}

func TestTransactionErrors(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	appendOK(t, l, txnBatch(t, 1, 3, 0, 1), 0)
	appendMarkerOK(t, l, record.ControlCommit, 1, 3, 5)
	appendOK(t, l, txnBatch(t, 1, 3, 1, 1), 0)
	twoRecords := func() []byte {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.Transactional, opts.Control = 1, 3, true, true
		bb := record.NewBatchBuilder(opts)
		bb.Append(testEpochMs, []byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 5}, nil)
		bb.Append(testEpochMs, []byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 5}, nil)
		b, _ := bb.Build(nil)
		return b
	}
	control := func(key, value []byte) []byte {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.Transactional, opts.Control = 1, 3, true, true
		bb := record.NewBatchBuilder(opts)
		bb.Append(testEpochMs, key, value, nil)
		b, _ := bb.Build(nil)
		return b
	}
	for _, c := range []struct {
		name            string
		batch           []byte
		fromCoordinator bool
		want            error
		wantCode        int16
	}{
		{"a marker of an older producer epoch", markerBatch(t, record.ControlAbort, 1, 2, 5), true, ErrInvalidProducerEpoch, 47},
		{"a marker of an older coordinator epoch", markerBatch(t, record.ControlAbort, 1, 3, 4), true, ErrTransactionCoordinatorFenced, 52},
		{"a non-transactional batch during a transaction", idemBatch(t, 1, 3, 2, 1, testEpochMs), false, ErrInvalidTxnState, 48},
		{"a client's control batch", markerBatch(t, record.ControlAbort, 1, 3, 5), false, record.ErrInvalidRecord, 87},
		{"a control batch of two records", twoRecords(), true, record.ErrInvalidRecord, 87},
		{"a control record of another type", control([]byte{0, 0, 0, 2}, []byte{0, 0, 0, 0, 0, 5}), true, record.ErrInvalidRecord, 87},
		{"a control record key of 5 bytes", control([]byte{0, 0, 0, 1, 0}, []byte{0, 0, 0, 0, 0, 5}), true, record.ErrInvalidRecord, 87},
		{"a marker value too short", control([]byte{0, 0, 0, 1}, []byte{0, 0, 0}), true, record.ErrInvalidRecord, 87},
		{"a marker with no value", control([]byte{0, 0, 0, 0}, nil), true, record.ErrInvalidRecord, 87},
	} {
		leo := l.LogEndOffset()
		_, err := l.AppendAsLeader(c.batch, AppendOptions{FromCoordinator: c.fromCoordinator})
		if !errors.Is(err, c.want) || ErrorCode(err) != c.wantCode {
			t.Fatalf("%s: %v (code %d), want %v (code %d)", c.name, err, ErrorCode(err), c.want, c.wantCode)
		}
		if l.LogEndOffset() != leo {
			t.Fatalf("%s: appended", c.name)
		}
	}
	// A marker with a newer producer epoch ends the transaction and
	// starts the epoch afresh: its next data batch starts at sequence 0.
	appendMarkerOK(t, l, record.ControlAbort, 1, 4, 6)
	if _, err := l.AppendAsLeader(txnBatch(t, 1, 4, 2, 1), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("epoch 4 from sequence 2 after its marker: %v", err)
	}
	appendOK(t, l, txnBatch(t, 1, 4, 0, 1), 0)
	// A marker for a producer with no open transaction is appended and
	// records nothing.
	appendMarkerOK(t, l, record.ControlAbort, 99, 0, 0)
	if got := l.AbortedTransactions(0, math.MaxInt64); len(got) != 1 || got[0].FirstOffset != 2 {
		t.Fatalf("aborted %+v, want only producer 1's from 2", got)
	}
	checkStateMatchesFullScan(t, l)
}

// TestCoordinatorTxnBatchesSkipSequences: the group coordinator writes
// each TxnOffsetCommit as a transactional batch of the producer at
// sequence 0 (Kafka's AppendOrigin.COORDINATOR); they are appended, not
// taken for retries, and only their epoch is checked.
func TestCoordinatorTxnBatchesSkipSequences(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	coord := AppendOptions{FromCoordinator: true}
	for i := range 3 {
		info, err := l.AppendAsLeader(txnBatch(t, 7, 2, 0, 1), coord)
		if err != nil || info.Duplicate || info.FirstOffset != int64(2*i) {
			t.Fatalf("commit %d: %+v %v", i, info, err)
		}
		appendMarkerOK(t, l, record.ControlCommit, 7, 2, 0)
	}
	if _, err := l.AppendAsLeader(txnBatch(t, 7, 1, 0, 1), coord); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("a fenced producer's offsets: %v", err)
	}
	if lso := l.LastStableOffset(); lso != l.HighWatermark() {
		t.Fatalf("last stable offset %d, high watermark %d", lso, l.HighWatermark())
	}
}

func TestFollowerBuildsTheLeaderTransactionState(t *testing.T) {
	leader, _ := openTxnFixture(t, partitionDir(t))
	follower := openTestLog(t, filepath.Join(t.TempDir(), "t-0"), OpenOptions{Config: smallSegments()})
	// Fetch by fetch, as a replica does, in pieces of a few batches.
	for off := int64(0); off < leader.LogEndOffset(); {
		b := readBytes(t, leader, off, 300, leader.LogEndOffset(), true)
		info, err := follower.AppendAsFollower(b, false)
		if err != nil {
			t.Fatal(err)
		}
		off = info.LastOffset + 1
	}
	follower.SetHighWatermark(leader.HighWatermark())
	if got, want := viewTxns(follower), viewTxns(leader); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower:\n got  %+v\n want %+v", got, want)
	}
	// Promoted, it refuses what the leader would.
	if _, err := follower.AppendAsLeader(idemBatch(t, 4, 0, 2, 1, testEpochMs), AppendOptions{}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch of an open transaction on the promoted follower: %v", err)
	}
}

// FuzzDecodeTxnIndex: whatever the bytes of a txnindex file, decoding
// returns entries or an ErrCorruptIndex, never panics, and what it accepts
// encodes back to the same bytes.
func FuzzDecodeTxnIndex(f *testing.F) {
	var two []byte
	two = encodeAbortedTxn(two, AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 6})
	two = encodeAbortedTxn(two, AbortedTxn{ProducerID: 2, FirstOffset: 3, LastOffset: 9, LastStableOffset: 7})
	f.Add(two)
	f.Add([]byte{})
	f.Add(two[:txnIndexEntrySize+5])
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeTxnIndex(b, "fuzz.txnindex")
		if err != nil {
			if !errors.Is(err, ErrCorruptIndex) {
				t.Fatalf("error %v does not wrap ErrCorruptIndex", err)
			}
			return
		}
		var again []byte
		for _, e := range entries {
			again = encodeAbortedTxn(again, e)
		}
		if !slices.Equal(again, b) {
			t.Fatalf("accepted bytes do not round-trip")
		}
	})
}

// TestCorruptTxnIndexIsRebuilt: a txnindex file that cannot be parsed is
// rebuilt from the log on open.
func TestCorruptTxnIndexIsRebuilt(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: smallSegments()})
	abortFixture(t, l)
	want := viewTxns(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range filesWithSuffix(t, l.Dir(), txnIndexSuffix) {
		if err := os.WriteFile(filepath.Join(l.Dir(), name), []byte("torn"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := openTestLog(t, l.Dir(), OpenOptions{Config: smallSegments(), CleanShutdown: true, HighWatermark: want.LSO})
	if got := viewTxns(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("after rebuilding corrupt indexes:\n got  %+v\n want %+v", got, want)
	}
}
