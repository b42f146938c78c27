package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/keelstream/keel/client"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's formatters of the group coordinator's records, for reading
// __consumer_offsets with keel consume --formatter, as kafka-console-consumer.sh
// reads it: each record of the kind they print as one JSON object,
// {"key":{"type":T,"data":{...}},"value":{"version":V,"data":{...}}} (value
// null for a tombstone), the fields named and ordered as Kafka's generated
// JSON converters write them; records of other kinds are left out.

// coordinatorFormatters are the formatter classes by name (Kafka 4's and
// the Scala ones of Kafka 3.x) and the key types each prints.
var coordinatorFormatters = map[string][]int16{
	"org.apache.kafka.tools.consumer.OffsetsMessageFormatter":                    {0, 1},
	"kafka.coordinator.group.GroupMetadataManager$OffsetsMessageFormatter":       {0, 1},
	"org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter":              {2},
	"kafka.coordinator.group.GroupMetadataManager$GroupMetadataMessageFormatter": {2},
}

// jsonObject writes a JSON object's fields in order.
type jsonObject struct{ b bytes.Buffer }

func (o *jsonObject) field(name string, v any) *jsonObject {
	if o.b.Len() == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	k, _ := json.Marshal(name)
	o.b.Write(k)
	o.b.WriteByte(':')
	switch v := v.(type) {
	case *jsonObject:
		o.b.Write(v.bytes())
	case json.RawMessage:
		o.b.Write(v)
	default:
		raw, _ := json.Marshal(v) // strings, numbers, nil: cannot fail
		o.b.Write(raw)
	}
	return o
}

func (o *jsonObject) bytes() []byte {
	if o.b.Len() == 0 {
		return []byte("{}")
	}
	return append(o.b.Bytes(), '}')
}

// writeCoordinatorRecord prints r if its key is one of types; a record
// whose bytes do not decode is a *recordFormatError, as Kafka's formatter
// fails on it ("Could not read record at offset N").
func writeCoordinatorRecord(w io.Writer, r *client.Record, types []int16) error {
	if len(r.Key) < 2 {
		return nil // no key: not a coordinator record
	}
	typ := int16(binary.BigEndian.Uint16(r.Key))
	if !slices.Contains(types, typ) {
		return nil
	}
	key, value, err := coordinatorJSON(typ, r.Key, r.Value)
	if err != nil {
		return &recordFormatError{fmt.Errorf("%s-%d: could not read record at offset %d due to: %w", r.Topic, r.Partition, r.Offset, err)}
	}
	out := new(jsonObject).field("key", new(jsonObject).field("type", typ).field("data", key))
	if value == nil {
		out.field("value", nil)
	} else {
		out.field("value", value)
	}
	_, err = w.Write(append(out.bytes(), '\n'))
	return err
}

// coordinatorJSON decodes an offset commit (types 0, 1) or group metadata
// (type 2) record; value is nil for a tombstone.
func coordinatorJSON(typ int16, key, val []byte) (k, v *jsonObject, err error) {
	switch typ {
	case 0, 1:
		var ok kmsg.OffsetCommitKey
		if err := ok.ReadFrom(key); err != nil {
			return nil, nil, fmt.Errorf("offset commit key: %w", err)
		}
		k = new(jsonObject).field("group", ok.Group).field("topic", ok.Topic).field("partition", ok.Partition)
		if val == nil {
			return k, nil, nil
		}
		var ov kmsg.OffsetCommitValue
		if err := ov.ReadFrom(val); err != nil {
			return nil, nil, fmt.Errorf("offset commit value: %w", err)
		}
		d := new(jsonObject).field("offset", ov.Offset)
		if ov.Version >= 3 {
			d.field("leaderEpoch", ov.LeaderEpoch)
		}
		d.field("metadata", ov.Metadata).field("commitTimestamp", ov.CommitTimestamp)
		if ov.Version == 1 {
			d.field("expireTimestamp", ov.ExpireTimestamp)
		}
		if ov.Version >= 4 && ov.TopicID != [16]byte{} {
			d.field("topicId", base64.RawURLEncoding.EncodeToString(ov.TopicID[:]))
		}
		return k, new(jsonObject).field("version", ov.Version).field("data", d), nil
	case 2:
		var gk kmsg.GroupMetadataKey
		if err := gk.ReadFrom(key); err != nil {
			return nil, nil, fmt.Errorf("group metadata key: %w", err)
		}
		k = new(jsonObject).field("group", gk.Group)
		if val == nil {
			return k, nil, nil
		}
		var gv kmsg.GroupMetadataValue
		if err := gv.ReadFrom(val); err != nil {
			return nil, nil, fmt.Errorf("group metadata value: %w", err)
		}
		d := new(jsonObject).field("protocolType", gv.ProtocolType).field("generation", gv.Generation).
			field("protocol", gv.Protocol).field("leader", gv.Leader)
		if gv.Version >= 2 {
			d.field("currentStateTimestamp", gv.CurrentStateTimestamp)
		}
		members := []byte{'['}
		for i, m := range gv.Members {
			if i > 0 {
				members = append(members, ',')
			}
			mj := new(jsonObject).field("memberId", m.MemberID)
			if gv.Version >= 3 {
				mj.field("groupInstanceId", m.InstanceID)
			}
			mj.field("clientId", m.ClientID).field("clientHost", m.ClientHost)
			if gv.Version >= 1 {
				mj.field("rebalanceTimeout", m.RebalanceTimeoutMillis)
			}
			mj.field("sessionTimeout", m.SessionTimeoutMillis).
				field("subscription", base64.StdEncoding.EncodeToString(m.Subscription)).
				field("assignment", base64.StdEncoding.EncodeToString(m.Assignment))
			members = append(members, mj.bytes()...)
		}
		d.field("members", json.RawMessage(append(members, ']')))
		return k, new(jsonObject).field("version", gv.Version).field("data", d), nil
	}
	return nil, nil, fmt.Errorf("record type %s", strconv.Itoa(int(typ)))
}
