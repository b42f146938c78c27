package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/keelstream/keel/network/record"
)

// failSegmentWrites points the active segment of l at /dev/full, whose
// writes fail with ENOSPC (a full disk, from the kernel): the next append
// meets a real I/O error. It returns the segment's own file, for the test
// to close after the log.
func failSegmentWrites(t *testing.T, l *Log) *os.File {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no /dev/full to fail writes with: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.active()
	own := s.file
	s.file = full
	return own
}

// TestLogDirFailureTakesTheDirOffline: the first I/O error writing a log
// takes its whole dir offline, once; every log there then refuses appends,
// reads and truncations with KAFKA_STORAGE_ERROR, while the other dir goes
// on and gets the new partitions; nothing more is written to the failed
// dir (no checkpoints, no clean-shutdown marker), so the next start
// recovers it as after a crash, with everything appended before the
// failure.
func TestLogDirFailureTakesTheDirOffline(t *testing.T) {
	noGoroutineLeak(t)
	bad, good := t.TempDir(), t.TempDir()
	cfg := testManagerConfig(bad, good)
	var mu sync.Mutex
	var failures []string
	var firstErr error
	cfg.OnLogDirFailure = func(dir string, err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, dir)
		if firstErr == nil {
			firstErr = err
		}
	}
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// GetOrCreateLog alternates dirs: partitions 0 and 2 land in bad.
	logs := map[int32]*Log{}
	for p := range int32(4) {
		l, err := m.GetOrCreateLog(TopicPartition{"t", p}, LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		fillLog(t, l, 5)
		logs[p] = l
	}
	inBad := func(l *Log) bool { return filepath.Dir(l.Dir()) == bad }
	if !inBad(logs[0]) || !inBad(logs[2]) || inBad(logs[1]) || inBad(logs[3]) {
		t.Fatal("partitions not spread over the dirs as expected")
	}
	leoBefore := map[int32]int64{}
	for p, l := range logs {
		leoBefore[p] = l.LogEndOffset()
	}

	own := failSegmentWrites(t, logs[0])
	batch := buildBatch(t, record.CompressionNone, tsRange(t0, 2), 50)
	_, err = logs[0].AppendAsLeader(batch, AppendOptions{})
	if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrLogDirOffline) ||
		ErrorCode(err) != codeKafkaStorageError {
		t.Fatalf("append on a full disk: %v (code %d), want ENOSPC as KAFKA_STORAGE_ERROR", err, ErrorCode(err))
	}
	if !logs[0].Offline() || !logs[2].Offline() || logs[1].Offline() {
		t.Fatal("the failure did not take exactly the failed dir offline")
	}

	// Every log of the failed dir refuses; the report came once.
	other := logs[2]
	if _, err := other.AppendAsLeader(batch, AppendOptions{}); !errors.Is(err, ErrLogDirOffline) || ErrorCode(err) != codeKafkaStorageError {
		t.Fatalf("append to another log of the failed dir: %v", err)
	}
	if _, err := other.Read(0, 1<<20, other.LogEndOffset(), true); ErrorCode(err) != codeKafkaStorageError {
		t.Fatalf("read from the failed dir: %v", err)
	}
	if err := other.TruncateTo(1); ErrorCode(err) != codeKafkaStorageError {
		t.Fatalf("truncate in the failed dir: %v", err)
	}
	if _, err := other.AppendAsFollower(batch, false); ErrorCode(err) != codeKafkaStorageError {
		t.Fatalf("follower append in the failed dir: %v", err)
	}
	mu.Lock()
	if len(failures) != 1 || failures[0] != bad || !errors.Is(firstErr, syscall.ENOSPC) {
		t.Fatalf("failures reported %v (first %v), want %s once, with ENOSPC", failures, firstErr, bad)
	}
	mu.Unlock()
	if got := m.OfflineDirs(); len(got) != 1 || got[0] != bad {
		t.Fatalf("OfflineDirs %v", got)
	}

	// The healthy dir works on and takes every new partition.
	appendOK(t, logs[1], batch, 0)
	for p := int32(4); p < 6; p++ {
		l, err := m.GetOrCreateLog(TopicPartition{"t", p}, LogConfig{})
		if err != nil || inBad(l) {
			t.Fatalf("new partition %d with a dir offline: %v", p, err)
		}
	}
	if err := m.CheckpointOffsets(); err != nil {
		t.Fatalf("checkpoints of the healthy dir: %v", err)
	}

	if err := m.Close(); !errors.Is(err, ErrStorage) {
		t.Fatalf("Close with a dir offline: %v, want ErrStorage", err)
	}
	own.Close()
	if _, err := os.Stat(filepath.Join(bad, cleanShutdownFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker written to the failed dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(good, cleanShutdownFileName)); err != nil {
		t.Fatalf("no clean-shutdown marker in the healthy dir: %v", err)
	}

	// With the disk replaced (here: the file system was never broken),
	// the failed dir is recovered and holds what it held.
	m = openTestManager(t, testManagerConfig(bad, good))
	for p, want := range leoBefore {
		l, ok := m.Log(TopicPartition{"t", p})
		if !ok {
			t.Fatalf("partition %d not loaded", p)
		}
		if p == 1 {
			want += 2 // appended after the failure, in the healthy dir
		}
		if got := l.LogEndOffset(); got != want {
			t.Fatalf("partition %d reopened with log end %d, want %d", p, got, want)
		}
		checkLogInvariants(t, l)
	}
}

