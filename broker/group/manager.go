package group

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Config are the broker settings the state machine follows. Durations are
// milliseconds.
type Config struct {
	MinSessionTimeoutMs   int64 // group.min.session.timeout.ms
	MaxSessionTimeoutMs   int64 // group.max.session.timeout.ms
	MaxSize               int   // group.max.size
	InitialRebalanceDelay int64 // group.initial.rebalance.delay.ms
	// OffsetsRetentionMs is offsets.retention.minutes in ms; offsets of
	// Empty groups older than it expire (KIP-211).
	OffsetsRetentionMs int64
	// OffsetsRetentionCheckMs is offsets.retention.check.interval.ms.
	OffsetsRetentionCheckMs int64
	// MaxMetadataSize is offset.metadata.max.bytes.
	MaxMetadataSize int

	// KIP-848 consumer groups; zero values take Kafka's defaults.
	ConsumerSessionTimeoutMs    int64    // group.consumer.session.timeout.ms
	ConsumerHeartbeatIntervalMs int64    // group.consumer.heartbeat.interval.ms
	ConsumerMaxSize             int      // group.consumer.max.size
	ConsumerAssignors           []string // group.consumer.assignors, the default first
	ConsumerMigrationPolicy     string   // group.consumer.migration.policy ("" is bidirectional)
}

func (c *Config) consumerSessionTimeout() int64 {
	if c.ConsumerSessionTimeoutMs > 0 {
		return c.ConsumerSessionTimeoutMs
	}
	return 45000
}

func (c *Config) consumerHeartbeatInterval() int64 {
	if c.ConsumerHeartbeatIntervalMs > 0 {
		return c.ConsumerHeartbeatIntervalMs
	}
	return 5000
}

func (c *Config) consumerMaxSize() int {
	if c.ConsumerMaxSize > 0 {
		return c.ConsumerMaxSize
	}
	return 1<<31 - 1
}

func (c *Config) consumerAssignors() []string {
	if len(c.ConsumerAssignors) > 0 {
		return c.ConsumerAssignors
	}
	return ServerAssignors
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 1800000, MaxSize: 1<<31 - 1,
		InitialRebalanceDelay: 3000, OffsetsRetentionMs: 7 * 24 * 3600 * 1000,
		OffsetsRetentionCheckMs: 600000, MaxMetadataSize: 4096}
}

// Manager holds the groups of one __consumer_offsets partition (Kafka's
// GroupMetadataManager cache and GroupCoordinator logic for it). See the
// package doc for its contract.
type Manager struct {
	cfg    Config
	groups map[string]*Group
	// newUUID returns a fresh unique suffix for member ids (Kafka uses a
	// random UUID; tests a counter).
	newUUID func() string
	// nextExpiryCheck is when Tick next looks for expired offsets.
	nextExpiryCheck int64
	// lastOffset is the highest __consumer_offsets offset an apply or a
	// replay was given, -1 before any: the place of a record whose caller
	// did not say where it is (ApplyCommits, Replay).
	lastOffset int64
	// txnGroups are the groups that hold pending transactional offsets of
	// each producer id (Kafka's openGroupsForProducer), so a transaction
	// marker visits only those. An entry may name a group that no longer
	// holds any (deleted, or its offsets were deleted): CompleteTxn then
	// finds nothing to do.
	txnGroups map[int64]map[string]struct{}
	// txnWriteSeq numbers TxnOffsetCommit writes (for Group.String).
	txnWriteSeq uint64
	// Topics, if set, returns the cluster's topics now: the classic
	// requests to consumer groups and the conversions between the two
	// protocols need them (migration.go).
	Topics func() TopicImage
	// GroupConfigs, if set, returns a group's own session timeout and
	// heartbeat interval (KIP-848 group configs: consumer.session.
	// timeout.ms, consumer.heartbeat.interval.ms), 0 for those it does
	// not set.
	GroupConfigs func(group string) (sessionTimeoutMs, heartbeatIntervalMs int64)
}

// consumerSessionTimeout is a consumer group's session timeout: its group
// config, else group.consumer.session.timeout.ms.
func (m *Manager) consumerSessionTimeout(group string) int64 {
	if m.GroupConfigs != nil {
		if v, _ := m.GroupConfigs(group); v > 0 {
			return v
		}
	}
	return m.cfg.consumerSessionTimeout()
}

// consumerHeartbeatInterval is a consumer group's heartbeat interval: its
// group config, else group.consumer.heartbeat.interval.ms.
func (m *Manager) consumerHeartbeatInterval(group string) int64 {
	if m.GroupConfigs != nil {
		if _, v := m.GroupConfigs(group); v > 0 {
			return v
		}
	}
	return m.cfg.consumerHeartbeatInterval()
}

