package integration

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKeelPerfAgainstKfake drives the live keel process the way
// kafka-producer-perf-test and kafka-consumer-perf-test drive Kafka, and in
// the same run franz-go's in-process kfake broker under the same load as
// the reference, then prints a table with the ratios. It measures; it
// asserts nothing about speed (DESIGN.md §7: benchmarks, never timed
// assertions). `make bench` runs it (KEEL_BENCH=1); `make test` skips it.
//
// The load: 100-byte record values (no key; kafka-producer-perf-test's
// random letters, the same in every record), one topic of 6 partitions,
// kgo's producer defaults (idempotent, acks=all, snappy, linger 10 ms, up to
// 50,000 buffered records) for throughput; then a fixed 10,000 records/s with
// linger.ms=0 for latency, the value carrying its send time in nanoseconds
// so the consumer measures end to end. The latency phase runs twice: in
// the test process, then with the producer and consumer in a process of
// their own (this test binary, re-executed) at GOMAXPROCS=1, a client sized
// to the little it does. A client at 10,000 records/s needs a
// fraction of one core; at the default GOMAXPROCS (2 here) its runtime
// hands goroutines to a second thread, whose wake-ups and spinning compete
// with the broker's threads for the same 2 vCPUs. A third time, the same
// load comes from keel perf e2e, the Keel SDK's producer and consumer, also
// a process of its own at GOMAXPROCS=1: how much of the end-to-end time is
// the client's. Each broker runs the load
// KEEL_BENCH_ROUNDS times (default 3), the order alternating between
// rounds; the table shows each figure's median over the rounds, since
// other work on a shared 2-core machine moves single runs a lot.
//
// A third column runs the same kfake in a process of its own (this test
// binary, re-executed): a broker that does no work, across the same
// process boundary as Keel. What Keel loses against it is Keel's; what
// kfake loses against itself in-process is the boundary's — on a 2-core
// machine, every request then wakes another process's threads.
//
// The test process collects garbage at a fixed heap size (clientHeap), as
// Kafka's JVM perf tools do, the same whichever target it measures, and
// every target runs a third of the load unmeasured before round 1
// (warmUp), so that the first one measured pays for no cold start.
//
// Knobs: KEEL_BENCH_RECORDS (default 3,000,000), KEEL_BENCH_E2E_SECONDS
// (default 10), KEEL_BENCH_ROUNDS, KEEL_BENCH_CLIENT_HEAP_MIB, KEEL_BENCH_BROKER_ENV (space-separated
// KEY=value for the keel process, e.g. GOMAXPROCS=1), and
// KEEL_BENCH_INPROCESS=0, which drops the fourth column: the same Keel code
// hosted in this test process (the integration harness, real segments in a
// temporary directory), measured as the in-process kfake reference is —
// like for like. Run with -cpuprofile to see where its time goes.
func TestKeelPerfAgainstKfake(t *testing.T) {
	if os.Getenv("KEEL_BENCH") == "" {
		t.Skip("a load test: set KEEL_BENCH=1 (make bench) to run it")
	}
	if raceEnabled {
		t.Skip("performance is not measured under the race detector")
	}
	cfg := perfConfig{
		records:       envInt("KEEL_BENCH_RECORDS", 3_000_000),
		valueSize:     100,
		partitions:    6,
		rate:          10_000,
		e2eFor:        time.Duration(envInt("KEEL_BENCH_E2E_SECONDS", 10)) * time.Second,
		consumePasses: max(envInt("KEEL_BENCH_CONSUME_PASSES", 5), 1),
	}
	rounds := envInt("KEEL_BENCH_ROUNDS", 3)
	clientHeap(t)

	var env []string
	if v := os.Getenv("KEEL_BENCH_BROKER_ENV"); v != "" {
		env = strings.Fields(v)
	}
	keel := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}},
		ProcessOptions{Env: env, Overrides: []string{"keel.metrics.address=127.0.0.1:0"}})
	t.Logf("keel process pid %d", keel.Pid(1)) // scripts/perf-broker.sh attaches here
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("kfake: %v (add it with go get github.com/twmb/franz-go/pkg/kfake)", err)
	}
	t.Cleanup(fake.Close)
	fakeProc := startKfakeProcess(t, 1)
	fakeProcTarget := &perfTarget{name: "kfake (process)", short: "kfake proc", seeds: fakeProc.addrs, pid: fakeProc.cmd.Process.Pid}
	targets := []*perfTarget{
		{name: "Keel (process)", short: "Keel", seeds: keel.BootstrapServers(), pid: keel.Pid(1), alsoVs: fakeProcTarget,
			metrics: func() map[string]*dto.MetricFamily { return scrape(t, keel, 1) }},
		{name: "kfake (in-process)", short: "kfake", seeds: fake.ListenAddrs(), reference: true},
		fakeProcTarget,
	}
	if os.Getenv("KEEL_BENCH_INPROCESS") != "0" {
		c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
		c.WaitReady(30 * time.Second)
		targets = append(targets, &perfTarget{name: "Keel (in-process)", short: "Keel in-proc", seeds: c.BootstrapServers()})
	}
	load0, steal := loadAverage(), startSteal()
	warmUp(t, cfg, targets)
	for round := 0; round < rounds; round++ {
		order := slices.Clone(targets)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, tg := range order {
			r := runPerf(t, tg, cfg, round)
			tg.results = append(tg.results, r)
			t.Logf("%s round %d: produce %.0f rec/s, consume %.0f rec/s, e2e p99 %v (client process at GOMAXPROCS=1: %v; Keel SDK: %v)",
				tg.name, round+1, r.produceRate(), r.consumeRate(), r.e2e.pct(0.99), r.e2eOneP.pct(0.99), time.Duration(r.e2eSDK[1]))
		}
	}
	printPerfTable(cfg, rounds, targets)
	fmt.Printf("Load average (1 min) before: %s, after: %s (2 cores; the load itself adds about 2). CPU time taken by the hypervisor (steal) during the rounds: %s.\n",
		load0, loadAverage(), steal)
}

