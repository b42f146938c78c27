package integration

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ClientSource is the source of a connection that is not another node's
// (a test's producer or consumer).
const ClientSource int32 = -1

// Network is a fault-injecting TCP proxy in front of every listener of a
// multi-process cluster. Each node advertises its proxies' addresses, so all
// traffic between nodes (Raft, broker heartbeats, follower fetches) and from
// clients passes through them, and a test can cut, black-hole one way, or
// delay the traffic of any link between two nodes.
//
// A proxy knows the destination node (the listener it fronts) and learns
// the source from the connection's first bytes: a Raft hello names the
// dialling node after the cluster id ("<cluster>/<node>"), and Keel's
// internal Kafka clients name it in their client id
// ("keel-replica-fetcher-<node>", "keel-node-<node>"). Anything else is a
// client (ClientSource).
//
// Faults behave like a partition, not like a refusal: the bytes of a cut
// direction are held back (never delivered), so peers see timeouts; Heal
// closes the connections that lost bytes, so peers reconnect cleanly.
//
// Concurrency: safe for concurrent use; Close stops every proxy goroutine.
type Network struct {
	mu      sync.Mutex
	down    map[link]bool          // direction from→to held back
	delay   map[link]time.Duration // added to every chunk from→to
	conns   map[*proxyConn]struct{}
	proxies []*proxy
	closed  bool
	wg      sync.WaitGroup
}

// link is one direction between two nodes (or a client and a node).
type link struct{ from, to int32 }

// NewNetwork returns a Network with no proxy and no fault.
func NewNetwork() *Network {
	return &Network{down: map[link]bool{}, delay: map[link]time.Duration{}, conns: map[*proxyConn]struct{}{}}
}

// Listen starts a proxy on a free loopback port for node dst's listener at
// target, and returns the proxy's address.
func (n *Network) Listen(dst int32, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p := &proxy{net: n, dst: dst, target: target, ln: ln}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		ln.Close()
		return "", errors.New("network closed")
	}
	n.proxies = append(n.proxies, p)
	n.wg.Add(1)
	n.mu.Unlock()
	go p.serve()
	return ln.Addr().String(), nil
}

// CutOneWay holds back every byte sent from node from to node to (both on
// connections from dials to to, and on responses of connections to dials
// from).
func (n *Network) CutOneWay(from, to int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[link{from, to}] = true
}

// Cut holds back traffic both ways between a and b.
func (n *Network) Cut(a, b int32) {
	n.CutOneWay(a, b)
	n.CutOneWay(b, a)
}

// Isolate cuts node id from every node in others (clients still reach it).
func (n *Network) Isolate(id int32, others ...int32) {
	for _, o := range others {
		if o != id {
			n.Cut(id, o)
		}
	}
}

// Delay adds d to every chunk of bytes sent from node from to node to.
func (n *Network) Delay(from, to int32, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay[link{from, to}] = d
}

// Heal removes every fault and closes the connections that lost bytes.
func (n *Network) Heal() {
	n.mu.Lock()
	n.down = map[link]bool{}
	n.delay = map[link]time.Duration{}
	var broken []*proxyConn
	for c := range n.conns {
		if c.lost.Load() {
			broken = append(broken, c)
		}
	}
	n.mu.Unlock()
	for _, c := range broken {
		c.close()
	}
}

// Close stops every proxy and closes every connection through them.
func (n *Network) Close() {
	n.mu.Lock()
	n.closed = true
	proxies := n.proxies
	conns := make([]*proxyConn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	for _, p := range proxies {
		p.ln.Close()
	}
	for _, c := range conns {
		c.close()
	}
	n.wg.Wait()
}

// Links counts the open connections per "from->to" link (from -1 is a
// client), for test logs.
func (n *Network) Links() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for c := range n.conns {
		out[fmt.Sprintf("%d->%d", c.link.from, c.link.to)]++
	}
	return out
}

// fault is the state of one direction now.
func (n *Network) fault(l link) (down bool, delay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down[l], n.delay[l]
}

