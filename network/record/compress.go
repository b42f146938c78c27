package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	gsnappy "github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compress appends the compressed form of src to dst and returns it. The
// output is what the Java producer writes, so every Kafka consumer can read
// it:
//
//   - gzip: one gzip member at the default level (Kafka's default for
//     compression.gzip.level).
//   - snappy: xerial framing (magic, version 1, minimum compatible version 1,
//     then length-prefixed raw snappy blocks of at most 32 KiB of input), as
//     snappy-java's SnappyOutputStream writes it.
//   - lz4: an LZ4 frame with 64 KiB independent blocks and no block or content
//     checksum, the same descriptor as Kafka's Lz4BlockOutputStream (the
//     batch CRC already covers the bytes).
//   - zstd: one frame at the default level (zstd level 3, Kafka's default).
//
// On error dst is returned as it was passed. Compress is safe for concurrent
// use; its encoders are pooled.
func Compress(c Compression, dst, src []byte) ([]byte, error) {
	return CompressLevel(c, DefaultLevel, dst, src)
}

// DefaultLevel is each codec's default compression level (Kafka's defaults
// of compression.gzip.level, .lz4.level and .zstd.level).
const DefaultLevel = 0

// CompressLevel is Compress at a compression level, as a topic's
// compression.<codec>.level sets it (KIP-390): gzip 1–9, lz4 1–17 (Kafka's
// default 9 is the fast compressor, others the high-compression one, at
// most its level 9 here), zstd -131072–22 (in klauspost's four speeds:
// fastest below 2, default to 5, better to 10, best above). Snappy has no
// levels; DefaultLevel, or a level out of a codec's range, is its default.
func CompressLevel(c Compression, level int, dst, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		return compressGzip(level, dst, src)
	case CompressionSnappy:
		return appendXerial(dst, src), nil
	case CompressionLZ4:
		return compressLZ4(level, dst, src)
	case CompressionZstd:
		e, err := zstdEncoder(level)
		if err != nil {
			return dst, fmt.Errorf("compress zstd: new encoder: %w", err)
		}
		return e.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("compress with %v: %w", c, ErrUnsupportedCompression)
}

// Decompress appends the decompressed form of src to dst and returns it.
// maxSize bounds the number of bytes appended: it fails with an error
// wrapping ErrDecompressedTooLarge as soon as the output would exceed maxSize
// (a negative maxSize counts as 0), checked while inflating, so a small
// "bomb" never costs more than about maxSize bytes of memory. Unknown codecs
// fail with ErrUnsupportedCompression and malformed input, including an empty
// src for any codec but none, with an error wrapping ErrCorruptMessage.
//
// Snappy input may be xerial framed (the Java client, librdkafka) or a single
// raw snappy block (older franz-go releases, Sarama, others); raw blocks are
// decoded strictly, rejecting the S2 extensions no Java consumer could read.
//
// Decompress never panics. On error dst is returned as it was passed, though
// its spare capacity may have been written. It is safe for concurrent use;
// its decoders are pooled.
func Decompress(c Compression, dst, src []byte, maxSize int) ([]byte, error) {
	return decompress(c, dst, src, maxSize, nil)
}

// progressFunc sees the output of a decompression as it grows (out is
// everything appended to dst so far), and may stop it by returning an
// error, which the decompression then returns as it is. Validation uses it
// to refuse a batch at its first bad record instead of after inflating it
// whole (ValidateRecords).
type progressFunc func(out []byte) error

// progressStep is the least output a streaming decoder produces between two
// progress calls; the step doubles with the output, so a batch of n bytes
// costs about log2(n/progressStep) calls. A variable only so that the fuzz
// test can cut small batches anywhere.
var progressStep = 64 << 10