// clientHeap keeps this test process's heap goal at about twice
// KEEL_BENCH_CLIENT_HEAP_MIB (default 512) until the test ends, with a
// ballast of that size: an allocation never touched, so never resident,
// that the collector counts as live. Kafka's perf tools run in a JVM of a
// fixed heap (kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh
// set -Xmx512M). With Go's default alone (KEEL_BENCH_CLIENT_HEAP_MIB=0) the
// kgo clients, whose live heap is a few MB, collect dozens of times a
// second, and how often depends on what else lives in this process: an
// in-process reference broker's stored records raise the heap goal of its
// own client (9 against 12 collections a consume pass measured), so the
// comparison measured the clients' garbage collection as much as the
// brokers. (A memory limit with GOGC=off does the same for the collector,
// but keeps the process near the limit, where the runtime's scavenger
// hands back pages the next cycle faults in again; in the one replication
// run tried that way, every target's half-rate p99 grew, kfake's too.)
func clientHeap(t *testing.T) {
	mib := clientHeapMiB()
	if mib <= 0 {
		return
	}
	ballast := make([]byte, mib<<20)
	t.Cleanup(func() { runtime.KeepAlive(ballast) })
	prefaultHeap()
}

// heapChurn keeps prefaultHeap's allocations reachable until the next one,
// so the compiler cannot drop them.
var heapChurn []byte

// prefaultHeap allocates and writes garbage until the collector has run
// twice, so the pages of a whole heap goal are resident before anything is
// measured. Until its first collection a process takes every allocation
// from pages the kernel has not yet handed it, and each first write to one
// faults; with a heap goal of 1 GiB that is some 250,000 faults, which the
// first target measured paid alone: its kgo producer took twice the CPU per
// record and reached a third of its rate (1.07 M against 2.7 M records/s
// for the same broker later in the run). Freed pages stay resident after
// that: the runtime's scavenger returns only what exceeds about 110 % of
// the heap goal.
func prefaultHeap() {
	const chunk, page = 256 << 10, 4 << 10
	// gcCycles stops the world: it is read every 16 MiB, not every block.
	for start := gcCycles(); gcCycles() < start+2; {
		for range 64 {
			heapChurn = make([]byte, chunk)
			for i := 0; i < chunk; i += page {
				heapChurn[i] = 1
			}
		}
	}
	heapChurn = nil
}

// clientHeapMiB is the ballast clientHeap keeps: KEEL_BENCH_CLIENT_HEAP_MIB,
// 512 by default, none at 0.
func clientHeapMiB() int { return envInt("KEEL_BENCH_CLIENT_HEAP_MIB", 512) }

// clientHeapDesc says how the test process collects (clientHeap).
func clientHeapDesc() string {
	if mib := clientHeapMiB(); mib > 0 {
		return fmt.Sprintf("a heap goal of about %d MiB (KEEL_BENCH_CLIENT_HEAP_MIB=%d; 0: Go's default)", 2*mib, mib)
	}
	return "Go's default (GOGC=100)"
}

// kfakeServeEnv makes this test binary serve a kfake cluster instead of
// running tests (TestMain): the bench's out-of-process kfake.
const kfakeServeEnv = "KEEL_KFAKE_SERVE"

// serveKfake runs a kfake cluster of as many brokers as kfakeServeEnv
// says, prints its listen addresses on one line of stdout, and serves until
// stdin closes (the parent's Cleanup, or the parent dying).
func serveKfake() {
	brokers, err := strconv.Atoi(os.Getenv(kfakeServeEnv))
	if err != nil || brokers < 1 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a number of brokers\n", kfakeServeEnv, os.Getenv(kfakeServeEnv))
		os.Exit(2)
	}
	fake, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(fake.ListenAddrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	fake.Close()
}

type kfakeProcess struct {
	cmd   *exec.Cmd
	addrs []string
}

// startKfakeProcess starts serveKfake with that many brokers in a child
// process, stopped with the test.
func startKfakeProcess(t *testing.T, brokers int) *kfakeProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", kfakeServeEnv, brokers))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kfake process: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("kfake process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("kfake process addresses: %v", err)
	}
	return &kfakeProcess{cmd: cmd, addrs: strings.Split(strings.TrimSpace(line), ",")}
}

// stealMeter measures the share of the VM's CPU time its hypervisor gave
// to other guests (/proc/stat's steal) since it started: the noise the
// same-run baselines cannot remove. A run with much of it measured the
// host more than the code.
type stealMeter struct{ steal, total float64 }

func startSteal() stealMeter {
	_, steal, total := machineCPU()
	return stealMeter{steal, total}
}

