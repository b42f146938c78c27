package network

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults for the Kafka settings Config carries.
const (
	// DefaultConnectionsMaxIdle is connections.max.idle.ms' default (10 min).
	DefaultConnectionsMaxIdle = 10 * time.Minute
	// DefaultSocketRequestMaxBytes is socket.request.max.bytes' default
	// (100 MiB). A Kafka frame's first byte is the high byte of its size, so
	// under this limit it is at most 0x06: bytes from 0x07 up are free for
	// the Raft connection marker.
	DefaultSocketRequestMaxBytes = 104857600
	// DefaultMaxInFlightRequests bounds the requests a connection has read
	// but not yet answered. Clients keep at most 5 in flight, so it only
	// bites a client that pipelines without limit.
	DefaultMaxInFlightRequests = 100
)

// Sentinel errors.
var (
	// ErrServerClosed is returned by Serve after Shutdown or Close, and by
	// Listen and Serve on a server that was shut down.
	ErrServerClosed = errors.New("network: server closed")
)

// Handler serves decoded requests. The broker implements it; the network
// package owns framing, ordering and connection lifetime.
type Handler interface {
	// SupportedVersions reports the inclusive range of versions of the API
	// key served on the named listener (ok false: not served there). A
	// request outside it closes the connection, as in Kafka, except
	// ApiVersions, which gets a v0 UNSUPPORTED_VERSION answer (KIP-511).
	// It must agree with what the handler advertises in ApiVersions, and
	// never exceed what kmsg can decode.
	//
	// Concurrency: called from every connection's reader goroutine, once per
	// request; must be safe for concurrent use and must not block.
	SupportedVersions(listener string, key int16) (min, max int16, ok bool)

	// Handle serves one request and returns a *Response, a *Deferred to
	// complete later, or nil for no response (Produce with acks=0).
	//
	// Concurrency: called on the connection's reader goroutine, one request
	// at a time per connection and in arrival order (so Produce appends
	// happen in the order the client sent them), concurrently across
	// connections. The reader reads no further request until Handle
	// returns, so Handle must not wait on anything slow — replication,
	// long-poll Fetch, a controller round trip: return a Deferred and
	// complete it from elsewhere. ctx is cancelled when the connection
	// closes (by either side, or a forced shutdown); req stays valid after
	// Handle returns and may be kept until the Deferred completes.
	Handle(ctx context.Context, req *Request) Result
}

// ConnInfo describes a client connection, shared by every Request read
// from it. It does not change once the connection has authenticated:
// Principal is set by the TLS handshake, before any request, or by a SASL
// exchange, before any request but ApiVersions.
type ConnInfo struct {
	// ID identifies the connection in logs, Kafka-style:
	// "local-remote-sequence".
	ID string
	// Listener is the listener's name (PLAINTEXT, CONTROLLER, ...).
	Listener         string
	SecurityProtocol SecurityProtocol
	LocalAddr        net.Addr
	RemoteAddr       net.Addr
	// RemoteHost is RemoteAddr's host (an IP), as ACLs name hosts.
	RemoteHost string
	// Principal is the authenticated principal, as Kafka names it:
	// "User:" and the SASL user on a SASL listener, or the client
	// certificate's mapped subject on an SSL listener when the client
	// presented one; "User:ANONYMOUS" otherwise.
	Principal string
	// TokenAuthenticated is set when the connection authenticated with a
	// delegation token (SCRAM's tokenauth=true): Principal is then the
	// token's owner, and the connection may not ask for tokens itself.
	TokenAuthenticated bool

	// mutedUntil is when the connection may read requests again after a
	// quota throttle (Unix nanoseconds; Mute).
	mutedUntil atomic.Int64
}

// Mute stops the connection from reading further requests for d, as
// Kafka mutes a client's channel for its quota throttle time (KIP-219):
// responses to requests already read still go out. A longer mute already
// in force stands. Safe from any goroutine.
func (c *ConnInfo) Mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// AnonymousPrincipal is the principal of an unauthenticated connection.
const AnonymousPrincipal = "User:ANONYMOUS"

// Request is one decoded request handed to the Handler.
type Request struct {
	Header RequestHeader
	// Msg is the decoded body, at Header.APIVersion. Its strings and byte
	// slices alias the request's frame buffer, which is never reused.
	Msg  kmsg.Request
	Conn *ConnInfo
	// Received is when the frame had been read, before decoding.
	Received time.Time
	// Size is the frame's size in bytes (without the 4-byte size prefix).
	Size int32
}

// RequestTimes is when a request passed each stage of the server, for
// Kafka's RequestMetrics (broker/metrics.go names the intervals as Kafka
// does): offsets from Request.Received, in order. A request is handled on its
// connection's reader as soon as it is decoded, so Started is the decode
// time only: a request that waits behind an earlier one of its connection
// waits in the socket, unread, as in Kafka, whose connection is muted
// while a request is in flight.
type RequestTimes struct {
	// Started: decoded, the Handler called. Handled: the Handler returned.
	// Completed: the response ready (Handled, or a Deferred's Complete).
	// Sending: taken up to be written, after every earlier response.
	// Sent: its last byte handed to the socket.
	Started, Handled, Completed, Sending, Sent time.Duration
	// NoResponse: nothing was written (acks=0, or a Deferred completed
	// with no response); Sending and Sent are zero.
	NoResponse bool
}

