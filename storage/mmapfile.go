package storage

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// warmIndexBytes is the size of the index tail that lookups search first.
// Kafka's AbstractIndex (KAFKA-6432) does the same: fetch and replication
// read near the end of the log, so a binary search confined to the last 8 KiB
// touches only pages that are already resident, instead of faulting in the
// pages a full-range binary search would visit first.
const warmIndexBytes = 8192

// mmapIndex is the file mechanics shared by OffsetIndex and TimeIndex: a file
// of fixed-width entries, preallocated (sparse, via ftruncate) to the index's
// maximum size, memory-mapped read-write and shared, and trimmed to the bytes
// actually used when the segment stops being active or is closed.
//
// Concurrency: mu guards every field below it. Mutations (append, truncate,
// reset, resize, trim, rename, close) take mu exclusively; lookups take it
// shared, so a reader never sees a mapping that is being replaced or an entry
// that is half written. The partition log's single writer is the only caller
// of mutations; any goroutine may look up.
type mmapIndex struct {
	entrySize  int
	baseOffset int64

	mu   sync.RWMutex
	path string
	// open is false once closed. No descriptor is kept: like Kafka's
	// AbstractIndex, the file is opened only to resize and map it, and the
	// mapping outlives the descriptor, so an index costs no file handle
	// (10,000 partitions need 10,000 descriptors, not 30,000).
	isOpen bool
	// data is the mapping of the whole file; nil when the file is empty or
	// closed, or after a failed remap (the index then behaves as empty and
	// full, which is safe: lookups fall back to the segment start and appends
	// make the segment roll).
	data     []byte
	fileSize int64
	entries  int
	// tornTail records that the file length found at open was not a multiple
	// of the entry size: a partial entry was written when the process died.
	tornTail bool

	// fault is the first fault reading the mapping (guardFaults): the file
	// cut under it, or an I/O error reading a page back. The index then
	// answers every lookup as if it were empty (a reader scans from the
	// segment start: slower, never wrong), refuses appends and reports
	// full, so an active segment rolls to a new index. Reset, which
	// recreates the file's pages, clears it.
	fault atomic.Pointer[error]
}

// guardFaults begins a section that touches the mapping: a memory fault in
// it (SIGBUS, which would kill the process — Kafka's JVM turns it into an
// InternalError) panics instead. Defer endFaults, endFaultsInto or
// endWriteFaults with its result:
//
//	defer m.endFaults(m.guardFaults())
func (m *mmapIndex) guardFaults() (old bool) { return debug.SetPanicOnFault(true) }

// endFaults ends a guardFaults section that reads the mapping: a memory
// fault's panic is recovered and recorded as the index's fault. Any other
// panic is a bug and goes on. Caller holds mu, shared or exclusive.
func (m *mmapIndex) endFaults(old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		m.recordFault(r)
	}
}

// recordFault keeps a recovered panic as the index's fault if it is a
// memory fault, and panics again with anything else.
func (m *mmapIndex) recordFault(r any) {
	err := m.memoryFault(r)
	m.fault.CompareAndSwap(nil, &err)
}

// endWriteFaults ends a guardFaults section that writes an entry: a memory
// fault becomes *err, and the index stays readable (a write faults when the
// disk has no block for a sparse page, which says nothing about the pages
// already written).
func (m *mmapIndex) endWriteFaults(old bool, err *error) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		*err = m.memoryFault(r)
	}
}

// memoryFault turns a recovered memory fault into an ErrStorage error; nil
// for no panic. It panics again with anything else.
func (m *mmapIndex) memoryFault(r any) error {
	if r == nil {
		return nil
	}
	if _, fault := r.(interface{ Addr() uintptr }); !fault {
		panic(r)
	}
	return fmt.Errorf("index %s: %w: %v", m.path, ErrStorage, r)
}

// endFaultsInto ends a guardFaults section that reads the mapping and
// returns an error, as endFaults does; when the section returned none,
// *err becomes the index's fault, if it has one.
func (m *mmapIndex) endFaultsInto(old bool, err *error) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		m.recordFault(r)
	}
	if *err == nil {
		*err = m.Fault()
	}
}

