package client

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func strp(s string) *string { return &s }

func members(ids ...string) []GroupMember {
	var ms []GroupMember
	for _, id := range ids {
		ms = append(ms, GroupMember{MemberID: id, Topics: []string{"t0", "t1"}, Generation: -1})
	}
	return ms
}

func TestAssignorKnownVectors(t *testing.T) {
	// The examples of Kafka's RangeAssignor and RoundRobinAssignor javadoc:
	// two consumers C0, C1 subscribed to t0 and t1, three partitions each.
	parts := map[string]int32{"t0": 3, "t1": 3}
	tests := []struct {
		name string
		a    Assignor
		want GroupAssignment
	}{
		{"range gives each member a contiguous range per topic", RangeAssignor(), GroupAssignment{
			"C0": {"t0": {0, 1}, "t1": {0, 1}},
			"C1": {"t0": {2}, "t1": {2}},
		}},
		{"round robin deals partitions in turn", RoundRobinAssignor(), GroupAssignment{
			"C0": {"t0": {0, 2}, "t1": {1}},
			"C1": {"t0": {1}, "t1": {0, 2}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.a.Assign(members("C1", "C0"), parts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRoundRobinSkipsUnsubscribedMembers(t *testing.T) {
	ms := []GroupMember{
		{MemberID: "a", Topics: []string{"t0"}},
		{MemberID: "b", Topics: []string{"t0", "t1"}},
	}
	got, _ := RoundRobinAssignor().Assign(ms, map[string]int32{"t0": 2, "t1": 2})
	want := GroupAssignment{"a": {"t0": {0}}, "b": {"t0": {1}, "t1": {0, 1}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestRangeOrdersStaticMembersByInstanceID(t *testing.T) {
	// A restarted static member gets a new member id but keeps its range.
	ms := []GroupMember{
		{MemberID: "zzz-new", InstanceID: strp("i0"), Topics: []string{"t"}},
		{MemberID: "aaa", InstanceID: strp("i1"), Topics: []string{"t"}},
	}
	got, _ := RangeAssignor().Assign(ms, map[string]int32{"t": 4})
	want := GroupAssignment{"zzz-new": {"t": {0, 1}}, "aaa": {"t": {2, 3}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// checkExactlyOnce fails unless every partition of a topic some member
// subscribes to is assigned exactly once, and only to a subscriber.
func checkExactlyOnce(t *testing.T, ms []GroupMember, parts map[string]int32, a GroupAssignment) {
	t.Helper()
	seen := map[groupTP]string{}
	for _, m := range ms {
		for topic, ps := range a[m.MemberID] {
			if !slices.Contains(m.Topics, topic) {
				t.Fatalf("member %s assigned %s it does not subscribe to", m.MemberID, topic)
			}
			for _, p := range ps {
				tp := groupTP{topic, p}
				if other, ok := seen[tp]; ok {
					t.Fatalf("%v assigned to both %s and %s", tp, other, m.MemberID)
				}
				seen[tp] = m.MemberID
			}
		}
	}
	for topic, n := range parts {
		subscribed := false
		for _, m := range ms {
			subscribed = subscribed || slices.Contains(m.Topics, topic)
		}
		for p := range n {
			if _, ok := seen[groupTP{topic, p}]; subscribed && !ok {
				t.Fatalf("%s-%d not assigned", topic, p)
			}
		}
	}
}

func counts(a GroupAssignment) map[string]int {
	c := map[string]int{}
	for m, topics := range a {
		c[m] = 0
		for _, ps := range topics {
			c[m] += len(ps)
		}
	}
	return c
}

func checkBalanced(t *testing.T, a GroupAssignment) {
	t.Helper()
	lo, hi := -1, -1
	for _, n := range counts(a) {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced: counts %v", counts(a))
	}
}

func randomGroup(r *rand.Rand, uniform bool) ([]GroupMember, map[string]int32) {
	parts := map[string]int32{}
	var topics []string
	for i := range 1 + r.IntN(5) {
		name := fmt.Sprintf("t%d", i)
		parts[name] = int32(1 + r.IntN(12))
		topics = append(topics, name)
	}
	var ms []GroupMember
	for i := range 1 + r.IntN(7) {
		m := GroupMember{MemberID: fmt.Sprintf("m%02d", i), Generation: -1}
		if uniform {
			m.Topics = topics
		} else {
			for _, tp := range topics {
				if r.IntN(2) == 0 {
					m.Topics = append(m.Topics, tp)
				}
			}
		}
		ms = append(ms, m)
	}
	return ms, parts
}

func TestAssignorsAssignEveryPartitionExactlyOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, a := range []Assignor{RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()} {
		t.Run(a.Name(), func(t *testing.T) {
			for range 300 {
				ms, parts := randomGroup(r, r.IntN(2) == 0)
				got, err := a.Assign(ms, parts)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(ms) {
					t.Fatalf("%d members, assignment for %d", len(ms), len(got))
				}
				checkExactlyOnce(t, ms, parts, got)
			}
		})
	}
}

func TestAssignorsBalanceEqualSubscriptions(t *testing.T) {
	// Range balances per topic only, so it is excluded.
	r := rand.New(rand.NewPCG(3, 4))
	for _, a := range []Assignor{RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()} {
		t.Run(a.Name(), func(t *testing.T) {
			for range 300 {
				ms, parts := randomGroup(r, true)
				got, _ := a.Assign(ms, parts)
				checkBalanced(t, got)
			}
		})
	}
}

// withOwned returns ms with Owned set from a, at the given generation.
func withOwned(ms []GroupMember, a GroupAssignment, gen int32) []GroupMember {
	out := slices.Clone(ms)
	for i := range out {
		out[i].Owned = a[out[i].MemberID]
		out[i].Generation = gen
	}
	return out
}

func moves(before, after GroupAssignment) int {
	owner := map[groupTP]string{}
	for m, topics := range before {
		for topic, ps := range topics {
			for _, p := range ps {
				owner[groupTP{topic, p}] = m
			}
		}
	}
	n := 0
	for m, topics := range after {
		for topic, ps := range topics {
			for _, p := range ps {
				// Partitions of members that left must move; they do not count.
				if o, ok := owner[groupTP{topic, p}]; ok && o != m && after[o] != nil {
					n++
				}
			}
		}
	}
	return n
}

func TestStickyKeepsPartitionsAcrossRebalances(t *testing.T) {
	parts := map[string]int32{"t0": 7, "t1": 5}
	base := members("a", "b", "c")
	gen1, _ := StickyAssignor().Assign(base, parts)
	checkBalanced(t, gen1)

	t.Run("a member joining takes only its share", func(t *testing.T) {
		ms := append(withOwned(base, gen1, 1), members("d")...)
		got, _ := StickyAssignor().Assign(ms, parts)
		checkExactlyOnce(t, ms, parts, got)
		checkBalanced(t, got)
		// 12 partitions over 4 members: d takes 3, nothing else moves.
		if n := moves(gen1, got); n != 3 {
			t.Fatalf("%d partitions moved, want 3: %v -> %v", n, gen1, got)
		}
		if c := counts(got)["d"]; c != 3 {
			t.Fatalf("new member got %d partitions", c)
		}
	})
	t.Run("a member leaving spreads only its own partitions", func(t *testing.T) {
		ms := withOwned(base[:2], gen1, 1)
		got, _ := StickyAssignor().Assign(ms, parts)
		checkExactlyOnce(t, ms, parts, got)
		checkBalanced(t, got)
		if n := moves(gen1, got); n != 0 {
			t.Fatalf("%d surviving partitions moved", n)
		}
	})
	t.Run("round trip through the subscription encoding", func(t *testing.T) {
		var ms []GroupMember
		for _, m := range base {
			meta := StickyAssignor().Metadata(m.Topics, gen1[m.MemberID], 1)
			gm, err := DecodeGroupMember(m.MemberID, nil, "sticky", meta)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, gm)
		}
		got, _ := StickyAssignor().Assign(ms, parts)
		if !reflect.DeepEqual(got, gen1) {
			t.Fatalf("same members rebalanced to %v, had %v", got, gen1)
		}
	})
	t.Run("newest generation wins a contested partition", func(t *testing.T) {
		ms := []GroupMember{
			{MemberID: "a", Topics: []string{"t"}, Owned: map[string][]int32{"t": {0, 1}}, Generation: 5},
			{MemberID: "b", Topics: []string{"t"}, Owned: map[string][]int32{"t": {0}}, Generation: 4},
		}
		got, _ := StickyAssignor().Assign(ms, map[string]int32{"t": 2})
		want := GroupAssignment{"a": {"t": {0}}, "b": {"t": {1}}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

func TestStickyRandomRebalancesStayBalancedAndSticky(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		ms, parts := randomGroup(r, true)
		prev, _ := StickyAssignor().Assign(ms, parts)
		// One member leaves or one joins.
		next := withOwned(ms, prev, 1)
		if len(next) > 1 && r.IntN(2) == 0 {
			next = slices.Delete(next, 0, 1)
		} else {
			next = append(next, GroupMember{MemberID: "new", Topics: ms[0].Topics, Generation: -1})
		}
		got, _ := StickyAssignor().Assign(next, parts)
		checkExactlyOnce(t, next, parts, got)
		checkBalanced(t, got)
		// A member keeps at least min(what it had, its fair floor).
		total := 0
		for _, n := range parts {
			total += int(n)
		}
		floor := total / len(next)
		for _, m := range next {
			kept := 0
			for topic, ps := range got[m.MemberID] {
				for _, p := range ps {
					if slices.Contains(m.Owned[topic], p) {
						kept++
					}
				}
			}
			had := counts(GroupAssignment{"x": m.Owned})["x"]
			if kept < min(had, floor) {
				t.Fatalf("member %s kept %d of %d (floor %d)", m.MemberID, kept, had, floor)
			}
		}
	}
}

func TestCooperativeStickyRevokesOnlyWhatMoves(t *testing.T) {
	parts := map[string]int32{"t0": 6}
	coop := CooperativeStickyAssignor()
	gen1, _ := coop.Assign(members("a", "b"), parts)
	checkBalanced(t, gen1)

	// c joins: a and b still own 3 each. The first rebalance may only take
	// partitions away, never hand an owned partition to someone else.
	ms := append(withOwned(members("a", "b"), gen1, 1), members("c")...)
	round1, _ := coop.Assign(ms, parts)
	for m, topics := range round1 {
		for topic, ps := range topics {
			for _, p := range ps {
				for other, otopics := range gen1 {
					if other != m && slices.Contains(otopics[topic], p) {
						t.Fatalf("round 1 gave %s-%d owned by %s to %s", topic, p, other, m)
					}
				}
			}
		}
	}
	if c := counts(round1)["c"]; c != 0 {
		t.Fatalf("c got %d partitions in round 1; all of them were owned", c)
	}
	revoked := 0
	for m, topics := range gen1 {
		revoked += counts(GroupAssignment{m: topics})[m] - counts(GroupAssignment{m: round1[m]})[m]
	}
	if revoked != 2 {
		t.Fatalf("round 1 revoked %d partitions, want 2 (one from each of a and b)", revoked)
	}

	// Members that lost partitions rejoin owning only what round 1 left them.
	ms2 := withOwned(ms, round1, 2)
	round2, _ := coop.Assign(ms2, parts)
	checkExactlyOnce(t, ms2, parts, round2)
	checkBalanced(t, round2)
	if n := moves(round1, round2); n != 0 {
		t.Fatalf("round 2 moved %d partitions still owned", n)
	}
	if c := counts(round2)["c"]; c != 2 {
		t.Fatalf("c got %d partitions in round 2, want 2", c)
	}
}

func TestCooperativeStickyEncodingCarriesOwnedPartitions(t *testing.T) {
	owned := map[string][]int32{"t0": {2, 0}, "t1": {1}}
	meta := CooperativeStickyAssignor().Metadata([]string{"t1", "t0"}, owned, 7)
	gm, err := DecodeGroupMember("m", strp("i"), "cooperative-sticky", meta)
	if err != nil {
		t.Fatal(err)
	}
	want := GroupMember{MemberID: "m", InstanceID: gm.InstanceID, Topics: []string{"t0", "t1"},
		Owned: map[string][]int32{"t0": {0, 2}, "t1": {1}}, Generation: 7}
	if !reflect.DeepEqual(gm, want) {
		t.Fatalf("decoded %+v, want %+v", gm, want)
	}
}

func TestAssignmentEncodingRoundTrip(t *testing.T) {
	a := map[string][]int32{"x": {0, 3}, "y": {1}}
	got, err := decodeAssignment(encodeAssignment(a))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("got %v, want %v", got, a)
	}
	if got, err := decodeAssignment(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty assignment: %v, %v", got, err)
	}
	if _, err := decodeAssignment([]byte{0, 0, 0, 0, 0, 9}); err == nil {
		t.Fatal("truncated assignment decoded")
	}
}

func TestStickyUserDataDecodesV0AndRejectsGarbage(t *testing.T) {
	full := encodeStickyUserData(map[string][]int32{"t": {1, 2}}, 9)
	owned, gen, err := decodeStickyUserData(full[:len(full)-4])
	if err != nil || gen != -1 || !reflect.DeepEqual(owned, map[string][]int32{"t": {1, 2}}) {
		t.Fatalf("v0: %v %d %v", owned, gen, err)
	}
	for i := range len(full) - 4 {
		if _, _, err := decodeStickyUserData(full[:i]); err == nil && i > 0 {
			t.Fatalf("decoded %d-byte prefix", i)
		}
	}
}