// TestFailedFsyncIsNotRetried: in the durable mode an acknowledgement waits
// for Sync. Once an fsync failed, a later one that succeeds proves nothing
// (the kernel may have dropped the pages it could not write), so the dir
// goes offline and every later Sync fails too: nothing appended before the
// failure is ever acknowledged as durable.
func TestFailedFsyncIsNotRetried(t *testing.T) {
	noGoroutineLeak(t)
	dir := t.TempDir()
	cfg := testManagerConfig(dir)
	failed := 0
	cfg.OnLogDirFailure = func(string, error) { failed++ }
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.GetOrCreateLog(TopicPartition{"durable", 0}, LogConfig{FlushMessages: 1})
	if err != nil {
		t.Fatal(err)
	}
	batch := buildBatch(t, record.CompressionNone, tsRange(t0, 2), 50)
	if _, err := l.AppendAsLeader(batch, AppendOptions{DeferFlush: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(batch, AppendOptions{DeferFlush: true}); err != nil {
		t.Fatal(err)
	}
	// /dev/full cannot be fsynced (EINVAL): the fsync fails from the kernel.
	own := failSegmentWrites(t, l)
	if err := l.Sync(); !errors.Is(err, ErrStorage) || errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("failed fsync: %v", err)
	}
	l.mu.Lock()
	l.active().file, own = own, l.active().file // the disk "recovers"
	l.mu.Unlock()
	own.Close()
	if err := l.Sync(); !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("Sync after a failed fsync: %v, want ErrLogDirOffline", err)
	}
	if l.DurableOffset() != 2 || failed != 1 {
		t.Fatalf("durable offset %d (want 2, the first Sync's), failures reported %d", l.DurableOffset(), failed)
	}
	if err := m.Close(); !errors.Is(err, ErrStorage) {
		t.Fatalf("Close: %v", err)
	}
}