// faulted reports whether reading the mapping has faulted.
func (m *mmapIndex) faulted() bool { return m.fault.Load() != nil }

// Fault returns the first fault met reading the index (see fault), or nil.
//
// Safe to call from any goroutine.
func (m *mmapIndex) Fault() error {
	if e := m.fault.Load(); e != nil {
		return *e
	}
	return nil
}

// open opens or creates the index file and maps it at max(maxIndexBytes
// rounded down to whole entries, the bytes of the entries already present).
// An existing file is assumed to hold floor(length/entrySize) entries: after
// a clean shutdown it was trimmed to exactly its entries.
func (m *mmapIndex) open(path string, baseOffset int64, entrySize, maxIndexBytes int) error {
	if maxIndexBytes < 0 {
		return fmt.Errorf("negative max index size %d", maxIndexBytes)
	}
	if baseOffset < 0 {
		return fmt.Errorf("negative base offset %d", baseOffset)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return err
	}
	m.entrySize = entrySize
	m.baseOffset = baseOffset
	m.path = path
	m.isOpen = true
	m.fileSize = fi.Size()
	m.entries = int(fi.Size() / int64(entrySize))
	m.tornTail = fi.Size()%int64(entrySize) != 0
	if err := m.remapLocked(m.targetSize(maxIndexBytes)); err != nil {
		m.isOpen = false
		return err
	}
	return nil
}

// targetSize is the file size for a requested maximum: whole entries only,
// and never smaller than the entries in use, so a resize never drops entries.
func (m *mmapIndex) targetSize(maxIndexBytes int) int64 {
	size := int64(maxIndexBytes) / int64(m.entrySize) * int64(m.entrySize)
	return max(size, int64(m.entries)*int64(m.entrySize))
}

// capacity is the number of entries the current mapping can hold.
func (m *mmapIndex) capacity() int { return len(m.data) / m.entrySize }

// remapLocked unmaps, sets the file length to size and maps it again. If the
// length cannot be changed the old length is mapped again and the error
// returned; if the mapping fails the index is left empty with no mapping.
// Caller holds mu exclusively.
func (m *mmapIndex) remapLocked(size int64) error {
	if err := m.unmapLocked(); err != nil {
		return err
	}
	if size == m.fileSize && size == 0 {
		m.entries = 0
		return nil
	}
	f, err := os.OpenFile(m.path, os.O_RDWR, 0)
	if err != nil {
		m.entries = 0
		return err
	}
	defer f.Close() // the mapping stays valid without the descriptor
	var resizeErr error
	if size != m.fileSize {
		if err := f.Truncate(size); err != nil {
			resizeErr = fmt.Errorf("resize to %d bytes: %w", size, err)
			size = m.fileSize
		} else {
			m.fileSize = size
		}
	}
	if size == 0 {
		// mmap(2) rejects a zero length; an empty index simply has no mapping.
		m.entries = 0
		return resizeErr
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		// Degrade to an empty index rather than keep entries we cannot read.
		m.entries = 0
		return errors.Join(resizeErr, fmt.Errorf("mmap %d bytes: %w", size, err))
	}
	// Index pages are touched one at a time: entries appended at the
	// tail, binary searches of a few pages. The kernel's default for a
	// mapping is to read ahead around a fault, and on a fresh, sparse index
	// that zero-fills the whole read-ahead window of page cache on the first
	// write: 4.4 ms for a new segment's first offset and time index
	// entries on the development VM's ext4, under the log lock, against
	// 22 µs with MADV_RANDOM, which faults in just the page touched
	// (BenchmarkFirstIndexEntry). Reads gain too: a lookup in a 10 MiB
	// index that is not in the page cache took 0.36–0.42 ms against
	// 1.06–1.11 ms with read-ahead. It is advice: an error leaves the
	// default, never a broken index.
	_ = unix.Madvise(data, unix.MADV_RANDOM)
	m.data = data
	m.entries = min(m.entries, m.capacity())
	return resizeErr
}

