package network

import (
	"sync"
	"time"
)

// RateMeter measures a rate over a number of sample windows, as Kafka's
// quota sensors do (a Rate over a SampledStat): the connections a listener
// accepts a second (max.connection.creation.rate), and the broker's byte
// rates (client quotas, replication throttles).
//
// Concurrency: safe for any goroutine.
type RateMeter struct {
	window time.Duration

	mu      sync.Mutex
	samples []rateSample // samples[w % len] holds window w
}

type rateSample struct {
	window int64 // the window's index since the epoch
	n      int64
}

// NewRateMeter measures over samples windows of window each (Kafka's
// quota.window.num and quota.window.size.seconds: 11 of a second).
func NewRateMeter(samples int, window time.Duration) *RateMeter {
	return &RateMeter{window: max(window, time.Millisecond), samples: make([]rateSample, max(samples, 1))}
}

// Span is what the rate divides by: like Kafka's Rate, at least samples-1
// whole windows (one window with a single sample), so a meter that was
// idle allows a burst of that many windows' worth before it is over a
// bound.
func (m *RateMeter) Span() time.Duration {
	return time.Duration(max(len(m.samples)-1, 1)) * m.window
}

func (m *RateMeter) of(now time.Time) int64 { return now.UnixNano() / int64(m.window) }

// Record counts n at now.
func (m *RateMeter) Record(n int64, now time.Time) {
	w := m.of(now)
	m.mu.Lock()
	s := &m.samples[w%int64(len(m.samples))]
	if s.window != w {
		s.window, s.n = w, 0
	}
	s.n += n
	m.mu.Unlock()
}

// Rate is the measured amount a second at now.
func (m *RateMeter) Rate(now time.Time) float64 {
	w := m.of(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	var total int64
	for _, s := range m.samples {
		if s.window > w-int64(len(m.samples)) && s.window <= w {
			total += s.n
		}
	}
	return float64(total) / m.Span().Seconds()
}

// Idle reports whether nothing was recorded in the windows the rate
// covers: such a meter measures 0, as a new one would.
func (m *RateMeter) Idle(now time.Time) bool {
	w := m.of(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.samples {
		if s.window > w-int64(len(m.samples)) && s.n != 0 {
			return false
		}
	}
	return true
}

// Throttle is how long a rate this meter measured stays over bound (a
// second's worth): Kafka's QuotaUtils.throttleTime, (rate - bound) / bound
// of the span; zero at or under it, or for a bound of zero.
func (m *RateMeter) Throttle(rate, bound float64) time.Duration {
	if bound <= 0 || rate <= bound {
		return 0
	}
	return time.Duration((rate - bound) / bound * float64(m.Span()))
}

// BoundedThrottle is Throttle at most longest (Kafka's
// QuotaUtils.boundedThrottleTime): zero at or under bound, and longest for
// any rate over a bound of zero, whose throttle has no end.
func (m *RateMeter) BoundedThrottle(rate, bound float64, longest time.Duration) time.Duration {
	switch {
	case rate <= bound:
		return 0
	case bound <= 0:
		return longest
	}
	return min(m.Throttle(rate, bound), longest)
}
