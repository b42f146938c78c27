package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The Fetch versions FetchResponse.Encode supports: v4 (the first with
// record batches, magic 2) up to the newest kmsg knows.
const (
	MinFetchVersion int16 = 4
	MaxFetchVersion int16 = 18
)

// inlineRegionMax is the largest BytesRegion Encode copies into the encoded
// bytes; larger ones stay separate writev entries.
const inlineRegionMax = 4 << 10

// FetchResponse is a Fetch response whose records are Regions, so that they
// go from segment files to the socket without a user-space copy (DESIGN §5).
// Its fields mirror kmsg.FetchResponse; Encode writes exactly the bytes
// kmsg.FetchResponse.AppendTo would for the same response with the records
// inlined (tested byte-for-byte for every version).
type FetchResponse struct {
	ThrottleMillis int32
	ErrorCode      int16 // v7+: fetch session errors (KIP-227)
	SessionID      int32 // v7+
	Topics         []FetchTopic
	// NodeEndpoints (v16+, tag 0, KIP-951) lists the brokers named as
	// CurrentLeader of a NOT_LEADER_OR_FOLLOWER partition. Not written
	// below v16.
	NodeEndpoints []FetchNodeEndpoint
}

// FetchTopic is one topic of a FetchResponse.
type FetchTopic struct {
	Topic      string   // v4–v12
	TopicID    [16]byte // v13+ (KIP-516)
	Partitions []FetchPartition
}

// FetchPartition is one partition of a FetchTopic.
type FetchPartition struct {
	Partition        int32
	ErrorCode        int16
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64 // v5+
	// DivergingEpoch (v12+, tag 0, KIP-595): nil, or equal to the default
	// {-1, -1}, is not written.
	DivergingEpoch *FetchEpochEndOffset
	// CurrentLeader (v12+, tag 1, KIP-951): nil or {-1, -1} is not written.
	CurrentLeader *FetchLeader
	// SnapshotID (v12+, tag 2, KIP-630): nil or {-1, -1} is not written.
	SnapshotID *FetchSnapshotID
	// AbortedTransactions are sent to read_committed consumers; nil is
	// written as a null array, an empty slice as an empty one.
	AbortedTransactions  []FetchAbortedTransaction
	PreferredReadReplica int32 // v11+ (KIP-392); -1 for none
	// Records are the record batches, written in order. nil is written as
	// null records; an empty non-nil slice as zero-length records (what
	// Kafka sends when there is nothing to return).
	Records []Region
}

// FetchEpochEndOffset is a partition's diverging epoch.
type FetchEpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// FetchLeader is the leader a client should fetch from instead.
type FetchLeader struct {
	LeaderID    int32
	LeaderEpoch int32
}

// FetchSnapshotID names the snapshot a follower must fetch.
type FetchSnapshotID struct {
	EndOffset int64
	Epoch     int32
}

// FetchAbortedTransaction is one aborted transaction in the returned range.
type FetchAbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

// FetchNodeEndpoint is one broker of FetchResponse.NodeEndpoints.
type FetchNodeEndpoint struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
}

// Encode appends the response body, encoded for version, to b: the bytes
// around the records are encoded into b and each partition's Records are
// appended as Regions. It validates everything first, so on error b is
// unchanged.
//
// Concurrency: r is only read; b must be owned by the caller.
func (r *FetchResponse) Encode(version int16, b *Body) error {
	if err := r.validate(version); err != nil {
		return err
	}
	flexible := version >= 12
	buf := b.buf
	mark := len(buf)
	// flushTo hands the bytes encoded since mark to b before a region.
	flushTo := func() {
		b.buf = buf
		b.grew(len(buf) - mark)
	}

	buf = binary.BigEndian.AppendUint32(buf, uint32(r.ThrottleMillis))
	if version >= 7 {
		buf = binary.BigEndian.AppendUint16(buf, uint16(r.ErrorCode))
		buf = binary.BigEndian.AppendUint32(buf, uint32(r.SessionID))
	}
	buf = appendArrayLen(buf, len(r.Topics), flexible)
	for i := range r.Topics {
		t := &r.Topics[i]
		if version <= 12 {
			buf = appendString(buf, t.Topic, flexible)
		} else {
			buf = append(buf, t.TopicID[:]...)
		}
		buf = appendArrayLen(buf, len(t.Partitions), flexible)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			buf = binary.BigEndian.AppendUint32(buf, uint32(p.Partition))
			buf = binary.BigEndian.AppendUint16(buf, uint16(p.ErrorCode))
			buf = binary.BigEndian.AppendUint64(buf, uint64(p.HighWatermark))
			buf = binary.BigEndian.AppendUint64(buf, uint64(p.LastStableOffset))
			if version >= 5 {
				buf = binary.BigEndian.AppendUint64(buf, uint64(p.LogStartOffset))
			}
			if p.AbortedTransactions == nil {
				buf = appendNullLen(buf, flexible)
			} else {
				buf = appendArrayLen(buf, len(p.AbortedTransactions), flexible)
				for _, a := range p.AbortedTransactions {
					buf = binary.BigEndian.AppendUint64(buf, uint64(a.ProducerID))
					buf = binary.BigEndian.AppendUint64(buf, uint64(a.FirstOffset))
					if flexible {
						buf = append(buf, 0) // no tagged fields
					}
				}
			}
			if version >= 11 {
				buf = binary.BigEndian.AppendUint32(buf, uint32(p.PreferredReadReplica))
			}
			if p.Records == nil {
				buf = appendNullLen(buf, flexible)
			} else {
				buf = appendArrayLen(buf, int(recordsLen(p.Records)), flexible)
				for _, rg := range p.Records {
					if br, ok := rg.(BytesRegion); ok && len(br) <= inlineRegionMax {
						buf = append(buf, br...)
						continue
					}
					flushTo()
					b.AppendRegion(rg)
					buf, mark = b.buf, len(b.buf)
				}
			}
			if flexible {
				buf = appendPartitionTags(buf, p)
			}
		}
		if flexible {
			buf = append(buf, 0) // topic: no tagged fields
		}
	}
	if flexible {
		if version >= 16 && len(r.NodeEndpoints) > 0 {
			buf = append(buf, 1)
			buf = appendNodeEndpoints(buf, r.NodeEndpoints)
		} else {
			buf = append(buf, 0)
		}
	}
	flushTo()
	return nil
}

