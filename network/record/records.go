package record

import (
	"encoding/binary"
	"fmt"
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
	if length < 0 || length > int64(len(b)-n) {
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
	// UncompressedBytes is the size of the record bytes after decompression.
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
func ValidateRecords(batch []byte, h BatchHeader, scratch []byte, maxUncompressed int) (RecordStats, []byte, error) {
	stats := RecordStats{MaxTimestamp: -1, MinTimestamp: -1}
	records := RecordsBytes(batch)
	if c := h.Compression(); c != CompressionNone {
		var err error
		scratch, err = Decompress(c, scratch[:0], records, maxUncompressed)
		if err != nil {
			return stats, scratch, fmt.Errorf("decompress %s batch: %w", c, err)
		}
		records = scratch
	}
	stats.UncompressedBytes = len(records)
	if h.RecordCount == 0 {
		return stats, scratch, fmt.Errorf("batch with no records: %w", ErrInvalidRecord)
	}
	if int64(h.LastOffsetDelta)+1 != int64(h.RecordCount) {
		return stats, scratch, fmt.Errorf("record count %d but last offset delta %d: %w", h.RecordCount, h.LastOffsetDelta, ErrInvalidRecord)
	}
	var r Record
	for i := int32(0); i < h.RecordCount; i++ {
		tsDelta, offDelta, nullKey, size, ok := skimRecord(records)
		if !ok {
			// Not the common shape, or malformed: the careful decoder
			// takes it and names what is wrong.
			body, rest, err := splitRecord(records)
			if err != nil {
				return stats, scratch, fmt.Errorf("record %d: %w", i, err)
			}
			if err := decodeRecord(body, &r, false); err != nil {
				return stats, scratch, fmt.Errorf("record %d: %w", i, err)
			}
			tsDelta, offDelta, nullKey, size = r.TimestampDelta, int64(r.OffsetDelta), r.Key == nil, len(records)-len(rest)
		}
		if offDelta != int64(i) {
			return stats, scratch, fmt.Errorf("record %d has offset delta %d: %w", i, offDelta, ErrInvalidRecord)
		}
		ts := h.BaseTimestamp + tsDelta
		if ts > stats.MaxTimestamp {
			stats.MaxTimestamp = ts
		}
		if i == 0 || ts < stats.MinTimestamp {
			stats.MinTimestamp = ts
		}
		if nullKey {
			stats.NullKeys++
		}
		records = records[size:]
	}
	if len(records) != 0 {
		return stats, scratch, fmt.Errorf("%d bytes after record %d of %d: %w", len(records), h.RecordCount, h.RecordCount, ErrInvalidRecord)
	}
	return stats, scratch, nil
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
