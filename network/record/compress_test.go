package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	ksnappy "github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// batchLikePayload is n bytes shaped like the records section of a batch of
// JSON events: varint-ish framing, repeated field names, varying values.
func batchLikePayload(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, 0, n+256)
	for i := 0; len(b) < n; i++ {
		b = append(b, byte(i), 0, byte(i*2), 0x10)
		b = fmt.Appendf(b, `user-%d{"user":%d,"event":%q,"page":"/p/%d","ts":%d}`,
			rng.IntN(5000), rng.IntN(5000), []string{"click", "view", "buy"}[rng.IntN(3)],
			rng.IntN(200), 1700000000000+rng.Int64N(1e6))
	}
	return b[:n]
}

func randomPayload(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 11))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func mustCompress(t testing.TB, c Compression, src []byte) []byte {
	t.Helper()
	out, err := Compress(c, nil, src)
	if err != nil {
		t.Fatalf("Compress(%v, %d bytes): %v", c, len(src), err)
	}
	return out
}

func TestCompressDecompressRoundTrip(t *testing.T) {
	payloads := map[string][]byte{
		"empty":          {},
		"one byte":       {42},
		"100B batch":     batchLikePayload(100),
		"1MiB random":    randomPayload(1 << 20),
		"1MiB repeating": bytes.Repeat([]byte("key=value;"), 1<<20/10),
		"1MiB batch":     batchLikePayload(1 << 20),
	}
	for _, c := range allCodecs {
		for name, src := range payloads {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				compressed := mustCompress(t, c, src)
				got, err := Decompress(c, nil, compressed, len(src))
				if err != nil {
					t.Fatalf("Decompress with maxSize = exact size: %v", err)
				}
				if !bytes.Equal(got, src) {
					t.Fatalf("round trip changed the %d bytes (got %d)", len(src), len(got))
				}
				if len(src) > 0 {
					if _, err := Decompress(c, nil, compressed, len(src)-1); !errors.Is(err, ErrDecompressedTooLarge) {
						t.Fatalf("maxSize one byte short: err = %v, want ErrDecompressedTooLarge", err)
					}
				}
			})
		}
	}
}

func TestCompressAndDecompressAppendToDst(t *testing.T) {
	src := batchLikePayload(70 << 10)
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			prefix := []byte("batch-header")
			compressed, err := Compress(c, append([]byte(nil), prefix...), src)
			if err != nil || !bytes.HasPrefix(compressed, prefix) {
				t.Fatalf("Compress dropped dst's contents (err %v)", err)
			}
			compressed = compressed[len(prefix):]
			// maxSize bounds only the appended bytes, not len(dst).
			got, err := Decompress(c, append(make([]byte, 0, 16), prefix...), compressed, len(src))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, append(append([]byte(nil), prefix...), src...)) {
				t.Fatal("Decompress did not append after dst's contents")
			}
			// A dst with room to spare is written in place.
			buf := make([]byte, 3, 3+len(src))
			got, err = Decompress(c, buf, compressed, len(src))
			if err != nil || &got[0] != &buf[0] || !bytes.Equal(got[3:], src) {
				t.Fatalf("Decompress into roomy dst: err %v, reallocated %v", err, &got[0] != &buf[0])
			}
		})
	}
}

func TestDecompressRejectsUnknownCodecs(t *testing.T) {
	for _, c := range []Compression{5, 7, -1} {
		if _, err := Compress(c, nil, []byte("x")); !errors.Is(err, ErrUnsupportedCompression) {
			t.Errorf("Compress(%v): err = %v", c, err)
		}
		if _, err := Decompress(c, nil, []byte("x"), 10); !errors.Is(err, ErrUnsupportedCompression) {
			t.Errorf("Decompress(%v): err = %v", c, err)
		}
	}
}

func TestDecompressRejectsEmptyCompressedInput(t *testing.T) {
	for _, c := range allCodecs[1:] {
		if _, err := Decompress(c, nil, nil, 100); !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("%v: err = %v, want ErrCorruptMessage", c, err)
		}
	}
	if out, err := Decompress(CompressionNone, nil, nil, 0); err != nil || len(out) != 0 {
		t.Errorf("none, empty: %q, %v", out, err)
	}
}

