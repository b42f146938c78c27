package integration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// groupOverrides keep consumer group tests fast: no initial rebalance
// delay worth waiting for, short sessions allowed, few offsets partitions.
var groupOverrides = []string{
	"group.initial.rebalance.delay.ms=50",
	"group.min.session.timeout.ms=500",
	"offsets.topic.num.partitions=8",
}

// groupCluster starts a cluster of n combined nodes for group tests.
func groupCluster(t *testing.T, n int, extra ...string) *Cluster {
	t.Helper()
	var specs []NodeSpec
	for i := 1; i <= n; i++ {
		specs = append(specs, NodeSpec{ID: int32(i), Roles: "broker,controller"})
	}
	c := StartCluster(t, specs, append(append([]string{}, groupOverrides...), extra...)...)
	c.WaitReady(30 * time.Second)
	return c
}

// createTopic creates a topic and waits until every partition has a leader.
func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	waitFor(t, 30*time.Second, "leaders of "+topic, func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != int(partitions) {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
		return true
	})
}

// groupView is the broker's view of a group, from DescribeGroups: its
// state and each member's assigned partitions of topic.
type groupView struct {
	state    string
	members  map[string][]int32 // member id → partitions
	clientOf map[string]string  // member id → client id
}

func describeGroup(ctx context.Context, adm *kadm.Client, group, topic string) (groupView, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return groupView{}, err
	}
	g, ok := described[group]
	if !ok {
		return groupView{}, fmt.Errorf("group %s not described", group)
	}
	if g.Err != nil {
		return groupView{}, g.Err
	}
	v := groupView{state: g.State, members: map[string][]int32{}, clientOf: map[string]string{}}
	for _, m := range g.Members {
		v.clientOf[m.MemberID] = m.ClientID
		var ps []int32
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range a.Topics {
				if at.Topic == topic {
					ps = append(ps, at.Partitions...)
				}
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		v.members[m.MemberID] = ps
	}
	return v, nil
}

// splitsDisjointly reports a Stable group of want members whose
// assignments cover partitions 0..n-1 of the topic exactly once, each
// member owning at least one when there are enough partitions.
func (v groupView) splitsDisjointly(want int, n int32) bool {
	if v.state != "Stable" || len(v.members) != want {
		return false
	}
	owner := map[int32]string{}
	for id, ps := range v.members {
		if len(ps) == 0 && int(n) >= want {
			return false
		}
		for _, p := range ps {
			if _, dup := owner[p]; dup || p < 0 || p >= n {
				return false
			}
			owner[p] = id
		}
	}
	return len(owner) == int(n)
}

// waitSplit waits until the group is Stable with want members splitting
// the topic's n partitions disjointly, and returns that view.
func waitSplit(t *testing.T, adm *kadm.Client, group, topic string, want int, n int32, timeout time.Duration) groupView {
	t.Helper()
	var last groupView
	waitForState(t, timeout, fmt.Sprintf("group %s to split %d partitions of %s among %d members", group, n, topic, want), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, err := describeGroup(ctx, adm, group, topic)
		last = v
		return err == nil && v.splitsDisjointly(want, n), fmt.Sprintf("last %+v (err %v)", v, err)
	})
	return last
}

// startConsumer starts a kgo group member that polls (and so commits with
// autocommit unless disabled) until the test ends or stop is called.
func startConsumer(t *testing.T, c *Cluster, group, topic string, opts ...kgo.Opt) (cl *kgo.Client, stop func()) {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second), kgo.RetryTimeout(30 * time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			cl.Close()
		})
	}
	t.Cleanup(stop)
	return cl, stop
}

// Members of a group split a topic's partitions disjointly, for each
// balancer kgo offers: eager range and round-robin, cooperative-sticky.
func TestGroupMembersSplitPartitions(t *testing.T) {
	c := groupCluster(t, 1)
	_, adm := newClient(t, c)
	const parts = 6
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "split-"+tc.name, "g-split-"+tc.name
			createTopic(t, adm, topic, parts, 1)
			var stops []func()
			for i := 1; i <= 3; i++ {
				_, stop := startConsumer(t, c, group, topic, kgo.Balancers(tc.balancer), kgo.ClientID(fmt.Sprintf("c%d", i)))
				stops = append(stops, stop)
				waitSplit(t, adm, group, topic, i, parts, 30*time.Second)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			described, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			if p := described[group].Protocol; p != tc.name {
				t.Errorf("protocol %q, want %q", p, tc.name)
			}
			// One leaves: the other two take its partitions.
			stops[0]()
			waitSplit(t, adm, group, topic, 2, parts, 30*time.Second)
		})
	}
}

