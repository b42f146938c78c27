package group

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// crHex decodes a golden vector written as hex with spaces between fields.
func crHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func crStr(s string) *string { return &s }

var (
	crTopicA = [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	crTopicB = [16]byte{0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00}
)

const crTopicAHex = "000102030405060708090a0b0c0d0e0f"

// The keys follow the schemas' version 0, not flexible: the record type
// (the JSON's apiKey) as int16, then each string as int16 length + bytes.
func TestConsumerRecordKeysAreKafkasBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    []byte
		golden string
		want   DecodedKey
	}{
		{"ConsumerGroupMetadataKey", ConsumerGroupMetadataKey("g1"),
			"0003 0002 6731", DecodedKey{Type: 3, Group: "g1"}},
		{"ConsumerGroupPartitionMetadataKey", ConsumerGroupPartitionMetadataKey("g1"),
			"0004 0002 6731", DecodedKey{Type: 4, Group: "g1"}},
		{"ConsumerGroupMemberMetadataKey", ConsumerGroupMemberMetadataKey("g1", "m"),
			"0005 0002 6731 0001 6d", DecodedKey{Type: 5, Group: "g1", MemberID: "m"}},
		{"ConsumerGroupTargetAssignmentMetadataKey", ConsumerGroupTargetAssignmentMetadataKey("g1"),
			"0006 0002 6731", DecodedKey{Type: 6, Group: "g1"}},
		{"ConsumerGroupTargetAssignmentMemberKey", ConsumerGroupTargetAssignmentMemberKey("g1", "m"),
			"0007 0002 6731 0001 6d", DecodedKey{Type: 7, Group: "g1", MemberID: "m"}},
		{"ConsumerGroupCurrentMemberAssignmentKey", ConsumerGroupCurrentMemberAssignmentKey("g1", ""),
			"0008 0002 6731 0000", DecodedKey{Type: 8, Group: "g1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if golden := crHex(t, tc.golden); !bytes.Equal(tc.key, golden) {
				t.Fatalf("key %x, want %x", tc.key, golden)
			}
			got, err := DecodeKey(tc.key)
			if err != nil || got != tc.want {
				t.Fatalf("DecodeKey: %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestDecodeKeyKeepsClassicKeysAndRefusesOtherTypes(t *testing.T) {
	if k, err := DecodeKey(OffsetKey("g", "t", 3)); err != nil || k != (DecodedKey{Type: 1, Group: "g", Topic: "t", Partition: 3, IsOffset: true}) {
		t.Errorf("offset key: %+v %v", k, err)
	}
	if k, err := DecodeKey(GroupKey("g")); err != nil || k != (DecodedKey{Type: 2, Group: "g"}) {
		t.Errorf("group key: %+v %v", k, err)
	}
	// 9 ShareGroupMetadata, 16 ConsumerGroupRegularExpression, 17 streams.
	for _, typ := range []int16{9, 16, 17, -1} {
		key := crAppendString(crAppendInt16(nil, typ), "g")
		if k, err := DecodeKey(key); !errors.Is(err, ErrUnknownRecord) || k.Type != typ {
			t.Errorf("type %d: %+v %v, want ErrUnknownRecord", typ, k, err)
		}
	}
	for _, key := range [][]byte{
		crHex(t, "0005 0002 6731"),            // member id missing
		crHex(t, "0003 0003 6731"),            // group id truncated
		crHex(t, "0003 ffff"),                 // null group id
		crHex(t, "0003 0002 6731 00"),         // trailing byte
		crHex(t, "0008 0002 6731 0001 6d 01"), // trailing byte
	} {
		if k, err := DecodeKey(key); err == nil || errors.Is(err, ErrUnknownRecord) {
			t.Errorf("DecodeKey(%x) = %+v %v, want a decode error", key, k, err)
		}
	}
}

// Each golden vector is derived by hand from the value's JSON schema,
// version 0, flexible: int16 version 0000, then the fields in order;
// int8/int32/int64 big-endian, uuid 16 raw bytes, compact strings and
// arrays as uvarint(len+1) (00 for null), and a tagged-field section
// (uvarint count, then tag, size, data) closing every struct.
func TestConsumerRecordValuesAreKafkasBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		value  any
		golden string
		decode func([]byte) (any, error)
	}{{
		name:  "group epoch without hash: tag 0 at its default is not written",
		value: ConsumerGroupMetadataValue{Epoch: 5},
		// version, Epoch, no tagged fields.
		golden: "0000 00000005 00",
		decode: func(b []byte) (any, error) { return DecodeConsumerGroupMetadataValue(b) },
	}, {
		name:  "group epoch with MetadataHash in tag 0",
		value: ConsumerGroupMetadataValue{Epoch: 5, MetadataHash: 0x0102030405060708},
		// version, Epoch, 1 tagged field: tag 0, size 8, int64.
		golden: "0000 00000005 01 00 08 0102030405060708",
		decode: func(b []byte) (any, error) { return DecodeConsumerGroupMetadataValue(b) },
	}, {
		name: "partition metadata as Kafka 4.0 wrote it",
		value: ConsumerGroupPartitionMetadataValue{Topics: []PartitionMetadataTopic{
			{TopicID: crTopicA, TopicName: "t", NumPartitions: 2, PartitionMetadata: []PartitionRacks{{Partition: 1, Racks: []string{"r1", ""}}}},
		}},
		// version, Topics: 1 element (02): TopicId, TopicName "t" (02 74),
		// NumPartitions 2, PartitionMetadata: 1 element (02): Partition 1,
		// Racks: 2 elements (03) "r1" (03 7231) and "" (01), partition
		// tags 00, topic tags 00; value tags 00.
		golden: "0000 02 " + crTopicAHex + " 02 74 00000002 02 00000001 03 03 7231 01 00 00 00",
		decode: func(b []byte) (any, error) { return DecodeConsumerGroupPartitionMetadataValue(b) },
	}, {
		name: "member metadata",
		value: ConsumerMemberMetadataValue{RackID: crStr("r"), ClientID: "c", ClientHost: "/h",
			SubscribedTopicNames: []string{"a", "b"}, RebalanceTimeoutMs: 300000, ServerAssignor: crStr("uniform")},
		// version, InstanceId null (00), RackId "r" (02 72), ClientId "c"
		// (02 63), ClientHost "/h" (03 2f68), SubscribedTopicNames: 2
		// elements (03) "a" "b", SubscribedTopicRegex null (00),
		// RebalanceTimeoutMs 300000 = 0x000493e0, ServerAssignor "uniform"
		// (08 + 7 bytes), no tagged fields (ClassicMemberMetadata null).
		golden: "0000 00 02 72 02 63 03 2f68 03 02 61 02 62 00 000493e0 08 756e69666f726d 00",
		decode: func(b []byte) (any, error) { return DecodeConsumerMemberMetadataValue(b) },
	}, {
		name: "member metadata with empty strings and a regex",
		value: ConsumerMemberMetadataValue{InstanceID: crStr(""), RackID: nil, ClientID: "", ClientHost: "",
			SubscribedTopicRegex: crStr("t.*"), RebalanceTimeoutMs: -1},
		// InstanceId "" (01) is not null (00); SubscribedTopicNames empty
		// (01); regex "t.*" (04 742e2a); RebalanceTimeoutMs -1.
		golden: "0000 01 00 01 01 01 04 742e2a ffffffff 00 00",
		decode: func(b []byte) (any, error) { return DecodeConsumerMemberMetadataValue(b) },
	}, {
		name:   "target assignment epoch",
		value:  ConsumerTargetAssignmentMetadataValue{AssignmentEpoch: 7},
		golden: "0000 00000007 00",
		decode: func(b []byte) (any, error) { return DecodeConsumerTargetAssignmentMetadataValue(b) },
	}, {
		name:  "target assignment of a member",
		value: ConsumerTargetAssignmentMemberValue{TopicPartitions: []TopicPartitions{{TopicID: crTopicA, Partitions: []int32{0, 2}}}},
		// version, TopicPartitions: 1 element (02): TopicId, Partitions: 2
		// elements (03) 0 and 2, element tags 00; value tags 00.
		golden: "0000 02 " + crTopicAHex + " 03 00000000 00000002 00 00",
		decode: func(b []byte) (any, error) { return DecodeConsumerTargetAssignmentMemberValue(b) },
	}, {
		name: "current assignment of a member",
		value: ConsumerCurrentAssignmentValue{MemberEpoch: 3, PreviousMemberEpoch: 2, State: 1,
			AssignedPartitions: []TopicPartitions{{TopicID: crTopicA, Partitions: []int32{1}}}},
		// version, MemberEpoch 3, PreviousMemberEpoch 2, State 1 (int8),
		// AssignedPartitions: 1 element (02): TopicId, Partitions [1]
		// (02 00000001), tags 00; PartitionsPendingRevocation empty (01);
		// value tags 00.
		golden: "0000 00000003 00000002 01 02 " + crTopicAHex + " 02 00000001 00 01 00",
		decode: func(b []byte) (any, error) { return DecodeConsumerCurrentAssignmentValue(b) },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			golden := crHex(t, tc.golden)
			got := tc.value.(interface{ AppendTo([]byte) []byte }).AppendTo(nil)
			if !bytes.Equal(got, golden) {
				t.Fatalf("encoded\n%x, want\n%x", got, golden)
			}
			v, err := tc.decode(golden)
			if err != nil || !reflect.DeepEqual(v, tc.value) {
				t.Fatalf("decoded %+v %v, want %+v", v, err, tc.value)
			}
		})
	}
}

