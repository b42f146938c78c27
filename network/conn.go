package network

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// readBufferSize is each connection's read buffer: small pipelined requests
// are read with one syscall for several; large frames bypass it.
const readBufferSize = 16 << 10

// Reasons a connection closes, for logs and tests.
var (
	errFrameSize      = errors.New("request size outside 0..socket.request.max.bytes")
	errIdle           = errors.New("idle for connections.max.idle.ms")
	errDraining       = errors.New("server shutting down")
	errForcedShutdown = errors.New("shutdown deadline passed")
	errHandlerPanic   = errors.New("handler panicked")
)

// conn is one client connection. Two goroutines serve it: the reader
// (serve → readLoop), which owns br, dec and the frame buffers and calls the
// Handler, and the writer (writeLoop), which alone writes to nc. They meet
// only in the responseQueue, through which responses keep request order.
//
// Lifetime: the reader goroutine owns the connection. It starts the writer,
// and before exiting waits for it, closes nc and removes the connection
// from the Server.
type conn struct {
	srv      *Server
	bl       *boundListener
	ip       netip.Addr    // the client's address (max.connections.per.ip)
	nc       net.Conn      // a *tls.Conn on an SSL listener
	tls      *TLSListener  // SSL and SASL_SSL listeners only
	sasl     *SASLListener // SASL listeners only
	info     *ConnInfo
	log      hclog.Logger
	versions VersionRange

	// ctx is given to handlers; cancel is called by close.
	ctx    context.Context
	cancel context.CancelFunc

	br        *bufio.Reader  // reader goroutine only
	dec       requestDecoder // reader goroutine only
	saslState saslState      // reader goroutine only
	q         responseQueue
	// dout is the encode buffer of direct writes (direct.go), owned by
	// whoever set q.direct.
	dout outbound

	// lastRead and lastWrite are when bytes were last read (by the reader)
	// and written (by the writer); writing is set while the writer is in a
	// write. The reader uses them for connections.max.idle.ms.
	lastRead, lastWrite atomicTime
	writing             atomic.Bool

	closeOnce  sync.Once
	writerDone chan struct{}
	// handedOff is set by the reader when it gave the connection to Raft
	// after SASL authentication (classifyAfterSASL).
	handedOff bool
}

func newConn(s *Server, nc net.Conn, b *boundListener, seq uint64) *conn {
	info := &ConnInfo{
		ID:               connID(nc, seq),
		Listener:         b.Name,
		SecurityProtocol: b.SecurityProtocol,
		LocalAddr:        nc.LocalAddr(),
		RemoteAddr:       nc.RemoteAddr(),
		Principal:        AnonymousPrincipal,
	}
	if h, _, err := net.SplitHostPort(info.RemoteAddr.String()); err == nil {
		info.RemoteHost = h
	}
	ctx, cancel := context.WithCancel(context.Background())
	handler, listener := s.cfg.Handler, b.Name
	c := &conn{
		srv:  s,
		bl:   b,
		nc:   nc,
		tls:  b.tls,
		sasl: b.sasl,
		info: info,
		log:  s.log.With("conn", info.ID, "listener", b.Name),
		versions: func(key int16) (int16, int16, bool) {
			if b.sasl != nil {
				if min, max, ok := saslVersions(key); ok {
					return min, max, true
				}
			}
			return handler.SupportedVersions(listener, key)
		},
		ctx:        ctx,
		cancel:     cancel,
		br:         bufio.NewReaderSize(nc, readBufferSize),
		writerDone: make(chan struct{}),
	}
	c.q.init(s.cfg.MaxInFlightRequests)
	now := time.Now()
	c.lastRead.store(now)
	c.lastWrite.store(now)
	return c
}

