package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func buildTestBatch(t testing.TB, opts BatchOptions, n int) []byte {
	t.Helper()
	b := NewBatchBuilder(opts)
	for i := 0; i < n; i++ {
		var key []byte
		if i%3 != 0 {
			key = []byte{byte('k'), byte(i)}
		}
		b.Append(int64(1_700_000_000_000+i*10), key, bytes.Repeat([]byte{byte(i)}, 10+i%7),
			[]RecordHeader{{Key: "h", Value: []byte{byte(i)}}, {Key: "null", Value: nil}})
	}
	out, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBuiltBatchParsesAndValidates(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		t.Run(c.String(), func(t *testing.T) {
			opts := DefaultBatchOptions()
			opts.Compression = c
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 2, 100
			batch := buildTestBatch(t, opts, 25)
			h, err := CheckBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			if h.RecordCount != 25 || h.LastOffsetDelta != 24 || h.Compression() != c {
				t.Fatalf("header %+v", h)
			}
			if h.BaseTimestamp != 1_700_000_000_000 || h.MaxTimestamp != 1_700_000_000_240 {
				t.Fatalf("timestamps %d %d", h.BaseTimestamp, h.MaxTimestamp)
			}
			if h.ProducerID != 7 || h.ProducerEpoch != 2 || h.BaseSequence != 100 || h.LastSequence() != 124 {
				t.Fatalf("producer fields %+v", h)
			}
			stats, _, err := ValidateRecords(batch, h, nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if stats.MaxTimestamp != h.MaxTimestamp {
				t.Fatalf("stats max timestamp %d, header %d", stats.MaxTimestamp, h.MaxTimestamp)
			}
			records := RecordsBytes(batch)
			if c != CompressionNone {
				if records, err = Decompress(c, nil, records, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			SetBaseOffset(batch, 1000)
			h, _ = ParseHeader(batch)
			it := NewRecordIterator(h, records)
			var r Record
			i := 0
			for it.Next(&r) {
				if r.Offset != int64(1000+i) || r.Timestamp != int64(1_700_000_000_000+i*10) {
					t.Fatalf("record %d offset %d ts %d", i, r.Offset, r.Timestamp)
				}
				if (i%3 == 0) != (r.Key == nil) {
					t.Fatalf("record %d key %v", i, r.Key)
				}
				if len(r.Headers) != 2 || r.Headers[0].Key != "h" || r.Headers[1].Value != nil {
					t.Fatalf("record %d headers %+v", i, r.Headers)
				}
				i++
			}
			if it.Err() != nil || i != 25 {
				t.Fatalf("iterated %d records, err %v", i, it.Err())
			}
		})
	}
}

// The batch our builder writes must be exactly what kmsg (generated from
// Kafka's own message definitions) reads, and the other way round.
func TestBatchInteroperatesWithKmsg(t *testing.T) {
	batch := buildTestBatch(t, DefaultBatchOptions(), 5)
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(batch); err != nil {
		t.Fatal(err)
	}
	if kb.NumRecords != 5 || uint32(kb.CRC) != crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("kmsg read %+v", kb)
	}
	// Re-encode records with kmsg and check byte equality with ours.
	var recs []byte
	rest := kb.Records
	for i := 0; i < 5; i++ {
		var kr kmsg.Record
		body, next, err := splitRecord(rest)
		if err != nil {
			t.Fatal(err)
		}
		whole := rest[:len(rest)-len(next)]
		if err := kr.ReadFrom(whole); err != nil {
			t.Fatal(err)
		}
		_ = body
		recs = kr.AppendTo(recs)
		rest = next
	}
	if !bytes.Equal(recs, kb.Records) {
		t.Fatal("kmsg re-encoding of our records differs")
	}
	if again := kb.AppendTo(nil); !bytes.Equal(again, batch) {
		t.Fatal("kmsg re-encoding of our batch differs")
	}

	// A kmsg-built batch parses and validates here.
	kr := kmsg.Record{Key: []byte("k"), Value: []byte("v"), OffsetDelta: 0}
	kr.Length = int32(len(kr.AppendTo(nil)) - 1)
	kb2 := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: 0, FirstTimestamp: 5, MaxTimestamp: 5,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: kr.AppendTo(nil)}
	raw := kb2.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], ComputeCRC(raw))
	h, err := CheckBatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ValidateRecords(raw, h, nil, 1<<20); err != nil {
		t.Fatal(err)
	}
}

