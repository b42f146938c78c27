package raftlog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keelstream/keel/metadata"
)

func TestThreeVotersElectReplicateAndRefuseFollowerProposals(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 3, nil)
	leader := c.waitLeader()

	off := c.propose(createTopic("orders", 3)...)
	img := c.waitAgree(off)
	if topic, ok := img.Topic("orders"); !ok || len(topic.Partitions) != 3 {
		t.Fatalf("image after commit has topics %q", topicNames(img))
	}
	if img.Offset() != off {
		t.Fatalf("image offset %d, proposal committed at %d", img.Offset(), off)
	}

	for _, tn := range c.running() {
		if tn == leader {
			continue
		}
		_, err := tn.node.Propose(context.Background(), createTopic("nope", 1))
		var nle *NotLeaderError
		if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nle) || nle.LeaderID != leader.id {
			t.Fatalf("propose on follower %d: %v, want NotLeaderError naming leader %d", tn.id, err, leader.id)
		}
		if _, err := tn.node.QuorumState(context.Background()); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("quorum state on follower: %v", err)
		}
	}

	// A batch the image rejects commits, is skipped everywhere, and says so.
	bad, err := leader.node.Propose(context.Background(), []metadata.Record{&metadata.FenceBrokerRecord{ID: 42, Epoch: 1}})
	if !errors.Is(err, ErrApplyFailed) || bad <= off {
		t.Fatalf("rejected batch: offset %d, %v", bad, err)
	}
	img = c.waitAgree(bad)
	if img.Offset() != off {
		t.Fatalf("image offset %d moved for a rejected batch (last good %d)", img.Offset(), off)
	}
}

func TestQuorumStateReportsMeasuredProgress(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 3, nil)
	leader := c.waitLeader()
	start := time.Now().UnixMilli()
	off := c.propose(createTopic("t", 1)...)
	c.waitAgree(off)

	var qs QuorumState
	eventually(t, 5*time.Second, "every voter measured caught up", func() error {
		var err error
		if qs, err = leader.node.QuorumState(context.Background()); err != nil {
			return err
		}
		for _, v := range qs.Voters {
			if v.LogEndOffset < off+1 || v.LastFetchTimestamp < start || v.LastCaughtUpTimestamp < start {
				return fmt.Errorf("voter %+v", v)
			}
		}
		return nil
	})
	if qs.LeaderID != leader.id || qs.LeaderEpoch != leader.node.Term() || qs.LeaderEpoch < 1 {
		t.Fatalf("leader %d epoch %d, want %d epoch %d", qs.LeaderID, qs.LeaderEpoch, leader.id, leader.node.Term())
	}
	if qs.HighWatermark < off+1 || len(qs.Voters) != 3 || len(qs.Observers) != 0 {
		t.Fatalf("quorum state %+v, proposal at %d", qs, off)
	}
	for _, v := range qs.Voters {
		if v.LogEndOffset > qs.HighWatermark+1 {
			t.Fatalf("voter %d log end %d beyond anything the leader wrote (hw %d)", v.NodeID, v.LogEndOffset, qs.HighWatermark)
		}
	}

	// A stopped follower stops being measured: its fetch time freezes.
	var follower int32
	for _, v := range qs.Voters {
		if v.NodeID != leader.id {
			follower = v.NodeID
		}
	}
	c.stop(follower)
	stopped := time.Now().UnixMilli()
	// A response already on the wire may still land; after that, nothing.
	time.Sleep(300 * time.Millisecond)
	frozen := replicaOf(t, leader.node, follower)
	off = c.propose(createTopic("u", 1)...)
	eventually(t, 5*time.Second, "live follower measured, stopped one frozen", func() error {
		qs, err := leader.node.QuorumState(context.Background())
		if err != nil {
			return err
		}
		for _, v := range qs.Voters {
			switch {
			case v.NodeID == follower && (v != frozen || v.LogEndOffset >= off+1):
				t.Fatalf("stopped follower still reported fetching: %+v (stopped at %d, then %+v)", v, stopped, frozen)
			case v.NodeID != follower && (v.LogEndOffset < off+1 || v.LastFetchTimestamp <= stopped):
				return fmt.Errorf("voter %+v", v)
			}
		}
		return nil
	})
}

func replicaOf(t *testing.T, n *Node, id int32) ReplicaState {
	t.Helper()
	qs, err := n.QuorumState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append(qs.Voters, qs.Observers...) {
		if v.NodeID == id {
			return v
		}
	}
	t.Fatalf("node %d not in the quorum state", id)
	return ReplicaState{}
}

