package broker

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/network"
)

// notCoordinatorCode answers a request whose shard stopped.
var notCoordinatorCode = kerr.NotCoordinator.Code

// groupFanout answers a request about several groups, possibly on several
// shards of this node: each group's part runs on its shard's goroutine
// (or fails at once with its routing error), and the response is sent
// when the last part is done. Parts write only their own slot of the
// response; mu orders those writes before the final build.
type groupFanout struct {
	d       *network.Deferred
	mu      sync.Mutex
	left    int
	started bool
	build   func() *network.Response
}

// newGroupFanout expects n parts; build makes the response once all are
// done.
func newGroupFanout(n int, build func() *network.Response) *groupFanout {
	return &groupFanout{d: network.NewDeferred(), left: n, build: build}
}

// done marks one part finished.
//
// Concurrency: any goroutine.
func (f *groupFanout) done() {
	f.mu.Lock()
	f.left--
	last := f.left == 0 && f.started
	f.mu.Unlock()
	if last {
		f.d.Complete(f.build())
	}
}

// result returns the request's Result once every part was dispatched: a
// ready Response when they all finished already, the Deferred otherwise.
func (f *groupFanout) result() network.Result {
	f.mu.Lock()
	f.started = true
	finished := f.left == 0
	f.mu.Unlock()
	if finished {
		return f.build()
	}
	return f.d
}

// onGroup runs part on groupID's shard, or fail with the routing error
// code (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) when it cannot;
// either way it calls f.done once the part is complete (part calls its
// finish argument, maybe later).
func (b *Broker) onGroup(f *groupFanout, groupID string, fail func(code int16), part func(s *offsetsShard, now int64, finish func())) {
	s, code := b.groups.shardFor(groupID)
	if code != 0 {
		fail(code)
		f.done()
		return
	}
	var once sync.Once
	finish := func() { once.Do(f.done) }
	if !s.submit(func(now int64) { part(s, now, finish) }, func() { fail(notCoordinatorCode); finish() }) {
		fail(notCoordinatorCode)
		finish()
	}
}
