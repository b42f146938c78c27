package group

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newMigrationHarness is a cgHarness whose Manager knows the topics (as
// the broker's does) and starts classic rebalances at once.
func newMigrationHarness(t *testing.T, topics fakeTopics, policy string) *cgHarness {
	h := &cgHarness{t: t, now: 1000, topics: topics}
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	cfg.ConsumerMigrationPolicy = policy
	h.m = NewManager(cfg, h.now, func() string { h.uuid++; return "gen-" + strconv.Itoa(h.uuid) })
	h.m.Topics = func() TopicImage { return h.topics }
	return h
}

// classicClient is a well-behaved cooperative classic consumer: it owns
// what its last SyncGroup assigned, and rejoins when told to.
type classicClient struct {
	id       string
	instance string // group.instance.id of a static member
	gen      int32
	owned    map[string][]int32
}

func subscription(topics []string, owned map[string][]int32) []byte {
	sub := kmsg.ConsumerMemberMetadata{Version: 3, Topics: topics, Generation: -1}
	for _, t := range slices.Sorted(maps.Keys(owned)) {
		sub.OwnedPartitions = append(sub.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: t, Partitions: owned[t]})
	}
	return sub.AppendTo(nil)
}

func (h *cgHarness) apply(eff Effects) Effects {
	h.log = append(h.log, eff.Records...)
	h.m.ApplyCommits(eff.Commits)
	return eff
}

// classicJoin sends a JoinGroup and returns the answers it got at once.
func (h *cgHarness) classicJoin(c *classicClient, version int16, topics ...string) []JoinReply {
	h.t.Helper()
	eff := h.apply(h.m.Join(h.now, JoinRequest{Waiter: c, Version: version, Group: "g", MemberID: c.id, InstanceID: c.instance, ClientID: "classic",
		SessionTimeoutMs: 10000, RebalanceTimeoutMs: 20000, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "cooperative-sticky", Metadata: subscription(topics, c.owned)}}}))
	return eff.Joins
}

func replyOf(joins []JoinReply, c *classicClient) (JoinReply, bool) {
	for _, r := range joins {
		if r.Waiter == c {
			return r, true
		}
	}
	return JoinReply{}, false
}

// classicSync sends a SyncGroup (with assignments when it leads); every
// client answered takes its assignment. It returns c's error code, or -1
// when c's SyncGroup is parked.
func (h *cgHarness) classicSync(c *classicClient, assignments map[string][]byte) int16 {
	h.t.Helper()
	eff := h.apply(h.m.Sync(h.now, SyncRequest{Waiter: c, Group: "g", MemberID: c.id, Generation: c.gen,
		ProtocolType: "consumer", Protocol: "cooperative-sticky", Assignments: assignments}))
	code := int16(-1)
	for _, r := range eff.Syncs {
		rc := r.Waiter.(*classicClient)
		if rc == c {
			code = r.ErrorCode
		}
		if r.ErrorCode != 0 {
			continue
		}
		rc.owned = map[string][]int32{}
		if len(r.Assignment) == 0 {
			continue // a classic leader assigned it nothing
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(r.Assignment); err != nil {
			h.t.Fatalf("assignment of %s: %v", rc.id, err)
		}
		for _, t := range a.Topics {
			rc.owned[t.Topic] = t.Partitions
		}
	}
	return code
}

func assignmentBytes(topic string, ps ...int32) []byte {
	a := kmsg.ConsumerMemberAssignment{Version: 3, Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: ps}}}
	return a.AppendTo(nil)
}