// String is the steal since start, as a percentage of all CPU time.
func (m stealMeter) String() string {
	_, steal, total := machineCPU()
	if math.IsNaN(total) || total <= m.total {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*(steal-m.steal)/(total-m.total))
}

// loadAverage is the 1-minute load average: other work on the machine
// moves the figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

type perfConfig struct {
	records    int
	valueSize  int
	partitions int
	rate       int           // records/s in the latency phase
	e2eFor     time.Duration // how long the latency phase measures
	// consumePasses is how many times a new consumer reads the produced
	// topic; the median pass is the consume figure.
	consumePasses int
}

type perfTarget struct {
	name      string
	short     string // for the ratio column
	seeds     []string
	pid       int         // the broker's process; 0 when it runs inside the test
	reference bool        // kfake: the ratios' denominator
	alsoVs    *perfTarget // a second denominator for this target's ratios
	// metrics scrapes the broker's /metrics; nil for kfake.
	metrics func() map[string]*dto.MetricFamily
	results []perfResult
}

// produceStages are the broker's own RequestMetrics for Produce (sum ms
// and count of TotalTimeMs, LocalTimeMs, ResponseQueueTimeMs,
// ResponseSendTimeMs), NaN without metrics: how much of the client's
// round trip the broker saw, and in which stage.
type produceStages [4][2]float64

var produceStageNames = [4]string{"totaltimems", "localtimems", "responsequeuetimems", "responsesendtimems"}

func scrapeProduceStages(tg *perfTarget) (s produceStages) {
	if tg.metrics == nil {
		for i := range s {
			s[i] = [2]float64{math.NaN(), math.NaN()}
		}
		return s
	}
	families := tg.metrics()
	for i, name := range produceStageNames {
		name = "kafka_network_requestmetrics_" + name
		s[i] = [2]float64{sumSeries(families, name+"_sum", "request", "Produce"), sumSeries(families, name+"_count", "request", "Produce")}
	}
	return s
}

// meanMs is each stage's mean in ms between two scrapes.
func (s produceStages) meanMs(since produceStages) (m [4]float64) {
	for i := range s {
		m[i] = (s[i][0] - since[i][0]) / (s[i][1] - since[i][1])
	}
	return m
}

type perfResult struct {
	produced, consumed int
	produceTime        time.Duration
	consumeTime        time.Duration
	produceLat         *latencies // at saturation, time in the client included
	rateLat            *latencies // produce latency at the fixed rate
	e2e                *latencies // send → consume at the fixed rate
	e2eOneP            *latencies // the same from a client process at GOMAXPROCS=1
	e2eSDK             [3]float64 // p50, p99, p99.9 ns of keel perf e2e (the Keel SDK) at the rate
	rtt                *latencies // ApiVersions round trips at the same rate
	achievedRate       float64
	produceBatches     *perfHooks // the produce phase's batches and requests
	consumeBatches     *perfHooks // the consume phase's
	brokerCPU          float64    // broker CPU seconds in the produce phase; NaN in-process
	brokerConsumeCPU   float64    // broker CPU seconds per consume pass; NaN in-process
	selfCPU            float64    // this process's CPU seconds in the produce phase
	machineBusy        float64    // share of the machine's CPU time not idle in the produce phase
	// The test process's garbage collections in the produce phase and
	// per consume pass: the kgo client's, which in-process brokers'
	// heaps make rarer (the collector runs when the heap doubles).
	produceGCs, consumeGCs float64
	produceStages          [4]float64 // the broker's mean Produce times (produceStageNames), ms
	produceFaults          float64    // the test process's page faults in the produce phase
	consumeFaults          float64    // the test process's page faults per consume pass
}

func (r perfResult) produceRate() float64 { return float64(r.produced) / r.produceTime.Seconds() }
func (r perfResult) consumeRate() float64 { return float64(r.consumed) / r.consumeTime.Seconds() }

// median is the median over the rounds of one figure.
func (tg *perfTarget) median(f func(perfResult) float64) float64 {
	v := make([]float64, len(tg.results))
	for i, r := range tg.results {
		v[i] = f(r)
	}
	return medianOf(v)
}

