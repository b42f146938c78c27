package storage

import (
	"fmt"
	"slices"
	"sync"
)

// Sentinels of the OffsetForLeaderEpoch API (Kafka's
// OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET).
const (
	// UndefinedEpoch is the epoch EndOffsetFor returns when it knows no
	// answer, and the epoch a requester sends when it has none.
	UndefinedEpoch int32 = -1
	// UndefinedEpochOffset is the end offset EndOffsetFor returns when it
	// knows no answer; a follower then falls back to its high watermark.
	UndefinedEpochOffset int64 = -1
)

// EpochEntry records that leader epoch Epoch wrote its first record at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// LeaderEpochCache is a partition's leader-epoch cache (KIP-101, KIP-279):
// for every leader epoch that wrote to the log, the offset of its first
// record. Epochs and start offsets both strictly increase from entry to
// entry. Followers use the leader's cache, through OffsetForLeaderEpoch, to
// find where their log diverges from the leader's and truncate there instead
// of at their high watermark (the data-loss scenarios of KIP-101).
//
// It is persisted to its leader-epoch-checkpoint file, atomically. Assign,
// TruncateFromEnd and Clear write it synchronously, so memory is never ahead
// of disk for them: a change whose checkpoint write fails is not applied and
// the error is returned (treat it as a storage failure of the log directory,
// as Kafka does). TruncateFromStart applies its change at once and leaves
// the write to a background goroutine, as Kafka does since KAFKA-15046 and
// KAFKA-16541: the log calls it under its lock for every retention deletion
// and DeleteRecords, where two fsyncs would stall the partition's appends. A
// crash before that write leaves the previous entries on disk, which differ
// only at the start, and the log's loading trims them to its start offset
// again.
//
// Concurrency: any goroutine may call any method. Readers (LatestEpoch,
// Entries, EndOffsetFor) never wait for disk I/O. Synchronous mutations are
// serialised and block on the checkpoint write (two fsyncs); Assign returns
// without locking out readers or touching disk when the entry is already
// known, which is the common case on every append.
//
// Lock order: writeMu, then fileMu, then mu. writeMu serialises mutations;
// fileMu serialises file writes, so the file only ever moves to a later
// state (version); mu guards entries and version only for the instant a new
// slice is published.
type LeaderEpochCache struct {
	path    string
	writeMu sync.Mutex
	fileMu  sync.Mutex
	mu      sync.RWMutex
	// entries is sorted by epoch and by start offset; a published slice is
	// never modified, mutations replace it. version counts the published
	// changes.
	entries []EpochEntry
	version uint64

	// written is the version the file holds (fileMu). deferred says a
	// background write is pending or running (writeMu); writes counts
	// those goroutines, which Close waits for. deferredErr is the error of
	// the last background write when none has succeeded since (every write
	// is of the whole state, so a later one mends it; fileMu).
	written     uint64
	deferred    bool
	writes      sync.WaitGroup
	deferredErr error
	// deferredHook, when set (tests), runs at the start of a background
	// write, before it takes fileMu.
	deferredHook func()
}

// OpenLeaderEpochCache loads the cache from the checkpoint file at path (a
// missing file gives an empty cache; the file is created on the first
// change). Like Kafka, it replays the file's entries through the Assign rules
// so a non-monotonic file still yields a monotonic cache; a malformed file,
// or one holding a negative epoch or offset, returns an error wrapping
// ErrCorruptCheckpoint.
//
// Called by the log while loading.
func OpenLeaderEpochCache(path string) (*LeaderEpochCache, error) {
	stored, err := readEpochCheckpoint(path)
	if err != nil {
		return nil, fmt.Errorf("open leader epoch cache: %w", err)
	}
	var entries []EpochEntry
	for _, e := range stored {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return nil, fmt.Errorf("open leader epoch cache %s: invalid entry (epoch %d, start offset %d): %w",
				path, e.Epoch, e.StartOffset, ErrCorruptCheckpoint)
		}
		if epochUpdateNeeded(entries, e) {
			entries = assignEpoch(entries, e)
		}
	}
	return &LeaderEpochCache{path: path, entries: entries}, nil
}

// epochUpdateNeeded is Kafka's isUpdateNeeded: an entry changes the cache
// unless it repeats the latest epoch at or after that epoch's start offset.
func epochUpdateNeeded(entries []EpochEntry, e EpochEntry) bool {
	if len(entries) == 0 {
		return true
	}
	last := entries[len(entries)-1]
	return e.Epoch != last.Epoch || e.StartOffset < last.StartOffset
}

