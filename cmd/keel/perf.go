package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// perfCommand is `keel perf`, kafka-producer-perf-test.sh and
// kafka-consumer-perf-test.sh against a live cluster.
func perfCommand() *cli.Command {
	return &cli.Command{
		Name:  "perf",
		Usage: "measure produce and consume throughput and latency (like kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh / kafka-e2e-latency.sh)",
		Subcommands: []*cli.Command{
			{
				Name:  "produce",
				Usage: "produce --num-records records of --record-size bytes, at most --throughput a second",
				Description: "Like kafka-producer-perf-test.sh. Prints a progress line (live on a terminal,\n" +
					"every --reporting-interval when piped) and a final line with records/s, MB/s\n" +
					"(MiB), average and maximum latency and the p50/p95/p99/p99.9 latencies (from\n" +
					"Produce to acknowledgement). Exits 1 if any record failed.\n" +
					"--producer-props (or Kafka 4.2's --command-property) takes key=value pairs as Kafka's\n" +
					"tool does, one after another, and also repeated or comma-separated; they win over\n" +
					"--producer.config's.\n\n" +
					"Examples:\n" +
					"  keel perf produce --topic perf --num-records 1000000 --record-size 100 --throughput -1 \\\n" +
					"      --producer-props acks=all linger.ms=5 compression.type=lz4\n" +
					"  keel perf produce --topic perf --num-records 100000 --record-size 1024 --throughput 20000\n\n" +
					propertiesHelp,
				Flags: []cli.Flag{
					bootstrapFlag(), commandConfigFlag(),
					&cli.StringFlag{Name: "topic", Required: true},
					&cli.Int64Flag{Name: "num-records", Required: true, Usage: "records to produce"},
					&cli.IntFlag{Name: "record-size", Required: true, Usage: "bytes per record value"},
					&cli.Float64Flag{Name: "throughput", Value: -1, Usage: "records per second at most (-1: unlimited)"},
					&cli.StringSliceFlag{Name: "producer-props", Aliases: []string{"command-property"}, Usage: "producer properties `key=value` [key=value ...] (repeatable; --command-property is Kafka 4.2's name)"},
					&cli.StringFlag{Name: "producer.config", Usage: "producer properties `FILE` (same as --command-config)"},
					&cli.IntFlag{Name: "reporting-interval", Value: 5000, Usage: "ms between progress lines when not on a terminal"},
				},
				Action: perfProduce,
			},
			{
				Name:  "consume",
				Usage: "consume --messages records as fast as possible",
				Description: "Like kafka-consumer-perf-test.sh: reads from the earliest offset (--from-latest:\n" +
					"the end) of every partition, directly or as --group, until --messages records\n" +
					"arrived or none came for --timeout ms. Prints Kafka's CSV summary (start.time,\n" +
					"end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,\n" +
					"rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec) and a line with\n" +
					"records/s, MB/s and the end-to-end latency (consume time minus the record's\n" +
					"timestamp: meaningful when consuming while producing) p50/p95/p99/p99.9/max.\n\n" +
					"Examples:\n" +
					"  keel perf consume --topic perf --messages 1000000\n" +
					"  keel perf consume --topic perf --messages 1000000 --group perf-consumer --consumer-props fetch.max.bytes=52428800",
				Flags: []cli.Flag{
					bootstrapFlag(), commandConfigFlag(),
					&cli.StringFlag{Name: "topic", Required: true},
					&cli.Int64Flag{Name: "messages", Aliases: []string{"num-records"}, Required: true, Usage: "records to consume"},
					&cli.StringFlag{Name: "group", Usage: "consume as this group (default: direct assignment, no group)"},
					&cli.BoolFlag{Name: "from-latest", Usage: "start at the end instead of the earliest offset"},
					&cli.IntFlag{Name: "timeout", Value: 10000, Usage: "ms without a record before giving up"},
					&cli.StringSliceFlag{Name: "consumer-props", Aliases: []string{"command-property"}, Usage: "consumer property `key=value` (repeatable; --command-property is Kafka 4.2's name)"},
					&cli.StringFlag{Name: "consumer.config", Usage: "consumer properties `FILE` (same as --command-config)"},
					&cli.IntFlag{Name: "reporting-interval", Value: 5000, Usage: "ms between progress lines when not on a terminal"},
				},
				Action: perfConsume,
			},
			perfE2ECommand(),
		},
	}
}

