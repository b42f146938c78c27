package record

import "fmt"

// Compression is the codec in bits 0-2 of a batch's attributes.
type Compression int8

// The codec ids Kafka defines (KIP-110 added zstd).
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// String returns the codec's name as Kafka's compression.type config spells it.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

// ParseCompression maps a compression.type value to its codec. "producer"
// (keep what the producer sent) is a broker/topic setting, not a codec, and
// is not accepted here.
func ParseCompression(name string) (Compression, error) {
	switch name {
	case "none", "uncompressed":
		return CompressionNone, nil
	case "gzip":
		return CompressionGzip, nil
	case "snappy":
		return CompressionSnappy, nil
	case "lz4":
		return CompressionLZ4, nil
	case "zstd":
		return CompressionZstd, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnsupportedCompression, name)
}

// Batch attribute bits (Kafka's DefaultRecordBatch).
const (
	attrCompressionMask = 0x07
	attrTimestampType   = 0x08 // 1 = LogAppendTime, 0 = CreateTime
	attrTransactional   = 0x10
	attrControl         = 0x20
	attrDeleteHorizon   = 0x40 // KIP-534: base timestamp is the delete horizon
)

// TimestampType says who set a batch's timestamps.
type TimestampType int8

const (
	// CreateTime: the producer's clock.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker's clock at append (message.timestamp.type).
	LogAppendTime TimestampType = 1
)
