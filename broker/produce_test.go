package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network/record"
)

// roundTripRecords is how many records each codec's round trip produces:
// the 100,000, fewer under the race detector (2 shared cores).
func roundTripRecords() int {
	if raceEnabled {
		return 20_000
	}
	return 100_000
}

// producedRecord is what the test expects back at a partition and offset.
type producedRecord struct {
	key, value []byte
	headers    []kgo.RecordHeader
}

func makeRecord(topic string, i int) *kgo.Record {
	key := []byte("key-" + strconv.Itoa(i%5000))
	value := make([]byte, 100)
	binary.BigEndian.PutUint64(value, uint64(i))
	for j := 8; j < len(value); j++ {
		value[j] = byte(i*31 + j)
	}
	return &kgo.Record{
		Topic: topic, Key: key, Value: value,
		Headers: []kgo.RecordHeader{{Key: "index", Value: []byte(strconv.Itoa(i))}, {Key: "empty"}},
	}
}

// TestRoundTripCompressions produces keyed records with headers under every
// codec, consumes them back and checks every key, value and header at every
// offset (so per-partition order too) and that each keyed record landed on
// the partition murmur2 picks.
func TestRoundTripCompressions(t *testing.T) {
	c := newTestCluster(t)
	const partitions = 6
	n := roundTripRecords()
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, cc := range codecs {
		t.Run(cc.name, func(t *testing.T) {
			topic := "roundtrip-" + cc.name
			c.createTopic(topic, partitions, nil)
			prod := c.client(
				kgo.ProducerBatchCompression(cc.codec),
				kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
				kgo.ProducerLinger(5*time.Millisecond),
				kgo.MaxBufferedRecords(50_000),
			)
			want := make(map[[2]int64]producedRecord, n)
			var mu sync.Mutex
			var firstErr error
			var wg sync.WaitGroup
			wg.Add(n)
			for i := 0; i < n; i++ {
				r := makeRecord(topic, i)
				prod.Produce(context.Background(), r, func(r *kgo.Record, err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						if firstErr == nil {
							firstErr = err
						}
						return
					}
					if p := record.PartitionForKey(r.Key, partitions); r.Partition != p && firstErr == nil {
						firstErr = fmt.Errorf("key %q on partition %d, murmur2 says %d", r.Key, r.Partition, p)
					}
					want[[2]int64{int64(r.Partition), r.Offset}] = producedRecord{r.Key, r.Value, r.Headers}
				})
			}
			wg.Wait()
			if firstErr != nil {
				t.Fatal(firstErr)
			}
			if len(want) != n {
				t.Fatalf("%d distinct offsets for %d records", len(want), n)
			}
			// kgo's default producer is idempotent: it got a producer id
			// and its batches carry sequences.
			p0 := c.broker.lookup(tp(topic, 0))
			producers := len(p0.log.ActiveProducers())
			if producers != 1 {
				t.Fatalf("%d idempotent producers on %s-0, want kgo's one", producers, topic)
			}
			cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := 0
			next := map[int32]int64{}
			ctx := testCtx(t)
			for got < n {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", got, n, err)
				}
				fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
				fs.EachRecord(func(r *kgo.Record) {
					got++
					if r.Offset != next[r.Partition] {
						t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
					}
					next[r.Partition] = r.Offset + 1
					w, ok := want[[2]int64{int64(r.Partition), r.Offset}]
					if !ok {
						t.Fatalf("unexpected record at %d/%d", r.Partition, r.Offset)
					}
					if !bytes.Equal(w.key, r.Key) || !bytes.Equal(w.value, r.Value) || !equalHeaders(w.headers, r.Headers) {
						t.Fatalf("record %d/%d differs: key %q/%q headers %v/%v", r.Partition, r.Offset, w.key, r.Key, w.headers, r.Headers)
					}
				})
			}
		})
	}
}

func equalHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// buildBatch is one uncompressed batch of count small records.
func buildBatch(t testing.TB, count int, valueSize int) []byte {
	t.Helper()
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	for i := 0; i < count; i++ {
		bb.Append(time.Now().UnixMilli(), []byte("k"), bytes.Repeat([]byte{'v'}, valueSize), nil)
	}
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceRaw sends one partition's batch in a raw Produce request (v12:
// topics by name) on a new connection.
func (c *testCluster) produceRaw(t testing.TB, topic string, partition int32, acks int16, timeout time.Duration, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return c.produceRawVersion(t, 12, topic, partition, acks, timeout, batch)
}

func (c *testCluster) produceRawVersion(t testing.TB, version int16, topic string, partition int32, acks int16, timeout time.Duration, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := produceRequest(version, acks, timeout, topic, partition, batch)
	if mt, ok := c.meta.Image().Topic(topic); ok {
		req.Topics[0].TopicID = mt.ID // v13+
	}
	resp := roundTrip[*kmsg.ProduceResponse](c.dialRaw(t), req)
	return resp.Topics[0].Partitions[0]
}

// produceRequest is a Produce request of one partition's batch.
func produceRequest(version, acks int16, timeout time.Duration, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, int32(timeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic // v3–v12
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestProduceErrors(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("small", 1, map[string]*string{"max.message.bytes": kmsgStr("1000")})
	c.createTopic("minisr", 1, map[string]*string{"min.insync.replicas": kmsgStr("2")})
	c.createTopic("bomb", 1, nil)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("elsewhere", []int32{2})
	leo := func(topic string) int64 { return c.broker.lookup(tp(topic, 0)).log.LogEndOffset() }

	good := buildBatch(t, 3, 10)
	if r := c.produceRaw(t, "small", 0, 1, time.Second, good); r.ErrorCode != 0 || r.BaseOffset != 0 || r.LogStartOffset != 0 || r.LogAppendTime != -1 {
		t.Fatalf("good batch: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}

	cases := []struct {
		name      string
		topic     string
		partition int32
		acks      int16
		batch     []byte
		want      *kerr.Error
	}{
		{"bad CRC is CORRUPT_MESSAGE", "small", 0, 1, corruptCRC(buildBatch(t, 3, 10)), kerr.CorruptMessage},
		{"batch over max.message.bytes is MESSAGE_TOO_LARGE", "small", 0, 1, buildBatch(t, 20, 100), kerr.MessageTooLarge},
		{"zip bomb is INVALID_RECORD", "bomb", 0, 1, zipBomb(t), kerr.InvalidRecord},
		{"unknown topic", "nope", 0, 1, good, kerr.UnknownTopicOrPartition},
		{"unknown partition", "small", 7, 1, good, kerr.UnknownTopicOrPartition},
		{"not hosted here (known to the image)", "elsewhere", 0, 1, good, kerr.NotLeaderForPartition},
		{"acks=2 is INVALID_REQUIRED_ACKS", "small", 0, 2, good, kerr.InvalidRequiredAcks},
		{"a client's transaction marker is INVALID_RECORD", "small", 0, 1, clientMarker(t), kerr.InvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := int64(-1)
			if c.broker.lookup(tp(tc.topic, 0)) != nil {
				before = leo(tc.topic)
			}
			r := c.produceRaw(t, tc.topic, tc.partition, tc.acks, time.Second, tc.batch)
			if r.ErrorCode != tc.want.Code {
				t.Fatalf("got %v, want %v", kerr.ErrorForCode(r.ErrorCode), tc.want)
			}
			if before >= 0 && leo(tc.topic) != before {
				t.Fatalf("log end offset moved from %d to %d on a refused batch", before, leo(tc.topic))
			}
		})
	}
	// v13 names topics by id (KIP-516).
	if r := c.produceRawVersion(t, 13, "small", 0, 1, time.Second, good); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("v13: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
	if r := c.produceRawVersion(t, 13, "no-such-topic", 0, 1, time.Second, good); r.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("v13 unknown topic id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// NOT_LEADER_OR_FOLLOWER carries the leader (v10+, KIP-951).
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "elsewhere"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = good
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.ProduceResponse](c.dialRaw(t), req)
	if got := resp.Topics[0].Partitions[0]; got.CurrentLeader.LeaderID != 2 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 {
		t.Fatalf("leader hint: %+v brokers %+v", got.CurrentLeader, resp.Brokers)
	}
	// min.insync.replicas is capped by the replication factor (Kafka's
	// effectiveMinIsr, since 3.7): one replica of a minimum of 2 takes
	// acks=all (an ISR below the minimum is refused:
	// TestAcksAllWhenISRShrinksBelowMinimum).
	if r := c.produceRaw(t, "minisr", 0, -1, time.Second, good); r.ErrorCode != 0 {
		t.Fatalf("acks=-1 on minisr: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// min.insync.replicas does not apply to acks=1.
	if r := c.produceRaw(t, "minisr", 0, 1, time.Second, good); r.ErrorCode != 0 {
		t.Fatalf("acks=1 on minisr: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The broker stays up and the partition stays usable.
	if r := c.produceRaw(t, "small", 0, -1, time.Second, good); r.ErrorCode != 0 || r.BaseOffset != 6 {
		t.Fatalf("after bad batches: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
}

func kmsgStr(s string) *string { return &s }

// corruptCRC flips a bit of the records, after the CRC was computed.
func corruptCRC(b []byte) []byte {
	b[len(b)-1] ^= 1
	return b
}

// zipBomb is a small zstd batch whose single record inflates past the
// broker's decompression bound (64 MiB).
func zipBomb(t testing.TB) []byte {
	opts := record.DefaultBatchOptions()
	opts.Compression = record.CompressionZstd
	bb := record.NewBatchBuilder(opts)
	bb.Append(time.Now().UnixMilli(), nil, make([]byte, 80<<20), nil)
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 100_000 {
		t.Fatalf("bomb of %d bytes is not small", len(b))
	}
	return b
}

// clientMarker is a COMMIT control batch, which only a transaction
// coordinator may write (WriteTxnMarkers).
func clientMarker(t testing.TB) []byte {
	b, err := record.BuildControlBatch(nil, record.ControlCommit, 0, 7, 0, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProduceAcks produces with each acks setting through kgo and reads
// everything back.
func TestProduceAcks(t *testing.T) {
	c := newTestCluster(t)
	for _, tc := range []struct {
		name string
		acks kgo.Acks
	}{{"none", kgo.NoAck()}, {"leader", kgo.LeaderAck()}, {"all", kgo.AllISRAcks()}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "acks-" + tc.name
			c.createTopic(topic, 2, nil)
			cl := c.client(kgo.RequiredAcks(tc.acks), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
			const n = 500
			for i := 0; i < n; i++ {
				cl.Produce(context.Background(), makeRecord(topic, i), nil)
			}
			if err := cl.Flush(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "every record appended", 5*time.Second, func() bool {
				return c.broker.lookup(tp(topic, 0)).log.HighWatermark()+c.broker.lookup(tp(topic, 1)).log.HighWatermark() == n
			})
		})
	}
}

// TestProduceAcksZeroFailureClosesConnection: Kafka answers a failed acks=0
// produce by closing the connection, since there is no response to carry
// the error.
func TestProduceAcksZeroFailureClosesConnection(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("t", 1, nil)
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(topic string, corr int32) {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, 0, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = buildBatch(t, 1, 1)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		frame := binary.BigEndian.AppendUint16(nil, 0) // key
		frame = binary.BigEndian.AppendUint16(frame, uint16(req.Version))
		frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
		frame = binary.BigEndian.AppendUint16(frame, 1)
		frame = append(frame, 'x', 0) // client id "x", no header tags
		frame = req.AppendTo(frame)
		if _, err := conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame)))); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	send("t", 1) // succeeds: no response, connection stays
	waitFor(t, "acks=0 record appended", 5*time.Second, func() bool { return c.broker.lookup(tp("t", 0)).log.LogEndOffset() == 1 })
	send("unknown-topic", 2)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after failed acks=0 produce: %d bytes, %v; want EOF", n, err)
	}
}

// TestProducePurgatory: with a follower in the ISR, an acks=all produce
// waits for the high watermark; it times out with REQUEST_TIMED_OUT, and a
// waiting one completes as soon as the ISR shrinks to the leader (the high
// watermark then jumps to the log end offset).
func TestProducePurgatory(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1) // a follower that never fetches
	c.createAssigned("replicated", []int32{testNodeID, 2})
	p := c.broker.lookup(tp("replicated", 0))
	if st := p.state.Load(); !st.isLeader || len(st.isr) != 2 {
		t.Fatalf("state %+v", st)
	}

	start := time.Now()
	r := c.produceRaw(t, "replicated", 0, -1, 300*time.Millisecond, buildBatch(t, 2, 10))
	if r.ErrorCode != kerr.RequestTimedOut.Code || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("acks=all with a silent follower: %v after %v", kerr.ErrorForCode(r.ErrorCode), time.Since(start))
	}
	// acks=1 answers at once but the high watermark stays behind.
	if r := c.produceRaw(t, "replicated", 0, 1, time.Second, buildBatch(t, 1, 10)); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("acks=1: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
	if hw := p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d with an ISR follower that fetched nothing", hw)
	}

	done := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() { done <- c.produceRaw(t, "replicated", 0, -1, 10*time.Second, buildBatch(t, 1, 10)) }()
	waitFor(t, "produce parked", 5*time.Second, func() bool { return p.produceWatch.n.Load() == 1 })
	topicID := p.topicID
	shrunk := time.Now()
	c.meta.commit(&metadata.PartitionChangeRecord{TopicID: topicID, PartitionID: 0, ISR: []int32{testNodeID}, Leader: metadata.NoLeaderChange})
	select {
	case r := <-done:
		if r.ErrorCode != 0 || r.BaseOffset != 3 {
			t.Fatalf("after ISR shrink: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
		}
		if d := time.Since(shrunk); d > 2*time.Second {
			t.Fatalf("completed %v after the ISR shrank", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("acks=all produce still waiting after the ISR shrank to the leader")
	}
	if hw := p.log.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4", hw)
	}
}

// TestProduceLargeRequestInParallel sends one produce request large enough
// for its partitions to be appended in parallel (runProduceJobs), mixing
// partitions that succeed with ones that fail each their own way: every
// partition gets its own answer and only the good batches are appended. A
// partition named twice is appended in request order.
func TestProduceLargeRequestInParallel(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("par", 4, nil)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("elsewhere", []int32{2})
	leo := func(p int32) int64 { return c.broker.lookup(tp("par", p)).log.LogEndOffset() }

	const perBatch = 2000
	batch := func() []byte { return buildBatch(t, perBatch, 50) }
	type part struct {
		topic     string
		partition int32
		records   []byte
		want      *kerr.Error
		base      int64
	}
	parts := []part{
		{"par", 0, batch(), nil, 0},
		{"par", 1, batch(), nil, 0},
		{"par", 2, corruptCRC(batch()), kerr.CorruptMessage, 0},
		{"par", 3, batch(), nil, 0},
		{"par", 9, batch(), kerr.UnknownTopicOrPartition, 0},
		{"elsewhere", 0, batch(), kerr.NotLeaderForPartition, 0},
	}
	jobs := make([]produceJob, len(parts))
	for i, p := range parts {
		in := kmsg.NewProduceRequestTopicPartition()
		in.Partition, in.Records = p.partition, p.records
		jobs[i] = produceJob{topic: p.topic, in: &in}
	}
	if !worthParallel(jobs) {
		t.Fatal("the request is not large enough to take the parallel path")
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, -1, 5000
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p.partition, p.records
		req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, rp)
	}
	resp := roundTrip[*kmsg.ProduceResponse](c.dialRaw(t), req)
	i := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			p := parts[i]
			i++
			if rt.Topic != p.topic || rp.Partition != p.partition {
				t.Fatalf("answer %d is %s/%d, want %s/%d", i, rt.Topic, rp.Partition, p.topic, p.partition)
			}
			want := int16(0)
			if p.want != nil {
				want = p.want.Code
			}
			if rp.ErrorCode != want || (want == 0 && rp.BaseOffset != p.base) {
				t.Fatalf("%s/%d: %v at %d, want %v at %d", p.topic, p.partition, kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset, p.want, p.base)
			}
			if p.topic == "elsewhere" && rp.CurrentLeader.LeaderID != 2 {
				t.Fatalf("elsewhere: leader hint %+v", rp.CurrentLeader)
			}
		}
	}
	if i != len(parts) || len(resp.Brokers) != 1 {
		t.Fatalf("%d answers, brokers %+v", i, resp.Brokers)
	}
	for p, want := range []int64{perBatch, perBatch, 0, perBatch} {
		if got := leo(int32(p)); got != want {
			t.Fatalf("par/%d: log end offset %d, want %d", p, got, want)
		}
	}

	// Partition 0 twice, then 1: in order, each batch after the one before.
	req.Topics = req.Topics[:1]
	rt := &req.Topics[0]
	rt.Partitions = rt.Partitions[:0]
	for _, p := range []int32{0, 0, 1} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch()
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp = roundTrip[*kmsg.ProduceResponse](c.dialRaw(t), req)
	for i, want := range []int64{perBatch, 2 * perBatch, perBatch} {
		if rp := resp.Topics[0].Partitions[i]; rp.ErrorCode != 0 || rp.BaseOffset != want {
			t.Fatalf("partition named twice, answer %d: %v at %d, want %d", i, kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset, want)
		}
	}
	if got := leo(0); got != 3*perBatch {
		t.Fatalf("par/0: log end offset %d, want %d", got, 3*perBatch)
	}
}
