package group

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeTopics is a TopicImage of named topics with ids derived from names.
type fakeTopics map[string]int32

func topicID(name string) TopicID {
	var id TopicID
	copy(id[:], name)
	id[15] = 1
	return id
}

func (f fakeTopics) TopicByName(name string) (TopicID, int32, bool) {
	n, ok := f[name]
	return topicID(name), n, ok
}

func (f fakeTopics) TopicByID(id TopicID) (string, int32, bool) {
	for name, n := range f {
		if topicID(name) == id {
			return name, n, true
		}
	}
	return "", 0, false
}

func (f fakeTopics) TopicNames() []string { return slices.Sorted(maps.Keys(f)) }

// cgHarness drives one Manager's consumer groups, keeping every record it
// wrote so that a reload can be checked against the live state.
type cgHarness struct {
	t      *testing.T
	m      *Manager
	now    int64
	topics fakeTopics
	log    []Record
	uuid   int
}

func newCGHarness(t *testing.T, topics fakeTopics) *cgHarness {
	h := &cgHarness{t: t, now: 1000, topics: topics}
	h.m = NewManager(DefaultConfig(), h.now, func() string { h.uuid++; return "gen-" + strconv.Itoa(h.uuid) })
	return h
}

func (h *cgHarness) hb(req ConsumerHeartbeatRequest) ConsumerHeartbeatReply {
	h.t.Helper()
	switch req.Group {
	case "":
		req.Group = "g"
	case "<empty>":
		req.Group = ""
	}
	if req.Version == 0 {
		req.Version = 1
	}
	req.Topics = h.topics
	r, eff := h.m.ConsumerHeartbeat(h.now, req)
	h.log = append(h.log, eff.Records...)
	return r
}

// join joins member id subscribing to topics.
func (h *cgHarness) join(id string, topics ...string) ConsumerHeartbeatReply {
	h.t.Helper()
	r := h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: 0, RebalanceTimeoutMs: 30000,
		SubscribedTopicNames: topics, OwnedSet: true, Owned: map[TopicID][]int32{}})
	if r.ErrorCode != 0 {
		h.t.Fatalf("join %s: %v %s", id, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	return r
}

// beat heartbeats as a client that owns exactly what it was last given.
func (h *cgHarness) beat(id string, epoch int32, owned map[TopicID][]int32) ConsumerHeartbeatReply {
	h.t.Helper()
	return h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: epoch, RebalanceTimeoutMs: -1, OwnedSet: true, Owned: owned})
}

// client is a well-behaved consumer: it owns what its last response
// assigned and heartbeats with it.
type client struct {
	id    string
	epoch int32
	owned map[TopicID][]int32
}