// classicGroup makes a Stable classic group g of two members on foo's 4
// partitions: generation 2, a with 0-1, b with 2-3.
func (h *cgHarness) classicGroup() (a, b *classicClient) {
	h.t.Helper()
	a, b = &classicClient{}, &classicClient{}
	r, ok := replyOf(h.classicJoin(a, 3, "foo"), a)
	if !ok || r.ErrorCode != 0 {
		h.t.Fatalf("first join: %+v", r)
	}
	a.id, a.gen = r.MemberID, r.Generation
	if code := h.classicSync(a, map[string][]byte{a.id: assignmentBytes("foo", 0, 1, 2, 3)}); code != 0 {
		h.t.Fatal(kerr.ErrorForCode(code))
	}
	if joins := h.classicJoin(b, 3, "foo"); len(joins) != 0 {
		h.t.Fatalf("second join answered at once: %+v", joins)
	}
	joins := h.classicJoin(a, 3, "foo")
	ra, _ := replyOf(joins, a)
	rb, _ := replyOf(joins, b)
	a.gen, b.id, b.gen = ra.Generation, rb.MemberID, rb.Generation
	if a.gen != 2 || b.gen != 2 || ra.Leader != a.id {
		h.t.Fatalf("rebalance: %+v %+v", ra, rb)
	}
	if code := h.classicSync(b, nil); code != -1 {
		h.t.Fatalf("follower sync answered before the leader's: %v", kerr.ErrorForCode(code))
	}
	if code := h.classicSync(a, map[string][]byte{a.id: assignmentBytes("foo", 0, 1), b.id: assignmentBytes("foo", 2, 3)}); code != 0 {
		h.t.Fatal(kerr.ErrorForCode(code))
	}
	if !slices.Equal(b.owned["foo"], []int32{2, 3}) {
		h.t.Fatalf("b after the sync: %v", b.owned)
	}
	if g := h.m.Group("g"); g.State != Stable || g.Generation != 2 {
		h.t.Fatalf("classic group: %v", g)
	}
	return a, b
}

// classicStep heartbeats; told to rejoin, the client rejoins with what it
// owns and syncs. between, if not nil, runs between its JoinGroup and its
// SyncGroup (other members moving on meanwhile), while the client still
// owns what it had.
func (h *cgHarness) classicStep(c *classicClient, between func()) {
	h.t.Helper()
	code := h.m.Heartbeat(h.now, "g", c.id, "", c.gen)
	switch code {
	case 0:
		return
	case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
	default:
		h.t.Fatalf("heartbeat of %s: %v", c.id, kerr.ErrorForCode(code))
	}
	joins := h.classicJoin(c, 9, "foo")
	r, ok := replyOf(joins, c)
	if !ok {
		return // parked: a classic group rebalancing
	}
	if r.ErrorCode != 0 {
		h.t.Fatalf("rejoin of %s: %v", c.id, kerr.ErrorForCode(r.ErrorCode))
	}
	c.gen = r.Generation
	if r.Leader != "" {
		h.t.Fatalf("classic member %s of a consumer group told it leads: %+v", c.id, r)
	}
	if between != nil {
		between()
	}
	if code := h.classicSync(c, nil); code != 0 && code != kerr.RebalanceInProgress.Code {
		h.t.Fatalf("sync of %s: %v", c.id, kerr.ErrorForCode(code))
	}
}

// checkMixedExclusive fails if two clients of either protocol own one
// partition.
func (h *cgHarness) checkMixedExclusive(cs []*client, ccs []*classicClient) {
	h.t.Helper()
	owner := map[string]string{}
	claim := func(id, k string) {
		if o, ok := owner[k]; ok {
			h.t.Fatalf("partition %s owned by %s and %s\n%v", k, o, id, h.m.Group("g"))
		}
		owner[k] = id
	}
	for _, c := range cs {
		for t, ps := range c.owned {
			name, _, _ := h.topics.TopicByID(t)
			for _, p := range ps {
				claim(c.id, fmt.Sprintf("%s-%d", name, p))
			}
		}
	}
	for _, c := range ccs {
		for t, ps := range c.owned {
			for _, p := range ps {
				claim(c.id, fmt.Sprintf("%s-%d", t, p))
			}
		}
	}
}

