package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's Deserializers print what Java's toString prints.
func TestDeserializersPrintAsJava(t *testing.T) {
	be := func(n int, v uint64) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, v)
		return b[8-n:]
	}
	f64 := func(f float64) []byte { return be(8, math.Float64bits(f)) }
	f32 := func(f float32) []byte { return be(4, uint64(math.Float32bits(f))) }
	for _, tc := range []struct {
		class string
		in    []byte
		want  string
	}{
		{"LongDeserializer", be(8, 42), "42"},
		{"org.apache.kafka.common.serialization.LongDeserializer", be(8, math.MaxUint64), "-1"},
		{"IntegerDeserializer", be(4, 0x80000000), "-2147483648"},
		{"ShortDeserializer", be(2, 0x7fff), "32767"},
		{"DoubleDeserializer", f64(1), "1.0"},
		{"DoubleDeserializer", f64(123456.789), "123456.789"},
		{"DoubleDeserializer", f64(0.001), "0.001"},
		{"DoubleDeserializer", f64(0.0001), "1.0E-4"},
		{"DoubleDeserializer", f64(1e7), "1.0E7"},
		{"DoubleDeserializer", f64(9999999), "9999999.0"},
		{"DoubleDeserializer", f64(12345678.9), "1.23456789E7"},
		{"DoubleDeserializer", f64(-1.5e-7), "-1.5E-7"},
		{"DoubleDeserializer", f64(math.Copysign(0, -1)), "-0.0"},
		{"DoubleDeserializer", f64(math.Inf(-1)), "-Infinity"},
		{"DoubleDeserializer", f64(math.NaN()), "NaN"},
		{"FloatDeserializer", f32(0.1), "0.1"},
		{"FloatDeserializer", f32(3e10), "3.0E10"},
		{"UUIDDeserializer", []byte("3F2504E0-4F89-11D3-9A0C-0305E82C3301"), "3f2504e0-4f89-11d3-9a0c-0305e82c3301"},
		{"StringDeserializer", []byte("héllo"), "héllo"},
		{"BytesDeserializer", []byte("a\\b\x00\xff~"), `a\x5Cb\x00\xFF~`},
	} {
		d, err := deserializerFor("value.deserializer", tc.class)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := d(tc.in); err != nil || got != tc.want {
			t.Errorf("%s(%x) = %q, %v; want %q", tc.class, tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		class string
		in    []byte
		want  string
	}{
		{"LongDeserializer", []byte("1234567"), "size of data received by LongDeserializer is not 8"},
		{"IntegerDeserializer", []byte("12345"), "is not 4"},
		{"UUIDDeserializer", []byte("not-a-uuid"), "UUID"},
		{"VoidDeserializer", []byte("x"), "should be null"},
	} {
		d, _ := deserializerFor("value.deserializer", tc.class)
		if _, err := d(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s(%q): %v; want an error with %q", tc.class, tc.in, err, tc.want)
		}
	}
	if _, err := deserializerFor("key.deserializer", "io.confluent.kafka.serializers.KafkaAvroDeserializer"); err == nil || !strings.Contains(err.Error(), "LongDeserializer") {
		t.Errorf("an Avro deserializer: %v", err)
	}
	// The formatter then prints the bytes, with a warning, as Kafka's does
	// with a deserializer class it cannot instantiate.
	f, err := newMessageFormatter(map[string]string{"value.deserializer": "io.confluent.kafka.serializers.KafkaAvroDeserializer"}, false)
	if err != nil || f.valueDeser != nil || len(f.warnings) != 1 || !strings.Contains(f.warnings[0], "KafkaAvroDeserializer") {
		t.Errorf("an Avro value deserializer: %v, warnings %q", err, f.warnings)
	}
}

// The formatter applies them to keys, values and header values; a record
// they refuse stops the consumer with its partition and offset.
func TestFormatterDeserializes(t *testing.T) {
	count := make([]byte, 8)
	binary.BigEndian.PutUint64(count, 3)
	r := &client.Record{Topic: "streams-wordcount-output", Partition: 0, Offset: 7, Key: []byte("kafka"), Value: count,
		Timestamp: time.UnixMilli(1), Headers: []client.Header{{Key: "n", Value: []byte{0, 0, 0, 5}}}}
	f, err := newMessageFormatter(map[string]string{"print.key": "true", "print.headers": "true",
		"key.deserializer":     "org.apache.kafka.common.serialization.StringDeserializer",
		"value.deserializer":   "org.apache.kafka.common.serialization.LongDeserializer",
		"headers.deserializer": "org.apache.kafka.common.serialization.IntegerDeserializer"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := f.write(&b, r); err != nil || b.String() != "n:5\tkafka\t3\n" {
		t.Fatalf("%q, %v", b.String(), err)
	}
	r.Value = []byte("three")
	if err := f.write(&b, r); err == nil || !strings.Contains(err.Error(), "streams-wordcount-output-0 offset 7: value: size of data received by LongDeserializer is not 8") {
		t.Fatalf("a value of 5 bytes: %v", err)
	}
	f.noOp = true
	b.Reset()
	if err := f.write(&b, r); err != nil || b.Len() != 0 {
		t.Fatalf("NoOpMessageFormatter wrote %q, %v", b.String(), err)
	}
}

// OffsetsMessageFormatter and GroupMetadataMessageFormatter print
// __consumer_offsets records as Kafka 4's do: one JSON object each, the
// fields of Kafka's JSON converters in their order.
func TestCoordinatorFormatters(t *testing.T) {
	ok := kmsg.NewOffsetCommitKey()
	ok.Version, ok.Group, ok.Topic, ok.Partition = 1, "billing", "orders", 2
	ov := kmsg.NewOffsetCommitValue()
	ov.Version, ov.Offset, ov.LeaderEpoch, ov.Metadata, ov.CommitTimestamp = 3, 42, 5, "", 1700000000000
	gk := kmsg.NewGroupMetadataKey()
	gk.Version, gk.Group = 2, "billing"
	gv := kmsg.NewGroupMetadataValue()
	gv.Version, gv.ProtocolType, gv.Generation, gv.Protocol, gv.Leader, gv.CurrentStateTimestamp = 3, "consumer", 4, kmsg.StringPtr("range"), kmsg.StringPtr("m1"), 1700000000001
	m := kmsg.NewGroupMetadataValueMember()
	m.MemberID, m.ClientID, m.ClientHost, m.RebalanceTimeoutMillis, m.SessionTimeoutMillis, m.Subscription, m.Assignment = "m1", "c", "/10.0.0.1", 60000, 45000, []byte{0, 1}, []byte{}
	gv.Members = append(gv.Members, m)

	offsets := coordinatorFormatters["org.apache.kafka.tools.consumer.OffsetsMessageFormatter"]
	groups := coordinatorFormatters["kafka.coordinator.group.GroupMetadataManager$GroupMetadataMessageFormatter"]
	for _, tc := range []struct {
		types      []int16
		key, value []byte
		want       string
	}{
		{offsets, ok.AppendTo(nil), ov.AppendTo(nil),
			`{"key":{"type":1,"data":{"group":"billing","topic":"orders","partition":2}},"value":{"version":3,"data":{"offset":42,"leaderEpoch":5,"metadata":"","commitTimestamp":1700000000000}}}` + "\n"},
		{offsets, ok.AppendTo(nil), nil, `{"key":{"type":1,"data":{"group":"billing","topic":"orders","partition":2}},"value":null}` + "\n"},
		{offsets, gk.AppendTo(nil), gv.AppendTo(nil), ""}, // a group's record: not an offset
		{groups, ok.AppendTo(nil), ov.AppendTo(nil), ""},
		{groups, gk.AppendTo(nil), gv.AppendTo(nil),
			`{"key":{"type":2,"data":{"group":"billing"}},"value":{"version":3,"data":{"protocolType":"consumer","generation":4,"protocol":"range","leader":"m1",` +
				`"currentStateTimestamp":1700000000001,"members":[{"memberId":"m1","groupInstanceId":null,"clientId":"c","clientHost":"/10.0.0.1",` +
				`"rebalanceTimeout":60000,"sessionTimeout":45000,"subscription":"AAE=","assignment":""}]}}}` + "\n"},
		{offsets, nil, []byte("x"), ""},
	} {
		var b bytes.Buffer
		if err := writeCoordinatorRecord(&b, &client.Record{Topic: "__consumer_offsets", Key: tc.key, Value: tc.value}, tc.types); err != nil || b.String() != tc.want {
			t.Errorf("got %q, %v\nwant %q", b.String(), err, tc.want)
		}
	}
	var bad *recordFormatError
	err := writeCoordinatorRecord(io.Discard, &client.Record{Topic: "__consumer_offsets", Offset: 9, Key: ok.AppendTo(nil), Value: []byte{0, 3, 1}}, offsets)
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "__consumer_offsets-0: could not read record at offset 9") {
		t.Fatalf("a value that does not decode: %v", err)
	}
}
