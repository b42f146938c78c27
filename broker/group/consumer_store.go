package group

import (
	"maps"
	"slices"
)

// The records of a consumer group in __consumer_offsets, in Kafka's
// formats (consumer_records.go), and their replay.

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func groupMetadataRecord(group string, c *consumerGroup) Record {
	v := ConsumerGroupMetadataValue{Epoch: c.epoch, MetadataHash: c.metadataHash}
	return Record{Key: ConsumerGroupMetadataKey(group), Value: v.AppendTo(nil)}
}

func memberMetadataRecord(group string, mem *ConsumerMember) Record {
	v := ConsumerMemberMetadataValue{InstanceID: strPtr(mem.InstanceID), RackID: strPtr(mem.RackID),
		ClientID: mem.ClientID, ClientHost: mem.ClientHost, SubscribedTopicNames: mem.SubscribedTopicNames,
		SubscribedTopicRegex: strPtr(mem.SubscribedTopicRegex), RebalanceTimeoutMs: mem.RebalanceTimeoutMs,
		ServerAssignor: strPtr(mem.ServerAssignor), Classic: mem.Classic}
	if v.SubscribedTopicNames == nil {
		v.SubscribedTopicNames = []string{}
	}
	return Record{Key: ConsumerGroupMemberMetadataKey(group, mem.ID), Value: v.AppendTo(nil)}
}

// toTopicPartitions lists an assignment by topic id order.
func toTopicPartitions(a map[TopicID][]int32) []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for _, t := range slices.SortedFunc(maps.Keys(a), compareTopicIDs) {
		if len(a[t]) > 0 {
			out = append(out, TopicPartitions{TopicID: t, Partitions: a[t]})
		}
	}
	return out
}

func fromTopicPartitions(tps []TopicPartitions) map[TopicID][]int32 {
	out := make(map[TopicID][]int32, len(tps))
	for _, tp := range tps {
		out[tp.TopicID] = slices.Sorted(slices.Values(tp.Partitions))
	}
	return out
}

func epochsFrom(tps []TopicPartitions, epoch int32) partitionEpochs {
	out := partitionEpochs{}
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			setEpoch(out, tp.TopicID, p, epoch)
		}
	}
	return out
}

func targetMemberRecord(group, member string, a map[TopicID][]int32) Record {
	v := ConsumerTargetAssignmentMemberValue{TopicPartitions: toTopicPartitions(a)}
	return Record{Key: ConsumerGroupTargetAssignmentMemberKey(group, member), Value: v.AppendTo(nil)}
}

func targetMetadataRecord(group string, epoch int32) Record {
	v := ConsumerTargetAssignmentMetadataValue{AssignmentEpoch: epoch}
	return Record{Key: ConsumerGroupTargetAssignmentMetadataKey(group), Value: v.AppendTo(nil)}
}

func currentAssignmentRecord(group string, mem *ConsumerMember) Record {
	v := ConsumerCurrentAssignmentValue{MemberEpoch: mem.Epoch, PreviousMemberEpoch: mem.PreviousEpoch, State: int8(mem.State),
		AssignedPartitions: toTopicPartitions(epochKeys(mem.Assigned)), PartitionsPendingRevocation: toTopicPartitions(epochKeys(mem.PendingRevocation))}
	return Record{Key: ConsumerGroupCurrentMemberAssignmentKey(group, mem.ID), Value: v.AppendTo(nil)}
}