// decompress is Decompress, calling progress (when not nil) as the output
// grows: gzip, lz4 and zstd at least every time it doubles from
// progressStep, xerial snappy after each chunk, a raw snappy block of more
// than snappyStreamOver as gzip (a smaller one, decoded in one call, reaches
// progress only through the caller's final look at the whole output).
func decompress(c Compression, dst, src []byte, maxSize int, progress progressFunc) ([]byte, error) {
	maxSize = max(maxSize, 0)
	if c != CompressionNone && len(src) == 0 {
		// No compressor writes nothing: even empty input yields a
		// header. Java readers fail on it too.
		return dst, fmt.Errorf("decompress %v: empty input: %w", c, ErrCorruptMessage)
	}
	switch c {
	case CompressionNone:
		if len(src) > maxSize {
			return dst, tooLarge(c, maxSize)
		}
		return append(dst, src...), nil
	case CompressionGzip:
		return decompressGzip(dst, src, maxSize, progress)
	case CompressionSnappy:
		return decompressSnappy(dst, src, maxSize, progress)
	case CompressionLZ4:
		return decompressLZ4(dst, src, maxSize, progress)
	case CompressionZstd:
		return decompressZstd(dst, src, maxSize, progress)
	}
	return dst, fmt.Errorf("decompress %v: %w", c, ErrUnsupportedCompression)
}

func tooLarge(c Compression, maxSize int) error {
	return fmt.Errorf("decompress %v: more than %d bytes: %w", c, maxSize, ErrDecompressedTooLarge)
}

func corrupt(c Compression, err error) error {
	return fmt.Errorf("decompress %v: %w: %w", c, ErrCorruptMessage, err)
}

// grow returns b with room for at least n more bytes. When it must
// allocate it adds an eighth, not append's doubling (which could overshoot a
// size bound by as much again): a reused buffer, such as the produce path's
// decompression scratch, then stops growing once it has seen batches of
// about one size, instead of being replaced for each slightly larger one.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n+n/8)
	copy(nb, b)
	return nb
}

// appendWriter is an io.Writer appending to a slice, so streaming encoders
// can write straight into the caller's dst.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// probeSize is the scratch buffer readBounded reads into when dst is full,
// to learn whether the stream has ended before growing dst.
const probeSize = 512

// readBounded appends everything r yields to dst and fails with
// errTooLarge once more than maxSize bytes have been appended; it never
// reads more than one byte past the bound into dst. sizeHint (the output size
// the format claims, already checked against maxSize) sizes dst up front.
// probe is scratch space of probeSize bytes owned by the caller. With
// progress, reads are cut so that it sees the output at least every time
// it doubles from progressStep; its error comes back as a progressStop.
func readBounded(dst []byte, r io.Reader, maxSize, sizeHint int, probe []byte, progress progressFunc) ([]byte, error) {
	start := len(dst)
	limit := start + maxSize // the largest len(dst) allowed
	if limit < start || limit == math.MaxInt {
		limit = math.MaxInt - 1
	}
	if sizeHint > 0 {
		if progress != nil {
			// A bomb may tell its true size: validation stops it
			// early, so it grows dst as the output comes after the
			// first MiB.
			sizeHint = min(sizeHint, 1<<20)
		}
		dst = grow(dst, min(sizeHint, maxSize))
	}
	idle := 0
	seen := start // the output progress last saw ends here
	for {
		var n int
		var err error
		if progress != nil && len(dst)-seen >= max(progressStep, seen-start) {
			if perr := progress(dst[start:]); perr != nil {
				return nil, progressStop{perr}
			}
			seen = len(dst)
		}
		if len(dst) == cap(dst) {
			// Output that exactly fills dst (a correct size hint) ends
			// here; probing first keeps that from costing a growth.
			n, err = r.Read(probe)
			if n > 0 {
				if n > limit-len(dst) {
					return nil, errTooLarge
				}
				want := min(max(len(dst)-start, 4096), limit+1-len(dst))
				dst = append(grow(dst, want), probe[:n]...)
			}
		} else {
			end := min(cap(dst), limit+1)
			if progress != nil {
				// Not past the next progress call: a decoder fills
				// all it is given (zstd's does), and a bomb would be
				// inflated whole before validation saw its start.
				end = min(end, seen+max(progressStep, seen-start))
			}
			n, err = r.Read(dst[len(dst):end])
			dst = dst[:len(dst)+n]
			if len(dst) > limit {
				return nil, errTooLarge
			}
		}
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return nil, err
		case n == 0:
			if idle++; idle > 100 {
				return nil, io.ErrNoProgress
			}
		default:
			idle = 0
		}
	}
}

