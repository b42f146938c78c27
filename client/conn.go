package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerConn is one TCP connection to one broker, with pipelining: any
// number of goroutines may call do at once; each request is written in turn
// and its response is matched by correlation id when the reader goroutine
// sees it. Kafka answers requests on a connection in order, so a response
// that never comes (request.timeout.ms) means the connection is closed.
//
// Concurrency: writeMu serializes writes (and so correlation ids, which grow
// in write order); mu guards pending and err. The reader goroutine is owned
// by the connection: close stops it and waits for it.
type brokerConn struct {
	addr     string
	nodeID   int32
	conn     net.Conn
	cfg      *clientConfig
	versions [kmsg.MaxKey + 1]int16 // the broker's max version per key, -1 = unsupported
	features *finalizedFeatures     // from ApiVersions v3+; nil if the broker sent none

	writeMu   sync.Mutex
	formatter *kmsg.RequestFormatter
	wbuf      []byte
	corrID    int32

	mu         sync.Mutex
	pending    map[int32]*pendingRequest
	err        error         // why the connection died; set once
	dead       chan struct{} // closed when err is set
	readerDone chan struct{}
}

// pendingRequest is one request waiting for its response.
type pendingRequest struct {
	key  int16
	flex bool // response header has tagged fields
	done chan rawResponse
}

type rawResponse struct {
	body []byte // after the correlation id
	err  error
}

// dialBroker connects, authenticates (SASL hook) and negotiates versions.
// The returned connection is ready for do.
func dialBroker(ctx context.Context, cfg *clientConfig, nodeID int32, addr string) (*brokerConn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout)
	defer cancel()
	nc, err := cfg.dialer(ctx, "tcp", addr)
	if err != nil {
		return nil, &dialError{addr: addr, err: err}
	}
	c := &brokerConn{
		addr:       addr,
		nodeID:     nodeID,
		conn:       nc,
		cfg:        cfg,
		formatter:  kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.clientID)),
		pending:    make(map[int32]*pendingRequest),
		dead:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	for i := range c.versions {
		c.versions[i] = -1
	}
	go c.readLoop()
	if err := c.negotiateVersions(ctx); err != nil {
		c.close(err)
		return nil, &dialError{addr: addr, err: err}
	}
	if cfg.sasl != nil {
		if err := c.authenticate(ctx); err != nil {
			c.close(err)
			return nil, &authError{err: fmt.Errorf("sasl %s with %s: %w", cfg.sasl.Name(), addr, err)}
		}
	}
	return c, nil
}

// negotiateVersions sends ApiVersions at the highest version we know; a
// broker that does not know it answers UNSUPPORTED_VERSION with a v0 body
// listing its range (KIP-511), and we retry with what it supports.
func (c *brokerConn) negotiateVersions(ctx context.Context) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = c.cfg.softwareName
	req.ClientSoftwareVersion = c.cfg.softwareVersion
	version := req.MaxVersion()
	for attempt := 0; attempt < 2; attempt++ {
		req.SetVersion(version)
		kresp, err := c.roundTrip(ctx, req)
		if err != nil {
			return fmt.Errorf("api versions: %w", err)
		}
		resp := kresp.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode == 35 { // UNSUPPORTED_VERSION
			version = 0
			for _, k := range resp.ApiKeys {
				if k.ApiKey == 18 {
					version = min(k.MaxVersion, req.MaxVersion())
				}
			}
			continue
		}
		if err := ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("api versions: %w", err)
		}
		for _, k := range resp.ApiKeys {
			if k.ApiKey >= 0 && int(k.ApiKey) < len(c.versions) {
				c.versions[k.ApiKey] = k.MaxVersion
			}
		}
		if resp.FinalizedFeaturesEpoch >= 0 {
			f := &finalizedFeatures{epoch: resp.FinalizedFeaturesEpoch, levels: make(map[string]int16, len(resp.FinalizedFeatures))}
			for _, ff := range resp.FinalizedFeatures {
				f.levels[ff.Name] = ff.MaxVersionLevel
			}
			c.features = f
		}
		return nil
	}
	return fmt.Errorf("api versions: broker refused every version")
}

