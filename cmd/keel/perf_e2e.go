package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// perfE2ECommand is `keel perf e2e`, kafka-e2e-latency.sh: a producer and
// a consumer in one process, each record timed from Produce to Poll.
func perfE2ECommand() *cli.Command {
	return &cli.Command{
		Name:  "e2e",
		Usage: "measure end-to-end latency: each record timed from produce to consume (like kafka-e2e-latency.sh)",
		Description: "Like kafka-e2e-latency.sh: produces --num-records records of --record-size bytes to\n" +
			"--topic and reads them back with a consumer in the same process, assigned every\n" +
			"partition from its current end. Each record's latency runs from Produce to the\n" +
			"consumer's Poll returning it, on this process's monotonic clock: no clock skew, and\n" +
			"finer than record timestamps (milliseconds). By default one record is in flight at\n" +
			"a time, each sent once the previous one was read, as Kafka's tool does; with\n" +
			"--throughput records are sent at that rate whether or not read yet, as an\n" +
			"application would. The producer's linger.ms is 0 unless --producer-props says\n" +
			"otherwise. Prints a progress line, the final line (records/s, MB/s, average and\n" +
			"maximum latency, p50/p95/p99/p99.9) and Kafka's \"Avg latency\" and \"Percentiles\"\n" +
			"lines. Exits 1 if a record failed or did not arrive within --timeout.\n\n" +
			"On a small machine run it with GOMAXPROCS=1: a client that needs a fraction of a\n" +
			"core schedules better on one thread, and leaves the broker's cores alone.\n\n" +
			"Examples:\n" +
			"  keel perf e2e --topic lat --num-records 10000\n" +
			"  keel perf e2e --topic lat --num-records 100000 --throughput 10000 --producer-acks all\n\n" +
			propertiesHelp,
		Flags: []cli.Flag{
			bootstrapFlag(), commandConfigFlag(),
			&cli.StringFlag{Name: "topic", Required: true},
			&cli.Int64Flag{Name: "num-records", Required: true, Usage: "records to produce and read back"},
			&cli.IntFlag{Name: "record-size", Value: 100, Usage: "bytes per record value (at least 16)"},
			&cli.StringFlag{Name: "producer-acks", Value: "1", Usage: "acks: 0, 1 or all (-1)"},
			&cli.Float64Flag{Name: "throughput", Value: -1, Usage: "records per second (-1: one at a time, each after the previous was read)"},
			&cli.StringSliceFlag{Name: "producer-props", Usage: "producer properties `key=value` [key=value ...] (repeatable)"},
			&cli.StringSliceFlag{Name: "consumer-props", Usage: "consumer properties `key=value` [key=value ...] (repeatable)"},
			&cli.IntFlag{Name: "timeout", Value: 10000, Usage: "ms to wait for a record to arrive"},
			&cli.IntFlag{Name: "reporting-interval", Value: 5000, Usage: "ms between progress lines when not on a terminal"},
		},
		Action: perfE2E,
	}
}

// maxE2ERecords bounds --num-records: each record's send time and
// whether it was read are kept.
const maxE2ERecords = 100_000_000

// e2eHeader starts every value: a run id, so that records of other runs
// or other producers are skipped, and the record's sequence number.
const e2eHeader = 16

