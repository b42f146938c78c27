package storage

import (
	"encoding/binary"
	"fmt"
	"math"
)

// offsetIndexEntrySize is the width of one .index entry: a 4-byte offset
// relative to the segment's base offset and a 4-byte position in the .log.
const offsetIndexEntrySize = 8

// OffsetIndex is a segment's .index file, in Kafka's on-disk format: sparse
// entries, each a 4-byte big-endian offset relative to the segment's base
// offset followed by a 4-byte big-endian byte position of that offset's batch
// in the segment's .log. The segment adds an entry every
// index.interval.bytes of appended data, so a lookup lands a reader within
// that many bytes of the batch it wants.
//
// The file is preallocated (sparse) to its maximum size and memory-mapped, so
// appends and lookups are plain memory accesses; it is trimmed to the entries
// in use when the segment stops being active and on Close.
//
// Concurrency: Append, TruncateTo, Reset, Resize, TrimToValidSize, RenameTo
// and Close are called only by the partition log's single writer, under the
// log's lock. Lookup, LastOffset, Entries, IsFull, SanityCheck and Flush may
// run on any goroutine concurrently with the writer: an internal RWMutex
// keeps them from seeing a half-written entry or a mapping being replaced.
type OffsetIndex struct {
	mmapIndex
}

// OpenOffsetIndex opens the index at path, creating it if missing, for the
// segment whose first offset is baseOffset. An existing file is taken to hold
// floor(length/8) entries (a cleanly closed index was trimmed to exactly its
// entries); call SanityCheck after an unclean shutdown, and rebuild the index
// from the log if it fails. The file is then extended to maxIndexBytes
// (Kafka's segment.index.bytes) rounded down to a multiple of 8, and mapped.
//
// Called by the log's single writer while loading; the returned index is
// ready for appends.
func OpenOffsetIndex(path string, baseOffset int64, maxIndexBytes int) (*OffsetIndex, error) {
	x := &OffsetIndex{}
	if err := x.open(path, baseOffset, offsetIndexEntrySize, maxIndexBytes); err != nil {
		return nil, fmt.Errorf("open offset index %s: %w", path, err)
	}
	return x, nil
}

// relativeOffset and position decode slot's fields. Caller holds mu.
func (x *OffsetIndex) relativeOffset(slot int) int32 {
	return int32(binary.BigEndian.Uint32(x.data[slot*offsetIndexEntrySize:]))
}

func (x *OffsetIndex) position(slot int) int32 {
	return int32(binary.BigEndian.Uint32(x.data[slot*offsetIndexEntrySize+4:]))
}

func (x *OffsetIndex) offsetAt(slot int) int64 {
	return x.baseOffset + int64(x.relativeOffset(slot))
}

// Append adds an entry mapping offset to a byte position in the segment's
// .log. Offsets must strictly increase (Kafka's OffsetIndex.append throws
// InvalidOffsetException otherwise) and lie within [baseOffset,
// baseOffset+MaxInt32] so they fit the 4-byte relative form; violations
// return ErrInvalidIndexEntry. A full index returns ErrIndexFull and the
// segment must roll.
//
// Called only by the log's single writer; never blocks on I/O (the page is
// already mapped, although the first touch of a page may fault it in).
func (x *OffsetIndex) Append(offset int64, position int32) (err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.checkWritableLocked(); err != nil {
		return fmt.Errorf("append to offset index %s: %w", x.path, err)
	}
	defer x.endFaultsInto(x.guardFaults(), &err) // reading the last entry
	if x.entries > 0 && offset <= x.offsetAt(x.entries-1) {
		return fmt.Errorf("append offset %d to offset index %s: not above last offset %d: %w",
			offset, x.path, x.offsetAt(x.entries-1), ErrInvalidIndexEntry)
	}
	rel := offset - x.baseOffset
	if rel < 0 || rel > math.MaxInt32 {
		return fmt.Errorf("append offset %d to offset index %s: relative offset %d out of range: %w",
			offset, x.path, rel, ErrInvalidIndexEntry)
	}
	if position < 0 {
		return fmt.Errorf("append offset %d to offset index %s: negative position %d: %w",
			offset, x.path, position, ErrInvalidIndexEntry)
	}
	if x.entries >= x.capacity() {
		return fmt.Errorf("append offset %d to offset index %s (%d entries): %w",
			offset, x.path, x.entries, ErrIndexFull)
	}
	var e [offsetIndexEntrySize]byte
	binary.BigEndian.PutUint32(e[:], uint32(rel))
	binary.BigEndian.PutUint32(e[4:], uint32(position))
	if err := x.storeLocked(x.entries, e[:]); err != nil {
		return fmt.Errorf("append offset %d: %w", offset, err)
	}
	x.entries++
	return nil
}

