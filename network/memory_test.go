package network

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// queued.max.request.bytes (KIP-72): while the requests read and not yet
// handled hold the pool, no connection reads another request; as a
// handler returns its request's bytes, reading resumes. As with Kafka's
// non-strict pool, a request is admitted while any memory is left, even
// one larger than what is left.
func TestQueuedMaxRequestBytesStopsReading(t *testing.T) {
	const limit = 4096
	started := make(chan int, 8)
	release := make(map[int]chan struct{})
	for i := range 4 {
		release[i] = make(chan struct{})
	}
	ts := startServer(t, func(ctx context.Context, req *Request) (Result, bool) {
		p, ok := req.Msg.(*kmsg.ProduceRequest)
		if !ok {
			return nil, false
		}
		i := int(p.TimeoutMillis) // which client sent it
		started <- i
		select {
		case <-release[i]:
		case <-ctx.Done(): // the server closes
		case <-time.After(20 * time.Second):
		}
		return nil, true // no response: the test watches the handler only
	}, func(cfg *Config) {
		cfg.SocketRequestMaxBytes = limit
		cfg.QueuedMaxRequestBytes = limit
	})
	send := func(i, recordBytes int) *rawClient {
		rc := dialRaw(t, ts.addr)
		req := produceRequest(make([]byte, recordBytes))
		req.TimeoutMillis = int32(i)
		rc.send(req, 7)
		return rc
	}
	expectStart := func(want int) {
		t.Helper()
		select {
		case got := <-started:
			if got != want {
				t.Fatalf("request %d started, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d did not start", want)
		}
	}
	expectNoStart := func(what string) {
		t.Helper()
		select {
		case got := <-started:
			t.Fatalf("request %d started %s", got, what)
		case <-time.After(200 * time.Millisecond):
		}
	}

	send(0, 3000) // takes ~3.1 KB: ~1 KB left
	expectStart(0)
	send(1, 3000) // admitted while memory is left, though more than is left
	expectStart(1)
	send(2, 10) // nothing left: not read
	expectNoStart("with the pool exhausted")
	close(release[0]) // ~1 KB back: request 2 is read
	expectStart(2)
	close(release[1])
	close(release[2])
	waitFor(t, "every byte back in the pool", func() bool {
		ts.mem.mu.Lock()
		defer ts.mem.mu.Unlock()
		return ts.mem.avail == limit
	})

	// Exhausted again, with a reader waiting for memory: closing the
	// server (the test's cleanup) must not wait on it.
	send(3, 3000)
	expectStart(3)
	send(3, 3000)
	expectStart(3)
	send(3, 10)
	expectNoStart("with the pool exhausted again")
}

// A pool smaller than the largest request could never admit it whole;
// Kafka's SimpleMemoryPool refuses that configuration too.
func TestQueuedMaxRequestBytesBelowTheLargestRequestIsRefused(t *testing.T) {
	_, err := NewServer(Config{
		Listeners:             []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext}},
		Handler:               &testHandler{},
		Logger:                hclog.NewNullLogger(),
		SocketRequestMaxBytes: 1 << 20,
		QueuedMaxRequestBytes: 1 << 10,
	})
	if err == nil || !strings.Contains(err.Error(), "queued.max.request.bytes") {
		t.Fatalf("NewServer: %v, want an error naming queued.max.request.bytes", err)
	}
}
