package broker

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
)

// A controller that is told to stop while it is becoming active (its Raft
// node the leader, the barrier pending or failed) stops: it does not retry
// the barrier for as long as the node stays leader, which kept a node's
// Close waiting for a minute when leadership moved to it during a
// cluster's shutdown. Here every driver is closed the moment it may enter
// its active loop, with a barrier that the stop cancels.
func TestControllerDriverStopsWhileBecomingActive(t *testing.T) {
	node := singleVoter(t)
	for i := range 20 {
		d := &controllerDriver{raft: node, cfg: metadata.ControllerConfig{}, logger: hclog.NewNullLogger(),
			events: make(chan controllerEvent), stop: make(chan struct{})}
		close(d.stop)
		done := make(chan bool, 1)
		go func() { done <- d.active(node.LeaderCh()) }()
		select {
		case stillActive := <-done:
			if stillActive {
				t.Fatalf("round %d: a stopped driver reported itself active, so its run loop would start again", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a stopped driver did not leave its active loop", i)
		}
	}
}

// singleVoter is a one-voter metadata quorum on loopback that has elected
// itself, closed when the test ends.
func singleVoter(t *testing.T) *raftlog.Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	mux := raftlog.NewMux(addr)
	served := raftlog.Serve(ln, mux, nil)
	t.Cleanup(func() { served.Close() })
	node, err := raftlog.Open(raftlog.Config{NodeID: 1, Voters: map[int32]string{1: addr}, Voter: true,
		DataDir: t.TempDir(), Mux: mux, Logger: hclog.NewNullLogger(),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	for deadline := time.Now().Add(10 * time.Second); !node.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the single voter did not become leader")
		}
	}
	return node
}

// A controller whose event loop stalls for longer than
// broker.session.timeout.ms does not fence, on its first tick after the
// stall, a broker whose heartbeats kept arriving meanwhile: their arrival
// counts (Kafka's BrokerHeartbeatTracker, KAFKA-17793). A broker that
// went silent before the stall is still fenced by that tick. The stall is
// injected where the tick runs, so that the tick comes before the
// heartbeats waiting for the loop; a stall inside a slow commit ends in
// either order.
func TestControllerStallDoesNotFenceHeartbeatingBroker(t *testing.T) {
	node := singleVoter(t)
	cfg := metadata.DefaultControllerConfig()
	cfg.BrokerSessionTimeout = 2 * time.Second
	stall := make(chan time.Duration, 1)
	stalled := make(chan struct{})
	d := &controllerDriver{raft: node, cfg: cfg, logger: hclog.NewNullLogger(),
		events: make(chan controllerEvent), stop: make(chan struct{}),
		beforeTick: func() {
			select {
			case dur := <-stall:
				time.Sleep(dur)
				close(stalled)
			default:
			}
		}}
	d.wg.Add(1)
	go d.run()
	defer d.close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	register := func(id int32) int64 {
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID, req.IncarnationID, req.Features = id, metadata.NewUuid(), registrationFeatures()
		req.LogDirs = [][16]byte{metadata.NewUuid()}
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", uint16(9090+id)
		req.Listeners = append(req.Listeners, l)
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		resp, _, err := d.submit(rctx, req)
		if err != nil {
			t.Fatalf("register broker %d: %v", id, err)
		}
		r := resp.(*kmsg.BrokerRegistrationResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("register broker %d: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
		return r.BrokerEpoch
	}
	// heartbeat sends a heartbeat as a broker does, giving up on it after
	// a quarter of the session, and reports whether it was unfenced.
	heartbeat := func(id int32, epoch int64) bool {
		req := kmsg.NewPtrBrokerHeartbeatRequest()
		req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = id, epoch, node.AppliedOffset()
		hctx, hcancel := context.WithTimeout(ctx, cfg.BrokerSessionTimeout/4)
		defer hcancel()
		resp, _, err := d.submit(hctx, req)
		return err == nil && resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode == 0 && !resp.(*kmsg.BrokerHeartbeatResponse).IsFenced
	}
	fenced := func(id int32) bool {
		b, ok := node.Image().Broker(id)
		return !ok || b.Fenced
	}

	// Broker 3 heartbeats until it is unfenced, then goes silent.
	epoch3 := register(3)
	for deadline := time.Now().Add(10 * time.Second); !heartbeat(3, epoch3); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("broker 3 was not unfenced")
		}
	}
	// Broker 2 heartbeats every 200 ms throughout.
	epoch2 := register(2)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	unfenced := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		var once sync.Once
		for ctx.Err() == nil {
			if heartbeat(2, epoch2) {
				once.Do(func() { close(unfenced) })
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	select {
	case <-unfenced:
	case <-time.After(10 * time.Second):
		t.Fatal("broker 2 was not unfenced")
	}

	// Broker 2 leads a partition: its leader epoch would move if broker 2
	// were fenced even for a moment (its next heartbeat unfences it at
	// once, before the image could be seen fenced).
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "led-by-2", -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{2}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	create.Topics = append(create.Topics, ct)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if resp, _, err := d.submit(cctx, create); err != nil || resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("create a topic on broker 2: %v %+v", err, resp)
	}
	partition := func() metadata.Partition {
		topic, ok := node.Image().Topic("led-by-2")
		if !ok {
			t.Fatal("the topic is not in the image")
		}
		return *topic.Partitions[0]
	}
	before := partition()
	if before.Leader != 2 {
		t.Fatalf("the partition is led by %d, want 2", before.Leader)
	}

	stall <- cfg.BrokerSessionTimeout + time.Second
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller's tick did not stall")
	}
	// Broker 3, silent since before the stall, is fenced by the first tick
	// after it at the latest; broker 2 must stay unfenced through that
	// tick, which runs the moment the stall ends, and the ticks after it.
	for deadline := time.Now().Add(10 * time.Second); !fenced(3); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("broker 3, silent for longer than its session, was not fenced after the stall")
		}
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if p := partition(); fenced(2) || p.Leader != 2 || p.LeaderEpoch != before.LeaderEpoch {
			t.Fatalf("broker 2, which heartbeat all along, was fenced after the controller's stall: "+
				"its partition's leader %d at leader epoch %d, was %d at %d", p.Leader, p.LeaderEpoch, before.Leader, before.LeaderEpoch)
		}
	}
}
