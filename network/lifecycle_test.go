package network

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

func TestIdleConnectionsAreClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if req.Header.ClientID != "slow" {
			return nil, false
		}
		// A long poll longer than the idle timeout: the connection has a
		// request in flight, so it is not idle.
		d := NewDeferred()
		time.AfterFunc(3*idle, func() { d.Complete(&Response{Msg: kmsg.NewPtrMetadataResponse()}) })
		return d, true
	}, func(c *Config) { c.ConnectionsMaxIdle = idle })

	t.Run("silent connection", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		start := time.Now()
		rc.expectClosed()
		if waited := time.Since(start); waited < idle/2 {
			t.Fatalf("closed after %v, before connections.max.idle.ms", waited)
		}
	})
	t.Run("connection idle after a request", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		corr := rc.send(metadataRequest(), 1)
		rc.read(kmsg.NewPtrMetadataResponse(), 1, corr)
		rc.expectClosed()
	})
	t.Run("request in flight longer than the idle timeout", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		rc.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("slow"))
		corr := rc.send(metadataRequest(), 1)
		rc.read(kmsg.NewPtrMetadataResponse(), 1, corr)
	})
	t.Run("busy connection outlives the writer's deadline", func(t *testing.T) {
		// An answer queued behind a long poll is written by the writer
		// goroutine, which bounds its write by the idle timeout. Answers
		// written directly afterwards must not trip over that deadline
		// once it has passed: the connection is busy, not idle.
		rc := dialRaw(t, ts.addr)
		plain := rc.fmt
		rc.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("slow"))
		slow := rc.send(metadataRequest(), 1)
		rc.fmt = plain
		queued := rc.send(metadataRequest(), 1)
		rc.read(kmsg.NewPtrMetadataResponse(), 1, slow)
		rc.read(kmsg.NewPtrMetadataResponse(), 1, queued)
		for range 8 { // 8 × idle/4: past the writer's deadline
			time.Sleep(idle / 4)
			corr := rc.send(metadataRequest(), 1)
			rc.read(kmsg.NewPtrMetadataResponse(), 1, corr)
		}
	})
}

// gate holds deferred responses until released.
type gate struct {
	mu      sync.Mutex
	waiting []*Deferred
	ctxs    []context.Context
	started atomic.Int32
}

func (g *gate) handler(_ context.Context, req *Request) (Result, bool) {
	return g.hold(req, nil)
}

func (g *gate) hold(req *Request, ctx context.Context) (Result, bool) {
	if _, ok := req.Msg.(*kmsg.MetadataRequest); !ok {
		return nil, false
	}
	d := NewDeferred()
	g.mu.Lock()
	g.waiting = append(g.waiting, d)
	g.ctxs = append(g.ctxs, ctx)
	g.mu.Unlock()
	g.started.Add(1)
	return d, true
}

// release completes the oldest n held requests.
func (g *gate) release(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		resp := kmsg.NewPtrMetadataResponse()
		g.waiting[0].Complete(&Response{Msg: resp})
		g.waiting = g.waiting[1:]
	}
}

func TestBackpressureStopsReadingAtMaxInFlight(t *testing.T) {
	g := &gate{}
	ts := startServer(t, g.handler, func(c *Config) { c.MaxInFlightRequests = 2 })
	rc := dialRaw(t, ts.addr)
	for range 5 {
		rc.send(metadataRequest(), 1)
	}
	waitFor(t, "two requests started", func() bool { return g.started.Load() == 2 })
	time.Sleep(50 * time.Millisecond) // give a wrong implementation the chance to read more
	if n := g.started.Load(); n != 2 {
		t.Fatalf("%d requests started with 2 allowed in flight", n)
	}
	// Each answered request makes room for exactly one more.
	for started := int32(3); started <= 5; started++ {
		g.release(1)
		waitFor(t, "one more request started", func() bool { return g.started.Load() == started })
	}
	g.release(2)
	for corr := range int32(5) {
		rc.read(kmsg.NewPtrMetadataResponse(), 1, corr)
	}
}

