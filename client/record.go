package client

import (
	"fmt"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Header is one record header (KIP-82). A nil Value is a null header value.
type Header = record.RecordHeader

// Record is what a Producer sends and a Consumer returns.
//
// For Produce, set Topic, Key, Value and optionally Headers, Timestamp (zero
// means now) and Partition (used only by ManualPartitioner). The producer
// fills Partition, Offset and Timestamp when the record is acknowledged
// (Offset stays -1 with acks=0). The producer owns the Record from Produce
// until its callback runs: do not modify it, or its Key, Value and Headers,
// in between.
//
// A consumed Record has every field set; Key, Value and Headers may alias the
// fetch response's buffer.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// TimestampType says whose Timestamp is: the producer's (CreateTime)
	// or the broker's, stamped at append (LogAppendTime, a topic with
	// message.timestamp.type=LogAppendTime), as Kafka's
	// ConsumerRecord.timestampType(). Set on consumed records, and on
	// produced ones once acknowledged.
	TimestampType TimestampType
	Key           []byte
	Value         []byte
	Headers       []Header
	// LeaderEpoch is the leader epoch of the batch the record was in
	// (consumed records; -1 when unknown).
	LeaderEpoch int32
	// ProducerID and ProducerEpoch identify the idempotent or
	// transactional producer that wrote a consumed record (-1 if none).
	ProducerID    int64
	ProducerEpoch int16
}

// TimestampType is a record timestamp's type.
type TimestampType int8

const (
	// CreateTime: the producer set the timestamp (Kafka's default).
	CreateTime TimestampType = 0
	// LogAppendTime: the broker set it when it appended the batch.
	LogAppendTime TimestampType = 1
)

// String is Kafka's name for the type.
func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// KeyString and ValueString are conveniences for examples and tools.
func (r *Record) KeyString() string { return string(r.Key) }

// ValueString returns the value as a string.
func (r *Record) ValueString() string { return string(r.Value) }

// StringRecord is a record for topic with a string value and no key.
func StringRecord(topic, value string) *Record {
	return &Record{Topic: topic, Value: []byte(value)}
}

// KeyStringRecord is a record for topic with a string key and value.
func KeyStringRecord(topic, key, value string) *Record {
	return &Record{Topic: topic, Key: []byte(key), Value: []byte(value)}
}

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is "topic-partition", as Kafka's TopicPartition.toString, which
// its tools print.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }
