package storage

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// Files the log manager keeps in each log dir, named as Kafka names them so
// that an operator finds what they expect.
const (
	lockFileName             = ".lock"
	cleanShutdownFileName    = ".kafka_cleanshutdown"
	recoveryPointCheckpoint  = "recovery-point-offset-checkpoint"
	highWatermarkCheckpoint  = "replication-offset-checkpoint"
	logStartOffsetCheckpoint = "log-start-offset-checkpoint"
	deleteDirSuffix          = "-delete"
	// MetadataTopic is KRaft's metadata log topic: its directory is not a
	// partition log of this manager.
	MetadataTopic             = "__cluster_metadata"
	defaultRetentionCheck     = 5 * time.Minute
	defaultFlushCheck         = time.Second
	defaultCheckpointInterval = time.Minute
	// defaultHighWatermarkCheckpoint is Kafka's
	// replica.high.watermark.checkpoint.interval.ms.
	defaultHighWatermarkCheckpoint = 5 * time.Second
)

// ManagerConfig configures a Manager with the broker's log.* settings.
type ManagerConfig struct {
	// LogDirs is log.dirs: every directory holding partition logs.
	LogDirs []string
	// RecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir: how
	// many partitions of one dir are opened (and recovered) in parallel.
	RecoveryThreadsPerDataDir int
	// DefaultConfig is the broker-level log config; ConfigFor may override
	// it per topic.
	DefaultConfig LogConfig
	// ConfigFor returns a partition's effective config (topic overrides);
	// nil means DefaultConfig for all.
	ConfigFor func(TopicPartition) LogConfig
	// RetentionCheckInterval is log.retention.check.interval.ms (5 min).
	RetentionCheckInterval time.Duration
	// FlushCheckInterval is log.flush.scheduler.interval.ms: how often
	// flush.ms is checked.
	FlushCheckInterval time.Duration
	// CheckpointInterval is log.flush.offset.checkpoint.interval.ms: how
	// often recovery points and log start offsets are written (high
	// watermarks too).
	CheckpointInterval time.Duration
	// HighWatermarkCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms (5 s): how often the
	// high watermarks alone are written, so that a broker restarted after
	// a crash starts from recent ones.
	HighWatermarkCheckpointInterval time.Duration
	// DisableLogCleaner is log.cleaner.enable=false: compacted topics are
	// not cleaned (the zero value runs the cleaner, as Kafka does).
	DisableLogCleaner bool
	// CleanerThreads is log.cleaner.threads at start: how many logs are
	// cleaned side by side (0: 1; log.cleaner.threads=0 is
	// DisableLogCleaner), until SetCleanerThreads changes it.
	CleanerThreads int
	// CleanerBackoff is log.cleaner.backoff.ms at start: how long the
	// cleaner sleeps when no log needs cleaning (15 s), until
	// SetCleanerBackoff changes it.
	CleanerBackoff time.Duration
	// DeleteBytesPerSecond is keel.log.delete.max.bytes.per.second at
	// start: how fast deleted segments and partitions are removed (0:
	// DefaultDeleteBytesPerSecond; negative: unpaced), until
	// SetDeleteBytesPerSecond changes it.
	DeleteBytesPerSecond int64
	// WritebackBytes is keel.log.writeback.bytes at start: each log's
	// OpenOptions.WritebackBytes, until SetWritebackBytes changes it.
	WritebackBytes int64
	// DropBehindBytes is keel.log.cache.drop.behind.bytes at start: each
	// log's OpenOptions.DropBehindBytes, until SetDropBehindBytes changes
	// it.
	DropBehindBytes int64
	// CleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size at start:
	// the memory of the passes' offset maps (128 MiB), divided between
	// the CleanerThreads, until SetCleanerDedupeBufferSize changes it.
	CleanerDedupeBufferSize int64
	// CleanerIOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second
	// at start: the most bytes a second the cleaner reads and writes
	// together (0: unthrottled; Kafka's default, Double.MAX_VALUE, too),
	// until SetCleanerIOMaxBytesPerSecond changes it.
	CleanerIOMaxBytesPerSecond float64
	// DeferMoves holds the moves between log dirs found at open (future
	// logs, logdir_move.go) until StartMoves: the broker starts them once
	// it has read replica.alter.log.dirs.io.max.bytes.per.second from the
	// metadata, so that a throttled move does not resume unthrottled.
	DeferMoves bool
	// InitialOfflineDirs are log dirs the node could not use at start
	// (Kafka's initialOfflineDirs: their meta.properties could not be
	// read). They are offline from the start: nothing in them is opened,
	// locked or written.
	InitialOfflineDirs []string
	// OnLogDirFailure is called once per log dir, with the first I/O error
	// that took it offline (dirfailure.go), after OpenManager returned: a
	// dir that fails while it opens is offline from the start
	// (OfflineDirs) and not reported. It runs on the goroutine that met
	// the error and must not block or call into the Manager.
	OnLogDirFailure func(dir string, err error)
	Logger          hclog.Logger
	Now             func() time.Time
}

