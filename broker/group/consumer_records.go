package group

// The records of KIP-848 ("next-gen", consumer protocol) groups in
// __consumer_offsets, byte for byte as Apache Kafka 4.1 writes them (the
// JSON schemas Consumer*Key.json and Consumer*Value.json of Kafka's
// group-coordinator module).
//
// A key is the record type (int16, the schema's "apiKey") followed by the
// key's fields in version 0 of its schema, which is not flexible: strings
// are an int16 length and the bytes. (Before Kafka 4.1 the type was the
// "key version"; the bytes are the same.) A value is its version (int16)
// followed by its fields in that version, and every value schema is
// flexible from version 0: compact strings and arrays (uvarint length+1,
// 0 for null), and a tagged-field section (uvarint count, then tag, size
// and data of each) ending every struct. Every schema's only valid version
// is 0, and Kafka 4.1 writes version 0.
//
// Kafka 4.1 adds tagged fields that an older reader skips: MetadataHash in
// ConsumerGroupMetadataValue (KIP-1101). Tags added after 4.1
// (CreationTimeMs, AssignmentTimestamp, AssignmentEpochs) are skipped on
// decode and never written. ClassicMemberMetadata (tag 0 of the member
// metadata: a member of the classic protocol in a consumer group, KIP-848's
// online migration) is read and written.
//
// Kafka reads no string longer than 32767 bytes (and refuses to write
// one); the encoders do not check, so callers must not pass one.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record types of KIP-848 consumer group records (the key's leading int16).
// Type 16 (ConsumerGroupRegularExpression) is not implemented here.
const (
	ConsumerGroupMetadataType                 int16 = 3
	ConsumerGroupPartitionMetadataType        int16 = 4 // deprecated in 4.1 (KIP-1101): Kafka writes only its tombstone
	ConsumerGroupMemberMetadataType           int16 = 5
	ConsumerGroupTargetAssignmentMetadataType int16 = 6
	ConsumerGroupTargetAssignmentMemberType   int16 = 7
	ConsumerGroupCurrentMemberAssignmentType  int16 = 8
)

// consumerValueVersion is the version of every KIP-848 value: each
// schema's validVersions is "0".
const consumerValueVersion int16 = 0

// crMaxString is the longest string Kafka's generated readers accept
// (Short.MAX_VALUE); Kafka refuses to write a longer one.
const crMaxString = math.MaxInt16

// ErrUnknownValueVersion is a KIP-848 record value of a version this build
// does not read (a Kafka newer than 4.1 could write one).
var ErrUnknownValueVersion = errors.New("unknown __consumer_offsets value version")

// TopicPartitions is a topic of an assignment: its ID and partitions.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerGroupMetadataValue is the group's epoch (Kafka's
// ConsumerGroupMetadataValue), and since 4.1 (KIP-1101) the hash of its
// subscribed topics' metadata, a tagged field written only when not 0.
type ConsumerGroupMetadataValue struct {
	Epoch        int32
	MetadataHash int64
}

// ConsumerGroupPartitionMetadataValue is the metadata of the group's
// subscribed topics (Kafka's ConsumerGroupPartitionMetadataValue). Kafka
// 4.0 wrote it (with empty PartitionMetadata); 4.1 replaced it with
// ConsumerGroupMetadataValue.MetadataHash, still reads it, and writes only
// its tombstone.
type ConsumerGroupPartitionMetadataValue struct {
	Topics []PartitionMetadataTopic
}

// PartitionMetadataTopic is one topic of a ConsumerGroupPartitionMetadataValue.
type PartitionMetadataTopic struct {
	TopicID       [16]byte
	TopicName     string
	NumPartitions int32
	// PartitionMetadata is the racks of each partition; deprecated (not
	// used after Kafka 4.0, which wrote it empty).
	PartitionMetadata []PartitionRacks
}

// PartitionRacks is the racks of one partition's replicas.
type PartitionRacks struct {
	Partition int32
	Racks     []string
}

// ConsumerMemberMetadataValue is a member's subscription (Kafka's
// ConsumerGroupMemberMetadataValue). Kafka sorts SubscribedTopicNames
// before writing; the encoder writes them in the given order.
type ConsumerMemberMetadataValue struct {
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
	// Classic is set for a member of the classic protocol (tag 0).
	Classic *ClassicMemberMetadata
}

