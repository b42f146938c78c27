package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/network/record"
)

// leaderEpochCheckpointFile is the per-partition leader-epoch cache file.
const leaderEpochCheckpointFile = "leader-epoch-checkpoint"

// OpenOptions tell OpenLog what the log manager's checkpoints say about the
// partition.
type OpenOptions struct {
	Config LogConfig
	// RecoveryPoint is the first offset not known to be fsynced: recovery
	// after an unclean shutdown re-validates every batch from the segment
	// holding it. 0 re-validates everything.
	RecoveryPoint int64
	// LogStartOffset is the checkpointed log start offset (DeleteRecords or
	// retention may have moved it inside the first segment).
	LogStartOffset int64
	// HighWatermark is the checkpointed high watermark.
	HighWatermark int64
	// CleanShutdown says the log dir's clean-shutdown marker was present:
	// indexes are trusted and opening is O(segments), not O(bytes).
	CleanShutdown bool
	// WritebackBytes has the kernel start writing appended bytes to disk
	// each time this many have accumulated in a segment (without waiting
	// for it, and without fsync); 0 leaves it to the kernel's own
	// writeback (writeback.go).
	WritebackBytes int64
	// DropBehindBytes, with WritebackBytes, has each hand-over also drop
	// from the page cache the segment's pages more than this many bytes
	// behind the last hand-over (writeback.go); 0 keeps them cached.
	DropBehindBytes int64
	Logger          hclog.Logger
	// Now is the clock (tests substitute it); time.Now when nil.
	Now func() time.Time
	// logDir is the failure state of the log dir (set by the Manager;
	// nil: a failure takes nothing offline).
	logDir *logDir
	// writebackQueue and writebackEvery are the Manager's (writeback.go):
	// its logs share one keel.log.writeback.bytes, which
	// Manager.SetWritebackBytes changes at runtime (WritebackBytes is
	// then ignored).
	writebackQueue *writebackQueue
	writebackEvery *atomic.Int64
	// dropBehind is the Manager's keel.log.cache.drop.behind.bytes, which
	// Manager.SetDropBehindBytes changes (DropBehindBytes is then ignored).
	dropBehind *atomic.Int64
	// deleter is the Manager's (deleter.go): it removes the files of
	// deleted segments (nil: at once, in reapDeleted).
	deleter *fileDeleter
}

// AppendOptions qualify an append.
type AppendOptions struct {
	// LeaderEpoch is stamped into every batch a leader appends (KIP-101).
	LeaderEpoch int32
	// FromCoordinator is a coordinator's own append: control batches
	// (transaction markers) are allowed, which clients may not produce,
	// and producer batches are checked for their epoch only, not their
	// sequence (Kafka's AppendOrigin.COORDINATOR: the group coordinator
	// writes a TxnOffsetCommit as a transactional batch of the producer,
	// each at sequence 0).
	FromCoordinator bool
	// Sync fsyncs the appended batches before Append returns.
	Sync bool
	// DeferFlush skips flush.messages' inline fsync: the caller
	// group-commits with Log.Sync instead (the broker's durable mode,
	// flush.messages=1, where concurrent producers share fsyncs).
	DeferFlush bool
	// VerifyTxn requires a transactional batch that opens its producer's
	// transaction in the partition to carry TxnGuard, the guard of a
	// verification the coordinator confirmed (txn_verify.go); otherwise
	// the append fails with ErrInvalidTxnState. The group coordinator's
	// transactional offset commits (FromCoordinator) are verified too.
	VerifyTxn bool
	TxnGuard  *TxnVerificationGuard
}

// AppendInfo describes what an append wrote.
type AppendInfo struct {
	// FirstOffset and LastOffset are the offsets assigned to the first and
	// last record; FirstOffset is -1 when nothing was appended.
	FirstOffset int64
	LastOffset  int64
	// LogAppendTime is the broker timestamp stamped in, or -1 (CreateTime).
	LogAppendTime int64
	// MaxTimestamp is the largest record timestamp appended.
	MaxTimestamp int64
	// MinTimestamp is the smallest record (create) timestamp of a
	// producer's batches (ValidateProduce only; -1 otherwise).
	MinTimestamp int64
	// NullKeys counts the records with a null key (ValidateProduce only):
	// a compacted topic refuses them.
	NullKeys int
	// Records and Bytes count what was appended.
	Records int
	Bytes   int
	// LogStartOffset is the log start offset at append time (produce
	// responses carry it).
	LogStartOffset int64
	// Duplicate says a leader's record set repeated a batch the idempotent
	// producer state remembers (a producer's retry): nothing was appended,
	// and FirstOffset, LastOffset, MaxTimestamp and LogAppendTime are the
	// original batch's (producer_state.go).
	Duplicate bool
}

