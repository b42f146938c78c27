package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelstream/keel/network"
)

// The purgatory: Kafka's DelayedOperationPurgatory, the Go way. A request
// that cannot be answered yet (a long-poll Fetch below fetch.min.bytes, an
// acks=all Produce waiting for the high watermark) parks: it registers a
// waiter on the watch list of every partition it depends on, and completes
// on the first of
//
//   - an append to a watched partition: the appending goroutine runs the
//     check itself (Kafka's checkAndComplete) and, when it passes, answers;
//   - a signal from a watched partition (a high watermark move, a
//     leadership change): a goroutine owned by the Broker re-checks;
//   - its deadline (max.wait.ms, the produce timeout): a timer answers with
//     what there is;
//   - the connection closing: the response would be dropped, so it stops;
//   - the broker closing: Close answers with what there is.
//
// A parked request holds no goroutine: at thousands of long polls a second
// a goroutine each (started, then woken only to exit) cost two thread
// wake-ups per request, which on a small machine is most of a broker's
// CPU at low batching. Signals are coalesced (one re-check pending per
// waiter), and neither appenders nor signallers ever block.

// waiter is a parked request, or (check nil) a listener that only wants to
// hear of changes on its wake channel (the group coordinator).
type waiter struct {
	b *Broker
	// mu serialises completion attempts (appenders' tryComplete, re-checks,
	// the timer, Close) and guards completed.
	mu        sync.Mutex
	completed bool
	check     delayedCheck
	d         *network.Deferred
	// release undoes park's registrations (watch lists, timer, connection
	// callback, the broker's registry); run once, by the completer.
	release func()
	// rechecking is set while a re-check goroutine is pending.
	rechecking atomic.Bool
	// wake is a listener's channel (capacity one, signals coalesce).
	wake chan struct{}
}

// newListener is a waiter for a goroutine that wants to hear of appends and
// high watermark moves on a watch list through its wake channel.
func newListener() *waiter { return &waiter{wake: make(chan struct{}, 1)} }

// attempt runs the completion check once; it reports whether the request
// is (now or already) complete.
func (w *waiter) attempt(final bool) bool {
	w.mu.Lock()
	if w.completed {
		w.mu.Unlock()
		return true
	}
	resp := w.check(final)
	if resp == nil && !final {
		w.mu.Unlock()
		return false
	}
	w.completed = true
	w.mu.Unlock()
	w.finish(resp)
	return true
}

// abandon completes the request without a response: its connection is gone.
func (w *waiter) abandon() {
	w.mu.Lock()
	if w.completed {
		w.mu.Unlock()
		return
	}
	w.completed = true
	w.mu.Unlock()
	w.finish(nil)
}

// finish answers (resp nil: no response) and releases the registrations.
// Only the goroutine that set completed calls it.
func (w *waiter) finish(resp *network.Response) {
	w.d.Complete(resp)
	w.release()
}

// tryComplete is Kafka's checkAndComplete: the goroutine that made the
// request completable (an append) runs the check itself, sparing the hop
// through another goroutine. It never blocks on I/O beyond the check (and
// the response's direct write, which never blocks either).
func (w *waiter) tryComplete() bool { return w.attempt(false) }

// signal tells the waiter its partitions changed; it never blocks. A
// listener hears it on its channel; a parked request gets a re-check on a
// goroutine of the Broker, unless one is already pending.
func (w *waiter) signal() {
	if w.check == nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return
	}
	if !w.rechecking.CompareAndSwap(false, true) {
		return
	}
	if !w.b.spawn(func() {
		w.rechecking.Store(false) // a signal from here on schedules another
		w.attempt(false)
	}) {
		w.rechecking.Store(false) // closing: Close answers it
	}
}

// delayedCheck is a parked request's completion test: it returns the
// response when the request can complete, or nil to keep waiting. With
// final set (deadline, broker closing) it must return a response.
type delayedCheck func(final bool) *network.Response

// park parks a request on the partitions' watch lists (watch picks which
// list of each) until check completes it, wait passes or ctx (the
// connection) ends. It re-checks once right after registering, so an
// append that raced with the caller's own first check is never missed.
// After Close it does not park: check(true) answers at once.
//
// Concurrency: any goroutine; never blocks.
func (b *Broker) park(ctx context.Context, parts []*partition, watch func(*partition) *watchList, wait time.Duration, check delayedCheck) network.Result {
	w := &waiter{b: b, check: check, d: network.NewDeferred()}
	// Wire everything up holding w.mu: Close (which finds w in the
	// registry), a timer or connection callback, or an appender that gets
	// to w meanwhile waits for it in attempt, so release is always set.
	w.mu.Lock()
	if !b.parked.add(w) {
		w.mu.Unlock()
		return check(true) // Broker closing
	}
	for _, p := range parts {
		watch(p).add(w)
	}
	timer := time.AfterFunc(wait, func() {
		if !b.enter() {
			return // Close answers it
		}
		defer b.wg.Done()
		w.attempt(true)
	})
	stopAbandon := context.AfterFunc(ctx, w.abandon)
	w.release = func() {
		for _, p := range parts {
			watch(p).remove(w)
		}
		timer.Stop()
		stopAbandon()
		b.parked.remove(w)
	}
	w.mu.Unlock()
	w.attempt(false)
	return w.d
}

// parkedSet is the Broker's registry of parked requests, for Close to
// answer them.
type parkedSet struct {
	mu     sync.Mutex
	closed bool
	ws     map[*waiter]struct{}
}

// add registers w; false once the set was drained by Close.
func (s *parkedSet) add(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.ws == nil {
		s.ws = map[*waiter]struct{}{}
	}
	s.ws[w] = struct{}{}
	return true
}

func (s *parkedSet) remove(w *waiter) {
	s.mu.Lock()
	delete(s.ws, w)
	s.mu.Unlock()
}

// drain closes the set to new requests and returns those parked.
func (s *parkedSet) drain() []*waiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	out := make([]*waiter, 0, len(s.ws))
	for w := range s.ws {
		out = append(out, w)
	}
	return out
}
