package storage

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"

	"github.com/keelstream/keel/network/record"
)

// The record-level half of the log cleaner (Kafka's Cleaner.buildOffsetMap
// and MemoryRecords.filterTo): the offset map of the dirty section, and the
// rewrite of one batch keeping only the records that survive it. Nothing
// here touches a Log or a file; cleaner.go drives it.

// deleteHorizonFlag is the batch attribute bit of KIP-534 (Kafka 3.0): the
// batch's base timestamp holds its delete horizon, the time after which the
// cleaner may remove its tombstones, and the records' timestamp deltas are
// relative to it (so every client computes the same record timestamps
// whether or not it knows the flag).
const deleteHorizonFlag = 0x40

// offsetMapEntryBytes is what one key costs in the offset map (two 8-byte
// hashes, the offset and the Go map's own overhead), to turn
// log.cleaner.dedupe.buffer.size into a number of keys.
const offsetMapEntryBytes = 48

// keyHash identifies a key in the offset map by 128 bits of hash, as
// Kafka's SkimpyOffsetMap identifies it by an MD5 digest: memory per key is
// fixed whatever the key's size, and a collision (probability ~2^-64 at
// billions of keys) would at worst drop one older value of another key.
type keyHash [2]uint64

// offsetMap maps each key of the dirty section to the offset of its latest
// record. Owned by one cleaning pass; not safe for concurrent use.
type offsetMap struct {
	seed0, seed1 maphash.Seed
	m            map[keyHash]int64
	// latest is the largest offset put (the end of what was mapped).
	latest int64
}

func newOffsetMap() *offsetMap {
	return &offsetMap{seed0: maphash.MakeSeed(), seed1: maphash.MakeSeed(), m: map[keyHash]int64{}, latest: -1}
}

func (o *offsetMap) hash(key []byte) keyHash {
	return keyHash{maphash.Bytes(o.seed0, key), maphash.Bytes(o.seed1, key)}
}

func (o *offsetMap) put(key []byte, offset int64) {
	o.m[o.hash(key)] = offset
	o.latest = max(o.latest, offset)
}

func (o *offsetMap) get(key []byte) (int64, bool) {
	off, ok := o.m[o.hash(key)]
	return off, ok
}

// rawRecord is one record of an uncompressed record section: its bytes
// (length prefix included) and the fields the cleaner decides on.
type rawRecord struct {
	raw            []byte
	body           []byte // after the length prefix
	tsDeltaEnd     int    // index in body just past the timestamp delta
	timestampDelta int64
	offsetDelta    int32
	key            []byte // nil: null key
	nullValue      bool
}

// nextRawRecord parses the record at the start of b. It reads only up to
// the value's length, not the headers: the record is copied whole.
func nextRawRecord(b []byte) (rawRecord, []byte, error) {
	var r rawRecord
	length, n := binary.Varint(b)
	if n <= 0 || length < 1 || length > int64(len(b)-n) {
		return r, nil, fmt.Errorf("record length: %w", record.ErrInvalidRecord)
	}
	end := n + int(length)
	r.raw, r.body = b[:end], b[n:end]
	p := 1 // attributes
	ts, k := binary.Varint(r.body[p:])
	if k <= 0 {
		return r, nil, fmt.Errorf("record timestamp delta: %w", record.ErrInvalidRecord)
	}
	r.timestampDelta = ts
	p += k
	r.tsDeltaEnd = p
	od, k := binary.Varint(r.body[p:])
	if k <= 0 || od < 0 || od > int64(^uint32(0)>>1) {
		return r, nil, fmt.Errorf("record offset delta: %w", record.ErrInvalidRecord)
	}
	r.offsetDelta = int32(od)
	p += k
	kl, k := binary.Varint(r.body[p:])
	if k <= 0 || kl < -1 || kl > int64(len(r.body)-p-k) {
		return r, nil, fmt.Errorf("record key length: %w", record.ErrInvalidRecord)
	}
	p += k
	if kl >= 0 {
		r.key = r.body[p : p+int(kl) : p+int(kl)]
		p += int(kl)
	}
	vl, k := binary.Varint(r.body[p:])
	if k <= 0 || vl < -1 || vl > int64(len(r.body)-p-k) {
		return r, nil, fmt.Errorf("record value length: %w", record.ErrInvalidRecord)
	}
	r.nullValue = vl == -1
	return r, b[end:], nil
}

