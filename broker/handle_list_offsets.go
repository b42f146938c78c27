package broker

// ListOffsets (key 2), v1–v11 (v0's MaxNumOffsets form was removed by
// Kafka 4, KIP-896).
//
// Kafka's Partition.fetchOffsetForTimestamp, per partition:
//
//   - Consumers (replica id -1) must ask the leader; the debug replica id
//     (-2) and followers may ask any replica. current_leader_epoch (v4+) is
//     checked as in Fetch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
//   - -2 (earliest) and -4 (earliest local; no tiered storage, so the
//     same): the log start offset and the epoch of its batch.
//   - -1 (latest): the high watermark for read_uncommitted consumers, the
//     last stable offset for read_committed (v2+), the log end offset for
//     replicas; the epoch is the current leader epoch.
//   - -3 (max timestamp, KIP-734): the record with the largest timestamp;
//     -5 (latest tiered) and -6 (earliest pending upload, KIP-1023): offset
//     -1, as Kafka answers without remote storage. These came with v7, v8,
//     v9 and v11, but, as in Kafka's log, mean the same at any version:
//     clients gate them, not the broker (sarama sends -3 at v6).
//   - other negative timestamps are searched for like any timestamp: the
//     first record.
//   - a timestamp: the first record at or after it. Answers at or past
//     the fetchable end (high watermark, or last stable offset for
//     read_committed) are hidden (-1), as Kafka hides them.
//   - A consumer asking a leader whose high watermark has not yet reached
//     the start of its epoch gets OFFSET_NOT_AVAILABLE (v5+, KIP-207;
//     LEADER_NOT_AVAILABLE before) instead of an offset that may move back.
//   - A partition named twice: INVALID_REQUEST for each.
//   - v4+: LeaderEpoch of the answer. TimeoutMillis (v10) is ignored:
//     nothing here waits.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/storage"
)

// Replica ids of ListOffsets and OffsetForLeaderEpoch requests.
const (
	consumerReplicaID  int32 = -1
	debuggingReplicaID int32 = -2
)

// Special timestamps beyond storage's (Kafka's ListOffsetsRequest).
const (
	earliestLocalTimestamp int64 = -4
	latestTieredTimestamp  int64 = -5
	// earliestPendingUploadTimestamp is KIP-1023's (v11+).
	earliestPendingUploadTimestamp int64 = -6
)

func (b *Broker) handleListOffsets(m *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.ListOffsetsResponse)
	count := map[storage.TopicPartition]int{}
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			count[storage.TopicPartition{Topic: t.Topic, Partition: p.Partition}]++
		}
	}
	for _, t := range m.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, rp := range t.Partitions {
			out := kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition = rp.Partition
			if count[storage.TopicPartition{Topic: t.Topic, Partition: rp.Partition}] > 1 {
				out.ErrorCode = kerr.InvalidRequest.Code
			} else {
				b.listOffset(m, t.Topic, rp, &out)
			}
			rt.Partitions = append(rt.Partitions, out)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// listOffset answers one partition into out.
func (b *Broker) listOffset(m *kmsg.ListOffsetsRequest, topic string, rp kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	p := b.lookup(storage.TopicPartition{Topic: topic, Partition: rp.Partition})
	if p == nil || p.removed.Load() {
		out.ErrorCode = b.partitionError(topic, rp.Partition)
		return
	}
	st := p.state.Load()
	consumer := m.ReplicaID == consumerReplicaID
	if code := st.leaderErrorCode(rp.CurrentLeaderEpoch, m.ReplicaID != debuggingReplicaID); code != 0 {
		out.ErrorCode = code
		return
	}
	l := p.log
	hw := l.HighWatermark()
	lastFetchable := l.LogEndOffset()
	if consumer {
		lastFetchable = hw
		if m.Version >= 2 && m.IsolationLevel == 1 {
			lastFetchable = l.LastStableOffset()
		}
	}
	// KIP-207: a new leader whose high watermark is below its epoch's
	// start may still move it back; consumers must wait.
	offsetsError := int16(0)
	if consumer && st.isLeader {
		for _, e := range l.LeaderEpochCache().Entries() {
			if e.Epoch == st.leaderEpoch && e.StartOffset > hw {
				offsetsError = kerr.LeaderNotAvailable.Code
				if m.Version >= 5 {
					offsetsError = kerr.OffsetNotAvailable.Code
				}
			}
		}
	}
	ts := rp.Timestamp
	switch {
	case ts == storage.LatestTimestamp:
		if offsetsError != 0 {
			out.ErrorCode = offsetsError
			return
		}
		out.Offset, out.Timestamp, out.LeaderEpoch = lastFetchable, -1, st.leaderEpoch
		return
	case ts == storage.EarliestTimestamp || ts == earliestLocalTimestamp:
		ts = storage.EarliestTimestamp
	case ts == latestTieredTimestamp, ts == earliestPendingUploadTimestamp:
		out.Offset, out.Timestamp, out.LeaderEpoch = -1, -1, -1
		return
	case ts == storage.MaxTimestamp:
	case ts < 0:
		ts = 0 // Kafka searches for it like any timestamp: the first record
	}
	res, err := l.OffsetForTimestamp(ts)
	if err != nil {
		out.ErrorCode = storage.ErrorCode(err)
		return
	}
	if ts != storage.EarliestTimestamp && (res.Offset < 0 || res.Offset >= lastFetchable) {
		if offsetsError != 0 {
			out.ErrorCode = offsetsError
			return
		}
		res = storage.OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	}
	out.Offset, out.Timestamp, out.LeaderEpoch = res.Offset, res.Timestamp, res.LeaderEpoch
}
