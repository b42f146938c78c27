package broker

import (
	"context"
	"sync"
	"time"

	"github.com/keelstream/keel/network"
)

// The purgatory: Kafka's DelayedOperationPurgatory, the Go way. A request
// that cannot be answered yet (a long-poll Fetch below fetch.min.bytes, an
// acks=all Produce waiting for the high watermark) parks: it registers a
// waiter on the watch list of every partition it depends on and one
// goroutine owned by the Broker waits for the first of
//
//   - a signal from a watched partition (an append, a high watermark move,
//     a leadership change): it re-checks and completes if it can;
//   - its deadline (max.wait.ms, the produce timeout): it completes with
//     what it has;
//   - the connection closing: the response would be dropped, so it stops;
//   - the broker closing: it completes with what it has.
//
// Signals are coalesced (a waiter's channel holds one), so a burst of
// appends costs the waiter one re-check, and the appending goroutine never
// blocks: waking is a non-blocking send per waiter.

// waiter is a parked request's wake-up channel, and the means for a
// waking goroutine to complete the request itself (tryComplete).
type waiter struct {
	wake chan struct{}
	// done is closed once the request is completed, by whichever
	// goroutine completed it.
	done chan struct{}
	// mu serialises completion attempts (the parked goroutine's and those
	// of appenders calling tryComplete) and guards completed.
	mu        sync.Mutex
	completed bool
	check     delayedCheck
	d         *network.Deferred
}

func newWaiter() *waiter {
	return &waiter{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// attempt runs the completion check once; it reports whether the request
// is (now or already) complete.
func (w *waiter) attempt(final bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.completed {
		return true
	}
	resp := w.check(final)
	if resp == nil && !final {
		return false
	}
	w.finishLocked(resp)
	return true
}

// finishLocked completes the request with resp (nil: no response) and
// releases the parked goroutine. w.mu is held.
func (w *waiter) finishLocked(resp *network.Response) {
	w.completed = true
	w.d.Complete(resp)
	close(w.done)
}

// tryComplete is Kafka's checkAndComplete: the goroutine that made the
// request completable (an append) runs the check itself, sparing the hop
// through the parked goroutine. It never blocks on I/O beyond the check.
func (w *waiter) tryComplete() bool { return w.attempt(false) }

// signal wakes the waiter; it never blocks.
func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
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
	d := network.NewDeferred()
	w := newWaiter()
	w.check, w.d = check, d
	for _, p := range parts {
		watch(p).add(w)
	}
	unwatch := func() {
		for _, p := range parts {
			watch(p).remove(w)
		}
	}
	w.signal()
	started := b.spawn(func() {
		defer unwatch()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			select {
			case <-w.done:
				return // completed by a waking goroutine (tryComplete)
			case <-w.wake:
				if w.attempt(false) {
					return
				}
			case <-timer.C:
				w.attempt(true)
				return
			case <-ctx.Done():
				w.mu.Lock()
				if !w.completed {
					w.finishLocked(nil)
				}
				w.mu.Unlock()
				return
			case <-b.closing():
				w.attempt(true)
				return
			}
		}
	})
	if !started {
		// Broker closing: answer here. Mark the waiter completed first so
		// that no appender runs its check on the unused Deferred.
		w.mu.Lock()
		w.completed = true
		w.mu.Unlock()
		unwatch()
		return check(true)
	}
	return d
}
