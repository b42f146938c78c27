package broker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// The quota of a request is the first entity in Kafka's order that sets the
// key, measured per the components of that entity.
func TestClientQuotaResolution(t *testing.T) {
	name := func(n string) *string { return &n }
	var recs []metadata.Record
	set := func(v float64, parts ...metadata.QuotaEntityPart) {
		recs = append(recs, &metadata.ClientQuotaRecord{Entity: parts, Key: metadata.QuotaProducerByteRate, Value: v})
	}
	user := func(n *string) metadata.QuotaEntityPart {
		return metadata.QuotaEntityPart{EntityType: metadata.QuotaUser, EntityName: n}
	}
	client := func(n *string) metadata.QuotaEntityPart {
		return metadata.QuotaEntityPart{EntityType: metadata.QuotaClientID, EntityName: n}
	}
	set(1, user(name("alice")), client(name("app")))
	set(2, user(name("alice")), client(nil))
	set(3, user(name("alice")))
	set(4, user(nil), client(name("app")))
	set(5, user(nil))
	set(6, client(name("tool")))
	set(7, client(nil))
	img, _, err := metadata.EmptyImage().Apply(1, recs)
	if err != nil {
		t.Fatal(err)
	}
	q := newClientQuotas(metadata.QuotaProducerByteRate, defaultQuotaWindows)
	for _, tc := range []struct {
		user, client string
		bound        float64
		sk           clientQuotaSensorKey
	}{
		{"alice", "app", 1, clientQuotaSensorKey{"alice", "app", 3}},
		{"alice", "other", 2, clientQuotaSensorKey{"alice", "other", 3}},
		{"bob", "app", 4, clientQuotaSensorKey{"bob", "app", 3}},
		{"bob", "tool", 5, clientQuotaSensorKey{user: "bob", set: 1}},
	} {
		bound, sk, ok := q.resolve(img, tc.user, tc.client)
		if !ok || bound != tc.bound || sk != tc.sk {
			t.Errorf("%s/%s: bound %v sensor %+v, want %v %+v", tc.user, tc.client, bound, sk, tc.bound, tc.sk)
		}
	}
	// Without user quotas, the client-id ones apply, per client id.
	img, _, _ = metadata.EmptyImage().Apply(1, recs[5:])
	if bound, sk, _ := q.resolve(img, "bob", "tool"); bound != 6 || sk != (clientQuotaSensorKey{clientID: "tool", set: 2}) {
		t.Errorf("client tool: %v %+v", bound, sk)
	}
	if bound, sk, _ := q.resolve(img, "bob", "x"); bound != 7 || sk != (clientQuotaSensorKey{clientID: "x", set: 2}) {
		t.Errorf("default client: %v %+v", bound, sk)
	}
	if _, _, ok := q.resolve(metadata.EmptyImage(), "bob", "x"); ok {
		t.Error("a quota without any set")
	}
}

