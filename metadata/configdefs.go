package metadata

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ConfigValueType is the type of a config value (Kafka's ConfigDef.Type).
type ConfigValueType int

// The config types Keel's configs use.
const (
	ConfigBoolean ConfigValueType = iota
	ConfigString
	ConfigInt
	ConfigLong
	ConfigDouble
	ConfigList
)

func (t ConfigValueType) String() string {
	return [...]string{"BOOLEAN", "STRING", "INT", "LONG", "DOUBLE", "LIST"}[t]
}

// ConfigDef describes one config: its type, Kafka's default, the broker
// config that supplies a topic config's default, and its valid values.
type ConfigDef struct {
	Name    string
	Type    ConfigValueType
	Default string
	// BrokerSynonym is the broker config that sets the cluster default of
	// a topic config (log.retention.ms for retention.ms); empty if none.
	BrokerSynonym string
	// Doc says what values are valid, for error messages.
	Doc string
	// check validates a parsed value; nil accepts any value of the type.
	check func(v any) error
}

// Validate parses value as the config's type and checks its range. The
// error message is the one Kafka's ConfigException gives a client.
func (d *ConfigDef) Validate(value string) error {
	v, err := d.parse(value)
	if err != nil {
		return err
	}
	if d.check != nil {
		if err := d.check(v); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: %v", value, d.Name, err)
		}
	}
	return nil
}

func (d *ConfigDef) parse(value string) (any, error) {
	s := strings.TrimSpace(value)
	bad := func(what string) error {
		return fmt.Errorf("Invalid value %s for configuration %s: %s", value, d.Name, what)
	}
	switch d.Type {
	case ConfigBoolean:
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, bad("Expected value to be either true or false")
	case ConfigInt:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, bad("Not a number of type INT")
		}
		return n, nil
	case ConfigLong:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, bad("Not a number of type LONG")
		}
		return n, nil
	case ConfigDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) {
			return nil, bad("Not a number of type DOUBLE")
		}
		return f, nil
	case ConfigList:
		return splitList(s), nil
	}
	return s, nil
}

