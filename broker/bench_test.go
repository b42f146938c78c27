package broker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// BenchmarkFollowerFetchIdle is a follower's fetch of 500 partitions that
// have nothing new, as the leader serves it: sessionless (every partition
// listed, every partition checked, every partition answered) against an
// incremental fetch in a KIP-227 session (none listed, none answered).
// Followers fetch this way whenever any one partition they share with the
// leader gets a record.
func BenchmarkFollowerFetchIdle(b *testing.B) {
	const partitions = 500
	c := newTestCluster(b)
	c.meta.registerBroker(2, "127.0.0.1", 1) // a follower that never fetches by itself
	replicas := make([][]int32, partitions)
	parts := make([]fetchPartitionReq, partitions)
	for i := range replicas {
		replicas[i] = []int32{testNodeID, 2}
		parts[i] = fetchPartitionReq{"idle", int32(i), 0, 1 << 20, -1}
	}
	c.createAssigned("idle", replicas...)
	rc := c.dialRaw(b)
	fetch := func(sessionID, epoch int32, parts ...fetchPartitionReq) *kmsg.FetchResponse {
		req := c.fetchRequest(15, 0, 0, 10<<20, parts...)
		req.ReplicaState.ID, req.SessionID, req.SessionEpoch = 2, sessionID, epoch
		resp := roundTrip[*kmsg.FetchResponse](rc, req)
		if resp.ErrorCode != 0 {
			b.Fatal(kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	b.Run("sessionless", func(b *testing.B) {
		for b.Loop() {
			if resp := fetch(0, -1, parts...); len(resp.Topics[0].Partitions) != partitions {
				b.Fatalf("%d partitions answered", len(resp.Topics[0].Partitions))
			}
		}
	})
	b.Run("session", func(b *testing.B) {
		id := fetch(0, 0, parts...).SessionID
		if id == 0 {
			b.Fatal("no session")
		}
		epoch := int32(1)
		for b.Loop() {
			if resp := fetch(id, epoch); len(resp.Topics) != 0 {
				b.Fatalf("%d topics answered", len(resp.Topics))
			}
			epoch++
		}
	})
}
