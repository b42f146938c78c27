package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
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
// Format (version 2, big-endian), our own, not Kafka's:
//
//	version       uint8   2
//	crc           uint32  CRC32C (Castagnoli) of everything after it
//	offset        int64   N, repeated from the file name
//	released      int64   txnState.releasedMarker, -1 for none
//	producers     uint32
//	per producer, ascending ids:
//	  producer id         int64
//	  epoch               int16
//	  txn first offset    int64   the open transaction's, -1 for none
//	  coordinator epoch   int32   the last marker's, -1 for none
//	  last timestamp      int64   of the newest batch or marker
//	  last offset         int64   of the newest batch or marker
//	  batches             uint8   0..5, oldest first
//	  per batch:
//	    first sequence, last sequence   int32, int32
//	    first offset, last offset       int64, int64
//	    max timestamp                   int64
//	    flags                           uint8 (bit 0: LogAppendTime)
//	unstable      uint32  completed transactions whose marker was not yet
//	                      below the high watermark, in marker order:
//	  producer id, first offset, marker offset   int64 x 3
//
// Version 1, before transactions, had neither released, the four
// transaction fields per producer nor the unstable list, and at least one
// batch per producer; it still loads, as a state without transactions.
//
// Kafka's snapshot keeps only each producer's last batch; ours keeps the
// five a retry may duplicate, so a retry of any of them is still answered
// after a restart. Kafka's keeps no completed transactions either: after a
// restart it loses those whose marker the high watermark had not passed,
// and its LSO runs ahead of them until then; ours keeps them.
//
// A snapshot that cannot be read or fails its checks is logged, deleted
// and skipped: the next older one is tried, and without any the state is
// rebuilt from the log start offset. A snapshot is an optimisation, never
// a reason for a log not to open.

