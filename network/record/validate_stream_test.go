package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
)

// streamCodecs are the compressed shapes validation inflates: each codec as
// Compress writes it, and the shapes other producers write.
var streamCodecs = []struct {
	name     string
	c        Compression
	compress func(t testing.TB, records []byte) []byte
}{
	{"gzip", CompressionGzip, nil},
	{"snappy xerial", CompressionSnappy, nil},
	{"snappy raw block", CompressionSnappy, func(_ testing.TB, r []byte) []byte { return s2.EncodeSnappy(nil, r) }},
	{"lz4", CompressionLZ4, nil},
	{"zstd", CompressionZstd, nil},
	{"zstd without content size", CompressionZstd, func(t testing.TB, r []byte) []byte { return zstdStream(t, r, 1<<20) }},
}

// batchOf frames records (uncompressed record bytes) as a batch of count
// records in codec c, compressed by compress (nil: Compress).
func batchOf(t testing.TB, c Compression, compress func(testing.TB, []byte) []byte, count int32, records []byte) []byte {
	t.Helper()
	b := bytes.Clone(buildTestBatch(t, DefaultBatchOptions(), 1)[:HeaderSize])
	payload := records
	switch {
	case c == CompressionNone:
	case compress != nil:
		payload = compress(t, records)
	default:
		payload = mustCompress(t, c, records)
	}
	b = append(b, payload...)
	binary.BigEndian.PutUint16(b[offAttributes:], binary.BigEndian.Uint16(b[offAttributes:])&^7|uint16(c))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
	return b
}

// mixedRecords are the uncompressed records of a batch of n records of
// every shape: keys null or not, values from empty to 200 KiB (longer than
// a progress step, so that steps cut records, and their length varints,
// anywhere), headers.
func mixedRecords(t testing.TB, n int) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	bb := NewBatchBuilder(DefaultBatchOptions())
	sizes := []int{0, 1, 63, 64, 100, 8191, 8192, 70_000, 200_000}
	for i := range n {
		var key []byte
		if i%4 != 0 {
			key = []byte{'k', byte(i)}
		}
		val := make([]byte, sizes[rng.IntN(len(sizes))])
		for j := range val {
			val[j] = 'a' + byte(rng.IntN(4)) // compressible, not trivially
		}
		var hdrs []RecordHeader
		if i%5 == 0 {
			hdrs = []RecordHeader{{Key: "trace", Value: []byte{byte(i)}}, {Key: "null", Value: nil}}
		}
		bb.Append(int64(1_700_000_000_000+rng.IntN(100_000)), key, val, hdrs)
	}
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(RecordsBytes(b))
}

// Validation walks a compressed batch's records while they are inflated,
// from wherever the last step stopped: whatever the codec and wherever the
// steps cut the records, it reaches the verdict, and the figures, that the
// same records uncompressed get in one walk.
func TestValidateCompressedAsItInflates(t *testing.T) {
	const n = 40 // about 1.2 MiB: progress steps of 64 KiB to 1 MiB
	good := mixedRecords(t, n)
	// Record k's offset delta, on the careful path or the fast one.
	offsetDeltaAt := func(records []byte, k int) int {
		pos := 0
		for range k {
			l, m := varint(records[pos:])
			pos += m + int(l)
		}
		_, m := varint(records[pos:])
		pos += m + 1 // attributes
		_, m = varint(records[pos:])
		return pos + m
	}
	cases := []validateCase{
		{"valid", n, func() []byte { return good }},
		{"offset delta out of order deep in the batch", n, func() []byte {
			r := bytes.Clone(good)
			r[offsetDeltaAt(r, 37)] += 2
			return r
		}},
		{"one record fewer than counted", n + 1, func() []byte { return good }},
		{"one record more than counted", n - 1, func() []byte { return good }},
		{"last record cut short", n, func() []byte { return good[:len(good)-3] }},
		{"bytes after the last record", n, func() []byte { return append(bytes.Clone(good), 0, 0, 0) }},
	}
	// Raw snappy blocks of producers' sizes decode in one call; larger
	// ones stream. Streaming every block covers the second path here.
	over := snappyStreamOver
	t.Cleanup(func() { snappyStreamOver = over })
	for _, streamAll := range []bool{false, true} {
		if streamAll {
			snappyStreamOver = 0
		}
		runValidateCases(t, cases, streamAll)
	}
}

type validateCase struct {
	name    string
	count   int32
	records func() []byte
}

