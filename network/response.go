package network

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Result is what a Handler returns for one request: a *Response (ready
// now), a *Deferred (completed later, e.g. by a purgatory), or nil for no
// response at all (Produce with acks=0). The interface is sealed: only
// those two types implement it.
type Result interface{ result() }

// Response is a handler's answer to one request. At most one of Msg and
// Body is set; with neither, nothing is written (CloseConnection may still
// close the connection at this point of the response order).
//
// Ownership passes to the Server when the Response is handed over (returned
// from Handle or given to Deferred.Complete): the handler must not touch Msg
// or Body afterwards.
type Response struct {
	// Msg is encoded by the connection's writer: response header v0 (v1 with
	// tagged fields when the request version is flexible, except ApiVersions,
	// whose response header is always v0) then Msg.AppendTo. The writer sets
	// Msg's version to the request's; Msg.Key() must equal the request's key.
	Msg kmsg.Response
	// Body is a pre-encoded response body (FetchResponse.Encode), encoded
	// at the request's version: bytes and Regions written with writev and
	// Region.WriteTo (sendfile). The writer adds the size prefix and
	// response header, and recycles Body after writing it.
	Body *Body
	// CloseConnection closes the connection once this response (if any) and
	// every earlier one is written. Kafka closes the connection instead of
	// answering an acks=0 Produce that failed, so the client notices.
	CloseConnection bool

	// saslToken, with rawToken set, is a SASL token answered without a
	// response header (SaslHandshake v0's exchange): the size, then the
	// token.
	saslToken []byte
	rawToken  bool
}

func (*Response) result() {}

// Deferred is a Result completed later, from any goroutine: a Produce with
// acks=all waiting for the high watermark, a long-poll Fetch. Responses after
// it on the same connection are held back until it completes, so the client
// sees them in request order.
//
// If the connection closes first, the completion is dropped; Request's
// context is cancelled so the waiter can give up early.
type Deferred struct {
	done      chan struct{}
	completed atomic.Bool
	resp      *Response // written once before done is closed
	// notify is the connection the Deferred was queued on, which may
	// write the response from the completing goroutine (direct.go).
	notify atomic.Pointer[conn]
	// completedAt is when Complete was called (RequestTimes.Completed),
	// written before done is closed.
	completedAt time.Time
	// then, set by Then, runs once with the response after Complete:
	// whichever of Complete and Then sees the other's step first (done
	// closed, then set) runs it (thenRan).
	then    atomic.Pointer[func(*Response)]
	thenRan atomic.Bool
}

func (*Deferred) result() {}

// NewDeferred returns an incomplete Deferred.
func NewDeferred() *Deferred { return &Deferred{done: make(chan struct{})} }

// Complete sets the response (nil: no response) and releases it to the
// connection's writer. Only the first call counts; it reports whether this
// call was it.
//
// Concurrency: safe from any goroutine; never blocks (a small response
// may be written to the connection from the calling goroutine, with a
// non-blocking write: direct.go).
func (d *Deferred) Complete(resp *Response) bool {
	if !d.completed.CompareAndSwap(false, true) {
		return false
	}
	d.resp, d.completedAt = resp, time.Now()
	close(d.done)
	d.runThen()
	if c := d.notify.Load(); c != nil {
		c.writeDirect(d)
	}
	return true
}

// Done is closed once Complete has been called.
func (d *Deferred) Done() <-chan struct{} { return d.done }

func (d *Deferred) runThen() {
	if f := d.then.Load(); f != nil && d.thenRan.CompareAndSwap(false, true) {
		(*f)(d.resp)
	}
}

// Then returns r with f applied to its response's Msg: at once for a
// Response, when it completes for a Deferred (whose result is then a new
// Deferred; r itself must not be returned to the Server). A nil Result, a
// Response without Msg and a Deferred completed with none are left as they
// are. For a handler's caller that answered part of the request itself
// (the broker's authorizer, for the topics a principal may not touch).
//
// Concurrency: f runs on the goroutine that completes r, or on the
// caller's if r is complete already.
func Then(r Result, f func(kmsg.Response) kmsg.Response) Result {
	switch r := r.(type) {
	case *Response:
		if r != nil && r.Msg != nil {
			r.Msg = f(r.Msg)
		}
		return r
	case *Deferred:
		out := NewDeferred()
		then := func(resp *Response) {
			if resp != nil && resp.Msg != nil {
				resp.Msg = f(resp.Msg)
			}
			out.Complete(resp)
		}
		r.then.Store(&then)
		select {
		case <-r.done:
			r.runThen()
		default:
		}
		return out
	}
	return r
}

// Region is a part of a response body written to the connection by the
// region itself, typically a range of a segment file sent with sendfile(2)
// (storage.FileRegion). The network package never reads it.
//
// Concurrency: WriteTo is called once, from the connection's writer
// goroutine (or, for a small response, from the goroutine that completed
// its Deferred: direct.go), with the raw *net.TCPConn (so a sendfile path can use its
// descriptor) and that connection's write deadline set — or, for a region
// of at most 32 KiB, with an in-memory writer (an io.ReaderFrom) that
// copies it into the writer's buffer to share one writev with the bytes
// around it. It must write exactly Len() bytes or return an error; on
// error the connection is closed, since the response framing promised
// Len() bytes.
type Region interface {
	Len() int64
	WriteTo(w io.Writer) (int64, error)
}

// BytesRegion is a Region already in memory. The writer sends it with the
// surrounding bytes in one writev rather than through WriteTo.
type BytesRegion []byte

// Len returns len(b).
func (b BytesRegion) Len() int64 { return int64(len(b)) }

// WriteTo writes b to w.
func (b BytesRegion) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// bodyPart is one part of a Body: buf[start:end], or region when non-nil.
type bodyPart struct {
	start, end int
	region     Region
}

// Body is a pre-encoded response body: encoded bytes interleaved with
// Regions. Get one with AcquireBody; the Server recycles it after writing.
//
// Concurrency: a Body is owned by one goroutine at a time; it is not safe
// for concurrent use.
type Body struct {
	buf    []byte
	parts  []bodyPart
	length int64
}

var bodyPool = sync.Pool{New: func() any { return new(Body) }}

// maxPooledBody bounds the encoded bytes a recycled Body keeps, so one huge
// response does not pin its buffer in the pool.
const maxPooledBody = 64 << 10

// AcquireBody returns an empty Body, recycled when possible.
func AcquireBody() *Body { return bodyPool.Get().(*Body) }

// ReleaseBody resets b and returns it to the pool. The Server calls it after
// writing a Response's Body; call it yourself only for a Body you never hand
// over.
func ReleaseBody(b *Body) {
	if b == nil || cap(b.buf) > maxPooledBody || cap(b.parts) > 1024 {
		return
	}
	b.Reset()
	bodyPool.Put(b)
}

// Reset empties b, keeping its buffers.
func (b *Body) Reset() {
	clear(b.parts) // drop Region references (open files)
	b.buf, b.parts, b.length = b.buf[:0], b.parts[:0], 0
}

// Len returns the body's total length in bytes.
func (b *Body) Len() int64 { return b.length }

// AppendBytes appends a copy of p.
func (b *Body) AppendBytes(p []byte) {
	b.buf = append(b.buf, p...)
	b.grew(len(p))
}

// AppendRegion appends r, to be written by r.WriteTo (or with the
// surrounding bytes, for a BytesRegion). Empty regions are dropped.
func (b *Body) AppendRegion(r Region) {
	n := r.Len()
	if n <= 0 {
		return
	}
	b.parts = append(b.parts, bodyPart{region: r})
	b.length += n
}

// grew records n bytes just appended to b.buf.
func (b *Body) grew(n int) {
	if n == 0 {
		return
	}
	end := len(b.buf)
	if k := len(b.parts); k > 0 && b.parts[k-1].region == nil && b.parts[k-1].end == end-n {
		b.parts[k-1].end = end
	} else {
		b.parts = append(b.parts, bodyPart{start: end - n, end: end})
	}
	b.length += int64(n)
}

// WriteTo writes the body to w: bytes with w.Write, regions with their
// WriteTo. The connection writer does not use it (it batches with writev);
// it serves tests and writers without a socket.
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for i, p := range b.parts {
		var n int64
		var err error
		if p.region != nil {
			n, err = p.region.WriteTo(w)
			if err == nil && n != p.region.Len() {
				err = fmt.Errorf("region wrote %d of %d bytes: %w", n, p.region.Len(), io.ErrShortWrite)
			}
		} else {
			var m int
			m, err = w.Write(b.buf[p.start:p.end])
			n = int64(m)
		}
		total += n
		if err != nil {
			return total, fmt.Errorf("write body part %d: %w", i, err)
		}
	}
	return total, nil
}
