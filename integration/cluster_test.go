package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClient(t *testing.T, c *Cluster, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapServers()...), kgo.RequestRetries(20),
		kgo.RetryTimeout(20 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitForState(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// waitForState is waitFor with a condition that also says how things
// stand: a timeout reports the last state.
func waitForState(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if state != "" {
				t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, state)
			}
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// imagesAgree reports whether every running node's metadata image is at
// the same offset with the same snapshot records.
func imagesAgree(c *Cluster) bool {
	var want []byte
	for _, n := range c.Nodes {
		enc, err := metadata.EncodeBatch(n.Raft().Image().SnapshotRecords())
		if err != nil {
			return false
		}
		if want == nil {
			want = enc
		} else if string(want) != string(enc) {
			return false
		}
	}
	return true
}

func produceAndConsume(t *testing.T, c *Cluster, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, _ := newClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Key)+"="+string(r.Value)] = true })
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprintf("k%d=v%d", i, i)] {
			t.Fatalf("record %d not consumed", i)
		}
	}
}

func TestSingleCombinedNodeServesKafkaClients(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	cl, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 3, 1, nil, "orders")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	produceAndConsume(t, c, "orders", 500)

	// DescribeTopicPartitions (kafka-topics.sh --describe since Kafka
	// 3.8) pages through the topic two partitions at a time.
	var pages [][]int32
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 2
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "orders"
	dtp.Topics = append(dtp.Topics, rt)
	for len(pages) < 3 {
		r, err := dtp.RequestWith(ctx, cl)
		if err != nil || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
			t.Fatalf("describe topic partitions: %v %+v", err, r)
		}
		var page []int32
		for _, p := range r.Topics[0].Partitions {
			if p.LeaderID != 1 || !slices.Equal(p.ISR, []int32{1}) {
				t.Fatalf("partition %+v", p)
			}
			page = append(page, p.Partition)
		}
		pages = append(pages, page)
		if r.NextCursor == nil {
			break
		}
		cur := kmsg.NewDescribeTopicPartitionsRequestCursor()
		cur.Topic, cur.Partition = r.NextCursor.Topic, r.NextCursor.Partition
		dtp.Cursor = &cur
	}
	if fmt.Sprint(pages) != "[[0 1] [2]]" {
		t.Fatalf("pages %v", pages)
	}

	// ElectLeaders reaches the controller through the broker
	// (kafka-leader-election.sh --bootstrap-server): every partition's
	// preferred replica already leads.
	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ps := range elected {
		for _, r := range ps {
			if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Fatalf("elect %s-%d: %v", r.Topic, r.Partition, r.Err)
			}
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d election results", n)
	}

	// The quorum describes itself through a broker (the CLI's path).
	p := describeQuorum(t, c.BootstrapServers()[0]).Topics[0].Partitions[0]
	if p.LeaderID != 1 || p.HighWatermark <= 0 || len(p.CurrentVoters) != 1 || p.CurrentVoters[0].LogEndOffset <= 0 {
		t.Fatalf("describe quorum %+v", p)
	}
}