// maxLatencySamples bounds the latencies kept for percentiles, as
// kafka-producer-perf-test does (it samples ~500k).
const maxLatencySamples = 500_000

const mib = 1024 * 1024

// perfStats accumulates a perf run's counts and latencies. mu guards all of
// it: producer callbacks run on one goroutine per broker, the reporter on
// its own.
type perfStats struct {
	mu       sync.Mutex
	start    time.Time
	total    int64 // records expected
	count    int64
	bytes    int64
	latSum   time.Duration
	latMax   time.Duration
	sampling int64
	samples  []time.Duration
	failed   int64
	firstErr error

	winStart             time.Time
	winCount, winBytes   int64
	winLatSum, winLatMax time.Duration
}

func newPerfStats(total int64) *perfStats {
	now := time.Now()
	s := &perfStats{start: now, winStart: now, total: total, sampling: max(1, total/maxLatencySamples)}
	s.samples = make([]time.Duration, 0, min(total, maxLatencySamples+1))
	return s
}

// add records the i-th record's outcome.
func (s *perfStats) add(i int64, size int, lat time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.count++
	s.bytes += int64(size)
	s.latSum += lat
	s.latMax = max(s.latMax, lat)
	s.winCount++
	s.winBytes += int64(size)
	s.winLatSum += lat
	s.winLatMax = max(s.winLatMax, lat)
	if i%s.sampling == 0 {
		s.samples = append(s.samples, lat)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// window returns the line for the interval since the last one and starts a
// new interval (kafka-producer-perf-test's periodic line).
func (s *perfStats) window(verb string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := time.Since(s.winStart).Seconds()
	avg := 0.0
	if s.winCount > 0 {
		avg = ms(s.winLatSum) / float64(s.winCount)
	}
	line := fmt.Sprintf("%d records %s, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.",
		s.winCount, verb, float64(s.winCount)/el, float64(s.winBytes)/mib/el, avg, ms(s.winLatMax))
	s.winStart, s.winCount, s.winBytes, s.winLatSum, s.winLatMax = time.Now(), 0, 0, 0, 0
	return line
}

// progress is the live terminal line: the run so far.
func (s *perfStats) progress(verb string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := time.Since(s.start).Seconds()
	avg := 0.0
	if s.count > 0 {
		avg = ms(s.latSum) / float64(s.count)
	}
	return fmt.Sprintf("%d/%d records %s (%.0f%%), %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency",
		s.count, s.total, verb, 100*float64(s.count)/float64(max(s.total, 1)), float64(s.count)/el, float64(s.bytes)/mib/el, avg, ms(s.latMax))
}

// percentiles returns the sampled latencies at the given quantiles.
func (s *perfStats) percentiles(qs ...float64) []time.Duration {
	s.mu.Lock()
	sorted := slices.Clone(s.samples)
	s.mu.Unlock()
	slices.Sort(sorted)
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		if len(sorted) > 0 {
			out[i] = sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
		}
	}
	return out
}

// summary is the final line.
func (s *perfStats) summary(verb, latencyName string, elapsed time.Duration) string {
	ps := s.percentiles(0.5, 0.95, 0.99, 0.999)
	s.mu.Lock()
	defer s.mu.Unlock()
	el := elapsed.Seconds()
	avg := 0.0
	if s.count > 0 {
		avg = ms(s.latSum) / float64(s.count)
	}
	return fmt.Sprintf("%d records %s, %.1f records/sec (%.2f MB/sec), %.2f ms avg %s, %.2f ms max %s, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.",
		s.count, verb, float64(s.count)/el, float64(s.bytes)/mib/el, avg, latencyName, ms(s.latMax), latencyName, ms(ps[0]), ms(ps[1]), ms(ps[2]), ms(ps[3]))
}

// reporter prints progress until stop is called: a live line rewritten in
// place on a terminal, plain window lines every interval otherwise.
type reporter struct {
	stop func()
}

func startReporter(w io.Writer, s *perfStats, verb string, interval time.Duration) *reporter {
	tty := isTerminal(w)
	done := make(chan struct{})
	exited := make(chan struct{})
	tick := interval
	if tty {
		tick = 500 * time.Millisecond
	}
	go func() {
		defer close(exited)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprint(w, "\r\033[K"+s.progress(verb))
				} else {
					fmt.Fprintln(w, s.window(verb))
				}
			}
		}
	}()
	var once sync.Once
	return &reporter{stop: func() { once.Do(func() { close(done); <-exited }) }}
}

