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