func TestConsumerRecordValuesRoundTrip(t *testing.T) {
	for _, v := range []interface{ AppendTo([]byte) []byte }{
		ConsumerGroupMetadataValue{},
		ConsumerGroupMetadataValue{Epoch: -1, MetadataHash: -42},
		ConsumerGroupPartitionMetadataValue{},
		ConsumerGroupPartitionMetadataValue{Topics: []PartitionMetadataTopic{
			{TopicID: crTopicA, TopicName: "orders", NumPartitions: 12},
			{TopicID: crTopicB, TopicName: "", NumPartitions: 3, PartitionMetadata: []PartitionRacks{
				{Partition: 0, Racks: []string{"a", "b"}}, {Partition: 2}}},
		}},
		ConsumerMemberMetadataValue{},
		ConsumerMemberMetadataValue{InstanceID: crStr("i-1"), RackID: crStr(""), ClientID: "client", ClientHost: "/10.0.0.1",
			SubscribedTopicNames: []string{"a", "b", strings.Repeat("x", 300)}, SubscribedTopicRegex: crStr(""),
			RebalanceTimeoutMs: 45000, ServerAssignor: crStr("range")},
		ConsumerTargetAssignmentMetadataValue{AssignmentEpoch: 1 << 30},
		ConsumerTargetAssignmentMemberValue{},
		ConsumerTargetAssignmentMemberValue{TopicPartitions: []TopicPartitions{
			{TopicID: crTopicA, Partitions: []int32{5, 1, 3}}, {TopicID: crTopicB}}},
		ConsumerCurrentAssignmentValue{},
		ConsumerCurrentAssignmentValue{MemberEpoch: 10, PreviousMemberEpoch: 9, State: 2,
			AssignedPartitions:          []TopicPartitions{{TopicID: crTopicA, Partitions: []int32{0}}},
			PartitionsPendingRevocation: []TopicPartitions{{TopicID: crTopicB, Partitions: []int32{7, 8}}}},
	} {
		b := v.AppendTo([]byte("prefix"))
		if !bytes.HasPrefix(b, []byte("prefix")) {
			t.Fatalf("%T: AppendTo dropped dst", v)
		}
		got, err := crDecodeLike(v, b[len("prefix"):])
		if err != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("round trip of %+v: %+v %v", v, got, err)
		}
	}
}