func (h *cgHarness) step(c *client) {
	h.t.Helper()
	r := h.beat(c.id, c.epoch, c.owned)
	if r.ErrorCode != 0 {
		h.t.Fatalf("heartbeat %s epoch %d: %v %s", c.id, c.epoch, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	c.epoch = r.MemberEpoch
	if r.HasAssignment {
		c.owned = r.Assignment
	}
}

// settle heartbeats every client until nothing changes, checking after
// each heartbeat that no partition is owned by two clients.
func (h *cgHarness) settle(cs ...*client) {
	h.t.Helper()
	for round := 0; round < 20; round++ {
		before := fmt.Sprint(h.m.Group("g"))
		for _, c := range cs {
			h.step(c)
			h.checkExclusive(cs)
		}
		if fmt.Sprint(h.m.Group("g")) == before {
			return
		}
	}
	h.t.Fatalf("group did not settle:\n%v", h.m.Group("g"))
}

func (h *cgHarness) checkExclusive(cs []*client) {
	h.t.Helper()
	owner := map[string]string{}
	for _, c := range cs {
		for t, ps := range c.owned {
			for _, p := range ps {
				k := fmt.Sprintf("%x-%d", t, p)
				if o, ok := owner[k]; ok {
					h.t.Fatalf("partition %s owned by %s and %s", k, o, c.id)
				}
				owner[k] = c.id
			}
		}
	}
}

func count(a map[TopicID][]int32) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// reloaded is a new Manager loaded from the log.
func (h *cgHarness) reloaded() *Manager {
	h.t.Helper()
	m := NewManager(DefaultConfig(), h.now, func() string { return "x" })
	for i, r := range h.log {
		if err := m.ReplayAt(int64(i), r.Key, r.Value); err != nil {
			h.t.Fatalf("replay record %d: %v", i, err)
		}
	}
	m.FinishLoad(h.now)
	return m
}

// reloadCheck replays the log into a new Manager and compares the group.
func (h *cgHarness) reloadCheck() {
	h.t.Helper()
	if got, want := fmt.Sprint(h.reloaded().Group("g")), fmt.Sprint(h.m.Group("g")); got != want {
		h.t.Fatalf("reloaded group differs:\n%s\nwant\n%s", got, want)
	}
}

func TestConsumerGroupJoinAssignAndTopicCreation(t *testing.T) {
	h := newCGHarness(t, fakeTopics{})
	r := h.join("m1", "foo")
	if r.MemberEpoch != 1 || !r.HasAssignment || len(r.Assignment) != 0 || r.HeartbeatIntervalMs != 5000 {
		t.Fatalf("join: %+v", r)
	}
	// The topic appears: the next heartbeat bumps the epoch and assigns it.
	h.topics["foo"] = 3
	r = h.beat("m1", 1, map[TopicID][]int32{})
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || !slices.Equal(r.Assignment[topicID("foo")], []int32{0, 1, 2}) {
		t.Fatalf("after topic creation: %+v", r)
	}
	// A heartbeat without owned partitions and no change: no assignment.
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "m1", MemberEpoch: 2, RebalanceTimeoutMs: -1})
	if r.ErrorCode != 0 || r.HasAssignment {
		t.Fatalf("steady heartbeat: %+v", r)
	}
	if s := h.m.Group("g").ConsumerState(); s != "Stable" {
		t.Fatalf("state %s", s)
	}
	h.reloadCheck()
	// Leaving.
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "m1", MemberEpoch: LeaveEpoch, RebalanceTimeoutMs: -1})
	if r.ErrorCode != 0 || r.MemberEpoch != LeaveEpoch {
		t.Fatalf("leave: %+v", r)
	}
	if s := h.m.Group("g").ConsumerState(); s != "Empty" {
		t.Fatalf("state after leave %s", s)
	}
	h.reloadCheck()
}

// A second member joining takes partitions only after the first revoked
// them: never two owners.
func TestConsumerGroupRebalanceRevokesFirst(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 6, "bar": 2})
	a := &client{id: "a"}
	r := h.join("a", "foo", "bar")
	a.epoch, a.owned = r.MemberEpoch, r.Assignment
	h.settle(a)
	if count(a.owned) != 8 {
		t.Fatalf("a owns %v", a.owned)
	}
	b := &client{id: "b"}
	r = h.join("b", "foo", "bar")
	b.epoch, b.owned = r.MemberEpoch, r.Assignment
	if count(b.owned) != 0 {
		t.Fatalf("b got %v before a revoked", b.owned)
	}
	h.checkExclusive([]*client{a, b})
	h.settle(a, b)
	if count(a.owned) != 4 || count(b.owned) != 4 || a.epoch != b.epoch {
		t.Fatalf("after settling: a %v (epoch %d), b %v (epoch %d)", a.owned, a.epoch, b.owned, b.epoch)
	}
	if s := h.m.Group("g").ConsumerState(); s != "Stable" {
		t.Fatalf("state %s\n%v", s, h.m.Group("g"))
	}
	h.reloadCheck()

	// c subscribes to bar only, then a third topic is added to a's.
	c := &client{id: "c"}
	r = h.join("c", "bar")
	c.epoch, c.owned = r.MemberEpoch, r.Assignment
	h.settle(a, b, c)
	for _, cl := range []*client{a, b, c} {
		for t2 := range cl.owned {
			if cl == c && t2 != topicID("bar") {
				t.Fatalf("c owns a topic it does not subscribe to: %v", cl.owned)
			}
		}
	}
	total := count(a.owned) + count(b.owned) + count(c.owned)
	if total != 8 {
		t.Fatalf("%d partitions owned, want 8", total)
	}
	// Partitions added to foo are assigned.
	h.topics["foo"] = 9
	h.settle(a, b, c)
	if total := count(a.owned) + count(b.owned) + count(c.owned); total != 11 {
		t.Fatalf("%d partitions owned after growing foo, want 11", total)
	}
	h.reloadCheck()
}

