package storage

import "errors"

// Sentinel errors of the storage package. Callers test for them with
// errors.Is; every error returned wraps one of these with the file path or
// offset it concerns.
var (
	// ErrIndexFull is returned when an append finds no free slot left in a
	// memory-mapped index; the segment owning it must roll (Kafka rolls when
	// either index is full).
	ErrIndexFull = errors.New("index is full")

	// ErrInvalidIndexEntry is returned when an index append would break the
	// index's ordering (offsets strictly increasing in the offset index,
	// timestamps never decreasing in the time index) or does not fit the
	// 4-byte relative offset; like Kafka's InvalidOffsetException it signals a
	// bug in the caller, never bad client input.
	ErrInvalidIndexEntry = errors.New("invalid index entry")

	// ErrCorruptIndex is returned by an index sanity check that finds entries
	// no correct writer could have produced (typically the zero-filled tail of
	// a preallocated index after an unclean shutdown); the index must be
	// rebuilt from its segment, as Kafka does on CorruptIndexException.
	ErrCorruptIndex = errors.New("corrupt index")

	// ErrCorruptCheckpoint is returned when a checkpoint file (offset
	// checkpoints, leader-epoch checkpoint) cannot be parsed.
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint file")
)
