package broker

// The group coordinator runtime (DESIGN §6): the coordinator of group G is
// the leader of __consumer_offsets partition abs(javaHashCode(G)) % its
// partition count. For every offsets partition this node leads, one
// goroutine (an offsetsShard) owns a group.Manager, the pure state machine:
// it first loads the partition's log (COORDINATOR_LOAD_IN_PROGRESS
// meanwhile), then serves the group requests handed to it in arrival
// order, appends the records the Manager asks for through the leader's
// append path, and answers the requests once the high watermark passed
// those records (Kafka appends coordinator records with acks=all). It
// stops when the node stops leading the partition, answering what is
// parked with NOT_COORDINATOR; a later leadership loads the log again.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// offsetsTopic is the internal topic of the group coordinator.
const offsetsTopic = "__consumer_offsets"

// groupCoordinator routes group requests to the shard of their offsets
// partition.
//
// Concurrency: mu guards shards; partitionChanged and partitionRemoved are
// called with the Broker's applyMu held (lock order: applyMu, then mu).
// Handlers call shardFor from any goroutine.
type groupCoordinator struct {
	b        *Broker
	mu       sync.Mutex
	shards   map[int32]*offsetsShard
	creating atomic.Bool // an offsets topic creation is in flight
	// shortLog throttles the line saying too few brokers are alive to
	// create the offsets topic: every FindCoordinator retry asks.
	shortLog logThrottle
}

func newGroupCoordinator(b *Broker) *groupCoordinator {
	return &groupCoordinator{b: b, shards: map[int32]*offsetsShard{}}
}

// partitionFor is the offsets partition of a group id, or -1 when the
// offsets topic does not exist yet. The topic's real partition count is
// used (it equals offsets.topic.num.partitions unless the config changed
// after the topic was created).
func (gc *groupCoordinator) partitionFor(groupID string) int32 {
	t, ok := gc.b.currentImage().Topic(offsetsTopic)
	if !ok || len(t.Partitions) == 0 {
		return -1
	}
	return record.CoordinatorPartition(groupID, int32(len(t.Partitions)))
}

// shardFor returns the loaded shard coordinating groupID, or the error
// code: NOT_COORDINATOR when this node does not lead its partition,
// COORDINATOR_LOAD_IN_PROGRESS while the shard loads.
func (gc *groupCoordinator) shardFor(groupID string) (*offsetsShard, int16) {
	part := gc.partitionFor(groupID)
	if part < 0 {
		return nil, kerr.NotCoordinator.Code
	}
	gc.mu.Lock()
	s := gc.shards[part]
	gc.mu.Unlock()
	switch {
	case s == nil:
		return nil, kerr.NotCoordinator.Code
	case !s.loaded.Load():
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return s, 0
}

// loadedShards returns the shards that finished loading.
func (gc *groupCoordinator) loadedShards() []*offsetsShard {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	var out []*offsetsShard
	for _, s := range gc.shards {
		if s.loaded.Load() {
			out = append(out, s)
		}
	}
	return out
}

// anyLoading reports whether a shard is still loading.
func (gc *groupCoordinator) anyLoading() bool {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for _, s := range gc.shards {
		if !s.loaded.Load() {
			return true
		}
	}
	return false
}

// partitionChanged starts a shard when this node became leader of an
// offsets partition (or of a new leader epoch of it), and stops it when the
// node no longer leads it. Called from setPartitionState, applyMu held.
func (gc *groupCoordinator) partitionChanged(p *partition, st *partitionState) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	part := p.tp.Partition
	cur := gc.shards[part]
	if !st.isLeader {
		if cur != nil {
			cur.halt()
			delete(gc.shards, part)
		}
		return
	}
	if cur != nil && cur.p == p && cur.leaderEpoch == st.leaderEpoch {
		return
	}
	if cur != nil {
		cur.halt()
	}
	s := newOffsetsShard(gc.b, p, st.leaderEpoch)
	gc.shards[part] = s
	if !gc.b.spawn(func() { s.run(cur) }) {
		delete(gc.shards, part)
		s.shutdown()
		close(s.done)
	}
}

// partitionRemoved stops the shard of a partition no longer hosted here.
// applyMu is held.
func (gc *groupCoordinator) partitionRemoved(p *partition) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if s := gc.shards[p.tp.Partition]; s != nil && s.p == p {
		s.halt()
		delete(gc.shards, p.tp.Partition)
	}
}