// ReadInfo is the answer to Read: file regions holding whole batches, and
// the log's offsets at the time of the read.
type ReadInfo struct {
	Regions []FileRegion
	// Bytes is the total length of Regions.
	Bytes          int64
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	// LastStableOffset is the LSO at the time of the read (read_committed
	// consumers read below it; txn_state.go).
	LastStableOffset int64
}

type pendingDelete struct {
	seg      *segment
	deadline time.Time
}

// Log is one partition's log: an ordered list of segments, the last one
// active. Concurrency: every method is safe for concurrent use. Appends,
// truncations, retention and flushes serialise on an internal lock; reads
// share it and return file regions that stay readable after it is released
// (deleted segments are closed only after file.delete.delay.ms).
type Log struct {
	// dir is the partition's directory and logDir the failure state of
	// the log dir holding it (dirfailure.go; nil outside a Manager). Both
	// change only when a move between log dirs completes (logdir_move.go),
	// under mu; read them through path and dirState from any goroutine.
	dir    atomic.Pointer[string]
	logDir atomic.Pointer[logDir]
	tp     TopicPartition
	logger hclog.Logger
	now    func() time.Time
	epochs *LeaderEpochCache
	// writebackBytes is OpenOptions.WritebackBytes, or the setting the
	// Manager's logs share; writebackQueue the Manager's (nil: hand-overs
	// run in the appender).
	writebackBytes *atomic.Int64
	writebackQueue *writebackQueue
	// dropBehind is OpenOptions.DropBehindBytes, or the Manager's shared
	// setting.
	dropBehind *atomic.Int64
	// deleter removes deleted segments' log files (nil: at once).
	deleter *fileDeleter

	// mu guards everything below. Lock order: Log.mu before any index's
	// internal lock (indexes never call back into the log).
	mu             sync.RWMutex
	cfg            LogConfig
	segments       []*segment
	logStartOffset int64
	highWatermark  int64
	recoveryPoint  int64
	// durableOffset: everything below it, or below recoveryPoint if that
	// is higher, is fsynced (DurableOffset). Sync alone raises it.
	durableOffset     int64
	unflushedMessages int64
	lastFlush         time.Time
	pendingDeletes    []pendingDelete
	closed            bool
	// structureVersion counts the changes that rewrite segments in place
	// or replace them (truncations, compaction swaps): a cleaning pass
	// planned at one version swaps its result in only at the same one
	// (cleaner.go).
	structureVersion uint64
	// swapRecovered are the segments whose interrupted compaction swap
	// load completed: recovered in full, their indexes rebuilt. Used only
	// while opening.
	swapRecovered map[int64]bool

	// segmentsCreated counts the segment files this Log created and
	// dirSynced its value at the last fsync of the directory: a new
	// segment's directory entry survives a crash only once they are equal,
	// so every flush that advances the recovery point syncs the directory
	// while they differ (flush.go).
	segmentsCreated, dirSynced uint64
	// rollFlushTarget is what the background flush of rolled segments
	// (flush.go, Kafka's "flush-log" task) is to make durable: everything
	// below it. rollFlushRunning says its goroutine runs; Close waits for
	// it with rollFlushes.
	rollFlushTarget  int64
	rollFlushRunning bool
	rollFlushes      sync.WaitGroup
	// rollFlushHook, when set (tests), runs in the background flush
	// between choosing what to flush and flushing it.
	rollFlushHook func()
	// cleanGroupHook, when set (tests), runs in a cleaning pass between
	// taking the log's directory and creating the cleaned segment there.
	cleanGroupHook func()

	// syncMu serialises Sync's fsyncs (group commit, sync.go); taken
	// before mu, never while holding it.
	syncMu sync.Mutex
	// producers is the idempotent producer state, producerSnapshots the
	// offsets of its snapshot files, ascending, and producerBatchesScanned
	// the batch headers read to rebuild it since the log was opened
	// (producer_state.go, producer_snapshot.go).
	producers              producerStateMap
	producerSnapshots      []int64
	producerBatchesScanned int64
	// txns orders the transactions that hold the last stable offset
	// (txn_state.go).
	txns txnState
	// txnGuards are the transaction verifications in flight, by producer
	// id (txn_verify.go).
	txnGuards map[int64]*TxnVerificationGuard

	// topicMu guards the topic id of partition.metadata
	// (partition_metadata.go).
	topicMu    sync.Mutex
	topicID    [16]byte
	hasTopicID bool
}

