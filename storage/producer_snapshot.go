package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Producer state snapshots: Kafka's "<offset>.snapshot" files
// (ProducerStateManager.takeSnapshot). A snapshot named N holds the
// producer state as of offset N, that is after every batch below N; it
// spares a reopened (or truncated) log the scan of everything below N.
//
// Format (version 1, big-endian), our own, not Kafka's:
//
//	version       uint8   1
//	crc           uint32  CRC32C (Castagnoli) of everything after it
//	offset        int64   N, repeated from the file name
//	producers     uint32
//	per producer, ascending ids:
//	  producer id   int64
//	  epoch         int16
//	  batches       uint8   1..5, oldest first
//	  per batch:
//	    first sequence, last sequence   int32, int32
//	    first offset, last offset       int64, int64
//	    max timestamp                   int64
//	    flags                           uint8 (bit 0: LogAppendTime)
//
// Kafka's snapshot keeps only each producer's last batch; ours keeps the
// five a retry may duplicate, so a retry of any of them is still answered
// after a restart.
//
// A snapshot that cannot be read or fails its checks is logged, deleted
// and skipped: the next older one is tried, and without any the state is
// rebuilt from the log start offset. A snapshot is an optimisation, never
// a reason for a log not to open.

const (
	producerSnapshotSuffix  = ".snapshot"
	producerSnapshotVersion = 1
	// producerSnapshotHeader is version + crc + offset + producer count.
	producerSnapshotHeader = 1 + 4 + 8 + 4
	producerSnapshotEntry  = 8 + 2 + 1
	producerSnapshotBatch  = 4 + 4 + 8 + 8 + 8 + 1
	// producerSnapshotsKept is how many snapshots a log keeps, newest
	// first. Kafka keeps one per segment; truncations (KIP-101) cut to the
	// leader's epoch end offset, which trails the log end offset by
	// seconds of data, so the newest few serve them, and a deeper one
	// rebuilds from the log start offset.
	producerSnapshotsKept = 4
)

var snapshotCRCTable = crc32.MakeTable(crc32.Castagnoli)

func producerSnapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, segmentFileName(offset, producerSnapshotSuffix))
}

// encodeProducerSnapshot serialises m as of offset.
func encodeProducerSnapshot(offset int64, m producerStateMap) []byte {
	ids := make([]int64, 0, len(m))
	size := producerSnapshotHeader
	for id, e := range m {
		ids = append(ids, id)
		size += producerSnapshotEntry + len(e.batches)*producerSnapshotBatch
	}
	slices.Sort(ids)
	be := binary.BigEndian
	b := make([]byte, producerSnapshotHeader, size)
	b[0] = producerSnapshotVersion
	be.PutUint64(b[5:], uint64(offset))
	be.PutUint32(b[13:], uint32(len(ids)))
	for _, id := range ids {
		e := m[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(len(e.batches)))
		for _, pb := range e.batches {
			b = be.AppendUint32(b, uint32(pb.FirstSeq))
			b = be.AppendUint32(b, uint32(pb.LastSeq))
			b = be.AppendUint64(b, uint64(pb.FirstOffset))
			b = be.AppendUint64(b, uint64(pb.LastOffset))
			b = be.AppendUint64(b, uint64(pb.MaxTimestamp))
			var flags byte
			if pb.LogAppendTime {
				flags |= 1
			}
			b = append(b, flags)
		}
	}
	be.PutUint32(b[1:], crc32.Checksum(b[5:], snapshotCRCTable))
	return b
}

