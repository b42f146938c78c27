package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeletionStallPerf measures (with KEEL_BENCH=1, `make bench`; never
// asserted) what a deletion of a large partition costs the produce latency
// of another topic: three keel processes; a topic of RF=3 filled with
// KEEL_BENCH_DELETE_RECORDS (10 M) records of 100 bytes (about 1 GiB per
// broker), then acks=all produces of another topic at 300,000 records/s
// for 10 s (keel perf produce), with the large topic deleted after 4 s:
//
//   - without a deletion (the baseline);
//   - with keel.log.delete.max.bytes.per.second at its default, 512 MiB/s
//     (storage/deleter.go: a 16 MiB truncation at a time);
//   - with it at 128 MiB/s;
//   - with it 0: one truncation after the other, unpaced.
//
// Before the deleter, the deletion held such produces for 210–280 ms
// (p99 112–162 ms against 14 ms without it): every partition's directory
// was unlinked at once, side by side.
func TestDeletionStallPerf(t *testing.T) {
	if os.Getenv("KEEL_BENCH") == "" {
		t.Skip("a load test: set KEEL_BENCH=1 (make bench) to run it")
	}
	records := envInt("KEEL_BENCH_DELETE_RECORDS", 10_000_000)
	rounds := envInt("KEEL_BENCH_ROUNDS", 2)
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}}, ProcessOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	configs := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
	type mode struct {
		name   string
		delete bool
		rate   string // keel.log.delete.max.bytes.per.second, cluster-wide
		runs   []perfTestRun
	}
	modes := []*mode{
		{name: "no deletion", rate: "536870912"},
		{name: "deletion, 512 MiB/s (default)", delete: true, rate: "536870912"},
		{name: "deletion, 128 MiB/s", delete: true, rate: "134217728"},
		{name: "deletion, unpaced (0)", delete: true, rate: "0"},
	}
	for round := range rounds {
		for i, m := range modes {
			if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "keel.log.delete.max.bytes.per.second", Value: kadm.StringPtr(m.rate)}}); err != nil {
				t.Fatal(err)
			}
			big := fmt.Sprintf("big-%d-%d", round, i)
			deleteBig := createPerfTopic(ctx, t, c.BootstrapServers(), 3, configs, big)
			keelPerfProduce(ctx, t, c.BootstrapServers(), big, "all", records, -1)
			syscall.Sync() // the probe starts without the fill's dirty pages
			probe := fmt.Sprintf("probe-%d-%d", round, i)
			deleteProbe := createPerfTopic(ctx, t, c.BootstrapServers(), 3, configs, probe)
			if m.delete {
				timer := time.AfterFunc(4*time.Second, deleteBig)
				defer timer.Stop()
			}
			r := keelPerfProduce(ctx, t, c.BootstrapServers(), probe, "all", 3_000_000, 300_000)
			m.runs = append(m.runs, r)
			t.Logf("%s, round %d: p50 %v, p99 %v, p99.9 %v, max %v", m.name, round+1, r.p50, r.p99, r.p999, r.max)
			if !m.delete {
				deleteBig()
			}
			deleteProbe()
			time.Sleep(5 * time.Second) // the deletions end before the next mode
		}
	}
	fmt.Printf("\nProduce latency of acks=all at 300,000 records/s (RF=3, 3 keel processes) while a topic of %d records (~%d MiB a broker) is deleted, median of %d rounds:\n",
		records, records*100>>20, rounds)
	fmt.Printf("%-32s %10s %10s %10s %10s\n", "", "p50 ms", "p99 ms", "p99.9 ms", "max ms")
	for _, m := range modes {
		med := func(f func(perfTestRun) time.Duration) float64 {
			xs := make([]float64, len(m.runs))
			for i, r := range m.runs {
				xs[i] = float64(f(r)) / float64(time.Millisecond)
			}
			return medianOf(xs)
		}
		fmt.Printf("%-32s %10.2f %10.2f %10.2f %10.2f\n", m.name, med(func(r perfTestRun) time.Duration { return r.p50 }),
			med(func(r perfTestRun) time.Duration { return r.p99 }), med(func(r perfTestRun) time.Duration { return r.p999 }),
			med(func(r perfTestRun) time.Duration { return r.max }))
	}
}

// medianOf is the median of xs (the mean of the middle two for an even
// count).
func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