const (
	producerSnapshotSuffix    = ".snapshot"
	producerSnapshotVersion   = 2
	producerSnapshotVersionV1 = 1
	// producerSnapshotHeader is version + crc + offset + released +
	// producer count.
	producerSnapshotHeader   = 1 + 4 + 8 + 8 + 4
	producerSnapshotHeaderV1 = 1 + 4 + 8 + 4
	producerSnapshotEntry    = 8 + 2 + 8 + 4 + 8 + 8 + 1
	producerSnapshotEntryV1  = 8 + 2 + 1
	producerSnapshotBatch    = 4 + 4 + 8 + 8 + 8 + 1
	producerSnapshotTxn      = 8 + 8 + 8
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

// producerSnapshot is what a snapshot holds: the producers, and the
// transactions the LSO needs besides their open ones.
type producerSnapshot struct {
	producers producerStateMap
	// unstable are the completed transactions whose marker was not yet
	// below the high watermark, in marker order; releasedMarker is
	// txnState.releasedMarker.
	unstable       []txnSpan
	releasedMarker int64
}

// snapshotOf is the log's state to write in a snapshot. l.mu is held.
func (l *Log) snapshotOf() producerSnapshot {
	return producerSnapshot{producers: l.producers, unstable: l.txns.unstable, releasedMarker: l.txns.releasedMarker}
}

// encodeProducerSnapshot serialises s as of offset.
func encodeProducerSnapshot(offset int64, s producerSnapshot) []byte {
	m := s.producers
	ids := make([]int64, 0, len(m))
	size := producerSnapshotHeader + 4 + len(s.unstable)*producerSnapshotTxn
	for id, e := range m {
		ids = append(ids, id)
		size += producerSnapshotEntry + len(e.batches)*producerSnapshotBatch
	}
	slices.Sort(ids)
	be := binary.BigEndian
	b := make([]byte, producerSnapshotHeader, size)
	b[0] = producerSnapshotVersion
	be.PutUint64(b[5:], uint64(offset))
	be.PutUint64(b[13:], uint64(s.releasedMarker))
	be.PutUint32(b[21:], uint32(len(ids)))
	for _, id := range ids {
		e := m[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint64(b, uint64(e.txnFirstOffset))
		b = be.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.lastTimestamp))
		b = be.AppendUint64(b, uint64(e.lastOffset))
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
	b = be.AppendUint32(b, uint32(len(s.unstable)))
	for _, t := range s.unstable {
		b = be.AppendUint64(b, uint64(t.producerID))
		b = be.AppendUint64(b, uint64(t.firstOffset))
		b = be.AppendUint64(b, uint64(t.lastOffset))
	}
	be.PutUint32(b[1:], crc32.Checksum(b[5:], snapshotCRCTable))
	return b
}

// decodeProducerSnapshot parses a snapshot (version 2 or 1) that must
// describe offset. Any defect is an error wrapping ErrCorruptCheckpoint.
func decodeProducerSnapshot(b []byte, offset int64) (producerSnapshot, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("producer snapshot %d: %s: %w", offset, fmt.Sprintf(format, args...), ErrCorruptCheckpoint)
	}
	if len(b) < 1 {
		return producerSnapshot{}, corrupt("empty")
	}
	v1 := b[0] == producerSnapshotVersionV1
	header, entry := producerSnapshotHeader, producerSnapshotEntry
	if v1 {
		header, entry = producerSnapshotHeaderV1, producerSnapshotEntryV1
	} else if b[0] != producerSnapshotVersion {
		return producerSnapshot{}, corrupt("unknown version %d", b[0])
	}
	if len(b) < header {
		return producerSnapshot{}, corrupt("%d bytes, shorter than its header", len(b))
	}
	be := binary.BigEndian
	if want, got := be.Uint32(b[1:]), crc32.Checksum(b[5:], snapshotCRCTable); want != got {
		return producerSnapshot{}, corrupt("crc %08x, computed %08x", want, got)
	}
	if got := int64(be.Uint64(b[5:])); got != offset {
		return producerSnapshot{}, corrupt("holds offset %d", got)
	}
	out := producerSnapshot{releasedMarker: -1}
	if !v1 {
		out.releasedMarker = int64(be.Uint64(b[13:]))
		if out.releasedMarker < -1 || out.releasedMarker >= offset {
			return producerSnapshot{}, corrupt("released marker %d", out.releasedMarker)
		}
	}
	count := be.Uint32(b[header-4:])
	rest := b[header:]
	if uint64(count)*uint64(entry) > uint64(len(rest)) {
		return producerSnapshot{}, corrupt("%d producers in %d bytes", count, len(rest))
	}
	m := make(producerStateMap, count)
	prevID := int64(-1)
	for i := uint32(0); i < count; i++ {
		if len(rest) < entry {
			return producerSnapshot{}, corrupt("producer %d truncated", i)
		}
		id, epoch := int64(be.Uint64(rest)), int16(be.Uint16(rest[8:]))
		e := newProducerEntry(epoch)
		minBatches := 0
		if v1 {
			minBatches = 1
		} else {
			e.txnFirstOffset, e.coordinatorEpoch = int64(be.Uint64(rest[10:])), int32(be.Uint32(rest[18:]))
			e.lastTimestamp, e.lastOffset = int64(be.Uint64(rest[22:])), int64(be.Uint64(rest[30:]))
		}
		n := int(rest[entry-1])
		rest = rest[entry:]
		if id <= prevID || n < minBatches || n > producerBatchesKept || len(rest) < n*producerSnapshotBatch ||
			e.txnFirstOffset < -1 || e.txnFirstOffset >= offset || e.coordinatorEpoch < -1 ||
			(!v1 && (e.lastOffset < 0 || e.lastOffset >= offset)) {
			return producerSnapshot{}, corrupt("producer %d (id %d, epoch %d, %d batches) is invalid", i, id, epoch, n)
		}
		prevID = id
		e.batches = make([]ProducerBatch, n, max(n, 1))
		prevLast := int64(-1)
		for j := range e.batches {
			pb := &e.batches[j]
			pb.FirstSeq, pb.LastSeq = int32(be.Uint32(rest)), int32(be.Uint32(rest[4:]))
			pb.FirstOffset, pb.LastOffset = int64(be.Uint64(rest[8:])), int64(be.Uint64(rest[16:]))
			pb.MaxTimestamp = int64(be.Uint64(rest[24:]))
			flags := rest[32]
			pb.LogAppendTime = flags&1 != 0
			rest = rest[producerSnapshotBatch:]
			if flags&^1 != 0 || pb.FirstOffset <= prevLast || pb.LastOffset < pb.FirstOffset || pb.LastOffset >= offset ||
				(!v1 && pb.LastOffset > e.lastOffset) {
				return producerSnapshot{}, corrupt("producer %d batch %d (offsets %d-%d) is invalid", id, j, pb.FirstOffset, pb.LastOffset)
			}
			prevLast = pb.LastOffset
		}
		if v1 {
			last := e.batches[n-1]
			e.lastTimestamp, e.lastOffset = last.MaxTimestamp, last.LastOffset
		}
		m[id] = e
	}
	out.producers = m
	if !v1 {
		if len(rest) < 4 {
			return producerSnapshot{}, corrupt("no transaction count")
		}
		txns := be.Uint32(rest)
		rest = rest[4:]
		if uint64(txns)*producerSnapshotTxn != uint64(len(rest)) {
			return producerSnapshot{}, corrupt("%d transactions in %d bytes", txns, len(rest))
		}
		prevMarker := out.releasedMarker
		for range txns {
			t := txnSpan{producerID: int64(be.Uint64(rest)), firstOffset: int64(be.Uint64(rest[8:])), lastOffset: int64(be.Uint64(rest[16:]))}
			rest = rest[producerSnapshotTxn:]
			if t.producerID < 0 || t.firstOffset < 0 || t.lastOffset <= t.firstOffset || t.lastOffset <= prevMarker || t.lastOffset >= offset {
				return producerSnapshot{}, corrupt("transaction %+v is invalid", t)
			}
			prevMarker = t.lastOffset
			out.unstable = append(out.unstable, t)
		}
	}
	if len(rest) != 0 {
		return producerSnapshot{}, corrupt("%d trailing bytes", len(rest))
	}
	return out, nil
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
	offsets, err := listProducerSnapshots(l.path())
	if err != nil {
		return err
	}
	l.producerSnapshots = offsets
	leo := l.active().nextOffset
	// Durably, as on a truncation: the log may grow past these again.
	if l.deleteProducerSnapshotsLocked(func(off int64) bool { return off > leo }) {
		if err := syncDir(l.path()); err != nil {
			return err
		}
	}
	l.deleteProducerSnapshotsLocked(func(off int64) bool { return off < l.logStartOffset })
	// Recovery discarded the transaction index of the segments it
	// re-validated (log.go, recoverSegments): the scan rebuilds them.
	txnIndexFrom := int64(math.MaxInt64)
	for _, s := range l.segments {
		if s.txnRebuild {
			txnIndexFrom = s.baseOffset
			break
		}
	}
	err = l.rebuildProducerStateLocked(txnIndexFrom)
	for _, s := range l.segments {
		s.txnRebuild = false
	}
	return err
}

