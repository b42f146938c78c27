package record

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// RecordHeader is one key/value header of a record (KIP-82). A nil Value is
// a null header value.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one record of a batch, with its offset and timestamp already
// resolved against the batch header. Key and Value alias the buffer the
// record was read from; nil means null (length -1), which differs from an
// empty slice.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Offset         int64
	Timestamp      int64
	Key            []byte
	Value          []byte
	Headers        []RecordHeader
}

// varint decodes Kafka's zigzag varints (the protobuf encoding), returning
// n <= 0 on a short or overlong encoding. Validation decodes six or more per
// record, nearly all of one or two bytes (lengths and deltas under 8192):
// those are decoded here without binary.Varint's loop, with the same
// results for every input.
func varint(b []byte) (int64, int) {
	if len(b) >= 2 {
		if b[0] < 0x80 {
			u := uint64(b[0])
			return int64(u>>1) ^ -int64(u&1), 1
		}
		if b[1] < 0x80 {
			u := uint64(b[0]&0x7f) | uint64(b[1])<<7
			return int64(u>>1) ^ -int64(u&1), 2
		}
	}
	return binary.Varint(b)
}

// RecordIterator walks the uncompressed records of one batch. It is a value
// type; copy it to rewind. It never reads past the bytes it was given nor
// past the record count of the header, and allocates only for headers.
type RecordIterator struct {
	buf       []byte
	remaining int32
	base      int64
	baseTS    int64
	logAppend bool
	maxTS     int64
	err       error
}

// NewRecordIterator iterates records, the uncompressed record bytes of the
// batch described by h (for an uncompressed batch, RecordsBytes(batch)).
func NewRecordIterator(h BatchHeader, records []byte) RecordIterator {
	return RecordIterator{
		buf:       records,
		remaining: h.RecordCount,
		base:      h.BaseOffset,
		baseTS:    h.BaseTimestamp,
		logAppend: h.TimestampType() == LogAppendTime,
		maxTS:     h.MaxTimestamp,
	}
}

// Next decodes the next record into r. It returns false at the end or on
// error; Err tells which.
func (it *RecordIterator) Next(r *Record) bool {
	if it.err != nil || it.remaining <= 0 {
		if it.err == nil && it.remaining == 0 && len(it.buf) != 0 {
			it.err = fmt.Errorf("%d bytes after the last record: %w", len(it.buf), ErrInvalidRecord)
		}
		return false
	}
	body, rest, err := splitRecord(it.buf)
	if err != nil {
		it.err = err
		return false
	}
	if err := decodeRecord(body, r, true); err != nil {
		it.err = err
		return false
	}
	r.Offset = it.base + int64(r.OffsetDelta)
	r.Timestamp = it.baseTS + r.TimestampDelta
	if it.logAppend {
		r.Timestamp = it.maxTS
	}
	it.buf = rest
	it.remaining--
	return true
}

// Err is the error that stopped iteration, or nil at a clean end.
func (it *RecordIterator) Err() error { return it.err }

// short2 decodes a zigzag varint of one or two bytes at b[p:], returning
// the position after it, or -1 when b holds no such varint there (a longer
// or a cut encoding: skimRecord then leaves the record to the careful
// decoder). Small enough to be inlined.
func short2(b []byte, p int) (int64, int) {
	var u uint64
	switch {
	case p < len(b) && b[p] < 0x80:
		u = uint64(b[p])
		p++
	case p+1 < len(b) && b[p+1] < 0x80:
		u = uint64(b[p]&0x7f) | uint64(b[p+1])<<7
		p += 2
	default:
		return 0, -1
	}
	return int64(u>>1) ^ -int64(u&1), p
}