// settleMixed runs every client until the group stops changing.
func (h *cgHarness) settleMixed(cs []*client, ccs []*classicClient) {
	h.t.Helper()
	for round := 0; round < 30; round++ {
		before := fmt.Sprint(h.m.Group("g"))
		for _, c := range cs {
			h.step(c)
			h.checkMixedExclusive(cs, ccs)
		}
		for _, c := range ccs {
			h.classicStep(c, func() {
				for _, o := range cs {
					h.step(o)
				}
				h.checkMixedExclusive(cs, ccs)
			})
			h.checkMixedExclusive(cs, ccs)
		}
		checkOwnership(h.t, h.m)
		if fmt.Sprint(h.m.Group("g")) == before {
			return
		}
	}
	h.t.Fatalf("group did not settle:\n%v", h.m.Group("g"))
}

func ownedCount(cs []*client, ccs []*classicClient) (n int) {
	for _, c := range cs {
		n += count(c.owned)
	}
	for _, c := range ccs {
		for _, ps := range c.owned {
			n += len(ps)
		}
	}
	return n
}

// A rolling upgrade and back: a consumer-protocol member joining a classic
// group converts it (the classic members keep their partitions until they
// revoke them), classic and consumer members share the group, and the last
// consumer-protocol member leaving turns it back into a classic group.
func TestMigrationUpgradeAndDowngrade(t *testing.T) {
	h := newMigrationHarness(t, fakeTopics{"foo": 4}, "")
	a, b := h.classicGroup()
	ccs := []*classicClient{a, b}

	r := h.join("n1", "foo")
	g := h.m.Group("g")
	if !g.IsConsumer() {
		t.Fatalf("not converted: %v", g)
	}
	if mem := g.consumer.members[a.id]; mem.Classic == nil || mem.Epoch != 2 || count(epochKeys(mem.Assigned)) != 2 {
		t.Fatalf("classic member after the upgrade: %+v", mem)
	}
	if count(r.Assignment) != 0 {
		t.Fatalf("the new member got partitions still owned: %v", r.Assignment)
	}
	if code := h.m.Heartbeat(h.now, "g", a.id, "", a.gen); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic heartbeat after the upgrade: %v", kerr.ErrorForCode(code))
	}
	h.reloadCheck()

	n1 := &client{id: "n1", epoch: r.MemberEpoch, owned: r.Assignment}
	cs := []*client{n1}
	h.settleMixed(cs, ccs)
	if ownedCount(cs, ccs) != 4 || count(n1.owned) == 0 {
		t.Fatalf("after the upgrade: n1 %v a %v b %v\n%v", n1.owned, a.owned, b.owned, g)
	}
	if g.ConsumerState() != "Stable" {
		t.Fatalf("state %s", g.ConsumerState())
	}
	h.reloadCheck()

	// A second classic member replaced by a consumer-protocol one: b
	// leaves (LeaveGroup), n2 joins.
	if top, codes, eff := h.m.Leave(h.now, "g", []LeaveMember{{MemberID: b.id}}); top != 0 || codes[0] != 0 {
		t.Fatalf("classic leave: %d %v", top, codes)
	} else {
		h.apply(eff)
	}
	ccs = []*classicClient{a}
	r2 := h.join("n2", "foo")
	n2 := &client{id: "n2", epoch: r2.MemberEpoch, owned: r2.Assignment}
	cs = append(cs, n2)
	h.settleMixed(cs, ccs)
	if ownedCount(cs, ccs) != 4 {
		t.Fatalf("after b left: %v %v %v", n1.owned, n2.owned, a.owned)
	}
	h.reloadCheck()

	// Roll back: n2 then n1 leave; the second leave leaves only the
	// classic member a, and the group becomes classic.
	h.hb(ConsumerHeartbeatRequest{MemberID: "n2", MemberEpoch: LeaveEpoch, RebalanceTimeoutMs: -1})
	if !g.IsConsumer() {
		t.Fatal("downgraded while a consumer-protocol member is left")
	}
	cs = []*client{n1}
	h.settleMixed(cs, ccs)
	epoch := g.consumer.epoch
	h.hb(ConsumerHeartbeatRequest{MemberID: "n1", MemberEpoch: LeaveEpoch, RebalanceTimeoutMs: -1})
	if g.IsConsumer() || g.State != PreparingRebalance || g.Generation != epoch || g.Protocol != "cooperative-sticky" || len(g.Members) != 1 {
		t.Fatalf("after the last consumer-protocol member left: %v", g)
	}
	h.reloadCheckClassic()
	// a, at an older generation, is told to rejoin and the classic
	// rebalance completes; it leads and assigns.
	h.now += 10
	code := h.m.Heartbeat(h.now, "g", a.id, "", a.gen)
	if code != kerr.RebalanceInProgress.Code && code != kerr.IllegalGeneration.Code {
		t.Fatalf("classic heartbeat after the downgrade: %v", kerr.ErrorForCode(code))
	}
	ra, ok := replyOf(h.classicJoin(a, 9, "foo"), a)
	if !ok || ra.ErrorCode != 0 || ra.Leader != a.id || ra.Generation != epoch+1 {
		t.Fatalf("classic rejoin after the downgrade: %+v %v", ra, ok)
	}
	a.gen = ra.Generation
	if code := h.classicSync(a, map[string][]byte{a.id: assignmentBytes("foo", 0, 1, 2, 3)}); code != 0 || g.State != Stable {
		t.Fatalf("classic sync: %v %v", kerr.ErrorForCode(code), g)
	}
	h.reloadCheckClassic()
}

