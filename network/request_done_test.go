package network

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequestDoneOncePerRequest: Config.RequestDone hears of every request
// exactly once, when its response is ready: an immediate response, a
// request with none (acks=0), and Deferreds completed before the handler
// returns, from another goroutine while the request is parked, and with
// the two racing. A parked request's time includes its wait.
func TestRequestDoneOncePerRequest(t *testing.T) {
	var mu sync.Mutex
	seen := map[int32]int{}
	took := map[int32]time.Duration{}
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
		c.RequestDone = func(req *Request, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			seen[req.Header.CorrelationID]++
			took[req.Header.CorrelationID] = d
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
		if corr%8 == 3 && took[corr] < park {
			t.Errorf("parked request %d took %v, want at least %v", corr, took[corr], park)
		}
	}
}