// assignEpoch returns a new slice: entries without those that conflict with
// e (epoch >= e's, or start offset >= e's, removed from the end, as Kafka's
// maybeTruncateNonMonotonicEntries does), then e.
func assignEpoch(entries []EpochEntry, e EpochEntry) []EpochEntry {
	keep := len(entries)
	for keep > 0 && (entries[keep-1].Epoch >= e.Epoch || entries[keep-1].StartOffset >= e.StartOffset) {
		keep--
	}
	next := make([]EpochEntry, keep, keep+1)
	copy(next, entries)
	return append(next, e)
}

// Path returns the checkpoint file's path.
//
// Safe to call from any goroutine.
func (c *LeaderEpochCache) Path() string {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	return c.path
}

// moveTo makes path the cache's checkpoint file, and writes the entries
// there: the log moved to another log dir (logdir_move.go).
func (c *LeaderEpochCache) moveTo(path string) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.path = path
	c.mu.RLock()
	entries, version := c.entries, c.version
	c.mu.RUnlock()
	if err := c.writeFileLocked(entries, version); err != nil {
		return fmt.Errorf("move leader epoch cache to %s: %w", path, err)
	}
	return nil
}

// update applies change to the current entries under writeMu, persists the
// result and only then publishes it. change returns the new slice (never
// modifying its argument) and whether anything changed.
func (c *LeaderEpochCache) update(op string, change func([]EpochEntry) ([]EpochEntry, bool)) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	// Only holders of writeMu replace entries, so reading it here needs no mu.
	next, changed := change(c.entries)
	if !changed {
		return nil
	}
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	if err := c.writeFileLocked(next, c.version+1); err != nil {
		return fmt.Errorf("leader epoch cache %s: %w", op, err)
	}
	c.publish(next)
	return nil
}

// updateDeferred applies change at once and has the file follow in the
// background (see the type's comment): it never waits for disk I/O unless
// a synchronous write holds writeMu.
func (c *LeaderEpochCache) updateDeferred(change func([]EpochEntry) ([]EpochEntry, bool)) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	next, changed := change(c.entries)
	if !changed {
		return
	}
	c.publish(next)
	if c.deferred {
		return // the pending write will find this version
	}
	c.deferred = true
	c.writes.Add(1)
	go c.writeDeferred()
}

// writeDeferred is the goroutine of a deferred change: it writes the latest
// entries unless a synchronous write has done so meanwhile. Owned by the
// cache; Close waits for it.
func (c *LeaderEpochCache) writeDeferred() {
	defer c.writes.Done()
	if c.deferredHook != nil {
		c.deferredHook()
	}
	c.writeMu.Lock()
	c.deferred = false
	c.writeMu.Unlock()
	// From here a new deferred change starts a new goroutine; fileMu
	// orders the two, and each writes the latest version it sees.
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.RLock()
	entries, version := c.entries, c.version
	c.mu.RUnlock()
	if version <= c.written {
		return
	}
	if err := c.writeFileLocked(entries, version); err != nil {
		c.deferredErr = fmt.Errorf("leader epoch cache truncate from start: %w", err)
	}
}

// writeFileLocked writes entries, the state at version, to the checkpoint
// file. A write is of the whole state, so its success also mends a failed
// background write. fileMu is held.
func (c *LeaderEpochCache) writeFileLocked(entries []EpochEntry, version uint64) error {
	if err := writeEpochCheckpoint(c.path, entries); err != nil {
		return err
	}
	c.written, c.deferredErr = version, nil
	return nil
}

// publish makes next the current entries. writeMu is held.
func (c *LeaderEpochCache) publish(next []EpochEntry) {
	c.mu.Lock()
	c.entries = next
	c.version++
	c.mu.Unlock()
}

// Close waits for the background checkpoint writes and returns the error
// of the last one if no write has succeeded since (the file then holds an
// older state, which loading trims as after a crash). The cache stays
// usable.
func (c *LeaderEpochCache) Close() error {
	c.writes.Wait()
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	return c.deferredErr
}

// Assign records that epoch starts at startOffset, with Kafka's
// LeaderEpochFileCache.assign rules: nothing changes when epoch is the
// latest epoch and startOffset is not below its start (the leader calls
// Assign for every batch it appends); otherwise the entries that the new one
// contradicts, those with an epoch >= epoch or a start offset >= startOffset,
// are removed from the end and the new entry appended. A negative epoch or
// offset is an error, as in Kafka.
//
// Safe to call from any goroutine; the log calls it from its single writer
// on every append, and it only blocks (on the checkpoint write) when the
// cache changes.
func (c *LeaderEpochCache) Assign(epoch int32, startOffset int64) error {
	e := EpochEntry{Epoch: epoch, StartOffset: startOffset}
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("leader epoch cache %s: assign invalid entry (epoch %d, start offset %d)", c.Path(), epoch, startOffset)
	}
	c.mu.RLock()
	needed := epochUpdateNeeded(c.entries, e)
	c.mu.RUnlock()
	if !needed {
		return nil
	}
	return c.update("assign", func(entries []EpochEntry) ([]EpochEntry, bool) {
		if !epochUpdateNeeded(entries, e) {
			return nil, false
		}
		return assignEpoch(entries, e), true
	})
}

