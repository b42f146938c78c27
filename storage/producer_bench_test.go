package storage

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/keelstream/keel/network/record"
)

// BenchmarkLoadProducerState: rebuilding a partition's idempotent producer
// state (what opening the log does) on a log of 200,000 batches of 1,000
// producers in turn, in 1 MiB segments: from the snapshot Close wrote at
// the log end offset (a clean shutdown); from the newest roll's snapshot
// plus a scan of the active segment's batch headers (a crash); and from
// nothing, scanning every batch header (what the broker did on the first
// idempotent produce before snapshots). Run it with
//
//	go test -run '^$' -bench LoadProducerState -benchtime 5x ./storage/
func BenchmarkLoadProducerState(b *testing.B) {
	const batches, producers = 200_000, 1000
	dir := filepath.Join(benchDir(b), "bench-0")
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 1 << 20
	l, err := OpenLog(dir, OpenOptions{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 0, 0, 0
	bb := record.NewBatchBuilder(opts)
	bb.Append(testEpochMs, nil, []byte("value"), nil)
	template, err := bb.Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]byte, len(template))
	for i := 0; i < batches; i++ {
		copy(batch, template)
		record.SetProducerFields(batch, int64(i%producers), 0, int32(i/producers))
		if _, err := l.AppendAsLeader(batch, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	l.mu.Lock()
	leo := l.active().nextOffset
	l.takeProducerSnapshotLocked(leo, true)
	all := slices.Clone(l.producerSnapshots)
	want := l.producers.describe()
	l.mu.Unlock()
	cases := []struct {
		name      string
		snapshots []int64
	}{
		{"snapshot-at-log-end", all},
		{"snapshot-at-last-roll", all[:len(all)-1]},
		{"full-scan", nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var n int64
			for i := 0; i < b.N; i++ {
				l.mu.Lock()
				l.producerSnapshots = slices.Clone(c.snapshots)
				before := l.producerBatchesScanned
				err := l.rebuildProducerStateLocked(math.MaxInt64)
				n = l.producerBatchesScanned - before
				l.mu.Unlock()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(n), "batches-scanned/op")
			l.mu.Lock()
			got := l.producers.describe()
			l.producerSnapshots = slices.Clone(all)
			l.mu.Unlock()
			if len(got) != len(want) || !slices.EqualFunc(got, want, func(a, b ProducerState) bool {
				return a.ProducerID == b.ProducerID && a.LastSequence == b.LastSequence && a.LastOffset == b.LastOffset
			}) {
				b.Fatalf("rebuilt state differs from the live one")
			}
		})
	}
}
