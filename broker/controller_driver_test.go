package broker

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	mux := raftlog.NewMux(addr)
	served := raftlog.Serve(ln, mux, nil)
	defer served.Close()
	node, err := raftlog.Open(raftlog.Config{NodeID: 1, Voters: map[int32]string{1: addr}, Voter: true,
		DataDir: t.TempDir(), Mux: mux, Logger: hclog.NewNullLogger(),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	for deadline := time.Now().Add(10 * time.Second); !node.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the single voter did not become leader")
		}
	}
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