// TestLogDirsOfflineFromTheStart: a log dir that cannot be used at start
// (one the node found unreadable, one that cannot be created, one where a
// partition fails to load with an I/O error) is offline from the start,
// as Kafka's LogManager leaves such dirs out: the Manager opens without
// it, loads nothing from it, writes nothing to it, creates new partitions
// elsewhere, and reports no clean shutdown (PreviousBrokerEpoch -1). With
// every dir offline it does not open; a dir another process holds is still
// refused.
func TestLogDirsOfflineFromTheStart(t *testing.T) {
	noGoroutineLeak(t)
	a, b := t.TempDir(), t.TempDir()
	// Partitions 0 and 2 in a, 1 and 3 in b, shut down cleanly.
	m := openTestManager(t, testManagerConfig(a, b))
	for p := range int32(4) {
		l, err := m.GetOrCreateLog(TopicPartition{"t", p}, LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		fillLog(t, l, 3)
	}
	m.SetBrokerEpoch(7)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	loaded := func(m *Manager) []int32 {
		var ps []int32
		for _, l := range m.Logs() {
			ps = append(ps, l.TopicPartition().Partition)
		}
		return ps
	}
	reported := 0
	cfg := testManagerConfig(a, b)
	cfg.OnLogDirFailure = func(string, error) { reported++ }

	// a could not be read at start.
	cfg.InitialOfflineDirs = []string{a}
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatalf("open with a dir offline: %v", err)
	}
	if got := m.OfflineDirs(); len(got) != 1 || got[0] != a {
		t.Fatalf("OfflineDirs %v, want [%s]", got, a)
	}
	if got := loaded(m); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("partitions loaded %v, want b's [1 3]", got)
	}
	if m.PreviousBrokerEpoch() != -1 {
		t.Fatalf("PreviousBrokerEpoch %d with a dir offline, want -1", m.PreviousBrokerEpoch())
	}
	l, err := m.GetOrCreateLog(TopicPartition{"t", 0}, LogConfig{})
	if err != nil || filepath.Dir(l.Dir()) != b {
		t.Fatalf("a new log with a offline: %v in %s", err, l.Dir())
	}
	if err := m.AlterLogDir(TopicPartition{"t", 1}, a); !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("a move into the offline dir: %v", err)
	}
	if err := m.Close(); !errors.Is(err, ErrStorage) {
		t.Fatalf("Close with a dir offline: %v, want ErrStorage", err)
	}
	// Nothing was read or written there: its clean-shutdown marker (which
	// a load removes) is still in place.
	if _, err := os.Stat(filepath.Join(a, cleanShutdownFileName)); err != nil {
		t.Fatalf("the offline dir was touched: %v", err)
	}

	// A partition of b fails to load with an I/O error (its segment file
	// cannot be opened): b is offline, a serves on. (The t-0 created in b
	// above goes first: a's copy is the one to load.)
	if err := os.RemoveAll(filepath.Join(b, "t-0")); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(b, "t-1", "00000000000000000000.log")
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(seg, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.InitialOfflineDirs = nil
	m, err = OpenManager(cfg)
	if err != nil {
		t.Fatalf("open with a partition that cannot be loaded: %v", err)
	}
	if got := m.OfflineDirs(); len(got) != 1 || got[0] != b {
		t.Fatalf("OfflineDirs %v, want [%s]", got, b)
	}
	if got := loaded(m); fmt.Sprint(got) != "[0 2]" {
		t.Fatalf("partitions loaded %v, want a's [0 2]", got)
	}
	if _, ok := m.Log(TopicPartition{"t", 3}); ok {
		t.Fatal("a partition of the offline dir is open")
	}
	if m.PreviousBrokerEpoch() != -1 {
		t.Fatalf("PreviousBrokerEpoch %d with a dir offline, want -1", m.PreviousBrokerEpoch())
	}
	if err := m.Close(); !errors.Is(err, ErrStorage) {
		t.Fatalf("Close: %v", err)
	}
	if reported != 0 {
		t.Fatalf("%d failures reported through OnLogDirFailure, which is for failures after the start", reported)
	}

	// b cannot be created (a file is in its place), and a is offline too:
	// nothing to serve from.
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.InitialOfflineDirs = []string{a}
	if _, err := OpenManager(cfg); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "every log dir is offline") {
		t.Fatalf("open with every dir offline: %v", err)
	}
	// With a back, b alone is offline.
	cfg.InitialOfflineDirs = nil
	m = openTestManager(t, cfg)
	if got := m.OfflineDirs(); len(got) != 1 || got[0] != b {
		t.Fatalf("OfflineDirs %v, want [%s]", got, b)
	}
	// A dir locked by another process is not a failed disk: refused.
	other := testManagerConfig(a)
	if _, err := OpenManager(other); !errors.Is(err, ErrLogDirLocked) {
		t.Fatalf("open of a locked dir: %v", err)
	}
}
