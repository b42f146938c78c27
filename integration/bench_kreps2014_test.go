package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestKreps2014Perf runs the producer command lines of Jay Kreps's 2014
// benchmark ("Benchmarking Apache Kafka: 2 Million Writes Per Second (On
// Three Cheap Machines)") through keel perf produce, Keel's
// kafka-producer-perf-test, against three keel processes on this machine
// (issue 5's measurement with that client's settings; `make bench` runs it
// with KEEL_BENCH=1, never asserted):
//
//   - RF=1: acks=1 batch.size=8196 buffer.memory=67108864,
//   - RF=3: acks=-1 batch.size=64000 buffer.memory=67108864, on a topic
//     with min.insync.replicas=2,
//   - then RF=3 at half of the rate it reached, for 5 seconds,
//
// all with linger.ms=0, that producer's default then (Kafka 4's is 5 ms),
// 100-byte records, 6 partitions, KEEL_BENCH_KREPS_RECORDS records (default
// 15,000,000; the benchmark produced 50,000,000 on its own hardware) at full
// speed, three rounds. As in the benchmark, the two topics stay and grow
// from round to round.
//
// Two clusters run it in turn, each its three rounds: one with
// keel.log.cache.drop.behind.bytes=67108864 and one with the defaults. On
// a VM whose host takes back the memory its guest leaves free, the page
// cache of a growing log takes each new page from such memory, and the
// brokers' CPU per record rises round after round (README, Storage on
// disk, Page cache); drop-behind keeps the cache reusing its own pages.
func TestKreps2014Perf(t *testing.T) {
	if os.Getenv("KEEL_BENCH") == "" {
		t.Skip("a load test: set KEEL_BENCH=1 (make bench) to run it")
	}
	if raceEnabled {
		t.Skip("performance is not measured under the race detector")
	}
	records := envInt("KEEL_BENCH_KREPS_RECORDS", 15_000_000)
	rounds := envInt("KEEL_BENCH_ROUNDS", 3)
	const halfFor = 5 // seconds
	type run struct{ rf1, rf3, half perfTestRun }
	type setup struct {
		name      string
		overrides []string
		runs      []run
	}
	setups := []*setup{
		{name: "keel.log.cache.drop.behind.bytes=67108864", overrides: []string{"keel.log.cache.drop.behind.bytes=67108864"}},
		{name: "defaults (drop-behind 0)"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	writeRate := pageCacheWriteRate(t, t.TempDir(), 1<<30)
	steal := startSteal()
	for _, s := range setups {
		c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
			ProcessOptions{Overrides: s.overrides})
		seeds := c.BootstrapServers()
		createPerfTopic(ctx, t, seeds, 1, nil, "test-rep-one")
		createPerfTopic(ctx, t, seeds, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "test")
		common := []string{"buffer.memory=67108864", "linger.ms=0"}
		for round := range rounds {
			var r run
			r.rf1 = keelPerfProduceProps(ctx, t, seeds, "test-rep-one", records, -1, append([]string{"acks=1", "batch.size=8196"}, common...)...)
			r.rf3 = keelPerfProduceProps(ctx, t, seeds, "test", records, -1, append([]string{"acks=-1", "batch.size=64000"}, common...)...)
			half := r.rf3.rate / 2
			r.half = keelPerfProduceProps(ctx, t, seeds, "test", int(half*halfFor), half, append([]string{"acks=-1", "batch.size=64000"}, common...)...)
			s.runs = append(s.runs, r)
			t.Logf("%s round %d: RF=1 %.0f records/s, RF=3 %.0f records/s (%.2fx); at %.0f records/s p50 %v p99 %v p99.9 %v",
				s.name, round+1, r.rf1.rate, r.rf3.rate, r.rf3.rate/r.rf1.rate, half, r.half.p50, r.half.p99, r.half.p999)
		}
		c.Close()
	}

	fmt.Printf("\nJay Kreps's 2014 producer command lines through keel perf produce (linger.ms=0, buffer.memory=64 MiB), 3 keel processes,\n"+
		"100-byte records, 6 partitions, %d records at full speed, then RF=3 at half its rate for %ds; medians of %d rounds (each round's in brackets):\n",
		records, halfFor, rounds)
	fmt.Printf("%-42s %12s %12s %9s %9s %12s %9s %9s %9s\n", "cluster", "RF=1 rec/s", "RF=3 rec/s", "RF=3 MB/s", "RF3/RF1", "half rec/s", "p50 ms", "p99 ms", "p99.9 ms")
	for _, s := range setups {
		col := func(f func(run) float64) (float64, string) {
			xs := make([]float64, len(s.runs))
			parts := make([]string, len(s.runs))
			for i, r := range s.runs {
				xs[i] = f(r)
				parts[i] = strconv.FormatFloat(xs[i], 'f', 2, 64)
			}
			return medianOf(xs), strings.Join(parts, " ")
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		rf1, _ := col(func(r run) float64 { return r.rf1.rate })
		rf3, _ := col(func(r run) float64 { return r.rf3.rate })
		ratio, ratios := col(func(r run) float64 { return r.rf3.rate / r.rf1.rate })
		half, _ := col(func(r run) float64 { return r.half.rate })
		p50, _ := col(func(r run) float64 { return ms(r.half.p50) })
		p99, p99s := col(func(r run) float64 { return ms(r.half.p99) })
		p999, _ := col(func(r run) float64 { return ms(r.half.p999) })
		fmt.Printf("%-42s %12.0f %12.0f %9.1f %8.2fx %12.0f %9.2f %9.2f %9.2f   [RF3/RF1 %s; p99 %s]\n",
			s.name, rf1, rf3, rf3*100/1e6, ratio, half, p50, p99, p999, ratios, p99s)
	}
	fmt.Printf("Baseline: a new 1 GiB file written through the page cache in 16 KiB writes: %.0f MB/s before the rounds. Targets (issue 5): RF3/RF1 >= 0.6, half-rate p99 <= 10 ms.\n", writeRate/1e6)
	fmt.Printf("CPU time taken by the hypervisor (steal) during the rounds: %s.\n", steal)
}
