package raftlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelstream/keel/metadata"
)

// testLogger is silent unless RAFTLOG_TEST_LOG is set (then Raft's debug
// log goes to stderr).
func testLogger() hclog.Logger {
	if os.Getenv("RAFTLOG_TEST_LOG") != "" {
		return hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: os.Stderr})
	}
	return hclog.NewNullLogger()
}

// fastTimers are Raft timers for loopback tests: elections in a few hundred
// milliseconds even under -race on two busy cores.
func fastTimers(c *Config) {
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.TransportTimeout = 2 * time.Second
}

// checkGoroutines fails the test if goroutines started during it are still
// running a few seconds after every cleanup ran. Call it first, so its
// cleanup runs last.
func checkGoroutines(t testing.TB) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d running, %d before the test\n%s", runtime.NumGoroutine(), base, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// eventually polls cond until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testNode is one node of a loopback cluster: its own listener, Mux and
// data dir.
type testNode struct {
	id    int32
	voter bool
	addr  string
	dir   string
	ln    *Listener
	node  *Node
}

// testCluster runs nodes on 127.0.0.1 with real Raft, TCP and files.
type testCluster struct {
	t      testing.TB
	base   string
	voters map[int32]string
	nodes  map[int32]*testNode
	tune   func(id int32, c *Config)
}

// newCluster starts voters 1..n and waits for nothing.
func newCluster(t testing.TB, n int, tune func(id int32, c *Config)) *testCluster {
	t.Helper()
	// TempDir before the close cleanup: cleanups run last-in first-out, and
	// the nodes must be closed before their dirs are removed.
	c := &testCluster{t: t, base: t.TempDir(), voters: map[int32]string{}, nodes: map[int32]*testNode{}, tune: tune}
	t.Cleanup(c.closeAll)
	lns := map[int32]net.Listener{}
	for id := int32(1); id <= int32(n); id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		c.voters[id] = ln.Addr().String()
	}
	for id := int32(1); id <= int32(n); id++ {
		tn := &testNode{id: id, voter: true, addr: c.voters[id], dir: filepath.Join(c.base, fmt.Sprintf("n%d", id))}
		c.nodes[id] = tn
		c.start(tn, lns[id])
	}
	return c
}

func (c *testCluster) config(tn *testNode, mux *Mux) Config {
	cfg := Config{
		NodeID: tn.id, Voters: c.voters, Voter: tn.voter, DataDir: tn.dir, Mux: mux, Logger: testLogger(),
	}
	fastTimers(&cfg)
	if c.tune != nil {
		c.tune(tn.id, &cfg)
	}
	return cfg
}