// rawMember joins a group with raw requests, so that the test controls its
// heartbeats: it subscribes to topic with the range protocol, joins
// (KIP-394: again with the member id the coordinator hands out), and
// syncs. It returns its member id and the partitions of topic assigned to
// it.
func rawMember(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, sessionMs int32) (string, []int32) {
	t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = group, sessionMs, 10000
	join.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, p)
	for {
		resp, err := join.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); err {
		case nil:
		case kerr.MemberIDRequired:
			join.MemberID = resp.MemberID
			continue
		default:
			t.Fatalf("join: %v", err)
		}
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group, sync.MemberID, sync.Generation = group, resp.MemberID, resp.Generation
		sresp, err := sync.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
		if err := kerr.ErrorForCode(sresp.ErrorCode); err != nil {
			t.Fatalf("sync: %v", err)
		}
		var assigned kmsg.ConsumerMemberAssignment
		if err := assigned.ReadFrom(sresp.MemberAssignment); err != nil {
			t.Fatalf("the raw member's assignment: %v", err)
		}
		var ps []int32
		for _, at := range assigned.Topics {
			if at.Topic == topic {
				ps = append(ps, at.Partitions...)
			}
		}
		return resp.MemberID, ps
	}
}

// A member that stops heartbeating is expelled after its session timeout,
// and its partitions move to the others.
func TestGroupSessionTimeoutExpelsSilentMember(t *testing.T) {
	c := groupCluster(t, 1)
	cl, adm := newClient(t, c)
	const topic, group, parts = "silent", "g-silent", 4
	createTopic(t, adm, topic, parts, 1)
	startConsumer(t, c, group, topic, kgo.Balancers(kgo.RangeBalancer()))
	waitSplit(t, adm, group, topic, 1, parts, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The raw member gets partitions (the kgo leader assigned them), then
	// never heartbeats: after its 1 s session it is expelled and the kgo
	// member owns every partition again.
	silent, got := rawMember(ctx, t, cl, group, topic, 1000)
	if len(got) == 0 {
		t.Fatalf("the raw member got no partitions")
	}
	v := waitSplit(t, adm, group, topic, 1, parts, 30*time.Second)
	if _, ok := v.members[silent]; ok {
		t.Fatalf("the silent member is still in the group: %+v", v)
	}
	// Its heartbeats now fail: it is not a member any more.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = group, silent, 1
	resp, err := hb.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.UnknownMemberID {
		t.Fatalf("heartbeat of the expelled member: %v, want UNKNOWN_MEMBER_ID", err)
	}
}

// A member that leaves (kgo sends LeaveGroup on Close) triggers a
// rebalance at once: with 60 s sessions, waiting for the session timeout
// would take longer than the bound below.
func TestGroupLeaveRebalancesImmediately(t *testing.T) {
	c := groupCluster(t, 1)
	_, adm := newClient(t, c)
	const topic, group, parts = "leave", "g-leave", 4
	createTopic(t, adm, topic, parts, 1)
	long := kgo.SessionTimeout(60 * time.Second)
	_, stop1 := startConsumer(t, c, group, topic, long, kgo.ClientID("first"))
	waitSplit(t, adm, group, topic, 1, parts, 30*time.Second)
	startConsumer(t, c, group, topic, long, kgo.ClientID("second"))
	waitSplit(t, adm, group, topic, 2, parts, 30*time.Second)
	stop1()
	v := waitSplit(t, adm, group, topic, 1, parts, 20*time.Second)
	for _, client := range v.clientOf {
		if client != "second" {
			t.Fatalf("the remaining member is %q", client)
		}
	}
}

// A member of an old generation cannot commit: ILLEGAL_GENERATION; its
// current generation can.
func TestGroupStaleGenerationCommitRejected(t *testing.T) {
	c := groupCluster(t, 1)
	cl, adm := newClient(t, c)
	const topic, group, parts = "stale", "g-stale", 2
	createTopic(t, adm, topic, parts, 1)
	first, _ := startConsumer(t, c, group, topic, kgo.DisableAutoCommit())
	waitSplit(t, adm, group, topic, 1, parts, 30*time.Second)
	var member string
	var oldGen int32
	waitFor(t, 10*time.Second, "the first member's generation", func() bool {
		member, oldGen = first.GroupMetadata()
		return oldGen > 0
	})
	startConsumer(t, c, group, topic, kgo.DisableAutoCommit())
	waitSplit(t, adm, group, topic, 2, parts, 30*time.Second)
	var newGen int32
	waitFor(t, 10*time.Second, "a new generation", func() bool {
		_, newGen = first.GroupMetadata()
		return newGen > oldGen
	})

	commit := func(gen int32) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = group, member, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err := commit(oldGen); err != kerr.IllegalGeneration {
		t.Fatalf("commit of generation %d (current %d): %v, want ILLEGAL_GENERATION", oldGen, newGen, err)
	}
	if err := commit(newGen); err != nil {
		t.Fatalf("commit of the current generation %d: %v", newGen, err)
	}
}

// produceRecords produces n records spread over the topic's partitions.
func produceRecords(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeSome polls a group member until it got at least n records, and
// returns them.
func consumeSome(t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// fetchCommitted returns a group's committed offsets of topic, retrying
// while the coordinator moves.
func fetchCommitted(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	return fetchCommittedWith(t, func() (*kadm.Client, func()) { return adm, func() {} }, group, topic)
}

// fetchCommittedAfterFailover is fetchCommitted with a new client for each
// attempt. kgo caches a group's coordinator for OffsetFetch and keeps
// dialling it once it died; and just after a failover a broker whose
// metadata is a Raft heartbeat behind may still name the dead one, so a
// client that asked it first would never recover.
func fetchCommittedAfterFailover(t *testing.T, c *Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	return fetchCommittedWith(t, func() (*kadm.Client, func()) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
		if err != nil {
			t.Fatal(err)
		}
		return kadm.NewClient(cl), cl.Close
	}, group, topic)
}

func fetchCommittedWith(t *testing.T, admin func() (*kadm.Client, func()), group, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	var last error
	defer func() {
		if t.Failed() {
			t.Logf("last FetchOffsets error: %v", last)
		}
	}()
	waitFor(t, 60*time.Second, "the committed offsets of "+group, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		adm, done := admin()
		defer done()
		resp, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if last = err; err != nil {
			return false
		}
		clear(out)
		for p, o := range resp[topic] {
			out[p] = o.At
		}
		return true
	})
	return out
}

// resumeFrom consumes with a new member of the group until every
// partition's first record is seen (or want records arrived), and checks
// that each partition resumed exactly at its committed offset.
func checkResumesAt(t *testing.T, c *Cluster, group, topic string, committed map[int32]int64, remaining int) {
	t.Helper()
	cl, stop := startConsumerNoPoll(t, c, group, topic)
	defer stop()
	first := map[int32]int64{}
	got := 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for got < remaining {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the resumed member consumed %d of %d records", got, remaining)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
			if at, ok := committed[r.Partition]; ok && r.Offset < at {
				t.Errorf("partition %d: consumed offset %d below the committed %d", r.Partition, r.Offset, at)
			}
			got++
		})
	}
	if got != remaining {
		t.Errorf("the resumed member consumed %d records, want %d (nothing committed is redelivered)", got, remaining)
	}
	for p, o := range first {
		if at, ok := committed[p]; ok && o != at {
			t.Errorf("partition %d resumed at %d, committed %d", p, o, at)
		}
	}
}

