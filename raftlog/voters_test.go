package raftlog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A controller opened with Join is made a voter by AddVoter once it has
// copied the log, and then applies what the quorum commits, also after a
// voter was removed and stopped. AddVoter again is ErrDuplicateVoter;
// RemoveVoter of an unknown node ErrVoterNotFound; a node that cannot
// catch up (nothing listens at its address) is not left in the
// configuration.
func TestAddAndRemoveVoters(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 3, nil)
	leader := c.waitLeader()
	offset := c.propose(createTopic("before-join", 1)...)
	c.waitAgree(offset)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	joiner := &testNode{id: 4, voter: true, addr: ln.Addr().String(), dir: filepath.Join(c.base, "n4")}
	c.nodes[4] = joiner
	c.tune = func(id int32, cfg *Config) { cfg.Join = id == 4 }
	c.start(joiner, ln)
	if n := len(joiner.node.Voters()); n != 0 {
		t.Fatalf("a joining node knows %d voters before it is added", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// onLeader runs op on the leader, and again on the next one when
	// leadership moved meanwhile (on a loaded machine a heartbeat can be
	// missed), as an operator's tool retries; retried says an attempt
	// failed that way, whose change may still have committed.
	onLeader := func(op func(*testNode) error) (retried bool, err error) {
		for attempt := 0; ; attempt++ {
			if err = op(leader); !errors.Is(err, ErrNotLeader) || attempt == 5 {
				return attempt > 0, err
			}
			leader = c.waitLeader()
		}
	}
	if retried, err := onLeader(func(n *testNode) error { return n.node.AddVoter(ctx, 4, joiner.addr) }); err != nil &&
		!(retried && errors.Is(err, ErrDuplicateVoter)) {
		t.Fatalf("add voter 4: %v", err)
	}
	if v := leader.node.Voters(); len(v) != 4 || v[4] != joiner.addr {
		t.Fatalf("voters after AddVoter: %v", v)
	}
	eventually(t, 10*time.Second, "the new voter has the log", func() error {
		if img := joiner.node.Image(); img == nil || topicNames(img) != "before-join" {
			return fmt.Errorf("its topics: %v", img)
		}
		if v := joiner.node.Voters(); len(v) != 4 {
			return fmt.Errorf("it knows voters %v", v)
		}
		return nil
	})
	if err := leader.node.AddVoter(ctx, 4, joiner.addr); !errors.Is(err, ErrDuplicateVoter) {
		t.Errorf("add voter 4 again: %v", err)
	}
	if err := leader.node.RemoveVoter(ctx, 9); !errors.Is(err, ErrVoterNotFound) {
		t.Errorf("remove voter 9: %v", err)
	}

	// Remove a voter that is not the leader; the other three commit.
	var gone int32
	for id := int32(1); id <= 3; id++ {
		if c.nodes[id] != leader {
			gone = id
			break
		}
	}
	if retried, err := onLeader(func(n *testNode) error { return n.node.RemoveVoter(ctx, gone) }); err != nil &&
		!(retried && errors.Is(err, ErrVoterNotFound)) {
		t.Fatalf("remove voter %d: %v", gone, err)
	}
	if _, ok := leader.node.Voters()[gone]; ok || len(leader.node.Voters()) != 3 {
		t.Fatalf("voters after removing %d: %v", gone, leader.node.Voters())
	}
	c.stop(gone)
	offset = c.propose(createTopic("after-remove", 1)...)
	c.waitAgree(offset)

	// A node nobody can reach never catches up: not left behind as a
	// non-voter or voter.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	short, cancelShort := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancelShort()
	if _, err := onLeader(func(n *testNode) error { return n.node.AddVoter(short, 7, deadAddr) }); !errors.Is(err, ErrVoterNotCaughtUp) {
		t.Fatalf("add an unreachable voter: %v", err)
	}
	servers, err := leader.node.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.NodeID == 7 {
			t.Errorf("the unreachable node stayed in the configuration: %+v", s)
		}
	}
	// Not the leader: *NotLeaderError.
	if err := joiner.node.RemoveVoter(ctx, 1); leader != joiner && !errors.Is(err, ErrNotLeader) {
		t.Errorf("RemoveVoter on a follower: %v", err)
	}

	// The leader removes itself: it steps down, the other two elect a
	// leader and commit.
	if err := leader.node.RemoveVoter(ctx, leader.id); err != nil {
		t.Fatalf("the leader removes itself: %v", err)
	}
	eventually(t, 10*time.Second, "a leader among the remaining voters", func() error {
		for _, tn := range c.running() {
			if tn != leader && tn.node.IsLeader() {
				if v := tn.node.Voters(); len(v) != 2 {
					return fmt.Errorf("voters %v", v)
				}
				return nil
			}
		}
		return errors.New("none yet")
	})
	if leader.node.IsLeader() {
		t.Error("the removed leader still leads")
	}
}