// ClassicMemberMetadata is what a consumer group keeps of a member that
// uses the classic protocol (JoinGroup, SyncGroup, Heartbeat) in it:
// its session timeout and the protocols of its JoinGroup (Kafka's
// ConsumerGroupMemberMetadataValue.ClassicMemberMetadata).
type ClassicMemberMetadata struct {
	SessionTimeoutMs   int32
	SupportedProtocols []Protocol
}

// ConsumerTargetAssignmentMetadataValue is the epoch of the group's target
// assignment (Kafka's ConsumerGroupTargetAssignmentMetadataValue).
type ConsumerTargetAssignmentMetadataValue struct {
	AssignmentEpoch int32
}

// ConsumerTargetAssignmentMemberValue is a member's target assignment
// (Kafka's ConsumerGroupTargetAssignmentMemberValue).
type ConsumerTargetAssignmentMemberValue struct {
	TopicPartitions []TopicPartitions
}

// ConsumerCurrentAssignmentValue is a member's current assignment and
// epochs (Kafka's ConsumerGroupCurrentMemberAssignmentValue); State is
// Kafka's MemberState value.
type ConsumerCurrentAssignmentValue struct {
	MemberEpoch                 int32
	PreviousMemberEpoch         int32
	State                       int8
	AssignedPartitions          []TopicPartitions
	PartitionsPendingRevocation []TopicPartitions
}

// ConsumerGroupMetadataKey encodes the key of a group's epoch record.
func ConsumerGroupMetadataKey(group string) []byte {
	return crGroupKey(ConsumerGroupMetadataType, group)
}

// ConsumerGroupPartitionMetadataKey encodes the key of a group's
// subscription metadata record (in Kafka 4.1 only ever a tombstone).
func ConsumerGroupPartitionMetadataKey(group string) []byte {
	return crGroupKey(ConsumerGroupPartitionMetadataType, group)
}

// ConsumerGroupMemberMetadataKey encodes the key of a member's subscription.
func ConsumerGroupMemberMetadataKey(group, member string) []byte {
	return crMemberKey(ConsumerGroupMemberMetadataType, group, member)
}

// ConsumerGroupTargetAssignmentMetadataKey encodes the key of a group's
// target assignment epoch.
func ConsumerGroupTargetAssignmentMetadataKey(group string) []byte {
	return crGroupKey(ConsumerGroupTargetAssignmentMetadataType, group)
}

// ConsumerGroupTargetAssignmentMemberKey encodes the key of a member's
// target assignment.
func ConsumerGroupTargetAssignmentMemberKey(group, member string) []byte {
	return crMemberKey(ConsumerGroupTargetAssignmentMemberType, group, member)
}

// ConsumerGroupCurrentMemberAssignmentKey encodes the key of a member's
// current assignment.
func ConsumerGroupCurrentMemberAssignmentKey(group, member string) []byte {
	return crMemberKey(ConsumerGroupCurrentMemberAssignmentType, group, member)
}

func crGroupKey(typ int16, group string) []byte {
	dst := make([]byte, 0, 4+len(group))
	return crAppendString(crAppendInt16(dst, typ), group)
}

func crMemberKey(typ int16, group, member string) []byte {
	dst := make([]byte, 0, 6+len(group)+len(member))
	return crAppendString(crAppendString(crAppendInt16(dst, typ), group), member)
}

// decodeConsumerKey decodes a key of types 3–8 for DecodeKey.
func decodeConsumerKey(typ int16, key []byte) (DecodedKey, error) {
	r := crReader{b: key[2:]}
	k := DecodedKey{Type: typ, Group: r.string("GroupId")}
	switch typ {
	case ConsumerGroupMemberMetadataType, ConsumerGroupTargetAssignmentMemberType, ConsumerGroupCurrentMemberAssignmentType:
		k.MemberID = r.string("MemberId")
	}
	if err := r.finish(); err != nil {
		return DecodedKey{}, fmt.Errorf("decode key of type %d: %w", typ, err)
	}
	return k, nil
}

// AppendTo appends the value, version 0 (MetadataHash tagged, tag 0).
func (v ConsumerGroupMetadataValue) AppendTo(dst []byte) []byte {
	dst = crAppendInt16(dst, consumerValueVersion)
	dst = crAppendInt32(dst, v.Epoch)
	if v.MetadataHash == 0 { // the schema's default is not written
		return crAppendUvarint(dst, 0)
	}
	dst = crAppendUvarint(dst, 1)
	dst = crAppendUvarint(dst, 0)
	dst = crAppendUvarint(dst, 8)
	return crAppendInt64(dst, v.MetadataHash)
}