// proxy fronts one listener of node dst.
type proxy struct {
	net    *Network
	dst    int32
	target string
	ln     net.Listener
}

func (p *proxy) serve() {
	defer p.net.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.net.wg.Add(1)
		go p.handle(c)
	}
}

// handle identifies the source of an accepted connection, dials the
// target and pumps bytes both ways through the fault rules.
func (p *proxy) handle(in net.Conn) {
	defer p.net.wg.Done()
	br := bufio.NewReaderSize(in, 4096)
	_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
	src := identifySource(br)
	_ = in.SetReadDeadline(time.Time{})
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The node is down: reset, as its refused dial would have been.
		// A clean close reads as an EOF answer to ApiVersions, which kgo
		// takes for a TLS mismatch and fails records on without retry.
		if tc, ok := in.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		in.Close()
		return
	}
	c := &proxyConn{in: in, out: out, link: link{src, p.dst}}
	p.net.mu.Lock()
	if p.net.closed {
		p.net.mu.Unlock()
		c.close()
		return
	}
	p.net.conns[c] = struct{}{}
	p.net.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(c, br, out, link{src, p.dst}) }()
	go func() { defer wg.Done(); p.pump(c, out, in, link{p.dst, src}) }()
	wg.Wait()
	c.close()
	p.net.mu.Lock()
	delete(p.net.conns, c)
	p.net.mu.Unlock()
}

// pump copies r to w chunk by chunk, holding back chunks while the link is
// down (they are lost: the connection is marked for closing on Heal) and
// delaying them as asked.
func (p *proxy) pump(c *proxyConn, r io.Reader, w net.Conn, l link) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			down, delay := p.net.fault(l)
			if down || c.lost.Load() {
				// A partitioned link delivers nothing more on this
				// connection, ever: TCP cannot skip lost bytes.
				c.lost.Store(true)
			} else {
				if delay > 0 {
					time.Sleep(delay)
				}
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, syscall.ECONNRESET) {
				// Pass a reset on as a reset: a clean close would read
				// as an answer, and an EOF in place of a node's
				// ApiVersions answer makes kgo fail records without
				// retry (see handle).
				if tc, ok := w.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
			}
			return
		}
	}
}

// proxyConn is one proxied connection.
type proxyConn struct {
	in, out net.Conn
	link    link        // who dialled whom
	lost    atomic.Bool // bytes were held back: unusable after Heal
	once    sync.Once
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		c.in.Close()
		c.out.Close()
	})
}

// identifySource peeks at a connection's first bytes (without consuming
// them) for the node that dialled it.
func identifySource(br *bufio.Reader) int32 {
	first, err := br.Peek(1)
	if err != nil {
		return ClientSource
	}
	if first[0] == 0xFE { // raftlog.RaftMarker, then a length-prefixed hello
		hdr, err := br.Peek(2)
		if err != nil {
			return ClientSource
		}
		hello, err := br.Peek(2 + int(hdr[1]))
		if err != nil {
			return ClientSource
		}
		_, node, ok := strings.Cut(string(hello[2:]), "/")
		if !ok {
			return ClientSource
		}
		return parseNodeID(node)
	}
	// A Kafka request: size, key, version, correlation id, client id.
	hdr, err := br.Peek(14)
	if err != nil {
		return ClientSource
	}
	n := int(int16(binary.BigEndian.Uint16(hdr[12:14])))
	if n <= 0 || n > 1024 {
		return ClientSource
	}
	b, err := br.Peek(14 + n)
	if err != nil {
		return ClientSource
	}
	clientID := string(b[14:])
	for _, prefix := range []string{"keel-replica-fetcher-", "keel-node-"} {
		if rest, ok := strings.CutPrefix(clientID, prefix); ok {
			return parseNodeID(rest)
		}
	}
	return ClientSource
}

func parseNodeID(s string) int32 {
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return ClientSource
	}
	return int32(id)
}