// start opens tn on ln (or on a new listener at tn.addr).
func (c *testCluster) start(tn *testNode, ln net.Listener) {
	c.t.Helper()
	if ln == nil {
		var err error
		for i := 0; ; i++ {
			if ln, err = net.Listen("tcp", tn.addr); err == nil {
				break
			}
			if i == 50 {
				c.t.Fatalf("relisten on %s: %v", tn.addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	mux := NewMux(tn.addr)
	tn.ln = Serve(ln, mux, nil)
	node, err := Open(c.config(tn, mux))
	if err != nil {
		tn.ln.Close()
		c.t.Fatalf("open node %d: %v", tn.id, err)
	}
	tn.node = node
}

// stop closes a node as a crash would look to the others.
func (c *testCluster) stop(id int32) {
	c.t.Helper()
	tn := c.nodes[id]
	if err := tn.node.Close(); err != nil {
		c.t.Errorf("close node %d: %v", id, err)
	}
	tn.ln.Close()
	tn.node, tn.ln = nil, nil
}

func (c *testCluster) restart(id int32) { c.start(c.nodes[id], nil) }

// addObserver starts a broker-only node and has the leader add it.
func (c *testCluster) addObserver(id int32) *testNode {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	tn := &testNode{id: id, addr: ln.Addr().String(), dir: filepath.Join(c.base, fmt.Sprintf("o%d", id))}
	c.nodes[id] = tn
	c.start(tn, ln)
	leader := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader.node.AddObserver(ctx, id, tn.addr); err != nil {
		c.t.Fatalf("add observer %d: %v", id, err)
	}
	return tn
}

func (c *testCluster) closeAll() {
	var wg sync.WaitGroup
	for _, tn := range c.nodes {
		if tn.node == nil {
			continue
		}
		wg.Add(1)
		go func(tn *testNode) {
			defer wg.Done()
			tn.node.Close()
			tn.ln.Close()
		}(tn)
	}
	wg.Wait()
}

func (c *testCluster) running() []*testNode {
	var out []*testNode
	for _, tn := range c.nodes {
		if tn.node != nil {
			out = append(out, tn)
		}
	}
	return out
}

// waitLeader waits until one running voter leads and every running voter
// knows it.
func (c *testCluster) waitLeader() *testNode {
	c.t.Helper()
	var leader *testNode
	eventually(c.t, 10*time.Second, "leader elected", func() error {
		leader = nil
		for _, tn := range c.running() {
			if tn.node.IsLeader() {
				if leader != nil {
					return fmt.Errorf("two leaders: %d and %d", leader.id, tn.id)
				}
				leader = tn
			}
		}
		if leader == nil {
			return errors.New("no leader")
		}
		for _, tn := range c.running() {
			if !tn.voter {
				continue
			}
			if id, ok := tn.node.LeaderID(); !ok || id != leader.id {
				return fmt.Errorf("node %d thinks the leader is %d (known %v), not %d", tn.id, id, ok, leader.id)
			}
		}
		return nil
	})
	return leader
}

// propose proposes on the current leader, retrying across an election.
func (c *testCluster) propose(records ...metadata.Record) int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		leader := c.waitLeader()
		off, err := leader.node.Propose(ctx, records)
		if err == nil {
			return off
		}
		if !errors.Is(err, ErrNotLeader) || ctx.Err() != nil {
			c.t.Fatalf("propose on node %d: %v", leader.id, err)
		}
	}
}

// waitAgree waits until every running node applied offset and all images
// are identical.
func (c *testCluster) waitAgree(offset int64) *metadata.Image {
	c.t.Helper()
	var img *metadata.Image
	eventually(c.t, 10*time.Second, fmt.Sprintf("images agree at offset %d", offset), func() error {
		img = nil
		var want []byte
		for _, tn := range c.running() {
			got := tn.node.Image()
			if tn.node.AppliedOffset() < offset {
				return fmt.Errorf("node %d applied %d", tn.id, tn.node.AppliedOffset())
			}
			enc := imageBytes(c.t, got)
			if img == nil {
				img, want = got, enc
				continue
			}
			if got.Offset() != img.Offset() || !bytes.Equal(enc, want) {
				return fmt.Errorf("node %d image at offset %d differs", tn.id, got.Offset())
			}
		}
		return nil
	})
	return img
}

// imageBytes is a canonical encoding of an image (SnapshotRecords are in a
// deterministic order).
func imageBytes(t testing.TB, img *metadata.Image) []byte {
	b, err := metadata.EncodeBatch(img.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createTopic returns the records creating a topic of n partitions on
// brokers 1..3.
func createTopic(name string, n int) []metadata.Record {
	id := metadata.NewUuid()
	recs := []metadata.Record{&metadata.TopicRecord{Name: name, TopicID: id}}
	for p := 0; p < n; p++ {
		r := []int32{int32(p%3 + 1), int32((p+1)%3 + 1), int32((p+2)%3 + 1)}
		recs = append(recs, &metadata.PartitionRecord{PartitionID: int32(p), TopicID: id, Replicas: r, ISR: r, Leader: r[0]})
	}
	return recs
}

func topicNames(img *metadata.Image) string {
	var names []string
	for _, t := range img.Topics() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}