// scratchPool holds decompression buffers for produce validation.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// OpenLog opens (creating if needed) the partition log in dir, whose name
// must be "<topic>-<partition>". It recovers the log as described in
// OpenOptions. The caller owns the returned Log and must Close it.
func OpenLog(dir string, opts OpenOptions) (*Log, error) {
	tp, err := partitionOfDir(filepath.Base(dir))
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l := &Log{
		tp:             tp,
		logger:         opts.Logger.With("partition", tp.String()),
		now:            opts.Now,
		cfg:            opts.Config.normalized(),
		lastFlush:      opts.Now(),
		producers:      producerStateMap{},
		txns:           newTxnState(),
		writebackBytes: opts.writebackEvery,
		writebackQueue: opts.writebackQueue,
		dropBehind:     opts.dropBehind,
		deleter:        opts.deleter,
	}
	l.dir.Store(&dir)
	l.logDir.Store(opts.logDir)
	if l.writebackBytes == nil {
		l.writebackBytes = new(atomic.Int64)
		l.writebackBytes.Store(opts.WritebackBytes)
	}
	if l.dropBehind == nil {
		l.dropBehind = new(atomic.Int64)
		l.dropBehind.Store(opts.DropBehindBytes)
	}
	l.loadTopicID()
	if err := l.load(opts); err != nil {
		for _, s := range l.segments {
			s.close()
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	return l, nil
}

// load lists the directory, opens the segments and recovers them.
func (l *Log) load(opts OpenOptions) error {
	entries, err := os.ReadDir(l.path())
	if err != nil {
		return err
	}
	// Compaction leftovers first: a committed swap replaces segments.
	if l.swapRecovered, err = completeInterruptedSwaps(l.path(), entries); err != nil {
		return err
	}
	if len(l.swapRecovered) > 0 {
		if entries, err = os.ReadDir(l.path()); err != nil {
			return err
		}
	}
	var bases []int64
	logs := map[int64]bool{}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, deletedSuffix), strings.HasSuffix(name, ".tmp"):
			// A deletion or checkpoint write that a crash interrupted.
			if err := os.Remove(filepath.Join(l.path(), name)); err != nil {
				return err
			}
		case strings.HasSuffix(name, logSuffix):
			if base, ok := parseSegmentBase(name); ok {
				bases = append(bases, base)
				logs[base] = true
			}
		}
	}
	// Index files without a log are leftovers of a crashed deletion.
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix) || strings.HasSuffix(name, txnIndexSuffix) {
			if base, ok := parseSegmentBase(name); ok && !logs[base] {
				if err := os.Remove(filepath.Join(l.path(), name)); err != nil {
					return err
				}
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	now := l.now()
	for _, base := range bases {
		s, err := openSegment(l.path(), base, l.cfg, now)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
	}
	if err := l.recoverSegments(opts); err != nil {
		return err
	}
	if len(l.segments) == 0 {
		start := max(opts.LogStartOffset, 0)
		s, err := createSegment(l.path(), start, l.cfg, now)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
	}
	leo := l.active().nextOffset
	l.logStartOffset = max(opts.LogStartOffset, l.segments[0].baseOffset)
	if l.logStartOffset > leo {
		// The checkpointed start is past everything that survived: start
		// afresh there, as Kafka does.
		if err := l.truncateFullyAndStartAtLocked(l.logStartOffset); err != nil {
			return err
		}
		leo = l.logStartOffset
	}
	l.recoveryPoint = min(max(opts.RecoveryPoint, l.logStartOffset), leo)
	// The directory may hold entries not yet durable (a segment created
	// just now, or by a process that crashed): the first flush syncs it.
	l.segmentsCreated = 1
	l.highWatermark = min(max(opts.HighWatermark, l.logStartOffset), leo)
	for _, s := range l.segments[:len(l.segments)-1] {
		if err := s.onBecomeInactive(); err != nil {
			return err
		}
	}
	l.epochs, err = OpenLeaderEpochCache(filepath.Join(l.path(), leaderEpochCheckpointFile))
	if err != nil {
		return err
	}
	if err := l.epochs.TruncateFromEnd(leo); err != nil {
		return err
	}
	l.epochs.TruncateFromStart(l.logStartOffset)
	return l.loadProducerStateLocked()
}

// recoverSegments restores each segment's trackers: cheaply for segments
// known to be intact, by re-validating every batch for the rest. Kafka's
// rule: after an unclean shutdown everything from the recovery point on is
// suspect; after a clean one only segments whose indexes fail the sanity
// check are.
func (l *Log) recoverSegments(opts OpenOptions) error {
	var prevNext int64 = -1
	for i := 0; i < len(l.segments); i++ {
		s := l.segments[i]
		var nextBase int64 = -1
		if i+1 < len(l.segments) {
			nextBase = l.segments[i+1].baseOffset
		}
		suspect := !opts.CleanShutdown && (nextBase < 0 || nextBase > opts.RecoveryPoint)
		// The transaction index is rebuilt where the records are
		// re-validated after a crash (Kafka's LogSegment.recover rebuilds
		// it with the producer state): entries of markers that did not
		// survive must go, and entries whose write the crash lost must
		// come back. Elsewhere, and for a compaction swap (whose cleaned
		// index was fsynced before the swap committed), the file is
		// trusted unless it cannot be read.
		if suspect {
			if err := s.txn.reset(); err != nil {
				return err
			}
			s.txnRebuild = true
		} else if err := s.txn.load(); err != nil {
			l.logger.Warn("rebuilding a segment's unreadable transaction index", "segment", s.baseOffset, "error", err)
			if err := s.txn.reset(); err != nil {
				return err
			}
			s.txnRebuild = true
		}
		suspect = suspect || l.swapRecovered[s.baseOffset]
		if !suspect {
			if err := errors.Join(s.index.SanityCheck(), s.timeIndex.SanityCheck()); err != nil {
				l.logger.Warn("rebuilding a segment whose index is corrupt", "segment", s.baseOffset, "error", err)
				suspect = true
			} else if err := s.loadTail(); err != nil {
				l.logger.Warn("re-validating a segment whose tail does not match its index", "segment", s.baseOffset, "error", err)
				suspect = true
			}
		}
		if suspect {
			cut, err := s.recover(prevNext)
			if err != nil {
				return err
			}
			if err := s.txn.truncateTo(s.nextOffset); err != nil {
				return err
			}
			if cut > 0 {
				l.logger.Warn("recovery truncated an invalid tail", "segment", s.baseOffset,
					"valid_bytes", s.size, "truncated_bytes", cut, "log_end_offset", s.nextOffset)
				// Nothing after a corrupt batch can be trusted: drop the
				// later segments, as Kafka's recovery does.
				for _, later := range l.segments[i+1:] {
					l.logger.Warn("recovery deleted a segment after a corrupt one", "segment", later.baseOffset)
					if err := later.closeAndRemove(l.deleter); err != nil {
						return err
					}
				}
				l.segments = l.segments[:i+1]
			}
		}
		// An empty segment other than the last holds nothing; a crash
		// between creating a segment and writing to it can leave one.
		// An empty first one stays: the cleaner leaves one where the
		// log's first group cleaned to nothing, and its base offset is
		// the log start offset.
		if s.size == 0 && i > 0 && i+1 < len(l.segments) {
			if err := s.closeAndRemove(l.deleter); err != nil {
				return err
			}
			l.segments = append(l.segments[:i], l.segments[i+1:]...)
			i--
			continue
		}
		prevNext = s.nextOffset
	}
	return nil
}

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

// TopicPartition is the partition this log stores.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// Dir is the partition's directory.
func (l *Log) Dir() string { return l.path() }

// path is the partition's directory now.
func (l *Log) path() string { return *l.dir.Load() }

// Config returns the log's configuration.
func (l *Log) Config() LogConfig {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig replaces the log's configuration (a topic config change). It
// applies from the next append or retention run.
func (l *Log) SetConfig(cfg LogConfig) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg.normalized()
	for _, s := range l.segments {
		s.indexIntervalBytes = l.cfg.IndexIntervalBytes
	}
}

// LogEndOffset is the offset the next appended record will get (LEO).
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().nextOffset
}