func runValidateCases(t *testing.T, cases []validateCase, streamAll bool) {
	for _, tc := range cases {
		records := tc.records()
		plain := batchOf(t, CompressionNone, nil, tc.count, records)
		h, err := CheckBatch(plain)
		if err != nil {
			t.Fatal(err)
		}
		want, _, wantErr := ValidateRecords(plain, h, nil, 64<<20)
		if (wantErr == nil) != (tc.name == "valid") {
			t.Fatalf("%s: uncompressed verdict %v", tc.name, wantErr)
		}
		for _, sc := range streamCodecs {
			if streamAll && sc.name != "snappy raw block" {
				continue
			}
			name := tc.name + "/" + sc.name
			if streamAll {
				name += " streamed"
			}
			t.Run(name, func(t *testing.T) {
				b := batchOf(t, sc.c, sc.compress, tc.count, records)
				h, err := CheckBatch(b)
				if err != nil {
					t.Fatal(err)
				}
				var scratch []byte
				for range 2 { // a fresh scratch, then one reused
					var got RecordStats
					var err error
					got, scratch, err = ValidateRecords(b, h, scratch, 64<<20)
					if wantErr == nil {
						if err != nil {
							t.Fatalf("valid batch refused: %v", err)
						}
						if got != want {
							t.Fatalf("stats %+v, uncompressed %+v", got, want)
						}
						if !bytes.Equal(scratch, records) {
							t.Fatal("scratch does not hold the uncompressed records")
						}
						continue
					}
					if err == nil || err.Error() != wantErr.Error() || !errors.Is(err, ErrInvalidRecord) {
						t.Fatalf("err %v, uncompressed %v", err, wantErr)
					}
				}
			})
		}
	}
}

// A decompression bomb is refused at its first bad record, as Kafka's
// validator, which reads a compressed batch as a stream, refuses it: what
// it costs is the first step of its output, not the bound. Three
// shapes: zeros from the start (a record of length 0), a valid batch
// followed by zeros, and one record that claims more than the bound.
func TestValidateStopsABombAtItsFirstBadRecord(t *testing.T) {
	const (
		bound = 16 << 20 // the broker's is 64 MiB at least
		// Steps of output double from 64 KiB: the bombs fail in the
		// first (zeros) or once the three records are out (< 1 MiB).
		inflateBudget = 2 << 20
	)
	// Bombs that claim more than the bound up front (a zstd content
	// size, xerial chunk lengths) are refused before inflating: these
	// inflate to the bound exactly, and only the walk can stop them.
	zeros := make([]byte, bound+bound/4)
	three := mixedRecords(t, 3)
	huge := func() []byte { // one record whose value is over the bound
		bb := NewBatchBuilder(DefaultBatchOptions())
		bb.Append(1, nil, zeros, nil)
		b, err := bb.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		return RecordsBytes(b)
	}()
	bombs := []struct {
		name    string
		count   int32
		records []byte
		want    error
	}{
		{"zeros", 1000, zeros[:bound], ErrInvalidRecord},
		{"three records then zeros", 3, append(bytes.Clone(three), zeros[:bound-len(three)]...), ErrInvalidRecord},
		{"a record longer than the bound", 1, huge, ErrDecompressedTooLarge},
	}
	for _, bomb := range bombs {
		for _, sc := range streamCodecs {
			t.Run(bomb.name+"/"+sc.name, func(t *testing.T) {
				b := batchOf(t, sc.c, sc.compress, bomb.count, bomb.records)
				h, err := CheckBatch(b)
				if err != nil {
					t.Fatal(err)
				}
				var inflated int
				check := func() {
					stats, _, err := ValidateRecords(b, h, nil, bound)
					if !errors.Is(err, bomb.want) {
						t.Fatalf("%d-byte bomb: err %v, want %v", len(b), err, bomb.want)
					}
					inflated = stats.UncompressedBytes
				}
				check() // warm the decoder pools
				// The least of three: a pooled zstd decoder the collector
				// dropped costs its history buffers (some 10 MiB) again.
				n := min(allocatedDuring(check), allocatedDuring(check), allocatedDuring(check))
				if inflated > inflateBudget {
					t.Fatalf("validating a %d-byte bomb inflated %d bytes of it (budget %d)", len(b), inflated, inflateBudget)
				}
				// The same-run baseline: inflating to the bound, which
				// validation did before it walked the records. The
				// decoder's own state is in both (zstd's history is
				// some 10 MiB for a frame declaring a 16 MiB window),
				// the output only in the baseline: validation must save
				// at least half of the bound. A bomb whose format
				// claims more than the bound (a zstd content size,
				// xerial chunk lengths) is refused before inflating
				// either way.
				whole := allocatedDuring(func() { _, _ = Decompress(sc.c, nil, RecordsBytes(b), bound) })
				if whole >= bound && n > whole-bound/2 {
					t.Fatalf("validating a %d-byte bomb allocated %d bytes, inflating it to the bound %d", len(b), n, whole)
				}
				t.Logf("%d-byte bomb refused after inflating %d bytes and allocating %d (inflating to the bound: %d)", len(b), inflated, n, whole)
			})
		}
	}
}

