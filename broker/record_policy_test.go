package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// policyBatch builds one batch of records with the given timestamps and
// keys (nil = null key), compressed with c.
func policyBatch(t testing.TB, c record.Compression, ts []int64, keys [][]byte) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	bb := record.NewBatchBuilder(opts)
	for i := range ts {
		bb.Append(ts[i], keys[i], []byte("v"), nil)
	}
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProduceTimestampBounds(t *testing.T) {
	c := newTestCluster(t)
	hour := int64(time.Hour / time.Millisecond)
	c.createTopic("bounded", 1, map[string]*string{
		"message.timestamp.before.max.ms": kmsg.StringPtr("3600000"),
		"message.timestamp.after.max.ms":  kmsg.StringPtr("3600000"),
	})
	c.createTopic("stamped", 1, map[string]*string{
		"message.timestamp.type":          kmsg.StringPtr("LogAppendTime"),
		"message.timestamp.before.max.ms": kmsg.StringPtr("0"),
	})
	now := time.Now().UnixMilli()
	k := []byte("k")
	for _, codec := range []record.Compression{record.CompressionNone, record.CompressionZstd} {
		// Records 1 (too old) and 3 (too far ahead) are named; nothing is appended.
		bad := policyBatch(t, codec, []int64{now, now - 2*hour, now + hour/2, now + 2*hour}, [][]byte{k, k, k, k})
		r := c.produceRaw(t, "bounded", 0, 1, time.Second, bad)
		if r.ErrorCode != kerr.InvalidTimestamp.Code {
			t.Fatalf("%v: out-of-range timestamps: %v, want INVALID_TIMESTAMP", codec, kerr.ErrorForCode(r.ErrorCode))
		}
		var idx []int32
		for _, e := range r.ErrorRecords {
			idx = append(idx, e.RelativeOffset)
		}
		if len(idx) != 2 || idx[0] != 1 || idx[1] != 3 {
			t.Fatalf("%v: record errors at %v, want [1 3]", codec, idx)
		}
		if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "2 record errors") {
			t.Fatalf("%v: error message %v", codec, r.ErrorMessage)
		}
		// -1 (NO_TIMESTAMP) is never range-checked, as in Kafka.
		ok := policyBatch(t, codec, []int64{now, -1, now + hour/2}, [][]byte{k, k, k})
		if r := c.produceRaw(t, "bounded", 0, 1, time.Second, ok); r.ErrorCode != 0 {
			t.Fatalf("%v: in-range batch: %v", codec, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// LogAppendTime overwrites the producer's timestamps: no bound applies.
	if r := c.produceRaw(t, "stamped", 0, 1, time.Second, policyBatch(t, record.CompressionNone, []int64{1}, [][]byte{k})); r.ErrorCode != 0 {
		t.Fatalf("LogAppendTime topic: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Only the in-range batches were appended (3 records per codec).
	if end := c.broker.lookup(tp("bounded", 0)).log.LogEndOffset(); end != 6 {
		t.Fatalf("log end offset %d, want 6", end)
	}

	// A real client sees INVALID_TIMESTAMP.
	cl := c.client(kgo.DefaultProduceTopic("bounded"), kgo.RecordRetries(0))
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("old"), Timestamp: time.Now().Add(-3 * time.Hour)}).FirstErr()
	if !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("kgo produce of an old record: %v", err)
	}
}

// TestProduceTimestampDifference checks the deprecated
// message.timestamp.difference.max.ms: it bounds both directions where
// before/after are at their defaults (Kafka 3.6–3.9), and an explicit
// before or after wins over it.
func TestProduceTimestampDifference(t *testing.T) {
	c := newTestCluster(t)
	hour := int64(time.Hour / time.Millisecond)
	c.createTopic("difference", 1, map[string]*string{
		"message.timestamp.difference.max.ms": kmsg.StringPtr("3600000"),
	})
	c.createTopic("difference-before", 1, map[string]*string{
		"message.timestamp.difference.max.ms": kmsg.StringPtr("3600000"),
		"message.timestamp.before.max.ms":     kmsg.StringPtr("10800000"),
	})
	now := time.Now().UnixMilli()
	k := []byte("k")
	for _, tc := range []struct {
		topic string
		ts    int64
		want  int16
	}{
		{"difference", now - 2*hour, kerr.InvalidTimestamp.Code},
		{"difference", now + 2*hour, kerr.InvalidTimestamp.Code},
		{"difference", now - hour/2, 0},
		{"difference-before", now - 2*hour, 0}, // before (3 h) wins
		{"difference-before", now - 4*hour, kerr.InvalidTimestamp.Code},
		{"difference-before", now + 2*hour, kerr.InvalidTimestamp.Code}, // after falls back
	} {
		r := c.produceRaw(t, tc.topic, 0, 1, time.Second, policyBatch(t, record.CompressionNone, []int64{tc.ts}, [][]byte{k}))
		if r.ErrorCode != tc.want {
			t.Errorf("%s at now%+dms: %v, want %v", tc.topic, tc.ts-now, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(tc.want))
		}
	}
}

// TestStaticTopicDefaults checks that server.properties sets the topic
// defaults of broker configs Keel has no field for: the timestamp bounds'
// log.message.timestamp.difference.max.ms and compression.type.
func TestStaticTopicDefaults(t *testing.T) {
	c := newTestCluster(t, withConfig("log.message.timestamp.difference.max.ms=3600000", "compression.type=zstd"))
	hour := int64(time.Hour / time.Millisecond)
	now := time.Now().UnixMilli()
	k := []byte("k")
	c.createTopic("plain", 1, nil)
	r := c.produceRaw(t, "plain", 0, 1, time.Second, policyBatch(t, record.CompressionNone, []int64{now + 2*hour}, [][]byte{k}))
	if r.ErrorCode != kerr.InvalidTimestamp.Code {
		t.Fatalf("log.message.timestamp.difference.max.ms: %v, want INVALID_TIMESTAMP", kerr.ErrorForCode(r.ErrorCode))
	}
	r = c.produceRaw(t, "plain", 0, 1, time.Second, policyBatch(t, record.CompressionNone, []int64{now}, [][]byte{k}))
	if r.ErrorCode != 0 {
		t.Fatalf("in-range batch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	l := c.broker.lookup(tp("plain", 0)).log
	stored, err := l.ReadBytes(r.BaseOffset, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if h, err := record.CheckBatch(stored); err != nil || h.Compression() != record.CompressionZstd {
		t.Fatalf("stored batch: %v %v, want compression.type=zstd from server.properties", h.Compression(), err)
	}
	// DescribeConfigs says where the topic's value comes from.
	// DescribeConfigs says where the topic's value comes from, and the
	// broker lists the key as server.properties set it.
	adm := kadm.NewClient(c.client())
	rcs, err := adm.DescribeTopicConfigs(testCtx(t), "plain")
	if err != nil {
		t.Fatal(err)
	}
	brcs, err := adm.DescribeBrokerConfigs(testCtx(t), testNodeID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		value  string
		source kmsg.ConfigSource
	}{
		"topic compression.type":  {"zstd", kmsg.ConfigSourceStaticBrokerConfig},
		"broker compression.type": {"zstd", kmsg.ConfigSourceStaticBrokerConfig},
		"broker log.preallocate":  {"false", kmsg.ConfigSourceDefaultConfig},
	}
	for kind, rcs := range map[string]kadm.ResourceConfigs{"topic": rcs, "broker": brcs} {
		for _, rc := range rcs {
			for _, cfg := range rc.Configs {
				if w, ok := want[kind+" "+cfg.Key]; ok {
					if cfg.MaybeValue() != w.value || cfg.Source != w.source {
						t.Errorf("%s %s described as %q from %v, want %q from %v", kind, cfg.Key, cfg.MaybeValue(), cfg.Source, w.value, w.source)
					}
					delete(want, kind+" "+cfg.Key)
				}
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("not described: %v", want)
	}
	if _, err := LoadConfig(nil, []string{"compression.type=brotli"}); err == nil || !strings.Contains(err.Error(), "compression.type") {
		t.Fatalf("compression.type=brotli in server.properties: %v", err)
	}
}

func TestProduceCompactedTopicNeedsKeys(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("compacted", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
	now := time.Now().UnixMilli()
	r := c.produceRaw(t, "compacted", 0, 1, time.Second, policyBatch(t, record.CompressionLZ4, []int64{now, now, now}, [][]byte{[]byte("a"), nil, []byte("c")}))
	if r.ErrorCode != kerr.InvalidRecord.Code || len(r.ErrorRecords) != 1 || r.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("null key on a compacted topic: %v, record errors %+v", kerr.ErrorForCode(r.ErrorCode), r.ErrorRecords)
	}
	if r := c.produceRaw(t, "compacted", 0, 1, time.Second, policyBatch(t, record.CompressionLZ4, []int64{now}, [][]byte{[]byte("a")})); r.ErrorCode != 0 {
		t.Fatalf("keyed record on a compacted topic: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestProduceExactlyOneBatchPerPartition(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("one", 1, nil)
	two := append(batchAt(t, 1000), batchAt(t, 2000)...)
	if r := c.produceRaw(t, "one", 0, 1, time.Second, two); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("two batches in one partition: %v, want INVALID_RECORD", kerr.ErrorForCode(r.ErrorCode))
	}
	if end := c.broker.lookup(tp("one", 0)).log.LogEndOffset(); end != 0 {
		t.Fatalf("log end offset %d after a refused request", end)
	}
}

func TestProduceTopicCompressionType(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("zstd-topic", 1, map[string]*string{"compression.type": kmsg.StringPtr("zstd")})
	c.createTopic("plain-topic", 1, map[string]*string{"compression.type": kmsg.StringPtr("uncompressed")})
	c.createTopic("as-sent", 1, nil) // producer: kept
	now := time.Now().UnixMilli()
	keys := [][]byte{[]byte("a"), []byte("b"), nil}
	for _, tc := range []struct {
		topic string
		sent  record.Compression
		want  record.Compression
	}{
		{"zstd-topic", record.CompressionNone, record.CompressionZstd},
		{"zstd-topic", record.CompressionGzip, record.CompressionZstd},
		{"plain-topic", record.CompressionSnappy, record.CompressionNone},
		{"as-sent", record.CompressionLZ4, record.CompressionLZ4},
	} {
		l := c.broker.lookup(tp(tc.topic, 0)).log
		start := l.LogEndOffset()
		r := c.produceRaw(t, tc.topic, 0, 1, time.Second, policyBatch(t, tc.sent, []int64{now, now + 1, now + 2}, keys))
		if r.ErrorCode != 0 || r.BaseOffset != start {
			t.Fatalf("%s from %v: %v at %d", tc.topic, tc.sent, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
		stored, err := l.ReadBytes(start, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		h, err := record.CheckBatch(stored)
		if err != nil {
			t.Fatalf("%s: stored batch: %v", tc.topic, err)
		}
		if h.Compression() != tc.want || h.BaseOffset != start || h.RecordCount != 3 {
			t.Fatalf("%s from %v: stored %v at %d with %d records, want %v", tc.topic, tc.sent, h.Compression(), h.BaseOffset, h.RecordCount, tc.want)
		}
	}
	// A consumer reads the recompressed records as sent.
	cl := c.client(kgo.ConsumeTopics("zstd-topic"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 6 {
		fs := cl.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Key)) })
	}
	if strings.Join(got, ",") != "a,b,,a,b," {
		t.Fatalf("consumed keys %q", got)
	}
}

func TestProduceZstdNeedsV7(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("z", 1, nil)
	b := policyBatch(t, record.CompressionZstd, []int64{time.Now().UnixMilli()}, [][]byte{[]byte("k")})
	if r := c.produceRawVersion(t, 6, "z", 0, 1, time.Second, b); r.ErrorCode != kerr.UnsupportedCompressionType.Code {
		t.Fatalf("zstd with produce v6: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.produceRawVersion(t, 7, "z", 0, 1, time.Second, b); r.ErrorCode != 0 {
		t.Fatalf("zstd with produce v7: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestProduceToInternalTopicRefused(t *testing.T) {
	c := newTestCluster(t)
	// FindCoordinator creates __consumer_offsets.
	adm := c.admin()
	waitFor(t, "__consumer_offsets", 20*time.Second, func() bool {
		resp := adm.FindGroupCoordinators(testCtx(t), "g")
		return resp.Error() == nil
	})
	r := c.produceRaw(t, "__consumer_offsets", 0, 1, time.Second, batchAt(t, time.Now().UnixMilli()))
	if r.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(r.ErrorCode))
	}
}

// The topic's compression.<codec>.level (KIP-390) is the level the broker
// recompresses at: the same records stored gzip at level 9 are smaller
// than at level 1, and a consumer reads both back.
func TestProduceTopicCompressionLevel(t *testing.T) {
	c := newTestCluster(t)
	for _, level := range []string{"1", "9"} {
		c.createTopic("gzip-"+level, 1, map[string]*string{"compression.type": kmsg.StringPtr("gzip"), "compression.gzip.level": kmsg.StringPtr(level)})
	}
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	for i := range 500 {
		bb.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, `{"order":%d,"status":"%s","amount":%d}`, i*7919%10007, []string{"new", "paid", "shipped"}[i%3], i*31%997), nil)
	}
	batch, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, level := range []string{"1", "9"} {
		if r := c.produceRaw(t, "gzip-"+level, 0, 1, time.Second, batch); r.ErrorCode != 0 {
			t.Fatalf("level %s: %v", level, kerr.ErrorForCode(r.ErrorCode))
		}
		sizes[level] = c.broker.lookup(tp("gzip-"+level, 0)).log.Size()
	}
	if sizes["9"] >= sizes["1"] {
		t.Fatalf("stored %d bytes at gzip level 9, %d at level 1", sizes["9"], sizes["1"])
	}
	cl := c.client(kgo.ConsumeTopics("gzip-1", "gzip-9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 1000; {
		fs := cl.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
}

// TestPreallocateConfig checks that preallocate reaches the log, from the
// topic and from server.properties' log.preallocate: the active segment
// reserves segment.bytes of disk blocks (storage's TestPreallocate covers
// the rest).
func TestPreallocateConfig(t *testing.T) {
	c := newTestCluster(t, withConfig("log.preallocate=true"))
	c.createTopic("reserved", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("4194304")})
	c.createTopic("grown", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("4194304"), "preallocate": kmsg.StringPtr("false")})
	for topic, want := range map[string]bool{"reserved": true, "grown": false} {
		dir := c.broker.lookup(tp(topic, 0)).log.Dir()
		st, err := os.Stat(filepath.Join(dir, "00000000000000000000.log"))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Sys().(*syscall.Stat_t).Blocks*512 >= 4<<20; got != want {
			t.Errorf("%s: %d bytes allocated to an empty segment, preallocated %v, want %v", topic, st.Sys().(*syscall.Stat_t).Blocks*512, got, want)
		}
	}
}
