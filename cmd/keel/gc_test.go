package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentForKeepsTheGoalAtTheFloor(t *testing.T) {
	const mib = 1 << 20
	goal := func(live uint64, p int) uint64 {
		return max(defaultHeapMinimum*uint64(p)/100, live+live*uint64(p)/100)
	}
	for _, live := range []uint64{0, 512 << 10, 1 * mib, 3 * mib, 10 * mib, 20 * mib, 31 * mib} {
		p := gcPercentFor(live, 64*mib)
		if g := goal(live, p); g < 63*mib || g > 65*mib {
			t.Errorf("live %d MiB: GOGC %d gives a goal of %.1f MiB, want 64", live/mib, p, float64(g)/mib)
		}
	}
	for _, live := range []uint64{32 * mib, 100 * mib, 4 << 30} {
		if p := gcPercentFor(live, 64*mib); p != 100 {
			t.Errorf("live %d MiB: GOGC %d, want Go's default 100", live/mib, p)
		}
	}
}

// The tuner runs after real collections and sets GOGC for this process's
// (small) live heap.
func TestGCFloorTunesAfterACollection(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set: the floor leaves it alone")
	}
	current := func() int {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	defer debug.SetGCPercent(current())
	if !startGCFloor(gcFloorBytes) {
		t.Fatal("the floor did not start without GOGC")
	}
	if p := current(); p <= 100 {
		t.Fatalf("GOGC %d once started with a small live heap, want the floor's (> 100)", p)
	}
	// A second tuner that believes GOGC is 100 must raise it after a
	// collection: the finalizer path.
	debug.SetGCPercent(100)
	tuner := &gcTuner{floor: gcFloorBytes, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent: 100}
	tuner.arm()
	deadline := time.Now().Add(5 * time.Second)
	for current() <= 100 && time.Now().Before(deadline) {
		runtime.GC() // the finalizer runs after the cycle, on its goroutine
		time.Sleep(10 * time.Millisecond)
	}
	if p := current(); p <= 100 {
		t.Fatalf("GOGC %d after collections with a small live heap, want the floor's (> 100)", p)
	}
}