// serve runs the connection's reader goroutine.
func (c *conn) serve() {
	defer c.srv.connWG.Done()
	handedOff, writerStarted := false, false
	defer func() {
		if r := recover(); r != nil { // a bug, not bad input: decoders recover on their own
			c.log.Error("connection reader panicked; closing connection", "panic", r, "stack", string(debug.Stack()))
			c.close(errHandlerPanic)
		}
		if handedOff {
			return
		}
		if writerStarted {
			<-c.writerDone
		}
		c.close(nil)
		c.srv.forget(c)
	}()
	if idle := c.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(idle))
	}
	// Shutdown may have woken this reader before the deadline above was
	// set, overriding the wake-up: look again (see onReadTimeout).
	if c.srv.draining() {
		return
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := c.handshake(tc, c.tls); err != nil {
			if peerGone(err) {
				c.log.Debug("connection closed during the TLS handshake", "error", err)
			} else {
				c.bl.authFailed.Add(1)
				c.log.Info("closing connection: TLS handshake failed (failed authentication)", "remote", c.info.RemoteAddr.String(), "error", err)
			}
			return
		}
		if c.sasl == nil { // SASL_SSL authenticates with SASL
			c.bl.authOK.Add(1)
		}
		if idle := c.srv.cfg.ConnectionsMaxIdle; idle > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(idle))
		}
	}
	// On an SSL listener Raft comes in over TLS too: classified after the
	// handshake, handed off as the TLS connection. On a SASL listener it
	// comes once authenticated (readLoop).
	if c.srv.cfg.ConnClassifier != nil {
		var err error
		if handedOff, err = c.classify(); handedOff || err != nil {
			if err != nil {
				c.log.Debug("connection closed before its first byte", "error", err)
			}
			return
		}
	}
	c.srv.connWG.Add(1)
	writerStarted = true
	go c.writeLoop()
	graceful := c.readLoop()
	if c.handedOff {
		handedOff, writerStarted = true, false // the writer has exited
		return
	}
	if graceful {
		// Let the writer answer what was read; it closes the connection.
		c.q.closeInput()
	}
}

// errUnauthenticatedRaft closes a connection that starts Raft on a SASL
// listener before authenticating.
var errUnauthenticatedRaft = errors.New("raft connection before SASL authentication")

// classify peeks at the next byte and hands Raft connections off: the
// first byte of a connection, or on a SASL listener the first after
// authentication.
func (c *conn) classify() (handedOff bool, err error) {
	var first []byte
	for {
		first, err = c.br.Peek(1)
		if err == nil {
			break
		}
		if !isTimeout(err) {
			return false, err
		}
		if err := c.onReadTimeout(); err != nil {
			return false, err
		}
	}
	if !c.srv.cfg.ConnClassifier(first[0]) {
		return false, nil
	}
	if c.sasl != nil && !c.saslState.authenticated {
		c.bl.authFailed.Add(1)
		c.log.Warn("closing connection: Raft on a SASL listener must authenticate first (failed authentication)",
			"remote", c.info.RemoteAddr.String())
		return false, errUnauthenticatedRaft
	}
	c.srv.forget(c)
	c.cancel()
	_ = c.nc.SetReadDeadline(time.Time{})
	buffered, _ := c.br.Peek(c.br.Buffered())
	c.log.Debug("handing connection to raft", "marker", first[0], "principal", c.info.Principal)
	c.srv.cfg.HandoffRaft(NewReplayConn(c.nc, append([]byte(nil), buffered...)), c.info)
	return true, nil
}

// classifyAfterSASL runs once a connection on a SASL listener has
// authenticated: the dialler of a Raft connection sends the marker next,
// having read the SaslAuthenticate answer, so nothing is in flight. The
// writer is stopped before the connection is handed off; a Raft marker
// behind requests still unanswered closes the connection.
func (c *conn) classifyAfterSASL() (handedOff bool, err error) {
	first, err := c.br.Peek(1)
	for err != nil {
		if !isTimeout(err) {
			return false, err
		}
		if err := c.onReadTimeout(); err != nil {
			return false, err
		}
		first, err = c.br.Peek(1)
	}
	if !c.srv.cfg.ConnClassifier(first[0]) {
		return false, nil
	}
	if n := c.q.len(); n != 0 {
		c.log.Warn("closing connection: a Raft marker behind requests not yet answered", "remote", c.info.RemoteAddr.String(), "in_flight", n)
		return false, errUnauthenticatedRaft
	}
	c.cancel()
	<-c.writerDone
	return c.classify()
}

// readLoop reads and dispatches requests until the connection fails or the
// server drains. graceful reports a drain: responses to what was read are
// still to be written.
func (c *conn) readLoop() (graceful bool) {
	for {
		if !c.q.waitSpace(c.ctx.Done(), c.srv.drain) {
			return c.srv.draining() && c.ctx.Err() == nil
		}
		if !c.waitUnmuted() {
			return c.srv.draining() && c.ctx.Err() == nil
		}
		var frame []byte
		var err error
		if c.saslState.classifyNext && c.srv.cfg.ConnClassifier != nil {
			c.saslState.classifyNext = false
			var handedOff bool
			if handedOff, err = c.classifyAfterSASL(); handedOff {
				c.handedOff = true
				return false
			}
		}
		if err == nil {
			frame, err = c.readFrame()
		}
		if err != nil {
			switch {
			case errors.Is(err, errUnauthenticatedRaft):
				// logged where found
			case errors.Is(err, errDraining):
				return true
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET), c.ctx.Err() != nil:
				c.log.Trace("connection closed by peer", "error", err)
			case errors.Is(err, errIdle):
				c.log.Debug("closing idle connection", "idle", c.srv.cfg.ConnectionsMaxIdle)
			case errors.Is(err, io.ErrUnexpectedEOF):
				c.log.Warn("closing connection: truncated request", "remote", c.info.RemoteAddr.String(), "error", err)
			default:
				c.log.Warn("closing connection", "remote", c.info.RemoteAddr.String(), "error", err)
			}
			c.close(err)
			return false
		}
		// A mute may have begun while the reader waited in read (a parked
		// fetch answered and throttled meanwhile): the request read since
		// waits it out too, unless the server drains (it is answered).
		if !c.waitUnmuted() && c.ctx.Err() != nil {
			c.srv.mem.give(int64(len(frame)))
			return false
		}
		err = c.dispatch(frame)
		// The handler has returned (a parked request keeps only small
		// state of its own): the request's bytes stop counting, where
		// Kafka releases a request's buffer.
		c.srv.mem.give(int64(len(frame)))
		if err != nil {
			c.close(err)
			return false
		}
	}
}