func TestShutdownDrainsRequestsInFlight(t *testing.T) {
	base := runtime.NumGoroutine()
	g := &gate{}
	logs := &syncBuffer{}
	srv, err := NewServer(Config{
		Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext}},
		Handler:   &testHandler{fn: g.handler},
		Logger:    hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	addr := srv.Addr("PLAINTEXT").String()

	busy, idle := dialRaw(t, addr), dialRaw(t, addr)
	for range 3 {
		busy.send(metadataRequest(), 1)
	}
	waitFor(t, "requests started", func() bool { return g.started.Load() == 3 })
	waitFor(t, "both connections accepted", func() bool { return srv.NumConnections() == 2 })

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- srv.Shutdown(ctx)
	}()
	idle.expectClosed() // nothing in flight: closed at once
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("still accepting after shutdown began")
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v with requests in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.release(3)
	for corr := range int32(3) {
		busy.read(kmsg.NewPtrMetadataResponse(), 1, corr)
	}
	busy.expectClosed()
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	busy.c.Close()
	idle.c.Close()
	goroutinesSettle(t, base)
}

func TestShutdownDeadlineClosesAndCancelsHandlers(t *testing.T) {
	base := runtime.NumGoroutine()
	g := &gate{}
	srv, err := NewServer(Config{
		Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext}},
		Handler: &testHandler{fn: func(ctx context.Context, req *Request) (Result, bool) {
			return g.hold(req, ctx)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	rc := dialRaw(t, srv.Addr("PLAINTEXT").String())
	rc.send(metadataRequest(), 1)
	waitFor(t, "request started", func() bool { return g.started.Load() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want deadline exceeded", err)
	}
	rc.expectClosed()
	g.mu.Lock()
	handlerCtx := g.ctxs[0]
	g.mu.Unlock()
	if handlerCtx.Err() == nil {
		t.Fatal("the handler's context was not cancelled")
	}
	g.release(1) // completing after the close is harmless
	<-served
	rc.c.Close()
	goroutinesSettle(t, base)
}

func TestServerWithoutLeaksAfterManyConnections(t *testing.T) {
	base := runtime.NumGoroutine()
	srv, err := NewServer(Config{
		Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext}},
		Handler:   &testHandler{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	addr := srv.Addr("PLAINTEXT").String()
	var clients []*rawClient
	for i := range 20 {
		rc := dialRaw(t, addr)
		corr := rc.send(metadataRequest(), 1)
		rc.read(kmsg.NewPtrMetadataResponse(), 1, corr)
		if i%2 == 0 {
			rc.c.Close() // client-side close
		} else {
			clients = append(clients, rc)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	<-served
	for _, rc := range clients {
		rc.expectClosed()
		rc.c.Close()
	}
	goroutinesSettle(t, base)
}

func TestRaftConnectionsAreHandedOff(t *testing.T) {
	const marker = 0x52
	handed := make(chan net.Conn, 1)
	ts := startServer(t, nil, func(c *Config) {
		c.ConnClassifier = func(first byte) bool { return first >= 0x07 }
		c.HandoffRaft = func(nc net.Conn, _ *ConnInfo) { handed <- nc }
	})
	rc := dialRaw(t, ts.addr)
	rc.write([]byte{marker, 'r', 'a', 'f', 't'})
	var raft net.Conn
	select {
	case raft = <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("raft connection not handed off")
	}
	defer raft.Close()
	got := make([]byte, 5)
	if _, err := io.ReadFull(raft, got); err != nil || string(got) != "\x52raft" {
		t.Fatalf("handed-off conn replays %q, %v", got, err)
	}
	if _, err := raft.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 2)
	if _, err := io.ReadFull(rc.c, echo); err != nil || string(echo) != "ok" {
		t.Fatalf("client read %q, %v", echo, err)
	}
	if n := ts.NumConnections(); n != 0 {
		t.Fatalf("handed-off connection still counted: %d", n)
	}
	// Kafka clients on the same listener are unaffected.
	k := dialRaw(t, ts.addr)
	corr := k.send(metadataRequest(), 1)
	k.read(kmsg.NewPtrMetadataResponse(), 1, corr)
}

func TestNewServerValidatesConfig(t *testing.T) {
	plain := []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext}}
	cases := map[string]Config{
		"no listeners":               {Handler: &testHandler{}},
		"no handler":                 {Listeners: plain},
		"SASL listener":              {Handler: &testHandler{}, Listeners: []Listener{{Name: "SASL", Port: 9093, SecurityProtocol: SASLPlaintext}}},
		"classifier without handoff": {Handler: &testHandler{}, Listeners: plain, ConnClassifier: func(byte) bool { return false }},
	}
	for name, cfg := range cases {
		if _, err := NewServer(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewServer(cases["SASL listener"]); err == nil || !strings.Contains(err.Error(), "no SASL mechanism") {
		t.Errorf("SASL listener without mechanisms: %v", err)
	}
}

// socket.send.buffer.bytes and socket.receive.buffer.bytes set SO_SNDBUF
// and SO_RCVBUF of accepted connections (Linux reports twice the value).
func TestSocketBufferSizesAreApplied(t *testing.T) {
	const snd, rcv = 64 << 10, 48 << 10
	ts := startServer(t, nil, func(c *Config) { c.SocketSendBufferBytes, c.SocketReceiveBufferBytes = snd, rcv })
	rc := dialRaw(t, ts.addr)
	corr := rc.send(kmsg.NewPtrApiVersionsRequest(), 3)
	rc.read(kmsg.NewPtrApiVersionsResponse(), 3, corr)
	ts.Server.mu.Lock()
	var c *conn
	for c = range ts.Server.conns {
	}
	ts.Server.mu.Unlock()
	raw, err := c.nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var gotSnd, gotRcv int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		gotSnd, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		if serr == nil {
			gotRcv, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		}
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if gotSnd < snd || gotSnd > 2*snd || gotRcv < rcv || gotRcv > 2*rcv {
		t.Fatalf("SO_SNDBUF %d (set %d), SO_RCVBUF %d (set %d)", gotSnd, snd, gotRcv, rcv)
	}
}

// dialFrom dials addr from the local address ip (any 127/8 address
// reaches a loopback listener on Linux).
func dialFrom(t *testing.T, ip, addr string) *rawClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// TestMaxConnectionsPerIP: max.connections.per.ip counts each client
// address on its own (Kafka's ConnectionQuotas): the address at its limit
// has its next connection closed while another address connects; a
// closed connection frees its address's slot; an override raises one
// address's limit, and a limit of none (Kafka's 0) admits only the
// addresses the overrides name.
func TestMaxConnectionsPerIP(t *testing.T) {
	works := func(rc *rawClient) {
		t.Helper()
		corr := rc.send(metadataRequest(), 1)
		rc.read(kmsg.NewPtrMetadataResponse(), 1, corr)
	}
	ts := startServer(t, nil, func(c *Config) {
		c.MaxConnectionsPerIP = 2
		c.MaxConnectionsPerIPOverrides = map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): 3}
	})
	a, b := dialFrom(t, "127.0.0.1", ts.addr), dialFrom(t, "127.0.0.1", ts.addr)
	works(a)
	works(b)
	dialFrom(t, "127.0.0.1", ts.addr).expectClosed()
	works(dialFrom(t, "127.0.0.2", ts.addr)) // another address has its own count
	for range 3 {
		works(dialFrom(t, "127.0.0.3", ts.addr))
	}
	dialFrom(t, "127.0.0.3", ts.addr).expectClosed()
	a.c.Close()
	waitFor(t, "127.0.0.1's slot to free", func() bool { return ts.NumConnections() == 5 })
	works(dialFrom(t, "127.0.0.1", ts.addr))

	only := startServer(t, nil, func(c *Config) {
		c.MaxConnectionsPerIP = -1
		c.MaxConnectionsPerIPOverrides = map[netip.Addr]int{netip.MustParseAddr("127.0.0.2"): 10}
	})
	dialFrom(t, "127.0.0.1", only.addr).expectClosed()
	works(dialFrom(t, "127.0.0.2", only.addr))
}