// unmapLocked releases the mapping, if any. Caller holds mu exclusively.
func (m *mmapIndex) unmapLocked() error {
	if m.data == nil {
		return nil
	}
	if err := unix.Munmap(m.data); err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	m.data = nil
	return nil
}

// Entries returns the number of entries in the index.
//
// Safe to call from any goroutine; it does not block on I/O.
func (m *mmapIndex) Entries() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.entries
}

// Path returns the index file's current path (it changes with RenameTo).
//
// Safe to call from any goroutine.
func (m *mmapIndex) Path() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.path
}

// Flush writes the mapped entries to disk with msync(MS_SYNC), like Kafka's
// AbstractIndex.flush (mmap.force). It blocks until the kernel reports the
// pages written, and blocks appends meanwhile.
//
// Called by the log's flusher; safe to call concurrently with lookups.
func (m *mmapIndex) Flush() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.data == nil {
		return nil
	}
	if err := unix.Msync(m.data, unix.MS_SYNC); err != nil {
		return fmt.Errorf("flush index %s: %w", m.path, err)
	}
	return nil
}

// Reset drops every entry (segment recovery rebuilds the index from the log,
// as Kafka's LogSegment.recover does). The dropped bytes are zeroed so a
// crash cannot resurrect them. Unlike Kafka's AbstractIndex.reset it does not
// re-extend a trimmed file: call Resize afterwards when the rebuilt index
// needs room to grow.
//
// Called only by the log's single writer.
func (m *mmapIndex) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	used := m.entries * m.entrySize
	if (used <= resetZeroBytes && !m.faulted()) || !m.isOpen {
		m.truncateEntriesLocked(0)
		return
	}
	// Drop the pages rather than zero them: after a crash an untrimmed
	// index "holds" its whole zero-filled preallocation, and clearing it
	// would dirty (and write back) megabytes per recovered segment.
	// Truncating to 0 frees the blocks; re-extending leaves a sparse hole.
	// A faulted index gets new pages the same way, and is read again.
	size := int64(len(m.data))
	m.entries = 0
	if err := m.remapLocked(0); err == nil {
		// On failure the index is empty and full: safe.
		if err := m.remapLocked(size); err == nil {
			m.fault.Store(nil)
		}
	}
}

// resetZeroBytes is the largest used region Reset clears in place; above
// it the file is truncated and re-extended instead.
const resetZeroBytes = 64 << 10

// truncateEntriesLocked keeps the first n entries and zeroes the rest of the
// used region. Caller holds mu exclusively.
func (m *mmapIndex) truncateEntriesLocked(n int) {
	if n >= m.entries {
		return
	}
	used := m.entries
	m.entries = n // even if zeroing faults: the entries are gone
	defer m.endFaults(m.guardFaults())
	clear(m.data[n*m.entrySize : used*m.entrySize])
}

// TrimToValidSize shrinks the file and its mapping to exactly the entries in
// use, as Kafka does when a segment stops being the active one. Appends then
// fail with ErrIndexFull until Resize makes room again.
//
// Called only by the log's single writer; blocks lookups while it remaps.
func (m *mmapIndex) TrimToValidSize() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.isOpen {
		return fmt.Errorf("trim index %s: %w", m.path, os.ErrClosed)
	}
	if err := m.remapLocked(int64(m.entries) * int64(m.entrySize)); err != nil {
		return fmt.Errorf("trim index %s: %w", m.path, err)
	}
	return nil
}

