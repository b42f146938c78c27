package broker

import (
	"context"
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

// waiter is a parked request's wake-up channel.
type waiter struct{ wake chan struct{} }

func newWaiter() *waiter { return &waiter{wake: make(chan struct{}, 1)} }

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
	w := newWaiter()
	for _, p := range parts {
		watch(p).add(w)
	}
	unwatch := func() {
		for _, p := range parts {
			watch(p).remove(w)
		}
	}
	d := network.NewDeferred()
	w.signal()
	started := b.spawn(func() {
		defer unwatch()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			select {
			case <-w.wake:
				if resp := check(false); resp != nil {
					d.Complete(resp)
					return
				}
			case <-timer.C:
				d.Complete(check(true))
				return
			case <-ctx.Done():
				d.Complete(nil)
				return
			case <-b.closing():
				d.Complete(check(true))
				return
			}
		}
	})
	if !started {
		unwatch()
		return check(true)
	}
	return d
}
