package network

import (
	"testing"
	"time"
)

// TestRateMeter: the rate divides by at least samples-1 windows (Kafka's
// Rate), forgets windows that fell out, and the throttle is Kafka's
// (rate - bound) / bound of the span.
func TestRateMeter(t *testing.T) {
	m := NewRateMeter(3, time.Second)
	t0 := time.Unix(1000, 0)
	if !m.Idle(t0) || m.Rate(t0) != 0 {
		t.Fatal("a new meter is not idle at 0")
	}
	m.Record(10, t0)
	m.Record(10, t0.Add(time.Second))
	// 20 over the span of 2 windows.
	if r := m.Rate(t0.Add(time.Second)); r != 10 {
		t.Fatalf("rate %v, want 10", r)
	}
	if d := m.Throttle(m.Rate(t0.Add(time.Second)), 5); d != 2*time.Second {
		t.Fatalf("throttle %v at 10/s over a bound of 5/s, want 2s ((10-5)/5 of the 2 s span)", d)
	}
	if d := m.Throttle(m.Rate(t0.Add(time.Second)), 20); d != 0 {
		t.Fatalf("throttle %v under the bound", d)
	}
	// Bounded (Kafka's boundedThrottleTime): at most longest, longest over
	// a bound of 0, nothing at or under the bound.
	for _, c := range []struct {
		bound float64
		want  time.Duration
	}{{5, time.Second}, {8, 500 * time.Millisecond}, {0, time.Second}, {10, 0}} {
		if d := m.BoundedThrottle(10, c.bound, time.Second); d != c.want {
			t.Errorf("bounded throttle at 10/s over %v: %v, want %v", c.bound, d, c.want)
		}
	}
	// Three windows later the first two are gone.
	if r := m.Rate(t0.Add(4 * time.Second)); r != 0 || !m.Idle(t0.Add(4*time.Second)) {
		t.Fatalf("rate %v after the windows passed", r)
	}
}
