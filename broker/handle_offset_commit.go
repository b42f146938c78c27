package broker

// OffsetCommit (key 8), v0–v9 (Kafka's GroupCoordinator.handleCommitOffsets).
//
// Every partition of a request gets the same group-level error when there
// is one: INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS;
// a member commit (generation ≥ 0) to a group this coordinator does not
// know: ILLEGAL_GENERATION; a member not in the group: UNKNOWN_MEMBER_ID;
// a static member's old incarnation: FENCED_INSTANCE_ID; another
// generation: ILLEGAL_GENERATION (a stale member's commit is fenced);
// CompletingRebalance: REBALANCE_IN_PROGRESS. Commits are accepted in
// Stable and, from the current generation, in PreparingRebalance. A
// simple consumer (generation -1, no member id) commits to an Empty or
// unknown group without membership.
//
// Per partition: a topic or partition not in the metadata:
// UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
// offset.metadata.max.bytes: OFFSET_METADATA_TOO_LARGE. The accepted
// offsets are written to __consumer_offsets as one batch and answered once
// it is committed (acks=all), within offsets.commit.timeout.ms
// (REQUEST_TIMED_OUT after). v2–v4's retention_time_ms sets an explicit
// expire timestamp (value version 1), as Kafka's; v0 commits are stored
// like any other (Kafka kept them in ZooKeeper). v6+ leader epochs are
// stored. v10's topic ids are not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleOffsetCommit(m *kmsg.OffsetCommitRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	all := func(code int16) *kmsg.OffsetCommitResponse {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		return resp
	}
	if m.Group == "" {
		return respond(all(kerr.InvalidGroupID.Code))
	}
	img := b.currentImage()
	req := group.CommitRequest{Group: m.Group, MemberID: m.MemberID, Generation: m.Generation, RetentionMs: -1,
		Version: m.Version, Topics: imageTopics{img: img}}
	if m.Version == 0 {
		req.Generation = -1
	}
	if m.Version >= 2 && m.Version <= 4 && m.RetentionTimeMillis >= 0 {
		req.RetentionMs = m.RetentionTimeMillis
	}
	if m.InstanceID != nil {
		req.InstanceID = *m.InstanceID
	}
	// Which response slot each accepted partition fills.
	var slots []*kmsg.OffsetCommitResponseTopicPartition
	for i, t := range m.Topics {
		mt, known := img.Topic(t.Topic)
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if !known || p.Partition < 0 || int(p.Partition) >= len(mt.Partitions) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			req.Partitions = append(req.Partitions, group.CommitPartition{Topic: t.Topic, Partition: p.Partition,
				Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: meta})
			slots = append(slots, rp)
		}
	}
	if m.Version < 6 {
		for i := range req.Partitions {
			req.Partitions[i].LeaderEpoch = -1
		}
	}
	if len(req.Partitions) == 0 {
		return respond(resp) // every partition failed already
	}
	errResp := func(code int16) kmsg.Response { return all(code) }
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		codes, eff := s.mgr.CommitOffsets(now, req)
		for i, c := range codes {
			slots[i].ErrorCode = c
		}
		s.apply(eff, func(code int16) {
			if code != 0 {
				for i, c := range codes {
					if c == 0 {
						slots[i].ErrorCode = code
					}
				}
			}
			answer(resp)
		})
	})
}
