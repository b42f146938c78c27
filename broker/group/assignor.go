package group

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// Kafka 4.1's server-side partition assignors for KIP-848 consumer groups
// (group.consumer.assignors): "uniform", the default, and "range". They are
// pure functions of the members (subscriptions and current target
// assignment) and the subscribed topics' partition counts: no I/O, no clock,
// no randomness, and members are put in a fixed order first, so the same
// input in any member order gives the same output.
//
// Rack ids are ignored: Kafka 4.1's uniform builders do not use them, and
// the rack-aware pass of Kafka's newer range assignor needs the partitions'
// replica racks, which AssignorTopic does not carry (without them Kafka's
// range is exactly the one here).
//
// Deliberate differences from Kafka, all where Kafka's outcome hangs on
// Java HashMap iteration order or on inputs it assumes away:
//   - members are ordered by member id (uniform) where Kafka uses the
//     group's member map order; topics by topic id bytes;
//   - uniform, homogeneous: the members allowed one partition above ⌊P/N⌋
//     are first those already holding more than ⌊P/N⌋ valid partitions, so
//     the fewest partitions move (Kafka hands these slots out in map order
//     and can revoke a partition only to give another one back); a member
//     over quota keeps its lowest partitions in topic id order;
//   - current partitions out of range or claimed by an earlier member are
//     dropped (Kafka assumes a consistent current assignment), and a
//     subscription to a topic missing from topics is ignored (Kafka fails
//     the assignment);
//   - a topic a member gets nothing of is left out of its map (Kafka's range
//     assignor puts an empty set).

// runServerAssignor runs the named server assignor, "uniform" or "range".
// An unknown name is an error (Kafka: UNSUPPORTED_ASSIGNOR, which the
// heartbeat validates before the assignor ever runs). Every member is in the
// result, with an empty map when it gets nothing; topics a member gets no
// partition of are absent from its map; partitions are sorted. Members'
// subscriptions to topics missing from topics are ignored. It only reads its
// arguments, so any goroutine may call it.
func runServerAssignor(assignor string, members []AssignorMember, topics map[TopicID]AssignorTopic) (Assignment, error) {
	switch assignor {
	case "uniform":
		s := newAssignorState(members, topics, compareMemberIDs)
		if s.homogeneous() {
			s.uniformHomogeneous()
		} else {
			s.uniformHeterogeneous()
		}
		return s.result(), nil
	case "range":
		s := newAssignorState(members, topics, compareRangeMembers)
		s.rangeAssign()
		return s.result(), nil
	}
	return nil, fmt.Errorf("unsupported assignor %q, supported: %v", assignor, ServerAssignors)
}

func compareMemberIDs(a, b AssignorMember) int {
	return cmp.Compare(a.ID, b.ID)
}