// LogStartOffset is the first offset a consumer may read.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStartOffset
}

// HighWatermark is the last high watermark set on this log.
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.highWatermark
}

// SetHighWatermark records the high watermark (the replica manager owns
// its value: min LEO over the ISR on a leader, the leader's on a follower).
// It is clamped to [log start offset, log end offset].
func (l *Log) SetHighWatermark(hw int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.highWatermark = min(max(hw, l.logStartOffset), l.active().nextOffset)
	l.txns.onHighWatermark(l.highWatermark)
}

// RecoveryPoint is the offset below which the log is known to be fsynced,
// its indexes included: a restart after a crash recovers (scans and
// re-indexes) only the segments from there on.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// DurableOffset is the offset below which the log's records are known to
// be on disk: at or above the recovery point, raised by Sync (the durable
// mode's group commit), which fsyncs the records but not the indexes.
func (l *Log) DurableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durableOffsetLocked()
}

func (l *Log) durableOffsetLocked() int64 { return max(l.durableOffset, l.recoveryPoint) }

// SyncPending reports whether the log holds records that are not yet
// durable (DurableOffset below the log end offset): a Sync has work.
func (l *Log) SyncPending() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durableOffsetLocked() < l.active().nextOffset
}

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// NumSegments is how many segments the log has.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segments)
}

// LeaderEpochCache is the partition's epoch → start offset cache (KIP-101).
func (l *Log) LeaderEpochCache() *LeaderEpochCache { return l.epochs }

// AppendAsLeader validates a producer's record set (one or more whole v2
// batches) and appends it: offsets are assigned by rewriting each batch's
// base offset in place, the leader epoch is stamped in, and with
// message.timestamp.type=LogAppendTime so is the broker's clock. Nothing is
// appended unless every batch is valid; the error says why in Kafka's terms
// (ErrorCode). The batches slice is modified.
func (l *Log) AppendAsLeader(batches []byte, opts AppendOptions) (AppendInfo, error) {
	v, err := l.ValidateProduce(batches, opts.FromCoordinator)
	if err != nil {
		return v.info, err
	}
	return l.AppendValidated(v, opts)
}

