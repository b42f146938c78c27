package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplicationPerf is issue 5's measurement (run by `make bench` with
// KEEL_BENCH=1, never asserted): three keel processes on this machine,
// 100-byte records, 6 partitions, in the same run:
//
//   - RF=1, acks=1 (the unreplicated baseline),
//   - RF=3, acks=all, min.insync.replicas=2,
//   - RF=3, acks=all with the durable mode (flush.messages=1),
//   - and as the same-run reference, RF=1 acks=1 on franz-go's in-process
//     kfake (3 brokers, all in memory), its half rate being RF=3's: the
//     latency the client and this machine give at that load with a broker
//     that does no work,
//
// each first at full speed (records/s, MB/s, latency percentiles), then at
// half of its own full speed (latency percentiles: the p99 target is 10 ms
// there), three times: with kgo's defaults, whose linger.ms=10 alone puts
// a record's p99 above 10 ms whatever the brokers do, with the Java
// producer's defaults (Kafka 4: linger.ms=5), and with linger.ms=0 (its
// default before Kafka 4.0, KIP-1030). Every producer has 5 requests in
// flight per broker, the Java producer's and librdkafka's default: kgo's
// idempotent producer has them, its acks=1 producer is given them (kgo's
// default there is 1, which would hold the RF=1 baseline back).
//
// Then the same variants again from keel perf produce, Keel's
// kafka-producer-perf-test, in a process of its own: the Keel SDK with the
// Java producer's defaults (batch.size=16384, linger.ms=5, no compression),
// as an operator would measure a cluster. First --throughput -1, then half
// of the rate that reached; the reference is a kfake process of 3 brokers
// at RF=3's half rate. One more variant runs RF=3 on a second cluster of
// three keel processes with keel.log.writeback.bytes=0, the kernel's own
// writeback schedule as under Kafka: what handing appended pages to the
// writeback as they fill does to the half-rate tail. The page cache is
// synced before each variant, so that none starts with the dirty pages of
// the one before.
//
// Rounds alternate the order; the tables give medians.
//
// Knobs: KEEL_BENCH_RECORDS (default 1,000,000), KEEL_BENCH_ROUNDS (3),
// KEEL_BENCH_RATE_SECONDS (5), KEEL_BENCH_CLIENT_HEAP_MIB (clientHeap: the kgo
// producers' process collects at a fixed heap size, as Kafka's perf tools do),
// KEEL_BENCH_OVERRIDES (space-separated key=value broker configs for the
// measured cluster, e.g. keel.log.cache.drop.behind.bytes=67108864; the
// writeback-0 cluster keeps its one).
func TestReplicationPerf(t *testing.T) {
	if os.Getenv("KEEL_BENCH") == "" {
		t.Skip("a load test: set KEEL_BENCH=1 (make bench) to run it")
	}
	records := envInt("KEEL_BENCH_RECORDS", 1_000_000)
	rounds := envInt("KEEL_BENCH_ROUNDS", 3)
	rateFor := time.Duration(envInt("KEEL_BENCH_RATE_SECONDS", 5)) * time.Second
	clientHeap(t)
	overrides := strings.Fields(os.Getenv("KEEL_BENCH_OVERRIDES"))
	if len(overrides) > 0 {
		t.Logf("the measured cluster runs with %s", strings.Join(overrides, " "))
	}
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{Overrides: overrides})
	fake, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	type variant struct {
		name    string
		seeds   []string
		rf      int16
		acks    kgo.Acks
		configs map[string]*string
		full    []float64 // records/s per round
		fullLat []*latencies
		halfLat []*latencies
		halfJ   []*latencies // at half rate with the Java producer's defaults
		half0   []*latencies // at half rate with linger.ms=0
		// keel perf produce's runs: at full speed and at half rate
		ptFull, ptHalf []perfTestRun
	}
	keel := c.BootstrapServers()
	variants := []*variant{
		{name: "RF=1 acks=1", seeds: keel, rf: 1, acks: kgo.LeaderAck()},
		{name: "RF=3 acks=all", seeds: keel, rf: 3, acks: kgo.AllISRAcks(), configs: map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}},
		{name: "RF=3 acks=all durable", seeds: keel, rf: 3, acks: kgo.AllISRAcks(), configs: map[string]*string{
			"min.insync.replicas": kadm.StringPtr("2"), "flush.messages": kadm.StringPtr("1")}},
		{name: "kfake RF=1 (RF=3's rate)", seeds: fake.ListenAddrs(), rf: 1, acks: kgo.LeaderAck()},
	}
	// halfOf is the variant whose full rate sets the half rate: RF=3's for
	// kfake, so that its latency is measured at the same load.
	halfOf := map[*variant]*variant{variants[3]: variants[1]}
	writeRate := pageCacheWriteRate(t, t.TempDir(), 1<<30)
	steal := startSteal()
	fakeProc := startKfakeProcess(t, 3)
	ptFake := &variant{name: "kfake process (RF=3's rate)", seeds: fakeProc.addrs, rf: 1, acks: kgo.LeaderAck()}
	noWriteback := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{Overrides: []string{"keel.log.writeback.bytes=0"}})
	ptNoWriteback := &variant{name: "RF=3 acks=all, writeback 0", seeds: noWriteback.BootstrapServers(), rf: 3, acks: kgo.AllISRAcks(),
		configs: map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}}
	ptVariants := []*variant{variants[0], variants[1], variants[2], ptNoWriteback, ptFake}
	// Long enough to reach the steady state of writing the page cache
	// (write-back, new pages): a burst of a second or two overstates the
	// rate the machine keeps up, and half of it would then queue.
	ptRecords := 10 * records
	value := perfPayload(100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for round := 0; round < rounds; round++ {
		order := slices.Clone(variants[:3])
		if round%2 == 1 {
			slices.Reverse(order)
		}
		order = append(order, variants[3]) // after RF=3, whose rate it takes
		for vi, v := range order {
			topic := fmt.Sprintf("rperf-%d-%d", round, vi)
			deleteTopic := createPerfTopic(ctx, t, v.seeds, v.rf, v.configs, topic)
			opts := []kgo.Opt{kgo.SeedBrokers(v.seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(v.acks)}
			if v.acks != kgo.AllISRAcks() { // idempotent kgo has 5 in flight already
				opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
			}
			prod, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			produceN(ctx, t, prod, topic, value, 50_000, nil) // warm-up
			lat := newLatencies(records)
			start := time.Now()
			produceN(ctx, t, prod, topic, value, records, lat)
			rate := float64(records) / time.Since(start).Seconds()
			v.full, v.fullLat = append(v.full, rate), append(v.fullLat, lat.compact())
			half := rate / 2
			if o := halfOf[v]; o != nil {
				half = o.full[len(o.full)-1] / 2
			}
			v.halfLat = append(v.halfLat, produceAtRate(ctx, t, prod, topic, value, half, rateFor))
			prod.Close()
			optsJ := append(slices.Clone(opts), kgo.ProducerLinger(5*time.Millisecond))
			prodJ, err := kgo.NewClient(optsJ...)
			if err != nil {
				t.Fatal(err)
			}
			produceN(ctx, t, prodJ, topic, value, 50_000, nil) // connections, producer id
			v.halfJ = append(v.halfJ, produceAtRate(ctx, t, prodJ, topic, value, half, rateFor))
			prodJ.Close()
			prod0, err := kgo.NewClient(append(slices.Clone(optsJ), kgo.ProducerLinger(0))...)
			if err != nil {
				t.Fatal(err)
			}
			produceN(ctx, t, prod0, topic, value, 50_000, nil)
			v.half0 = append(v.half0, produceAtRate(ctx, t, prod0, topic, value, half, rateFor))
			prod0.Close()
			t.Logf("%s round %d: %.0f records/s, p99 %v; at half rate p99 %v, with Java's defaults %v", v.name, round+1, rate,
				lat.pct(0.99), v.halfLat[len(v.halfLat)-1].pct(0.99), v.halfJ[len(v.halfJ)-1].pct(0.99))
			deleteTopic()
		}
		order = slices.Clone(ptVariants[:4])
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for vi, v := range append(order, ptFake) {
			syscall.Sync() // no variant starts with the dirty pages of the one before
			topic := fmt.Sprintf("ptperf-%d-%d", round, vi)
			deleteTopic := createPerfTopic(ctx, t, v.seeds, v.rf, v.configs, topic)
			acks := "1"
			if v.acks == kgo.AllISRAcks() {
				acks = "all"
			}
			var full perfTestRun
			if v != ptFake {
				full = keelPerfProduce(ctx, t, v.seeds, topic, acks, ptRecords, -1)
				v.ptFull = append(v.ptFull, full)
			} else {
				full = variants[1].ptFull[len(variants[1].ptFull)-1]
			}
			half := full.rate / 2
			v.ptHalf = append(v.ptHalf, keelPerfProduce(ctx, t, v.seeds, topic, acks, int(half*(rateFor.Seconds()+1)), half))
			t.Logf("keel perf produce, %s round %d: %.0f records/s; at %.0f records/s p99 %v", v.name, round+1, full.rate, half, v.ptHalf[len(v.ptHalf)-1].p99)
			deleteTopic()
		}
	}
	median := medianOf
	medLat := func(ls []*latencies, p float64) time.Duration {
		xs := make([]float64, len(ls))
		for i, l := range ls {
			xs[i] = float64(l.pct(p))
		}
		return time.Duration(median(xs))
	}
	base := median(variants[0].full)
	fmt.Printf("\nReplication cost, 3 keel processes, 100-byte records, 6 partitions, median of %d rounds; the test process collects at %s\n", rounds, clientHeapDesc())
	fmt.Printf("%-24s %12s %8s %9s %10s %10s %10s %12s %12s %12s\n", "variant", "records/s", "MB/s", "vs RF=1", "p50", "p99", "p99.9", "half: p50", "half: p99", "half: p99.9")
	for _, v := range variants {
		r := median(v.full)
		fmt.Printf("%-24s %12.0f %8.1f %8.2fx %10v %10v %10v %12v %12v %12v\n", v.name, r, r*100/1e6, r/base,
			medLat(v.fullLat, 0.5), medLat(v.fullLat, 0.99), medLat(v.fullLat, 0.999),
			medLat(v.halfLat, 0.5), medLat(v.halfLat, 0.99), medLat(v.halfLat, 0.999))
	}
	fmt.Printf("At half rate with the Java producer's defaults (linger.ms=5, 5 requests in flight):\n%-24s %12s %12s %12s\n", "variant", "p50", "p99", "p99.9")
	for _, v := range variants {
		fmt.Printf("%-24s %12v %12v %12v\n", v.name, medLat(v.halfJ, 0.5), medLat(v.halfJ, 0.99), medLat(v.halfJ, 0.999))
	}
	fmt.Printf("At half rate with linger.ms=0 (the Java producer's default before Kafka 4.0), 5 requests in flight:\n%-24s %12s %12s %12s\n", "variant", "p50", "p99", "p99.9")
	for _, v := range variants {
		fmt.Printf("%-24s %12v %12v %12v\n", v.name, medLat(v.half0, 0.5), medLat(v.half0, 0.99), medLat(v.half0, 0.999))
	}
	ptMedian := func(runs []perfTestRun, f func(perfTestRun) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	ptBase := ptMedian(variants[0].ptFull, func(r perfTestRun) float64 { return r.rate })
	fmt.Printf("keel perf produce (kafka-producer-perf-test: the Keel SDK in its own process, the Java producer's defaults:\n"+
		"batch.size=16384, linger.ms=5, no compression), --throughput -1 for %d records, then half that rate for %v:\n", ptRecords, rateFor)
	fmt.Printf("%-28s %12s %8s %9s %10s %14s %10s %10s %12s\n", "variant", "records/s", "MB/s", "vs RF=1", "p99 (ms)", "half (rec/s)", "p50", "p99", "p99.9")
	for _, v := range ptVariants {
		full := fmt.Sprintf("%12s %8s %9s %10s", "-", "-", "-", "-") // kfake: RF=3's rate
		if len(v.ptFull) > 0 {
			r := ptMedian(v.ptFull, func(r perfTestRun) float64 { return r.rate })
			full = fmt.Sprintf("%12.0f %8.1f %8.2fx %10.2f", r, r*100/1e6, r/ptBase, ptMedian(v.ptFull, func(r perfTestRun) float64 { return ms(r.p99) }))
		}
		fmt.Printf("%-28s %s %14.0f %10.2f %10.2f %12.2f\n", v.name, full,
			ptMedian(v.ptHalf, func(r perfTestRun) float64 { return r.rate }),
			ptMedian(v.ptHalf, func(r perfTestRun) float64 { return ms(r.p50) }),
			ptMedian(v.ptHalf, func(r perfTestRun) float64 { return ms(r.p99) }),
			ptMedian(v.ptHalf, func(r perfTestRun) float64 { return ms(r.p999) }))
	}
	writeRateAfter := pageCacheWriteRate(t, t.TempDir(), 1<<30)
	fmt.Printf("Baseline: a new 1 GiB file written through the page cache in 16 KiB writes: %.0f MB/s (%.2f ns a byte) before the rounds, %.0f MB/s (%.2f ns) after.\n"+
		"Every replica writes each byte it keeps once: RF=3 three times per record. Uncompressed, that is most of the brokers' work.\n",
		writeRate/1e6, 1e9/writeRate, writeRateAfter/1e6, 1e9/writeRateAfter)
	fmt.Printf("Load average (1 min) at the end: %s. CPU time taken by the hypervisor (steal) during the rounds: %s.\n", loadAverage(), steal)
}

// pageCacheWriteRate writes size bytes to a new file in dir in 16 KiB
// writes, as appends of a producer's batches do, and returns bytes/s. The
// pages the cache takes anew cost the most: on a VM that hands freed memory
// back to its host (free page reporting), several times what a page reused
// soon after costs, for Keel's segments as for this file.
func pageCacheWriteRate(t *testing.T, dir string, size int) float64 {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "page-cache-baseline"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 16<<10)
	start := time.Now()
	for n := 0; n < size; n += len(buf) {
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("page cache baseline: %v", err)
		}
	}
	return float64(size) / time.Since(start).Seconds()
}