// DecodeConsumerGroupMetadataValue decodes a ConsumerGroupMetadataValue.
func DecodeConsumerGroupMetadataValue(b []byte) (ConsumerGroupMetadataValue, error) {
	var v ConsumerGroupMetadataValue
	r, err := crValueReader(b, "ConsumerGroupMetadataValue")
	if err != nil {
		return v, err
	}
	v.Epoch = r.int32("Epoch")
	r.tags(func(tag uint64, t *crReader) bool {
		if tag != 0 {
			return false
		}
		v.MetadataHash = t.int64("MetadataHash")
		return true
	})
	if err := r.finish(); err != nil {
		return ConsumerGroupMetadataValue{}, fmt.Errorf("decode ConsumerGroupMetadataValue: %w", err)
	}
	return v, nil
}

// AppendTo appends the value, version 0.
func (v ConsumerGroupPartitionMetadataValue) AppendTo(dst []byte) []byte {
	dst = crAppendInt16(dst, consumerValueVersion)
	dst = crAppendArrayLen(dst, len(v.Topics))
	for _, t := range v.Topics {
		dst = append(dst, t.TopicID[:]...)
		dst = crAppendCompactString(dst, t.TopicName)
		dst = crAppendInt32(dst, t.NumPartitions)
		dst = crAppendArrayLen(dst, len(t.PartitionMetadata))
		for _, p := range t.PartitionMetadata {
			dst = crAppendInt32(dst, p.Partition)
			dst = crAppendArrayLen(dst, len(p.Racks))
			for _, rack := range p.Racks {
				dst = crAppendCompactString(dst, rack)
			}
			dst = crAppendUvarint(dst, 0)
		}
		dst = crAppendUvarint(dst, 0)
	}
	return crAppendUvarint(dst, 0)
}

// DecodeConsumerGroupPartitionMetadataValue decodes a
// ConsumerGroupPartitionMetadataValue.
func DecodeConsumerGroupPartitionMetadataValue(b []byte) (ConsumerGroupPartitionMetadataValue, error) {
	var v ConsumerGroupPartitionMetadataValue
	r, err := crValueReader(b, "ConsumerGroupPartitionMetadataValue")
	if err != nil {
		return v, err
	}
	// A topic takes at least 16+1+4+1+1 bytes, a partition 4+1+1, a rack 1.
	if n := r.arrayLen("Topics", 23); n > 0 {
		v.Topics = make([]PartitionMetadataTopic, n)
		for i := range v.Topics {
			t := &v.Topics[i]
			t.TopicID = r.uuid("TopicId")
			t.TopicName = r.compactString("TopicName")
			t.NumPartitions = r.int32("NumPartitions")
			if n := r.arrayLen("PartitionMetadata", 6); n > 0 {
				t.PartitionMetadata = make([]PartitionRacks, n)
				for j := range t.PartitionMetadata {
					p := &t.PartitionMetadata[j]
					p.Partition = r.int32("Partition")
					p.Racks = r.compactStrings("Racks")
					r.tags(nil)
				}
			}
			r.tags(nil)
		}
	}
	r.tags(nil)
	if err := r.finish(); err != nil {
		return ConsumerGroupPartitionMetadataValue{}, fmt.Errorf("decode ConsumerGroupPartitionMetadataValue: %w", err)
	}
	return v, nil
}

// AppendTo appends the value, version 0, with ClassicMemberMetadata as
// tag 0 when set (a tagged nullable struct: its size, a presence varint
// of 1, then the struct).
func (v ConsumerMemberMetadataValue) AppendTo(dst []byte) []byte {
	dst = crAppendInt16(dst, consumerValueVersion)
	dst = crAppendNullableString(dst, v.InstanceID)
	dst = crAppendNullableString(dst, v.RackID)
	dst = crAppendCompactString(dst, v.ClientID)
	dst = crAppendCompactString(dst, v.ClientHost)
	dst = crAppendArrayLen(dst, len(v.SubscribedTopicNames))
	for _, name := range v.SubscribedTopicNames {
		dst = crAppendCompactString(dst, name)
	}
	dst = crAppendNullableString(dst, v.SubscribedTopicRegex)
	dst = crAppendInt32(dst, v.RebalanceTimeoutMs)
	dst = crAppendNullableString(dst, v.ServerAssignor)
	if v.Classic == nil {
		return crAppendUvarint(dst, 0)
	}
	body := crAppendInt32(nil, v.Classic.SessionTimeoutMs)
	body = crAppendArrayLen(body, len(v.Classic.SupportedProtocols))
	for _, p := range v.Classic.SupportedProtocols {
		body = crAppendCompactString(body, p.Name)
		body = crAppendCompactBytes(body, p.Metadata)
		body = crAppendUvarint(body, 0)
	}
	body = crAppendUvarint(body, 0)
	dst = crAppendUvarint(dst, 1)
	dst = crAppendUvarint(dst, 0)
	dst = crAppendUvarint(dst, uint64(len(body))+1)
	dst = crAppendUvarint(dst, 1)
	return append(dst, body...)
}

