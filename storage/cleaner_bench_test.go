package storage

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Log cleaner throughput against a plain copy of the same segment bytes:
//
//	go test -run '^$' -bench Cleaner -benchtime 3x ./storage/
//
// The log holds 1M records over 10k distinct keys (100 overwrites each) in
// batches of 100 records of 40-byte values, in 16 MiB segments; a pass
// reads every cleanable segment twice (offset map, then rewrite) and
// writes and fsyncs what survives, ~1% of it. "copy" reads the same
// segment files once and writes and fsyncs all of them.

const (
	benchCleanRecords   = 1_000_000
	benchCleanKeys      = 10_000
	benchCleanBatchSize = 100
)

// buildCleanerBenchLog writes the benchmark's log into a template
// directory and returns it, closed, with its size in bytes.
func buildCleanerBenchLog(b *testing.B, c record.Compression) (string, int64) {
	b.Helper()
	dir := filepath.Join(benchDir(b), "bench-0")
	clock := newFakeClock()
	cfg := compactConfig()
	cfg.SegmentBytes = 16 << 20
	cfg.IndexIntervalBytes = 4096
	l, err := OpenLog(dir, OpenOptions{Config: cfg, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	bb := record.NewBatchBuilder(opts)
	value := make([]byte, 40)
	for i := 0; i < benchCleanRecords; i += benchCleanBatchSize {
		bb.Reset(opts)
		for j := i; j < i+benchCleanBatchSize; j++ {
			copy(value, fmt.Sprintf("value-%012d", j))
			bb.Append(testEpochMs, fmt.Appendf(nil, "key-%06d", j%benchCleanKeys), value, nil)
		}
		batch, err := bb.Build(nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.AppendAsLeader(batch, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	size := l.Size()
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, size
}

func BenchmarkCleaner(b *testing.B) {
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionLZ4} {
		template, size := buildCleanerBenchLog(b, c)
		b.Run(fmt.Sprintf("clean/%s", c), func(b *testing.B) {
			b.SetBytes(size)
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(benchDir(b), "bench-0")
				copyDir(b, template, dir)
				l, err := OpenLog(dir, OpenOptions{Config: compactConfig(), CleanShutdown: true, HighWatermark: 1 << 62, RecoveryPoint: 1 << 62})
				if err != nil {
					b.Fatal(err)
				}
				l.SetHighWatermark(l.LogEndOffset())
				p, ok := l.planClean(0)
				if !ok {
					b.Fatal("nothing cleanable")
				}
				b.StartTimer()
				start := time.Now()
				stats, err := l.clean(p, 0, nil)
				elapsed += time.Since(start)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if stats.RecordsRead != benchCleanRecords || stats.RecordsKept != benchCleanKeys {
					b.Fatalf("read %d records, kept %d; want %d and %d", stats.RecordsRead, stats.RecordsKept, benchCleanRecords, benchCleanKeys)
				}
				l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchCleanRecords)*float64(b.N)/elapsed.Seconds(), "records/s")
		})
		b.Run(fmt.Sprintf("copy/%s", c), func(b *testing.B) {
			b.SetBytes(size)
			logs, err := filepath.Glob(filepath.Join(template, "*"+logSuffix))
			if err != nil {
				b.Fatal(err)
			}
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dst := benchDir(b)
				b.StartTimer()
				start := time.Now()
				for _, src := range logs {
					if err := copyFileSynced(src, filepath.Join(dst, filepath.Base(src))); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(benchCleanRecords)*float64(b.N)/elapsed.Seconds(), "records/s")
		})
	}
}

// copyFileSynced copies src to dst through a 1 MiB buffer and fsyncs it,
// the I/O a cleaner that kept everything would do.
func copyFileSynced(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, make([]byte, cleanerIOBufferBytes)); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
