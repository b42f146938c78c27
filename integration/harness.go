package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
)

// NodeSpec says what one node of a test cluster runs.
type NodeSpec struct {
	ID    int32
	Roles string // "broker,controller", "broker" or "controller"
}

// Cluster is an in-process cluster on loopback. Nodes can be stopped and
// restarted from their directories.
type Cluster struct {
	t         testing.TB
	ClusterID string
	Specs     []NodeSpec
	Nodes     map[int32]*broker.Node
	dirs      map[int32]string
	ports     map[int32][2]int // PLAINTEXT, CONTROLLER
	voters    string
	overrides []string
	sink      *logSink
	logDirs   int // log.dirs a node (StartJBODCluster)
}

// handedOut are the ports FreePort returned in this process: the kernel
// may give a just-closed port again, and two listeners of one node (or two
// nodes) must never be told the same port.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback port that was free a moment ago and that it
// has not returned before. It is not taken from the kernel's ephemeral
// range (ip_local_port_range), where every outgoing connection, of this
// process or any other, takes its local port: a node started a moment
// later could find its port taken by a client's connection. Outside that
// range a port stays free unless something binds it on purpose.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := portWindow()
	if hi > lo { // this test binary's half (ownPortHalf)
		if mid := lo + (hi-lo)/2; ownPortHalf {
			hi = mid
		} else {
			lo = mid
		}
	}
	for range 1000 {
		port := 0 // the kernel's choice, when there is no window
		if hi > lo {
			port = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		handedOut.Lock()
		fresh := !handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if fresh {
			return port
		}
	}
	t.Fatal("no fresh loopback port")
	return 0
}

// ownPortHalf is set by this package's own tests (TestMain): they take
// FreePort's ports from the lower half of portWindow, and every other
// package's tests (cmd/keel's, which go test ./... runs beside them, in
// another process) from the upper half. handedOut keeps one process from
// handing out a port twice; the halves keep two processes apart (a port
// one had just checked was taken by the other's node: CI saw "bind:
// address already in use").
var ownPortHalf bool

// portWindow is the range [lo, hi) FreePort picks from: the 10,000 ports
// below the ephemeral range, or above it if that leaves too few; empty
// (lo == hi) when neither does or the range cannot be read.
var portWindow = sync.OnceValues(func() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil {
		return 0, 0
	}
	switch {
	case first-10_000 >= 1024:
		return first - 10_000, first
	case last+10_000 <= 65_536:
		return last + 1, last + 10_001
	}
	return 0, 0
})

// StartCluster formats and starts the nodes. overrides are server
// properties applied to every node (key=value).
func StartCluster(t testing.TB, specs []NodeSpec, overrides ...string) *Cluster {
	t.Helper()
	return StartClusterWith(t, specs, nil, overrides...)
}

// StartClusterWith is StartCluster with every controller formatted with
// bootstrap records (keel format --release-version, --add-scram), which
// the first active controller commits.
func StartClusterWith(t testing.TB, specs []NodeSpec, bootstrap []metadata.Record, overrides ...string) *Cluster {
	t.Helper()
	return startCluster(t, specs, bootstrap, 1, overrides)
}

// StartJBODCluster is StartCluster with logDirs log.dirs a node (JBOD):
// the node's directory, then siblings named after it ("n1.1", "n1.2").
func StartJBODCluster(t testing.TB, specs []NodeSpec, logDirs int, overrides ...string) *Cluster {
	t.Helper()
	return startCluster(t, specs, nil, logDirs, overrides)
}