// createPerfTopic creates a topic of 6 partitions on the brokers at seeds
// and returns the func that deletes it.
func createPerfTopic(ctx context.Context, t *testing.T, seeds []string, rf int16, configs map[string]*string, topic string) (deleteTopic func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 6, rf, configs, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	return func() {
		defer cl.Close()
		if _, err := adm.DeleteTopics(ctx, topic); err != nil {
			t.Fatal(err)
		}
	}
}

// perfTestRun is what keel perf produce's last line reports.
type perfTestRun struct {
	rate                float64 // records/s
	p50, p99, p999, max time.Duration
}

var perfTestLine = regexp.MustCompile(`records sent, ([\d.]+) records/sec .* ([\d.]+) ms max latency, ([\d.]+) ms 50th, [\d.]+ ms 95th, ([\d.]+) ms 99th, ([\d.]+) ms 99\.9th\.`)

// keelPerfProduce runs keel perf produce in a process of its own: records
// records of 100 bytes at most throughput a second (-1: as fast as it
// can), acks as given and the producer's other settings at their defaults
// (the Java producer's).
func keelPerfProduce(ctx context.Context, t *testing.T, seeds []string, topic, acks string, records int, throughput float64) perfTestRun {
	t.Helper()
	return keelPerfProduceProps(ctx, t, seeds, topic, records, throughput, "acks="+acks)
}