// startConsumerNoPoll starts a group member the test polls itself.
func startConsumerNoPoll(t *testing.T, c *Cluster, group, topic string, opts ...kgo.Opt) (*kgo.Client, func()) {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.RetryTimeout(60 * time.Second), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(cl.Close) }
	t.Cleanup(stop)
	return cl, stop
}

// commitAndClose consumes at least n records with a fresh member,
// commits them synchronously and leaves. It returns the number committed.
func commitAndClose(t *testing.T, c *Cluster, group, topic string, n int) int {
	t.Helper()
	cl, stop := startConsumerNoPoll(t, c, group, topic)
	recs := consumeSome(t, cl, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	stop()
	return len(recs)
}

// Committed offsets survive a restart of the consumer: a new member of the
// group resumes exactly where the last one committed.
func TestGroupCommittedOffsetsSurviveConsumerRestart(t *testing.T) {
	c := groupCluster(t, 1)
	cl, adm := newClient(t, c)
	const topic, group, total = "resume", "g-resume", 60
	createTopic(t, adm, topic, 3, 1)
	produceRecords(t, cl, topic, total)
	done := commitAndClose(t, c, group, topic, 20)
	committed := fetchCommitted(t, adm, group, topic)
	var sum int64
	for _, o := range committed {
		sum += o
	}
	if sum != int64(done) {
		t.Fatalf("committed %v (sum %d), consumed %d", committed, sum, done)
	}
	checkResumesAt(t, c, group, topic, committed, total-done)
}

// kill -9 of the coordinator in a 3-node cluster: the group's offsets
// partition moves to another replica, which loads it; the committed
// offsets are all there and the group resumes from them.
func TestGroupOffsetsSurviveCoordinatorKill(t *testing.T) {
	c := groupCluster(t, 3, "offsets.topic.replication.factor=3", "min.insync.replicas=2")
	cl, adm := newClient(t, c)
	const topic, group, total = "failover", "g-failover", 90
	createTopic(t, adm, topic, 3, 3)
	produceRecords(t, cl, topic, total)
	done := commitAndClose(t, c, group, topic, 30)
	committed := fetchCommitted(t, adm, group, topic)

	// A second group on the same coordinator keeps a member running across
	// the kill.
	running := group
	for i := 0; record.CoordinatorPartition(running, 8) != record.CoordinatorPartition(group, 8) || running == group; i++ {
		running = fmt.Sprintf("g-running-%d", i)
	}
	runner, _ := startConsumerNoPoll(t, c, running, topic)
	seen := map[[2]int64]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, r := range consumeSome(t, runner, 30) {
		seen[[2]int64{int64(r.Partition), r.Offset}] = true
	}
	if err := runner.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit before the kill: %v", err)
	}

	coords := adm.FindGroupCoordinators(ctx, group)
	coordinator := coords[group].NodeID
	if coords[group].Err != nil || coordinator < 1 {
		t.Fatalf("coordinator of %s: %+v", group, coords[group])
	}
	// Group requests sent to another broker answer NOT_COORDINATOR.
	other := coordinator%3 + 1
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = group, "m", 1
	resp, err := cl.Broker(int(other)).Request(ctx, hb)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.HeartbeatResponse).ErrorCode); err != kerr.NotCoordinator {
		t.Fatalf("heartbeat at broker %d (coordinator %d): %v, want NOT_COORDINATOR", other, coordinator, err)
	}
	t.Logf("killing coordinator %d", coordinator)
	c.Kill(coordinator)
	// Wait for the controller to fence the dead broker and move the
	// offsets partition's leadership; then ask with a fresh client. (kgo
	// caches a group's coordinator for its sharded OffsetFetch and keeps
	// dialling a dead one instead of asking again, unlike its group
	// requests: a client matter, so the test does not depend on it.)
	waitFor(t, 60*time.Second, "a new coordinator", func() bool {
		fresh, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
		if err != nil {
			return false
		}
		defer fresh.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		coords := kadm.NewClient(fresh).FindGroupCoordinators(ctx, group)
		return coords[group].Err == nil && coords[group].NodeID != coordinator
	})
	after := fetchCommittedAfterFailover(t, c, group, topic)
	if fmt.Sprint(after) != fmt.Sprint(committed) {
		t.Fatalf("offsets after the kill %v, before %v", after, committed)
	}
	checkResumesAt(t, c, group, topic, committed, total-done)

	// The running member goes on with the new coordinator: it consumes the
	// rest and commits everything.
	for len(seen) < total {
		fs := runner.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the running member consumed %d of %d records", len(seen), total)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[[2]int64{int64(r.Partition), r.Offset}] = true })
	}
	waitFor(t, 60*time.Second, "the running member's commit", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		return runner.CommitUncommittedOffsets(cctx) == nil
	})
	var sum int64
	for _, o := range fetchCommittedAfterFailover(t, c, running, topic) {
		sum += o
	}
	if sum != total {
		t.Fatalf("the running group committed %d records' offsets across the failover, want %d", sum, total)
	}
}