// A consumer application rolled back to the classic protocol keeps its
// group.instance.id: when the new classic incarnation of the group's last
// consumer-protocol member takes its place, the group becomes classic at
// once, Stable, the newcomer holding what the member it replaced held
// (Kafka's validateOnlineDowngradeWithReplacedMemberId). Without
// downgrades allowed, it stays a consumer group of classic members.
func TestMigrationStaticReplacementDowngrades(t *testing.T) {
	for _, policy := range []string{MigrationBidirectional, MigrationUpgrade} {
		t.Run(policy, func(t *testing.T) {
			h := newMigrationHarness(t, fakeTopics{"foo": 4}, policy)
			a, b := h.classicGroup()
			ccs := []*classicClient{a, b}
			inst := "app-3"
			r := h.hb(ConsumerHeartbeatRequest{MemberID: "n1", InstanceID: &inst, RebalanceTimeoutMs: 30000,
				SubscribedTopicNames: []string{"foo"}, OwnedSet: true, Owned: map[TopicID][]int32{}})
			if r.ErrorCode != 0 || !h.m.Group("g").IsConsumer() {
				t.Fatalf("static consumer-protocol join: %+v", r)
			}
			n1 := &client{id: "n1", epoch: r.MemberEpoch, owned: r.Assignment}
			cs := []*client{n1}
			h.settleMixed(cs, ccs)
			held := slices.Sorted(slices.Values(n1.owned[topicID("foo")]))
			if len(held) == 0 {
				t.Fatalf("n1 was assigned nothing: %v", h.m.Group("g"))
			}
			g := h.m.Group("g")
			epoch := g.consumer.epoch

			// n1's instance comes back as a classic consumer.
			back := &classicClient{instance: inst}
			jr, ok := replyOf(h.classicJoin(back, 9, "foo"), back)
			if !ok || jr.ErrorCode != 0 || jr.Leader != "" {
				t.Fatalf("the classic incarnation's join: %+v %v", jr, ok)
			}
			back.id, back.gen = jr.MemberID, jr.Generation
			if policy == MigrationUpgrade {
				if !g.IsConsumer() || len(g.consumer.members) != 3 {
					t.Fatalf("downgraded against the policy: %v", g)
				}
				if code := h.classicSync(back, nil); code != 0 {
					t.Fatalf("sync of the classic incarnation: %v", kerr.ErrorForCode(code))
				}
				h.settleMixed(nil, append(ccs, back))
				if ownedCount(nil, append(ccs, back)) != 4 {
					t.Fatalf("consumer group of classic members: %v %v %v", a.owned, b.owned, back.owned)
				}
				h.reloadCheck()
				return
			}
			if g.IsConsumer() || g.State != Stable || g.Generation != epoch || len(g.Members) != 3 || g.Members[back.id] == nil {
				t.Fatalf("after the replacement of the last consumer-protocol member: %v", g)
			}
			if jr.Generation != epoch {
				t.Fatalf("join generation %d, group generation %d", jr.Generation, epoch)
			}
			h.reloadCheckClassic()
			// The newcomer collects n1's partitions with SyncGroup; the
			// others go on heartbeating at the same generation.
			if code := h.classicSync(back, nil); code != 0 || !slices.Equal(back.owned["foo"], held) {
				t.Fatalf("sync of the classic incarnation: %v, owns %v, n1 held %v", kerr.ErrorForCode(code), back.owned, held)
			}
			for _, c := range ccs {
				if c.gen != epoch {
					t.Fatalf("%s at generation %d, group at %d", c.id, c.gen, epoch)
				}
				if code := h.m.Heartbeat(h.now, "g", c.id, "", c.gen); code != 0 {
					t.Fatalf("heartbeat of %s after the downgrade: %v", c.id, kerr.ErrorForCode(code))
				}
			}
			h.checkMixedExclusive(nil, append(ccs, back))
			if ownedCount(nil, append(ccs, back)) != 4 {
				t.Fatalf("classic group after the downgrade: %v %v %v", a.owned, b.owned, back.owned)
			}
		})
	}
}