// skimRecord is validation's fast path over the length-prefixed record at
// the start of b, for the records producers send: every varint of one or
// two bytes (lengths and deltas under 8192). It checks what splitRecord and
// decodeRecord (without headers) check and returns the record's timestamp
// and offset deltas, whether its key is null, and the bytes the record
// takes with its length. ok is false for a record of another shape and for
// a malformed one alike: the caller then decodes it the careful way, which
// accepts the former and names what is wrong with the latter. When ok, the
// careful way gives the same answer (FuzzSkimRecord).
func skimRecord(b []byte) (tsDelta, offDelta int64, nullKey bool, size int, ok bool) {
	length, p := short2(b, 0)
	if p < 0 || length <= 0 || length > int64(len(b)-p) {
		return
	}
	end := p + int(length)
	body := b[:end]
	p++ // attributes
	if tsDelta, p = short2(body, p); p < 0 {
		return
	}
	if offDelta, p = short2(body, p); p < 0 || offDelta < 0 {
		return
	}
	var n int64
	for field := 0; field < 2; field++ { // key, value
		if n, p = short2(body, p); p < 0 {
			return
		}
		if n == -1 {
			nullKey = nullKey || field == 0
			continue
		}
		if n < 0 || n > int64(end-p) {
			return
		}
		p += int(n)
	}
	var headers int64
	if headers, p = short2(body, p); p < 0 || headers < 0 {
		return
	}
	for ; headers > 0; headers-- {
		// A header key is never null; its value may be.
		if n, p = short2(body, p); p < 0 || n < 0 || n > int64(end-p) {
			return
		}
		p += int(n)
		if n, p = short2(body, p); p < 0 {
			return
		}
		if n != -1 {
			if n < 0 || n > int64(end-p) {
				return
			}
			p += int(n)
		}
	}
	if p != end {
		return
	}
	return tsDelta, offDelta, nullKey, end, true
}

// splitRecord cuts the length-prefixed record at the start of b.
func splitRecord(b []byte) (body, rest []byte, err error) {
	length, n := varint(b)
	if n <= 0 {
		return nil, nil, fmt.Errorf("record length varint: %w", ErrInvalidRecord)
	}
	if length < 0 {
		return nil, nil, fmt.Errorf("record length %d: %w", length, ErrInvalidRecord)
	}
	if length > int64(len(b)-n) {
		return nil, nil, fmt.Errorf("record length %d with %d bytes left: %w", length, len(b)-n, ErrInvalidRecord)
	}
	return b[n : n+int(length)], b[n+int(length):], nil
}

// decodeRecord parses one record body (after its length). With withHeaders
// false it checks the headers' framing without allocating them.
func decodeRecord(b []byte, r *Record, withHeaders bool) error {
	if len(b) < 1 {
		return fmt.Errorf("empty record: %w", ErrInvalidRecord)
	}
	r.Attributes = int8(b[0])
	b = b[1:]
	tsDelta, n := varint(b)
	if n <= 0 {
		return fmt.Errorf("timestamp delta varint: %w", ErrInvalidRecord)
	}
	r.TimestampDelta = tsDelta
	b = b[n:]
	offDelta, n := varint(b)
	if n <= 0 || offDelta < 0 || offDelta > int64(^uint32(0)>>1) {
		return fmt.Errorf("offset delta: %w", ErrInvalidRecord)
	}
	r.OffsetDelta = int32(offDelta)
	b = b[n:]
	var err error
	if r.Key, b, err = readNullableBytes(b, "key"); err != nil {
		return err
	}
	if r.Value, b, err = readNullableBytes(b, "value"); err != nil {
		return err
	}
	count, n := varint(b)
	if n <= 0 || count < 0 {
		return fmt.Errorf("header count: %w", ErrInvalidRecord)
	}
	b = b[n:]
	// Each header needs at least two bytes, so a count above that is a lie
	// we refuse before allocating for it.
	if count > int64(len(b)/2) {
		return fmt.Errorf("header count %d with %d bytes left: %w", count, len(b), ErrInvalidRecord)
	}
	r.Headers = r.Headers[:0]
	if withHeaders && count > 0 && cap(r.Headers) < int(count) {
		r.Headers = make([]RecordHeader, 0, count)
	}
	for i := int64(0); i < count; i++ {
		var k, v []byte
		if k, b, err = readNullableBytes(b, "header key"); err != nil {
			return err
		}
		if k == nil {
			return fmt.Errorf("null header key: %w", ErrInvalidRecord)
		}
		if v, b, err = readNullableBytes(b, "header value"); err != nil {
			return err
		}
		if withHeaders {
			r.Headers = append(r.Headers, RecordHeader{Key: string(k), Value: v})
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%d bytes after the record's headers: %w", len(b), ErrInvalidRecord)
	}
	return nil
}

func readNullableBytes(b []byte, what string) (v, rest []byte, err error) {
	l, n := varint(b)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%s length varint: %w", what, ErrInvalidRecord)
	}
	b = b[n:]
	if l == -1 {
		return nil, b, nil
	}
	if l < 0 || l > int64(len(b)) {
		return nil, nil, fmt.Errorf("%s length %d with %d bytes left: %w", what, l, len(b), ErrInvalidRecord)
	}
	return b[:l:l], b[l:], nil
}

