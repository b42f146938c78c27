package raftlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// RaftMarker is the first byte a Raft connection sends, so one listener can
// carry both Raft and the Kafka protocol (KRaft's controller listener does
// the same job with one protocol; we multiplex two).
//
// A Kafka request frame starts with its size as a 4-byte big-endian int32.
// Sizes are positive and a broker refuses any larger than
// socket.request.max.bytes (100 MiB = 0x06400000 by default, and nobody
// raises it near 0x07000000), so the first byte of a valid Kafka connection
// is 0x00..0x06. 0xFE can never start one; it is also not a TLS record type
// (a ClientHello starts with 0x16), so a future TLS listener classifies the
// same way.
const RaftMarker byte = 0xFE

// ClassifyTimeout bounds how long Classify waits for a connection's first
// byte. Kafka clients speak first (ApiVersions), and the Raft dialer writes
// the marker immediately, so only a silent peer waits this long.
const ClassifyTimeout = 10 * time.Second

// Classify reads the first byte of a freshly accepted connection (waiting at
// most ClassifyTimeout) and reports whether it is a Raft connection.
//
// For Raft, wrapped is conn positioned just after the marker: hand it to
// Mux.Handoff. Otherwise wrapped replays the byte it consumed and then reads
// from conn; it implements io.ReaderFrom by delegating to conn (so
// sendfile still applies to writes) and NetConn() returns conn. On error the
// caller still owns conn and should close it.
//
// Classify blocks on the network: call it from the connection's own
// goroutine, never from the accept loop.
func Classify(conn net.Conn) (isRaft bool, wrapped net.Conn, err error) {
	if err := conn.SetReadDeadline(time.Now().Add(ClassifyTimeout)); err != nil {
		return false, nil, fmt.Errorf("classify %s: %w", conn.RemoteAddr(), err)
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return false, nil, fmt.Errorf("classify %s: read first byte: %w", conn.RemoteAddr(), err)
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return false, nil, fmt.Errorf("classify %s: %w", conn.RemoteAddr(), err)
	}
	if b[0] == RaftMarker {
		return true, conn, nil
	}
	return false, &replayConn{Conn: conn, first: b[0], pending: true}, nil
}

// replayConn returns one already-read byte before reading from Conn. Like
// any net.Conn, one goroutine reads at a time.
type replayConn struct {
	net.Conn
	first   byte
	pending bool
}

func (c *replayConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0] = c.first
		c.pending = false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// ReadFrom writes r to the connection through the underlying conn's
