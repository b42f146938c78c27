package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// The log manager: log dirs, locking, checkpoints, clean shutdown, deletion,
// parallel recovery, and that Close leaves no goroutine behind.

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noGoroutineLeak records the goroutine count and, at cleanup, waits for
// it to come back down.
func noGoroutineLeak(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		var now int
		deadline := time.Now().Add(10 * time.Second)
		for now = runtime.NumGoroutine(); now > before && time.Now().Before(deadline); now = runtime.NumGoroutine() {
			time.Sleep(5 * time.Millisecond)
		}
		if now > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines before, %d after:\n%s", before, now, buf[:runtime.Stack(buf, true)])
		}
	})
}

func testManagerConfig(dirs ...string) ManagerConfig {
	clock := newFakeClock()
	return ManagerConfig{
		LogDirs:       dirs,
		DefaultConfig: LogConfig{SegmentBytes: 4096},
		Now:           clock.Now,
	}
}

func openTestManager(t testing.TB, cfg ManagerConfig) *Manager {
	t.Helper()
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatalf("OpenManager: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// fillLog appends n small batches.
func fillLog(t testing.TB, l *Log, n int) {
	t.Helper()
	for i := range n {
		appendOK(t, l, buildBatch(t, allCodecs[i%len(allCodecs)], tsRange(t0+int64(i), 1+i%4), 50), 0)
	}
}

func TestManagerSpreadsPartitionsOverLogDirs(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	m := openTestManager(t, testManagerConfig(dirs...))
	count := map[string]int{}
	for p := range int32(6) {
		l, err := m.GetOrCreateLog(TopicPartition{"t", p}, LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		count[filepath.Dir(l.Dir())]++
		if again, _ := m.GetOrCreateLog(TopicPartition{"t", p}, LogConfig{}); again != l {
			t.Fatal("GetOrCreateLog created an existing partition again")
		}
	}
	if count[dirs[0]] != 3 || count[dirs[1]] != 3 {
		t.Fatalf("partitions per dir %v, want 3 and 3", count)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerLocksItsLogDirs(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	m := openTestManager(t, testManagerConfig(dirs...))
	for _, cfg := range []ManagerConfig{testManagerConfig(dirs...), testManagerConfig(t.TempDir(), dirs[1])} {
		if other, err := OpenManager(cfg); !errors.Is(err, ErrLogDirLocked) {
			if other != nil {
				other.Close()
			}
			t.Fatalf("second manager on %v: %v, want ErrLogDirLocked", cfg.LogDirs, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	again := openTestManager(t, testManagerConfig(dirs...))
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerCloseCheckpointsAndReopenRestores(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	m := openTestManager(t, testManagerConfig(dirs...))
	type state struct{ leo, hw, start int64 }
	want := map[TopicPartition]state{}
	for p := range int32(4) {
		tp := TopicPartition{"orders", p}
		l, err := m.GetOrCreateLog(tp, LogConfig{SegmentBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		fillLog(t, l, 10+int(p)*5)
		l.SetHighWatermark(l.LogEndOffset() - int64(p))
		if err := l.IncrementLogStartOffset(int64(p) * 3); err != nil {
			t.Fatal(err)
		}
		want[tp] = state{l.LogEndOffset(), l.HighWatermark(), l.LogStartOffset()}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, cleanShutdownFileName)); err != nil {
			t.Fatalf("no clean shutdown marker in %s: %v", dir, err)
		}
	}
	// Kafka's checkpoint text format: version, count, "topic partition offset".
	for name, field := range map[string]func(state) int64{
		recoveryPointCheckpoint:  func(s state) int64 { return s.leo }, // Close flushed everything
		highWatermarkCheckpoint:  func(s state) int64 { return s.hw },
		logStartOffsetCheckpoint: func(s state) int64 { return s.start },
	} {
		var lines []string
		for _, dir := range dirs {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			if parts[0] != "0" || parts[1] != fmt.Sprint(len(parts)-2) {
				t.Fatalf("%s in %s: %q is not Kafka's checkpoint format", name, dir, data)
			}
			lines = append(lines, parts[2:]...)
		}
		for tp, s := range want {
			if line := fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, field(s)); !contains(lines, line) {
				t.Fatalf("%s lacks %q: %q", name, line, lines)
			}
		}
	}

	m = openTestManager(t, testManagerConfig(dirs...))
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, cleanShutdownFileName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("clean shutdown marker still in %s after open: %v", dir, err)
		}
	}
	for tp, s := range want {
		l, ok := m.Log(tp)
		if !ok {
			t.Fatalf("%s not loaded", tp)
		}
		if got := (state{l.LogEndOffset(), l.HighWatermark(), l.LogStartOffset()}); got != s {
			t.Fatalf("%s reopened as %+v, want %+v", tp, got, s)
		}
		if l.RecoveryPoint() != s.leo {
			t.Fatalf("%s recovery point %d, want %d", tp, l.RecoveryPoint(), s.leo)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func contains(lines []string, line string) bool {
	for _, l := range lines {
		if l == line {
			return true
		}
	}
	return false
}

func TestManagerDeleteLogRenamesThenRemoves(t *testing.T) {
	noGoroutineLeak(t)
	dir := t.TempDir()
	m := openTestManager(t, testManagerConfig(dir))
	tp := TopicPartition{"t", 0}
	l, err := m.GetOrCreateLog(tp, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	fillLog(t, l, 5)
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t-0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partition directory still under its name: %v", err)
	}
	// Until the background removal finishes, the directory can only be
	// there under its "-delete" name.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && !(strings.HasPrefix(e.Name(), "t-0.") && strings.HasSuffix(e.Name(), deleteDirSuffix)) {
			t.Fatalf("unexpected directory %s", e.Name())
		}
	}
	if _, ok := m.Log(tp); ok {
		t.Fatal("deleted log still served")
	}
	if _, err := l.Read(0, 1, 1, true); !errors.Is(err, ErrLogClosed) {
		t.Fatalf("read of a deleted log: %v", err)
	}
	waitFor(t, "the deleted partition directory to go", func() bool {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				return false
			}
		}
		return true
	})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, testManagerConfig(dir))
	if _, ok := m.Log(tp); ok {
		t.Fatal("a deleted partition came back after a restart")
	}
}

func TestManagerRemovesLeftoverDeleteDirsAtOpen(t *testing.T) {
	noGoroutineLeak(t)
	dir := t.TempDir()
	leftover := filepath.Join(dir, "t-3.0123456789abcdef0123456789abcdef"+deleteDirSuffix)
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, segmentFileName(0, logSuffix)), []byte("old data"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := openTestManager(t, testManagerConfig(dir))
	waitFor(t, "the leftover -delete directory to go", func() bool {
		_, err := os.Stat(leftover)
		return errors.Is(err, os.ErrNotExist)
	})
	if len(m.Logs()) != 0 {
		t.Fatalf("loaded %d logs from a -delete directory", len(m.Logs()))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerRecoversManyPartitionsInParallel(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	want := map[TopicPartition][]byte{}
	// Logs written without a manager and closed without a marker or
	// checkpoints: every partition recovers fully, four at a time per dir.
	for d, dir := range dirs {
		for p := range int32(16) {
			tp := TopicPartition{fmt.Sprintf("topic%d", d), p}
			l, err := OpenLog(filepath.Join(dir, tp.DirName()), OpenOptions{Config: LogConfig{SegmentBytes: 1024}, Now: newFakeClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			fillLog(t, l, 8+int(p))
			want[tp] = readAll(t, l, 0, l.LogEndOffset())
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// A torn write at the end of one partition per dir.
		segs := segmentLogPaths(t, filepath.Join(dir, fmt.Sprintf("topic%d-5", d)))
		f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(bytes.Repeat([]byte{0xee}, 33))
		f.Close()
	}
	cfg := testManagerConfig(dirs...)
	cfg.RecoveryThreadsPerDataDir = 4
	cfg.DefaultConfig = LogConfig{SegmentBytes: 1024}
	m := openTestManager(t, cfg)
	if got := len(m.Logs()); got != len(want) {
		t.Fatalf("loaded %d partitions, want %d", got, len(want))
	}
	for tp, data := range want {
		l, ok := m.Log(tp)
		if !ok {
			t.Fatalf("%s not loaded", tp)
		}
		if got := readAll(t, l, 0, l.LogEndOffset()); !bytes.Equal(got, data) {
			t.Fatalf("%s recovered %d bytes, want %d", tp, len(got), len(data))
		}
		checkLogInvariants(t, l)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerBackgroundWorkRacesSafelyWithAppends(t *testing.T) {
	noGoroutineLeak(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	cfg := testManagerConfig(dirs...)
	cfg.RetentionCheckInterval, cfg.FlushCheckInterval, cfg.CheckpointInterval = time.Millisecond, time.Millisecond, time.Millisecond
	cfg.DefaultConfig = LogConfig{SegmentBytes: 1024, RetentionMs: -1, FlushMs: 1}
	m := openTestManager(t, cfg)
	var logs []*Log
	for p := range int32(4) {
		l, err := m.GetOrCreateLog(TopicPartition{"t", p}, cfg.DefaultConfig)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	var wg sync.WaitGroup
	for _, l := range logs {
		wg.Go(func() {
			for i := range 30 {
				if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(t0+int64(i), 2), 30), AppendOptions{}); err != nil {
					t.Error(err)
					return
				}
				l.SetHighWatermark(l.LogEndOffset())
				if i%10 == 9 {
					if err := l.IncrementLogStartOffset(l.HighWatermark() - 5); err != nil {
						t.Error(err)
					}
				}
				if _, err := l.Read(l.LogStartOffset(), 1<<20, l.HighWatermark(), true); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	want := map[TopicPartition][3]int64{}
	for _, l := range logs {
		want[l.TopicPartition()] = [3]int64{l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark()}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, cfg)
	for tp, w := range want {
		l, ok := m.Log(tp)
		if !ok || [3]int64{l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark()} != w {
			t.Fatalf("%s reopened as %v, want %v", tp, l, w)
		}
		checkLogInvariants(t, l)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// metadata.log.dir defaults to the first log dir: the KRaft metadata log's
// directory sits beside the partitions and must be left to raftlog.
func TestManagerLeavesTheMetadataLogAlone(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, MetadataTopic+"-0")
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(meta, "raft.db"), []byte("not a segment"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := openTestManager(t, testManagerConfig(dir))
	if len(m.Logs()) != 0 {
		t.Fatalf("opened %d logs", len(m.Logs()))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(meta)
	if len(entries) != 1 || entries[0].Name() != "raft.db" {
		t.Fatalf("metadata dir touched: %v", entries)
	}
}

// A Manager's logs hand their appended pages to writeback on its own
// goroutine (writeback.go), which stops with the Manager.
func TestManagerWriteback(t *testing.T) {
	noGoroutineLeak(t)
	// Off at start (keel.log.writeback.bytes=0): appends hand nothing over.
	m := openTestManager(t, ManagerConfig{LogDirs: []string{t.TempDir()}})
	l, err := m.GetOrCreateLog(TopicPartition{"t", 0}, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0, 3), 1000), 0)
	}
	if n := l.active().writebacks.Load(); n != 0 {
		t.Fatalf("%d hand-overs with keel.log.writeback.bytes=0", n)
	}
	// Set at runtime (a dynamic broker config): the open log takes it
	// from its next append, and the Manager's goroutine hands over.
	m.SetWritebackBytes(16 << 10)
	if got := m.WritebackBytes(); got != 16<<10 {
		t.Fatalf("WritebackBytes() = %d after SetWritebackBytes(16 KiB)", got)
	}
	for range 40 {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(t0, 3), 1000), 0)
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.active().writebacks.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Manager's writeback goroutine handed nothing over")
		}
		time.Sleep(time.Millisecond)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHighWatermarkCheckpointInterval: the high watermarks are written on
// replica.high.watermark.checkpoint.interval.ms alone, well before the
// recovery points' log.flush.offset.checkpoint.interval.ms, so a broker
// that crashes restarts from recent ones (Kafka's 5 s against 60 s).
func TestHighWatermarkCheckpointInterval(t *testing.T) {
	noGoroutineLeak(t)
	dir := t.TempDir()
	cfg := testManagerConfig(dir)
	cfg.CheckpointInterval, cfg.HighWatermarkCheckpointInterval = time.Hour, 20*time.Millisecond
	m := openTestManager(t, cfg)
	tp := TopicPartition{"hw", 0}
	l, err := m.GetOrCreateLog(tp, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	fillLog(t, l, 3)
	l.SetHighWatermark(l.LogEndOffset())
	want := l.HighWatermark()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hws, err := NewOffsetCheckpointFile(filepath.Join(dir, highWatermarkCheckpoint)).Read()
		if err == nil && hws[tp] == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("high-watermark checkpoint %v (%v), want %s at %d", hws, err, tp, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rps, err := NewOffsetCheckpointFile(filepath.Join(dir, recoveryPointCheckpoint)).Read(); err == nil && len(rps) > 0 {
		t.Fatalf("recovery points written before their hour-long interval: %v", rps)
	}
}

// TestCleanShutdownMarkerCarriesTheBrokerEpoch: Close writes the broker
// epoch into every dir's marker, as Kafka's CleanShutdownFileHandler does,
// and the next open reports it as PreviousBrokerEpoch (KIP-966); -1 after
// a crash (a dir without its marker), on a new node, for an empty marker
// of an older Keel, and for markers that disagree.
func TestCleanShutdownMarkerCarriesTheBrokerEpoch(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	reopen := func() *Manager {
		t.Helper()
		m, err := OpenManager(testManagerConfig(dirs...))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := reopen()
	if e := m.PreviousBrokerEpoch(); e != -1 {
		t.Fatalf("new node: previous broker epoch %d, want -1", e)
	}
	m.SetBrokerEpoch(42)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dirs[0], cleanShutdownFileName))
	if err != nil || string(data) != `{"version":0,"brokerEpoch":42}` {
		t.Fatalf("marker %q %v", data, err)
	}
	m = reopen()
	if e := m.PreviousBrokerEpoch(); e != 42 {
		t.Fatalf("after a clean shutdown: previous broker epoch %d, want 42", e)
	}
	m.SetBrokerEpoch(43)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for name, damage := range map[string]func() error{
		"a dir without its marker (a crash)": func() error { return os.Remove(filepath.Join(dirs[1], cleanShutdownFileName)) },
		"an empty marker (an older Keel)": func() error {
			return os.WriteFile(filepath.Join(dirs[1], cleanShutdownFileName), nil, 0o644)
		},
		"markers that disagree": func() error {
			return os.WriteFile(filepath.Join(dirs[1], cleanShutdownFileName), []byte(`{"version":0,"brokerEpoch":7}`), 0o644)
		},
		"a marker that does not parse": func() error {
			return os.WriteFile(filepath.Join(dirs[1], cleanShutdownFileName), []byte(`{"brokerEpoch":`), 0o644)
		},
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		m = reopen()
		if e := m.PreviousBrokerEpoch(); e != -1 {
			t.Errorf("%s: previous broker epoch %d, want -1", name, e)
		}
		m.SetBrokerEpoch(43)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m = reopen()
	defer m.Close()
	if e := m.PreviousBrokerEpoch(); e != 43 {
		t.Fatalf("after clean shutdowns again: previous broker epoch %d, want 43", e)
	}
}
