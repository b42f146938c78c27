package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/client"
)

// nextGenMember starts a kgo member of the KIP-848 consumer protocol
// (group.protocol=consumer: kgo's ServerSideBalancer) that records every
// record it polls and commits after each poll.
func nextGenMember(t *testing.T, c *Cluster, group, topic, id string, seen *sync.Map, opts ...kgo.Opt) (stop func()) {
	t.Helper()
	return groupMember(t, c, group, topic, id, seen, append([]kgo.Opt{kgo.ServerSideBalancer()}, opts...)...)
}

// classicMember is nextGenMember of the classic protocol (kgo's default
// cooperative-sticky balancer).
func classicMember(t *testing.T, c *Cluster, group, topic, id string, seen *sync.Map) (stop func()) {
	t.Helper()
	return groupMember(t, c, group, topic, id, seen)
}

func groupMember(t *testing.T, c *Cluster, group, topic, id string, seen *sync.Map, opts ...kgo.Opt) (stop func()) {
	t.Helper()
	log := &tailLogger{}
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ClientID(id), kgo.WithLogger(log),
		kgo.RetryTimeout(30 * time.Second), kgo.DisableAutoCommit(),
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
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) { seen.Store(string(r.Value), id) })
			// Every round, not only after records: a commit that failed
			// (its coordinator killed) is tried again.
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			_ = cl.CommitUncommittedOffsets(cctx)
			ccancel()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			cl.Close() // leaves the group (epoch -1)
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("member %s, its client's last log lines:\n%s", id, log.String())
		}
		stop()
	})
	return stop
}

// tailLogger keeps a kgo client's last info lines, for a failed test to
// show how its group member saw the group.
type tailLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *tailLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *tailLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	line := fmt.Sprintf("%s %s %s %v", time.Now().Format("15:04:05.000"), level, msg, keyvals)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if len(l.lines) > 2*tailLines {
		l.lines = l.lines[len(l.lines)-tailLines:]
	}
}

// tailLines is how many lines a tailLogger shows: few, as CI keeps only
// the head and the tail of a long log, and the failure is just above.
const tailLines = 12

func (l *tailLogger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-tailLines):], "\n")
}

// describeNextGen returns the members' partition counts of a consumer
// protocol group, through ConsumerGroupDescribe.
func describeNextGen(t *testing.T, adm *kadm.Client, group, topic string) (kadm.DescribedConsumerGroup, map[string]int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return kadm.DescribedConsumerGroup{}, nil, err
	}
	d := ds[group]
	if d.Err != nil {
		return d, nil, d.Err
	}
	counts := map[string]int{}
	for _, m := range d.Members {
		counts[m.ClientID] = len(m.Assignment[topic])
	}
	return d, counts, nil
}

// produceSeq produces records k<i>/v<i> for i in [from, from+n).
func produceSeq(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// seqProducer returns a function that produces the next k records of the
// sequence (produceSeq) and waits until the members saw all so far.
func seqProducer(t *testing.T, cl *kgo.Client, topic string, seen *sync.Map) (produce func(k int)) {
	n := 0
	return func(k int) {
		t.Helper()
		produceSeq(t, cl, topic, n, k)
		n += k
		waitSeenSeq(t, seen, n)
	}
}

// waitSeenSeq waits until the members saw values v0..v<n-1>.
func waitSeenSeq(t *testing.T, seen *sync.Map, n int) {
	t.Helper()
	waitConsumedBy(t, seen, 0, n)
}

// waitConsumedBy waits until values v<from>..v<to-1> were seen and each
// of the members named consumed some of them.
func waitConsumedBy(t *testing.T, seen *sync.Map, from, to int, members ...string) {
	t.Helper()
	what := fmt.Sprintf("records %d to %d consumed", from, to-1)
	if len(members) > 0 {
		what += fmt.Sprintf(" by each of %v", members)
	}
	waitForState(t, 90*time.Second, what, func() (bool, string) {
		by, missing := map[string]int{}, 0
		for i := from; i < to; i++ {
			id, ok := seen.Load(fmt.Sprintf("v%d", i))
			if !ok {
				missing++
				continue
			}
			by[id.(string)]++
		}
		if missing > 0 {
			return false, fmt.Sprintf("%d not seen", missing)
		}
		for _, m := range members {
			if by[m] == 0 {
				return false, fmt.Sprintf("consumed by %v", by)
			}
		}
		return true, ""
	})
}

// waitCommittedToEnd waits until the group committed every partition of
// topic to its end offset.
func waitCommittedToEnd(t *testing.T, adm *kadm.Client, group, topic string) {
	t.Helper()
	waitForState(t, 60*time.Second, "offsets committed to the end", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return false, fmt.Sprintf("OffsetFetch: %v", err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, fmt.Sprintf("ListOffsets: %v", err)
		}
		ok, state := true, ""
		ends.Each(func(e kadm.ListedOffset) {
			o, found := offs.Lookup(topic, e.Partition)
			ok = ok && (e.Offset == 0 || found && o.At == e.Offset)
			state += fmt.Sprintf(" p%d committed %d end %d", e.Partition, o.At, e.Offset)
		})
		return ok, state
	})
}