// ReaderFrom (sendfile for an *os.File on a TCP conn).
func (c *replayConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

// NetConn returns the underlying connection (as tls.Conn.NetConn does).
func (c *replayConn) NetConn() net.Conn { return c.Conn }

// muxAddr is the advertised address of a Mux.
type muxAddr string

func (a muxAddr) Network() string { return "tcp" }
func (a muxAddr) String() string  { return string(a) }

// errMuxClosed is returned by Accept and Dial after Close.
var errMuxClosed = errors.New("raft mux closed")

// Mux is the raft.StreamLayer of a node whose listener belongs to someone
// else (the network layer, or Serve): the listener owner classifies each
// accepted connection and hands the Raft ones over with Handoff; Raft's
// transport Accepts them. Dial opens outgoing Raft connections, sending
// RaftMarker first.
//
// Every Raft connection it accepted or dialed is tracked and closed by
// Close, so closing a node leaves no connection (and no peer goroutine
// serving it) behind. All methods are safe for concurrent use.
type Mux struct {
	addr      muxAddr
	clusterID string
	// nodeID is this node's id, sent after the cluster id so that the
	// receiving side (its logs, a test's fault-injecting proxy) knows who
	// dialled; "" sends none.
	nodeID string
	// dial opens a connection to a peer: TCP, or TLS where the listener
	// dialled is SSL (SetDialer).
	dial   func(ctx context.Context, address string) (net.Conn, error)
	connCh chan net.Conn
	closed chan struct{}
	once   sync.Once

	mu    sync.Mutex // guards conns
	conns map[*trackedConn]struct{}
}

// NewMux returns a Mux advertising addr (host:port), the address other nodes
// dial to reach this one: Voters[NodeID] on a voter.
func NewMux(advertised string) *Mux { return NewClusterMux(advertised, "") }

// NewClusterMux is NewMux for a node of cluster clusterID: every Raft
// connection carries the cluster id after the marker, and one from another
// cluster is refused on its first read (KRaft checks the cluster id of every
// Vote and Fetch; a node formatted for another cluster must never vote or
// replicate here).
func NewClusterMux(advertised, clusterID string) *Mux {
	return &Mux{
		clusterID: clusterID,
		addr:      muxAddr(advertised),
		connCh:    make(chan net.Conn),
		closed:    make(chan struct{}),
		conns:     map[*trackedConn]struct{}{},
	}
}

// SetNodeID names this node in the hello of every Raft connection it dials
// from now on. Call it before the Raft transport starts.
func (m *Mux) SetNodeID(id int32) { m.nodeID = strconv.Itoa(int(id)) }

// Handoff passes a Raft connection (as returned by Classify, marker already
// consumed) to Raft. It blocks until Raft accepts it or the Mux closes, in
// which case it closes conn. The Mux owns conn from the call on.
func (m *Mux) Handoff(conn net.Conn) {
	m.handoff(&markedConn{Conn: conn, markerRead: true, clusterID: m.clusterID}, nil)
}

// HandoffWithMarker is Handoff for a connection that still starts with
// RaftMarker, such as the network layer's replay conn after it peeked at the
// first byte (network.ServerConfig.HandoffRaft). The marker is consumed
// lazily by Raft's own reader goroutine, so this blocks no longer than
// Handoff. A connection whose first byte is not the marker fails on its
// first read, which closes it.
func (m *Mux) HandoffWithMarker(conn net.Conn) {
	m.handoff(&markedConn{Conn: conn, clusterID: m.clusterID}, nil)
}

// IsRaftMarker reports whether a connection's first byte is RaftMarker;
// it fits network.ServerConfig.ConnClassifier.
func IsRaftMarker(first byte) bool { return first == RaftMarker }

// markedConn drops the leading RaftMarker and the cluster id on first read,
// refusing a connection from another cluster. One reader at a time, like
// any net.Conn.
type markedConn struct {
	net.Conn
	markerRead bool
	consumed   bool
	clusterID  string
}

func (c *markedConn) Read(p []byte) (int, error) {
	if !c.consumed {
		var b [1]byte
		if !c.markerRead {
			if _, err := io.ReadFull(c.Conn, b[:]); err != nil {
				return 0, err
			}
			if b[0] != RaftMarker {
				return 0, fmt.Errorf("raft connection from %s starts with %#x, not the marker %#x", c.RemoteAddr(), b[0], RaftMarker)
			}
			c.markerRead = true
		}
		if _, err := io.ReadFull(c.Conn, b[:]); err != nil {
			return 0, err
		}
		hello := make([]byte, b[0])
		if _, err := io.ReadFull(c.Conn, hello); err != nil {
			return 0, err
		}
		// The hello is the cluster id, then "/" and the dialling node's
		// id (cluster ids are base64url: no "/").
		id, node, _ := strings.Cut(string(hello), "/")
		if id != c.clusterID {
			return 0, fmt.Errorf("refusing raft connection from %s (node %q): it belongs to cluster %q, this node to %q: %w",
				c.RemoteAddr(), node, id, c.clusterID, ErrClusterIDMismatch)
		}
		c.consumed = true
	}
	return c.Conn.Read(p)
}

// handoff is Handoff that also gives up (closing conn) when abort closes.
func (m *Mux) handoff(conn net.Conn, abort <-chan struct{}) bool {
	tc := m.track(conn)
	if tc == nil {
		return false
	}
	select {
	case m.connCh <- tc:
		return true
	case <-m.closed:
	case <-abort:
	}
	_ = tc.Close()
	return false
}

// Accept returns the next handed-off Raft connection (raft.StreamLayer).
func (m *Mux) Accept() (net.Conn, error) {
	select {
	case c := <-m.connCh:
		return c, nil
	case <-m.closed:
		return nil, errMuxClosed
	}
}

// Close stops Accept and Dial and closes every Raft connection the Mux
// accepted or dialed. It is idempotent.
func (m *Mux) Close() error {
	m.once.Do(func() {
		m.mu.Lock()
		close(m.closed)
		conns := m.conns
		m.conns = nil
		m.mu.Unlock()
		for c := range conns {
			_ = c.Conn.Close()
		}
	})
	return nil
}

// SetDialer replaces how the Mux opens connections to peers (plain TCP by
// default): a node whose controller or inter-broker listener is SSL dials
// with TLS. Call it before Raft starts.
func (m *Mux) SetDialer(dial func(ctx context.Context, address string) (net.Conn, error)) {
	m.dial = dial
}

// Addr is the advertised address (raft.StreamLayer; Raft tells its peers
// this address as its own).
func (m *Mux) Addr() net.Addr { return m.addr }

// Dial opens a Raft connection to address and sends RaftMarker
// (raft.StreamLayer).
func (m *Mux) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-m.closed:
		return nil, errMuxClosed
	default:
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	dial := m.dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, address string) (net.Conn, error) { return d.DialContext(ctx, "tcp", address) }
	}
	conn, err := dial(ctx, string(address))
	if err != nil {
		return nil, fmt.Errorf("dial raft %s: %w", address, err)
	}
	if timeout > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	}
	payload := m.clusterID
	if m.nodeID != "" {
		payload += "/" + m.nodeID
	}
	hello := append([]byte{RaftMarker, byte(len(payload))}, payload...)
	if _, err := conn.Write(hello); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("dial raft %s: write marker: %w", address, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	tc := m.track(conn)
	if tc == nil {
		return nil, errMuxClosed
	}
	return tc, nil
}