// ensureOffsetsTopic creates __consumer_offsets through the controller, in
// the background, once at a time: offsets.topic.num.partitions partitions,
// offsets.topic.replication.factor replicas, compacted (Kafka's
// AutoTopicCreationManager for internal topics). While fewer brokers than
// that are alive it creates nothing and FindCoordinator keeps answering
// COORDINATOR_NOT_AVAILABLE, as Kafka does since KIP-115: a topic created
// then with fewer replicas would stay unreplicated after the cluster is up.
func (gc *groupCoordinator) ensureOffsetsTopic() {
	if !gc.creating.CompareAndSwap(false, true) {
		return
	}
	b := gc.b
	live := 0
	for _, br := range b.currentImage().Brokers() {
		if !br.Fenced {
			live++
		}
	}
	rf := int(b.cfg.OffsetsTopicReplicationFactor)
	if live < rf {
		gc.creating.Store(false)
		if gc.shortLog.allow(10 * time.Second) {
			b.log.Warn("not creating the offsets topic: fewer brokers alive than offsets.topic.replication.factor; "+
				"consumer groups wait (COORDINATOR_NOT_AVAILABLE) until enough brokers are up, or lower the setting",
				"alive_brokers", live, "offsets.topic.replication.factor", rf)
		}
		return
	}
	started := b.spawn(func() {
		defer gc.creating.Store(false)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		req.TimeoutMillis = int32(autoCreateTimeout / time.Millisecond)
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = offsetsTopic, b.cfg.OffsetsTopicNumPartitions, int16(rf)
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "cleanup.policy", kmsg.StringPtr("compact")
		t.Configs = append(t.Configs, c)
		req.Topics = append(req.Topics, t)
		markInternalCreate(req)
		ctx, cancel := context.WithTimeout(b.ctx, autoCreateTimeout)
		defer cancel()
		resp, err := b.ctrl.Forward(ctx, req)
		if err != nil {
			b.log.Warn("creating the offsets topic failed", "error", err)
			return
		}
		if cr, ok := resp.(*kmsg.CreateTopicsResponse); ok {
			for _, rt := range cr.Topics {
				switch rt.ErrorCode {
				case 0:
					b.log.Info("created the offsets topic", "partitions", rt.NumPartitions, "replication_factor", rt.ReplicationFactor)
				case kerr.TopicAlreadyExists.Code:
				default:
					b.log.Warn("creating the offsets topic failed", "error", kerr.ErrorForCode(rt.ErrorCode))
				}
			}
		}
		// Answer the clients' next FindCoordinator from the new topic.
		if err := b.waitApplied(ctx, b.meta.Image().Offset()); err != nil {
			b.log.Debug("offsets topic created before this broker applied it", "error", err)
		}
	})
	if !started {
		gc.creating.Store(false)
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

// offsetsShard is the coordinator of one offsets partition this node
// leads.
//
// Ownership: the run goroutine owns mgr and pending. mu guards queue and
// closed; loaded is set once the log is loaded.
type offsetsShard struct {
	b           *Broker
	p           *partition
	leaderEpoch int32

	mu     sync.Mutex
	queue  []shardEvent
	closed bool
	notify chan struct{}

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	loaded   atomic.Bool

	mgr     *group.Manager
	pending []pendingWrite
}

// shardEvent is work for the shard goroutine, or its cancellation when the
// shard stops first.
type shardEvent struct {
	run   func(now int64)
	abort func()
}

// pendingWrite is an append waiting for the high watermark.
type pendingWrite struct {
	required int64 // the high watermark must reach it
	deadline int64 // offsets.commit.timeout.ms
	eff      group.Effects
	done     func(code int16)
}

func newOffsetsShard(b *Broker, p *partition, leaderEpoch int32) *offsetsShard {
	return &offsetsShard{b: b, p: p, leaderEpoch: leaderEpoch, notify: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// halt asks the shard to stop; it never blocks.
func (s *offsetsShard) halt() { s.stopOnce.Do(func() { close(s.stop) }) }

// submit queues work for the shard goroutine; false when the shard stopped
// (the caller answers NOT_COORDINATOR). abort runs instead of run if the
// shard stops before running it.
//
// Concurrency: any goroutine; never blocks.
func (s *offsetsShard) submit(run func(now int64), abort func()) bool {
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

func (s *offsetsShard) nowMs() int64 { return s.b.now().UnixMilli() }

// run is the shard goroutine: wait for the previous shard of the
// partition, load, then serve until halted or the broker closes.
func (s *offsetsShard) run(prev *offsetsShard) {
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
		s.mgr = group.NewManager(s.b.cfg.groupConfig(), s.nowMs(), newMemberUUID)
		var err error
		if n, err = s.load(); err == nil {
			break
		}
		// Clients keep getting COORDINATOR_LOAD_IN_PROGRESS meanwhile.
		s.b.log.Error("loading the groups of an offsets partition failed; retrying", "partition", s.p.tp, "error", err)
		select {
		case <-time.After(time.Second):
		case <-s.stop:
			return
		case <-s.b.closing():
			return
		}
	}
	s.mgr.FinishLoad(s.nowMs())
	s.loaded.Store(true)
	s.b.log.Info("loaded groups", "partition", s.p.tp, "leader_epoch", s.leaderEpoch, "records", n,
		"groups", len(s.mgr.GroupIDs()), "elapsed", time.Since(start))

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.nowMs()
		s.flushPending(now)
		next := s.mgr.NextDeadline()
		if next <= now {
			s.apply(s.mgr.Tick(now), nil)
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
func (s *offsetsShard) shutdown() {
	s.mu.Lock()
	s.closed = true
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, ev := range q {
		ev.abort()
	}
	for _, pw := range s.pending {
		s.reply(pw.eff, kerr.NotCoordinator.Code)
		if pw.done != nil {
			pw.done(kerr.NotCoordinator.Code)
		}
	}
	s.pending = nil
	if s.mgr != nil {
		s.reply(s.mgr.Unload(), 0)
	}
	s.loaded.Store(false)
}

// load replays the partition's log into the Manager (Kafka's
// loadGroupsAndOffsets), up to the log end offset at the start.
func (s *offsetsShard) load() (int, error) {
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
			if h.IsControl() {
				continue
			}
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
				if r.Key == nil {
					continue
				}
				if err := s.mgr.Replay(r.Key, r.Value); err != nil {
					s.b.log.Warn("skipping an unreadable offsets record", "partition", s.p.tp, "offset", r.Offset, "error", err)
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

// apply carries out a Manager's Effects: the records are appended as one
// batch and the replies sent once it is committed (done, if not nil, is
// called then with 0 or the error code the replies carry).
func (s *offsetsShard) apply(eff group.Effects, done func(code int16)) {
	if len(eff.Records) == 0 {
		s.reply(eff, 0)
		if done != nil {
			done(0)
		}
		return
	}
	now := s.nowMs()
	required, code := s.append(eff.Records, now)
	if code != 0 {
		s.finish(pendingWrite{eff: eff, done: done}, code, now)
		return
	}
	timeout := s.b.cfg.OffsetsCommitTimeout.Milliseconds()
	s.pending = append(s.pending, pendingWrite{required: required, deadline: now + max(timeout, 1), eff: eff, done: done})
	s.flushPending(now)
}

// flushPending completes the appends the high watermark passed, fails those
// whose leadership was lost or whose time ran out.
func (s *offsetsShard) flushPending(now int64) {
	for len(s.pending) > 0 {
		pw := s.pending[0]
		st := s.p.state.Load()
		var code int16
		switch {
		case s.p.removed.Load() || !st.isLeader || st.leaderEpoch != s.leaderEpoch:
			code = kerr.NotCoordinator.Code
		case s.p.log.HighWatermark() >= pw.required:
		case now >= pw.deadline:
			code = kerr.RequestTimedOut.Code
		default:
			return
		}
		s.pending = s.pending[1:]
		s.finish(pw, code, now)
	}
}

// finish completes a write: applies its offsets and answers its replies,
// or answers them with code (and rebalances groups whose metadata was lost,
// as Kafka does when storing a group fails).
func (s *offsetsShard) finish(pw pendingWrite, code int16, now int64) {
	if code == 0 {
		s.mgr.ApplyCommits(pw.eff.Commits)
		for _, id := range pw.eff.Stored {
			if g := s.mgr.Group(id); g != nil {
				// Kafka's "Stabilized group ... generation ..." line.
				s.b.log.Info("stored group", "group", id, "state", g.State, "generation", g.Generation,
					"protocol", g.Protocol, "members", len(g.Members), "partition", s.p.tp)
			}
		}
	}
	s.reply(pw.eff, code)
	if pw.done != nil {
		pw.done(code)
	}
	if code != 0 {
		for _, g := range pw.eff.Stored {
			s.apply(s.mgr.StoreFailed(now, g), nil)
		}
	}
}

// reply answers the parked requests of eff, with code instead of their own
// when code is not 0.
func (s *offsetsShard) reply(eff group.Effects, code int16) {
	for _, j := range eff.Joins {
		if code != 0 {
			j = group.JoinReply{Waiter: j.Waiter, ErrorCode: code, MemberID: j.MemberID, Generation: -1}
		}
		if f, ok := j.Waiter.(func(group.JoinReply)); ok {
			f(j)
		}
	}
	for _, r := range eff.Syncs {
		if code != 0 {
			r = group.SyncReply{Waiter: r.Waiter, ErrorCode: code}
		}
		if f, ok := r.Waiter.(func(group.SyncReply)); ok {
			f(r)
		}
	}
}

// append writes records as one batch through the leader append path (with
// the acks=all min.insync.replicas check) and returns the offset the high
// watermark must reach, or the coordinator error code (Kafka's mapping in
// GroupMetadataManager.storeOffsets).
func (s *offsetsShard) append(recs []group.Record, now int64) (int64, int16) {
	p := s.p
	st := p.state.Load()
	switch {
	case p.removed.Load() || !st.isLeader || st.leaderEpoch != s.leaderEpoch:
		return 0, kerr.NotCoordinator.Code
	case len(st.isr) < st.minISR:
		return 0, kerr.CoordinatorNotAvailable.Code
	}
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	for _, r := range recs {
		bb.Append(now, r.Key, r.Value, nil)
	}
	batch, err := bb.Build(nil)
	if err != nil {
		s.b.log.Error("building an offsets batch failed", "partition", p.tp, "error", err)
		return 0, kerr.UnknownServerError.Code
	}
	// The durable mode group-commits, as for produce (durable.go): the
	// flusher fsyncs, and its high watermark move wakes this shard's
	// listener, which answers the commit. Appending with the fsync inline
	// held every group of the shard for each commit's fsync.
	info, err := p.log.AppendAsLeader(batch, storage.AppendOptions{LeaderEpoch: st.leaderEpoch, DeferFlush: st.durable})
	if err != nil {
		s.b.log.Warn("appending to an offsets partition failed", "partition", p.tp, "error", err)
		switch storage.ErrorCode(err) {
		case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
			return 0, kerr.InvalidCommitOffsetSize.Code
		case kerr.KafkaStorageError.Code:
			return 0, kerr.NotCoordinator.Code
		}
		return 0, kerr.CoordinatorNotAvailable.Code
	}
	// Kafka counts the coordinator's appends in BytesIn and MessagesIn too.
	p.metrics.produced(int64(info.Records), int64(info.Bytes))
	if st.durable {
		s.b.flusher.mark(p)
	}
	s.b.maybeAdvanceHighWatermark(p)
	p.fetchWatch.completeAll() // followers' long polls
	return info.LastOffset + 1, 0
}

// newMemberUUID is the random part of a member id (Kafka: a UUID).
func newMemberUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// onShard runs f on the shard of groupID and completes the returned result
// with what f answers; errResp builds the response for a group-level error
// code (not the coordinator, loading, or the shard stopped).
func (b *Broker) onShard(groupID string, errResp func(code int16) kmsg.Response, f func(s *offsetsShard, now int64, answer func(kmsg.Response))) network.Result {
	s, code := b.groups.shardFor(groupID)
	if code != 0 {
		return respond(errResp(code))
	}
	d := network.NewDeferred()
	var once sync.Once
	answer := func(r kmsg.Response) { once.Do(func() { d.Complete(&network.Response{Msg: r}) }) }
	if !s.submit(func(now int64) { f(s, now, answer) }, func() { answer(errResp(kerr.NotCoordinator.Code)) }) {
		return respond(errResp(kerr.NotCoordinator.Code))
	}
	return d
}