// uncompressedRecords returns the record section of batch, decompressed
// into scratch when the batch is compressed.
func uncompressedRecords(batch []byte, h record.BatchHeader, scratch []byte, maxUncompressed int) ([]byte, []byte, error) {
	rs := record.RecordsBytes(batch)
	c := h.Compression()
	if c == record.CompressionNone {
		return rs, scratch, nil
	}
	out, err := record.Decompress(c, scratch[:0], rs, maxUncompressed)
	if err != nil {
		return nil, out, fmt.Errorf("decompress %s batch at offset %d: %w", c, h.BaseOffset, err)
	}
	return out, out, nil
}

// mapBatch puts every keyed record of a data batch into the offset map.
func (o *offsetMap) mapBatch(batch []byte, h record.BatchHeader, scratch []byte, maxUncompressed int) ([]byte, error) {
	if h.IsControl() || h.RecordCount == 0 {
		return scratch, nil
	}
	rs, scratch, err := uncompressedRecords(batch, h, scratch, maxUncompressed)
	if err != nil {
		return scratch, err
	}
	for i := int32(0); i < h.RecordCount && len(rs) > 0; i++ {
		r, rest, err := nextRawRecord(rs)
		if err != nil {
			return scratch, fmt.Errorf("batch at offset %d, record %d: %w", h.BaseOffset, i, err)
		}
		if r.key != nil {
			o.put(r.key, h.BaseOffset+int64(r.offsetDelta))
		}
		rs = rest
	}
	return scratch, nil
}

// batchFilter rewrites batches for one cleaning pass: Kafka's
// Cleaner.shouldRetainRecord plus its batch retention rules. Not safe for
// concurrent use (it owns scratch buffers).
type batchFilter struct {
	offsets *offsetMap
	// nowMs is the pass's clock, against which delete horizons are checked.
	nowMs int64
	// deleteRetentionMs is delete.retention.ms: the horizon given to a
	// batch whose tombstones the cleaner sees for the first time.
	deleteRetentionMs int64
	// producerBatches are the base offsets of the batches the idempotent
	// producer state remembers: kept, empty if need be, so that the state
	// rebuilt from the log after a restart still answers those retries.
	producerBatches map[int64]bool
	// aborted are the aborted transactions whose batches are dropped.
	aborted         []AbortedTxn
	maxUncompressed int

	scratch  []byte // decompressed records
	out      []byte // the cleaned batches not yet written (cleaner.go)
	records  []byte // the retained records, uncompressed
	retained []rawRecord

	// Counters for the pass's log line and tests.
	recordsRead, recordsKept int64
	tombstonesDropped        int64
}