// validate checks what Encode cannot represent, so that Encode never fails
// half-way.
func (r *FetchResponse) validate(version int16) error {
	if version < MinFetchVersion || version > MaxFetchVersion {
		return fmt.Errorf("encode fetch response: version %d outside %d..%d", version, MinFetchVersion, MaxFetchVersion)
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if version <= 12 && len(t.Topic) > math.MaxInt16 {
			return fmt.Errorf("encode fetch response: topic name of %d bytes", len(t.Topic))
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			var total int64
			for _, rg := range p.Records {
				if rg == nil || rg.Len() < 0 {
					return fmt.Errorf("encode fetch response: %s partition %d: nil or negative-length region", t.Topic, p.Partition)
				}
				total += rg.Len()
			}
			if total > math.MaxInt32-1 {
				return fmt.Errorf("encode fetch response: %s partition %d: %d bytes of records: %w", t.Topic, p.Partition, total, errRecordsTooLarge)
			}
		}
	}
	for _, n := range r.NodeEndpoints {
		if len(n.Host) > math.MaxInt16 || (n.Rack != nil && len(*n.Rack) > math.MaxInt16) {
			return errors.New("encode fetch response: node endpoint host or rack too long")
		}
	}
	return nil
}

// errRecordsTooLarge reports records that cannot be framed (int32 length).
var errRecordsTooLarge = errors.New("records exceed a fetch response's int32 size")

// recordsLen is the total length of the regions.
func recordsLen(rs []Region) int64 {
	var n int64
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// appendPartitionTags writes a partition's tagged fields. Kafka writes a
// tagged field only when it differs from its default, and so does kmsg.
func appendPartitionTags(buf []byte, p *FetchPartition) []byte {
	de := p.DivergingEpoch != nil && (p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1)
	cl := p.CurrentLeader != nil && (p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1)
	sn := p.SnapshotID != nil && (p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1)
	n := 0
	for _, present := range [...]bool{de, cl, sn} {
		if present {
			n++
		}
	}
	buf = append(buf, byte(n))
	if de { // tag 0, 4+8 bytes + empty tags
		buf = append(buf, 0, 13)
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.DivergingEpoch.Epoch))
		buf = binary.BigEndian.AppendUint64(buf, uint64(p.DivergingEpoch.EndOffset))
		buf = append(buf, 0)
	}
	if cl { // tag 1, 4+4 bytes + empty tags
		buf = append(buf, 1, 9)
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.CurrentLeader.LeaderID))
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.CurrentLeader.LeaderEpoch))
		buf = append(buf, 0)
	}
	if sn { // tag 2, 8+4 bytes + empty tags
		buf = append(buf, 2, 13)
		buf = binary.BigEndian.AppendUint64(buf, uint64(p.SnapshotID.EndOffset))
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.SnapshotID.Epoch))
		buf = append(buf, 0)
	}
	return buf
}

// appendNodeEndpoints writes tag 0 of a v16+ response: the tag, its size,
// then the compact array of endpoints.
func appendNodeEndpoints(buf []byte, nodes []FetchNodeEndpoint) []byte {
	size := uvarintLen(uint64(len(nodes) + 1))
	for _, n := range nodes {
		size += 4 + compactLen(len(n.Host)) + 4 + 1 + 1 // id, host, port, rack (null: 1), tags
		if n.Rack != nil {
			size += compactLen(len(*n.Rack)) - 1
		}
	}
	buf = append(buf, 0)
	buf = binary.AppendUvarint(buf, uint64(size))
	buf = appendArrayLen(buf, len(nodes), true)
	for _, n := range nodes {
		buf = binary.BigEndian.AppendUint32(buf, uint32(n.NodeID))
		buf = appendString(buf, n.Host, true)
		buf = binary.BigEndian.AppendUint32(buf, uint32(n.Port))
		if n.Rack == nil {
			buf = append(buf, 0)
		} else {
			buf = appendString(buf, *n.Rack, true)
		}
		buf = append(buf, 0)
	}
	return buf
}

// appendArrayLen writes an array, bytes or records length: int32, or
// uvarint(n+1) when flexible (compact).
func appendArrayLen(buf []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(buf, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(buf, uint32(int32(n)))
}

// appendNullLen writes the length of a null array or bytes.
func appendNullLen(buf []byte, flexible bool) []byte {
	if flexible {
		return append(buf, 0)
	}
	return append(buf, 0xff, 0xff, 0xff, 0xff)
}

// appendString writes a non-null string: int16 length, or compact.
func appendString(buf []byte, s string, flexible bool) []byte {
	if flexible {
		buf = binary.AppendUvarint(buf, uint64(len(s))+1)
	} else {
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(s)))
	}
	return append(buf, s...)
}

// compactLen is the encoded size of a compact string or bytes of n bytes.
func compactLen(n int) int { return uvarintLen(uint64(n)+1) + n }

// uvarintLen is the encoded size of an unsigned varint.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