// splitList splits a LIST value as Kafka does: by comma, trimmed, an empty
// string being the empty list.
func splitList(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func atLeast(min int64) func(any) error {
	return func(v any) error {
		if v.(int64) < min {
			return fmt.Errorf("Value must be at least %d", min)
		}
		return nil
	}
}

func between(lo, hi int64) func(any) error {
	return func(v any) error {
		if n := v.(int64); n < lo || n > hi {
			return fmt.Errorf("Value must be no less than %d and no more than %d", lo, hi)
		}
		return nil
	}
}

func oneOf(values ...string) func(any) error {
	return func(v any) error {
		for _, s := range values {
			if v.(string) == s {
				return nil
			}
		}
		return fmt.Errorf("String must be one of: %s", strings.Join(values, ", "))
	}
}

func listOf(values ...string) func(any) error {
	return func(v any) error {
		items := v.([]string)
		if len(items) == 0 {
			return fmt.Errorf("Empty list, expected a list of: %s", strings.Join(values, ", "))
		}
		for _, it := range items {
			ok := false
			for _, s := range values {
				ok = ok || it == s
			}
			if !ok {
				return fmt.Errorf("Invalid value %s, expected a list of: %s", it, strings.Join(values, ", "))
			}
		}
		return nil
	}
}

// throttledReplicas is Kafka's ThrottledReplicaListValidator: "*" or a
// list of partition:broker pairs.
func throttledReplicas(v any) error {
	items := v.([]string)
	if len(items) == 1 && items[0] == "*" {
		return nil
	}
	for _, it := range items {
		p, b, ok := strings.Cut(it, ":")
		_, e1 := strconv.ParseInt(p, 10, 32)
		_, e2 := strconv.ParseInt(b, 10, 32)
		if !ok || e1 != nil || e2 != nil {
			return fmt.Errorf("must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
		}
	}
	return nil
}

const maxLong = "9223372036854775807"

// topicConfigDefs are the topic configs Keel accepts: Kafka's LogConfig
// (3.x names, types, defaults and validators). Anything else is "Unknown
// topic config name".
var topicConfigDefs = indexDefs([]ConfigDef{
	{Name: "cleanup.policy", Type: ConfigList, Default: "delete", BrokerSynonym: "log.cleanup.policy", check: listOf("compact", "delete")},
	{Name: "compression.type", Type: ConfigString, Default: "producer", BrokerSynonym: "compression.type",
		check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")},
	{Name: "compression.gzip.level", Type: ConfigInt, Default: "-1", BrokerSynonym: "compression.gzip.level", check: func(v any) error {
		if n := v.(int64); n != -1 && (n < 1 || n > 9) {
			return fmt.Errorf("Value must be between 1 and 9, or -1")
		}
		return nil
	}},
	{Name: "compression.lz4.level", Type: ConfigInt, Default: "9", BrokerSynonym: "compression.lz4.level", check: between(1, 17)},
	{Name: "compression.zstd.level", Type: ConfigInt, Default: "3", BrokerSynonym: "compression.zstd.level", check: between(-131072, 22)},
	{Name: "delete.retention.ms", Type: ConfigLong, Default: "86400000", BrokerSynonym: "log.cleaner.delete.retention.ms", check: atLeast(0)},
	{Name: "file.delete.delay.ms", Type: ConfigLong, Default: "60000", BrokerSynonym: "log.segment.delete.delay.ms", check: atLeast(0)},
	{Name: "flush.messages", Type: ConfigLong, Default: maxLong, BrokerSynonym: "log.flush.interval.messages", check: atLeast(1)},
	{Name: "flush.ms", Type: ConfigLong, Default: maxLong, BrokerSynonym: "log.flush.interval.ms", check: atLeast(0)},
	{Name: "follower.replication.throttled.replicas", Type: ConfigList, Default: "", check: throttledReplicas},
	{Name: "index.interval.bytes", Type: ConfigInt, Default: "4096", BrokerSynonym: "log.index.interval.bytes", check: atLeast(0)},
	{Name: "leader.replication.throttled.replicas", Type: ConfigList, Default: "", check: throttledReplicas},
	{Name: "local.retention.bytes", Type: ConfigLong, Default: "-2", BrokerSynonym: "log.local.retention.bytes", check: atLeast(-2)},
	{Name: "local.retention.ms", Type: ConfigLong, Default: "-2", BrokerSynonym: "log.local.retention.ms", check: atLeast(-2)},
	{Name: "max.compaction.lag.ms", Type: ConfigLong, Default: maxLong, BrokerSynonym: "log.cleaner.max.compaction.lag.ms", check: atLeast(1)},
	{Name: "max.message.bytes", Type: ConfigInt, Default: "1048588", BrokerSynonym: "message.max.bytes", check: atLeast(0)},
	{Name: "message.downconversion.enable", Type: ConfigBoolean, Default: "true", BrokerSynonym: "log.message.downconversion.enable"},
	{Name: "message.timestamp.after.max.ms", Type: ConfigLong, Default: maxLong, BrokerSynonym: "log.message.timestamp.after.max.ms", check: atLeast(0)},
	{Name: "message.timestamp.before.max.ms", Type: ConfigLong, Default: maxLong, BrokerSynonym: "log.message.timestamp.before.max.ms", check: atLeast(0)},
	{Name: "message.timestamp.difference.max.ms", Type: ConfigLong, Default: maxLong, BrokerSynonym: "log.message.timestamp.difference.max.ms", check: atLeast(0)},
	{Name: "message.timestamp.type", Type: ConfigString, Default: "CreateTime", BrokerSynonym: "log.message.timestamp.type", check: oneOf("CreateTime", "LogAppendTime")},
	{Name: "min.cleanable.dirty.ratio", Type: ConfigDouble, Default: "0.5", BrokerSynonym: "log.cleaner.min.cleanable.ratio", check: func(v any) error {
		if f := v.(float64); f < 0 || f > 1 {
			return fmt.Errorf("Value must be no less than 0.0 and no more than 1.0")
		}
		return nil
	}},
	{Name: "min.compaction.lag.ms", Type: ConfigLong, Default: "0", BrokerSynonym: "log.cleaner.min.compaction.lag.ms", check: atLeast(0)},
	{Name: "min.insync.replicas", Type: ConfigInt, Default: "1", BrokerSynonym: "min.insync.replicas", check: atLeast(1)},
	{Name: "preallocate", Type: ConfigBoolean, Default: "false", BrokerSynonym: "log.preallocate"},
	// Keel has no tiered storage: the config exists (clients set it
	// false explicitly) but true is refused, as Kafka refuses it when
	// remote.log.storage.system.enable is off.
	{Name: "remote.storage.enable", Type: ConfigBoolean, Default: "false", check: func(v any) error {
		if v.(bool) {
			return fmt.Errorf("Tiered Storage functionality is disabled in the broker")
		}
		return nil
	}},
	{Name: "retention.bytes", Type: ConfigLong, Default: "-1", BrokerSynonym: "log.retention.bytes"},
	{Name: "retention.ms", Type: ConfigLong, Default: "604800000", BrokerSynonym: "log.retention.ms", check: atLeast(-1)},
	// 14 bytes is LegacyRecord.RECORD_OVERHEAD_V0, Kafka's lower bound.
	{Name: "segment.bytes", Type: ConfigInt, Default: "1073741824", BrokerSynonym: "log.segment.bytes", check: atLeast(14)},
	{Name: "segment.index.bytes", Type: ConfigInt, Default: "10485760", BrokerSynonym: "log.index.size.max.bytes", check: atLeast(4)},
	{Name: "segment.jitter.ms", Type: ConfigLong, Default: "0", BrokerSynonym: "log.roll.jitter.ms", check: atLeast(0)},
	{Name: "segment.ms", Type: ConfigLong, Default: "604800000", BrokerSynonym: "log.roll.ms", check: atLeast(1)},
	{Name: "unclean.leader.election.enable", Type: ConfigBoolean, Default: "false", BrokerSynonym: "unclean.leader.election.enable"},
})

// brokerDynamicConfigDefs are the broker configs IncrementalAlterConfigs
// and AlterConfigs may set, per broker or cluster-wide: the broker synonyms
// of topic configs (Kafka's DynamicLogConfig) and a few more.
var brokerDynamicConfigDefs = func() map[string]*ConfigDef {
	defs := []ConfigDef{
		{Name: "background.threads", Type: ConfigInt, Default: "10", check: atLeast(1)},
		{Name: "follower.replication.throttled.rate", Type: ConfigLong, Default: maxLong, check: atLeast(0)},
		{Name: "leader.replication.throttled.rate", Type: ConfigLong, Default: maxLong, check: atLeast(0)},
		{Name: "log.cleaner.threads", Type: ConfigInt, Default: "1", check: atLeast(0)},
		{Name: "max.connections", Type: ConfigInt, Default: "2147483647", check: atLeast(0)},
		{Name: "max.connections.per.ip", Type: ConfigInt, Default: "2147483647", check: atLeast(0)},
		{Name: "num.io.threads", Type: ConfigInt, Default: "8", check: atLeast(1)},
		{Name: "num.network.threads", Type: ConfigInt, Default: "3", check: atLeast(1)},
		{Name: "num.replica.fetchers", Type: ConfigInt, Default: "1", check: atLeast(1)},
	}
	for _, d := range topicConfigDefs {
		if d.BrokerSynonym != "" {
			b := *d
			b.Name = d.BrokerSynonym
			defs = append(defs, b)
		}
	}
	return indexDefs(defs)
}()

// IsDynamicBrokerConfig reports whether AlterConfigs and
// IncrementalAlterConfigs accept a broker config by its definition (Kafka's
// DynamicBrokerConfig): DescribeConfigs reports the others read-only.
func IsDynamicBrokerConfig(name string) bool {
	_, ok := brokerDynamicConfigDefs[name]
	return ok
}

// brokerStaticConfigs are broker configs that cannot change at runtime:
// setting one dynamically is refused ("Cannot update these configs
// dynamically"). Names not listed and not dynamic are accepted as custom
// configs, as Kafka accepts them.
var brokerStaticConfigs = map[string]bool{
	"advertised.listeners": true, "auto.create.topics.enable": true, "auto.leader.rebalance.enable": true,
	"broker.heartbeat.interval.ms": true, "broker.id": true, "broker.rack": true, "broker.session.timeout.ms": true,
	"controller.listener.names": true, "controller.quorum.voters": true, "default.replication.factor": true,
	"delete.topic.enable": true, "inter.broker.listener.name": true, "leader.imbalance.check.interval.seconds": true,
	"listener.security.protocol.map": true, "listeners": true, "log.dir": true, "log.dirs": true,
	"log.cleaner.enable": true, "log.cleaner.backoff.ms": true, "log.cleaner.dedupe.buffer.size": true,
	"metadata.log.dir": true, "node.id": true, "num.partitions": true, "offsets.topic.num.partitions": true,
	"offsets.topic.replication.factor": true, "process.roles": true, "replica.lag.time.max.ms": true,
	"transaction.state.log.min.isr": true, "transaction.state.log.num.partitions": true,
	"transaction.state.log.replication.factor": true, "zookeeper.connect": true,
}

func indexDefs(defs []ConfigDef) map[string]*ConfigDef {
	m := make(map[string]*ConfigDef, len(defs))
	for i := range defs {
		m[defs[i].Name] = &defs[i]
	}
	return m
}

// TopicConfigDef returns the definition of a topic config.
func TopicConfigDef(name string) (*ConfigDef, bool) {
	d, ok := topicConfigDefs[name]
	return d, ok
}

// TopicConfigNames returns every topic config name, sorted.
func TopicConfigNames() []string {
	names := make([]string, 0, len(topicConfigDefs))
	for n := range topicConfigDefs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ValidateTopicConfigs checks a topic's complete set of dynamic configs:
// every name known, every value valid, and the combinations Kafka's
// LogConfig.validate checks. The error message is for the client
// (INVALID_CONFIG).
func ValidateTopicConfigs(configs map[string]string) error {
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d, ok := topicConfigDefs[n]
		if !ok {
			return fmt.Errorf("Unknown topic config name: %s", n)
		}
		if err := d.Validate(configs[n]); err != nil {
			return err
		}
	}
	minLag, maxLag := configLong(configs, "min.compaction.lag.ms"), configLong(configs, "max.compaction.lag.ms")
	if minLag > maxLag {
		return fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", minLag, maxLag)
	}
	return nil
}

// configLong is a LONG topic config's value, or its default.
func configLong(configs map[string]string, name string) int64 {
	v, ok := configs[name]
	if !ok {
		v = topicConfigDefs[name].Default
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n
}

// ValidateBrokerConfigs checks dynamic broker configs: static ones are
// refused, known dynamic ones must be valid, unknown ones pass.
func ValidateBrokerConfigs(configs map[string]string) error {
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	sort.Strings(names)
	var static []string
	for _, n := range names {
		if brokerStaticConfigs[n] {
			static = append(static, n)
		}
	}
	if len(static) > 0 {
		return fmt.Errorf("Cannot update these configs dynamically: %s", strings.Join(static, ","))
	}
	for _, n := range names {
		if d, ok := brokerDynamicConfigDefs[n]; ok {
			if err := d.Validate(configs[n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// isListConfig reports whether a config of the resource type is a LIST
// (APPEND and SUBTRACT apply only to those).
func isListConfig(resourceType int8, name string) (*ConfigDef, bool) {
	var d *ConfigDef
	if resourceType == ConfigResourceTopic {
		d = topicConfigDefs[name]
	} else {
		d = brokerDynamicConfigDefs[name]
	}
	return d, d != nil && d.Type == ConfigList
}