// A static member (KIP-345) that restarts within its session gets its
// partitions back without a rebalance: the other member is never revoked.
func TestGroupStaticMemberRestartsWithoutRebalance(t *testing.T) {
	c := groupCluster(t, 1)
	_, adm := newClient(t, c)
	const topic, group, parts = "static", "g-static", 4
	createTopic(t, adm, topic, parts, 1)
	var mu sync.Mutex
	assigned := map[string]int{}
	track := func(name string) kgo.Opt {
		return kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			mu.Lock()
			assigned[name]++
			mu.Unlock()
		})
	}
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return assigned[name]
	}
	opts := func(name string) []kgo.Opt {
		// Range: kgo's KIP-814 workaround makes a restarted static
		// leader recompute the plan and rejoin when it differs, which a
		// sticky balancer's plan does once the owned partitions of the
		// restarted member are forgotten.
		return []kgo.Opt{kgo.InstanceID(name), kgo.ClientID(name), kgo.SessionTimeout(30 * time.Second), track(name),
			kgo.Balancers(kgo.RangeBalancer())}
	}
	_, stop1 := startConsumer(t, c, group, topic, opts("s1")...)
	waitSplit(t, adm, group, topic, 1, parts, 30*time.Second)
	startConsumer(t, c, group, topic, opts("s2")...)
	before := waitSplit(t, adm, group, topic, 2, parts, 30*time.Second)
	waitFor(t, 10*time.Second, "both members assigned", func() bool { return count("s1") > 0 && count("s2") > 0 })
	s2Assigned := count("s2")

	stop1() // a static member does not send LeaveGroup
	s1Before := count("s1")
	startConsumer(t, c, group, topic, opts("s1")...)
	waitFor(t, 30*time.Second, "the restarted s1 assigned", func() bool { return count("s1") > s1Before })
	after := waitSplit(t, adm, group, topic, 2, parts, 30*time.Second)
	if n := count("s2"); n != s2Assigned {
		t.Fatalf("s2 was reassigned %d times during s1's restart: a rebalance happened", n-s2Assigned)
	}
	byClient := func(v groupView) map[string]string {
		out := map[string]string{}
		for id, ps := range v.members {
			out[v.clientOf[id]] = fmt.Sprint(ps)
		}
		return out
	}
	if b, a := byClient(before), byClient(after); fmt.Sprint(b) != fmt.Sprint(a) {
		t.Fatalf("assignment changed across the static restart: before %v, after %v", b, a)
	}
}

