// Package clienttest is the SDK's test suite, written once and run against
// any Kafka-compatible cluster: franz-go's kfake in client's own tests and a
// real Keel cluster in integration/sdk_test.go. Each test takes the
// bootstrap addresses of a running cluster.
//
// It is a test helper: only _test.go files import it.
package clienttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/network/record"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Target is the cluster under test.
type Target struct {
	Bootstrap []string
	// HasQuorum: the cluster answers DescribeQuorum (Keel does, kfake
	// does not).
	HasQuorum bool
	// ValidatesConfigValues: the cluster rejects malformed topic config
	// values with INVALID_CONFIG, as Kafka does (kfake accepts them).
	ValidatesConfigValues bool
	// FencedV2CommitIsInvalidTxnState: under transaction version 2 the
	// cluster answers a fenced producer's EndTxn(commit), one epoch
	// behind, as a retry of the abort that fenced it (INVALID_TXN_STATE,
	// fatal too) rather than PRODUCER_FENCED: kfake does, where Kafka and
	// Keel abort a fenced transaction two epochs ahead.
	FencedV2CommitIsInvalidTxnState bool
}

// Run runs the whole suite as subtests.
func Run(t *testing.T, tgt Target) {
	t.Run("ProduceRoundTripEveryCodec", func(t *testing.T) { ProduceRoundTripEveryCodec(t, tgt) })
	t.Run("KeyPartitionMatchesMurmur2", func(t *testing.T) { KeyPartitionMatchesMurmur2(t, tgt) })
	t.Run("IdempotentRetryWritesNoDuplicates", func(t *testing.T) { IdempotentRetryWritesNoDuplicates(t, tgt) })
	t.Run("IdempotentPipelineSurvivesLostResponses", func(t *testing.T) { IdempotentPipelineSurvivesLostResponses(t, tgt) })
	t.Run("IdempotentRetryOfAnAppendedBatchIsADuplicate", func(t *testing.T) { IdempotentRetryOfAnAppendedBatchIsADuplicate(t, tgt) })
	t.Run("AcksLevels", func(t *testing.T) { AcksLevels(t, tgt) })
	t.Run("FullBufferFailsAfterMaxBlock", func(t *testing.T) { FullBufferFailsAfterMaxBlock(t, tgt) })
	t.Run("AdminOperations", func(t *testing.T) { AdminOperations(t, tgt) })
	t.Run("KafkaErrorCodes", func(t *testing.T) { KafkaErrorCodes(t, tgt) })
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// NewAdmin returns an Admin on tgt that the test closes.
func NewAdmin(t testing.TB, tgt Target, opts ...client.Opt) *client.Admin {
	t.Helper()
	a, err := client.NewAdmin(ctxFor(t), append([]client.Opt{client.SeedBrokers(tgt.Bootstrap...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// CreateTopic creates topic with partitions (RF 1) and waits until every
// partition has a leader.
func CreateTopic(t testing.TB, a *client.Admin, topic string, partitions int32) {
	t.Helper()
	ctx := ctxFor(t)
	if err := a.CreateTopic(ctx, topic, partitions, 1, nil); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for {
		ts, err := a.DescribeTopics(ctx, topic)
		if err == nil && ts[0].Err == nil && len(ts[0].Partitions) == int(partitions) {
			ready := true
			for _, p := range ts[0].Partitions {
				ready = ready && p.Leader >= 0
			}
			if ready {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s never got leaders: %v", topic, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NewProducer returns a Producer on tgt that the test closes.
func NewProducer(t testing.TB, tgt Target, opts ...client.Opt) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(ctxFor(t), append([]client.Opt{client.SeedBrokers(tgt.Bootstrap...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// ConsumeWithKgo reads n records of topic from the start with franz-go's
// kgo, a third-party client, and returns them by partition in offset order.
func ConsumeWithKgo(t testing.TB, tgt Target, topic string, n int) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.Bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32][]*kgo.Record{}
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo consumed %d of %d records of %s", got, n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("kgo fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
	return out
}

// FetchPartition reads a partition from offset 0 to its high watermark with
// raw Fetch requests through the SDK's Client and decodes the batches with
// network/record: the SDK's own read path, independent of kgo.
func FetchPartition(t testing.TB, cl *client.Client, topic string, partition int32) []record.Record {
	t.Helper()
	ctx := ctxFor(t)
	var out []record.Record
	offset := int64(0)
	for attempt := 0; ; attempt++ {
		leader, err := cl.PartitionLeader(ctx, topic, partition)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 100, 1, 64<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 32<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.BrokerRequest(ctx, leader, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := client.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if err := client.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("fetch %s-%d at %d: %v", topic, partition, offset, err)
		}
		batches := record.NewBatches(p.RecordBatches)
		for {
			b, h, ok := batches.Next()
			if !ok {
				break
			}
			if h.IsControl() {
				offset = h.NextOffset()
				continue
			}
			recs := record.RecordsBytes(b)
			if h.Compression() != record.CompressionNone {
				if recs, err = record.Decompress(h.Compression(), nil, recs, 64<<20); err != nil {
					t.Fatalf("decompress %s batch: %v", h.Compression(), err)
				}
			}
			it := record.NewRecordIterator(h, recs)
			var r record.Record
			for it.Next(&r) {
				if r.Offset >= offset {
					c := r
					c.Key, c.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
					c.Headers = append([]record.RecordHeader(nil), r.Headers...)
					out = append(out, c)
				}
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			offset = h.NextOffset()
		}
		if err := batches.Err(); err != nil {
			t.Fatal(err)
		}
		if offset >= p.HighWatermark {
			return out
		}
		if attempt > 1000 {
			t.Fatalf("fetch %s-%d stuck at %d below HW %d", topic, partition, offset, p.HighWatermark)
		}
	}
}

var codecs = []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd}

// ProduceRoundTripEveryCodec produces keyed, keyless and header-carrying
// records under each codec and reads them back with kgo and with the SDK's
// own fetch path: same partitions, offsets, keys, values and headers.
func ProduceRoundTripEveryCodec(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			topic := "codec-" + codec.String() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			CreateTopic(t, a, topic, 3)
			p := NewProducer(t, tgt, client.ProducerCompression(codec), client.Linger(5*time.Millisecond))
			const n = 600
			want := make([]*client.Record, n)
			var wg sync.WaitGroup
			wg.Add(n)
			ctx := ctxFor(t)
			for i := range want {
				r := &client.Record{Topic: topic, Value: bytes.Repeat([]byte(fmt.Sprintf("value-%d;", i)), 1+i%7)}
				if i%3 != 0 {
					r.Key = []byte(fmt.Sprintf("key-%d", i%50))
				}
				if i%5 == 0 {
					r.Headers = []client.Header{{Key: "h", Value: []byte(strconv.Itoa(i))}, {Key: "null"}}
				}
				want[i] = r
				p.Produce(ctx, r, func(r *client.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
					wg.Done()
				})
			}
			wg.Wait()
			byPos := map[[2]int64]*client.Record{}
			for _, r := range want {
				byPos[[2]int64{int64(r.Partition), r.Offset}] = r
			}
			if len(byPos) != n {
				t.Fatalf("%d distinct (partition, offset) pairs for %d records", len(byPos), n)
			}
			got := ConsumeWithKgo(t, tgt, topic, n)
			for part, rs := range got {
				for _, r := range rs {
					w := byPos[[2]int64{int64(part), r.Offset}]
					if w == nil || !bytes.Equal(w.Key, r.Key) || !bytes.Equal(w.Value, r.Value) || len(w.Headers) != len(r.Headers) {
						t.Fatalf("kgo read %s-%d@%d = %q/%q, produced %+v", topic, part, r.Offset, r.Key, r.Value, w)
					}
					if w.Key == nil && r.Key != nil {
						t.Fatalf("null key came back as %q", r.Key)
					}
					for i, h := range w.Headers {
						if r.Headers[i].Key != h.Key || !bytes.Equal(r.Headers[i].Value, h.Value) {
							t.Fatalf("header %d: %+v vs %+v", i, r.Headers[i], h)
						}
					}
				}
			}
			own := 0
			for part := int32(0); part < 3; part++ {
				for _, r := range FetchPartition(t, p.Client(), topic, part) {
					w := byPos[[2]int64{int64(part), r.Offset}]
					if w == nil || !bytes.Equal(w.Value, r.Value) || !bytes.Equal(w.Key, r.Key) {
						t.Fatalf("own read %s-%d@%d = %q, produced %+v", topic, part, r.Offset, r.Value, w)
					}
					if r.Timestamp != w.Timestamp.UnixMilli() {
						t.Fatalf("timestamp %d, produced %d", r.Timestamp, w.Timestamp.UnixMilli())
					}
					own++
				}
			}
			if own != n {
				t.Fatalf("own reads found %d of %d records", own, n)
			}
		})
	}
}

// KeyPartitionMatchesMurmur2 checks that keyed records land on
// toPositive(murmur2(key)) % partitions for the hashes Kafka's own
// UtilsTest.testMurmur2 pins, as the broker and kgo report them.
func KeyPartitionMatchesMurmur2(t *testing.T, tgt Target) {
	vectors := []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	const partitions = 7
	a := NewAdmin(t, tgt)
	topic := "murmur-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	CreateTopic(t, a, topic, partitions)
	p := NewProducer(t, tgt)
	var recs []*client.Record
	for _, v := range vectors {
		recs = append(recs, client.KeyStringRecord(topic, v.key, v.key))
	}
	res := p.ProduceSync(ctxFor(t), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	wantPart := map[string]int32{}
	for i, v := range vectors {
		want := (v.hash & 0x7fffffff) % partitions
		wantPart[v.key] = want
		if got := res[i].Record.Partition; got != want {
			t.Errorf("key %q: produced to partition %d, Kafka's murmur2 says %d", v.key, got, want)
		}
	}
	for part, rs := range ConsumeWithKgo(t, tgt, topic, len(vectors)) {
		for _, r := range rs {
			if wantPart[string(r.Key)] != part {
				t.Errorf("key %q stored in partition %d, want %d", r.Key, part, wantPart[string(r.Key)])
			}
		}
	}
}

// IdempotentRetryWritesNoDuplicates loses Produce responses after the
// broker appended the batch; the idempotent producer retries the same
// sequence numbers and every record is stored once, in order.
func IdempotentRetryWritesNoDuplicates(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	topic := "idem-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	CreateTopic(t, a, topic, 1)
	fd := &FaultDialer{}
	defer fd.Close()
	p := NewProducer(t, tgt, client.Dialer(fd.Dial), client.Linger(time.Millisecond), client.BatchSize(512),
		client.RetryBackoff(10*time.Millisecond, 50*time.Millisecond))
	ctx := ctxFor(t)
	const rounds, per = 6, 50
	for round := 0; round < rounds; round++ {
		if round%2 == 1 {
			fd.DropNextProduceResponse()
		}
		var recs []*client.Record
		for i := 0; i < per; i++ {
			recs = append(recs, client.StringRecord(topic, strconv.Itoa(round*per+i)))
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if fd.Dropped() < rounds/2 {
		t.Fatalf("only %d responses were dropped", fd.Dropped())
	}
	got := ConsumeWithKgo(t, tgt, topic, rounds*per)[0]
	if len(got) != rounds*per {
		t.Fatalf("%d records stored for %d produced", len(got), rounds*per)
	}
	for i, r := range got {
		if string(r.Value) != strconv.Itoa(i) {
			t.Fatalf("offset %d holds %q: duplicate or reordered", i, r.Value)
		}
	}
	// The SDK's own read agrees, and nothing follows the last record.
	if own := FetchPartition(t, p.Client(), topic, 0); len(own) != rounds*per {
		t.Fatalf("own read: %d records", len(own))
	}
}

// IdempotentPipelineSurvivesLostResponses keeps five Produce requests in
// flight on one connection and loses the connection (after the broker has
// appended some of them) several times: the producer resends every
// unanswered batch with its original sequence numbers, the broker
// acknowledges the duplicates without appending them, and the log holds
// every record once, in order.
func IdempotentPipelineSurvivesLostResponses(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	topic := "idem-pipe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	CreateTopic(t, a, topic, 1)
	fd := &FaultDialer{}
	const n = 3000
	p := producePipelined(t, tgt, fd, topic, n, func(i int) {
		if i%700 == 350 {
			fd.DropNextProduceResponse()
		}
	})
	if fd.Dropped() == 0 {
		t.Fatal("no response was dropped")
	}
	got := ConsumeWithKgo(t, tgt, topic, n)[0]
	for i, r := range got {
		if string(r.Value) != strconv.Itoa(i) {
			t.Fatalf("offset %d holds %q: duplicate or reordered", i, r.Value)
		}
	}
	if own := FetchPartition(t, p.Client(), topic, 0); len(own) != n {
		t.Fatalf("own read: %d records, %d produced (dropped %d responses)", len(own), n, fd.Dropped())
	}
}

// IdempotentRetryOfAnAppendedBatchIsADuplicate has the broker append the
// producer's first batch but answer REQUEST_TIMED_OUT, twice (as an
// acks=all produce can), while the producer keeps five requests in flight.
// The batch's third try must still be found a duplicate: the broker
// remembers a producer's last five batches only, so nothing new may be
// sent behind a retry, or the batches appended meanwhile push it out of
// that memory, the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER, and a
// producer that then bumps its epoch writes the batch twice.
func IdempotentRetryOfAnAppendedBatchIsADuplicate(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	topic := "idem-retry-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	CreateTopic(t, a, topic, 1)
	var firstTries atomic.Int32
	fd := &FaultDialer{FailProduce: func(req *kmsg.ProduceRequest) int16 {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == topic && len(rp.Records) >= record.HeaderSize &&
					binary.BigEndian.Uint32(rp.Records[53:]) == 0 && firstTries.Add(1) <= 2 {
					return 7 // REQUEST_TIMED_OUT, after the append
				}
			}
		}
		return 0
	}}
	const n = 2000
	p := producePipelined(t, tgt, fd, topic, n, nil)
	if fd.Failed() != 2 {
		t.Fatalf("%d responses failed, want 2", fd.Failed())
	}
	if got := FetchPartition(t, p.Client(), topic, 0); len(got) != n {
		t.Fatalf("%d records stored for %d produced", len(got), n)
	}
}

// producePipelined produces n records ("0", "1", ...) to topic's only
// partition through fd, with five small batches in flight, calling before
// (when set) ahead of each record. It waits for every record and checks
// that each was acknowledged, at its own offset. fd is closed after the
// producer.
func producePipelined(t *testing.T, tgt Target, fd *FaultDialer, topic string, n int, before func(i int)) *client.Producer {
	t.Helper()
	t.Cleanup(fd.Close) // after the producer's close (cleanups run last first)
	p := NewProducer(t, tgt, client.Dialer(fd.Dial), client.Linger(0), client.BatchSize(300), client.MaxInFlight(5),
		client.RetryBackoff(5*time.Millisecond, 50*time.Millisecond))
	ctx := ctxFor(t)
	recs := make([]*client.Record, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range recs {
		if before != nil {
			before(i)
		}
		recs[i] = client.StringRecord(topic, strconv.Itoa(i))
		p.Produce(ctx, recs[i], func(r *client.Record, err error) {
			if err != nil {
				t.Errorf("record %s: %v", r.Value, err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, r.Offset)
		}
	}
	return p
}

// AcksLevels produces with acks=0, 1 and all: every record is stored, and
// only acks=0 leaves offsets unknown.
func AcksLevels(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	for _, acks := range []client.Acks{client.AcksNone, client.AcksLeader, client.AcksAll} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) {
			topic := fmt.Sprintf("acks%d-%s", acks+1, strconv.FormatInt(time.Now().UnixNano(), 36))
			CreateTopic(t, a, topic, 2)
			p := NewProducer(t, tgt, client.RequiredAcks(acks))
			var recs []*client.Record
			for i := 0; i < 100; i++ {
				recs = append(recs, client.KeyStringRecord(topic, strconv.Itoa(i), "v"))
			}
			res := p.ProduceSync(ctxFor(t), recs...)
			if err := res.FirstErr(); err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if (acks == client.AcksNone) != (r.Record.Offset < 0) {
					t.Fatalf("acks=%d: offset %d", acks, r.Record.Offset)
				}
			}
			total := 0
			for _, rs := range ConsumeWithKgo(t, tgt, topic, len(recs)) {
				total += len(rs)
			}
			if total != len(recs) {
				t.Fatalf("%d records stored", total)
			}
		})
	}
}

// FullBufferFailsAfterMaxBlock fills buffer.memory with records that linger
// and checks the next Produce fails with ErrMaxBlock after max.block.ms,
// while a Flush still delivers what was buffered.
func FullBufferFailsAfterMaxBlock(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	topic := "maxblock-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	CreateTopic(t, a, topic, 1)
	p := NewProducer(t, tgt, client.BufferMemory(4096), client.MaxBlock(200*time.Millisecond),
		client.Linger(time.Hour), client.BatchSize(1<<20))
	ctx := ctxFor(t)
	value := make([]byte, 100)
	accepted := 0
	var errBlock error
	start := time.Now()
	for i := 0; i < 100 && errBlock == nil; i++ {
		done := make(chan error, 1)
		p.Produce(ctx, &client.Record{Topic: topic, Value: value}, func(_ *client.Record, err error) {
			if err != nil {
				done <- err
			}
		})
		select {
		case errBlock = <-done:
		default:
			accepted++
		}
	}
	if !errors.Is(errBlock, client.ErrMaxBlock) {
		t.Fatalf("after %d records: %v, want ErrMaxBlock", accepted, errBlock)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("failed after %v, before max.block.ms", el)
	}
	if accepted == 0 || accepted*121 > 4096 {
		t.Fatalf("%d records fit in 4096 bytes of buffer", accepted)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ConsumeWithKgo(t, tgt, topic, accepted)[0]; len(got) != accepted {
		t.Fatalf("%d of %d buffered records delivered", len(got), accepted)
	}
}

// AdminOperations exercises topics, configs, offsets, groups and the
// cluster description.
func AdminOperations(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	ctx := ctxFor(t)
	topic := "admin-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	CreateTopic(t, a, topic, 2)

	if rs, err := a.CreateTopics(ctx, client.NewTopic{Topic: topic, Partitions: 2, ReplicationFactor: 1}); err != nil || !errors.Is(rs[0].Err, client.ErrTopicAlreadyExists) {
		t.Fatalf("create again: %v %+v", err, rs)
	}
	names, err := a.ListTopics(ctx, false)
	if err != nil || sort.SearchStrings(names, topic) == len(names) || names[sort.SearchStrings(names, topic)] != topic {
		t.Fatalf("list topics %v: %v", names, err)
	}

	// Add partitions.
	if rs, err := a.CreatePartitions(ctx, 4, topic); err != nil || rs[0].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, rs)
	}
	waitPartitions(t, a, topic, 4)

	// Configs: set, read back, delete.
	if err := a.IncrementalAlterConfigs(ctx, client.TopicConfig, topic,
		client.AlterConfig{Op: client.SetConfig, Name: "retention.ms", Value: strPtr("3600000")}); err != nil {
		t.Fatal(err)
	}
	if v := topicConfig(t, a, topic, "retention.ms"); v != "3600000" {
		t.Fatalf("retention.ms = %q after set", v)
	}
	if err := a.IncrementalAlterConfigs(ctx, client.TopicConfig, topic,
		client.AlterConfig{Op: client.DeleteConfig, Name: "retention.ms"}); err != nil {
		t.Fatal(err)
	}
	if v := topicConfig(t, a, topic, "retention.ms"); v == "3600000" {
		t.Fatalf("retention.ms still %q after delete", v)
	}

	// Offsets: produce, list, delete records.
	p := NewProducer(t, tgt, client.WithPartitioner(client.ManualPartitioner()))
	var recs []*client.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &client.Record{Topic: topic, Partition: 0, Value: []byte{byte(i)}})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp0 := client.TopicPartition{Topic: topic, Partition: 0}
	ends, err := a.ListOffsets(ctx, client.LatestOffset, topic)
	if err != nil || ends[tp0].Offset != 10 || len(ends) != 4 {
		t.Fatalf("end offsets %+v: %v", ends, err)
	}
	dr, err := a.DeleteRecords(ctx, map[client.TopicPartition]int64{tp0: 4})
	if err != nil || dr[tp0].Err != nil || dr[tp0].LowWatermark != 4 {
		t.Fatalf("delete records %+v: %v", dr, err)
	}
	starts, err := a.ListOffsets(ctx, client.EarliestOffset, topic)
	if err != nil || starts[tp0].Offset != 4 {
		t.Fatalf("start offsets %+v: %v", starts, err)
	}

	// Groups: commit an offset outside any generation (Kafka's
	// Admin.alterConsumerGroupOffsets), then describe, lag, delete.
	group := "g-" + topic
	alt, err := a.AlterGroupOffsets(ctx, group, map[client.TopicPartition]int64{tp0: 7})
	if err != nil || len(alt) != 1 || alt[tp0] != nil {
		t.Fatalf("alter group offsets %+v: %v", alt, err)
	}
	groups, err := a.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups {
		found = found || g.Group == group
	}
	if !found {
		t.Fatalf("group %s not in %+v", group, groups)
	}
	descs, err := a.DescribeGroups(ctx, group)
	if err != nil || descs[0].Err != nil || len(descs[0].Members) != 0 {
		t.Fatalf("describe group %+v: %v", descs, err)
	}
	offs, err := a.FetchOffsets(ctx, group)
	if err != nil || offs[tp0].Offset != 7 {
		t.Fatalf("committed %+v: %v", offs, err)
	}
	lag, err := a.GroupLag(ctx, group)
	if err != nil || len(lag) != 1 || lag[0].CurrentOffset != 7 || lag[0].LogEndOffset != 10 || lag[0].Lag != 3 {
		t.Fatalf("lag %+v: %v", lag, err)
	}
	// Delete the committed offset (the group has no members, so no
	// subscription protects it), then the group.
	dels, err := a.DeleteOffsets(ctx, group, tp0)
	if err != nil || len(dels) != 1 || dels[tp0] != nil {
		t.Fatalf("delete offsets %+v: %v", dels, err)
	}
	offs, err = a.FetchOffsets(ctx, group)
	if c, ok := offs[tp0]; err != nil || ok && c.Offset >= 0 {
		t.Fatalf("committed after deleting: %+v: %v", offs, err)
	}
	del, err := a.DeleteGroups(ctx, group)
	if err != nil || del[group] != nil {
		t.Fatalf("delete group %+v: %v", del, err)
	}

	// Cluster.
	cd, err := a.DescribeCluster(ctx)
	if err != nil || len(cd.Brokers) == 0 || cd.ClusterID == "" {
		t.Fatalf("describe cluster %+v: %v", cd, err)
	}
	if tgt.HasQuorum {
		q, err := a.DescribeQuorum(ctx)
		if err != nil || q.LeaderID < 0 || q.HighWatermark <= 0 || len(q.Voters) == 0 {
			t.Fatalf("describe quorum %+v: %v", q, err)
		}
	}

	// Delete the topic.
	if rs, err := a.DeleteTopics(ctx, topic); err != nil || rs[0].Err != nil {
		t.Fatalf("delete topic: %v %+v", err, rs)
	}
	ts, err := a.DescribeTopics(ctx, topic)
	if err != nil || !errors.Is(ts[0].Err, client.ErrUnknownTopicOrPartition) {
		t.Fatalf("deleted topic described as %+v: %v", ts[0], err)
	}
}

func strPtr(s string) *string { return &s }

func waitPartitions(t *testing.T, a *client.Admin, topic string, n int) {
	t.Helper()
	ctx := ctxFor(t)
	for {
		ts, err := a.DescribeTopics(ctx, topic)
		if err == nil && len(ts[0].Partitions) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never had %d partitions", topic, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicConfig(t *testing.T, a *client.Admin, topic, name string) string {
	t.Helper()
	rcs, err := a.DescribeConfigs(ctxFor(t), client.TopicConfig, topic)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe configs %+v: %v", rcs, err)
	}
	for _, c := range rcs[0].Configs {
		if c.Name == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// KafkaErrorCodes checks that requests Kafka refuses are refused with
// Kafka's codes, surfaced as typed *client.Error values.
func KafkaErrorCodes(t *testing.T, tgt Target) {
	a := NewAdmin(t, tgt)
	ctx := ctxFor(t)
	topic := "errors-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	CreateTopic(t, a, topic, 2)
	code := func(err error) int16 {
		var ke *client.Error
		if errors.As(err, &ke) {
			return ke.Code
		}
		return 0
	}
	check := func(what string, err error, want int16) {
		t.Helper()
		if got := code(err); got != want {
			t.Errorf("%s: got %v (code %d), want code %d", what, err, got, want)
		}
	}

	rs, err := a.CreatePartitions(ctx, 1, topic)
	if err != nil {
		t.Fatal(err)
	}
	check("shrink partitions", rs[0].Err, 37) // INVALID_PARTITIONS

	rs, err = a.DeleteTopics(ctx, topic+"-missing")
	if err != nil {
		t.Fatal(err)
	}
	check("delete a missing topic", rs[0].Err, 3) // UNKNOWN_TOPIC_OR_PARTITION

	if tgt.ValidatesConfigValues {
		rs, err = a.CreateTopics(ctx, client.NewTopic{Topic: topic + "-bad", Partitions: 1, ReplicationFactor: 1,
			Configs: map[string]string{"retention.ms": "not-a-number"}})
		if err != nil {
			t.Fatal(err)
		}
		check("create with a bad config value", rs[0].Err, 40) // INVALID_CONFIG
	}

	rcs, err := a.DescribeConfigs(ctx, client.TopicConfig, topic+"-missing")
	if err != nil {
		t.Fatal(err)
	}
	check("describe configs of a missing topic", rcs[0].Err, 3)

	// max.message.bytes is enforced on produce: MESSAGE_TOO_LARGE.
	if err := a.IncrementalAlterConfigs(ctx, client.TopicConfig, topic,
		client.AlterConfig{Op: client.SetConfig, Name: "max.message.bytes", Value: strPtr("1000")}); err != nil {
		t.Fatal(err)
	}
	p := NewProducer(t, tgt, client.WithPartitioner(client.ManualPartitioner()))
	for attempt := 0; ; attempt++ { // the config reaches the partition leader asynchronously
		err = p.ProduceSync(ctx, &client.Record{Topic: topic, Partition: 1, Value: make([]byte, 5000)}).FirstErr()
		if code(err) == 10 || attempt == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	check("produce above max.message.bytes", err, 10) // MESSAGE_TOO_LARGE
	// The producer recovers (epoch bump) and later records go through.
	if err := p.ProduceSync(ctx, &client.Record{Topic: topic, Partition: 1, Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatalf("small record after a rejected one: %v", err)
	}

	tp1 := client.TopicPartition{Topic: topic, Partition: 1}
	dr, err := a.DeleteRecords(ctx, map[client.TopicPartition]int64{tp1: 1000})
	if err != nil {
		t.Fatal(err)
	}
	check("delete records past the high watermark", dr[tp1].Err, 1) // OFFSET_OUT_OF_RANGE
}
