package storage

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Cleaner tests of concurrency, crashes, followers, retention with
// compaction, the log manager's cleaner goroutine and bad input; the
// helpers are in cleaner_test.go.

func TestConcurrentAppendsAndReadsDuringCleaning(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	cfg.SegmentBytes = 4096
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	latest := map[string]string{} // guarded by the appender until wg.Wait
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("key-%d", i%50)
			v := fmt.Sprintf("v%d", i)
			batch := keyedBatch(t, record.CompressionNone, clock.Now().UnixMilli(), kv{k, []byte(v)})
			if _, err := l.AppendAsLeader(batch, AppendOptions{}); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			latest[k] = v
			l.SetHighWatermark(l.LogEndOffset())
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for off := l.LogStartOffset(); ; {
				info, err := l.Read(off, 4096, l.HighWatermark(), true)
				if err != nil {
					t.Errorf("read at %d: %v", off, err)
					return
				}
				if info.Bytes == 0 {
					break
				}
				b := make([]byte, 0, info.Bytes)
				for _, r := range info.Regions {
					chunk := make([]byte, r.Length)
					if _, err := r.File.ReadAt(chunk, r.Position); err != nil {
						t.Errorf("read region at %d: %v", off, err)
						return
					}
					b = append(b, chunk...)
				}
				it := record.NewBatches(b)
				var last record.BatchHeader
				for _, h, ok := it.Next(); ok; _, h, ok = it.Next() {
					last = h
				}
				if it.Err() != nil {
					t.Errorf("batches read at %d: %v", off, it.Err())
					return
				}
				off = last.NextOffset()
			}
		}
	}()
	var cp int64
	passes := 0
	for deadline := time.Now().Add(10 * time.Second); passes < 20 && time.Now().Before(deadline); {
		p, ok := l.planClean(cp)
		if !ok {
			time.Sleep(time.Millisecond)
			continue
		}
		stats, err := l.clean(p, 0, nil)
		if err != nil {
			t.Errorf("clean: %v", err)
			break
		}
		cp = stats.EndOffset
		passes++
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	if passes == 0 {
		t.Fatal("no cleaning pass ran")
	}
	t.Logf("%d cleaning passes, %d segments, log end offset %d", passes, l.NumSegments(), l.LogEndOffset())
	checkLogInvariants(t, l)
	got := map[string]string{}
	for _, r := range readRecords(t, l) {
		got[r.key] = r.value
	}
	if !reflect.DeepEqual(got, latest) {
		t.Fatalf("after %d passes the latest values differ:\n got  %v\n want %v", passes, got, latest)
	}
}