// FuzzValidateCompressed checks the walk over a growing output against the
// walk over the whole: any records, compressed in each streamed codec and
// inflated in steps of a byte and up (the step doubles), get the verdict,
// the error and the figures they get uncompressed (but for a record that
// claims more than the bound, refused as such before it is inflated).
func FuzzValidateCompressed(f *testing.F) {
	f.Add(RecordsBytes(buildTestBatch(f, DefaultBatchOptions(), 5)), uint8(5))
	f.Add(RecordsBytes(buildTestBatch(f, DefaultBatchOptions(), 5)), uint8(4))
	f.Add(append(RecordsBytes(buildTestBatch(f, DefaultBatchOptions(), 2)), 0, 0), uint8(2))
	f.Add(make([]byte, 40), uint8(3))
	step, over := progressStep, snappyStreamOver
	progressStep, snappyStreamOver = 1, 0 // raw snappy blocks stream too
	f.Cleanup(func() { progressStep, snappyStreamOver = step, over })
	f.Fuzz(func(t *testing.T, records []byte, count uint8) {
		n := int32(count%32) + 1
		plain := batchOf(t, CompressionNone, nil, n, records)
		h, err := CheckBatch(plain)
		if err != nil {
			t.Fatal(err)
		}
		want, _, wantErr := ValidateRecords(plain, h, nil, 1<<20)
		for _, sc := range streamCodecs {
			b := batchOf(t, sc.c, sc.compress, n, records)
			h, err := CheckBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := ValidateRecords(b, h, nil, 1<<20)
			switch {
			case (err == nil) != (wantErr == nil):
				t.Fatalf("%s: err %v, uncompressed %v", sc.name, err, wantErr)
			case errors.Is(err, ErrDecompressedTooLarge):
				// A record claiming more than the bound leaves is
				// refused before the rest inflates; uncompressed, the
				// same record runs past the batch instead.
			case err != nil && err.Error() != wantErr.Error():
				t.Fatalf("%s: err %v, uncompressed %v", sc.name, err, wantErr)
			case err == nil && got != want:
				t.Fatalf("%s: stats %+v, uncompressed %+v", sc.name, got, want)
			}
		}
	})
}

// FuzzSnappyStream holds the streamed raw snappy decoder to the answers of
// golang/snappy's, which validation uses for blocks of up to
// snappyStreamOver: the same bytes, or corrupt for both; and progress sees
// ever longer prefixes of the output.
func FuzzSnappyStream(f *testing.F) {
	f.Add(snappyABCx3)
	f.Add(snappyHello)
	f.Add(s2.EncodeSnappy(nil, batchLikePayload(5000)))
	f.Add(s2.EncodeSnappy(nil, make([]byte, 300_000))) // overlapping copies
	f.Add(s2.Encode(nil, batchLikePayload(5000)))      // S2's repeat codes: corrupt
	step := progressStep
	progressStep = 1
	f.Cleanup(func() { progressStep = step })
	f.Fuzz(func(t *testing.T, block []byte) {
		n, err := snappyDecodedLen(block, 0)
		if err != nil || n > fuzzMaxSize {
			return
		}
		want := make([]byte, n)
		wantErr := decodeSnappyBlock(want, block, 0)
		var seen []byte
		prefix := []byte("prefix")
		got, gotErr := decodeSnappyStream(bytes.Clone(prefix), block, n, func(out []byte) error {
			if len(out) <= len(seen) || !bytes.Equal(out[:len(seen)], seen) {
				t.Fatalf("progress saw %d bytes after %d, not a longer output", len(out), len(seen))
			}
			seen = bytes.Clone(out)
			return nil
		})
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("streamed: %v; golang/snappy: %v", gotErr, wantErr)
		}
		if gotErr != nil {
			if !errors.Is(gotErr, ErrCorruptMessage) || !bytes.Equal(got, prefix) {
				t.Fatalf("streamed error %v, dst %q", gotErr, got)
			}
			return
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("streamed %d bytes differ from golang/snappy's %d", len(got)-len(prefix), len(want))
		}
		if !bytes.HasPrefix(want, seen) {
			t.Fatal("progress saw bytes the output does not start with")
		}
	})
}

// BenchmarkSnappyStream: a raw snappy block of producer-like records over
// snappyStreamOver, decoded streamed (as validation does, without a
// progress step cutting it) against golang/snappy's one call (the
// baseline, which validation uses below snappyStreamOver).
func BenchmarkSnappyStream(b *testing.B) {
	src := batchLikePayload(12 << 20)
	block := s2.EncodeSnappy(nil, src)
	n := len(src)
	b.Run("golang-snappy", func(b *testing.B) {
		out := make([]byte, n)
		b.SetBytes(int64(n))
		for b.Loop() {
			if err := decodeSnappyBlock(out, block, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("streamed", func(b *testing.B) {
		out := make([]byte, 0, n)
		b.SetBytes(int64(n))
		for b.Loop() {
			var err error
			if out, err = decodeSnappyStream(out[:0], block, n, func([]byte) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
