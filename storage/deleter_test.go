package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// sparseFile creates a file of size bytes that takes no blocks.
func sparseFile(t *testing.T, path string, size int64) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitGone waits until path no longer exists.
func waitGone(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after %v", path, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The deleter frees a file a step at a time at its rate, then unlinks it;
// unpaced, at once. It truncates through the handle it was given, so a
// file that has since taken the name is left whole.
func TestFileDeleterPaces(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	d := newFileDeleter(stop, 64<<20, hclog.NewNullLogger())
	done := make(chan struct{})
	go func() { defer close(done); d.run() }()
	defer func() { close(stop); <-done }()

	// 64 MiB: three 16 MiB steps paced at 64 MiB/s before the unlink.
	path := filepath.Join(dir, "00000000000000000000.log.deleted")
	start := time.Now()
	if err := d.addFile(path, sparseFile(t, path, 64<<20)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, path, 10*time.Second)
	paced := time.Since(start)
	if paced < 600*time.Millisecond {
		t.Fatalf("64 MiB removed in %v at 64 MiB/s, want at least 0.75 s", paced)
	}

	// The same name taken by a new file before the deleter comes to the
	// old one: the new file's bytes are untouched (it loses its name).
	d.rate.Store(-1)
	old := sparseFile(t, path, 64<<20)
	newer := filepath.Join(dir, "newer")
	nf, err := os.Create(newer)
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	content := bytes.Repeat([]byte("kept"), 1<<20)
	if _, err := nf.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(newer, path); err != nil { // the old file's name is now the new one's
		t.Fatal(err)
	}
	start = time.Now()
	if err := d.addFile(path, old); err != nil {
		t.Fatal(err)
	}
	waitGone(t, path, 10*time.Second)
	t.Logf("64 MiB paced at 64 MiB/s in %v; unpaced in %v", paced, time.Since(start))
	got := make([]byte, len(content))
	if _, err := nf.ReadAt(got, 0); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the file that took the name was changed: %v", err)
	}

	// A directory: its files, then itself.
	sub := filepath.Join(dir, "t-0.abc-delete")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	sparseFile(t, filepath.Join(sub, "00000000000000000000.log"), 40<<20).Close()
	sparseFile(t, filepath.Join(sub, "00000000000000000000.index"), 100).Close()
	if err := d.addDir(sub); err != nil {
		t.Fatal(err)
	}
	waitGone(t, sub, 10*time.Second)
}

// A deletion that waited in the queue longer than the deleter's warning
// time is logged, once per that time.
func TestFileDeleterSaysItIsBehind(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: lockedWriter{&mu, &logs}})
	d := newFileDeleter(stop, 32<<20, logger) // each 48 MiB file: 1 s
	d.behind = 300 * time.Millisecond
	done := make(chan struct{})
	go func() { defer close(done); d.run() }()
	defer func() { close(stop); <-done }()
	var last string
	for i := range 3 {
		last = filepath.Join(dir, fmt.Sprintf("%d.log.deleted", i))
		if err := d.addFile(last, sparseFile(t, last, 48<<20)); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, last, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "removing deleted log files is behind"); n < 1 || n > 2 {
		t.Fatalf("%d warnings for files queued 1 and 2 s behind, want 1 or 2:\n%s", n, logs.String())
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Retention hands a deleted segment's log file to the manager's deleter:
// the append path does not wait for it, a manager closing with deletions
// left returns at once, and the next start removes what was left.
func TestManagerDeletesSegmentsPaced(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock()
	cfg := ManagerConfig{LogDirs: []string{dir}, Now: clock.Now, DisableLogCleaner: true, DeleteBytesPerSecond: 1 << 20}
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lc := DefaultLogConfig()
	lc.SegmentBytes, lc.RetentionBytes, lc.FileDeleteDelayMs = 4096, 1, 0
	tp := TopicPartition{Topic: "retained", Partition: 0}
	l, err := m.GetOrCreateLog(tp, lc)
	if err != nil {
		t.Fatal(err)
	}
	fillLog(t, l, 200)
	l.SetHighWatermark(l.LogEndOffset())
	// Each deleted segment's file made large (sparse): at 1 MiB/s the
	// deleter needs minutes for them.
	matches, _ := filepath.Glob(filepath.Join(l.Dir(), "*.log"))
	for _, p := range matches[:len(matches)-1] {
		if err := os.Truncate(p, 64<<20); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	n, err := l.DeleteOldSegments()
	if err != nil || n == 0 {
		t.Fatalf("deleted %d segments: %v", n, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("retention took %v with a slow deleter: it waited for the removal", took)
	}
	fillLog(t, l, 1) // the log takes appends meanwhile
	start = time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("close took %v with deletions left", took)
	}
	left := 0
	entries, _ := os.ReadDir(l.Dir())
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), deletedSuffix) {
			left++
		}
	}
	if left == 0 {
		t.Fatalf("no deleted segment left at close: the test did not slow the deleter")
	}
	m = openTestManager(t, cfg)
	entries, _ = os.ReadDir(l.Dir())
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), deletedSuffix) {
			t.Fatalf("%s left after a restart", e.Name())
		}
	}
	if _, ok := m.Log(tp); !ok {
		t.Fatal("the log is gone after the restart")
	}
}
