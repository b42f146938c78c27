package storage

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// moveTestConfig is a Manager over two log dirs, small segments so that a
// move copies several, and a real clock (the mover paces in real time).
func moveTestConfig(dirs ...string) ManagerConfig {
	cfg := testManagerConfig(dirs...)
	cfg.Now = nil
	return cfg
}

// waitMoved waits until tp's move into dir completed.
func waitMoved(t *testing.T, m *Manager, tp TopicPartition, dir string) *Log {
	t.Helper()
	var l *Log
	waitFor(t, "the move of "+tp.String(), func() bool {
		_, _, moving := m.FutureLog(tp)
		l, _ = m.Log(tp)
		return !moving && l != nil && filepath.Dir(l.Dir()) == dir
	})
	return l
}

// createLogIn creates tp's log in dir, one of m's log dirs: the dir a
// replica not hosted yet is moved to is where it is created.
func createLogIn(t testing.TB, m *Manager, tp TopicPartition, dir string, cfg LogConfig) *Log {
	t.Helper()
	if err := m.AlterLogDir(tp, dir); !errors.Is(err, ErrReplicaNotAvailable) {
		t.Fatalf("AlterLogDir of a replica not hosted: %v, want ErrReplicaNotAvailable", err)
	}
	l, err := m.GetOrCreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Dir(l.Dir()); got != dir {
		t.Fatalf("%s created in %s, want %s", tp, got, dir)
	}
	return l
}

// logState is what a move must keep of a log.
type logState struct {
	start, end, hw int64
	epochs         []EpochEntry
	producers      []ProducerState
	data           []byte
}

func stateOf(t *testing.T, l *Log) logState {
	t.Helper()
	return logState{l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.LeaderEpochCache().Entries(),
		l.ActiveProducers(), readAll(t, l, l.LogStartOffset(), l.LogEndOffset())}
}

func sameState(t *testing.T, what string, got, want logState) {
	t.Helper()
	if got.start != want.start || got.end != want.end || got.hw != want.hw {
		t.Fatalf("%s: start/end/hw %d/%d/%d, want %d/%d/%d", what, got.start, got.end, got.hw, want.start, want.end, want.hw)
	}
	if !reflect.DeepEqual(got.epochs, want.epochs) {
		t.Fatalf("%s: leader epochs %v, want %v", what, got.epochs, want.epochs)
	}
	if !reflect.DeepEqual(got.producers, want.producers) {
		t.Fatalf("%s: producers %+v, want %+v", what, got.producers, want.producers)
	}
	if string(got.data) != string(want.data) {
		t.Fatalf("%s: %d bytes of batches differ from the %d expected", what, len(got.data), len(want.data))
	}
}