// DecodeConsumerMemberMetadataValue decodes a
// ConsumerGroupMemberMetadataValue.
func DecodeConsumerMemberMetadataValue(b []byte) (ConsumerMemberMetadataValue, error) {
	var v ConsumerMemberMetadataValue
	r, err := crValueReader(b, "ConsumerGroupMemberMetadataValue")
	if err != nil {
		return v, err
	}
	v.InstanceID = r.nullableString("InstanceId")
	v.RackID = r.nullableString("RackId")
	v.ClientID = r.compactString("ClientId")
	v.ClientHost = r.compactString("ClientHost")
	v.SubscribedTopicNames = r.compactStrings("SubscribedTopicNames")
	v.SubscribedTopicRegex = r.nullableString("SubscribedTopicRegex")
	v.RebalanceTimeoutMs = r.int32("RebalanceTimeoutMs")
	v.ServerAssignor = r.nullableString("ServerAssignor")
	r.tags(func(tag uint64, t *crReader) bool {
		if tag != 0 {
			return false
		}
		if t.uvarint("ClassicMemberMetadata") == 0 {
			return true // null
		}
		cm := &ClassicMemberMetadata{SessionTimeoutMs: t.int32("SessionTimeoutMs")}
		if n := t.arrayLen("SupportedProtocols", 3); n > 0 {
			cm.SupportedProtocols = make([]Protocol, n)
			for i := range cm.SupportedProtocols {
				cm.SupportedProtocols[i].Name = t.compactString("SupportedProtocols.Name")
				cm.SupportedProtocols[i].Metadata = t.compactBytes("SupportedProtocols.Metadata")
				t.tags(nil)
			}
		}
		t.tags(nil)
		v.Classic = cm
		return true
	})
	if err := r.finish(); err != nil {
		return ConsumerMemberMetadataValue{}, fmt.Errorf("decode ConsumerGroupMemberMetadataValue: %w", err)
	}
	return v, nil
}

// AppendTo appends the value, version 0.
func (v ConsumerTargetAssignmentMetadataValue) AppendTo(dst []byte) []byte {
	dst = crAppendInt16(dst, consumerValueVersion)
	dst = crAppendInt32(dst, v.AssignmentEpoch)
	return crAppendUvarint(dst, 0)
}

// DecodeConsumerTargetAssignmentMetadataValue decodes a
// ConsumerGroupTargetAssignmentMetadataValue.
func DecodeConsumerTargetAssignmentMetadataValue(b []byte) (ConsumerTargetAssignmentMetadataValue, error) {
	var v ConsumerTargetAssignmentMetadataValue
	r, err := crValueReader(b, "ConsumerGroupTargetAssignmentMetadataValue")
	if err != nil {
		return v, err
	}
	v.AssignmentEpoch = r.int32("AssignmentEpoch")
	r.tags(nil)
	if err := r.finish(); err != nil {
		return ConsumerTargetAssignmentMetadataValue{}, fmt.Errorf("decode ConsumerGroupTargetAssignmentMetadataValue: %w", err)
	}
	return v, nil
}

// AppendTo appends the value, version 0.
func (v ConsumerTargetAssignmentMemberValue) AppendTo(dst []byte) []byte {
	dst = crAppendInt16(dst, consumerValueVersion)
	dst = crAppendTopicPartitions(dst, v.TopicPartitions)
	return crAppendUvarint(dst, 0)
}