// crDecodeLike decodes b with the decoder of v's type.
func crDecodeLike(v any, b []byte) (any, error) {
	switch v.(type) {
	case ConsumerGroupMetadataValue:
		return DecodeConsumerGroupMetadataValue(b)
	case ConsumerGroupPartitionMetadataValue:
		return DecodeConsumerGroupPartitionMetadataValue(b)
	case ConsumerMemberMetadataValue:
		return DecodeConsumerMemberMetadataValue(b)
	case ConsumerTargetAssignmentMetadataValue:
		return DecodeConsumerTargetAssignmentMetadataValue(b)
	case ConsumerTargetAssignmentMemberValue:
		return DecodeConsumerTargetAssignmentMemberValue(b)
	case ConsumerCurrentAssignmentValue:
		return DecodeConsumerCurrentAssignmentValue(b)
	}
	panic("unknown value type")
}

// Every value schema has one version, 0; what changed between Kafka
// releases are tagged fields, which a reader of either release skips or
// defaults.
func TestConsumerRecordValuesAcrossKafkaReleases(t *testing.T) {
	// Kafka 4.0 wrote no MetadataHash (KIP-1101 is 4.1): it reads as 0.
	if v, err := DecodeConsumerGroupMetadataValue(crHex(t, "0000 0000000b 00")); err != nil || v != (ConsumerGroupMetadataValue{Epoch: 11}) {
		t.Errorf("4.0 group epoch: %+v %v", v, err)
	}
	// Tags a newer Kafka adds (CreationTimeMs is tag 1 of the group epoch,
	// AssignmentTimestamp tag 0 of the target assignment epoch,
	// AssignmentEpochs tag 0 of TopicPartitions) and unknown ones are
	// skipped.
	for _, tc := range []struct {
		name, golden string
		want         any
	}{
		{"group epoch with hash, CreationTimeMs and an unknown tag",
			"0000 00000005 03 00 08 0000000000000009 01 08 0000019a00000000 1f 02 abcd",
			ConsumerGroupMetadataValue{Epoch: 5, MetadataHash: 9}},
		{"target assignment epoch with AssignmentTimestamp",
			"0000 00000007 01 00 08 0000019a00000000",
			ConsumerTargetAssignmentMetadataValue{AssignmentEpoch: 7}},
		// ClassicMemberMetadata: tag 0, 15 bytes: present (01),
		// SessionTimeoutMs 10000, SupportedProtocols [{"range", empty}].
		{"member metadata with ClassicMemberMetadata (tag 0)",
			"0000 00 00 02 63 01 01 00 ffffffff 00 01 00 0f 01 00002710 02 06 72616e6765 01 00 00",
			ConsumerMemberMetadataValue{ClientID: "c", RebalanceTimeoutMs: -1, Classic: &ClassicMemberMetadata{
				SessionTimeoutMs: 10000, SupportedProtocols: []Protocol{{Name: "range", Metadata: []byte{}}}}}},
		{"current assignment with AssignmentEpochs in TopicPartitions",
			"0000 00000003 00000002 00 02 " + crTopicAHex + " 02 00000001 01 00 05 02 00000003 01 00",
			ConsumerCurrentAssignmentValue{MemberEpoch: 3, PreviousMemberEpoch: 2,
				AssignedPartitions: []TopicPartitions{{TopicID: crTopicA, Partitions: []int32{1}}}}},
		{"target assignment member with a tag in the value and in the topic",
			"0000 02 " + crTopicAHex + " 01 01 05 01 ff 01 07 00",
			ConsumerTargetAssignmentMemberValue{TopicPartitions: []TopicPartitions{{TopicID: crTopicA}}}},
	} {
		got, err := crDecodeLike(tc.want, crHex(t, tc.golden))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		}
	}
	// Keel writes ClassicMemberMetadata as Kafka does.
	v := ConsumerMemberMetadataValue{ClientID: "c", SubscribedTopicNames: []string{}, RebalanceTimeoutMs: -1,
		Classic: &ClassicMemberMetadata{SessionTimeoutMs: 10000, SupportedProtocols: []Protocol{{Name: "range"}}}}
	if got, want := v.AppendTo(nil), crHex(t, "0000 00 00 02 63 01 01 00 ffffffff 00 01 00 0f 01 00002710 02 06 72616e6765 01 00 00"); !bytes.Equal(got, want) {
		t.Errorf("ClassicMemberMetadata encoded as %x, want %x", got, want)
	}
}