// errTooLarge is readBounded's internal signal; callers turn it into an
// error naming the codec and bound.
var errTooLarge = errors.New("output exceeds bound")

// progressStop carries a progressFunc's error out of a decoder, to be
// returned unwrapped.
type progressStop struct{ err error }

func (p progressStop) Error() string { return p.err.Error() }

// finishRead maps readBounded's result to Decompress's contract.
func finishRead(c Compression, orig, out []byte, err error, maxSize int) ([]byte, error) {
	if stop, ok := err.(progressStop); ok {
		return orig, stop.err
	}
	switch {
	case err == nil:
		return out, nil
	case err == errTooLarge:
		return orig, tooLarge(c, maxSize)
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return orig, fmt.Errorf("decompress %v: frame window over %d bytes: %w: %w",
			c, zstdWindowLimit(maxSize), ErrDecompressedTooLarge, err)
	case err == io.EOF:
		return orig, corrupt(c, io.ErrUnexpectedEOF)
	}
	return orig, corrupt(c, err)
}

// ---- gzip ----

// gzipMaxRatio is deflate's best possible compression ratio (a 258-byte
// match per 2 bits, about 1032:1); a gzip trailer claiming more output than
// this from the bytes present is a lie, not a size hint.
const gzipMaxRatio = 1032

type gzipDecoder struct {
	r     gzip.Reader
	src   bytes.Reader
	probe [probeSize]byte
}

type gzipEncoder struct {
	w   *gzip.Writer
	out appendWriter
}

var (
	gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}
	// gzipEncoders are by level: [0] the default, [1..9] the levels.
	gzipEncoders = func() *[10]sync.Pool {
		pools := new([10]sync.Pool)
		for i := range pools {
			level := i
			if level == 0 {
				level = gzip.DefaultCompression
			}
			pools[i].New = func() any {
				e := new(gzipEncoder)
				e.w, _ = gzip.NewWriterLevel(&e.out, level)
				return e
			}
		}
		return pools
	}()
)

func compressGzip(level int, dst, src []byte) ([]byte, error) {
	if level < 1 || level > 9 {
		level = 0
	}
	pool := &gzipEncoders[level]
	e := pool.Get().(*gzipEncoder)
	e.out.b = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if err == nil {
		err = e.w.Close()
	}
	out := e.out.b
	e.out.b = nil
	pool.Put(e)
	if err != nil {
		return dst, fmt.Errorf("compress gzip: %w", err)
	}
	return out, nil
}

func decompressGzip(dst, src []byte, maxSize int, progress progressFunc) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer func() {
		d.src.Reset(nil)
		gzipDecoders.Put(d)
	}()
	d.src.Reset(src)
	if err := d.r.Reset(&d.src); err != nil {
		return finishRead(CompressionGzip, dst, nil, err, maxSize)
	}
	// ISIZE, the last member's length mod 2^32, is exact for the single
	// member every Kafka client writes.
	hint := 0
	if len(src) >= 18 {
		isize := int64(binary.LittleEndian.Uint32(src[len(src)-4:]))
		if isize <= int64(maxSize) && isize <= gzipMaxRatio*int64(len(src)) {
			hint = int(isize)
		}
	}
	out, err := readBounded(dst, &d.r, maxSize, hint, d.probe[:], progress)
	return finishRead(CompressionGzip, dst, out, err, maxSize)
}

// ---- snappy ----

// xerialMagic opens snappy-java's stream format; the two big-endian int32s
// after it are the format version and the minimum compatible version.
var xerialHeader = [16]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// xerialBlockSize is snappy-java's default block size: the most input bytes
// one chunk compresses.
const xerialBlockSize = 32 << 10

// snappyMaxRatio bounds what a standard snappy block can decode to per input
// byte: the densest element is a 3-byte copy of 64 bytes. A block header
// claiming more is corrupt, and is rejected before allocating for it.
const snappyMaxRatio = 22