// allocatedDuring reports the bytes the heap handed out while f ran.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecompressBombStopsAtTheBoundWithoutInflating(t *testing.T) {
	const (
		bombSize = 64 << 20
		maxSize  = 1 << 20
		// Growing dst by doubling to the bound, plus codec scratch
		// buffers, is a few MiB; inflating the bomb would be 64.
		allocBudget = 8 << 20
	)
	zeros := make([]byte, bombSize)
	bombs := map[string][]byte{}
	for _, c := range allCodecs {
		bombs[c.String()] = mustCompress(t, c, zeros)
	}
	// Shapes Compress does not write but other producers do.
	bombs["snappy raw block"] = s2.EncodeSnappy(nil, zeros)
	bombs["zstd without content size"] = zstdStream(t, zeros, 1<<20)
	bombs["gzip two members"] = append(mustCompress(t, CompressionGzip, zeros[:maxSize-10]), bombs["gzip"]...)
	zeros = nil

	for name, bomb := range bombs {
		c, _ := ParseCompression(strings.Fields(name)[0])
		t.Run(name, func(t *testing.T) {
			check := func() {
				_, err := Decompress(c, nil, bomb, maxSize)
				if !errors.Is(err, ErrDecompressedTooLarge) {
					t.Fatalf("%d-byte bomb: err = %v, want ErrDecompressedTooLarge", len(bomb), err)
				}
			}
			check() // warm the decoder pools
			n := allocatedDuring(check)
			if n > allocBudget {
				t.Fatalf("decompressing a %d-byte bomb allocated %d bytes (budget %d)", len(bomb), n, allocBudget)
			}
			t.Logf("%d-byte bomb rejected after allocating %d bytes", len(bomb), n)
		})
	}
}

