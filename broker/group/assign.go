package group

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Server-side assignors of KIP-848 consumer groups (Kafka's
// group.consumer.assignors): "uniform", the default, and "range".

// TopicID is a topic's uuid.
type TopicID = [16]byte

// AssignorTopic is a subscribed topic as an assignor sees it.
type AssignorTopic struct {
	Name       string
	Partitions int32
}

// AssignorMember is one member: the existing topics it subscribes to and
// its partitions in the group's current target assignment (what a sticky
// assignor keeps).
type AssignorMember struct {
	ID         string
	InstanceID string
	RackID     string // not used: Keel's assignors are not rack aware
	Subscribed []TopicID
	Current    map[TopicID][]int32
}

// Assignment maps member id → topic id → sorted partitions.
type Assignment map[string]map[TopicID][]int32

// ServerAssignors are the assignors a member may name, the default first.
var ServerAssignors = []string{"uniform", "range"}

// Assign runs the named assignor. Every partition of a subscribed topic
// goes to exactly one member subscribed to it; every member is in the
// result, with an empty assignment if it gets nothing.
func Assign(assignor string, members []AssignorMember, topics map[TopicID]AssignorTopic) (Assignment, error) {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b AssignorMember) int { return compareStrings(a.ID, b.ID) })
	switch assignor {
	case "uniform":
		return assignUniform(members, topics), nil
	case "range":
		return assignRange(members, topics), nil
	}
	return nil, fmt.Errorf("unknown assignor %q", assignor)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type tp struct {
	t TopicID
	p int32
}

func lessTP(a, b tp) int {
	if c := compareTopicIDs(a.t, b.t); c != 0 {
		return c
	}
	return int(a.p - b.p)
}

// assignUniform spreads the partitions evenly and keeps each member's
// current partitions as far as balance allows (Kafka's UniformAssignor:
// with identical subscriptions every member ends with ⌊P/N⌋ or ⌈P/N⌉
// partitions; otherwise as even as the subscriptions allow).
func assignUniform(members []AssignorMember, topics map[TopicID]AssignorTopic) Assignment {
	subs := make([]map[TopicID]bool, len(members))
	homogeneous := true
	for i, m := range members {
		subs[i] = map[TopicID]bool{}
		for _, t := range m.Subscribed {
			if _, ok := topics[t]; ok {
				subs[i][t] = true
			}
		}
		if i > 0 && !maps.Equal(subs[i], subs[0]) {
			homogeneous = false
		}
	}
	owned := make([][]tp, len(members))
	taken := map[tp]bool{}
	// Keep what is still valid: an existing partition of a subscribed
	// topic that no member before claimed.
	for i, m := range members {
		for _, t := range slices.SortedFunc(maps.Keys(m.Current), compareTopicIDs) {
			if !subs[i][t] {
				continue
			}
			for _, p := range slices.Sorted(slices.Values(m.Current[t])) {
				x := tp{t, p}
				if p >= 0 && p < topics[t].Partitions && !taken[x] {
					taken[x] = true
					owned[i] = append(owned[i], x)
				}
			}
		}
	}
	// The partitions to place, in topic id and partition order.
	var free []tp
	for _, t := range slices.SortedFunc(maps.Keys(topics), compareTopicIDs) {
		subscribed := false
		for i := range members {
			subscribed = subscribed || subs[i][t]
		}
		if !subscribed {
			continue
		}
		for p := int32(0); p < topics[t].Partitions; p++ {
			if !taken[tp{t, p}] {
				free = append(free, tp{t, p})
			}
		}
	}
	if homogeneous && len(members) > 0 {
		total := len(free)
		for _, o := range owned {
			total += len(o)
		}
		base, extra := total/len(members), total%len(members)
		quota := make([]int, len(members))
		// The extra slots go first to members that already hold more
		// than the base, so they give up as little as possible.
		for i := range members {
			quota[i] = base
			if extra > 0 && len(owned[i]) > base {
				quota[i]++
				extra--
			}
		}
		for i := range members {
			if extra > 0 && quota[i] == base {
				quota[i]++
				extra--
			}
		}
		for i := range members {
			if len(owned[i]) > quota[i] {
				free = append(free, owned[i][quota[i]:]...)
				owned[i] = owned[i][:quota[i]]
			}
		}
		slices.SortFunc(free, lessTP)
		for i := range members {
			for len(owned[i]) < quota[i] && len(free) > 0 {
				owned[i] = append(owned[i], free[0])
				free = free[1:]
			}
		}
		return buildAssignment(members, owned)
	}
	// Different subscriptions: each free partition, topics with the fewest
	// subscribers first, to the eligible member holding the fewest; then
	// partitions move from fuller members to eligible emptier ones until
	// no move narrows the spread by two or more.
	eligible := map[TopicID][]int{}
	for i := range members {
		for t := range subs[i] {
			eligible[t] = append(eligible[t], i)
		}
	}
	sort.SliceStable(free, func(a, b int) bool {
		if la, lb := len(eligible[free[a].t]), len(eligible[free[b].t]); la != lb {
			return la < lb
		}
		return lessTP(free[a], free[b]) < 0
	})
	fewest := func(t TopicID) int {
		best := -1
		for _, i := range eligible[t] {
			if best < 0 || len(owned[i]) < len(owned[best]) || (len(owned[i]) == len(owned[best]) && i < best) {
				best = i
			}
		}
		return best
	}
	for _, x := range free {
		i := fewest(x.t)
		owned[i] = append(owned[i], x)
	}
	for moved := true; moved; {
		moved = false
		order := make([]int, len(members))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return len(owned[order[a]]) > len(owned[order[b]]) })
		for _, i := range order {
			for k := len(owned[i]) - 1; k >= 0; k-- {
				x := owned[i][k]
				j := fewest(x.t)
				if j >= 0 && len(owned[j]) < len(owned[i])-1 {
					owned[i] = slices.Delete(owned[i], k, k+1)
					owned[j] = append(owned[j], x)
					moved = true
				}
			}
		}
	}
	return buildAssignment(members, owned)
}

// assignRange gives each topic's subscribers contiguous ranges of its
// partitions in member id order, the first N mod M one more (Kafka's
// RangeAssignor), so members with the same subscriptions get the same
// partition numbers of co-partitioned topics. It is not sticky.
func assignRange(members []AssignorMember, topics map[TopicID]AssignorTopic) Assignment {
	owned := make([][]tp, len(members))
	for _, t := range slices.SortedFunc(maps.Keys(topics), compareTopicIDs) {
		var subs []int
		for i, m := range members {
			if slices.Contains(m.Subscribed, t) {
				subs = append(subs, i)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := topics[t].Partitions
		per, extra := n/int32(len(subs)), n%int32(len(subs))
		p := int32(0)
		for k, i := range subs {
			count := per
			if int32(k) < extra {
				count++
			}
			for ; count > 0; count-- {
				owned[i] = append(owned[i], tp{t, p})
				p++
			}
		}
	}
	return buildAssignment(members, owned)
}

func buildAssignment(members []AssignorMember, owned [][]tp) Assignment {
	out := make(Assignment, len(members))
	for i, m := range members {
		a := map[TopicID][]int32{}
		for _, x := range owned[i] {
			a[x.t] = append(a[x.t], x.p)
		}
		for t := range a {
			slices.Sort(a[t])
		}
		out[m.ID] = a
	}
	return out
}
