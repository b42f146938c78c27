package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keelstream/keel/raftlog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// The multi-process harness runs the built keel binary, one OS process per
// node, so that tests can do to a node what happens to a real broker:
// SIGTERM, kill -9, SIGSTOP/SIGCONT, restart on the same directories. Each
// node gets a generated server.properties and free loopback ports; its
// stdout and stderr go (through a pipe) to a file, whose tail is logged
// when the test fails.

// Binary builds cmd/keel once per test binary and returns its path. Under
// the race detector the binary is built with -race too: the packages are
// then already compiled (the test built them), and a data race in the
// server fails the test that ran it (see ProcessCluster.Close).
//
// The binary lives in a directory that RemoveBinaryDir deletes; call it
// from TestMain after m.Run. KEEL_TEST_BINARY names a prebuilt binary to
// use instead (scripts/perf-broker.sh keeps it for perf's symbols).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("KEEL_TEST_BINARY"); p != "" {
			buildPath = p
			return
		}
		buildPath, buildErr = buildBinary()
	})
	if buildErr != nil {
		t.Fatalf("build keel: %v", buildErr)
	}
	return buildPath
}

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

func buildBinary() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	buildDir, err = os.MkdirTemp("", "keel-integration-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(buildDir, "keel")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/keel")
	// The go command that runs the tests sets GOROOT for them.
	goTool := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		goTool = filepath.Join(root, "bin", "go")
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// RemoveBinaryDir deletes what Binary built. TestMain calls it.
func RemoveBinaryDir() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// moduleRoot walks up from the working directory to the go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ProcessOptions configures a ProcessCluster.
type ProcessOptions struct {
	// Overrides are server properties (key=value) given to every node as
	// --override flags, over the generated server.properties.
	Overrides []string
	// NodeOverrides are server properties for one node, after Overrides
	// (a broker.rack per node, say).
	NodeOverrides map[int32][]string
	// LogLevel is keel server's --log-level; "" keeps its default (info).
	LogLevel string
	// ReadyTimeout bounds each wait for a node to serve; 0 means 30 s.
	ReadyTimeout time.Duration
	// Env is added to each process's environment (KEY=value), e.g.
	// GOMAXPROCS or GODEBUG settings.
	Env []string
	// Proxy puts a fault-injecting proxy (ProcessCluster.Net) in front of
	// every listener: nodes advertise the proxies' addresses, so every
	// link between nodes can be cut or delayed.
	Proxy bool
	// DynamicQuorum configures the nodes as Kafka 4's server.properties
	// does: controller.quorum.bootstrap.servers instead of
	// controller.quorum.voters, each controller formatted with
	// --initial-controllers (with directory ids, as Kafka's docs write
	// them) and each broker-only node learning the voters from the
	// controllers.
	DynamicQuorum bool
	// Joining are controllers of a DynamicQuorum formatted with
	// --no-initial-controllers: not initial voters, nor bootstrap
	// servers; they start as non-voters until keel metadata-quorum
	// add-controller makes them voters.
	Joining []int32
	// SSL, when set, gives every broker a third listener, SSL (an SSL
	// listener on Process.SSLPort, advertised), with these ssl.* server
	// properties (key=value). Brokers still talk PLAINTEXT among
	// themselves.
	SSL []string
	// InternalSSL (with SSL) makes the nodes talk TLS among themselves:
	// the CONTROLLER listener is SSL, and every broker has an SSL
	// listener INTERNAL (Process.InternalPort) as its
	// inter.broker.listener.name. Clients keep PLAINTEXT (and SSL).
	InternalSSL bool
	// InternalSASL, when set, makes the nodes authenticate to each other
	// with SASL, with these server properties (key=value) for every node,
	// controllers too: the CONTROLLER listener is SASL_PLAINTEXT
	// (SASL_SSL with InternalSSL), and every broker has a listener
	// INTERNAL of the same protocol as its inter.broker.listener.name.
	// Clients keep PLAINTEXT.
	InternalSASL []string
	// SASL, when set, gives every broker two more listeners, SASLP
	// (SASL_PLAINTEXT, Process.SASLPlaintextPort) and SASLS (SASL_SSL,
	// Process.SASLSSLPort, with the SSL properties), with these sasl.*
	// server properties (key=value).
	SASL []string
	// FormatArgs are more arguments for every node's keel format (e.g.
	// --add-scram).
	FormatArgs []string
	// ExtraLogDirs gives every node that many more log.dirs
	// (Process.LogDirs), formatted with the first.
	ExtraLogDirs int
}

