package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// flushThreshold is how many encoded bytes the writer buffers before
// flushing even though the next response is ready.
const flushThreshold = 64 << 10

// maxKeptWriteBuffer bounds the encode buffer the writer keeps between
// flushes.
const maxKeptWriteBuffer = 1 << 20

// maxTaken is how many responses the writer buffers before flushing even
// though the next is ready: each keeps its request (and the request's
// frame, which the decoded message aliases) until the flush reports it
// sent.
const maxTaken = 32

// copyRegionMax is the largest Region the writer copies into its buffer
// (one pread) to go out with the bytes around it in the same writev,
// rather than flushing those bytes and sending the region on its own with
// sendfile. A small fetch response (a consumer at the tail of the log)
// then costs one syscall and reaches the client as one segment instead of
// three (writev, sendfile, writev), which the client reads with one
// wake-up; the copy of a few KiB costs less than the syscalls it saves.
// Large regions keep the zero-copy path (DESIGN §5).
const copyRegionMax = 32 << 10

// pending is one request read from the connection whose response has not
// been written yet. req is the Request the handler saw (one allocation for
// both).
type pending struct {
	req         Request
	respVersion int16
	resp        *Response // ready at once, or
	deferred    *Deferred // ready when done is closed
	times       RequestTimes
	// raw: a bare SASL token (saslRawToken), not a request; not reported.
	raw bool
}

// report tells Config.RequestDone of p, done.
func (c *conn) report(p *pending) {
	done := c.srv.cfg.RequestDone
	if done == nil || p.raw {
		return
	}
	if d := p.deferred; d != nil {
		// d is done: completedAt was written before done closed. Completed
		// before the handler returned, it spent no time waiting.
		p.times.Completed = max(d.completedAt.Sub(p.req.Received), p.times.Handled)
	}
	done(&p.req, p.times)
}

// reportSent reports p, whose response was taken up at sending and whose
// last byte went to the socket at sent.
func (c *conn) reportSent(p *pending, sending, sent time.Time) {
	p.times.Sending, p.times.Sent = sending.Sub(p.req.Received), sent.Sub(p.req.Received)
	c.report(p)
}

// taken is a response encoded into an outbound buffer, reported once the
// buffer is flushed.
type taken struct {
	p       *pending
	sending time.Time
}

// reportTaken reports the responses out held, all written by sent.
func (c *conn) reportTaken(out *outbound, sent time.Time) {
	for _, t := range out.taken {
		c.reportSent(t.p, t.sending, sent)
	}
	out.dropTaken()
}

// dropTaken forgets the responses out held, reported or not.
func (o *outbound) dropTaken() {
	clear(o.taken)
	o.taken = o.taken[:0]
}

// responseQueue is the FIFO between a connection's reader (push, in
// arrival order) and writer (peek/pop, in the same order), bounded by
// MaxInFlightRequests: the reader waits for space before reading another
// frame, so a client that does not read its responses stops being read.
//
// Concurrency: one pusher (the reader) and one popper (the writer); mu
// guards the ring. The signal channels hold at most one token each, so a
// signal sent while nobody waits is not lost and a waiter rechecks state.
type responseQueue struct {
	mu     sync.Mutex
	ring   []*pending
	head   int
	n      int
	closed bool // the reader pushes no more

	readable chan struct{} // push or close happened
	space    chan struct{} // pop happened

	// Direct writes (direct.go): parked is the pending whose Deferred the
	// writer waits on with nothing buffered; direct is set while a
	// completing goroutine writes it; leftover is what that write could
	// not hand the socket at once, for the writer to send first; kick
	// wakes the writer when a direct write ends.
	parked   *pending
	direct   bool
	leftover []byte
	kick     chan struct{}
	// idle is set while the writer waits for a push with nothing queued,
	// buffered or left over: the reader may then write a response that is
	// ready at once itself (claimIdle), sparing the writer's wake-up.
	idle bool
}

func (q *responseQueue) init(max int) {
	q.ring = make([]*pending, max)
	q.readable = make(chan struct{}, 1)
	q.space = make(chan struct{}, 1)
	q.kick = make(chan struct{}, 1)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// len returns the number of requests in flight.
func (q *responseQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// waitSpace blocks until a push would fit; false if a stop channel closed
// first.
func (q *responseQueue) waitSpace(stop1, stop2 <-chan struct{}) bool {
	for {
		q.mu.Lock()
		full := q.n == len(q.ring)
		q.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-q.space:
		case <-stop1:
			return false
		case <-stop2:
			return false
		}
	}
}

// push appends p; the caller has waited for space.
func (q *responseQueue) push(p *pending) {
	q.mu.Lock()
	q.ring[(q.head+q.n)%len(q.ring)] = p
	q.n++
	q.mu.Unlock()
	signal(q.readable)
}

// pushParked queues p, whose Deferred is pending, without waking an idle
// writer: p is parked for its completer to write directly (direct.go), and
// the writer stays asleep unless that cannot be done. False (nothing
// queued) when the writer is not idle or p is already complete.
func (q *responseQueue) pushParked(p *pending) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.idle || q.n != 0 || q.direct || q.parked != nil || len(q.leftover) != 0 {
		return false
	}
	// Checked under mu, which a completer takes after marking p complete:
	// either this sees it complete, or the completer sees it parked.
	if p.deferred.completed.Load() {
		return false
	}
	q.ring[q.head] = p
	q.n = 1
	q.parked = p
	return true
}