// TestClientQuotas: kafka-configs' path (kadm's AlterClientQuotas and
// DescribeClientQuotas through the broker), then enforcement. Over
// producer_byte_rate a produce is appended and answered with the throttle
// time, and the connection reads nothing more until it has passed; over
// consumer_byte_rate a fetch returns no records and the throttle time;
// other client ids are not affected; without the quota nothing is
// throttled.
func TestClientQuotas(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("q", 1, nil)
	adm := c.admin()
	ctx := testCtx(t)
	const bound = 1800                                                           // bytes a second; a 20 KB request is ~1.4 s over
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsgStr("test")}} // the raw client's id
	alter := func(remove bool) {
		t.Helper()
		ops := []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: bound, Remove: remove}, {Key: "consumer_byte_rate", Value: bound, Remove: remove}}
		resp, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
		if err != nil || resp[0].Err != nil {
			t.Fatalf("alter client quotas: %v %+v", err, resp)
		}
	}
	alter(false)
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: kmsgStr("test"), MatchType: kmsg.QuotasMatchTypeExact}})
	if err != nil || len(described) != 1 || len(described[0].Values) != 2 {
		t.Fatalf("describe client quotas: %v %+v", err, described)
	}
	resp, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "write_rate", Value: 50}}}})
	if err != nil || resp[0].Err == nil {
		t.Fatalf("an unknown quota key accepted: %v %+v", err, resp)
	}

	produce := func(rc *rawClient, records int) (*kmsg.ProduceResponse, time.Duration) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 12, 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "q"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = buildBatch(t, records, 1000)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp := roundTrip[*kmsg.ProduceResponse](rc, req)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: error %d", code)
		}
		return resp, time.Since(start)
	}
	rc := c.dialRaw(t)
	first, _ := produce(rc, 20)
	throttle := time.Duration(first.ThrottleMillis) * time.Millisecond
	if throttle < 500*time.Millisecond || throttle > defaultQuotaWindows.maxThrottle() {
		t.Fatalf("throttle %v for a 20 KB produce at %d bytes/s", throttle, bound)
	}
	if _, took := produce(rc, 1); took < throttle*8/10 {
		t.Fatalf("the next request on the throttled connection was answered after %v, within its %v throttle", took, throttle)
	}
	if v, ok := quotaMetric(t, c, "kafka_server_produce_byte_rate", "test"); !ok || v <= 0 {
		t.Errorf("produce byte-rate %v (present %v)", v, ok)
	}
	if v, ok := quotaMetric(t, c, "kafka_server_produce_throttle_time", "test"); !ok || v < float64(throttle.Milliseconds())/2 {
		t.Errorf("produce throttle-time %v (present %v), throttle %v", v, ok, throttle)
	}
	other := c.client(kgo.ClientID("other"))
	q, _ := c.meta.Image().Topic("q")
	if r, err := (&kmsg.ProduceRequest{Acks: 1, TimeoutMillis: 5000, Topics: []kmsg.ProduceRequestTopic{{Topic: "q", TopicID: q.ID,
		Partitions: []kmsg.ProduceRequestTopicPartition{{Records: buildBatch(t, 20, 1000)}}}}}).RequestWith(ctx, other); err != nil || r.ThrottleMillis != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("another client id: %+v, err %v", r, err)
	}

	fetch := func(cl kmsg.Requestor) *kmsg.FetchResponse {
		t.Helper()
		req := c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"q", 0, 0, 1 << 20, -1})
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	fr := roundTrip[*kmsg.FetchResponse](c.dialRaw(t), c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"q", 0, 0, 1 << 20, -1}))
	if n, _ := batchesIn(t, fr.Topics[0].Partitions[0].RecordBatches); n != 0 || fr.ThrottleMillis <= 0 {
		t.Fatalf("throttled fetch: %d batches, throttle %d ms", n, fr.ThrottleMillis)
	}
	if n, _ := batchesIn(t, fetch(other).Topics[0].Partitions[0].RecordBatches); n != 3 {
		t.Fatalf("another client id fetched %d batches (log end %d)", n, c.broker.lookup(tp("q", 0)).log.LogEndOffset())
	}

	alter(true)
	if r, _ := produce(c.dialRaw(t), 20); r.ThrottleMillis != 0 {
		t.Fatalf("throttled %d ms without a quota", r.ThrottleMillis)
	}
	if fr := roundTrip[*kmsg.FetchResponse](c.dialRaw(t), c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"q", 0, 0, 1 << 20, -1})); fr.ThrottleMillis != 0 {
		t.Fatalf("fetch throttled %d ms without a quota", fr.ThrottleMillis)
	}
}