// ProcessCluster is a cluster of keel server processes on loopback.
//
// Concurrency: its methods are called from the test goroutine; Alive and
// Pid may be called from any goroutine.
type ProcessCluster struct {
	t         testing.TB
	ClusterID string
	Specs     []NodeSpec
	opts      ProcessOptions
	bin       string

	mu    sync.Mutex // guards procs' entries
	procs map[int32]*Process

	// Net is the proxy network (ProcessOptions.Proxy), or nil.
	Net *Network
}

// Process is one node of a ProcessCluster: its files, ports and, while it
// runs, its OS process.
type Process struct {
	ID             int32
	Dir            string   // the first of log.dirs (the metadata log lives here too)
	LogDirs        []string // all of log.dirs: Dir, then ProcessOptions.ExtraLogDirs more
	ConfigPath     string   // the generated server.properties
	LogPath        string   // stdout and stderr of every run, appended
	PlaintextPort  int      // 0 for a controller-only node
	ControllerPort int      // 0 for a broker-only node
	SSLPort        int      // with ProcessOptions.SSL: the SSL listener (never proxied)
	InternalPort   int      // with ProcessOptions.InternalSSL or InternalSASL: the inter-broker listener
	// SASLPlaintextPort and SASLSSLPort are the SASL listeners
	// (ProcessOptions.SASL).
	SASLPlaintextPort, SASLSSLPort int
	// AdvertisedPlaintext and AdvertisedController are the addresses other
	// nodes and clients use: the proxies' with ProcessOptions.Proxy, the
	// listeners' otherwise.
	AdvertisedPlaintext, AdvertisedController string
	starts                                    int

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait returned
	exit error         // cmd.Wait's result, set before done is closed
}

// SSLAddr is the node's SSL listener address (ProcessOptions.SSL).
func (p *Process) SSLAddr() string { return fmt.Sprintf("127.0.0.1:%d", p.SSLPort) }

// PlaintextAddr is the node's client listener address.
func (p *Process) PlaintextAddr() string { return fmt.Sprintf("127.0.0.1:%d", p.PlaintextPort) }