// decodeProducerSnapshot parses a snapshot that must describe offset. Any
// defect is an error wrapping ErrCorruptCheckpoint.
func decodeProducerSnapshot(b []byte, offset int64) (producerStateMap, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("producer snapshot %d: %s: %w", offset, fmt.Sprintf(format, args...), ErrCorruptCheckpoint)
	}
	if len(b) < producerSnapshotHeader {
		return nil, corrupt("%d bytes, shorter than its header", len(b))
	}
	if b[0] != producerSnapshotVersion {
		return nil, corrupt("unknown version %d", b[0])
	}
	be := binary.BigEndian
	if want, got := be.Uint32(b[1:]), crc32.Checksum(b[5:], snapshotCRCTable); want != got {
		return nil, corrupt("crc %08x, computed %08x", want, got)
	}
	if got := int64(be.Uint64(b[5:])); got != offset {
		return nil, corrupt("holds offset %d", got)
	}
	count := be.Uint32(b[13:])
	rest := b[producerSnapshotHeader:]
	if uint64(count)*(producerSnapshotEntry+producerSnapshotBatch) > uint64(len(rest)) {
		return nil, corrupt("%d producers in %d bytes", count, len(rest))
	}
	m := make(producerStateMap, count)
	prevID := int64(-1)
	for i := uint32(0); i < count; i++ {
		if len(rest) < producerSnapshotEntry {
			return nil, corrupt("producer %d truncated", i)
		}
		id, epoch, n := int64(be.Uint64(rest)), int16(be.Uint16(rest[8:])), int(rest[10])
		rest = rest[producerSnapshotEntry:]
		if id <= prevID || n < 1 || n > producerBatchesKept || len(rest) < n*producerSnapshotBatch {
			return nil, corrupt("producer %d (id %d, epoch %d, %d batches) is invalid", i, id, epoch, n)
		}
		prevID = id
		e := &producerEntry{epoch: epoch, batches: make([]ProducerBatch, n)}
		prevLast := int64(-1)
		for j := range e.batches {
			pb := &e.batches[j]
			pb.FirstSeq, pb.LastSeq = int32(be.Uint32(rest)), int32(be.Uint32(rest[4:]))
			pb.FirstOffset, pb.LastOffset = int64(be.Uint64(rest[8:])), int64(be.Uint64(rest[16:]))
			pb.MaxTimestamp = int64(be.Uint64(rest[24:]))
			flags := rest[32]
			pb.LogAppendTime = flags&1 != 0
			rest = rest[producerSnapshotBatch:]
			if flags&^1 != 0 || pb.FirstOffset <= prevLast || pb.LastOffset < pb.FirstOffset || pb.LastOffset >= offset {
				return nil, corrupt("producer %d batch %d (offsets %d-%d) is invalid", id, j, pb.FirstOffset, pb.LastOffset)
			}
			prevLast = pb.LastOffset
		}
		m[id] = e
	}
	if len(rest) != 0 {
		return nil, corrupt("%d trailing bytes", len(rest))
	}
	return m, nil
}