// TestMoveReplicaToAnotherLogDir moves a partition written by idempotent
// producers over several leader epochs while appends go on, then checks
// that the log the broker holds is the same object, now in the other dir,
// with every batch, its producer state, leader epochs and offsets; that
// the old directory goes; and that a restart finds it there.
func TestMoveReplicaToAnotherLogDir(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	cfg := moveTestConfig(dirs...)
	m := openTestManager(t, cfg)
	tp := TopicPartition{"moving", 0}
	l, err := m.GetOrCreateLog(tp, LogConfig{SegmentBytes: 2048, FileDeleteDelayMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	from := filepath.Dir(l.Dir())
	to := dirs[0]
	if from == to {
		to = dirs[1]
	}
	if err := l.SetTopicID([16]byte{7}); err != nil {
		t.Fatal(err)
	}
	seq := map[int64]int32{}
	appendIdem := func(pid int64, epoch int32) error {
		b := idemBatch(t, pid, 0, seq[pid], 3, t0)
		seq[pid] += 3
		_, err := l.AppendAsLeader(b, AppendOptions{LeaderEpoch: epoch})
		return err
	}
	for i := range 60 {
		if err := appendIdem(int64(1+i%3), int32(i/20)); err != nil {
			t.Fatal(err)
		}
	}
	// Appends go on while the replica moves.
	m.SetAlterLogDirsBytesPerSecond(64 << 10)
	if err := m.AlterLogDir(tp, to+"/"); err != nil {
		t.Fatalf("AlterLogDir: %v", err)
	}
	if _, dir, ok := m.FutureLog(tp); !ok || dir != to {
		t.Fatalf("future log in %q (%v), want %s", dir, ok, to)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	var appendErr error
	wg.Go(func() {
		for i := 0; appendErr == nil; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			appendErr = appendIdem(int64(1+i%3), 3)
			l.SetHighWatermark(l.LogEndOffset())
			mu.Unlock()
		}
	})
	m.SetAlterLogDirsBytesPerSecond(0)
	moved := waitMoved(t, m, tp, to)
	close(stop)
	wg.Wait()
	if appendErr != nil {
		t.Fatalf("append during the move: %v", appendErr)
	}
	if moved != l {
		t.Fatal("the move replaced the *Log the broker holds")
	}
	mu.Lock()
	defer mu.Unlock()
	want := stateOf(t, l)
	checkLogInvariants(t, l)
	if id, ok := l.TopicID(); !ok || id != ([16]byte{7}) {
		t.Fatalf("topic id %v %v after the move", id, ok)
	}
	// It still takes appends, in the new dir.
	if err := appendIdem(9, 3); err != nil {
		t.Fatal(err)
	}
	if segs := segmentLogPaths(t, l.Dir()); len(segs) < 2 {
		t.Fatalf("new dir holds %d segments", len(segs))
	}
	want = stateOf(t, l)
	waitFor(t, "the old directory's removal", func() bool {
		_, err := os.Stat(filepath.Join(from, tp.DirName()))
		entries, _ := os.ReadDir(from)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tp.DirName()) {
				return false
			}
		}
		return errors.Is(err, os.ErrNotExist)
	})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, cfg)
	again, ok := m.Log(tp)
	if !ok || filepath.Dir(again.Dir()) != to {
		t.Fatalf("after a restart the partition is in %v (%v), want %s", again, ok, to)
	}
	if _, _, moving := m.FutureLog(tp); moving {
		t.Fatal("a future log is left after the restart")
	}
	want.hw = again.HighWatermark() // the checkpoint's
	sameState(t, "after a restart", stateOf(t, again), want)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMoveFollowsTruncationAndLogStart truncates the current log below
// what the future log copied and rewrites it in a later epoch, and moves
// its log start past the copy: the completed move holds what the current
// log holds, not the copied suffix.
func TestMoveFollowsTruncationAndLogStart(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	m := openTestManager(t, moveTestConfig(dirs...))
	tp := TopicPartition{"t", 0}
	l := createLogIn(t, m, tp, dirs[0], LogConfig{SegmentBytes: 4096})
	for i := range 40 {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0+int64(i), 2), 40), 1)
	}
	l.SetHighWatermark(l.LogEndOffset())
	// A slow mover (a batch or two every tenth of a second), held still
	// once it has copied a few batches: a chunk more, then a long pause.
	m.SetAlterLogDirsBytesPerSecond(2000)
	if err := m.AlterLogDir(tp, dirs[1]); err != nil {
		t.Fatal(err)
	}
	fut, _, _ := m.FutureLog(tp)
	waitFor(t, "the first copy", func() bool { return fut.LogEndOffset() > 10 })
	m.SetAlterLogDirsBytesPerSecond(1)
	// The current log loses records the future log copied and is
	// rewritten in epoch 2, then DeleteRecords moves its start up.
	if err := l.TruncateTo(fut.LogEndOffset() - 6); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		appendOK(t, l, buildBatch(t, record.CompressionGzip, tsRange(t0+int64(i), 3), 30), 2)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.IncrementLogStartOffset(4); err != nil {
		t.Fatal(err)
	}
	want := stateOf(t, l)
	m.SetAlterLogDirsBytesPerSecond(0) // ends the slow mover's pause
	waitMoved(t, m, tp, dirs[1])
	sameState(t, "after the move", stateOf(t, l), want)
	checkLogInvariants(t, l)
}