// Manager owns every partition log under log.dirs: it opens (and recovers)
// them at start, creates and deletes them, runs retention and flushes in
// one background goroutine, writes the offset checkpoints, and locks each
// log dir so that a second process cannot open it. All methods are safe for
// concurrent use.
type Manager struct {
	cfg    ManagerConfig
	logger hclog.Logger

	mu     sync.RWMutex // guards logs, dirOf, closed
	logs   map[TopicPartition]*Log
	dirOf  map[TopicPartition]string
	closed bool

	// dirs is the failure state of each log dir, by path (fixed at open).
	dirs map[string]*logDir

	locks []*os.File
	stop  chan struct{}
	wg    sync.WaitGroup // the background loop, the cleaner, the writeback queue and directory removals
	// writeback hands the logs' appended pages to the kernel
	// (writeback.go), every writebackBytes of a segment (shared by the
	// logs: SetWritebackBytes).
	writeback       *writebackQueue
	writebackBytes  atomic.Int64
	dropBehindBytes atomic.Int64 // keel.log.cache.drop.behind.bytes (writeback.go)
	// deleter removes deleted segments and partitions at a bounded rate
	// (deleter.go).
	deleter *fileDeleter
	// cleaner is the log cleaner's state (cleaner_manager.go).
	cleaner logCleaner
	// cleanerIORate is log.cleaner.io.max.bytes.per.second, as float64
	// bits (SetCleanerIOMaxBytesPerSecond).
	cleanerIORate atomic.Uint64

	// previousBrokerEpoch is the broker epoch the clean-shutdown markers
	// held at open: -1 unless every dir had one, all with the same epoch
	// (PreviousBrokerEpoch). brokerEpoch is the one Close writes into
	// them (SetBrokerEpoch).
	previousBrokerEpoch int64
	brokerEpoch         atomic.Int64

	// futures are the replicas being moved to another log dir and
	// preferredDir the dirs that replicas not hosted yet are to be created
	// in (AlterLogDir, logdir_move.go); both guarded by mu. moveWake wakes
	// the mover, moveRate is its bound in bytes a second, and retired
	// (guarded by moveMu) the segments completed moves left behind.
	futures      map[TopicPartition]*futureLog
	completing   map[TopicPartition]bool // moves past their claim (completeMove)
	preferredDir map[TopicPartition]string
	moveWake     chan struct{}
	movesStart   chan struct{} // closed by StartMoves
	startMoves   sync.Once
	moveRate     atomic.Int64
	moveMu       sync.Mutex
	retired      []retiredSegments
}