// BenchmarkGroupRebalance measures the time from an 11th member joining a
// 10-member group (eager range, 100 partitions, 100 ms heartbeats: the
// members learn of the rebalance from their heartbeat) to the group being
// Stable again with all 11 members assigned, on a one-node cluster.
func BenchmarkGroupRebalance(b *testing.B) {
	c := groupClusterB(b, 1, "group.initial.rebalance.delay.ms=0")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic, group, parts = "rebalance", "g-rebalance", 100
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	member := func() *kgo.Client {
		m, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.RangeBalancer()), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.SessionTimeout(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	stable := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			v, err := describeGroup(ctx, adm, group, topic)
			if err == nil && v.splitsDisjointly(n, parts) {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("group never stable with %d members: %+v %v", n, v, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for i := 0; i < 10; i++ {
		m := member()
		defer m.Close()
	}
	stable(10)
	// A sub-benchmark, so that the cluster and the 10 members are set up
	// once whatever b.N the framework tries.
	b.Run("join-11th", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			m := member()
			stable(11)
			total += time.Since(start)
			b.StopTimer()
			m.Close() // leaves: back to 10
			stable(10)
			b.StartTimer()
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/rebalance")
	})
}

// BenchmarkGroupCommit measures synchronous offset commits per second of
// one group member: each commit is written to __consumer_offsets and
// answered once committed (replicated to the ISR with RF 3).
func BenchmarkGroupCommit(b *testing.B) {
	for _, tc := range []struct {
		name  string
		nodes int
	}{{"rf1", 1}, {"rf3", 3}} {
		c := groupClusterB(b, tc.nodes)
		const topic, group = "commits", "g-commits"
		m, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.HeartbeatInterval(200*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		adm := kadm.NewClient(m)
		if _, err := adm.CreateTopic(ctx, 1, int16(tc.nodes), nil, topic); err != nil {
			b.Fatal(err)
		}
		// Wait for the membership (and so the coordinator) to settle.
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, gen := m.GroupMetadata(); gen > 0 {
				break
			}
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			m.PollFetches(ctx)
			cancel()
			if time.Now().After(deadline) {
				b.Fatal("never joined")
			}
		}
		commit := func(o int64) error {
			var cerr error
			m.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: o}}},
				func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
					cerr = err
					if err == nil {
						cerr = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
					}
				})
			return cerr
		}
		if err := commit(0); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := commit(int64(i + 1)); err != nil {
					b.Fatalf("commit: %v", err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
		m.Close()
		c.Close()
	}
}