// A member that does not heartbeat is fenced at its session timeout and
// its partitions go to the others; one that does not revoke in time is
// fenced at its rebalance timeout.
func TestConsumerGroupTimeouts(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 4})
	a, b := &client{id: "a"}, &client{id: "b"}
	for _, c := range []*client{a, b} {
		r := h.join(c.id, "foo")
		c.epoch, c.owned = r.MemberEpoch, r.Assignment
	}
	h.settle(a, b)
	if count(a.owned) != 2 || count(b.owned) != 2 {
		t.Fatalf("a %v b %v", a.owned, b.owned)
	}
	// b goes quiet; a keeps heartbeating.
	for i := 0; i < 10; i++ {
		h.now += 5000
		h.step(a)
		h.log = append(h.log, h.m.Tick(h.now).Records...)
	}
	if members := h.m.ConsumerMembers("g"); len(members) != 1 || members[0].ID != "a" {
		t.Fatalf("members after b's session: %v", h.m.Group("g"))
	}
	h.settle(a)
	if count(a.owned) != 4 {
		t.Fatalf("a owns %v after b left", a.owned)
	}
	// A fenced member's heartbeat is refused.
	if r := h.beat("b", b.epoch, b.owned); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("fenced b: %+v", r)
	}
	// c joins; a never revokes: fenced at its rebalance timeout (30 s).
	c := &client{id: "c"}
	r := h.join("c", "foo")
	c.epoch, c.owned = r.MemberEpoch, r.Assignment
	stuck := a.owned
	for i := 0; i < 8; i++ {
		h.now += 5000
		if r := h.beat("a", a.epoch, stuck); r.ErrorCode != 0 {
			break
		}
		h.step(c)
		h.log = append(h.log, h.m.Tick(h.now).Records...)
	}
	if members := h.m.ConsumerMembers("g"); len(members) != 1 || members[0].ID != "c" {
		t.Fatalf("a was not fenced for not revoking:\n%v", h.m.Group("g"))
	}
	h.settle(c)
	if count(c.owned) != 4 {
		t.Fatalf("c owns %v", c.owned)
	}
	h.reloadCheck()
}