// closeInput records that no more requests will be pushed.
func (q *responseQueue) closeInput() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.readable)
}

// peek returns the oldest request, or nil and whether input is closed.
func (q *responseQueue) peek() (p *pending, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil, q.closed
	}
	return q.ring[q.head], q.closed
}

// setParked records that the writer waits on p's Deferred with nothing
// buffered (direct.go).
func (q *responseQueue) setParked(p *pending) {
	q.mu.Lock()
	q.parked = p
	q.mu.Unlock()
}

// unpark is the writer's side of a direct write once p's Deferred is done:
// it waits out a direct write in progress and reports whether p is still
// the writer's to write (mine false: written directly), or that stop
// closed first (the writer must then exit without touching the socket).
func (q *responseQueue) unpark(p *pending, stop <-chan struct{}) (mine, stopped bool) {
	q.mu.Lock()
	q.parked = nil
	if !q.awaitDirectLocked(stop) {
		return false, true
	}
	mine = q.n > 0 && q.ring[q.head] == p
	q.mu.Unlock()
	return mine, false
}

// awaitDirectLocked waits, q.mu held, until no direct write holds the
// socket; false, with q.mu released, if stop closed first.
func (q *responseQueue) awaitDirectLocked(stop <-chan struct{}) bool {
	for q.direct {
		q.mu.Unlock()
		select {
		case <-q.kick:
		case <-stop:
			return false
		}
		q.mu.Lock()
	}
	return true
}

// setIdle marks the writer idle unless something is queued or left over.
func (q *responseQueue) setIdle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.idle = q.n == 0 && len(q.leftover) == 0 && !q.closed
	return q.idle
}

// unidle ends the writer's idleness, waiting out a direct write in
// progress; true if stop closed first. A Deferred the reader queued while
// the writer was idle (pushParked) is the writer's again: it re-peeks and
// parks on it itself if it is still pending.
func (q *responseQueue) unidle(stop <-chan struct{}) (stopped bool) {
	q.mu.Lock()
	q.idle = false
	q.parked = nil
	if !q.awaitDirectLocked(stop) {
		return true
	}
	q.mu.Unlock()
	return false
}

// pop removes the oldest request.
func (q *responseQueue) pop() {
	q.mu.Lock()
	q.ring[q.head] = nil
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	q.mu.Unlock()
	signal(q.space)
}

// outSeg is a run of outgoing bytes: buf[start:end] of the writer's encode
// buffer, or ext (a Body's bytes).
type outSeg struct {
	start, end int
	ext        []byte
}

// outbound batches encoded responses until the writer flushes them with
// one writev (nats-style buffered outbound writes).
//
// Concurrency: owned by the connection's writer goroutine.
type outbound struct {
	buf    []byte
	segs   []outSeg
	bodies []*Body // recycled once flushed: segs may point into them
	iov    net.Buffers
	size   int
	taken  []taken // reported once flushed
}

