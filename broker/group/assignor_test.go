package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// asgTopic is a test topic id: "t1" → {'t', '1', 0, ...}.
func asgTopic(name string) TopicID {
	var id TopicID
	copy(id[:], name)
	return id
}

func asgTopics(counts map[string]int32) map[TopicID]AssignorTopic {
	out := map[TopicID]AssignorTopic{}
	for name, n := range counts {
		out[asgTopic(name)] = AssignorTopic{Name: name, Partitions: n}
	}
	return out
}

func asgSub(names ...string) []TopicID {
	var ids []TopicID
	for _, n := range names {
		ids = append(ids, asgTopic(n))
	}
	return ids
}

// asgParts builds a member's partitions: asgParts("t1", 0, 1, "t2", 3).
func asgParts(spec ...any) map[TopicID][]int32 {
	out := map[TopicID][]int32{}
	var t TopicID
	for _, x := range spec {
		switch v := x.(type) {
		case string:
			t = asgTopic(v)
			out[t] = out[t][:0:0]
		case int:
			out[t] = append(out[t], int32(v))
		}
	}
	return out
}

func asgString(a map[TopicID][]int32) string {
	ts := slices.SortedFunc(maps.Keys(a), func(x, y TopicID) int { return slices.Compare(x[:], y[:]) })
	s := ""
	for _, t := range ts {
		name := string(t[:slices.Index(t[:], 0)])
		s += fmt.Sprintf("%s%v ", name, a[t])
	}
	return s
}

func asgCount(a map[TopicID][]int32) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// asgRun runs the assignor and fails unless the result is valid: every
// member present, every partition of a subscribed topic owned exactly once
// by a subscriber of its topic, partitions sorted, nothing else assigned.
func asgRun(t *testing.T, assignor string, members []AssignorMember, topics map[TopicID]AssignorTopic) Assignment {
	t.Helper()
	a, err := runServerAssignor(assignor, members, topics)
	if err != nil {
		t.Fatal(err)
	}
	asgCheckValid(t, members, topics, a)
	return a
}

func asgCheckValid(t *testing.T, members []AssignorMember, topics map[TopicID]AssignorTopic, a Assignment) {
	t.Helper()
	if len(a) != len(members) {
		t.Fatalf("%d members in the result, want %d", len(a), len(members))
	}
	type partitionKey struct {
		t TopicID
		p int32
	}
	owner := map[partitionKey]string{}
	subscribed := map[TopicID]bool{}
	for _, m := range members {
		for _, topic := range m.Subscribed {
			subscribed[topic] = true
		}
		got, ok := a[m.ID]
		if !ok || got == nil {
			t.Fatalf("member %s missing from the result", m.ID)
		}
		for topic, ps := range got {
			if !slices.Contains(m.Subscribed, topic) {
				t.Fatalf("%s got %q, which it does not subscribe to", m.ID, topic)
			}
			if len(ps) == 0 || !slices.IsSorted(ps) {
				t.Fatalf("%s got %q %v: want non-empty and sorted", m.ID, topic, ps)
			}
			for _, p := range ps {
				if p < 0 || p >= topics[topic].Partitions {
					t.Fatalf("%s got partition %d of %q, which has %d", m.ID, p, topic, topics[topic].Partitions)
				}
				if o, dup := owner[partitionKey{topic, p}]; dup {
					t.Fatalf("%q-%d assigned to %s and %s", topic, p, o, m.ID)
				}
				owner[partitionKey{topic, p}] = m.ID
			}
		}
	}
	for topic, info := range topics {
		for p := int32(0); subscribed[topic] && p < info.Partitions; p++ {
			if _, ok := owner[partitionKey{topic, p}]; !ok {
				t.Fatalf("%q-%d unassigned", topic, p)
			}
		}
	}
}

// asgSpread is the difference between the largest and smallest member.
func asgSpread(a Assignment) int {
	lo, hi := 1<<30, 0
	for _, m := range a {
		lo, hi = min(lo, asgCount(m)), max(hi, asgCount(m))
	}
	return hi - lo
}

