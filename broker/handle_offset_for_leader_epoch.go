package broker

// OffsetForLeaderEpoch (key 23), v0–v4 (KIP-101, KIP-279, KIP-320).
//
// Per partition, from the leader-epoch cache (storage's
// LeaderEpochCache.EndOffsetFor, Kafka's LeaderEpochFileCache.endOffsetFor):
// the largest epoch ≤ the requested one and its end offset — the log end
// offset for the latest epoch, else the start of the next epoch; -1/-1 when
// unknown.
//
//   - Followers and consumers (replica id ≥ -1, v3+) must ask the leader;
//     the debug replica id -2 — also what v0–v2 requests carry, having no
//     replica id — may ask any replica, as in Kafka.
//   - current_leader_epoch (v2+) is checked as in Fetch.
//   - An unknown partition: UNKNOWN_TOPIC_OR_PARTITION, or
//     NOT_LEADER_OR_FOLLOWER when the image knows it.
//   - v1+: LeaderEpoch of the answer.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/storage"
)

func (b *Broker) handleOffsetForLeaderEpoch(m *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	replicaID := m.ReplicaID
	if m.Version < 3 {
		replicaID = debuggingReplicaID
	}
	for _, t := range m.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, rp := range t.Partitions {
			out := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			out.Partition = rp.Partition
			p := b.lookup(storage.TopicPartition{Topic: t.Topic, Partition: rp.Partition})
			switch {
			case p == nil || p.removed.Load():
				out.ErrorCode = b.partitionError(t.Topic, rp.Partition)
			default:
				st := p.state.Load()
				if code := st.leaderErrorCode(rp.CurrentLeaderEpoch, replicaID != debuggingReplicaID); code != 0 {
					out.ErrorCode = code
					break
				}
				out.LeaderEpoch, out.EndOffset = p.log.LeaderEpochCache().EndOffsetFor(rp.LeaderEpoch, p.log.LogEndOffset())
			}
			rt.Partitions = append(rt.Partitions, out)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
