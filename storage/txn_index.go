package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
)

// The aborted transaction index, Kafka's TransactionIndex: per segment,
// "<base>.txnindex", one entry per transaction whose ABORT marker lies in
// the segment. A read_committed consumer gets the entries overlapping its
// fetch (Log.AbortedTransactions) and drops those producers' records from
// each entry's first offset to its marker.
//
// Format (Kafka's, so the files are interchangeable), entries back to back,
// no header, big-endian:
//
//	version           int16  0
//	producer id       int64
//	first offset      int64  the transaction's first data batch
//	last offset       int64  its ABORT marker
//	last stable       int64  the LSO just after the marker was appended
//
// Most segments never see an abort, so the file is created with the first
// entry. The entries are few (one per aborted transaction) and are kept in
// memory as well, so that a fetch costs no read of the file.

const (
	txnIndexSuffix = ".txnindex"
	// txnIndexEntrySize is Kafka's AbortedTxn.TotalSize.
	txnIndexEntrySize = 34
	txnIndexVersion   = 0
)

// AbortedTxn is one entry of the aborted transaction index: producer
// ProducerID's records from FirstOffset to LastOffset (its ABORT marker)
// were aborted. LastStableOffset is the partition's last stable offset just
// after the marker: an entry whose LastStableOffset is at or above a
// fetch's upper bound proves that no later entry concerns the fetch.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnIndex is one segment's aborted transaction index. Its entries are
// changed under the owning Log's write lock (append, truncate, reset) and
// read under its read lock; mu additionally guards the file against the
// background flush of rolled segments (flush.go), which fsyncs without
// the log's lock.
type txnIndex struct {
	entries []AbortedTxn

	mu   sync.Mutex
	path string   // renamed with the segment (.deleted, compaction suffixes)
	file *os.File // nil until the first entry is written (or a file loaded)
}

func newTxnIndex(path string) *txnIndex { return &txnIndex{path: path} }

// encodeAbortedTxn appends e in the file format.
func encodeAbortedTxn(b []byte, e AbortedTxn) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, txnIndexVersion)
	b = be.AppendUint64(b, uint64(e.ProducerID))
	b = be.AppendUint64(b, uint64(e.FirstOffset))
	b = be.AppendUint64(b, uint64(e.LastOffset))
	return be.AppendUint64(b, uint64(e.LastStableOffset))
}

// ReadTxnIndexFile reads the entries of a segment's .txnindex file (the
// operator's dump-log; the log itself keeps them in memory).
func ReadTxnIndexFile(path string) ([]AbortedTxn, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read txn index: %w", err)
	}
	return decodeTxnIndex(b, path)
}

// decodeTxnIndex parses a txnindex file's bytes. Any defect (a torn
// entry, an unknown version, offsets no writer produces) is an error
// wrapping ErrCorruptIndex: the caller rebuilds the index from the log.
func decodeTxnIndex(b []byte, path string) ([]AbortedTxn, error) {
	if len(b)%txnIndexEntrySize != 0 {
		return nil, fmt.Errorf("txn index %s: %d bytes is no whole number of entries: %w", path, len(b), ErrCorruptIndex)
	}
	be := binary.BigEndian
	out := make([]AbortedTxn, 0, len(b)/txnIndexEntrySize)
	prevLast := int64(-1)
	for p := 0; p < len(b); p += txnIndexEntrySize {
		e := b[p : p+txnIndexEntrySize]
		if v := int16(be.Uint16(e)); v != txnIndexVersion {
			return nil, fmt.Errorf("txn index %s entry %d: version %d: %w", path, len(out), v, ErrCorruptIndex)
		}
		a := AbortedTxn{
			ProducerID: int64(be.Uint64(e[2:])), FirstOffset: int64(be.Uint64(e[10:])),
			LastOffset: int64(be.Uint64(e[18:])), LastStableOffset: int64(be.Uint64(e[26:])),
		}
		// Markers are appended in offset order, each after its
		// transaction's first batch; the LSO after a marker is above the
		// transactions it bounds, which start at or after 0.
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.LastOffset <= a.FirstOffset || a.LastOffset <= prevLast || a.LastStableOffset < 0 {
			return nil, fmt.Errorf("txn index %s entry %d %+v is invalid: %w", path, len(out), a, ErrCorruptIndex)
		}
		prevLast = a.LastOffset
		out = append(out, a)
	}
	return out, nil
}