// StartProcessCluster writes each node's server.properties, formats the
// log dirs with `keel format --cluster-id` (as for any multi-node Kafka
// cluster), starts every node and waits until each broker serves Metadata
// listing itself. Every process is killed when the test ends.
func StartProcessCluster(t testing.TB, specs []NodeSpec, opts ProcessOptions) *ProcessCluster {
	t.Helper()
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	c := &ProcessCluster{t: t, ClusterID: raftlog.NewClusterID(), Specs: specs, opts: opts,
		bin: Binary(t), procs: map[int32]*Process{}}
	root := t.TempDir()
	if opts.Proxy {
		c.Net = NewNetwork()
	}
	t.Cleanup(c.Close) // after t.TempDir's cleanup is registered: runs before it
	advertise := func(id int32, port int) string {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if c.Net == nil {
			return addr
		}
		proxied, err := c.Net.Listen(id, addr)
		if err != nil {
			t.Fatalf("proxy for node %d: %v", id, err)
		}
		return proxied
	}
	var voters, bootstrap, initial []string
	for _, s := range specs {
		p := &Process{ID: s.ID, Dir: filepath.Join(root, fmt.Sprintf("n%d", s.ID))}
		p.LogDirs = []string{p.Dir}
		for i := range opts.ExtraLogDirs {
			p.LogDirs = append(p.LogDirs, filepath.Join(root, fmt.Sprintf("n%d-%d", s.ID, i+2)))
		}
		p.ConfigPath = filepath.Join(root, fmt.Sprintf("n%d.properties", s.ID))
		p.LogPath = filepath.Join(root, fmt.Sprintf("n%d.log", s.ID))
		if strings.Contains(s.Roles, "broker") {
			p.PlaintextPort = FreePort(t)
			p.AdvertisedPlaintext = advertise(s.ID, p.PlaintextPort)
			if len(opts.SSL) > 0 {
				p.SSLPort = FreePort(t)
			}
			if opts.InternalSSL || len(opts.InternalSASL) > 0 {
				p.InternalPort = FreePort(t)
			}
			if len(opts.SASL) > 0 {
				p.SASLPlaintextPort, p.SASLSSLPort = FreePort(t), FreePort(t)
			}
		}
		if strings.Contains(s.Roles, "controller") {
			p.ControllerPort = FreePort(t)
			p.AdvertisedController = advertise(s.ID, p.ControllerPort)
			voters = append(voters, fmt.Sprintf("%d@%s", s.ID, p.AdvertisedController))
			if !slices.Contains(opts.Joining, s.ID) {
				bootstrap = append(bootstrap, p.AdvertisedController)
				initial = append(initial, fmt.Sprintf("%d@%s:%s", s.ID, p.AdvertisedController, raftlog.NewClusterID()))
			}
		}
		c.procs[s.ID] = p
	}
	for _, s := range specs {
		p := c.procs[s.ID]
		quorum := [2]string{"controller.quorum.voters", strings.Join(voters, ",")}
		format := append([]string{"format", "--cluster-id", c.ClusterID, "--config", p.ConfigPath}, opts.FormatArgs...)
		if opts.DynamicQuorum {
			quorum = [2]string{"controller.quorum.bootstrap.servers", strings.Join(bootstrap, ",")}
			switch {
			case slices.Contains(opts.Joining, s.ID):
				format = append(format, "--no-initial-controllers")
			case p.ControllerPort != 0:
				format = append(format, "--initial-controllers", strings.Join(initial, ","))
			}
		}
		if err := os.WriteFile(p.ConfigPath, []byte(processProperties(s, p, quorum, offsetsReplication(specs), opts)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(c.bin, format...).CombinedOutput()
		if err != nil {
			t.Fatalf("keel format node %d: %v\n%s", s.ID, err, out)
		}
	}
	for _, s := range specs {
		c.Start(s.ID)
	}
	for _, s := range specs {
		c.WaitReady(s.ID)
	}
	return c
}

// processProperties is node s's server.properties. The broker session is
// short (3 s, heartbeat 0.5 s) so that a node restarted after kill -9,
// whose old registration holds its node.id until the session expires (as
// in Kafka), serves again within seconds.
func processProperties(s NodeSpec, p *Process, quorum [2]string, offsetsRF string, opts ProcessOptions) string {
	var listeners []string
	if p.PlaintextPort != 0 {
		listeners = append(listeners, fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", p.PlaintextPort))
	}
	if p.ControllerPort != 0 {
		listeners = append(listeners, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", p.ControllerPort))
	}
	var advertised []string
	if p.PlaintextPort != 0 {
		advertised = append(advertised, "PLAINTEXT://"+p.AdvertisedPlaintext)
	}
	if p.SSLPort != 0 {
		listeners = append(listeners, fmt.Sprintf("SSL://127.0.0.1:%d", p.SSLPort))
		advertised = append(advertised, fmt.Sprintf("SSL://127.0.0.1:%d", p.SSLPort))
	}
	if p.SASLPlaintextPort != 0 {
		for _, l := range []string{fmt.Sprintf("SASLP://127.0.0.1:%d", p.SASLPlaintextPort), fmt.Sprintf("SASLS://127.0.0.1:%d", p.SASLSSLPort)} {
			listeners, advertised = append(listeners, l), append(advertised, l)
		}
	}
	protocols, interBroker := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASLP:SASL_PLAINTEXT,SASLS:SASL_SSL", "PLAINTEXT"
	if internal := internalProtocol(opts); internal != "PLAINTEXT" {
		protocols = fmt.Sprintf("PLAINTEXT:PLAINTEXT,CONTROLLER:%s,SSL:SSL,INTERNAL:%s,SASLP:SASL_PLAINTEXT,SASLS:SASL_SSL", internal, internal)
		interBroker = "INTERNAL"
		if p.InternalPort != 0 {
			listeners = append(listeners, fmt.Sprintf("INTERNAL://127.0.0.1:%d", p.InternalPort))
			advertised = append(advertised, fmt.Sprintf("INTERNAL://127.0.0.1:%d", p.InternalPort))
		}
	}
	props := [][2]string{
		{"process.roles", s.Roles},
		{"advertised.listeners", strings.Join(advertised, ",")},
		{"node.id", strconv.Itoa(int(s.ID))},
		quorum, // controller.quorum.voters or controller.quorum.bootstrap.servers
		{"controller.listener.names", "CONTROLLER"},
		{"listeners", strings.Join(listeners, ",")},
		{"listener.security.protocol.map", protocols},
		{"inter.broker.listener.name", interBroker},
		{"log.dirs", strings.Join(p.LogDirs, ",")},
		{"broker.heartbeat.interval.ms", "500"},
		{"broker.session.timeout.ms", "3000"},
		{"offsets.topic.replication.factor", offsetsRF},
		{"transaction.state.log.replication.factor", offsetsRF},
		{"transaction.state.log.min.isr", txnMinISR(offsetsRF)},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# generated by integration.StartProcessCluster for node %d\n", s.ID)
	for _, kv := range props {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	if p.SSLPort != 0 || opts.InternalSSL {
		for _, kv := range opts.SSL {
			fmt.Fprintln(&b, kv)
		}
	}
	if p.SASLPlaintextPort != 0 {
		for _, kv := range opts.SASL {
			fmt.Fprintln(&b, kv)
		}
	}
	for _, kv := range opts.InternalSASL {
		fmt.Fprintln(&b, kv)
	}
	return b.String()
}

// internalProtocol is the security protocol of the listeners nodes dial.
func internalProtocol(opts ProcessOptions) string {
	switch {
	case opts.InternalSSL && len(opts.InternalSASL) > 0:
		return "SASL_SSL"
	case opts.InternalSSL:
		return "SSL"
	case len(opts.InternalSASL) > 0:
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}

// Node returns node id's Process.
func (c *ProcessCluster) Node(id int32) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[id]
	if p == nil {
		c.t.Fatalf("no node %d", id)
	}
	return p
}

// Start starts node id's process (again, after Stop or Kill) on its
// directories. It does not wait for the node to serve: see WaitReady.
func (c *ProcessCluster) Start(id int32) {
	c.t.Helper()
	p := c.Node(id)
	if p.running() {
		c.t.Fatalf("node %d is already running", id)
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	p.starts++
	fmt.Fprintf(logFile, "=== start %d of node %d at %s ===\n", p.starts, id, time.Now().Format(time.RFC3339Nano))
	args := []string{"server", "--config", p.ConfigPath}
	if c.opts.LogLevel != "" {
		args = append(args, "--log-level", c.opts.LogLevel)
	}
	for _, o := range append(slices.Clone(c.opts.Overrides), c.opts.NodeOverrides[id]...) {
		args = append(args, "--override", o)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), c.opts.Env...)
	// Through a pipe (exec copies what a writer that is not an *os.File
	// gets): the node's own writes then reach no file of its, so that
	// FailWrites fails its log dirs but not its log.
	out := struct{ io.Writer }{logFile}
	cmd.Stdout, cmd.Stderr = out, out
	// If the test binary dies (a timeout panic), so does the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		c.t.Fatalf("start node %d: %v", id, err)
	}
	done := make(chan struct{})
	c.mu.Lock()
	p.cmd, p.done, p.exit = cmd, done, nil
	c.mu.Unlock()
	go func() {
		err := cmd.Wait() // and the copying of its output
		logFile.Close()
		c.mu.Lock()
		p.exit = err
		c.mu.Unlock()
		close(done)
	}()
}

func (p *Process) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Alive reports whether node id's process is running (a stopped, SIGSTOPped
// process is running).
func (c *ProcessCluster) Alive(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[id].running()
}

// Pid is node id's process id, or 0 when it is not running.
func (c *ProcessCluster) Pid(id int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[id]
	if !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop sends SIGTERM (a controlled shutdown) and waits for the process to
// exit; it fails the test if the process does not exit within 30 s (it is
// then killed) or exits with an error.
func (c *ProcessCluster) Stop(id int32) {
	c.t.Helper()
	if err := c.signalAndWait(id, syscall.SIGTERM, 30*time.Second); err != nil {
		c.t.Fatalf("stop node %d: %v", id, err)
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (c *ProcessCluster) Kill(id int32) {
	c.t.Helper()
	if err := c.signalAndWait(id, syscall.SIGKILL, 30*time.Second); err != nil {
		c.t.Fatalf("kill node %d: %v", id, err)
	}
}

// FailWrites makes node id's disk fail under it: from now on every write
// of its process to any file past the file's first byte fails with EFBIG
// (its RLIMIT_FSIZE set to one byte), as writes fail on a dead or full
// disk. A restart (Start) runs without the limit: the disk was replaced.
func (c *ProcessCluster) FailWrites(id int32) {
	c.t.Helper()
	pid := c.Pid(id)
	if pid == 0 {
		c.t.Fatalf("node %d is not running", id)
	}
	lim := unix.Rlimit{Cur: 1, Max: unix.RLIM_INFINITY}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		c.t.Fatalf("limit the file size of node %d: %v", id, err)
	}
}

// WaitExit waits up to timeout for node id's process to exit on its own
// and returns how it exited (nil for status 0); a process still running
// then is killed and the test fails.
func (c *ProcessCluster) WaitExit(id int32, timeout time.Duration) error {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[id]
	cmd, done := p.cmd, p.done
	c.mu.Unlock()
	if done == nil {
		c.t.Fatalf("node %d was never started", id)
	}
	if !waitOrKill(cmd, done, timeout) {
		c.t.Fatalf("node %d did not exit within %v", id, timeout)
	}
	return c.exitErr(id)
}

// waitOrKill waits up to timeout for a node's process to exit (done closes)
// and kills it if it has not; it reports whether it exited on its own.
func waitOrKill(cmd *exec.Cmd, done <-chan struct{}, timeout time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

// Pause stops node id with SIGSTOP: it holds its sockets but answers
// nothing, like a broker in a long GC pause.
func (c *ProcessCluster) Pause(id int32) { c.t.Helper(); c.signal(id, syscall.SIGSTOP) }

// Resume continues a paused node with SIGCONT.
func (c *ProcessCluster) Resume(id int32) { c.t.Helper(); c.signal(id, syscall.SIGCONT) }

// Restart stops node id cleanly, starts it and waits until it serves.
func (c *ProcessCluster) Restart(id int32) {
	c.t.Helper()
	c.Stop(id)
	c.Start(id)
	c.WaitReady(id)
}

func (c *ProcessCluster) signal(id int32, sig syscall.Signal) {
	c.t.Helper()
	pid := c.Pid(id)
	if pid == 0 {
		c.t.Fatalf("node %d is not running", id)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		c.t.Fatalf("signal %v to node %d: %v", sig, id, err)
	}
}

// signalAndWait signals the process and waits for it to exit. A clean exit
// after SIGTERM returns nil; a process that outlives timeout is killed.
func (c *ProcessCluster) signalAndWait(id int32, sig syscall.Signal, timeout time.Duration) error {
	c.mu.Lock()
	p := c.procs[id]
	if !p.running() {
		c.mu.Unlock()
		return fmt.Errorf("not running")
	}
	cmd, done := p.cmd, p.done
	c.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return err
	}
	if sig == syscall.SIGTERM {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot shut down
	}
	if !waitOrKill(cmd, done, timeout) {
		return fmt.Errorf("did not exit within %v after %v; killed", timeout, sig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sig == syscall.SIGKILL {
		return nil
	}
	return p.exit
}

// WaitReady waits until node id (a broker) serves: its current run logged
// that the controller unfenced it (the in-process harness's WaitReady
// condition), and it answers Metadata listing itself. The Metadata probe
// alone is not enough after kill -9: the replayed metadata image still
// lists the old registration, which the controller fences once its
// session (broker.session.timeout.ms) expires, before it accepts the new
// one, as in Kafka. With --log-level above info only the probe is used.
func (c *ProcessCluster) WaitReady(id int32) {
	c.t.Helper()
	p := c.Node(id)
	if p.PlaintextPort == 0 {
		return // a controller-only node has no client listener to poll
	}
	useLog := c.opts.LogLevel == "" || c.opts.LogLevel == "info" || c.opts.LogLevel == "debug" || c.opts.LogLevel == "trace"
	deadline := time.Now().Add(c.opts.ReadyTimeout)
	var last error
	for time.Now().Before(deadline) {
		if !c.Alive(id) {
			c.t.Fatalf("node %d exited while starting: %v\n%s", id, c.exitErr(id), c.LogTail(id, 40))
		}
		if useLog && !strings.Contains(c.currentRunLog(id), unfencedLogLine) {
			last = errors.New("not unfenced yet")
		} else if last = probeBroker(p.PlaintextAddr(), id); last == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	c.t.Fatalf("node %d not ready after %v: %v\n%s", id, c.opts.ReadyTimeout, last, c.LogTail(id, 40))
}

// unfencedLogLine is what broker/lifecycle.go logs when the controller
// unfences this incarnation of the broker.
const unfencedLogLine = "unfenced: serving as a broker"

// currentRunLog is node id's log since its last start.
func (c *ProcessCluster) currentRunLog(id int32) string {
	log := c.Log(id)
	if i := strings.LastIndex(log, "=== start "); i >= 0 {
		return log[i:]
	}
	return log
}

func (c *ProcessCluster) exitErr(id int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[id].exit
}

// probeBroker asks addr for Metadata (no topics) and checks that it lists
// broker id. The registration epoch of a restarted broker is new: it is
// listed (unfenced) only once the controller accepted the new incarnation.
func probeBroker(addr string, id int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.DialTimeout(time.Second), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, b := range resp.Brokers {
		if b.NodeID == id {
			return nil
		}
	}
	return fmt.Errorf("metadata lists brokers %v, not %d", resp.Brokers, id)
}

// BootstrapServers lists the brokers' advertised PLAINTEXT addresses
// (through the proxies with ProcessOptions.Proxy).
func (c *ProcessCluster) BootstrapServers() []string {
	var out []string
	for _, s := range c.Specs {
		if p := c.Node(s.ID); p.PlaintextPort != 0 {
			out = append(out, p.AdvertisedPlaintext)
		}
	}
	return out
}

// Keel runs a keel CLI command with the cluster's binary and returns its
// output; a command that fails fails t.
func (c *ProcessCluster) Keel(t testing.TB, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, c.bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("keel %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Log returns everything node id's processes wrote to stdout and stderr.
func (c *ProcessCluster) Log(id int32) string {
	b, err := os.ReadFile(c.Node(id).LogPath)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	return string(b)
}

// LogTail returns the last n lines of node id's log.
func (c *ProcessCluster) LogTail(id int32, n int) string {
	lines := strings.Split(strings.TrimRight(c.Log(id), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Close kills every running node (SIGKILL: a test that wants a clean stop
// calls Stop). If the test failed, each node's log tail goes to the test
// log; a data race reported by a -race server fails the test.
func (c *ProcessCluster) Close() {
	ids := make([]int32, 0, len(c.procs))
	for id := range c.procs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if c.Alive(id) {
			_ = c.signalAndWait(id, syscall.SIGKILL, 30*time.Second)
		}
	}
	if c.Net != nil {
		c.Net.Close()
	}
	for _, id := range ids {
		log, err := os.ReadFile(c.procs[id].LogPath)
		if err != nil {
			continue
		}
		if bytes.Contains(log, []byte("WARNING: DATA RACE")) {
			c.t.Errorf("node %d reported a data race:\n%s", id, raceReports(log))
		} else if c.t.Failed() {
			c.t.Logf("node %d log (last 60 lines of %s):\n%s", id, c.procs[id].LogPath, c.LogTail(id, 60))
		}
	}
}

// raceReports extracts the race detector's reports from a log.
func raceReports(log []byte) string {
	const sep = "=================="
	s := string(log)
	if i := strings.Index(s, sep); i >= 0 {
		s = s[i:]
	}
	if len(s) > 20000 {
		s = s[:20000] + "\n..."
	}
	return s
}