// Resize sets the file and its mapping to maxIndexBytes rounded down to whole
// entries, but never below the entries in use (unlike Kafka's resize, which
// can silently drop entries). Used when a reopened last segment becomes the
// active one again and after Reset during recovery.
//
// Called only by the log's single writer; blocks lookups while it remaps. On
// error the index behaves as empty and full (lookups return the segment
// start, appends return ErrIndexFull): the segment must be rolled or its index
// rebuilt.
func (m *mmapIndex) Resize(maxIndexBytes int) error {
	if maxIndexBytes < 0 {
		return fmt.Errorf("resize index %s: negative size %d", m.Path(), maxIndexBytes)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.isOpen {
		return fmt.Errorf("resize index %s: %w", m.path, os.ErrClosed)
	}
	if err := m.remapLocked(m.targetSize(maxIndexBytes)); err != nil {
		return fmt.Errorf("resize index %s: %w", m.path, err)
	}
	return nil
}

// RenameTo moves the index file to path (Kafka renames segment files with a
// .deleted suffix before asynchronous deletion, and .cleaned/.swap during
// compaction). The mapping and the open descriptor stay valid: a rename does
// not touch the inode.
//
// Called only by the log's single writer.
func (m *mmapIndex) RenameTo(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := os.Rename(m.path, path); err != nil {
		return fmt.Errorf("rename index %s: %w", m.path, err)
	}
	m.path = path
	return nil
}

// Close trims the file to its entries, unmaps it and closes it. Closing twice
// is a no-op. Lookups after Close find nothing; mutations return an error
// wrapping os.ErrClosed.
//
// Called only by the log's single writer, after which no appends may follow.
func (m *mmapIndex) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.isOpen {
		return nil
	}
	// Munmap first: the trimmed length must not cut through a live mapping.
	errs := []error{m.unmapLocked()}
	if valid := int64(m.entries) * int64(m.entrySize); m.fileSize != valid {
		if err := os.Truncate(m.path, valid); err != nil {
			errs = append(errs, fmt.Errorf("trim to %d bytes: %w", valid, err))
		}
	}
	m.isOpen = false
	m.entries = 0
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close index %s: %w", m.path, err)
	}
	return nil
}

// Discard unmaps the index without trimming its file, for a segment about
// to be removed: the file's path may by then name another segment's index
// (two deleted segments with one base offset share their .deleted names,
// as in Kafka), which must not be touched. Discarding a closed index is a
// no-op.
func (m *mmapIndex) Discard() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.isOpen {
		return nil
	}
	err := m.unmapLocked()
	m.isOpen = false
	m.entries = 0
	if err != nil {
		return fmt.Errorf("discard index %s: %w", m.path, err)
	}
	return nil
}

// storeLocked writes entry into slot of the mapping. The file is sparse, so
// the slot's page may have no disk block yet: on a full disk the kernel
// cannot give it one and the write faults with SIGBUS. Here the fault
// becomes an ErrStorage error (guardFaults); the segment goes without that
// sparse entry, which only lengthens a scan. Caller holds mu exclusively.
func (m *mmapIndex) storeLocked(slot int, entry []byte) (err error) {
	defer m.endWriteFaults(m.guardFaults(), &err)
	copy(m.data[slot*m.entrySize:(slot+1)*m.entrySize], entry)
	return nil
}

// checkWritableLocked returns an error if the index is closed or faulted.
// Caller holds mu.
func (m *mmapIndex) checkWritableLocked() error {
	if !m.isOpen {
		return os.ErrClosed
	}
	return m.Fault()
}

// largestLowerBound returns the last slot whose key is <= target, or -1 when
// there is none. Keys must be non-decreasing over the slots. The search
// starts in the warm tail of the index (see warmIndexBytes). Caller holds mu.
func (m *mmapIndex) largestLowerBound(target int64, key func(slot int) int64) int {
	n := m.entries
	if n == 0 {
		return -1
	}
	lo, hi := 0, n
	if hot := n - 1 - warmIndexBytes/m.entrySize; hot > 0 {
		if key(hot) <= target {
			lo = hot
		} else {
			hi = hot
		}
	}
	i := lo + sort.Search(hi-lo, func(i int) bool { return key(lo+i) > target })
	return i - 1
}

// firstSlotAtOrAbove returns the first slot whose key is >= target, or the
// number of entries when there is none. Keys must be non-decreasing. Caller
// holds mu.
func (m *mmapIndex) firstSlotAtOrAbove(target int64, key func(slot int) int64) int {
	return sort.Search(m.entries, func(i int) bool { return key(i) >= target })
}
