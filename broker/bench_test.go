package broker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The benchmarks drive the live server over loopback with kgo, as a Kafka
// client would: 100-byte records, 6 partitions, kgo's defaults (acks=all,
// idempotent). They report records/s and MB/s of record values.

const (
	benchPartitions = 6
	benchValueSize  = 100
)

func BenchmarkProduce(b *testing.B) { benchmarkProduce(b, nil) }

// benchmarkProduce produces b.N records to a topic with configs through
// kgo's async path and reports the rate.
func benchmarkProduce(b *testing.B, configs map[string]*string) {
	c := newTestCluster(b)
	c.createTopic("bench", benchPartitions, configs)
	prod := c.client(kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(1<<20))
	value := make([]byte, benchValueSize)
	var failed atomic.Int64
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	ctx := context.Background()
	// Warm up the connection and metadata.
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		prod.Produce(ctx, &kgo.Record{Value: value}, done)
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d records failed", n)
	}
	reportRate(b, b.N, elapsed)
}

func BenchmarkFetch(b *testing.B) {
	c := newTestCluster(b)
	c.createTopic("bench", benchPartitions, nil)
	prod := c.client(kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(1<<20), kgo.ProducerLinger(5*time.Millisecond))
	value := make([]byte, benchValueSize)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		prod.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cons := c.client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	b.ResetTimer()
	start := time.Now()
	got := 0
	for got < b.N {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) { b.Fatalf("%s-%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportRate(b, got, elapsed)
}

func reportRate(b *testing.B, n int, elapsed time.Duration) {
	secs := elapsed.Seconds()
	b.ReportMetric(float64(n)/secs, "records/s")
	b.ReportMetric(float64(n)*benchValueSize/secs/1e6, "MB/s")
}
