package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// tp is a topic partition, checkAssignment's key.
type tp struct {
	t TopicID
	p int32
}

// checkAssignment fails unless every partition of a subscribed topic is
// assigned exactly once, to a member subscribed to its topic.
func checkAssignment(t *testing.T, members []AssignorMember, topics map[TopicID]AssignorTopic, a Assignment) {
	t.Helper()
	owner := map[tp]string{}
	for _, m := range members {
		got, ok := a[m.ID]
		if !ok {
			t.Fatalf("member %s missing from the result", m.ID)
		}
		for topic, ps := range got {
			if !slices.Contains(m.Subscribed, topic) {
				t.Fatalf("%s got %x, which it does not subscribe to", m.ID, topic)
			}
			for _, p := range ps {
				x := tp{topic, p}
				if o, dup := owner[x]; dup {
					t.Fatalf("%x-%d assigned to %s and %s", topic, p, o, m.ID)
				}
				if p < 0 || p >= topics[topic].Partitions {
					t.Fatalf("%s got partition %d of a %d-partition topic", m.ID, p, topics[topic].Partitions)
				}
				owner[x] = m.ID
			}
		}
	}
	for topic, info := range topics {
		subscribed := false
		for _, m := range members {
			subscribed = subscribed || slices.Contains(m.Subscribed, topic)
		}
		for p := int32(0); subscribed && p < info.Partitions; p++ {
			if _, ok := owner[tp{topic, p}]; !ok {
				t.Fatalf("%x-%d unassigned", topic, p)
			}
		}
	}
}

func spread(a Assignment) (lo, hi int) {
	lo = 1 << 30
	for _, m := range a {
		n := 0
		for _, ps := range m {
			n += len(ps)
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi
}

func tid(i int) TopicID {
	var id TopicID
	id[0], id[1] = byte(i>>8), byte(i)
	return id
}

// Random groups: valid, balanced when subscriptions are the same, and a
// second run fed its own result changes nothing.
func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := 0; round < 300; round++ {
		topics := map[TopicID]AssignorTopic{}
		nt := 1 + rng.IntN(5)
		for i := 0; i < nt; i++ {
			topics[tid(i)] = AssignorTopic{Name: fmt.Sprint("t", i), Partitions: int32(rng.IntN(12))}
		}
		homogeneous := rng.IntN(2) == 0
		var members []AssignorMember
		for i := 0; i < 1+rng.IntN(8); i++ {
			m := AssignorMember{ID: fmt.Sprintf("m%02d", rng.IntN(100))}
			if slices.ContainsFunc(members, func(o AssignorMember) bool { return o.ID == m.ID }) {
				continue
			}
			for j := 0; j < nt; j++ {
				if homogeneous || rng.IntN(2) == 0 {
					m.Subscribed = append(m.Subscribed, tid(j))
				}
			}
			members = append(members, m)
		}
		for _, name := range ServerAssignors {
			a, err := Assign(name, members, topics)
			if err != nil {
				t.Fatal(err)
			}
			checkAssignment(t, members, topics, a)
			if lo, hi := spread(a); homogeneous && name == "uniform" && hi-lo > 1 {
				t.Fatalf("round %d: uniform spread %d..%d", round, lo, hi)
			}
			again := slices.Clone(members)
			rng.Shuffle(len(again), func(i, j int) { again[i], again[j] = again[j], again[i] })
			for i := range again {
				again[i].Current = a[again[i].ID]
			}
			b, _ := Assign(name, again, topics)
			if fmt.Sprint(b) != fmt.Sprint(a) {
				t.Fatalf("round %d %s: not stable:\n%v\n%v", round, name, a, b)
			}
		}
	}
}

// Uniform is sticky: a member joining a balanced group takes only what
// balance needs; a member leaving gives only its own partitions away.
func TestAssignUniformSticky(t *testing.T) {
	topics := map[TopicID]AssignorTopic{tid(1): {Partitions: 9}, tid(2): {Partitions: 3}}
	sub := []TopicID{tid(1), tid(2)}
	members := []AssignorMember{{ID: "a", Subscribed: sub}, {ID: "b", Subscribed: sub}, {ID: "c", Subscribed: sub}}
	a, _ := Assign("uniform", members, topics)
	for i := range members {
		members[i].Current = a[members[i].ID]
	}
	members = append(members, AssignorMember{ID: "d", Subscribed: sub})
	b, _ := Assign("uniform", members, topics)
	checkAssignment(t, members, topics, b)
	moved := 0
	for _, id := range []string{"a", "b", "c"} {
		for t2, ps := range a[id] {
			for _, p := range ps {
				if !slices.Contains(b[id][t2], p) {
					moved++
				}
			}
		}
	}
	if moved != 3 {
		t.Fatalf("%d partitions moved for a fourth member of 12 partitions, want 3:\n%v\n%v", moved, a, b)
	}
	// c leaves: a, b and d keep theirs.
	for i := range members {
		members[i].Current = b[members[i].ID]
	}
	left := []AssignorMember{members[0], members[1], members[3]}
	c, _ := Assign("uniform", left, topics)
	checkAssignment(t, left, topics, c)
	for _, m := range left {
		for t2, ps := range b[m.ID] {
			for _, p := range ps {
				if !slices.Contains(c[m.ID][t2], p) {
					t.Fatalf("%s lost %x-%d when c left", m.ID, t2, p)
				}
			}
		}
	}
}

// Range gives members with the same subscriptions the same partition
// numbers of co-partitioned topics.
func TestAssignRangeCoPartitions(t *testing.T) {
	topics := map[TopicID]AssignorTopic{tid(1): {Partitions: 5}, tid(2): {Partitions: 5}}
	sub := []TopicID{tid(1), tid(2)}
	a, _ := Assign("range", []AssignorMember{{ID: "b", Subscribed: sub}, {ID: "a", Subscribed: sub}}, topics)
	if !slices.Equal(a["a"][tid(1)], []int32{0, 1, 2}) || !slices.Equal(a["a"][tid(2)], []int32{0, 1, 2}) ||
		!slices.Equal(a["b"][tid(1)], []int32{3, 4}) || !slices.Equal(a["b"][tid(2)], []int32{3, 4}) {
		t.Fatalf("range: %v", a)
	}
	if _, err := Assign("sticky", nil, topics); err == nil {
		t.Fatal("unknown assignor accepted")
	}
}