func startCluster(t testing.TB, specs []NodeSpec, bootstrap []metadata.Record, logDirs int, overrides []string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, ClusterID: raftlog.NewClusterID(), Specs: specs, Nodes: map[int32]*broker.Node{},
		dirs: map[int32]string{}, ports: map[int32][2]int{}, overrides: overrides, sink: &logSink{t: t}, logDirs: logDirs}
	var voters []string
	for _, s := range specs {
		c.dirs[s.ID] = filepath.Join(t.TempDir(), fmt.Sprintf("n%d", s.ID))
		c.ports[s.ID] = [2]int{FreePort(t), FreePort(t)}
		if strings.Contains(s.Roles, "controller") {
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", s.ID, c.ports[s.ID][1]))
		}
	}
	c.voters = strings.Join(voters, ",")
	for _, s := range specs {
		cfg := c.config(s)
		if _, err := raftlog.EnsureMetaProperties(cfg.LogDirs, c.ClusterID, s.ID, true); err != nil {
			t.Fatal(err)
		}
		if len(bootstrap) > 0 && cfg.HasRole("controller") {
			if err := raftlog.WriteBootstrapRecords(cfg.MetadataLogDir, bootstrap); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range specs {
		c.Start(s.ID)
	}
	t.Cleanup(c.Close)
	return c
}

func (c *Cluster) spec(id int32) NodeSpec {
	for _, s := range c.Specs {
		if s.ID == id {
			return s
		}
	}
	c.t.Fatalf("no node %d", id)
	return NodeSpec{}
}

// offsetsReplication is offsets.topic.replication.factor for a test
// cluster of specs: Kafka's 3, or every broker of a smaller cluster (Keel,
// like Kafka, does not create __consumer_offsets with fewer replicas).
func offsetsReplication(specs []NodeSpec) string {
	brokers := 0
	for _, s := range specs {
		if strings.Contains(s.Roles, "broker") {
			brokers++
		}
	}
	return fmt.Sprint(max(1, min(3, brokers)))
}

// txnMinISR is transaction.state.log.min.isr for __transaction_state with
// rf replicas: Kafka's 2, or 1 for a single replica.
func txnMinISR(rf string) string {
	if rf == "1" {
		return "1"
	}
	return "2"
}

func (c *Cluster) config(s NodeSpec) *broker.Config {
	return c.configAt(s, c.dirs[s.ID], c.ports[s.ID])
}

func (c *Cluster) configAt(s NodeSpec, dir string, p [2]int) *broker.Config {
	var listeners []string
	if strings.Contains(s.Roles, "broker") {
		listeners = append(listeners, fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", p[0]))
	}
	if strings.Contains(s.Roles, "controller") {
		listeners = append(listeners, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", p[1]))
	}
	props := map[string]string{
		"process.roles":                    s.Roles,
		"node.id":                          fmt.Sprint(s.ID),
		"controller.quorum.voters":         c.voters,
		"controller.listener.names":        "CONTROLLER",
		"listeners":                        strings.Join(listeners, ","),
		"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                         c.logDirsAt(dir),
		"broker.heartbeat.interval.ms":     "500",
		"broker.session.timeout.ms":        "3000",
		"offsets.topic.replication.factor": offsetsReplication(c.Specs),
		// __transaction_state likewise, with Kafka's min ISR of 2 where
		// there are replicas for it.
		"transaction.state.log.replication.factor": offsetsReplication(c.Specs),
		"transaction.state.log.min.isr":            txnMinISR(offsetsReplication(c.Specs)),
	}
	cfg, err := broker.LoadConfig(props, c.overrides)
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// logDirsAt is log.dirs for a node in dir.
func (c *Cluster) logDirsAt(dir string) string {
	dirs := []string{dir}
	for i := 1; i < c.logDirs; i++ {
		dirs = append(dirs, fmt.Sprintf("%s.%d", dir, i))
	}
	return strings.Join(dirs, ",")
}

// Start starts (or restarts) node id from its directory.
func (c *Cluster) Start(id int32) *broker.Node {
	c.t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("n%d", id), Level: hclog.Warn, Output: c.sink})
	n, err := broker.StartNode(c.config(c.spec(id)), logger)
	if err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	c.Nodes[id] = n
	return n
}

// StartExtra starts a node that is not part of the cluster's plan: fresh
// dirs and ports, formatted for clusterID, claiming spec.ID (an impostor
// with a taken node.id, or a node of another cluster). The caller closes it.
func (c *Cluster) StartExtra(spec NodeSpec, clusterID string) (*broker.Node, error) {
	c.t.Helper()
	cfg := c.configAt(spec, filepath.Join(c.t.TempDir(), "extra"), [2]int{FreePort(c.t), FreePort(c.t)})
	if _, err := raftlog.EnsureMetaProperties(cfg.LogDirs, clusterID, spec.ID, true); err != nil {
		return nil, err
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("extra-n%d", spec.ID), Level: hclog.Warn, Output: c.sink})
	return broker.StartNode(cfg, logger)
}

// Stop shuts node id down cleanly.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	c.shut(id, "close", (*broker.Node).Close)
}