// TestCopyToFutureFollowsTheCurrentLog drives one copy step after another
// between two logs: a full copy; the current log truncated below the
// copy and rewritten in a later epoch, at a batch boundary of the copy and
// inside one of its batches; its log start moved up, within the copy and
// past it. After each, the copy holds exactly the current log's batches.
func TestCopyToFutureFollowsTheCurrentLog(t *testing.T) {
	cur := openTestLog(t, partitionDir(t), OpenOptions{Config: LogConfig{SegmentBytes: 1024}})
	fut := openTestLog(t, filepath.Join(t.TempDir(), futureDirName(TopicPartition{"t", 0})), OpenOptions{Config: LogConfig{SegmentBytes: 1024}})
	sync := func(what string) {
		t.Helper()
		for {
			n, err := copyToFuture(cur, fut, 512, false)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if n == 0 {
				break
			}
		}
		if fut.LogStartOffset() != cur.LogStartOffset() || fut.LogEndOffset() != cur.LogEndOffset() {
			t.Fatalf("%s: copy holds [%d, %d), current [%d, %d)", what, fut.LogStartOffset(), fut.LogEndOffset(), cur.LogStartOffset(), cur.LogEndOffset())
		}
		if got, want := readAll(t, fut, fut.LogStartOffset(), fut.LogEndOffset()), readAll(t, cur, cur.LogStartOffset(), cur.LogEndOffset()); string(got) != string(want) {
			t.Fatalf("%s: the copy's %d bytes differ from the current log's %d", what, len(got), len(want))
		}
		if !reflect.DeepEqual(fut.LeaderEpochCache().Entries(), cur.LeaderEpochCache().Entries()) {
			t.Fatalf("%s: epochs %v, current %v", what, fut.LeaderEpochCache().Entries(), cur.LeaderEpochCache().Entries())
		}
	}
	appendN := func(n, records int, epoch int32) {
		for i := range n {
			appendOK(t, cur, buildBatch(t, record.CompressionNone, tsRange(t0+int64(i), records), 40), epoch)
		}
		cur.SetHighWatermark(cur.LogEndOffset())
	}
	appendN(20, 2, 1)
	sync("a full copy")
	// At a batch boundary: the copy's batches from 30 on are not the
	// current log's any more, though they have the same offsets.
	if err := cur.TruncateTo(30); err != nil {
		t.Fatal(err)
	}
	appendN(5, 2, 2)
	sync("rewritten from a batch boundary")
	// Inside a batch of the copy (3-record batches against 2).
	if err := cur.TruncateTo(33); err != nil {
		t.Fatal(err)
	}
	appendN(4, 3, 3)
	sync("rewritten from inside a batch")
	if err := cur.IncrementLogStartOffset(10); err != nil {
		t.Fatal(err)
	}
	sync("log start moved within the copy")
	appendN(3, 2, 3)
	if err := cur.IncrementLogStartOffset(cur.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	appendN(2, 2, 4)
	sync("log start moved past the copy")
}

// TestDivergence checks the comparison of leader epochs that finds where a
// future log stops holding its current log's batches.
func TestDivergence(t *testing.T) {
	e := func(pairs ...int64) []EpochEntry {
		var out []EpochEntry
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		name                     string
		fut, cur                 []EpochEntry
		futStart, futEnd, curEnd int64
		want                     int64
	}{
		{"same", e(0, 0, 1, 10), e(0, 0, 1, 10), 0, 20, 30, 20},
		{"cur shorter", e(0, 0, 1, 10), e(0, 0, 1, 10), 0, 20, 15, 15},
		{"cur rewrote from 12", e(0, 0, 1, 10), e(0, 0, 1, 10, 2, 12), 0, 20, 30, 12},
		{"epoch started later in cur", e(0, 0, 1, 10), e(0, 0, 1, 14), 0, 20, 30, 10},
		{"fut has an epoch cur lost", e(0, 0, 1, 10, 3, 15), e(0, 0, 1, 10, 4, 15), 0, 20, 30, 15},
		{"cur starts later", e(0, 5), e(0, 8), 8, 20, 30, 20},
		{"empty future", nil, e(0, 0), 0, 0, 30, 0},
	} {
		if got := divergence(c.fut, c.cur, c.futStart, c.futEnd, c.curEnd); got != c.want {
			t.Errorf("%s: divergence %d, want %d", c.name, got, c.want)
		}
	}
}

// TestAlterLogDirErrorsAndCancel covers the answers other than a new move:
// an unknown dir, a replica not hosted yet (created in the dir asked for
// later), the dir it is in, a second move elsewhere and a move back, which
// abandon the running one, and a deletion during a move.
func TestAlterLogDirErrorsAndCancel(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	m := openTestManager(t, moveTestConfig(dirs...))
	tp := TopicPartition{"t", 3}
	if err := m.AlterLogDir(tp, t.TempDir()); !errors.Is(err, ErrLogDirNotFound) {
		t.Fatalf("unknown dir: %v, want ErrLogDirNotFound", err)
	}
	if err := m.AlterLogDir(tp, dirs[2]); !errors.Is(err, ErrReplicaNotAvailable) {
		t.Fatalf("replica not hosted: %v, want ErrReplicaNotAvailable", err)
	}
	l, err := m.GetOrCreateLog(tp, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(l.Dir()) != dirs[2] {
		t.Fatalf("created in %s, want the dir asked for, %s", l.Dir(), dirs[2])
	}
	fillLog(t, l, 20)
	if err := m.AlterLogDir(tp, dirs[2]); err != nil {
		t.Fatal(err)
	}
	if _, _, moving := m.FutureLog(tp); moving {
		t.Fatal("a move to the dir the replica is in started")
	}
	m.SetAlterLogDirsBytesPerSecond(1) // keeps the moves below running
	if err := m.AlterLogDir(tp, dirs[0]); err != nil {
		t.Fatal(err)
	}
	first, _, _ := m.FutureLog(tp)
	if err := m.AlterLogDir(tp, dirs[1]); err != nil {
		t.Fatal(err)
	}
	second, dir, _ := m.FutureLog(tp)
	if second == first || dir != dirs[1] {
		t.Fatalf("second move: future in %s, same as the first: %v", dir, second == first)
	}
	if _, err := os.Stat(first.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the abandoned future log's directory %s is still there: %v", first.Dir(), err)
	}
	if err := m.AlterLogDir(tp, dirs[2]); err != nil {
		t.Fatal(err)
	}
	if _, _, moving := m.FutureLog(tp); moving {
		t.Fatal("moving back to the replica's dir left the move running")
	}
	if err := m.AlterLogDir(tp, dirs[0]); err != nil {
		t.Fatal(err)
	}
	fut, _, _ := m.FutureLog(tp)
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	if _, _, moving := m.FutureLog(tp); moving {
		t.Fatal("deleting the partition left its move running")
	}
	if _, err := os.Stat(fut.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted partition's future log %s is still there: %v", fut.Dir(), err)
	}
}

// TestMoveSurvivesRestarts covers the two states a crash can leave: a move
// under way, which resumes, and a completed move's future log alone (the
// current one renamed away), which becomes the partition's log.
func TestMoveSurvivesRestarts(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	cfg := moveTestConfig(dirs...)
	m := openTestManager(t, cfg)
	tp := TopicPartition{"t", 0}
	l := createLogIn(t, m, tp, dirs[0], LogConfig{SegmentBytes: 1024})
	fillLog(t, l, 30)
	l.SetHighWatermark(l.LogEndOffset())
	want := stateOf(t, l)
	m.SetAlterLogDirsBytesPerSecond(1)
	if err := m.AlterLogDir(tp, dirs[1]); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Restarted mid-move: the future log is found and the move resumes.
	m = openTestManager(t, cfg)
	if _, dir, moving := m.FutureLog(tp); !moving || dir != dirs[1] {
		t.Fatalf("after a restart mid-move: future in %q (%v)", dir, moving)
	}
	l = waitMoved(t, m, tp, dirs[1])
	want.hw = l.HighWatermark()
	sameState(t, "a resumed move", stateOf(t, l), want)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// A crash between the renames: the partition's directory is gone from
	// the old dir, and the complete future log is alone in the new one.
	moved := filepath.Join(dirs[1], tp.DirName())
	future := filepath.Join(dirs[0], futureDirName(tp))
	if err := os.Rename(moved, future); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, cfg)
	l, ok := m.Log(tp)
	if !ok || l.Dir() != filepath.Join(dirs[0], tp.DirName()) {
		t.Fatalf("a lone future log was not made the partition's log: %v", ok)
	}
	if _, _, moving := m.FutureLog(tp); moving {
		t.Fatal("a lone future log is still a move")
	}
	want.hw = l.HighWatermark()
	sameState(t, "a lone future log", stateOf(t, l), want)
}

func TestParseFutureDirName(t *testing.T) {
	tp := TopicPartition{"my.topic-x", 12}
	name := futureDirName(tp)
	if got, ok := parseFutureDirName(name); !ok || got != tp {
		t.Fatalf("parse %q: %v %v", name, got, ok)
	}
	for _, bad := range []string{"t-0", "t-0-future", "t-0.abc-future", "t-0." + strings.Repeat("g", 32) + "-future",
		"t-x." + strings.Repeat("a", 32) + "-future", "t-0." + strings.Repeat("a", 32) + "-delete"} {
		if _, ok := parseFutureDirName(bad); ok {
			t.Errorf("%q parsed as a future log", bad)
		}
	}
}

// BenchmarkMoveReplica moves a 64 MiB log (8 MiB segments of ~1 KiB
// batches) to another log dir, from AlterLogDir to the completed swap, and
// in the same run copies its segment files with io.Copy and an fsync each:
// the baseline of moving the bytes at all. MB/s of both; the move also
// parses every batch, rebuilds the indexes and the producer state.
func BenchmarkMoveReplica(b *testing.B) {
	const total = 64 << 20
	dirs := []string{b.TempDir(), b.TempDir()}
	cfg := moveTestConfig(dirs...)
	cfg.DefaultConfig = LogConfig{SegmentBytes: 8 << 20}
	m, err := OpenManager(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	tp := TopicPartition{"bench", 0}
	l := createLogIn(b, m, tp, dirs[0], LogConfig{SegmentBytes: 8 << 20})
	batch := buildBatch(b, record.CompressionNone, tsRange(t0, 8), 120)
	for l.Size() < total {
		if _, err := l.AppendAsLeader(append([]byte(nil), batch...), AppendOptions{LeaderEpoch: 1}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	size := l.Size()
	b.SetBytes(size)
	var moveTime, copyTime time.Duration
	for i := range b.N {
		to := dirs[(i+1)%2]
		start := time.Now()
		if err := m.AlterLogDir(tp, to); err != nil {
			b.Fatal(err)
		}
		for {
			if _, _, moving := m.FutureLog(tp); !moving {
				break
			}
			time.Sleep(time.Millisecond)
		}
		moveTime += time.Since(start)

		start = time.Now()
		dst := filepath.Join(b.TempDir(), "copy")
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		for _, p := range segmentLogPaths(b, l.Dir()) {
			if err := copyFileSynced(p, filepath.Join(dst, filepath.Base(p))); err != nil {
				b.Fatal(err)
			}
		}
		copyTime += time.Since(start)
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(moveTime), "move-MB/s")
	b.ReportMetric(mbps(copyTime), "copy-MB/s")
	b.ReportMetric(mbps(moveTime)/mbps(copyTime), "move/copy")
}

// TestMoveUnderABackgroundFlush completes a move while the background
// flush of a rolled segment is between taking the log's dir and syncing
// it: the dir it syncs is gone (renamed "-delete"), which is not a failure
// of the log's new dir, and the flush goes on there.
func TestMoveUnderABackgroundFlush(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	cfg := moveTestConfig(dirs...)
	cfg.DeferMoves = true // the test copies and completes the move itself
	m := openTestManager(t, cfg)
	tp := TopicPartition{"t", 0}
	l := createLogIn(t, m, tp, dirs[0], LogConfig{SegmentBytes: 1024})
	fillLog(t, l, 5)
	if err := m.AlterLogDir(tp, dirs[1]); err != nil {
		t.Fatal(err)
	}
	fut, _, _ := m.FutureLog(tp)
	m.mu.RLock()
	f := m.futures[tp]
	m.mu.RUnlock()
	var once sync.Once
	var moveErr error
	moved := make(chan struct{})
	l.rollFlushHook = func() {
		once.Do(func() {
			defer close(moved)
			for {
				n, err := copyToFuture(l, fut, 1<<20, false)
				if err != nil || n == 0 {
					moveErr = err
					break
				}
			}
			if moveErr == nil {
				var done bool
				if done, moveErr = m.completeMove(tp, l, f); !done && moveErr == nil {
					moveErr = errors.New("the move did not complete")
				}
			}
		})
	}
	fillLog(t, l, 40) // rolls: the background flush runs the hook
	<-moved
	if moveErr != nil {
		t.Fatal(moveErr)
	}
	l.rollFlushes.Wait() // the flush that ran the hook, done
	if l.Offline() || m.dirs[dirs[1]].isOffline() {
		t.Fatalf("the move under a background flush took a log dir offline: %v", m.OfflineDirs())
	}
	fillLog(t, l, 40)
	if filepath.Dir(l.Dir()) != dirs[1] {
		t.Fatalf("log in %s", l.Dir())
	}
}

// A cleaning pass spanning a move is aborted, not taken for a corrupt log:
// one whose read of the segments the move retired fails once they are
// closed, and one that creates its cleaned segment in the directory the
// move renamed away. The log stays cleanable, and the next pass cleans it
// in its new dir.
func TestCleaningSpanningAMoveIsAborted(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	mcfg := moveTestConfig(dirs...)
	mcfg.DisableLogCleaner = true // the test runs the passes
	m := openTestManager(t, mcfg)
	tp := TopicPartition{"compacted", 0}
	l, err := m.GetOrCreateLog(tp, compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	written := overwriteLog(t, l, record.CompressionNone, rand.New(rand.NewSource(5)), 100, 5, 10, newFakeClock())
	l.SetHighWatermark(l.LogEndOffset())
	want := readRecords(t, l)
	other := func() string {
		if filepath.Dir(l.Dir()) == dirs[0] {
			return dirs[1]
		}
		return dirs[0]
	}
	aborted := func(what string, p *cleanPlan) {
		t.Helper()
		if ok, err := m.cleanClaimed(&cleanCandidate{log: l, plan: p}, nil); ok || err != nil {
			t.Fatalf("%s: cleaned %v, error %v; want an aborted pass", what, ok, err)
		}
		m.cleaner.mu.Lock()
		uncleanable := m.cleaner.uncleanable[tp]
		m.cleaner.mu.Unlock()
		if uncleanable {
			t.Fatalf("%s: the log was marked uncleanable", what)
		}
		if got := readRecords(t, l); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the aborted pass changed the log", what)
		}
		for _, d := range dirs {
			matches, _ := filepath.Glob(filepath.Join(d, "*", "*"+cleanedSuffix))
			if len(matches) > 0 {
				t.Fatalf("%s: the aborted pass left %v", what, matches)
			}
		}
	}

	// The pass reads segments the move retired and closed.
	p, ok := l.planClean(0)
	if !ok {
		t.Fatal("nothing cleanable")
	}
	to := other()
	if err := m.AlterLogDir(tp, to); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, m, tp, to)
	m.closeRetired(true)
	aborted("reading retired segments", p)

	// The move completes between the pass taking the log's directory and
	// creating its cleaned segment there.
	if err := l.Roll(); err != nil { // the move copied into segments of segment.bytes
		t.Fatal(err)
	}
	if p, ok = l.planClean(0); !ok {
		t.Fatal("nothing cleanable after the move")
	}
	to = other()
	l.cleanGroupHook = func() {
		l.cleanGroupHook = nil
		if err := m.AlterLogDir(tp, to); err != nil {
			t.Error(err)
		}
		waitMoved(t, m, tp, to)
	}
	aborted("creating the cleaned segment in a renamed directory", p)

	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if p, ok = l.planClean(0); !ok {
		t.Fatal("nothing cleanable after the second move")
	}
	if ok, err := m.cleanClaimed(&cleanCandidate{log: l, plan: p}, nil); !ok || err != nil {
		t.Fatalf("cleaning in the new dir: cleaned %v, error %v", ok, err)
	}
	if got, want := readRecords(t, l), compacted(written, p.endOffset, false); !reflect.DeepEqual(got, want) {
		t.Fatalf("after cleaning:\n got  %v\n want %v", got, want)
	}
	checkLogInvariants(t, l)
}