// NewManager returns a Manager with no groups. newUUID must return a
// string never returned before.
func NewManager(cfg Config, now int64, newUUID func() string) *Manager {
	return &Manager{cfg: cfg, groups: map[string]*Group{}, newUUID: newUUID, nextExpiryCheck: now + cfg.OffsetsRetentionCheckMs,
		lastOffset: -1, txnGroups: map[int64]map[string]struct{}{}}
}

// Group returns a group, or nil.
func (m *Manager) Group(id string) *Group { return m.groups[id] }

// GroupIDs returns the ids of the groups, sorted.
func (m *Manager) GroupIDs() []string {
	out := make([]string, 0, len(m.groups))
	for id := range m.groups {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Effects is what the caller must do after a call: append Records to the
// partition (in order, as one batch) and, once they are committed (the
// high watermark passed them), apply Commits (ApplyCommitsAt, with the
// batch's offset) and send the replies. With no Records, it sends the
// replies at once. If the append fails it answers the replies with the
// failure's error code instead, calls FailCommits with Commits, and calls
// StoreFailed for the groups whose metadata it could not store.
type Effects struct {
	Records []Record
	Joins   []JoinReply
	Syncs   []SyncReply
	Commits []PendingCommit
	// Stored names the groups whose metadata Records carry.
	Stored []string
	// Txn is nil unless Records are a TxnOffsetCommit's (CommitTxnOffsets):
	// the caller must then append them as one transactional batch of that
	// producer id and epoch, so that the producer's COMMIT or ABORT marker
	// decides them, and never together with other Effects' records.
	Txn *TxnProducer
}

func (e *Effects) merge(o Effects) {
	e.Records = append(e.Records, o.Records...)
	e.Joins = append(e.Joins, o.Joins...)
	e.Syncs = append(e.Syncs, o.Syncs...)
	e.Commits = append(e.Commits, o.Commits...)
	e.Stored = append(e.Stored, o.Stored...)
}

// storeGroup adds a record of g's metadata.
func (e *Effects) storeGroup(g *Group, now int64) {
	e.Records = append(e.Records, Record{Key: GroupKey(g.ID), Value: groupValue(g, now)})
	e.Stored = append(e.Stored, g.ID)
}

// JoinRequest is a JoinGroup for one group.
type JoinRequest struct {
	Waiter             Waiter
	Version            int16
	Group              string
	MemberID           string
	InstanceID         string
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int64
	RebalanceTimeoutMs int64
	ProtocolType       string
	Protocols          []Protocol
}

// JoinMember is one member as the leader's JoinGroup response lists it.
type JoinMember struct {
	ID         string
	InstanceID string
	Metadata   []byte
}

// JoinReply answers a JoinGroup.
type JoinReply struct {
	Waiter         Waiter
	ErrorCode      int16
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	MemberID       string
	SkipAssignment bool
	Members        []JoinMember
}

// SyncRequest is a SyncGroup. ProtocolType and Protocol are "" when the
// request does not carry them (before v5).
type SyncRequest struct {
	Waiter       Waiter
	Group        string
	MemberID     string
	InstanceID   string
	Generation   int32
	ProtocolType string
	Protocol     string
	Assignments  map[string][]byte
}

// SyncReply answers a SyncGroup.
type SyncReply struct {
	Waiter       Waiter
	ErrorCode    int16
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Join handles a JoinGroup (Kafka's GroupCoordinator.handleJoinGroup). The
// reply is either among the returned Effects' Joins or, when the request
// parks until the rebalance completes, in the Effects of a later call.
func (m *Manager) Join(now int64, req JoinRequest) Effects {
	fail := func(code int16) Effects {
		return Effects{Joins: []JoinReply{{Waiter: req.Waiter, ErrorCode: code, MemberID: req.MemberID, Generation: -1}}}
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID.Code)
	case req.SessionTimeoutMs < m.cfg.MinSessionTimeoutMs || req.SessionTimeoutMs > m.cfg.MaxSessionTimeoutMs:
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	g := m.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return fail(kerr.UnknownMemberID.Code)
		}
		g = newGroup(req.Group, now)
		m.groups[req.Group] = g
	}
	if g.State == Dead {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	if g.consumer != nil {
		// Classic members join a consumer group with members as its
		// members (migration.go); an empty one becomes a classic group.
		if len(g.consumer.members) > 0 {
			return m.classicJoinToConsumer(now, g, req)
		}
		recs := g.deleteRecords()
		g.consumer = nil
		g.ProtocolType = ""
		eff := m.Join(now, req)
		eff.Records = append(recs, eff.Records...)
		return eff
	}
	known := req.MemberID != "" && (g.Members[req.MemberID] != nil || g.pendingMembers[req.MemberID] != 0)
	if !known && len(g.Members) >= m.cfg.MaxSize {
		if len(g.Members) == 0 && !g.hasPendingTxn() {
			delete(m.groups, g.ID)
		}
		return fail(kerr.GroupMaxSizeReached.Code)
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		if len(g.Members) == 0 && len(g.Offsets) == 0 && g.Generation == 0 && !g.hasPendingTxn() {
			delete(m.groups, g.ID)
		}
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if req.MemberID == "" {
		return m.joinUnknownMember(now, g, req)
	}
	return m.joinKnownMember(now, g, req)
}

// joinUnknownMember is Kafka's doNewMemberJoinGroup and
// doStaticNewMemberJoinGroup.
func (m *Manager) joinUnknownMember(now int64, g *Group, req JoinRequest) Effects {
	prefix := req.ClientID
	if req.InstanceID != "" {
		prefix = req.InstanceID
	}
	newID := prefix + "-" + m.newUUID()
	if req.InstanceID != "" {
		if oldID, ok := g.staticMembers[req.InstanceID]; ok {
			return m.replaceStaticMember(now, g, req, oldID, newID)
		}
	} else if req.Version >= 4 {
		// KIP-394: hand out the member id first; the member joins with it.
		g.pendingMembers[newID] = now + req.SessionTimeoutMs
		return Effects{Joins: []JoinReply{{Waiter: req.Waiter, ErrorCode: kerr.MemberIDRequired.Code, MemberID: newID, Generation: -1}}}
	}
	return m.addMemberAndRebalance(now, g, req, newID)
}

// addMemberAndRebalance adds a member with a parked JoinGroup and moves the
// group to (or keeps it in) PreparingRebalance.
func (m *Manager) addMemberAndRebalance(now int64, g *Group, req JoinRequest, id string) Effects {
	mem := &Member{ID: id, InstanceID: req.InstanceID, ClientID: req.ClientID, ClientHost: req.ClientHost,
		SessionTimeoutMs: req.SessionTimeoutMs, RebalanceTimeoutMs: req.RebalanceTimeoutMs,
		ProtocolType: req.ProtocolType, Protocols: req.Protocols,
		joinWaiter: req.Waiter, joinVersion: req.Version, isNew: true,
		heartbeatDeadline: now + req.SessionTimeoutMs}
	if len(g.Members) == 0 {
		g.ProtocolType = req.ProtocolType
	}
	g.Members[id] = mem
	if req.InstanceID != "" {
		g.staticMembers[req.InstanceID] = id
	}
	delete(g.pendingMembers, id)
	if g.Leader == "" {
		g.Leader = id
	}
	if g.State == PreparingRebalance && g.initialDelay {
		// InitialDelayedJoin: a new member extends the delay.
		g.rebalanceDeadline = min(now+m.cfg.InitialRebalanceDelay, g.rebalanceLimit)
	}
	return m.prepareRebalance(now, g)
}

// replaceStaticMember is Kafka's updateStaticMemberAndRebalance: a static
// member rejoining without its member id takes a new one; the old one is
// fenced. A Stable group whose protocol would not change is not rebalanced
// (KIP-345): the member gets the current generation back.
func (m *Manager) replaceStaticMember(now int64, g *Group, req JoinRequest, oldID, newID string) Effects {
	var eff Effects
	old := g.Members[oldID]
	if old.joinWaiter != nil {
		eff.Joins = append(eff.Joins, JoinReply{Waiter: old.joinWaiter, ErrorCode: kerr.FencedInstanceID.Code, MemberID: oldID, Generation: -1})
	}
	if old.syncWaiter != nil {
		eff.Syncs = append(eff.Syncs, SyncReply{Waiter: old.syncWaiter, ErrorCode: kerr.FencedInstanceID.Code})
	}
	delete(g.Members, oldID)
	mem := *old
	mem.ID, mem.joinWaiter, mem.syncWaiter = newID, nil, nil
	mem.ClientID, mem.ClientHost = req.ClientID, req.ClientHost
	mem.SessionTimeoutMs, mem.RebalanceTimeoutMs = req.SessionTimeoutMs, req.RebalanceTimeoutMs
	mem.Protocols = req.Protocols
	mem.heartbeatDeadline = now + req.SessionTimeoutMs
	g.Members[newID] = &mem
	g.staticMembers[req.InstanceID] = newID
	oldLeader := g.Leader
	if g.Leader == oldID {
		g.Leader = newID
	}
	switch g.State {
	case Stable:
		// Kafka compares only the protocol the group would select: a
		// restarted consumer's metadata differs anyway (its owned
		// partitions and generation are gone).
		if g.selectProtocol() == g.Protocol {
			r := JoinReply{Waiter: req.Waiter, Generation: g.Generation, ProtocolType: g.ProtocolType,
				Protocol: g.Protocol, Leader: g.Leader, MemberID: newID}
			if req.Version >= 9 {
				if g.Leader == newID {
					r.SkipAssignment, r.Members = true, g.joinMembers()
				}
			} else {
				// Before v9 a member told it leads would assign, to a
				// stable group that sends no one the result: the answer
				// names the leader as it was before the replacement,
				// never the new member id (Kafka's currentLeader).
				// librdkafka, told it leads with no members, crashes.
				r.Leader = oldLeader
			}
			eff.storeGroup(g, now)
			eff.Joins = append(eff.Joins, r)
			return eff
		}
		mem.joinWaiter, mem.joinVersion = req.Waiter, req.Version
		eff.merge(m.prepareRebalance(now, g))
	case CompletingRebalance, Empty:
		mem.joinWaiter, mem.joinVersion = req.Waiter, req.Version
		eff.merge(m.prepareRebalance(now, g))
	case PreparingRebalance:
		mem.joinWaiter, mem.joinVersion = req.Waiter, req.Version
		eff.merge(m.maybeCompleteJoin(now, g))
	}
	return eff
}

// joinKnownMember is Kafka's doCurrentMemberJoinGroup (and the pending
// member case of KIP-394).
func (m *Manager) joinKnownMember(now int64, g *Group, req JoinRequest) Effects {
	fail := func(code int16) Effects {
		return Effects{Joins: []JoinReply{{Waiter: req.Waiter, ErrorCode: code, MemberID: req.MemberID, Generation: -1}}}
	}
	if _, pending := g.pendingMembers[req.MemberID]; pending {
		return m.addMemberAndRebalance(now, g, req, req.MemberID)
	}
	if code := g.checkStatic(req.MemberID, req.InstanceID); code != 0 {
		return fail(code)
	}
	mem := g.Members[req.MemberID]
	if mem == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	switch g.State {
	case PreparingRebalance:
		var eff Effects
		if mem.joinWaiter != nil {
			// A retried join replaces the parked one (Kafka answers the
			// old with its new callback's result; the old is orphaned).
			eff.Joins = append(eff.Joins, JoinReply{Waiter: mem.joinWaiter, ErrorCode: kerr.RebalanceInProgress.Code, MemberID: mem.ID, Generation: -1})
		}
		m.updateMember(now, mem, req)
		eff.merge(m.maybeCompleteJoin(now, g))
		return eff
	case CompletingRebalance:
		if mem.sameProtocols(req.Protocols) {
			// The member missed the join response: send it again.
			return Effects{Joins: []JoinReply{g.joinReplyFor(req.Waiter, mem, req.Version)}}
		}
		m.updateMember(now, mem, req)
		return m.prepareRebalance(now, g)
	case Stable:
		if g.Leader == mem.ID || !mem.sameProtocols(req.Protocols) {
			m.updateMember(now, mem, req)
			return m.prepareRebalance(now, g)
		}
		mem.heartbeatDeadline = now + mem.SessionTimeoutMs
		return Effects{Joins: []JoinReply{g.joinReplyFor(req.Waiter, mem, req.Version)}}
	}
	return fail(kerr.UnknownMemberID.Code)
}

// updateMember records a rejoining member's request and parks its join.
func (m *Manager) updateMember(now int64, mem *Member, req JoinRequest) {
	mem.ClientID, mem.ClientHost = req.ClientID, req.ClientHost
	mem.SessionTimeoutMs, mem.RebalanceTimeoutMs = req.SessionTimeoutMs, req.RebalanceTimeoutMs
	mem.Protocols = req.Protocols
	mem.joinWaiter, mem.joinVersion = req.Waiter, req.Version
	mem.heartbeatDeadline = now + req.SessionTimeoutMs
}

// checkStatic is Kafka's isStaticMemberFenced: FENCED_INSTANCE_ID when the
// instance id belongs to another member id, UNKNOWN_MEMBER_ID when a
// static member's instance id is unknown.
func (g *Group) checkStatic(memberID, instanceID string) int16 {
	if instanceID == "" {
		return 0
	}
	id, ok := g.staticMembers[instanceID]
	switch {
	case !ok:
		return kerr.UnknownMemberID.Code
	case id != memberID:
		return kerr.FencedInstanceID.Code
	}
	return 0
}

// joinMembers is the member list a leader's JoinGroup response carries.
func (g *Group) joinMembers() []JoinMember {
	var out []JoinMember
	for _, mem := range g.memberList() {
		out = append(out, JoinMember{ID: mem.ID, InstanceID: mem.InstanceID, Metadata: mem.metadata(g.Protocol)})
	}
	return out
}

// joinReplyFor is the JoinGroup response of the current generation for mem.
func (g *Group) joinReplyFor(w Waiter, mem *Member, version int16) JoinReply {
	r := JoinReply{Waiter: w, Generation: g.Generation, ProtocolType: g.ProtocolType, Protocol: g.Protocol,
		Leader: g.Leader, MemberID: mem.ID}
	if g.Leader == mem.ID {
		r.Members = g.joinMembers()
	}
	return r
}

// prepareRebalance is Kafka's prepareRebalance: members of a generation
// being assigned lose their pending SyncGroup (REBALANCE_IN_PROGRESS) and
// the group waits for every member to rejoin.
func (m *Manager) prepareRebalance(now int64, g *Group) Effects {
	var eff Effects
	switch g.State {
	case PreparingRebalance:
		return m.maybeCompleteJoin(now, g)
	case CompletingRebalance:
		for _, mem := range g.memberList() {
			mem.Assignment = nil
			if mem.syncWaiter != nil {
				eff.Syncs = append(eff.Syncs, SyncReply{Waiter: mem.syncWaiter, ErrorCode: kerr.RebalanceInProgress.Code})
				mem.syncWaiter = nil
			}
		}
	}
	if g.State == Empty && m.cfg.InitialRebalanceDelay > 0 {
		limit := g.maxRebalanceTimeout()
		g.initialDelay = true
		g.rebalanceLimit = now + limit
		g.rebalanceDeadline = now + min(m.cfg.InitialRebalanceDelay, limit)
	} else {
		g.initialDelay = false
		g.rebalanceDeadline = now + g.maxRebalanceTimeout()
	}
	g.transition(PreparingRebalance, now)
	eff.merge(m.maybeCompleteJoin(now, g))
	return eff
}

// maybeCompleteJoin completes the join phase once every member rejoined
// (never early during the initial delay).
func (m *Manager) maybeCompleteJoin(now int64, g *Group) Effects {
	if g.State != PreparingRebalance || g.initialDelay || !g.allJoined() {
		return Effects{}
	}
	return m.completeJoin(now, g)
}

// completeJoin is Kafka's onCompleteJoin: dynamic members that did not
// rejoin are removed, the generation advances, the protocol is chosen by
// vote, and every parked JoinGroup is answered (the leader's with the
// member list). An emptied group becomes Empty and is stored.
func (m *Manager) completeJoin(now int64, g *Group) Effects {
	var eff Effects
	for _, mem := range g.memberList() {
		if mem.joinWaiter == nil && mem.InstanceID == "" {
			m.removeMember(g, mem)
		}
	}
	g.pendingMembers = map[string]int64{}
	g.initialDelay = false
	g.Generation++
	if len(g.Members) == 0 {
		g.Protocol, g.Leader = "", ""
		g.transition(Empty, now)
		eff.storeGroup(g, now)
		return eff
	}
	if l := g.Members[g.Leader]; l == nil || l.joinWaiter == nil {
		for _, mem := range g.memberList() {
			if mem.joinWaiter != nil {
				g.Leader = mem.ID
				break
			}
		}
	}
	g.Protocol = g.selectProtocol()
	g.transition(CompletingRebalance, now)
	for _, mem := range g.memberList() {
		mem.isNew = false
		mem.heartbeatDeadline = now + mem.SessionTimeoutMs
		if mem.joinWaiter == nil {
			continue
		}
		eff.Joins = append(eff.Joins, g.joinReplyFor(mem.joinWaiter, mem, mem.joinVersion))
		mem.joinWaiter = nil
	}
	return eff
}

// removeMember drops a member (its parked requests are the caller's).
func (m *Manager) removeMember(g *Group, mem *Member) {
	delete(g.Members, mem.ID)
	if mem.InstanceID != "" && g.staticMembers[mem.InstanceID] == mem.ID {
		delete(g.staticMembers, mem.InstanceID)
	}
	if g.Leader == mem.ID {
		g.Leader = ""
		for _, o := range g.memberList() {
			g.Leader = o.ID
			break
		}
	}
}

// expelMember removes a member that left or whose session expired, answers
// its parked requests, and rebalances (Kafka's removeMemberAndUpdateGroup).
func (m *Manager) expelMember(now int64, g *Group, mem *Member) Effects {
	var eff Effects
	if mem.joinWaiter != nil {
		eff.Joins = append(eff.Joins, JoinReply{Waiter: mem.joinWaiter, ErrorCode: kerr.UnknownMemberID.Code, MemberID: mem.ID, Generation: -1})
	}
	if mem.syncWaiter != nil {
		eff.Syncs = append(eff.Syncs, SyncReply{Waiter: mem.syncWaiter, ErrorCode: kerr.UnknownMemberID.Code})
	}
	m.removeMember(g, mem)
	switch g.State {
	case Stable, CompletingRebalance:
		eff.merge(m.prepareRebalance(now, g))
	case PreparingRebalance:
		eff.merge(m.maybeCompleteJoin(now, g))
	}
	return eff
}

// Sync handles a SyncGroup (Kafka's handleSyncGroup).
func (m *Manager) Sync(now int64, req SyncRequest) Effects {
	fail := func(code int16) Effects {
		return Effects{Syncs: []SyncReply{{Waiter: req.Waiter, ErrorCode: code}}}
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	g := m.groups[req.Group]
	if g == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	if g.State == Dead {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	if g.consumer != nil {
		return m.classicSyncToConsumer(now, g, req)
	}
	if code := g.checkStatic(req.MemberID, req.InstanceID); code != 0 {
		return fail(code)
	}
	mem := g.Members[req.MemberID]
	switch {
	case mem == nil:
		return fail(kerr.UnknownMemberID.Code)
	case req.Generation != g.Generation:
		return fail(kerr.IllegalGeneration.Code)
	case req.ProtocolType != "" && req.ProtocolType != g.ProtocolType,
		req.Protocol != "" && req.Protocol != g.Protocol:
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	switch g.State {
	case Empty:
		return fail(kerr.UnknownMemberID.Code)
	case PreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	case Stable:
		mem.heartbeatDeadline = now + mem.SessionTimeoutMs
		return Effects{Syncs: []SyncReply{{Waiter: req.Waiter, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: mem.Assignment}}}
	}
	// CompletingRebalance.
	var eff Effects
	if mem.syncWaiter != nil {
		eff.Syncs = append(eff.Syncs, SyncReply{Waiter: mem.syncWaiter, ErrorCode: kerr.RebalanceInProgress.Code})
	}
	mem.syncWaiter = req.Waiter
	mem.heartbeatDeadline = now + mem.SessionTimeoutMs
	if mem.ID != g.Leader {
		return eff
	}
	for _, o := range g.Members {
		o.Assignment = req.Assignments[o.ID]
		if o.Assignment == nil {
			o.Assignment = []byte{}
		}
	}
	g.transition(Stable, now)
	eff.storeGroup(g, now)
	for _, o := range g.memberList() {
		if o.syncWaiter != nil {
			eff.Syncs = append(eff.Syncs, SyncReply{Waiter: o.syncWaiter, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: o.Assignment})
			o.syncWaiter = nil
		}
	}
	return eff
}

// StoreFailed tells the Manager that the group metadata record of group
// could not be committed: as Kafka, the assignment is dropped and the
// group rebalances.
func (m *Manager) StoreFailed(now int64, group string) Effects {
	g := m.groups[group]
	if g == nil || g.State != Stable || g.consumer != nil {
		return Effects{}
	}
	for _, mem := range g.Members {
		mem.Assignment = nil
	}
	return m.prepareRebalance(now, g)
}

// Heartbeat handles a Heartbeat (Kafka's handleHeartbeat).
func (m *Manager) Heartbeat(now int64, group, memberID, instanceID string, generation int32) int16 {
	g := m.groups[group]
	switch {
	case group == "":
		return kerr.InvalidGroupID.Code
	case g == nil:
		return kerr.UnknownMemberID.Code
	case g.State == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case g.consumer != nil:
		return m.classicHeartbeatToConsumer(now, g, memberID, instanceID, generation)
	}
	if code := g.checkStatic(memberID, instanceID); code != 0 {
		return code
	}
	mem := g.Members[memberID]
	switch {
	case mem == nil || g.State == Empty:
		return kerr.UnknownMemberID.Code
	case generation != g.Generation:
		return kerr.IllegalGeneration.Code
	}
	mem.heartbeatDeadline = now + mem.SessionTimeoutMs
	if g.State == PreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// LeaveMember is one member of a LeaveGroup.
type LeaveMember struct {
	MemberID   string
	InstanceID string
}

// Leave handles a LeaveGroup (batch, KIP-345): the group-level code and one
// code per member.
func (m *Manager) Leave(now int64, group string, members []LeaveMember) (int16, []int16, Effects) {
	codes := make([]int16, len(members))
	g := m.groups[group]
	switch {
	case group == "":
		return kerr.InvalidGroupID.Code, codes, Effects{}
	case g == nil:
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
		return 0, codes, Effects{}
	case g.State == Dead:
		return kerr.CoordinatorNotAvailable.Code, codes, Effects{}
	case g.consumer != nil:
		return m.classicLeaveToConsumer(now, g, members)
	}
	var eff Effects
	for i, lm := range members {
		id := lm.MemberID
		if lm.InstanceID != "" {
			sid, ok := g.staticMembers[lm.InstanceID]
			switch {
			case !ok:
				codes[i] = kerr.UnknownMemberID.Code
				continue
			case id != "" && sid != id:
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
			id = sid
		}
		if _, pending := g.pendingMembers[id]; pending {
			delete(g.pendingMembers, id)
			eff.merge(m.maybeCompleteJoin(now, g))
			continue
		}
		mem := g.Members[id]
		if mem == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		eff.merge(m.expelMember(now, g, mem))
	}
	return 0, codes, eff
}

// Tick expires sessions, pending member ids and rebalance timeouts, and
// offsets whose retention passed, as of now.
func (m *Manager) Tick(now int64) Effects {
	var eff Effects
	for _, id := range m.GroupIDs() {
		g := m.groups[id]
		if g.consumer != nil {
			eff.merge(m.consumerTick(now, g))
			continue
		}
		for pid, deadline := range g.pendingMembers {
			if now >= deadline {
				delete(g.pendingMembers, pid)
			}
		}
		for _, mem := range g.memberList() {
			if g.Members[mem.ID] == nil || mem.joinWaiter != nil || mem.syncWaiter != nil {
				continue // kept alive while its join or sync is parked
			}
			if now >= mem.heartbeatDeadline {
				eff.merge(m.expelMember(now, g, mem))
			}
		}
		if g.State == PreparingRebalance && (now >= g.rebalanceDeadline || (!g.initialDelay && g.allJoined())) {
			eff.merge(m.completeJoin(now, g))
		}
	}
	if now >= m.nextExpiryCheck {
		m.nextExpiryCheck = now + m.cfg.OffsetsRetentionCheckMs
		eff.merge(m.expireOffsets(now))
	}
	return eff
}

// NextDeadline is when Tick must next run, or -1 when nothing is due.
func (m *Manager) NextDeadline() int64 {
	next := m.nextExpiryCheck
	for _, g := range m.groups {
		if g.consumer != nil {
			next = g.consumer.nextDeadline(next)
			continue
		}
		if g.State == PreparingRebalance {
			next = min(next, g.rebalanceDeadline)
		}
		for _, d := range g.pendingMembers {
			next = min(next, d)
		}
		for _, mem := range g.Members {
			if mem.joinWaiter == nil && mem.syncWaiter == nil {
				next = min(next, mem.heartbeatDeadline)
			}
		}
	}
	return next
}

// Unload answers every parked request with NOT_COORDINATOR and forgets the
// groups: this node no longer leads the partition.
func (m *Manager) Unload() Effects {
	var eff Effects
	for _, id := range m.GroupIDs() {
		for _, mem := range m.groups[id].memberList() {
			if mem.joinWaiter != nil {
				eff.Joins = append(eff.Joins, JoinReply{Waiter: mem.joinWaiter, ErrorCode: kerr.NotCoordinator.Code, MemberID: mem.ID, Generation: -1})
			}
			if mem.syncWaiter != nil {
				eff.Syncs = append(eff.Syncs, SyncReply{Waiter: mem.syncWaiter, ErrorCode: kerr.NotCoordinator.Code})
			}
		}
	}
	// Pending transactional offsets go too: the next coordinator rebuilds
	// them from the log, markers included.
	m.groups = map[string]*Group{}
	m.txnGroups = map[int64]map[string]struct{}{}
	return eff
}

// DescribedMember is a member as DescribeGroups reports it.
type DescribedMember struct {
	ID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                 []byte
}

// Description is a group as DescribeGroups reports it.
type Description struct {
	ErrorCode    int16
	ErrorMessage string
	State        string
	ProtocolType string
	Protocol     string
	Members      []DescribedMember
}

// Describe is Kafka's GroupMetadata.summary: member metadata and
// assignments only in Stable; an unknown group is Dead with no error.
func (m *Manager) Describe(group string) Description {
	g := m.groups[group]
	if g == nil {
		return Description{State: Dead.String()}
	}
	if g.consumer != nil {
		// Kafka 4 answers this for a group of the consumer protocol
		// (ConsumerGroupDescribe describes it).
		return Description{ErrorCode: kerr.GroupIDNotFound.Code, ErrorMessage: "Group " + group + " is not a classic group.",
			State: Dead.String()}
	}
	d := Description{State: g.State.String(), ProtocolType: g.ProtocolType, Protocol: g.Protocol}
	for _, mem := range g.memberList() {
		dm := DescribedMember{ID: mem.ID, InstanceID: mem.InstanceID, ClientID: mem.ClientID, ClientHost: mem.ClientHost}
		if g.State == Stable {
			dm.Metadata, dm.Assignment = mem.metadata(g.Protocol), mem.Assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// Listed is one group as ListGroups reports it.
type Listed struct {
	Group, ProtocolType, State string
	// Type is "classic" or "consumer" (KIP-848; ListGroups v5).
	Type string
}

// List returns the groups, sorted by id.
func (m *Manager) List() []Listed {
	var out []Listed
	for _, id := range m.GroupIDs() {
		g := m.groups[id]
		l := Listed{Group: id, ProtocolType: g.ProtocolType, State: g.State.String(), Type: "classic"}
		if g.consumer != nil {
			l.State, l.Type = g.ConsumerState(), "consumer"
		}
		out = append(out, l)
	}
	return out
}

// Delete handles one group of a DeleteGroups: only an Empty group is
// deleted (tombstones for its offsets and metadata), others answer
// NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. Pending transactional
// offsets do not keep a group (Kafka checks only the state): as Kafka's
// OffsetMetadataManager.deleteAllOffsets, their partitions get tombstones
// too, so a later COMMIT marker finds nothing to materialize, live or
// when the log is replayed.
func (m *Manager) Delete(now int64, group string) (int16, Effects) {
	g := m.groups[group]
	switch {
	case group == "":
		return kerr.InvalidGroupID.Code, Effects{}
	case g == nil || g.State == Dead:
		return kerr.GroupIDNotFound.Code, Effects{}
	case g.State != Empty:
		return kerr.NonEmptyGroup.Code, Effects{}
	}
	var eff Effects
	for _, tp := range g.offsetPartitions() {
		eff.Records = append(eff.Records, Record{Key: OffsetKey(g.ID, tp.Topic, tp.Partition)})
	}
	eff.Records = append(eff.Records, g.deleteRecords()...)
	g.transition(Dead, now)
	delete(m.groups, g.ID)
	return 0, eff
}

func sortedOffsets(g *Group) []TopicPartition {
	out := make([]TopicPartition, 0, len(g.Offsets))
	for tp := range g.Offsets {
		out = append(out, tp)
	}
	sortPartitions(out)
	return out
}

func sortPartitions(out []TopicPartition) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
}

// String renders a group for tests and debugging.
func (g *Group) String() string {
	s := fmt.Sprintf("%s state=%s gen=%d", g.ID, g.State, g.Generation)
	if g.ProtocolType != "" {
		s += " type=" + g.ProtocolType
	}
	if g.Protocol != "" {
		s += " protocol=" + g.Protocol
	}
	if g.Leader != "" {
		s += " leader=" + g.Leader
	}
	for _, mem := range g.memberList() {
		s += "\n  member " + mem.ID
		if mem.InstanceID != "" {
			s += " instance=" + mem.InstanceID
		}
		if mem.Assignment != nil {
			s += fmt.Sprintf(" assignment=%q", mem.Assignment)
		}
		if mem.joinWaiter != nil {
			s += fmt.Sprintf(" join-waiting=%v", mem.joinWaiter)
		}
		if mem.syncWaiter != nil {
			s += fmt.Sprintf(" sync-waiting=%v", mem.syncWaiter)
		}
	}
	if g.consumer != nil {
		s += g.consumerString()
	}
	for _, tp := range sortedOffsets(g) {
		o := g.Offsets[tp]
		s += fmt.Sprintf("\n  offset %s-%d=%d", tp.Topic, tp.Partition, o.Offset)
		if o.Metadata != "" {
			s += fmt.Sprintf(" metadata=%q", o.Metadata)
		}
	}
	return s + g.pendingTxnString()
}