// waitUnmuted waits out a quota mute (ConnInfo.Mute); false if the
// connection or the server closes meanwhile.
func (c *conn) waitUnmuted() bool {
	until := c.info.mutedUntil.Load()
	if until == 0 {
		return true // never muted: no clock read per request
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	case <-c.srv.drain:
		return false
	}
}

// frameChunk is the most of a frame's buffer allocated before its bytes
// arrive. A larger frame is read into pooled chunks of this size until an
// eighth of it (at least one chunk) has arrived; only then is its own
// buffer allocated, what arrived copied in and the rest read in place. A
// connection that announces a request of socket.request.max.bytes
// (100 MiB) and sends little so holds about what it sent. Kafka allocates
// the announced size at once, which lets a few hundred connections that
// send four bytes each claim tens of gigabytes.
const frameChunk = 1 << 20

var frameChunks = sync.Pool{New: func() any { return new([frameChunk]byte) }}

// readFrame reads one size-prefixed frame. The size is checked against
// socket.request.max.bytes before anything is allocated.
func (c *conn) readFrame() ([]byte, error) {
	var size [4]byte
	if err := c.fill(size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > c.srv.cfg.SocketRequestMaxBytes {
		return nil, fmt.Errorf("%w: size %d, limit %d", errFrameSize, n, c.srv.cfg.SocketRequestMaxBytes)
	}
	if !c.srv.mem.take(int64(n), c.ctx.Done(), c.srv.drain) {
		if c.srv.draining() {
			return nil, errDraining
		}
		return nil, c.ctx.Err()
	}
	frame, err := c.readBody(n)
	if err != nil {
		c.srv.mem.give(int64(n))
		return nil, err
	}
	return frame, nil
}

// readBody reads a frame's n bytes, its size read and checked.
func (c *conn) readBody(n int32) ([]byte, error) {
	if n <= frameChunk {
		frame := make([]byte, n)
		if err := c.fillFrame(frame, n); err != nil {
			return nil, err
		}
		return frame, nil
	}
	var chunks []*[frameChunk]byte
	defer func() {
		for _, ch := range chunks {
			frameChunks.Put(ch)
		}
	}()
	got := 0
	for got < int(n)/8 { // n > frameChunk: at least one chunk
		ch := frameChunks.Get().(*[frameChunk]byte)
		chunks = append(chunks, ch)
		m := min(int(n)-got, frameChunk)
		if err := c.fillFrame(ch[:m], n); err != nil {
			return nil, err
		}
		got += m
	}
	frame := make([]byte, n)
	for i, ch := range chunks {
		copy(frame[i*frameChunk:got], ch[:])
	}
	if err := c.fillFrame(frame[got:], n); err != nil {
		return nil, err
	}
	return frame, nil
}

// fillFrame fills part of a frame of n bytes; running out of bytes is
// io.ErrUnexpectedEOF.
func (c *conn) fillFrame(p []byte, n int32) error {
	err := c.fill(p)
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("frame of %d bytes: %w", n, io.ErrUnexpectedEOF)
	}
	return err
}

