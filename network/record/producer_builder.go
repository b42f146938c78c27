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
	size := 1 + varintLen(timestamp-b.baseTS) + varintLen(int64(b.count)) +
		nullableLen(key) + nullableLen(value) + varintLen(int64(len(headers)))
	for _, h := range headers {
		size += varintLen(int64(len(h.Key))) + len(h.Key) + nullableLen(h.Value)
	}
	buf := binary.AppendVarint(b.buf, int64(size))
	buf = append(buf, 0) // attributes: unused by Kafka
	buf = binary.AppendVarint(buf, timestamp-b.baseTS)
	buf = binary.AppendVarint(buf, int64(b.count))
	buf = appendNullable(buf, key)
	buf = appendNullable(buf, value)
	buf = binary.AppendVarint(buf, int64(len(headers)))
	for _, h := range headers {
		buf = binary.AppendVarint(buf, int64(len(h.Key)))
		buf = append(buf, h.Key...)
		buf = appendNullable(buf, h.Value)
	}
	b.buf = buf
	b.count++
}

func appendNullable(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
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
	attrs := uint16(b.opts.Compression) & attrCompressionMask
	if b.opts.Transactional {
		attrs |= attrTransactional
	}
	if b.opts.Control {
		attrs |= attrControl
	}
	be := binary.BigEndian
	be.PutUint64(batch[offBaseOffset:], 0)
	be.PutUint32(batch[offBatchLength:], uint32(len(batch)-LogOverhead))
	be.PutUint32(batch[offPartitionLeaderEpoch:], uint32(b.opts.PartitionLeaderEpoch))
	batch[offMagic] = MagicV2
	be.PutUint16(batch[offAttributes:], attrs)
	be.PutUint32(batch[offLastOffsetDelta:], uint32(b.count-1))
	be.PutUint64(batch[offBaseTimestamp:], uint64(b.baseTS))
	be.PutUint64(batch[offMaxTimestamp:], uint64(b.maxTS))
	be.PutUint64(batch[offProducerID:], uint64(b.opts.ProducerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(b.opts.ProducerEpoch))
	be.PutUint32(batch[offBaseSequence:], uint32(b.opts.BaseSequence))
	be.PutUint32(batch[offRecordCount:], uint32(b.count))
	be.PutUint32(batch[offCRC:], ComputeCRC(batch))
	return batch, nil
}