// filter appends to dst what survives of batch (none of it, all of it
// byte for byte, or a rebuilt batch with the same base offset, last offset
// delta, leader epoch, producer id, epoch and base sequence, codec and
// timestamp type) and returns dst.
//
// A record survives unless it has no key, or a later record of its key is
// in the offset map, or it is a tombstone whose batch's delete horizon has
// passed. A batch keeping tombstones without a horizon gets one: now plus
// delete.retention.ms (KIP-534), so a tombstone lives at least that long
// after the cleaner first saw it. Control batches are kept whole: a
// marker may go only after its transaction's aborted records, and only
// after delete.retention.ms (Kafka's cleaner), which is not done yet
// (cleaner.go). A batch left with no record is dropped, unless the
// producer state remembers it: then its header is kept with no records,
// as Kafka keeps the last batch of each producer.
func (f *batchFilter) filter(dst, batch []byte, h record.BatchHeader) ([]byte, error) {
	f.recordsRead += int64(h.RecordCount)
	if h.IsControl() {
		f.recordsKept += int64(h.RecordCount)
		return append(dst, batch...), nil
	}
	if abortedBatch(f.aborted, &h) {
		if f.producerBatches[h.BaseOffset] {
			return appendEmptyBatch(dst, batch, h), nil
		}
		return dst, nil
	}
	rs, scratch, err := uncompressedRecords(batch, h, f.scratch, f.maxUncompressed)
	f.scratch = scratch
	if err != nil {
		return dst, err
	}
	hasHorizon := h.Attributes&deleteHorizonFlag != 0
	horizonPassed := hasHorizon && h.BaseTimestamp <= f.nowMs
	f.retained = f.retained[:0]
	keptTombstone := false
	logAppendTime := h.TimestampType() == record.LogAppendTime
	maxTS := int64(-1)
	n := int32(0)
	for ; n < h.RecordCount && len(rs) > 0; n++ {
		r, rest, err := nextRawRecord(rs)
		if err != nil {
			return dst, fmt.Errorf("batch at offset %d, record %d: %w", h.BaseOffset, n, err)
		}
		rs = rest
		if r.key == nil {
			continue // compacted topics refuse null keys; Kafka drops them
		}
		if latest, ok := f.offsets.get(r.key); ok && h.BaseOffset+int64(r.offsetDelta) < latest {
			continue
		}
		if r.nullValue {
			if horizonPassed {
				f.tombstonesDropped++
				continue
			}
			keptTombstone = true
		}
		f.retained = append(f.retained, r)
		maxTS = max(maxTS, h.BaseTimestamp+r.timestampDelta)
	}
	if n != h.RecordCount || len(rs) != 0 {
		return dst, fmt.Errorf("batch at offset %d: %d records parsed, header says %d: %w", h.BaseOffset, n, h.RecordCount, record.ErrInvalidRecord)
	}
	setHorizon := keptTombstone && !hasHorizon
	kept := int32(len(f.retained))
	f.recordsKept += int64(kept)
	switch {
	case kept == h.RecordCount && !setHorizon:
		return append(dst, batch...), nil
	case kept == 0:
		if h.HasProducerID() && f.producerBatches[h.BaseOffset] {
			return appendEmptyBatch(dst, batch, h), nil
		}
		return dst, nil
	}
	baseTS := h.BaseTimestamp
	attrs := uint16(h.Attributes)
	if setHorizon {
		baseTS = f.nowMs + f.deleteRetentionMs
		attrs |= deleteHorizonFlag
	}
	f.records = f.records[:0]
	for _, r := range f.retained {
		if !setHorizon {
			f.records = append(f.records, r.raw...)
			continue
		}
		// Re-express the timestamp relative to the new base timestamp:
		// length, attributes, new delta, then the body after the old delta.
		var tmp [binary.MaxVarintLen64]byte
		d := binary.PutVarint(tmp[:], h.BaseTimestamp+r.timestampDelta-baseTS)
		bodyLen := 1 + d + len(r.body) - r.tsDeltaEnd
		f.records = binary.AppendVarint(f.records, int64(bodyLen))
		f.records = append(f.records, r.body[0])
		f.records = append(f.records, tmp[:d]...)
		f.records = append(f.records, r.body[r.tsDeltaEnd:]...)
	}
	if logAppendTime || f.producerBatches[h.BaseOffset] {
		// A remembered producer batch keeps its max timestamp, so that the
		// producer state rebuilt from the log is the state remembered.
		maxTS = h.MaxTimestamp
	}
	start := len(dst)
	dst = append(dst, batch[:record.HeaderSize]...)
	if c := h.Compression(); c != record.CompressionNone {
		if dst, err = record.Compress(c, dst, f.records); err != nil {
			return dst[:start], fmt.Errorf("recompress batch at offset %d: %w", h.BaseOffset, err)
		}
	} else {
		dst = append(dst, f.records...)
	}
	out := dst[start:]
	be := binary.BigEndian
	be.PutUint32(out[8:], uint32(len(out)-record.LogOverhead))
	be.PutUint16(out[21:], attrs)
	be.PutUint64(out[27:], uint64(baseTS))
	be.PutUint64(out[35:], uint64(maxTS))
	be.PutUint32(out[57:], uint32(kept))
	be.PutUint32(out[17:], record.ComputeCRC(out))
	return dst, nil
}

// abortedBatch reports whether h is a data batch of one of the aborted
// transactions: a transactional batch of the transaction's producer between
// its first offset and its marker (a producer's transactions do not
// overlap). Transactions are few; a linear scan is cheaper than an index.
func abortedBatch(aborted []AbortedTxn, h *record.BatchHeader) bool {
	if !h.IsTransactional() || h.IsControl() {
		return false
	}
	for i := range aborted {
		if a := &aborted[i]; a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}

// appendEmptyBatch appends h's header with no records (Kafka's
// DefaultRecordBatch.writeEmptyHeader): same offsets, producer fields and
// timestamps, uncompressed.
func appendEmptyBatch(dst, batch []byte, h record.BatchHeader) []byte {
	start := len(dst)
	dst = append(dst, batch[:record.HeaderSize]...)
	out := dst[start:]
	be := binary.BigEndian
	be.PutUint32(out[8:], uint32(record.HeaderSize-record.LogOverhead))
	be.PutUint16(out[21:], uint16(h.Attributes)&^0x07)
	be.PutUint32(out[57:], 0)
	be.PutUint32(out[17:], record.ComputeCRC(out))
	return dst
}