// zstdStream compresses src as one streamed zstd frame: no content size in
// the header and the given window, as the Java producer (zstd-jni's
// ZstdOutputStream) writes it.
func zstdStream(t testing.TB, src []byte, window int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(window), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	// Flushing before the end keeps the encoder from learning the size
	// and writing a single-segment header with a content size.
	cut := min(len(src), 1)
	if _, err := w.Write(src[:cut]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(src[cut:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS || h.WindowSize != uint64(window) {
		t.Fatalf("streamed frame header: %+v, %v", h, err)
	}
	return buf.Bytes()
}

func TestDecompressZstdFrameWindow(t *testing.T) {
	src := batchLikePayload(10 << 10)
	t.Run("2MiB window, as the Java producer's default level declares, with a small bound", func(t *testing.T) {
		got, err := Decompress(CompressionZstd, nil, zstdStream(t, src, 2<<20), len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("err %v", err)
		}
	})
	big := zstdStream(t, src, 32<<20)
	t.Run("window beyond 8MiB and beyond the bound is refused before allocating it", func(t *testing.T) {
		check := func() {
			if _, err := Decompress(CompressionZstd, nil, big, 1<<20); !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("err = %v, want ErrDecompressedTooLarge", err)
			}
		}
		check()
		if n := allocatedDuring(check); n > 1<<20 {
			t.Fatalf("allocated %d bytes", n)
		}
	})
	t.Run("window within a bound larger than 8MiB", func(t *testing.T) {
		got, err := Decompress(CompressionZstd, nil, big, 32<<20)
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("content size over the bound fails before decoding", func(t *testing.T) {
		_, err := Decompress(CompressionZstd, nil, mustCompress(t, CompressionZstd, src), len(src)-1)
		if !errors.Is(err, ErrDecompressedTooLarge) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestDecompressConcatenatedStreams(t *testing.T) {
	// Java's GZIPInputStream reads concatenated members; zstd and LZ4
	// decoders read concatenated frames. Accept them like Java does.
	a, b := batchLikePayload(3000), batchLikePayload(5000)
	for _, c := range []Compression{CompressionGzip, CompressionLZ4, CompressionZstd} {
		joined := append(mustCompress(t, c, a), mustCompress(t, c, b)...)
		got, err := Decompress(c, nil, joined, len(a)+len(b))
		if err != nil || !bytes.Equal(got, append(append([]byte(nil), a...), b...)) {
			t.Errorf("%v: two streams back to back: err %v", c, err)
		}
	}
}

// Hand-built raw snappy blocks: a varint decoded length, then elements.
var (
	snappyHello     = []byte{0x05, 0x10, 'h', 'e', 'l', 'l', 'o'}        // literal "hello"
	snappyABCx3     = []byte{0x09, 0x08, 'a', 'b', 'c', 0x09, 0x03}      // literal "abc", copy 6 from offset 3
	snappyLyingSize = []byte{0x80, 0x80, 0x40, 0x10, 'h', 'e', 'l', 'l'} // claims 1 MiB from 8 bytes
)

func xerialFrame(blocks ...[]byte) []byte {
	b := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for _, blk := range blocks {
		b = binary.BigEndian.AppendUint32(b, uint32(len(blk)))
		b = append(b, blk...)
	}
	return b
}

func TestDecompressSnappyRawBlocks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block []byte
		want  string
	}{
		{"literal", snappyHello, "hello"},
		{"literal and copy", snappyABCx3, "abcabcabc"},
		{"empty", []byte{0}, ""},
	} {
		got, err := Decompress(CompressionSnappy, nil, tc.block, 100)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// Older franz-go releases and Sarama write one raw block for the batch.
	src := batchLikePayload(200 << 10)
	got, err := Decompress(CompressionSnappy, nil, s2.EncodeSnappy(nil, src), len(src))
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("large raw block: err %v", err)
	}
}

func TestDecompressSnappyRejectsS2Extensions(t *testing.T) {
	// s2.Encode's repeat-offset copies are valid S2 but not snappy: a Java
	// consumer could not read a batch holding them.
	data := []byte(strings.Repeat("abcdefgh1abcdefgh2abcdefgh3", 20))
	block := s2.Encode(nil, data)
	if got, err := s2.Decode(nil, block); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("test vector is not valid S2: %v", err)
	}
	if _, err := Decompress(CompressionSnappy, nil, block, len(data)); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("S2-only block: err = %v, want ErrCorruptMessage", err)
	}
}

func TestDecompressXerialFraming(t *testing.T) {
	got, err := Decompress(CompressionSnappy, nil, xerialFrame(snappyHello, snappyABCx3), 100)
	if err != nil || string(got) != "helloabcabcabc" {
		t.Fatalf("two chunks: %q, %v", got, err)
	}
	got, err = Decompress(CompressionSnappy, nil, xerialFrame(), 100)
	if err != nil || len(got) != 0 {
		t.Fatalf("header only: %q, %v", got, err)
	}
	if _, err = Decompress(CompressionSnappy, nil, xerialFrame(snappyHello, snappyABCx3), 13); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("chunks summing past the bound: %v", err)
	}
}

func TestCompressSnappyWritesXerialChunksOf32KiB(t *testing.T) {
	src := randomPayload(100 << 10) // incompressible: 32+32+32+4 KiB chunks
	out := mustCompress(t, CompressionSnappy, src)
	if !bytes.Equal(out[:16], xerialFrame()) {
		t.Fatalf("header % x", out[:16])
	}
	var sizes []int
	for off := 16; off < len(out); {
		n := int(binary.BigEndian.Uint32(out[off:]))
		block := out[off+4 : off+4+n]
		d, err := s2.DecodedLen(block)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, d)
		off += 4 + n
	}
	if fmt.Sprint(sizes) != "[32768 32768 32768 4096]" {
		t.Fatalf("chunk input sizes %v", sizes)
	}
}

func TestCompressLZ4WritesKafkasFrameDescriptor(t *testing.T) {
	out := mustCompress(t, CompressionLZ4, batchLikePayload(1000))
	// Magic 0x184D2204 (LE), FLG 0x60 (version 1, independent blocks, no
	// checksums, no content size), BD 0x40 (64 KiB blocks), header
	// checksum: what Kafka's Lz4BlockOutputStream writes.
	if want := []byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82}; !bytes.Equal(out[:7], want) {
		t.Fatalf("frame header % x, want % x", out[:7], want)
	}
	if !bytes.HasSuffix(out, []byte{0, 0, 0, 0}) {
		t.Fatalf("frame does not end with an EndMark: % x", out[len(out)-8:])
	}
}