// ValidatedBatches is a producer's record set that passed ValidateProduce:
// the only input AppendValidated accepts, so unvalidated bytes cannot
// reach a leader's log.
type ValidatedBatches struct {
	batches []byte
	info    AppendInfo
	// fromCoordinator: the coordinators' own append (markers, a
	// TxnOffsetCommit's transactional batch), whose sequences are not
	// checked.
	fromCoordinator bool
}

// ValidateProduce is the first half of AppendAsLeader: Kafka's
// analyzeAndValidateRecords and LogValidator for v2 (framing, size limits,
// CRC, magic, and every record inside). It takes no lock, so a broker runs
// it on the request's goroutine, in parallel with appends to the same
// partition; only AppendValidated serialises.
func (l *Log) ValidateProduce(batches []byte, fromCoordinator bool) (ValidatedBatches, error) {
	info, err := validateProduce(batches, l.Config(), fromCoordinator)
	if err != nil {
		return ValidatedBatches{info: info}, fmt.Errorf("append to %s: %w", l.tp, err)
	}
	return ValidatedBatches{batches: batches, info: info, fromCoordinator: fromCoordinator}, nil
}

// Info is what validation learnt of the batches (offsets not yet assigned):
// record count, bytes, min and max timestamps, null keys.
func (v ValidatedBatches) Info() AppendInfo { return v.info }

// AppendValidated is the second half of AppendAsLeader: under the log's
// lock it checks idempotent producers' sequences (producer_state.go: a
// retried batch appends nothing and returns its original offsets with
// AppendInfo.Duplicate; a gap or fenced epoch fails with
// ErrOutOfOrderSequence or ErrInvalidProducerEpoch), assigns offsets in
// place, stamps the leader epoch (and the LogAppendTime), rolls if needed,
// writes and updates the producer state.
func (l *Log) AppendValidated(v ValidatedBatches, opts AppendOptions) (_ AppendInfo, err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return v.info, err
	}
	batches, info := v.batches, v.info
	if batches == nil {
		return info, fmt.Errorf("append to %s: batches were not validated: %w", l.tp, record.ErrInvalidRecord)
	}
	var wb writeback
	defer func() { l.writebackQueue.add(wb) }() // after the unlock
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return info, fmt.Errorf("append to %s: %w", l.tp, ErrLogClosed)
	}
	// The idempotent producer checks run under the lock that serialises
	// appends, so the sequence checked is the sequence appended.
	dup, err := l.producers.check(batches, v.fromCoordinator)
	if err != nil {
		return info, fmt.Errorf("append to %s: %w", l.tp, err)
	}
	if dup != nil {
		return duplicateAppendInfo(dup, l.logStartOffset), nil
	}
	if opts.VerifyTxn {
		if err := l.checkTxnVerifiedLocked(batches, opts.TxnGuard); err != nil {
			return info, fmt.Errorf("append to %s: %w", l.tp, err)
		}
	}
	next := l.active().nextOffset
	info.FirstOffset = next
	info.LogAppendTime = -1
	logAppendTime := l.cfg.MessageTimestampType == "LogAppendTime"
	if logAppendTime {
		info.LogAppendTime = l.now().UnixMilli()
		info.MaxTimestamp = info.LogAppendTime
	}
	for rest := batches; len(rest) > 0; {
		h, _ := record.ParseHeader(rest)
		b := rest[:h.Size()]
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, opts.LeaderEpoch)
		if logAppendTime {
			record.SetLogAppendTime(b, info.LogAppendTime)
		}
		next += int64(h.LastOffsetDelta) + 1
		rest = rest[h.Size():]
	}
	info.LastOffset = next - 1
	if err := l.appendLocked(batches, info, opts.Sync, opts.DeferFlush, &wb); err != nil {
		return info, err
	}
	if err := l.updateProducerStateLocked(batches); err != nil {
		return info, err
	}
	if latest, ok := l.epochs.LatestEpoch(); opts.LeaderEpoch >= 0 && (!ok || opts.LeaderEpoch > latest) {
		if err := l.epochs.Assign(opts.LeaderEpoch, info.FirstOffset); err != nil {
			return info, fmt.Errorf("append to %s: %w", l.tp, err)
		}
	}
	info.LogStartOffset = l.logStartOffset
	return info, nil
}