// perfOptions reads a perf command's properties: --command-config or its
// Kafka-named alias, then the key=value pairs.
func perfOptions(c *cli.Context, r role, fileFlag, propsFlag string) ([]client.Opt, error) {
	if err := commandConfigAlias(c, fileFlag); err != nil {
		return nil, err
	}
	// Repeated, or comma-separated where the comma starts a key=value
	// (bootstrap.servers=a:9092,b:9092 keeps its list).
	props, err := parseKeyValues(propsFlag, c.StringSlice(propsFlag))
	if err != nil {
		return nil, err
	}
	return clientOptions(c, r, props)
}

func perfProduce(c *cli.Context) error {
	topic, n, size, rate := c.String("topic"), c.Int64("num-records"), c.Int("record-size"), c.Float64("throughput")
	switch {
	case n <= 0:
		return fmt.Errorf("--num-records %d: must be positive", n)
	case size < 0 || size > 64<<20:
		return fmt.Errorf("--record-size %d: must be between 0 and 64 MiB", size)
	case rate == 0 || (rate < 0 && rate != -1):
		return fmt.Errorf("--throughput %v: must be positive, or -1 for unlimited", rate)
	case c.Int("reporting-interval") <= 0:
		return fmt.Errorf("--reporting-interval %d: must be positive", c.Int("reporting-interval"))
	}
	opts, err := perfOptions(c, roleProducer, "producer.config", "producer-props")
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(c)
	defer cancel()
	p, err := client.NewProducer(ctx, opts...)
	if err != nil {
		return connectError(c, err)
	}
	defer closeWithin(p.Close)
	if _, err := waitForTopic(ctx, p.Client(), topic); err != nil {
		return err
	}
	// Kafka's tool sends random upper-case letters, the same payload for
	// every record (values are read-only once produced).
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('A' + rand.IntN(26))
	}

	stats := newPerfStats(n)
	rep := startReporter(c.App.Writer, stats, "sent", time.Duration(c.Int("reporting-interval"))*time.Millisecond)
	defer rep.stop()
	start := time.Now()
	for i := int64(0); i < n && ctx.Err() == nil; i++ {
		// One clock read per record serves the throttle, the latency and
		// the record's timestamp (which the producer would read the clock
		// for again): on a small VM a read costs tens of nanoseconds, and
		// at millions of records a second the tool should leave the CPU
		// to the client and the brokers it measures.
		sent := time.Now()
		if rate > 0 {
			// Throttle like Kafka's ThroughputThrottler: sleep when
			// ahead of the schedule i/rate.
			if ahead := start.Add(time.Duration(float64(i) / rate * float64(time.Second))).Sub(sent); ahead > time.Millisecond {
				select {
				case <-ctx.Done():
				case <-time.After(ahead):
				}
				sent = time.Now()
			}
		}
		i := i
		p.Produce(ctx, &client.Record{Topic: topic, Value: payload, Timestamp: sent}, func(_ *client.Record, err error) {
			stats.add(i, size, time.Since(sent), err)
		})
	}
	flushErr := p.Flush(ctx)
	elapsed := time.Since(start)
	rep.stop()
	fmt.Fprintln(c.App.Writer, stats.summary("sent", "latency", elapsed))
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if flushErr != nil {
		return fmt.Errorf("flush: %w", flushErr)
	}
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.failed > 0 {
		return fmt.Errorf("%d of %d records failed; the first: %w", stats.failed, n, stats.firstErr)
	}
	return nil
}