// Lookup returns the entry with the largest offset <= target: the batch
// containing target starts at or after the returned position. With no such
// entry it returns (baseOffset, 0), the start of the segment, so a reader can
// always scan forward from the answer.
//
// Safe to call from any goroutine, concurrently with appends.
func (x *OffsetIndex) Lookup(target int64) (offset int64, position int32) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	offset, position = x.baseOffset, 0 // also a faulted index's answer
	if x.faulted() {
		return
	}
	defer x.endFaults(x.guardFaults())
	slot := x.largestLowerBound(target, x.offsetAt)
	if slot < 0 {
		return x.baseOffset, 0
	}
	return x.offsetAt(slot), x.position(slot)
}

// LookupPosition returns the entry with the largest position <= maxPosition
// whose offset is also <= maxOffset: a batch boundary a reader may jump to
// without reading the batch headers before it (every batch before the entry
// ends before its offset). ok is false when no entry qualifies. Positions
// and offsets both increase along the index, so each bound is one binary
// search.
//
// Safe to call from any goroutine, concurrently with appends.
func (x *OffsetIndex) LookupPosition(maxPosition, maxOffset int64) (offset int64, position int32, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.faulted() {
		return 0, 0, false
	}
	defer x.endFaults(x.guardFaults())
	slot := min(x.largestLowerBound(maxPosition, func(i int) int64 { return int64(x.position(i)) }),
		x.largestLowerBound(maxOffset, x.offsetAt))
	if slot < 0 {
		return 0, 0, false
	}
	return x.offsetAt(slot), x.position(slot), true
}

// TruncateTo drops every entry whose offset is >= offset, as Kafka's
// OffsetIndex.truncateTo does when the log is truncated (follower
// truncation, recovery). Dropped entries are zeroed.
//
// Called only by the log's single writer.
func (x *OffsetIndex) TruncateTo(offset int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.faulted() {
		return
	}
	defer x.endFaults(x.guardFaults())
	x.truncateEntriesLocked(x.firstSlotAtOrAbove(offset, x.offsetAt))
}

// IsFull reports whether no entry can be appended. The segment checks it
// before appending so it can roll instead (Kafka's shouldRoll).
//
// Safe to call from any goroutine.
func (x *OffsetIndex) IsFull() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries >= x.capacity() || x.faulted()
}

// LastOffset returns the offset of the last entry, or baseOffset when the
// index is empty.
//
// Safe to call from any goroutine.
func (x *OffsetIndex) LastOffset() (offset int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	offset = x.baseOffset // also a faulted index's answer
	if x.entries == 0 || x.faulted() {
		return
	}
	defer x.endFaults(x.guardFaults())
	return x.offsetAt(x.entries - 1)
}

// BaseOffset returns the base offset of the segment the index belongs to.
//
// Safe to call from any goroutine.
func (x *OffsetIndex) BaseOffset() int64 { return x.baseOffset }

// SanityCheck is Kafka's O(1) OffsetIndex.sanityCheck, made stricter: the
// last entry must not lie below the base offset, it must lie above the first
// entry when there are several (offsets strictly increase), and the file
// length found at open must have been a whole number of entries. The zeroed
// tail of a preallocated index left by a crash fails it. It returns an error
// wrapping ErrCorruptIndex; the caller then rebuilds the index from the log.
//
// Safe to call from any goroutine; the log calls it while loading.
func (x *OffsetIndex) SanityCheck() (err error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	defer x.endFaultsInto(x.guardFaults(), &err)
	if x.tornTail {
		return fmt.Errorf("offset index %s: length is not a multiple of %d: %w", x.path, offsetIndexEntrySize, ErrCorruptIndex)
	}
	if x.entries == 0 {
		return nil
	}
	last := x.entries - 1
	if x.relativeOffset(last) < 0 {
		return fmt.Errorf("offset index %s: last offset %d below base offset %d: %w",
			x.path, x.offsetAt(last), x.baseOffset, ErrCorruptIndex)
	}
	if x.position(last) < 0 {
		return fmt.Errorf("offset index %s: last position %d negative: %w", x.path, x.position(last), ErrCorruptIndex)
	}
	if last > 0 && x.relativeOffset(last) <= x.relativeOffset(0) {
		return fmt.Errorf("offset index %s: last offset %d not above first offset %d in %d entries: %w",
			x.path, x.offsetAt(last), x.offsetAt(0), x.entries, ErrCorruptIndex)
	}
	return nil
}
