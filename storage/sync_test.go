package storage

import (
	"sync"
	"testing"

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