// finalizedFeatures are the cluster's finalized feature levels as one
// broker's ApiVersions response gave them (KIP-584), at the epoch of the
// metadata it read them from.
type finalizedFeatures struct {
	epoch  int64
	levels map[string]int16
}

// level is the finalized level of feature name, 0 if it is not finalized.
func (f *finalizedFeatures) level(name string) int16 {
	if f == nil {
		return 0
	}
	return f.levels[name]
}

// authenticate runs the SASL hook: SaslHandshake, then SaslAuthenticate
// until the session says it is done.
func (c *brokerConn) authenticate(ctx context.Context) error {
	m := c.cfg.sasl
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = m.Name()
	kresp, err := c.do(ctx, hs)
	if err != nil {
		return err
	}
	if err := ErrorForCode(kresp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(c.addr)
	session, msg, err := m.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = msg
		kresp, err := c.do(ctx, auth)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.SASLAuthenticateResponse)
		if err := errorWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return err
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
	}
}

// maxVersion is the version to use for key: the highest both sides
// support, under the configured cap. -1 if the broker lacks the API.
func (c *brokerConn) maxVersion(key int16, clientMax int16) int16 {
	if key < 0 || int(key) >= len(c.versions) {
		return -1
	}
	v := c.versions[key]
	if v < 0 {
		return -1
	}
	v = min(v, clientMax)
	if limit, ok := c.cfg.maxVersions[key]; ok {
		v = min(v, limit)
	}
	return v
}

// do sets req's version to the negotiated one and sends it. A Produce with
// acks=0 gets no response: do returns (nil, nil) once it is written.
func (c *brokerConn) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	v := c.maxVersion(req.Key(), req.MaxVersion())
	if v < 0 {
		return nil, fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, ErrUnsupportedRequest)
	}
	req.SetVersion(v)
	return c.roundTrip(ctx, req)
}

// timeoutFor is request.timeout.ms plus whatever the broker may legitimately
// wait before answering.
func (c *brokerConn) timeoutFor(req kmsg.Request) time.Duration {
	d := c.cfg.requestTimeout
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		d += time.Duration(r.MaxWaitMillis) * time.Millisecond
	case *kmsg.JoinGroupRequest:
		d += time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	case kmsg.TimeoutRequest:
		d += time.Duration(r.Timeout()) * time.Millisecond
	}
	return d
}

// roundTrip writes req at its current version and waits for the response.
func (c *brokerConn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	f, err := c.write(req)
	if err != nil {
		return nil, err
	}
	return f.wait(ctx)
}

// startRequest sets req's version to the negotiated one and writes it
// without waiting for the response: requests written from one goroutine
// reach the broker in that order, which the idempotent producer relies on.
func (c *brokerConn) startRequest(req kmsg.Request) (*responseFuture, error) {
	v := c.maxVersion(req.Key(), req.MaxVersion())
	if v < 0 {
		return nil, fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, ErrUnsupportedRequest)
	}
	req.SetVersion(v)
	return c.write(req)
}

// responseFuture is a written request whose response is still to come.
type responseFuture struct {
	c    *brokerConn
	req  kmsg.Request
	corr int32
	pr   *pendingRequest // nil: no response expected (acks=0)
}

// write registers and writes req at its current version.
func (c *brokerConn) write(req kmsg.Request) (*responseFuture, error) {
	noResponse := false
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		noResponse = true
	}
	f := &responseFuture{c: c, req: req}
	if !noResponse {
		// ApiVersions' response header is never flexible, so that a
		// client can read it before knowing what the broker supports
		// (KIP-511).
		f.pr = &pendingRequest{key: req.Key(), flex: req.IsFlexible() && req.Key() != 18, done: make(chan rawResponse, 1)}
	}

	c.writeMu.Lock()
	c.corrID++
	f.corr = c.corrID
	if f.pr != nil {
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			c.writeMu.Unlock()
			return nil, err
		}
		c.pending[f.corr] = f.pr
		c.mu.Unlock()
	}
	c.wbuf = c.formatter.AppendRequest(c.wbuf[:0], req, f.corr)
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.cfg.requestTimeout))
	_, werr := c.conn.Write(c.wbuf)
	if cap(c.wbuf) > 4<<20 {
		c.wbuf = nil // do not pin one huge request's buffer
	}
	c.writeMu.Unlock()
	if werr != nil {
		err := fmt.Errorf("write %s to %s: %v: %w", kmsg.NameForKey(req.Key()), c.addr, werr, ErrConnectionClosed)
		c.close(err)
		return nil, err
	}
	return f, nil
}