func TestCheckBatchRejects(t *testing.T) {
	good := buildTestBatch(t, DefaultBatchOptions(), 3)
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		want   error
	}{
		{"flipped record byte fails the CRC", func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b }, ErrCorruptMessage},
		{"flipped attribute fails the CRC", func(b []byte) []byte { b[offAttributes+1] ^= 0x01; return b }, ErrCorruptMessage},
		{"magic 1 is unsupported", func(b []byte) []byte { b[offMagic] = 1; return b }, ErrUnsupportedMagic},
		{"length longer than the bytes", func(b []byte) []byte { return b[:len(b)-1] }, ErrCorruptMessage},
		{"length below a header", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 10)
			return b
		}, ErrCorruptMessage},
		{"short buffer", func(b []byte) []byte { return b[:40] }, ErrShortBuffer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(append([]byte(nil), good...))
			if _, err := CheckBatch(b); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestValidateRecordsRejectsInconsistentBatches(t *testing.T) {
	recount := func(b []byte, count, lastDelta int32) []byte {
		binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
		binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
		binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
		return b
	}
	good := buildTestBatch(t, DefaultBatchOptions(), 4)
	cases := []struct {
		name   string
		mutate func([]byte) []byte
	}{
		{"record count above the records", func(b []byte) []byte { return recount(b, 5, 4) }},
		{"record count below the records", func(b []byte) []byte { return recount(b, 3, 2) }},
		{"last offset delta disagrees with count", func(b []byte) []byte { return recount(b, 4, 7) }},
		{"zero records", func(b []byte) []byte { return recount(b, 0, 0) }},
		{"trailing garbage after records", func(b []byte) []byte {
			b = append(b, 1, 2, 3)
			binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
			binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
			return b
		}},
		{"record length past the batch", func(b []byte) []byte {
			b[HeaderSize] = 0x7e // length varint 63: longer than the first record
			binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
			return b
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(append([]byte(nil), good...))
			h, err := CheckBatch(b)
			if err != nil {
				t.Fatalf("framing should pass: %v", err)
			}
			if _, _, err := ValidateRecords(b, h, nil, 1<<20); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("got %v, want ErrInvalidRecord", err)
			}
		})
	}
}

func TestOffsetRewriteLeavesCRCValid(t *testing.T) {
	b := buildTestBatch(t, DefaultBatchOptions(), 3)
	SetBaseOffset(b, 1<<40)
	SetPartitionLeaderEpoch(b, 9)
	h, err := CheckBatch(b)
	if err != nil {
		t.Fatalf("base offset and leader epoch are outside the CRC: %v", err)
	}
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 9 || h.NextOffset() != 1<<40+3 {
		t.Fatalf("header %+v", h)
	}
	SetLogAppendTime(b, 42)
	h, err = CheckBatch(b)
	if err != nil {
		t.Fatalf("LogAppendTime must recompute the CRC: %v", err)
	}
	if h.TimestampType() != LogAppendTime || h.MaxTimestamp != 42 {
		t.Fatalf("header %+v", h)
	}
	it := NewRecordIterator(h, RecordsBytes(b))
	var r Record
	for it.Next(&r) {
		if r.Timestamp != 42 {
			t.Fatalf("LogAppendTime record timestamp %d", r.Timestamp)
		}
	}
}

