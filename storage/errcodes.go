package storage

import (
	"errors"
	"fmt"

	"github.com/keelstream/keel/network/record"
)

// Errors of the partition log. Each maps to the Kafka error code a client
// gets (ErrorCode).
var (
	// ErrOffsetOutOfRange is a read or lookup below the log start offset or
	// above the log end offset: OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrMessageTooLarge is a batch larger than max.message.bytes:
	// MESSAGE_TOO_LARGE (10), Kafka's RecordTooLargeException.
	ErrMessageTooLarge = errors.New("record batch larger than max.message.bytes")
	// ErrRecordBatchTooLarge is a batch that cannot fit in a segment at all
	// (larger than segment.bytes): RECORD_BATCH_TOO_LARGE (18).
	ErrRecordBatchTooLarge = errors.New("record batch larger than segment.bytes")
	// ErrUnexpectedAppendOffset is a follower append whose first offset is
	// below the log end offset: a replication bug, never client input.
	ErrUnexpectedAppendOffset = errors.New("append offset below the log end offset")
	// ErrLogClosed is any operation on a closed (or deleted) log:
	// KAFKA_STORAGE_ERROR (56) if it reaches a client.
	ErrLogClosed = errors.New("log is closed")
	// ErrLogDirLocked is a log dir already locked by another process.
	ErrLogDirLocked = errors.New("log dir is locked by another process")
	// ErrStorage is an I/O failure underneath the log: KAFKA_STORAGE_ERROR (56).
	ErrStorage = errors.New("storage I/O error")
	// ErrLogDirOffline is any operation on a log whose dir an earlier I/O
	// error took offline (dirfailure.go): an ErrStorage, already reported.
	ErrLogDirOffline = fmt.Errorf("log dir offline: %w", ErrStorage)
)

// Kafka error codes for the errors above (org.apache.kafka.common.protocol.Errors).
const (
	codeNone                         int16 = 0
	codeOffsetOutOfRange             int16 = 1
	codeCorruptMessage               int16 = 2
	codeMessageTooLarge              int16 = 10
	codeRecordListTooLarge           int16 = 18
	codeUnknownServerError           int16 = -1
	codeKafkaStorageError            int16 = 56
	codeUnsupportedCompressionType   int16 = 76
	codeInvalidRecord                int16 = 87
	codeOutOfOrderSequence           int16 = 45
	codeInvalidProducerEpoch         int16 = 47
	codeInvalidTxnState              int16 = 48
	codeTransactionCoordinatorFenced int16 = 52
)

// ErrorCode maps an error from this package (or from network/record, which
// it passes through) to the Kafka error code a producer or consumer expects.
// nil maps to 0 (NONE); anything unrecognised to UNKNOWN_SERVER_ERROR (-1).
func ErrorCode(err error) int16 {
	switch {
	case err == nil:
		return codeNone
	case errors.Is(err, ErrOffsetOutOfRange):
		return codeOffsetOutOfRange
	case errors.Is(err, record.ErrCorruptMessage), errors.Is(err, record.ErrShortBuffer):
		return codeCorruptMessage
	case errors.Is(err, ErrMessageTooLarge):
		return codeMessageTooLarge
	case errors.Is(err, ErrRecordBatchTooLarge):
		return codeRecordListTooLarge
	case errors.Is(err, record.ErrUnsupportedCompression):
		return codeUnsupportedCompressionType
	// Kafka 4 accepts only magic 2 (KIP-896): ProduceRequest.validateRecords
	// throws InvalidRecordException for older batches, so INVALID_RECORD.
	case errors.Is(err, record.ErrInvalidRecord), errors.Is(err, record.ErrDecompressedTooLarge),
		errors.Is(err, record.ErrUnsupportedMagic):
		return codeInvalidRecord
	case errors.Is(err, ErrOutOfOrderSequence):
		return codeOutOfOrderSequence
	case errors.Is(err, ErrInvalidProducerEpoch):
		return codeInvalidProducerEpoch
	case errors.Is(err, ErrInvalidTxnState):
		return codeInvalidTxnState
	case errors.Is(err, ErrTransactionCoordinatorFenced):
		return codeTransactionCoordinatorFenced
	case errors.Is(err, ErrLogClosed), errors.Is(err, ErrStorage):
		return codeKafkaStorageError
	}
	return codeUnknownServerError
}