func TestConsumerGroupEpochChecks(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 2})
	a, b := &client{id: "a"}, &client{id: "b"}
	r := h.join("a", "foo")
	a.epoch, a.owned = r.MemberEpoch, r.Assignment
	h.settle(a)
	r = h.join("b", "foo")
	b.epoch, b.owned = r.MemberEpoch, r.Assignment
	h.settle(a, b)
	// Ahead of the coordinator: fenced.
	if r := h.beat("a", a.epoch+1, a.owned); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %+v", r)
	}
	// The previous epoch with a subset of the assignment: accepted (the
	// response that moved it on was lost).
	prev := h.m.ConsumerMembers("g")[0].PreviousEpoch
	if prev <= 0 {
		t.Fatalf("a has no previous epoch: %v", h.m.Group("g"))
	}
	if r := h.beat("a", prev, a.owned); r.ErrorCode != 0 || r.MemberEpoch != a.epoch {
		t.Fatalf("previous epoch: %+v", r)
	}
	// An older epoch: fenced.
	if r := h.beat("a", prev-1, a.owned); prev > 1 && r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("old epoch: %+v", r)
	}
	// Validation, with Kafka's messages.
	for _, c := range []struct {
		req  ConsumerHeartbeatRequest
		code int16
		msg  string
	}{
		{ConsumerHeartbeatRequest{Group: "<empty>", MemberID: "x", RebalanceTimeoutMs: 1, SubscribedTopicNames: []string{}}, kerr.InvalidRequest.Code, "GroupId can't be empty."},
		{ConsumerHeartbeatRequest{MemberID: "", RebalanceTimeoutMs: 1, SubscribedTopicNames: []string{}}, kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{ConsumerHeartbeatRequest{MemberID: "x", RebalanceTimeoutMs: -1, SubscribedTopicNames: []string{}}, kerr.InvalidRequest.Code, "RebalanceTimeoutMs must be provided in first request."},
		{ConsumerHeartbeatRequest{MemberID: "x", RebalanceTimeoutMs: 1}, kerr.InvalidRequest.Code, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."},
		{ConsumerHeartbeatRequest{MemberID: "x", MemberEpoch: -3, RebalanceTimeoutMs: -1}, kerr.InvalidRequest.Code, "MemberEpoch is invalid."},
		{ConsumerHeartbeatRequest{MemberID: "x", MemberEpoch: -2, RebalanceTimeoutMs: -1}, kerr.InvalidRequest.Code, "InstanceId can't be null."},
		{ConsumerHeartbeatRequest{MemberID: "x", RebalanceTimeoutMs: 1, SubscribedTopicNames: []string{}, ServerAssignor: strp("sticky")}, kerr.UnsupportedAssignor.Code, ""},
		{ConsumerHeartbeatRequest{MemberID: "x", RebalanceTimeoutMs: 1, SubscribedTopicRegex: strp("[")}, kerr.InvalidRegularExpression.Code, ""},
		{ConsumerHeartbeatRequest{MemberID: "nobody", MemberEpoch: 3, RebalanceTimeoutMs: -1}, kerr.UnknownMemberID.Code, ""},
	} {
		r := h.hb(c.req)
		if r.ErrorCode != c.code || (c.msg != "" && r.ErrorMessage != c.msg) {
			t.Errorf("%+v: got %v %q, want %v %q", c.req, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, kerr.ErrorForCode(c.code), c.msg)
		}
	}
	// v0 members may join without an id: the coordinator makes one.
	r = h.hb(ConsumerHeartbeatRequest{Version: -1, RebalanceTimeoutMs: 1, SubscribedTopicNames: []string{"foo"}})
	if r.ErrorCode != 0 || r.MemberID == "" {
		t.Fatalf("v0 join without id: %+v", r)
	}
}

func strp(s string) *string { return &s }

// Offset commits of a consumer group check the member and its epoch;
// KIP-1251 lets an older epoch commit partitions it held then.
func TestConsumerGroupOffsetCommit(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 2})
	a := &client{id: "a"}
	r := h.join("a", "foo")
	a.epoch, a.owned = r.MemberEpoch, r.Assignment
	h.settle(a)
	commit := func(member string, epoch int32, version int16) int16 {
		codes, eff := h.m.CommitOffsets(h.now, CommitRequest{Group: "g", MemberID: member, Generation: epoch, RetentionMs: -1,
			Version: version, Topics: h.topics, Partitions: []CommitPartition{{Topic: "foo", Partition: 0, Offset: 5, LeaderEpoch: -1}}})
		h.m.ApplyCommits(eff.Commits)
		h.log = append(h.log, eff.Records...)
		return codes[0]
	}
	if code := commit("a", a.epoch, 9); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit("a", a.epoch, 8); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("commit v8: %v", kerr.ErrorForCode(code))
	}
	if code := commit("zz", a.epoch, 9); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(code))
	}
	if code := commit("a", a.epoch+1, 9); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("future epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("", -1, 9); code != kerr.UnknownMemberID.Code {
		t.Fatalf("admin commit to a group with members: %v", kerr.ErrorForCode(code))
	}
	// b joins: a's epoch moves on; a commit at a's old epoch for a
	// partition it still holds since then is accepted.
	old := a.epoch
	b := &client{id: "b"}
	r = h.join("b", "foo")
	b.epoch, b.owned = r.MemberEpoch, r.Assignment
	h.settle(a, b)
	if a.epoch == old {
		t.Fatalf("a's epoch did not move: %d", a.epoch)
	}
	kept := a.owned[topicID("foo")][0]
	codes, _ := h.m.CommitOffsets(h.now, CommitRequest{Group: "g", MemberID: "a", Generation: old, RetentionMs: -1, Version: 9,
		Topics: h.topics, Partitions: []CommitPartition{{Topic: "foo", Partition: kept, Offset: 7, LeaderEpoch: -1}}})
	if codes[0] != 0 {
		t.Fatalf("older epoch commit of a kept partition: %v", kerr.ErrorForCode(codes[0]))
	}
	given := b.owned[topicID("foo")][0]
	codes, _ = h.m.CommitOffsets(h.now, CommitRequest{Group: "g", MemberID: "a", Generation: old, RetentionMs: -1, Version: 9,
		Topics: h.topics, Partitions: []CommitPartition{{Topic: "foo", Partition: given, Offset: 7, LeaderEpoch: -1}}})
	if codes[0] != kerr.StaleMemberEpoch.Code {
		t.Fatalf("older epoch commit of a partition given away: %v", kerr.ErrorForCode(codes[0]))
	}
	if code := h.m.ConsumerFetchCode("g", "a", a.epoch); code != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(code))
	}
	if code := h.m.ConsumerFetchCode("g", "a", old); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("fetch at old epoch: %v", kerr.ErrorForCode(code))
	}
	// The group can't be deleted while it has members; classic joins are
	// refused.
	if code, _ := h.m.Delete(h.now, "g"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	var got []JoinReply
	eff := h.m.Join(h.now, JoinRequest{Group: "g", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}, Waiter: 1})
	got = append(got, eff.Joins...)
	if len(got) != 1 || got[0].ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join: %+v", got)
	}
	// Listed and described as a consumer group.
	l := h.m.List()
	if len(l) != 1 || l[0].Type != "consumer" || l[0].State != "Stable" || l[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v", l)
	}
	if d := h.m.Describe("g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic describe: %+v", d)
	}
	d := h.m.DescribeConsumer("g")
	if d.ErrorCode != 0 || len(d.Members) != 2 || d.Assignor != "uniform" || d.State != "Stable" {
		t.Fatalf("describe: %+v", d)
	}
	h.reloadCheck()
}

