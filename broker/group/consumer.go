package group

import (
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// KIP-848 consumer groups ("next-gen", the consumer protocol): members
// heartbeat with ConsumerGroupHeartbeat, the coordinator assigns the
// partitions with a server-side assignor and reconciles every member
// towards that target assignment (Kafka's GroupMetadataManager,
// ConsumerGroup and CurrentAssignmentBuilder).
//
// The group epoch counts changes of membership, subscriptions and the
// subscribed topics' partitions; the target assignment is computed for a
// group epoch; each member has its own member epoch and reaches the target
// epoch once it has revoked what it must give up. A partition moves to its
// new owner only after its previous owner revoked it, so no two members
// ever own one at the same time.

// MemberState is a consumer group member's reconciliation state, with
// Kafka's values (they are stored in CurrentMemberAssignment records).
type MemberState int8

const (
	// MemberStable: the member holds its target assignment.
	MemberStable MemberState = 0
	// MemberUnrevokedPartitions: the member must revoke partitions before
	// it can move to the target epoch.
	MemberUnrevokedPartitions MemberState = 1
	// MemberUnreleasedPartitions: the member is at the target epoch but
	// waits for partitions their previous owners have not revoked yet.
	MemberUnreleasedPartitions MemberState = 2
	// MemberUnknown is a state this build does not know (from a newer
	// Kafka's records): the member is fenced at its next heartbeat.
	MemberUnknown MemberState = 127
)

func (s MemberState) String() string {
	switch s {
	case MemberStable:
		return "STABLE"
	case MemberUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case MemberUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// Member epochs with a meaning in ConsumerGroupHeartbeat.
const (
	// JoinEpoch joins (or rejoins) the group.
	JoinEpoch int32 = 0
	// LeaveEpoch leaves the group.
	LeaveEpoch int32 = -1
	// StaticLeaveEpoch: a static member leaves for now and will come back
	// with the same instance id; it keeps its partitions until its
	// session expires.
	StaticLeaveEpoch int32 = -2
)

// TopicImage is what a consumer group needs of the cluster metadata: the
// topics members subscribe to, by name and by id.
type TopicImage interface {
	TopicByName(name string) (id TopicID, partitions int32, ok bool)
	TopicByID(id TopicID) (name string, partitions int32, ok bool)
	// TopicNames lists every topic a regular expression may match
	// (internal topics excluded).
	TopicNames() []string
}

// partitionEpochs maps a topic's partitions to an epoch.
type partitionEpochs = map[TopicID]map[int32]int32

// ConsumerMember is one member of a consumer group.
type ConsumerMember struct {
	ID                   string
	InstanceID           string
	RackID               string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string // sorted
	SubscribedTopicRegex string
	ServerAssignor       string // "" for the group's default
	RebalanceTimeoutMs   int32

	Epoch         int32
	PreviousEpoch int32
	State         MemberState
	// Assigned are the member's partitions, each with the member epoch it
	// was assigned at (KIP-1251: an offset commit of an older epoch is
	// accepted for partitions the member held then). PendingRevocation
	// are partitions it must give up; it still owns them.
	Assigned          partitionEpochs
	PendingRevocation partitionEpochs
	// Classic is set for a member that uses the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat) in this group (migration.go).
	Classic *ClassicMemberMetadata

	sessionDeadline    int64
	revocationDeadline int64 // 0 when nothing waits for a revocation
	// joinDeadline and syncDeadline are a classic member's: told to
	// rejoin, it must by then; having joined, it must sync by then (0:
	// nothing is due).
	joinDeadline, syncDeadline int64
}

// consumerGroup is the KIP-848 part of a Group (Group.consumer).
type consumerGroup struct {
	epoch           int32
	assignmentEpoch int32
	members         map[string]*ConsumerMember
	static          map[string]string // instance id → member id
	// target is the target assignment of each member, for
	// assignmentEpoch.
	target map[string]map[TopicID][]int32
	// subscribed are the partition counts of the topics members subscribe
	// to (Kafka's subscription metadata): a change bumps the group epoch.
	// nil after a load: the first heartbeat recomputes it and compares
	// its hash with metadataHash.
	subscribed map[TopicID]int32
	// metadataHash is subscribed's hash as stored in the group's metadata
	// record (KIP-1101's role; Keel's own hash).
	metadataHash int64
	// owners is the member epoch of each partition's current owner
	// (assigned or pending revocation; Kafka's currentPartitionEpoch).
	owners partitionEpochs
	// regexes caches the topics each subscribed regex matched.
	regexes map[string]resolvedRegex
	// names are the topic names the members subscribe to, nil when a
	// subscription changed since they were collected.
	names map[string]bool
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*ConsumerMember{}, static: map[string]string{},
		target: map[string]map[TopicID][]int32{}, subscribed: map[TopicID]int32{}, owners: partitionEpochs{},
		regexes: map[string]resolvedRegex{}}
}

// IsConsumer reports whether the group uses the consumer protocol
// (KIP-848) rather than the classic one.
func (g *Group) IsConsumer() bool { return g.consumer != nil }

// ConsumerState is a consumer group's state as Kafka names it: Empty,
// Assigning (a new target assignment is due), Reconciling (members are
// moving to it) or Stable.
func (g *Group) ConsumerState() string {
	c := g.consumer
	switch {
	case c == nil:
		return ""
	case len(c.members) == 0:
		return "Empty"
	case c.epoch > c.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range c.members {
		if m.Epoch != c.assignmentEpoch || m.State != MemberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat. Nil fields are
// unchanged since the member's last heartbeat, as in the request.
type ConsumerHeartbeatRequest struct {
	Version              int16
	Group                string
	MemberID             string
	MemberEpoch          int32
	InstanceID           *string
	RackID               *string
	RebalanceTimeoutMs   int32 // -1: unchanged
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	ServerAssignor       *string
	// Owned are the partitions the member owns; OwnedSet false when the
	// request did not say (null).
	Owned    map[TopicID][]int32
	OwnedSet bool

	ClientID, ClientHost string
	Topics               TopicImage
}

// ConsumerHeartbeatReply answers a ConsumerGroupHeartbeat.
type ConsumerHeartbeatReply struct {
	ErrorCode           int16
	ErrorMessage        string
	MemberID            string
	MemberEpoch         int32
	HeartbeatIntervalMs int32
	// Assignment is the member's assigned partitions, sent when
	// HasAssignment.
	Assignment    map[TopicID][]int32
	HasAssignment bool
}

func heartbeatError(code int16, format string, args ...any) ConsumerHeartbeatReply {
	return ConsumerHeartbeatReply{ErrorCode: code, ErrorMessage: fmt.Sprintf(format, args...), MemberEpoch: -1}
}

// validateHeartbeat is Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (m *Manager) validateHeartbeat(req *ConsumerHeartbeatRequest) (ConsumerHeartbeatReply, bool) {
	bad := func(msg string) (ConsumerHeartbeatReply, bool) {
		return heartbeatError(kerr.InvalidRequest.Code, "%s", msg), false
	}
	switch {
	case req.Group == "":
		return bad("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	case req.Version >= 1 && req.MemberID == "":
		return bad("MemberId can't be empty.")
	case req.MemberEpoch < StaticLeaveEpoch:
		return bad("MemberEpoch is invalid.")
	}
	switch req.MemberEpoch {
	case JoinEpoch:
		switch {
		case req.RebalanceTimeoutMs == -1:
			return bad("RebalanceTimeoutMs must be provided in first request.")
		case req.OwnedSet && len(req.Owned) > 0:
			return bad("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case StaticLeaveEpoch:
		if req.InstanceID == nil {
			return bad("InstanceId can't be null.")
		}
		fallthrough
	default:
		if req.MemberID == "" {
			return bad("MemberId can't be empty.")
		}
	}
	if req.ServerAssignor != nil && !slices.Contains(m.cfg.consumerAssignors(), *req.ServerAssignor) {
		return heartbeatError(kerr.UnsupportedAssignor.Code, "Assignor %s is not supported. Supported assignors: %v.",
			*req.ServerAssignor, m.cfg.consumerAssignors()), false
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileTopicRegex(*req.SubscribedTopicRegex); err != nil {
			return heartbeatError(kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.",
				*req.SubscribedTopicRegex, err), false
		}
	}
	return ConsumerHeartbeatReply{}, true
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat (Kafka's
// GroupMetadataManager.consumerGroupHeartbeat): it joins, updates, leaves
// or keeps alive a member, computes a new target assignment when the group
// epoch moved past it, and reconciles the member towards it. The reply is
// sent once the Effects' records are committed.
func (m *Manager) ConsumerHeartbeat(now int64, req ConsumerHeartbeatRequest) (ConsumerHeartbeatReply, Effects) {
	if r, ok := m.validateHeartbeat(&req); !ok {
		return r, Effects{}
	}
	g := m.groups[req.Group]
	if g != nil && g.State == Dead {
		return heartbeatError(kerr.CoordinatorNotAvailable.Code, "Group %s is being deleted.", req.Group), Effects{}
	}
	var eff Effects
	if g == nil || g.consumer == nil {
		if req.MemberEpoch != JoinEpoch {
			if g == nil {
				return heartbeatError(kerr.UnknownMemberID.Code, "Group %s not found.", req.Group), Effects{}
			}
			return heartbeatError(kerr.GroupIDNotFound.Code, "Group %s is not a consumer group.", req.Group), Effects{}
		}
		switch {
		case g == nil:
			g = newGroup(req.Group, now)
			m.groups[req.Group] = g
		case len(g.Members) > 0 || len(g.pendingMembers) > 0:
			// A classic group with members is converted online
			// (group.consumer.migration.policy), if it may be.
			e, ok := m.upgradeToConsumer(now, g, req.Topics)
			if !ok {
				return heartbeatError(kerr.GroupIDNotFound.Code, "Group %s is not a consumer group.", req.Group), Effects{}
			}
			eff.merge(e)
		case g.ProtocolType != "" || g.Generation > 0:
			// An empty classic group becomes a consumer group, as in
			// Kafka: its metadata record goes, its offsets stay.
			eff.Records = append(eff.Records, Record{Key: GroupKey(g.ID)})
		}
		if g.consumer == nil {
			g.consumer = newConsumerGroup()
			g.ProtocolType, g.Protocol, g.Leader, g.Generation = "consumer", "", "", 0
			g.transition(Empty, now)
		}
	}
	switch req.MemberEpoch {
	case LeaveEpoch:
		r, e := m.consumerLeave(now, g, req)
		eff.merge(e)
		return r, eff
	case StaticLeaveEpoch:
		r, e := m.consumerStaticLeave(now, g, req)
		eff.merge(e)
		return r, eff
	}

	member, r, ok := m.consumerMember(now, g, &req, &eff)
	if !ok {
		return r, eff
	}

	updated := *member
	updated.ClientID, updated.ClientHost = req.ClientID, req.ClientHost
	updated.Classic, updated.joinDeadline, updated.syncDeadline = nil, 0, 0
	if req.InstanceID != nil {
		updated.InstanceID = *req.InstanceID
	}
	if req.RackID != nil {
		updated.RackID = *req.RackID
	}
	if req.RebalanceTimeoutMs != -1 {
		updated.RebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	if req.ServerAssignor != nil {
		updated.ServerAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		updated.SubscribedTopicNames = slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
	}
	if req.SubscribedTopicRegex != nil {
		updated.SubscribedTopicRegex = *req.SubscribedTopicRegex
	}
	before := cloneEpochs(member.Assigned)
	changed, err := m.updateAndReconcile(now, g, member, updated, req.Topics, req.Owned, req.OwnedSet,
		req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil, &eff)
	if err != nil {
		return heartbeatError(kerr.UnknownServerError.Code, "%v", err), eff
	}
	member.sessionDeadline = now + m.consumerSessionTimeout(g.ID)

	reply := ConsumerHeartbeatReply{MemberID: member.ID, MemberEpoch: member.Epoch, HeartbeatIntervalMs: int32(m.consumerHeartbeatInterval(g.ID))}
	// As Kafka: the assignment goes out when the member said what it owns,
	// joined, or its assignment changed.
	if req.OwnedSet || req.MemberEpoch == JoinEpoch || changed || !equalEpochKeys(before, member.Assigned) {
		reply.HasAssignment, reply.Assignment = true, epochKeys(member.Assigned)
	}
	return reply, eff
}

// updateAndReconcile is what a heartbeat and a classic member's JoinGroup
// share (Kafka's consumerGroupHeartbeat and classicGroupJoinToConsumerGroup,
// steps 1 to 3): the member's new metadata is stored, a change of its
// subscription or of the subscribed topics bumps the group epoch, a new
// group epoch gets a new target assignment, and the member is reconciled
// with its target. It reports whether the member's assignment changed.
func (m *Manager) updateAndReconcile(now int64, g *Group, member *ConsumerMember, updated ConsumerMember, img TopicImage,
	owned map[TopicID][]int32, ownedSet, subscriptionGiven bool, eff *Effects) (bool, error) {
	c := g.consumer
	// 1. The member's subscription and the subscribed topics: a change
	// bumps the group epoch.
	bump := member.Epoch == JoinEpoch && member.Assigned == nil // a new member
	if !sameMemberMetadata(member, &updated) || bump {
		eff.Records = append(eff.Records, memberMetadataRecord(g.ID, &updated))
		if !slices.Equal(member.SubscribedTopicNames, updated.SubscribedTopicNames) ||
			member.SubscribedTopicRegex != updated.SubscribedTopicRegex {
			bump = true
		}
	}
	*member = updated
	if member.Assigned == nil {
		member.Assigned, member.PendingRevocation = partitionEpochs{}, partitionEpochs{}
	}
	if bump || subscriptionGiven {
		c.names = nil
	}
	subscribed := c.subscriptionMetadata(now, img)
	if c.subscribed == nil && subscriptionHash(subscribed) == c.metadataHash {
		// Loaded from the log, which keeps only the hash (KIP-1101):
		// the same topics and partitions, no new epoch.
		c.subscribed = subscribed
	}
	if !maps.Equal(subscribed, c.subscribed) {
		c.subscribed = subscribed
		bump = true
	}
	if bump {
		c.epoch++
		c.metadataHash = subscriptionHash(c.subscribed)
		eff.Records = append(eff.Records, groupMetadataRecord(g.ID, c))
	}

	// 2. A new target assignment for a new group epoch.
	if c.epoch > c.assignmentEpoch {
		recs, err := m.computeTargetAssignment(g, img)
		if err != nil {
			return false, fmt.Errorf("Failed to compute a new target assignment for epoch %d: %v.", c.epoch, err)
		}
		eff.Records = append(eff.Records, recs...)
	}

	// 3. Reconcile the member with its target.
	changed := c.reconcile(member, owned, ownedSet, img)
	if changed {
		eff.Records = append(eff.Records, currentAssignmentRecord(g.ID, member))
	}
	if member.State == MemberUnrevokedPartitions {
		if member.revocationDeadline == 0 || changed {
			member.revocationDeadline = now + int64(member.RebalanceTimeoutMs)
		}
	} else {
		member.revocationDeadline = 0
	}
	g.syncConsumerState(now)
	return changed, nil
}

// consumerMember finds the heartbeat's member, or creates it on a join,
// and checks its epoch (Kafka's getOrMaybeCreateMember,
// throwIfMemberEpochIsInvalid and the static member rules of KIP-345).
func (m *Manager) consumerMember(now int64, g *Group, req *ConsumerHeartbeatRequest, eff *Effects) (*ConsumerMember, ConsumerHeartbeatReply, bool) {
	c := g.consumer
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	if req.MemberEpoch != JoinEpoch {
		member := c.members[req.MemberID]
		if member == nil {
			return nil, heartbeatError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.ID), false
		}
		if instance != "" && c.static[instance] != req.MemberID {
			return nil, heartbeatError(kerr.FencedInstanceID.Code, "Static member %s with instance id %s is not the member of that instance.", req.MemberID, instance), false
		}
		if r, ok := checkMemberEpoch(member, req); !ok {
			return nil, r, false
		}
		return member, ConsumerHeartbeatReply{}, true
	}
	memberID := req.MemberID
	if memberID == "" {
		memberID = m.newUUID()
	}
	if member := c.members[memberID]; member != nil && instance == "" {
		// A member rejoining with its id: it starts over, giving up
		// what it held (Kafka fences the old incarnation).
		eff.merge(m.fenceConsumerMember(now, g, member, false))
	}
	if instance != "" {
		if oldID, ok := c.static[instance]; ok {
			old := c.members[oldID]
			// A classic member's instance id is taken over at once
			// (Kafka checks only members of the consumer protocol).
			if old != nil && old.Epoch != StaticLeaveEpoch && old.Classic == nil {
				return nil, heartbeatError(kerr.UnreleasedInstanceID.Code, "Static member %s with instance id %s cannot join the group because the instance id is owned by member %s.", memberID, instance, oldID), false
			}
			if old != nil {
				// The new incarnation takes the old one's place and
				// partitions at its epoch, without a rebalance.
				member := m.replaceStaticConsumer(g, old, memberID, eff)
				return member, ConsumerHeartbeatReply{}, true
			}
		}
	}
	if c.members[memberID] == nil && len(c.members) >= m.cfg.consumerMaxSize() {
		return nil, heartbeatError(kerr.GroupMaxSizeReached.Code, "The consumer group has reached its maximum capacity of %d members.", m.cfg.consumerMaxSize()), false
	}
	member := &ConsumerMember{ID: memberID, InstanceID: instance}
	c.members[memberID] = member
	if instance != "" {
		c.static[instance] = memberID
	}
	return member, ConsumerHeartbeatReply{}, true
}

// checkMemberEpoch is Kafka's throwIfMemberEpochIsInvalid: an epoch ahead
// of the member's is fenced; one behind is accepted only if it is the
// previous epoch and the member owns no more than it is assigned now (the
// response that moved it on was lost).
func checkMemberEpoch(member *ConsumerMember, req *ConsumerHeartbeatRequest) (ConsumerHeartbeatReply, bool) {
	fenced := func() (ConsumerHeartbeatReply, bool) {
		return heartbeatError(kerr.FencedMemberEpoch.Code, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, member.Epoch), false
	}
	switch {
	case req.MemberEpoch > member.Epoch:
		return fenced()
	case req.MemberEpoch < member.Epoch:
		if req.MemberEpoch != member.PreviousEpoch || !req.OwnedSet || !ownedSubsetOf(req.Owned, member.Assigned) {
			r, _ := fenced()
			r.ErrorMessage = fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, member.Epoch)
			return r, false
		}
	}
	if member.State == MemberUnknown && (!req.OwnedSet || len(req.Owned) > 0) {
		r, _ := fenced()
		r.ErrorMessage = "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin."
		return r, false
	}
	return ConsumerHeartbeatReply{}, true
}

func ownedSubsetOf(owned map[TopicID][]int32, assigned partitionEpochs) bool {
	for t, ps := range owned {
		for _, p := range ps {
			if _, ok := assigned[t][p]; !ok {
				return false
			}
		}
	}
	return true
}

// replaceStaticMember hands a statically left member's place to its new
// incarnation (Kafka's consumerGroupStaticMemberGroupLeave and rejoin): the
// records of the old member id are removed, the new one's written with
// the same epoch, assignment and target.
func (m *Manager) replaceStaticConsumer(g *Group, old *ConsumerMember, newID string, eff *Effects) *ConsumerMember {
	c := g.consumer
	eff.Records = append(eff.Records,
		Record{Key: ConsumerGroupCurrentMemberAssignmentKey(g.ID, old.ID)},
		Record{Key: ConsumerGroupTargetAssignmentMemberKey(g.ID, old.ID)},
		Record{Key: ConsumerGroupMemberMetadataKey(g.ID, old.ID)})
	member := *old
	member.ID = newID
	member.Classic, member.joinDeadline, member.syncDeadline = nil, 0, 0
	member.Epoch = old.PreviousEpoch
	if member.Epoch <= 0 {
		member.Epoch = c.assignmentEpoch
	}
	delete(c.members, old.ID)
	c.members[newID] = &member
	c.static[member.InstanceID] = newID
	if t, ok := c.target[old.ID]; ok {
		delete(c.target, old.ID)
		c.target[newID] = t
		eff.Records = append(eff.Records, targetMemberRecord(g.ID, newID, t))
	}
	eff.Records = append(eff.Records, memberMetadataRecord(g.ID, &member), currentAssignmentRecord(g.ID, &member))
	return &member
}

// consumerLeave is a member leaving (epoch -1): it is fenced and the
// group epoch bumped, so the others get its partitions.
func (m *Manager) consumerLeave(now int64, g *Group, req ConsumerHeartbeatRequest) (ConsumerHeartbeatReply, Effects) {
	c := g.consumer
	member := c.members[req.MemberID]
	if req.InstanceID != nil {
		if r, ok := c.checkInstance(*req.InstanceID, req.MemberID); !ok {
			return r, Effects{}
		}
	}
	if member == nil {
		return heartbeatError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.ID), Effects{}
	}
	eff := m.fenceConsumerMember(now, g, member, true)
	return ConsumerHeartbeatReply{MemberID: req.MemberID, MemberEpoch: LeaveEpoch}, eff
}

// consumerStaticLeave is a static member leaving for now (epoch -2): it
// keeps its partitions, and its instance id, until its session expires or
// it comes back.
func (m *Manager) consumerStaticLeave(now int64, g *Group, req ConsumerHeartbeatRequest) (ConsumerHeartbeatReply, Effects) {
	c := g.consumer
	if r, ok := c.checkInstance(*req.InstanceID, req.MemberID); !ok {
		return r, Effects{}
	}
	member := c.members[req.MemberID]
	if member.Epoch != StaticLeaveEpoch {
		member.PreviousEpoch, member.Epoch = member.Epoch, StaticLeaveEpoch
	}
	member.revocationDeadline = 0
	g.syncConsumerState(now)
	return ConsumerHeartbeatReply{MemberID: member.ID, MemberEpoch: StaticLeaveEpoch},
		Effects{Records: []Record{currentAssignmentRecord(g.ID, member)}}
}

// checkInstance checks that a leaving static member is the member of its
// instance id.
func (c *consumerGroup) checkInstance(instance, memberID string) (ConsumerHeartbeatReply, bool) {
	id, ok := c.static[instance]
	switch {
	case !ok:
		return heartbeatError(kerr.UnknownMemberID.Code, "Instance id %s is unknown.", instance), false
	case id != memberID:
		return heartbeatError(kerr.FencedInstanceID.Code, "Static member %s with instance id %s is not the member of that instance.", memberID, instance), false
	}
	return ConsumerHeartbeatReply{}, true
}

// fenceConsumerMember removes a member (left, session expired, not
// revoking, joining or syncing in time, or rejoining): tombstones for its
// records and a group epoch bump, so that the next heartbeat computes a
// target assignment without it (Kafka's consumerGroupFenceMember). With
// mayDowngrade, the last member of the consumer protocol leaving a group
// of classic members turns it into a classic group (migration.go).
func (m *Manager) fenceConsumerMember(now int64, g *Group, member *ConsumerMember, mayDowngrade bool) Effects {
	if mayDowngrade {
		if eff, ok := m.downgradeToClassic(now, g, member); ok {
			return eff
		}
	}
	c := g.consumer
	eff := Effects{Records: c.removeMember(g.ID, member)}
	c.epoch++
	eff.Records = append(eff.Records, groupMetadataRecord(g.ID, c))
	g.syncConsumerState(now)
	return eff
}

// removeMember forgets a member and returns the tombstones of its records.
func (c *consumerGroup) removeMember(group string, member *ConsumerMember) []Record {
	c.dropOwnership(member)
	c.names = nil
	delete(c.members, member.ID)
	delete(c.target, member.ID)
	if member.InstanceID != "" && c.static[member.InstanceID] == member.ID {
		delete(c.static, member.InstanceID)
	}
	return []Record{
		{Key: ConsumerGroupCurrentMemberAssignmentKey(group, member.ID)},
		{Key: ConsumerGroupTargetAssignmentMemberKey(group, member.ID)},
		{Key: ConsumerGroupMemberMetadataKey(group, member.ID)},
	}
}

// syncConsumerState keeps the classic fields of a consumer group in line:
// State is Empty without members (offset expiry counts from then), Stable
// with some.
func (g *Group) syncConsumerState(now int64) {
	want := Stable
	if len(g.consumer.members) == 0 {
		want = Empty
	}
	if g.State != want {
		g.transition(want, now)
	}
}

// subscriptionMetadata returns the partition counts of the existing
// topics the members subscribe to, by name or by regex. The names are
// cached until a subscription changes or a regex is resolved again, so a
// heartbeat costs a lookup per subscribed topic, not per member.
func (c *consumerGroup) subscriptionMetadata(now int64, img TopicImage) map[TopicID]int32 {
	if c.refreshRegexes(now, img) {
		c.names = nil
	}
	if c.names == nil {
		c.names = map[string]bool{}
		for _, mem := range c.members {
			for _, name := range c.memberTopicNames(mem) {
				c.names[name] = true
			}
		}
	}
	out := make(map[TopicID]int32, len(c.names))
	for name := range c.names {
		if id, n, ok := img.TopicByName(name); ok {
			out[id] = n
		}
	}
	return out
}

// regexRefreshMs is how often the topics a subscribed regex matches are
// looked for again (Kafka's 10 s batch refresh of KIP-848 regexes; a new
// regex is resolved at once).
const regexRefreshMs = 10_000

// refreshRegexes resolves the members' regexes that are new or were last
// resolved regexRefreshMs ago, and reports whether a match changed.
func (c *consumerGroup) refreshRegexes(now int64, img TopicImage) bool {
	used := map[string]bool{}
	for _, mem := range c.members {
		if mem.SubscribedTopicRegex != "" {
			used[mem.SubscribedTopicRegex] = true
		}
	}
	changed := false
	for re := range c.regexes {
		if !used[re] {
			delete(c.regexes, re)
			changed = true
		}
	}
	var names []string
	for re := range used {
		r, ok := c.regexes[re]
		if ok && now < r.resolvedAt+regexRefreshMs {
			continue
		}
		if names == nil {
			names = img.TopicNames()
		}
		matched := matchTopics(re, names)
		if !ok || !slices.Equal(matched, r.topics) {
			changed = true
		}
		c.regexes[re] = resolvedRegex{topics: matched, resolvedAt: now}
	}
	return changed
}

// resolvedRegex is the topics a regex matched when last resolved.
type resolvedRegex struct {
	topics     []string
	resolvedAt int64
}

// compileTopicRegex compiles a subscription regex (Kafka: RE2J, whose
// syntax Go's regexp shares) to match whole topic names.
func compileTopicRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + re + ")$")
}

// matchTopics returns the names re matches, sorted.
func matchTopics(re string, names []string) []string {
	r, err := compileTopicRegex(re)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if r.MatchString(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// memberTopicNames is what a member subscribes to: its names and what its
// regex matched.
func (c *consumerGroup) memberTopicNames(mem *ConsumerMember) []string {
	if mem.SubscribedTopicRegex == "" {
		return mem.SubscribedTopicNames
	}
	return append(slices.Clip(mem.SubscribedTopicNames), c.regexes[mem.SubscribedTopicRegex].topics...)
}

// memberTopicIDs is the set of existing topics a member subscribes to.
func (c *consumerGroup) memberTopicIDs(mem *ConsumerMember, img TopicImage) map[TopicID]bool {
	out := map[TopicID]bool{}
	for _, name := range c.memberTopicNames(mem) {
		if id, _, ok := img.TopicByName(name); ok {
			out[id] = true
		}
	}
	return out
}

// subscriptionHash hashes the subscribed topics' partition counts, in
// topic id order.
func subscriptionHash(s map[TopicID]int32) int64 {
	h := fnv.New64a()
	for _, id := range slices.SortedFunc(maps.Keys(s), compareTopicIDs) {
		h.Write(id[:])
		n := s[id]
		h.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	}
	return int64(h.Sum64())
}

func compareTopicIDs(a, b TopicID) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// computeTargetAssignment runs the group's assignor for the group epoch
// and returns the records of the members whose target changed, then the
// target's epoch (Kafka's TargetAssignmentBuilder).
func (m *Manager) computeTargetAssignment(g *Group, img TopicImage) ([]Record, error) {
	c := g.consumer
	topics := map[TopicID]AssignorTopic{}
	for id, n := range c.subscribed {
		name, _, _ := img.TopicByID(id)
		topics[id] = AssignorTopic{Name: name, Partitions: n}
	}
	ids := slices.Sorted(maps.Keys(c.members))
	members := make([]AssignorMember, 0, len(ids))
	for _, id := range ids {
		mem := c.members[id]
		var sub []TopicID
		for t := range c.memberTopicIDs(mem, img) {
			if _, ok := topics[t]; ok {
				sub = append(sub, t)
			}
		}
		slices.SortFunc(sub, compareTopicIDs)
		members = append(members, AssignorMember{ID: id, InstanceID: mem.InstanceID, RackID: mem.RackID,
			Subscribed: sub, Current: c.target[id]})
	}
	result, err := Assign(c.preferredAssignor(m.cfg.consumerAssignors()), members, topics)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, id := range ids {
		t := result[id]
		if t == nil {
			t = map[TopicID][]int32{}
		}
		if !equalAssignment(c.target[id], t) || c.target[id] == nil {
			recs = append(recs, targetMemberRecord(g.ID, id, t))
		}
		c.target[id] = t
	}
	c.assignmentEpoch = c.epoch
	recs = append(recs, targetMetadataRecord(g.ID, c.assignmentEpoch))
	return recs, nil
}

// preferredAssignor is the assignor most members ask for (Kafka's
// computePreferredServerAssignor), ties broken by name, else the first of
// group.consumer.assignors. A name no longer configured (a restart with
// fewer assignors) gets no vote.
func (c *consumerGroup) preferredAssignor(supported []string) string {
	votes := map[string]int{}
	for _, mem := range c.members {
		if mem.ServerAssignor != "" && slices.Contains(supported, mem.ServerAssignor) {
			votes[mem.ServerAssignor]++
		}
	}
	best, bestVotes := "", 0
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	if best == "" && len(supported) > 0 {
		best = supported[0]
	}
	return best
}

func equalAssignment(a, b map[TopicID][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

// reconcile moves a member towards its target assignment (Kafka's
// CurrentAssignmentBuilder) and reports whether it changed.
func (c *consumerGroup) reconcile(mem *ConsumerMember, owned map[TopicID][]int32, ownedSet bool, img TopicImage) bool {
	ownsRevoked := func(pending partitionEpochs) bool {
		if !ownedSet {
			return true
		}
		for t, ps := range owned {
			for _, p := range ps {
				if _, ok := pending[t][p]; ok {
					return true
				}
			}
		}
		return false
	}
	switch mem.State {
	case MemberStable:
		if mem.Epoch == c.assignmentEpoch {
			return false
		}
	case MemberUnrevokedPartitions:
		if ownsRevoked(mem.PendingRevocation) {
			return false
		}
	case MemberUnknown:
		mem.Epoch = c.assignmentEpoch
	}
	subscribed := c.memberTopicIDs(mem, img)
	target := c.target[mem.ID]
	assigned, revoke, pending := partitionEpochs{}, partitionEpochs{}, map[TopicID][]int32{}
	unreleased := false
	topics := map[TopicID]bool{}
	for t := range target {
		topics[t] = true
	}
	for t := range mem.Assigned {
		topics[t] = true
	}
	for t := range topics {
		want := target[t]
		if !subscribed[t] {
			want = nil
		}
		cur := mem.Assigned[t]
		for p, e := range cur {
			if slices.Contains(want, p) {
				setEpoch(assigned, t, p, e)
			} else {
				setEpoch(revoke, t, p, e)
			}
		}
		for _, p := range want {
			if _, ok := cur[p]; ok {
				continue
			}
			_, ownedByOther := c.owners[t][p]
			if _, mine := mem.PendingRevocation[t][p]; ownedByOther && !mine {
				unreleased = true
				continue
			}
			pending[t] = append(pending[t], p)
		}
	}
	next := *mem
	switch {
	case len(revoke) > 0 && ownsRevoked(revoke):
		next.State = MemberUnrevokedPartitions
		next.Assigned, next.PendingRevocation = assigned, revoke
	default:
		for t, ps := range pending {
			for _, p := range ps {
				setEpoch(assigned, t, p, c.assignmentEpoch)
			}
		}
		next.State = MemberStable
		if unreleased {
			next.State = MemberUnreleasedPartitions
		}
		if mem.Epoch != c.assignmentEpoch {
			next.PreviousEpoch, next.Epoch = mem.Epoch, c.assignmentEpoch
		}
		next.Assigned, next.PendingRevocation = assigned, partitionEpochs{}
	}
	if next.State == mem.State && next.Epoch == mem.Epoch && sameEpochs(next.Assigned, mem.Assigned) &&
		sameEpochs(next.PendingRevocation, mem.PendingRevocation) {
		return false
	}
	c.dropOwnership(mem)
	*mem = next
	c.addOwnership(mem)
	return true
}

func setEpoch(m partitionEpochs, t TopicID, p, e int32) {
	ps := m[t]
	if ps == nil {
		ps = map[int32]int32{}
		m[t] = ps
	}
	ps[p] = e
}

func sameEpochs(a, b partitionEpochs) bool {
	return maps.EqualFunc(a, b, func(x, y map[int32]int32) bool { return maps.Equal(x, y) })
}

func cloneEpochs(a partitionEpochs) partitionEpochs {
	out := make(partitionEpochs, len(a))
	for t, ps := range a {
		out[t] = maps.Clone(ps)
	}
	return out
}

// epochKeys returns the partitions of a, sorted.
func epochKeys(a partitionEpochs) map[TopicID][]int32 {
	out := make(map[TopicID][]int32, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out[t] = slices.Sorted(maps.Keys(ps))
		}
	}
	return out
}

func equalEpochKeys(a, b partitionEpochs) bool {
	return maps.EqualFunc(a, b, func(x, y map[int32]int32) bool {
		if len(x) != len(y) {
			return false
		}
		for p := range x {
			if _, ok := y[p]; !ok {
				return false
			}
		}
		return true
	})
}

// addOwnership records mem as the owner of its assigned and pending
// partitions; dropOwnership forgets it.
func (c *consumerGroup) addOwnership(mem *ConsumerMember) {
	for _, set := range []partitionEpochs{mem.Assigned, mem.PendingRevocation} {
		for t, ps := range set {
			for p := range ps {
				setEpoch(c.owners, t, p, mem.Epoch)
			}
		}
	}
}

func (c *consumerGroup) dropOwnership(mem *ConsumerMember) {
	for _, set := range []partitionEpochs{mem.Assigned, mem.PendingRevocation} {
		for t, ps := range set {
			for p := range ps {
				delete(c.owners[t], p)
			}
			if len(c.owners[t]) == 0 {
				delete(c.owners, t)
			}
		}
	}
}

// sameMemberMetadata reports whether two members' stored metadata (the
// member metadata record) are equal.
func sameMemberMetadata(a, b *ConsumerMember) bool {
	return a.InstanceID == b.InstanceID && a.RackID == b.RackID && a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames) && a.SubscribedTopicRegex == b.SubscribedTopicRegex &&
		a.ServerAssignor == b.ServerAssignor && a.RebalanceTimeoutMs == b.RebalanceTimeoutMs && sameClassic(a.Classic, b.Classic)
}

func sameClassic(a, b *ClassicMemberMetadata) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.SessionTimeoutMs == b.SessionTimeoutMs && slices.EqualFunc(a.SupportedProtocols, b.SupportedProtocols,
		func(x, y Protocol) bool { return x.Name == y.Name && string(x.Metadata) == string(y.Metadata) })
}

// consumerTick fences members whose session expired or that did not
// revoke, rejoin or sync in time.
func (m *Manager) consumerTick(now int64, g *Group) Effects {
	var eff Effects
	for _, id := range slices.Sorted(maps.Keys(g.consumer.members)) {
		if g.consumer == nil {
			break // downgraded to a classic group
		}
		mem := g.consumer.members[id]
		if mem != nil && now >= mem.deadline() {
			eff.merge(m.fenceConsumerMember(now, g, mem, true))
		}
	}
	return eff
}

// deadline is the earliest of the member's deadlines.
func (mem *ConsumerMember) deadline() int64 {
	next := mem.sessionDeadline
	for _, d := range []int64{mem.revocationDeadline, mem.joinDeadline, mem.syncDeadline} {
		if d > 0 {
			next = min(next, d)
		}
	}
	return next
}

func (c *consumerGroup) nextDeadline(next int64) int64 {
	for _, mem := range c.members {
		next = min(next, mem.deadline())
	}
	return next
}

// deleteRecords are the tombstones of a group's own records, without its
// offsets: a classic group's metadata, or an empty consumer group's
// (Kafka's ConsumerGroup.createGroupTombstoneRecords).
func (g *Group) deleteRecords() []Record {
	if g.consumer == nil {
		return []Record{{Key: GroupKey(g.ID)}}
	}
	return []Record{
		{Key: ConsumerGroupTargetAssignmentMetadataKey(g.ID)},
		{Key: ConsumerGroupPartitionMetadataKey(g.ID)},
		{Key: ConsumerGroupMetadataKey(g.ID)},
	}
}

// consumerCommitCode checks an OffsetCommit's member and epoch against a
// consumer group (Kafka's ConsumerGroup.validateOffsetCommit, with
// KIP-1251: an older epoch is accepted for partitions the member was
// assigned at or before it).
func (g *Group) consumerCommitCode(memberID string, epoch int32, version int16, txn bool, parts []TopicPartition, img TopicImage) (int16, string) {
	c := g.consumer
	if epoch < 0 && memberID == "" && len(c.members) == 0 {
		return 0, ""
	}
	mem := c.members[memberID]
	if mem == nil {
		return kerr.UnknownMemberID.Code, ""
	}
	if mem.Classic != nil {
		// A classic member commits with its generation, the member
		// epoch (Kafka's validateMemberEpoch for the classic protocol).
		if epoch != mem.Epoch {
			return kerr.IllegalGeneration.Code, ""
		}
		return 0, ""
	}
	if !txn && version < 9 {
		return kerr.UnsupportedVersion.Code, "OffsetCommit version 9 or above must be used by members using the modern group protocol"
	}
	switch {
	case epoch == mem.Epoch:
		return 0, ""
	case epoch > mem.Epoch || epoch <= 0 || img == nil:
		return kerr.StaleMemberEpoch.Code, ""
	}
	for _, tp := range parts {
		id, _, ok := img.TopicByName(tp.Topic)
		if !ok {
			return kerr.StaleMemberEpoch.Code, ""
		}
		e, ok := mem.Assigned[id][tp.Partition]
		if !ok {
			e, ok = mem.PendingRevocation[id][tp.Partition]
		}
		if !ok || e > epoch {
			return kerr.StaleMemberEpoch.Code, ""
		}
	}
	return 0, ""
}

// ConsumerFetchCode checks an OffsetFetch's member and epoch (v9+) against
// a consumer group (Kafka's ConsumerGroup.validateOffsetFetch).
func (m *Manager) ConsumerFetchCode(group, memberID string, epoch int32) int16 {
	g := m.groups[group]
	if g == nil || g.consumer == nil || (memberID == "" && epoch < 0) {
		return 0
	}
	mem := g.consumer.members[memberID]
	switch {
	case mem == nil:
		return kerr.UnknownMemberID.Code
	case epoch != mem.Epoch && mem.Classic != nil:
		return kerr.IllegalGeneration.Code
	case epoch != mem.Epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ConsumerMemberDescription is a member as ConsumerGroupDescribe reports it.
type ConsumerMemberDescription struct {
	ConsumerMember
	Target map[TopicID][]int32
}

// ConsumerGroupDescription is a consumer group as ConsumerGroupDescribe
// reports it.
type ConsumerGroupDescription struct {
	ErrorCode       int16
	ErrorMessage    string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// DescribeConsumer is ConsumerGroupDescribe for one group.
func (m *Manager) DescribeConsumer(group string) ConsumerGroupDescription {
	g := m.groups[group]
	switch {
	case g == nil || g.State == Dead:
		return ConsumerGroupDescription{ErrorCode: kerr.GroupIDNotFound.Code, ErrorMessage: fmt.Sprintf("Group %s not found.", group)}
	case g.consumer == nil:
		return ConsumerGroupDescription{ErrorCode: kerr.GroupIDNotFound.Code, ErrorMessage: fmt.Sprintf("Group %s is not a consumer group.", group)}
	}
	c := g.consumer
	d := ConsumerGroupDescription{State: g.ConsumerState(), Epoch: c.epoch, AssignmentEpoch: c.assignmentEpoch,
		Assignor: c.preferredAssignor(m.cfg.consumerAssignors())}
	for _, id := range slices.Sorted(maps.Keys(c.members)) {
		mem := c.members[id]
		d.Members = append(d.Members, ConsumerMemberDescription{ConsumerMember: *mem, Target: c.target[id]})
	}
	return d
}

// ConsumerMembers returns the members of a consumer group, sorted by id
// (nil for another group).
func (m *Manager) ConsumerMembers(group string) []*ConsumerMember {
	g := m.groups[group]
	if g == nil || g.consumer == nil {
		return nil
	}
	var out []*ConsumerMember
	for _, id := range slices.Sorted(maps.Keys(g.consumer.members)) {
		out = append(out, g.consumer.members[id])
	}
	return out
}

// consumerString renders a consumer group's state for tests.
func (g *Group) consumerString() string {
	c := g.consumer
	s := fmt.Sprintf(" consumer-state=%s epoch=%d assignment-epoch=%d", g.ConsumerState(), c.epoch, c.assignmentEpoch)
	ids := make([]string, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		mem := c.members[id]
		s += fmt.Sprintf("\n  consumer-member %s epoch=%d prev=%d %s assigned=%v revoking=%v target=%v",
			id, mem.Epoch, mem.PreviousEpoch, mem.State, epochKeys(mem.Assigned), epochKeys(mem.PendingRevocation), c.target[id])
		if cm := mem.Classic; cm != nil {
			s += fmt.Sprintf(" classic(session=%d protocols=%d)", cm.SessionTimeoutMs, len(cm.SupportedProtocols))
		}
	}
	return s
}