// Kill stops node id abruptly: no controlled shutdown, no Raft leadership
// hand-off (Node.Abort), so the cluster sees it vanish.
func (c *Cluster) Kill(id int32) {
	c.t.Helper()
	c.shut(id, "abort", (*broker.Node).Abort)
}

// nodeShutdownLimit bounds Stop and Kill: a node's Close bounds each of its
// own waits by a few seconds, so a minute means a goroutine that never
// ends.
const nodeShutdownLimit = time.Minute

// shut runs how on node id and forgets the node. A shutdown that does not
// return within nodeShutdownLimit fails the test with the node's
// goroutines instead of hanging the package until go test's timeout. A
// node that reported a disk failure (Node.Failed: keel server would have
// exited with status 1) fails the test too: no in-process test provokes
// one, so it is the machine's (a full disk) or a bug, and a test that
// passed on a half-offline node would prove nothing.
func (c *Cluster) shut(id int32, what string, how func(*broker.Node) error) {
	c.t.Helper()
	n := c.Nodes[id]
	if n == nil {
		return
	}
	delete(c.Nodes, id)
	select {
	case err := <-n.Failed():
		c.t.Errorf("node %d reported a disk failure: %v", id, err)
	default:
	}
	done := make(chan error, 1)
	go func() { done <- how(n) }()
	select {
	case err := <-done:
		if err != nil {
			c.t.Logf("%s node %d: %v", what, id, err)
		}
	case <-time.After(nodeShutdownLimit):
		c.t.Errorf("%s node %d has not returned after %v; the goroutines of keel's packages:\n%s",
			what, id, nodeShutdownLimit, GoroutineStacks("github.com/keelstream/keel/"))
	}
}

// Close stops every node.
func (c *Cluster) Close() {
	for id := range c.Nodes {
		c.Stop(id)
	}
	c.sink.close()
}

// BootstrapServers lists the brokers' PLAINTEXT addresses.
func (c *Cluster) BootstrapServers() []string {
	var out []string
	for _, s := range c.Specs {
		if strings.Contains(s.Roles, "broker") {
			out = append(out, fmt.Sprintf("127.0.0.1:%d", c.ports[s.ID][0]))
		}
	}
	return out
}

// Dir is node id's log dir (also its metadata.log.dir).
func (c *Cluster) Dir(id int32) string { return c.dirs[id] }

// ControllerAddr is node id's controller listener address.
func (c *Cluster) ControllerAddr(id int32) string {
	return fmt.Sprintf("127.0.0.1:%d", c.ports[id][1])
}

// WaitReady waits until every running broker is registered and unfenced.
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for id, n := range c.Nodes {
		if err := n.WaitReady(ctx); err != nil {
			c.t.Fatalf("node %d: %v", id, err)
		}
	}
}

// GoroutineStacks returns the stacks of every goroutine whose stack
// mentions substr: what a test prints when something it waits for hangs.
func GoroutineStacks(substr string) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, substr) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// logSink sends node logs to the test log until the cluster is closed
// (a goroutine logging after the test ended must not panic the test).
// Once the test has failed it leaves out what the nodes log next: that is
// the shutdown's noise (a cluster losing its quorum), and CI, which keeps
// the head and the tail of a long log, would otherwise show the noise and
// cut out the failure.
type logSink struct {
	t       testing.TB
	mu      sync.Mutex
	closed  bool
	skipped bool
}

func (w *logSink) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed || w.skipped:
	case w.t.Failed():
		w.skipped = true
		w.t.Logf("(the test has failed: node logs from here on are left out)")
	default:
		w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *logSink) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
