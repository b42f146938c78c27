package client

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Special timestamps for ListOffsets.
const (
	// LatestOffset asks for the log end offset (the high watermark for
	// read_uncommitted).
	LatestOffset int64 = -1
	// EarliestOffset asks for the log start offset.
	EarliestOffset int64 = -2
	// MaxTimestampOffset asks for the offset of the record with the largest
	// timestamp (KIP-734).
	MaxTimestampOffset int64 = -3
)

// ListedOffset is one partition's answer to ListOffsets: the first offset
// whose timestamp is at least the one asked for (or the special offset),
// with that record's timestamp (-1 for special queries) and leader epoch.
type ListedOffset struct {
	Offset      int64
	Timestamp   int64
	LeaderEpoch int32
	Err         error
}

// ListOffsets looks up, for every partition of topics, the offset at
// timestamp (a Unix millisecond time, or LatestOffset, EarliestOffset,
// MaxTimestampOffset), asking each partition's leader.
func (a *Admin) ListOffsets(ctx context.Context, timestamp int64, topics ...string) (map[TopicPartition]ListedOffset, error) {
	var parts []TopicPartition
	for _, t := range topics {
		tm, err := a.cl.TopicMetadata(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("list offsets: %w", err)
		}
		for _, p := range tm.Partitions {
			parts = append(parts, TopicPartition{t, p.Partition})
		}
	}
	return a.ListPartitionOffsets(ctx, timestamp, parts...)
}

// ListPartitionOffsets is ListOffsets for chosen partitions. Partitions
// whose leader moved are retried after a metadata refresh.
func (a *Admin) ListPartitionOffsets(ctx context.Context, timestamp int64, parts ...TopicPartition) (map[TopicPartition]ListedOffset, error) {
	out := make(map[TopicPartition]ListedOffset, len(parts))
	remaining := parts
	for attempt := 0; len(remaining) > 0; attempt++ {
		byLeader := map[int32][]TopicPartition{}
		var retry []TopicPartition
		var lastErr error
		for _, tp := range remaining {
			leader, err := a.cl.PartitionLeader(ctx, tp.Topic, tp.Partition)
			if err != nil {
				if IsRetriable(err) {
					retry = append(retry, tp)
					lastErr = err
					continue
				}
				out[tp] = ListedOffset{Offset: -1, Err: err}
				continue
			}
			byLeader[leader] = append(byLeader[leader], tp)
		}
		for leader, tps := range byLeader {
			req := kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			byTopic := map[string][]kmsg.ListOffsetsRequestTopicPartition{}
			for _, tp := range tps {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp, rp.MaxNumOffsets = tp.Partition, timestamp, 1
				byTopic[tp.Topic] = append(byTopic[tp.Topic], rp)
			}
			for _, t := range sortedTopics(byTopic) {
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic, rt.Partitions = t, byTopic[t]
				req.Topics = append(req.Topics, rt)
			}
			kresp, err := a.cl.BrokerRequest(ctx, leader, req)
			if err != nil {
				if !IsRetriable(err) {
					return nil, fmt.Errorf("list offsets on broker %d: %w", leader, err)
				}
				retry = append(retry, tps...)
				lastErr = err
				continue
			}
			for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					tp := TopicPartition{t.Topic, p.Partition}
					err := ErrorForCode(p.ErrorCode)
					if err != nil && IsRetriable(err) {
						retry = append(retry, tp)
						lastErr = err
						continue
					}
					lo := ListedOffset{Offset: p.Offset, Timestamp: p.Timestamp, LeaderEpoch: p.LeaderEpoch, Err: err}
					if req.Version == 0 && len(p.OldStyleOffsets) > 0 {
						lo.Offset = p.OldStyleOffsets[0]
					}
					out[tp] = lo
				}
			}
		}
		if len(retry) == 0 {
			break
		}
		if attempt >= a.cl.cfg.requestRetries {
			return nil, fmt.Errorf("list offsets: %w", lastErr)
		}
		a.cl.TriggerMetadataRefresh()
		if err := a.cl.backoff(ctx, attempt); err != nil {
			return nil, fmt.Errorf("list offsets: %w (after %v)", err, lastErr)
		}
		if _, err := a.cl.FetchMetadata(ctx, topicsOf(retry)); err != nil {
			return nil, fmt.Errorf("list offsets: %w", err)
		}
		remaining = retry
	}
	return out, nil
}

