package storage

import (
	"math"
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
// as Kafka's Throttler does: it counts the bytes a pass reads and writes
// and, whenever they came faster than the rate over the current period,
// sleeps until they would have taken that long at it. Unlike Kafka's,
// which looks only once a period has passed (a pass shorter than 300 ms is
// never slowed), it looks at every read and write. The rate is read each
// time, so a change applies to a pass already running.
//
// Concurrency: one pass's goroutine.
type ioThrottler struct {
	rate func() float64 // bytes a second; not positive, or above MaxFloat64 / 2: unthrottled
	stop <-chan struct{}

	periodStart time.Time
	observed    int64
}

// unthrottled reports whether rate sets no bound: Kafka's default is
// Double.MAX_VALUE.
func unthrottled(rate float64) bool {
	return rate <= 0 || math.IsNaN(rate) || rate > math.MaxFloat64/2
}

// account counts n bytes read or written and sleeps when the pass is
// ahead of the rate. It returns errCleanAborted when stop closes during
// the sleep. A nil throttler never throttles.
func (t *ioThrottler) account(n int) error {
	if t == nil {
		return nil
	}
	rate := t.rate()
	if unthrottled(rate) {
		t.periodStart, t.observed = time.Time{}, 0
		return nil
	}
	now := time.Now()
	if t.periodStart.IsZero() {
		t.periodStart = now
	}
	t.observed += int64(n)
	elapsed := now.Sub(t.periodStart)
	// At most an hour ahead: a rate near 0 must not overflow a Duration.
	if due := time.Duration(min(float64(t.observed)/rate, 3600) * float64(time.Second)); due-elapsed >= minThrottleSleep {
		sleep := time.NewTimer(due - elapsed)
		select {
		case <-sleep.C:
		case <-t.stop:
			sleep.Stop()
			return errCleanAborted
		}
		t.periodStart, t.observed = time.Now(), 0
		return nil
	}
	if elapsed >= cleanerThrottlePeriod {
		t.periodStart, t.observed = now, 0
	}
	return nil
}
