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
	// Deferred appends are not flushed inline: the recovery point stays.
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
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo || leo != 8*20*3 {
		t.Fatalf("recovery point %d, log end offset %d", rp, leo)
	}
	// Without DeferFlush, flush.messages=1 still fsyncs inline.
	if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 1), 10), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp != l.LogEndOffset() {
		t.Fatalf("inline flush: recovery point %d, log end %d", rp, l.LogEndOffset())
	}
	// A deferred append waits for Sync; a truncation meanwhile keeps the
	// recovery point at or below the log end.
	if _, err := l.AppendAsLeader(buildBatch(t, record.CompressionNone, tsRange(testEpochMs, 5), 10), AppendOptions{DeferFlush: true}); err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp == l.LogEndOffset() {
		t.Fatal("a deferred append was flushed inline")
	}
	if err := l.TruncateTo(l.LogEndOffset() - 2); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		t.Fatalf("after truncation and Sync: recovery point %d, log end %d", rp, leo)
	}
	l.Close()
	if err := l.Sync(); err != ErrLogClosed {
		t.Fatalf("Sync of a closed log: %v", err)
	}
}