func topicsOf(tps []TopicPartition) []string {
	seen := map[string]bool{}
	var out []string
	for _, tp := range tps {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			out = append(out, tp.Topic)
		}
	}
	return out
}

// DeleteRecordsResult is one partition's new log start offset (low
// watermark) after DeleteRecords, or its error.
type DeleteRecordsResult struct {
	LowWatermark int64
	Err          error
}

// DeleteRecords deletes every record below the given offset of each
// partition (kafka-delete-records.sh); offset -1 means the high watermark.
func (a *Admin) DeleteRecords(ctx context.Context, before map[TopicPartition]int64) (map[TopicPartition]DeleteRecordsResult, error) {
	out := make(map[TopicPartition]DeleteRecordsResult, len(before))
	byLeader := map[int32][]TopicPartition{}
	for tp := range before {
		leader, err := a.cl.PartitionLeader(ctx, tp.Topic, tp.Partition)
		if err != nil {
			out[tp] = DeleteRecordsResult{LowWatermark: -1, Err: err}
			continue
		}
		byLeader[leader] = append(byLeader[leader], tp)
	}
	for leader, tps := range byLeader {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = int32(a.timeout.Milliseconds())
		byTopic := map[string][]kmsg.DeleteRecordsRequestTopicPartition{}
		for _, tp := range tps {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = tp.Partition, before[tp]
			byTopic[tp.Topic] = append(byTopic[tp.Topic], rp)
		}
		for _, t := range sortedTopics(byTopic) {
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic, rt.Partitions = t, byTopic[t]
			req.Topics = append(req.Topics, rt)
		}
		kresp, err := a.cl.BrokerRequest(ctx, leader, req)
		if err != nil {
			return nil, fmt.Errorf("delete records on broker %d: %w", leader, err)
		}
		for _, t := range kresp.(*kmsg.DeleteRecordsResponse).Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{t.Topic, p.Partition}] = DeleteRecordsResult{LowWatermark: p.LowWatermark, Err: ErrorForCode(p.ErrorCode)}
			}
		}
	}
	return out, nil
}

// ListedGroup is one group as ListGroups reports it.
type ListedGroup struct {
	Group        string
	ProtocolType string // "consumer" for consumer groups
	State        string // v4+: Stable, Empty, ...
	Type         string // v5+: classic or consumer (KIP-848); "" from older brokers
	Coordinator  int32
}