// RecordStats summarises a validated batch's records.
type RecordStats struct {
	// MaxTimestamp is the largest record timestamp (CreateTime).
	MaxTimestamp int64
	// MinTimestamp is the smallest record timestamp (CreateTime).
	MinTimestamp int64
	// NullKeys is the number of records whose key is null.
	NullKeys int
	// UncompressedBytes is the size of the record bytes after
	// decompression; for a batch refused while it was inflated, how much
	// had been inflated by then.
	UncompressedBytes int
}

// ValidateRecords checks what a broker must check before appending a
// producer's batch (Kafka's LogValidator): every record parses and consumes
// exactly its length, the records fill the batch exactly, their number
// matches the header's record count and lastOffsetDelta+1, and their offset
// deltas run 0, 1, 2, ... For a compressed batch the records are
// decompressed into scratch (grown as needed and returned for reuse), never
// past maxUncompressed bytes. It does not allocate for uncompressed batches.
// The uncompressed records are RecordsBytes(batch) for an uncompressed batch
// and the returned scratch otherwise, for a caller that needs a second pass
// (NewRecordIterator) to name the records breaking a policy.
//
// Records are checked as they are inflated, as Kafka's validator reads a
// compressed batch as a stream: a batch is refused at its first bad
// record, at a record claiming more bytes than the bound leaves, or at
// bytes after its last record, without inflating the rest. A decompression
// bomb of zeros costs the first 64 KiB of its output, not the bound.
func ValidateRecords(batch []byte, h BatchHeader, scratch []byte, maxUncompressed int) (RecordStats, []byte, error) {
	w := recordWalker{h: h, bound: maxUncompressed, stats: RecordStats{MaxTimestamp: -1, MinTimestamp: -1}}
	if h.RecordCount <= 0 {
		return w.stats, scratch, fmt.Errorf("batch with no records: %w", ErrInvalidRecord)
	}
	if int64(h.LastOffsetDelta)+1 != int64(h.RecordCount) {
		return w.stats, scratch, fmt.Errorf("record count %d but last offset delta %d: %w", h.RecordCount, h.LastOffsetDelta, ErrInvalidRecord)
	}
	if c := h.Compression(); c != CompressionNone {
		return validateCompressed(c, batch, &w, scratch)
	}
	records := RecordsBytes(batch)
	w.stats.UncompressedBytes = len(records)
	err := w.walk(records, true)
	return w.stats, scratch, err
}

// walkers are the compressed path's recordWalkers: its progressFunc, a
// method value, would otherwise move every walker to the heap, the
// uncompressed path's too.
var walkers = sync.Pool{New: func() any { return new(recordWalker) }}

// validateCompressed is ValidateRecords' path for a compressed batch: the
// walker (set up by the caller) checks the records as they are inflated.
func validateCompressed(c Compression, batch []byte, w0 *recordWalker, scratch []byte) (RecordStats, []byte, error) {
	w := walkers.Get().(*recordWalker)
	*w = *w0
	defer func() {
		*w = recordWalker{r: Record{Headers: w.r.Headers[:0]}}
		walkers.Put(w)
	}()
	out, err := decompress(c, scratch[:0], RecordsBytes(batch), w.bound, w.walkPart)
	if err != nil {
		if w.err != nil {
			// The walker's own, already in context.
			w.stats.UncompressedBytes = w.inflated
			return w.stats, scratch, w.err
		}
		return w.stats, scratch, fmt.Errorf("decompress %s batch: %w", c, err)
	}
	w.stats.UncompressedBytes = len(out)
	err = w.walk(out, true)
	return w.stats, out, err
}

