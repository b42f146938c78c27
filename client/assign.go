package client

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the partition assignors of the classic consumer group
// protocol (Kafka's "consumer" protocol type, KIP-62 onwards). An assignor
// runs on the group leader only: the coordinator hands the leader every
// member's JoinGroup metadata, the leader computes who consumes what, and
// SyncGroup distributes the result. Everything here is a pure function over
// its inputs: no I/O, no clocks, no randomness, so the same inputs give the
// same assignment on every leader.

// ConsumerProtocolType is the JoinGroup protocol type of consumer groups.
const ConsumerProtocolType = "consumer"

// RebalanceProtocol is how a group moves partitions between members.
type RebalanceProtocol int8

const (
	// RebalanceEager revokes every partition of every member before a
	// rebalance and hands out the new assignment afterwards: simple, but the
	// whole group stops consuming during each rebalance.
	RebalanceEager RebalanceProtocol = iota
	// RebalanceCooperative (KIP-429) keeps consuming through a rebalance:
	// members keep what they own, only partitions that move are revoked, and
	// they are assigned to their new owner in a follow-up rebalance.
	RebalanceCooperative
)

// String returns Kafka's name of the protocol.
func (p RebalanceProtocol) String() string {
	if p == RebalanceCooperative {
		return "COOPERATIVE"
	}
	return "EAGER"
}

// GroupMember is one member of a group as the leader's assignor sees it: its
// identity and its decoded subscription.
type GroupMember struct {
	// MemberID is the coordinator-assigned member id.
	MemberID string
	// InstanceID is the member's group.instance.id (KIP-345), nil for a
	// dynamic member. Assignors order static members by it so that a static
	// member that restarts with a new member id keeps its partitions.
	InstanceID *string
	// Topics is the member's subscription.
	Topics []string
	// Owned is what the member owned before this rebalance: the owned
	// partitions of a cooperative member, or the previous assignment a
	// sticky member carries in its user data. Nil when unknown.
	Owned map[string][]int32
	// Generation is the generation Owned was assigned in, -1 if unknown. Of
	// two members claiming one partition the one with the newer generation
	// wins (KIP-341).
	Generation int32
}

// GroupAssignment maps member id → topic → partitions (ascending).
type GroupAssignment map[string]map[string][]int32

// Assignor computes a group's partition assignment on the leader. Kafka's
// partition.assignment.strategy chooses among them; the first assignor every
// member supports wins.
//
// Implementations must be pure and safe for concurrent use: Assign may be
// called from any goroutine and must not keep references to its arguments.
type Assignor interface {
	// Name is the protocol name sent in JoinGroup; members of one group
	// agree on an assignor by this name ("range", "roundrobin", "sticky",
	// "cooperative-sticky").
	Name() string
	// Protocol is the rebalance protocol the assignor supports.
	Protocol() RebalanceProtocol
	// Metadata encodes this member's subscription (Kafka's
	// ConsumerProtocolSubscription) for JoinGroup. owned and generation are
	// what the member owns now; an eager member has revoked everything before
	// joining, so it passes what it owned before revoking.
	Metadata(topics []string, owned map[string][]int32, generation int32) []byte
	// Assign computes the assignment. partitions maps each topic any member
	// subscribes to onto its partition count; topics missing from it are
	// unknown and ignored. Every member gets an entry, possibly empty.
	Assign(members []GroupMember, partitions map[string]int32) (GroupAssignment, error)
}

// consumerMetadataVersion is the ConsumerProtocolSubscription version this
// client writes: v1 added owned partitions (KIP-429), v2 the generation
// (KIP-792), v3 the rack (KIP-881).
const consumerMetadataVersion = 3

// encodeSubscription writes a ConsumerProtocolSubscription.
func encodeSubscription(topics []string, owned map[string][]int32, generation int32, userData []byte) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = consumerMetadataVersion
	m.Topics = slices.Sorted(slices.Values(topics))
	m.UserData = userData
	m.Generation = generation
	for _, t := range sortedTopics(owned) {
		if len(owned[t]) == 0 {
			continue
		}
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic = t
		op.Partitions = slices.Sorted(slices.Values(owned[t]))
		m.OwnedPartitions = append(m.OwnedPartitions, op)
	}
	return m.AppendTo(nil)
}

