package broker

// Fetching from the closest replica (KIP-392).
//
// A consumer that sets client.rack sends it in every Fetch (v11+). With
// replica.selector.class set to RackAwareReplicaSelector, the leader of a
// partition picks a preferred read replica for it, as Kafka's
// ReplicaManager.findPreferredReadReplica and RackAwareReplicaSelector do:
//
//   - the candidates are the leader and every follower in the ISR whose
//     log holds the fetch offset (its log start offset at or below it, its
//     log end offset at or above it) and whose broker has an endpoint on
//     the listener the consumer came in on;
//   - of those in the consumer's rack, the leader if it is one of them,
//     else the most caught-up follower: the highest log end offset, then
//     the most recent time it was caught up with the leader;
//   - no candidate in the consumer's rack, or no client.rack: the leader.
//
// When the choice is a follower, the leader answers the partition at once
// with no records, its offsets, and PreferredReadReplica naming the
// follower; the consumer then fetches from that broker until it asks the
// leader again (the Java consumer after metadata.max.age.ms, kgo after its
// RecheckPreferredReplicaInterval) or an error sends it back.
//
// Any replica serves a consumer's Fetch of v11 and up, whether or not this
// broker picks replicas (handle_fetch.go): up to its own high watermark,
// which its fetches from the leader keep at most one round behind the
// leader's, or its last stable offset for read_committed.
//
// Unset (Kafka's default), every consumer is served by the leader.

import "time"

// RackAwareReplicaSelectorClass is the replica.selector.class value that
// turns on KIP-392's rack-aware choice of a read replica, Kafka's
// class name.
const RackAwareReplicaSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// preferredReadReplica returns the replica this leader prefers op's
// consumer to read p from at fetchOffset, or -1 for the leader itself (or
// no choice to make). st is p's state, and this broker leads it.
func (op *fetchOp) preferredReadReplica(p *partition, st *partitionState, fetchOffset int64) int32 {
	b := op.b
	if b.cfg.ReplicaSelectorClass != RackAwareReplicaSelectorClass || op.follower || op.m.Version < 11 || op.m.Rack == "" {
		return -1
	}
	rackOf := func(id int32) (string, bool) {
		br, ok := op.img.Broker(id)
		if !ok {
			return "", false
		}
		if _, ok := br.Endpoint(op.listener); !ok {
			return "", false // the consumer could not reach it
		}
		return br.Rack, true
	}
	if rack, ok := rackOf(b.nodeID); ok && rack == op.m.Rack {
		return -1 // the leader is in the consumer's rack
	}
	best := int32(-1)
	var bestLEO int64
	var bestCaughtUp time.Time
	p.replicasMu.Lock()
	defer p.replicasMu.Unlock()
	for _, id := range st.isr {
		f := p.followers[id]
		if id == b.nodeID || f == nil || f.logEndOffset < fetchOffset || f.logStartOffset > fetchOffset {
			continue
		}
		if rack, ok := rackOf(id); !ok || rack != op.m.Rack {
			continue
		}
		if best < 0 || f.logEndOffset > bestLEO || (f.logEndOffset == bestLEO && f.lastCaughtUp.After(bestCaughtUp)) {
			best, bestLEO, bestCaughtUp = id, f.logEndOffset, f.lastCaughtUp
		}
	}
	return best
}

// readsAsReplica reports whether a fetch of p may be served by this broker
// though it does not lead p: a consumer's Fetch of v11 and up (KIP-392;
// Kafka's fetchOnlyLeader is false for them), never a follower's.
func (op *fetchOp) readsAsReplica() bool {
	return !op.follower && op.m.Version >= 11
}