// compareRangeMembers is Kafka's RangeAssignor.sortMemberIds: static
// members first, by instance id, so a rolling bounce that changes member
// ids keeps the ranges; then dynamic members by member id.
func compareRangeMembers(a, b AssignorMember) int {
	switch {
	case a.InstanceID != "" && b.InstanceID != "":
		if c := cmp.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
	case a.InstanceID != "":
		return -1
	case b.InstanceID != "":
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

// assignorState is one assignor run. Members and topics are numbered by
// their position in members and topicIDs; owner holds the target being
// built.
type assignorState struct {
	members     []AssignorMember
	topicIDs    []TopicID // subscribed by at least one member and existing, by id
	partitions  []int32   // topic index → partition count
	subscribed  [][]int   // member index → its topic indices, ascending
	subscribers [][]int   // topic index → its member indices, ascending
	owner       [][]int32 // topic index → partition → member index, or -1
	size        []int     // member index → partitions it owns in owner
}

func newAssignorState(members []AssignorMember, topics map[TopicID]AssignorTopic, order func(a, b AssignorMember) int) *assignorState {
	s := &assignorState{members: slices.Clone(members)}
	slices.SortFunc(s.members, order)

	used := map[TopicID]bool{}
	for _, m := range s.members {
		for _, t := range m.Subscribed {
			if _, ok := topics[t]; ok {
				used[t] = true
			}
		}
	}
	s.topicIDs = make([]TopicID, 0, len(used))
	for t := range used {
		s.topicIDs = append(s.topicIDs, t)
	}
	slices.SortFunc(s.topicIDs, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	index := make(map[TopicID]int, len(s.topicIDs))
	s.partitions = make([]int32, len(s.topicIDs))
	s.owner = make([][]int32, len(s.topicIDs))
	for i, t := range s.topicIDs {
		index[t] = i
		s.partitions[i] = max(topics[t].Partitions, 0)
		s.owner[i] = make([]int32, s.partitions[i])
		for p := range s.owner[i] {
			s.owner[i][p] = -1
		}
	}

	s.subscribed = make([][]int, len(s.members))
	s.subscribers = make([][]int, len(s.topicIDs))
	s.size = make([]int, len(s.members))
	for i, m := range s.members {
		for _, t := range m.Subscribed {
			if ti, ok := index[t]; ok {
				s.subscribed[i] = append(s.subscribed[i], ti)
			}
		}
		slices.Sort(s.subscribed[i])
		s.subscribed[i] = slices.Compact(s.subscribed[i])
		for _, ti := range s.subscribed[i] {
			s.subscribers[ti] = append(s.subscribers[ti], i)
		}
	}
	return s
}

// homogeneous reports whether every member subscribes to the same topics
// (Kafka's SubscriptionType.HOMOGENEOUS).
func (s *assignorState) homogeneous() bool {
	for i := 1; i < len(s.members); i++ {
		if !slices.Equal(s.subscribed[i], s.subscribed[0]) {
			return false
		}
	}
	return true
}

// assignorPartition is a partition as a topic index and partition number.
type assignorPartition struct {
	topic     int
	partition int32
}

// claimCurrent gives member i the partitions of its current assignment that
// are still valid (a subscribed topic, in range, not claimed by an earlier
// member) and returns them in topic, then partition order.
func (s *assignorState) claimCurrent(i int) []assignorPartition {
	var kept []assignorPartition
	for _, ti := range s.subscribed[i] {
		current := s.members[i].Current[s.topicIDs[ti]]
		if len(current) == 0 {
			continue
		}
		if !slices.IsSorted(current) {
			current = slices.Sorted(slices.Values(current))
		}
		for _, p := range current {
			if p >= 0 && p < s.partitions[ti] && s.owner[ti][p] < 0 {
				s.give(ti, p, i)
				kept = append(kept, assignorPartition{ti, p})
			}
		}
	}
	return kept
}

// give makes member i the owner of topic ti's partition p.
func (s *assignorState) give(ti int, p int32, i int) {
	if o := s.owner[ti][p]; o >= 0 {
		s.size[o]--
	}
	s.owner[ti][p] = int32(i)
	s.size[i]++
}

// uniformHomogeneous is Kafka's UniformHomogeneousAssignmentBuilder: with
// P partitions and N members every member gets ⌊P/N⌋ or ⌈P/N⌉ (balance
// first), keeping as many of its current partitions as that allows
// (stickiness second). A member over its quota gives up its excess, then
// the free partitions fill the members under quota in member order.
func (s *assignorState) uniformHomogeneous() {
	n := len(s.members)
	if n == 0 || len(s.subscribed[0]) == 0 {
		return
	}
	total := 0
	for _, ti := range s.subscribed[0] {
		total += int(s.partitions[ti])
	}
	base, extra := total/n, total%n

	kept := make([][]assignorPartition, n)
	for i := range s.members {
		kept[i] = s.claimCurrent(i)
	}
	quota := make([]int, n)
	for i := range quota {
		quota[i] = base
		if extra > 0 && len(kept[i]) > base {
			quota[i]++
			extra--
		}
	}
	for i := range quota {
		if extra > 0 && quota[i] == base {
			quota[i]++
			extra--
		}
	}
	for i := range s.members {
		if len(kept[i]) > quota[i] {
			for _, x := range kept[i][quota[i]:] {
				s.owner[x.topic][x.partition] = -1
			}
			s.size[i] = quota[i]
		}
	}

	// Free partitions, in topic then partition order, to the members
	// under quota in member order: a new member gets contiguous runs.
	var free []assignorPartition
	for ti, owners := range s.owner {
		for p, o := range owners {
			if o < 0 {
				free = append(free, assignorPartition{ti, int32(p)})
			}
		}
	}
	for i := range s.members {
		for ; s.size[i] < quota[i]; free = free[1:] {
			s.give(free[0].topic, free[0].partition, i)
		}
	}
}

// uniformHeterogeneous is Kafka's UniformHeterogeneousAssignmentBuilder
// (4.x): every member keeps all its current partitions of topics it still
// subscribes to; each topic's unassigned partitions go round-robin to its
// least loaded subscribers; then partitions move from the most to the
// least loaded subscribers of each topic, topic after topic, until a whole
// pass over the topics moves nothing or 16 passes ran. The result is
// balanced when all subscribers of a topic have the same subscriptions and
// otherwise close to it: no partition can go from its owner to another
// subscriber of its topic holding two fewer partitions (unless the pass
// limit cut the balancing short, which Kafka accepts for pathological
// overlapping subscriptions).
func (s *assignorState) uniformHeterogeneous() {
	for i := range s.members {
		s.claimCurrent(i)
	}
	// Kafka's topic order: partitions per subscriber descending, then
	// subscribers ascending, then topic id.
	topics := make([]int, 0, len(s.topicIDs))
	for ti := range s.topicIDs {
		topics = append(topics, ti)
	}
	slices.SortFunc(topics, func(a, b int) int {
		pa, sa := int64(s.partitions[a]), int64(len(s.subscribers[a]))
		pb, sb := int64(s.partitions[b]), int64(len(s.subscribers[b]))
		if c := cmp.Compare(pb*sa, pa*sb); c != 0 {
			return c
		}
		if c := cmp.Compare(sa, sb); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})

	b := &memberBalancer{size: s.size}
	for _, ti := range topics {
		started := false
		for p, o := range s.owner[ti] {
			if o >= 0 {
				continue
			}
			if !started {
				b.reset(s.subscribers[ti])
				started = true
			}
			s.give(ti, int32(p), b.nextLeastLoaded())
		}
	}

	// Only topics with two or more subscribers can move.
	movable := topics[:0]
	for _, ti := range topics {
		if len(s.subscribers[ti]) >= 2 {
			movable = append(movable, ti)
		}
	}
	scratch := &topicBalanceScratch{
		start: make([]int, len(s.members)),
		end:   make([]int, len(s.members)),
	}
	const maxPasses = 16 // Kafka's MAX_ITERATION_COUNT
	lastMoved := -1
	for range maxPasses {
		for k, ti := range movable {
			if k == lastMoved {
				return // a whole pass since the last move: converged
			}
			if s.balanceTopic(ti, b, scratch) > 0 || lastMoved == -1 {
				lastMoved = k
			}
		}
	}
}

// topicBalanceScratch is balanceTopic's reusable space: parts holds a
// topic's partitions grouped by owner, and start[i]:end[i] is member i's
// run in it (what it can still give away).
type topicBalanceScratch struct {
	parts      []int32
	start, end []int
}

// balanceTopic moves topic ti's partitions from its most loaded subscribers
// (each giving its highest-numbered partitions first) to its least loaded
// ones until the two differ by at most one partition, and returns how many
// moved.
func (s *assignorState) balanceTopic(ti int, b *memberBalancer, x *topicBalanceScratch) int {
	if b.reset(s.subscribers[ti]) <= 1 {
		return 0
	}
	owners := s.owner[ti]
	x.parts = x.parts[:0]
	for p := range owners {
		x.parts = append(x.parts, int32(p))
	}
	slices.SortFunc(x.parts, func(a, b int32) int {
		if c := cmp.Compare(owners[a], owners[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, i := range s.subscribers[ti] {
		x.start[i], x.end[i] = 0, 0
	}
	for k, p := range x.parts {
		o := owners[p]
		if x.end[o] == 0 {
			x.start[o] = k
		}
		x.end[o] = k + 1
	}

	moved := 0
	for !b.balanced() {
		most := b.nextMostLoaded()
		for most >= 0 && x.end[most] <= x.start[most] {
			b.excludeMostLoaded() // nothing of this topic left to give
			most = b.nextMostLoaded()
		}
		if most < 0 {
			break
		}
		x.end[most]--
		p := x.parts[x.end[most]]
		least := b.nextLeastLoaded()
		if b.balanced() {
			break
		}
		s.give(ti, p, least)
		moved++
	}
	return moved
}

// memberBalancer is Kafka's MemberAssignmentBalancer: over one topic's
// subscribers sorted by partition count (then index), it hands out the
// least loaded member to give a partition to and the most loaded member to
// take one from, growing each end's range of equally loaded members as
// their counts meet the next members', so partitions are spread evenly
// within a range instead of piling onto one member.
type memberBalancer struct {
	size   []int // member index → partition count, shared with assignorState
	sorted []int

	leastEnd   int // sorted[:leastEnd] is the least loaded range
	leastCount int // its members' count before this round of gifts
	nextLeast  int

	mostStart, mostEnd int // sorted[mostStart:mostEnd] is the most loaded range
	mostCount          int // its members' count before this round of takes
	nextMost           int
}

// reset starts over with members (not empty) and returns the spread
// between the most and least loaded of them.
func (b *memberBalancer) reset(members []int) int {
	b.sorted = append(b.sorted[:0], members...)
	slices.SortFunc(b.sorted, func(x, y int) int {
		if c := cmp.Compare(b.size[x], b.size[y]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	n := len(b.sorted)
	lo, hi := b.size[b.sorted[0]], b.size[b.sorted[n-1]]
	b.leastEnd, b.leastCount, b.nextLeast = 0, lo-1, 0
	b.mostStart, b.mostEnd, b.mostCount, b.nextMost = n, n, hi+1, n-1
	return hi - lo
}

// nextLeastLoaded returns the member to give the next partition to,
// assuming it gets it.
func (b *memberBalancer) nextLeastLoaded() int {
	if b.nextLeast >= b.leastEnd {
		// Everyone in the range got one: raise its level, take in the
		// members now level with it, start again from its first.
		b.leastCount++
		for b.leastEnd < len(b.sorted) && b.size[b.sorted[b.leastEnd]] == b.leastCount {
			b.leastEnd++
		}
		b.nextLeast = 0
	}
	i := b.sorted[b.nextLeast]
	b.nextLeast++
	return i
}

// nextMostLoaded returns the member to take the next partition from,
// assuming it gives it, or -1 when no member is left to take from.
func (b *memberBalancer) nextMostLoaded() int {
	if b.nextMost < b.mostStart {
		if b.mostEnd <= b.mostStart && b.mostStart > 0 {
			// Exclusions emptied the range: restart it at the level of
			// the next members down so that it does grow.
			b.mostCount = b.size[b.sorted[b.mostStart-1]]
		} else {
			b.mostCount--
		}
		for b.mostStart > 0 && b.size[b.sorted[b.mostStart-1]] == b.mostCount {
			b.mostStart--
		}
		b.nextMost = b.mostEnd - 1
	}
	if b.nextMost < 0 {
		return -1
	}
	i := b.sorted[b.nextMost]
	b.nextMost--
	return i
}

// excludeMostLoaded drops the member nextMostLoaded last returned from
// the most loaded range (it has nothing left to give).
func (b *memberBalancer) excludeMostLoaded() {
	k := b.nextMost + 1
	b.sorted[k], b.sorted[b.mostEnd-1] = b.sorted[b.mostEnd-1], b.sorted[k]
	b.mostEnd--
}

// balanced reports whether the two ranges' levels are within one.
func (b *memberBalancer) balanced() bool {
	return b.mostCount-b.leastCount <= 1
}

// rangeAssign is Kafka 4.x's server-side RangeAssignor: for each topic its
// subscribers, in compareRangeMembers order, get contiguous ranges, the
// first P mod S of them one partition more. It is not sticky (Kafka 3.x's
// sticky range was replaced in 4.0), but it is stable: the same members
// and partition counts always give the same ranges, and members with the
// same subscriptions get the same partition numbers of topics with the
// same partition count (co-partitioning, for joins).
func (s *assignorState) rangeAssign() {
	for ti, subs := range s.subscribers {
		n := int32(len(s.subscribers[ti]))
		base, extra := s.partitions[ti]/n, s.partitions[ti]%n
		next := int32(0)
		for k, i := range subs {
			count := base
			if int32(k) < extra {
				count++
			}
			for end := next + count; next < end; next++ {
				s.give(ti, next, i)
			}
		}
	}
}

// result is the target built, keyed by member id.
func (s *assignorState) result() Assignment {
	out := make(Assignment, len(s.members))
	for _, m := range s.members {
		out[m.ID] = map[TopicID][]int32{}
	}
	for ti, owners := range s.owner {
		t := s.topicIDs[ti]
		for p, o := range owners {
			if o >= 0 {
				a := out[s.members[o].ID]
				a[t] = append(a[t], int32(p))
			}
		}
	}
	return out
}
