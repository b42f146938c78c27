package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/storage"
)

// heartbeatController is a controller listener on loopback that registers
// a broker and notes when each of its heartbeats arrives; it leaves the
// heartbeats numbered in drop unanswered, as if lost.
type heartbeatController struct {
	drop map[int]bool

	mu       sync.Mutex
	arrivals []time.Time
	held     []*network.Deferred
}

func (h *heartbeatController) SupportedVersions(_ string, key int16) (int16, int16, bool) {
	switch key {
	case kmsg.BrokerRegistration.Int16():
		return 0, kmsg.NewPtrBrokerRegistrationRequest().MaxVersion(), true
	case kmsg.BrokerHeartbeat.Int16():
		return 0, kmsg.NewPtrBrokerHeartbeatRequest().MaxVersion(), true
	}
	return 0, 0, false
}

func (h *heartbeatController) Handle(_ context.Context, req *network.Request) network.Result {
	switch req.Msg.(type) {
	case *kmsg.BrokerRegistrationRequest:
		resp := kmsg.NewPtrBrokerRegistrationResponse()
		resp.BrokerEpoch = 10
		return &network.Response{Msg: resp}
	case *kmsg.BrokerHeartbeatRequest:
		h.mu.Lock()
		defer h.mu.Unlock()
		h.arrivals = append(h.arrivals, time.Now())
		if h.drop[len(h.arrivals)] {
			d := network.NewDeferred()
			h.held = append(h.held, d)
			return d
		}
		resp := kmsg.NewPtrBrokerHeartbeatResponse()
		resp.IsCaughtUp, resp.IsFenced = true, false
		return &network.Response{Msg: resp}
	}
	return &network.Response{Msg: req.Msg.ResponseKind()}
}

func (h *heartbeatController) times() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.arrivals...)
}

func (h *heartbeatController) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.held {
		d.Complete(&network.Response{Msg: kmsg.NewPtrBrokerHeartbeatResponse()})
	}
	h.held = nil
}

// A heartbeat the controller does not answer is given up after one
// heartbeat interval, and the next follows an interval later (Kafka since
// KAFKA-19294): one lost heartbeat leaves about three intervals between
// the two that arrive around it, which a session longer than that
// survives. The broker used to wait at least 2 s for an answer: 2 s more,
// enough to fence a broker whose session was shorter than about 4 s.
func TestLostHeartbeatIsGivenUpAfterOneInterval(t *testing.T) {
	const interval = 250 * time.Millisecond
	h := &heartbeatController{drop: map[int]bool{3: true}}
	srv := serveOnLoopback(t, network.Config{
		Listeners: []network.Listener{{Name: "CONTROLLER", Host: "127.0.0.1", SecurityProtocol: network.Plaintext}},
		Handler:   h,
	}, h.release)
	addr := srv.Addr("CONTROLLER").String()
	logs, err := storage.OpenManager(storage.ManagerConfig{LogDirs: []string{t.TempDir()}, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	ch := newControllerChannel(func() map[int32]string { return map[int32]string{1: addr} },
		func() (int32, bool) { return 1, true }, "lifecycle-test", nil)
	t.Cleanup(ch.close)
	l := newBrokerLifecycle(ch, func() int64 { return 0 }, 2, "cluster", "", nil, interval, nil, logs,
		map[string]metadata.Uuid{}, nil, metadata.Uuid{1}, hclog.NewNullLogger())
	t.Cleanup(l.close)

	waitUntil(t, func() bool { return len(h.times()) >= 5 })
	at := h.times()
	// The first answer unfences the broker, so the heartbeats after it go
	// an interval apart; the third one is lost.
	gap := at[3].Sub(at[1])
	t.Logf("arrivals after the first: %v", func() (d []time.Duration) {
		for _, a := range at[1:] {
			d = append(d, a.Sub(at[0]).Round(time.Millisecond))
		}
		return d
	}())
	if gap > 7*interval { // 2 s and 2 intervals before the change; the rest is slack for a loaded machine
		t.Fatalf("the heartbeats around a lost one arrived %v apart, want about 3 intervals (%v): the lost one was waited for too long", gap, 3*interval)
	}
	if gap < 3*interval-interval/2 {
		t.Fatalf("the heartbeats around a lost one arrived %v apart, want about 3 intervals (%v): the lost one was not waited for", gap, 3*interval)
	}
}
