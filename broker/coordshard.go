package broker

// The runtime both coordinators share (DESIGN §6): the group coordinator
// on __consumer_offsets and the transaction coordinator on
// __transaction_state. Each keeps its state in the partitions of its
// internal topic; for every such partition this node leads, one goroutine
// (a coordShard) owns the partition's pure state machine (group.Manager,
// txn.Manager). It first loads the partition's log (the coordinator answers
// COORDINATOR_LOAD_IN_PROGRESS meanwhile), then runs the requests handed to
// it in arrival order, appends the records the machine asks for through
// the leader's append path, and completes each append once the high
// watermark passed it (coordinators append with acks=all). It stops when
// the node stops leading the partition, failing what is parked with
// NOT_COORDINATOR; a later leadership loads the log again.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// shardMachine is what a coordinator puts in a coordShard: its state
// machine's side of loading, timers and unloading. Every method runs on the
// shard goroutine.
type shardMachine interface {
	// reset starts an empty state, before a (re)load.
	reset(now int64)
	// replay applies one record of the partition's log while loading; h
	// is its batch (control batches included).
	replay(h *record.BatchHeader, r *record.Record) error
	// loaded ends loading; records is how many were replayed.
	loaded(now int64, records int, elapsed time.Duration)
	// nextDeadline is when tick must run next (math.MaxInt64: never).
	nextDeadline() int64
	tick(now int64)
	// unload answers everything the machine parked with NOT_COORDINATOR.
	unload()
}

// coordShard runs one coordinator partition this node leads.
//
// Ownership: the run goroutine owns the machine and pending. mu guards
// queue and closed; ready is set once the log is loaded.
type coordShard struct {
	b           *Broker
	p           *partition
	leaderEpoch int32
	m           shardMachine

	mu     sync.Mutex
	queue  []shardEvent
	closed bool
	notify chan struct{}

	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	ready     atomic.Bool
	unloading bool // shutdown began: completions must not append again

	pending []pendingAppend
}

// shardEvent is work for the shard goroutine, or its cancellation when the
// shard stops first.
type shardEvent struct {
	run   func(now int64)
	abort func()
}

// pendingAppend is an append waiting for the high watermark; complete is
// called once with 0 or the error code.
type pendingAppend struct {
	required int64 // the high watermark must reach it
	deadline int64
	complete func(code int16)
}

func newCoordShard(b *Broker, p *partition, leaderEpoch int32) *coordShard {
	return &coordShard{b: b, p: p, leaderEpoch: leaderEpoch, notify: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// halt asks the shard to stop; it never blocks.
func (s *coordShard) halt() { s.stopOnce.Do(func() { close(s.stop) }) }

// submit queues work for the shard goroutine; false when the shard stopped
// (the caller answers NOT_COORDINATOR). abort runs instead of run if the
// shard stops before running it.
//
// Concurrency: any goroutine; never blocks.
func (s *coordShard) submit(run func(now int64), abort func()) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, shardEvent{run: run, abort: abort})
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return true
}

func (s *coordShard) nowMs() int64 { return s.b.now().UnixMilli() }