func runPerf(t *testing.T, tg *perfTarget, cfg perfConfig, round int) perfResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	admCl := newPerfClient(t, tg)
	adm := kadm.NewClient(admCl)
	topic := fmt.Sprintf("perf-%d", round)
	e2eTopic := fmt.Sprintf("e2e-%d", round)
	e2eOnePTopic := fmt.Sprintf("e2e1p-%d", round)
	e2eSDKTopic := fmt.Sprintf("e2esdk-%d", round)
	warmTopic := fmt.Sprintf("warm-%d", round)
	for _, tp := range []string{topic, e2eTopic, e2eOnePTopic, e2eSDKTopic, warmTopic} {
		if resp, err := adm.CreateTopic(ctx, int32(cfg.partitions), 1, nil, tp); err != nil || resp.Err != nil {
			t.Fatalf("%s: create %s: %v %v", tg.name, tp, err, resp.Err)
		}
	}
	r := perfResult{produceBatches: new(perfHooks), consumeBatches: new(perfHooks)}

	// Throughput: one producer with kgo's defaults, as fast as it goes.
	prod := newPerfClient(t, tg, kgo.DefaultProduceTopic(topic), kgo.WithHooks(r.produceBatches))
	value := perfPayload(cfg.valueSize)
	produceN(ctx, t, prod, warmTopic, value, 100_000, nil) // connections, producer id, heap
	r.produceBatches.reset()
	lat := newLatencies(cfg.records)
	runtime.GC() // every target's producer starts from the same heap
	cpu0, self0, gc0 := procCPU(tg.pid), procCPU(os.Getpid()), gcCycles()
	busy0, _, all0 := machineCPU()
	faults0 := selfPageFaults()
	stages0 := scrapeProduceStages(tg)
	start := time.Now()
	produceN(ctx, t, prod, topic, value, cfg.records, lat)
	r.produceTime = time.Since(start)
	r.produceStages = scrapeProduceStages(tg).meanMs(stages0)
	r.produceFaults = selfPageFaults() - faults0
	cpu1, self1, gc1 := procCPU(tg.pid), procCPU(os.Getpid()), gcCycles()
	busy1, _, all1 := machineCPU()
	r.machineBusy = (busy1 - busy0) / (all1 - all0)
	r.produced, r.produceLat = cfg.records, lat.compact()
	r.brokerCPU, r.selfCPU = cpu1-cpu0, self1-self0 // NaN in-process: procCPU(0)
	r.produceGCs = float64(gc1 - gc0)
	prod.Close()

	// Consume throughput: a new consumer reads the topic from the start,
	// consumePasses times; the median pass counts. The consumer's own
	// decoding takes most of a pass and its speed varies from one pass to
	// the next several times over (the test process's GC, the other
	// process's background work), so one pass says little. A collection
	// first gives every pass the same heap to start from.
	offsets := startOffsets(cfg.partitions)
	passes := make([]time.Duration, cfg.consumePasses)
	cpu0, gc0 = procCPU(tg.pid), 0
	faults0 = selfPageFaults()
	for pass := range passes {
		runtime.GC()
		cons := newPerfClient(t, tg, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
			kgo.WithHooks(r.consumeBatches))
		gc := gcCycles()
		start = time.Now()
		consumeN(ctx, t, tg, cons, cfg.records)
		passes[pass] = time.Since(start)
		gc0 += gcCycles() - gc
		cons.Close()
	}
	r.brokerConsumeCPU = (procCPU(tg.pid) - cpu0) / float64(len(passes))
	r.consumeGCs = float64(gc0) / float64(len(passes))
	r.consumeFaults = (selfPageFaults() - faults0) / float64(len(passes))
	slices.Sort(passes)
	r.consumed, r.consumeTime = cfg.records, passes[len(passes)/2]

	r.rateLat, r.e2e, r.achievedRate = fixedRate(ctx, t, tg, cfg, e2eTopic)
	r.e2eOneP = fixedRateFromProcess(ctx, t, tg, cfg, e2eOnePTopic)
	r.e2eSDK = sdkE2E(ctx, t, tg, cfg, e2eSDKTopic)
	r.rtt = roundTrips(ctx, t, admCl, cfg.rate, 2*time.Second)
	for _, l := range []*latencies{r.rateLat, r.e2e, r.e2eOneP, r.rtt} {
		l.compact()
	}

	// Rounds start from the same state: kfake frees the records it keeps
	// in this process's heap, Keel deletes its segments.
	if _, err := adm.DeleteTopics(ctx, topic, e2eTopic, e2eOnePTopic, e2eSDKTopic, warmTopic); err != nil {
		t.Fatalf("%s: delete topics: %v", tg.name, err)
	}
	return r
}

// warmUp runs a third of the produce and consume phases against every
// target, unmeasured, before round 1: what the first measurement would
// otherwise pay alone. The test process's heap is faulted in already
// (prefaultHeap), but not the footprint of the workload itself: the first
// target of round 1 (Keel, every run) still faulted in 40-60 MiB of new
// pages in its produce phase and consumed a third slower than in the rounds
// after (7.0-8.0 M records/s against 11.8-12.5 M, five runs of six), and a
// second Keel process measured later in round 1 did not. The in-process
// brokers go first: the records they keep raise this process's heap goal
// for a while, and the scavenger hands the excess back over the seconds
// after, which a target measured then would fault in again.
func warmUp(t *testing.T, cfg perfConfig, targets []*perfTarget) {
	t.Helper()
	order := slices.Clone(targets)
	slices.SortStableFunc(order, func(a, b *perfTarget) int { return cmp.Compare(a.pid, b.pid) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := perfPayload(cfg.valueSize)
	n := max(cfg.records/3, 1)
	for _, tg := range order {
		const topic = "warm-up"
		adm := kadm.NewClient(newPerfClient(t, tg))
		if resp, err := adm.CreateTopic(ctx, int32(cfg.partitions), 1, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("%s: create %s: %v %v", tg.name, topic, err, resp.Err)
		}
		prod := newPerfClient(t, tg, kgo.DefaultProduceTopic(topic))
		produceN(ctx, t, prod, topic, value, n, nil)
		prod.Close()
		cons := newPerfClient(t, tg, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: startOffsets(cfg.partitions)}))
		consumeN(ctx, t, tg, cons, n)
		cons.Close()
		if _, err := adm.DeleteTopics(ctx, topic); err != nil {
			t.Fatalf("%s: delete %s: %v", tg.name, topic, err)
		}
	}
}

// consumeN polls cl until it has read n records; a fetch error or ctx
// ending fails the test.
func consumeN(ctx context.Context, t *testing.T, tg *perfTarget, cl *kgo.Client, n int) {
	t.Helper()
	for consumed := 0; consumed < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: consumed %d of %d: %v", tg.name, consumed, n, ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("%s: fetch %d: %v", tg.name, p, err) })
		consumed += fs.NumRecords()
	}
}

