package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/keelstream/keel/network/record"
)

func openTestEpochCache(t *testing.T, entries ...EpochEntry) *LeaderEpochCache {
	t.Helper()
	c, err := OpenLeaderEpochCache(filepath.Join(t.TempDir(), "leader-epoch-checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // background writes end before TempDir's removal
	for _, e := range entries {
		if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// requirePersisted checks that the cache's entries equal want and that a
// fresh open of its checkpoint file gives the same.
func requirePersisted(t *testing.T, c *LeaderEpochCache, want []EpochEntry) {
	t.Helper()
	if got := c.Entries(); !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	reopened, err := OpenLeaderEpochCache(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := reopened.Entries(); !slices.Equal(got, want) {
		t.Fatalf("reopened Entries = %v, want %v", got, want)
	}
}

func TestLeaderEpochCacheAssign(t *testing.T) {
	base := []EpochEntry{{2, 10}, {4, 20}, {5, 30}}
	tests := []struct {
		name  string
		epoch int32
		start int64
		want  []EpochEntry
	}{
		{"new epoch after the latest is appended", 6, 40, []EpochEntry{{2, 10}, {4, 20}, {5, 30}, {6, 40}}},
		{"latest epoch at a later offset is ignored (every append calls Assign)", 5, 35, base},
		{"latest epoch at its own start offset is ignored", 5, 30, base},
		{"latest epoch at an earlier offset replaces its entry", 5, 25, []EpochEntry{{2, 10}, {4, 20}, {5, 25}}},
		{"new epoch starting where the latest started replaces it", 6, 30, []EpochEntry{{2, 10}, {4, 20}, {6, 30}}},
		{"new epoch starting below later epochs removes them", 6, 15, []EpochEntry{{2, 10}, {6, 15}}},
		{"older epoch removes every epoch at or above it", 4, 35, []EpochEntry{{2, 10}, {4, 35}}},
		{"older epoch at an earlier offset removes everything it contradicts", 3, 12, []EpochEntry{{2, 10}, {3, 12}}},
		{"epoch below all entries replaces them all", 1, 5, []EpochEntry{{1, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := openTestEpochCache(t, base...)
			if err := c.Assign(tt.epoch, tt.start); err != nil {
				t.Fatal(err)
			}
			requirePersisted(t, c, tt.want)
		})
	}
}

func TestLeaderEpochCacheAssignRejectsNegativeValues(t *testing.T) {
	c := openTestEpochCache(t, EpochEntry{1, 0})
	if err := c.Assign(-1, 5); err == nil {
		t.Error("negative epoch accepted")
	}
	if err := c.Assign(2, -1); err == nil {
		t.Error("negative start offset accepted")
	}
	requirePersisted(t, c, []EpochEntry{{1, 0}})
}

func TestLeaderEpochCacheLatestEpoch(t *testing.T) {
	c := openTestEpochCache(t)
	if e, ok := c.LatestEpoch(); ok || e != UndefinedEpoch {
		t.Fatalf("empty cache LatestEpoch = %d, %v", e, ok)
	}
	if _, err := os.Stat(c.Path()); !os.IsNotExist(err) {
		t.Fatalf("opening created the checkpoint file: %v", err)
	}
	if err := c.Assign(3, 0); err != nil {
		t.Fatal(err)
	}
	if e, ok := c.LatestEpoch(); !ok || e != 3 {
		t.Fatalf("LatestEpoch = %d, %v; want 3, true", e, ok)
	}
}

func TestLeaderEpochCacheEndOffsetFor(t *testing.T) {
	const leo = 100
	entries := []EpochEntry{{2, 10}, {4, 20}, {7, 50}}
	tests := []struct {
		name       string
		entries    []EpochEntry
		requested  int32
		wantEpoch  int32
		wantOffset int64
	}{
		{"undefined epoch is unanswerable", entries, UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
		{"latest epoch ends at the log end offset", entries, 7, 7, leo},
		{"an epoch ends where the next one starts", entries, 2, 2, 20},
		{"middle epoch ends where the next one starts", entries, 4, 4, 50},
		{"unknown epoch between two answers with the epoch below it", entries, 5, 4, 50},
		{"unknown epoch between the first two", entries, 3, 2, 20},
		{"epoch below the earliest answers with the earliest start", entries, 1, 1, 10},
		{"epoch 0 below the earliest", entries, 0, 0, 10},
		{"epoch above the latest is unanswerable", entries, 8, UndefinedEpoch, UndefinedEpochOffset},
		{"empty cache is unanswerable", nil, 0, UndefinedEpoch, UndefinedEpochOffset},
		{"single entry, requested is it", []EpochEntry{{0, 0}}, 0, 0, leo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := openTestEpochCache(t, tt.entries...)
			epoch, off := c.EndOffsetFor(tt.requested, leo)
			if epoch != tt.wantEpoch || off != tt.wantOffset {
				t.Fatalf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tt.requested, epoch, off, tt.wantEpoch, tt.wantOffset)
			}
		})
	}
}

func TestLeaderEpochCacheTruncateFromEnd(t *testing.T) {
	entries := []EpochEntry{{2, 10}, {4, 20}, {7, 50}}
	tests := []struct {
		name      string
		endOffset int64
		want      []EpochEntry
	}{
		{"truncating at an epoch's start removes it", 50, []EpochEntry{{2, 10}, {4, 20}}},
		{"truncating inside the latest epoch keeps it", 55, entries},
		{"truncating just below an epoch's start removes it", 49, []EpochEntry{{2, 10}, {4, 20}}},
		{"truncating below several epochs removes them", 15, []EpochEntry{{2, 10}}},
		{"truncating at the first start empties the cache", 10, nil},
		{"truncating to zero empties the cache", 0, nil},
		{"truncating past the end changes nothing", 1000, entries},
		{"negative end offset is ignored", -1, entries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := openTestEpochCache(t, entries...)
			if err := c.TruncateFromEnd(tt.endOffset); err != nil {
				t.Fatal(err)
			}
			requirePersisted(t, c, tt.want)
		})
	}
}

func TestLeaderEpochCacheTruncateFromStart(t *testing.T) {
	entries := []EpochEntry{{2, 10}, {4, 20}, {7, 50}}
	tests := []struct {
		name        string
		startOffset int64
		want        []EpochEntry
	}{
		{"start inside an epoch moves that epoch's start up", 25, []EpochEntry{{4, 25}, {7, 50}}},
		{"start inside the first epoch moves its start", 15, []EpochEntry{{2, 15}, {4, 20}, {7, 50}}},
		{"start exactly at an epoch's start drops the ones before", 20, []EpochEntry{{4, 20}, {7, 50}}},
		{"start inside the latest epoch leaves only it", 60, []EpochEntry{{7, 60}}},
		{"start below every epoch changes nothing", 5, entries},
		{"start at the first epoch's start changes nothing", 10, entries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := openTestEpochCache(t, entries...)
			c.TruncateFromStart(tt.startOffset)
			if err := c.Close(); err != nil { // the background write
				t.Fatal(err)
			}
			requirePersisted(t, c, tt.want)
		})
	}
}

// TestLeaderEpochCacheTruncateFromStartWritesInTheBackground: the change is
// in force at once while the file keeps the previous entries (what a crash
// then leaves) until the background write; a synchronous write meanwhile
// writes the latest entries, and the background write never takes the file
// back to an older state.
func TestLeaderEpochCacheTruncateFromStartWritesInTheBackground(t *testing.T) {
	c := openTestEpochCache(t, EpochEntry{2, 10}, EpochEntry{4, 20}, EpochEntry{7, 50})
	release := make(chan struct{})
	c.deferredHook = func() { <-release }
	onDisk := func() []EpochEntry {
		t.Helper()
		r, err := OpenLeaderEpochCache(c.Path())
		if err != nil {
			t.Fatal(err)
		}
		return r.Entries()
	}

	c.TruncateFromStart(25) // returns with its write held back
	want := []EpochEntry{{4, 25}, {7, 50}}
	if got := c.Entries(); !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	if got, old := onDisk(), []EpochEntry{{2, 10}, {4, 20}, {7, 50}}; !slices.Equal(got, old) {
		t.Fatalf("file before the background write = %v, want %v", got, old)
	}
	c.TruncateFromStart(30) // joins the pending write
	if err := c.Assign(8, 60); err != nil {
		t.Fatal(err)
	}
	want = []EpochEntry{{4, 30}, {7, 50}, {8, 60}}
	if got := onDisk(); !slices.Equal(got, want) {
		t.Fatalf("file after Assign = %v, want %v", got, want)
	}
	close(release)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	requirePersisted(t, c, want)

	c.deferredHook = nil
	c.TruncateFromStart(55)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	requirePersisted(t, c, []EpochEntry{{7, 55}, {8, 60}})
}

// TestLeaderEpochCacheBackgroundWriteErrorIsReported: a background write
// that fails is reported by Close, and the next synchronous change writes
// the whole state again.
func TestLeaderEpochCacheBackgroundWriteErrorIsReported(t *testing.T) {
	c := openTestEpochCache(t, EpochEntry{2, 10}, EpochEntry{4, 20})
	dir := filepath.Dir(c.Path())
	hidden := dir + ".away"
	c.deferredHook = func() {
		if err := os.Rename(dir, hidden); err != nil {
			t.Error(err)
		}
	}
	c.TruncateFromStart(15)
	if err := c.Close(); err == nil {
		t.Fatal("Close reported no error for a failed background write")
	}
	if err := os.Rename(hidden, dir); err != nil {
		t.Fatal(err)
	}
	c.deferredHook = nil
	if err := c.Assign(5, 30); err != nil {
		t.Fatal(err)
	}
	requirePersisted(t, c, []EpochEntry{{2, 15}, {4, 20}, {5, 30}})
	if err := c.Close(); err != nil {
		t.Fatalf("Close after the state was written again: %v", err)
	}
}

func TestLeaderEpochCacheClear(t *testing.T) {
	c := openTestEpochCache(t, EpochEntry{1, 0}, EpochEntry{2, 5})
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	requirePersisted(t, c, nil)
	b, err := os.ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "0\n0\n" {
		t.Fatalf("cleared file = %q", b)
	}
}

func TestLeaderEpochCacheCheckpointFormat(t *testing.T) {
	c := openTestEpochCache(t, EpochEntry{0, 0}, EpochEntry{3, 1234567890123})
	b, err := os.ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n2\n0 0\n3 1234567890123\n"; string(b) != want {
		t.Fatalf("checkpoint = %q, want %q", b, want)
	}
}

func TestOpenLeaderEpochCache(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []EpochEntry
		corrupt bool
	}{
		{"Kafka-written file loads as is", "0\n3\n0 0\n1 15\n4 99\n", []EpochEntry{{0, 0}, {1, 15}, {4, 99}}, false},
		{"non-monotonic file is repaired by replaying assign", "0\n3\n0 0\n5 50\n3 30\n", []EpochEntry{{0, 0}, {3, 30}}, false},
		{"repeated epoch keeps its earliest start", "0\n2\n1 10\n1 20\n", []EpochEntry{{1, 10}}, false},
		{"negative epoch is corrupt", "0\n1\n-1 0\n", nil, true},
		{"negative start offset is corrupt", "0\n1\n1 -5\n", nil, true},
		{"wrong field count is corrupt", "0\n1\n1 5 6\n", nil, true},
		{"count mismatch is corrupt", "0\n2\n1 5\n", nil, true},
		{"epoch beyond int32 is corrupt", "0\n1\n2147483648 0\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := OpenLeaderEpochCache(path)
			if tt.corrupt {
				if !errors.Is(err, ErrCorruptCheckpoint) {
					t.Fatalf("OpenLeaderEpochCache = %v, want ErrCorruptCheckpoint", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Entries(); !slices.Equal(got, tt.want) {
				t.Fatalf("Entries = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLeaderEpochCacheFailedWriteLeavesCacheUnchanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := OpenLeaderEpochCache(filepath.Join(dir, "leader-epoch-checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(1, 0); err != nil {
		t.Fatal(err)
	}
	// The partition directory disappears (deleted under us).
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(2, 10); err == nil {
		t.Fatal("Assign with an unwritable checkpoint succeeded")
	}
	if got := c.Entries(); !slices.Equal(got, []EpochEntry{{1, 0}}) {
		t.Fatalf("Entries after failed Assign = %v, want unchanged", got)
	}
}

// Readers run on request goroutines while the log's writer assigns and
// truncates; run with -race.
func TestLeaderEpochCacheConcurrentReadersAndWriter(t *testing.T) {
	c := openTestEpochCache(t)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				entries := c.Entries()
				for i := 1; i < len(entries); i++ {
					if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset {
						t.Errorf("non-monotonic entries %v", entries)
						return
					}
				}
				c.EndOffsetFor(3, 1000)
				c.LatestEpoch()
			}
		}()
	}
	for epoch := int32(0); epoch < 20; epoch++ {
		for off := int64(epoch) * 10; off < int64(epoch)*10+5; off++ {
			if err := c.Assign(epoch, off); err != nil {
				t.Error(err)
			}
		}
		if epoch%5 == 4 {
			if err := c.TruncateFromEnd(int64(epoch) * 10); err != nil {
				t.Error(err)
			}
		}
	}
	close(done)
	wg.Wait()
	c.TruncateFromStart(55)
	entries := c.Entries()
	if len(entries) == 0 || entries[0].StartOffset != 55 {
		t.Fatalf("after TruncateFromStart(55): %v", entries)
	}
}

// TestLogStartMovedBeforeItsEpochCheckpointIsWritten: DeleteRecords moves
// the epoch cache's start at once; a crash before the background write
// leaves the previous checkpoint, and reopening the log gives the same
// cache again from the log start offset the log manager recorded (or, if
// that record is older too, the previous cache over the previous start,
// whose records are all still there).
func TestLogStartMovedBeforeItsEpochCheckpointIsWritten(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	for i, epoch := range []int32{1, 3, 5} {
		for j := 0; j < 10; j++ {
			appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs+int64(i*10+j), 1), 10), epoch)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	release := make(chan struct{})
	l.epochs.deferredHook = func() { <-release }
	if err := l.IncrementLogStartOffset(15); err != nil {
		t.Fatal(err)
	}
	moved := []EpochEntry{{3, 15}, {5, 20}}
	if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, moved) {
		t.Fatalf("entries after DeleteRecords = %v, want %v", got, moved)
	}
	crashed := crashCopy(t, l)
	close(release)
	for _, tc := range []struct {
		recordedStart int64
		want          []EpochEntry
	}{
		{15, moved},
		{0, []EpochEntry{{1, 0}, {3, 10}, {5, 20}}},
	} {
		dir := filepath.Join(t.TempDir(), filepath.Base(crashed))
		copyDir(t, crashed, dir)
		r := openTestLog(t, dir, OpenOptions{LogStartOffset: tc.recordedStart, RecoveryPoint: 0})
		if r.LogStartOffset() != tc.recordedStart {
			t.Fatalf("recorded start %d: reopened at %d", tc.recordedStart, r.LogStartOffset())
		}
		if got := r.LeaderEpochCache().Entries(); !slices.Equal(got, tc.want) {
			t.Fatalf("recorded start %d: reopened entries %v, want %v", tc.recordedStart, got, tc.want)
		}
	}
}