func TestLeaderFailoverKeepsCommittedRecords(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 3, nil)
	old := c.waitLeader()
	var last int64
	for i := 0; i < 5; i++ {
		last = c.propose(createTopic(fmt.Sprintf("before-%d", i), 2)...)
	}
	c.waitAgree(last)
	oldTerm := old.node.Term()

	c.stop(old.id)
	killed := time.Now()
	leader := c.waitLeader()
	t.Logf("new leader %d elected %s after the old one stopped", leader.id, time.Since(killed).Round(time.Millisecond))
	if leader.id == old.id || leader.node.Term() <= oldTerm {
		t.Fatalf("leader %d term %d after killing %d in term %d", leader.id, leader.node.Term(), old.id, oldTerm)
	}
	img := leader.node.Image()
	for i := 0; i < 5; i++ {
		if _, ok := img.Topic(fmt.Sprintf("before-%d", i)); !ok {
			t.Fatalf("committed topic before-%d lost; new leader has %q", i, topicNames(img))
		}
	}
	after := c.propose(createTopic("after", 1)...)
	c.waitAgree(after)

	// The old leader comes back from its disk and catches up.
	c.restart(old.id)
	img = c.waitAgree(after)
	if _, ok := img.Topic("after"); !ok || img.NumTopics() != 6 {
		t.Fatalf("after rejoin: topics %q", topicNames(img))
	}
}

func TestRestartRebuildsImageFromSnapshotAndLog(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 3, func(id int32, cfg *Config) {
		cfg.SnapshotThreshold = 8
		cfg.SnapshotInterval = 50 * time.Millisecond
	})
	leader := c.waitLeader()
	var follower int32 = 1
	if leader.id == 1 {
		follower = 2
	}
	var last int64
	for i := 0; i < 20; i++ {
		last = c.propose(createTopic(fmt.Sprintf("t%02d", i), 1)...)
	}
	c.waitAgree(last)
	eventually(t, 10*time.Second, "follower took a snapshot", func() error {
		snaps, err := c.nodes[follower].node.snaps.List()
		if err != nil || len(snaps) == 0 {
			return fmt.Errorf("%d snapshots, %v", len(snaps), err)
		}
		return nil
	})
	// Entries after the snapshot must come from the log on restart: stop
	// the follower from snapshotting again.
	fr := c.nodes[follower].node.raft
	rc := fr.ReloadableConfig()
	rc.SnapshotThreshold = 1 << 30
	if err := fr.ReloadConfig(rc); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 23; i++ {
		last = c.propose(createTopic(fmt.Sprintf("t%02d", i), 1)...)
	}
	c.waitAgree(last)
	snaps, _ := c.nodes[follower].node.snaps.List()
	if snaps[0].Index >= uint64(last) {
		t.Fatalf("snapshot at %d already covers the last entry %d", snaps[0].Index, last)
	}

	c.stop(follower)
	c.restart(follower)
	tn := c.nodes[follower]
	if tn.node.fsm.restores.Load() == 0 {
		t.Fatal("restarted node did not restore its snapshot")
	}
	img := c.waitAgree(last)
	if img.NumTopics() != 23 {
		t.Fatalf("after restart: %d topics", img.NumTopics())
	}
}

