package broker

// The leader side of replication: each follower's log end offset learned
// from its fetch offset, the high watermark as the minimum log end offset
// over the ISR, and ISR changes proposed to the controller with
// AlterPartition (Kafka's Partition.updateFollowerFetchState,
// maybeIncrementLeaderHW, maybeShrinkIsr, maybeExpandIsr).

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/storage"
)

// followerState is what a leader knows of one follower in its leader
// epoch (Kafka's Replica). Guarded by the partition's replicasMu.
type followerState struct {
	// logEndOffset is the follower's last fetch offset; -1 until it
	// fetched in this leader epoch.
	logEndOffset int64
	// logStartOffset is the follower's log start offset from its last
	// fetch (KIP-392 prefers only a replica that holds the fetch offset).
	logStartOffset int64
	// lastCaughtUp is the last time the follower was caught up: a fetch
	// at or past the leader's log end offset, or past the leader's log end
	// offset at its previous fetch (Kafka's lastCaughtUpTimeMs rule).
	lastCaughtUp time.Time
	// lastFetchTime and lastFetchLeaderLEO are the previous fetch's time
	// and the leader's log end offset then.
	lastFetchTime      time.Time
	lastFetchLeaderLEO int64
	// brokerEpoch is the follower's broker epoch from its fetch (v15+,
	// KIP-903), -1 if unknown.
	brokerEpoch int64
}

// resetFollowers starts a new leadership's follower state: log end offsets
// unknown, ISR members caught up as of now (Kafka's makeLeader), so none
// leaves the ISR before it had replica.lag.time.max.ms to fetch. applyMu is
// held.
func (b *Broker) resetFollowers(p *partition, st *partitionState) {
	now := b.now()
	fs := map[int32]*followerState{}
	for _, id := range st.replicas {
		if id == b.nodeID {
			continue
		}
		f := &followerState{logEndOffset: -1, lastFetchLeaderLEO: -1, brokerEpoch: -1}
		if slices.Contains(st.isr, id) {
			f.lastCaughtUp = now
		}
		fs[id] = f
	}
	p.replicasMu.Lock()
	p.followers, p.pendingISR = fs, nil
	p.replicasMu.Unlock()
}

// updateFollowers follows a replica set change within a leadership (a
// reassignment starting, completing or cancelled): new replicas start
// unknown and out of sync, departed ones are forgotten, the others keep
// their state. applyMu is held.
func (b *Broker) updateFollowers(p *partition, st *partitionState) {
	p.replicasMu.Lock()
	defer p.replicasMu.Unlock()
	fs := make(map[int32]*followerState, len(st.replicas))
	for _, id := range st.replicas {
		if id == b.nodeID {
			continue
		}
		if f := p.followers[id]; f != nil {
			fs[id] = f
		} else {
			fs[id] = &followerState{logEndOffset: -1, lastFetchLeaderLEO: -1, brokerEpoch: -1}
		}
	}
	p.followers = fs
}

// recordFollowerFetch updates a follower's state from a fetch at
// fetchOffset and advances the high watermark. Called by the fetch path of
// a leader for every follower fetch (and its re-checks while parked).
//
// Concurrency: any goroutine; takes replicasMu, then hwMu (not nested).
func (b *Broker) recordFollowerFetch(p *partition, id int32, brokerEpoch, fetchOffset, logStartOffset int64) {
	now := b.now()
	leo := p.log.LogEndOffset()
	p.replicasMu.Lock()
	f := p.followers[id]
	if f == nil {
		p.replicasMu.Unlock()
		return // not a replica of this leadership
	}
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case fetchOffset >= f.lastFetchLeaderLEO && f.lastFetchTime.After(f.lastCaughtUp):
		f.lastCaughtUp = f.lastFetchTime
	}
	f.lastFetchTime, f.lastFetchLeaderLEO = now, leo
	f.logEndOffset, f.logStartOffset, f.brokerEpoch = fetchOffset, logStartOffset, brokerEpoch
	p.replicasMu.Unlock()
	b.maybeAdvanceHighWatermark(p)
	st := p.state.Load()
	if st.isLeader && !slices.Contains(st.isr, id) && fetchOffset >= p.log.HighWatermark() {
		b.nudgeISR() // a candidate to rejoin the ISR
	}
}