// asgMoved counts the partitions of before that a member no longer has in
// after (members absent from after are not counted).
func asgMoved(before, after Assignment) int {
	moved := 0
	for id, was := range before {
		now, ok := after[id]
		if !ok {
			continue
		}
		for topic, ps := range was {
			for _, p := range ps {
				if !slices.Contains(now[topic], p) {
					moved++
				}
			}
		}
	}
	return moved
}

// asgFeedBack returns members with Current set to their part of a.
func asgFeedBack(members []AssignorMember, a Assignment) []AssignorMember {
	out := slices.Clone(members)
	for i := range out {
		out[i].Current = a[out[i].ID]
	}
	return out
}

func asgMembers(n int, sub []TopicID) []AssignorMember {
	var ms []AssignorMember
	for i := range n {
		ms = append(ms, AssignorMember{ID: fmt.Sprintf("m%02d", i), Subscribed: sub})
	}
	return ms
}

func TestAssignorUnknownName(t *testing.T) {
	if _, err := runServerAssignor("cooperative-sticky", asgMembers(1, asgSub("t1")), asgTopics(map[string]int32{"t1": 1})); err == nil {
		t.Fatal("an unknown assignor was accepted")
	}
}

func TestAssignorValidity(t *testing.T) {
	tests := []struct {
		name    string
		topics  map[string]int32
		members []AssignorMember
		want    map[string]string // member → asgString, for both assignors
	}{
		{
			name:    "no members",
			topics:  map[string]int32{"t1": 3},
			members: nil,
			want:    map[string]string{},
		},
		{
			name:    "members without subscriptions get an empty assignment",
			topics:  map[string]int32{"t1": 3},
			members: []AssignorMember{{ID: "a"}, {ID: "b"}},
			want:    map[string]string{"a": "", "b": ""},
		},
		{
			name:   "a subscription to a missing topic is ignored",
			topics: map[string]int32{"t1": 2},
			members: []AssignorMember{
				{ID: "a", Subscribed: asgSub("gone")},
				{ID: "b", Subscribed: asgSub("t1", "gone")},
			},
			want: map[string]string{"a": "", "b": "t1[0 1] "},
		},
		{
			name:    "topics nobody subscribes to get nothing",
			topics:  map[string]int32{"t1": 2, "t2": 5},
			members: asgMembers(2, asgSub("t1")),
			want:    map[string]string{"m00": "t1[0] ", "m01": "t1[1] "},
		},
		{
			name:    "a topic without partitions",
			topics:  map[string]int32{"t0": 0, "t1": 1},
			members: asgMembers(2, asgSub("t0", "t1")),
			want:    map[string]string{"m00": "t1[0] ", "m01": ""},
		},
		{
			name:    "more members than partitions",
			topics:  map[string]int32{"t1": 2},
			members: asgMembers(3, asgSub("t1")),
			want:    map[string]string{"m00": "t1[0] ", "m01": "t1[1] ", "m02": ""},
		},
		{
			name:   "current partitions of other topics are dropped",
			topics: map[string]int32{"t1": 2},
			members: []AssignorMember{
				{ID: "a", Subscribed: asgSub("t1"), Current: asgParts("old", 0, 1, "t1", 1)},
			},
			want: map[string]string{"a": "t1[0 1] "},
		},
	}
	for _, tc := range tests {
		for _, assignor := range ServerAssignors {
			t.Run(assignor+"/"+tc.name, func(t *testing.T) {
				a := asgRun(t, assignor, tc.members, asgTopics(tc.topics))
				got := map[string]string{}
				for id, m := range a {
					got[id] = asgString(m)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// Kafka's homogeneous uniform builder: ⌊P/N⌋ each, the first P mod N
// members (by id) one more, free partitions handed out in topic then
// partition order.
func TestAssignorUniformFresh(t *testing.T) {
	a := asgRun(t, "uniform", asgMembers(3, asgSub("t1", "t2")), asgTopics(map[string]int32{"t1": 4, "t2": 3}))
	want := map[string]string{"m00": "t1[0 1 2] ", "m01": "t1[3] t2[0] ", "m02": "t2[1 2] "}
	for id, w := range want {
		if got := asgString(a[id]); got != w {
			t.Errorf("%s: got %s, want %s", id, got, w)
		}
	}
}

func TestAssignorUniformHomogeneousSticky(t *testing.T) {
	sub := asgSub("t1", "t2")
	topics := asgTopics(map[string]int32{"t1": 9, "t2": 4})
	tests := []struct {
		name    string
		members []AssignorMember
		topics  map[TopicID]AssignorTopic
		// wantKeep: member → partitions it must still own.
		wantKeep map[string]map[TopicID][]int32
		// wantMoved: how many current partitions may change owner.
		wantMoved int
	}{
		{
			name: "a joining member takes only what balance needs",
			members: []AssignorMember{
				{ID: "a", Subscribed: sub, Current: asgParts("t1", 0, 1, 2, 3, "t2", 0)},
				{ID: "b", Subscribed: sub, Current: asgParts("t1", 4, 5, 6, 7)},
				{ID: "c", Subscribed: sub, Current: asgParts("t1", 8, "t2", 1, 2, 3)},
				{ID: "d", Subscribed: sub},
			},
			topics: topics,
			// 13 over 4 is 4, 3, 3, 3: a (5) keeps 4, b and c (4) keep 3.
			wantMoved: 3,
		},
		{
			name: "a leaving member's partitions go to the others, nothing else moves",
			members: []AssignorMember{
				{ID: "a", Subscribed: sub, Current: asgParts("t1", 0, 1, 2, "t2", 0)},
				{ID: "b", Subscribed: sub, Current: asgParts("t1", 4, 5, 6)},
				{ID: "d", Subscribed: sub, Current: asgParts("t2", 1, 2, 3)},
				// c left with t1 3, 7, 8.
			},
			topics: topics,
			wantKeep: map[string]map[TopicID][]int32{
				"a": asgParts("t1", 0, 1, 2, "t2", 0),
				"b": asgParts("t1", 4, 5, 6),
				"d": asgParts("t2", 1, 2, 3),
			},
		},
		{
			name: "new partitions of a topic go to members under quota",
			members: []AssignorMember{
				{ID: "a", Subscribed: sub, Current: asgParts("t1", 0, 1, 2, "t2", 0, 1)},
				{ID: "b", Subscribed: sub, Current: asgParts("t1", 3, 4, 5, 6, 7)},
				{ID: "c", Subscribed: sub, Current: asgParts("t1", 8, "t2", 2, 3)},
			},
			topics: asgTopics(map[string]int32{"t1": 12, "t2": 4}), // t1 grew from 9
			wantKeep: map[string]map[TopicID][]int32{
				"a": asgParts("t1", 0, 1, 2, "t2", 0, 1),
				"b": asgParts("t1", 3, 4, 5, 6, 7),
				"c": asgParts("t1", 8, "t2", 2, 3),
			},
		},
		{
			name: "a deleted topic's partitions are dropped and balance is restored",
			members: []AssignorMember{
				{ID: "a", Subscribed: asgSub("t1"), Current: asgParts("t1", 0, 1, 2, 3, "t2", 0, 1)},
				{ID: "b", Subscribed: asgSub("t1"), Current: asgParts("t1", 4, 5, "t2", 2, 3)},
				{ID: "c", Subscribed: asgSub("t1"), Current: asgParts("t1", 6, 7, 8)},
			},
			topics:    asgTopics(map[string]int32{"t1": 9}),
			wantKeep:  map[string]map[TopicID][]int32{"b": asgParts("t1", 4, 5), "c": asgParts("t1", 6, 7, 8)},
			wantMoved: 1 + 4, // a gives one t1 partition to b; t2 is gone
		},
		{
			name: "a member over quota gives up only its excess",
			members: []AssignorMember{
				{ID: "a", Subscribed: sub, Current: asgParts("t1", 0, 1, 2, 3, 4, 5, 6, 7, 8, "t2", 0)},
				{ID: "b", Subscribed: sub, Current: asgParts("t2", 1)},
				{ID: "c", Subscribed: sub},
			},
			topics:    topics,
			wantKeep:  map[string]map[TopicID][]int32{"b": asgParts("t2", 1)},
			wantMoved: 10 - 5, // 13 over 3: a keeps 5 (it holds more than 4)
		},
		{
			name: "members already holding one partition more keep it, whatever their id",
			members: []AssignorMember{
				{ID: "a", Subscribed: sub, Current: asgParts("t1", 0, 1, 2)},
				{ID: "b", Subscribed: sub, Current: asgParts("t1", 3, 4, 5, 6)},
				{ID: "c", Subscribed: sub, Current: asgParts("t1", 7, 8, "t2", 0)},
				{ID: "d", Subscribed: sub, Current: asgParts("t2", 1, 2, 3)},
			},
			topics: topics,
		},
		{
			name: "a partition claimed twice goes to the first member by id",
			members: []AssignorMember{
				{ID: "b", Subscribed: asgSub("t1"), Current: asgParts("t1", 0, 1)},
				{ID: "a", Subscribed: asgSub("t1"), Current: asgParts("t1", 1, 2, 99)},
			},
			topics:    asgTopics(map[string]int32{"t1": 4}),
			wantKeep:  map[string]map[TopicID][]int32{"a": asgParts("t1", 1, 2), "b": asgParts("t1", 0)},
			wantMoved: 2, // b's claim on 1 and a's on the nonexistent 99
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := asgRun(t, "uniform", tc.members, tc.topics)
			if s := asgSpread(a); s > 1 {
				t.Fatalf("spread %d, want at most 1: %v", s, a)
			}
			for id, keep := range tc.wantKeep {
				for topic, ps := range keep {
					for _, p := range ps {
						if !slices.Contains(a[id][topic], p) {
							t.Errorf("%s lost %q-%d: now %s", id, topic, p, asgString(a[id]))
						}
					}
				}
			}
			before := Assignment{}
			for _, m := range tc.members {
				before[m.ID] = m.Current
			}
			if moved := asgMoved(before, a); moved != tc.wantMoved {
				t.Errorf("%d current partitions moved, want %d", moved, tc.wantMoved)
			}
		})
	}
}

// Growing a balanced group one member at a time moves, each time, only the
// partitions the newcomer's quota needs.
func TestAssignorUniformJoinsMoveMinimum(t *testing.T) {
	topics := asgTopics(map[string]int32{"t1": 31, "t2": 17, "t3": 8})
	sub := asgSub("t1", "t2", "t3")
	members := asgMembers(1, sub)
	a := asgRun(t, "uniform", members, topics)
	for n := 2; n <= 20; n++ {
		members = asgFeedBack(members, a)
		members = append(members, AssignorMember{ID: fmt.Sprintf("m%02d", n-1), Subscribed: sub})
		b := asgRun(t, "uniform", members, topics)
		if s := asgSpread(b); s > 1 {
			t.Fatalf("%d members: spread %d", n, s)
		}
		// The newcomer ends with ⌊56/n⌋ partitions, all taken from others.
		if moved, want := asgMoved(a, b), 56/n; moved != want {
			t.Fatalf("%d members: %d partitions moved, want %d", n, moved, want)
		}
		a = b
	}
}

func TestAssignorUniformHeterogeneous(t *testing.T) {
	t.Run("a newcomer with a different subscription takes what only it can, nothing more", func(t *testing.T) {
		topics := asgTopics(map[string]int32{"t1": 6, "t2": 3})
		members := []AssignorMember{
			{ID: "a", Subscribed: asgSub("t1"), Current: asgParts("t1", 0, 1, 2)},
			{ID: "b", Subscribed: asgSub("t1"), Current: asgParts("t1", 3, 4, 5)},
			{ID: "c", Subscribed: asgSub("t1", "t2")},
		}
		a := asgRun(t, "uniform", members, topics)
		if got := asgString(a["c"]); got != "t2[0 1 2] " {
			t.Fatalf("c got %s, want t2[0 1 2]", got)
		}
		if asgString(a["a"]) != "t1[0 1 2] " || asgString(a["b"]) != "t1[3 4 5] " {
			t.Fatalf("a, b moved: %v", a)
		}
	})
	t.Run("balanced when the shared topic allows", func(t *testing.T) {
		topics := asgTopics(map[string]int32{"t1": 12, "t2": 2})
		members := []AssignorMember{
			{ID: "a", Subscribed: asgSub("t1")},
			{ID: "b", Subscribed: asgSub("t1")},
			{ID: "c", Subscribed: asgSub("t1", "t2")},
		}
		a := asgRun(t, "uniform", members, topics)
		if s := asgSpread(a); s > 1 {
			t.Fatalf("spread %d: %v", s, a)
		}
		if asgCount(a["c"]) < 2 || len(a["c"][asgTopic("t2")]) != 2 {
			t.Fatalf("c should hold all of t2: %v", a)
		}
	})
	t.Run("a topic dropped from a subscription goes to its other subscribers, then the shared topic rebalances", func(t *testing.T) {
		topics := asgTopics(map[string]int32{"t1": 8, "t2": 4})
		members := []AssignorMember{
			{ID: "a", Subscribed: asgSub("t1", "t2"), Current: asgParts("t1", 0, 1, 2, 3, "t2", 0, 1)},
			{ID: "b", Subscribed: asgSub("t1"), Current: asgParts("t1", 4, 5, 6, 7, "t2", 2, 3)},
		}
		a := asgRun(t, "uniform", members, topics)
		// a takes t2 2 and 3 (it alone reads t2), then gives b its two
		// highest t1 partitions, 3 and 2.
		if got := asgString(a["a"]); got != "t1[0 1] t2[0 1 2 3] " {
			t.Fatalf("a got %s", got)
		}
		if got := asgString(a["b"]); got != "t1[2 3 4 5 6 7] " {
			t.Fatalf("b got %s", got)
		}
	})
	t.Run("the least loaded subscriber of a topic takes its free partitions", func(t *testing.T) {
		// a only reads t1, b reads both, c only t3: t2's partitions can go
		// only to b, t3's only to c, and t1's are split to even a and b.
		topics := asgTopics(map[string]int32{"t1": 10, "t2": 2, "t3": 5})
		members := []AssignorMember{
			{ID: "a", Subscribed: asgSub("t1")},
			{ID: "b", Subscribed: asgSub("t1", "t2")},
			{ID: "c", Subscribed: asgSub("t3")},
		}
		a := asgRun(t, "uniform", members, topics)
		if n := asgCount(a["a"]); n != 6 {
			t.Fatalf("a got %d partitions, want 6: %v", n, a)
		}
		if n := asgCount(a["b"]); n != 6 {
			t.Fatalf("b got %d partitions, want 6: %v", n, a)
		}
	})
}

func TestAssignorDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	topics := asgTopics(map[string]int32{"t1": 7, "t2": 13, "t3": 1, "t4": 30})
	groups := map[string][]AssignorMember{
		"homogeneous": asgMembers(6, asgSub("t1", "t2", "t3", "t4")),
		"heterogeneous": {
			{ID: "a", Subscribed: asgSub("t1", "t2")},
			{ID: "b", Subscribed: asgSub("t2", "t3", "t4")},
			{ID: "c", Subscribed: asgSub("t4")},
			{ID: "d", Subscribed: asgSub("t1", "t4"), InstanceID: "i1"},
			{ID: "e", Subscribed: asgSub("t4", "t1", "t2"), InstanceID: "i0"},
		},
	}
	for name, members := range groups {
		for _, assignor := range ServerAssignors {
			t.Run(assignor+"/"+name, func(t *testing.T) {
				want := asgRun(t, assignor, members, topics)
				// Also with a current assignment that is neither empty nor
				// the result.
				withCurrent := asgFeedBack(members, want)
				withCurrent[0].Current = nil
				wantSticky := asgRun(t, assignor, withCurrent, topics)
				for range 20 {
					shuffled := slices.Clone(members)
					rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
					for i := range shuffled {
						shuffled[i].Subscribed = slices.Clone(shuffled[i].Subscribed)
						rng.Shuffle(len(shuffled[i].Subscribed), func(x, y int) {
							shuffled[i].Subscribed[x], shuffled[i].Subscribed[y] = shuffled[i].Subscribed[y], shuffled[i].Subscribed[x]
						})
					}
					if got := asgRun(t, assignor, shuffled, topics); !reflect.DeepEqual(got, want) {
						t.Fatalf("member order changed the result:\n%v\n%v", got, want)
					}
					shuffledCurrent := slices.Clone(withCurrent)
					rng.Shuffle(len(shuffledCurrent), func(i, j int) {
						shuffledCurrent[i], shuffledCurrent[j] = shuffledCurrent[j], shuffledCurrent[i]
					})
					if got := asgRun(t, assignor, shuffledCurrent, topics); !reflect.DeepEqual(got, wantSticky) {
						t.Fatalf("member order changed the sticky result:\n%v\n%v", got, wantSticky)
					}
				}
			})
		}
	}
}

func TestAssignorRange(t *testing.T) {
	tests := []struct {
		name    string
		topics  map[string]int32
		members []AssignorMember
		want    map[string]string
	}{
		{
			name:    "co-partitioned topics: member i gets the same partition numbers of each",
			topics:  map[string]int32{"t1": 5, "t2": 5, "t3": 2},
			members: []AssignorMember{{ID: "b", Subscribed: asgSub("t1", "t2", "t3")}, {ID: "a", Subscribed: asgSub("t3", "t2", "t1")}},
			want:    map[string]string{"a": "t1[0 1 2] t2[0 1 2] t3[0] ", "b": "t1[3 4] t2[3 4] t3[1] "},
		},
		{
			name:   "the first P mod N members get one more",
			topics: map[string]int32{"t1": 11},
			members: []AssignorMember{
				{ID: "d", Subscribed: asgSub("t1")}, {ID: "c", Subscribed: asgSub("t1")},
				{ID: "b", Subscribed: asgSub("t1")}, {ID: "a", Subscribed: asgSub("t1")},
			},
			want: map[string]string{"a": "t1[0 1 2] ", "b": "t1[3 4 5] ", "c": "t1[6 7 8] ", "d": "t1[9 10] "},
		},
		{
			name:   "static members first, by instance id, then dynamic ones by member id",
			topics: map[string]int32{"t1": 4},
			members: []AssignorMember{
				{ID: "a", Subscribed: asgSub("t1")},
				{ID: "z", InstanceID: "i2", Subscribed: asgSub("t1")},
				{ID: "y", InstanceID: "i1", Subscribed: asgSub("t1")},
				{ID: "b", Subscribed: asgSub("t1")},
			},
			want: map[string]string{"y": "t1[0] ", "z": "t1[1] ", "a": "t1[2] ", "b": "t1[3] "},
		},
		{
			name:   "heterogeneous: each topic split over its own subscribers",
			topics: map[string]int32{"t1": 3, "t2": 4},
			members: []AssignorMember{
				{ID: "a", Subscribed: asgSub("t1")},
				{ID: "b", Subscribed: asgSub("t1", "t2")},
				{ID: "c", Subscribed: asgSub("t2")},
			},
			want: map[string]string{"a": "t1[0 1] ", "b": "t1[2] t2[0 1] ", "c": "t2[2 3] "},
		},
		{
			name:   "the current assignment does not matter (Kafka 4.x's range is not sticky)",
			topics: map[string]int32{"t1": 4},
			members: []AssignorMember{
				{ID: "a", Subscribed: asgSub("t1"), Current: asgParts("t1", 2, 3)},
				{ID: "b", Subscribed: asgSub("t1"), Current: asgParts("t1", 0, 1)},
			},
			want: map[string]string{"a": "t1[0 1] ", "b": "t1[2 3] "},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := asgRun(t, "range", tc.members, asgTopics(tc.topics))
			got := map[string]string{}
			for id, m := range a {
				got[id] = asgString(m)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Random groups, each assigned twice, the second time fed the first
// result: both results valid, homogeneous uniform ones balanced,
// heterogeneous ones with no partition whose move to another subscriber of
// its topic would narrow a gap of two or more, and the second result the
// same as the first.
func TestAssignorRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(848, 41))
	for round := range 400 {
		topics := map[TopicID]AssignorTopic{}
		nt := 1 + rng.IntN(6)
		for i := range nt {
			topics[asgTopic(fmt.Sprint("t", i))] = AssignorTopic{Partitions: int32(rng.IntN(25))}
		}
		homogeneous := rng.IntN(2) == 0
		var sub []TopicID
		for i := range nt {
			if rng.IntN(4) > 0 {
				sub = append(sub, asgTopic(fmt.Sprint("t", i)))
			}
		}
		if rng.IntN(8) == 0 {
			sub = append(sub, asgTopic("missing"))
		}
		var members []AssignorMember
		for i := range 1 + rng.IntN(12) {
			m := AssignorMember{ID: fmt.Sprintf("m%03d", rng.IntN(1000)) + fmt.Sprint(i), Subscribed: sub}
			if rng.IntN(3) == 0 {
				m.InstanceID = fmt.Sprint("i", rng.IntN(1000), i)
			}
			if !homogeneous {
				m.Subscribed = nil
				for j := range nt {
					if rng.IntN(2) == 0 {
						m.Subscribed = append(m.Subscribed, asgTopic(fmt.Sprint("t", j)))
					}
				}
			}
			// A stale current assignment: some partitions, maybe of
			// topics it no longer reads or beyond the partition count.
			if rng.IntN(2) == 0 {
				m.Current = map[TopicID][]int32{}
				for j := range nt {
					for p := range 30 {
						if rng.IntN(10) == 0 {
							topic := asgTopic(fmt.Sprint("t", j))
							m.Current[topic] = append(m.Current[topic], int32(p))
						}
					}
				}
			}
			members = append(members, m)
		}
		for _, assignor := range ServerAssignors {
			first := asgRun(t, assignor, members, topics)
			if assignor == "uniform" && homogeneous {
				if s := asgSpread(first); s > 1 {
					t.Fatalf("round %d: homogeneous uniform spread %d", round, s)
				}
			}
			if assignor == "uniform" && !homogeneous {
				asgCheckNoImprovingMove(t, round, members, first)
			}
			next := asgFeedBack(members, first)
			rng.Shuffle(len(next), func(i, j int) { next[i], next[j] = next[j], next[i] })
			if second := asgRun(t, assignor, next, topics); !reflect.DeepEqual(first, second) {
				t.Fatalf("round %d %s: a second run changed the assignment:\n%v\n%v", round, assignor, first, second)
			}
		}
	}
}

// asgCheckNoImprovingMove fails if some partition's owner holds two or
// more partitions more than another subscriber of the partition's topic
// (the balance Kafka's heterogeneous builder reaches on convergence).
func asgCheckNoImprovingMove(t *testing.T, round int, members []AssignorMember, a Assignment) {
	t.Helper()
	for _, o := range members {
		for topic := range a[o.ID] {
			for _, m := range members {
				if slices.Contains(m.Subscribed, topic) && asgCount(a[o.ID]) > asgCount(a[m.ID])+1 {
					t.Fatalf("round %d: %s holds %d, %s (also reading %q) holds %d:\n%v",
						round, o.ID, asgCount(a[o.ID]), m.ID, topic, asgCount(a[m.ID]), a)
				}
			}
		}
	}
}

// 1,000 members all reading 100 topics of 100 partitions: a first
// assignment, and a steady-state one (every member's current assignment is
// its target, the case of every heartbeat-triggered recomputation).
func BenchmarkAssignor(b *testing.B) {
	topics := map[TopicID]AssignorTopic{}
	var sub []TopicID
	for i := range 100 {
		id := asgTopic(fmt.Sprint("topic-", i))
		topics[id] = AssignorTopic{Name: fmt.Sprint("topic-", i), Partitions: 100}
		sub = append(sub, id)
	}
	fresh := make([]AssignorMember, 1000)
	for i := range fresh {
		fresh[i] = AssignorMember{ID: fmt.Sprintf("member-%04d", i), Subscribed: sub}
	}
	// Heterogeneous: every tenth member skips one topic.
	mixed := slices.Clone(fresh)
	for i := 0; i < len(mixed); i += 10 {
		mixed[i].Subscribed = slices.Delete(slices.Clone(sub), i%100, i%100+1)
	}
	for _, assignor := range ServerAssignors {
		for name, members := range map[string][]AssignorMember{"homogeneous": fresh, "heterogeneous": mixed} {
			first, err := runServerAssignor(assignor, members, topics)
			if err != nil {
				b.Fatal(err)
			}
			steady := asgFeedBack(members, first)
			for _, run := range []struct {
				name    string
				members []AssignorMember
			}{{"fresh", members}, {"steady", steady}} {
				b.Run(assignor+"/"+name+"/"+run.name, func(b *testing.B) {
					for b.Loop() {
						if _, err := runServerAssignor(assignor, run.members, topics); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