func appendXerial(dst, src []byte) []byte {
	need := len(xerialHeader)
	for rest := len(src); rest > 0; rest -= xerialBlockSize {
		need += 4 + s2.MaxEncodedLen(min(rest, xerialBlockSize))
	}
	dst = grow(dst, need)
	dst = append(dst, xerialHeader[:]...)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialBlockSize)]
		src = src[len(chunk):]
		at := len(dst)
		room := dst[at+4 : at+4+s2.MaxEncodedLen(len(chunk))]
		block := s2.EncodeSnappy(room, chunk)
		if len(block) > 0 && &block[0] != &room[0] {
			copy(room, block) // not expected: room is large enough
		}
		dst = dst[:at+4+len(block)]
		binary.BigEndian.PutUint32(dst[at:], uint32(len(block)))
	}
	return dst
}

func decompressSnappy(dst, src []byte, maxSize int, progress progressFunc) ([]byte, error) {
	if len(src) >= 8 && bytes.Equal(src[:8], xerialHeader[:8]) {
		return decodeXerial(dst, src, maxSize, progress)
	}
	n, err := snappyDecodedLen(src, 0)
	if err != nil {
		return dst, err
	}
	if n > maxSize {
		return dst, tooLarge(CompressionSnappy, maxSize)
	}
	if progress != nil && n > snappyStreamOver {
		return decodeSnappyStream(dst, src, n, progress)
	}
	out := grow(dst, n)
	if err := decodeSnappyBlock(out[len(out):len(out)+n], src, 0); err != nil {
		return dst, err
	}
	return out[:len(out)+n], nil
}

// snappyStreamOver is the decoded length above which validation decodes a
// raw snappy block with decodeSnappyStream, watching the records as they
// come, instead of golang/snappy's faster decoder, which fills the whole
// output in one call: a bomb then costs validation the first steps of its
// output, not its claimed length (up to the inflate bound). Producers'
// blocks, a compressed batch of at most max.message.bytes (1 MiB by
// default), decode below it unless they compress more than 8:1. A
// variable only so that tests can stream small blocks.
var snappyStreamOver = 8 << 20

// decodeSnappyStream appends the n bytes a raw snappy block decodes to
// (its header already read and checked by snappyDecodedLen) to dst,
// growing the output as it goes and calling progress each time it has
// doubled from progressStep. It is as strict as decodeSnappyBlock
// (golang/snappy's checks: the reference format, no S2 extensions; a copy
// from before the output's start or past its end, a literal past the
// input's end, or an output of other than n bytes, is corrupt), and
// FuzzSnappyStream holds the two to the same answers.
func decodeSnappyStream(dst, block []byte, n int, progress progressFunc) ([]byte, error) {
	_, hdr := binary.Uvarint(block)
	src := block[hdr:]
	start := len(dst)
	end := start + n
	out := grow(dst, min(n, 1<<20))
	seen := start // the output progress last saw ends here
	bad := func(at int, why string) ([]byte, error) {
		return dst, fmt.Errorf("decompress snappy: block at 0: element at %d: %s: %w: %w", hdr+at, why, ErrCorruptMessage, snappy.ErrCorrupt)
	}
	for s := 0; s < len(src); {
		if len(out)-seen >= max(progressStep, seen-start) {
			if err := progress(out[start:]); err != nil {
				return dst, err
			}
			seen = len(out)
		}
		tag := src[s]
		var length, offset int
		switch tag & 3 {
		case 0: // a literal: its length - 1 in the tag, or in 1-4 bytes after it
			x, at := int(tag>>2), s
			s++
			if x >= 60 {
				k := x - 59
				if k > len(src)-s {
					return bad(at, "literal length cut short")
				}
				x = 0
				for i := range k {
					x |= int(src[s+i]) << (8 * i)
				}
				s += k
			}
			length = x + 1
			if length > len(src)-s || length > end-len(out) {
				return bad(at, "literal past the end")
			}
			out = append(growSnappy(out, length, start, end), src[s:s+length]...)
			s += length
			continue
		case 1: // a copy of 4-11 bytes from up to 2 KiB back
			if len(src)-s < 2 {
				return bad(s, "copy cut short")
			}
			length = 4 + int(tag>>2)&7
			offset = int(tag&0xe0)<<3 | int(src[s+1])
			s += 2
		case 2: // a copy of 1-64 bytes from up to 64 KiB back
			if len(src)-s < 3 {
				return bad(s, "copy cut short")
			}
			length = 1 + int(tag>>2)
			offset = int(binary.LittleEndian.Uint16(src[s+1:]))
			s += 3
		case 3: // a copy of 1-64 bytes from up to 4 GiB back
			if len(src)-s < 5 {
				return bad(s, "copy cut short")
			}
			length = 1 + int(tag>>2)
			offset = int(binary.LittleEndian.Uint32(src[s+1:]))
			s += 5
		}
		if offset <= 0 || offset > len(out)-start || length > end-len(out) {
			return bad(s, "copy out of range")
		}
		out = growSnappy(out, length, start, end)
		from := len(out) - offset
		if offset >= length {
			out = append(out, out[from:from+length]...)
		} else {
			for i := range length { // overlapping: a run repeats
				out = append(out, out[from+i])
			}
		}
	}
	if len(out) != end {
		return bad(len(src), fmt.Sprintf("%d bytes decoded, the header claims %d", len(out)-start, n))
	}
	return out, nil
}

