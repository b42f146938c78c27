package storage

import (
	"math"
	"sync"
	"time"
)

// cleanerThrottlePeriod is how long the cleaner's rate is measured over
// before the count starts again, so that a slow stretch of a pass (CPU
// bound filtering) does not buy a burst above the rate afterwards (Kafka's
// Throttler measures over 300 ms too).
const cleanerThrottlePeriod = 300 * time.Millisecond

// minThrottleSleep is the shortest sleep the throttler takes: being a
// little ahead of the rate is left for the next read to settle.
const minThrottleSleep = 10 * time.Millisecond

// ioThrottler holds the log cleaner to log.cleaner.io.max.bytes.per.second,
// as Kafka's Throttler does (and the deleter to
// keel.log.delete.max.bytes.per.second, deleter.go): it counts the bytes passes read and write and,
// whenever they came faster than the rate over the current period, sleeps
// until they would have taken that long at it. The budget is shared by the
// passes running side by side (log.cleaner.threads): the rate bounds them
// together, as Kafka's does all its cleaner threads. Unlike Kafka's, which
// looks only once a period has passed (a pass shorter than 300 ms is never
// slowed), it looks at every read and write. The rate is read each time,
// so a change applies to passes already running.
//
// Concurrency: an ioThrottler is one pass's; its budget is safe for
// concurrent use.
type ioThrottler struct {
	rate func() float64 // bytes a second; not positive, or above MaxFloat64 / 2: unthrottled
	stop <-chan struct{}
	// budget is the count shared with the other passes (nil: one of its
	// own, made at the first account).
	budget *ioBudget
}

// ioBudget is the cleaner's byte count over the current period.
type ioBudget struct {
	mu          sync.Mutex
	periodStart time.Time
	observed    int64
}

// unthrottled reports whether rate sets no bound: Kafka's default is
// Double.MAX_VALUE.
func unthrottled(rate float64) bool {
	return rate <= 0 || math.IsNaN(rate) || rate > math.MaxFloat64/2
}

// account counts n bytes read or written and sleeps when the passes are
// ahead of the rate. It returns errCleanAborted when stop closes during
// the sleep. A nil throttler never throttles.
func (t *ioThrottler) account(n int) error {
	if t == nil {
		return nil
	}
	if t.budget == nil {
		t.budget = new(ioBudget)
	}
	wait := t.budget.take(n, t.rate(), time.Now())
	if wait <= 0 {
		return nil
	}
	sleep := time.NewTimer(wait)
	select {
	case <-sleep.C:
		return nil
	case <-t.stop:
		sleep.Stop()
		return errCleanAborted
	}
}

// take counts n bytes at now and returns how long their pass sleeps: until
// the period's bytes would have taken that long at rate. The next period
// starts when that sleep ends, so bytes another pass counts meanwhile are
// due after it (the passes queue behind one another).
func (b *ioBudget) take(n int, rate float64, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if unthrottled(rate) {
		b.periodStart, b.observed = time.Time{}, 0
		return 0
	}
	if b.periodStart.IsZero() {
		b.periodStart = now
	}
	b.observed += int64(n)
	elapsed := now.Sub(b.periodStart)
	// At most an hour ahead: a rate near 0 must not overflow a Duration.
	if due := time.Duration(min(float64(b.observed)/rate, 3600) * float64(time.Second)); due-elapsed >= minThrottleSleep {
		wake := b.periodStart.Add(due)
		b.periodStart, b.observed = wake, 0
		return wake.Sub(now)
	}
	if elapsed >= cleanerThrottlePeriod {
		b.periodStart, b.observed = now, 0
	}
	return 0
}
