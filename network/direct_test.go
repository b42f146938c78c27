package network

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDirectWritesKeepOrder: long-poll-like Deferreds completed from other
// goroutines while the writer is parked on them are written by the
// completers (direct.go), others by the writer; every response arrives
// whole and in request order.
func TestDirectWritesKeepOrder(t *testing.T) {
	const n = 40
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 30<<10) }
	var mu sync.Mutex
	pending := map[int32]*Deferred{}
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.MetadataRequest); !ok {
			return nil, false
		}
		d := NewDeferred()
		mu.Lock()
		pending[req.Header.CorrelationID] = d
		mu.Unlock()
		return d, true
	}, func(c *Config) {
		c.MaxInFlightRequests = n
		c.SocketSendBufferBytes = 16 << 10 // the socket fills fast: partial writes
	})
	rc := dialRaw(t, ts.addr)
	if tc, ok := rc.c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(32 << 10)
	}
	direct0, partial0 := directWrites.Load(), directPartial.Load()
	for i := 0; i < n; i++ {
		rc.send(metadataRequest(), 12)
	}
	// Complete them one by one from another goroutine, each once the
	// writer is parked on it (or after 100 ms: once a partial write is left
	// to the writer, it blocks until the client reads).
	conn := func() *conn {
		ts.Server.mu.Lock()
		defer ts.Server.mu.Unlock()
		for c := range ts.Server.conns {
			return c
		}
		return nil
	}
	go func() {
		for i := int32(0); i < n; i++ {
			var d *Deferred
			for d == nil {
				mu.Lock()
				d = pending[i]
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
			for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if c := conn(); c != nil {
					c.q.mu.Lock()
					parked := c.q.parked != nil && c.q.parked.deferred == d
					c.q.mu.Unlock()
					if parked {
						break
					}
				}
			}
			body := AcquireBody()
			body.AppendBytes(payload(int(i)))
			d.Complete(&Response{Body: body})
		}
	}()
	time.Sleep(200 * time.Millisecond) // the client reads late: buffers fill
	for i := 0; i < n; i++ {
		b, err := rc.readFrame()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corr := int32(binary.BigEndian.Uint32(b)); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		// Metadata v12 is flexible: a v1 response header (one tag byte).
		if !bytes.Equal(b[5:], payload(i)) {
			t.Fatalf("response %d: body differs (%d bytes)", i, len(b)-5)
		}
	}
	direct, partial := directWrites.Load()-direct0, directPartial.Load()-partial0
	t.Logf("%d of %d responses written directly, %d of them partially", direct, n, partial)
	if direct == 0 {
		t.Fatal("no response was written directly by its completer")
	}
}

// TestDirectWritePartialLeavesRest: a direct write into a full socket
// hands the socket what it takes and leaves the rest to the writer
// goroutine (leftover), which sends it before anything else: the peer
// reads every byte of every response, in order.
func TestDirectWritePartialLeavesRest(t *testing.T) {
	srv, err := NewServer(Config{Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext}},
		Handler: &testHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.(*net.TCPConn).SetWriteBuffer(8 << 10)
	_ = peer.(*net.TCPConn).SetReadBuffer(8 << 10)
	c := newConn(srv, nc, &boundListener{Listener: srv.cfg.Listeners[0]}, 0)
	defer c.close(nil)

	// Direct writes of 30 KiB responses until the socket takes one only in
	// part (the peer reads nothing meanwhile).
	var want []byte
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("the socket never filled up")
		}
		p := &pending{req: Request{Header: RequestHeader{APIKey: 3, APIVersion: 12, CorrelationID: int32(i), HeaderVersion: 2}}, respVersion: 12}
		body := AcquireBody()
		body.AppendBytes(bytes.Repeat([]byte{byte('a' + i%26)}, 30<<10))
		frame := binary.BigEndian.AppendUint32(nil, uint32(4+1+30<<10))
		frame = binary.BigEndian.AppendUint32(frame, uint32(i))
		frame = append(frame, 0)
		want = append(append(want, frame...), bytes.Repeat([]byte{byte('a' + i%26)}, 30<<10)...)
		if !c.tryDirect(p, &Response{Body: body}) {
			t.Fatalf("response %d not written directly", i)
		}
		c.q.mu.Lock()
		left := len(c.q.leftover)
		c.q.mu.Unlock()
		if left > 0 {
			break
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.writeLeftover() }()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the peer read other bytes than the responses, in order")
	}
}