func TestDecompressRejectsMalformedInput(t *testing.T) {
	corrupt := []struct {
		name string
		c    Compression
		src  []byte
	}{
		{"gzip bad magic", CompressionGzip, []byte("not gzip at all, no")},
		{"gzip header only", CompressionGzip, mustCompress(t, CompressionGzip, nil)[:10]},
		{"lz4 bad magic", CompressionLZ4, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{"zstd bad magic", CompressionZstd, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{"snappy bad varint", CompressionSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"snappy copy before any literal", CompressionSnappy, []byte{0x04, 0x01, 0x01}},
		{"snappy block claiming far more than it can hold", CompressionSnappy, snappyLyingSize},
		{"snappy literal cut short", CompressionSnappy, snappyHello[:5]},
		{"xerial header cut short", CompressionSnappy, xerialFrame()[:12]},
		{"xerial chunk length cut short", CompressionSnappy, append(xerialFrame(snappyHello), 0, 0)},
		{"xerial chunk overrunning the input", CompressionSnappy, xerialFrame(snappyHello)[:22]},
		{"xerial chunk length near 4 GiB", CompressionSnappy, append(xerialFrame(), 0xff, 0xff, 0xff, 0xf0, 1)},
		{"xerial empty chunk", CompressionSnappy, xerialFrame(nil)},
		{"xerial bad chunk", CompressionSnappy, xerialFrame(snappyHello, []byte{0x04, 0x01, 0x01})},
	}
	for _, tc := range corrupt {
		check := func() {
			if _, err := Decompress(tc.c, nil, tc.src, 1<<20); !errors.Is(err, ErrCorruptMessage) {
				t.Errorf("%s: err = %v, want ErrCorruptMessage", tc.name, err)
			}
		}
		check()
		if n := allocatedDuring(check); n > 64<<10 {
			t.Errorf("%s: rejecting %d bytes allocated %d", tc.name, len(tc.src), n)
		}
	}
}

func TestDecompressRejectsEveryTruncation(t *testing.T) {
	// Every codec but snappy marks its end (gzip's trailer, LZ4's EndMark,
	// zstd's last-block flag), so a cut stream must fail rather than
	// decode short. Xerial has no end marker: a cut at a chunk boundary
	// is a valid shorter stream there, as in snappy-java; the batch CRC is
	// what catches it.
	src := batchLikePayload(150 << 10)
	for _, c := range []Compression{CompressionGzip, CompressionLZ4, CompressionZstd} {
		full := mustCompress(t, c, src)
		step := max(1, len(full)/300)
		for n := 0; n < len(full); n += step {
			if _, err := Decompress(c, nil, full[:n], len(src)); !errors.Is(err, ErrCorruptMessage) {
				t.Fatalf("%v cut to %d of %d bytes: err = %v", c, n, len(full), err)
			}
		}
		for n := len(full) - 8; n < len(full); n++ {
			if _, err := Decompress(c, nil, full[:n], len(src)); !errors.Is(err, ErrCorruptMessage) {
				t.Fatalf("%v cut to %d of %d bytes: err = %v", c, n, len(full), err)
			}
		}
	}
}

func TestDecompressSurvivesBitFlips(t *testing.T) {
	// Flipped bytes must yield an error or some bounded output, never a
	// panic; errors must still wrap one of the package's sentinels.
	src := batchLikePayload(40 << 10)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range allCodecs[1:] {
		full := mustCompress(t, c, src)
		for range 300 {
			mutated := append([]byte(nil), full...)
			for range 1 + rng.IntN(4) {
				mutated[rng.IntN(len(mutated))] ^= byte(1 + rng.IntN(255))
			}
			out, err := Decompress(c, nil, mutated, 64<<10)
			checkDecompressResult(t, c, out, err, 64<<10)
		}
	}
}

func checkDecompressResult(t *testing.T, c Compression, out []byte, err error, maxSize int) {
	t.Helper()
	switch {
	case err == nil && len(out) > maxSize:
		t.Fatalf("%v: %d bytes out, bound %d", c, len(out), maxSize)
	case err != nil && !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrDecompressedTooLarge):
		t.Fatalf("%v: error wraps no sentinel: %v", c, err)
	}
}

// Fuzz targets. Seeds are Compress output for small payloads (f.Add) plus
// the hand-made streams in testdata/fuzz/<FuzzName>.
const fuzzMaxSize = 1 << 20

func fuzzDecompress(f *testing.F, c Compression) {
	for _, src := range [][]byte{nil, []byte("a"), batchLikePayload(300), batchLikePayload(40 << 10), bytes.Repeat([]byte{0}, 70<<10)} {
		f.Add(mustCompress(f, c, src))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Decompress(c, nil, data, fuzzMaxSize)
		checkDecompressResult(t, c, out, err, fuzzMaxSize)
		if err != nil {
			return
		}
		// Whatever decoded must survive our own round trip.
		again, err := Decompress(c, nil, mustCompress(t, c, out), len(out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("round trip of fuzzed output (%d bytes): %v", len(out), err)
		}
	})
}

func FuzzDecompressGzip(f *testing.F) { fuzzDecompress(f, CompressionGzip) }

func FuzzDecompressSnappy(f *testing.F) {
	f.Add(snappyABCx3)
	f.Add(xerialFrame(snappyHello, snappyABCx3))
	f.Add(s2.EncodeSnappy(nil, batchLikePayload(5000)))
	fuzzDecompress(f, CompressionSnappy)
}

// The raw snappy block decoder (golang/snappy's, with its amd64 assembly)
// accepts exactly what klauspost's strict snappy decoder accepts and
// decodes it to the same bytes: both are the reference format, without
// S2's extensions, which a Java consumer could not read.
func FuzzSnappyBlockStrict(f *testing.F) {
	f.Add(snappyABCx3)
	f.Add(snappyHello)
	f.Add(s2.EncodeSnappy(nil, batchLikePayload(5000)))
	f.Add(s2.Encode(nil, batchLikePayload(5000))) // S2's repeat codes: refused by both
	f.Fuzz(func(t *testing.T, block []byte) {
		n, err := snappyDecodedLen(block, 0)
		if err != nil || n > fuzzMaxSize {
			return
		}
		got := make([]byte, n)
		gotErr := decodeSnappyBlock(got, block, 0)
		want, wantErr := ksnappy.DecodeStrict(nil, block)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("decodeSnappyBlock: %v; klauspost DecodeStrict: %v", gotErr, wantErr)
		}
		if gotErr == nil && !bytes.Equal(got, want) {
			t.Fatalf("decoded %d bytes differ from klauspost's %d", len(got), len(want))
		}
	})
}