// wait blocks until the response arrives, ctx ends, or request.timeout.ms
// (plus the request's own timeout) passes, which closes the connection.
// A request without a response (acks=0) returns (nil, nil) at once.
func (f *responseFuture) wait(ctx context.Context) (kmsg.Response, error) {
	c, req, pr := f.c, f.req, f.pr
	if pr == nil {
		return nil, nil
	}
	timer := time.NewTimer(c.timeoutFor(req))
	defer timer.Stop()
	var raw rawResponse
	select {
	case raw = <-pr.done:
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, f.corr)
		c.mu.Unlock()
		return nil, ctx.Err()
	case <-timer.C:
		err := fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, ErrRequestTimeout)
		c.close(err)
		return nil, err
	}
	if raw.err != nil {
		return nil, raw.err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body := raw.body
	if pr.flex {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, fmt.Errorf("%s response header from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		if req.Key() == 18 && req.GetVersion() > 0 {
			// A broker that does not know our ApiVersions version
			// answers UNSUPPORTED_VERSION in the v0 format (KIP-511).
			v0 := req.ResponseKind()
			v0.SetVersion(0)
			if v0.ReadFrom(body) == nil {
				return v0, nil
			}
		}
		return nil, fmt.Errorf("decode %s v%d response from %s: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), c.addr, err)
	}
	return resp, nil
}

// readLoop reads response frames and hands each to the request waiting for
// its correlation id. It exits when the connection dies.
func (c *brokerConn) readLoop() {
	defer close(c.readerDone)
	r := bufio.NewReaderSize(c.conn, 64<<10)
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
			c.close(fmt.Errorf("read from %s: %v: %w", c.addr, err, ErrConnectionClosed))
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 4 || size > 1<<30 {
			c.close(fmt.Errorf("response of %d bytes from %s: %w", size, c.addr, ErrConnectionClosed))
			return
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(r, frame); err != nil {
			c.close(fmt.Errorf("read from %s: %v: %w", c.addr, err, ErrConnectionClosed))
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame))
		c.mu.Lock()
		pr := c.pending[corr]
		delete(c.pending, corr)
		c.mu.Unlock()
		if pr == nil {
			continue // the caller gave up (context cancelled)
		}
		pr.done <- rawResponse{body: frame[4:]}
	}
}

// close kills the connection with err, failing every pending request. Safe
// to call more than once and from any goroutine; the first error wins.
func (c *brokerConn) close(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	close(c.dead)
	c.mu.Unlock()
	_ = c.conn.Close()
	for _, pr := range pending {
		pr.done <- rawResponse{err: err}
	}
}

// shutdown closes the connection and waits for its reader to exit.
func (c *brokerConn) shutdown() {
	c.close(fmt.Errorf("connection to %s: %w", c.addr, ErrClosed))
	<-c.readerDone
}

// retire closes a connection the client no longer wants (its broker moved
// or left the cluster): requests in flight fail with the retriable
// ErrConnectionClosed, not ErrClosed.
func (c *brokerConn) retire() {
	c.close(fmt.Errorf("broker %d at %s left the metadata: %w", c.nodeID, c.addr, ErrConnectionClosed))
	<-c.readerDone
}

// isDead reports whether the connection can no longer be used.
func (c *brokerConn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// skipTags drops a KIP-482 tagged-field section from the front of b.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[w:]
	for i := uint64(0); i < n; i++ {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errors.New("bad tag size")
		}
		b = b[w+int(size):]
	}
	return b, nil
}
