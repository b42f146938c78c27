package metadata

import (
	"fmt"
	"slices"
	"strconv"
)

// Group configs (KIP-848's dynamic group configs, Kafka's GroupConfig):
// per-group overrides of the consumer protocol's session timeout and
// heartbeat interval, kept as ConfigRecords of resource type GROUP and set
// with IncrementalAlterConfigs (kafka-configs.sh --entity-type groups).

// ConfigResourceGroup is the GROUP config resource type.
const ConfigResourceGroup int8 = 32

// The group configs Keel has: the consumer protocol's. Kafka's share.* and
// streams.* group configs belong to group types Keel does not serve.
const (
	GroupConsumerSessionTimeoutMs    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"
)

// GroupConfigNames are the group configs, sorted.
var GroupConfigNames = []string{GroupConsumerHeartbeatIntervalMs, GroupConsumerSessionTimeoutMs}

// GroupConfigBounds are the broker's group.consumer.* settings a group
// config defaults to and must stay within (Kafka's GroupCoordinatorConfig).
type GroupConfigBounds struct {
	SessionTimeoutMs, MinSessionTimeoutMs, MaxSessionTimeoutMs          int64
	HeartbeatIntervalMs, MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs int64
}

// DefaultGroupConfigBounds is Kafka's defaults.
func DefaultGroupConfigBounds() GroupConfigBounds {
	return GroupConfigBounds{SessionTimeoutMs: 45000, MinSessionTimeoutMs: 45000, MaxSessionTimeoutMs: 60000,
		HeartbeatIntervalMs: 5000, MinHeartbeatIntervalMs: 5000, MaxHeartbeatIntervalMs: 15000}
}

// Default is a group config's value when the group does not set it.
func (b GroupConfigBounds) Default(name string) string {
	switch name {
	case GroupConsumerSessionTimeoutMs:
		return strconv.FormatInt(b.SessionTimeoutMs, 10)
	case GroupConsumerHeartbeatIntervalMs:
		return strconv.FormatInt(b.HeartbeatIntervalMs, 10)
	}
	return ""
}

// ValidateGroupConfigs checks a group's complete dynamic configs as Kafka's
// GroupConfig.validate does, with the messages it gives: known names, int
// values within the broker's bounds, and a heartbeat interval below the
// session timeout.
func ValidateGroupConfigs(configs map[string]string, b GroupConfigBounds) error {
	if b == (GroupConfigBounds{}) {
		b = DefaultGroupConfigBounds()
	}
	for name := range configs {
		if !slices.Contains(GroupConfigNames, name) {
			return fmt.Errorf("Unknown group config name: %s", name)
		}
	}
	value := func(name string, def int64) (int64, error) {
		v, ok := configs[name]
		if !ok {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("Invalid value %s for configuration %s: Not a number of type INT", v, name)
		}
		return n, nil
	}
	hb, err := value(GroupConsumerHeartbeatIntervalMs, b.HeartbeatIntervalMs)
	if err != nil {
		return err
	}
	session, err := value(GroupConsumerSessionTimeoutMs, b.SessionTimeoutMs)
	if err != nil {
		return err
	}
	switch {
	case hb < b.MinHeartbeatIntervalMs:
		return fmt.Errorf("%s must be greater than or equal to group.consumer.min.heartbeat.interval.ms", GroupConsumerHeartbeatIntervalMs)
	case hb > b.MaxHeartbeatIntervalMs:
		return fmt.Errorf("%s must be less than or equal to group.consumer.max.heartbeat.interval.ms", GroupConsumerHeartbeatIntervalMs)
	case session < b.MinSessionTimeoutMs:
		return fmt.Errorf("%s must be greater than or equal to group.consumer.min.session.timeout.ms", GroupConsumerSessionTimeoutMs)
	case session > b.MaxSessionTimeoutMs:
		return fmt.Errorf("%s must be less than or equal to group.consumer.max.session.timeout.ms", GroupConsumerSessionTimeoutMs)
	case hb >= session:
		return fmt.Errorf("%s must be less than %s", GroupConsumerHeartbeatIntervalMs, GroupConsumerSessionTimeoutMs)
	}
	return nil
}