// OpenManager locks every log dir and opens every partition in them,
// recovering in parallel. A dir without the clean-shutdown marker was not
// shut down cleanly: its partitions are recovered from their checkpointed
// recovery points.
func OpenManager(cfg ManagerConfig) (*Manager, error) {
	if len(cfg.LogDirs) == 0 {
		return nil, errors.New("open log manager: no log.dirs")
	}
	if cfg.RecoveryThreadsPerDataDir <= 0 {
		cfg.RecoveryThreadsPerDataDir = 1
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = defaultRetentionCheck
	}
	if cfg.FlushCheckInterval <= 0 {
		cfg.FlushCheckInterval = defaultFlushCheck
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = defaultCheckpointInterval
	}
	if cfg.HighWatermarkCheckpointInterval <= 0 {
		cfg.HighWatermarkCheckpointInterval = defaultHighWatermarkCheckpoint
	}
	if cfg.CleanerBackoff <= 0 {
		cfg.CleanerBackoff = DefaultCleanerBackoff
	}
	if cfg.CleanerDedupeBufferSize <= 0 {
		cfg.CleanerDedupeBufferSize = DefaultCleanerDedupeBufferSize
	}
	if cfg.DeleteBytesPerSecond == 0 {
		cfg.DeleteBytesPerSecond = DefaultDeleteBytesPerSecond
	}
	if cfg.CleanerThreads <= 0 {
		cfg.CleanerThreads = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{
		cfg:    cfg,
		logger: cfg.Logger.Named("log-manager"),
		logs:   map[TopicPartition]*Log{},
		dirOf:  map[TopicPartition]string{},
		stop:   make(chan struct{}),
		dirs:   map[string]*logDir{},

		futures:      map[TopicPartition]*futureLog{},
		completing:   map[TopicPartition]bool{},
		preferredDir: map[TopicPartition]string{},
		moveWake:     make(chan struct{}, 1),
		movesStart:   make(chan struct{}),
	}
	m.writeback = newWritebackQueue(m.stop)
	m.deleter = newFileDeleter(m.stop, cfg.DeleteBytesPerSecond, m.logger)
	m.writebackBytes.Store(cfg.WritebackBytes)
	m.dropBehindBytes.Store(cfg.DropBehindBytes)
	m.brokerEpoch.Store(-1)
	m.cleanerIORate.Store(math.Float64bits(cfg.CleanerIOMaxBytesPerSecond))
	for _, dir := range cfg.LogDirs {
		m.dirs[dir] = &logDir{path: dir, failed: m.dirFailed}
	}
	for _, dir := range cfg.InitialOfflineDirs {
		if d := m.dirs[dir]; d != nil {
			d.offline.Store(true)
		}
	}
	// fail closes what was opened before err.
	fail := func(err error) (*Manager, error) {
		for _, l := range m.logs {
			l.Close()
		}
		for _, f := range m.futures {
			f.log.Close()
		}
		m.unlock()
		return nil, err
	}
	for _, dir := range cfg.LogDirs {
		if m.dirs[dir].isOffline() {
			continue
		}
		if err := m.lockDir(dir); err != nil {
			if !isIOError(err) {
				return fail(err)
			}
			m.offlineAtStart(dir, err)
		}
	}
	// Every dir must hold the same epoch, or the shutdown was not clean
	// for all of them; a dir offline holds none.
	for i, dir := range cfg.LogDirs {
		epoch := int64(-1)
		if !m.dirs[dir].isOffline() {
			var err error
			if epoch, err = m.loadDir(dir); err != nil {
				if !isIOError(err) {
					return fail(err)
				}
				m.dropDir(dir)
				m.offlineAtStart(dir, err)
				epoch = -1
			}
		}
		if i == 0 {
			m.previousBrokerEpoch = epoch
		} else if epoch != m.previousBrokerEpoch {
			m.previousBrokerEpoch = -1
		}
	}
	if len(m.OfflineDirs()) == len(cfg.LogDirs) {
		return fail(fmt.Errorf("open log manager: every log dir is offline (%s): %w", strings.Join(cfg.LogDirs, ", "), ErrStorage))
	}
	if err := m.settleFutures(); err != nil {
		return fail(err)
	}
	m.loadCleanerCheckpoints()
	m.wg.Add(2)
	go m.backgroundLoop()
	go m.moveLoop()
	m.wg.Go(m.writeback.run)
	m.wg.Go(m.deleter.run)
	m.SetCleanerThreads(cfg.CleanerThreads)
	if !cfg.DeferMoves {
		m.StartMoves()
	}
	return m, nil
}

// lockDir creates dir and takes an exclusive flock on its .lock file.
func (m *Manager) lockDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create log dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("lock log dir %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("lock log dir %s: %w", dir, ErrLogDirLocked)
		}
		return fmt.Errorf("lock log dir %s: %w", dir, err)
	}
	m.locks = append(m.locks, f)
	return nil
}