// request_percentage is measured in nanoseconds of handling: 100 ms in the
// first window of 11 is 1 % over the 10 windows a rate divides by at
// least; at a bound of 0.95 % that is (1 - 0.95) / 0.95 of the 10 s span
// over, and a larger excess is bounded by one window.
func TestRequestQuotaThrottleTime(t *testing.T) {
	name := "app"
	img, _, err := metadata.EmptyImage().Apply(1, []metadata.Record{&metadata.ClientQuotaRecord{
		Entity: []metadata.QuotaEntityPart{{EntityType: metadata.QuotaClientID, EntityName: &name}},
		Key:    metadata.QuotaRequestPercentage, Value: 0.95}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	q := newRequestQuotas(defaultQuotaWindows)
	d, _ := q.record(img, network.AnonymousPrincipal, name, (100 * time.Millisecond).Nanoseconds(), clock)
	if want := 10 * time.Second * 5 / 95; d < want-time.Millisecond || d > want+time.Millisecond {
		t.Errorf("throttle %v, want %v", d, want)
	}
	if d, _ := q.record(img, network.AnonymousPrincipal, name, time.Second.Nanoseconds(), clock); d != time.Second {
		t.Errorf("throttle %v far over the bound, want one window (1s)", d)
	}
	if d, _ := q.record(img, network.AnonymousPrincipal, "other", time.Second.Nanoseconds(), clock); d != 0 {
		t.Errorf("a client id without the quota throttled %v", d)
	}
}

// TestRequestQuota: request_percentage=0 for the raw client's id throttles
// each of its requests by the longest request throttle (one window): a
// Metadata request, a CreateTopics answered through the controller, an
// acks=all produce, a fetch (which then returns no records) and a long
// poll; the connection reads nothing more meanwhile; another client id is
// not throttled; without the quota nothing is.
func TestRequestQuota(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("rq", 1, nil)
	adm := c.admin()
	ctx := testCtx(t)
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsgStr("test")}} // the raw client's id
	alter := func(remove bool) {
		t.Helper()
		resp, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
			Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0, Remove: remove}}}})
		if err != nil || resp[0].Err != nil {
			t.Fatalf("alter client quotas: %v %+v", err, resp)
		}
	}
	other := c.client(kgo.ClientID("other"))
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: "rq", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	alter(false)
	window := defaultQuotaWindows.window

	rc := c.dialRaw(t)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	first := roundTrip[*kmsg.MetadataResponse](rc, meta)
	if throttle := time.Duration(first.ThrottleMillis) * time.Millisecond; throttle != window {
		t.Fatalf("metadata throttled %v at request_percentage=0, want one window (%v)", throttle, window)
	}
	start := time.Now()
	roundTrip[*kmsg.MetadataResponse](rc, meta)
	if took := time.Since(start); took < window*8/10 {
		t.Fatalf("the next request on the throttled connection was answered after %v, within its %v throttle", took, window)
	}
	if r, err := meta.RequestWith(ctx, other); err != nil || r.ThrottleMillis != 0 {
		t.Fatalf("another client id: throttled %+v, %v", r, err)
	}

	// A request answered later (through the controller) is throttled
	// when it completes.
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version, create.TimeoutMillis = 7, 5000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "created-throttled", 1, 1
	create.Topics = append(create.Topics, ct)
	if cr := roundTrip[*kmsg.CreateTopicsResponse](c.dialRaw(t), create); cr.Topics[0].ErrorCode != 0 || time.Duration(cr.ThrottleMillis)*time.Millisecond != window {
		t.Fatalf("create topics: error %d, throttle %d ms", cr.Topics[0].ErrorCode, cr.ThrottleMillis)
	}

	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 12, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "rq"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = buildBatch(t, 1, 100)
	rt.Partitions = append(rt.Partitions, rp)
	produce.Topics = append(produce.Topics, rt)
	pr := roundTrip[*kmsg.ProduceResponse](c.dialRaw(t), produce)
	if pr.Topics[0].Partitions[0].ErrorCode != 0 || time.Duration(pr.ThrottleMillis)*time.Millisecond != window {
		t.Fatalf("produce: error %d, throttle %d ms", pr.Topics[0].Partitions[0].ErrorCode, pr.ThrottleMillis)
	}

	fetch := c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"rq", 0, 0, 1 << 20, -1})
	fr := roundTrip[*kmsg.FetchResponse](c.dialRaw(t), fetch)
	if n, _ := batchesIn(t, fr.Topics[0].Partitions[0].RecordBatches); n != 0 || time.Duration(fr.ThrottleMillis)*time.Millisecond != window {
		t.Fatalf("throttled fetch: %d batches, throttle %d ms", n, fr.ThrottleMillis)
	}
	// A long poll is throttled when it completes.
	fetch = c.fetchRequest(12, 200*time.Millisecond, 1<<20, 1<<20, fetchPartitionReq{"rq", 0, 0, 1 << 20, -1})
	if fr := roundTrip[*kmsg.FetchResponse](c.dialRaw(t), fetch); time.Duration(fr.ThrottleMillis)*time.Millisecond != window {
		t.Fatalf("long-poll fetch: throttle %d ms", fr.ThrottleMillis)
	}

	// The sensor's request-time and throttle-time are on /metrics
	// (Kafka's kafka.server:type=Request,user=,client-id=test).
	if v, ok := quotaMetric(t, c, "kafka_server_request_request_time", "test"); !ok || v <= 0 {
		t.Errorf("request-time %v (present %v), want above 0", v, ok)
	}
	if v, ok := quotaMetric(t, c, "kafka_server_request_throttle_time", "test"); !ok || v != float64(window.Milliseconds()) {
		t.Errorf("throttle-time %v (present %v), want %d", v, ok, window.Milliseconds())
	}

	alter(true)
	if r := roundTrip[*kmsg.MetadataResponse](c.dialRaw(t), meta); r.ThrottleMillis != 0 {
		t.Fatalf("metadata throttled %d ms without the quota", r.ThrottleMillis)
	}
	fetch = c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"rq", 0, 0, 1 << 20, -1})
	if fr := roundTrip[*kmsg.FetchResponse](c.dialRaw(t), fetch); fr.ThrottleMillis != 0 {
		t.Fatalf("fetch throttled %d ms without the quota", fr.ThrottleMillis)
	} else if n, _ := batchesIn(t, fr.Topics[0].Partitions[0].RecordBatches); n != 2 {
		t.Fatalf("fetched %d batches without the quota, want 2", n)
	}
}

