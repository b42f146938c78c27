package storage

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

func TestSyncGroupCommit(t *testing.T) {
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	if !cfg.Durable() {
		t.Fatal("flush.messages=1 is the durable mode")
	}
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg})
	// Deferred appends are not flushed inline: Sync makes them durable.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 3), 10), AppendOptions{LeaderEpoch: 0, DeferFlush: true}); err != nil {
					t.Error(err)
				}
				if err := l.Sync(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if d, leo := l.DurableOffset(), l.LogEndOffset(); d != leo || leo != 8*20*3 {
		t.Fatalf("durable offset %d, log end offset %d", d, leo)
	}
	// Sync fsyncs the records, not the indexes: the recovery point, below
	// which a restart trusts the indexes, stays.
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("Sync moved the recovery point to %d", rp)
	}
	// Without DeferFlush, flush.messages=1 still fsyncs inline.
	if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 1), 10), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if rp, d := l.RecoveryPoint(), l.DurableOffset(); rp != l.LogEndOffset() || d != rp {
		t.Fatalf("inline flush: recovery point %d, durable offset %d, log end %d", rp, d, l.LogEndOffset())
	}
	// A deferred append waits for Sync; a truncation meanwhile keeps the
	// durable offset at or below the log end.
	if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 5), 10), AppendOptions{DeferFlush: true}); err != nil {
		t.Fatal(err)
	}
	if d := l.DurableOffset(); d == l.LogEndOffset() || !l.SyncPending() {
		t.Fatal("a deferred append was flushed inline")
	}
	if err := l.TruncateTo(l.LogEndOffset() - 2); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if d, leo := l.DurableOffset(), l.LogEndOffset(); d != leo || l.SyncPending() {
		t.Fatalf("after truncation and Sync: durable offset %d, log end %d", d, leo)
	}
	// A truncation below the durable offset lowers it: the records
	// appended in place of the truncated ones are not durable.
	synced := l.LogEndOffset()
	if err := l.TruncateTo(synced - 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 5), 10), AppendOptions{DeferFlush: true}); err != nil {
		t.Fatal(err)
	}
	if d := l.DurableOffset(); d > synced-3 {
		t.Fatalf("durable offset %d after a truncation to %d and a deferred append", d, synced-3)
	}
	l.Close()
	if err := l.Sync(); err != ErrLogClosed {
		t.Fatalf("Sync of a closed log: %v", err)
	}
}

// Sync leaves the recovery point at the last roll. AdvanceRecoveryPoint
// flushes records and indexes and moves it to the log end, making what
// was not synced yet durable too.
func TestAdvanceRecoveryPoint(t *testing.T) {
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg})
	appendDeferred := func(n int) {
		t.Helper()
		if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, n), 10), AppendOptions{DeferFlush: true}); err != nil {
			t.Fatal(err)
		}
	}
	appendDeferred(5)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	appendDeferred(3)
	if rp, d := l.RecoveryPoint(), l.DurableOffset(); rp != 0 || d != 5 {
		t.Fatalf("before: recovery point %d, durable offset %d; want 0 and 5", rp, d)
	}
	if err := l.AdvanceRecoveryPoint(); err != nil {
		t.Fatal(err)
	}
	if rp, d, leo := l.RecoveryPoint(), l.DurableOffset(), l.LogEndOffset(); rp != 8 || d != 8 || leo != 8 {
		t.Fatalf("after: recovery point %d, durable offset %d, log end %d; want 8", rp, d, leo)
	}
	if l.SyncPending() {
		t.Fatal("records are still pending a Sync")
	}
}

// The log manager's periodic checkpoint moves each durable-mode log's
// recovery point first, so that after a crash recovery re-validates about
// one checkpoint interval of its appends, not its whole active segment.
// A log in Kafka's default mode is left to replication: nothing fsyncs it
// on a timer.
func TestCheckpointAdvancesDurableRecoveryPoints(t *testing.T) {
	dir := t.TempDir()
	cfg := testManagerConfig(dir)
	cfg.CheckpointInterval = 10 * time.Millisecond
	m := openTestManager(t, cfg)
	durable, err := m.GetOrCreateLog(TopicPartition{"durable", 0}, LogConfig{FlushMessages: 1, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := m.GetOrCreateLog(TopicPartition{"plain", 0}, LogConfig{SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Log{durable, plain} {
		if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 4), 10), AppendOptions{DeferFlush: l == durable}); err != nil {
			t.Fatal(err)
		}
	}
	if err := durable.Sync(); err != nil {
		t.Fatal(err)
	}
	checkpoint := NewOffsetCheckpointFile(filepath.Join(dir, recoveryPointCheckpoint))
	deadline := time.Now().Add(10 * time.Second)
	for {
		rp, err := checkpoint.Read()
		if err == nil && rp[durable.tp] == 4 {
			if rp[plain.tp] != 0 || plain.RecoveryPoint() != 0 {
				t.Fatalf("the default-mode log's recovery point moved: checkpoint %d, log %d", rp[plain.tp], plain.RecoveryPoint())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpointed recovery points %v (error %v), want 4 for %s", rp, err, durable.tp)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