// LatestEpoch returns the latest epoch in the cache, and false when the
// cache is empty.
//
// Safe to call from any goroutine; never blocks on I/O.
func (c *LeaderEpochCache) LatestEpoch() (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return UndefinedEpoch, false
	}
	return c.entries[len(c.entries)-1].Epoch, true
}

// Entries returns a copy of the entries, oldest epoch first.
//
// Safe to call from any goroutine; never blocks on I/O.
func (c *LeaderEpochCache) Entries() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.entries)
}

// EndOffsetFor answers OffsetForLeaderEpoch for requested, exactly as
// Kafka's LeaderEpochFileCache.endOffsetFor (current Apache Kafka, storage
// module). The answer is the largest epoch <= requested together with that
// epoch's end offset: the start offset of the first epoch above requested,
// or logEndOffset when requested is the latest epoch. Case by case:
//
//   - requested is UndefinedEpoch (-1): (UndefinedEpoch, UndefinedEpochOffset).
//   - requested is the latest epoch: (requested, logEndOffset).
//   - no epoch above requested (requested is above the latest, or the cache
//     is empty): (UndefinedEpoch, UndefinedEpochOffset).
//   - requested is below the earliest epoch: (requested, start offset of the
//     earliest epoch). Older Kafka (2.0) returned UNDEFINED here; since the
//     earliest entries may have been removed by TruncateFromStart, Kafka now
//     answers with the earliest known start so the follower truncates to the
//     leader's log start rather than falling back to its high watermark.
//   - otherwise: (largest epoch <= requested, start offset of the first epoch
//     above requested). The returned epoch differs from requested when the
//     requested epoch never wrote to this log.
//
// Safe to call from any goroutine; never blocks on I/O.
func (c *LeaderEpochCache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	if requested == UndefinedEpoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if n > 0 && c.entries[n-1].Epoch == requested {
		return requested, logEndOffset
	}
	// higher is the first entry whose epoch is above requested.
	higher, _ := slices.BinarySearchFunc(c.entries, requested, func(e EpochEntry, r int32) int {
		if e.Epoch <= r {
			return -1
		}
		return 1
	})
	if higher == n {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if higher == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}

// TruncateFromEnd removes every entry whose start offset is >= endOffset:
// the log was truncated to endOffset (follower truncation, recovery), so
// those epochs no longer have records here. Kafka's truncateFromEnd; a
// negative endOffset is ignored, as there.
//
// Safe to call from any goroutine; the log calls it from its single writer
// under the log's lock. Blocks on the checkpoint write when anything is
// removed.
func (c *LeaderEpochCache) TruncateFromEnd(endOffset int64) error {
	if endOffset < 0 {
		return nil
	}
	return c.update("truncate from end", func(entries []EpochEntry) ([]EpochEntry, bool) {
		keep := len(entries)
		for keep > 0 && entries[keep-1].StartOffset >= endOffset {
			keep--
		}
		return slices.Clone(entries[:keep]), keep != len(entries)
	})
}

// TruncateFromStart moves the cache's start to startOffset, the log's new
// start offset (retention, DeleteRecords): with Kafka's truncateFromStart
// semantics, the entries starting at or below startOffset are removed, and
// the last of them, the epoch in force at startOffset, comes back with its
// start moved up to startOffset. An entry starting above startOffset is kept
// as is ("exclusive": TruncateFromStart(6) keeps an entry at 6, moved to 6).
//
// Safe to call from any goroutine; the log calls it from its single writer,
// under its lock. The change is in force when it returns; the checkpoint
// file follows in the background (see the type's comment).
func (c *LeaderEpochCache) TruncateFromStart(startOffset int64) {
	c.updateDeferred(func(entries []EpochEntry) ([]EpochEntry, bool) {
		removed := 0
		for removed < len(entries) && entries[removed].StartOffset <= startOffset {
			removed++
		}
		if removed == 0 || (removed == 1 && entries[0].StartOffset == startOffset) {
			return nil, false
		}
		next := make([]EpochEntry, 0, len(entries)-removed+1)
		next = append(next, EpochEntry{Epoch: entries[removed-1].Epoch, StartOffset: startOffset})
		return append(next, entries[removed:]...), true
	})
}

// Clear removes every entry and persists the empty cache (Kafka's
// clearAndFlush, used when the log is deleted or fully truncated).
//
// Safe to call from any goroutine; blocks on the checkpoint write.
func (c *LeaderEpochCache) Clear() error {
	return c.update("clear", func([]EpochEntry) ([]EpochEntry, bool) { return nil, true })
}