// A kgo producer under producer_byte_rate, producing as fast as it can for
// 3 s, delivers about the quota's burst (10 windows) plus 3 s of rate, not
// the hundreds of MB it would without it.
func TestClientQuotaBoundsAKgoProducer(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("bounded", 1, nil)
	ctx := testCtx(t)
	const bound = 100_000
	resp, err := c.admin().AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsgStr("bulk")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: bound}},
	}})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter client quotas: %v %+v", err, resp)
	}
	cl := c.client(kgo.ClientID("bulk"), kgo.DefaultProduceTopic("bounded"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 1000)
	deadline := time.Now().Add(3 * time.Second)
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var acked atomic.Int64
	for pctx.Err() == nil {
		cl.Produce(pctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err == nil && time.Now().Before(deadline) {
				acked.Add(int64(len(r.Value)))
			}
		})
	}
	cl.Close() // what is still buffered or throttled fails
	// 10 windows of burst and 3 s at the rate, a request or two over.
	if limit := int64(bound*13 + 2<<20); acked.Load() > limit {
		t.Fatalf("%d bytes acknowledged in 3 s under a %d bytes/s quota (allowed about %d)", acked.Load(), bound, limit)
	}
	t.Logf("%d bytes in 3 s under a %d bytes/s quota", acked.Load(), bound)
}

// BenchmarkClientQuotaRecord is the per-request cost of client quotas:
// without any quota set (the check every produce and fetch pays), and with
// a client-id default quota (resolution through Kafka's eight levels and
// the sensor's record and rate). Compare with BenchmarkSmallProduceRequest,
// the whole handling of a one-record produce.
func BenchmarkClientQuotaRecord(b *testing.B) {
	q := newClientQuotas(metadata.QuotaProducerByteRate, defaultQuotaWindows)
	now := time.Now
	b.Run("no-quotas", func(b *testing.B) {
		img := metadata.EmptyImage()
		for b.Loop() {
			q.record(img, "User:ANONYMOUS", "app", 1000, now)
		}
	})
	b.Run("client-id-default", func(b *testing.B) {
		img, _, err := metadata.EmptyImage().Apply(1, []metadata.Record{&metadata.ClientQuotaRecord{
			Entity: []metadata.QuotaEntityPart{{EntityType: metadata.QuotaClientID}}, Key: metadata.QuotaProducerByteRate, Value: 1 << 40}})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			q.record(img, "User:ANONYMOUS", "app", 1000, now)
		}
	})
}

// A fetch answered from the purgatory (a produce satisfied it) and
// throttled mutes its connection too, although the reader was already
// waiting for the next request: that request waits out the throttle.
func TestClientQuotaMutesAfterAParkedFetch(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("pq", 1, nil)
	ctx := testCtx(t)
	resp, err := c.admin().AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsgStr("test")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1800}},
	}})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter client quotas: %v %+v", err, resp)
	}
	rc := c.dialRaw(t)
	fetch := c.fetchRequest(12, 5*time.Second, 1, 1<<20, fetchPartitionReq{"pq", 0, 0, 1 << 20, -1})
	corr := rc.send(fetch)
	time.Sleep(200 * time.Millisecond) // parked at the log end
	if r := c.produceRaw(t, "pq", 0, 1, time.Second, buildBatch(t, 20, 1000)); r.ErrorCode != 0 {
		t.Fatalf("produce: error %d", r.ErrorCode)
	}
	fr := rc.receive(fetch, corr).(*kmsg.FetchResponse)
	throttle := time.Duration(fr.ThrottleMillis) * time.Millisecond
	if throttle < 500*time.Millisecond {
		t.Fatalf("parked fetch answered with throttle %v", throttle)
	}
	start := time.Now()
	roundTrip[*kmsg.MetadataResponse](rc, kmsg.NewPtrMetadataRequest())
	if took := time.Since(start); took < throttle*8/10 {
		t.Fatalf("the next request was answered after %v, within the %v throttle", took, throttle)
	}
}