// rebuildProducerStateLocked replaces the producer and transaction state
// with the newest usable snapshot plus a scan of the batches after it
// (from the log start offset without one). Usable: at or below the log
// end offset and at or below txnIndexFrom, the first offset whose
// transaction index recovery discarded (the scan rebuilds those entries,
// so it must start at or before them; math.MaxInt64 for none), and
// complete for the high watermark: a snapshot lists the completed
// transactions its high watermark had not yet passed, so one whose
// released marker is at or above today's high watermark may miss a
// transaction that today's still holds the LSO for, and an older one is
// taken. l.mu is held.
func (l *Log) rebuildProducerStateLocked(txnIndexFrom int64) error {
	start := time.Now()
	leo := l.active().nextOffset
	snap, from := producerSnapshot{producers: producerStateMap{}, releasedMarker: -1}, l.logStartOffset
	for i := len(l.producerSnapshots) - 1; i >= 0; i-- {
		off := l.producerSnapshots[i]
		if off > leo || off > txnIndexFrom || off < l.logStartOffset {
			continue
		}
		b, err := os.ReadFile(producerSnapshotPath(l.path(), off))
		if err == nil {
			var loaded producerSnapshot
			if loaded, err = decodeProducerSnapshot(b, off); err == nil {
				if loaded.releasedMarker >= l.highWatermark {
					continue // usable for an older high watermark only; kept
				}
				snap, from = loaded, off
				break
			}
		}
		l.logger.Warn("skipping an unreadable producer state snapshot", "offset", off, "error", err)
		l.deleteProducerSnapshotsLocked(func(o int64) bool { return o == off })
	}
	m := snap.producers
	var txns txnState
	txns.rebuild(m, snap.unstable, snap.releasedMarker)
	n, err := l.scanProducerBatchesLocked(m, &txns, from, leo, txnIndexFrom < leo)
	l.producerBatchesScanned += int64(n)
	if err != nil {
		// Unreadable batch headers make the log itself fail where they
		// are read; the partition stays available, and a producer whose
		// batches could not be read is taken as a new one (any sequence
		// accepted), never refused.
		l.logger.Error("the producer state was rebuilt without the batches that could not be read", "error", err)
	}
	m.evictBefore(l.logStartOffset)
	txns.onHighWatermark(l.highWatermark)
	l.producers, l.txns = m, txns
	if n > 0 {
		level := hclog.Debug
		if n >= 10_000 {
			level = hclog.Info
		}
		l.logger.Log(level, "rebuilt producer state", "from_offset", from, "log_end_offset", leo,
			"batches_scanned", n, "producers", len(m), "open_transactions", len(txns.ongoing), "duration", time.Since(start))
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
	if err := write(producerSnapshotPath(l.path(), offset), encodeProducerSnapshot(offset, l.snapshotOf())); err != nil {
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
		if err := os.Remove(producerSnapshotPath(l.path(), off)); err != nil && !errors.Is(err, os.ErrNotExist) {
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
		if err := syncDir(l.path()); err != nil {
			return err
		}
	}
	if len(l.producers) == 0 && l.txns.empty() {
		return nil
	}
	return l.rebuildProducerStateLocked(math.MaxInt64)
}

// clearProducerStateLocked empties the state and deletes every snapshot
// (the log restarts empty at a new offset). l.mu is held.
func (l *Log) clearProducerStateLocked() error {
	l.producers, l.txns = producerStateMap{}, newTxnState()
	if l.deleteProducerSnapshotsLocked(func(int64) bool { return true }) {
		return syncDir(l.path())
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
