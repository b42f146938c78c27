package storage

import (
	"encoding/binary"
	"fmt"
	"math"
)

// timeIndexEntrySize is the width of one .timeindex entry: an 8-byte
// timestamp and a 4-byte offset relative to the segment's base offset.
const timeIndexEntrySize = 12

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: what an empty time index
// reports as its last timestamp, and what a lookup that finds nothing returns.
const noTimestamp int64 = -1

// TimeIndex is a segment's .timeindex file, in Kafka's on-disk format: sparse
// entries, each an 8-byte big-endian timestamp followed by a 4-byte big-endian
// offset relative to the segment's base offset. An entry (T, O) says that the
// segment's max timestamp grew to T at offset O, so every record before O has
// a timestamp below T. Timestamps strictly increase from entry to entry
// (Kafka appends only when the segment's max timestamp grows), which makes
// ListOffsets by time a binary search followed by a short forward scan.
//
// It shares the mapping mechanics and the concurrency contract of
// OffsetIndex: mutations (MaybeAppend, TruncateTo, Reset, Resize,
// TrimToValidSize, RenameTo, Close) only by the partition log's single
// writer; Lookup, LastEntry, Entries, IsFull, SanityCheck and Flush from any
// goroutine, concurrently with the writer.
type TimeIndex struct {
	mmapIndex
}

// OpenTimeIndex opens the time index at path, creating it if missing, for
// the segment whose first offset is baseOffset. An existing file is taken to
// hold floor(length/12) entries; the file is then extended to maxIndexBytes
// rounded down to a multiple of 12 and mapped. As with OpenOffsetIndex, call
// SanityCheck after an unclean shutdown.
//
// Called by the log's single writer while loading.
func OpenTimeIndex(path string, baseOffset int64, maxIndexBytes int) (*TimeIndex, error) {
	x := &TimeIndex{}
	if err := x.open(path, baseOffset, timeIndexEntrySize, maxIndexBytes); err != nil {
		return nil, fmt.Errorf("open time index %s: %w", path, err)
	}
	return x, nil
}

// timestampAt, relativeOffset and offsetAt decode slot's fields. Caller
// holds mu.
func (x *TimeIndex) timestampAt(slot int) int64 {
	return int64(binary.BigEndian.Uint64(x.data[slot*timeIndexEntrySize:]))
}

func (x *TimeIndex) relativeOffset(slot int) int32 {
	return int32(binary.BigEndian.Uint32(x.data[slot*timeIndexEntrySize+8:]))
}

func (x *TimeIndex) offsetAt(slot int) int64 {
	return x.baseOffset + int64(x.relativeOffset(slot))
}

// lastEntryLocked returns the last entry or (noTimestamp, baseOffset).
// Caller holds mu.
func (x *TimeIndex) lastEntryLocked() (int64, int64) {
	if x.entries == 0 {
		return noTimestamp, x.baseOffset
	}
	return x.timestampAt(x.entries - 1), x.offsetAt(x.entries - 1)
}

// MaybeAppend appends (timestamp, offset) only if timestamp is above the last
// entry's (noTimestamp, -1, when empty), keeping timestamps strictly
// increasing, exactly as Kafka's TimeIndex.maybeAppend: re-appending the last
// entry (the segment does so on roll and close) is a harmless no-op. Like
// Kafka it returns ErrInvalidIndexEntry when offset is below the last entry's
// offset or timestamp below the last entry's timestamp, both of which mean
// the caller did not track its max timestamp correctly, and when offset does
// not fit the 4-byte relative form. It returns ErrIndexFull only when the
// entry really is new and no slot is left (see IsFull for the slot kept in
// reserve).
//
// Called only by the log's single writer.
func (x *TimeIndex) MaybeAppend(timestamp int64, offset int64) (err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.checkWritableLocked(); err != nil {
		return fmt.Errorf("append to time index %s: %w", x.path, err)
	}
	defer x.endFaultsInto(x.guardFaults(), &err)
	lastTimestamp, lastOffset := x.lastEntryLocked()
	if x.entries > 0 && offset < lastOffset {
		return fmt.Errorf("append (%d, %d) to time index %s: offset below last offset %d: %w",
			timestamp, offset, x.path, lastOffset, ErrInvalidIndexEntry)
	}
	if x.entries > 0 && timestamp < lastTimestamp {
		return fmt.Errorf("append (%d, %d) to time index %s: timestamp below last timestamp %d: %w",
			timestamp, offset, x.path, lastTimestamp, ErrInvalidIndexEntry)
	}
	if timestamp <= lastTimestamp {
		return nil
	}
	rel := offset - x.baseOffset
	if rel < 0 || rel > math.MaxInt32 {
		return fmt.Errorf("append (%d, %d) to time index %s: relative offset %d out of range: %w",
			timestamp, offset, x.path, rel, ErrInvalidIndexEntry)
	}
	if x.entries >= x.capacity() {
		return fmt.Errorf("append (%d, %d) to time index %s (%d entries): %w",
			timestamp, offset, x.path, x.entries, ErrIndexFull)
	}
	var e [timeIndexEntrySize]byte
	binary.BigEndian.PutUint64(e[:], uint64(timestamp))
	binary.BigEndian.PutUint32(e[8:], uint32(rel))
	if err := x.storeLocked(x.entries, e[:]); err != nil {
		return fmt.Errorf("append (%d, %d): %w", timestamp, offset, err)
	}
	x.entries++
	return nil
}

