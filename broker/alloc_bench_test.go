package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// BenchmarkSmallProduceRequest sends one-record produce requests (acks=1,
// the shape of a linger.ms=0 producer at a low rate) one at a time over a
// raw connection: its allocs/op are the broker's allocations per produce
// request (the raw client allocates next to nothing), which set how often
// the broker's garbage collector runs under such a load.
func BenchmarkSmallProduceRequest(b *testing.B) {
	c := newTestCluster(b)
	c.createTopic("small", 1, nil)
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	bb.Append(time.Now().UnixMilli(), []byte("key"), make([]byte, 100), nil)
	batch, err := bb.Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	rc := c.dialRaw(b)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "small"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	b.ReportAllocs()
	for b.Loop() {
		resp := roundTrip[*kmsg.ProduceResponse](rc, req)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatalf("error %d", code)
		}
	}
}

// BenchmarkLargeProduceRequest sends the produce request of a saturated
// kgo producer (kgo's defaults against the bench of issue 4): six
// partitions, each one snappy batch of 2,500 records of 100 bytes, acks=1,
// one request at a time over a raw connection. ns/op is the request's
// round trip, mostly the broker validating and appending six batches; the
// producer's throughput is its buffer divided by this.
func BenchmarkLargeProduceRequest(b *testing.B) {
	const partitions, perBatch = 6, 2500
	c := newTestCluster(b)
	c.createTopic("large", partitions, nil)
	opts := record.DefaultBatchOptions()
	opts.Compression = record.CompressionSnappy
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte('A' + i*7%26)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "large"
	for p := range partitions {
		bb := record.NewBatchBuilder(opts)
		for range perBatch {
			bb.Append(time.Now().UnixMilli(), nil, value, nil)
		}
		batch, err := bb.Build(nil)
		if err != nil {
			b.Fatal(err)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	rc := c.dialRaw(b)
	frame := encodeFrame(req)
	for b.Loop() {
		resp := rc.receive(req, rc.sendFrame(frame)).(*kmsg.ProduceResponse)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				b.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
		}
	}
	b.ReportMetric(float64(partitions*perBatch)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
