package group

import (
	"encoding/binary"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between the classic and the consumer group protocols
// (KIP-848, Kafka's group.consumer.migration.policy), so that a consumer
// application can be rolled from group.protocol=classic to consumer, and
// back, one instance at a time:
//
//   - Upgrade: the first ConsumerGroupHeartbeat joining a classic group with
//     members turns it into a consumer group. Every classic member becomes a
//     member at the classic generation, holding what the classic assignment
//     gave it (Kafka's convertToConsumerGroup).
//   - Classic members of a consumer group keep using JoinGroup, SyncGroup,
//     Heartbeat and LeaveGroup. The coordinator assigns for them: a JoinGroup
//     is answered at once, with the member epoch as the generation and no
//     leader; SyncGroup hands the member its assigned partitions; Heartbeat
//     answers REBALANCE_IN_PROGRESS when the member must rejoin to move on
//     (the group epoch moved past it, it has partitions to revoke, or the
//     partitions it waits for were released). Its JoinGroup's owned
//     partitions (ConsumerProtocolSubscription v1+) are what it still owns,
//     so a partition moves only once its old owner revoked it.
//   - Downgrade: when the last member of the consumer protocol leaves a group
//     whose other members are classic, it becomes a classic group at the
//     group epoch, with the target assignment as each member's assignment,
//     and rebalances (Kafka's convertToClassicGroup). So it does, without
//     the rebalance, when a classic static member replaces that last
//     member (a rolled-back instance keeping its group.instance.id).

// Values of group.consumer.migration.policy.
const (
	MigrationDisabled      = "disabled"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationBidirectional = "bidirectional"
)

func (c *Config) upgradeEnabled() bool {
	p := c.ConsumerMigrationPolicy
	return p == "" || p == MigrationBidirectional || p == MigrationUpgrade
}

func (c *Config) downgradeEnabled() bool {
	p := c.ConsumerMigrationPolicy
	return p == "" || p == MigrationBidirectional || p == MigrationDowngrade
}

// noTopics is the TopicImage of a Manager whose caller gave none.
type noTopics struct{}

func (noTopics) TopicByName(string) (TopicID, int32, bool) { return TopicID{}, 0, false }
func (noTopics) TopicByID(TopicID) (string, int32, bool)   { return "", 0, false }
func (noTopics) TopicNames() []string                      { return nil }

// topicImage is the cluster's topics now, for the classic requests (which
// carry none) and for conversions.
func (m *Manager) topicImage() TopicImage {
	if m.Topics != nil {
		if img := m.Topics(); img != nil {
			return img
		}
	}
	return noTopics{}
}

// upgradeToConsumer converts a classic group with members into a consumer
// group (Kafka's validateOnlineUpgrade and convertToConsumerGroup), or
// reports false and changes nothing: the policy forbids it, the group's
// protocol type is not "consumer", it has more members than a consumer
// group may, or a member's subscription or assignment does not parse.
// Parked JoinGroups and SyncGroups get REBALANCE_IN_PROGRESS.
func (m *Manager) upgradeToConsumer(now int64, g *Group, img TopicImage) (Effects, bool) {
	if !m.cfg.upgradeEnabled() || g.ProtocolType != "consumer" || len(g.Members) > m.cfg.consumerMaxSize() {
		return Effects{}, false
	}
	gen := g.Generation
	c := newConsumerGroup()
	c.epoch, c.assignmentEpoch = gen, gen
	for _, mem := range g.memberList() {
		meta := mem.metadata(g.Protocol)
		if meta == nil && len(mem.Protocols) > 0 {
			meta = mem.Protocols[0].Metadata
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(meta); err != nil {
			return Effects{}, false
		}
		var assignment kmsg.ConsumerMemberAssignment
		if len(mem.Assignment) > 0 {
			if err := assignment.ReadFrom(mem.Assignment); err != nil {
				return Effects{}, false
			}
		}
		assigned := partitionEpochs{}
		for _, t := range assignment.Topics {
			id, n, ok := img.TopicByName(t.Topic)
			if !ok {
				continue
			}
			for _, p := range t.Partitions {
				// A partition two members claim goes to the first.
				if _, taken := c.owners[id][p]; p >= 0 && p < n && !taken {
					setEpoch(assigned, id, p, gen)
				}
			}
		}
		cm := &ConsumerMember{ID: mem.ID, InstanceID: mem.InstanceID, RackID: deref(sub.Rack), ClientID: mem.ClientID,
			ClientHost: mem.ClientHost, SubscribedTopicNames: slices.Compact(slices.Sorted(slices.Values(sub.Topics))),
			RebalanceTimeoutMs: int32(mem.RebalanceTimeoutMs), Epoch: gen, PreviousEpoch: gen, State: MemberStable,
			Assigned: assigned, PendingRevocation: partitionEpochs{},
			Classic:         &ClassicMemberMetadata{SessionTimeoutMs: int32(mem.SessionTimeoutMs), SupportedProtocols: slices.Clone(mem.Protocols)},
			sessionDeadline: now + mem.SessionTimeoutMs}
		c.members[cm.ID] = cm
		if cm.InstanceID != "" {
			c.static[cm.InstanceID] = cm.ID
		}
		c.target[cm.ID] = epochKeys(assigned)
		c.addOwnership(cm)
	}
	c.subscribed = c.subscriptionMetadata(now, img)
	c.metadataHash = subscriptionHash(c.subscribed)

	var eff Effects
	for _, mem := range g.memberList() {
		if mem.joinWaiter != nil {
			eff.Joins = append(eff.Joins, JoinReply{Waiter: mem.joinWaiter, ErrorCode: kerr.RebalanceInProgress.Code, MemberID: mem.ID, Generation: -1})
		}
		if mem.syncWaiter != nil {
			eff.Syncs = append(eff.Syncs, SyncReply{Waiter: mem.syncWaiter, ErrorCode: kerr.RebalanceInProgress.Code})
		}
	}
	// Kafka's order: the classic group's tombstone, then
	// createConsumerGroupRecords.
	ids := slices.Sorted(maps.Keys(c.members))
	eff.Records = append(eff.Records, Record{Key: GroupKey(g.ID)})
	for _, id := range ids {
		eff.Records = append(eff.Records, memberMetadataRecord(g.ID, c.members[id]))
	}
	eff.Records = append(eff.Records, groupMetadataRecord(g.ID, c))
	for _, id := range ids {
		eff.Records = append(eff.Records, targetMemberRecord(g.ID, id, c.target[id]))
	}
	eff.Records = append(eff.Records, targetMetadataRecord(g.ID, c.assignmentEpoch))
	for _, id := range ids {
		eff.Records = append(eff.Records, currentAssignmentRecord(g.ID, c.members[id]))
	}
	g.consumer = c
	g.Members, g.staticMembers, g.pendingMembers = map[string]*Member{}, map[string]string{}, map[string]int64{}
	g.ProtocolType, g.Protocol, g.Leader, g.Generation = "consumer", "", "", 0
	g.initialDelay = false
	g.syncConsumerState(now)
	return eff, true
}

// downgradeToClassic turns a consumer group into a classic one when
// leaving, its last member of the consumer protocol, is fenced and every
// other member is classic (Kafka's validateOnlineDowngradeWithFencedMember
// and convertToClassicGroup). The classic group starts Stable at the group
// epoch, each member assigned its target assignment, and rebalances at
// once. It reports false, changing nothing, when the group does not
// qualify or the policy forbids it.
func (m *Manager) downgradeToClassic(now int64, g *Group, leaving *ConsumerMember) (Effects, bool) {
	c := g.consumer
	if leaving.Classic != nil || len(c.members) <= 1 || !m.cfg.downgradeEnabled() || len(c.members)-1 > m.cfg.MaxSize || !c.allClassicExcept(leaving) {
		return Effects{}, false
	}
	return m.convertToClassic(now, g, leaving), true
}

// downgradeOnReplacement turns a consumer group into a classic one when a
// classic static member has just taken the place of the group's last
// member of the consumer protocol (Kafka's
// validateOnlineDowngradeWithReplacedMemberId): every member is classic
// now. The classic group starts Stable at the group epoch, the new member
// included with the assignment it took over, and does not rebalance: the
// joining member's SyncGroup collects that assignment.
func (m *Manager) downgradeOnReplacement(now int64, g *Group) (Effects, bool) {
	c := g.consumer
	if !m.cfg.downgradeEnabled() || len(c.members) > m.cfg.MaxSize || !c.allClassicExcept(nil) {
		return Effects{}, false
	}
	return m.convertToClassic(now, g, nil), true
}

// allClassicExcept reports whether every member but except uses the
// classic protocol.
func (c *consumerGroup) allClassicExcept(except *ConsumerMember) bool {
	for _, mem := range c.members {
		if mem != except && mem.Classic == nil {
			return false
		}
	}
	return true
}

// convertToClassic is Kafka's convertToClassicGroup: the consumer group's
// records are tombstoned and a classic group of its members but leaving
// (none when nil) is stored, Stable at the group epoch, each member
// assigned its target assignment. A group downgraded because a member left
// rebalances at once.
func (m *Manager) convertToClassic(now int64, g *Group, leaving *ConsumerMember) Effects {
	c := g.consumer
	img := m.topicImage()
	ids := slices.Sorted(maps.Keys(c.members))
	// Kafka's ConsumerGroup.createGroupTombstoneRecords.
	var eff Effects
	for _, id := range ids {
		eff.Records = append(eff.Records, Record{Key: ConsumerGroupCurrentMemberAssignmentKey(g.ID, id)})
	}
	for _, id := range ids {
		eff.Records = append(eff.Records, Record{Key: ConsumerGroupTargetAssignmentMemberKey(g.ID, id)})
	}
	eff.Records = append(eff.Records, Record{Key: ConsumerGroupTargetAssignmentMetadataKey(g.ID)})
	for _, id := range ids {
		eff.Records = append(eff.Records, Record{Key: ConsumerGroupMemberMetadataKey(g.ID, id)})
	}
	eff.Records = append(eff.Records, Record{Key: ConsumerGroupPartitionMetadataKey(g.ID)}, Record{Key: ConsumerGroupMetadataKey(g.ID)})

	g.consumer = nil
	g.Members, g.staticMembers, g.pendingMembers = map[string]*Member{}, map[string]string{}, map[string]int64{}
	g.ProtocolType, g.Generation, g.Leader = "consumer", c.epoch, ""
	for _, id := range ids {
		mem := c.members[id]
		if mem == leaving {
			continue
		}
		g.Members[id] = &Member{ID: id, InstanceID: mem.InstanceID, ClientID: mem.ClientID, ClientHost: mem.ClientHost,
			SessionTimeoutMs: int64(mem.Classic.SessionTimeoutMs), RebalanceTimeoutMs: int64(mem.RebalanceTimeoutMs),
			ProtocolType: "consumer", Protocols: mem.Classic.SupportedProtocols,
			heartbeatDeadline: now + int64(mem.Classic.SessionTimeoutMs)}
		if mem.InstanceID != "" {
			g.staticMembers[mem.InstanceID] = id
		}
		if g.Leader == "" {
			g.Leader = id
		}
	}
	g.Protocol = g.selectProtocol()
	for id, mem := range g.Members {
		mem.Assignment = classicAssignment(c.target[id], img, protocolVersion(mem.metadata(g.Protocol)))
	}
	g.transition(Stable, now)
	eff.storeGroup(g, now)
	if leaving != nil {
		eff.merge(m.prepareRebalance(now, g))
	}
	return eff
}

// protocolVersion is the version of a ConsumerProtocolSubscription, the
// version its member's assignment is written in (at most 3, the newest
// ConsumerProtocolAssignment).
func protocolVersion(meta []byte) int16 {
	if len(meta) < 2 {
		return 0
	}
	return min(max(int16(binary.BigEndian.Uint16(meta)), 0), 3)
}

// classicAssignment encodes a member's partitions as the
// ConsumerProtocolAssignment a classic consumer reads from SyncGroup,
// topics by name (topics no longer in the image are left out).
func classicAssignment(a map[TopicID][]int32, img TopicImage, version int16) []byte {
	out := kmsg.ConsumerMemberAssignment{Version: version}
	for _, id := range slices.SortedFunc(maps.Keys(a), compareTopicIDs) {
		name, _, ok := img.TopicByID(id)
		if !ok || len(a[id]) == 0 {
			continue
		}
		out.Topics = append(out.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: slices.Sorted(slices.Values(a[id]))})
	}
	return out.AppendTo(nil)
}

// supportsClassicProtocols is Kafka's ConsumerGroup.supportsClassicProtocols:
// a classic member may join a consumer group with the "consumer" protocol
// type and, if classic members are there, a protocol they all support.
func (c *consumerGroup) supportsClassicProtocols(protocolType string, ps []Protocol) bool {
	if protocolType != "consumer" || len(ps) == 0 {
		return false
	}
	for _, p := range ps {
		all := true
		for _, mem := range c.members {
			if mem.Classic != nil && !slices.ContainsFunc(mem.Classic.SupportedProtocols, func(q Protocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// classicMember finds the member of a classic request, by instance id for
// a static member (Kafka's validateConsumerGroupMember), and checks that it
// uses the classic protocol.
func (c *consumerGroup) classicMember(memberID, instanceID string) (*ConsumerMember, int16) {
	mem := c.members[memberID]
	if instanceID != "" {
		id, ok := c.static[instanceID]
		switch {
		case !ok:
			return nil, kerr.UnknownMemberID.Code
		case id != memberID:
			return nil, kerr.FencedInstanceID.Code
		}
		mem = c.members[id]
	}
	if mem == nil || mem.Classic == nil || len(mem.Classic.SupportedProtocols) == 0 {
		return nil, kerr.UnknownMemberID.Code
	}
	return mem, 0
}

// classicJoinToConsumer is a classic member's JoinGroup to a consumer group
// with members (Kafka's classicGroupJoinToConsumerGroup): the member joins
// or rejoins with the subscription and owned partitions of its JoinGroup,
// is reconciled like a heartbeat, and is answered once the records are
// committed, at its member epoch and led by no one (it does not assign).
func (m *Manager) classicJoinToConsumer(now int64, g *Group, req JoinRequest) Effects {
	fail := func(code int16, memberID string) Effects {
		return Effects{Joins: []JoinReply{{Waiter: req.Waiter, ErrorCode: code, MemberID: memberID, Generation: -1}}}
	}
	c := g.consumer
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = m.newUUID()
	}
	if c.members[memberID] == nil && len(c.members) >= m.cfg.consumerMaxSize() {
		return fail(kerr.GroupMaxSizeReached.Code, req.MemberID)
	}
	if !c.supportsClassicProtocols(req.ProtocolType, req.Protocols) {
		return fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
	}
	if unknown && req.InstanceID == "" && req.Version >= 4 {
		// KIP-394: the member rejoins with the id handed out.
		return fail(kerr.MemberIDRequired.Code, memberID)
	}
	// Every protocol carries the same subscription; Kafka reads the
	// first.
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		return fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
	}
	var eff Effects
	var member *ConsumerMember
	replacedConsumer := false // a static member of the consumer protocol was replaced
	switch oldID, static := c.static[req.InstanceID]; {
	case req.InstanceID == "":
		if member = c.members[memberID]; member == nil {
			member = &ConsumerMember{ID: memberID}
			c.members[memberID] = member
		}
	case !static && unknown:
		member = &ConsumerMember{ID: memberID, InstanceID: req.InstanceID}
		c.members[memberID] = member
		c.static[req.InstanceID] = memberID
	case !static:
		return fail(kerr.UnknownMemberID.Code, req.MemberID)
	case unknown:
		// A new incarnation of a static member takes its place and
		// partitions, starting over at epoch 0 (Kafka's
		// getOrMaybeSubscribeStaticConsumerGroupMember).
		replacedConsumer = c.members[oldID].Classic == nil
		member = m.replaceStaticConsumer(g, c.members[oldID], memberID, &eff)
		c.dropOwnership(member)
		member.Epoch, member.PreviousEpoch = 0, 0
		c.addOwnership(member)
	case oldID != req.MemberID:
		return fail(kerr.FencedInstanceID.Code, req.MemberID)
	default:
		member = c.members[oldID]
	}
	img := m.topicImage()
	updated := *member
	updated.ClientID, updated.ClientHost = req.ClientID, req.ClientHost
	if req.InstanceID != "" {
		updated.InstanceID = req.InstanceID
	}
	if sub.Rack != nil && *sub.Rack != "" {
		updated.RackID = *sub.Rack
	}
	updated.RebalanceTimeoutMs = int32(req.RebalanceTimeoutMs)
	updated.SubscribedTopicNames = slices.Compact(slices.Sorted(slices.Values(sub.Topics)))
	updated.Classic = &ClassicMemberMetadata{SessionTimeoutMs: int32(req.SessionTimeoutMs), SupportedProtocols: slices.Clone(req.Protocols)}
	owned := map[TopicID][]int32{}
	for _, o := range sub.OwnedPartitions {
		if id, _, ok := img.TopicByName(o.Topic); ok {
			owned[id] = append(owned[id], o.Partitions...)
		}
	}
	// The subscription is in every JoinGroup: the group's topic names
	// are collected again only when it changed (a group epoch bump).
	if _, err := m.updateAndReconcile(now, g, member, updated, img, owned, true, false, &eff); err != nil {
		return fail(kerr.UnknownServerError.Code, req.MemberID)
	}
	member.joinDeadline = 0
	member.sessionDeadline = now + req.SessionTimeoutMs
	member.syncDeadline = now + req.RebalanceTimeoutMs
	eff.Joins = append(eff.Joins, JoinReply{Waiter: req.Waiter, Generation: member.Epoch, ProtocolType: "consumer",
		Protocol: req.Protocols[0].Name, MemberID: member.ID})
	if replacedConsumer {
		// The group's last consumer-protocol member may have been
		// the one replaced.
		if down, ok := m.downgradeOnReplacement(now, g); ok {
			eff.merge(down)
		}
	}
	return eff
}

// mustRejoin reports whether a classic member must rejoin to move on: the
// group epoch moved past it, it has partitions to revoke, or the
// partitions it waits for are free now (Kafka's
// classicGroupHeartbeatToConsumerGroup).
func (c *consumerGroup) mustRejoin(mem *ConsumerMember) bool {
	switch {
	case mem.Epoch < c.epoch, mem.State == MemberUnrevokedPartitions:
		return true
	case mem.State != MemberUnreleasedPartitions:
		return false
	}
	for t, ps := range c.target[mem.ID] {
		for _, p := range ps {
			if _, mine := mem.Assigned[t][p]; mine {
				continue
			}
			if _, owned := c.owners[t][p]; owned {
				return false // still waiting on another member
			}
		}
	}
	return true
}

// classicSyncToConsumer is a classic member's SyncGroup to a consumer group
// (Kafka's classicGroupSyncToConsumerGroup): it gets its assigned
// partitions, or REBALANCE_IN_PROGRESS when the group moved on since its
// join.
func (m *Manager) classicSyncToConsumer(now int64, g *Group, req SyncRequest) Effects {
	fail := func(code int16) Effects {
		return Effects{Syncs: []SyncReply{{Waiter: req.Waiter, ErrorCode: code}}}
	}
	c := g.consumer
	if len(c.members) == 0 {
		return fail(kerr.UnknownMemberID.Code)
	}
	mem, code := c.classicMember(req.MemberID, req.InstanceID)
	if code != 0 {
		return fail(code)
	}
	protocol := mem.Classic.SupportedProtocols[0]
	switch {
	case req.Generation != mem.Epoch:
		return fail(kerr.IllegalGeneration.Code)
	case req.ProtocolType != "" && req.ProtocolType != "consumer", req.Protocol != "" && req.Protocol != protocol.Name:
		return fail(kerr.InconsistentGroupProtocol.Code)
	case c.epoch > mem.Epoch && mem.State != MemberUnrevokedPartitions:
		if mem.joinDeadline == 0 {
			mem.joinDeadline = now + int64(mem.RebalanceTimeoutMs)
		}
		return fail(kerr.RebalanceInProgress.Code)
	}
	mem.syncDeadline = 0
	mem.sessionDeadline = now + int64(mem.Classic.SessionTimeoutMs)
	return Effects{Syncs: []SyncReply{{Waiter: req.Waiter, ProtocolType: "consumer", Protocol: protocol.Name,
		Assignment: classicAssignment(epochKeys(mem.Assigned), m.topicImage(), protocolVersion(protocol.Metadata))}}}
}

// classicHeartbeatToConsumer is a classic member's Heartbeat to a consumer
// group (Kafka's classicGroupHeartbeatToConsumerGroup).
func (m *Manager) classicHeartbeatToConsumer(now int64, g *Group, memberID, instanceID string, generation int32) int16 {
	c := g.consumer
	mem, code := c.classicMember(memberID, instanceID)
	switch {
	case code != 0:
		return code
	case generation != mem.Epoch:
		return kerr.IllegalGeneration.Code
	}
	mem.sessionDeadline = now + int64(mem.Classic.SessionTimeoutMs)
	if c.mustRejoin(mem) {
		if mem.joinDeadline == 0 {
			mem.joinDeadline = now + int64(mem.RebalanceTimeoutMs)
		}
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// classicLeaveToConsumer is a LeaveGroup to a consumer group (Kafka's
// classicGroupLeaveToConsumerGroup): classic members leave (by member id,
// or by instance id alone for an administrative removal), and the group
// epoch is bumped once.
func (m *Manager) classicLeaveToConsumer(now int64, g *Group, members []LeaveMember) (int16, []int16, Effects) {
	c := g.consumer
	codes := make([]int16, len(members))
	var eff Effects
	for i, lm := range members {
		mem := c.members[lm.MemberID]
		if lm.InstanceID != "" {
			id, ok := c.static[lm.InstanceID]
			switch {
			case !ok:
				codes[i] = kerr.UnknownMemberID.Code
				continue
			case lm.MemberID != "" && id != lm.MemberID:
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
			mem = c.members[id]
		}
		if mem == nil || mem.Classic == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		eff.Records = append(eff.Records, c.removeMember(g.ID, mem)...)
	}
	if len(eff.Records) > 0 {
		c.epoch++
		eff.Records = append(eff.Records, groupMetadataRecord(g.ID, c))
		g.syncConsumerState(now)
	}
	return 0, codes, eff
}