// Config configures a Server. Listeners and Handler are required.
type Config struct {
	// Listeners to bind, from ParseListeners: SSL and SASL_SSL ones need
	// an entry in TLS, SASL_PLAINTEXT and SASL_SSL ones in SASL.
	Listeners []Listener
	// TLS configures each SSL and SASL_SSL listener, by listener name.
	TLS map[string]*TLSListener
	// SASL configures each SASL_PLAINTEXT and SASL_SSL listener, by
	// listener name.
	SASL map[string]*SASLListener
	// Handler serves every listener's requests; Request.Conn.Listener says
	// which listener a request came in on.
	Handler Handler
	// Logger receives connection-level logs; nil discards them.
	Logger hclog.Logger
	// MaxConnections is max.connections: at it, a listener accepts no
	// more connections until one closes (Kafka's ConnectionQuotas: the
	// acceptor waits, new connections wait in the listen backlog). The
	// broker's listeners and the controller's (ControllerListeners) count
	// apart, as Kafka's controller has a socket server of its own. The
	// inter-broker listener (ProtectedListener) still accepts at the
	// limit and closes the least recently active connection of another
	// listener instead, so that replication and the brokers' own traffic
	// never wait on clients. Zero means no limit; negative admits no
	// connection on the broker's listeners but the protected one (Kafka's
	// max.connections=0) and leaves the controller's without a limit, as
	// the quorum and the brokers' heartbeats use them. Connections handed
	// to HandoffRaft stop counting when handed off.
	MaxConnections int
	// MaxListenerConnections holds listener.name.<listener>.max.connections
	// by listener name (matched in any case): at its limit a listener
	// accepts no more connections until one of its own closes, the
	// inter-broker listener too; 0 admits none, as in Kafka (a way to
	// stop a listener taking new connections). A listener not named has
	// no limit of its own.
	MaxListenerConnections map[string]int
	// MaxConnectionCreationRate is max.connection.creation.rate (KIP-612):
	// the connections a second each side (the broker's listeners, the
	// controller's) accepts, measured over ConnectionRateWindows. Over
	// it, a listener holds the connection it accepted until the rate is
	// back under (Kafka's throttle: (rate - limit) / limit of the
	// windows' span) and accepts no other meanwhile. The inter-broker
	// listener is exempt, as from MaxConnections. Zero or negative means
	// no limit.
	MaxConnectionCreationRate int
	// MaxListenerConnectionCreationRate holds
	// listener.name.<listener>.max.connection.creation.rate by listener
	// name: one listener's own rate, the inter-broker listener's too; 0
	// admits none.
	MaxListenerConnectionCreationRate map[string]int
	// IPConnectionCreationRates are the ip entities' connection_creation_rate
	// quotas (KIP-612): the connections a second the broker's listeners
	// accept from one client address, by address; the zero netip.Addr
	// holds the default for every address not named. A connection over
	// its address's rate is not served: it is held unanswered for the
	// throttle time (at most one window) and then closed, as Kafka's
	// acceptor does, and it does not count toward the other rates. The
	// controller's listeners are not limited by them.
	IPConnectionCreationRates map[netip.Addr]int
	// ConnectionRateWindows is how the creation rates are measured: the
	// number of windows and each one's length (Kafka's quota.window.num
	// and quota.window.size.seconds; zero: 11 windows of a second).
	ConnectionRateWindows struct {
		Samples int
		Window  time.Duration
	}
	// ProtectedListener is inter.broker.listener.name: exempt from
	// MaxConnections when the broker has other listeners.
	ProtectedListener string
	// ControllerListeners are controller.listener.names: counted against
	// MaxConnections apart from the broker's listeners.
	ControllerListeners []string
	// MaxConnectionsPerIP is max.connections.per.ip: a client address with
	// this many connections open has the next one closed at once (Kafka's
	// ConnectionQuotas), on every listener. Zero means no limit; negative
	// allows none but the addresses MaxConnectionsPerIPOverrides names
	// (Kafka's max.connections.per.ip=0).
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides:
	// the limit of each address it names, over MaxConnectionsPerIP.
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection with no
	// request in flight and no bytes read or written for this long is
	// closed; it is also the write timeout of each flush. Zero means
	// DefaultConnectionsMaxIdle; negative disables both.
	ConnectionsMaxIdle time.Duration
	// SocketRequestMaxBytes is socket.request.max.bytes: a frame claiming
	// more (or a negative size) closes the connection before anything is
	// allocated. Zero means DefaultSocketRequestMaxBytes.
	SocketRequestMaxBytes int32
	// MaxInFlightRequests bounds the requests read but not yet answered
	// per connection; at the bound the reader stops reading (TCP pushes
	// back on the client). Zero means DefaultMaxInFlightRequests.
	MaxInFlightRequests int
	// ConnClassifier, if set, sees the first byte of every accepted
	// connection; when it returns true the connection is not Kafka's and
	// goes to HandoffRaft. A Kafka frame's first byte is at most 0x06 (see
	// DefaultSocketRequestMaxBytes), so a marker byte of 0x07 or more never
	// collides. Must be set together with HandoffRaft.
	ConnClassifier func(first byte) bool
	// HandoffRaft takes ownership of a connection ConnClassifier claimed:
	// reading it replays the bytes already read (the marker included). It
	// is called on the connection's goroutine, which exits when it returns,
	// so it should return promptly. The Server no longer tracks the
	// connection: Shutdown neither drains nor closes it. info is the
	// connection's, with the principal it authenticated as (its client
	// certificate's on an SSL listener), for the receiver to authorize.
	//
	// On a SASL listener Raft must authenticate first: the dialler runs
	// SaslHandshake and SaslAuthenticate as any client does and, once
	// authenticated, sends the marker where its next request would start.
	// The connection is handed off then, as the SASL principal. A marker
	// before authentication closes the connection.
	HandoffRaft func(conn net.Conn, info *ConnInfo)
	// RequestDone, if set, is told of every request the Handler served,
	// with when it passed each stage (Kafka's RequestMetrics), once the
	// last byte of its response went to the socket; a request with no
	// response (acks=0, or a Deferred completed with none) when that is
	// known. As in Kafka, a request whose connection closed before its
	// response was written is not reported. It is called from the
	// connection's goroutines and completing ones, must not block and
	// must not keep req.
	RequestDone func(req *Request, t RequestTimes)
	// SocketSendBufferBytes is socket.send.buffer.bytes: the SO_SNDBUF of
	// accepted connections. Zero or negative keeps the OS default (on
	// Linux, autotuned).
	SocketSendBufferBytes int
	// SocketReceiveBufferBytes is socket.receive.buffer.bytes: their
	// SO_RCVBUF, likewise.
	SocketReceiveBufferBytes int
	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of
	// requests read and not yet handled, across all connections, beyond
	// which no more requests are read until some are handled (see
	// requestMemory). Zero or negative means no bound (Kafka's -1); a
	// positive value must be at least SocketRequestMaxBytes.
	QueuedMaxRequestBytes int64
}