func FuzzDecompressLZ4(f *testing.F) { fuzzDecompress(f, CompressionLZ4) }

func FuzzDecompressZstd(f *testing.F) {
	f.Add(zstdStream(f, batchLikePayload(5000), 1<<20))
	fuzzDecompress(f, CompressionZstd)
}

func BenchmarkCompress(b *testing.B) {
	src := batchLikePayload(16 << 10)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = Compress(c, dst[:0], src); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(src))/float64(len(dst)), "ratio")
		})
	}
}

func BenchmarkDecompress(b *testing.B) {
	src := batchLikePayload(16 << 10)
	for _, c := range allCodecs {
		compressed := mustCompress(b, c, src)
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = Decompress(c, dst[:0], compressed, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Compression levels (KIP-390): a higher level compresses compressible
// records smaller, every level decompresses to the input, and a level out
// of the codec's range is its default.
func TestCompressLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"order", "customer", "shipped", "pending", "amount", "currency", "EUR", "USD", "warehouse", "id"}
	var src []byte
	for len(src) < 256<<10 {
		src = fmt.Appendf(src, `{"%s":%d,"%s":"%s"}`, words[rng.IntN(len(words))], rng.IntN(100000), words[rng.IntN(len(words))], words[rng.IntN(len(words))])
	}
	for _, tc := range []struct {
		c                  Compression
		low, high, outside int
	}{
		{CompressionGzip, 1, 9, 10},
		{CompressionLZ4, 9, 17, 18}, // 9: Kafka's default, the fast compressor
		{CompressionZstd, 1, 19, 23},
	} {
		size := func(level int) int {
			out, err := CompressLevel(tc.c, level, nil, src)
			if err != nil {
				t.Fatalf("%v level %d: %v", tc.c, level, err)
			}
			back, err := Decompress(tc.c, nil, out, len(src))
			if err != nil || !bytes.Equal(back, src) {
				t.Fatalf("%v level %d: does not round-trip: %v", tc.c, level, err)
			}
			return len(out)
		}
		low, high := size(tc.low), size(tc.high)
		if high >= low {
			t.Errorf("%v: level %d gives %d bytes, level %d %d", tc.c, tc.high, high, tc.low, low)
		}
		if def, out := size(DefaultLevel), size(tc.outside); out != def {
			t.Errorf("%v: level %d (out of range) gives %d bytes, the default %d", tc.c, tc.outside, out, def)
		}
		t.Logf("%v: %d bytes at level %d, %d at %d (of %d)", tc.c, low, tc.low, high, tc.high, len(src))
	}
}
