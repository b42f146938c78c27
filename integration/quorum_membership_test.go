package integration

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker"
)

// TestAddAndRemoveControllers: KIP-853 controller membership, the way
// Kafka 4's docs replace a controller. A dynamic quorum of voters 1, 2 (combined) and 3
// (controller-only), and controller 4 formatted with
// --no-initial-controllers, running but not a voter. keel metadata-quorum
// add-controller makes 4 a voter; controller 3 is killed and
// remove-controller (through a broker, which forwards it) takes it out.
// Then 4 is killed and restarted — still a voter, from the Raft log — and
// node 1 is killed: 2 and 4 are a majority of the three voters, so the
// quorum still elects a controller and creates a topic, which needs 4's
// vote. Every acknowledged record is read back. Adding 4 again is
// DUPLICATE_VOTER, removing an unknown voter VOTER_NOT_FOUND.
func TestAddAndRemoveControllers(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{
		{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"},
		{ID: 3, Roles: "controller"}, {ID: 4, Roles: "controller"},
	}, ProcessOptions{DynamicQuorum: true, Joining: []int32{4}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	voters := func(addr string) (ids []int32, nodes []int32) {
		t.Helper()
		p := describeQuorum(t, addr)
		if len(p.Topics) != 1 || len(p.Topics[0].Partitions) != 1 || p.Topics[0].Partitions[0].ErrorCode != 0 {
			return nil, nil
		}
		for _, v := range p.Topics[0].Partitions[0].CurrentVoters {
			ids = append(ids, v.ReplicaID)
		}
		for _, n := range p.Nodes {
			nodes = append(nodes, n.NodeID)
		}
		slices.Sort(nodes)
		return ids, nodes
	}
	ctl := func(id int32) string { return c.Node(id).AdvertisedController }
	if ids, _ := voters(ctl(1)); fmt.Sprint(ids) != "[1 2 3]" {
		t.Fatalf("voters before add-controller %v, want [1 2 3]", ids)
	}
	quorumCmd := func(args ...string) (string, error) {
		out, err := exec.Command(c.bin, append([]string{"metadata-quorum"}, args...)...).CombinedOutput()
		return string(out), err
	}

	out, err := quorumCmd("--command-config", c.Node(4).ConfigPath, "--bootstrap-controller", ctl(3), "add-controller")
	if err != nil || !strings.Contains(out, "Added controller 4") {
		t.Fatalf("add-controller: %v\n%s", err, out)
	}
	waitFor(t, 20*time.Second, "voters [1 2 3 4] with 4's endpoint", func() bool {
		ids, nodes := voters(ctl(2))
		return fmt.Sprint(ids) == "[1 2 3 4]" && fmt.Sprint(nodes) == "[1 2 3 4]"
	})
	if out, err := quorumCmd("--command-config", c.Node(4).ConfigPath, "--bootstrap-controller", ctl(1), "add-controller"); err == nil || !strings.Contains(out, "DUPLICATE_VOTER") {
		t.Errorf("adding voter 4 again: %v\n%s", err, out)
	}

	const topic = "membership"
	cl := procClient(t, c, kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 2, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	acked := map[string]bool{}
	produce := func(n int, tag string) {
		t.Helper()
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("%s-%d", tag, i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			acked[v] = true
		}
	}
	produce(200, "four-voters")

	// Controller 3 dies for good: take it out, through a broker.
	c.Kill(3)
	out, err = quorumCmd("--bootstrap-server", c.Node(1).AdvertisedPlaintext, "remove-controller", "--controller-id", "3",
		"--controller-directory-id", "pbvuBlaTTwKRxS5NLJwRFQ")
	if err != nil || !strings.Contains(out, "Removed controller 3") {
		t.Fatalf("remove-controller: %v\n%s", err, out)
	}
	waitFor(t, 20*time.Second, "voters [1 2 4]", func() bool {
		ids, nodes := voters(ctl(1))
		return fmt.Sprint(ids) == "[1 2 4]" && fmt.Sprint(nodes) == "[1 2 4]"
	})
	if out, err := quorumCmd("--bootstrap-controller", ctl(2), "remove-controller", "--controller-id", "9"); err == nil || !strings.Contains(out, "VOTER_NOT_FOUND") {
		t.Errorf("removing a controller that is not a voter: %v\n%s", err, out)
	}
	produce(200, "three-voters")

	// 4 restarts as a voter: its Raft log says so.
	c.Kill(4)
	c.Start(4)
	waitFor(t, 30*time.Second, "controller 4 back and caught up", func() bool {
		p := describeQuorum(t, ctl(1))
		if p.Topics[0].Partitions[0].ErrorCode != 0 {
			return false
		}
		part := p.Topics[0].Partitions[0]
		for _, v := range part.CurrentVoters {
			if v.ReplicaID == 4 && v.LogEndOffset >= part.HighWatermark {
				return true
			}
		}
		return false
	})
	// Without node 1, voters 2 and 4 are the majority: a controller is
	// elected and metadata changes commit only with 4's vote.
	c.Kill(1)
	cl2 := kadmFor(t, c.Node(2).AdvertisedPlaintext)
	waitFor(t, 60*time.Second, "a topic created with voters 2 and 4 alone", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		resp, err := cl2.CreateTopic(cctx, 1, 1, nil, "after-"+topic)
		return err == nil && (resp.Err == nil || strings.Contains(resp.Err.Error(), "TOPIC_ALREADY_EXISTS"))
	})
	if ids, _ := voters(ctl(2)); fmt.Sprint(ids) != "[1 2 4]" {
		t.Errorf("voters %v, want [1 2 4]", ids)
	}

	// Every acknowledged record is there (node 2 has a replica of each
	// partition: replication factor 2 over brokers 1 and 2).
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).AdvertisedPlaintext), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < len(acked) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d acknowledged records", len(seen), len(acked))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	for v := range acked {
		if !seen[v] {
			t.Errorf("acknowledged record %s missing", v)
		}
	}
}

// kadmFor is an admin client of one broker.
func kadmFor(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// A static quorum's voters are fixed by controller.quorum.voters: voter
// changes are UNSUPPORTED_VERSION, as Kafka answers with kraft.version 0.
func TestStaticQuorumRefusesVoterChanges(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}})
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	add := kmsg.NewPtrAddRaftVoterRequest()
	add.VoterID = 2
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", 1
	add.Listeners = append(add.Listeners, l)
	remove := kmsg.NewPtrRemoveRaftVoterRequest()
	remove.VoterID = 1
	for _, addr := range []string{c.ControllerAddr(1), c.BootstrapServers()[0]} {
		for _, req := range []kmsg.Request{add, remove} {
			resp, err := broker.Request(ctx, addr, req)
			if err != nil {
				t.Fatal(err)
			}
			var code int16
			switch r := resp.(type) {
			case *kmsg.AddRaftVoterResponse:
				code = r.ErrorCode
			case *kmsg.RemoveRaftVoterResponse:
				code = r.ErrorCode
			}
			if code != 35 { // UNSUPPORTED_VERSION
				t.Errorf("%s to %s: error code %d, want UNSUPPORTED_VERSION", kmsg.NameForKey(req.Key()), addr, code)
			}
		}
	}
}