// waitNextGenSplit waits until the group is Stable with want members
// owning the topic's n partitions, every member some.
func waitNextGenSplit(t *testing.T, adm *kadm.Client, group, topic string, want, n int) kadm.DescribedConsumerGroup {
	t.Helper()
	var last kadm.DescribedConsumerGroup
	waitForState(t, 90*time.Second, fmt.Sprintf("group %s to split %d partitions among %d members", group, n, want), func() (bool, string) {
		d, counts, err := describeNextGen(t, adm, group, topic)
		last = d
		total, ok := 0, err == nil && d.State == "Stable" && len(counts) == want
		for _, k := range counts {
			total += k
			ok = ok && k > 0
		}
		return ok && total == n, fmt.Sprintf("state %q counts %v err %v", d.State, counts, err)
	})
	return last
}

// The KIP-848 consumer group protocol with kgo's next-gen members: the
// coordinator assigns the partitions (uniform assignor), members joining
// and leaving move only what they must, every record is consumed, offsets
// commit with member epochs, and the group survives a broker restart.
func TestConsumerProtocolGroup(t *testing.T) {
	c := groupCluster(t, 1)
	cl, adm := newClient(t, c)
	const topic, group, parts = "next-gen", "g-next-gen", 6
	createTopic(t, adm, topic, parts, 1)

	var seen sync.Map
	produce := func(from, n int) { produceSeq(t, cl, topic, from, n) }
	waitSeen := func(n int) { waitSeenSeq(t, &seen, n) }

	produce(0, 600)
	stopA := nextGenMember(t, c, group, topic, "a", &seen)
	d := waitNextGenSplit(t, adm, group, topic, 1, parts)
	if d.AssignorName != "uniform" || d.Members[0].MemberType != 1 {
		t.Fatalf("described: assignor %q member type %d", d.AssignorName, d.Members[0].MemberType)
	}
	waitSeen(600)

	stopB := nextGenMember(t, c, group, topic, "b", &seen)
	nextGenMember(t, c, group, topic, "c", &seen)
	waitNextGenSplit(t, adm, group, topic, 3, parts)
	produce(600, 600)
	waitSeen(1200)

	// Listed as a consumer group; DescribeGroups (classic) does not know it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := adm.ListGroupsByType(ctx, []string{"consumer"})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed[group]; !ok || l.GroupType != "consumer" || l.ProtocolType != "consumer" {
		t.Fatalf("ListGroups(consumer): %+v", listed)
	}
	if classic, err := adm.ListGroupsByType(ctx, []string{"classic"}); err != nil || classic[group].Group != "" {
		t.Fatalf("ListGroups(classic) lists the consumer group: %+v %v", classic, err)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	if resp, err := dg.RequestWith(ctx, cl); err != nil || resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups of a consumer group: %+v %v", resp, err)
	}

	// Keel's SDK (keel groups describe) describes it through
	// ConsumerGroupDescribe, as Kafka's admin client does.
	sdk, err := client.NewAdmin(ctx, client.SeedBrokers(c.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	descs, err := sdk.DescribeGroups(ctx, group)
	if err != nil || descs[0].Err != nil || descs[0].ProtocolType != "consumer" || descs[0].Protocol != "uniform" || len(descs[0].Members) != 3 {
		t.Fatalf("SDK describe: %+v %v", descs, err)
	}
	assigned := 0
	for _, m := range descs[0].Members {
		assigned += len(m.Assigned)
	}
	if assigned != parts {
		t.Fatalf("SDK describe: %d partitions assigned, want %d: %+v", assigned, parts, descs[0])
	}

	// Two leave; the last takes everything.
	stopA()
	stopB()
	waitNextGenSplit(t, adm, group, topic, 1, parts)
	produce(1200, 300)
	waitSeen(1500)

	// Committed offsets reach the end of every partition.
	waitCommittedToEnd(t, adm, group, topic)

	// A restart of the coordinator: the group is loaded from
	// __consumer_offsets and the member carries on.
	c.Stop(1)
	c.Start(1)
	c.WaitReady(30 * time.Second)
	produce(1500, 300)
	waitSeen(1800)
	waitNextGenSplit(t, adm, group, topic, 1, parts)
}

// With group.coordinator.rebalance.protocols=classic the consumer protocol
// is off (as with group.version 0): ConsumerGroupHeartbeat is not
// advertised (a request that comes anyway gets UNSUPPORTED_VERSION:
// broker's TestConsumerGroupHeartbeatDisabled), and kgo's next-gen member
// falls back to the classic protocol.
func TestConsumerProtocolDisabled(t *testing.T) {
	c := groupCluster(t, 1, "group.coordinator.rebalance.protocols=classic")
	cl, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range versions.ApiKeys {
		if k.ApiKey == 68 || k.ApiKey == 69 {
			t.Fatalf("API %d advertised with the consumer protocol off", k.ApiKey)
		}
	}
	const topic = "fallback"
	createTopic(t, adm, topic, 2, 1)
	var seen sync.Map
	nextGenMember(t, c, "g-fallback", topic, "a", &seen)
	waitFor(t, 30*time.Second, "a classic group", func() bool {
		described, err := adm.DescribeGroups(ctx, "g-fallback")
		return err == nil && described["g-fallback"].State == "Stable"
	})
}

// A consumer-protocol group across a kill -9 of its coordinator on three
// nodes (__consumer_offsets at RF=3): the members find the new
// coordinator, which loaded the group's records, and every record is
// consumed and committed; the members' assignment stays split.
func TestConsumerProtocolCoordinatorKill(t *testing.T) {
	c := groupCluster(t, 3, "offsets.topic.replication.factor=3", "min.insync.replicas=2")
	cl, adm := newClient(t, c)
	const topic, group, parts = "next-gen-kill", "g-next-gen-kill", 4
	createTopic(t, adm, topic, parts, 3)
	var seen sync.Map
	produce := func(from, n int) { produceSeq(t, cl, topic, from, n) }
	waitSeen := func(n int) { waitSeenSeq(t, &seen, n) }
	produce(0, 200)
	nextGenMember(t, c, group, topic, "a", &seen)
	nextGenMember(t, c, group, topic, "b", &seen)
	waitNextGenSplit(t, adm, group, topic, 2, parts)
	waitSeen(200)
	// The coordinator is killed once both members consume their
	// partitions, not while one still fetches the committed offsets of
	// partitions it was just given. kgo (v1.22.3) then fails that
	// OffsetFetch at once on the dead node, restarts the member's
	// session, heartbeats and fetches again, both to its cached
	// coordinator, in a tight loop that never sends FindCoordinator (a
	// member here spun so for two minutes, 220,000 times, its debug log
	// showing no FindCoordinator) until the new coordinator expires its
	// session and the other member takes its partitions. A client
	// matter, as TestGroupOffsetsSurviveCoordinatorKill notes for
	// classic members' OffsetFetch.
	produce(200, 100)
	waitConsumedBy(t, &seen, 200, 300, "a", "b")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	coords := adm.FindGroupCoordinators(ctx, group)
	coordinator := coords[group].NodeID
	if coords[group].Err != nil || coordinator < 1 {
		t.Fatalf("coordinator of %s: %+v", group, coords[group])
	}
	t.Logf("%s killing coordinator %d", time.Now().Format("15:04:05.000"), coordinator)
	c.Kill(coordinator)
	killed := time.Now()
	step := func(what string) { t.Logf("%v after the kill: %s", time.Since(killed).Round(time.Millisecond), what) }
	produce(300, 200)
	step("produced")
	waitSeen(500)
	step("consumed")
	// A fresh admin client: kadm's cached coordinator is the dead node.
	_, fresh := newClient(t, c)
	waitNextGenSplit(t, fresh, group, topic, 2, parts)
	step("the group is stable")
	waitCommittedToEnd(t, fresh, group, topic)
	step("committed")
}

// waitMemberTypes waits until the consumer group is Stable with the
// members named (client ids), each of the type given (0 classic, 1 the
// consumer protocol) and owning some of the topic's n partitions.
func waitMemberTypes(t *testing.T, adm *kadm.Client, group, topic string, n int, want map[string]int8) {
	t.Helper()
	var last kadm.DescribedConsumerGroup
	var lastErr error
	waitFor(t, 90*time.Second, fmt.Sprintf("group %s with members %v", group, want), func() bool {
		var counts map[string]int
		last, counts, lastErr = describeNextGen(t, adm, group, topic)
		if lastErr != nil || last.State != "Stable" || len(last.Members) != len(want) {
			return false
		}
		total := 0
		for _, m := range last.Members {
			typ, ok := want[m.ClientID]
			if !ok || m.MemberType != typ || counts[m.ClientID] == 0 {
				return false
			}
			total += counts[m.ClientID]
		}
		return total == n
	})
}

// A consumer application rolled from the classic protocol to the consumer
// protocol and back, one instance at a time under load, as Kafka 4 allows
// (group.consumer.migration.policy=bidirectional): the first
// consumer-protocol member converts the classic group, classic and
// consumer-protocol members share it (the coordinator assigns for both),
// and when the last consumer-protocol member leaves, the group is classic
// again; a coordinator restart in the middle changes nothing. Every record
// is consumed and the offsets are committed to the end.
func TestConsumerProtocolRollingMigration(t *testing.T) {
	c := groupCluster(t, 1)
	cl, adm := newClient(t, c)
	const topic, group, parts = "migrate", "g-migrate", 6
	createTopic(t, adm, topic, parts, 1)
	var seen sync.Map
	produce := seqProducer(t, cl, topic, &seen)
	classicStable := func(members int) {
		t.Helper()
		waitFor(t, 90*time.Second, fmt.Sprintf("classic group of %d", members), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := adm.DescribeGroups(ctx, group)
			return err == nil && d[group].Err == nil && d[group].State == "Stable" && len(d[group].Members) == members
		})
	}

	stopA := classicMember(t, c, group, topic, "a", &seen)
	stopB := classicMember(t, c, group, topic, "b", &seen)
	classicStable(2)
	produce(300)

	// Upgrade, one member at a time.
	stopA()
	stopA2 := nextGenMember(t, c, group, topic, "a2", &seen)
	waitMemberTypes(t, adm, group, topic, parts, map[string]int8{"b": 0, "a2": 1})
	produce(300)
	// A restart of the coordinator while the group is mixed: the classic
	// member's state (ClassicMemberMetadata) is loaded back with the rest.
	c.Stop(1)
	c.Start(1)
	c.WaitReady(30 * time.Second)
	produce(300)
	waitMemberTypes(t, adm, group, topic, parts, map[string]int8{"b": 0, "a2": 1})
	stopB()
	stopB2 := nextGenMember(t, c, group, topic, "b2", &seen)
	waitMemberTypes(t, adm, group, topic, parts, map[string]int8{"a2": 1, "b2": 1})
	produce(300)

	// And back.
	stopA2()
	classicMember(t, c, group, topic, "a3", &seen)
	waitMemberTypes(t, adm, group, topic, parts, map[string]int8{"b2": 1, "a3": 0})
	produce(300)
	stopB2()
	classicMember(t, c, group, topic, "b3", &seen)
	classicStable(2)
	produce(300)
	waitCommittedToEnd(t, adm, group, topic)
}

