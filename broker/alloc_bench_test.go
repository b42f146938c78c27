package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
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
	smallProduceRequests(b, c)
}

// BenchmarkSmallProduceRequestAuthorized is BenchmarkSmallProduceRequest
// with the StandardAuthorizer and 10,000 ACLs (a literal WRITE on the topic
// among ACLs of other principals and topics, literal and prefixed): the
// authorizer's cost per request.
func BenchmarkSmallProduceRequestAuthorized(b *testing.B) {
	c := newTestCluster(b, withConfig("authorizer.class.name="+StandardAuthorizerClass))
	acl := func(typ kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation) metadata.Record {
		return &metadata.AccessControlEntryRecord{ID: metadata.NewUuid(), ResourceType: int8(typ), ResourceName: name,
			PatternType: int8(pattern), Principal: principal, Host: "*", Operation: int8(op), PermissionType: int8(kmsg.ACLPermissionTypeAllow)}
	}
	recs := []metadata.Record{acl(kmsg.ACLResourceTypeCluster, clusterName, kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationCreate),
		acl(kmsg.ACLResourceTypeTopic, "small", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationWrite)}
	for i := range 9998 {
		pattern := kmsg.ACLResourcePatternTypeLiteral
		if i%2 == 1 {
			pattern = kmsg.ACLResourcePatternTypePrefixed
		}
		recs = append(recs, acl(kmsg.ACLResourceTypeTopic, fmt.Sprintf("team-%d.topic", i), pattern, fmt.Sprintf("User:u%d", i), kmsg.ACLOperationRead))
	}
	c.meta.commit(recs...)
	c.createTopic("small", 1, nil)
	smallProduceRequests(b, c)
}

func smallProduceRequests(b *testing.B, c *testCluster) {
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
