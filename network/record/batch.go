package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Byte layout of a v2 record batch header (Kafka's DefaultRecordBatch). All
// integers are big-endian.
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21
	offLastOffsetDelta      = 23
	offBaseTimestamp        = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offRecordCount          = 57

	// HeaderSize is the size of the batch header before the records: 61.
	HeaderSize = 61
	// LogOverhead is the part of the header not counted in BatchLength:
	// base offset (8) and the length field itself (4).
	LogOverhead = 12
	// minBatchLength is the smallest legal BatchLength: a header with no records.
	minBatchLength = HeaderSize - LogOverhead

	// MagicV2 is the only batch format Keel reads and writes.
	MagicV2 = 2

	// NoProducerID, NoProducerEpoch and NoSequence mark a batch that is not
	// from an idempotent producer.
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
	// NoPartitionLeaderEpoch is what producers send before the broker stamps
	// the leader epoch in.
	NoPartitionLeaderEpoch int32 = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded 61-byte header of one record batch. It is a plain
// value: decoding it never allocates.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the length field: len(batch) - 12
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch's size in bytes, header included.
func (h *BatchHeader) Size() int { return int(h.BatchLength) + LogOverhead }

// LastOffset is the offset of the batch's last record.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch: the log end offset once it is appended.
func (h *BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec the records are compressed with.
func (h *BatchHeader) Compression() Compression {
	return Compression(h.Attributes & attrCompressionMask)
}

// TimestampType says whether MaxTimestamp is the producer's or the broker's.
func (h *BatchHeader) TimestampType() TimestampType {
	if h.Attributes&attrTimestampType != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports the transactional bit.
func (h *BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports a control batch (transaction COMMIT/ABORT markers).
func (h *BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// HasProducerID reports whether the batch comes from an idempotent producer.
func (h *BatchHeader) HasProducerID() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record, wrapping
// at int32 max as Kafka's DefaultRecordBatch.incrementSequence does.
func (h *BatchHeader) LastSequence() int32 {
	if h.BaseSequence == NoSequence {
		return NoSequence
	}
	return IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// IncrementSequence adds increment to a producer sequence number, wrapping
// from int32 max to 0 (KIP-98).
func IncrementSequence(seq, increment int32) int32 {
	if seq > int32(^uint32(0)>>1)-increment {
		return increment - (int32(^uint32(0)>>1) - seq) - 1
	}
	return seq + increment
}

// PeekBatchSize reads just enough of b to say how long the batch starting at
// b[0] is. It returns ErrShortBuffer when b holds fewer than 17 bytes (length
// and magic), and ErrCorruptMessage when the length cannot be a v2 batch.
func PeekBatchSize(b []byte) (int, error) {
	if len(b) < offMagic+1 {
		return 0, ErrShortBuffer
	}
	n := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if n < minBatchLength {
		return 0, fmt.Errorf("batch length %d below the %d-byte minimum: %w", n, minBatchLength, ErrCorruptMessage)
	}
	return int(n) + LogOverhead, nil
}

// ParseHeader decodes the header at the start of b without checking the CRC
// and without allocating. b may hold more than one batch. It fails with
// ErrShortBuffer if b is shorter than a header, ErrUnsupportedMagic if the
// magic byte is not 2, and ErrCorruptMessage if the length field is
// impossible.
func ParseHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(b) < HeaderSize {
		return h, ErrShortBuffer
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
	if h.Magic != MagicV2 {
		return h, fmt.Errorf("magic %d: %w", h.Magic, ErrUnsupportedMagic)
	}
	if h.BatchLength < minBatchLength {
		return h, fmt.Errorf("batch length %d below the %d-byte minimum: %w", h.BatchLength, minBatchLength, ErrCorruptMessage)
	}
	return h, nil
}

// ComputeCRC returns the CRC-32C (Castagnoli) of a whole batch as Kafka
// defines it: over everything from the attributes to the end. The base
// offset, length, leader epoch and magic are outside it, which is why a
// broker can assign offsets and stamp leader epochs without recomputing.
func ComputeCRC(batch []byte) uint32 {
	return crc32.Checksum(batch[offAttributes:], castagnoli)
}

// CheckBatch validates the framing of one whole batch: b must be exactly one
// batch (len(b) == BatchLength+12), magic 2, a CRC that matches, a record
// count and last offset delta that are not negative, and, for a batch with
// records, a last offset delta below the record count when uncompressed
// records cannot be counted otherwise. It does not look inside the records;
// ValidateRecords does. It never allocates.
func CheckBatch(b []byte) (BatchHeader, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("batch length %d does not match %d bytes: %w", h.BatchLength, len(b)-LogOverhead, ErrCorruptMessage)
	}
	if got := ComputeCRC(b); got != h.CRC {
		return h, fmt.Errorf("crc %08x, computed %08x: %w", h.CRC, got, ErrCorruptMessage)
	}
	if h.RecordCount < 0 || h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("record count %d, last offset delta %d: %w", h.RecordCount, h.LastOffsetDelta, ErrInvalidRecord)
	}
	if h.Compression() > CompressionZstd {
		return h, fmt.Errorf("attributes %#x: %w", h.Attributes, ErrUnsupportedCompression)
	}
	return h, nil
}

// SetBaseOffset rewrites the base offset of the batch at b in place. The
// CRC does not cover it.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch stamps the leader epoch into the batch at b in
// place (outside the CRC), as a leader does on append (KIP-101).
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime rewrites the batch at b for
// message.timestamp.type=LogAppendTime: the timestamp-type bit is set and the
// max timestamp becomes ts. Both are inside the CRC, so it is recomputed.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:]) | attrTimestampType
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
}

// RecordsBytes returns the part of the batch after the header: the records,
// compressed with the batch's codec.
func RecordsBytes(b []byte) []byte { return b[HeaderSize:] }