// reloadCheckClassic is reloadCheck for a group that is classic again:
// the classic group's stored state (its members and assignments) comes
// back, not its rebalance in progress.
func (h *cgHarness) reloadCheckClassic() {
	h.t.Helper()
	got, want := h.reloaded().Group("g"), h.m.Group("g")
	if got.IsConsumer() || got.Generation != want.Generation || got.Protocol != want.Protocol ||
		!slices.Equal(slices.Sorted(maps.Keys(got.Members)), slices.Sorted(maps.Keys(want.Members))) {
		h.t.Fatalf("reloaded group differs:\n%v\nwant\n%v", got, want)
	}
	for id, mem := range want.Members {
		if string(got.Members[id].Assignment) != string(mem.Assignment) {
			h.t.Fatalf("member %s reloaded with assignment %x, want %x", id, got.Members[id].Assignment, mem.Assignment)
		}
	}
}

// The policy decides which way groups may convert.
func TestMigrationPolicy(t *testing.T) {
	h := newMigrationHarness(t, fakeTopics{"foo": 4}, MigrationDowngrade)
	a, _ := h.classicGroup()
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "n1", RebalanceTimeoutMs: 30000, SubscribedTopicNames: []string{"foo"},
		OwnedSet: true, Owned: map[TopicID][]int32{}})
	if r.ErrorCode != kerr.GroupIDNotFound.Code || h.m.Group("g").IsConsumer() {
		t.Fatalf("upgrade under the downgrade policy: %v %s", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if code := h.m.Heartbeat(h.now, "g", a.id, "", a.gen); code != 0 {
		t.Fatalf("classic group disturbed: %v", kerr.ErrorForCode(code))
	}

	// Under "upgrade", the group converts, and the last consumer-protocol
	// member leaving keeps it a consumer group of classic members.
	h = newMigrationHarness(t, fakeTopics{"foo": 4}, MigrationUpgrade)
	a, b := h.classicGroup()
	r = h.join("n1", "foo")
	n1 := &client{id: "n1", epoch: r.MemberEpoch, owned: r.Assignment}
	h.settleMixed([]*client{n1}, []*classicClient{a, b})
	h.hb(ConsumerHeartbeatRequest{MemberID: "n1", MemberEpoch: LeaveEpoch, RebalanceTimeoutMs: -1})
	if !h.m.Group("g").IsConsumer() {
		t.Fatal("downgraded under the upgrade policy")
	}
	h.settleMixed(nil, []*classicClient{a, b})
	if ownedCount(nil, []*classicClient{a, b}) != 4 {
		t.Fatalf("classic members of a consumer group: %v %v", a.owned, b.owned)
	}
	h.reloadCheck()
}

// Classic requests to a consumer group get Kafka's errors.
func TestMigrationClassicRequestErrors(t *testing.T) {
	h := newMigrationHarness(t, fakeTopics{"foo": 4, "bar": 1}, "")
	a, b := h.classicGroup()
	r := h.join("n1", "foo")
	n1 := &client{id: "n1", epoch: r.MemberEpoch, owned: r.Assignment}
	h.settleMixed([]*client{n1}, []*classicClient{a, b})

	// A new classic member at v4+ is handed a member id first.
	c := &classicClient{}
	jr, _ := replyOf(h.classicJoin(c, 9, "foo"), c)
	if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" {
		t.Fatalf("first join of a new classic member: %+v", jr)
	}
	// Another protocol type, or protocols the classic members lack.
	eff := h.m.Join(h.now, JoinRequest{Waiter: 1, Version: 9, Group: "g", MemberID: jr.MemberID, SessionTimeoutMs: 10000,
		RebalanceTimeoutMs: 10000, ProtocolType: "connect", Protocols: []Protocol{{Name: "cooperative-sticky"}}})
	if eff.Joins[0].ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("connect member: %+v", eff.Joins)
	}
	eff = h.m.Join(h.now, JoinRequest{Waiter: 1, Version: 9, Group: "g", MemberID: jr.MemberID, SessionTimeoutMs: 10000,
		RebalanceTimeoutMs: 10000, ProtocolType: "consumer", Protocols: []Protocol{{Name: "range", Metadata: subscription([]string{"foo"}, nil)}}})
	if eff.Joins[0].ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("range member among cooperative-sticky ones: %+v", eff.Joins)
	}
	// A consumer-protocol member is not a classic one.
	if code := h.m.Heartbeat(h.now, "g", "n1", "", n1.epoch); code != kerr.UnknownMemberID.Code {
		t.Fatalf("classic heartbeat of a consumer-protocol member: %v", kerr.ErrorForCode(code))
	}
	if _, codes, _ := h.m.Leave(h.now, "g", []LeaveMember{{MemberID: "n1"}, {MemberID: "nobody"}, {InstanceID: "none"}}); !slices.Equal(codes,
		[]int16{kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code}) {
		t.Fatalf("classic leaves of non-classic members: %v", codes)
	}
	// Generations are member epochs.
	if code := h.m.Heartbeat(h.now, "g", a.id, "", a.gen-1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale classic heartbeat: %v", kerr.ErrorForCode(code))
	}
	stale := *a
	stale.gen--
	if code := h.classicSync(&stale, nil); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale classic sync: %v", kerr.ErrorForCode(code))
	}
	// Offset commits of classic members carry their generation, at any
	// version: a stale one is ILLEGAL_GENERATION.
	commit := func(gen int32, version int16) int16 {
		codes, eff := h.m.CommitOffsets(h.now, CommitRequest{Group: "g", MemberID: a.id, Generation: gen, RetentionMs: -1, Version: version,
			Topics: h.topics, Partitions: []CommitPartition{{Topic: "foo", Partition: a.owned["foo"][0], Offset: 5, LeaderEpoch: -1}}})
		h.apply(eff)
		return codes[0]
	}
	if code := commit(a.gen, 8); code != 0 {
		t.Fatalf("classic commit at v8: %v", kerr.ErrorForCode(code))
	}
	if code := commit(a.gen-1, 8); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale classic commit: %v", kerr.ErrorForCode(code))
	}
	if code := h.m.ConsumerFetchCode("g", a.id, a.gen-1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("stale classic offset fetch: %v", kerr.ErrorForCode(code))
	}
	h.reloadCheck()
}

