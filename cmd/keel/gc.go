package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// A broker's live heap is small (metadata, group and producer state: a
// few MiB) while a produce request allocates its whole frame, up to
// megabytes. With Go's default GOGC=100 the heap goal then sits at its
// 4 MiB minimum and the collector runs every request or two (60 cycles a
// second measured under a saturating producer), each waking its workers
// and churning pages through the scavenger: ~20 % of the broker's CPU.
// Kafka's JVM broker runs with a fixed 1 GiB heap (KAFKA_HEAP_OPTS).
//
// So the server keeps the heap goal at or above gcFloorBytes: after every
// cycle it sets GOGC so that the goal is the floor while the live heap is
// under half of it, and leaves GOGC at 100 above that, where Go's default
// goal (twice the live heap) is already past the floor. An operator's GOGC
// wins (nothing is tuned when it is set), and GOMEMLIMIT still caps the
// goal.
const gcFloorBytes = 64 << 20

// defaultHeapMinimum is the runtime's heap goal at GOGC=100 for a tiny live
// heap (4 MiB); it scales with GOGC.
const defaultHeapMinimum = 4 << 20

// gcPercentFor is the GOGC that makes the heap goal floor for a live heap
// of live bytes: the goal is max(defaultHeapMinimum*GOGC/100,
// live*(1+GOGC/100)), so the smaller of the two GOGC values that make each
// term the floor; never below 100.
func gcPercentFor(live, floor uint64) int {
	if live*2 >= floor {
		return 100
	}
	byMinimum := floor * 100 / defaultHeapMinimum
	byLive := uint64(1 << 62)
	if live > 0 {
		byLive = (floor - live) * 100 / live
	}
	return int(max(100, min(byMinimum, byLive)))
}

// startGCFloor tunes GOGC after every collection (a finalizer on a
// sentinel re-armed each cycle) unless the GOGC environment variable is
// set. It lives as long as the process.
func startGCFloor(floor uint64) bool {
	if _, set := os.LookupEnv("GOGC"); set {
		return false
	}
	t := &gcTuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent: 100}
	t.tune()
	t.arm()
	return true
}

type gcTuner struct {
	floor   uint64
	sample  []metrics.Sample
	percent int // the GOGC last set
}

// gcSentinel is big enough not to come from the tiny allocator, whose
// blocks are freed (and finalized) only together.
type gcSentinel struct{ _ [32]byte }

// arm registers a finalizer that runs after the next collection that
// finds the sentinel unreachable: it tunes and arms again.
func (t *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		t.tune()
		t.arm()
	})
}

// tune sets GOGC for the live heap the last cycle found, when it changed
// by more than a tenth.
func (t *gcTuner) tune() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := gcPercentFor(t.sample[0].Value.Uint64(), t.floor)
	if p*10 < t.percent*9 || p*10 > t.percent*11 {
		debug.SetGCPercent(p)
		t.percent = p
	}
}