// boundListener is a bound listener with its accept state.
type boundListener struct {
	Listener
	ln net.Listener
	// controller: one of Config.ControllerListeners, counted apart.
	controller bool
	// open counts the listener's connections; limitLogged and rateLogged
	// are when it last said it was at its limit, over its rate
	// (Server.mu).
	open                    int
	limitLogged, rateLogged time.Time
	// rate measures the connections it accepts a second
	// (listener.name.<listener>.max.connection.creation.rate).
	rate *RateMeter
	// stats are what ListenerStats reports (Server.mu).
	stats listenerStats
	tls   *TLSListener  // SSL and SASL_SSL listeners only
	sasl  *SASLListener // SASL listeners only
	// authOK and authFailed count connections that authenticated (TLS
	// handshakes on SSL listeners, SASL exchanges on SASL ones) and that
	// failed to: Kafka's successful- and failed-authentication-total.
	authOK, authFailed atomic.Int64
	// reauthOK and reauthFailed count SASL re-authentications (KIP-368),
	// expiredKilled the connections closed for an expired session.
	reauthOK, reauthFailed, expiredKilled atomic.Int64
}

// ListenerStats are a listener's connection counts and throttles, for
// Kafka's socket-server-metrics and Acceptor metrics.
type ListenerStats struct {
	// Created and Closed count the connections served since the server
	// started and those that ended (connection-creation-total,
	// connection-close-total): Created - Closed are open, or were handed
	// to Raft.
	Created, Closed int64
	// AcceptorBlocked is the time the listener's acceptor held an accepted
	// connection back, at a connection limit or for a creation-rate
	// throttle, accepting no other (the count of Kafka's
	// AcceptorBlockedPercent meter), a wait going on included (Kafka marks
	// its meter when the wait ends).
	AcceptorBlocked time.Duration
	// AcceptThrottle and IPAcceptThrottle are the average throttle, in
	// milliseconds, of the connections held back over the quota windows:
	// by the listener's or the broker's creation rate
	// (connection-accept-throttle-time), and by their address's
	// connection_creation_rate (ip-connection-accept-throttle-time). NaN
	// with none, as Kafka's Avg.
	AcceptThrottle, IPAcceptThrottle float64
}

// listenerStats is a listener's ListenerStats as kept (Server.mu): the
// throttles' sums and counts over the quota windows.
type listenerStats struct {
	created, closed int64
	// blocked is the acceptor's time held back in waits that ended;
	// blockedSince, when set, is when the current one began.
	blocked                   time.Duration
	blockedSince              time.Time
	throttleMs, throttles     *RateMeter
	ipThrottleMs, ipThrottles *RateMeter
}

// recordThrottle counts a throttle of d into a sum and count pair.
func recordThrottle(sum, count *RateMeter, d time.Duration, now time.Time) {
	sum.Record(d.Milliseconds(), now)
	count.Record(1, now)
}

// average is a sum and count pair's mean over their windows, NaN when
// empty.
func average(sum, count *RateMeter, now time.Time) float64 {
	n := count.Rate(now)
	if n <= 0 {
		return math.NaN()
	}
	return sum.Rate(now) / n
}

// ListenerStats returns each bound listener's stats, by name.
func (s *Server) ListenerStats() map[string]ListenerStats {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]ListenerStats, len(s.bound))
	for _, b := range s.bound {
		st := &b.stats
		blocked := st.blocked
		if !st.blockedSince.IsZero() {
			blocked += now.Sub(st.blockedSince) // a wait going on counts as it goes
		}
		out[b.Name] = ListenerStats{Created: st.created, Closed: st.closed, AcceptorBlocked: blocked,
			AcceptThrottle: average(st.throttleMs, st.throttles, now), IPAcceptThrottle: average(st.ipThrottleMs, st.ipThrottles, now)}
	}
	return out
}

