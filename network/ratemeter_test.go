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
	// Three windows later the first two are gone.
	if r := m.Rate(t0.Add(4 * time.Second)); r != 0 || !m.Idle(t0.Add(4*time.Second)) {
		t.Fatalf("rate %v after the windows passed", r)
	}
}