// validateProduce is Kafka's analyzeAndValidateRecords plus LogValidator
// for v2: framing, size limits, CRC, magic, and every record inside.
func validateProduce(batches []byte, cfg LogConfig, fromCoordinator bool) (AppendInfo, error) {
	info := AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, MinTimestamp: -1, LogAppendTime: -1}
	if len(batches) == 0 {
		// Kafka's ProduceRequest.validateRecords: "must have at least one
		// record batch" (INVALID_RECORD).
		return info, fmt.Errorf("no record batch: %w", record.ErrInvalidRecord)
	}
	if len(batches) > int(cfg.SegmentBytes) {
		return info, fmt.Errorf("%d bytes of batches, segment.bytes %d: %w", len(batches), cfg.SegmentBytes, ErrRecordBatchTooLarge)
	}
	sp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(sp)
	for pos := 0; pos < len(batches); {
		size, err := record.PeekBatchSize(batches[pos:])
		if err != nil {
			return info, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		if size > len(batches)-pos {
			return info, fmt.Errorf("batch at byte %d claims %d bytes, %d present: %w", pos, size, len(batches)-pos, record.ErrCorruptMessage)
		}
		if size > cfg.MaxMessageBytes {
			return info, fmt.Errorf("batch of %d bytes, max.message.bytes %d: %w", size, cfg.MaxMessageBytes, ErrMessageTooLarge)
		}
		b := batches[pos : pos+size]
		h, err := record.CheckBatch(b)
		if err != nil {
			return info, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		if h.IsControl() {
			if !fromCoordinator {
				return info, fmt.Errorf("batch at byte %d: control batches come only from a transaction coordinator: %w", pos, record.ErrInvalidRecord)
			}
			// The marker is read again under the log's lock (the producer
			// checks) and by every replica; only a well-formed one is let in.
			if !h.HasProducerID() || !h.IsTransactional() {
				return info, fmt.Errorf("batch at byte %d: control batch without a transactional producer: %w", pos, record.ErrInvalidRecord)
			}
			if _, err := parseEndTxnMarker(b, &h); err != nil {
				return info, fmt.Errorf("batch at byte %d: %w", pos, err)
			}
		}
		// A decompressed batch may be far larger than its wire size; bound
		// it generously but finitely (Kafka has no bound; we refuse bombs).
		// The records are checked as they inflate: a bomb stops at its
		// first bad record, long before the bound.
		stats, scratch, err := record.ValidateRecords(b, h, *sp, max(64<<20, 16*cfg.MaxMessageBytes))
		*sp = scratch
		if err != nil {
			return info, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		if info.Records == 0 || stats.MinTimestamp < info.MinTimestamp {
			info.MinTimestamp = stats.MinTimestamp
		}
		info.Records += int(h.RecordCount)
		info.MaxTimestamp = max(info.MaxTimestamp, stats.MaxTimestamp)
		info.NullKeys += stats.NullKeys
		pos += size
	}
	info.Bytes = len(batches)
	return info, nil
}

// AppendAsFollower appends batches fetched from the leader byte for byte,
// offsets and leader epochs preserved. The first batch must start at or
// after the log end offset (gaps are legal: compacted topics). CRCs are
// checked; records are not re-validated (the leader did that). With
// deferFlush, flush.messages' inline fsync is skipped and the caller makes
// the batches durable with Sync (the durable mode's followers, which sync
// all the partitions of a fetch response together).
func (l *Log) AppendAsFollower(batches []byte, deferFlush bool) (_ AppendInfo, err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, LogAppendTime: -1}, err
	}
	info := AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, LogAppendTime: -1}
	it := record.NewBatches(batches)
	valid := 0
	var epochStarts []record.BatchHeader
	for _, h, ok := it.Next(); ok; _, h, ok = it.Next() {
		if info.FirstOffset < 0 {
			info.FirstOffset = h.BaseOffset
		} else if h.BaseOffset <= info.LastOffset {
			return info, fmt.Errorf("append to %s: batch at %d after %d: %w", l.tp, h.BaseOffset, info.LastOffset, record.ErrInvalidRecord)
		}
		info.LastOffset = h.LastOffset()
		info.Records += int(h.RecordCount)
		info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
		if h.PartitionLeaderEpoch >= 0 && (len(epochStarts) == 0 || h.PartitionLeaderEpoch > epochStarts[len(epochStarts)-1].PartitionLeaderEpoch) {
			epochStarts = append(epochStarts, h)
		}
		valid += h.Size()
	}
	if err := it.Err(); err != nil {
		return info, fmt.Errorf("append to %s: %w", l.tp, err)
	}
	if valid == 0 {
		return info, nil
	}
	batches = batches[:valid] // a fetch may end in a partial batch
	info.Bytes = valid
	var wb writeback
	defer func() { l.writebackQueue.add(wb) }() // after the unlock
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return info, fmt.Errorf("append to %s: %w", l.tp, ErrLogClosed)
	}
	if leo := l.active().nextOffset; info.FirstOffset < leo {
		return info, fmt.Errorf("append to %s: first offset %d, log end offset %d: %w", l.tp, info.FirstOffset, leo, ErrUnexpectedAppendOffset)
	}
	if err := l.appendLocked(batches, info, false, deferFlush, &wb); err != nil {
		return info, err
	}
	if err := l.updateProducerStateLocked(batches); err != nil {
		return info, err
	}
	for _, h := range epochStarts {
		if latest, ok := l.epochs.LatestEpoch(); !ok || h.PartitionLeaderEpoch > latest {
			if err := l.epochs.Assign(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
				return info, fmt.Errorf("append to %s: %w", l.tp, err)
			}
		}
	}
	info.LogStartOffset = l.logStartOffset
	return info, nil
}

