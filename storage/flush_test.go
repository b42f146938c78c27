package storage

import (
	"os"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// rollingLog opens a log whose segments roll every few batches and whose
// background roll flush waits in the returned gate until released.
func rollingLog(t *testing.T) (l *Log, entered <-chan struct{}, release func()) {
	t.Helper()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 4 << 10
	l = openTestLog(t, partitionDir(t), OpenOptions{Config: cfg})
	in, gate := make(chan struct{}, 16), make(chan struct{})
	l.rollFlushHook = func() {
		in <- struct{}{}
		<-gate
	}
	released := false
	release = func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(release) // before the log's Close, which waits for the flush
	return l, in, release
}

// waitEntered waits for the background flush to reach the gate.
func waitEntered(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no background flush of the rolled segment started")
	}
}

func appendBatches(t *testing.T, l *Log, n int) {
	t.Helper()
	for range n {
		appendOK(t, l, buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 10), 100), 0)
	}
}

// waitRecoveryPoint waits for the background flush to move the recovery
// point to want.
func waitRecoveryPoint(t *testing.T, l *Log, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.RecoveryPoint() != want {
		if time.Now().After(deadline) {
			t.Fatalf("recovery point %d, want %d", l.RecoveryPoint(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRollFlushesInTheBackground(t *testing.T) {
	l, entered, release := rollingLog(t)
	appendBatches(t, l, 3) // ~1.2 KiB each: the fourth rolls
	if activeBase(l) != 0 {
		t.Fatal("rolled early")
	}
	appendBatches(t, l, 1)
	base := activeBase(l)
	if base == 0 {
		t.Fatal("did not roll")
	}
	waitEntered(t, entered)
	// The flush of the rolled segment is under way (held at the gate):
	// appends, rolls and reads of the partition go on meanwhile, and the
	// recovery point has not moved past data not yet fsynced.
	appendBatches(t, l, 8)
	if activeBase(l) <= base {
		t.Fatal("no second roll while the first flush was held")
	}
	if got := readAll(t, l, 0, l.LogEndOffset()); len(batchHeaders(t, got)) != 12 {
		t.Fatalf("read %d batches while a flush was held, want 12", len(batchHeaders(t, got)))
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before the rolled segment was flushed", rp)
	}
	// The rolls' producer snapshots are written (fsynced by the flush).
	if _, err := os.Stat(producerSnapshotPath(l.path(), base)); err != nil {
		t.Fatalf("no producer snapshot at the roll: %v", err)
	}
	release()
	waitRecoveryPoint(t, l, activeBase(l))
	checkLogInvariants(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.rollFlushRunning {
		t.Fatal("the background flush outlived Close")
	}
}

func TestRollFlushAfterTruncationBelowIt(t *testing.T) {
	l, entered, release := rollingLog(t)
	appendBatches(t, l, 4)
	waitEntered(t, entered)
	appendBatches(t, l, 1)
	// A follower truncating into the rolled segment while its flush is
	// held: the recovery point must never pass the log end offset.
	if err := l.TruncateTo(15); err != nil {
		t.Fatal(err)
	}
	release()
	l.rollFlushes.Wait()
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp > leo {
		t.Fatalf("recovery point %d above the log end offset %d", rp, leo)
	}
	checkLogInvariants(t, l)
}

func TestSyncAfterRollSyncsTheDirectory(t *testing.T) {
	l, entered, _ := rollingLog(t)
	appendBatches(t, l, 4)
	waitEntered(t, entered) // the background flush, which would sync it, is held
	l.mu.RLock()
	pending := l.dirSynced < l.segmentsCreated
	l.mu.RUnlock()
	if !pending {
		t.Fatal("a rolled segment's directory entry counts as synced")
	}
	// Durable mode's group commit must not count the new segment's data
	// as flushed while its directory entry may still be lost.
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.dirSynced != l.segmentsCreated {
		t.Fatalf("Sync left the directory unsynced (%d of %d segments)", l.dirSynced, l.segmentsCreated)
	}
	if d := l.durableOffsetLocked(); d != l.active().nextOffset {
		t.Fatalf("durable offset %d, log end offset %d", d, l.active().nextOffset)
	}
}