func TestConsumerRecordValuesRefuseMalformedBytes(t *testing.T) {
	for _, tc := range []struct {
		name, golden string
		like         any
		err          error
	}{
		{"version 1 is unknown", "0001 00000005 00", ConsumerGroupMetadataValue{}, ErrUnknownValueVersion},
		{"negative version", "ffff 00000005 00", ConsumerTargetAssignmentMetadataValue{}, ErrUnknownValueVersion},
		{"no version", "00", ConsumerGroupMetadataValue{}, nil},
		{"truncated epoch", "0000 000000", ConsumerGroupMetadataValue{}, nil},
		{"no tagged-field section", "0000 00000005", ConsumerGroupMetadataValue{}, nil},
		{"trailing byte", "0000 00000005 00 00", ConsumerGroupMetadataValue{}, nil},
		{"MetadataHash of 4 bytes", "0000 00000005 01 00 04 00000001", ConsumerGroupMetadataValue{}, nil},
		{"tag data past the end", "0000 00000005 01 07 05 0000", ConsumerGroupMetadataValue{}, nil},
		{"null ClientId", "0000 00 00 00 01 01 00 ffffffff 00 00", ConsumerMemberMetadataValue{}, nil},
		{"null SubscribedTopicNames", "0000 00 00 01 01 00 00 ffffffff 00 00", ConsumerMemberMetadataValue{}, nil},
		{"string longer than Kafka's 32767", "0000 00 00 818002", ConsumerMemberMetadataValue{}, nil},
		{"varint of 6 bytes", "0000 8080808080 01", ConsumerTargetAssignmentMemberValue{}, nil},
		{"billion partitions in a few bytes", "0000 02 " + crTopicAHex + " ffffffff03 00 00", ConsumerTargetAssignmentMemberValue{}, nil},
		{"billion topics in a few bytes", "0000 00000001 00000000 00 ffffffff03", ConsumerCurrentAssignmentValue{}, nil},
	} {
		_, err := crDecodeLike(tc.like, crHex(t, tc.golden))
		if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		}
	}
}

