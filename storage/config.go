package storage

import (
	"math"
	"math/rand/v2"
	"time"
)

// LogConfig is the per-partition configuration of a log: Kafka's topic-level
// configs (segment.bytes, retention.ms, ...) with the broker's log.* values as
// defaults. A Log reads it under its lock; change it with Log.SetConfig.
type LogConfig struct {
	// SegmentBytes is segment.bytes: roll when the active segment would grow
	// past it. Kafka's default is 1 GiB.
	SegmentBytes int64
	// SegmentMs is segment.ms: roll a segment whose first batch is older
	// than this, even if it is not full. Default 7 days.
	SegmentMs int64
	// SegmentJitterMs is segment.jitter.ms: each segment rolls up to this
	// much (drawn at random when the segment is created or opened) before
	// segment.ms, so that partitions created together do not all roll, and
	// fsync their rolled segments, at the same moment. Default 0.
	SegmentJitterMs int64
	// SegmentIndexBytes is segment.index.bytes: the size each .index and
	// .timeindex is preallocated to. Default 10 MiB.
	SegmentIndexBytes int
	// IndexIntervalBytes is index.interval.bytes: bytes of batches between
	// sparse index entries. Default 4096.
	IndexIntervalBytes int
	// RetentionMs is retention.ms: delete whole segments whose newest record
	// is older than this; -1 keeps them forever. Default 7 days.
	RetentionMs int64
	// RetentionBytes is retention.bytes: delete the oldest segments while
	// the partition is larger than this; -1 means no size limit (default).
	RetentionBytes int64
	// FlushMessages is flush.messages: fsync after this many appended
	// messages. Kafka's default (effectively never) relies on replication.
	FlushMessages int64
	// FlushMs is flush.ms: fsync when the oldest unflushed append is older
	// than this. Default effectively never.
	FlushMs int64
	// MaxMessageBytes is max.message.bytes: the largest record batch a
	// producer may append (1048588 by default). Followers are not held to it.
	MaxMessageBytes int
	// FileDeleteDelayMs is file.delete.delay.ms: how long a deleted segment's
	// files stay open (renamed *.deleted) so that in-flight fetches reading
	// them with sendfile complete. Default 60 s.
	FileDeleteDelayMs int64
	// MessageTimestampType is message.timestamp.type: "CreateTime" keeps the
	// producer's timestamps, "LogAppendTime" stamps the broker's clock.
	MessageTimestampType string
	// Compact is cleanup.policy including "compact": the log cleaner keeps
	// only the latest record of each key (cleaner.go).
	Compact bool
	// NoDelete is cleanup.policy without "delete" (cleanup.policy=compact):
	// retention.ms and retention.bytes do not apply, only deletions below
	// the log start offset. The zero value keeps Kafka's default policy,
	// delete.
	NoDelete bool
	// DeleteRetentionMs is delete.retention.ms: how long the cleaner keeps
	// a tombstone after it first saw it (KIP-534's delete horizon). 0
	// means the default, 1 day; a negative value means none (the broker
	// maps delete.retention.ms=0 to -1).
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose newest
	// record is younger than this is not cleaned yet. Default 0.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms (KIP-354): a record is
	// cleaned at the latest this long after its batch's timestamp,
	// whatever the dirty ratio, and the segments of a compacted log roll
	// after at most this long (the cleaner never touches the active one).
	// 0 or less means never, Kafka's default.
	MaxCompactionLagMs int64
	// Preallocate is preallocate: each new segment file reserves
	// SegmentBytes of disk blocks up front, and gives back what it did
	// not fill when it rolls or the log closes. Default false.
	Preallocate bool
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the cleaner
	// cleans a log once its dirty bytes make up this share of its
	// cleanable bytes. 0 means the default, 0.5; a negative value means 0
	// (clean whenever anything is dirty; the broker maps 0 to -1).
	MinCleanableDirtyRatio float64
}

// Kafka's defaults for the settings above.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * int64(time.Hour/time.Millisecond)
	DefaultSegmentIndexBytes  = 10 << 20
	DefaultIndexIntervalBytes = 4096
	DefaultRetentionMs        = 7 * 24 * int64(time.Hour/time.Millisecond)
	DefaultMaxMessageBytes    = 1048588
	DefaultFileDeleteDelayMs  = 60_000
	// noFlush is Kafka's Long.MAX_VALUE default for flush.messages/flush.ms.
	noFlush = int64(^uint64(0) >> 1)
)

// DefaultLogConfig returns Kafka's defaults.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:           DefaultSegmentBytes,
		SegmentMs:              DefaultSegmentMs,
		SegmentIndexBytes:      DefaultSegmentIndexBytes,
		IndexIntervalBytes:     DefaultIndexIntervalBytes,
		RetentionMs:            DefaultRetentionMs,
		RetentionBytes:         -1,
		FlushMessages:          noFlush,
		FlushMs:                noFlush,
		MaxMessageBytes:        DefaultMaxMessageBytes,
		FileDeleteDelayMs:      DefaultFileDeleteDelayMs,
		MessageTimestampType:   "CreateTime",
		DeleteRetentionMs:      DefaultDeleteRetentionMs,
		MinCleanableDirtyRatio: DefaultMinCleanableDirtyRatio,
	}
}

// normalized fills zero values with defaults so a partially filled config
// (common in tests) behaves like Kafka's.
func (c LogConfig) normalized() LogConfig {
	d := DefaultLogConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	// segment.bytes is a Java int: index positions are 4 bytes.
	c.SegmentBytes = min(c.SegmentBytes, int64(^uint32(0)>>1))
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentIndexBytes <= 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = d.RetentionMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = -1
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = noFlush
	}
	if c.FlushMs <= 0 {
		c.FlushMs = noFlush
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.FileDeleteDelayMs < 0 {
		c.FileDeleteDelayMs = 0
	}
	if c.MessageTimestampType == "" {
		c.MessageTimestampType = d.MessageTimestampType
	}
	// Negative values stay negative (and mean 0) so that normalizing twice
	// changes nothing.
	if c.DeleteRetentionMs == 0 {
		c.DeleteRetentionMs = d.DeleteRetentionMs
	}
	if c.MinCleanableDirtyRatio == 0 {
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	}
	c.MinCompactionLagMs = max(c.MinCompactionLagMs, 0)
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = math.MaxInt64
	}
	return c
}

// rollMs is how old the active segment's first batch may get before the
// segment rolls: segment.ms, and on a compacted log at most
// max.compaction.lag.ms (Kafka's LogConfig.maxSegmentMs).
func (c LogConfig) rollMs() int64 {
	if c.Compact {
		return min(c.SegmentMs, c.MaxCompactionLagMs)
	}
	return c.SegmentMs
}

// randomSegmentJitter is a new segment's share of segment.jitter.ms
// (Kafka's LogConfig.randomSegmentJitter): uniform below the smaller of
// the jitter and the roll interval. (Kafka bounds it by segment.ms alone,
// which on a compacted log with a shorter max.compaction.lag.ms can make
// a segment roll on every append.)
func (c LogConfig) randomSegmentJitter() int64 {
	if bound := min(c.SegmentJitterMs, c.rollMs()); bound > 0 {
		return rand.Int64N(bound)
	}
	return 0
}