// writeLoop runs the connection's writer goroutine: it writes responses in
// request order, waiting on a Deferred at the head while later responses
// queue behind it, and flushes whenever the next response is not ready yet
// (or flushThreshold bytes are buffered). It closes the connection when it
// is done, on a write error, or on CloseConnection.
func (c *conn) writeLoop() {
	defer c.srv.connWG.Done()
	defer close(c.writerDone)
	var out outbound
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("response writer panicked; closing connection", "panic", r, "stack", string(debug.Stack()))
			c.close(errHandlerPanic)
		}
	}()
	for {
		if err := c.writeLeftover(); err != nil {
			c.writeFailed(err)
			return
		}
		p, closed := c.q.peek()
		if p == nil {
			if err := c.flush(&out); err != nil {
				c.writeFailed(err)
				return
			}
			if closed { // drained after shutdown began
				c.close(errDraining)
				return
			}
			if !c.q.setIdle() {
				continue // pushed or left over meanwhile
			}
			select {
			case <-c.q.readable:
			case <-c.ctx.Done():
				return
			}
			if c.q.unidle(c.ctx.Done()) {
				return // a direct write may still hold the socket
			}
			continue
		}
		resp := p.resp
		if d := p.deferred; d != nil {
			select {
			case <-d.done:
			default:
				if err := c.flush(&out); err != nil {
					c.writeFailed(err)
					return
				}
				// Nothing buffered: a completer may write p directly.
				c.q.setParked(p)
				select {
				case <-d.done:
				case <-c.ctx.Done():
					return
				}
				mine, stopped := c.q.unpark(p, c.ctx.Done())
				if stopped {
					return // a direct write may still hold the socket
				}
				if !mine {
					continue // written directly
				}
			}
			resp = d.resp
		}
		c.q.pop()
		if resp == nil {
			p.times.NoResponse = true
			c.report(p)
			continue
		}
		sending := time.Now()
		if err := c.appendResponse(&out, p, resp); err != nil {
			c.writeFailed(err)
			return
		}
		out.taken = append(out.taken, taken{p, sending})
		if len(out.segs) == 0 { // written already (a region's sendfile), or nothing to write
			c.reportTaken(&out, time.Now())
		}
		if resp.CloseConnection {
			if err := c.flush(&out); err != nil {
				c.writeFailed(err)
				return
			}
			c.log.Debug("closing connection as the handler asked", "api_key", p.req.Header.APIKey)
			c.close(nil)
			return
		}
		if out.size >= flushThreshold || len(out.taken) >= maxTaken {
			if err := c.flush(&out); err != nil {
				c.writeFailed(err)
				return
			}
		}
	}
}

// writeLeftover writes what a direct write left unsent (direct.go).
func (c *conn) writeLeftover() error {
	c.q.mu.Lock()
	left := c.q.leftover
	c.q.leftover = nil
	c.q.mu.Unlock()
	if len(left) == 0 {
		return nil
	}
	c.setWriteDeadline()
	c.writing.Store(true)
	_, err := c.nc.Write(left)
	c.writing.Store(false)
	if err != nil {
		return fmt.Errorf("write responses: %w", err)
	}
	c.lastWrite.store(time.Now())
	return nil
}

// writeFailed logs a failed write and closes the connection.
func (c *conn) writeFailed(err error) {
	if c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
		c.log.Warn("closing connection: write failed", "remote", c.info.RemoteAddr.String(), "error", err)
	}
	c.close(err)
}

// appendResponse encodes resp into out. Regions are written straight to
// the socket after flushing what precedes them.
func (c *conn) appendResponse(out *outbound, p *pending, resp *Response) error {
	if resp.rawToken {
		start := len(out.buf)
		out.buf = binary.BigEndian.AppendUint32(out.buf, uint32(len(resp.saslToken)))
		out.buf = append(out.buf, resp.saslToken...)
		out.addBuf(start, len(out.buf))
		return nil
	}
	hdr := &p.req.Header
	flexHdr := hdr.responseHeaderFlexible()
	start := len(out.buf)
	out.buf = append(out.buf, 0, 0, 0, 0) // size, patched below
	out.buf = binary.BigEndian.AppendUint32(out.buf, uint32(hdr.CorrelationID))
	if flexHdr {
		out.buf = append(out.buf, 0) // response header v1: no tagged fields
	}
	switch {
	case resp.Msg != nil:
		if resp.Msg.Key() != hdr.APIKey {
			return fmt.Errorf("handler answered api key %d with a response of key %d", hdr.APIKey, resp.Msg.Key())
		}
		resp.Msg.SetVersion(p.respVersion)
		out.buf = resp.Msg.AppendTo(out.buf)
		size := len(out.buf) - start - 4
		if size > math.MaxInt32 {
			return fmt.Errorf("response of %d bytes", size)
		}
		binary.BigEndian.PutUint32(out.buf[start:], uint32(size))
		out.addBuf(start, len(out.buf))
	case resp.Body != nil:
		b := resp.Body
		size := int64(len(out.buf)-start-4) + b.Len()
		if size > math.MaxInt32 {
			return fmt.Errorf("response of %d bytes", size)
		}
		binary.BigEndian.PutUint32(out.buf[start:], uint32(size))
		out.addBuf(start, len(out.buf))
		for _, part := range b.parts {
			switch r := part.region.(type) {
			case nil:
				out.addExt(b.buf[part.start:part.end])
			case BytesRegion:
				out.addExt(r)
			default:
				if n := r.Len(); n <= copyRegionMax {
					// Bound the buffer: flush what precedes first when the
					// copy would take it past maxKeptWriteBuffer.
					if len(out.buf)+int(n) > maxKeptWriteBuffer {
						if err := c.flush(out); err != nil {
							return err
						}
					}
					if err := out.copyRegion(r); err != nil {
						return fmt.Errorf("write region: %w", err)
					}
					continue
				}
				if err := c.flush(out); err != nil {
					return err
				}
				if err := c.writeRegion(r); err != nil {
					return err
				}
			}
		}
		// Only now: a flush above must not recycle b while it is read.
		out.bodies = append(out.bodies, b)
	default: // CloseConnection without a response
		out.buf = out.buf[:start]
	}
	return nil
}