// maximalISR is the ISR the high watermark is computed over: the committed
// ISR plus the members of a pending change (KIP-497), so that a pending
// shrink never lets the high watermark pass a replica that may still
// count. replicasMu is held.
func (p *partition) maximalISR(st *partitionState) []int32 {
	if p.pendingISR == nil {
		return st.isr
	}
	out := slices.Clone(st.isr)
	for _, id := range p.pendingISR {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// highWatermarkCandidate is min log end offset over the maximal ISR, the
// leader's own being leo. A follower that has not fetched yet in this
// leadership holds it at -1.
func (b *Broker) highWatermarkCandidate(p *partition, st *partitionState, leo int64) int64 {
	hw := leo
	p.replicasMu.Lock()
	defer p.replicasMu.Unlock()
	for _, id := range p.maximalISR(st) {
		if id == b.nodeID {
			continue
		}
		f := p.followers[id]
		if f == nil {
			return -1
		}
		hw = min(hw, f.logEndOffset)
	}
	return hw
}

// isrLoop is the goroutine running the ISR check every
// replica.lag.time.max.ms / 2 (Kafka's isr-expiration task), and at once
// when a follower catches up (nudgeISR).
func (b *Broker) isrLoop() {
	interval := max(b.cfg.ReplicaLagTimeMax/2, 10*time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.closing():
			return
		case <-t.C:
		case <-b.isrNudge:
		}
		for _, p := range b.partitions.Load().byTP {
			b.maybeChangeISR(p)
		}
	}
}

// nudgeISR asks the ISR loop for a check; it never blocks.
func (b *Broker) nudgeISR() {
	select {
	case b.isrNudge <- struct{}{}:
	default:
	}
}

// maybeChangeISR proposes p's new ISR to the controller if followers fell
// behind (not caught up within replica.lag.time.max.ms) or caught up (to
// the high watermark and the current leader epoch's start, by a fetch
// within replica.lag.time.max.ms, alive and unfenced with the broker epoch
// they fetched with). One change at a time
// per partition; it takes effect when the image brings it back.
func (b *Broker) maybeChangeISR(p *partition) {
	st := p.state.Load()
	if st == nil || !st.isLeader || p.removed.Load() {
		return
	}
	img := b.currentImage()
	now := b.now()
	hw := p.log.HighWatermark()
	epochStart := int64(0)
	for _, e := range p.log.LeaderEpochCache().Entries() {
		if e.Epoch == st.leaderEpoch {
			epochStart = e.StartOffset
		}
	}
	p.replicasMu.Lock()
	if p.pendingISR != nil {
		p.replicasMu.Unlock()
		return
	}
	var isr []int32
	changed := false
	epochs := map[int32]int64{}
	for _, id := range st.replicas {
		if id == b.nodeID {
			if slices.Contains(st.isr, id) {
				isr = append(isr, id)
			}
			continue
		}
		f := p.followers[id]
		br, known := img.Broker(id)
		eligible := known && !br.Fenced && !br.InControlledShutdown
		if known {
			epochs[id] = br.Epoch
		}
		in := slices.Contains(st.isr, id)
		switch {
		case in && (f == nil || now.Sub(f.lastCaughtUp) > b.cfg.ReplicaLagTimeMax):
			changed = true // shrink
		case in:
			isr = append(isr, id)
		case f != nil && eligible && f.logEndOffset >= hw && f.logEndOffset >= epochStart &&
			(f.brokerEpoch < 0 || f.brokerEpoch == br.Epoch) && now.Sub(f.lastCaughtUp) <= b.cfg.ReplicaLagTimeMax:
			// Caught up by a fetch within the lag time: Kafka expands
			// only on a follower's fetch, so a follower that stopped
			// fetching (whose last offset still equals the high
			// watermark of a partition nobody writes to) stays out.
			isr, changed = append(isr, id), true // expand
		}
	}
	if !changed || !slices.Contains(isr, b.nodeID) {
		p.replicasMu.Unlock()
		return
	}
	p.pendingISR = isr
	p.replicasMu.Unlock()
	b.log.Info("proposing ISR change", "partition", p.tp, "isr", st.isr, "new_isr", isr, "leader_epoch", st.leaderEpoch)
	if !b.spawn(func() { b.alterPartition(p, st, isr, epochs) }) {
		p.replicasMu.Lock()
		p.pendingISR = nil
		p.replicasMu.Unlock()
	}
}

// alterPartition sends one ISR change to the controller (AlterPartition
// v3, with broker epochs, KIP-841) and clears the pending change once it
// is answered: a committed change is then in the image (the forwarder
// waits for it); FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and the like
// mean the image is ahead of this leader, which waits for it and retries
// at the next check.
func (b *Broker) alterPartition(p *partition, st *partitionState, isr []int32, epochs map[int32]int64) {
	defer func() {
		p.replicasMu.Lock()
		p.pendingISR = nil
		p.replicasMu.Unlock()
		b.maybeAdvanceHighWatermark(p)
		p.produceWatch.wakeAll()
	}()
	img := b.currentImage()
	self, ok := img.Broker(b.nodeID)
	if !ok {
		return
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = b.nodeID, self.Epoch
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic, rt.TopicID = p.tp.Topic, p.topicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = p.tp.Partition, st.leaderEpoch, st.partitionEpoch
	// A leader elected uncleanly is RECOVERING (KIP-704) until its first
	// ISR change, which declares it RECOVERED, as Kafka's
	// prepareIsrExpand/prepareIsrShrink do: Keel's leader has no state to
	// rebuild once it leads, and a RECOVERING partition's ISR cannot grow.
	rp.LeaderRecoveryState = metadata.LeaderRecovered
	for _, id := range isr {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID, m.BrokerEpoch = id, epochs[id]
		if id == b.nodeID {
			m.BrokerEpoch = self.Epoch
		}
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	kresp, err := b.ctrl.Forward(ctx, req)
	if err != nil {
		if b.ctx.Err() == nil {
			b.log.Warn("AlterPartition failed", "partition", p.tp, "error", err)
		}
		return
	}
	resp := kresp.(*kmsg.AlterPartitionResponse)
	code := resp.ErrorCode
	if code == 0 && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		code = resp.Topics[0].Partitions[0].ErrorCode
	}
	if code != 0 {
		b.log.Info("AlterPartition refused; waiting for metadata", "partition", p.tp, "error", kerr.ErrorForCode(code))
		return
	}
	b.metrics.countISRChange(st.isr, isr)
}

// PartitionLog returns the log of the hosted partition topic-partition, or
// nil when this node hosts no replica of it. For tests and tools.
//
// Concurrency: safe from any goroutine; never blocks.
func (b *Broker) PartitionLog(topic string, partition int32) *storage.Log {
	if p := b.lookup(storage.TopicPartition{Topic: topic, Partition: partition}); p != nil && !p.removed.Load() {
		return p.log
	}
	return nil
}