func TestBatchesIteratesAndStopsAtPartialTail(t *testing.T) {
	var buf []byte
	for i := 0; i < 3; i++ {
		b := buildTestBatch(t, DefaultBatchOptions(), 2)
		SetBaseOffset(b, int64(i*2))
		buf = append(buf, b...)
	}
	full := len(buf)
	buf = append(buf, buf[:30]...) // a batch cut short, as a fetch may return
	it := NewBatches(buf)
	n := 0
	for _, h, ok := it.Next(); ok; _, h, ok = it.Next() {
		if h.BaseOffset != int64(n*2) {
			t.Fatalf("batch %d base %d", n, h.BaseOffset)
		}
		n++
	}
	if it.Err() != nil || n != 3 {
		t.Fatalf("n=%d err=%v (full=%d)", n, it.Err(), full)
	}
}

func TestControlBatch(t *testing.T) {
	b, err := BuildControlBatch(nil, ControlCommit, 3, 55, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	h, err := CheckBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 55 {
		t.Fatalf("header %+v", h)
	}
	it := NewRecordIterator(h, RecordsBytes(b))
	var r Record
	if !it.Next(&r) {
		t.Fatal(it.Err())
	}
	typ, err := ParseControlRecord(r.Key)
	if err != nil || typ != ControlCommit {
		t.Fatalf("control type %d err %v", typ, err)
	}
}

func TestIncrementSequenceWraps(t *testing.T) {
	if got := IncrementSequence(1<<31-1, 1); got != 0 {
		t.Fatalf("got %d", got)
	}
	if got := IncrementSequence(1<<31-3, 5); got != 2 {
		t.Fatalf("got %d", got)
	}
	if got := IncrementSequence(10, 5); got != 15 {
		t.Fatalf("got %d", got)
	}
}

func TestParseHeaderDoesNotAllocate(t *testing.T) {
	b := buildTestBatch(t, DefaultBatchOptions(), 10)
	allocs := testing.AllocsPerRun(100, func() {
		h, err := CheckBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ValidateRecords(b, h, nil, 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per validation", allocs)
	}
}

func BenchmarkValidateBatch(b *testing.B) {
	bb := NewBatchBuilder(DefaultBatchOptions())
	val := bytes.Repeat([]byte("x"), 100)
	for bb.UncompressedSize() < 16<<10 {
		bb.Append(1, nil, val, nil)
	}
	batch, _ := bb.Build(nil)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		h, err := CheckBatch(batch)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := ValidateRecords(batch, h, nil, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(buildTestBatch(f, DefaultBatchOptions(), 3))
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := CheckBatch(b)
		if err == nil && h.Size() != len(b) {
			t.Fatalf("accepted batch of size %d in %d bytes", h.Size(), len(b))
		}
		_, _ = PeekBatchSize(b)
		it := NewBatches(b)
		for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
		}
	})
}

func FuzzRecords(f *testing.F) {
	for _, c := range []Compression{CompressionNone, CompressionGzip} {
		opts := DefaultBatchOptions()
		opts.Compression = c
		f.Add(buildTestBatch(f, opts, 4))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Fix up framing so the fuzzer explores the records, not the CRC.
		if len(b) < HeaderSize {
			return
		}
		binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
		b[offMagic] = MagicV2
		binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
		h, err := CheckBatch(b)
		if err != nil {
			return
		}
		if _, _, err := ValidateRecords(b, h, nil, 1<<20); err != nil {
			return
		}
		if h.Compression() != CompressionNone {
			return
		}
		it := NewRecordIterator(h, RecordsBytes(b))
		var r Record
		n := 0
		for it.Next(&r) {
			n++
		}
		if it.Err() != nil || n != int(h.RecordCount) {
			t.Fatalf("validated batch iterates %d of %d records: %v", n, h.RecordCount, it.Err())
		}
	})
}

// varint's short cuts agree with binary.Varint on every input of up to two
// bytes, and followed by a third byte of each kind.
func TestVarintMatchesBinaryVarint(t *testing.T) {
	check := func(b []byte) {
		v, n := varint(b)
		wv, wn := binary.Varint(b)
		if v != wv || n != wn {
			t.Fatalf("varint(%x) = %d, %d; binary.Varint: %d, %d", b, v, n, wv, wn)
		}
	}
	check(nil)
	for i := range 1 << 16 {
		for _, third := range []byte{0, 1, 0x7f, 0x80, 0xff} {
			b := []byte{byte(i), byte(i >> 8), third}
			check(b[:1])
			check(b[:2])
			check(b)
		}
	}
}