func perfE2E(c *cli.Context) error {
	topic, n, size, rate := c.String("topic"), c.Int64("num-records"), c.Int("record-size"), c.Float64("throughput")
	wait := time.Duration(c.Int("timeout")) * time.Millisecond
	acks, err := parseAcks(c.String("producer-acks"))
	switch {
	case err != nil:
		return fmt.Errorf("--producer-acks: %w", err)
	case n <= 0 || n > maxE2ERecords: // 9 bytes of state each
		return fmt.Errorf("--num-records %d: must be between 1 and %d", n, maxE2ERecords)
	case size < e2eHeader || size > 64<<20:
		return fmt.Errorf("--record-size %d: must be between %d and 64 MiB", size, e2eHeader)
	case rate == 0 || (rate < 0 && rate != -1):
		return fmt.Errorf("--throughput %v: must be positive, or -1 for one record at a time", rate)
	case wait <= 0:
		return fmt.Errorf("--timeout %d: must be positive", c.Int("timeout"))
	case c.Int("reporting-interval") <= 0:
		return fmt.Errorf("--reporting-interval %d: must be positive", c.Int("reporting-interval"))
	}
	prodOpts, err := perfOptions(c, roleProducer, "", "producer-props")
	if err != nil {
		return err
	}
	// linger.ms=0 first, so that the properties can set it.
	prodOpts = append(append([]client.Opt{client.Linger(0)}, prodOpts...), client.RequiredAcks(acks))
	consOpts, err := perfOptions(c, roleConsumer, "", "consumer-props")
	if err != nil {
		return err
	}
	ctx, cl, done, err := openClient(c, consOpts)
	if err != nil {
		return err
	}
	defer done()
	if _, err := waitForTopic(ctx, cl, topic); err != nil {
		return err
	}
	// Read from each partition's current end: every record of this run,
	// nothing before it.
	ends, err := client.NewAdminFromClient(cl).ListOffsets(ctx, client.LatestOffset, topic)
	if err != nil {
		return err
	}
	start := map[int32]int64{}
	for tp, o := range ends {
		if o.Err != nil {
			return fmt.Errorf("end offset of %s-%d: %w", tp.Topic, tp.Partition, o.Err)
		}
		start[tp.Partition] = o.Offset
	}
	cons, err := client.NewConsumerFromClient(ctx, cl, append(consOpts, client.ConsumePartitions(map[string]map[int32]int64{topic: start}))...)
	if err != nil {
		return err
	}
	defer closeWithin(cons.Close)
	prod, err := client.NewProducerFromClient(ctx, cl, prodOpts...)
	if err != nil {
		return err
	}
	defer closeWithin(prod.Close)

	var run [8]byte
	_, _ = rand.Read(run[:])
	payload := make([]byte, size)
	copy(payload, run[:])
	for i := e2eHeader; i < size; i++ {
		payload[i] = byte('A' + i%26)
	}
	e := &e2eRun{run: run, n: n, sent: make([]atomic.Int64, n), seen: make([]bool, n), arrived: make(chan int64, 1),
		stats: newPerfStats(n), base: time.Now()}
	rep := startReporter(c.App.Writer, e.stats, "read", time.Duration(c.Int("reporting-interval"))*time.Millisecond)
	defer rep.stop()
	readCtx, stopReading := context.WithCancel(ctx)
	readDone := make(chan error, 1)
	go func() { readDone <- e.read(readCtx, cons) }()

	began := time.Now()
	var sendErr error
	for i := int64(0); i < n && ctx.Err() == nil && sendErr == nil; i++ {
		if rate > 0 {
			if ahead := time.Until(began.Add(time.Duration(float64(i) / rate * float64(time.Second)))); ahead > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(ahead):
				}
			}
		}
		value := make([]byte, size)
		copy(value, payload)
		binary.BigEndian.PutUint64(value[8:], uint64(i))
		e.sent[i].Store(int64(time.Since(e.base)))
		prod.Produce(ctx, &client.Record{Topic: topic, Value: value}, func(_ *client.Record, err error) {
			if err != nil {
				e.stats.add(i, size, 0, err)
				select {
				case e.arrived <- i: // one at a time: go on
				default:
				}
			}
		})
		if rate < 0 {
			sendErr = e.awaitArrival(ctx, i, wait)
		}
	}
	if sendErr == nil {
		sendErr = e.awaitAll(ctx, wait)
	}
	stopReading()
	readErr := <-readDone
	elapsed := time.Since(began)
	rep.stop()
	w := c.App.Writer
	fmt.Fprintln(w, e.stats.summary("read", "end-to-end latency", elapsed))
	ps := e.stats.percentiles(0.5, 0.99, 0.999)
	e.stats.mu.Lock()
	count, failed, firstErr := e.stats.count, e.stats.failed, e.stats.firstErr
	avg := 0.0
	if count > 0 {
		avg = ms(e.stats.latSum) / float64(count)
	}
	e.stats.mu.Unlock()
	fmt.Fprintf(w, "Avg latency: %.4f ms\n", avg)
	fmt.Fprintf(w, "Percentiles: 50th = %.3f, 99th = %.3f, 99.9th = %.3f\n", ms(ps[0]), ms(ps[1]), ms(ps[2]))
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w", ctx.Err())
	case failed > 0:
		return fmt.Errorf("%d of %d records failed; the first: %w", failed, n, firstErr)
	case readErr != nil:
		return readErr
	case sendErr != nil:
		return sendErr
	}
	return nil
}

// e2eRun is one run's shared state. sent holds each record's send time
// (nanoseconds since base, monotonic) for the reading goroutine, which
// alone owns seen.
type e2eRun struct {
	run     [8]byte
	n       int64
	base    time.Time
	sent    []atomic.Int64
	seen    []bool
	arrived chan int64 // the sequence numbers read or failed, for one-at-a-time
	stats   *perfStats
}

// read polls until ctx ends, timing every first delivery of this run's
// records.
func (e *e2eRun) read(ctx context.Context, cons *client.Consumer) error {
	for {
		recs, err := cons.Poll(ctx)
		now := time.Since(e.base)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if client.IsRetriable(err) {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			return fmt.Errorf("consume: %w", err)
		}
		for _, r := range recs {
			if len(r.Value) < e2eHeader || [8]byte(r.Value[:8]) != e.run {
				continue
			}
			i := int64(binary.BigEndian.Uint64(r.Value[8:]))
			if i < 0 || i >= e.n || e.seen[i] {
				continue
			}
			e.seen[i] = true
			e.stats.add(i, len(r.Value), now-time.Duration(e.sent[i].Load()), nil)
			select {
			case e.arrived <- i:
			default:
			}
		}
	}
}

// awaitArrival waits until record i was read or failed.
func (e *e2eRun) awaitArrival(ctx context.Context, i int64, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			return fmt.Errorf("record %d not read within %v (--timeout)", i, wait)
		case got := <-e.arrived:
			if got == i {
				return nil
			}
		}
	}
}

// awaitAll waits until every record was read or failed, or none arrived
// for wait.
func (e *e2eRun) awaitAll(ctx context.Context, wait time.Duration) error {
	last, lastChange := int64(-1), time.Now()
	for {
		e.stats.mu.Lock()
		read, settled := e.stats.count, e.stats.count+e.stats.failed
		e.stats.mu.Unlock()
		if settled >= e.n || ctx.Err() != nil {
			return nil
		}
		if settled != last {
			last, lastChange = settled, time.Now()
		} else if time.Since(lastChange) > wait {
			return fmt.Errorf("%d of %d records read; none arrived for %v (--timeout)", read, e.n, wait)
		}
		select {
		case <-ctx.Done():
		case <-e.arrived:
		case <-time.After(10 * time.Millisecond):
		}
	}
}
