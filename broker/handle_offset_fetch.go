package broker

// OffsetFetch (key 9), v0–v9 (Kafka's GroupCoordinator.handleFetchOffsets).
//
// A group's committed offsets for the listed partitions, or for all of
// them with a null topic list (v2+); a partition with no commit answers
// offset -1 and empty metadata. Offsets are visible once their commit is
// committed in __consumer_offsets; a transactional commit's once its
// transaction committed too. With RequireStable (v7+, KIP-447) a partition
// with a transactional commit not yet completed answers
// UNSTABLE_OFFSET_COMMIT (offset -1) and the consumer retries; without it
// the last committed offset is returned, as Kafka does. Group-level errors (INVALID_GROUP_ID, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS) are the top-level error from v2, each
// partition's before; v8+ asks about several groups, each answered with
// its own error. v5+ leader epochs. v9 (KIP-848): a member of a consumer
// group names itself and its epoch, and gets UNKNOWN_MEMBER_ID or
// STALE_MEMBER_EPOCH for the group when they are not current (no member
// id and epoch -1: an admin or a consumer outside the group).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleOffsetFetch(_ context.Context, m *kmsg.OffsetFetchRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.OffsetFetchResponse)
	if m.Version >= 8 {
		resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(m.Groups))
		f := newGroupFanout(len(m.Groups), func() *network.Response { return &network.Response{Msg: resp} })
		for i := range m.Groups {
			rg := &resp.Groups[i]
			*rg = kmsg.NewOffsetFetchResponseGroup()
			rg.Group = m.Groups[i].Group
			var tps []group.TopicPartition
			if m.Groups[i].Topics != nil {
				tps = []group.TopicPartition{}
				for _, t := range m.Groups[i].Topics {
					for _, p := range t.Partitions {
						tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
			fail := func(code int16) { rg.ErrorCode = code }
			if rg.Group == "" {
				fail(kerr.InvalidGroupID.Code)
				f.done()
				continue
			}
			memberID, epoch := "", m.Groups[i].MemberEpoch
			if m.Groups[i].MemberID != nil {
				memberID = *m.Groups[i].MemberID
			}
			if m.Version < 9 {
				memberID, epoch = "", -1
			}
			b.onGroup(f, rg.Group, fail, func(s *offsetsShard, _ int64, finish func()) {
				if code := s.mgr.ConsumerFetchCode(rg.Group, memberID, epoch); code != 0 {
					fail(code)
					finish()
					return
				}
				for _, t := range offsetFetchTopics(s.fetchOffsets(rg.Group, tps, m.RequireStable)) {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
						rt.Partitions = append(rt.Partitions, rp)
					}
					rg.Topics = append(rg.Topics, rt)
				}
				finish()
			})
		}
		return f.result()
	}

	var tps []group.TopicPartition
	if m.Topics != nil || m.Version < 2 {
		tps = []group.TopicPartition{}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	errResp := func(code int16) kmsg.Response {
		r := m.ResponseKind().(*kmsg.OffsetFetchResponse)
		if m.Version >= 2 {
			r.ErrorCode = code
		}
		if m.Version >= 2 {
			return r
		}
		// Before v2 the error goes in every requested partition.
		for _, t := range m.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	if m.Group == "" {
		return respond(errResp(kerr.InvalidGroupID.Code))
	}
	return b.onShard(m.Group, errResp, func(s *offsetsShard, _ int64, answer func(kmsg.Response)) {
		for _, t := range offsetFetchTopics(s.fetchOffsets(m.Group, tps, m.Version >= 7 && m.RequireStable)) {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		answer(resp)
	})
}

// fetchedTopic groups fetched offsets by topic, in first-seen order.
type fetchedTopic struct {
	Topic      string
	Partitions []fetchedPartition
}

type fetchedPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	ErrorCode   int16
}

// fetchOffsets is the group's offsets for tps, the stable ones (KIP-447)
// when requireStable.
func (s *offsetsShard) fetchOffsets(groupID string, tps []group.TopicPartition, requireStable bool) []group.FetchedOffset {
	if requireStable {
		return s.mgr.FetchStableOffsets(groupID, tps)
	}
	return s.mgr.FetchOffsets(groupID, tps)
}

func offsetFetchTopics(fs []group.FetchedOffset) []fetchedTopic {
	var out []fetchedTopic
	index := map[string]int{}
	for _, f := range fs {
		i, ok := index[f.TP.Topic]
		if !ok {
			i = len(out)
			index[f.TP.Topic] = i
			out = append(out, fetchedTopic{Topic: f.TP.Topic})
		}
		out[i].Partitions = append(out[i].Partitions, fetchedPartition{Partition: f.TP.Partition, Offset: f.Offset,
			LeaderEpoch: f.LeaderEpoch, Metadata: kmsg.StringPtr(f.Metadata), ErrorCode: f.ErrorCode})
	}
	return out
}