// DecodeConsumerTargetAssignmentMemberValue decodes a
// ConsumerGroupTargetAssignmentMemberValue.
func DecodeConsumerTargetAssignmentMemberValue(b []byte) (ConsumerTargetAssignmentMemberValue, error) {
	var v ConsumerTargetAssignmentMemberValue
	r, err := crValueReader(b, "ConsumerGroupTargetAssignmentMemberValue")
	if err != nil {
		return v, err
	}
	v.TopicPartitions = r.topicPartitions("TopicPartitions")
	r.tags(nil)
	if err := r.finish(); err != nil {
		return ConsumerTargetAssignmentMemberValue{}, fmt.Errorf("decode ConsumerGroupTargetAssignmentMemberValue: %w", err)
	}
	return v, nil
}

// AppendTo appends the value, version 0.
func (v ConsumerCurrentAssignmentValue) AppendTo(dst []byte) []byte {
	dst = crAppendInt16(dst, consumerValueVersion)
	dst = crAppendInt32(dst, v.MemberEpoch)
	dst = crAppendInt32(dst, v.PreviousMemberEpoch)
	dst = append(dst, byte(v.State))
	dst = crAppendTopicPartitions(dst, v.AssignedPartitions)
	dst = crAppendTopicPartitions(dst, v.PartitionsPendingRevocation)
	return crAppendUvarint(dst, 0)
}

// DecodeConsumerCurrentAssignmentValue decodes a
// ConsumerGroupCurrentMemberAssignmentValue.
func DecodeConsumerCurrentAssignmentValue(b []byte) (ConsumerCurrentAssignmentValue, error) {
	var v ConsumerCurrentAssignmentValue
	r, err := crValueReader(b, "ConsumerGroupCurrentMemberAssignmentValue")
	if err != nil {
		return v, err
	}
	v.MemberEpoch = r.int32("MemberEpoch")
	v.PreviousMemberEpoch = r.int32("PreviousMemberEpoch")
	v.State = r.int8("State")
	v.AssignedPartitions = r.topicPartitions("AssignedPartitions")
	v.PartitionsPendingRevocation = r.topicPartitions("PartitionsPendingRevocation")
	r.tags(nil)
	if err := r.finish(); err != nil {
		return ConsumerCurrentAssignmentValue{}, fmt.Errorf("decode ConsumerGroupCurrentMemberAssignmentValue: %w", err)
	}
	return v, nil
}

// Encoding helpers. Names start with cr (consumer records) to keep them
// apart from the rest of the package.

func crAppendInt16(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(v))
}

func crAppendInt32(dst []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(v))
}

func crAppendInt64(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

func crAppendUvarint(dst []byte, v uint64) []byte {
	return binary.AppendUvarint(dst, v)
}

// crAppendString appends a non-flexible (key) string: int16 length.
func crAppendString(dst []byte, s string) []byte {
	return append(crAppendInt16(dst, int16(len(s))), s...)
}

func crAppendCompactString(dst []byte, s string) []byte {
	return append(crAppendUvarint(dst, uint64(len(s))+1), s...)
}

func crAppendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return crAppendUvarint(dst, 0)
	}
	return crAppendCompactString(dst, *s)
}

func crAppendCompactBytes(dst []byte, b []byte) []byte {
	return append(crAppendUvarint(dst, uint64(len(b))+1), b...)
}

func crAppendArrayLen(dst []byte, n int) []byte {
	return crAppendUvarint(dst, uint64(n)+1)
}

func crAppendTopicPartitions(dst []byte, tps []TopicPartitions) []byte {
	dst = crAppendArrayLen(dst, len(tps))
	for _, tp := range tps {
		dst = append(dst, tp.TopicID[:]...)
		dst = crAppendArrayLen(dst, len(tp.Partitions))
		for _, p := range tp.Partitions {
			dst = crAppendInt32(dst, p)
		}
		dst = crAppendUvarint(dst, 0)
	}
	return dst
}

// crReader reads a record's fields; the first error sticks and every later
// read returns a zero value, so decoders check once, at finish. Lengths
// are checked against the remaining bytes before anything is allocated.
type crReader struct {
	b   []byte
	err error
}

// crValueReader checks a value's version and returns a reader of its fields.
func crValueReader(b []byte, what string) (*crReader, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("decode %s: value of %d bytes", what, len(b))
	}
	if version := int16(binary.BigEndian.Uint16(b)); version != consumerValueVersion {
		return nil, fmt.Errorf("decode %s: version %d: %w", what, version, ErrUnknownValueVersion)
	}
	return &crReader{b: b[2:]}, nil
}

func (r *crReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// finish reports the first error, or bytes left over after the value.
func (r *crReader) finish() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the last field", len(r.b))
	}
	return r.err
}