// growSnappy makes room for k more bytes of a streamed snappy output that
// started at start and ends at end: the output so far again, at most to
// its end.
func growSnappy(out []byte, k, start, end int) []byte {
	if cap(out)-len(out) >= k {
		return out
	}
	return grow(out, min(max(k, len(out)-start), end-len(out)))
}

// snappyDecodedLen returns the length a raw block at offset off of the
// compressed input claims to decode to, refusing impossible claims.
func snappyDecodedLen(block []byte, off int) (int, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return 0, fmt.Errorf("decompress snappy: block at %d: %w: %w", off, ErrCorruptMessage, err)
	}
	if n > snappyMaxRatio*len(block) {
		return 0, fmt.Errorf("decompress snappy: block at %d claims %d bytes from %d: %w",
			off, n, len(block), ErrCorruptMessage)
	}
	return n, nil
}

// decodeSnappyBlock decodes block into out, whose length is the block's
// decoded length. The decoder is golang/snappy's: the reference format
// only, as klauspost's DecodeStrict (S2's extensions, which snappy-java
// cannot read, are corrupt), with an amd64 assembly loop that decodes a
// producer's batch about twice as fast (BenchmarkDecompress/snappy: 2.7 GB/s
// with DecodeStrict, 5.8 GB/s; FuzzSnappyBlockStrict checks the two agree).
func decodeSnappyBlock(out, block []byte, off int) error {
	got, err := gsnappy.Decode(out, block)
	if err == nil && (len(got) != len(out) || (len(got) > 0 && &got[0] != &out[0])) {
		err = snappy.ErrCorrupt // cannot happen: out has the decoded length
	}
	if err != nil {
		return fmt.Errorf("decompress snappy: block at %d: %w: %w", off, ErrCorruptMessage, err)
	}
	return nil
}