// groupClusterB is groupCluster for benchmarks.
func groupClusterB(b *testing.B, n int, extra ...string) *Cluster {
	b.Helper()
	var specs []NodeSpec
	for i := 1; i <= n; i++ {
		specs = append(specs, NodeSpec{ID: int32(i), Roles: "broker,controller"})
	}
	c := StartCluster(b, specs, append(append([]string{}, groupOverrides...), extra...)...)
	c.WaitReady(30 * time.Second)
	return c
}

// offsets.topic.replication.factor is enforced (KIP-115): with one broker
// of three down, a group's FindCoordinator is COORDINATOR_NOT_AVAILABLE and
// __consumer_offsets is not created with two replicas (it would stay so
// after the cluster is whole); once the broker is back it is created with
// three and commits work.
func TestOffsetsTopicWaitsForItsReplicationFactor(t *testing.T) {
	c := groupCluster(t, 3, "offsets.topic.replication.factor=3")
	c.Stop(3)
	waitFor(t, 20*time.Second, "node 3 fenced", func() bool {
		br, ok := c.Nodes[1].Raft().Image().Broker(3)
		return ok && br.Fenced
	})
	cl, adm := newClient(t, c)
	createTopic(t, adm, "t", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	findCoordinator := func() int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("FindCoordinator: %v", err)
		}
		return resp.Coordinators[0].ErrorCode
	}
	for range 5 {
		if code := findCoordinator(); code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("FindCoordinator with 2 of 3 brokers: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for id, n := range c.Nodes {
		if _, ok := n.Raft().Image().Topic("__consumer_offsets"); ok {
			t.Fatalf("node %d: __consumer_offsets created with 2 of its 3 brokers alive", id)
		}
	}

	c.Start(3)
	c.WaitReady(30 * time.Second)
	waitFor(t, 30*time.Second, "a group coordinator", func() bool { return findCoordinator() == 0 })
	var os kadm.Offsets
	os.AddOffset("t", 0, 7, -1)
	if resp, err := adm.CommitOffsets(ctx, "g", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	tp, _ := c.Nodes[1].Raft().Image().Topic("__consumer_offsets")
	for _, p := range tp.Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("__consumer_offsets partition with replicas %v, want 3", p.Replicas)
		}
	}
}

