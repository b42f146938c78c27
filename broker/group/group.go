package group

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state (Kafka's GroupState).
type State int8

const (
	// Empty: no members; the group may still have committed offsets.
	Empty State = iota
	// PreparingRebalance: members are (re)joining; JoinGroup responses
	// wait until all known members rejoined or the rebalance timeout.
	PreparingRebalance
	// CompletingRebalance: members joined; waiting for the leader's
	// SyncGroup with the assignment.
	CompletingRebalance
	// Stable: the assignment was handed out.
	Stable
	// Dead: the group was deleted (or its offsets expired); it answers
	// COORDINATOR_NOT_AVAILABLE until it is gone.
	Dead
)

// String is the name Kafka's DescribeGroups and ListGroups report.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// Protocol is one assignment protocol a member supports, with its
// metadata (for "consumer": the subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// Waiter is the caller's handle for a parked JoinGroup or SyncGroup: the
// Manager hands it back in the JoinReply or SyncReply that answers it.
type Waiter any

// Member is one member of a group. Times are Unix milliseconds.
type Member struct {
	ID                 string
	InstanceID         string // group.instance.id (KIP-345), "" for dynamic members
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int64
	RebalanceTimeoutMs int64
	ProtocolType       string
	Protocols          []Protocol
	Assignment         []byte

	// joinWaiter and syncWaiter are the parked JoinGroup and SyncGroup
	// of this member, nil when none; joinVersion is the JoinGroup's
	// version (v9+ skip assignment for a static leader).
	joinWaiter  Waiter
	joinVersion int16
	syncWaiter  Waiter
	// heartbeatDeadline is when the member is expelled without a
	// heartbeat (session.timeout.ms).
	heartbeatDeadline int64
	// isNew marks a member that joined during the current rebalance and
	// has not completed one yet (Kafka's MemberMetadata.isNew).
	isNew bool
}

// metadata returns the member's metadata for protocol, nil if it does not
// support it.
func (m *Member) metadata(protocol string) []byte {
	for _, p := range m.Protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// supports reports whether the member supports protocol.
func (m *Member) supports(protocol string) bool {
	return slices.ContainsFunc(m.Protocols, func(p Protocol) bool { return p.Name == protocol })
}

// sameProtocols reports whether ps equals the member's protocols.
func (m *Member) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.Protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && string(a.Metadata) == string(b.Metadata)
	})
}

// Offset is a committed offset. Times are Unix milliseconds;
// ExpireTimestamp is -1 unless the commit carried an explicit retention.
type Offset struct {
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	ExpireTimestamp int64

	// recordOffset is where in __consumer_offsets the record of this
	// offset is (Kafka's OffsetAndMetadata.recordOffset): when a
	// transaction commits, its offset replaces the committed one only if
	// it was written after it.
	recordOffset int64
}

// TopicPartition names a partition whose offset a group committed.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Group is one group's state.
type Group struct {
	ID           string
	State        State
	ProtocolType string
	Protocol     string
	Generation   int32
	Leader       string
	// Members by member id; staticMembers maps instance ids to member ids.
	Members       map[string]*Member
	staticMembers map[string]string
	// pendingMembers are member ids handed out with MEMBER_ID_REQUIRED
	// (KIP-394), not yet joined, with the deadline they expire at.
	pendingMembers map[string]int64
	// Offsets are the committed offsets.
	Offsets map[TopicPartition]Offset
	// pendingTxn are, by producer id, the offsets of TxnOffsetCommits
	// whose records are committed in the log while their transaction is
	// still open (Kafka's pendingTransactionalOffsetCommits): invisible to
	// OffsetFetch until the producer's COMMIT marker, dropped by its ABORT.
	pendingTxn map[int64]map[TopicPartition]Offset
	// txnWrites are the TxnOffsetCommits appended to the log but not yet
	// committed there (Kafka's prepared commits, with no appended batch
	// offset yet). They already make their partitions unstable.
	txnWrites map[*txnWrite]struct{}
	// stateTimestamp is when the group last changed state (KIP-211:
	// offsets of an Empty group expire counting from it).
	stateTimestamp int64
	// rebalanceDeadline is when PreparingRebalance ends at the latest;
	// initialDelay marks Kafka's InitialDelayedJoin (the first rebalance
	// of an Empty group waits group.initial.rebalance.delay.ms, extended
	// by each new member up to the rebalance timeout, rebalanceLimit).
	rebalanceDeadline int64
	initialDelay      bool
	rebalanceLimit    int64
	// consumer is the KIP-848 state of a consumer group, nil for a
	// classic group (consumer.go).
	consumer *consumerGroup
}