// offlineAtStart takes a log dir that failed while the Manager opened
// offline, as Kafka's LogManager leaves out a dir it cannot create, read
// or load: the node starts without its replicas (and does not report it
// through OnLogDirFailure, which is for failures after the start).
func (m *Manager) offlineAtStart(dir string, err error) {
	m.dirs[dir].offline.Store(true)
	m.logger.Error("log dir offline from the start: its partitions are not opened, and nothing is written there", "dir", dir, "error", err)
}

// dropDir closes and forgets the logs and future logs a failed loadDir
// opened in dir.
func (m *Manager) dropDir(dir string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp, d := range m.dirOf {
		if d == dir {
			m.logs[tp].Close()
			delete(m.logs, tp)
			delete(m.dirOf, tp)
		}
	}
	for tp, f := range m.futures {
		if f.dir == dir {
			f.log.Close()
			delete(m.futures, tp)
		}
	}
}

func (m *Manager) unlock() {
	for _, f := range m.locks {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
	m.locks = nil
}

// cleanShutdownMarker is the clean-shutdown marker's content, as Kafka's
// CleanShutdownFileHandler writes it: the broker epoch of the registration
// that shut down cleanly, which the next registration reports as its
// PreviousBrokerEpoch (KIP-966).
type cleanShutdownMarker struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// markerBrokerEpoch is the broker epoch a dir's marker holds: -1 when
// there is none, it is empty (written before markers held one) or it does
// not parse.
func markerBrokerEpoch(data []byte, exists bool) int64 {
	var mk cleanShutdownMarker
	if !exists || json.Unmarshal(data, &mk) != nil || mk.BrokerEpoch < 0 {
		return -1
	}
	return mk.BrokerEpoch
}

// PreviousBrokerEpoch is the broker epoch of the registration whose clean
// shutdown wrote every log dir's marker, or -1 after an unclean shutdown
// (a dir without its marker) or on a new node. The broker sends it in its
// BrokerRegistration, so the controller can tell a clean restart from a
// crash that may have lost acknowledged records.
func (m *Manager) PreviousBrokerEpoch() int64 { return m.previousBrokerEpoch }

// SetBrokerEpoch records the broker epoch of the current registration, for
// Close to write into the clean-shutdown markers.
func (m *Manager) SetBrokerEpoch(epoch int64) { m.brokerEpoch.Store(epoch) }

// loadDir opens every partition of one log dir and returns the broker epoch
// its clean-shutdown marker held (markerBrokerEpoch).
func (m *Manager) loadDir(dir string) (int64, error) {
	start := m.cfg.Now()
	marker := filepath.Join(dir, cleanShutdownFileName)
	markerData, err := os.ReadFile(marker)
	clean := err == nil
	epoch := markerBrokerEpoch(markerData, clean)
	recovery, err := NewOffsetCheckpointFile(filepath.Join(dir, recoveryPointCheckpoint)).Read()
	if err != nil {
		m.logger.Warn("ignoring an unreadable checkpoint; recovering every partition fully", "dir", dir, "error", err)
		recovery, clean = map[TopicPartition]int64{}, false
	}
	hws, err := NewOffsetCheckpointFile(filepath.Join(dir, highWatermarkCheckpoint)).Read()
	if err != nil {
		m.logger.Warn("ignoring an unreadable high watermark checkpoint", "dir", dir, "error", err)
		hws = map[TopicPartition]int64{}
	}
	starts, err := NewOffsetCheckpointFile(filepath.Join(dir, logStartOffsetCheckpoint)).Read()
	if err != nil {
		m.logger.Warn("ignoring an unreadable log start offset checkpoint", "dir", dir, "error", err)
		starts = map[TopicPartition]int64{}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list log dir %s: %w", dir, err)
	}
	var tps []TopicPartition
	futures := map[TopicPartition]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if strings.HasSuffix(name, deleteDirSuffix) {
			m.removeInBackground(filepath.Join(dir, name))
			continue
		}
		if tp, ok := parseFutureDirName(name); ok {
			if other, dup := futures[tp]; dup {
				// Only one can be the move's; neither is the partition's.
				m.logger.Warn("removing a second future log of a partition", "dir", filepath.Join(dir, name), "other", other)
				m.removeInBackground(filepath.Join(dir, name))
				continue
			}
			futures[tp] = name
			continue
		}
		tp, err := ParseTopicPartitionDir(name)
		if err == nil && tp.Topic == MetadataTopic {
			// The KRaft metadata log lives beside the partitions in
			// metadata.log.dir but belongs to raftlog, as Kafka's
			// LogManager leaves __cluster_metadata-0 to its RaftManager.
			continue
		}
		if err != nil {
			m.logger.Warn("ignoring a directory that is not a partition", "dir", filepath.Join(dir, name))
			continue
		}
		tps = append(tps, tp)
	}
	type result struct {
		tp  TopicPartition
		log *Log
		err error
	}
	open := func(tp TopicPartition, name string) (*Log, error) {
		return OpenLog(filepath.Join(dir, name), m.openOptions(dir, m.configFor(tp), OpenOptions{
			RecoveryPoint:  recovery[tp],
			LogStartOffset: starts[tp],
			HighWatermark:  hws[tp],
			CleanShutdown:  clean,
		}))
	}
	work := make(chan TopicPartition)
	results := make(chan result)
	var wg sync.WaitGroup
	for i := 0; i < m.cfg.RecoveryThreadsPerDataDir; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range work {
				l, err := open(tp, tp.DirName())
				results <- result{tp, l, err}
			}
		}()
	}
	go func() {
		for _, tp := range tps {
			work <- tp
		}
		close(work)
		wg.Wait()
		close(results)
	}()
	var errs []error
	for r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		m.mu.Lock()
		if other, dup := m.dirOf[r.tp]; dup {
			errs = append(errs, fmt.Errorf("partition %s is in both %s and %s", r.tp, other, dir))
			r.log.Close()
		} else {
			m.logs[r.tp], m.dirOf[r.tp] = r.log, dir
		}
		m.mu.Unlock()
	}
	// Future logs (a move into this dir, logdir_move.go): the checkpoints'
	// entries for their partitions are theirs, since a partition's current
	// log is never in the dir its future log is in.
	for tp, name := range futures {
		if _, here := m.logs[tp]; here && m.dirOf[tp] == dir {
			m.logger.Warn("removing a future log beside its partition's log", "dir", filepath.Join(dir, name))
			m.removeInBackground(filepath.Join(dir, name))
			continue
		}
		if other := m.futures[tp]; other != nil {
			m.logger.Warn("removing a second future log of a partition", "dir", filepath.Join(dir, name), "other", other.dir)
			m.removeInBackground(filepath.Join(dir, name))
			continue
		}
		l, err := open(tp, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.futures[tp] = &futureLog{log: l, dir: dir}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("load log dir %s: %w", dir, err)
	}
	// From here on a crash is an unclean shutdown.
	if clean {
		if err := os.Remove(marker); err != nil {
			return 0, fmt.Errorf("remove clean shutdown marker %s: %w", marker, err)
		}
	}
	m.logger.Info("loaded log dir", "dir", dir, "partitions", len(tps), "future_logs", len(futures), "clean_shutdown", clean,
		"duration", m.cfg.Now().Sub(start))
	return epoch, nil
}