// A static instance rolled back from the consumer protocol to the classic
// one, keeping its group.instance.id: when the classic incarnation takes
// the place of the group's last consumer-protocol member, the group is
// classic at once (Kafka's validateOnlineDowngradeWithReplacedMemberId),
// Stable, without a rebalance first. Every record is consumed and the
// offsets are committed to the end.
func TestConsumerProtocolStaticRollback(t *testing.T) {
	c := groupCluster(t, 1)
	cl, adm := newClient(t, c)
	const topic, group, parts = "rollback", "g-rollback", 6
	createTopic(t, adm, topic, parts, 1)
	var seen sync.Map
	produce := seqProducer(t, cl, topic, &seen)

	classicMember(t, c, group, topic, "a", &seen)
	stopS := nextGenMember(t, c, group, topic, "s", &seen, kgo.InstanceID("app-0"))
	waitMemberTypes(t, adm, group, topic, parts, map[string]int8{"a": 0, "s": 1})
	produce(300)
	_, counts, err := describeNextGen(t, adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the rollback: %v", counts)

	stopS() // a static member's leave (epoch -2) keeps its place
	groupMember(t, c, group, topic, "s-classic", &seen, kgo.InstanceID("app-0"))
	// A classic group (DescribeGroups answers), Stable, the two members
	// splitting the partitions.
	waitSplit(t, adm, group, topic, 2, parts, 90*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ds, err := adm.DescribeGroups(ctx, group); err != nil || ds[group].ProtocolType != "consumer" {
		t.Fatalf("the downgraded group's protocol type: %q (%v)", ds[group].ProtocolType, err)
	}
	if _, _, err := describeNextGen(t, adm, group, topic); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("ConsumerGroupDescribe of the downgraded group: %v, want GROUP_ID_NOT_FOUND", err)
	}
	produce(300)
	waitCommittedToEnd(t, adm, group, topic)
}