func (r *crReader) take(n int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail("%s: need %d bytes, have %d", field, n, len(r.b))
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *crReader) int8(field string) int8 {
	if b := r.take(1, field); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *crReader) int16(field string) int16 {
	if b := r.take(2, field); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *crReader) int32(field string) int32 {
	if b := r.take(4, field); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *crReader) int64(field string) int64 {
	if b := r.take(8, field); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *crReader) uuid(field string) (id [16]byte) {
	copy(id[:], r.take(16, field))
	return id
}

// uvarint reads an unsigned varint of at most 5 bytes holding a uint32, as
// Kafka's ByteUtils.readUnsignedVarint.
func (r *crReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[:min(len(r.b), 5)])
	if n <= 0 || v > math.MaxUint32 {
		r.fail("%s: bad unsigned varint", field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// string reads a non-flexible (key) string: int16 length, not null.
func (r *crReader) string(field string) string {
	n := r.int16(field)
	if r.err == nil && n < 0 {
		r.fail("%s: null", field)
	}
	return string(r.take(int(max(n, 0)), field))
}

// compactLen reads a compact length: -1 for null.
func (r *crReader) compactLen(field string) int {
	v := r.uvarint(field)
	if v > math.MaxInt32 {
		r.fail("%s: length %d", field, int64(v)-1)
		return 0
	}
	return int(v) - 1
}

func (r *crReader) nullableString(field string) *string {
	n := r.compactLen(field)
	if r.err != nil || n < 0 {
		return nil
	}
	return r.stringOfLen(n, field)
}

func (r *crReader) compactString(field string) string {
	n := r.compactLen(field)
	if r.err == nil && n < 0 {
		r.fail("%s: null", field)
	}
	if s := r.stringOfLen(n, field); s != nil {
		return *s
	}
	return ""
}

// compactBytes reads non-nullable compact bytes (a copy).
func (r *crReader) compactBytes(field string) []byte {
	n := r.compactLen(field)
	if r.err == nil && n < 0 {
		r.fail("%s: null", field)
	}
	if r.err != nil {
		return nil
	}
	return append([]byte{}, r.take(n, field)...)
}

func (r *crReader) stringOfLen(n int, field string) *string {
	if r.err != nil {
		return nil
	}
	if n > crMaxString {
		r.fail("%s: length %d", field, n)
		return nil
	}
	b := r.take(n, field)
	if r.err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// arrayLen reads the length of a non-nullable compact array whose elements
// take at least minSize bytes each, so a length the remaining bytes cannot
// hold fails before the caller allocates.
func (r *crReader) arrayLen(field string, minSize int) int {
	n := r.compactLen(field)
	switch {
	case r.err != nil:
		return 0
	case n < 0:
		r.fail("%s: null", field)
		return 0
	case n > len(r.b)/minSize:
		r.fail("%s: %d elements in %d bytes", field, n, len(r.b))
		return 0
	}
	return n
}

// compactStrings reads a []string; empty is nil.
func (r *crReader) compactStrings(field string) []string {
	n := r.arrayLen(field, 1)
	if n == 0 {
		return nil
	}
	s := make([]string, n)
	for i := range s {
		s[i] = r.compactString(field)
	}
	return s
}

// topicPartitions reads a []TopicPartitions; empty is nil.
func (r *crReader) topicPartitions(field string) []TopicPartitions {
	n := r.arrayLen(field, 16+1+1)
	if n == 0 {
		return nil
	}
	tps := make([]TopicPartitions, n)
	for i := range tps {
		tps[i].TopicID = r.uuid(field + ".TopicId")
		if m := r.arrayLen(field+".Partitions", 4); m > 0 {
			tps[i].Partitions = make([]int32, m)
			for j := range tps[i].Partitions {
				tps[i].Partitions[j] = r.int32(field + ".Partitions")
			}
		}
		r.tags(nil)
	}
	return tps
}

// tags reads a tagged-field section. known, if not nil, reads the data of a
// tag it knows (from its own reader, which must consume all of it) and
// reports whether it knew the tag; unknown tags are skipped.
func (r *crReader) tags(known func(tag uint64, t *crReader) bool) {
	n := r.uvarint("tagged fields")
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint("tag")
		size := r.uvarint("tag size")
		data := r.take(int(size), "tag data")
		if r.err != nil || known == nil {
			continue
		}
		t := crReader{b: data}
		if known(tag, &t) {
			if err := t.finish(); err != nil {
				r.fail("tag %d: %w", tag, err)
			}
		}
	}
}