func TestFollowerBehindTrailingLogsIsSentASnapshot(t *testing.T) {
	checkGoroutines(t)
	var lagging int32 = 3
	c := newCluster(t, 3, func(id int32, cfg *Config) {
		cfg.SnapshotThreshold = 8
		cfg.SnapshotInterval = 50 * time.Millisecond
		cfg.TrailingLogs = 4
		if id == lagging {
			// Never snapshots by itself: any snapshot it has was installed.
			cfg.SnapshotThreshold = 1 << 30
		}
	})
	// Make sure the lagging node is not the leader we keep proposing to.
	if l := c.waitLeader(); l.id == lagging {
		if err := l.node.TransferLeadership(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	first := c.propose(createTopic("first", 1)...)
	c.waitAgree(first)
	c.stop(lagging)

	var last int64
	for i := 0; i < 30; i++ {
		last = c.propose(createTopic(fmt.Sprintf("t%02d", i), 1)...)
	}
	leader := c.waitLeader()
	eventually(t, 10*time.Second, "leader compacted its log past the lagging node", func() error {
		firstIdx, err := leader.node.store.FirstIndex()
		if err != nil || firstIdx <= uint64(first)+1 {
			return fmt.Errorf("leader log starts at %d", firstIdx)
		}
		return nil
	})

	c.restart(lagging)
	img := c.waitAgree(last)
	if img.NumTopics() != 31 {
		t.Fatalf("%d topics", img.NumTopics())
	}
	tn := c.nodes[lagging]
	snaps, err := tn.node.snaps.List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("lagging node has %d snapshots (%v): it was not sent one", len(snaps), err)
	}
	if tn.node.fsm.restores.Load() == 0 {
		t.Fatal("lagging node never restored a snapshot")
	}
}

func TestObserverReceivesTheLogAndNeverVotes(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 3, nil)
	before := c.propose(createTopic("before", 2)...)
	obs := c.addObserver(10)
	c.waitAgree(before)
	after := c.propose(createTopic("after", 2)...)
	img := c.waitAgree(after)
	if img.NumTopics() != 2 {
		t.Fatalf("observer image topics %q", topicNames(img))
	}

	leader := c.waitLeader()
	servers, err := leader.node.Configuration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.NodeID == 10 && (s.Voter || s.Address != obs.addr) {
			t.Fatalf("observer in configuration as %+v", s)
		}
	}
	// Adding again is a no-op; a voter cannot be added as an observer.
	ctx := context.Background()
	if err := leader.node.AddObserver(ctx, 10, obs.addr); err != nil {
		t.Fatal(err)
	}
	if err := leader.node.AddObserver(ctx, 2, "127.0.0.1:1"); err == nil {
		t.Fatal("voter 2 accepted as an observer")
	}
	if _, err := obs.node.Propose(ctx, createTopic("x", 1)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("observer propose: %v", err)
	}
	eventually(t, 5*time.Second, "observer measured by the leader", func() error {
		qs, err := leader.node.QuorumState(ctx)
		if err != nil {
			return err
		}
		if len(qs.Observers) != 1 || qs.Observers[0].NodeID != 10 || qs.Observers[0].LogEndOffset < after+1 || qs.Observers[0].LastCaughtUpTimestamp <= 0 {
			return fmt.Errorf("observers %+v", qs.Observers)
		}
		return nil
	})

	// Kill the leader: a voter takes over, never the observer, which keeps
	// receiving the log.
	c.stop(leader.id)
	newLeader := c.waitLeader()
	if newLeader.id == 10 || obs.node.IsLeader() {
		t.Fatal("observer became leader")
	}
	if obs.node.raft.State() != raft.Follower {
		t.Fatalf("observer state %v", obs.node.raft.State())
	}
	last := c.propose(createTopic("later", 1)...)
	c.waitAgree(last)

	if err := newLeader.node.RemoveObserver(ctx, 10); err != nil {
		t.Fatal(err)
	}
	servers, _ = newLeader.node.Configuration(ctx)
	for _, s := range servers {
		if s.NodeID == 10 {
			t.Fatal("observer still configured after removal")
		}
	}
	if err := newLeader.node.RemoveObserver(ctx, newLeader.id); err == nil {
		t.Fatal("removed a voter as an observer")
	}

	// A removed observer keeps running and can be added back (a broker
	// that registers again).
	if err := newLeader.node.AddObserver(ctx, 10, obs.addr); err != nil {
		t.Fatal(err)
	}
	last = c.propose(createTopic("readded", 1)...)
	if img := c.waitAgree(last); img.NumTopics() != 4 {
		t.Fatalf("after re-adding the observer: %q", topicNames(img))
	}
}

func TestSubscribersAndWaitForOffsetFollowTheLog(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 3, nil)
	leader := c.waitLeader()
	var follower *testNode
	for _, tn := range c.running() {
		if tn != leader {
			follower = tn
		}
	}
	updates, cancel := follower.node.Subscribe()
	defer cancel()
	first := <-updates
	if !first.Reset {
		t.Fatal("first update is not a reset")
	}

	off := c.propose(createTopic("sub", 4)...)
	ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if err := follower.node.WaitForOffset(ctx, off); err != nil {
		t.Fatal(err)
	}
	if _, ok := follower.node.Image().Topic("sub"); !ok {
		t.Fatal("WaitForOffset returned before the image had the batch")
	}
	seen := map[metadata.PartitionKey]bool{}
	for len(seen) < 4 {
		select {
		case u := <-updates:
			for k := range u.Changes.Partitions {
				seen[k] = true
			}
		case <-ctx.Done():
			t.Fatalf("saw %d partition changes", len(seen))
		}
	}

	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if err := follower.node.WaitForOffset(short, off+1000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for a future offset: %v", err)
	}
}

