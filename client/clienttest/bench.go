package clienttest

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchSettings are the producer settings both clients get in
// BenchmarkProduce, so the comparison is like for like.
type BenchSettings struct {
	Partitions  int32
	ValueBytes  int
	Linger      time.Duration
	BatchBytes  int
	MaxInFlight int
	// BufferBytes is buffer.memory (kgo: MaxBufferedBytes).
	BufferBytes int
}

// DefaultBenchSettings: 100-byte keyless records, 3 partitions, acks=all
// with idempotence (both clients' default), no compression, linger 0,
// 64 KiB batches, one request in flight per broker (kgo allows no more with
// idempotence), 8 MiB of buffer (so the run measures steady-state sending,
// not how fast memory can be filled).
func DefaultBenchSettings() BenchSettings {
	return BenchSettings{Partitions: 3, ValueBytes: 100, Linger: 0, BatchBytes: 64 << 10, MaxInFlight: 1, BufferBytes: 8 << 20}
}

// BenchmarkProduce measures produce throughput of the SDK ("keel") and of
// franz-go's kgo ("kgo") against the same cluster with the same settings.
// One op is one record; it reports records/s and allocs per record.
func BenchmarkProduce(b *testing.B, tgt Target, s BenchSettings) {
	a := NewAdmin(b, tgt)
	value := make([]byte, s.ValueBytes)
	b.Run("keel", func(b *testing.B) {
		topic := "bench-keel-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		CreateTopic(b, a, topic, s.Partitions)
		p := NewProducer(b, tgt, client.Linger(s.Linger), client.BatchSize(s.BatchBytes), client.MaxInFlight(s.MaxInFlight),
			client.BufferMemory(int64(s.BufferBytes)))
		ctx := context.Background()
		var failed atomic.Int64
		cb := func(_ *client.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		}
		// Warm up: metadata, connections, producer id.
		if err := p.ProduceSync(ctx, &client.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			p.Produce(ctx, &client.Record{Topic: topic, Value: value}, cb)
		}
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		b.StopTimer()
		if failed.Load() > 0 {
			b.Fatalf("%d records failed", failed.Load())
		}
		b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	})
	b.Run("kgo", func(b *testing.B) {
		topic := "bench-kgo-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		CreateTopic(b, a, topic, s.Partitions)
		opts := []kgo.Opt{kgo.SeedBrokers(tgt.Bootstrap...), kgo.DefaultProduceTopic(topic),
			kgo.ProducerLinger(s.Linger), kgo.ProducerBatchMaxBytes(int32(s.BatchBytes)),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedBytes(s.BufferBytes), kgo.RequiredAcks(kgo.AllISRAcks())}
		if s.MaxInFlight != 1 { // kgo refuses more than 1 with idempotence
			opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(s.MaxInFlight))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		ctx := context.Background()
		var failed atomic.Int64
		cb := func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, cb)
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		b.StopTimer()
		if failed.Load() > 0 {
			b.Fatalf("%d records failed", failed.Load())
		}
		b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	})
}
