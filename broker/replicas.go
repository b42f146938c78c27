package broker

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/storage"
)

// partitionTable is the set of partitions this node hosts (is a replica
// of). It is immutable once published: ApplyMetadata builds a new one.
type partitionTable struct {
	byTP map[storage.TopicPartition]*partition
}

// partition is one hosted replica: its log and its replication state.
//
// Ownership: tp, topicID and log are set at creation and never change.
// Lock order: producerMu before hwMu before replicasMu.
// state is replaced (never mutated) by ApplyMetadata. hwMu serialises high
// watermark updates, so that two appends racing on one partition never move
// the high watermark backwards. The watch lists have their own locks.
type partition struct {
	tp      storage.TopicPartition
	topicID metadata.Uuid
	log     *storage.Log
	metrics *topicMetrics // its topic's BrokerTopicMetrics (metrics.go)
	// followerLag is, on a follower, the leader's high watermark less this
	// log's end offset after the last fetch (Kafka's FetcherLagMetrics).
	followerLag atomic.Int64

	state atomic.Pointer[partitionState]
	// removed is set once the partition is no longer hosted (its topic was
	// deleted or the replica moved away); its log is closed or closing.
	removed atomic.Bool

	hwMu sync.Mutex

	// replicasMu guards followers (the leader's view of each follower,
	// reset on every new leadership) and pendingISR (an ISR change sent
	// to the controller and not yet answered, nil when none).
	replicasMu sync.Mutex
	followers  map[int32]*followerState
	pendingISR []int32

	// fetchWatch holds fetches parked on this partition, woken when its
	// log end offset or high watermark moves. produceWatch holds acks=all
	// produces, woken when its high watermark moves or its leadership or
	// ISR changes.
	fetchWatch   watchList
	produceWatch watchList

	// producerMu serialises the partition's idempotent appends. The
	// producer state itself lives in log (storage/producer_state.go),
	// which checks sequences and appends under its own lock.
	producerMu sync.Mutex
}

// partitionState is a partition's replication state from one image, plus
// the topic configs the request path needs. Immutable.
type partitionState struct {
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	// isLeader is leader == this node. Followers fetch from the leader
	// (fetcher.go) and answer clients NOT_LEADER_OR_FOLLOWER.
	isLeader bool
	// minISR is the topic's effective min.insync.replicas.
	minISR int
	// deletePolicy is cleanup.policy containing "delete" (DeleteRecords
	// is refused on purely compacted topics, as in Kafka).
	deletePolicy bool
	// policy is the topic's per-record produce checks (record_policy.go).
	policy recordPolicy
	// durable is the topic's durable mode (flush.messages=1, durable.go).
	durable bool
	// leaderThrottled and followerThrottled: the topic's
	// leader/follower.replication.throttled.replicas name this partition
	// on this broker (quota.go).
	leaderThrottled, followerThrottled bool
}

// onlyLeaderInISR reports ISR == {leader}: the high watermark is then the
// log end offset, with no follower to wait for.
func (s *partitionState) onlyLeaderInISR() bool {
	return len(s.isr) == 1 && s.isr[0] == s.leader
}

// underMinISR reports an ISR smaller than min.insync.replicas, capped by
// the replica count (Kafka's Partition.isUnderMinIsr, which also refuses
// acks=all produces): a topic with fewer replicas than the minimum is not
// always below it. The high watermark then stays where it is (KIP-966's
// strict min ISR, Kafka since 3.7): a replica that left the ISR meanwhile
// still holds every committed record, which is what makes it an eligible
// leader replica.
func (s *partitionState) underMinISR() bool {
	return len(s.isr) < min(s.minISR, len(s.replicas))
}