// Server accepts Kafka connections on its listeners and runs, per
// connection, a reader goroutine (frames → Handler, in order) and a writer
// goroutine (responses → socket, in request order).
//
// Lock ordering: Server.mu and a connection's responseQueue.mu are never
// held together; nothing else in the package takes a lock.
type Server struct {
	cfg Config
	log hclog.Logger
	mem *requestMemory // nil: queued.max.request.bytes is off

	// drain is closed when shutdown begins: readers stop reading requests.
	drain chan struct{}

	mu        sync.Mutex // guards the fields below
	bound     []*boundListener
	conns     map[*conn]struct{}
	perIP     map[netip.Addr]int // open connections by client address (mu)
	closing   bool               // Shutdown or Close has begun
	serving   bool               // Serve has been called
	acceptErr error              // first fatal accept error
	// slotFreed is signalled (on mu) when a connection closes, the limits
	// change, a throttle ends or the server closes: acceptors waiting at a
	// limit look again.
	slotFreed *sync.Cond
	// sideRate measures the connections each side accepts a second
	// (max.connection.creation.rate): [0] the broker's listeners, [1] the
	// controller's.
	sideRate [2]*RateMeter
	// ipRate measures the connections each client address with a
	// connection_creation_rate quota opens a second; idle meters are
	// dropped (sweepIPRates) after ipRateSwept. throttled holds the
	// connections over their address's rate until their delayed close.
	ipRate       map[netip.Addr]*RateMeter
	ipRateSwept  time.Time
	ipRateLogged time.Time
	throttled    map[net.Conn]*time.Timer

	acceptWG sync.WaitGroup // accept loops
	connWG   sync.WaitGroup // connection goroutines (readers and writers)
	connSeq  atomic.Uint64
}

// NewServer validates cfg and returns a Server that is not listening yet.
func NewServer(cfg Config) (*Server, error) {
	if len(cfg.Listeners) == 0 {
		return nil, errors.New("network: no listeners configured")
	}
	if cfg.Handler == nil {
		return nil, errors.New("network: no handler configured")
	}
	if (cfg.ConnClassifier == nil) != (cfg.HandoffRaft == nil) {
		return nil, errors.New("network: ConnClassifier and HandoffRaft must be set together")
	}
	for _, l := range cfg.Listeners {
		t, sasl := cfg.TLS[l.Name], cfg.SASL[l.Name]
		wantTLS := l.SecurityProtocol == SSL || l.SecurityProtocol == SASLSSL
		switch {
		case wantTLS && (t == nil || t.Config == nil):
			return nil, fmt.Errorf("network: listener %s is %s but has no TLS configuration (ssl.keystore.*)", l, l.SecurityProtocol)
		case !wantTLS && t != nil:
			return nil, fmt.Errorf("network: listener %s is %s but has a TLS configuration", l, l.SecurityProtocol)
		case l.SecurityProtocol.IsSASL() && (sasl == nil || len(sasl.Mechanisms) == 0 || sasl.Start == nil):
			return nil, fmt.Errorf("network: listener %s is %s but has no SASL mechanism configured (sasl.enabled.mechanisms)", l, l.SecurityProtocol)
		case !l.SecurityProtocol.IsSASL() && sasl != nil:
			return nil, fmt.Errorf("network: listener %s is %s but has a SASL configuration", l, l.SecurityProtocol)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if cfg.SocketRequestMaxBytes <= 0 {
		cfg.SocketRequestMaxBytes = DefaultSocketRequestMaxBytes
	}
	if cfg.MaxInFlightRequests <= 0 {
		cfg.MaxInFlightRequests = DefaultMaxInFlightRequests
	}
	var mem *requestMemory
	if cfg.QueuedMaxRequestBytes > 0 {
		// Kafka's SimpleMemoryPool refuses a pool smaller than its largest
		// single allocation.
		if cfg.QueuedMaxRequestBytes < int64(cfg.SocketRequestMaxBytes) {
			return nil, fmt.Errorf("network: queued.max.request.bytes %d is below socket.request.max.bytes %d",
				cfg.QueuedMaxRequestBytes, cfg.SocketRequestMaxBytes)
		}
		mem = newRequestMemory(cfg.QueuedMaxRequestBytes)
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger.Named("network"),
		mem:       mem,
		drain:     make(chan struct{}),
		conns:     make(map[*conn]struct{}),
		perIP:     map[netip.Addr]int{},
		ipRate:    map[netip.Addr]*RateMeter{},
		throttled: map[net.Conn]*time.Timer{},
	}
	s.slotFreed = sync.NewCond(&s.mu)
	for i := range s.sideRate {
		s.sideRate[i] = s.newRateMeter()
	}
	return s, nil
}

// Listen binds every listener (so that a port-0 listener's address is known
// before Serve). Serve calls it if it was not called.
//
// Concurrency: call once, before Serve; safe against a concurrent Shutdown.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrServerClosed
	}
	if s.bound != nil {
		return nil
	}
	var lc net.ListenConfig
	bound := make([]*boundListener, 0, len(s.cfg.Listeners))
	for _, l := range s.cfg.Listeners {
		ln, err := lc.Listen(context.Background(), "tcp", l.Address())
		if err != nil {
			for _, b := range bound {
				_ = b.ln.Close()
			}
			return fmt.Errorf("network: listen %s: %w", l, err)
		}
		bl := &boundListener{Listener: l, ln: ln, tls: s.cfg.TLS[l.Name], sasl: s.cfg.SASL[l.Name],
			controller: slices.ContainsFunc(s.cfg.ControllerListeners, func(n string) bool { return strings.EqualFold(n, l.Name) }),
			rate:       s.newRateMeter(),
			stats: listenerStats{throttleMs: s.newRateMeter(), throttles: s.newRateMeter(),
				ipThrottleMs: s.newRateMeter(), ipThrottles: s.newRateMeter()}}
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			bl.Port = a.Port
		}
		bound = append(bound, bl)
		s.log.Info("listening", "listener", l.Name, "address", ln.Addr().String(), "security_protocol", l.SecurityProtocol)
	}
	s.bound = bound
	return nil
}