// Sensors of client ids that went quiet are dropped as new ones come: a
// broker seeing ever new client ids keeps only the active ones.
func TestClientQuotaSensorsOfGoneClientsAreDropped(t *testing.T) {
	img, _, err := metadata.EmptyImage().Apply(1, []metadata.Record{&metadata.ClientQuotaRecord{
		Entity: []metadata.QuotaEntityPart{{EntityType: metadata.QuotaClientID}}, Key: metadata.QuotaProducerByteRate, Value: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	q := newClientQuotas(metadata.QuotaProducerByteRate, defaultQuotaWindows)
	t0 := time.Now()
	for i := range 3000 {
		q.record(img, "User:ANONYMOUS", fmt.Sprint("gone-", i), 10, func() time.Time { return t0 })
	}
	if n := len(q.sensors); n != 3000 {
		t.Fatalf("%d sensors of active clients, want all 3000 kept", n)
	}
	later := t0.Add(time.Minute)
	for i := range 3000 {
		q.record(img, "User:ANONYMOUS", fmt.Sprint("new-", i), 10, func() time.Time { return later })
	}
	if n := len(q.sensors); n > 3100 {
		t.Fatalf("%d sensors: the quiet clients' were not dropped", n)
	}
	// A dropped client comes back with a fresh measure, as it would have
	// had: nothing in the window.
	if d, _ := q.record(img, "User:ANONYMOUS", "gone-1", 10, func() time.Time { return later }); d != 0 {
		t.Fatalf("a returning client throttled %v", d)
	}
}

// TestIPConnectionCreationRateQuotas: kafka-configs --entity-type ips
// (KIP-612) through AlterClientQuotas. An address's
// connection_creation_rate is enforced by the broker's listener: with a
// quota of 0 its connections are held unanswered and closed, while other
// addresses connect; the default ip entity limits every address without
// a quota of its own; removing the quotas admits the address again. The
// controller refuses what Kafka's refuses: other keys on an ip entity,
// connection_creation_rate on a user, a name that is no address, a value
// that is no whole number of connections.
func TestIPConnectionCreationRateQuotas(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)
	ip := func(name string) kadm.ClientQuotaEntity {
		if name == "" {
			return kadm.ClientQuotaEntity{{Type: "ip"}}
		}
		return kadm.ClientQuotaEntity{{Type: "ip", Name: kmsgStr(name)}}
	}
	alter := func(e kadm.ClientQuotaEntity, key string, value float64, remove bool) error {
		t.Helper()
		resp, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: value, Remove: remove}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp[0].Err
	}
	for _, bad := range []struct {
		e     kadm.ClientQuotaEntity
		key   string
		value float64
	}{
		{ip("127.0.0.5"), "producer_byte_rate", 100},
		{kadm.ClientQuotaEntity{{Type: "user", Name: kmsgStr("alice")}}, "connection_creation_rate", 10},
		{ip("localhost"), "connection_creation_rate", 10},
		{ip("127.0.0.5"), "connection_creation_rate", -1},
		{ip("127.0.0.5"), "connection_creation_rate", 1.5},
		{ip("127.0.0.5"), "connection_creation_rate", 1 << 31},
		{kadm.ClientQuotaEntity{{Type: "ip", Name: kmsgStr("127.0.0.5")}, {Type: "client-id", Name: kmsgStr("x")}}, "connection_creation_rate", 10},
	} {
		if err := alter(bad.e, bad.key, bad.value, false); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("%v %s=%v: %v, want INVALID_REQUEST", bad.e, bad.key, bad.value, err)
		}
	}

	// held reports whether a connection from src is held unanswered and
	// then closed (throttled), rather than served.
	held := func(src string) bool {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		conn, err := d.Dial("tcp", c.addr)
		if err != nil {
			t.Skipf("cannot dial from %s: %v", src, err)
		}
		defer conn.Close()
		(&rawClient{t: t, conn: conn}).send(kmsg.NewPtrMetadataRequest())
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(make([]byte, 4))
		switch {
		case err == nil && n > 0:
			return false
		case time.Since(start) < 300*time.Millisecond:
			t.Fatalf("a connection from %s closed after %v (%v), before any throttle", src, time.Since(start), err)
		}
		return true
	}
	// metadata.IPConnectionCreationRates' canonical form: ::ffff:127.0.0.5
	// is 127.0.0.5.
	if err := alter(ip("::ffff:127.0.0.5"), "connection_creation_rate", 0, false); err != nil {
		t.Fatal(err)
	}
	described, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}})
	if err != nil || len(described) != 1 || *described[0].Entity[0].Name != "127.0.0.5" || described[0].Values[0].Value != 0 {
		t.Fatalf("describe ip quotas: %v %+v", err, described)
	}
	waitFor(t, "127.0.0.5's quota to apply", 10*time.Second, func() bool { return held("127.0.0.5") })
	if held("127.0.0.6") {
		t.Fatal("127.0.0.6, with no quota, was throttled")
	}
	// The default, with the test's own address exempted by an override.
	if err := alter(ip("127.0.0.1"), "connection_creation_rate", 1000, false); err != nil {
		t.Fatal(err)
	}
	if err := alter(ip(""), "connection_creation_rate", 0, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the default ip quota to apply", 10*time.Second, func() bool { return held("127.0.0.6") })
	if _, err := c.admin().ListTopics(ctx); err != nil { // a new client from 127.0.0.1 is still served
		t.Fatal(err)
	}
	for _, name := range []string{"", "127.0.0.5", "127.0.0.1"} {
		if err := alter(ip(name), "connection_creation_rate", 0, true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the quotas' removal to apply", 10*time.Second, func() bool { return !held("127.0.0.5") && !held("127.0.0.6") })
}

// quotaMetric reads a client quota series of the broker's metrics for
// client id (user ""): ok false when absent.
func quotaMetric(t *testing.T, c *testCluster, name, clientID string) (float64, bool) {
	t.Helper()
	for _, m := range scrapeBroker(t, c)[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["client_id"] == clientID && labels["user"] == "" {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// scrapeBroker is the broker's /metrics text, parsed with Prometheus's
// parser.
func scrapeBroker(t *testing.T, c *testCluster) map[string]*dto.MetricFamily {
	t.Helper()
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	c.broker.writeMetrics(&promWriter{w: bw})
	bw.Flush()
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	return families
}

// controller_mutation_rate is a token bucket of rate × 11 windows: a new
// client may create 11 partitions at rate 1 at once; strictly, a topic is
// refused only once the bucket is below zero, and the throttle is the time
// the bucket needs to come back to zero; permissively, every topic goes
// and only the throttle is reported. Partitions the controller refused
// are given back.
func TestMutationQuotaBucket(t *testing.T) {
	name := "app"
	img, _, err := metadata.EmptyImage().Apply(1, []metadata.Record{&metadata.ClientQuotaRecord{
		Entity: []metadata.QuotaEntityPart{{EntityType: metadata.QuotaClientID, EntityName: &name}},
		Key:    metadata.QuotaControllerMutationRate, Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	req := &network.Request{Header: network.RequestHeader{ClientID: name}, Conn: &network.ConnInfo{Principal: network.AnonymousPrincipal}}
	now := time.Unix(1000, 0)
	mq := newMutationQuotas(defaultQuotaWindows)
	strict := mq.quotaFor(img, req, true)
	if !strict.take(10, now) || !strict.take(5, now) || strict.throttle != 0 {
		t.Fatalf("10 then 5 partitions from a full bucket of 11: throttle %v", strict.throttle)
	}
	if strict.take(1, now) || strict.throttle != 4*time.Second {
		t.Fatalf("a topic with the bucket at -4: taken, or throttle %v (want 4s)", strict.throttle)
	}
	later := mq.quotaFor(img, req, true)
	if !later.take(1, now.Add(4*time.Second)) {
		t.Fatal("refused once the bucket had refilled to 0")
	}
	later.refund(1)
	permissive := mq.quotaFor(img, req, false)
	if !permissive.take(3, now.Add(4*time.Second)) || permissive.throttle != 3*time.Second {
		t.Fatalf("permissive: throttle %v, want 3s", permissive.throttle)
	}
	other := *req
	other.Header.ClientID = "other"
	if q := mq.quotaFor(img, &other, true); q != nil {
		t.Fatalf("a quota for a client id without one: %+v", q)
	}
}

// TestControllerMutationQuota: kafka-configs' controller_mutation_rate
// through the broker. CreateTopics v7 (strict): topics go while the
// bucket is not below zero, the next is THROTTLING_QUOTA_EXCEEDED with
// the throttle time; v4 (permissive) creates and reports the throttle;
// CreatePartitions and DeleteTopics count the partitions they add and
// remove; another client id is not limited.
func TestControllerMutationQuota(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsgStr("test")}} // the raw client's id
	if resp, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}}}}); err != nil || resp[0].Err != nil {
		t.Fatalf("alter client quotas: %v %+v", err, resp)
	}
	create := func(version int16, topics map[string]int32) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = version, 10000
		for _, name := range slices.Sorted(maps.Keys(topics)) {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, topics[name], 1
			req.Topics = append(req.Topics, rt)
		}
		return roundTrip[*kmsg.CreateTopicsResponse](c.dialRaw(t), req)
	}
	codes := func(r *kmsg.CreateTopicsResponse) map[string]int16 {
		out := map[string]int16{}
		for _, t := range r.Topics {
			out[t.Topic] = t.ErrorCode
		}
		return out
	}
	// a1 (6) and a2 (6) take the bucket of 11 to -1; a3 is refused.
	r := create(7, map[string]int32{"a1": 6, "a2": 6, "a3": 1})
	got := codes(r)
	if got["a1"] != 0 || got["a2"] != 0 || got["a3"] != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis < 500 || r.ThrottleMillis > 1000 {
		t.Fatalf("strict create: %v, throttle %d ms (want a3 throttled, about 1 s)", got, r.ThrottleMillis)
	}
	// Permissive (v4): created, with the throttle.
	if r := create(4, map[string]int32{"b1": 2}); codes(r)["b1"] != 0 || r.ThrottleMillis <= 0 {
		t.Fatalf("permissive create: %v, throttle %d ms", codes(r), r.ThrottleMillis)
	}
	// Another client id is not limited.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "other-client", 20, 1
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, c.client(kgo.ClientID("other"))); err != nil || resp.Topics[0].ErrorCode != 0 || resp.ThrottleMillis != 0 {
		t.Fatalf("another client id: %+v %v", resp, err)
	}
	// The bucket is deep below zero now: CreatePartitions and DeleteTopics
	// (strict versions) are refused, and answer the throttle.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.TimeoutMillis = 3, 10000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "a1", 8
	cp.Topics = append(cp.Topics, cpt)
	if r := roundTrip[*kmsg.CreatePartitionsResponse](c.dialRaw(t), cp); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis <= 0 {
		t.Fatalf("create partitions: %+v", r)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TimeoutMillis = 6, 10000
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsgStr("a2")
	dt.Topics = append(dt.Topics, dtt)
	if r := roundTrip[*kmsg.DeleteTopicsResponse](c.dialRaw(t), dt); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis <= 0 {
		t.Fatalf("delete topics: %+v", r)
	}
	// mutation-rate and throttle-time are on /metrics: 6+6+2 partitions
	// over at least 10 windows of a second.
	if v, ok := quotaMetric(t, c, "kafka_server_controllermutation_mutation_rate", "test"); !ok || v <= 0 || v > 1.5 {
		t.Errorf("mutation-rate %v (present %v), want at most 14 partitions over 10 windows, 1.4 a second", v, ok)
	}
	if v, ok := quotaMetric(t, c, "kafka_server_controllermutation_throttle_time", "test"); !ok || v <= 0 {
		t.Errorf("throttle-time %v (present %v)", v, ok)
	}
	// Without the quota, they go through.
	if resp, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Remove: true}}}}); err != nil || resp[0].Err != nil {
		t.Fatalf("remove the quota: %v %+v", err, resp)
	}
	if r := roundTrip[*kmsg.DeleteTopicsResponse](c.dialRaw(t), dt); r.Topics[0].ErrorCode != 0 || r.ThrottleMillis != 0 {
		t.Fatalf("delete topics without the quota: %+v", r)
	}
}