// skimRecord, validation's fast path, agrees with the careful decoder
// whenever it accepts a record: same deltas, null key and size. (When it
// does not, the careful decoder runs anyway.)
func FuzzSkimRecord(f *testing.F) {
	bb := NewBatchBuilder(DefaultBatchOptions())
	bb.Append(1000, nil, []byte("value"), nil)
	bb.Append(999, []byte("key"), nil, []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "", Value: nil}})
	bb.Append(5000, []byte("k"), bytes.Repeat([]byte{'x'}, 300), nil)
	bb.Append(1001, []byte{}, []byte{}, nil)
	batch, err := bb.Build(nil)
	if err != nil {
		f.Fatal(err)
	}
	for rest := RecordsBytes(batch); len(rest) > 0; {
		_, next, err := splitRecord(rest)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rest[:len(rest)-len(next)])
		rest = next
	}
	f.Add([]byte{0x02, 0x00})                   // length 1: attributes only
	f.Add([]byte{0x0e, 0, 0, 0, 1, 1, 0, 0x02}) // a null key, then a cut
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, off, nullKey, size, ok := skimRecord(b)
		if !ok {
			return
		}
		body, rest, err := splitRecord(b)
		if err != nil {
			t.Fatalf("skimRecord accepted %x, splitRecord: %v", b, err)
		}
		var r Record
		if err := decodeRecord(body, &r, false); err != nil {
			t.Fatalf("skimRecord accepted %x, decodeRecord: %v", b, err)
		}
		if ts != r.TimestampDelta || off != int64(r.OffsetDelta) || nullKey != (r.Key == nil) || size != len(b)-len(rest) {
			t.Fatalf("%x: skim (%d, %d, %t, %d), careful (%d, %d, %t, %d)", b, ts, off, nullKey, size,
				r.TimestampDelta, r.OffsetDelta, r.Key == nil, len(b)-len(rest))
		}
	})
}

// The records producers send take validation's fast path: a batch of
// ordinary records never falls back to the careful decoder.
func TestSkimRecordTakesOrdinaryRecords(t *testing.T) {
	bb := NewBatchBuilder(DefaultBatchOptions())
	for i := range 100 {
		bb.Append(int64(1000+i), []byte(fmt.Sprint("key-", i)), bytes.Repeat([]byte{'v'}, 100+i*50),
			[]RecordHeader{{Key: "trace", Value: []byte("abc")}})
	}
	batch, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	rest := RecordsBytes(batch)
	for i := range 100 {
		ts, off, nullKey, size, ok := skimRecord(rest)
		if !ok || ts != int64(i) || off != int64(i) || nullKey {
			t.Fatalf("record %d (value %d bytes): skim (%d, %d, %t, %d, %t)", i, 100+i*50, ts, off, nullKey, size, ok)
		}
		rest = rest[size:]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
}

// BenchmarkValidateCompressed validates producer-shaped batches (about
// 1,300 records of 100 random letters, null keys, ~128 KiB uncompressed, as
// kgo fills them under load) in each codec: the produce path's cost per
// batch, decompression included (ns/record reported).
func BenchmarkValidateCompressed(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	val := make([]byte, 100)
	for _, c := range allCodecs {
		opts := DefaultBatchOptions()
		opts.Compression = c
		bb := NewBatchBuilder(opts)
		for bb.UncompressedSize() < 128<<10 {
			for i := range val {
				val[i] = 'a' + byte(rng.IntN(26))
			}
			bb.Append(1_700_000_000_000, nil, val, nil)
		}
		batch, err := bb.Build(nil)
		if err != nil {
			b.Fatal(err)
		}
		h, err := CheckBatch(batch)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(bb.UncompressedSize()))
			b.ReportAllocs()
			var scratch []byte
			for b.Loop() {
				var err error
				if _, scratch, err = ValidateRecords(batch, h, scratch, 64<<20); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(h.RecordCount), "ns/record")
		})
	}
}
