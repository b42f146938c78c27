package network

import (
	"context"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// served sends a Metadata request and waits for its answer.
func (rc *rawClient) served() {
	rc.t.Helper()
	corr := rc.send(metadataRequest(), 1)
	rc.read(kmsg.NewPtrMetadataResponse(), 1, corr)
}

// expectUnanswered sends a Metadata request and checks that no byte comes
// back within d: the connection waits in the listen backlog.
func (rc *rawClient) expectUnanswered(d time.Duration) {
	rc.t.Helper()
	rc.send(metadataRequest(), 1)
	_ = rc.c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	if n, err := rc.c.Read(b[:]); err == nil || !isTimeout(err) {
		rc.t.Fatalf("want no answer while the listener is at its limit, got %d bytes, %v", n, err)
	}
	_ = rc.c.SetReadDeadline(time.Time{})
}

// readAnswer reads the answer to the request expectUnanswered sent.
func (rc *rawClient) readAnswer() {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rc.read(kmsg.NewPtrMetadataResponse(), 1, rc.corr-1)
}

// twoListeners adds a second listener, INTERNAL, to a test server's
// config; listenerAddr finds its address.
func twoListeners(c *Config) {
	c.Listeners = append(c.Listeners, Listener{Name: "INTERNAL", Host: "127.0.0.1", SecurityProtocol: Plaintext})
}

func (ts *testServer) listenerAddr(name string) string { return ts.Addr(name).String() }

// TestMaxConnectionsWaitsForASlot: at max.connections the listener stops
// accepting, as Kafka's acceptor waits for a slot: a new connection waits
// in the listen backlog unanswered, and is served once another closes.
func TestMaxConnectionsWaitsForASlot(t *testing.T) {
	ts := startServer(t, nil, func(c *Config) { c.MaxConnections = 2 })
	a, b := dialRaw(t, ts.addr), dialRaw(t, ts.addr)
	a.served()
	b.served()
	third := dialRaw(t, ts.addr)
	third.expectUnanswered(300 * time.Millisecond)
	if n := ts.NumConnections(); n != 2 {
		t.Fatalf("%d connections", n)
	}
	if !strings.Contains(ts.logs.String(), "connection limit reached") {
		t.Fatalf("no log line of the limit:\n%s", ts.logs.String())
	}
	a.c.Close()
	third.readAnswer()
	if n := ts.NumConnections(); n != 2 {
		t.Fatalf("%d connections", n)
	}
	// Raising the limit at runtime lets a waiting connection in at once.
	fourth := dialRaw(t, ts.addr)
	fourth.expectUnanswered(200 * time.Millisecond)
	ts.SetConnectionLimits(ConnectionLimits{MaxConnections: 3})
	fourth.readAnswer()
	// The acceptor was held at the limit for at least the two waits;
	// connection-creation-total and connection-close-total.
	if st := ts.ListenerStats()["PLAINTEXT"]; st.AcceptorBlocked < 500*time.Millisecond || st.Created != 4 || st.Closed != 1 {
		t.Fatalf("listener stats: %+v", st)
	}
}

// TestMaxConnectionsNone: Kafka's max.connections=0 (negative here)
// admits no connection on the broker's listeners but the protected
// inter-broker one; the controller's listeners keep taking them (the
// quorum and the brokers' heartbeats). Lifting it lets the waiting
// connection in.
func TestMaxConnectionsNone(t *testing.T) {
	ts := startServer(t, nil, func(c *Config) {
		twoListeners(c)
		c.Listeners = append(c.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", SecurityProtocol: Plaintext})
		c.ControllerListeners = []string{"CONTROLLER"}
		c.ProtectedListener = "INTERNAL"
		c.MaxConnections = -1
	})
	held := dialRaw(t, ts.addr)
	held.expectUnanswered(300 * time.Millisecond)
	if !strings.Contains(ts.logs.String(), "limit=max.connections=0") {
		t.Fatalf("no log line of max.connections=0:\n%s", ts.logs.String())
	}
	dialRaw(t, ts.listenerAddr("INTERNAL")).served()
	dialRaw(t, ts.listenerAddr("CONTROLLER")).served()
	// The acceptor's blocked time counts while it waits, not only once
	// the wait ends: the metric shows a listener held shut.
	if st := ts.ListenerStats()["PLAINTEXT"]; st.AcceptorBlocked < 250*time.Millisecond {
		t.Fatalf("acceptor blocked %v while it waits", st.AcceptorBlocked)
	}
	ts.SetConnectionLimits(ConnectionLimits{})
	held.readAnswer()
}

// TestListenerMaxConnections: listener.name.<listener>.max.connections
// limits its listener only, whatever the case of the name.
func TestListenerMaxConnections(t *testing.T) {
	ts := startServer(t, nil, func(c *Config) {
		twoListeners(c)
		c.MaxListenerConnections = map[string]int{"internal": 1}
		c.MaxConnections = 10
	})
	internal := ts.listenerAddr("INTERNAL")
	first := dialRaw(t, internal)
	first.served()
	second := dialRaw(t, internal)
	second.expectUnanswered(300 * time.Millisecond)
	for range 3 {
		dialRaw(t, ts.addr).served() // PLAINTEXT has no limit of its own
	}
	first.c.Close()
	second.readAnswer()
}

// TestInterBrokerListenerIsProtected: at max.connections the inter-broker
// listener still accepts, and the least recently active connection of
// another listener is closed for it (Kafka's protected listener); its own
// listener limit still holds it back.
func TestInterBrokerListenerIsProtected(t *testing.T) {
	ts := startServer(t, nil, func(c *Config) {
		twoListeners(c)
		c.MaxConnections = 2
		c.ProtectedListener = "INTERNAL"
	})
	older, newer := dialRaw(t, ts.addr), dialRaw(t, ts.addr)
	older.served()
	time.Sleep(20 * time.Millisecond)
	newer.served()
	replica := dialRaw(t, ts.listenerAddr("INTERNAL"))
	replica.served()
	older.expectClosed()
	newer.served()
	waitFor(t, "the closed connection to be forgotten", func() bool { return ts.NumConnections() == 2 })
	if !strings.Contains(ts.logs.String(), "closing the least recently active connection") {
		t.Fatalf("no log line of the closed connection:\n%s", ts.logs.String())
	}
	// A client connection now waits: the broker is at its limit.
	client := dialRaw(t, ts.addr)
	client.expectUnanswered(300 * time.Millisecond)

	// With only the inter-broker listener left to close, a second replica
	// connection closes the last client connection... and then nothing:
	// its own listener's connections are never closed for it.
	second := dialRaw(t, ts.listenerAddr("INTERNAL"))
	second.served()
	newer.expectClosed()
	replica.served()
	second.served()

	// Its listener limit applies to it as to any listener.
	ts.SetConnectionLimits(ConnectionLimits{MaxConnections: 2, MaxListenerConnections: map[string]int{"INTERNAL": 2}})
	third := dialRaw(t, ts.listenerAddr("INTERNAL"))
	third.expectUnanswered(300 * time.Millisecond)
	second.c.Close()
	third.readAnswer()
}

// TestControllerListenersCountApart: the controller's listeners have a
// max.connections of their own, as Kafka's controller socket server does:
// clients filling the broker's listeners do not keep the controller's
// connections out, and the other way round.
func TestControllerListenersCountApart(t *testing.T) {
	ts := startServer(t, nil, func(c *Config) {
		c.Listeners = append(c.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", SecurityProtocol: Plaintext})
		c.ControllerListeners = []string{"CONTROLLER"}
		c.MaxConnections = 1
	})
	dialRaw(t, ts.addr).served()
	ctl := ts.listenerAddr("CONTROLLER")
	dialRaw(t, ctl).served()
	dialRaw(t, ts.addr).expectUnanswered(200 * time.Millisecond)
	dialRaw(t, ctl).expectUnanswered(200 * time.Millisecond)
}

// TestShutdownWhileAtTheLimit: an acceptor waiting for a slot stops with
// the server; nothing is left running.
func TestShutdownWhileAtTheLimit(t *testing.T) {
	base := runtime.NumGoroutine()
	ts := startServer(t, nil, func(c *Config) {
		c.MaxConnections = 1
		c.MaxConnectionsPerIPOverrides = map[netip.Addr]int{}
	})
	a := dialRaw(t, ts.addr)
	a.served()
	waiting := dialRaw(t, ts.addr)
	waiting.expectUnanswered(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	a.expectClosed()
	a.c.Close()
	waiting.c.Close()
	goroutinesSettle(t, base+2)
}

// pollStat reads a PLAINTEXT listener stat every 10 ms until the function
// it returns is called, which returns the values read that were not NaN.
// The throttle averages cover only the quota windows, so a test reads them
// while connections are held back rather than after.
func pollStat(ts *testServer, stat func(ListenerStats) float64) func() []float64 {
	var seen []float64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if v := stat(ts.ListenerStats()["PLAINTEXT"]); !math.IsNaN(v) {
					seen = append(seen, v)
				}
			}
		}
	}()
	return func() []float64 {
		close(stop)
		<-done
		return seen
	}
}

// TestConnectionCreationRate: max.connection.creation.rate (KIP-612) holds
// each new connection back while the listener's side accepts faster than
// the limit, measured as Kafka's quota sensors measure; the inter-broker
// listener is exempt from it, and a listener's own rate of 0 takes no new
// connection.
func TestConnectionCreationRate(t *testing.T) {
	const n, rate = 10, 5
	ts := startServer(t, nil, func(c *Config) {
		twoListeners(c)
		c.ProtectedListener = "INTERNAL"
		c.MaxConnectionCreationRate = rate
		c.ConnectionRateWindows.Samples, c.ConnectionRateWindows.Window = 2, 200*time.Millisecond
	})
	connectAll := func(addr string) time.Duration {
		t.Helper()
		start := time.Now()
		for range n {
			dialRaw(t, addr).served()
		}
		return time.Since(start)
	}
	// connection-accept-throttle-time is an average over the quota
	// windows (400 ms here), so it is read while the connections are
	// held back, not after.
	throttles := pollStat(ts, func(st ListenerStats) float64 { return st.AcceptThrottle })
	// n connections at 5 a second, a burst of one (5/s over the 200 ms
	// the rate divides by) let through: about 1.8 s.
	took := connectAll(ts.addr)
	seen := throttles()
	if took < time.Second || took > 10*time.Second {
		t.Fatalf("%d connections at max.connection.creation.rate=%d took %v", n, rate, took)
	}
	if !strings.Contains(ts.logs.String(), "connection creation rate over its limit") {
		t.Fatalf("no log line of the rate:\n%s", ts.logs.String())
	}
	if len(seen) == 0 || slices.ContainsFunc(seen, func(v float64) bool { return v <= 0 || v > 200 }) {
		t.Fatalf("connection-accept-throttle-time while %d connections were held back at %d a second: %v", n, rate, seen)
	}
	// The acceptor's blocked time.
	if st := ts.ListenerStats()["PLAINTEXT"]; st.Created != n || st.AcceptorBlocked < 500*time.Millisecond || !math.IsNaN(st.IPAcceptThrottle) {
		t.Fatalf("listener stats after %d connections at %d a second: %+v", n, rate, st)
	}
	if took := connectAll(ts.listenerAddr("INTERNAL")); took > 700*time.Millisecond {
		t.Fatalf("%d inter-broker connections took %v: the broker-wide rate held them", n, took)
	}
	// The inter-broker listener's own rate applies to it.
	ts.SetConnectionLimits(ConnectionLimits{MaxConnectionCreationRate: rate, MaxListenerConnectionCreationRate: map[string]int{"internal": 0}})
	held := dialRaw(t, ts.listenerAddr("INTERNAL"))
	held.expectUnanswered(300 * time.Millisecond)
	ts.SetConnectionLimits(ConnectionLimits{})
	held.readAnswer()
	if took := connectAll(ts.addr); took > 700*time.Millisecond {
		t.Fatalf("%d connections with no rate limit took %v", n, took)
	}
}

// TestIPConnectionCreationRate: an ip entity's connection_creation_rate
// quota (KIP-612) holds a connection over its address's rate unanswered
// for the throttle, at most one window, and then closes it, as Kafka's
// acceptor does; the override of an address wins over the default, a
// quota of 0 closes every connection, the throttled connections count
// toward no other rate, the controller's listeners are not limited, and
// removing the quotas serves everyone again.
func TestIPConnectionCreationRate(t *testing.T) {
	ts := startServer(t, nil, func(c *Config) {
		twoListeners(c)
		c.ControllerListeners = []string{"INTERNAL"}
		c.MaxConnectionCreationRate = 3
		c.ConnectionRateWindows.Samples, c.ConnectionRateWindows.Window = 2, time.Second
		c.IPConnectionCreationRates = map[netip.Addr]int{
			{}:                               1, // the default: one a second
			netip.MustParseAddr("127.0.0.2"): 1000,
			netip.MustParseAddr("127.0.0.3"): 0,
		}
	})
	throttled := func(rc *rawClient) time.Duration {
		t.Helper()
		start := time.Now()
		rc.send(metadataRequest(), 1)
		rc.expectClosed()
		return time.Since(start)
	}
	dialFrom(t, "127.0.0.1", ts.addr).served()
	// The second in the second is over 1/s: held for (2-1)/1 of the 1 s
	// span, the bound, then closed unanswered. ip-connection-accept-
	// throttle-time, an average over the 2 s of windows, is read while
	// the connection is held.
	ipThrottles := pollStat(ts, func(st ListenerStats) float64 { return st.IPAcceptThrottle })
	if took := throttled(dialFrom(t, "127.0.0.1", ts.addr)); took < 500*time.Millisecond || took > 5*time.Second {
		t.Fatalf("a connection over its address's rate was closed after %v, want about the 1 s throttle", took)
	}
	if seen := ipThrottles(); len(seen) == 0 || slices.ContainsFunc(seen, func(v float64) bool { return v != 1000 }) {
		t.Fatalf("ip-connection-accept-throttle-time while one connection was held for 1 s: %v", seen)
	}
	if !strings.Contains(ts.logs.String(), "over its connection_creation_rate quota") {
		t.Fatalf("no log line of the throttle:\n%s", ts.logs.String())
	}
	// The throttled connection was never served (connection-creation-
	// total), nor held back by the listener's rate.
	if st := ts.ListenerStats()["PLAINTEXT"]; st.Created != 1 || !math.IsNaN(st.AcceptThrottle) {
		t.Fatalf("listener stats after one ip throttle: %+v", st)
	}
	// Quota 0: every connection of the address is throttled. Eight of them
	// at once, which must not count toward max.connection.creation.rate
	// (3/s): were they counted, the acceptor would hold the fourth and
	// later ones for the broker's rate first, seconds in all.
	const burst = 8
	done := make(chan time.Duration, burst)
	for range burst {
		rc := dialFrom(t, "127.0.0.3", ts.addr)
		go func() {
			start := time.Now()
			rc.send(metadataRequest(), 1)
			_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var b [1]byte
			if n, err := rc.c.Read(b[:]); err == nil {
				done <- -time.Duration(n) // answered: fails below
				return
			}
			done <- time.Since(start)
		}()
	}
	for range burst {
		if took := <-done; took < 500*time.Millisecond || took > 2500*time.Millisecond {
			t.Fatalf("a connection of an address with quota 0 was answered or closed after %v, want about the 1 s throttle", took)
		}
	}
	start := time.Now()
	dialFrom(t, "127.0.0.2", ts.addr).served() // under its own override
	if took := time.Since(start); took > 800*time.Millisecond {
		t.Fatalf("127.0.0.2 waited %v: the throttled connections counted toward the broker's rate", took)
	}
	// The controller's listener is not limited by ip quotas.
	dialFrom(t, "127.0.0.3", ts.listenerAddr("INTERNAL")).served()

	ts.SetIPConnectionCreationRates(nil)
	for range 3 {
		dialFrom(t, "127.0.0.3", ts.addr).served()
	}
}