// A static member leaving with epoch -2 keeps its partitions; its new
// incarnation takes them back without a rebalance.
func TestConsumerGroupStaticMember(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 4})
	inst := "i1"
	join := func(id string) ConsumerHeartbeatReply {
		return h.hb(ConsumerHeartbeatRequest{MemberID: id, InstanceID: &inst, RebalanceTimeoutMs: 30000,
			SubscribedTopicNames: []string{"foo"}, OwnedSet: true, Owned: map[TopicID][]int32{}})
	}
	r := join("s1")
	a := &client{id: "s1", epoch: r.MemberEpoch, owned: r.Assignment}
	b := &client{id: "b"}
	r = h.join("b", "foo")
	b.epoch, b.owned = r.MemberEpoch, r.Assignment
	h.settle(a, b)
	groupEpoch := h.m.DescribeConsumer("g").Epoch
	held := a.owned
	if r := h.hb(ConsumerHeartbeatRequest{MemberID: "s1", InstanceID: &inst, MemberEpoch: StaticLeaveEpoch, RebalanceTimeoutMs: -1}); r.ErrorCode != 0 || r.MemberEpoch != StaticLeaveEpoch {
		t.Fatalf("static leave: %+v", r)
	}
	// Another instance id owner trying to join while it is active.
	if r := join("s2"); r.ErrorCode != 0 || !equalAssignment(r.Assignment, held) {
		t.Fatalf("static rejoin: %+v (want %v)", r, held)
	}
	if e := h.m.DescribeConsumer("g").Epoch; e != groupEpoch {
		t.Fatalf("group epoch moved from %d to %d on a static rejoin", groupEpoch, e)
	}
	if r := join("s3"); r.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("second incarnation while the first is active: %+v", r)
	}
	h.reloadCheck()
}

// An empty classic group becomes a consumer group and back.
func TestConsumerGroupClassicConversion(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 1})
	_, eff := h.m.CommitOffsets(h.now, CommitRequest{Group: "g", Generation: -1, RetentionMs: -1, Version: 9,
		Partitions: []CommitPartition{{Topic: "foo", Partition: 0, Offset: 3, LeaderEpoch: -1}}})
	h.m.ApplyCommits(eff.Commits)
	h.log = append(h.log, eff.Records...)
	r := h.join("a", "foo")
	if r.ErrorCode != 0 {
		t.Fatal(r)
	}
	if f := h.m.FetchOffsets("g", nil); len(f) != 1 || f[0].Offset != 3 {
		t.Fatalf("offsets after conversion: %+v", f)
	}
	h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: LeaveEpoch, RebalanceTimeoutMs: -1})
	h.reloadCheck()
	eff = h.m.Join(h.now, JoinRequest{Version: 4, Group: "g", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range"}}, Waiter: 1})
	if h.m.Group("g").IsConsumer() {
		t.Fatal("still a consumer group after a classic join")
	}
	if len(eff.Joins) != 1 || eff.Joins[0].ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("classic join of an empty consumer group: %+v", eff.Joins)
	}
}

