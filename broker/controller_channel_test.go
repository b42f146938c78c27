package broker

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/keelstream/keel/network"
)

// fakeController is a Kafka-protocol listener on loopback that answers
// DescribeQuorum, or holds the answers while held is set.
type fakeController struct {
	addr     string
	srv      *network.Server
	requests atomic.Int32

	mu      sync.Mutex
	held    bool
	waiting []*network.Deferred
}

func startFakeController(t *testing.T) *fakeController {
	t.Helper()
	f := &fakeController{}
	f.srv = serveOnLoopback(t, network.Config{
		Listeners: []network.Listener{{Name: "CONTROLLER", Host: "127.0.0.1", SecurityProtocol: network.Plaintext}},
		Handler:   f,
	}, f.release)
	f.addr = f.srv.Addr("CONTROLLER").String()
	return f
}

// serveOnLoopback serves cfg, whose listeners the caller puts on
// 127.0.0.1, until the test ends (logging nowhere unless cfg has a
// logger); then it calls release, if any, to answer what the handler
// holds, and shuts the server down.
func serveOnLoopback(t *testing.T, cfg network.Config, release func()) *network.Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	srv, err := network.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() {
		if release != nil {
			release()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return srv
}

func (f *fakeController) SupportedVersions(_ string, key int16) (int16, int16, bool) {
	if key != kmsg.DescribeQuorum.Int16() {
		return 0, 0, false
	}
	return 0, kmsg.NewPtrDescribeQuorumRequest().MaxVersion(), true
}

func (f *fakeController) Handle(_ context.Context, req *network.Request) network.Result {
	f.requests.Add(1)
	resp := &network.Response{Msg: req.Msg.ResponseKind()}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.held {
		return resp
	}
	d := network.NewDeferred()
	f.waiting = append(f.waiting, d)
	return d
}

func (f *fakeController) hold() {
	f.mu.Lock()
	f.held = true
	f.mu.Unlock()
}

// release answers the held requests and stops holding.
func (f *fakeController) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = false
	for _, d := range f.waiting {
		d.Complete(&network.Response{Msg: kmsg.NewPtrDescribeQuorumResponse()})
	}
	f.waiting = nil
}

// A request waiting for its turn on a connection gives up when its context
// ends, rather than waiting out the request ahead: a broker's heartbeat is
// never held behind a slow forwarded request past its own deadline.
func TestKafkaConnWaitEndsWithContext(t *testing.T) {
	f := startFakeController(t)
	f.hold()
	conn := newKafkaConn(f.addr, "test", nil)
	defer conn.close()

	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := conn.request(ctx, kmsg.NewPtrDescribeQuorumRequest())
		first <- err
	}()
	waitUntil(t, func() bool { return f.requests.Load() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := conn.request(ctx, kmsg.NewPtrDescribeQuorumRequest())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second request behind a held one: %v, want its deadline", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("second request gave up after %v, want about its 200ms deadline", took)
	}

	f.release()
	if err := <-first; err != nil {
		t.Fatalf("first request: %v", err)
	}
	if _, err := conn.request(context.Background(), kmsg.NewPtrDescribeQuorumRequest()); err != nil {
		t.Fatalf("a request after both: %v", err)
	}
}

// A follower controller's channel to the quorum leader sends only to the
// leader it knows: never to itself (which would forward the request to
// itself again, or wait on its own connection), and never round the
// voters while there is no leader.
func TestLeaderChannelSendsOnlyToAnotherLeader(t *testing.T) {
	self, other := startFakeController(t), startFakeController(t)
	voters := map[int32]string{1: self.addr, 2: other.addr, 3: "127.0.0.1:1"}
	var leader atomic.Int32 // 0: none known
	leader.Store(1)
	leaderID := func() (int32, bool) { id := leader.Load(); return id, id != 0 }
	ch := newLeaderChannel(func() map[int32]string { return voters }, leaderID, 1, "test", nil)
	defer ch.close()

	// This controller leads (it became leader after deciding to forward):
	// the request waits rather than come back here.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := ch.send(ctx, kmsg.NewPtrDescribeQuorumRequest())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errNoLeaderKnown) {
		t.Fatalf("send while this node leads: %v, want the deadline and errNoLeaderKnown", err)
	}

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := ch.send(ctx, kmsg.NewPtrDescribeQuorumRequest())
		done <- err
	}()
	leader.Store(0) // an election
	time.Sleep(300 * time.Millisecond)
	leader.Store(2)
	if err := <-done; err != nil {
		t.Fatalf("send once controller 2 leads: %v", err)
	}
	if n := self.requests.Load(); n != 0 {
		t.Errorf("this controller was sent %d requests, want none", n)
	}
	if n := other.requests.Load(); n != 1 {
		t.Errorf("the leader was sent %d requests, want 1", n)
	}
}

// A broker's channel, knowing no leader, tries the voters in turn.
func TestControllerChannelRotatesWithoutLeader(t *testing.T) {
	up := startFakeController(t)
	// A port nothing listens on: the first voter in turn is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	voters := map[int32]string{1: dead, 2: up.addr}
	ch := newControllerChannel(func() map[int32]string { return voters }, func() (int32, bool) { return 0, false }, "test", nil)
	defer ch.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ch.send(ctx, kmsg.NewPtrDescribeQuorumRequest()); err != nil {
		t.Fatalf("send with no leader known: %v", err)
	}
	if n := up.requests.Load(); n != 1 {
		t.Errorf("the live voter was sent %d requests, want 1", n)
	}
}

// close never waits for a request in flight (its caller may hold a lock
// others need): the request finishes, then its connection closes.
func TestKafkaConnCloseDoesNotWait(t *testing.T) {
	f := startFakeController(t)
	f.hold()
	conn := newKafkaConn(f.addr, "test", nil)
	done := make(chan error, 1)
	go func() {
		_, err := conn.request(context.Background(), kmsg.NewPtrDescribeQuorumRequest())
		done <- err
	}()
	waitUntil(t, func() bool { return f.requests.Load() == 1 })
	closed := make(chan struct{})
	go func() { conn.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close waited for the request in flight")
	}
	if f.srv.NumConnections() != 1 {
		t.Fatalf("%d connections while the request is in flight, want 1", f.srv.NumConnections())
	}
	f.release()
	if err := <-done; err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	waitUntil(t, func() bool { return f.srv.NumConnections() == 0 })
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A kafkaConn with a receive buffer (a follower's
// replica.socket.receive.buffer.bytes) sets SO_RCVBUF on the socket it
// dials; without one the OS default stays.
func TestKafkaConnReceiveBuffer(t *testing.T) {
	f := startFakeController(t)
	rcvbuf := func(receiveBuffer int) int {
		conn := newKafkaConn(f.addr, "test", nil)
		conn.receiveBuffer = receiveBuffer
		defer conn.close()
		if _, err := conn.request(context.Background(), kmsg.NewPtrDescribeQuorumRequest()); err != nil {
			t.Fatal(err)
		}
		raw, err := conn.conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var serr error
		if err := raw.Control(func(fd uintptr) { n, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		return n
	}
	// Linux reports twice what was set (its bookkeeping overhead).
	if n := rcvbuf(20000); n != 20000 && n != 40000 {
		t.Fatalf("SO_RCVBUF %d with a receive buffer of 20000", n)
	}
	if n := rcvbuf(0); n == 20000 || n == 40000 {
		t.Fatalf("SO_RCVBUF %d with no receive buffer set, want the OS default", n)
	}
}
