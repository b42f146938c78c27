package broker

// DeleteRecords (key 21), v0–v2 (KIP-107): moves a partition's log start
// offset forward (storage.Log.IncrementLogStartOffset); whole segments below
// it go with the next retention run.
//
//   - Only the leader serves (NOT_LEADER_OR_FOLLOWER; unknown partitions as
//     elsewhere).
//   - Offset -1 means the high watermark; a negative offset other than -1,
//     or one above the high watermark, is OFFSET_OUT_OF_RANGE.
//   - A topic whose cleanup.policy lacks "delete" (purely compacted) is
//     POLICY_VIOLATION, as in Kafka.
//   - LowWatermark is the log start offset afterwards. Kafka waits in a
//     purgatory until every replica has moved its own log start offset;
//     followers do not replicate yet, so the leader's answer is final.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/storage"
)

func (b *Broker) handleDeleteRecords(m *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, rp := range t.Partitions {
			out := kmsg.NewDeleteRecordsResponseTopicPartition()
			out.Partition, out.LowWatermark = rp.Partition, -1
			out.ErrorCode = b.deleteRecords(t.Topic, rp.Partition, rp.Offset, &out.LowWatermark)
			rt.Partitions = append(rt.Partitions, out)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// deleteRecords deletes one partition's records before offset and sets
// *low to the new log start offset.
func (b *Broker) deleteRecords(topic string, part int32, offset int64, low *int64) int16 {
	p, st, code := b.leaderPartition(topic, part, -1)
	if code != 0 {
		return code
	}
	if p.removed.Load() {
		return b.partitionError(topic, part)
	}
	if !st.deletePolicy {
		return kerr.PolicyViolation.Code
	}
	l := p.log
	if offset == -1 {
		offset = l.HighWatermark()
	}
	if offset < 0 {
		return kerr.OffsetOutOfRange.Code
	}
	if err := l.IncrementLogStartOffset(offset); err != nil {
		if c := storage.ErrorCode(err); c != kerr.OffsetOutOfRange.Code {
			b.log.Error("delete records failed", "partition", p.tp, "offset", offset, "error", err)
			return c
		}
		return kerr.OffsetOutOfRange.Code
	}
	*low = l.LogStartOffset()
	b.log.Info("deleted records", "partition", p.tp, "log_start_offset", *low)
	return 0
}