func (m *Manager) configFor(tp TopicPartition) LogConfig {
	if m.cfg.ConfigFor != nil {
		return m.cfg.ConfigFor(tp)
	}
	return m.cfg.DefaultConfig
}

// removeInBackground has the deleter remove a deleted partition's
// directory.
func (m *Manager) removeInBackground(path string) {
	if err := m.deleter.addDir(path); err != nil {
		m.logger.Error("removing a deleted partition directory failed", "dir", path, "error", err)
	}
}

// Log returns the partition's log, if this broker has it.
func (m *Manager) Log(tp TopicPartition) (*Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Logs returns every open log, sorted by topic and partition.
func (m *Manager) Logs() []*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	sortByPartition(out)
	return out
}

// sortByPartition sorts logs by topic and partition.
func sortByPartition(logs []*Log) {
	sort.Slice(logs, func(i, j int) bool {
		a, b := logs[i].tp, logs[j].tp
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
}

// GetOrCreateLog returns the partition's log, creating it with cfg in the
// log dir holding the fewest partitions when it does not exist.
func (m *Manager) GetOrCreateLog(tp TopicPartition, cfg LogConfig) (*Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrLogClosed
	}
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	counts := map[string]int{}
	for _, d := range m.dirOf {
		counts[d]++
	}
	dir := ""
	for _, d := range m.cfg.LogDirs {
		if !m.dirs[d].isOffline() && (dir == "" || counts[d] < counts[dir]) {
			dir = d
		}
	}
	// A dir AlterLogDir named for the replica before it existed, as
	// Kafka's preferredLogDirs.
	if d, ok := m.preferredDir[tp]; ok {
		delete(m.preferredDir, tp)
		if !m.dirs[d].isOffline() {
			dir = d
		}
	}
	if dir == "" {
		return nil, fmt.Errorf("create log %s: every log dir is offline: %w", tp, ErrStorage)
	}
	ld := m.dirs[dir]
	l, err := OpenLog(filepath.Join(dir, tp.DirName()), m.openOptions(dir, cfg, OpenOptions{CleanShutdown: true}))
	if err != nil {
		return nil, fmt.Errorf("create log %s: %w", tp, ld.check(err))
	}
	if err := syncDir(dir); err != nil {
		l.Close()
		return nil, fmt.Errorf("create log %s: %w", tp, ld.check(err))
	}
	m.logs[tp], m.dirOf[tp] = l, dir
	m.forgetCleanerCheckpoint(tp)
	return l, nil
}

// DeleteLog removes a partition, Kafka-style: the log is closed, its
// directory renamed to "<topic>-<partition>.<id>-delete" at once (so a
// restart never resurrects it) and removed in the background.
func (m *Manager) DeleteLog(tp TopicPartition) error {
	m.mu.Lock()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	delete(m.dirOf, tp)
	delete(m.preferredDir, tp)
	m.abandonFutureLocked(tp, "the partition's replica is deleted")
	m.mu.Unlock()
	if !ok {
		return nil
	}
	if err := m.removeLog(l); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	return nil
}

// removeLog closes a log nobody else holds (a deleted partition's, an
// abandoned future log) and removes its directory, Kafka-style: renamed
// "<topic>-<partition>.<id>-delete" at once (so a restart never resurrects
// it) and removed in the background.
func (m *Manager) removeLog(l *Log) error {
	// Closed before the rename: closing trims the indexes by path. A
	// fetch still sending from the log fails cleanly (sendfile.go).
	if err := l.Close(); err != nil {
		m.logger.Warn("closing a log to remove failed", "partition", l.tp, "dir", l.Dir(), "error", err)
	}
	// The dir holding the log now: a move may have completed since.
	ld := l.dirState()
	if ld.isOffline() {
		// Nothing is written to a failed dir: the next start finds the
		// partition there, a stray the broker deletes then.
		return nil
	}
	target := filepath.Join(ld.path, l.tp.DirName()+"."+randomHex()+deleteDirSuffix)
	if err := os.Rename(l.Dir(), target); err != nil {
		return err
	}
	if err := syncDir(ld.path); err != nil {
		return err
	}
	m.removeInBackground(target)
	return nil
}

// randomHex is 32 random hex digits, the unique part of Kafka's "-delete"
// and "-future" directory names.
func randomHex() string {
	var id [16]byte
	rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

// CheckpointOffsets writes each dir's recovery-point, high-watermark and
// log-start-offset checkpoint files atomically.
func (m *Manager) CheckpointOffsets() error { return m.checkpoint(false) }

// CheckpointHighWatermarks writes every log dir's high-watermark
// checkpoint (replication-offset-checkpoint) alone.
func (m *Manager) CheckpointHighWatermarks() error { return m.checkpoint(true) }

// checkpoint writes the offset checkpoints of every online log dir: all
// three, or with hwOnly the high watermarks'.
func (m *Manager) checkpoint(hwOnly bool) error {
	m.mu.RLock()
	byDir := map[string][]*Log{}
	for _, l := range m.logs {
		// The dir holding the log now, which a completing move changes
		// before dirOf.
		d := l.dirState().path
		byDir[d] = append(byDir[d], l)
	}
	for _, f := range m.futures {
		byDir[f.dir] = append(byDir[f.dir], f.log)
	}
	m.mu.RUnlock()
	var errs []error
	for _, dir := range m.cfg.LogDirs {
		if m.dirs[dir].isOffline() {
			continue
		}
		hw := map[TopicPartition]int64{}
		for _, l := range byDir[dir] {
			hw[l.tp] = l.HighWatermark()
		}
		err := NewOffsetCheckpointFile(filepath.Join(dir, highWatermarkCheckpoint)).Write(hw)
		if !hwOnly {
			rp, ls := map[TopicPartition]int64{}, map[TopicPartition]int64{}
			for _, l := range byDir[dir] {
				rp[l.tp], ls[l.tp] = l.RecoveryPoint(), l.LogStartOffset()
			}
			err = errors.Join(err,
				NewOffsetCheckpointFile(filepath.Join(dir, recoveryPointCheckpoint)).Write(rp),
				NewOffsetCheckpointFile(filepath.Join(dir, logStartOffsetCheckpoint)).Write(ls))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint log dir %s: %w", dir, m.dirs[dir].check(err)))
		}
	}
	return errors.Join(errs...)
}

// dirFailed is every logDir's failed: the first I/O error in dir took it
// offline.
func (m *Manager) dirFailed(dir string, err error) {
	m.logger.Error("log dir failed: every partition in it is offline and nothing more is written there",
		"dir", dir, "error", err)
	if m.cfg.OnLogDirFailure != nil {
		m.cfg.OnLogDirFailure(dir, err)
	}
}

// OfflineDirs lists the log dirs taken offline by an I/O error.
func (m *Manager) OfflineDirs() []string {
	var out []string
	for _, dir := range m.cfg.LogDirs {
		if m.dirs[dir].isOffline() {
			out = append(out, dir)
		}
	}
	return out
}

// RunRetention applies retention to every log now; the background loop
// calls it every log.retention.check.interval.ms.
func (m *Manager) RunRetention() int {
	deleted := 0
	for _, l := range m.Logs() {
		n, err := l.DeleteOldSegments()
		if err != nil {
			m.logger.Error("retention failed", "partition", l.tp, "error", err)
		}
		deleted += n
	}
	return deleted
}

// backgroundLoop is the manager's one goroutine: retention, flush.ms and
// offset checkpoints on their intervals, until Close.
func (m *Manager) backgroundLoop() {
	defer m.wg.Done()
	retention := time.NewTicker(m.cfg.RetentionCheckInterval)
	flush := time.NewTicker(m.cfg.FlushCheckInterval)
	checkpoint := time.NewTicker(m.cfg.CheckpointInterval)
	hwCheckpoint := time.NewTicker(m.cfg.HighWatermarkCheckpointInterval)
	defer retention.Stop()
	defer flush.Stop()
	defer checkpoint.Stop()
	defer hwCheckpoint.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-retention.C:
			m.RunRetention()
		case <-flush.C:
			for _, l := range m.Logs() {
				if err := l.FlushIfDue(); err != nil {
					m.logger.Error("flush failed", "partition", l.tp, "error", err)
				}
			}
		case <-checkpoint.C:
			if err := m.CheckpointOffsets(); err != nil {
				m.logger.Error("writing offset checkpoints failed", "error", err)
			}
		case <-hwCheckpoint.C:
			if err := m.CheckpointHighWatermarks(); err != nil {
				m.logger.Error("writing the high-watermark checkpoints failed", "error", err)
			}
		}
	}
}