// Addr returns the bound address of the named listener, or nil before
// Listen or for an unknown name.
func (s *Server) Addr(listener string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bound {
		if b.Name == listener {
			return b.ln.Addr()
		}
	}
	return nil
}

// BoundListeners returns the listeners with their bound ports (port 0
// resolved), for advertising; nil before Listen.
func (s *Server) BoundListeners() []Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Listener
	for _, b := range s.bound {
		out = append(out, b.Listener)
	}
	return out
}

// Serve accepts connections on every listener until Shutdown or Close and
// returns ErrServerClosed then, or the first fatal accept error once every
// listener has stopped.
//
// Concurrency: call once; blocks. Connections are served on goroutines the
// Server owns and stops in Shutdown.
func (s *Server) Serve() error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.serving {
		s.mu.Unlock()
		return errors.New("network: Serve called twice")
	}
	s.serving = true
	for _, b := range s.bound {
		s.acceptWG.Add(1)
		go s.acceptLoop(b)
	}
	s.mu.Unlock()
	s.acceptWG.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrServerClosed
	}
	return s.acceptErr
}

// acceptLoop accepts connections on one listener until it is closed.
func (s *Server) acceptLoop(b *boundListener) {
	defer s.acceptWG.Done()
	var backoff time.Duration
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporaryAcceptError(err) {
				// EMFILE and friends: back off as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "listener", b.Name, "error", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-s.drain:
					return
				}
				continue
			}
			s.log.Error("accept failed; listener stopped", "listener", b.Name, "error", err)
			s.mu.Lock()
			if s.acceptErr == nil {
				s.acceptErr = fmt.Errorf("network: accept on %s: %w", b.Listener, err)
			}
			s.mu.Unlock()
			return
		}
		backoff = 0
		// As Kafka's acceptor, hold the connection accepted until the
		// listener has a slot for it, accepting no other meanwhile.
		if !s.waitForSlot(b) {
			_ = nc.Close()
			return
		}
		s.admit(nc, b)
	}
}

// waitForSlot waits until listener b may admit the connection it has just
// accepted, under max.connections and its own listener limit (Kafka's
// ConnectionQuotas.waitForConnectionSlot); false once the server closes.
func (s *Server) waitForSlot(b *boundListener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The connection counts toward the creation rates first, then waits
	// out their throttle, as Kafka's acceptor does.
	now := time.Now()
	defer func() {
		if !b.stats.blockedSince.IsZero() {
			b.stats.blocked += time.Since(b.stats.blockedSince)
			b.stats.blockedSince = time.Time{}
		}
	}()
	if throttle := s.recordConnection(b, now); throttle > 0 {
		b.stats.blockedSince = now
		recordThrottle(b.stats.throttleMs, b.stats.throttles, throttle, now)
		until := now.Add(throttle)
		timer := time.AfterFunc(throttle, func() {
			s.mu.Lock()
			s.slotFreed.Broadcast()
			s.mu.Unlock()
		})
		defer timer.Stop()
		if now.Sub(b.rateLogged) >= limitLogEvery {
			b.rateLogged = now
			s.log.Warn("connection creation rate over its limit: the listener holds new connections back",
				"listener", b.Name, "throttle", throttle)
		}
		for !s.closing && time.Now().Before(until) {
			s.slotFreed.Wait()
		}
	}
	waited := false
	for !s.closing && !s.slotAvailable(b) {
		if !waited {
			waited = true
			if b.stats.blockedSince.IsZero() {
				b.stats.blockedSince = now
			}
			// Once per limitLogEvery per listener: a listener kept at its
			// limit waits once per connection closed.
			if now := time.Now(); now.Sub(b.limitLogged) >= limitLogEvery {
				b.limitLogged = now
				s.log.Warn("connection limit reached: the listener accepts no more connections until one closes",
					"listener", b.Name, "open", b.open, "limit", s.limitName(b))
			}
		}
		s.slotFreed.Wait()
	}
	if waited && !s.closing {
		s.log.Debug("accepting connections again", "listener", b.Name, "open", b.open)
	}
	return !s.closing
}

// limitLogEvery spaces a listener's "connection limit reached" warnings.
const limitLogEvery = 30 * time.Second

// newRateMeter measures a creation rate over ConnectionRateWindows.
func (s *Server) newRateMeter() *RateMeter {
	return NewRateMeter(s.rateWindows())
}

// rateWindows is ConnectionRateWindows, or its default: 11 windows of a
// second.
func (s *Server) rateWindows() (samples int, window time.Duration) {
	if w := s.cfg.ConnectionRateWindows; w.Samples > 0 && w.Window > 0 {
		return w.Samples, w.Window
	}
	return 11, time.Second
}