// track registers conn, or closes it and returns nil if the Mux is closed.
func (m *Mux) track(conn net.Conn) *trackedConn {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		_ = conn.Close()
		return nil
	}
	tc := &trackedConn{Conn: conn, mux: m}
	m.conns[tc] = struct{}{}
	return tc
}

// trackedConn unregisters itself from its Mux when closed.
type trackedConn struct {
	net.Conn
	mux  *Mux
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.mux.mu.Lock()
		delete(c.mux.conns, c)
		c.mux.mu.Unlock()
	})
	return err
}

// Listener serves one TCP listener carrying both Raft and the Kafka
// protocol: it classifies every accepted connection, hands Raft ones to a
// Mux and Kafka ones to a callback. It stands in for the network layer in
// tests and tools; the broker's network layer does the same with Classify
// and Mux.Handoff.
type Listener struct {
	ln    net.Listener
	mux   *Mux
	kafka func(net.Conn)

	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup // the accept loop and one goroutine per connection being classified

	mu      sync.Mutex // guards pending
	pending map[net.Conn]struct{}
}

// Serve starts accepting on ln. Raft connections go to mux; other
// connections go to kafka (which then owns them, and should hand them to
// its own goroutine and return) or are closed if kafka is nil. The Listener
// owns ln and closes it in Close.
func Serve(ln net.Listener, mux *Mux, kafka func(net.Conn)) *Listener {
	l := &Listener{ln: ln, mux: mux, kafka: kafka, closed: make(chan struct{}), pending: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting, closes connections not yet classified or handed
// off, and waits for its goroutines (including kafka callbacks) to return.
// It does not close the Mux or connections already handed off.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		err = l.ln.Close()
		l.mu.Lock()
		for c := range l.pending {
			_ = c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return err
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		l.mu.Lock()
		select {
		case <-l.closed:
			l.mu.Unlock()
			_ = conn.Close()
			return
		default:
		}
		l.pending[conn] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serveConn(conn)
	}
}

func (l *Listener) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

func (l *Listener) serveConn(conn net.Conn) {
	defer l.wg.Done()
	isRaft, wrapped, err := Classify(conn)
	l.mu.Lock()
	delete(l.pending, conn)
	l.mu.Unlock()
	switch {
	case err != nil:
		_ = conn.Close()
	case isRaft:
		l.mux.handoff(&markedConn{Conn: wrapped, markerRead: true, clusterID: l.mux.clusterID}, l.closed)
	case l.kafka != nil && !l.isClosed():
		l.kafka(wrapped)
	default:
		_ = conn.Close()
	}
}
