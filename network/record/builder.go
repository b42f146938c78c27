package record

import (
	"encoding/binary"
	"fmt"
)

// BatchOptions are the header fields of a batch under construction.
type BatchOptions struct {
	Compression          Compression
	PartitionLeaderEpoch int32 // NoPartitionLeaderEpoch from producers
	ProducerID           int64 // NoProducerID unless idempotent
	ProducerEpoch        int16
	BaseSequence         int32 // NoSequence unless idempotent
	Transactional        bool
	Control              bool
}

// DefaultBatchOptions is a plain, non-idempotent, uncompressed batch.
func DefaultBatchOptions() BatchOptions {
	return BatchOptions{
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
	}
}

// BatchBuilder accumulates records and encodes them as one v2 batch. The
// base offset is 0: the broker assigns real offsets on append. The first
// record's timestamp becomes the batch's base timestamp, as in the Java
// client. A BatchBuilder is not safe for concurrent use; Reset reuses its
// buffers.
type BatchBuilder struct {
	opts    BatchOptions
	count   int32
	baseTS  int64
	maxTS   int64
	records []byte
}

// NewBatchBuilder returns an empty builder for a batch with opts.
func NewBatchBuilder(opts BatchOptions) *BatchBuilder {
	return &BatchBuilder{opts: opts, maxTS: -1}
}

// Reset empties the builder for a new batch with opts, keeping its buffer.
func (b *BatchBuilder) Reset(opts BatchOptions) {
	b.opts = opts
	b.count = 0
	b.maxTS = -1
	b.records = b.records[:0]
}

// NumRecords is how many records were appended.
func (b *BatchBuilder) NumRecords() int { return int(b.count) }

// UncompressedSize is the batch's size if it were built uncompressed now.
func (b *BatchBuilder) UncompressedSize() int { return HeaderSize + len(b.records) }

// Append adds a record. nil key or value encode as null.
func (b *BatchBuilder) Append(timestamp int64, key, value []byte, headers []RecordHeader) {
	if b.count == 0 {
		b.baseTS = timestamp
	}
	if timestamp > b.maxTS {
		b.maxTS = timestamp
	}
	b.records = appendRecord(b.records, timestamp-b.baseTS, b.count, key, value, headers)
	b.count++
}

// Build appends the encoded batch to dst and returns it. An empty builder
// is an error: Kafka never writes a batch with no records.
func (b *BatchBuilder) Build(dst []byte) ([]byte, error) {
	if b.count == 0 {
		return dst, fmt.Errorf("build batch: no records")
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	var err error
	if b.opts.Compression == CompressionNone {
		dst = append(dst, b.records...)
	} else if dst, err = Compress(b.opts.Compression, dst, b.records); err != nil {
		return dst[:start], fmt.Errorf("build batch: %w", err)
	}
	writeHeader(dst[start:], b.opts, b.count, b.baseTS, b.maxTS)
	return dst, nil
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func nullableLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
}

// ControlType is the kind of a transaction marker (the key of a control record).
type ControlType int16

const (
	// ControlAbort marks an aborted transaction.
	ControlAbort ControlType = 0
	// ControlCommit marks a committed transaction.
	ControlCommit ControlType = 1
)

// BuildControlBatch appends a transaction-marker batch (one control record:
// key = version 0 + type, value = version 0 + coordinator epoch), as the
// transaction coordinator's WriteTxnMarkers writes them.
func BuildControlBatch(dst []byte, typ ControlType, coordinatorEpoch int32, producerID int64, producerEpoch int16, timestamp int64) ([]byte, error) {
	opts := DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch = producerID, producerEpoch
	opts.Transactional, opts.Control = true, true
	b := NewBatchBuilder(opts)
	key := make([]byte, 4)
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	value := make([]byte, 6)
	binary.BigEndian.PutUint32(value[2:], uint32(coordinatorEpoch))
	b.Append(timestamp, key, value, nil)
	return b.Build(dst)
}

// ParseControlRecord decodes a control record's key into its marker type.
func ParseControlRecord(key []byte) (ControlType, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("control record key of %d bytes: %w", len(key), ErrInvalidRecord)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}
