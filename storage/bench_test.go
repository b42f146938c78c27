package storage

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// End-to-end throughput of the partition log against the plain file and
// socket operations underneath it. Compare the pairs:
//
//	go test -run '^$' -bench 'Append|Read' -benchtime 2s -count 3 ./storage/
//
// Files go to b.TempDir(), or under $KEEL_BENCH_DIR (e.g. /dev/shm, to take
// the disk's writeback speed out of the comparison).

// benchDir is a fresh directory for one log or file, removed at the end.
func benchDir(b *testing.B) string {
	b.Helper()
	root := os.Getenv("KEEL_BENCH_DIR")
	if root == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "keel-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// bench16KiBBatch is an uncompressed producer batch of 100-byte records,
// just under 16 KiB.
func bench16KiBBatch(b *testing.B) []byte {
	b.Helper()
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte(i)
	}
	// Current timestamps: segment.ms counts from the first batch's, and a
	// days-old one would roll (and fsync) on every append.
	now := time.Now().UnixMilli()
	for i := 0; bb.UncompressedSize() < 16<<10-130; i++ {
		bb.Append(now+int64(i), nil, value, nil)
	}
	out, err := bb.Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// benchRotateBytes bounds the disk a run uses: both benchmarks start a new
// file (outside the timer) after this much. It also keeps the log's segment
// within the 2 GiB its 4-byte index positions can address.
const benchRotateBytes = 1 << 30

func BenchmarkAppend(b *testing.B) {
	batch := bench16KiBBatch(b)
	// log: what a broker does per produced batch: validation (every record
	// decoded, CRC checked) and the append (offsets, write, index).
	b.Run("log", func(b *testing.B) {
		benchAppendLoop(b, batch, openBenchLog(b, func(l *Log, buf []byte) error {
			_, err := l.AppendAsLeader(buf, AppendOptions{})
			return err
		}))
	})
	// log-append-only: the storage engine's own share, the batch validated
	// once per log up front. AppendValidated rewrites only the base offset
	// and leader epoch (outside the CRC), so the token stays valid as the
	// same buffer is appended again and again.
	appendOnly := func(b *testing.B, writeback int64, preallocate bool, dropBehind int64) {
		var v ValidatedBatches
		var validatedFor *Log
		benchAppendLoop(b, batch, openBenchLogWith(b, writeback, preallocate, dropBehind, func(l *Log, buf []byte) error {
			if validatedFor != l {
				var err error
				if v, err = l.ValidateProduce(buf, false); err != nil {
					return err
				}
				validatedFor = l
			}
			_, err := l.AppendValidated(v, AppendOptions{})
			return err
		}))
	}
	b.Run("log-append-only", func(b *testing.B) { appendOnly(b, 0, false, 0) })
	// ...into a segment preallocated (preallocate=true): the writes fill
	// reserved blocks instead of growing the file.
	b.Run("log-append-only-preallocated", func(b *testing.B) { appendOnly(b, 0, true, 0) })
	// ...handing every MiB to the kernel's writeback (keel.log.writeback.bytes,
	// the broker's default): the cost moves from the kernel's flusher
	// threads into the appender.
	b.Run("log-append-only-writeback-1MiB", func(b *testing.B) { appendOnly(b, 1<<20, false, 0) })
	// ...and dropping the pages 64 MiB behind from the page cache
	// (keel.log.cache.drop.behind.bytes): past the first 64 MiB, appends
	// write into pages the cache just gave back instead of new ones. Run
	// it for a GiB (-benchtime 65536x) to see what that is worth on a VM
	// whose host takes back free guest memory.
	b.Run("log-append-only-writeback-1MiB-drop-behind-64MiB", func(b *testing.B) { appendOnly(b, 1<<20, false, 64<<20) })
	b.Run("os-file-write-baseline", func(b *testing.B) { benchFileWriteBaseline(b, batch) })
}

// benchFileWriteBaseline is the append benchmarks' baseline: the same
// bytes written to a plain file with os.File.Write.
func benchFileWriteBaseline(b *testing.B, batch []byte) {
	benchAppendLoop(b, batch, func() (func([]byte) error, func()) {
		path := filepath.Join(benchDir(b), "baseline.log")
		os.Remove(path)
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		return func(buf []byte) error { _, err := f.Write(buf); return err }, func() { f.Close() }
	})
}

// loopbackSink is a TCP connection whose far end discards and counts what
// it receives.
type loopbackSink struct {
	conn     *net.TCPConn
	received atomic.Int64
	done     chan struct{}
}

func newLoopbackSink(b *testing.B) *loopbackSink {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	s := &loopbackSink{done: make(chan struct{})}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	peer, ok := <-accepted
	if !ok {
		b.Fatal("accept failed")
	}
	s.conn = conn.(*net.TCPConn)
	go func() {
		defer close(s.done)
		defer peer.Close()
		buf := make([]byte, 256<<10)
		for {
			n, err := peer.Read(buf)
			s.received.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	return s
}

// drain waits until the far end has received total bytes.
func (s *loopbackSink) drain(total int64) {
	for s.received.Load() < total {
		runtime.Gosched()
	}
}

func (s *loopbackSink) close() {
	s.conn.Close()
	<-s.done
}

func BenchmarkRead(b *testing.B) {
	const logBytes = 32 << 20
	batch := bench16KiBBatch(b)
	l, err := OpenLog(filepath.Join(benchDir(b), "bench-0"), OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	buf := make([]byte, len(batch))
	for l.Size() < logBytes {
		copy(buf, batch)
		if _, err := l.AppendAsLeader(buf, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	leo, size := l.LogEndOffset(), l.Size()
	h, err := record.ParseHeader(batch)
	if err != nil {
		b.Fatal(err)
	}
	perBatch := int64(h.RecordCount)
	segment := segmentLogPaths(b, l.Dir())[0]

	b.Run("regions-to-tcp-sendfile", func(b *testing.B) {
		sink := newLoopbackSink(b)
		defer sink.close()
		b.SetBytes(size)
		b.ReportAllocs()
		var sent int64
		for b.Loop() {
			// A consumer fetching the whole log, 1 MiB per fetch.
			for off := int64(0); off < leo; {
				info, err := l.Read(off, 1<<20, leo, true)
				if err != nil {
					b.Fatal(err)
				}
				n, err := WriteRegions(sink.conn, info.Regions)
				if err != nil {
					b.Fatal(err)
				}
				sent += n
				// Every batch is a copy of one: no need to parse what was sent.
				off += info.Bytes / int64(len(batch)) * perBatch
			}
		}
		sink.drain(sent)
	})
	b.Run("iocopy-baseline", func(b *testing.B) {
		sink := newLoopbackSink(b)
		defer sink.close()
		f, err := os.Open(segment)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(size)
		b.ReportAllocs()
		var sent int64
		for b.Loop() {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(sink.conn, f)
			if err != nil || n != size {
				b.Fatalf("copied %d of %d bytes: %v", n, size, err)
			}
			sent += n
		}
		sink.drain(sent)
	})
}

// openBenchLog returns an opener for benchAppendLoop: a fresh log (the
// previous one removed), appended to through appendFn.
func openBenchLog(b *testing.B, appendFn func(*Log, []byte) error) func() (func([]byte) error, func()) {
	return openBenchLogWith(b, 0, false, 0, appendFn)
}

// openBenchLogWith is openBenchLog with OpenOptions.WritebackBytes.
func openBenchLogWith(b *testing.B, writeback int64, preallocate bool, dropBehind int64, appendFn func(*Log, []byte) error) func() (func([]byte) error, func()) {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = benchRotateBytes + 1<<20 // never rolls inside the timer
	cfg.Preallocate = preallocate
	return func() (func([]byte) error, func()) {
		dir := filepath.Join(benchDir(b), "bench-0")
		os.RemoveAll(dir)
		l, err := OpenLog(dir, OpenOptions{Config: cfg, WritebackBytes: writeback, DropBehindBytes: dropBehind})
		if err != nil {
			b.Fatal(err)
		}
		return func(buf []byte) error { return appendFn(l, buf) }, func() { l.Close() }
	}
}

// benchAppendLoop writes batch over and over to what open returns,
// replacing it every benchRotateBytes outside the timer so the disk never
// fills. Every variant pays for copying the batch (a log rewrites offsets
// in place).
func benchAppendLoop(b *testing.B, batch []byte, open func() (write func([]byte) error, closeFn func())) {
	write, closeFn := open()
	defer func() { closeFn() }()
	buf := make([]byte, len(batch))
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	var written int64
	for b.Loop() {
		if written += int64(len(batch)); written > benchRotateBytes {
			b.StopTimer()
			closeFn()
			write, closeFn = open()
			written = int64(len(batch))
			b.StartTimer()
		}
		copy(buf, batch)
		if err := write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendRoll is a producer at full speed across segment rolls:
// 16 KiB batches (validated and appended) into a log whose segments roll
// every 64 MiB. Besides the mean it reports the mean and the slowest of the
// appends that rolled a segment: a roll's fsync of the rolled segment used
// to run under the log lock (100-120 ms per 64 MiB segment on the
// development VM, every append and read of the partition waiting) and now
// runs in the background. The baseline is the same loop into a plain file.
func BenchmarkAppendRoll(b *testing.B) {
	batch := bench16KiBBatch(b)
	b.Run("log-64MiB-segments", func(b *testing.B) {
		cfg := DefaultLogConfig()
		cfg.SegmentBytes = 64 << 20
		var rolls []time.Duration
		benchAppendLoop(b, batch, func() (func([]byte) error, func()) {
			dir := filepath.Join(benchDir(b), "bench-0")
			os.RemoveAll(dir)
			l, err := OpenLog(dir, OpenOptions{Config: cfg})
			if err != nil {
				b.Fatal(err)
			}
			return func(buf []byte) error {
				before := l.NumSegments()
				start := time.Now()
				_, err := l.AppendAsLeader(buf, AppendOptions{})
				if l.NumSegments() != before {
					rolls = append(rolls, time.Since(start))
				}
				return err
			}, func() { l.Close() }
		})
		if len(rolls) > 0 {
			var sum time.Duration
			for _, d := range rolls {
				sum += d
			}
			b.ReportMetric(float64(len(rolls)), "rolls")
			b.ReportMetric(float64(sum.Microseconds())/float64(len(rolls)), "roll-mean-µs")
			b.ReportMetric(float64(slices.Max(rolls).Microseconds()), "roll-max-µs")
		}
	})
	b.Run("os-file-write-baseline", func(b *testing.B) { benchFileWriteBaseline(b, batch) })
}

// BenchmarkTailRead is a consumer (or follower) at the log end: each
// iteration appends one small batch (one 100-byte record, as a producer with
// linger.ms=0 sends) and reads from its offset, as the fetch woken by that
// append does. The baseline appends alone, so the difference is the read;
// the read finds the batch among the headers the segment remembers instead
// of preading every header from the last index entry on.
func BenchmarkTailRead(b *testing.B) {
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	bb.Append(time.Now().UnixMilli(), nil, make([]byte, 100), nil)
	batch, err := bb.Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, read bool) {
		cfg := DefaultLogConfig()
		cfg.SegmentBytes = benchRotateBytes
		l, err := OpenLog(filepath.Join(benchDir(b), "bench-0"), OpenOptions{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		buf := make([]byte, len(batch))
		b.ReportAllocs()
		for b.Loop() {
			copy(buf, batch)
			info, err := l.AppendAsLeader(buf, AppendOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if read {
				r, err := l.Read(info.FirstOffset, 1<<20, info.LastOffset+1, true)
				if err != nil || r.Bytes != int64(len(batch)) {
					b.Fatalf("read %d bytes at %d: %v", r.Bytes, info.FirstOffset, err)
				}
			}
		}
	}
	b.Run("append-baseline", func(b *testing.B) { run(b, false) })
	b.Run("append-then-tail-read", func(b *testing.B) { run(b, true) })
}

// BenchmarkIncrementLogStartOffset is DeleteRecords (as Kafka Streams sends
// for its repartition topics) moving the log start one batch at a time:
// each call moves the leader-epoch cache's first entry, under the log's
// lock. Appends to the partition wait for it.
func BenchmarkIncrementLogStartOffset(b *testing.B) {
	l := openTestLog(b, filepath.Join(benchDir(b), "t-0"), OpenOptions{})
	const batches = 4096
	batch := buildBatch(b, record.CompressionNone, tsRange(testEpochMs, 1), 10)
	for i := 0; i < batches; i++ {
		appendOK(b, l, slices.Clone(batch), 1)
	}
	l.SetHighWatermark(l.LogEndOffset())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.IncrementLogStartOffset(int64(i%(batches-1)) + 1); err != nil {
			b.Fatal(err)
		}
		if i%(batches-1) == batches-2 {
			b.StopTimer()
			l.Close()
			l = openTestLog(b, filepath.Join(benchDir(b), "t-0"), OpenOptions{})
			for j := 0; j < batches; j++ {
				appendOK(b, l, slices.Clone(batch), 1)
			}
			l.SetHighWatermark(l.LogEndOffset())
			b.StartTimer()
		}
	}
}

// BenchmarkFirstIndexEntry is the first entry of a new segment's indexes
// (segment.index.bytes, 10 MiB preallocated and sparse), appended as the
// log does once index.interval.bytes of records follow the segment's
// start: ns/op is that entry's offset and time index writes, the page
// faults included. The baseline writes the same 20 bytes into a new file
// with pwrite(2).
func BenchmarkFirstIndexEntry(b *testing.B) {
	const indexBytes = 10 << 20
	b.Run("index-pair", func(b *testing.B) {
		dir := benchDir(b)
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			x, err := OpenOffsetIndex(filepath.Join(dir, segmentFileName(int64(i), indexSuffix)), int64(i), indexBytes)
			if err != nil {
				b.Fatal(err)
			}
			ti, err := OpenTimeIndex(filepath.Join(dir, segmentFileName(int64(i), timeIndexSuffix)), int64(i), indexBytes)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := x.Append(int64(i)+30, 4096); err != nil {
				b.Fatal(err)
			}
			if err := ti.MaybeAppend(1000, int64(i)+30); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			for _, m := range []*mmapIndex{&x.mmapIndex, &ti.mmapIndex} {
				m.Discard()
				os.Remove(m.Path())
			}
			b.StartTimer()
		}
	})
	b.Run("pwrite-baseline", func(b *testing.B) {
		dir := benchDir(b)
		entry := make([]byte, offsetIndexEntrySize+timeIndexEntrySize)
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			path := filepath.Join(dir, segmentFileName(int64(i), indexSuffix))
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := f.WriteAt(entry, 0); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			f.Close()
			os.Remove(path)
			b.StartTimer()
		}
	})
}