// replayConsumer applies one consumer group record while loading (Kafka's
// GroupMetadataManager.replay for the KIP-848 records).
func (m *Manager) replayConsumer(k DecodedKey, value []byte) error {
	g := m.groups[k.Group]
	if g == nil {
		if value == nil {
			return nil
		}
		g = newGroup(k.Group, 0)
		m.groups[k.Group] = g
	}
	if g.consumer == nil {
		if value == nil {
			return nil
		}
		g.consumer = newConsumerGroup()
		g.ProtocolType, g.Protocol, g.Leader, g.Generation = "consumer", "", "", 0
		g.Members, g.staticMembers = map[string]*Member{}, map[string]string{}
	}
	c := g.consumer
	member := func() *ConsumerMember {
		mem := c.members[k.MemberID]
		if mem == nil {
			mem = &ConsumerMember{ID: k.MemberID, Assigned: partitionEpochs{}, PendingRevocation: partitionEpochs{}}
			c.members[k.MemberID] = mem
		}
		return mem
	}
	switch k.Type {
	case ConsumerGroupMetadataType:
		if value == nil {
			// The group was deleted (or became classic); its offsets,
			// if any, stay with a plain group.
			g.consumer = nil
			g.ProtocolType = ""
			return nil
		}
		v, err := DecodeConsumerGroupMetadataValue(value)
		if err != nil {
			return err
		}
		c.epoch, c.metadataHash = v.Epoch, v.MetadataHash
	case ConsumerGroupPartitionMetadataType:
		// Kafka 4.1 replaced it with the metadata hash: nothing to keep.
	case ConsumerGroupMemberMetadataType:
		if value == nil {
			if mem := c.members[k.MemberID]; mem != nil {
				if mem.InstanceID != "" && c.static[mem.InstanceID] == mem.ID {
					delete(c.static, mem.InstanceID)
				}
				delete(c.members, k.MemberID)
			}
			return nil
		}
		v, err := DecodeConsumerMemberMetadataValue(value)
		if err != nil {
			return err
		}
		mem := member()
		mem.InstanceID, mem.RackID, mem.ClientID, mem.ClientHost = deref(v.InstanceID), deref(v.RackID), v.ClientID, v.ClientHost
		mem.SubscribedTopicNames = slices.Sorted(slices.Values(v.SubscribedTopicNames))
		mem.SubscribedTopicRegex, mem.ServerAssignor, mem.RebalanceTimeoutMs = deref(v.SubscribedTopicRegex), deref(v.ServerAssignor), v.RebalanceTimeoutMs
		mem.Classic = v.Classic
		if mem.InstanceID != "" {
			c.static[mem.InstanceID] = mem.ID
		}
	case ConsumerGroupTargetAssignmentMetadataType:
		if value == nil {
			return nil
		}
		v, err := DecodeConsumerTargetAssignmentMetadataValue(value)
		if err != nil {
			return err
		}
		c.assignmentEpoch = v.AssignmentEpoch
	case ConsumerGroupTargetAssignmentMemberType:
		if value == nil {
			delete(c.target, k.MemberID)
			return nil
		}
		v, err := DecodeConsumerTargetAssignmentMemberValue(value)
		if err != nil {
			return err
		}
		c.target[k.MemberID] = fromTopicPartitions(v.TopicPartitions)
	case ConsumerGroupCurrentMemberAssignmentType:
		if value == nil {
			if mem := c.members[k.MemberID]; mem != nil {
				mem.Epoch, mem.PreviousEpoch, mem.State = 0, 0, MemberStable
				mem.Assigned, mem.PendingRevocation = partitionEpochs{}, partitionEpochs{}
			}
			return nil
		}
		v, err := DecodeConsumerCurrentAssignmentValue(value)
		if err != nil {
			return err
		}
		mem := member()
		mem.Epoch, mem.PreviousEpoch, mem.State = v.MemberEpoch, v.PreviousMemberEpoch, MemberState(v.State)
		switch mem.State {
		case MemberStable, MemberUnrevokedPartitions, MemberUnreleasedPartitions:
		default:
			mem.State = MemberUnknown
		}
		// Partitions are taken as assigned at the member's epoch: an
		// offset commit of an older epoch may be refused after a
		// coordinator change, never wrongly accepted.
		mem.Assigned = epochsFrom(v.AssignedPartitions, mem.Epoch)
		mem.PendingRevocation = epochsFrom(v.PartitionsPendingRevocation, mem.Epoch)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// finishConsumerLoad rebuilds what is not stored: partition owners,
// session and revocation deadlines (a full session from the load, as
// Kafka's), and the classic state fields.
func (m *Manager) finishConsumerLoad(now int64, g *Group) {
	c := g.consumer
	c.owners = partitionEpochs{}
	c.names, c.subscribed = nil, nil
	for _, mem := range c.members {
		c.addOwnership(mem)
		mem.sessionDeadline = now + m.consumerSessionTimeout(g.ID)
		if mem.Classic != nil {
			mem.sessionDeadline = now + int64(mem.Classic.SessionTimeoutMs)
		}
		if mem.State == MemberUnrevokedPartitions {
			mem.revocationDeadline = now + int64(mem.RebalanceTimeoutMs)
		}
	}
	g.State = Stable
	if len(c.members) == 0 {
		g.State = Empty
	}
	g.stateTimestamp = now
}