func TestCrashDuringTheSwapLeavesACorrectLog(t *testing.T) {
	clock := newFakeClock()
	l := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
	overwriteLog(t, l, record.CompressionSnappy, rand.New(rand.NewSource(7)), 120, 8, 10, clock)
	overwriteLog(t, l, record.CompressionSnappy, rand.New(rand.NewSource(8)), 3, 8, 0, clock)
	l.SetHighWatermark(l.LogEndOffset())
	bases := segmentBases(l)
	old, active := bases[:len(bases)-1], bases[len(bases)-1]
	pre := crashCopy(t, l)
	preRecords := readRecords(t, l)
	cleanOnce(t, l, 0)
	if got := segmentBases(l); !reflect.DeepEqual(got, []int64{old[0], active}) {
		t.Fatalf("segments %v after cleaning, want one cleaned group and the active segment", got)
	}
	postRecords := readRecords(t, l)
	cleanedLog, err := os.ReadFile(filepath.Join(l.Dir(), segmentFileName(old[0], logSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	cleanedIndex, err := os.ReadFile(filepath.Join(l.Dir(), segmentFileName(old[0], indexSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	name := func(base int64, suffix string) string { return segmentFileName(base, suffix) }
	deleteOld := func(n int) map[string][]byte {
		out := map[string][]byte{}
		for _, b := range old[:n] {
			for _, s := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
				out[name(b, s)] = nil // renamed below
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		// files to write (content) or, with nil content, to rename
		// "<name>" to "<name>.deleted".
		files map[string][]byte
		want  []logRecord
	}{
		{"while writing the cleaned segment", map[string][]byte{
			name(old[0], logSuffix) + cleanedSuffix:   cleanedLog[:len(cleanedLog)/2],
			name(old[0], indexSuffix) + cleanedSuffix: []byte("garbage!"),
		}, preRecords},
		{"after renaming the indexes to .swap", map[string][]byte{
			name(old[0], logSuffix) + cleanedSuffix:       cleanedLog,
			name(old[0], indexSuffix) + swapSuffix:        cleanedIndex,
			name(old[0], timeIndexSuffix) + swapSuffix:    []byte{},
			name(old[0], timeIndexSuffix) + cleanedSuffix: []byte{},
		}, preRecords},
		{"after the swap was committed", map[string][]byte{
			name(old[0], logSuffix) + swapSuffix:   cleanedLog,
			name(old[0], indexSuffix) + swapSuffix: cleanedIndex,
		}, postRecords},
		{"while deleting the old segments", merge(deleteOld(len(old)/2), map[string][]byte{
			name(old[0], logSuffix) + swapSuffix: cleanedLog,
		}), postRecords},
		{"after deleting the old segments", merge(deleteOld(len(old)), map[string][]byte{
			name(old[0], logSuffix) + swapSuffix: cleanedLog,
		}), postRecords},
		{"after renaming the new indexes into place", merge(deleteOld(len(old)), map[string][]byte{
			name(old[0], logSuffix) + swapSuffix: cleanedLog,
			name(old[0], indexSuffix):            cleanedIndex,
		}), postRecords},
	} {
		for _, cleanShutdown := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/clean shutdown %v", tc.name, cleanShutdown), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), filepath.Base(pre))
				copyDir(t, pre, dir)
				for f, content := range tc.files {
					p := filepath.Join(dir, f)
					if content == nil {
						if _, err := os.Stat(p); err == nil {
							if err := os.Rename(p, p+deletedSuffix); err != nil {
								t.Fatal(err)
							}
						}
						continue
					}
					if err := os.WriteFile(p, content, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i < 2; i++ { // and once more: recovery is idempotent
					l2, err := OpenLog(dir, OpenOptions{Config: compactConfig(), CleanShutdown: cleanShutdown, Now: clock.Now})
					if err != nil {
						t.Fatalf("reopen: %v", err)
					}
					checkLogInvariants(t, l2)
					got := readRecords(t, l2)
					l2.Close()
					if !reflect.DeepEqual(got, tc.want) {
						t.Fatalf("reopen %d: records differ:\n got  %v\n want %v", i, got, tc.want)
					}
					if left := append(filesWithSuffix(t, dir, cleanedSuffix), filesWithSuffix(t, dir, swapSuffix)...); len(left) > 0 {
						t.Fatalf("reopen left %v", left)
					}
				}
			})
		}
	}
}

func TestCompactOnlyLogsIgnoreRetentionTimeAndSize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delete  bool
		deleted bool
	}{{"compact", false, false}, {"compact,delete", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			cfg := compactConfig()
			cfg.NoDelete = !tc.delete
			cfg.RetentionMs = time.Minute.Milliseconds()
			cfg.RetentionBytes = 1
			l := openTestLog(t, partitionDir(t), OpenOptions{Config: cfg, Now: clock.Now})
			overwriteLog(t, l, record.CompressionNone, rand.New(rand.NewSource(6)), 30, 5, 10, clock)
			l.SetHighWatermark(l.LogEndOffset())
			clock.Advance(time.Hour)
			n, err := l.DeleteOldSegments()
			if err != nil {
				t.Fatal(err)
			}
			if (n > 0) != tc.deleted {
				t.Fatalf("cleanup.policy=%s: retention deleted %d segments", tc.name, n)
			}
		})
	}
}

func merge(a, b map[string][]byte) map[string][]byte {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func TestFollowersFetchAcrossOffsetGaps(t *testing.T) {
	clock := newFakeClock()
	leader := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
	overwriteLog(t, leader, record.CompressionNone, rand.New(rand.NewSource(5)), 200, 10, 20, clock)
	leader.SetHighWatermark(leader.LogEndOffset())
	cleanOnce(t, leader, 0)
	follower := openTestLog(t, partitionDir(t), OpenOptions{Config: compactConfig(), Now: clock.Now})
	for fetches := 0; follower.LogEndOffset() < leader.LogEndOffset(); fetches++ {
		if fetches > 1000 {
			t.Fatalf("follower stuck at %d, leader at %d", follower.LogEndOffset(), leader.LogEndOffset())
		}
		b := readBytes(t, leader, follower.LogEndOffset(), 512, leader.HighWatermark(), true)
		if len(b) == 0 {
			t.Fatalf("fetch at %d returned nothing below %d", follower.LogEndOffset(), leader.LogEndOffset())
		}
		if _, err := follower.AppendAsFollower(b, false); err != nil {
			t.Fatalf("follower append at %d: %v", follower.LogEndOffset(), err)
		}
	}
	if got, want := readRecords(t, follower), readRecords(t, leader); !reflect.DeepEqual(got, want) {
		t.Fatal("the follower's copy differs from the cleaned leader")
	}
}

func TestManagerCleanerCleansCompactedLogsAndCheckpoints(t *testing.T) {
	noGoroutineLeak(t)
	clock := newFakeClock()
	dir := t.TempDir()
	cfg := ManagerConfig{LogDirs: []string{dir}, DefaultConfig: LogConfig{SegmentBytes: 4096}, Now: clock.Now, CleanerBackoff: 5 * time.Millisecond}
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	compactTP, plainTP := TopicPartition{"compacted", 0}, TopicPartition{"plain", 0}
	cl, err := m.GetOrCreateLog(compactTP, compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	plainCfg := compactConfig()
	plainCfg.Compact, plainCfg.NoDelete = false, false
	pl, err := m.GetOrCreateLog(plainTP, plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(9))
	written := overwriteLog(t, cl, record.CompressionLZ4, rng, 200, 10, 20, clock)
	plainWritten := overwriteLog(t, pl, record.CompressionNone, rng, 200, 10, 20, clock)
	pl.SetHighWatermark(pl.LogEndOffset())
	cl.SetHighWatermark(cl.LogEndOffset())
	end := activeBase(cl)
	waitFor(t, "the cleaner", func() bool { return m.CleanerCheckpoint(compactTP) == end })
	if got, want := readRecords(t, cl), compacted(written, end, false); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the background cleaner:\n got  %v\n want %v", got, want)
	}
	if got := readRecords(t, pl); !reflect.DeepEqual(got, plainWritten) || m.CleanerCheckpoint(plainTP) != 0 {
		t.Fatal("the cleaner touched a log with cleanup.policy=delete")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	cps, err := NewOffsetCheckpointFile(filepath.Join(dir, cleanerCheckpointFile)).Read()
	if err != nil || cps[compactTP] != end {
		t.Fatalf("cleaner-offset-checkpoint holds %v (%v), want %s at %d", cps, err, compactTP, end)
	}
	cfg.DisableLogCleaner = true
	m2 := openTestManager(t, cfg)
	if got := m2.CleanerCheckpoint(compactTP); got != end {
		t.Fatalf("reopened manager: cleaner checkpoint %d, want %d", got, end)
	}
	if cleaned, err := m2.RunCleaner(); cleaned || err != nil {
		t.Fatalf("RunCleaner on a clean log: cleaned %v, %v", cleaned, err)
	}
}

// The cleaner parses records of batches read back from disk; a batch that
// passes its CRC but holds garbage must fail the pass, never panic, and
// whatever filter returns must be whole, valid batches.
func FuzzBatchFilter(f *testing.F) {
	f.Add(keyedBatch(f, record.CompressionNone, testEpochMs, kv{"a", []byte("1")}, kv{"b", nil}, kv{"a", []byte("2")}))
	f.Add(keyedBatch(f, record.CompressionSnappy, testEpochMs, kv{"a", nil}, kv{"c", []byte("x")}))
	f.Fuzz(func(t *testing.T, batch []byte) {
		if len(batch) >= record.HeaderSize {
			batch = resign(batch)
		}
		h, err := record.CheckBatch(batch)
		if err != nil {
			return
		}
		offsets := newOffsetMap()
		if _, err := offsets.mapBatch(batch, h, nil, 1<<20); err != nil {
			return
		}
		offsets.put([]byte("a"), h.BaseOffset+1)
		flt := &batchFilter{offsets: offsets, nowMs: testEpochMs, deleteRetentionMs: 1000, producerBatches: map[int64]bool{h.BaseOffset: true}, maxUncompressed: 1 << 20}
		out, err := flt.filter(nil, batch, h)
		if err != nil {
			return
		}
		it := record.NewBatches(out)
		n := 0
		for b, _, ok := it.Next(); ok; b, _, ok = it.Next() {
			n += len(b)
		}
		if it.Err() != nil || n != len(out) {
			t.Fatalf("filter returned %d bytes, %d of them whole batches: %v", len(out), n, it.Err())
		}
	})
}
