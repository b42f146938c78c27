package broker

import (
	"sync"
	"time"
)

// The durable mode (flush.messages=1, log.flush.interval.messages=1): a
// batch counts toward the high watermark only once it is fsynced on the
// leader and on the followers, and acks=1 answers only once the leader has
// fsynced it. A follower appends a fetch response's partitions without
// fsyncing and syncs them together before its next fetch (syncDurable), so
// the fetch offset it reports is already durable. The leader appends
// with AppendOptions.DeferFlush and marks the partition here; one flusher
// goroutine fsyncs every marked partition with storage.Log.Sync, which does
// not block appends, so every producer that appended while an fsync was in
// progress shares the next one (group commit). After each Sync the high
// watermark moves (maybeAdvanceHighWatermark takes the leader's durable
// offset instead of its log end offset) and parked produces are woken.
//
// Log.Sync fsyncs the segment files only, not the indexes: the records are
// what an acknowledgement promises, and a restart after a crash rebuilds
// the indexes past the recovery point from them.

// flusher is the durable mode's group committer.
//
// Concurrency: mark is called from request goroutines; run is the one
// goroutine (started by the first mark through Broker.spawn, stopped by
// Close) that fsyncs. mu guards dirty and started.
type flusher struct {
	b       *Broker
	mu      sync.Mutex
	dirty   map[*partition]struct{}
	started bool
	wake    chan struct{}
}

func newFlusher(b *Broker) *flusher {
	return &flusher{b: b, dirty: map[*partition]struct{}{}, wake: make(chan struct{}, 1)}
}

// mark asks for p's log to be fsynced soon.
func (f *flusher) mark(p *partition) {
	f.mu.Lock()
	f.dirty[p] = struct{}{}
	start := !f.started
	if start {
		f.started = f.b.spawn(f.run)
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run fsyncs marked partitions until the broker closes.
func (f *flusher) run() {
	for {
		select {
		case <-f.b.closing():
			return
		case <-f.wake:
		}
		f.mu.Lock()
		batch := f.dirty
		f.dirty = make(map[*partition]struct{}, len(batch))
		f.mu.Unlock()
		parts := make([]*partition, 0, len(batch))
		for p := range batch {
			if !p.removed.Load() {
				parts = append(parts, p)
			}
		}
		for i, err := range syncLogs(parts, &f.b.metrics.flushes) {
			p := parts[i]
			if err != nil {
				if !p.removed.Load() {
					f.b.log.Error("durable mode: fsync failed", "partition", p.tp, "error", err)
				}
				continue
			}
			f.b.maybeAdvanceHighWatermark(p)
			p.produceWatch.wakeAll()
		}
	}
}

// maxParallelSyncs bounds the fsyncs syncLogs runs at once.
const maxParallelSyncs = 16

// syncLogs runs Log.Sync for each partition, observing each one's time
// in flushes, and returns the errors, in order. Partitions are synced concurrently (up to maxParallelSyncs at
// once): a file system commits concurrent fsyncs of different files
// together (one journal commit on ext4 and XFS), so a broker that leads
// or follows many durable partitions pays about one fsync a round, not one
// per partition.
func syncLogs(parts []*partition, flushes *histogram) []error {
	errs := make([]error, len(parts))
	syncOne := func(p *partition) error {
		start := time.Now()
		err := p.log.Sync()
		flushes.observe(time.Since(start))
		return err
	}
	if len(parts) == 1 {
		errs[0] = syncOne(parts[0])
		return errs
	}
	slots := make(chan struct{}, maxParallelSyncs)
	var wg sync.WaitGroup
	for i, p := range parts {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = syncOne(p)
		})
	}
	wg.Wait()
	return errs
}

// durable reports the partition's durable mode (flush.messages=1).
func (p *partition) durable() bool {
	st := p.state.Load()
	return st != nil && st.durable
}
