package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/keelstream/keel/network"
)

// kafkaConn is the minimal Kafka-protocol client one node uses to talk to
// another (a broker to the active controller): one connection, one request
// at a time, versions fixed at the newest kmsg knows (both ends are Keel
// and decode with the same kmsg). Safe for concurrent use: requests take
// turns.
type kafkaConn struct {
	addr     string
	clientID string

	// turn holds a token while a request is in flight. A request waiting
	// for its turn gives up when its context ends, where a mutex would
	// hold it (a broker's heartbeat, say) for as long as the request
	// ahead (a 30-second voter change) takes.
	turn chan struct{}
	dial DialFunc
	// receiveBuffer, when positive, is the SO_RCVBUF its dials set before
	// connecting (a follower's replica.socket.receive.buffer.bytes).
	receiveBuffer int
	// closed is set by close: the connection is closed by whoever holds
	// the turn next, or at once when nobody does.
	closed atomic.Bool
	conn   net.Conn // the fields below belong to the holder of turn
	rd     *bufio.Reader
	corr   int32
}

// newKafkaConn returns a connection to addr, opened with dial when first
// used (nil: plain TCP).
func newKafkaConn(addr, clientID string, dial DialFunc) *kafkaConn {
	if dial == nil {
		dial = dialTCP
	}
	return &kafkaConn{addr: addr, clientID: clientID, dial: dial, turn: make(chan struct{}, 1)}
}

// DialFunc opens a connection to another node's listener: plain TCP, or
// TLS when that listener is SSL (DialTLS).
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if n, _ := ctx.Value(receiveBufferKey{}).(int); n > 0 {
		// Before connect, so that the window scale the SYN offers fits
		// the buffer (Kafka's Selector sets it there too).
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("set SO_RCVBUF to %d: %w", n, serr)
			}
			return nil
		}
	}
	return d.DialContext(ctx, "tcp", addr)
}

// receiveBufferKey carries a kafkaConn's receiveBuffer through a DialFunc
// (plain or TLS) to dialTCP.
type receiveBufferKey struct{}

// DialTLS dials with TLS configured by cfg (tlsconf's ClientConfig of the
// listener dialled, with this node's keystore as its client certificate).
// A cfg without a ServerName verifies the host dialled.
func DialTLS(cfg *tls.Config) DialFunc {
	return dialTLSFrom(func() *tls.Config { return cfg })
}

// dialTLSFrom is DialTLS with the configuration current at each dial: a
// listener's, which a dynamic keystore update replaces.
func dialTLSFrom(current func() *tls.Config) DialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		conf := current().Clone()
		if conf.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			conf.ServerName = host
		}
		nc, err := dialTCP(ctx, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		return tc, nil
	}
}

// maxInternalResponse bounds a response frame from another node.
const maxInternalResponse = 100 << 20

// request sends req and waits for its response, dialling if needed. Any
// transport error closes the connection so the next request redials.
func (c *kafkaConn) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s to %s: waiting for the request ahead: %w", kmsg.NameForKey(req.Key()), c.addr, ctx.Err())
	}
	defer c.release()
	if sc, ok := c.conn.(*saslConn); ok && sc.renewDue(time.Now()) {
		// Re-authenticating is reconnecting: a new connection gets a new
		// session (KIP-368 lets a client do either).
		c.conn.Close()
		c.conn, c.rd = nil, nil
	}
	if c.conn == nil {
		dctx := ctx
		if c.receiveBuffer > 0 {
			dctx = context.WithValue(ctx, receiveBufferKey{}, c.receiveBuffer)
		}
		conn, err := c.dial(dctx, c.addr)
		if err != nil {
			if !strings.Contains(err.Error(), c.addr) { // "dial tcp <addr>: ..." names it
				err = fmt.Errorf("dial %s: %w", c.addr, err)
			}
			return nil, err
		}
		c.conn, c.rd = conn, bufio.NewReader(conn)
	}
	resp, err := c.roundTrip(ctx, c.conn, req)
	if err != nil || ctx.Err() != nil {
		// Once ctx is done, its callback may put the connection's
		// deadline in the past at any moment, even after a response
		// arrived whole: the connection is not used again.
		c.conn.Close()
		c.conn, c.rd = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return resp, nil
}

// roundTrip takes conn as an argument rather than reading c.conn: the
// cancellation callback may still run after request has closed the connection
// and cleared c.conn.
func (c *kafkaConn) roundTrip(ctx context.Context, conn net.Conn, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return c.exchange(conn, req)
}

// exchange writes req at the newest version kmsg knows and reads its
// response, within the deadline the caller has set on conn.
func (c *kafkaConn) exchange(conn net.Conn, req kmsg.Request) (kmsg.Response, error) {
	req.SetVersion(req.MaxVersion())
	c.corr++
	frame := make([]byte, 4, 256)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(c.corr))
	frame = binary.BigEndian.AppendUint16(frame, uint16(len(c.clientID)))
	frame = append(frame, c.clientID...)
	if req.IsFlexible() {
		frame = append(frame, 0) // no header tags
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.rd, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxInternalResponse {
		return nil, fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.rd, body); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, c.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = network.SkipTags(body); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return resp, nil
}

// close drops the connection. It never waits for a request in flight (a forwarded request may take 30
// seconds, and its closer may hold a lock others need): that request
// closes the connection when it ends.
func (c *kafkaConn) close() {
	c.closed.Store(true)
	c.tryClose()
}

// release ends a request's turn; after close, the connection goes too.
func (c *kafkaConn) release() {
	<-c.turn
	if c.closed.Load() {
		c.tryClose()
	}
}

// tryClose closes the connection if no request holds the turn; one that
// does closes it in release.
func (c *kafkaConn) tryClose() {
	select {
	case c.turn <- struct{}{}:
		if c.conn != nil {
			c.conn.Close()
			c.conn, c.rd = nil, nil
		}
		<-c.turn
	default:
	}
}

// Request sends one request to the Kafka-protocol listener at addr on a
// fresh connection and returns the response: what the operator CLI uses
// until the client SDK exists. The newest version kmsg knows is used, so
// the peer should be Keel.
func Request(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	return RequestVia(ctx, nil, addr, req)
}

// RequestVia is Request over a connection dial opens (nil: plain TCP).
func RequestVia(ctx context.Context, dial DialFunc, addr string, req kmsg.Request) (kmsg.Response, error) {
	c := newKafkaConn(addr, "keel-cli", dial)
	defer c.close()
	return c.request(ctx, req)
}