// A classic member told to rejoin that does not is fenced after its
// rebalance timeout, and one that stops heartbeating after its session
// timeout.
func TestMigrationClassicTimeouts(t *testing.T) {
	h := newMigrationHarness(t, fakeTopics{"foo": 4}, "")
	a, b := h.classicGroup()
	r := h.join("n1", "foo")
	g := h.m.Group("g")
	if code := h.m.Heartbeat(h.now, "g", a.id, "", a.gen); code != kerr.RebalanceInProgress.Code {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// b keeps heartbeating (its session lives) without rejoining; n1
	// heartbeats too.
	n1 := &client{id: "n1", epoch: r.MemberEpoch, owned: r.Assignment}
	for i := 0; i < 25; i++ {
		h.now += 1000
		h.step(n1)
		h.m.Heartbeat(h.now, "g", b.id, "", b.gen)
		if i < 5 {
			h.m.Heartbeat(h.now, "g", a.id, "", a.gen)
		}
		h.apply(h.m.Tick(h.now))
	}
	// a stopped at 5 s: its session (10 s) ran out by 15 s; b was told to
	// rejoin at 1 s and did not within its 20 s rebalance timeout.
	if _, ok := g.consumer.members[a.id]; ok {
		t.Fatalf("a outlived its session: %v", g)
	}
	if _, ok := g.consumer.members[b.id]; ok {
		t.Fatalf("b outlived its rebalance timeout: %v", g)
	}
	h.settle(n1)
	if count(n1.owned) != 4 {
		t.Fatalf("n1 after the classic members were fenced: %v", n1.owned)
	}
	h.reloadCheck()
}

// Random classic and consumer-protocol members of one group, starting
// classic: consumer-protocol members join (converting it), heartbeat and
// leave (the last one turning it classic again), classic members rejoin,
// sync, heartbeat and leave, and time passes. The coordinator never lets
// two members own a partition, and a consumer group's log replays to its
// live state.
func FuzzMigration(f *testing.F) {
	f.Add([]byte{0, 16, 2, 18, 1, 17, 34, 50, 4, 3, 19, 2, 18, 5, 20, 36})
	f.Add([]byte{0, 2, 18, 34, 1, 3, 19, 4, 20, 2, 18, 6, 22, 7, 23, 2})
	f.Add([]byte{0, 1, 2, 18, 8, 8, 2, 18, 0, 8}) // n0's classic incarnation replaces it
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			return
		}
		h := newMigrationHarness(t, fakeTopics{"foo": 4}, "")
		a, b := h.classicGroup()
		// n0 is static, as "app-0"; so is classics[3], its classic
		// incarnation (an instance rolled back and forth between the
		// protocols), which takes the instance id over from whichever
		// member holds it.
		const static = "app-0"
		classics := []*classicClient{a, b, nil, nil}
		consumers := make([]*client, 2)
		for _, op := range ops {
			switch op % 9 {
			case 0, 1: // a consumer-protocol member joins or heartbeats
				i := int(op>>4) % len(consumers)
				id := fmt.Sprintf("n%d", i)
				c := consumers[i]
				var r ConsumerHeartbeatReply
				if c == nil {
					var inst *string
					if i == 0 {
						inst = new(string)
						*inst = static
					}
					r = h.hb(ConsumerHeartbeatRequest{MemberID: id, InstanceID: inst, RebalanceTimeoutMs: 20000, SubscribedTopicNames: []string{"foo"},
						OwnedSet: true, Owned: map[TopicID][]int32{}})
					c = &client{id: id}
				} else {
					r = h.beat(id, c.epoch, c.owned)
				}
				if r.ErrorCode != 0 {
					consumers[i] = nil
					break
				}
				c.epoch = r.MemberEpoch
				if r.HasAssignment {
					c.owned = r.Assignment
				}
				consumers[i] = c
			case 2, 3, 8: // a classic member heartbeats, rejoining when told
				i := int(op>>4) % 3
				if op%9 == 8 {
					i = 3 // the static one
				}
				c := classics[i]
				if c == nil {
					c = &classicClient{}
					if i == 3 {
						c.instance = static
					}
					classics[i] = c
				}
				if c.id != "" {
					code := h.m.Heartbeat(h.now, "g", c.id, "", c.gen)
					if code == 0 {
						continue
					}
					if code != kerr.RebalanceInProgress.Code && code != kerr.IllegalGeneration.Code {
						classics[i] = nil // fenced: starts over
						continue
					}
				}
				r, ok := replyOf(h.classicJoin(c, 9, "foo"), c)
				if !ok {
					continue // parked in a classic rebalance
				}
				switch r.ErrorCode {
				case 0:
				case kerr.MemberIDRequired.Code:
					c.id = r.MemberID
					continue
				default:
					classics[i] = nil
					continue
				}
				c.id, c.gen = r.MemberID, r.Generation
				var assignments map[string][]byte
				if r.Leader == c.id {
					// A classic group's leader: everything to itself.
					assignments = map[string][]byte{c.id: assignmentBytes("foo", 0, 1, 2, 3)}
				}
				h.classicSync(c, assignments)
			case 4: // a consumer-protocol member leaves
				i := int(op>>4) % len(consumers)
				if consumers[i] != nil {
					h.hb(ConsumerHeartbeatRequest{MemberID: consumers[i].id, MemberEpoch: LeaveEpoch, RebalanceTimeoutMs: -1})
					consumers[i] = nil
				}
			case 5: // a classic member leaves
				i := int(op>>4) % len(classics)
				if c := classics[i]; c != nil && c.id != "" {
					_, _, eff := h.m.Leave(h.now, "g", []LeaveMember{{MemberID: c.id}})
					h.apply(eff)
					classics[i] = nil
				}
			case 6, 7: // time passes
				h.now += int64(op) * 100
				h.apply(h.m.Tick(h.now))
			}
			checkOwnership(t, h.m)
		}
		if g := h.m.Group("g"); g != nil && g.IsConsumer() {
			h.reloadCheck()
		}
	})
}