func TestThreeCombinedNodesSurviveControllerFailover(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}})
	c.WaitReady(30 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, fmt.Sprintf("t%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "images to agree", func() bool { return imagesAgree(c) })
	var leader int32 = -1
	for id, n := range c.Nodes {
		if n.Raft().IsLeader() {
			leader = id
		}
	}
	if leader < 0 {
		t.Fatal("no raft leader")
	}
	before := c.Nodes[(leader%3)+1].Raft().Image()
	c.Kill(leader) // as a crash: no leadership hand-off
	waitFor(t, 10*time.Second, "a new raft leader", func() bool {
		for _, n := range c.Nodes {
			if n.Raft().IsLeader() {
				return true
			}
		}
		return false
	})
	for _, n := range c.Nodes {
		img := n.Raft().Image()
		for i := 0; i < 5; i++ {
			if _, ok := img.Topic(fmt.Sprintf("t%d", i)); !ok {
				t.Fatalf("committed topic t%d lost after failover", i)
			}
		}
		if img.Offset() < before.Offset() {
			t.Fatalf("image went back from %d to %d", before.Offset(), img.Offset())
		}
	}
	// The survivors still take metadata changes.
	if _, err := adm.CreateTopic(ctx, 1, 2, nil, "after-failover"); err != nil {
		t.Fatal(err)
	}
	// The stopped controller restarts from its disk and catches up.
	c.Start(leader)
	waitFor(t, 20*time.Second, "the restarted node to catch up", func() bool {
		_, ok := c.Nodes[leader].Raft().Image().Topic("after-failover")
		return ok && imagesAgree(c)
	})
}

func TestSeparateControllersAndBrokers(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "controller"}, {2, "controller"}, {3, "controller"}, {4, "broker"}, {5, "broker"}})
	c.WaitReady(30 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 4, 2, nil, "split"); err != nil {
		t.Fatal(err)
	}
	ledBy := func(id int32) int {
		n := 0
		topic, _ := c.Nodes[1].Raft().Image().Topic("split")
		for _, p := range topic.Partitions {
			if p.Leader == id {
				n++
			}
		}
		return n
	}
	waitFor(t, 10*time.Second, "images to agree", func() bool { return imagesAgree(c) })
	img := c.Nodes[4].Raft().Image()
	topic, ok := img.Topic("split")
	if !ok || len(topic.Partitions) != 4 {
		t.Fatalf("broker 4 image lacks the topic: %v", ok)
	}
	for _, p := range topic.Partitions {
		for _, r := range p.Replicas {
			if r != 4 && r != 5 {
				t.Fatalf("replica placed on controller-only node %d", r)
			}
		}
	}
	if ledBy(5) == 0 {
		t.Fatal("placement gave broker 5 no leaderships")
	}
	// A broker silent past its session timeout (3 s here) is fenced and
	// its leaderships move to the other ISR member.
	c.Kill(5)
	waitFor(t, 15*time.Second, "broker 5 to be fenced", func() bool {
		b, ok := c.Nodes[1].Raft().Image().Broker(5)
		return ok && b.Fenced && ledBy(5) == 0 && ledBy(4) == 4
	})
	// and a restarted broker with the same node.id rejoins.
	c.Start(5)
	c.WaitReady(20 * time.Second)
}

func TestADuplicateNodeIDIsRefused(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "controller"}, {2, "broker"}})
	c.WaitReady(20 * time.Second)
	before, _ := c.Nodes[1].Raft().Image().Broker(2)
	// A second process claims node.id 2 while the first is alive: the
	// controller answers DUPLICATE_BROKER_REGISTRATION and it never serves.
	impostor, err := c.StartExtra(NodeSpec{ID: 2, Roles: "broker"}, c.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Abort()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := impostor.WaitReady(ctx); err == nil {
		t.Fatal("a duplicate node.id registered")
	}
	after, _ := c.Nodes[1].Raft().Image().Broker(2)
	if after.Epoch != before.Epoch || after.IncarnationID != before.IncarnationID || after.Fenced {
		t.Fatalf("the live broker's registration changed: %+v -> %+v", before, after)
	}
}

func TestANodeOfAnotherClusterIsRefused(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "controller"}, {2, "broker"}})
	c.WaitReady(20 * time.Second)
	stranger, err := c.StartExtra(NodeSpec{ID: 3, Roles: "broker"}, "AAAAAAAAAAAAAAAAAAAAAA")
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Abort()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := stranger.WaitReady(ctx); err == nil {
		t.Fatal("a broker of another cluster registered")
	}
	if _, ok := c.Nodes[1].Raft().Image().Broker(3); ok {
		t.Fatal("the stranger is in the image")
	}
}