// CleanerIOMaxBytesPerSecond is the log cleaner's current I/O bound
// (log.cleaner.io.max.bytes.per.second; 0: unthrottled).
func (m *Manager) CleanerIOMaxBytesPerSecond() float64 {
	return math.Float64frombits(m.cleanerIORate.Load())
}

// SetCleanerIOMaxBytesPerSecond changes log.cleaner.io.max.bytes.per.second;
// a pass already running takes it at its next check.
func (m *Manager) SetCleanerIOMaxBytesPerSecond(rate float64) {
	m.cleanerIORate.Store(math.Float64bits(rate))
}

// SetWritebackBytes changes keel.log.writeback.bytes for every log of the
// Manager, open or opened later; each takes it from its next append. 0
// stops the hand-overs (writeback.go).
func (m *Manager) SetWritebackBytes(n int64) { m.writebackBytes.Store(max(n, 0)) }

// SetDeleteBytesPerSecond changes keel.log.delete.max.bytes.per.second,
// from the deleter's next step (not positive: unpaced).
func (m *Manager) SetDeleteBytesPerSecond(n int64) { m.deleter.rate.Store(n) }

// DeleteBytesPerSecond is the current keel.log.delete.max.bytes.per.second.
func (m *Manager) DeleteBytesPerSecond() int64 { return m.deleter.rate.Load() }

