package network

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Direct writes: a Deferred completed by another goroutine (a long-poll
// Fetch that a produce satisfied, in the produce's own request goroutine)
// is written to its connection by the completing goroutine itself when the
// connection's writer is idle, parked on exactly that Deferred with nothing
// buffered. The response then leaves in the completer's time slice instead
// of after a wake-up of the writer goroutine (a thread hop that adds tens
// to hundreds of microseconds to end-to-end latency on a busy machine).
//
// The completer must never block on a slow client: only small responses
// (directMax, regions copied) are written directly, with one non-blocking
// writev; whatever the socket does not take at once is left to the writer
// goroutine (responseQueue.leftover), which writes it before anything else.
//
// Ownership: responseQueue.parked names the Deferred the writer waits on;
// the completer that clears it (under q.mu) owns the socket until it clears
// responseQueue.direct, and pops the pending it wrote. The writer, woken by
// the Deferred, waits for direct to clear and looks at the queue again.

// A Deferred the reader queues while the writer is idle (a long poll on a
// connection with nothing else in flight) is parked for its completer by
// the reader itself (pushParked), and the writer is not woken at all: not
// to park on it, nor when it is written. It is woken only when the
// completer cannot write it (too large, no response) or leaves bytes over.
//
// The reader's direct write: a response the handler returned at once (a
// Produce, a Metadata) on a connection whose writer is idle — nothing
// queued before it, nothing buffered — is written by the reader goroutine
// itself, with the same non-blocking writev, instead of being queued for a
// writer that must first be woken. writeReady holds the socket for the
// reader (responseQueue.direct) during that one write; the idle writer can
// only be woken by the reader's own push, which comes after, or for what
// the write left over.

// directMax bounds a response written directly (header and body).
const directMax = 64 << 10

// Counters of direct writes, for tests and benchmarks: responses written
// by their completer, and of those the ones the socket took only in part.
var directWrites, directPartial atomic.Int64

// writeDirect is called by Deferred.Complete, on the completing goroutine,
// after done is closed.
func (c *conn) writeDirect(d *Deferred) {
	q := &c.q
	q.mu.Lock()
	p := q.parked
	if p == nil || p.deferred != d || q.direct || q.n == 0 || q.ring[q.head] != p {
		q.mu.Unlock()
		return
	}
	q.parked, q.direct = nil, true
	q.mu.Unlock()

	written := c.tryDirect(p, d.resp)

	q.mu.Lock()
	if written {
		q.ring[q.head] = nil
		q.head = (q.head + 1) % len(q.ring)
		q.n--
	}
	q.direct = false
	// An idle writer (p was queued by pushParked) waits for nothing but
	// a push: wake it for what it must write after all.
	wake := q.idle && (!written || len(q.leftover) != 0)
	q.mu.Unlock()
	if written {
		signal(q.space)
	}
	signal(q.kick)
	if wake {
		signal(q.readable)
	}
}

// writeReady is the reader's direct write of p, whose response is ready;
// false leaves p for the caller to queue.
func (c *conn) writeReady(p *pending) bool {
	q := &c.q
	q.mu.Lock()
	if !q.idle || q.n != 0 || q.direct || len(q.leftover) != 0 {
		q.mu.Unlock()
		return false
	}
	q.direct = true
	q.mu.Unlock()

	written := c.tryDirect(p, p.resp)

	q.mu.Lock()
	q.direct = false
	left := len(q.leftover) != 0
	q.mu.Unlock()
	signal(q.kick)
	if left {
		signal(q.readable) // the writer sends the rest
	}
	return written
}

// tryDirect encodes and writes resp if it qualifies; false leaves the
// pending to the writer goroutine untouched.
func (c *conn) tryDirect(p *pending, resp *Response) bool {
	if resp == nil || resp.CloseConnection || c.ctx.Err() != nil {
		return false
	}
	raw, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	if b := resp.Body; b != nil {
		// Only regions appendResponse copies: it sends larger ones
		// itself, blocking.
		if b.Len() > directMax {
			return false
		}
		for _, part := range b.parts {
			if r := part.region; r != nil && r.Len() > copyRegionMax {
				return false
			}
		}
	}
	sending := time.Now()
	out := &c.dout
	if err := c.appendResponse(out, p, resp); err != nil {
		// Nothing was written: the writer tries again and reports it.
		out.discard()
		return false
	}
	out.fillIov()
	rc, err := raw.SyscallConn()
	if err != nil {
		out.discard()
		return false
	}
	var n int
	var werr error
	writev := func(fd uintptr) bool {
		n, werr = unix.Writev(int(fd), out.iov)
		return true // never wait: a full socket is the writer's business
	}
	c.writing.Store(true)
	cerr := rc.Write(writev)
	if errors.Is(cerr, os.ErrDeadlineExceeded) {
		// The deadline the writer goroutine set for its own last (blocking)
		// write has passed; a write that never waits needs none. Setting
		// it for every direct write would cost a timer update each.
		_ = c.nc.SetWriteDeadline(time.Time{})
		cerr = rc.Write(writev)
	}
	c.writing.Store(false)
	if cerr != nil {
		werr = cerr
	}
	if n < 0 {
		n = 0
	}
	if werr != nil && !errors.Is(werr, unix.EAGAIN) {
		out.reset()
		c.writeFailed(werr)
		return true // the connection is closing; nothing more to write
	}
	directWrites.Add(1)
	if rest := out.size - n; rest > 0 {
		directPartial.Add(1)
		left := make([]byte, 0, rest)
		skip := n
		for _, b := range out.iov {
			if skip >= len(b) {
				skip -= len(b)
				continue
			}
			left = append(left, b[skip:]...)
			skip = 0
		}
		c.q.mu.Lock()
		c.q.leftover = left
		c.q.mu.Unlock()
	}
	// A response the socket took in part is reported sent now: the writer
	// sends the rest before anything else.
	now := time.Now()
	c.lastWrite.store(now)
	out.reset()
	c.reportSent(p, sending, now)
	return true
}

// reset empties an outbound buffer after a direct write, recycling the
// bodies it referenced.
func (o *outbound) reset() {
	for _, b := range o.bodies {
		ReleaseBody(b)
	}
	o.discard()
}

// discard empties an outbound buffer without recycling its bodies: the
// response goes to the writer goroutine after all.
func (o *outbound) discard() {
	clear(o.iov[:cap(o.iov)])
	o.iov = o.iov[:0]
	clear(o.bodies)
	o.bodies, o.segs, o.size = o.bodies[:0], o.segs[:0], 0
	if cap(o.buf) > maxKeptWriteBuffer {
		o.buf = nil
	} else {
		o.buf = o.buf[:0]
	}
}