func TestOpenRefusesInconsistentRoles(t *testing.T) {
	voters := map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}
	cases := map[string]Config{
		"controller missing from the voters": {NodeID: 3, Voter: true, Voters: voters, Mux: NewMux("127.0.0.1:3")},
		"observer listed as a voter":         {NodeID: 1, Voter: false, Voters: voters, Mux: NewMux("127.0.0.1:1")},
		"voter advertising another address":  {NodeID: 1, Voter: true, Voters: voters, Mux: NewMux("localhost:1")},
		"no mux":                             {NodeID: 1, Voter: true, Voters: voters},
		"no voters":                          {NodeID: 1, Voter: true, Mux: NewMux("127.0.0.1:1")},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			cfg.DataDir = t.TempDir()
			if _, err := Open(cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Open: %v", err)
			}
		})
	}
}

func TestSecondNodeOnTheSameDirIsRefused(t *testing.T) {
	checkGoroutines(t)
	c := newCluster(t, 1, nil)
	tn := c.nodes[1]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := c.config(tn, NewMux(tn.addr))
	if n, err := Open(cfg); err == nil {
		n.Close()
		t.Fatal("second node opened a locked metadata log")
	}
}

// metadata.log.max.record.bytes.between.snapshots: each node snapshots once
// that many bytes of records were applied since its last snapshot;
// metadata.log.max.snapshot.interval.ms
// snapshots a node with anything applied once that long has passed.
func TestSnapshotsByBytesAndInterval(t *testing.T) {
	checkGoroutines(t)
	snapshots := func(tn *testNode) []*raft.SnapshotMeta {
		snaps, err := tn.node.snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		return snaps
	}
	t.Run("bytes", func(t *testing.T) {
		c := newCluster(t, 1, func(id int32, cfg *Config) { cfg.MaxBytesBetweenSnapshots = 4096 })
		tn := c.waitLeader()
		var last int64
		for i := 0; i < 10; i++ { // well under 4096 bytes
			last = c.propose(createTopic(fmt.Sprintf("a%02d", i), 1)...)
		}
		c.waitAgree(last)
		if n := tn.node.fsm.sinceSnapshot.Load(); n == 0 || n >= 4096 {
			t.Fatalf("%d bytes applied; the test wants some, under 4096", n)
		}
		time.Sleep(2 * snapshotCheck)
		if s := snapshots(tn); len(s) != 0 {
			t.Fatalf("snapshot at %d before 4096 bytes were applied", s[0].Index)
		}
		for i := 0; tn.node.fsm.sinceSnapshot.Load() < 4096; i++ {
			c.waitAgree(c.propose(createTopic(fmt.Sprintf("b%03d", i), 1)...))
		}
		eventually(t, 10*time.Second, "a snapshot after 4096 bytes", func() error {
			if s := snapshots(tn); len(s) == 0 {
				return errors.New("none yet")
			}
			return nil
		})
		if n := tn.node.fsm.sinceSnapshot.Load(); n >= 4096 {
			t.Fatalf("%d bytes since the snapshot", n)
		}
	})
	t.Run("interval", func(t *testing.T) {
		begin := time.Now()
		c := newCluster(t, 1, func(id int32, cfg *Config) { cfg.MaxSnapshotInterval = 2 * time.Second })
		tn := c.waitLeader()
		c.waitAgree(c.propose(createTopic("one", 1)...))
		eventually(t, 10*time.Second, "a snapshot after the interval", func() error {
			if s := snapshots(tn); len(s) == 0 {
				return errors.New("none yet")
			}
			return nil
		})
		if took := time.Since(begin); took < 2*time.Second {
			t.Fatalf("snapshot %v after the node started, want at least the 2 s interval", took)
		}
		// Nothing applied since: no more snapshots.
		first := snapshots(tn)[0]
		time.Sleep(2*time.Second + 2*snapshotCheck)
		if s := snapshots(tn); s[0].ID != first.ID {
			t.Fatalf("another snapshot (%d) with nothing new applied", s[0].Index)
		}
	})
}
