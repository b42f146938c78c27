package network

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequestDoneOncePerRequest: Config.RequestDone hears of every request
// exactly once: an immediate response, a request with none (acks=0), and
// Deferreds completed before the handler returns, from another goroutine
// while the request is parked, and with the two racing. Its times run in
// order; a parked request's wait is remote time, and the response of the
// request behind it, ready at once, waits that long in the response queue.
func TestRequestDoneOncePerRequest(t *testing.T) {
	var mu sync.Mutex
	seen := map[int32]int{}
	times := map[int32]RequestTimes{}
	received := map[int32]time.Time{}
	const park = 30 * time.Millisecond
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		switch req.Header.CorrelationID % 4 {
		case 0:
			return nil, false // the test handler answers
		case 1:
			if _, ok := req.Msg.(*kmsg.ProduceRequest); ok {
				return nil, true // acks=0: no response
			}
			return nil, false
		case 2:
			d := NewDeferred()
			d.Complete(&Response{Msg: kmsg.NewPtrMetadataResponse()}) // before returning
			return d, true
		default:
			d := NewDeferred()
			go func() {
				if req.Header.CorrelationID%8 == 3 {
					time.Sleep(park)
				}
				d.Complete(&Response{Msg: kmsg.NewPtrMetadataResponse()})
			}()
			return d, true
		}
	}, func(c *Config) {
		c.RequestDone = func(req *Request, rt RequestTimes) {
			mu.Lock()
			defer mu.Unlock()
			seen[req.Header.CorrelationID]++
			times[req.Header.CorrelationID] = rt
			received[req.Header.CorrelationID] = req.Received
		}
	})
	rc := dialRaw(t, ts.addr)
	const n = 200
	answered := []int32{}
	for i := 0; i < n; i++ {
		if i%4 == 1 {
			p := produceRequest([]byte("x"))
			p.Acks = 0
			rc.send(p, 3)
			continue
		}
		answered = append(answered, rc.send(metadataRequest(), 12))
	}
	for _, corr := range answered {
		rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)
	}
	waitFor(t, "every request reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	mu.Lock()
	defer mu.Unlock()
	for corr := int32(0); corr < n; corr++ {
		if seen[corr] != 1 {
			t.Errorf("request %d reported %d times", corr, seen[corr])
		}
		rt := times[corr]
		inOrder := !received[corr].IsZero() && rt.Started >= 0 && rt.Handled >= rt.Started && rt.Completed >= rt.Handled
		if corr%4 == 1 {
			inOrder = inOrder && rt.NoResponse && rt.Sending == 0 && rt.Sent == 0
		} else {
			inOrder = inOrder && !rt.NoResponse && rt.Sending >= rt.Completed && rt.Sent >= rt.Sending
		}
		if !inOrder {
			t.Errorf("request %d's times out of order: %+v", corr, rt)
		}
		if corr%8 == 3 && rt.Completed-rt.Handled < park {
			t.Errorf("parked request %d waited %v after its handler, want at least %v", corr, rt.Completed-rt.Handled, park)
		}
		if corr%8 == 4 && rt.Sending-rt.Completed < park/2 {
			t.Errorf("request %d, behind a parked one, waited %v in the response queue, want about %v", corr, rt.Sending-rt.Completed, park)
		}
	}
}

// A client that reads its response slowly shows in the response's send
// time: the writer is still writing a response larger than the sockets
// hold until the client has read most of it.
func TestRequestDoneSendTime(t *testing.T) {
	const size = 64 << 20
	const wait = 150 * time.Millisecond
	got := make(chan RequestTimes, 1)
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		b := AcquireBody()
		b.AppendRegion(BytesRegion(make([]byte, size)))
		return &Response{Body: b}, true
	}, func(c *Config) {
		c.RequestDone = func(_ *Request, rt RequestTimes) { got <- rt }
	})
	rc := dialRaw(t, ts.addr)
	rc.send(metadataRequest(), 12)
	time.Sleep(wait)
	b, err := rc.readFrame()
	if err != nil || len(b) < size {
		t.Fatalf("read %d bytes, %v; want the %d of the body and a header", len(b), err, size)
	}
	select {
	case rt := <-got:
		if send := rt.Sent - rt.Sending; send < wait/2 {
			t.Errorf("send time %v for %d MiB read after %v, want about %v", send, size>>20, wait, wait)
		}
		if local := rt.Handled - rt.Started; local > wait/2 {
			t.Errorf("local time %v: the write counted as the handler's", local)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not reported")
	}
}