// FuzzConsumerRecords: no bytes make a decoder or DecodeKey panic, and
// whatever decodes encodes back to bytes that decode to the same value.
func FuzzConsumerRecords(f *testing.F) {
	f.Add(ConsumerGroupMetadataKey("g"))
	f.Add(ConsumerGroupMemberMetadataKey("g", "m"))
	f.Add(ConsumerGroupMetadataValue{Epoch: 3, MetadataHash: 7}.AppendTo(nil))
	f.Add(ConsumerGroupPartitionMetadataValue{Topics: []PartitionMetadataTopic{{TopicID: crTopicA, TopicName: "t",
		NumPartitions: 1, PartitionMetadata: []PartitionRacks{{Racks: []string{"r"}}}}}}.AppendTo(nil))
	f.Add(ConsumerMemberMetadataValue{InstanceID: crStr("i"), ClientID: "c", SubscribedTopicNames: []string{"t"},
		ServerAssignor: crStr("uniform")}.AppendTo(nil))
	f.Add(ConsumerTargetAssignmentMemberValue{TopicPartitions: []TopicPartitions{{TopicID: crTopicB, Partitions: []int32{1}}}}.AppendTo(nil))
	f.Add(ConsumerCurrentAssignmentValue{MemberEpoch: 2, AssignedPartitions: []TopicPartitions{{Partitions: []int32{0}}}}.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := DecodeKey(b); err == nil && k.Type >= ConsumerGroupMetadataType && k.Type <= ConsumerGroupCurrentMemberAssignmentType {
			var again []byte
			switch k.Type {
			case ConsumerGroupMetadataType:
				again = ConsumerGroupMetadataKey(k.Group)
			case ConsumerGroupPartitionMetadataType:
				again = ConsumerGroupPartitionMetadataKey(k.Group)
			case ConsumerGroupMemberMetadataType:
				again = ConsumerGroupMemberMetadataKey(k.Group, k.MemberID)
			case ConsumerGroupTargetAssignmentMetadataType:
				again = ConsumerGroupTargetAssignmentMetadataKey(k.Group)
			case ConsumerGroupTargetAssignmentMemberType:
				again = ConsumerGroupTargetAssignmentMemberKey(k.Group, k.MemberID)
			case ConsumerGroupCurrentMemberAssignmentType:
				again = ConsumerGroupCurrentMemberAssignmentKey(k.Group, k.MemberID)
			}
			if !bytes.Equal(again, b) { // keys have one encoding
				t.Fatalf("key %x re-encoded as %x", b, again)
			}
		}
		for _, like := range []any{
			ConsumerGroupMetadataValue{}, ConsumerGroupPartitionMetadataValue{}, ConsumerMemberMetadataValue{},
			ConsumerTargetAssignmentMetadataValue{}, ConsumerTargetAssignmentMemberValue{}, ConsumerCurrentAssignmentValue{},
		} {
			v, err := crDecodeLike(like, b)
			if err != nil {
				continue
			}
			again, err := crDecodeLike(like, v.(interface{ AppendTo([]byte) []byte }).AppendTo(nil))
			if err != nil || !reflect.DeepEqual(again, v) {
				t.Fatalf("%T %+v re-encoded decodes as %+v %v", like, v, again, err)
			}
		}
	})
}