// recordWalker validates one batch's records in order, resuming where it
// stopped: over the whole records at once, or over a decompression's output
// as it grows (walkPart), where the last record may still be cut short.
type recordWalker struct {
	h        BatchHeader
	bound    int   // the most uncompressed bytes the batch may have
	next     int32 // the index of the next record to check
	pos      int   // where that record starts in the records
	stats    RecordStats
	r        Record // the careful decoder's scratch
	err      error  // what stopped walkPart
	inflated int    // the output walkPart saw last
}

// walkPart is the progressFunc of ValidateRecords: it checks the complete
// records among those inflated so far.
func (w *recordWalker) walkPart(out []byte) error {
	w.inflated = len(out)
	w.err = w.walk(out, false)
	return w.err
}

// walk checks the records of records[w.pos:] (records: all the batch's
// uncompressed records when final, else a prefix of them).
func (w *recordWalker) walk(records []byte, final bool) error {
	h := &w.h
	rest := records[w.pos:]
	for ; w.next < h.RecordCount; w.next++ {
		i := w.next
		tsDelta, offDelta, nullKey, size, ok := skimRecord(rest)
		if !ok {
			if !final {
				if cut, err := w.cutShort(rest); cut || err != nil {
					return err
				}
			}
			// Not the common shape, or malformed: the careful decoder
			// takes it and names what is wrong.
			body, after, err := splitRecord(rest)
			if err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			if err := decodeRecord(body, &w.r, false); err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			tsDelta, offDelta, nullKey, size = w.r.TimestampDelta, int64(w.r.OffsetDelta), w.r.Key == nil, len(rest)-len(after)
		}
		if offDelta != int64(i) {
			return fmt.Errorf("record %d has offset delta %d: %w", i, offDelta, ErrInvalidRecord)
		}
		ts := h.BaseTimestamp + tsDelta
		if ts > w.stats.MaxTimestamp {
			w.stats.MaxTimestamp = ts
		}
		if i == 0 || ts < w.stats.MinTimestamp {
			w.stats.MinTimestamp = ts
		}
		if nullKey {
			w.stats.NullKeys++
		}
		rest = rest[size:]
		w.pos += size
	}
	if len(rest) != 0 {
		// How many is not said: a partial walk does not know yet.
		return fmt.Errorf("bytes after record %d of %d: %w", h.RecordCount, h.RecordCount, ErrInvalidRecord)
	}
	return nil
}

// cutShort reports whether rest, the end of a partial output, holds only
// the start of a record, which the rest of the output will complete; and
// fails a record whose length would take the output past the bound.
func (w *recordWalker) cutShort(rest []byte) (bool, error) {
	length, n := varint(rest)
	switch {
	case n == 0: // the length varint itself is cut
		return true, nil
	case n < 0 || length < 0 || length <= int64(len(rest)-n):
		return false, nil // complete, or malformed: the careful decoder says
	case length > int64(w.bound-w.pos-n):
		return false, fmt.Errorf("record %d claims %d bytes, more than the %d-byte bound leaves: %w",
			w.next, length, w.bound, ErrDecompressedTooLarge)
	}
	return true, nil
}

// Batches iterates the whole batches in a buffer of concatenated batches (a
// fetch response's record set or a segment read). A partial batch at the end
// is not an error: Kafka's fetch may cut the last batch short.
type Batches struct {
	buf []byte
	err error
}

// NewBatches iterates the batches in b.
func NewBatches(b []byte) Batches { return Batches{buf: b} }

// Next returns the next complete batch and its header; false at the end (or
// at a trailing partial batch) or on an error Err reports. The CRC is checked.
func (it *Batches) Next() ([]byte, BatchHeader, bool) {
	if it.err != nil {
		return nil, BatchHeader{}, false
	}
	size, err := PeekBatchSize(it.buf)
	if err == ErrShortBuffer || (err == nil && size > len(it.buf)) {
		it.buf = nil
		return nil, BatchHeader{}, false
	}
	if err != nil {
		it.err = err
		return nil, BatchHeader{}, false
	}
	b := it.buf[:size:size]
	h, err := CheckBatch(b)
	if err != nil {
		it.err = err
		return nil, BatchHeader{}, false
	}
	it.buf = it.buf[size:]
	return b, h, true
}

// Err is the error that stopped iteration.
func (it *Batches) Err() error { return it.err }