// Lookup returns the entry with the largest timestamp <= target, or
// (-1, baseOffset) when there is none, like Kafka's TimeIndex.lookup.
// ListOffsets by timestamp then scans the log forward from the returned
// offset for the first record whose timestamp is >= its target.
//
// Safe to call from any goroutine, concurrently with appends.
func (x *TimeIndex) Lookup(target int64) (timestamp int64, offset int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	timestamp, offset = noTimestamp, x.baseOffset // also a faulted index's answer
	if x.faulted() {
		return
	}
	defer x.endFaults(x.guardFaults())
	slot := x.largestLowerBound(target, x.timestampAt)
	if slot < 0 {
		return noTimestamp, x.baseOffset
	}
	return x.timestampAt(slot), x.offsetAt(slot)
}

// LastEntry returns the last entry, or (-1, baseOffset) when the index is
// empty. A reopened segment restores its max timestamp from it.
//
// Safe to call from any goroutine.
func (x *TimeIndex) LastEntry() (timestamp int64, offset int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	timestamp, offset = noTimestamp, x.baseOffset // also a faulted index's answer
	if x.faulted() {
		return
	}
	defer x.endFaults(x.guardFaults())
	return x.lastEntryLocked()
}

// TruncateTo drops every entry whose offset is >= offset, like Kafka's
// TimeIndex.truncateTo. Dropped entries are zeroed.
//
// Called only by the log's single writer.
func (x *TimeIndex) TruncateTo(offset int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.faulted() {
		return
	}
	defer x.endFaults(x.guardFaults())
	x.truncateEntriesLocked(x.firstSlotAtOrAbove(offset, x.offsetAt))
}

// IsFull reports whether the segment must roll: true once a single free slot
// is left. Like Kafka's TimeIndex.isFull it keeps that last slot in reserve so
// the final (max timestamp, offset) entry the segment appends when it rolls
// always fits.
//
// Safe to call from any goroutine.
func (x *TimeIndex) IsFull() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries >= x.capacity()-1 || x.faulted()
}

// BaseOffset returns the base offset of the segment the index belongs to.
//
// Safe to call from any goroutine.
func (x *TimeIndex) BaseOffset() int64 { return x.baseOffset }

// SanityCheck is Kafka's O(1) TimeIndex.sanityCheck, made stricter: the
// last entry's offset must not lie below the base offset and, when there are
// several entries, the last timestamp must be above the first (timestamps
// strictly increase) and the last offset not below the first; the file
// length found at open must have been a whole number of entries. The zeroed
// tail of a preallocated index left by a crash fails it. It returns an error
// wrapping ErrCorruptIndex; the caller then rebuilds the index from the log.
//
// Safe to call from any goroutine; the log calls it while loading.
func (x *TimeIndex) SanityCheck() (err error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	defer x.endFaultsInto(x.guardFaults(), &err)
	if x.tornTail {
		return fmt.Errorf("time index %s: length is not a multiple of %d: %w", x.path, timeIndexEntrySize, ErrCorruptIndex)
	}
	if x.entries == 0 {
		return nil
	}
	last := x.entries - 1
	if x.relativeOffset(last) < 0 {
		return fmt.Errorf("time index %s: last offset %d below base offset %d: %w",
			x.path, x.offsetAt(last), x.baseOffset, ErrCorruptIndex)
	}
	if last > 0 && x.timestampAt(last) <= x.timestampAt(0) {
		return fmt.Errorf("time index %s: last timestamp %d not above first timestamp %d in %d entries: %w",
			x.path, x.timestampAt(last), x.timestampAt(0), x.entries, ErrCorruptIndex)
	}
	if last > 0 && x.relativeOffset(last) < x.relativeOffset(0) {
		return fmt.Errorf("time index %s: last offset %d below first offset %d: %w",
			x.path, x.offsetAt(last), x.offsetAt(0), ErrCorruptIndex)
	}
	return nil
}