// leaderErrorCode is Kafka's Partition.checkCurrentLeaderEpoch followed by
// the leadership check (localLogWithEpochOrThrow): FENCED_LEADER_EPOCH when
// the client's epoch is older than ours, UNKNOWN_LEADER_EPOCH when newer,
// then NOT_LEADER_OR_FOLLOWER unless this node leads (when requireLeader).
// currentLeaderEpoch -1 skips the epoch check.
func (s *partitionState) leaderErrorCode(currentLeaderEpoch int32, requireLeader bool) int16 {
	switch {
	case currentLeaderEpoch >= 0 && currentLeaderEpoch < s.leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case currentLeaderEpoch > s.leaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	case requireLeader && !s.isLeader:
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// lookup returns the hosted partition tp, or nil.
func (b *Broker) lookup(tp storage.TopicPartition) *partition {
	return b.partitions.Load().byTP[tp]
}

// partitionError is the error for a partition this node does not host:
// NOT_LEADER_OR_FOLLOWER if the image knows it (another broker hosts it),
// UNKNOWN_TOPIC_OR_PARTITION otherwise (Kafka's
// ReplicaManager.getPartitionOrError).
func (b *Broker) partitionError(topic string, part int32) int16 {
	if t, ok := b.currentImage().Topic(topic); ok && part >= 0 && int(part) < len(t.Partitions) {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// leaderPartition resolves a partition a leader must serve: the partition
// and 0, or nil and the Kafka error code.
func (b *Broker) leaderPartition(topic string, part, currentLeaderEpoch int32) (*partition, *partitionState, int16) {
	p := b.lookup(storage.TopicPartition{Topic: topic, Partition: part})
	if p == nil {
		return nil, nil, b.partitionError(topic, part)
	}
	st := p.state.Load()
	if code := st.leaderErrorCode(currentLeaderEpoch, true); code != 0 {
		return nil, st, code
	}
	return p, st, 0
}

// maybeAdvanceHighWatermark moves a leader's high watermark to the minimum
// log end offset over its (maximal, KIP-497) ISR — its own log end offset
// when the ISR is itself alone — never backwards (Kafka's
// Partition.maybeIncrementLeaderHW), and wakes the parked produces and
// fetches when it moved. Called after every append, every follower fetch,
// every ISR and leadership change.
//
// Concurrency: any goroutine; takes p.hwMu, then p.replicasMu.
func (b *Broker) maybeAdvanceHighWatermark(p *partition) {
	if b.advanceHighWatermark(p) {
		// Parked produces are answered from here: their checks take no
		// lock a caller may hold (a follower fetch's check calls this).
		// Parked fetches re-check on a goroutine of their own: a
		// fetch's check may call this very function.
		p.produceWatch.completeAll()
		p.fetchWatch.wakeAll()
	}
}

// advanceHighWatermark moves the high watermark as
// maybeAdvanceHighWatermark does, without waking anyone; it reports whether
// it moved.
func (b *Broker) advanceHighWatermark(p *partition) bool {
	st := p.state.Load()
	if !st.isLeader || st.underMinISR() {
		return false
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	hw := p.log.LogEndOffset()
	if st.durable { // only what the leader has fsynced counts (durable.go)
		hw = p.log.DurableOffset()
	}
	if !st.onlyLeaderInISR() {
		hw = b.highWatermarkCandidate(p, st, hw)
	}
	if hw <= p.log.HighWatermark() {
		return false
	}
	p.log.SetHighWatermark(hw)
	return true
}

// ApplyMetadata is called by the node, from one goroutine, in commit order,
// after every published image: the broker creates logs for partitions it
// hosts, becomes leader (or follower: the partition's leader's fetcher
// truncates and fetches it, fetcher.go), deletes logs of deleted topics
// and of replicas moved away, and applies topic and broker config changes
// to its logs (storage.LogConfig from broker defaults + dynamic broker
// configs + topic overrides). The first call reconciles every partition of the image,
// whatever changes says, so the node may start from a snapshot.
//
// Concurrency: one goroutine at a time (serialised by applyMu); it blocks
// on log creation and deletion (disk I/O) but never on requests.
func (b *Broker) ApplyMetadata(img *metadata.Image, changes metadata.Changes) {
	if img == nil {
		return
	}
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	b.applyLocked(img, changes)
}

// applyLocked is ApplyMetadata with applyMu held.
func (b *Broker) applyLocked(img *metadata.Image, changes metadata.Changes) {
	if !b.isrStarted {
		b.isrStarted = b.spawn(b.isrLoop)
		if b.isrStarted {
			b.spawn(b.producerExpiryLoop)
			b.spawn(b.dirAssignmentLoop)
		}
	}
	old := b.partitions.Load().byTP
	next := old
	mutable := false
	mutate := func() {
		if !mutable {
			next, mutable = maps.Clone(old), true
		}
	}
	var woken []*partition

	// Deletions first: a topic deleted and re-created under the same name
	// in one batch must lose its old log before the new one is created.
	for _, t := range changes.DeletedTopics {
		for i := range t.Partitions {
			tp := storage.TopicPartition{Topic: t.Name, Partition: int32(i)}
			if p := next[tp]; p != nil && p.topicID == t.ID {
				mutate()
				delete(next, tp)
				b.removePartition(p, "topic deleted")
			}
			b.setUnplaced(tp, false)
		}
	}

	keys := changes.Partitions
	if !b.initialized {
		keys = map[metadata.PartitionKey]*metadata.Partition{}
		for _, t := range img.Topics() {
			for i, p := range t.Partitions {
				keys[metadata.PartitionKey{TopicID: t.ID, Partition: int32(i)}] = p
			}
		}
		b.initialized = true
		b.updateBrokerConfigs(img)
		b.updateIPConnectionRates(img)
	}
	var newEpochs []*partition // new leaderships, whose epoch the log must record
	for k, mp := range keys {
		t, ok := img.TopicByID(k.TopicID)
		if !ok {
			continue
		}
		tp := storage.TopicPartition{Topic: t.Name, Partition: k.Partition}
		p := next[tp]
		if p != nil && p.topicID != t.ID { // a stale replica of an older topic
			mutate()
			delete(next, tp)
			b.removePartition(p, "topic re-created")
			p = nil
		}
		if !slices.Contains(mp.Replicas, b.nodeID) {
			if p != nil {
				mutate()
				delete(next, tp)
				b.removePartition(p, "replica moved away")
			}
			b.setUnplaced(tp, false)
			continue
		}
		if p == nil {
			if _, ok := b.logs.Log(tp); !ok && !b.mayCreateLog(mp.Directory(b.nodeID)) {
				if !b.unplaced[tp] {
					b.log.Warn("not creating the log of a replica that may be in a log dir offline; the replica stays offline until the dir is back, replaced, or the replica reassigned",
						"partition", tp, "directory_id", mp.Directory(b.nodeID), "offline_dirs", fmt.Sprint(b.logs.OfflineDirs()))
				}
				b.setUnplaced(tp, true)
				continue
			}
			b.setUnplaced(tp, false)
			l, err := b.logs.GetOrCreateLog(tp, b.logConfig(img, t.Name))
			if err != nil {
				b.log.Error("cannot create the log of a hosted partition", "partition", tp, "error", err)
				continue
			}
			if id, ok := l.TopicID(); ok && metadata.Uuid(id) != t.ID {
				// A log of another incarnation of the topic (deleted and
				// re-created while this node was away). Until this node
				// has caught up with the metadata log, the image may be
				// the older one: leave the log alone; once caught up, it
				// is a stray (ReconcileStrayLogs).
				if !b.caughtUp {
					b.log.Warn("a log on disk belongs to another topic id; waiting for the metadata to catch up",
						"partition", tp, "log_topic_id", metadata.Uuid(id), "topic_id", t.ID)
					continue
				}
				if l, err = b.replaceStrayLog(tp, metadata.Uuid(id), b.logConfig(img, t.Name)); err != nil {
					b.log.Error("cannot replace a stray log", "partition", tp, "error", err)
					continue
				}
			}
			if err := l.SetTopicID(t.ID); err != nil {
				b.log.Warn("cannot record the topic id with the log", "partition", tp, "error", err)
			}
			// A log found on disk at startup was opened with the manager's
			// defaults: give it the topic's configuration.
			l.SetConfig(b.logConfig(img, t.Name))
			p = &partition{tp: tp, topicID: t.ID, log: l, metrics: b.metrics.topic(tp.Topic)}
			mutate()
			next[tp] = p
			b.log.Debug("hosting partition", "partition", tp, "topic_id", t.ID)
		}
		if b.setPartitionState(p, img, t.Name, mp) {
			newEpochs = append(newEpochs, p)
		}
		woken = append(woken, p)
	}
	// Before new partitions become visible to requests (the table is
	// stored below); a leadership changed in place was published already,
	// and its first append records the epoch itself if it comes first.
	b.assignLeaderEpochs(newEpochs)

	// Config changes: a topic's own, or broker-level ones that may be the
	// default of any topic config; this broker's own may replace its
	// listeners' keystores. Collected first, then one pass over the
	// partitions: after a snapshot every resource with configs is named
	// (fullChanges), which must not cost a pass per topic.
	own := strconv.Itoa(int(b.nodeID))
	changedTopics := map[string]bool{}
	brokerWide, tlsChanged := false, false
	for _, res := range changes.Configs {
		switch res.Type {
		case metadata.ConfigResourceTopic:
			changedTopics[res.Name] = true
		case metadata.ConfigResourceBroker:
			brokerWide = brokerWide || res.Name == "" || res.Name == own
			tlsChanged = tlsChanged || res.Name == own
		}
	}
	if brokerWide {
		b.updateBrokerConfigs(img)
	}
	if changes.ClientQuotas {
		b.updateIPConnectionRates(img)
	}
	if brokerWide || len(changedTopics) > 0 {
		for tp, p := range next {
			if brokerWide || changedTopics[tp.Topic] {
				b.refreshConfig(p, img)
			}
		}
	}
	if tlsChanged || b.image.Load() == nil {
		// The first image brings the dynamic configs of a restart.
		b.applyListenerTLS(img)
	}

	if mutable {
		b.partitions.Store(&partitionTable{byTP: next})
		b.metrics.retainTopics(func(name string) bool { _, ok := img.Topic(name); return ok })
	}
	b.image.Store(img)
	b.signalApplied()
	b.dirAssign.nudge()
	for _, p := range woken {
		b.maybeAdvanceHighWatermark(p)
		p.fetchWatch.wakeAll()
		p.produceWatch.wakeAll()
	}
	b.reconcileStrayLogsLocked()
}

// mayCreateLog reports whether the broker may create the log of a replica
// the metadata places in log dir dir here that it has no log of (Kafka's
// Partition.createLogInAssignedDirectoryId, KAFKA-16234): when every log
// dir of the broker is online, when the replica is in no dir yet (a new
// one), or when dir is one of its dirs online. Otherwise the replica's log
// may be in a dir offline (one that failed, or that could not be read at
// start): a log created elsewhere would hold none of its records, and be a
// second copy once the dir is back. The replica stays offline then, as the
// controller sees it (its dir is not among the broker's online ones).
func (b *Broker) mayCreateLog(dir metadata.Uuid) bool {
	offline := b.logs.OfflineDirs()
	if len(offline) == 0 || dir == metadata.DirUnassigned {
		return true
	}
	for path, id := range b.dirAssign.ids {
		if id == dir {
			return !slices.ContainsFunc(offline, func(d string) bool { return filepath.Clean(d) == path })
		}
	}
	return false
}

// setUnplaced records whether tp's replica is left without a log because
// of mayCreateLog. applyMu is held.
func (b *Broker) setUnplaced(tp storage.TopicPartition, unplaced bool) {
	if unplaced == b.unplaced[tp] {
		return
	}
	if unplaced {
		b.unplaced[tp] = true
	} else {
		delete(b.unplaced, tp)
	}
	b.unplacedCount.Store(int64(len(b.unplaced)))
}

// ReconcileStrayLogs is called once the controller says this node has
// caught up with the metadata log: its heartbeat reported offset, at or
// past its registration. Once the image has reached offset (it has, when
// the offset is MetadataOffset's; otherwise at the ApplyMetadata that
// brings it there), every log on disk that the image does not
// place here, or that belongs to another incarnation of its topic (another
// topic id), is a stray of a topic deleted or a replica moved while this
// node was away, and is deleted (Kafka's
// LogManager.deleteStrayKRaftReplicas); the partitions the image does
// place here are then hosted afresh, and Ready is closed. An older image
// would take the log of a topic created after it for a stray.
//
// Concurrency: any goroutine; serialised with ApplyMetadata by applyMu.
func (b *Broker) ReconcileStrayLogs(offset int64) {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	if b.caughtUpAt < 0 {
		b.caughtUpAt = offset
	}
	b.reconcileStrayLogsLocked()
}

// MetadataOffset is the offset of the image the broker answers from, -1
// before the first. Never blocks.
func (b *Broker) MetadataOffset() int64 {
	if img := b.image.Load(); img != nil {
		return img.Offset()
	}
	return -1
}

// Ready is closed once the node has caught up with the metadata log and
// reconciled its logs with it (ReconcileStrayLogs): the image it answers
// from is then at least as new as the controller's at its registration.
func (b *Broker) Ready() <-chan struct{} { return b.ready }

// reconcileStrayLogsLocked is ReconcileStrayLogs' work, once the image has
// reached caughtUpAt. applyMu is held.
func (b *Broker) reconcileStrayLogsLocked() {
	img := b.image.Load()
	if b.caughtUp || b.caughtUpAt < 0 || img == nil || img.Offset() < b.caughtUpAt {
		return
	}
	b.caughtUp = true
	defer close(b.ready)
	hosted := b.partitions.Load().byTP
	strays := 0
	for _, l := range b.logs.Logs() {
		tp := l.TopicPartition()
		if p := hosted[tp]; p != nil && p.log == l {
			continue
		}
		id, _ := l.TopicID()
		b.log.Warn("deleting a stray log: this node does not host it in the current metadata",
			"partition", tp, "log_topic_id", metadata.Uuid(id))
		if err := b.logs.DeleteLog(tp); err != nil {
			b.log.Error("deleting a stray log failed", "partition", tp, "error", err)
		}
		strays++
	}
	if strays > 0 {
		b.applyLocked(img, fullChanges(img))
	}
	// The moves between log dirs a restart found resume now, at the
	// replica.alter.log.dirs.io.max.bytes.per.second of the caught-up
	// image, with the strays' gone.
	b.logs.StartMoves()
}

// replaceStrayLog deletes tp's log of topic id old and creates an empty one.
// applyMu is held.
func (b *Broker) replaceStrayLog(tp storage.TopicPartition, old metadata.Uuid, cfg storage.LogConfig) (*storage.Log, error) {
	b.log.Warn("deleting a stray log of another incarnation of its topic", "partition", tp, "log_topic_id", old)
	if err := b.logs.DeleteLog(tp); err != nil {
		return nil, err
	}
	return b.logs.GetOrCreateLog(tp, cfg)
}

// setPartitionState publishes a partition's state from the image and acts
// on a new leadership. It reports whether p became leader in a new leader
// epoch, which must then start at the log end offset in the leader-epoch
// cache (Kafka's Partition.makeLeader), so that OffsetForLeaderEpoch
// answers correctly before the first append: the caller records it
// (assignLeaderEpochs). applyMu is held.
func (b *Broker) setPartitionState(p *partition, img *metadata.Image, topic string, mp *metadata.Partition) (newEpoch bool) {
	st := &partitionState{
		leader:         mp.Leader,
		leaderEpoch:    mp.LeaderEpoch,
		partitionEpoch: mp.PartitionEpoch,
		replicas:       mp.Replicas,
		isr:            mp.ISR,
		isLeader:       mp.Leader == b.nodeID,
	}
	b.fillTopicState(st, img, topic, p.tp.Partition)
	following := !st.isLeader && st.leader >= 0 && slices.Contains(st.replicas, b.nodeID)
	if !following {
		// Before the leadership is published: once unfollow returns, the
		// fetcher appends nothing more (Kafka removes the fetcher first).
		b.fetchers.unfollow(p)
	}
	// state is written only under applyMu: Load then Store is a swap.
	prev := p.state.Load()
	if st.isLeader && (prev == nil || prev.leader != st.leader || prev.leaderEpoch != st.leaderEpoch) {
		// Before the leadership is published, so that no follower state
		// of an earlier leadership ever counts toward the high watermark.
		b.resetFollowers(p, st)
	} else if st.isLeader && !slices.Equal(prev.replicas, st.replicas) {
		b.updateFollowers(p, st)
	}
	p.state.Store(st)
	switch topic {
	case offsetsTopic:
		b.groups.partitionChanged(p, st)
	case txnTopic:
		b.txns.partitionChanged(p, st)
	}
	if following {
		b.fetchers.follow(p, st.leader, st.leaderEpoch, prev == nil)
	}
	if st.isLeader && (prev == nil || !prev.isLeader || prev.leaderEpoch != st.leaderEpoch) {
		newEpoch = true
		if st.durable && p.log.SyncPending() {
			// Records from before a restart, or appended as a follower
			// and not yet synced: the high watermark waits for them.
			b.flusher.mark(p)
		}
		b.log.Info("became leader", "partition", p.tp, "leader_epoch", st.leaderEpoch, "isr", st.isr)
	} else if !st.isLeader && (prev == nil || prev.isLeader) {
		b.log.Info("became follower", "partition", p.tp, "leader", st.leader, "leader_epoch", st.leaderEpoch)
	}
	return newEpoch
}

// epochAssignWorkers bounds the leader-epoch checkpoint writes of one
// metadata update that run at once.
const epochAssignWorkers = 16

// assignLeaderEpochs records, in each partition's leader-epoch cache, the
// leader epoch it became leader in, starting at its log end (Kafka's
// makeLeader). Each is a checkpoint write with two fsyncs: a restart, or a
// failover that moves thousands of leaderships here, would wait for them
// one after the other (as Kafka's does), so they run side by side, each
// partition's on its own cache. applyMu is held.
func (b *Broker) assignLeaderEpochs(parts []*partition) {
	assign := func(p *partition) {
		st := p.state.Load()
		if st == nil || !st.isLeader {
			return
		}
		cache := p.log.LeaderEpochCache()
		if latest, ok := cache.LatestEpoch(); ok && st.leaderEpoch <= latest {
			return
		}
		if err := cache.Assign(st.leaderEpoch, p.log.LogEndOffset()); err != nil {
			b.log.Error("recording the new leader epoch failed", "partition", p.tp, "epoch", st.leaderEpoch, "error", err)
		}
	}
	if len(parts) <= 1 {
		for _, p := range parts {
			assign(p)
		}
		return
	}
	work := make(chan *partition)
	var wg sync.WaitGroup
	for range min(len(parts), epochAssignWorkers) {
		wg.Go(func() {
			for p := range work {
				assign(p)
			}
		})
	}
	for _, p := range parts {
		work <- p
	}
	close(work)
	wg.Wait()
}

// fillTopicState copies the topic configs the request path reads into st.
func (b *Broker) fillTopicState(st *partitionState, img *metadata.Image, topic string, partition int32) {
	st.minISR = 1
	if v, _ := b.topicConfigValue(img, topic, "min.insync.replicas"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			st.minISR = n
		}
	}
	cleanup, _ := b.topicConfigValue(img, topic, "cleanup.policy")
	st.deletePolicy = slices.Contains(splitList(cleanup), "delete")
	st.policy.compacted = slices.Contains(splitList(cleanup), "compact")
	st.durable = b.logConfig(img, topic).Durable()
	codec, _ := b.topicConfigValue(img, topic, "compression.type")
	st.policy.setCompression(codec, func(c string) string {
		v, _ := b.topicConfigValue(img, topic, "compression."+c+".level")
		return v
	})
	tsType, _ := b.topicConfigValue(img, topic, "message.timestamp.type")
	st.policy.createTime = strings.TrimSpace(tsType) != "LogAppendTime"
	leaderThrottled, _ := b.topicConfigValue(img, topic, "leader.replication.throttled.replicas")
	followerThrottled, _ := b.topicConfigValue(img, topic, "follower.replication.throttled.replicas")
	st.leaderThrottled = throttledReplica(leaderThrottled, partition, b.nodeID)
	st.followerThrottled = throttledReplica(followerThrottled, partition, b.nodeID)
	// message.timestamp.difference.max.ms (deprecated by KIP-937) bounds
	// both directions wherever before/after are left at their default,
	// as Kafka 3.6–3.9 read it, so a 3.x server.properties keeps its
	// meaning.
	limit := func(name string) int64 {
		v, _ := b.topicConfigValue(img, topic, name)
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
			return n
		}
		return math.MaxInt64
	}
	difference := limit("message.timestamp.difference.max.ms")
	st.policy.beforeMaxMs, st.policy.afterMaxMs = limit("message.timestamp.before.max.ms"), limit("message.timestamp.after.max.ms")
	if st.policy.beforeMaxMs == math.MaxInt64 {
		st.policy.beforeMaxMs = difference
	}
	if st.policy.afterMaxMs == math.MaxInt64 {
		st.policy.afterMaxMs = difference
	}
}

// refreshConfig re-applies a hosted partition's configs after a config
// change. applyMu is held.
func (b *Broker) refreshConfig(p *partition, img *metadata.Image) {
	p.log.SetConfig(b.logConfig(img, p.tp.Topic))
	if prev := p.state.Load(); prev != nil {
		st := *prev
		b.fillTopicState(&st, img, p.tp.Topic, p.tp.Partition)
		p.state.Store(&st)
	}
	p.produceWatch.wakeAll()
}

// removePartition stops hosting p: parked requests are woken (they see it
// gone) and its log is deleted. applyMu is held.
func (b *Broker) removePartition(p *partition, why string) {
	p.removed.Store(true)
	switch p.tp.Topic {
	case offsetsTopic:
		b.groups.partitionRemoved(p)
	case txnTopic:
		b.txns.partitionRemoved(p)
	}
	b.fetchers.unfollow(p)
	p.fetchWatch.wakeAll()
	p.produceWatch.wakeAll()
	if err := b.logs.DeleteLog(p.tp); err != nil {
		b.log.Error("deleting a partition's log failed", "partition", p.tp, "reason", why, "error", err)
		return
	}
	b.log.Info("deleted partition", "partition", p.tp, "reason", why)
}

// watchList is a set of parked requests waiting on one partition.
//
// Concurrency: safe from any goroutine; mu guards ws, n mirrors len(ws) so
// that the append path skips the lock when nobody waits.
type watchList struct {
	mu sync.Mutex
	ws map[*waiter]struct{}
	n  atomic.Int32
}

func (l *watchList) add(w *waiter) {
	l.mu.Lock()
	if l.ws == nil {
		l.ws = map[*waiter]struct{}{}
	}
	l.ws[w] = struct{}{}
	l.n.Store(int32(len(l.ws)))
	l.mu.Unlock()
}

func (l *watchList) remove(w *waiter) {
	l.mu.Lock()
	delete(l.ws, w)
	l.n.Store(int32(len(l.ws)))
	l.mu.Unlock()
}

// completeAll is wakeAll for the goroutine that just made the waiters'
// requests completable (an append): it runs each parked request's check
// itself (Kafka's checkAndComplete) and signals the listeners. The
// waiters are copied out first, so a completion may unwatch. Call it
// holding no partition or log lock.
func (l *watchList) completeAll() {
	if l.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	ws := make([]*waiter, 0, len(l.ws))
	for w := range l.ws {
		ws = append(ws, w)
	}
	l.mu.Unlock()
	for _, w := range ws {
		if w.check == nil {
			w.signal()
		} else {
			w.tryComplete()
		}
	}
}

// wakeAll signals every waiter; it never blocks.
func (l *watchList) wakeAll() {
	if l.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	for w := range l.ws {
		w.signal()
	}
	l.mu.Unlock()
}