// TestIdleWriterPaths: one request at a time, so the connection's writer is
// idle whenever one arrives. A response ready at once is written by the
// reader; a Deferred queued while the writer is idle is parked for its
// completer without waking the writer, and the writer must still be woken
// for what the completer cannot write: a response over directMax, no
// response at all (then the next request is answered), a completion from
// a timer long after.
func TestIdleWriterPaths(t *testing.T) {
	next := make(chan *Deferred, 1)
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.MetadataRequest); !ok {
			return nil, false // ApiVersions: answered at once
		}
		d := NewDeferred()
		next <- d
		return d, true
	}, nil)
	rc := dialRaw(t, ts.addr)
	// waitIdle waits for the writer to be idle with d queued (nil: with
	// nothing queued).
	waitIdle := func(d *Deferred) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			ts.Server.mu.Lock()
			var c *conn
			for c = range ts.Server.conns {
			}
			ts.Server.mu.Unlock()
			if c != nil {
				c.q.mu.Lock()
				// No token left in readable either: a stale one would wake
				// the writer (and end its idleness) for nothing.
				ok := c.q.idle && len(c.q.readable) == 0 &&
					(d == nil && c.q.n == 0 || d != nil && c.q.parked != nil && c.q.parked.deferred == d)
				c.q.mu.Unlock()
				if ok {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the writer never went idle")
			}
		}
	}
	// counterMoved waits for directWrites to pass from: the writing
	// goroutine counts after its writev, which the client may have read.
	counterMoved := func(from int64) bool {
		for deadline := time.Now().Add(time.Second); directWrites.Load() == from; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return false
			}
		}
		return true
	}

	calls := 0
	apiVersions := func() {
		t.Helper()
		calls++
		direct0 := directWrites.Load()
		corr := rc.send(kmsg.NewPtrApiVersionsRequest(), 3)
		rc.read(kmsg.NewPtrApiVersionsResponse(), 3, corr)
		if !counterMoved(direct0) {
			t.Errorf("call %d: a response ready at once on an idle connection was not written by the reader", calls)
		}
		waitIdle(nil)
	}
	deferred := func(size int, complete func(d *Deferred, body *Body)) (corr int32) {
		t.Helper()
		corr = rc.send(metadataRequest(), 12)
		d := <-next
		waitIdle(d)
		body := AcquireBody()
		body.AppendBytes(bytes.Repeat([]byte{'k'}, size))
		complete(d, body)
		return corr
	}
	readBody := func(corr int32, size int) {
		t.Helper()
		b, err := rc.readFrame()
		if err != nil {
			t.Fatalf("response %d: %v", corr, err)
		}
		if got := int32(binary.BigEndian.Uint32(b)); got != corr || len(b) != 5+size {
			t.Fatalf("response %d: correlation id %d, %d bytes, want %d", corr, got, len(b), 5+size)
		}
		waitIdle(nil)
	}

	waitIdle(nil)
	apiVersions()
	// Small: written by its completer, here this goroutine.
	direct0 := directWrites.Load()
	corr := deferred(100, func(d *Deferred, body *Body) { d.Complete(&Response{Body: body}) })
	readBody(corr, 100)
	if !counterMoved(direct0) {
		t.Error("a Deferred parked on an idle writer was not written by its completer")
	}
	// Over directMax: the writer is woken to write it.
	corr = deferred(directMax+1, func(d *Deferred, body *Body) { d.Complete(&Response{Body: body}) })
	readBody(corr, directMax+1)
	// No response: the next request is answered.
	deferred(1, func(d *Deferred, body *Body) { ReleaseBody(body); d.Complete(nil) })
	waitIdle(nil) // the writer was woken to drop it
	apiVersions()
	// Completed by a timer goroutine.
	corr = deferred(10, func(d *Deferred, body *Body) {
		time.AfterFunc(50*time.Millisecond, func() { d.Complete(&Response{Body: body}) })
	})
	readBody(corr, 10)
	apiVersions()
}