// load reads the file, if there is one. On error the index is left empty.
func (x *txnIndex) load() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	b, err := os.ReadFile(x.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open txn index %s: %w", x.path, err)
	}
	entries, err := decodeTxnIndex(b, x.path)
	if err != nil {
		return err
	}
	x.entries = entries
	return nil
}

// append adds e, creating the file on the first entry. l.mu is held.
func (x *txnIndex) append(e AbortedTxn) error {
	return x.appendAll([]AbortedTxn{e})
}

// appendAll adds entries in one write. l.mu is held (or the index belongs
// to a cleaned segment not yet in the log).
func (x *txnIndex) appendAll(entries []AbortedTxn) error {
	if len(entries) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.file == nil {
		f, err := os.OpenFile(x.path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("open txn index %s: %w: %w", x.path, ErrStorage, err)
		}
		x.file = f
	}
	buf := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, e := range entries {
		buf = encodeAbortedTxn(buf, e)
	}
	// WriteAt at the end the entries say, not O_APPEND: a file longer than
	// its entries (a write that failed halfway) is overwritten.
	if _, err := x.file.WriteAt(buf, int64(len(x.entries))*txnIndexEntrySize); err != nil {
		return fmt.Errorf("append to txn index %s: %w: %w", x.path, ErrStorage, err)
	}
	x.entries = append(x.entries, entries...)
	return nil
}

// truncateTo drops the entries whose marker is at or after offset (a
// truncation of the segment removed the marker). l.mu is held.
func (x *txnIndex) truncateTo(offset int64) error {
	n := len(x.entries)
	for n > 0 && x.entries[n-1].LastOffset >= offset {
		n--
	}
	if n == len(x.entries) {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.entries = x.entries[:n]
	if x.file == nil {
		// Loaded entries without an open file: open it to cut it.
		if err := os.Truncate(x.path, int64(n)*txnIndexEntrySize); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("truncate txn index %s: %w: %w", x.path, ErrStorage, err)
		}
		return nil
	}
	if err := x.file.Truncate(int64(n) * txnIndexEntrySize); err != nil {
		return fmt.Errorf("truncate txn index %s: %w: %w", x.path, ErrStorage, err)
	}
	return nil
}

// reset empties the index and removes its file: recovery rebuilds it.
// l.mu is held or the log is being opened.
func (x *txnIndex) reset() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.entries = nil
	if x.file != nil {
		x.file.Close()
		x.file = nil
	}
	if err := os.Remove(x.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove txn index %s: %w", x.path, err)
	}
	return nil
}

// sync fsyncs the file if this process wrote to it (a loaded file was
// durable already). Safe without l.mu (the background flush of rolled segments).
func (x *txnIndex) sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.file == nil {
		return nil
	}
	if err := x.file.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w: %w", x.path, ErrStorage, err)
	}
	return nil
}

// renameTo renames the file (if there is one) and remembers the new path
// for a file created later.
func (x *txnIndex) renameTo(path string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := os.Rename(x.path, path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rename %s: %w", x.path, err)
	}
	x.path = path
	return nil
}

// close closes the file.
func (x *txnIndex) close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.file == nil {
		return nil
	}
	err := x.file.Close()
	x.file = nil
	return err
}

// remove closes and removes the file.
func (x *txnIndex) remove() error {
	err := x.close()
	x.mu.Lock()
	defer x.mu.Unlock()
	if rerr := os.Remove(x.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}