// reportIndexFault logs, once per segment, that reading one of its indexes
// faulted (an I/O error, or the file cut under the mapping): the broker
// goes on, reading that segment by scanning it and rolling it if active.
//
// Safe to call from any goroutine.
func (l *Log) reportIndexFault(s *segment) {
	if err := s.indexFault(); err != nil && s.faultLogged.CompareAndSwap(false, true) {
		l.logger.Error("cannot read a segment index; reads scan the segment instead and an active segment rolls",
			"partition", l.tp, "segment", s.baseOffset, "error", err)
	}
}

// appendLocked rolls if needed, writes, and applies flush policy; wb is
// set to the pages to hand to writeback once the lock is released. l.mu is
// held.
func (l *Log) appendLocked(batches []byte, info AppendInfo, sync, deferFlush bool, wb *writeback) error {
	if err := l.maybeRollLocked(len(batches), info.FirstOffset, info.LastOffset, info.MaxTimestamp); err != nil {
		return fmt.Errorf("append to %s: %w", l.tp, err)
	}
	if err := l.active().append(batches); err != nil {
		return fmt.Errorf("append to %s: %w", l.tp, err)
	}
	*wb = l.active().writeback(l.writebackBytes.Load(), l.dropBehind.Load())
	l.reportIndexFault(l.active())
	l.unflushedMessages += int64(info.Records)
	if sync || (!deferFlush && l.unflushedMessages >= l.cfg.FlushMessages) {
		if err := l.flushLocked(); err != nil {
			return fmt.Errorf("append to %s: %w", l.tp, err)
		}
	}
	return nil
}

// maybeRollLocked starts a new segment when the active one cannot take
// size more bytes (segment.bytes), spans more than segment.ms (less its
// share of segment.jitter.ms), has a full
// index, or cannot express lastOffset as a 4-byte relative offset.
//
// Like Kafka's LogSegment.shouldRoll, the segment.ms age is measured in
// record time: the incoming batches' max timestamp minus the segment's
// first batch timestamp. Only a segment without timestamps ages by the
// wall clock since it was created. (Measuring record timestamps against
// the wall clock would roll on every append of old-timestamped data.)
func (l *Log) maybeRollLocked(size int, firstOffset, lastOffset, maxTimestamp int64) error {
	s := l.active()
	if s.size == 0 {
		return nil
	}
	age := l.now().Sub(s.created).Milliseconds()
	if s.rollingTimestamp >= 0 {
		age = maxTimestamp - s.rollingTimestamp
	}
	if s.size > l.cfg.SegmentBytes-int64(size) ||
		age > l.cfg.rollMs()-s.rollJitterMs ||
		s.index.IsFull() || s.timeIndex.IsFull() ||
		lastOffset-s.baseOffset > int64(^uint32(0)>>1) {
		return l.rollLocked(firstOffset)
	}
	return nil
}

// Roll closes the active segment and starts a new one at the log end
// offset (used by tests and by retention of an expired active segment).
func (l *Log) Roll() (err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active().size == 0 {
		return nil
	}
	return l.rollLocked(l.active().nextOffset)
}

func (l *Log) rollLocked(base int64) error {
	old := l.active()
	base = max(base, old.nextOffset)
	s, err := createSegment(l.path(), base, l.cfg, l.now())
	if err != nil {
		return err
	}
	l.segments = append(l.segments, s)
	l.segmentsCreated++
	if err := old.onBecomeInactive(); err != nil {
		return err
	}
	// Kafka (UnifiedLog.roll) flushes the rolled segment and moves the
	// recovery point past it, so recovery after a crash never re-reads
	// finished segments; like Kafka it does so in the background, with the
	// producer snapshot written now and fsynced there: an fsync of up to
	// segment.bytes of dirty pages under the log lock stalls every append
	// and read of the partition while it runs (BenchmarkAppendRoll).
	l.takeProducerSnapshotLocked(base, false)
	l.scheduleRollFlushLocked(base)
	l.logger.Debug("rolled segment", "new_base_offset", base, "previous_bytes", old.size)
	return nil
}

// Flush fsyncs everything appended so far and advances the recovery point
// to the log end offset.
func (l *Log) Flush() (err error) {
	defer l.guardIO(&err)
	if err := l.offlineErr(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrLogClosed
	}
	return l.flushLocked()
}