// writeRegion writes one region directly to the socket.
func (c *conn) writeRegion(r Region) error {
	c.setWriteDeadline()
	want := r.Len()
	c.writing.Store(true)
	var w io.Writer = c.nc
	if c.tls != nil {
		w = copyWriter{c.nc}
	}
	n, err := r.WriteTo(w)
	c.writing.Store(false)
	if err == nil && n != want {
		err = fmt.Errorf("region wrote %d of %d bytes: %w", n, want, io.ErrShortWrite)
	}
	if err != nil {
		return fmt.Errorf("write region: %w", err)
	}
	c.lastWrite.store(time.Now())
	return nil
}

// flush writes everything buffered with one writev and recycles the
// bodies it referenced.
func (c *conn) flush(out *outbound) error {
	if len(out.segs) == 0 {
		return nil
	}
	out.fillIov()
	c.setWriteDeadline()
	iov := out.iov // WriteTo consumes its receiver
	c.writing.Store(true)
	_, err := iov.WriteTo(c.nc)
	c.writing.Store(false)
	clear(out.iov[:cap(out.iov)])
	for _, b := range out.bodies {
		ReleaseBody(b)
	}
	clear(out.bodies)
	out.bodies, out.segs, out.size = out.bodies[:0], out.segs[:0], 0
	if cap(out.buf) > maxKeptWriteBuffer {
		out.buf = nil
	} else {
		out.buf = out.buf[:0]
	}
	if err != nil {
		out.dropTaken() // the connection closes: not sent
		return fmt.Errorf("write responses: %w", err)
	}
	now := time.Now()
	c.lastWrite.store(now)
	c.reportTaken(out, now)
	return nil
}

// setWriteDeadline bounds the next write by connections.max.idle.ms: a
// peer that accepts no bytes for that long is as good as gone.
func (c *conn) setWriteDeadline() {
	if idle := c.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(idle))
	}
}

// fillIov points iov at the queued segments, in order.
func (o *outbound) fillIov() {
	o.iov = o.iov[:0]
	for _, s := range o.segs {
		if s.ext != nil {
			o.iov = append(o.iov, s.ext)
		} else {
			o.iov = append(o.iov, o.buf[s.start:s.end])
		}
	}
}

// addBuf queues out.buf[start:end], merging with a preceding adjacent run.
func (o *outbound) addBuf(start, end int) {
	if k := len(o.segs); k > 0 && o.segs[k-1].ext == nil && o.segs[k-1].end == start {
		o.segs[k-1].end = end
	} else {
		o.segs = append(o.segs, outSeg{start: start, end: end})
	}
	o.size += end - start
}

// copyRegion appends r's bytes to the buffer (Region.WriteTo into it: a
// storage.FileRegion preads straight into the buffer through ReadFrom) and
// queues them.
func (o *outbound) copyRegion(r Region) error {
	start := len(o.buf)
	want := r.Len()
	n, err := r.WriteTo(&regionBuffer{o: o, want: want})
	if got := int64(len(o.buf) - start); err == nil && (n != want || got != want) {
		err = fmt.Errorf("region wrote %d of %d bytes: %w", got, want, io.ErrShortWrite)
	}
	if err != nil {
		o.buf = o.buf[:start]
		return err
	}
	o.addBuf(start, len(o.buf))
	return nil
}

// regionBuffer is the io.Writer (and io.ReaderFrom, so io.Copy reads
// straight into the buffer) that copyRegion hands to Region.WriteTo.
type regionBuffer struct {
	o    *outbound
	want int64
}

func (w *regionBuffer) Write(p []byte) (int, error) {
	w.o.buf = append(w.o.buf, p...)
	return len(p), nil
}

// ReadFrom reads r to EOF into the buffer, sized for the region up front
// so that a file region costs one read.
func (w *regionBuffer) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	w.o.buf = slices.Grow(w.o.buf, int(max(w.want, 0))+1)
	for {
		if len(w.o.buf) == cap(w.o.buf) {
			w.o.buf = slices.Grow(w.o.buf, 4<<10)
		}
		buf := w.o.buf
		n, err := r.Read(buf[len(buf):cap(buf)])
		w.o.buf = buf[:len(buf)+n]
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// addExt queues bytes owned by a Body.
func (o *outbound) addExt(p []byte) {
	if len(p) == 0 {
		return
	}
	o.segs = append(o.segs, outSeg{ext: p})
	o.size += len(p)
}