// ListGroups lists the groups of every broker (each broker reports the
// groups it coordinates), sorted by name.
func (a *Admin) ListGroups(ctx context.Context) ([]ListedGroup, error) {
	m, err := a.cl.FetchMetadata(ctx, []string{})
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	var out []ListedGroup
	for id := range m.Brokers {
		var groups []ListedGroup
		err := a.retry(ctx, func() error {
			kresp, err := a.cl.BrokerRequest(ctx, id, kmsg.NewPtrListGroupsRequest())
			if err != nil {
				return err
			}
			resp := kresp.(*kmsg.ListGroupsResponse)
			if err := ErrorForCode(resp.ErrorCode); err != nil {
				return err
			}
			groups = groups[:0]
			for _, g := range resp.Groups {
				groups = append(groups, ListedGroup{Group: g.Group, ProtocolType: g.ProtocolType, State: g.GroupState, Type: g.GroupType, Coordinator: id})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list groups on broker %d: %w", id, err)
		}
		out = append(out, groups...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// GroupDescription is one group as DescribeGroups reports it.
type GroupDescription struct {
	Group        string
	State        string
	ProtocolType string
	Protocol     string // the assignor chosen, e.g. "range"
	Coordinator  int32
	Members      []GroupMemberDescription
	Err          error
	// GroupEpoch and TargetAssignmentEpoch are a consumer-protocol
	// group's epochs (KIP-848); -1 for a classic group.
	GroupEpoch, TargetAssignmentEpoch int32
}

// GroupMemberDescription is one member of a described group. Assigned is
// decoded from the consumer protocol's assignment (empty for other
// protocol types).
type GroupMemberDescription struct {
	MemberID   string
	InstanceID string
	ClientID   string
	ClientHost string
	Assigned   []TopicPartition
	// Of a member of a consumer-protocol group (KIP-848; -1, nil and
	// MemberTypeUnknown in a classic group): its epoch, the partitions
	// the coordinator means it to own, and which protocol it speaks.
	MemberEpoch    int32
	TargetAssigned []TopicPartition
	Type           MemberType
}

// MemberType is the protocol a member of a consumer-protocol group speaks
// (ConsumerGroupDescribe v1): a group moving between the protocols has
// members of both.
type MemberType int8

const (
	MemberTypeUnknown  MemberType = -1 // a classic group's member, or an older broker
	MemberTypeClassic  MemberType = 0  // JoinGroup/SyncGroup (group.protocol=classic)
	MemberTypeConsumer MemberType = 1  // ConsumerGroupHeartbeat (group.protocol=consumer)
)

// DescribeGroups describes groups, asking each group's coordinator.
func (a *Admin) DescribeGroups(ctx context.Context, groups ...string) ([]GroupDescription, error) {
	out := make([]GroupDescription, 0, len(groups))
	for _, g := range groups {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{g}
		var d GroupDescription
		err := a.retry(ctx, func() error {
			coord, err := a.cl.Coordinator(ctx, GroupCoordinator, g)
			if err != nil {
				return err
			}
			kresp, err := a.cl.BrokerRequest(ctx, coord, req)
			if err != nil {
				a.cl.InvalidateCoordinator(GroupCoordinator, g)
				return err
			}
			resp := kresp.(*kmsg.DescribeGroupsResponse)
			if len(resp.Groups) != 1 {
				return fmt.Errorf("%d groups in the response", len(resp.Groups))
			}
			rg := resp.Groups[0]
			gerr := errorWithMessage(rg.ErrorCode, rg.ErrorMessage)
			if IsRetriable(gerr) {
				a.cl.InvalidateCoordinator(GroupCoordinator, g)
				return gerr
			}
			d = GroupDescription{Group: rg.Group, State: rg.State, ProtocolType: rg.ProtocolType, Protocol: rg.Protocol, Coordinator: coord, Err: gerr,
				GroupEpoch: -1, TargetAssignmentEpoch: -1}
			for _, m := range rg.Members {
				md := GroupMemberDescription{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
					MemberEpoch: -1, Type: MemberTypeUnknown}
				if m.InstanceID != nil {
					md.InstanceID = *m.InstanceID
				}
				if rg.ProtocolType == "consumer" && len(m.MemberAssignment) > 0 {
					var asg kmsg.ConsumerMemberAssignment
					if asg.ReadFrom(m.MemberAssignment) == nil {
						for _, t := range asg.Topics {
							for _, p := range t.Partitions {
								md.Assigned = append(md.Assigned, TopicPartition{t.Topic, p})
							}
						}
					}
				}
				d.Members = append(d.Members, md)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("describe group %s: %w", g, err)
		}
		if errors.Is(d.Err, ErrGroupIDNotFound) {
			// Not a classic group: maybe one of the consumer protocol
			// (KIP-848), as Kafka's admin client asks.
			cd, ok, err := a.describeConsumerGroup(ctx, g)
			if err != nil {
				return nil, fmt.Errorf("describe group %s: %w", g, err)
			}
			if ok {
				d = cd
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// describeConsumerGroup describes a group of the consumer protocol
// (KIP-848) with ConsumerGroupDescribe: ok is false when the group is not
// one, or the broker does not serve the API. Protocol is the group's
// server-side assignor.
func (a *Admin) describeConsumerGroup(ctx context.Context, g string) (d GroupDescription, ok bool, err error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{g}
	err = a.retry(ctx, func() error {
		coord, err := a.cl.Coordinator(ctx, GroupCoordinator, g)
		if err != nil {
			return err
		}
		kresp, err := a.cl.BrokerRequest(ctx, coord, req)
		if errors.Is(err, ErrUnsupportedRequest) {
			return nil
		}
		if err != nil {
			a.cl.InvalidateCoordinator(GroupCoordinator, g)
			return err
		}
		resp := kresp.(*kmsg.ConsumerGroupDescribeResponse)
		if len(resp.Groups) != 1 {
			return fmt.Errorf("%d groups in the response", len(resp.Groups))
		}
		rg := resp.Groups[0]
		gerr := errorWithMessage(rg.ErrorCode, rg.ErrorMessage)
		switch {
		case IsRetriable(gerr):
			a.cl.InvalidateCoordinator(GroupCoordinator, g)
			return gerr
		case gerr != nil:
			return nil // not a consumer protocol group
		}
		d = GroupDescription{Group: rg.Group, State: rg.State, ProtocolType: "consumer", Protocol: rg.AssignorName, Coordinator: coord,
			GroupEpoch: rg.Epoch, TargetAssignmentEpoch: rg.AssignmentEpoch}
		for _, m := range rg.Members {
			md := GroupMemberDescription{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
				MemberEpoch: m.MemberEpoch, Type: MemberTypeUnknown}
			if m.InstanceID != nil {
				md.InstanceID = *m.InstanceID
			}
			if resp.Version >= 1 {
				md.Type = MemberType(m.MemberType)
			}
			for _, t := range m.Assignment.TopicPartitions {
				for _, p := range t.Partitions {
					md.Assigned = append(md.Assigned, TopicPartition{t.Topic, p})
				}
			}
			md.TargetAssigned = []TopicPartition{}
			for _, t := range m.TargetAssignment.TopicPartitions {
				for _, p := range t.Partitions {
					md.TargetAssigned = append(md.TargetAssigned, TopicPartition{t.Topic, p})
				}
			}
			d.Members = append(d.Members, md)
		}
		ok = true
		return nil
	})
	return d, ok, err
}

// DeleteGroups deletes empty groups and their committed offsets. The map
// holds each group's error (nil on success; NON_EMPTY_GROUP for a group
// with members).
func (a *Admin) DeleteGroups(ctx context.Context, groups ...string) (map[string]error, error) {
	out := make(map[string]error, len(groups))
	for _, g := range groups {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{g}
		err := a.retry(ctx, func() error {
			coord, err := a.cl.Coordinator(ctx, GroupCoordinator, g)
			if err != nil {
				return err
			}
			kresp, err := a.cl.BrokerRequest(ctx, coord, req)
			if err != nil {
				a.cl.InvalidateCoordinator(GroupCoordinator, g)
				return err
			}
			for _, rg := range kresp.(*kmsg.DeleteGroupsResponse).Groups {
				gerr := errorWithMessage(rg.ErrorCode, rg.ErrorMessage)
				if IsRetriable(gerr) {
					a.cl.InvalidateCoordinator(GroupCoordinator, g)
					return gerr
				}
				out[rg.Group] = gerr
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("delete group %s: %w", g, err)
		}
	}
	return out, nil
}

// DeleteOffsets deletes group's committed offsets for the partitions
// (OffsetDelete; kafka-consumer-groups.sh --delete-offsets). A group with
// members keeps the offsets of the topics it is subscribed to. The map
// holds each partition's result (nil: deleted; GROUP_SUBSCRIBED_TO_TOPIC,
// UNKNOWN_TOPIC_OR_PARTITION); a group-level error (GROUP_ID_NOT_FOUND,
// INVALID_GROUP_ID) is returned as the error.
func (a *Admin) DeleteOffsets(ctx context.Context, group string, parts ...TopicPartition) (map[TopicPartition]error, error) {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	byTopic := map[string][]kmsg.OffsetDeleteRequestTopicPartition{}
	for _, tp := range parts {
		p := kmsg.NewOffsetDeleteRequestTopicPartition()
		p.Partition = tp.Partition
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	kresp, err := a.cl.CoordinatorRequest(ctx, GroupCoordinator, group, req)
	if err != nil {
		return nil, fmt.Errorf("delete offsets of %s: %w", group, err)
	}
	resp := kresp.(*kmsg.OffsetDeleteResponse)
	if err := ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("delete offsets of %s: %w", group, err)
	}
	out := make(map[TopicPartition]error, len(parts))
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = ErrorForCode(p.ErrorCode)
		}
	}
	return out, nil
}

// AlterGroupOffsets commits offsets for group as Kafka's
// Admin.alterConsumerGroupOffsets does (kafka-consumer-groups.sh
// --reset-offsets --execute): an OffsetCommit outside any generation
// (member id "", generation -1), which the coordinator accepts only while
// the group has no members. The map holds each partition's result (nil:
// committed; UNKNOWN_MEMBER_ID while the group is active); a request that
// failed as a whole is the error.
func (a *Admin) AlterGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) (map[TopicPartition]error, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	byTopic := map[string][]kmsg.OffsetCommitRequestTopicPartition{}
	for tp, off := range offsets {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = tp.Partition, off
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	kresp, err := a.cl.CoordinatorRequest(ctx, GroupCoordinator, group, req)
	if err != nil {
		return nil, fmt.Errorf("alter offsets of %s: %w", group, err)
	}
	out := make(map[TopicPartition]error, len(offsets))
	for _, t := range kresp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = ErrorForCode(p.ErrorCode)
		}
	}
	return out, nil
}

// CommittedOffset is a group's committed offset for one partition.
type CommittedOffset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         error
}

// FetchOffsets returns the offsets group has committed, for every
// partition it has committed to (OffsetFetch with no topic filter).
func (a *Admin) FetchOffsets(ctx context.Context, group string) (map[TopicPartition]CommittedOffset, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group // v0-v7
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group // v8+
	req.Groups = append(req.Groups, rg)
	kresp, err := a.cl.CoordinatorRequest(ctx, GroupCoordinator, group, req)
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	out := map[TopicPartition]CommittedOffset{}
	if resp.Version >= 8 {
		for _, g := range resp.Groups {
			if err := ErrorForCode(g.ErrorCode); err != nil {
				return nil, fmt.Errorf("fetch offsets of %s: %w", group, err)
			}
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					out[TopicPartition{t.Topic, p.Partition}] = committed(p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
				}
			}
		}
		return out, nil
	}
	if err := ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = committed(p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
		}
	}
	return out, nil
}

func committed(offset int64, epoch int32, meta *string, code int16) CommittedOffset {
	c := CommittedOffset{Offset: offset, LeaderEpoch: epoch, Err: ErrorForCode(code)}
	if meta != nil {
		c.Metadata = *meta
	}
	return c
}

// PartitionLag is one row of kafka-consumer-groups.sh --describe: a
// partition the group has committed to or is assigned, with its committed
// offset (-1 if none), log end offset and lag (-1 when unknown), and the
// member that owns it, if any.
type PartitionLag struct {
	TopicPartition
	CurrentOffset int64
	LeaderEpoch   int32 // of the committed offset; -1 when unknown
	LogEndOffset  int64
	Lag           int64
	MemberID      string
	ClientID      string
	Host          string
	Err           error
}

// GroupLag describes group's lag per partition, sorted by topic and
// partition: committed offsets, log end offsets (ListOffsets latest) and
// the members' assignments.
func (a *Admin) GroupLag(ctx context.Context, group string) ([]PartitionLag, error) {
	descs, err := a.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := descs[0].Err; err != nil && !errors.Is(err, ErrGroupIDNotFound) {
		return nil, fmt.Errorf("group lag of %s: %w", group, err)
	}
	offsets, err := a.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	rows := map[TopicPartition]*PartitionLag{}
	row := func(tp TopicPartition) *PartitionLag {
		r := rows[tp]
		if r == nil {
			r = &PartitionLag{TopicPartition: tp, CurrentOffset: -1, LeaderEpoch: -1, LogEndOffset: -1, Lag: -1}
			rows[tp] = r
		}
		return r
	}
	for tp, c := range offsets {
		r := row(tp)
		r.CurrentOffset, r.LeaderEpoch, r.Err = c.Offset, c.LeaderEpoch, c.Err
	}
	for _, m := range descs[0].Members {
		for _, tp := range m.Assigned {
			r := row(tp)
			r.MemberID, r.ClientID, r.Host = m.MemberID, m.ClientID, m.ClientHost
		}
	}
	tps := make([]TopicPartition, 0, len(rows))
	for tp := range rows {
		tps = append(tps, tp)
	}
	ends, err := a.ListPartitionOffsets(ctx, LatestOffset, tps...)
	if err != nil {
		return nil, fmt.Errorf("group lag of %s: %w", group, err)
	}
	out := make([]PartitionLag, 0, len(rows))
	for tp, r := range rows {
		if e, ok := ends[tp]; ok && e.Err == nil {
			r.LogEndOffset = e.Offset
			if r.CurrentOffset >= 0 {
				r.Lag = max(r.LogEndOffset-r.CurrentOffset, 0)
			}
		} else if ok && r.Err == nil {
			r.Err = e.Err
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}