func perfConsume(c *cli.Context) error {
	topic, n, group := c.String("topic"), c.Int64("messages"), c.String("group")
	idle := time.Duration(c.Int("timeout")) * time.Millisecond
	switch {
	case n <= 0:
		return fmt.Errorf("--messages %d: must be positive", n)
	case idle <= 0:
		return fmt.Errorf("--timeout %d: must be positive", c.Int("timeout"))
	case c.Int("reporting-interval") <= 0:
		return fmt.Errorf("--reporting-interval %d: must be positive", c.Int("reporting-interval"))
	}
	opts, err := perfOptions(c, roleConsumer, "consumer.config", "consumer-props")
	if err != nil {
		return err
	}
	ctx, cl, done, err := openClient(c, opts)
	if err != nil {
		return err
	}
	defer done()
	tm, err := waitForTopic(ctx, cl, topic)
	if err != nil {
		return err
	}
	start := time.Now()
	var assignedAt atomic.Int64
	reset, startAt := client.OffsetResetEarliest, client.OffsetEarliest
	if c.Bool("from-latest") {
		reset, startAt = client.OffsetResetLatest, client.OffsetLatest
	}
	if group != "" {
		opts = append(opts, client.ConsumerGroup(group), client.ConsumeTopics(topic), client.AutoOffsetReset(reset),
			client.OnRebalance(client.RebalanceListener{OnAssigned: func(map[string][]int32) {
				assignedAt.CompareAndSwap(0, time.Now().UnixNano())
			}}))
	} else {
		parts := map[int32]int64{}
		for _, p := range tm.Partitions {
			parts[p.Partition] = startAt
		}
		opts = append(opts, client.ConsumePartitions(map[string]map[int32]int64{topic: parts}))
		assignedAt.Store(start.UnixNano())
	}
	cons, err := client.NewConsumerFromClient(ctx, cl, opts...)
	if err != nil {
		return err
	}
	defer closeWithin(cons.Close)

	stats := newPerfStats(n)
	rep := startReporter(c.App.Writer, stats, "consumed", time.Duration(c.Int("reporting-interval"))*time.Millisecond)
	defer rep.stop()
	var got int64
	lastRecord := time.Now()
	var runErr error
	for got < n && ctx.Err() == nil {
		// The idle clock starts once partitions are assigned: a group's
		// join is not idleness.
		wait := idle
		if assignedAt.Load() != 0 {
			wait = idle - time.Since(lastRecord)
			if wait <= 0 {
				break
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, wait)
		recs, err := cons.Poll(pctx)
		pcancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				continue
			}
			if client.IsRetriable(err) {
				select { // back off: the same error may come straight back
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			runErr = fmt.Errorf("consume %s: %w", topic, err)
			break
		}
		now := time.Now()
		for _, r := range recs {
			if got >= n {
				break
			}
			stats.add(got, len(r.Key)+len(r.Value), now.Sub(r.Timestamp), nil)
			got++
		}
		if len(recs) > 0 {
			lastRecord = now
		}
	}
	end := time.Now()
	rep.stop()
	elapsed := end.Sub(start)
	rebalance := time.Duration(0)
	if at := assignedAt.Load(); at != 0 {
		rebalance = time.Unix(0, at).Sub(start)
	}
	fetch := max(elapsed-rebalance, time.Millisecond)
	stats.mu.Lock()
	mb := float64(stats.bytes) / mib
	count := stats.count
	stats.mu.Unlock()
	// kafka-consumer-perf-test's date format: yyyy-MM-dd HH:mm:ss:SSS.
	tf := func(t time.Time) string {
		return t.Format("2006-01-02 15:04:05") + fmt.Sprintf(":%03d", t.Nanosecond()/int(time.Millisecond))
	}
	w := c.App.Writer
	fmt.Fprintln(w, "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
	fmt.Fprintf(w, "%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f\n", tf(start), tf(end),
		mb, mb/elapsed.Seconds(), count, float64(count)/elapsed.Seconds(), rebalance.Milliseconds(), fetch.Milliseconds(),
		mb/fetch.Seconds(), float64(count)/fetch.Seconds())
	// The human line measures fetching only: a group's join is not
	// throughput (rebalance.time.ms above shows it).
	fmt.Fprintln(w, stats.summary("consumed", "end-to-end latency", fetch))
	if runErr != nil {
		return runErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if count < n {
		return fmt.Errorf("consumed %d of %d records: none arrived for %v (--timeout)", count, n, idle)
	}
	return nil
}