// DecodeGroupMember decodes one member's JoinGroup metadata for the given
// assignor protocol name. Sticky members of either kind carry their previous
// assignment: eager sticky ones in user data (KIP-54's StickyAssignorUserData,
// since they revoke before joining), cooperative ones as owned partitions.
func DecodeGroupMember(memberID string, instanceID *string, protocol string, metadata []byte) (GroupMember, error) {
	gm := GroupMember{MemberID: memberID, InstanceID: instanceID, Generation: -1}
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return gm, fmt.Errorf("decode subscription of member %s: %w", memberID, err)
	}
	gm.Topics = m.Topics
	if m.Version >= 2 {
		gm.Generation = m.Generation
	}
	if len(m.OwnedPartitions) > 0 {
		gm.Owned = make(map[string][]int32, len(m.OwnedPartitions))
		for _, op := range m.OwnedPartitions {
			gm.Owned[op.Topic] = append(gm.Owned[op.Topic], op.Partitions...)
		}
	}
	switch protocol {
	case "sticky":
		if len(gm.Owned) == 0 && len(m.UserData) > 0 {
			owned, gen, err := decodeStickyUserData(m.UserData)
			if err != nil {
				return gm, fmt.Errorf("decode sticky user data of member %s: %w", memberID, err)
			}
			gm.Owned, gm.Generation = owned, gen
		}
	case "cooperative-sticky":
		// Before v2 the generation travels in user data as one int32
		// (Kafka's CooperativeStickyAssignor).
		if m.Version < 2 && len(m.UserData) == 4 {
			gm.Generation = int32(binary.BigEndian.Uint32(m.UserData))
		}
	}
	return gm, nil
}

// encodeStickyUserData writes KIP-54's StickyAssignorUserData v1 (the
// previous assignment and, since KIP-341, its generation). kmsg declares the
// type (StickyMemberMetadata) but has no encoder for it: the layout is an
// array of (topic string, int32 array) followed by an int32.
func encodeStickyUserData(owned map[string][]int32, generation int32) []byte {
	var b []byte
	topics := sortedTopics(owned)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(owned[t])))
		for _, p := range owned[t] {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return binary.BigEndian.AppendUint32(b, uint32(generation))
}

var errShortStickyUserData = errors.New("sticky user data cut short")

// decodeStickyUserData reads StickyAssignorUserData v1, or v0 (no
// generation, reported as -1).
func decodeStickyUserData(b []byte) (map[string][]int32, int32, error) {
	rd := func(n int) ([]byte, error) {
		if len(b) < n {
			return nil, errShortStickyUserData
		}
		v := b[:n]
		b = b[n:]
		return v, nil
	}
	v, err := rd(4)
	if err != nil {
		return nil, -1, err
	}
	nt := int32(binary.BigEndian.Uint32(v))
	if nt < 0 || int(nt)*6 > len(b) {
		return nil, -1, errShortStickyUserData
	}
	owned := make(map[string][]int32, nt)
	for range nt {
		v, err := rd(2)
		if err != nil {
			return nil, -1, err
		}
		name, err := rd(int(binary.BigEndian.Uint16(v)))
		if err != nil {
			return nil, -1, err
		}
		if v, err = rd(4); err != nil {
			return nil, -1, err
		}
		np := int32(binary.BigEndian.Uint32(v))
		if np < 0 || int(np)*4 > len(b) {
			return nil, -1, errShortStickyUserData
		}
		ps := make([]int32, np)
		for i := range ps {
			v, _ := rd(4)
			ps[i] = int32(binary.BigEndian.Uint32(v))
		}
		owned[string(name)] = ps
	}
	gen := int32(-1)
	if len(b) >= 4 {
		gen = int32(binary.BigEndian.Uint32(b))
	}
	return owned, gen, nil
}