// The admin side of groups through kadm: commits of a simple consumer,
// FetchOffsets, ListGroups (with a state filter), DescribeGroups,
// OffsetDelete and DeleteGroups, with Kafka's errors for active groups.
func TestGroupAdminAPIs(t *testing.T) {
	c := groupCluster(t, 1)
	_, adm := newClient(t, c)
	const topic = "admin"
	createTopic(t, adm, topic, 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// FindCoordinator creates __consumer_offsets on first use: until it
	// exists, COORDINATOR_NOT_AVAILABLE; then the partition's leader.
	cl, _ := newClient(t, c)
	type found struct {
		ErrorCode int16
		NodeID    int32
	}
	find := func(keyType int8, key string) found {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey = keyType, key // up to v3
		req.CoordinatorKeys = []string{key}                    // v4+ (kgo picks the version)
		resp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		if r.Version >= 4 {
			if len(r.Coordinators) != 1 || r.Coordinators[0].Key != key {
				t.Fatalf("FindCoordinator of %q: %+v", key, r.Coordinators)
			}
			return found{r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID}
		}
		return found{r.ErrorCode, r.NodeID}
	}
	if r := find(0, "first"); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("first FindCoordinator: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, 30*time.Second, "the offsets topic", func() bool { r := find(0, "first"); return r.ErrorCode == 0 && r.NodeID == 1 })
	if r := find(0, ""); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("FindCoordinator of an empty group: %v, want INVALID_REQUEST", kerr.ErrorForCode(r.ErrorCode))
	}
	// A transactional id's coordinator: __transaction_state is created
	// on first use, as the offsets topic is.
	waitFor(t, 30*time.Second, "the transaction state topic", func() bool { r := find(1, "txn"); return r.ErrorCode == 0 && r.NodeID == 1 })
	md, err := adm.Metadata(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if td := md.Topics["__consumer_offsets"]; !td.IsInternal || len(td.Partitions) != 8 {
		t.Errorf("__consumer_offsets: internal %v, %d partitions (offsets.topic.num.partitions=8)", td.IsInternal, len(td.Partitions))
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cfgs.On("__consumer_offsets", nil); err != nil || !hasConfig(v.Configs, "cleanup.policy", "compact") {
		t.Errorf("__consumer_offsets configs: %+v %v", v.Configs, err)
	}

	// A simple consumer (no membership) commits and reads back.
	var os kadm.Offsets
	os.AddOffset(topic, 0, 5, -1)
	os.AddOffset(topic, 1, 7, -1)
	if resp, err := adm.CommitOffsets(ctx, "simple", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if got := fetchCommitted(t, adm, "simple", topic); fmt.Sprint(got) != "map[0:5 1:7]" {
		t.Fatalf("fetched %v", got)
	}

	startConsumer(t, c, "active", topic, kgo.ClientID("active-client"))
	waitSplit(t, adm, "active", topic, 1, 2, 30*time.Second)

	// An admin commit (no member, generation -1: Admin.alterConsumerGroupOffsets,
	// kafka-consumer-groups.sh --reset-offsets) is taken only while the group
	// is empty; with a member it is UNKNOWN_MEMBER_ID, as in Kafka.
	if resp, err := adm.CommitOffsets(ctx, "active", os); err != nil || !errors.Is(resp.Error(), kerr.UnknownMemberID) {
		t.Fatalf("admin commit to an active group: %v %v, want UNKNOWN_MEMBER_ID", err, resp.Error())
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := listed["simple"]; l.State != "Empty" || l.ProtocolType != "" {
		t.Errorf("simple listed as %+v", l)
	}
	if l := listed["active"]; l.State != "Stable" || l.ProtocolType != "consumer" {
		t.Errorf("active listed as %+v", l)
	}
	stable, err := adm.ListGroups(ctx, "Stable")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(stable.Groups()) != "[active]" {
		t.Errorf("Stable groups: %v", stable.Groups())
	}

	described, err := adm.DescribeGroups(ctx, "active", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["active"]; d.State != "Stable" || d.ProtocolType != "consumer" || len(d.Members) != 1 || d.Members[0].ClientID != "active-client" {
		t.Errorf("active described as %+v", d)
	}
	if d := described["missing"]; d.State != "Dead" || d.Err != nil {
		t.Errorf("missing described as %+v", d)
	}

	// An admin commit to a group with members is refused.
	if resp, err := adm.CommitOffsets(ctx, "active", os); err != nil || !errorsIs(resp.Error(), kerr.UnknownMemberID) {
		t.Errorf("admin commit to an active group: %v %v, want UNKNOWN_MEMBER_ID", err, resp.Error())
	}
	// OffsetDelete of a topic the active group subscribes to is refused.
	dresp, err := adm.DeleteOffsets(ctx, "active", kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := dresp.Lookup(topic, 0); !errorsIs(err, kerr.GroupSubscribedToTopic) {
		t.Errorf("OffsetDelete on a subscribed topic: %v, want GROUP_SUBSCRIBED_TO_TOPIC", err)
	}
	// ... and of an empty group's partition works.
	dresp, err = adm.DeleteOffsets(ctx, "simple", kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := dresp.Lookup(topic, 0); err != nil {
		t.Errorf("OffsetDelete: %v", err)
	}
	if got := fetchCommitted(t, adm, "simple", topic); fmt.Sprint(got) != "map[1:7]" {
		t.Fatalf("after OffsetDelete: %v", got)
	}

	deleted, err := adm.DeleteGroups(ctx, "active", "simple", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if err := deleted["active"].Err; !errorsIs(err, kerr.NonEmptyGroup) {
		t.Errorf("delete active: %v, want NON_EMPTY_GROUP", err)
	}
	if err := deleted["nope"].Err; !errorsIs(err, kerr.GroupIDNotFound) {
		t.Errorf("delete nope: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if err := deleted["simple"].Err; err != nil {
		t.Errorf("delete simple: %v", err)
	}
	listed, err = adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["simple"]; ok {
		t.Errorf("simple still listed after its deletion")
	}
	if got := fetchCommitted(t, adm, "simple", topic); len(got) != 0 {
		t.Errorf("offsets of a deleted group: %v", got)
	}
}

func errorsIs(err, target error) bool { return err != nil && errors.Is(err, target) }

func hasConfig(cs []kadm.Config, key, value string) bool {
	for _, c := range cs {
		if c.Key == key && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}