// A controller formatted for another cluster cannot vote or replicate: its
// Raft connections carry the wrong cluster id and are refused, while the
// two good voters keep a quorum.
func TestAControllerOfAnotherClusterCannotJoinTheQuorum(t *testing.T) {
	specs := []NodeSpec{{1, "controller"}, {2, "controller"}, {3, "controller"}}
	c := StartCluster(t, specs[:0])
	c.Specs = specs
	var voters []string
	for _, s := range specs {
		c.dirs[s.ID] = filepath.Join(t.TempDir(), fmt.Sprintf("n%d", s.ID))
		c.ports[s.ID] = [2]int{FreePort(t), FreePort(t)}
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", s.ID, c.ports[s.ID][1]))
	}
	c.voters = strings.Join(voters, ",")
	for _, s := range specs {
		id := c.ClusterID
		if s.ID == 3 {
			id = "AAAAAAAAAAAAAAAAAAAAAA"
		}
		if _, err := raftlog.EnsureMetaProperties([]string{c.dirs[s.ID]}, id, s.ID, true); err != nil {
			t.Fatal(err)
		}
		c.Start(s.ID)
	}
	waitFor(t, 15*time.Second, "a leader among the good voters", func() bool {
		return c.Nodes[1].Raft().IsLeader() || c.Nodes[2].Raft().IsLeader()
	})
	_, err := c.Nodes[1].Raft().Propose(context.Background(), nil)
	if err != nil && !c.Nodes[2].Raft().IsLeader() {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // give the stranger time to (wrongly) catch up
	if c.Nodes[3].Raft().IsLeader() || c.Nodes[3].Raft().AppliedOffset() > 0 {
		t.Fatalf("the stranger applied offset %d", c.Nodes[3].Raft().AppliedOffset())
	}
}

// Raft rides only on the controller listener of a controller: a Raft hello
// (marker, cluster id) on a combined node's client listener is refused.
func TestRaftIsRefusedOnTheClientListener(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}})
	c.WaitReady(20 * time.Second)
	conn, err := net.DialTimeout("tcp", c.BootstrapServers()[0], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hello := append([]byte{raftlog.RaftMarker, byte(len(c.ClusterID))}, c.ClusterID...)
	if _, err := conn.Write(hello); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the client listener kept a Raft connection open: %v", err)
	}
	// The node still serves clients.
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "after-raft-probe"); err != nil {
		t.Fatal(err)
	}
	produceAndConsume(t, c, "after-raft-probe", 10)
}

// TestDeleteTopicDisabled: with delete.topic.enable=false (a Kafka broker
// setting that reaches the controller) kadm's DeleteTopics gets
// TOPIC_DELETION_DISABLED and the topic stays.
func TestDeleteTopicDisabled(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, "delete.topic.enable=false")
	c.WaitReady(20 * time.Second)
	_, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "kept"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	resps, err := adm.DeleteTopics(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if err := resps["kept"].Err; !errors.Is(err, kerr.TopicDeletionDisabled) {
		t.Fatalf("delete: %v, want TOPIC_DELETION_DISABLED", err)
	}
	if topics, err := adm.ListTopics(ctx); err != nil || !topics.Has("kept") {
		t.Fatalf("after the refused delete: %v %v", topics.Names(), err)
	}
}

// TestMaxConnectionsPerIPOverrides: max.connections.per.ip.overrides
// reaches the listeners: an address limited to one connection has its
// second closed at once, while its first stays open.
func TestMaxConnectionsPerIPOverrides(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, "max.connections.per.ip.overrides=127.0.0.2:1")
	c.WaitReady(20 * time.Second)
	dial := func() net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		conn, err := d.Dial("tcp", c.BootstrapServers()[0])
		if err != nil {
			t.Skipf("cannot dial from 127.0.0.2: %v", err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	first, second := dial(), dial()
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("second connection from 127.0.0.2: %v, want it closed", err)
	}
	_ = first.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := first.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("first connection from 127.0.0.2: %v, want it open", err)
	}
}