// encodeAssignment writes a ConsumerProtocolAssignment (version 0: later
// versions add nothing an assignor here uses).
func encodeAssignment(a map[string][]int32) []byte {
	m := kmsg.NewConsumerMemberAssignment()
	for _, t := range sortedTopics(a) {
		if len(a[t]) == 0 {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic = t
		at.Partitions = a[t]
		m.Topics = append(m.Topics, at)
	}
	return m.AppendTo(nil)
}

// decodeAssignment reads a ConsumerProtocolAssignment. An empty buffer is an
// empty assignment (the coordinator sends one to a member the leader left out).
func decodeAssignment(b []byte) (map[string][]int32, error) {
	out := map[string][]int32{}
	if len(b) == 0 {
		return out, nil
	}
	var m kmsg.ConsumerMemberAssignment
	if err := m.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("decode assignment: %w", err)
	}
	for _, t := range m.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	return out, nil
}

// RangeAssignor returns Kafka's RangeAssignor ("range"): per topic, the
// members subscribed to it (ordered by instance id, then member id) each take
// a contiguous range of partitions, the first P%N members one extra. It
// co-partitions topics with equal partition counts, at the price of loading
// the first members more when there are many topics.
func RangeAssignor() Assignor { return rangeAssignor{} }

// RoundRobinAssignor returns Kafka's RoundRobinAssignor ("roundrobin"): all
// partitions of all subscribed topics, in topic then partition order, dealt
// to the members in turn, skipping members not subscribed to a partition's
// topic.
func RoundRobinAssignor() Assignor { return roundRobinAssignor{} }

// StickyAssignor returns Kafka's StickyAssignor ("sticky", KIP-54): a
// balanced assignment (member counts differ by at most one when the
// subscriptions allow it) that keeps as many partitions as possible where
// they were. It is eager: members still revoke everything before a
// rebalance; the previous assignment travels in the subscription's user data.
func StickyAssignor() Assignor { return stickyAssignor{} }

// CooperativeStickyAssignor returns Kafka's CooperativeStickyAssignor
// ("cooperative-sticky", KIP-429): the sticky assignment, computed from the
// partitions members report owning, minus every partition that changes
// owner. Its current owner sees it missing and revokes it; the member then
// rejoins, and the follow-up rebalance assigns the now unowned partition to
// its new owner. Members keep consuming everything else throughout.
func CooperativeStickyAssignor() Assignor { return cooperativeStickyAssignor{} }

type rangeAssignor struct{}

func (rangeAssignor) Name() string                { return "range" }
func (rangeAssignor) Protocol() RebalanceProtocol { return RebalanceEager }
func (rangeAssignor) Metadata(topics []string, _ map[string][]int32, _ int32) []byte {
	// No owned partitions and no generation: the assignor uses neither, and
	// identical bytes let a restarted static member rejoin without a
	// rebalance on coordinators that compare metadata (KIP-345).
	return encodeSubscription(topics, nil, -1, nil)
}

