package record

import (
	"encoding/binary"
	"fmt"
)

// Recompress appends to dst the batch b (one whole, validated batch with
// header h) with its records compressed with target instead: what a broker
// does when a topic's compression.type names a codec other than the
// producer's. Every header field but the codec bits, the length and the
// CRC is kept, and the uncompressed records are byte for byte the same
// (offsets deltas, timestamps, keys, values and headers), so sequence
// numbers and timestamps survive. Decompression is bounded by
// maxUncompressed. The records are compressed at level (CompressLevel).
// It returns dst, and scratch (grown, for reuse).
func Recompress(dst, b []byte, h BatchHeader, target Compression, level int, scratch []byte, maxUncompressed int) ([]byte, []byte, error) {
	records := RecordsBytes(b)
	if c := h.Compression(); c != CompressionNone {
		var err error
		if scratch, err = Decompress(c, scratch[:0], records, maxUncompressed); err != nil {
			return dst, scratch, fmt.Errorf("recompress %s batch: %w", c, err)
		}
		records = scratch
	}
	start := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	if target == CompressionNone {
		dst = append(dst, records...)
	} else {
		var err error
		if dst, err = CompressLevel(target, level, dst, records); err != nil {
			return dst[:start], scratch, fmt.Errorf("recompress to %s: %w", target, err)
		}
	}
	out := dst[start:]
	attrs := binary.BigEndian.Uint16(out[offAttributes:])&^attrCompressionMask | uint16(target)&attrCompressionMask
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(out[offBatchLength:], uint32(len(out)-LogOverhead))
	binary.BigEndian.PutUint32(out[offCRC:], ComputeCRC(out))
	return dst, scratch, nil
}