// decodeXerial decodes snappy-java's stream format. A first pass walks the
// chunk headers, checking the framing and summing the decoded lengths, so
// an oversized payload fails before anything is inflated and dst grows once.
// The version fields are not checked: every writer uses 1, and snappy-java
// itself only rejects versions below 1.
func decodeXerial(dst, src []byte, maxSize int, progress progressFunc) ([]byte, error) {
	if len(src) < len(xerialHeader) {
		return dst, fmt.Errorf("decompress snappy: xerial header cut short at %d bytes: %w",
			len(src), ErrCorruptMessage)
	}
	total := 0
	for off := len(xerialHeader); off < len(src); {
		if len(src)-off < 4 {
			return dst, fmt.Errorf("decompress snappy: chunk length at %d cut short: %w", off, ErrCorruptMessage)
		}
		size := binary.BigEndian.Uint32(src[off:])
		if uint64(size) > uint64(len(src)-off-4) {
			return dst, fmt.Errorf("decompress snappy: chunk at %d claims %d bytes, %d remain: %w",
				off, size, len(src)-off-4, ErrCorruptMessage)
		}
		n, err := snappyDecodedLen(src[off+4:off+4+int(size)], off)
		if err != nil {
			return dst, err
		}
		if total += n; total > maxSize {
			return dst, tooLarge(CompressionSnappy, maxSize)
		}
		off += 4 + int(size)
	}
	// Validation (progress) may stop at the first chunks of a bomb: it
	// grows the output with the chunks, past the first MiB.
	want := total
	if progress != nil {
		want = min(total, 1<<20)
	}
	out := grow(dst, want)
	for off := len(xerialHeader); off < len(src); {
		size := int(binary.BigEndian.Uint32(src[off:]))
		block := src[off+4 : off+4+size]
		n, _ := snappy.DecodedLen(block) // checked by the first pass
		if cap(out)-len(out) < n {
			out = grow(out, max(n, min(len(out)-len(dst), total-(len(out)-len(dst)))))
		}
		if err := decodeSnappyBlock(out[len(out):len(out)+n], block, off); err != nil {
			return dst, err
		}
		out = out[:len(out)+n]
		off += 4 + size
		if progress != nil && off < len(src) {
			if err := progress(out[len(dst):]); err != nil {
				return dst, err
			}
		}
	}
	return out, nil
}

// ---- lz4 ----

type lz4Decoder struct {
	r     *lz4.Reader
	src   bytes.Reader
	probe [probeSize]byte
}

type lz4Encoder struct {
	w   *lz4.Writer
	out appendWriter
}

var (
	lz4Decoders = sync.Pool{New: func() any {
		d := &lz4Decoder{r: lz4.NewReader(nil)}
		// Concurrency 1 decodes in the calling goroutine: no
		// goroutines to leak when the pool drops a decoder.
		_ = d.r.Apply(lz4.ConcurrencyOption(1))
		return d
	}}
	// lz4Encoders are by level: [0] the fast compressor (Kafka's
	// default), [1..9] the high-compression levels.
	lz4Encoders = func() *[10]sync.Pool {
		pools := new([10]sync.Pool)
		levels := [10]lz4.CompressionLevel{lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4,
			lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
		for i := range pools {
			level := levels[i]
			pools[i].New = func() any {
				e := new(lz4Encoder)
				e.w = lz4.NewWriter(&e.out)
				// Kafka's Lz4BlockOutputStream descriptor: 64 KiB
				// independent blocks, no checksums (recent Java readers
				// verify a content checksum in a way that differs from
				// the LZ4 frame spec for multi-block frames, so writing
				// none is the safe choice).
				_ = e.w.Apply(
					lz4.BlockSizeOption(lz4.Block64Kb),
					lz4.BlockChecksumOption(false),
					lz4.ChecksumOption(false),
					lz4.ConcurrencyOption(1),
					lz4.CompressionLevelOption(level),
				)
				return e
			}
		}
		return pools
	}()
)

// lz4DefaultLevel is Kafka's compression.lz4.level default.
const lz4DefaultLevel = 9

func compressLZ4(level int, dst, src []byte) ([]byte, error) {
	if level < 1 || level > 17 || level == lz4DefaultLevel {
		level = 0
	}
	pool := &lz4Encoders[min(level, 9)]
	e := pool.Get().(*lz4Encoder)
	e.out.b = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if err == nil {
		err = e.w.Close()
	}
	out := e.out.b
	e.out.b = nil
	pool.Put(e)
	if err != nil {
		return dst, fmt.Errorf("compress lz4: %w", err)
	}
	return out, nil
}

func decompressLZ4(dst, src []byte, maxSize int, progress progressFunc) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer func() {
		d.r.Reset(nil)
		d.src.Reset(nil)
		lz4Decoders.Put(d)
	}()
	d.src.Reset(src)
	d.r.Reset(&d.src)
	// Frames from Kafka clients carry no content size; guess a typical
	// record batch ratio and let readBounded grow from there.
	out, err := readBounded(dst, d.r, maxSize, min(4*len(src), maxSize), d.probe[:], progress)
	return finishRead(CompressionLZ4, dst, out, err, maxSize)
}

// ---- zstd ----

