package record

import "errors"

// Sentinel errors. Each maps to the Kafka error code a producer gets for a
// batch that fails the check (see KafkaCode in the broker).
var (
	// ErrCorruptMessage is a CRC-32C mismatch or a batch cut short: Kafka's
	// CORRUPT_MESSAGE (2).
	ErrCorruptMessage = errors.New("corrupt message: batch CRC or size does not match its bytes")
	// ErrInvalidRecord is a batch whose fields contradict each other (magic,
	// record count, lengths, offset deltas): Kafka's INVALID_RECORD (87).
	ErrInvalidRecord = errors.New("invalid record batch")
	// ErrUnsupportedMagic is a batch whose magic byte is not 2. Kafka answers
	// produce requests with old magic as UNSUPPORTED_FOR_MESSAGE_FORMAT (43).
	ErrUnsupportedMagic = errors.New("unsupported record batch magic (only v2 is supported)")
	// ErrUnsupportedCompression is a compression codec id Kafka does not
	// define: UNSUPPORTED_COMPRESSION_TYPE (76).
	ErrUnsupportedCompression = errors.New("unsupported compression type")
	// ErrDecompressedTooLarge is a compressed payload that inflates past the
	// caller's bound. Treated as INVALID_RECORD by the broker: a small batch
	// must never be allowed to expand into gigabytes of memory.
	ErrDecompressedTooLarge = errors.New("decompressed batch exceeds its size bound")
	// ErrShortBuffer means fewer bytes than a whole batch header are present.
	// When scanning a segment tail this is a torn write, not corruption.
	ErrShortBuffer = errors.New("buffer shorter than a record batch header")
)
