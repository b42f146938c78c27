package broker

// OffsetDelete (key 47), v0 (KIP-496, Kafka's
// GroupCoordinator.handleDeleteOffsets).
//
// Deletes a group's committed offsets (tombstones in __consumer_offsets,
// answered once committed). Group level: INVALID_GROUP_ID,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND for an
// unknown group, NON_EMPTY_GROUP for a group with members whose
// subscriptions cannot be read (a protocol type other than "consumer").
// Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition not in the
// metadata, GROUP_SUBSCRIBED_TO_TOPIC for a topic a member of the group
// subscribes to.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleOffsetDelete(m *kmsg.OffsetDeleteRequest) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp
	}
	if m.Group == "" {
		return respond(errResp(kerr.InvalidGroupID.Code))
	}
	resp := m.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var tps []group.TopicPartition
	var slots []*kmsg.OffsetDeleteResponseTopicPartition
	img := b.currentImage()
	resp.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(m.Topics))
	for i, t := range m.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(t.Partitions))
		mt, known := img.Topic(t.Topic)
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if !known || p.Partition < 0 || int(p.Partition) >= len(mt.Partitions) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			slots = append(slots, rp)
		}
	}
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		top, codes, eff := s.mgr.DeleteOffsets(now, m.Group, tps)
		if top != 0 {
			answer(errResp(top))
			return
		}
		for i, c := range codes {
			slots[i].ErrorCode = c
		}
		s.apply(eff, func(code int16) {
			if code != 0 {
				answer(errResp(code))
				return
			}
			answer(resp)
		})
	})
}