// The largest frame window (history) a zstd frame may declare. Streaming
// decoders allocate the declared window up front, so a tiny frame declaring
// a huge one is a memory bomb of its own. Windows up to zstdMinWindowLimit
// are always accepted: zstd levels 1-19 declare at most 8 MiB, and the Java
// producer's default level 3 declares 2 MiB. Beyond that a frame may declare
// as much window as the caller allows output, up to zstdMaxWindowLimit,
// the reference decoder's default limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27)
// and so the Java client's, which ultra levels 20-22 can reach.
const (
	zstdMinWindowLimit = 8 << 20
	zstdMaxWindowLimit = 128 << 20
)

func zstdWindowLimit(maxSize int) uint64 {
	return uint64(min(max(maxSize, zstdMinWindowLimit), zstdMaxWindowLimit))
}

// zstdMaxRatio bounds a frame content size hint: an RLE block turns 4 bytes
// into 128 KiB.
const zstdMaxRatio = 1 << 15

type zstdDecoder struct {
	d      *zstd.Decoder
	src    bytes.Reader
	window uint64 // the decoder's current window limit
	probe  [probeSize]byte
}

var (
	zstdDecoders = sync.Pool{New: func() any {
		// Concurrency 1 decodes synchronously in the caller's goroutine:
		// nothing to Close when the pool drops a decoder.
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecodeBuffersBelow(0),
			zstd.WithDecoderMaxWindow(zstdMinWindowLimit),
			zstd.WithDecoderMaxMemory(zstdMinWindowLimit),
		)
		if err != nil {
			return err
		}
		return &zstdDecoder{d: d, window: zstdMinWindowLimit}
	}}

	// zstdEncoders are shared, one per speed: EncodeAll is safe for
	// concurrent use and keeps its own pool of block encoders.
	zstdEncoders = func() map[zstd.EncoderLevel]func() (*zstd.Encoder, error) {
		m := map[zstd.EncoderLevel]func() (*zstd.Encoder, error){}
		for _, l := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression} {
			m[l] = sync.OnceValues(func() (*zstd.Encoder, error) {
				return zstd.NewWriter(nil,
					zstd.WithEncoderLevel(l),
					zstd.WithZeroFrames(true), // empty input still yields a valid frame
				)
			})
		}
		return m
	}()
)

// zstdEncoder is the encoder for a zstd level (DefaultLevel: 3, Kafka's).
func zstdEncoder(level int) (*zstd.Encoder, error) {
	speed := zstd.SpeedDefault
	if level != DefaultLevel && level >= -131072 && level <= 22 {
		speed = zstd.EncoderLevelFromZstd(level)
	}
	return zstdEncoders[speed]()
}

func decompressZstd(dst, src []byte, maxSize int, progress progressFunc) ([]byte, error) {
	v := zstdDecoders.Get()
	d, ok := v.(*zstdDecoder)
	if !ok {
		return dst, fmt.Errorf("decompress zstd: new decoder: %w", v.(error))
	}
	defer func() {
		_ = d.d.Reset(nil)
		d.src.Reset(nil)
		zstdDecoders.Put(d)
	}()
	hint := 0
	var h zstd.Header
	if h.Decode(src) == nil && h.HasFCS {
		if h.FrameContentSize > uint64(maxSize) {
			return dst, tooLarge(CompressionZstd, maxSize)
		}
		if h.FrameContentSize <= zstdMaxRatio*uint64(len(src)) {
			hint = int(h.FrameContentSize)
		}
	}
	d.src.Reset(src)
	var err error
	if w := zstdWindowLimit(maxSize); w != d.window {
		err = d.d.ResetWithOptions(&d.src, zstd.WithDecoderMaxWindow(w), zstd.WithDecoderMaxMemory(w))
		if err == nil {
			d.window = w
		}
	} else {
		err = d.d.Reset(&d.src)
	}
	if err != nil {
		return finishRead(CompressionZstd, dst, nil, err, maxSize)
	}
	out, err := readBounded(dst, d.d, maxSize, hint, d.probe[:], progress)
	return finishRead(CompressionZstd, dst, out, err, maxSize)
}