// FlushIfDue applies flush.ms: it flushes when the oldest unflushed append
// is older than the configured interval. The log manager calls it
// periodically.
func (l *Log) FlushIfDue() (err error) {
	defer l.guardIO(&err)
	if l.Offline() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.unflushedMessages == 0 || l.now().Sub(l.lastFlush).Milliseconds() < l.cfg.FlushMs {
		return nil
	}
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	leo := l.active().nextOffset
	for _, s := range l.segments {
		if s.nextOffset > l.recoveryPoint || s == l.active() {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	if err := l.syncDirIfNeeded(l.segmentsCreated); err != nil {
		return err
	}
	l.recoveryPoint = leo
	l.unflushedMessages = 0
	l.lastFlush = l.now()
	return nil
}

// segmentFor returns the index of the segment holding offset: the last one
// whose base offset is <= offset.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset })
	return max(i-1, 0)
}

// Read returns file regions of whole batches, starting with the batch that
// contains startOffset, adding batches while they fit in maxBytes, never
// including a batch that ends at or past upperBound (the high watermark or
// LSO the caller may expose). With minOneBatch the first batch is returned
// even when it is larger than maxBytes (Kafka's rule, so consumers never
// stall on a large batch). A read never spans segments. Offsets below the
// log start offset or above the log end offset fail with
// ErrOffsetOutOfRange; startOffset == log end offset reads nothing.
func (l *Log) Read(startOffset int64, maxBytes int, upperBound int64, minOneBatch bool) (ReadInfo, error) {
	if err := l.offlineErr(); err != nil {
		return ReadInfo{}, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.readLocked(startOffset, maxBytes, upperBound, minOneBatch)
}

// readLocked is Read with l.mu held (read or write).
func (l *Log) readLocked(startOffset int64, maxBytes int, upperBound int64, minOneBatch bool) (ReadInfo, error) {
	info := ReadInfo{LogStartOffset: l.logStartOffset, LogEndOffset: l.active().nextOffset, HighWatermark: l.highWatermark,
		LastStableOffset: l.lastStableOffsetLocked()}
	if l.closed {
		return info, fmt.Errorf("read %s: %w", l.tp, ErrLogClosed)
	}
	if startOffset < l.logStartOffset || startOffset > info.LogEndOffset {
		return info, fmt.Errorf("read %s at %d (log start %d, end %d): %w", l.tp, startOffset, l.logStartOffset, info.LogEndOffset, ErrOffsetOutOfRange)
	}
	upperBound = min(upperBound, info.LogEndOffset)
	if startOffset >= upperBound {
		return info, nil
	}
	buf := make([]byte, record.HeaderSize)
	for i := l.segmentFor(startOffset); i < len(l.segments); i++ {
		s := l.segments[i]
		pos, h, err := s.translateOffset(startOffset, buf)
		if errors.Is(err, io.EOF) {
			continue // startOffset lies past this segment's last batch
		}
		if err != nil {
			return info, fmt.Errorf("read %s at %d: %w", l.tp, startOffset, err)
		}
		start, end := pos, pos
		// Jump over whole indexed batches instead of reading every header
		// (one pread each): the sparse index names batch boundaries, and
		// any boundary within maxBytes whose batch starts at or below the
		// upper bound ends a valid region. Only the tail past the last
		// such entry (at most index.interval.bytes plus a batch) is
		// scanned header by header.
		if limit := start + int64(maxBytes); limit > start {
			off, jump, ok := s.index.LookupPosition(limit, upperBound)
			l.reportIndexFault(s)
			if ok && int64(jump) > start && off > h.BaseOffset {
				end = int64(jump)
				if h, err = s.headerAt(end, buf); err != nil {
					if !errors.Is(err, io.EOF) {
						return info, fmt.Errorf("read %s at %d: %w", l.tp, startOffset, err)
					}
					info.Regions = []FileRegion{{File: s.file, Position: start, Length: end - start}}
					info.Bytes = end - start
					return info, nil
				}
			}
		}
		for {
			if h.NextOffset() > upperBound {
				break
			}
			size := int64(h.Size())
			if end-start+size > int64(maxBytes) && !(minOneBatch && end == start) {
				break
			}
			end += size
			if h, err = s.headerAt(end, buf); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return info, fmt.Errorf("read %s at %d: %w", l.tp, startOffset, err)
			}
		}
		if end > start {
			info.Regions = []FileRegion{{File: s.file, Position: start, Length: end - start}}
			info.Bytes = end - start
		}
		return info, nil
	}
	return info, nil
}

// ReadBytes is Read followed by copying the regions into memory, for
// callers inside the broker that parse records themselves (a coordinator
// loading its state, tests).
func (l *Log) ReadBytes(startOffset int64, maxBytes int, upperBound int64) ([]byte, error) {
	info, err := l.Read(startOffset, maxBytes, upperBound, true)
	if err != nil {
		return nil, err
	}
	return l.regionBytes(info)
}

// regionBytes copies a read's regions into memory.
func (l *Log) regionBytes(info ReadInfo) ([]byte, error) {
	out := make([]byte, 0, info.Bytes)
	for _, r := range info.Regions {
		b := make([]byte, r.Length)
		if _, err := r.File.ReadAt(b, r.Position); err != nil {
			return nil, l.checkIO(fmt.Errorf("read %s: %w", l.tp, err))
		}
		out = append(out, b...)
	}
	return out, nil
}