// startOffsets is every partition of a topic from its start.
func startOffsets(partitions int) map[int32]kgo.Offset {
	offsets := make(map[int32]kgo.Offset, partitions)
	for p := 0; p < partitions; p++ {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	return offsets
}

// gcCycles is how many garbage collections this process has completed.
func gcCycles() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

func newPerfClient(t *testing.T, tg *perfTarget, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tg.seeds...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceN produces n records of value to topic and waits for them all;
// lat, if not nil, gets each record's latency (Produce call → promise).
func produceN(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, value []byte, n int, lat *latencies) {
	t.Helper()
	var failed atomic.Int64
	var firstErr atomic.Value
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			if failed.Add(1) == 1 {
				firstErr.Store(err)
			}
			return
		}
		if lat != nil {
			lat.add(time.Since(r.Timestamp))
		}
	}
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d records failed: %v", f, n, firstErr.Load())
	}
}

// fixedRate produces cfg.rate records/s with linger.ms=0 to a fresh topic
// while a consumer reads it; the first second is a warm-up and not
// counted. Each value starts with its sequence number and its send time
// (UnixNano), so the consumer measures end-to-end latency.
func fixedRate(ctx context.Context, t *testing.T, tg *perfTarget, cfg perfConfig, topic string) (prodLat, e2e *latencies, rate float64) {
	t.Helper()
	prodLat, e2e, rate, err := runFixedRate(ctx, tg.seeds, cfg, topic)
	if err != nil {
		t.Fatalf("%s: %v", tg.name, err)
	}
	return prodLat, e2e, rate
}

// runFixedRate is fixedRate's load, for a test or a client process.
func runFixedRate(ctx context.Context, seeds []string, cfg perfConfig, topic string) (prodLat, e2e *latencies, rate float64, err error) {
	warm := cfg.rate // records of the first second
	total := warm + int(cfg.e2eFor.Seconds()*float64(cfg.rate))
	offsets := map[int32]kgo.Offset{}
	for p := 0; p < cfg.partitions; p++ {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		return nil, nil, 0, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		return nil, nil, 0, err
	}
	defer prod.Close()
	pl, el := newLatencies(total), newLatencies(total)

	var consumed sync.WaitGroup
	consumed.Add(1)
	var seen atomic.Int64
	go func() {
		defer consumed.Done()
		for seen.Load() < int64(total) && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now().UnixNano()
			fs.EachRecord(func(r *kgo.Record) {
				if binary.BigEndian.Uint64(r.Value) >= uint64(warm) {
					el.add(time.Duration(now - int64(binary.BigEndian.Uint64(r.Value[8:]))))
				}
				seen.Add(1)
			})
		}
	}()

	var failed atomic.Int64
	interval := time.Second / time.Duration(cfg.rate)
	start := time.Now()
	var measuredFrom time.Time
	for i := 0; i < total; i++ {
		if i == warm {
			measuredFrom = time.Now()
		}
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		v := perfPayload(cfg.valueSize)
		binary.BigEndian.PutUint64(v, uint64(i))
		binary.BigEndian.PutUint64(v[8:], uint64(time.Now().UnixNano()))
		counted := i >= warm
		prod.Produce(ctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			} else if counted {
				pl.add(time.Since(r.Timestamp))
			}
		})
	}
	rate = float64(total-warm) / time.Since(measuredFrom).Seconds()
	if err := prod.Flush(ctx); err != nil {
		return nil, nil, 0, fmt.Errorf("flush: %w", err)
	}
	consumed.Wait()
	if f := failed.Load(); f > 0 || seen.Load() < int64(total) {
		return nil, nil, 0, fmt.Errorf("%d records failed, %d of %d consumed", f, seen.Load(), total)
	}
	return pl, el, rate, nil
}

// e2eClientEnv makes this test binary run runFixedRate as a client process
// instead of running tests (TestMain): seeds, topic, records/s, seconds,
// partitions and value size, separated by spaces.
const e2eClientEnv = "KEEL_E2E_CLIENT"

// fixedRateFromProcess runs fixedRate's load from a client process of its
// own at GOMAXPROCS=1 and returns its end-to-end latencies.
func fixedRateFromProcess(ctx context.Context, t *testing.T, tg *perfTarget, cfg perfConfig, topic string) *latencies {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", fmt.Sprintf("%s=%s %s %d %d %d %d", e2eClientEnv,
		strings.Join(tg.seeds, ","), topic, cfg.rate, int(cfg.e2eFor.Seconds()), cfg.partitions, cfg.valueSize))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: client process: %v", tg.name, err)
	}
	lines := strings.Fields(string(out))
	lat := newLatencies(len(lines))
	for _, l := range lines {
		ns, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("%s: client process printed %q", tg.name, l)
		}
		lat.add(time.Duration(ns))
	}
	return lat
}

