package client

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// testLog builds a partition's worth of batches as a broker would return
// them: offsets assigned, transactional batches and their markers.
type testLog struct {
	buf  []byte
	next int64
}

func (l *testLog) batch(t testing.TB, n int, opts record.BatchOptions) {
	t.Helper()
	b := record.NewBatchBuilder(opts)
	for i := range n {
		off := l.next + int64(i)
		b.Append(1_700_000_000_000+off, fmt.Appendf(nil, "k%d", off), fmt.Appendf(nil, "v%d", off), nil)
	}
	start := len(l.buf)
	out, err := b.Build(l.buf)
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(out[start:], l.next)
	l.buf, l.next = out, l.next+int64(n)
}

func (l *testLog) marker(t *testing.T, typ record.ControlType, pid int64) {
	t.Helper()
	start := len(l.buf)
	out, err := record.BuildControlBatch(l.buf, typ, 0, pid, 0, 1_700_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(out[start:], l.next)
	l.buf, l.next = out, l.next+1
}

func txnOpts(pid int64) record.BatchOptions {
	o := record.DefaultBatchOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, 0, 0, true
	return o
}

func offsetsOf(recs []Record) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Offset)
	}
	return out
}

func TestDecodeFetchedRecords(t *testing.T) {
	var l testLog
	l.batch(t, 3, record.DefaultBatchOptions()) // 0-2
	l.batch(t, 2, txnOpts(7))                   // 3-4, aborted below
	l.batch(t, 2, txnOpts(8))                   // 5-6, committed below
	l.marker(t, record.ControlAbort, 7)         // 7
	l.marker(t, record.ControlCommit, 8)        // 8
	gz := record.DefaultBatchOptions()
	gz.Compression = record.CompressionGzip
	l.batch(t, 2, gz) // 9-10
	full := slices.Clone(l.buf)
	l.batch(t, 1, record.DefaultBatchOptions()) // 11, cut short below
	truncated := l.buf[:len(l.buf)-5]

	part := func(data []byte) *kmsg.FetchResponseTopicPartition {
		p := kmsg.NewFetchResponseTopicPartition()
		p.RecordBatches = data
		a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		a.ProducerID, a.FirstOffset = 7, 3
		p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{a}
		return &p
	}
	tests := []struct {
		name          string
		data          []byte
		fetchOffset   int64
		readCommitted bool
		want          []int64
		next          int64
	}{
		{"read_uncommitted returns every data record, no markers", full, 0, false, []int64{0, 1, 2, 3, 4, 5, 6, 9, 10}, 11},
		{"read_committed drops the aborted transaction", full, 0, true, []int64{0, 1, 2, 5, 6, 9, 10}, 11},
		{"records before the fetch offset are skipped", full, 1, false, []int64{1, 2, 3, 4, 5, 6, 9, 10}, 11},
		{"a batch cut short at the end is left for the next fetch", truncated, 9, false, []int64{9, 10}, 11},
		{"only markers: the offset still advances", full, 7, true, []int64{9, 10}, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, next, err := decodeFetchedRecords("t", part(tt.data), tt.fetchOffset, tt.readCommitted)
			if err != nil {
				t.Fatal(err)
			}
			if got := offsetsOf(recs); !slices.Equal(got, tt.want) || next != tt.next {
				t.Fatalf("offsets %v next %d, want %v next %d", got, next, tt.want, tt.next)
			}
			for _, r := range recs {
				if string(r.Value) != fmt.Sprintf("v%d", r.Offset) || r.Topic != "t" || r.Timestamp.UnixMilli() != 1_700_000_000_000+r.Offset {
					t.Fatalf("record %d: %q %q %v", r.Offset, r.Key, r.Value, r.Timestamp)
				}
			}
		})
	}

	t.Run("a corrupt batch is an error, not a panic", func(t *testing.T) {
		bad := slices.Clone(full)
		bad[len(bad)-1] ^= 0xff
		recs, _, err := decodeFetchedRecords("t", part(bad), 9, false)
		if err == nil || len(recs) != 0 {
			t.Fatalf("corrupt batch: %d records, %v", len(recs), err)
		}
	})
}

func FuzzDecodeFetchedRecords(f *testing.F) {
	var l testLog
	l.batch(f, 3, record.DefaultBatchOptions())
	f.Add(l.buf, int64(0), false)
	f.Fuzz(func(t *testing.T, data []byte, fetchOffset int64, readCommitted bool) {
		p := kmsg.NewFetchResponseTopicPartition()
		p.RecordBatches = data
		_, _, _ = decodeFetchedRecords("t", &p, fetchOffset, readCommitted)
	})
}

// BenchmarkDecodeFetchedRecords measures the consumer's per-record decode
// cost for one partition's fetch of 100-byte records in batches of 500, per
// codec: records/s and allocations per record.
func BenchmarkDecodeFetchedRecords(b *testing.B) {
	for _, codec := range []record.Compression{record.CompressionNone, record.CompressionGzip,
		record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			var buf []byte
			var next int64
			value := make([]byte, 100)
			for range 20 {
				opts := record.DefaultBatchOptions()
				opts.Compression = codec
				bb := record.NewBatchBuilder(opts)
				for i := range 500 {
					for j := range value {
						value[j] = byte(int(next)*31 + i*7 + j)
					}
					bb.Append(1_700_000_000_000, nil, value, nil)
				}
				start := len(buf)
				var err error
				if buf, err = bb.Build(buf); err != nil {
					b.Fatal(err)
				}
				record.SetBaseOffset(buf[start:], next)
				next += 500
			}
			p := kmsg.NewFetchResponseTopicPartition()
			p.RecordBatches = buf
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				recs, _, err := decodeFetchedRecords("t", &p, 0, false)
				if err != nil || len(recs) != int(next) {
					b.Fatalf("%d records, %v", len(recs), err)
				}
			}
			b.ReportMetric(float64(next)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