// listProducerSnapshots returns the offsets of dir's snapshot files,
// ascending.
func listProducerSnapshots(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list producer snapshots: %w", err)
	}
	var out []int64
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, producerSnapshotSuffix) {
			if off, ok := parseSegmentBase(name); ok && len(name) == 20+len(producerSnapshotSuffix) {
				out = append(out, off)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// loadProducerStateLocked is the producer-state part of opening a log,
// after recovery: it lists the snapshots, drops those the log cannot use
// (above its end: a crash lost what they describe; below its start) and
// rebuilds the state from the newest usable one. l.mu is held or the log
// is being opened.
func (l *Log) loadProducerStateLocked() error {
	offsets, err := listProducerSnapshots(l.dir)
	if err != nil {
		return err
	}
	l.producerSnapshots = offsets
	leo := l.active().nextOffset
	// Durably, as on a truncation: the log may grow past these again.
	if l.deleteProducerSnapshotsLocked(func(off int64) bool { return off > leo }) {
		if err := syncDir(l.dir); err != nil {
			return err
		}
	}
	l.deleteProducerSnapshotsLocked(func(off int64) bool { return off < l.logStartOffset })
	return l.rebuildProducerStateLocked()
}

// rebuildProducerStateLocked replaces the producer state with the newest
// readable snapshot at or below the log end offset plus a scan of the batch
// headers after it (from the log start offset without one). l.mu is held.
func (l *Log) rebuildProducerStateLocked() error {
	start := time.Now()
	leo := l.active().nextOffset
	m, from := producerStateMap{}, l.logStartOffset
	for i := len(l.producerSnapshots) - 1; i >= 0; i-- {
		off := l.producerSnapshots[i]
		if off > leo || off < l.logStartOffset {
			continue
		}
		b, err := os.ReadFile(producerSnapshotPath(l.dir, off))
		if err == nil {
			var loaded producerStateMap
			if loaded, err = decodeProducerSnapshot(b, off); err == nil {
				m, from = loaded, off
				break
			}
		}
		l.logger.Warn("skipping an unreadable producer state snapshot", "offset", off, "error", err)
		l.deleteProducerSnapshotsLocked(func(o int64) bool { return o == off })
	}
	n, err := l.scanProducerBatchesLocked(m, from, leo)
	l.producerBatchesScanned += int64(n)
	if err != nil {
		// Unreadable batch headers make the log itself fail where they
		// are read; the partition stays available, and a producer whose
		// batches could not be read is taken as a new one (any sequence
		// accepted), never refused.
		l.logger.Error("the producer state was rebuilt without the batches that could not be read", "error", err)
	}
	m.evictBefore(l.logStartOffset)
	l.producers = m
	if n > 0 {
		level := hclog.Debug
		if n >= 10_000 {
			level = hclog.Info
		}
		l.logger.Log(level, "rebuilt producer state", "from_offset", from, "log_end_offset", leo,
			"batches_scanned", n, "producers", len(m), "duration", time.Since(start))
	}
	return nil
}

// takeProducerSnapshotLocked writes the producer state as of offset (the
// log end offset: on a roll, the new segment's base) unless a snapshot
// would save no scan, and keeps the newest producerSnapshotsKept. A failed
// write is logged, not returned: the snapshot is an optimisation. l.mu is
// held.
func (l *Log) takeProducerSnapshotLocked(offset int64, durable bool) {
	covered := l.logStartOffset
	if n := len(l.producerSnapshots); n > 0 {
		covered = max(covered, l.producerSnapshots[n-1])
	}
	if offset <= covered {
		return
	}
	// durable (Close) fsyncs the file and the directory now; a roll's
	// snapshot is fsynced by the background flush of the rolled segment
	// (flush.go), as Kafka's is. A snapshot that survives a crash the data
	// below it did not is beyond the recovered log end offset, and
	// loadProducerStateLocked deletes it; a torn one is skipped as
	// unreadable.
	write := writeFileAtomic
	if !durable {
		write = writeFileNoSync
	}
	if err := write(producerSnapshotPath(l.dir, offset), encodeProducerSnapshot(offset, l.producers)); err != nil {
		l.logger.Warn("writing a producer state snapshot failed", "offset", offset, "error", err)
		return
	}
	l.producerSnapshots = append(l.producerSnapshots, offset)
	if n := len(l.producerSnapshots); n > producerSnapshotsKept {
		oldest := l.producerSnapshots[n-producerSnapshotsKept-1]
		l.deleteProducerSnapshotsLocked(func(off int64) bool { return off <= oldest })
	}
}

// deleteProducerSnapshotsLocked removes the snapshot files whose offsets
// match and reports whether it removed any. l.mu is held.
func (l *Log) deleteProducerSnapshotsLocked(match func(offset int64) bool) bool {
	kept := l.producerSnapshots[:0]
	removed := false
	for _, off := range l.producerSnapshots {
		if !match(off) {
			kept = append(kept, off)
			continue
		}
		if err := os.Remove(producerSnapshotPath(l.dir, off)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("removing a producer state snapshot failed", "offset", off, "error", err)
		}
		removed = true
	}
	l.producerSnapshots = kept
	return removed
}

// truncateProducerStateLocked follows a truncation to the new log end
// offset: snapshots above it describe batches that are gone and go too
// (durably, so a crash cannot bring one back over a log that grew past it
// again), and the state is rebuilt from the newest one left. A partition
// without producers stays without (Kafka's shortcut for logs that never
// saw an idempotent producer: a truncation cannot add one). l.mu is held.
func (l *Log) truncateProducerStateLocked() error {
	leo := l.active().nextOffset
	if l.deleteProducerSnapshotsLocked(func(off int64) bool { return off > leo }) {
		if err := syncDir(l.dir); err != nil {
			return err
		}
	}
	if len(l.producers) == 0 {
		return nil
	}
	return l.rebuildProducerStateLocked()
}

// clearProducerStateLocked empties the state and deletes every snapshot
// (the log restarts empty at a new offset). l.mu is held.
func (l *Log) clearProducerStateLocked() error {
	l.producers = producerStateMap{}
	if l.deleteProducerSnapshotsLocked(func(int64) bool { return true }) {
		return syncDir(l.dir)
	}
	return nil
}

// producerStateLogStartMovedLocked follows the log start offset forward
// (retention, DeleteRecords): producers whose batches are all below it are
// forgotten, and so are the snapshots below it (Kafka's
// ProducerStateManager.truncateHead). l.mu is held.
func (l *Log) producerStateLogStartMovedLocked() {
	l.producers.evictBefore(l.logStartOffset)
	l.deleteProducerSnapshotsLocked(func(off int64) bool { return off < l.logStartOffset })
}