func newGroup(id string, now int64) *Group {
	return &Group{ID: id, State: Empty, Members: map[string]*Member{}, staticMembers: map[string]string{},
		pendingMembers: map[string]int64{}, Offsets: map[TopicPartition]Offset{}, stateTimestamp: now,
		pendingTxn: map[int64]map[TopicPartition]Offset{}, txnWrites: map[*txnWrite]struct{}{}}
}

// memberList returns the members sorted by id (deterministic output).
func (g *Group) memberList() []*Member {
	out := make([]*Member, 0, len(g.Members))
	for _, m := range g.Members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (g *Group) transition(s State, now int64) {
	g.State = s
	g.stateTimestamp = now
}

// supportsProtocols is Kafka's GroupMetadata.supportsProtocols: an empty
// group takes any non-empty protocol type and list; otherwise the type
// must match and one protocol must be supported by every member.
func (g *Group) supportsProtocols(protocolType string, ps []Protocol) bool {
	if len(g.Members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.ProtocolType {
		return false
	}
	for _, c := range g.candidateProtocols() {
		for _, p := range ps {
			if p.Name == c {
				return true
			}
		}
	}
	return false
}

// candidateProtocols are the protocols every member supports, in the order
// of the leader's (or the first member's) preference.
func (g *Group) candidateProtocols() []string {
	ms := g.memberList()
	if len(ms) == 0 {
		return nil
	}
	first := ms[0]
	if l := g.Members[g.Leader]; l != nil {
		first = l
	}
	var out []string
	for _, p := range first.Protocols {
		all := true
		for _, m := range ms {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			out = append(out, p.Name)
		}
	}
	return out
}

// selectProtocol is Kafka's vote: each member votes for the first of its
// own protocols that every member supports; the most votes win, ties go to
// the leader's preference order.
func (g *Group) selectProtocol() string {
	candidates := g.candidateProtocols()
	votes := map[string]int{}
	for _, m := range g.Members {
		for _, p := range m.Protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, c := range candidates {
		if votes[c] > bestVotes {
			best, bestVotes = c, votes[c]
		}
	}
	return best
}

// allJoined is Kafka's hasAllMembersJoined: every member has a parked
// JoinGroup and no member id handed out by MEMBER_ID_REQUIRED is pending.
func (g *Group) allJoined() bool {
	for _, m := range g.Members {
		if m.joinWaiter == nil {
			return false
		}
	}
	return len(g.pendingMembers) == 0
}

// maxRebalanceTimeout is the largest rebalance timeout of the members.
func (g *Group) maxRebalanceTimeout() int64 {
	var t int64
	for _, m := range g.Members {
		t = max(t, m.RebalanceTimeoutMs)
	}
	return t
}

// subscribedTopics returns the topics the members of a "consumer" group
// subscribe to, and false when they cannot be known (another protocol
// type, or a subscription that does not parse).
func (g *Group) subscribedTopics() (map[string]bool, bool) {
	if c := g.consumer; c != nil {
		out := map[string]bool{}
		for _, mem := range c.members {
			for _, t := range c.memberTopicNames(mem) {
				out[t] = true
			}
		}
		return out, true
	}
	if g.ProtocolType != "consumer" || g.Protocol == "" {
		return nil, false
	}
	out := map[string]bool{}
	for _, m := range g.Members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.Protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out, true
}
