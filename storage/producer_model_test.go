package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestProducerStateUnderRandomOperations is a randomized test of the
// producer state's one invariant: whatever happened to the log (appends,
// retries, rolls, truncations, DeleteRecords, retention, clean and crash
// reopens, corrupt snapshots), the state equals what a scan of every batch
// header from the log start offset gives, and the snapshots on disk all
// lie within [log start offset, log end offset].
func TestProducerStateUnderRandomOperations(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			clock := newFakeClock()
			// Reopens pass the log start offset, as the log manager's
			// checkpoint does.
			open := func(dir string, clean bool, start int64) *Log {
				return openTestLog(t, dir, OpenOptions{Config: smallSegments(), CleanShutdown: clean, Now: clock.Now,
					LogStartOffset: start})
			}
			l := open(partitionDir(t), true, 0)
			epochs := map[int64]int16{}
			// lastBatch remembers each producer's newest appended batch, to
			// send its retry.
			type sent struct {
				epoch    int16
				seq      int32
				n        int
				offset   int64
				appended bool
			}
			last := map[int64]sent{}
			next := func(pid int64) (int16, int32) {
				for _, p := range l.ActiveProducers() {
					if p.ProducerID == pid {
						return p.ProducerEpoch, p.LastSequence + 1
					}
				}
				return epochs[pid], int32(rng.IntN(50)) // unknown: any sequence
			}
			for op := 0; op < 150; op++ {
				var what string
				switch r := rng.IntN(100); {
				case r < 60:
					pid := int64(rng.IntN(6))
					epoch, seq := next(pid)
					if rng.IntN(15) == 0 {
						epoch, seq = epoch+1, 0
					}
					epochs[pid] = epoch
					n := 1 + rng.IntN(3)
					what = fmt.Sprintf("append producer %d epoch %d seq %d", pid, epoch, seq)
					info := appendOK(t, l, idemBatch(t, pid, epoch, seq, n, clock.Now().UnixMilli()), 0)
					if info.Duplicate {
						t.Fatalf("op %d %s: a new batch taken as a duplicate", op, what)
					}
					last[pid] = sent{epoch, seq, n, info.FirstOffset, true}
				case r < 68:
					pid := int64(rng.IntN(6))
					s, ok := last[pid]
					if !ok {
						continue
					}
					what = fmt.Sprintf("retry producer %d seq %d", pid, s.seq)
					known := false
					for _, p := range l.ActiveProducers() {
						known = known || (p.ProducerID == pid && p.ProducerEpoch == s.epoch && p.LastSequence == s.seq+int32(s.n)-1)
					}
					info, err := l.AppendAsLeader(idemBatch(t, pid, s.epoch, s.seq, s.n, clock.Now().UnixMilli()), AppendOptions{})
					if known && (err != nil || !info.Duplicate || info.FirstOffset != s.offset) {
						t.Fatalf("op %d %s: %+v %v, want the duplicate of offset %d", op, what, info, err, s.offset)
					}
					if err == nil && !info.Duplicate {
						last[pid] = sent{s.epoch, s.seq, s.n, info.FirstOffset, true}
					}
				case r < 74:
					what = "roll"
					if err := l.Roll(); err != nil {
						t.Fatal(err)
					}
				case r < 81:
					start, end := l.LogStartOffset(), l.LogEndOffset()
					to := start + rng.Int64N(end-start+1)
					what = fmt.Sprint("truncate to ", to)
					if err := l.TruncateTo(to); err != nil {
						t.Fatal(err)
					}
					clear(last)
				case r < 85:
					l.SetHighWatermark(l.LogEndOffset())
					start, end := l.LogStartOffset(), l.LogEndOffset()
					to := start + rng.Int64N(end-start+1)
					what = fmt.Sprint("delete records before ", to)
					if err := l.IncrementLogStartOffset(to); err != nil {
						t.Fatal(err)
					}
					if _, err := l.DeleteOldSegments(); err != nil {
						t.Fatal(err)
					}
				case r < 90:
					what = "clean reopen"
					closeTolerant(t, l)
					l = open(l.Dir(), true, l.LogStartOffset())
				case r < 95:
					what = "crash reopen"
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
					dst := filepath.Join(t.TempDir(), filepath.Base(l.Dir()))
					copyDir(t, l.Dir(), dst)
					l = open(dst, false, l.LogStartOffset())
				default:
					snaps := snapshotOffsets(t, l.Dir())
					if len(snaps) == 0 {
						continue
					}
					off := snaps[rng.IntN(len(snaps))]
					what = fmt.Sprint("corrupt snapshot ", off, " and reopen")
					dir := l.Dir()
					start := l.LogStartOffset()
					closeTolerant(t, l)
					if err := os.WriteFile(producerSnapshotPath(dir, off), []byte{1, 2, 3}, 0o644); err != nil {
						t.Fatal(err)
					}
					l = open(dir, true, start)
				}
				checkProducerStateInvariants(t, l, fmt.Sprintf("op %d (%s)", op, what))
			}
		})
	}
}

// checkProducerStateInvariants compares the state with a full scan (each
// producer's remembered batches restricted to those at or above the log
// start offset: batches DeleteRecords cut in the live window stay in it,
// harmlessly, but a scan cannot see them) and checks the snapshots' range.
func checkProducerStateInvariants(t *testing.T, l *Log, when string) {
	t.Helper()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	trim := func(ps []ProducerState) []ProducerState {
		for i := range ps {
			b := ps[i].Batches[:0:0]
			for _, x := range ps[i].Batches {
				if x.LastOffset >= start {
					b = append(b, x)
				}
			}
			ps[i].Batches = b
		}
		return ps
	}
	got, want := trim(l.ActiveProducers()), trim(fullScanState(t, l))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: producer state differs from a full scan:\n got  %+v\n want %+v", when, got, want)
	}
	snaps := snapshotOffsets(t, l.Dir())
	if len(snaps) > producerSnapshotsKept+1 {
		t.Fatalf("%s: %d snapshots: %v", when, len(snaps), snaps)
	}
	for _, off := range snaps {
		if off < start || off > end {
			t.Fatalf("%s: snapshot %d outside [%d, %d]", when, off, start, end)
		}
	}
}

// closeTolerant closes l, tolerating one known storage defect outside the
// producer state: two deleted segments of the same base offset (a segment
// truncated away, then its successor at the same offset) share their
// "*.deleted" file names, so reaping the second finds its files gone.
func closeTolerant(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}
