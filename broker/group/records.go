package group

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record for __consumer_offsets: a key and a value, or a nil
// Value for a tombstone (compaction then removes the key).
type Record struct {
	Key   []byte
	Value []byte
}

// Key versions, as Kafka's GroupMetadataManager writes them: offset commit
// keys are version 1 (0 is the same layout), group metadata keys version 2.
const (
	offsetKeyVersion   int16 = 1
	groupKeyVersion    int16 = 2
	groupValueVersion  int16 = 3 // KIP-345 instance ids; v4 is only flexible
	offsetValueVersion int16 = 3 // with the leader epoch (KIP-320)
	// offsetValueVersionExpire is written when the commit carried an
	// explicit retention (OffsetCommit v2–v4), the only version with an
	// expire timestamp.
	offsetValueVersionExpire int16 = 1
)

// ErrUnknownRecord is a __consumer_offsets key of a version this build
// does not read (share, streams or regex records); loading skips it.
var ErrUnknownRecord = errors.New("unknown __consumer_offsets record version")

// OffsetKey encodes the key of a committed offset.
func OffsetKey(group, topic string, partition int32) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = offsetKeyVersion, group, topic, partition
	return k.AppendTo(nil)
}

// OffsetValue encodes a committed offset: version 1 when it has an explicit
// expire timestamp, version 3 otherwise (Kafka's offsetCommitValue).
func OffsetValue(o Offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTimestamp
	if o.ExpireTimestamp >= 0 {
		v.Version, v.ExpireTimestamp = offsetValueVersionExpire, o.ExpireTimestamp
	}
	return v.AppendTo(nil)
}

// GroupKey encodes the key of a group's metadata.
func GroupKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupKeyVersion, group
	return k.AppendTo(nil)
}

// groupValue encodes a group's metadata as Kafka's groupMetadataValue does:
// the selected protocol's subscription and the assignment of each member.
func groupValue(g *Group, now int64) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType, v.Generation = g.ProtocolType, g.Generation
	if g.Protocol != "" {
		v.Protocol = kmsg.StringPtr(g.Protocol)
	}
	if g.Leader != "" {
		v.Leader = kmsg.StringPtr(g.Leader)
	}
	v.CurrentStateTimestamp = now
	for _, m := range g.memberList() {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID, mv.ClientID, mv.ClientHost = m.ID, m.ClientID, m.ClientHost
		if m.InstanceID != "" {
			mv.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		mv.RebalanceTimeoutMillis = int32(m.RebalanceTimeoutMs)
		mv.SessionTimeoutMillis = int32(m.SessionTimeoutMs)
		mv.Subscription = m.metadata(g.Protocol)
		mv.Assignment = m.Assignment
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return v.AppendTo(nil)
}

// DecodedKey is a decoded __consumer_offsets key: an offset (Topic set),
// a group's metadata, or a KIP-848 consumer group record (Type 3–8;
// MemberID set for types 5, 7 and 8).
type DecodedKey struct {
	// Type is the key's leading int16: the key version of offset (0, 1)
	// and group metadata (2) keys, the record type of the others.
	Type      int16
	Group     string
	Topic     string
	Partition int32
	MemberID  string
	IsOffset  bool
}

// DecodeKey decodes a __consumer_offsets key. Types (key versions) 0 and
// 1 are offset commits, 2 group metadata, 3–8 KIP-848 consumer group
// records; others (share, regular expression, streams records) are
// ErrUnknownRecord, with Type set.
func DecodeKey(key []byte) (DecodedKey, error) {
	if len(key) < 2 {
		return DecodedKey{}, fmt.Errorf("key of %d bytes: %w", len(key), ErrUnknownRecord)
	}
	switch typ := int16(key[0])<<8 | int16(key[1]); typ {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return DecodedKey{}, fmt.Errorf("decode offset key: %w", err)
		}
		return DecodedKey{Type: typ, Group: k.Group, Topic: k.Topic, Partition: k.Partition, IsOffset: true}, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return DecodedKey{}, fmt.Errorf("decode group key: %w", err)
		}
		return DecodedKey{Type: typ, Group: k.Group}, nil
	case ConsumerGroupMetadataType, ConsumerGroupPartitionMetadataType, ConsumerGroupMemberMetadataType,
		ConsumerGroupTargetAssignmentMetadataType, ConsumerGroupTargetAssignmentMemberType,
		ConsumerGroupCurrentMemberAssignmentType:
		return decodeConsumerKey(typ, key)
	default:
		return DecodedKey{Type: typ}, fmt.Errorf("key version %d: %w", typ, ErrUnknownRecord)
	}
}

// DecodeOffsetValue decodes a committed offset (value versions 0–4).
func DecodeOffsetValue(value []byte) (Offset, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return Offset{}, fmt.Errorf("decode offset value: %w", err)
	}
	o := Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1}
	if v.Version >= 3 {
		o.LeaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.ExpireTimestamp = v.ExpireTimestamp
	}
	return o, nil
}

// decodeGroupValue decodes a group's metadata (value versions 0–4).
func decodeGroupValue(value []byte) (*kmsg.GroupMetadataValue, error) {
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("decode group value: %w", err)
	}
	return &v, nil
}
