package broker

import (
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/metadata"
)

// minutesDuration parses a whole number of minutes (offsets.retention.minutes).
func minutesDuration(dst *time.Duration) func(*Config, string) error {
	return func(_ *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		*dst = time.Duration(n) * time.Minute
		return err
	}
}

// groupConfig is the group state machine's configuration from the broker's.
func (c *Config) groupConfig() group.Config {
	return group.Config{
		MinSessionTimeoutMs:     c.GroupMinSessionTimeout.Milliseconds(),
		MaxSessionTimeoutMs:     c.GroupMaxSessionTimeout.Milliseconds(),
		MaxSize:                 c.GroupMaxSize,
		InitialRebalanceDelay:   c.GroupInitialRebalanceDelay.Milliseconds(),
		OffsetsRetentionMs:      c.OffsetsRetention.Milliseconds(),
		OffsetsRetentionCheckMs: max(c.OffsetsRetentionCheckInterval.Milliseconds(), 1),
		MaxMetadataSize:         c.OffsetMetadataMaxBytes,

		ConsumerSessionTimeoutMs:    c.ConsumerSessionTimeout.Milliseconds(),
		ConsumerHeartbeatIntervalMs: c.ConsumerHeartbeatInterval.Milliseconds(),
		ConsumerMaxSize:             c.ConsumerGroupMaxSize,
		ConsumerAssignors:           c.ConsumerAssignors,
		ConsumerMigrationPolicy:     c.ConsumerMigrationPolicy,
	}
}

// groupConfigBounds are the group.consumer.* settings group configs
// default to and are checked against.
func (c *Config) groupConfigBounds() metadata.GroupConfigBounds {
	return metadata.GroupConfigBounds{
		SessionTimeoutMs: c.ConsumerSessionTimeout.Milliseconds(), MinSessionTimeoutMs: c.ConsumerMinSessionTimeout.Milliseconds(),
		MaxSessionTimeoutMs: c.ConsumerMaxSessionTimeout.Milliseconds(), HeartbeatIntervalMs: c.ConsumerHeartbeatInterval.Milliseconds(),
		MinHeartbeatIntervalMs: c.ConsumerMinHeartbeatInterval.Milliseconds(), MaxHeartbeatIntervalMs: c.ConsumerMaxHeartbeatInterval.Milliseconds(),
	}
}

// groupConfigOverrides are a group's own consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms, 0 for those it does not set.
func groupConfigOverrides(img *metadata.Image, group string) (session, heartbeat int64) {
	res := metadata.ConfigResource{Type: metadata.ConfigResourceGroup, Name: group}
	if v, ok := img.Config(res, metadata.GroupConsumerSessionTimeoutMs); ok {
		session, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := img.Config(res, metadata.GroupConsumerHeartbeatIntervalMs); ok {
		heartbeat, _ = strconv.ParseInt(v, 10, 64)
	}
	return session, heartbeat
}