func (rangeAssignor) Assign(members []GroupMember, partitions map[string]int32) (GroupAssignment, error) {
	ms := sortMembers(members)
	out := emptyAssignment(ms)
	for _, topic := range sortedTopics(partitions) {
		var subs []*GroupMember
		for _, m := range ms {
			if slices.Contains(m.Topics, topic) {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n, k := partitions[topic], int32(len(subs))
		per, extra := n/k, n%k
		for i, m := range subs {
			i := int32(i)
			start := i*per + min(i, extra)
			count := per
			if i < extra {
				count++
			}
			for p := start; p < start+count; p++ {
				out[m.MemberID][topic] = append(out[m.MemberID][topic], p)
			}
		}
	}
	return out, nil
}

type roundRobinAssignor struct{}

func (roundRobinAssignor) Name() string                { return "roundrobin" }
func (roundRobinAssignor) Protocol() RebalanceProtocol { return RebalanceEager }
func (roundRobinAssignor) Metadata(topics []string, _ map[string][]int32, _ int32) []byte {
	// No owned partitions and no generation: the assignor uses neither, and
	// identical bytes let a restarted static member rejoin without a
	// rebalance on coordinators that compare metadata (KIP-345).
	return encodeSubscription(topics, nil, -1, nil)
}

func (roundRobinAssignor) Assign(members []GroupMember, partitions map[string]int32) (GroupAssignment, error) {
	ms := sortMembers(members)
	out := emptyAssignment(ms)
	if len(ms) == 0 {
		return out, nil
	}
	next := 0
	for _, topic := range sortedTopics(partitions) {
		for p := range partitions[topic] {
			// Deal to the next member in turn that subscribes to the topic.
			for range ms {
				m := ms[next]
				next = (next + 1) % len(ms)
				if slices.Contains(m.Topics, topic) {
					out[m.MemberID][topic] = append(out[m.MemberID][topic], p)
					break
				}
			}
		}
	}
	return out, nil
}

type stickyAssignor struct{}

func (stickyAssignor) Name() string                { return "sticky" }
func (stickyAssignor) Protocol() RebalanceProtocol { return RebalanceEager }
func (stickyAssignor) Metadata(topics []string, owned map[string][]int32, generation int32) []byte {
	// Eager members own nothing when they join; the previous assignment
	// rides in user data instead (Kafka's StickyAssignor does the same).
	return encodeSubscription(topics, nil, generation, encodeStickyUserData(owned, generation))
}

func (stickyAssignor) Assign(members []GroupMember, partitions map[string]int32) (GroupAssignment, error) {
	target, _ := stickyAssign(members, partitions)
	return target, nil
}

type cooperativeStickyAssignor struct{}

func (cooperativeStickyAssignor) Name() string                { return "cooperative-sticky" }
func (cooperativeStickyAssignor) Protocol() RebalanceProtocol { return RebalanceCooperative }
func (cooperativeStickyAssignor) Metadata(topics []string, owned map[string][]int32, generation int32) []byte {
	// User data repeats the generation for coordinators/leaders that only
	// understand subscription v0/v1.
	return encodeSubscription(topics, owned, generation, binary.BigEndian.AppendUint32(nil, uint32(generation)))
}

func (cooperativeStickyAssignor) Assign(members []GroupMember, partitions map[string]int32) (GroupAssignment, error) {
	target, owner := stickyAssign(members, partitions)
	// KIP-429: a partition whose owner changes is withheld from its new
	// owner this round. The old owner no longer finds it in its assignment,
	// revokes it and rejoins; the next rebalance sees it unowned.
	for member, topics := range target {
		for topic, ps := range topics {
			kept := ps[:0]
			for _, p := range ps {
				if cur, ok := owner[groupTP{topic, p}]; !ok || cur == member {
					kept = append(kept, p)
				}
			}
			if len(kept) == 0 {
				delete(topics, topic)
			} else {
				topics[topic] = kept
			}
		}
	}
	return target, nil
}

// groupTP names one partition.
type groupTP struct {
	Topic     string
	Partition int32
}

// stickyAssign computes a balanced assignment that keeps as much of the
// members' previous ownership as possible. It returns the assignment and the
// valid previous owner of each partition (what cooperative-sticky must not
// move without a revocation first).
//
// The algorithm, in three steps:
//  1. Previous ownership is validated: a claim on a partition that no longer
//     exists or outside the member's subscription is dropped; of conflicting
//     claims the newest generation wins, and claims tied at the newest
//     generation are all dropped (two members cannot both have owned it).
//  2. Unowned partitions, those with the fewest eligible members first, go to
//     the eligible member owning the fewest partitions.
//  3. While some partition's owner has at least two more partitions than
//     another eligible member, it moves to that member. Each move lowers the
//     sum of squared counts, so this ends, and with equal subscriptions it ends
//     with counts within one of each other after moving only what is needed.
func stickyAssign(members []GroupMember, partitions map[string]int32) (GroupAssignment, map[groupTP]string) {
	ms := sortMembers(members)
	out := emptyAssignment(ms)
	if len(ms) == 0 {
		return out, map[groupTP]string{}
	}
	subscribed := make([]map[string]bool, len(ms))
	for i, m := range ms {
		subscribed[i] = make(map[string]bool, len(m.Topics))
		for _, t := range m.Topics {
			if _, ok := partitions[t]; ok {
				subscribed[i][t] = true
			}
		}
	}

	// Every partition any member subscribes to, in a fixed order.
	var all []groupTP
	index := map[groupTP]int{}
	var eligible [][]int
	for _, t := range sortedTopics(partitions) {
		var subs []int
		for i := range ms {
			if subscribed[i][t] {
				subs = append(subs, i)
			}
		}
		if len(subs) == 0 {
			continue
		}
		for p := range partitions[t] {
			tp := groupTP{t, p}
			index[tp] = len(all)
			all = append(all, tp)
			eligible = append(eligible, subs)
		}
	}

	// Step 1: validate claims.
	owner := make([]int, len(all))
	claimGen := make([]int32, len(all))
	conflicted := make([]bool, len(all))
	for i := range owner {
		owner[i] = -1
	}
	for mi, m := range ms {
		for t, ps := range m.Owned {
			if !subscribed[mi][t] {
				continue
			}
			for _, p := range ps {
				pi, ok := index[groupTP{t, p}]
				if !ok {
					continue
				}
				switch {
				case owner[pi] == -1 && !conflicted[pi]:
					owner[pi], claimGen[pi] = mi, m.Generation
				case m.Generation > claimGen[pi]:
					owner[pi], claimGen[pi], conflicted[pi] = mi, m.Generation, false
				case m.Generation == claimGen[pi] && owner[pi] != mi:
					owner[pi], conflicted[pi] = -1, true
				}
			}
		}
	}
	prevOwner := make(map[groupTP]string)
	count := make([]int, len(ms))
	for pi, o := range owner {
		if o >= 0 {
			prevOwner[all[pi]] = ms[o].MemberID
			count[o]++
		}
	}

	leastLoaded := func(cands []int) int {
		best := cands[0]
		for _, c := range cands[1:] {
			if count[c] < count[best] {
				best = c
			}
		}
		return best
	}

	// Step 2: place unowned partitions, most constrained first.
	var unowned []int
	for pi, o := range owner {
		if o < 0 {
			unowned = append(unowned, pi)
		}
	}
	slices.SortStableFunc(unowned, func(a, b int) int { return cmp.Compare(len(eligible[a]), len(eligible[b])) })
	for _, pi := range unowned {
		o := leastLoaded(eligible[pi])
		owner[pi] = o
		count[o]++
	}

	// Step 3: move partitions off overloaded members. Later partitions of a
	// member move first so that a member keeps its lowest partitions.
	for moved := true; moved; {
		moved = false
		for pi := len(all) - 1; pi >= 0; pi-- {
			o := owner[pi]
			to := leastLoaded(eligible[pi])
			if count[o]-count[to] >= 2 {
				owner[pi] = to
				count[o]--
				count[to]++
				moved = true
			}
		}
	}

	for pi, o := range owner {
		tp := all[pi]
		id := ms[o].MemberID
		out[id][tp.Topic] = append(out[id][tp.Topic], tp.Partition)
	}
	return out, prevOwner
}

// sortMembers orders members as Kafka's AbstractPartitionAssignor.MemberInfo
// does: static members by instance id first, then dynamic ones by member id.
// The order is what makes range and round-robin deterministic, and keeps a
// restarted static member in its place.
func sortMembers(members []GroupMember) []*GroupMember {
	ms := make([]*GroupMember, len(members))
	for i := range members {
		ms[i] = &members[i]
	}
	slices.SortStableFunc(ms, func(a, b *GroupMember) int {
		switch {
		case a.InstanceID != nil && b.InstanceID != nil:
			return cmp.Compare(*a.InstanceID, *b.InstanceID)
		case a.InstanceID != nil:
			return -1
		case b.InstanceID != nil:
			return 1
		}
		return cmp.Compare(a.MemberID, b.MemberID)
	})
	return ms
}

func emptyAssignment(ms []*GroupMember) GroupAssignment {
	out := make(GroupAssignment, len(ms))
	for _, m := range ms {
		out[m.MemberID] = map[string][]int32{}
	}
	return out
}

func sortedTopics[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