// run is the shard goroutine: wait for the previous shard of the
// partition, load, then serve until halted or the broker closes.
func (s *coordShard) run(prev *coordShard) {
	defer close(s.done)
	defer s.shutdown()
	if prev != nil {
		select {
		case <-prev.done:
		case <-s.stop:
			return
		case <-s.b.closing():
			return
		}
	}
	w := newListener()
	s.p.produceWatch.add(w)
	defer s.p.produceWatch.remove(w)

	start := time.Now()
	var n int
	for {
		s.m.reset(s.nowMs())
		var err error
		if n, err = s.load(); err == nil {
			break
		}
		// Clients keep getting COORDINATOR_LOAD_IN_PROGRESS meanwhile.
		s.b.log.Error("loading a coordinator partition failed; retrying", "partition", s.p.tp, "error", err)
		select {
		case <-time.After(time.Second):
		case <-s.stop:
			return
		case <-s.b.closing():
			return
		}
	}
	s.m.loaded(s.nowMs(), n, time.Since(start))
	s.ready.Store(true)

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.nowMs()
		s.flushPending(now)
		next := s.m.nextDeadline()
		if next <= now {
			s.m.tick(now)
			continue
		}
		wait := next - now
		for _, pw := range s.pending {
			wait = min(wait, pw.deadline-now)
		}
		timer.Reset(time.Duration(max(wait, 1)) * time.Millisecond)
		select {
		case <-s.notify:
			s.mu.Lock()
			q := s.queue
			s.queue = nil
			s.mu.Unlock()
			for _, ev := range q {
				ev.run(s.nowMs())
			}
		case <-w.wake:
		case <-timer.C:
		case <-s.stop:
			return
		case <-s.b.closing():
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// shutdown answers everything parked or queued with NOT_COORDINATOR.
func (s *coordShard) shutdown() {
	s.mu.Lock()
	s.closed = true
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.unloading = true
	for _, ev := range q {
		ev.abort()
	}
	for _, pw := range s.pending {
		pw.complete(kerr.NotCoordinator.Code)
	}
	s.pending = nil
	s.m.unload()
	s.ready.Store(false)
}

// load replays the partition's log into the machine, up to the log end
// offset at the start.
func (s *coordShard) load() (int, error) {
	l := s.p.log
	end := l.LogEndOffset()
	offset := l.LogStartOffset()
	bufSize := max(s.b.cfg.OffsetsLoadBufferSize, 64<<10)
	n := 0
	var scratch []byte
	for offset < end {
		select {
		case <-s.stop:
			return n, errors.New("leadership lost while loading")
		case <-s.b.closing():
			return n, errors.New("broker closing while loading")
		default:
		}
		buf, err := l.ReadBytes(offset, bufSize, math.MaxInt64)
		if err != nil {
			return n, fmt.Errorf("read %s at %d: %w", s.p.tp, offset, err)
		}
		it := record.NewBatches(buf)
		progressed := false
		for {
			batch, h, ok := it.Next()
			if !ok {
				break
			}
			progressed = true
			offset = h.NextOffset()
			recs := record.RecordsBytes(batch)
			if c := h.Compression(); c != record.CompressionNone {
				if scratch, err = record.Decompress(c, scratch[:0], recs, math.MaxInt32); err != nil {
					return n, fmt.Errorf("decompress %s at %d: %w", s.p.tp, h.BaseOffset, err)
				}
				recs = append([]byte(nil), scratch...)
			}
			ri := record.NewRecordIterator(h, recs)
			var r record.Record
			for ri.Next(&r) {
				if err := s.m.replay(&h, &r); err != nil {
					s.b.log.Warn("skipping an unreadable coordinator record", "partition", s.p.tp, "offset", r.Offset, "error", err)
				}
				n++
			}
			if err := ri.Err(); err != nil {
				return n, fmt.Errorf("records of %s at %d: %w", s.p.tp, h.BaseOffset, err)
			}
		}
		if err := it.Err(); err != nil {
			return n, fmt.Errorf("batches of %s at %d: %w", s.p.tp, offset, err)
		}
		if !progressed {
			break
		}
	}
	return n, nil
}

// await parks complete until the high watermark reaches required (code 0),
// the leadership is lost (NOT_COORDINATOR) or timeout passes
// (REQUEST_TIMED_OUT).
func (s *coordShard) await(required int64, timeout time.Duration, complete func(code int16)) {
	now := s.nowMs()
	s.pending = append(s.pending, pendingAppend{required: required, deadline: now + max(timeout.Milliseconds(), 1), complete: complete})
	s.flushPending(now)
}

// flushPending completes the appends the high watermark passed, fails those
// whose leadership was lost or whose time ran out.
func (s *coordShard) flushPending(now int64) {
	for len(s.pending) > 0 {
		pw := s.pending[0]
		var code int16
		switch {
		case !s.leads():
			code = kerr.NotCoordinator.Code
		case s.p.log.HighWatermark() >= pw.required:
		case now >= pw.deadline:
			code = kerr.RequestTimedOut.Code
		default:
			return
		}
		s.pending = s.pending[1:]
		pw.complete(code)
	}
}

// leads reports whether this node still leads the partition in the shard's
// leader epoch.
func (s *coordShard) leads() bool {
	st := s.p.state.Load()
	return !s.p.removed.Load() && st.isLeader && st.leaderEpoch == s.leaderEpoch
}

// appendBatch writes one batch through the leader append path, with the
// acks=all min.insync.replicas check, and returns the offset the high
// watermark must reach. code is NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE when the partition refused before appending;
// err is the append's failure, for the caller to map to its coordinator's
// codes. check is the transaction verification a transactional batch
// needs (TxnOffsetCommit's; none for the coordinators' own records).
func (s *coordShard) appendBatch(batch []byte, check txnAppendCheck) (required int64, code int16, err error) {
	p := s.p
	st := p.state.Load()
	switch {
	case !s.leads():
		return 0, kerr.NotCoordinator.Code, nil
	case st.underMinISR():
		return 0, kerr.CoordinatorNotAvailable.Code, nil
	}
	// The durable mode group-commits, as for produce (durable.go): the
	// flusher fsyncs, and its high watermark move wakes this shard's
	// listener, which completes the append. Appending with the fsync
	// inline held every request of the shard for each append's fsync.
	// FromCoordinator: a TxnOffsetCommit's transactional batch is checked
	// for its producer epoch, not its sequence.
	info, err := p.log.AppendAsLeader(batch, storage.AppendOptions{LeaderEpoch: st.leaderEpoch, FromCoordinator: true, DeferFlush: st.durable,
		VerifyTxn: check.verify, TxnGuard: check.guard})
	if err != nil {
		s.b.log.Warn("appending to a coordinator partition failed", "partition", p.tp, "error", err)
		return 0, 0, err
	}
	// Kafka counts the coordinators' appends in BytesIn and MessagesIn too.
	p.metrics.produced(int64(info.Records), int64(info.Bytes))
	if st.durable {
		s.b.flusher.mark(p)
	}
	s.b.maybeAdvanceHighWatermark(p)
	p.fetchWatch.completeAll() // followers' long polls
	return info.LastOffset + 1, 0, nil
}

// coordShardOf is what a coordinator keeps per partition: a type holding
// a coordShard.
type coordShardOf interface {
	core() *coordShard
}

// onCoordShard runs f on the shard coordinating key and completes the
// returned result with what f answers; errResp builds the response for a
// coordinator-level error code (not the coordinator, loading, or the shard
// stopped).
func onCoordShard[S coordShardOf](r *shardRouter[S], key string, errResp func(code int16) kmsg.Response, f func(s S, now int64, answer func(kmsg.Response))) network.Result {
	s, code := r.shardFor(key)
	if code != 0 {
		return respond(errResp(code))
	}
	d := network.NewDeferred()
	var once sync.Once
	answer := func(r kmsg.Response) { once.Do(func() { d.Complete(&network.Response{Msg: r}) }) }
	if !s.core().submit(func(now int64) { f(s, now, answer) }, func() { answer(errResp(kerr.NotCoordinator.Code)) }) {
		return respond(errResp(kerr.NotCoordinator.Code))
	}
	return d
}

// internalTopic describes a coordinator's internal topic, for its creation.
type internalTopic struct {
	name              string
	partitions        int32
	replicationFactor int16
	configs           map[string]string
	// setting names the broker setting of the replication factor, for the
	// line saying too few brokers are alive.
	setting string
}

// shardRouter keeps the shards of the partitions of one internal topic
// this node leads, and creates the topic on first use.
//
// Concurrency: mu guards shards; partitionChanged and partitionRemoved are
// called with the Broker's applyMu held (lock order: applyMu, then mu).
// Handlers call shard from any goroutine.
type shardRouter[S coordShardOf] struct {
	b        *Broker
	topic    func() internalTopic
	newShard func(p *partition, leaderEpoch int32) S
	mu       sync.Mutex
	shards   map[int32]S
	creating atomic.Bool // a topic creation is in flight
	// shortLog throttles the line saying too few brokers are alive to
	// create the topic: every FindCoordinator retry asks.
	shortLog logThrottle
}

func newShardRouter[S coordShardOf](b *Broker, topic func() internalTopic, newShard func(*partition, int32) S) *shardRouter[S] {
	return &shardRouter[S]{b: b, topic: topic, newShard: newShard, shards: map[int32]S{}}
}

// partitionOf is the partition of the internal topic coordinating key, or
// -1 when the topic does not exist yet. The topic's real partition count
// is used (it equals the num.partitions setting unless the setting changed
// after the topic was created).
func (r *shardRouter[S]) partitionOf(key string) int32 {
	t, ok := r.b.currentImage().Topic(r.topic().name)
	if !ok || len(t.Partitions) == 0 {
		return -1
	}
	return record.CoordinatorPartition(key, int32(len(t.Partitions)))
}

// shardFor returns the loaded shard coordinating key, or the error code:
// NOT_COORDINATOR when this node does not lead its partition,
// COORDINATOR_LOAD_IN_PROGRESS while the shard loads.
func (r *shardRouter[S]) shardFor(key string) (S, int16) {
	var none S
	part := r.partitionOf(key)
	if part < 0 {
		return none, kerr.NotCoordinator.Code
	}
	r.mu.Lock()
	s, ok := r.shards[part]
	r.mu.Unlock()
	switch {
	case !ok:
		return none, kerr.NotCoordinator.Code
	case !s.core().ready.Load():
		return none, kerr.CoordinatorLoadInProgress.Code
	}
	return s, 0
}

// loadedShards returns the shards that finished loading.
func (r *shardRouter[S]) loadedShards() []S {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []S
	for _, s := range r.shards {
		if s.core().ready.Load() {
			out = append(out, s)
		}
	}
	return out
}

// anyLoading reports whether a shard is still loading.
func (r *shardRouter[S]) anyLoading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.shards {
		if !s.core().ready.Load() {
			return true
		}
	}
	return false
}

// partitionChanged starts a shard when this node became leader of a
// partition of the topic (or of a new leader epoch of it), and stops it
// when the node no longer leads it. Called from setPartitionState, applyMu
// held.
func (r *shardRouter[S]) partitionChanged(p *partition, st *partitionState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	part := p.tp.Partition
	cur, had := r.shards[part]
	if !st.isLeader {
		if had {
			cur.core().halt()
			delete(r.shards, part)
		}
		return
	}
	if had && cur.core().p == p && cur.core().leaderEpoch == st.leaderEpoch {
		return
	}
	var prev *coordShard
	if had {
		prev = cur.core()
		prev.halt()
	}
	s := r.newShard(p, st.leaderEpoch)
	r.shards[part] = s
	c := s.core()
	if !r.b.spawn(func() { c.run(prev) }) {
		delete(r.shards, part)
		c.shutdown()
		close(c.done)
	}
}

// partitionRemoved stops the shard of a partition no longer hosted here.
// applyMu is held.
func (r *shardRouter[S]) partitionRemoved(p *partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.shards[p.tp.Partition]; ok && s.core().p == p {
		s.core().halt()
		delete(r.shards, p.tp.Partition)
	}
}

// ensureTopic creates the internal topic through the controller, in the
// background, once at a time (Kafka's AutoTopicCreationManager for
// internal topics). While fewer brokers than its replication factor are
// alive it creates nothing and FindCoordinator keeps answering
// COORDINATOR_NOT_AVAILABLE, as Kafka does since KIP-115: a topic created
// then with fewer replicas would stay unreplicated after the cluster is up.
func (r *shardRouter[S]) ensureTopic() {
	if !r.creating.CompareAndSwap(false, true) {
		return
	}
	b, spec := r.b, r.topic()
	live := 0
	for _, br := range b.currentImage().Brokers() {
		if !br.Fenced {
			live++
		}
	}
	if live < int(spec.replicationFactor) {
		r.creating.Store(false)
		if r.shortLog.allow(10 * time.Second) {
			b.log.Warn("not creating an internal topic: fewer brokers alive than its replication factor; "+
				"its clients wait (COORDINATOR_NOT_AVAILABLE) until enough brokers are up, or lower the setting",
				"topic", spec.name, "alive_brokers", live, spec.setting, spec.replicationFactor)
		}
		return
	}
	started := b.spawn(func() {
		defer r.creating.Store(false)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		req.TimeoutMillis = int32(autoCreateTimeout / time.Millisecond)
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = spec.name, spec.partitions, spec.replicationFactor
		for _, name := range sortedKeys(spec.configs) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = name, kmsg.StringPtr(spec.configs[name])
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
		markInternalCreate(req)
		ctx, cancel := context.WithTimeout(b.ctx, autoCreateTimeout)
		defer cancel()
		resp, err := b.ctrl.Forward(ctx, req)
		if err != nil {
			b.log.Warn("creating an internal topic failed", "topic", spec.name, "error", err)
			return
		}
		if cr, ok := resp.(*kmsg.CreateTopicsResponse); ok {
			for _, rt := range cr.Topics {
				switch rt.ErrorCode {
				case 0:
					b.log.Info("created an internal topic", "topic", spec.name, "partitions", rt.NumPartitions, "replication_factor", rt.ReplicationFactor)
				case kerr.TopicAlreadyExists.Code:
				default:
					b.log.Warn("creating an internal topic failed", "topic", spec.name, "error", kerr.ErrorForCode(rt.ErrorCode))
				}
			}
		}
		// Answer the clients' next FindCoordinator from the new topic.
		if err := b.waitApplied(ctx, b.meta.Image().Offset()); err != nil {
			b.log.Debug("internal topic created before this broker applied it", "topic", spec.name, "error", err)
		}
	})
	if !started {
		r.creating.Store(false)
	}
}

// internalCreateTag marks a CreateTopics (v5+, flexible) as the broker's own
// creation of an internal topic; the controller handler turns it into an
// internalCreateTopics. The controller listener is an inter-broker one.
const internalCreateTag uint32 = 0x4b45454d // "KEEM"

func markInternalCreate(req *kmsg.CreateTopicsRequest) {
	req.UnknownTags.Set(internalCreateTag, []byte{1})
}

// isInternalCreate reports a CreateTopics marked by markInternalCreate.
func isInternalCreate(req *kmsg.CreateTopicsRequest) bool {
	internal := false
	req.UnknownTags.Each(func(k uint32, v []byte) {
		if k == internalCreateTag && len(v) == 1 && v[0] == 1 {
			internal = true
		}
	})
	return internal
}
