package record

import (
	"encoding/binary"
	"fmt"
)

// ProducerBatchBuilder is a BatchBuilder for producers' hot path: records
// are encoded behind a reserved 61-byte header, so an uncompressed batch is
// finished in place — header written, CRC computed — without copying the
// records into a second buffer, and the buffer is reused across batches.
//
// A ProducerBatchBuilder is not safe for concurrent use.
type ProducerBatchBuilder struct {
	opts   BatchOptions
	count  int32
	baseTS int64
	maxTS  int64
	buf    []byte // header space, then the records
	out    []byte // the compressed batch, reused
}

// NewProducerBatchBuilder returns an empty builder whose buffer holds
// capacity bytes of records before it grows.
func NewProducerBatchBuilder(opts BatchOptions, capacity int) *ProducerBatchBuilder {
	b := &ProducerBatchBuilder{buf: make([]byte, HeaderSize, HeaderSize+capacity)}
	b.Reset(opts)
	return b
}

// Reset empties the builder for a new batch with opts, keeping its buffers.
func (b *ProducerBatchBuilder) Reset(opts BatchOptions) {
	b.opts = opts
	b.count = 0
	b.maxTS = -1
	if cap(b.buf) < HeaderSize {
		b.buf = make([]byte, HeaderSize)
	}
	b.buf = b.buf[:HeaderSize]
}

// Grow makes room for n more bytes of records.
func (b *ProducerBatchBuilder) Grow(n int) {
	if cap(b.buf)-len(b.buf) < n {
		grown := make([]byte, len(b.buf), len(b.buf)+n)
		copy(grown, b.buf)
		b.buf = grown
	}
}

// NumRecords is how many records were appended.
func (b *ProducerBatchBuilder) NumRecords() int { return int(b.count) }

// UncompressedSize is the batch's size if it were finished uncompressed now.
func (b *ProducerBatchBuilder) UncompressedSize() int { return len(b.buf) }

// Append adds a record, encoded exactly as BatchBuilder.Append encodes it.
// nil key or value encode as null.
func (b *ProducerBatchBuilder) Append(timestamp int64, key, value []byte, headers []RecordHeader) {
	if b.count == 0 {
		b.baseTS = timestamp
	}
	if timestamp > b.maxTS {
		b.maxTS = timestamp
	}
	buf := appendRecord(b.buf, timestamp-b.baseTS, b.count, key, value, headers)
	b.buf = buf
	b.count++
}

// appendRecord appends one length-prefixed v2 record (attributes 0).
// BatchBuilder and ProducerBatchBuilder encode records through it.
func appendRecord(buf []byte, tsDelta int64, offsetDelta int32, key, value []byte, headers []RecordHeader) []byte {
	size := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta)) +
		nullableLen(key) + nullableLen(value) + varintLen(int64(len(headers)))
	for _, h := range headers {
		size += varintLen(int64(len(h.Key))) + len(h.Key) + nullableLen(h.Value)
	}
	buf = binary.AppendVarint(buf, int64(size))
	buf = append(buf, 0) // attributes: unused by Kafka
	buf = binary.AppendVarint(buf, tsDelta)
	buf = binary.AppendVarint(buf, int64(offsetDelta))
	buf = appendNullable(buf, key)
	buf = appendNullable(buf, value)
	buf = binary.AppendVarint(buf, int64(len(headers)))
	for _, h := range headers {
		buf = binary.AppendVarint(buf, int64(len(h.Key)))
		buf = append(buf, h.Key...)
		buf = appendNullable(buf, h.Value)
	}
	return buf
}

func appendNullable(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}

// writeHeader fills the 61-byte header of batch (records already in place)
// with base offset 0 and computes the CRC.
func writeHeader(batch []byte, opts BatchOptions, count int32, baseTS, maxTS int64) {
	attrs := uint16(opts.Compression) & attrCompressionMask
	if opts.Transactional {
		attrs |= attrTransactional
	}
	if opts.Control {
		attrs |= attrControl
	}
	be := binary.BigEndian
	be.PutUint64(batch[offBaseOffset:], 0)
	be.PutUint32(batch[offBatchLength:], uint32(len(batch)-LogOverhead))
	be.PutUint32(batch[offPartitionLeaderEpoch:], uint32(opts.PartitionLeaderEpoch))
	batch[offMagic] = MagicV2
	be.PutUint16(batch[offAttributes:], attrs)
	be.PutUint32(batch[offLastOffsetDelta:], uint32(count-1))
	be.PutUint64(batch[offBaseTimestamp:], uint64(baseTS))
	be.PutUint64(batch[offMaxTimestamp:], uint64(maxTS))
	be.PutUint64(batch[offProducerID:], uint64(opts.ProducerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(opts.ProducerEpoch))
	be.PutUint32(batch[offBaseSequence:], uint32(opts.BaseSequence))
	be.PutUint32(batch[offRecordCount:], uint32(count))
	be.PutUint32(batch[offCRC:], ComputeCRC(batch))
}

// Finish completes the batch and returns it. An uncompressed batch is the
// builder's own buffer; a compressed one is a second buffer the builder
// also owns. Either stays valid until the next Reset. An empty builder is an
// error: Kafka never writes a batch with no records.
func (b *ProducerBatchBuilder) Finish() ([]byte, error) {
	if b.count == 0 {
		return nil, fmt.Errorf("build batch: no records")
	}
	batch := b.buf
	if b.opts.Compression != CompressionNone {
		out := append(b.out[:0], make([]byte, HeaderSize)...)
		out, err := Compress(b.opts.Compression, out, b.buf[HeaderSize:])
		if err != nil {
			return nil, fmt.Errorf("build batch: %w", err)
		}
		b.out = out
		batch = out
	}
	writeHeader(batch, b.opts, b.count, b.baseTS, b.maxTS)
	return batch, nil
}