// Regex subscriptions match whole names, and are resolved again as topics
// come.
func TestConsumerGroupRegex(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 1, "foobar": 1, "xfoo": 1})
	re := "foo.*"
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "a", RebalanceTimeoutMs: 1000, SubscribedTopicRegex: &re, OwnedSet: true, Owned: map[TopicID][]int32{}})
	if r.ErrorCode != 0 {
		t.Fatal(r)
	}
	a := &client{id: "a", epoch: r.MemberEpoch, owned: r.Assignment}
	h.settle(a)
	if count(a.owned) != 2 || a.owned[topicID("xfoo")] != nil {
		t.Fatalf("owned %v", a.owned)
	}
	h.topics["foo2"] = 2
	h.now += regexRefreshMs
	h.settle(a)
	if count(a.owned) != 4 {
		t.Fatalf("owned after foo2 %v", a.owned)
	}
}

// checkOwnership fails unless every partition is owned (assigned or
// pending revocation) by at most one member, and the owner index agrees.
func checkOwnership(t *testing.T, m *Manager) {
	t.Helper()
	g := m.Group("g")
	if g == nil || g.consumer == nil {
		return
	}
	owner := map[string]string{}
	for _, mem := range g.consumer.members {
		for _, set := range []partitionEpochs{mem.Assigned, mem.PendingRevocation} {
			for tid, ps := range set {
				for p := range ps {
					k := fmt.Sprintf("%x-%d", tid, p)
					if o, dup := owner[k]; dup {
						t.Fatalf("partition %s owned by %s and %s:\n%v", k, o, mem.ID, g)
					}
					owner[k] = mem.ID
					if _, ok := g.consumer.owners[tid][p]; !ok {
						t.Fatalf("partition %s of %s missing from the owner index", k, mem.ID)
					}
				}
			}
		}
	}
	n := 0
	for _, ps := range g.consumer.owners {
		n += len(ps)
	}
	if n != len(owner) {
		t.Fatalf("owner index has %d partitions, members own %d:\n%v", n, len(owner), g)
	}
}

// Random members joining, heartbeating (as well-behaved clients, or with
// stale epochs and owned partitions), leaving and timing out, while topics
// grow and vanish: no partition ever has two owners, and the log replays
// to the live state.
func FuzzConsumerHeartbeats(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0, 16, 32, 48, 1, 17, 33, 49, 66, 2, 18, 34, 50, 7, 23})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			return
		}
		h := newCGHarness(t, fakeTopics{"a": 3, "b": 2})
		clients := make([]*client, 4)
		for _, op := range ops {
			i := int(op>>4) % len(clients)
			id := fmt.Sprintf("m%d", i)
			c := clients[i]
			switch op % 8 {
			case 0, 1: // join, or heartbeat as a good client
				if c == nil {
					topics := []string{"a", "b"}
					if op%16 >= 8 {
						topics = []string{"b"}
					}
					r := h.hb(ConsumerHeartbeatRequest{MemberID: id, RebalanceTimeoutMs: 20000, SubscribedTopicNames: topics,
						OwnedSet: true, Owned: map[TopicID][]int32{}})
					if r.ErrorCode == 0 {
						clients[i] = &client{id: id, epoch: r.MemberEpoch, owned: r.Assignment}
					}
					break
				}
				r := h.beat(id, c.epoch, c.owned)
				switch {
				case r.ErrorCode == 0:
					c.epoch = r.MemberEpoch
					if r.HasAssignment {
						c.owned = r.Assignment
					}
				default: // fenced or gone: the client drops everything
					clients[i] = nil
				}
			case 2: // a heartbeat with no owned partitions and no change
				if c != nil {
					if r := h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: c.epoch, RebalanceTimeoutMs: -1}); r.ErrorCode != 0 {
						clients[i] = nil
					} else {
						c.epoch = r.MemberEpoch
						if r.HasAssignment {
							c.owned = r.Assignment
						}
					}
				}
			case 3: // a stale or future epoch
				if c != nil {
					h.beat(id, c.epoch+int32(op%3)-1, c.owned)
				}
			case 4: // leave
				if c != nil {
					h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: LeaveEpoch, RebalanceTimeoutMs: -1})
					clients[i] = nil
				}
			case 5: // time passes
				h.now += int64(op) * 300
				h.log = append(h.log, h.m.Tick(h.now).Records...)
			case 6: // topics change
				switch op % 3 {
				case 0:
					h.topics["a"]++
				case 1:
					delete(h.topics, "b")
				case 2:
					h.topics["b"] = 4
				}
			case 7: // a resubscription
				if c != nil {
					topics := []string{"a"}
					if op%2 == 0 {
						topics = []string{"a", "b"}
					}
					r := h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: c.epoch, RebalanceTimeoutMs: -1,
						SubscribedTopicNames: topics, OwnedSet: true, Owned: c.owned})
					if r.ErrorCode != 0 {
						clients[i] = nil
					} else {
						c.epoch = r.MemberEpoch
						if r.HasAssignment {
							c.owned = r.Assignment
						}
					}
				}
			}
			checkOwnership(t, h.m)
		}
		h.reloadCheck()
	})
}