// recordConnection counts a connection b accepted toward its listener's
// creation rate and, unless b is the protected listener, its side's, and
// returns how long the rates it is limited by stay over their limits.
// s.mu is held.
func (s *Server) recordConnection(b *boundListener, now time.Time) time.Duration {
	b.rate.Record(1, now)
	var throttle time.Duration
	if n, ok := s.listenerRate(b); ok && n > 0 {
		throttle = b.rate.BoundedThrottle(b.rate.Rate(now), float64(n), s.maxConnectionThrottle())
	}
	if s.protected(b) {
		return throttle
	}
	side := s.sideRate[0]
	if b.controller {
		side = s.sideRate[1]
	}
	side.Record(1, now)
	if n := s.cfg.MaxConnectionCreationRate; n > 0 {
		throttle = max(throttle, side.BoundedThrottle(side.Rate(now), float64(n), s.maxConnectionThrottle()))
	}
	return throttle
}

// maxConnectionThrottle bounds a connection's throttle: one window
// (Kafka's quota.window.size.seconds), as Kafka's ConnectionQuotas bound
// theirs.
func (s *Server) maxConnectionThrottle() time.Duration {
	_, window := s.rateWindows()
	return window
}

// throttleIP counts a connection from ip, accepted by broker listener b,
// toward its address's connection_creation_rate quota, if it has one, and
// returns how long to hold it before closing it when that puts the
// address over its quota (Kafka's recordIpConnectionMaybeThrottle). A
// throttled connection is taken back out of every rate it was counted in:
// it is not accepted. s.mu is held.
func (s *Server) throttleIP(b *boundListener, ip netip.Addr, now time.Time) time.Duration {
	if b.controller || len(s.cfg.IPConnectionCreationRates) == 0 {
		return 0
	}
	ip = ip.WithZone("")
	quota, ok := s.cfg.IPConnectionCreationRates[ip]
	if !ok {
		if quota, ok = s.cfg.IPConnectionCreationRates[netip.Addr{}]; !ok {
			return 0
		}
	}
	m := s.ipRate[ip]
	if m == nil {
		s.sweepIPRates(now)
		m = s.newRateMeter()
		s.ipRate[ip] = m
	}
	m.Record(1, now)
	throttle := m.BoundedThrottle(m.Rate(now), float64(quota), s.maxConnectionThrottle())
	if throttle <= 0 {
		return 0
	}
	recordThrottle(b.stats.ipThrottleMs, b.stats.ipThrottles, throttle, now)
	m.Record(-1, now)
	b.rate.Record(-1, now)
	if !s.protected(b) {
		s.sideRate[0].Record(-1, now)
	}
	if now.Sub(s.ipRateLogged) >= limitLogEvery {
		s.ipRateLogged = now
		s.log.Warn("client address over its connection_creation_rate quota: its new connections are closed after a throttle",
			"listener", b.Name, "address", ip.String(), "quota", quota, "throttle", throttle)
	}
	return throttle
}

// sweepIPRates drops, at most once a measuring span, the meters of client
// addresses that opened no connection within it or no longer have a
// quota. s.mu is held.
func (s *Server) sweepIPRates(now time.Time) {
	// Every meter measures over the same windows: the side's span is theirs.
	if len(s.ipRate) == 0 || now.Sub(s.ipRateSwept) < s.sideRate[0].Span() {
		return
	}
	s.ipRateSwept = now
	_, hasDefault := s.cfg.IPConnectionCreationRates[netip.Addr{}]
	for ip, m := range s.ipRate {
		if _, own := s.cfg.IPConnectionCreationRates[ip]; m.Idle(now) || !own && !hasDefault {
			delete(s.ipRate, ip)
		}
	}
}

// closeThrottled holds nc, a connection over its address's
// connection_creation_rate, for throttle and then closes it, unread: the
// client's reconnect waits that long (Kafka's delayed close of throttled
// sockets). Server close closes it at once. s.mu is held.
func (s *Server) closeThrottled(nc net.Conn, throttle time.Duration) {
	s.throttled[nc] = time.AfterFunc(throttle, func() {
		s.mu.Lock()
		_, held := s.throttled[nc]
		delete(s.throttled, nc)
		s.mu.Unlock()
		if held {
			_ = nc.Close()
		}
	})
}

// listenerRate is b's listener.name.<listener>.max.connection.creation.rate,
// if set. s.mu is held.
func (s *Server) listenerRate(b *boundListener) (int, bool) {
	return listenerValue(s.cfg.MaxListenerConnectionCreationRate, b)
}

// slotAvailable reports whether listener b is under its own limit and,
// unless it is the protected inter-broker listener, its side (the
// broker's listeners or the controller's) under max.connections; a
// listener whose creation rate is 0 takes none. s.mu is held.
func (s *Server) slotAvailable(b *boundListener) bool {
	if n, ok := s.listenerLimit(b); ok && b.open >= n {
		return false
	}
	if n, ok := s.listenerRate(b); ok && n == 0 {
		return false
	}
	n, limited := s.maxConnections(b)
	if !limited || s.protected(b) {
		return true
	}
	open, _ := s.sideCount(b)
	return open < n
}

// maxConnections is max.connections for b's side, if it has one (see
// Config.MaxConnections). s.mu is held.
func (s *Server) maxConnections(b *boundListener) (int, bool) {
	switch n := s.cfg.MaxConnections; {
	case n > 0:
		return n, true
	case n < 0 && !b.controller:
		return 0, true
	}
	return 0, false
}