// Classic members in a consumer group of 100 members (one of the
// consumer protocol) on 10 topics of 100 partitions, settled: a classic
// member's steady Heartbeat, and its JoinGroup when nothing changed (its
// subscription decoded, the member reconciled, the answer built).
func BenchmarkClassicMemberInConsumerGroup(b *testing.B) {
	topics := fakeTopics{}
	var names []string
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("topic-%d", i)
		topics[name] = 100
		names = append(names, name)
	}
	h := newMigrationHarness(&testing.T{}, topics, "")
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "n0", RebalanceTimeoutMs: 30000, SubscribedTopicNames: names,
		OwnedSet: true, Owned: map[TopicID][]int32{}})
	n0 := &client{id: "n0", epoch: r.MemberEpoch, owned: r.Assignment}
	join := func(c *classicClient) JoinReply {
		eff := h.m.Join(h.now, JoinRequest{Waiter: c, Version: 9, Group: "g", MemberID: c.id, InstanceID: "", ClientID: "classic",
			SessionTimeoutMs: 45000, RebalanceTimeoutMs: 30000, ProtocolType: "consumer",
			Protocols: []Protocol{{Name: "cooperative-sticky", Metadata: subscription(names, c.owned)}}})
		jr, _ := replyOf(eff.Joins, c)
		return jr
	}
	var cs []*classicClient
	for i := 0; i < 99; i++ {
		c := &classicClient{id: fmt.Sprintf("classic-%02d", i)}
		c.gen = join(c).Generation
		cs = append(cs, c)
	}
	for round := 0; round < 10; round++ {
		h.step(n0)
		for _, c := range cs {
			if h.m.Heartbeat(h.now, "g", c.id, "", c.gen) != 0 {
				c.gen = join(c).Generation
				h.classicSync(c, nil)
			}
		}
	}
	c := cs[0]
	if code := h.m.Heartbeat(h.now, "g", c.id, "", c.gen); code != 0 || len(c.owned) == 0 {
		b.Fatalf("not settled: %v %v", kerr.ErrorForCode(code), c.owned)
	}
	b.Run("heartbeat", func(b *testing.B) {
		for b.Loop() {
			if code := h.m.Heartbeat(h.now, "g", c.id, "", c.gen); code != 0 {
				b.Fatal(kerr.ErrorForCode(code))
			}
		}
	})
	b.Run("rejoin", func(b *testing.B) {
		for b.Loop() {
			if jr := join(c); jr.ErrorCode != 0 || jr.Generation != c.gen {
				b.Fatalf("%+v", jr)
			}
		}
	})
}