// WritebackBytes is the current keel.log.writeback.bytes.
func (m *Manager) WritebackBytes() int64 { return m.writebackBytes.Load() }

// SetDropBehindBytes changes keel.log.cache.drop.behind.bytes for every
// log of the Manager, open or opened later, from its next hand-over to
// writeback; 0 keeps the appended pages cached (writeback.go).
func (m *Manager) SetDropBehindBytes(n int64) { m.dropBehindBytes.Store(max(n, 0)) }

// DropBehindBytes is the current keel.log.cache.drop.behind.bytes.
func (m *Manager) DropBehindBytes() int64 { return m.dropBehindBytes.Load() }

// Close stops the background work, flushes every log, writes the
// checkpoints and the clean-shutdown marker, closes the logs and releases
// the dir locks. The next OpenManager then trusts the indexes.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.stopCleaners()
	close(m.stop)
	m.wg.Wait()
	var errs []error
	logs := m.Logs()
	for _, l := range logs {
		if !l.Offline() {
			errs = append(errs, l.Flush())
		}
	}
	m.mu.RLock()
	futures := make([]*Log, 0, len(m.futures))
	for _, f := range m.futures {
		futures = append(futures, f.log)
	}
	m.mu.RUnlock()
	for _, l := range futures {
		if !l.Offline() {
			errs = append(errs, l.Flush())
		}
	}
	errs = append(errs, m.CheckpointOffsets())
	for _, l := range logs {
		errs = append(errs, l.Close())
	}
	for _, l := range futures {
		errs = append(errs, l.Close())
	}
	m.closeRetired(true)
	if err := errors.Join(errs...); err != nil {
		m.unlock()
		return fmt.Errorf("close log manager: %w", err)
	}
	marker, err := json.Marshal(cleanShutdownMarker{Version: 0, BrokerEpoch: m.brokerEpoch.Load()})
	if err != nil {
		m.unlock()
		return fmt.Errorf("close log manager: clean shutdown marker: %w", err)
	}
	for _, dir := range m.cfg.LogDirs {
		if m.dirs[dir].isOffline() {
			errs = append(errs, fmt.Errorf("close log manager: log dir %s is offline: %w", dir, ErrStorage))
			continue
		}
		if err := writeFileAtomic(filepath.Join(dir, cleanShutdownFileName), marker); err != nil {
			errs = append(errs, err)
		}
	}
	m.unlock()
	return errors.Join(errs...)
}