// The steady heartbeat of a member of a settled 100-member group on 1,000
// partitions (what the coordinator does every group.consumer.heartbeat.
// interval.ms per member), and a member joining that group (a new target
// assignment and the joiner's reconciliation).
func BenchmarkConsumerHeartbeat(b *testing.B) {
	topics := fakeTopics{}
	var names []string
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("topic-%d", i)
		topics[name] = 100
		names = append(names, name)
	}
	t := &testing.T{}
	h := newCGHarness(t, topics)
	var cs []*client
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("member-%03d", i)
		r := h.hb(ConsumerHeartbeatRequest{MemberID: id, RebalanceTimeoutMs: 30000, SubscribedTopicNames: names,
			OwnedSet: true, Owned: map[TopicID][]int32{}})
		cs = append(cs, &client{id: id, epoch: r.MemberEpoch, owned: r.Assignment})
	}
	for round := 0; round < 5; round++ {
		for _, c := range cs {
			r := h.beat(c.id, c.epoch, c.owned)
			c.epoch = r.MemberEpoch
			if r.HasAssignment {
				c.owned = r.Assignment
			}
		}
	}
	b.Run("steady", func(b *testing.B) {
		c := cs[0]
		for b.Loop() {
			if r, _ := h.m.ConsumerHeartbeat(h.now, ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: c.id,
				MemberEpoch: c.epoch, RebalanceTimeoutMs: -1, Topics: topics}); r.ErrorCode != 0 {
				b.Fatal(r.ErrorMessage)
			}
		}
	})
	b.Run("join", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			id := fmt.Sprintf("joiner-%d", i)
			r, _ := h.m.ConsumerHeartbeat(h.now, ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: id, RebalanceTimeoutMs: 30000,
				SubscribedTopicNames: names, OwnedSet: true, Owned: map[TopicID][]int32{}, Topics: topics})
			if r.ErrorCode != 0 {
				b.Fatal(r.ErrorMessage)
			}
			b.StopTimer()
			h.m.ConsumerHeartbeat(h.now, ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: id, MemberEpoch: LeaveEpoch,
				RebalanceTimeoutMs: -1, Topics: topics})
			b.StartTimer()
		}
	})
}

// A group's own session timeout and heartbeat interval (group configs)
// replace the broker's for its members.
func TestConsumerGroupConfigs(t *testing.T) {
	h := newCGHarness(t, fakeTopics{"foo": 2})
	h.m.GroupConfigs = func(group string) (int64, int64) {
		if group == "g" {
			return 60000, 7000
		}
		return 0, 0
	}
	if r := h.join("a", "foo"); r.HeartbeatIntervalMs != 7000 {
		t.Fatalf("heartbeat interval %d, want the group's 7000", r.HeartbeatIntervalMs)
	}
	h.now += 50000 // past the broker's 45 s, within the group's 60 s
	h.log = append(h.log, h.m.Tick(h.now).Records...)
	if len(h.m.ConsumerMembers("g")) != 1 {
		t.Fatal("fenced by the broker's session timeout")
	}
	h.now += 11000
	h.log = append(h.log, h.m.Tick(h.now).Records...)
	if len(h.m.ConsumerMembers("g")) != 0 {
		t.Fatal("not fenced after the group's session timeout")
	}
	h.reloadCheck()
}
