package broker

import (
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/broker/group"
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