// keelPerfProduceProps is keelPerfProduce with the producer properties
// given (--producer-props, as kafka-producer-perf-test takes them).
func keelPerfProduceProps(ctx context.Context, t *testing.T, seeds []string, topic string, records int, throughput float64, props ...string) perfTestRun {
	t.Helper()
	args := []string{"perf", "produce", "--bootstrap-server", strings.Join(seeds, ","),
		"--topic", topic, "--num-records", strconv.Itoa(records), "--record-size", "100",
		"--throughput", strconv.Itoa(int(throughput)), "--reporting-interval", "3600000", "--producer-props"}
	cmd := exec.CommandContext(ctx, Binary(t), append(args, props...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("keel perf produce: %v\n%s", err, out)
	}
	m := perfTestLine.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("keel perf produce printed:\n%s", out)
	}
	var f [5]float64
	for i := range f {
		f[i], _ = strconv.ParseFloat(m[i+1], 64)
	}
	d := func(msv float64) time.Duration { return time.Duration(msv * float64(time.Millisecond)) }
	return perfTestRun{rate: f[0], max: d(f[1]), p50: d(f[2]), p99: d(f[3]), p999: d(f[4])}
}

// produceAtRate produces at rate records/s for d (after a one-second
// warm-up that is not measured) and returns the produce latencies.
func produceAtRate(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, value []byte, rate float64, d time.Duration) *latencies {
	t.Helper()
	total := int(rate * (d.Seconds() + 1))
	warm := int(rate)
	lat := newLatencies(total)
	interval := time.Duration(float64(time.Second) / rate)
	var failed atomic.Int64
	start := time.Now()
	for i := 0; i < total; i++ {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		counted := i >= warm
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			} else if counted {
				lat.add(time.Since(r.Timestamp))
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d records failed at %f records/s", f, rate)
	}
	return lat.compact()
}