// limitName names the limit b waits at, for the log. s.mu is held.
func (s *Server) limitName(b *boundListener) string {
	if n, ok := s.listenerRate(b); ok && n == 0 {
		return "listener.name." + strings.ToLower(b.Name) + ".max.connection.creation.rate=0"
	}
	if n, ok := s.listenerLimit(b); ok && b.open >= n {
		return "listener.name." + strings.ToLower(b.Name) + ".max.connections=" + strconv.Itoa(n)
	}
	n, _ := s.maxConnections(b)
	return "max.connections=" + strconv.Itoa(n)
}

// listenerLimit is b's listener.name.<listener>.max.connections, if set.
// s.mu is held.
func (s *Server) listenerLimit(b *boundListener) (int, bool) {
	return listenerValue(s.cfg.MaxListenerConnections, b)
}

// listenerValue is b's value in a map by listener name (any case), at
// least 0, if it has one.
func listenerValue(byListener map[string]int, b *boundListener) (int, bool) {
	for name, n := range byListener {
		if strings.EqualFold(name, b.Name) {
			return max(n, 0), true
		}
	}
	return 0, false
}

// sideCount counts the open connections of b's side — the controller's
// listeners or the broker's — and its listeners. s.mu is held.
func (s *Server) sideCount(b *boundListener) (open, listeners int) {
	for _, o := range s.bound {
		if o.controller == b.controller {
			open += o.open
			listeners++
		}
	}
	return open, listeners
}

// protected reports whether b is the inter-broker listener and the broker
// has other listeners (Kafka's ConnectionQuotas.protectedListener). s.mu
// is held.
func (s *Server) protected(b *boundListener) bool {
	if b.controller || s.cfg.ProtectedListener == "" || !strings.EqualFold(b.Name, s.cfg.ProtectedListener) {
		return false
	}
	_, listeners := s.sideCount(b)
	return listeners > 1
}

// closeExcess closes, while b's side is over max.connections (the
// protected listener accepted at the limit), the least recently active
// connection of another listener, as Kafka's processors do. s.mu is held.
func (s *Server) closeExcess(b *boundListener) []*conn {
	var victims []*conn
	open, _ := s.sideCount(b)
	for c := range s.conns {
		if c.bl.controller == b.controller && c.ctx.Err() != nil {
			open-- // closed already, not yet forgotten
		}
	}
	for {
		if n, limited := s.maxConnections(b); !limited || open-len(victims) <= n {
			return victims
		}
		var lru *conn
		var lruAt int64
		for c := range s.conns {
			if c.bl == b || c.bl.controller != b.controller || c.ctx.Err() != nil || slices.Contains(victims, c) {
				continue
			}
			at := max(c.lastRead.ns.Load(), c.lastWrite.ns.Load())
			if lru == nil || at < lruAt {
				lru, lruAt = c, at
			}
		}
		if lru == nil {
			return victims
		}
		victims = append(victims, lru)
	}
}

// admit starts serving an accepted connection, or closes it when the server
// is closing or its client address is at max.connections.per.ip, or after
// a throttle when the address is over its connection_creation_rate.
func (s *Server) admit(nc net.Conn, b *boundListener) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	ip := remoteIP(nc)
	if throttle := s.throttleIP(b, ip, time.Now()); throttle > 0 {
		s.closeThrottled(nc, throttle)
		s.mu.Unlock()
		return
	}
	if limit, limited := s.perIPLimit(ip); limited && s.perIP[ip] >= limit {
		s.mu.Unlock()
		s.log.Warn("refusing connection: max.connections.per.ip reached", "listener", b.Name, "remote", nc.RemoteAddr().String(), "max_connections_per_ip", limit)
		_ = nc.Close()
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		if n := s.cfg.SocketSendBufferBytes; n > 0 {
			_ = tc.SetWriteBuffer(n)
		}
		if n := s.cfg.SocketReceiveBufferBytes; n > 0 {
			_ = tc.SetReadBuffer(n)
		}
	}
	if b.tls != nil {
		nc = tls.Server(nc, b.tls.Config)
	}
	c := newConn(s, nc, b, s.connSeq.Add(1)-1)
	c.ip = ip
	s.conns[c] = struct{}{}
	s.perIP[ip]++
	b.open++
	b.stats.created++
	var victims []*conn
	if s.protected(b) {
		victims = s.closeExcess(b)
	}
	maxConns, _ := s.maxConnections(b)
	s.connWG.Add(1)
	s.mu.Unlock()
	for _, v := range victims {
		s.log.Warn("closing the least recently active connection: max.connections reached and the inter-broker listener needs a slot",
			"listener", v.bl.Name, "remote", v.info.RemoteAddr.String(), "max_connections", maxConns)
		v.close(errMaxConnections)
	}
	go c.serve()
}

// errMaxConnections closes a connection to make room on the inter-broker
// listener.
var errMaxConnections = errors.New("closed for the inter-broker listener: max.connections reached")

// forget stops tracking c (closed, or handed off to Raft).
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
			delete(s.perIP, c.ip)
		}
		c.bl.open--
		c.bl.stats.closed++
		s.slotFreed.Broadcast()
	}
	s.mu.Unlock()
}

// ConnectionLimits are the connection limits that may change at runtime
// (dynamic broker configs), as Config's fields of the same names.
type ConnectionLimits struct {
	MaxConnections                    int
	MaxListenerConnections            map[string]int
	MaxConnectionCreationRate         int
	MaxListenerConnectionCreationRate map[string]int
	MaxConnectionsPerIP               int
	MaxConnectionsPerIPOverrides      map[netip.Addr]int
}