// sdkE2E runs the same load with keel perf e2e, the Keel SDK's producer
// and consumer in a process of their own at GOMAXPROCS=1 (linger.ms=0,
// acks=all), and returns the p50, p99 and p99.9 it prints, in ns.
func sdkE2E(ctx context.Context, t *testing.T, tg *perfTarget, cfg perfConfig, topic string) [3]float64 {
	t.Helper()
	n := cfg.rate * int(cfg.e2eFor.Seconds())
	cmd := exec.CommandContext(ctx, Binary(t), "perf", "e2e", "--bootstrap-server", strings.Join(tg.seeds, ","),
		"--topic", topic, "--num-records", strconv.Itoa(n), "--throughput", strconv.Itoa(cfg.rate),
		"--record-size", strconv.Itoa(cfg.valueSize), "--producer-acks", "all", "--reporting-interval", "3600000")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: keel perf e2e: %v\n%s", tg.name, err, out)
	}
	m := regexp.MustCompile(`Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99\.9th = ([\d.]+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s: keel perf e2e printed:\n%s", tg.name, out)
	}
	var p [3]float64
	for i := range p {
		v, _ := strconv.ParseFloat(m[i+1], 64)
		p[i] = v * float64(time.Millisecond)
	}
	return p
}

// runE2EClient is the client process of fixedRateFromProcess: it prints
// each record's end-to-end latency in nanoseconds, one per line.
func runE2EClient(spec string) {
	var seeds, topic string
	var rate, seconds, partitions, valueSize int
	if _, err := fmt.Sscanf(spec, "%s %s %d %d %d %d", &seeds, &topic, &rate, &seconds, &partitions, &valueSize); err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", e2eClientEnv, spec, err)
		os.Exit(2)
	}
	cfg := perfConfig{valueSize: valueSize, partitions: partitions, rate: rate, e2eFor: time.Duration(seconds) * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, e2e, _, err := runFixedRate(ctx, strings.Split(seeds, ","), cfg, topic)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client process:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for _, d := range e2e.d[:min(int(e2e.n.Load()), len(e2e.d))] {
		fmt.Fprintln(w, int64(d))
	}
	_ = w.Flush()
}

// roundTrips times ApiVersions requests, one at a time at rate per second
// for d: the cost of a request crossing to the broker and back with no
// work behind it, the baseline the end-to-end figures cross twice (a
// process boundary for Keel, none for in-process kfake).
func roundTrips(ctx context.Context, t *testing.T, cl *kgo.Client, rate int, d time.Duration) *latencies {
	t.Helper()
	n := int(d.Seconds() * float64(rate))
	lat := newLatencies(n)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < n; i++ {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		req := kmsg.NewPtrApiVersionsRequest()
		sent := time.Now()
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatalf("ApiVersions: %v", err)
		}
		lat.add(time.Since(sent))
	}
	return lat
}

// perfPayload is a record value as kafka-producer-perf-test makes one
// without a payload file: random upper-case letters, the same for every
// record.
func perfPayload(size int) []byte {
	rng := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte('A' + rng.IntN(26))
	}
	return b
}

// perfHooks counts what a client sent and received: batches, their
// records, and requests by API key.
type perfHooks struct {
	batches, records atomic.Int64
	requests         [2]atomic.Int64 // Produce, Fetch
	roundTrip        [2]atomic.Int64 // their summed write → response read, ns
}

func (h *perfHooks) reset() {
	h.batches.Store(0)
	h.records.Store(0)
	h.requests[0].Store(0)
	h.requests[1].Store(0)
	h.roundTrip[0].Store(0)
	h.roundTrip[1].Store(0)
}

func (h *perfHooks) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.batches.Add(1)
	h.records.Add(int64(m.NumRecords))
}

func (h *perfHooks) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.batches.Add(1)
	h.records.Add(int64(m.NumRecords))
}

func (h *perfHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key >= 0 && int(key) < len(h.requests) {
		h.requests[key].Add(1)
	}
}

// OnBrokerE2E sums the time from writing a request to having read its
// response: the broker's work plus the wait behind earlier requests on the
// connection, and the trips across.
func (h *perfHooks) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if e.Err() == nil && key >= 0 && int(key) < len(h.roundTrip) {
		h.roundTrip[key].Add(int64(e.DurationE2E()))
	}
}

// meanRoundTrip is the mean request round trip of an API key.
func (h *perfHooks) meanRoundTrip(key int) time.Duration {
	return time.Duration(h.roundTrip[key].Load() / max(h.requests[key].Load(), 1))
}

func (h *perfHooks) recordsPerBatch() float64 {
	return float64(h.records.Load()) / float64(max(h.batches.Load(), 1))
}

// latencies collects durations from concurrent callers into a slice sized
// up front.
type latencies struct {
	d      []time.Duration
	n      atomic.Int64
	sorted bool
	kept   map[float64]time.Duration // after compact: reportedQuantiles
}

// reportedQuantiles are the quantiles the bench tables print.
var reportedQuantiles = []float64{0.50, 0.99, 0.999}

// compact keeps the reported quantiles and frees the samples. A bench
// holds every run's results until it prints its table; with the samples
// (8 bytes a record, 24 MB a produce phase) the test process's live heap
// grew run after run, so the kgo client of a later target collected
// garbage less often than the first one's (7 against 18 cycles in one
// produce phase), and the order of the targets moved their figures.
func (l *latencies) compact() *latencies {
	kept := make(map[float64]time.Duration, len(reportedQuantiles))
	for _, p := range reportedQuantiles {
		kept[p] = l.pct(p)
	}
	l.d, l.kept = nil, kept
	return l
}

func newLatencies(capacity int) *latencies { return &latencies{d: make([]time.Duration, capacity)} }

func (l *latencies) add(d time.Duration) {
	if i := l.n.Add(1) - 1; int(i) < len(l.d) {
		l.d[i] = d
	}
}

// pct is the p-th quantile (0 < p ≤ 1), nearest rank.
func (l *latencies) pct(p float64) time.Duration {
	if l.kept != nil {
		d, ok := l.kept[p]
		if !ok {
			panic(fmt.Sprintf("latencies: quantile %v was not kept (reportedQuantiles)", p))
		}
		return d
	}
	n := min(int(l.n.Load()), len(l.d))
	if n == 0 {
		return 0
	}
	if !l.sorted {
		l.d = l.d[:n]
		slices.Sort(l.d)
		l.sorted = true
	}
	return l.d[max(0, int(math.Ceil(p*float64(n)))-1)]
}

// procStat is the fields of /proc/<pid>/stat after the command name
// (field 3 is its [0]); nil when unreadable.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // comm may hold spaces
}

// selfPageFaults is this process's minor page faults so far, from
// /proc/self/stat (field 10); NaN when unreadable.
func selfPageFaults() float64 {
	fields := procStat(os.Getpid())
	if len(fields) < 8 {
		return math.NaN()
	}
	n, err := strconv.ParseFloat(fields[7], 64)
	if err != nil {
		return math.NaN()
	}
	return n
}

// procCPU is a process's user+system CPU seconds from /proc/<pid>/stat
// (fields 14 and 15, in clock ticks); NaN when pid is 0 or unreadable.
func procCPU(pid int) float64 {
	if pid == 0 {
		return math.NaN()
	}
	fields := procStat(pid)
	if len(fields) < 13 {
		return math.NaN()
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks()
}

// machineCPU is the machine's busy, stolen and total CPU time (clock
// ticks, all CPUs) from /proc/stat's "cpu" line; idle and iowait count as
// not busy. A produce phase that leaves the machine idle is waiting, not
// computing; steal is the time the hypervisor gave to other guests.
func machineCPU() (busy, steal, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return math.NaN(), math.NaN(), math.NaN()
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return math.NaN(), math.NaN(), math.NaN()
	}
	for i, f := range fields[1:] {
		if i >= 8 { // guest time is already counted in user
			break
		}
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
		if i == 7 {
			steal = v
		}
	}
	return busy, steal, total
}

// clockTicks is getconf CLK_TCK (100 on Linux unless the kernel says
// otherwise).
var clockTicks = sync.OnceValue(func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || v <= 0 {
		return 100
	}
	return v
})

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func printPerfTable(cfg perfConfig, rounds int, targets []*perfTarget) {
	var ref *perfTarget
	for _, tg := range targets {
		if tg.reference {
			ref = tg
		}
	}
	const mib = 1 << 20
	ms := func(d float64) string { return fmt.Sprintf("%.2f", d/float64(time.Millisecond)) }
	type figure struct {
		name  string
		value func(perfResult) float64
		show  func(float64) string
		ratio bool
	}
	num := func(format string) func(float64) string {
		return func(v float64) string {
			if math.IsNaN(v) {
				return "n/a"
			}
			return fmt.Sprintf(format, v)
		}
	}
	pct := func(l func(perfResult) *latencies, p float64) func(perfResult) float64 {
		return func(r perfResult) float64 { return float64(l(r).pct(p)) }
	}
	prodLat := func(r perfResult) *latencies { return r.produceLat }
	rateLat := func(r perfResult) *latencies { return r.rateLat }
	e2e := func(r perfResult) *latencies { return r.e2e }
	e2eOneP := func(r perfResult) *latencies { return r.e2eOneP }
	rtt := func(r perfResult) *latencies { return r.rtt }
	perM := func(cpu func(perfResult) float64) func(perfResult) float64 {
		return func(r perfResult) float64 { return cpu(r) / (float64(r.produced) / 1e6) }
	}
	figures := []figure{
		{"produce records/s", perfResult.produceRate, num("%.0f"), true},
		{"produce MiB/s (values)", func(r perfResult) float64 { return r.produceRate() * float64(cfg.valueSize) / mib }, num("%.1f"), false},
		{"produce latency p50 ms (saturated)", pct(prodLat, 0.50), ms, false},
		{"produce latency p99 ms (saturated)", pct(prodLat, 0.99), ms, false},
		{"produce latency p99.9 ms (saturated)", pct(prodLat, 0.999), ms, false},
		{"produce: records per batch", func(r perfResult) float64 { return r.produceBatches.recordsPerBatch() }, num("%.0f"), false},
		{"produce: requests", func(r perfResult) float64 { return float64(r.produceBatches.requests[0].Load()) }, num("%.0f"), false},
		{"produce: request round trip ms (mean)", func(r perfResult) float64 { return float64(r.produceBatches.meanRoundTrip(0)) }, ms, false},
		{"… broker's TotalTimeMs (mean)", func(r perfResult) float64 { return r.produceStages[0] }, num("%.2f"), false},
		{"… of it LocalTimeMs (the handler)", func(r perfResult) float64 { return r.produceStages[1] }, num("%.2f"), false},
		{"… ResponseQueueTimeMs + ResponseSendTimeMs", func(r perfResult) float64 { return r.produceStages[2] + r.produceStages[3] }, num("%.2f"), false},
		{"consume records/s", perfResult.consumeRate, num("%.0f"), true},
		{"consume MiB/s (values)", func(r perfResult) float64 { return r.consumeRate() * float64(cfg.valueSize) / mib }, num("%.1f"), false},
		{"consume: records per batch", func(r perfResult) float64 { return r.consumeBatches.recordsPerBatch() }, num("%.0f"), false},
		{"consume: fetch requests per pass", func(r perfResult) float64 {
			return float64(r.consumeBatches.requests[1].Load()) / float64(cfg.consumePasses)
		}, num("%.0f"), false},
		{"consume: fetch round trip ms (mean)", func(r perfResult) float64 { return float64(r.consumeBatches.meanRoundTrip(1)) }, ms, false},
		{"client GC cycles in the produce phase", func(r perfResult) float64 { return r.produceGCs }, num("%.0f"), false},
		{"test process page faults in the produce phase", func(r perfResult) float64 { return r.produceFaults }, num("%.0f"), false},
		{"test process page faults per consume pass", func(r perfResult) float64 { return r.consumeFaults }, num("%.0f"), false},
		{"client GC cycles per consume pass", func(r perfResult) float64 { return r.consumeGCs }, num("%.1f"), false},
		{fmt.Sprintf("achieved rate (target %d/s)", cfg.rate), func(r perfResult) float64 { return r.achievedRate }, num("%.0f"), false},
		{"produce latency p50 ms @ rate", pct(rateLat, 0.50), ms, false},
		{"produce latency p99 ms @ rate", pct(rateLat, 0.99), ms, false},
		{"produce latency p99.9 ms @ rate", pct(rateLat, 0.999), ms, false},
		{"end-to-end latency p50 ms @ rate", pct(e2e, 0.50), ms, false},
		{"end-to-end latency p99 ms @ rate", pct(e2e, 0.99), ms, true},
		{"end-to-end latency p99.9 ms @ rate", pct(e2e, 0.999), ms, false},
		{"… client process at GOMAXPROCS=1: p50", pct(e2eOneP, 0.50), ms, false},
		{"… client process at GOMAXPROCS=1: p99", pct(e2eOneP, 0.99), ms, true},
		{"… client process at GOMAXPROCS=1: p99.9", pct(e2eOneP, 0.999), ms, false},
		{"… Keel SDK client (keel perf e2e): p50", func(r perfResult) float64 { return r.e2eSDK[0] }, ms, false},
		{"… Keel SDK client (keel perf e2e): p99", func(r perfResult) float64 { return r.e2eSDK[1] }, ms, true},
		{"… Keel SDK client (keel perf e2e): p99.9", func(r perfResult) float64 { return r.e2eSDK[2] }, ms, false},
		{"baseline: ApiVersions round trip p50 ms", pct(rtt, 0.50), ms, true},
		{"baseline: ApiVersions round trip p99 ms", pct(rtt, 0.99), ms, true},
		{"broker CPU s per M records produced", perM(func(r perfResult) float64 { return r.brokerCPU }), num("%.2f"), false},
		{"broker CPU s per M records consumed", func(r perfResult) float64 { return r.brokerConsumeCPU / (float64(r.consumed) / 1e6) }, num("%.3f"), false},
		{"test process CPU s per M records produced", perM(func(r perfResult) float64 { return r.selfCPU }), num("%.2f"), false},
		{"machine CPU busy % in the produce phase", func(r perfResult) float64 { return 100 * r.machineBusy }, num("%.0f"), false},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nKeel vs kfake: %d-byte values, %d partitions, kgo defaults (idempotent, acks=all, snappy), %d records;\n"+
		"latency at %d records/s with linger.ms=0 for %v. Median of %d rounds. The test process collects at %s.\n",
		cfg.valueSize, cfg.partitions, cfg.records, cfg.rate, cfg.e2eFor, rounds, clientHeapDesc())
	fmt.Fprintf(&b, "%-42s", "")
	for _, tg := range targets {
		fmt.Fprintf(&b, " %19s", tg.name)
	}
	for _, tg := range targets {
		if !tg.reference {
			fmt.Fprintf(&b, " %19s", tg.short+"/kfake")
		}
	}
	for _, tg := range targets {
		if tg.alsoVs != nil {
			fmt.Fprintf(&b, " %19s", tg.short+"/"+tg.alsoVs.short)
		}
	}
	b.WriteString("\n")
	for _, f := range figures {
		fmt.Fprintf(&b, "%-42s", f.name)
		for _, tg := range targets {
			fmt.Fprintf(&b, " %19s", f.show(tg.median(f.value)))
		}
		for _, tg := range targets {
			if tg.reference {
				continue
			}
			r := ""
			if f.ratio && ref != nil {
				r = fmt.Sprintf("%.2f×", tg.median(f.value)/ref.median(f.value))
			}
			fmt.Fprintf(&b, " %19s", r)
		}
		for _, tg := range targets {
			if tg.alsoVs == nil {
				continue
			}
			r := ""
			if f.ratio {
				r = fmt.Sprintf("%.2f×", tg.median(f.value)/tg.alsoVs.median(f.value))
			}
			fmt.Fprintf(&b, " %19s", r)
		}
		b.WriteString("\n")
	}
	b.WriteString("Test process = the kgo clients (for in-process brokers, the broker too). " +
		"Targets: produce and consume ≥ 1.0× kfake, e2e p99 ≤ 1.5 ms.\n")
	fmt.Print(b.String())
}