// fill reads len(p) bytes, resuming after read-deadline expiries that
// onReadTimeout does not turn into errors.
func (c *conn) fill(p []byte) error {
	for n := 0; n < len(p); {
		m, err := c.br.Read(p[n:])
		if m > 0 {
			n += m
			c.lastRead.store(time.Now())
		}
		if err == nil {
			continue
		}
		if !isTimeout(err) {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if err := c.onReadTimeout(); err != nil {
			return err
		}
	}
	return nil
}

// onReadTimeout decides what an expired read deadline means: the server is
// draining, the connection is idle (connections.max.idle.ms passed with no
// bytes either way and nothing in flight), or neither, and the deadline
// moves on.
func (c *conn) onReadTimeout() error {
	if c.srv.draining() {
		return errDraining
	}
	idle := c.srv.cfg.ConnectionsMaxIdle
	if idle <= 0 {
		_ = c.nc.SetReadDeadline(time.Time{})
	} else {
		now := time.Now()
		last := c.lastRead.load()
		if w := c.lastWrite.load(); w.After(last) {
			last = w
		}
		if c.q.len() > 0 || c.writing.Load() {
			last = now // requests in flight or a response being written: not idle
		}
		if now.Sub(last) >= idle {
			return errIdle
		}
		_ = c.nc.SetReadDeadline(last.Add(idle))
	}
	// Shutdown closes drain, then sets a past deadline. Checking again
	// after moving the deadline means that past deadline cannot be lost.
	if c.srv.draining() {
		return errDraining
	}
	return nil
}

// wakeReader makes a reader blocked in Read return, to see the drain.
func (c *conn) wakeReader() { _ = c.nc.SetReadDeadline(time.Now()) }

// dispatch decodes a frame, runs the handler and queues its result. An
// error closes the connection.
func (c *conn) dispatch(frame []byte) error {
	if c.saslState.raw {
		return c.saslRawToken(frame)
	}
	received := time.Now()
	hdr, msg, verdict, err := c.dec.decode(frame, c.versions)
	if err != nil {
		c.log.Warn("closing connection: bad request", "remote", c.info.RemoteAddr.String(), "api_key", hdr.APIKey, "api_version", hdr.APIVersion, "correlation_id", hdr.CorrelationID, "error", err)
		return err
	}
	p := &pending{
		req:         Request{Header: hdr, Msg: msg, Conn: c.info, Received: received, Size: int32(len(frame))},
		respVersion: hdr.APIVersion,
	}
	var res Result
	var saslResp *Response
	handled := false
	if c.sasl != nil && verdict != verdictUnsupportedApiVersions {
		if saslResp, handled, err = c.saslStep(&p.req); err != nil {
			c.log.Warn("closing connection: request before SASL authentication", "remote", c.info.RemoteAddr.String(), "error", err)
			return err
		}
	}
	p.times.Started = time.Since(received)
	switch {
	case verdict == verdictUnsupportedApiVersions:
		resp, ok := unsupportedApiVersionsResponse(c.versions)
		if !ok {
			c.log.Warn("closing connection: ApiVersions not served on this listener", "remote", c.info.RemoteAddr.String())
			return errUnsupportedVersion
		}
		c.log.Debug("unsupported ApiVersions version; answering with v0", "api_version", hdr.APIVersion, "client_id", hdr.ClientID)
		res, p.respVersion = &Response{Msg: resp}, 0
	case handled:
		res = saslResp
	default:
		if res, err = c.handle(&p.req); err != nil {
			return err
		}
	}
	p.times.Handled = time.Since(received)
	p.times.Completed = p.times.Handled
	switch r := res.(type) {
	case *Response:
		if r == nil {
			p.times.NoResponse = true
			c.report(p)
			return nil
		}
		p.resp = r
		if c.writeReady(p) {
			return nil
		}
	case *Deferred:
		if r == nil {
			p.times.NoResponse = true
			c.report(p)
			return nil
		}
		p.deferred = r
		r.notify.Store(c)
		if c.q.pushParked(p) {
			return nil
		}
	default: // nil: no response (acks=0)
		p.times.NoResponse = true
		c.report(p)
		return nil
	}
	c.q.push(p)
	return nil
}

// handle calls the Handler, turning a panic into a loud log line and a
// closed connection rather than a crashed broker.
func (c *conn) handle(req *Request) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked; closing connection", "api_key", req.Header.APIKey, "api_version", req.Header.APIVersion, "panic", r, "stack", string(debug.Stack()))
			err = errHandlerPanic
		}
	}()
	return c.srv.cfg.Handler.Handle(c.ctx, req), nil
}

// close closes the connection once: cancels the handlers' context and
// closes the socket, which fails any read or write in progress.
func (c *conn) close(reason error) {
	c.closeOnce.Do(func() {
		c.cancel()
		_ = c.nc.Close()
		if reason != nil && !errors.Is(reason, io.EOF) {
			c.log.Trace("connection closed", "reason", reason)
		}
	})
}

// isTimeout reports a deadline expiry.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// isTemporaryAcceptError reports accept errors worth retrying (descriptor
// or buffer exhaustion, a connection aborted before accept).
func isTemporaryAcceptError(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// atomicTime is a time.Time stored as unix nanoseconds.
type atomicTime struct{ ns atomic.Int64 }

func (t *atomicTime) store(v time.Time) { t.ns.Store(v.UnixNano()) }
func (t *atomicTime) load() time.Time   { return time.Unix(0, t.ns.Load()) }