// SetIPConnectionCreationRates replaces the ip entities'
// connection_creation_rate quotas (Config.IPConnectionCreationRates). A
// connection already held for its throttle is still closed.
func (s *Server) SetIPConnectionCreationRates(rates map[netip.Addr]int) {
	s.mu.Lock()
	s.cfg.IPConnectionCreationRates = rates
	s.ipRateSwept = time.Time{} // drop the meters of addresses no longer limited
	s.sweepIPRates(time.Now())
	s.mu.Unlock()
}

// SetConnectionLimits changes max.connections, the listeners' own limits,
// max.connections.per.ip and its overrides. Connections already open stay,
// as in Kafka; a new one is admitted against the new limits, and listeners
// waiting at a limit raised accept again.
func (s *Server) SetConnectionLimits(l ConnectionLimits) {
	s.mu.Lock()
	s.cfg.MaxConnections, s.cfg.MaxListenerConnections = l.MaxConnections, l.MaxListenerConnections
	s.cfg.MaxConnectionCreationRate, s.cfg.MaxListenerConnectionCreationRate = l.MaxConnectionCreationRate, l.MaxListenerConnectionCreationRate
	s.cfg.MaxConnectionsPerIP, s.cfg.MaxConnectionsPerIPOverrides = l.MaxConnectionsPerIP, l.MaxConnectionsPerIPOverrides
	s.slotFreed.Broadcast()
	s.mu.Unlock()
}

// perIPLimit is the connection limit of a client address, and whether it
// has one (max.connections.per.ip and its overrides).
func (s *Server) perIPLimit(ip netip.Addr) (int, bool) {
	if n, ok := s.cfg.MaxConnectionsPerIPOverrides[ip]; ok {
		return n, true
	}
	switch n := s.cfg.MaxConnectionsPerIP; {
	case n > 0:
		return n, true
	case n < 0:
		return 0, true
	}
	return 0, false
}

// remoteIP is a connection's client address, IPv4-mapped IPv6 addresses
// as IPv4, as Kafka's InetAddress compares them; the zero Addr when the
// connection is not over IP.
func remoteIP(nc net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// draining reports whether shutdown has begun.
func (s *Server) draining() bool {
	select {
	case <-s.drain:
		return true
	default:
		return false
	}
}

// NumConnections returns the number of Kafka connections being served.
func (s *Server) NumConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Authentications counts, per listener name, the connections that
// authenticated and that failed to since the server started (Kafka's
// socket-server-metrics successful-authentication-total and
// failed-authentication-total): TLS handshakes on SSL listeners, SASL
// exchanges on SASL_PLAINTEXT and SASL_SSL ones; none on PLAINTEXT.
func (s *Server) Authentications() (ok, failed map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, failed = map[string]int64{}, map[string]int64{}
	for _, b := range s.bound {
		ok[b.Name] += b.authOK.Load()
		failed[b.Name] += b.authFailed.Load()
	}
	return ok, failed
}

// Reauthentications counts SASL re-authentications per listener name
// since the server started (KIP-368; Kafka's socket-server-metrics
// successful-reauthentication-total, failed-reauthentication-total and
// expired-connections-killed-count): the sessions renewed, the attempts
// that failed, and the connections closed because their session had
// expired.
func (s *Server) Reauthentications() (ok, failed, expired map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, failed, expired = map[string]int64{}, map[string]int64{}, map[string]int64{}
	for _, b := range s.bound {
		ok[b.Name] += b.reauthOK.Load()
		failed[b.Name] += b.reauthFailed.Load()
		expired[b.Name] += b.expiredKilled.Load()
	}
	return ok, failed, expired
}

// ConnectionsByListener returns the number of Kafka connections being
// served on each listener with any (Kafka's socket-server-metrics
// connection-count).
func (s *Server) ConnectionsByListener() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for c := range s.conns {
		out[c.info.Listener]++
	}
	return out
}

// Shutdown stops accepting, stops reading new requests, lets requests in
// flight finish and their responses be written, then closes every
// connection. If ctx ends first, the remaining connections are closed at
// once (their handlers' contexts are cancelled) and ctx's error is
// returned. Either way every goroutine the Server started has exited when
// Shutdown returns, except a handler stuck in Handle, which is waited for.
//
// Concurrency: safe from any goroutine, and more than once (later calls
// wait like the first).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.slotFreed.Broadcast()
		close(s.drain)
		for _, b := range s.bound {
			_ = b.ln.Close()
		}
		for nc, timer := range s.throttled {
			timer.Stop()
			_ = nc.Close()
		}
		clear(s.throttled)
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	// Wake readers blocked in Read; they see drain and stop reading.
	for _, c := range conns {
		c.wakeReader()
	}
	s.acceptWG.Wait()

	done := make(chan struct{})
	go func() { // exits once every connection goroutine has
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	conns = conns[:0]
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if len(conns) > 0 {
		s.log.Warn("shutdown deadline passed; closing connections with requests in flight", "connections", len(conns))
	}
	for _, c := range conns {
		c.close(errForcedShutdown)
	}
	<-done
	return ctx.Err()
}

// Close closes every listener and connection at once, without draining.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// connID formats a Kafka-style connection id.
func connID(nc net.Conn, seq uint64) string {
	return nc.LocalAddr().String() + "-" + nc.RemoteAddr().String() + "-" + strconv.FormatUint(seq, 10)
}
