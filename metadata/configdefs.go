package metadata

import (
	"fmt"
	"maps"
	"math"
	"slices"
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
	// Kafka 3.9's tiered storage switches for a topic turning remote
	// storage off (KIP-950): accepted, as they change nothing without it.
	{Name: "remote.log.copy.disable", Type: ConfigBoolean, Default: "false"},
	{Name: "remote.log.delete.on.disable", Type: ConfigBoolean, Default: "false"},
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
		{Name: "keel.log.cache.drop.behind.bytes", Type: ConfigLong, Default: "0", check: atLeast(0)},
		{Name: "keel.log.delete.max.bytes.per.second", Type: ConfigLong, Default: "536870912", check: atLeast(0)},
		{Name: "keel.log.writeback.bytes", Type: ConfigLong, Default: "1048576", check: atLeast(0)},
		{Name: "leader.replication.throttled.rate", Type: ConfigLong, Default: maxLong, check: atLeast(0)},
		{Name: "replica.alter.log.dirs.io.max.bytes.per.second", Type: ConfigLong, Default: maxLong, check: atLeast(0)},
		{Name: "log.cleaner.io.max.bytes.per.second", Type: ConfigDouble, Default: "1.7976931348623157E308", check: func(v any) error {
			if v.(float64) <= 0 {
				return fmt.Errorf("Value must be greater than 0.0")
			}
			return nil
		}},
		{Name: "log.cleaner.backoff.ms", Type: ConfigLong, Default: "15000", check: atLeast(0)},
		// Kafka's Cleaner needs room for at least one key.
		{Name: "log.cleaner.dedupe.buffer.size", Type: ConfigLong, Default: "134217728", check: atLeast(1)},
		// 0 threads is possible only in server.properties (no cleaner
		// at all); Kafka's LogCleaner refuses it dynamically.
		{Name: "log.cleaner.threads", Type: ConfigInt, Default: "1", check: func(v any) error {
			if v.(int64) < 1 {
				return fmt.Errorf("Log cleaner threads should be at least 1")
			}
			return nil
		}},
		{Name: "max.connections", Type: ConfigInt, Default: "2147483647", check: atLeast(0)},
		{Name: "max.connection.creation.rate", Type: ConfigInt, Default: "2147483647", check: atLeast(0)},
		{Name: "max.connections.per.ip", Type: ConfigInt, Default: "2147483647", check: atLeast(0)},
		{Name: "max.connections.per.ip.overrides", Type: ConfigString, Default: "", check: func(v any) error {
			_, err := ParseConnectionsPerIPOverrides(splitList(v.(string)))
			return err
		}},
		{Name: "num.io.threads", Type: ConfigInt, Default: "8", check: atLeast(1)},
		{Name: "num.network.threads", Type: ConfigInt, Default: "3", check: atLeast(1)},
		{Name: "num.replica.fetchers", Type: ConfigInt, Default: "1", check: atLeast(1)},
		{Name: "transaction.partition.verification.enable", Type: ConfigBoolean, Default: "true"},
	}
	for _, d := range topicConfigDefs {
		if d.BrokerSynonym != "" {
			b := *d
			b.Name = d.BrokerSynonym
			defs = append(defs, b)
		}
	}
	// The coarser units are dynamic too (KAFKA-17584): INTs, as Kafka
	// declares them; retention may be -1 (unlimited) in any unit.
	for topicConfig, coarse := range coarseBrokerSynonyms {
		for _, c := range coarse {
			d := ConfigDef{Name: c.Name, Type: ConfigInt}
			switch topicConfig {
			case "segment.ms":
				d.check = atLeast(1)
			case "segment.jitter.ms":
				d.check = atLeast(0)
			}
			defs = append(defs, d)
		}
	}
	return indexDefs(defs)
}()

// A BrokerSynonym is a broker config that sets the cluster default of a
// topic config, and how many of the topic config's units one of its units
// is (log.retention.hours: 3600000, for retention.ms).
type BrokerSynonym struct {
	Name  string
	Scale int64
}

// coarseBrokerSynonyms are the broker configs Kafka also accepts for a
// topic config's default in coarser units than its BrokerSynonym, finest
// first (Kafka's ServerTopicConfigSynonyms).
var coarseBrokerSynonyms = map[string][]BrokerSynonym{
	"retention.ms":      {{"log.retention.minutes", 60_000}, {"log.retention.hours", 3_600_000}},
	"segment.ms":        {{"log.roll.hours", 3_600_000}},
	"segment.jitter.ms": {{"log.roll.jitter.hours", 3_600_000}},
}

// brokerSynonyms are BrokerSynonyms' answers, by topic config.
var brokerSynonyms = func() map[string][]BrokerSynonym {
	m := map[string][]BrokerSynonym{}
	for name, d := range topicConfigDefs {
		if d.BrokerSynonym != "" {
			m[name] = append([]BrokerSynonym{{d.BrokerSynonym, 1}}, coarseBrokerSynonyms[name]...)
		}
	}
	return m
}()

// BrokerSynonyms returns every broker config that sets the cluster default
// of topic config d, finest unit first; none if it has no broker synonym.
// The slice is shared: read only.
func (d *ConfigDef) BrokerSynonyms() []BrokerSynonym { return brokerSynonyms[d.Name] }

// ConfigLayer is one place broker configs come from (a broker's dynamic
// configs, the cluster-wide ones, server.properties) and the source
// DescribeConfigs reports for its values.
type ConfigLayer struct {
	Configs map[string]string
	Source  int8
}

// ConfigSynonym is one value a config may take, as DescribeConfigs lists
// synonyms.
type ConfigSynonym struct {
	Name, Value string
	Source      int8
}

// BrokerDefault resolves the cluster default of topic config d from the
// broker config layers given, highest precedence first, and Kafka's own
// default after them. It returns the value in the topic config's unit
// with its source, and every synonym set, layer by layer (finest unit
// first within a layer), ending with Kafka's default, which (as in Kafka)
// the coarsest synonym carries: DEFAULT_CONFIG log.retention.hours=168.
//
// As Kafka overlays the layers key by key and then takes the finest unit
// set, the finest synonym set in any layer wins, from the highest layer
// that sets it: a dynamic log.retention.hours does not override a
// log.retention.ms in server.properties. A negative retention in any unit
// is -1 (unlimited). ok is false if d has no broker synonym.
func (d *ConfigDef) BrokerDefault(layers ...ConfigLayer) (value string, source int8, synonyms []ConfigSynonym, ok bool) {
	syns := d.BrokerSynonyms()
	if len(syns) == 0 {
		return "", 0, nil, false
	}
	for _, l := range layers {
		for _, s := range syns {
			if v, ok := l.Configs[s.Name]; ok {
				synonyms = append(synonyms, ConfigSynonym{s.Name, v, l.Source})
			}
		}
	}
	coarsest := syns[len(syns)-1]
	synonyms = append(synonyms, ConfigSynonym{coarsest.Name, d.Default, ConfigSourceDefault})
	if coarsest.Scale != 1 {
		n, _ := strconv.ParseInt(d.Default, 10, 64)
		synonyms[len(synonyms)-1].Value = strconv.FormatInt(n/coarsest.Scale, 10)
	}
	for _, s := range syns {
		for _, syn := range synonyms {
			if syn.Name == s.Name {
				return scaleConfig(syn.Value, s.Scale), syn.Source, synonyms, true
			}
		}
	}
	return d.Default, ConfigSourceDefault, synonyms, true // not reached: the default names a synonym
}

// scaleConfig turns a value in a coarser unit into the finer one (a
// negative time is -1, unlimited); a value that is not a number is left as
// it is, for the topic config's own validation to reject.
func scaleConfig(v string, scale int64) string {
	if scale == 1 {
		return v
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return v
	}
	if n < 0 {
		return "-1"
	}
	return strconv.FormatInt(n*scale, 10)
}

// IsDynamicBrokerConfig reports whether AlterConfigs and
// IncrementalAlterConfigs accept a broker config by its definition (Kafka's
// DynamicBrokerConfig), a listener's keystore and truststore included:
// DescribeConfigs reports the others read-only.
func IsDynamicBrokerConfig(name string) bool {
	if _, base, ok := ListenerConfig(name); ok {
		return IsReconfigurableSSLConfig(base) || clusterLevelListenerConfigs[base]
	}
	_, ok := brokerDynamicConfigDefs[name]
	return ok
}

// reconfigurableSSLConfigs are the ssl.* settings a broker takes at
// runtime, per broker and per listener (Kafka's
// SslConfigs.RECONFIGURABLE_CONFIGS, KIP-226): the keystore and the
// truststore.
var reconfigurableSSLConfigs = []string{
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
	"ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
}

// clusterLevelListenerConfigs are the listener-prefixed configs that may
// change at runtime per broker and cluster-wide (Kafka's
// DynamicBrokerConfig.ClusterLevelListenerConfigs, less
// num.network.threads, which Keel has no use for): a listener's own
// connection limit and connection creation rate.
var clusterLevelListenerConfigs = map[string]bool{"max.connections": true, "max.connection.creation.rate": true}

// IsListenerConnectionQuota reports whether a listener-prefixed config's
// name (without its prefix) is one of a listener's connection limits:
// max.connections or max.connection.creation.rate.
func IsListenerConnectionQuota(name string) bool { return clusterLevelListenerConfigs[name] }

// IsReconfigurableSSLConfig reports whether an ssl.* setting (without its
// listener prefix) may change at runtime.
func IsReconfigurableSSLConfig(name string) bool {
	return slices.Contains(reconfigurableSSLConfigs, name)
}

// ListenerConfig splits a listener-prefixed config,
// listener.name.<listener>.<name>.
func ListenerConfig(key string) (listener, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, "listener.name.")
	if !ok {
		return "", "", false
	}
	listener, name, ok = strings.Cut(rest, ".")
	return listener, name, ok && listener != "" && name != ""
}

// SensitiveConfig reports Kafka's PASSWORD-typed security settings, plain
// or listener-prefixed: passwords, private keys, JAAS configurations
// (which hold passwords) and, as Kafka types them too, PEM certificates
// given in the config (ssl.keystore.certificate.chain,
// ssl.truststore.certificates). DescribeConfigs never returns their
// values; dump-log redacts them.
func SensitiveConfig(name string) bool {
	for _, suffix := range []string{".password", "sasl.jaas.config", "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
		"delegation.token.secret.key", "delegation.token.master.key",
		"sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.assertion.private.key.passphrase"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// brokerStaticConfigs are broker configs that cannot change at runtime:
// setting one dynamically is refused ("Cannot update these configs
// dynamically"). Names not listed and not dynamic are accepted as custom
// configs, as Kafka accepts them.
var brokerStaticConfigs = map[string]bool{
	"advertised.listeners": true, "auto.create.topics.enable": true, "auto.leader.rebalance.enable": true,
	"broker.heartbeat.interval.ms": true, "broker.id": true, "broker.rack": true, "broker.session.timeout.ms": true,
	"controller.listener.names": true, "controller.quorum.voters": true, "default.replication.factor": true,
	"delegation.token.secret.key": true, "delegation.token.master.key": true, "delegation.token.max.lifetime.ms": true,
	"delegation.token.expiry.time.ms": true, "delegation.token.expiry.check.interval.ms": true,
	"delete.topic.enable": true, "inter.broker.listener.name": true, "leader.imbalance.check.interval.seconds": true,
	"listener.security.protocol.map": true, "listeners": true, "log.dir": true, "log.dirs": true,
	"log.cleaner.enable": true, "metadata.log.dir": true, "node.id": true, "num.partitions": true, "offsets.topic.num.partitions": true,
	"offsets.topic.replication.factor": true, "process.roles": true, "replica.lag.time.max.ms": true,
	"replica.fetch.backoff.ms": true, "replica.fetch.max.bytes": true, "replica.fetch.min.bytes": true,
	"replica.fetch.response.max.bytes": true, "replica.fetch.wait.max.ms": true,
	"replica.socket.timeout.ms": true, "replica.socket.receive.buffer.bytes": true,
	"metadata.log.max.record.bytes.between.snapshots": true, "metadata.log.max.snapshot.interval.ms": true,
	"quota.window.num": true, "quota.window.size.seconds": true,
	"replication.quota.window.num": true, "replication.quota.window.size.seconds": true,
	"transaction.state.log.min.isr": true, "transaction.state.log.num.partitions": true,
	"transaction.state.log.replication.factor": true, "zookeeper.connect": true,
}

// ParseConnectionsPerIPOverrides parses the entries of
// max.connections.per.ip.overrides (its comma-separated parts): host:count
// pairs, the count after the last colon (so an IPv6 address needs no
// brackets), as Kafka reads them. The broker reads the setting with it at
// start (dropping empty parts); a dynamic value is checked with it before
// it is stored (where an empty part is an error).
func ParseConnectionsPerIPOverrides(entries []string) (map[string]int, error) {
	out := map[string]int{}
	for _, e := range entries {
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want host:count", e)
		}
		n, err := strconv.Atoi(strings.TrimSpace(e[i+1:]))
		host := strings.Trim(strings.TrimSpace(e[:i]), "[]")
		if err != nil || n < 0 || host == "" {
			return nil, fmt.Errorf("%q: want host:count with a count >= 0", e)
		}
		out[host] = n
	}
	return out, nil
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

// TopicDefaultConfigDef returns the definition, under the broker config's
// own name, of a broker config that sets a topic config's cluster default
// in the topic config's unit (compression.type, log.preallocate,
// log.message.timestamp.before.max.ms, ...): server.properties may set
// any of them, as the dynamic broker configs may.
func TopicDefaultConfigDef(name string) (*ConfigDef, bool) {
	if !topicDefaultConfigs[name] {
		return nil, false
	}
	return brokerDynamicConfigDefs[name], true
}

// TopicDefaultConfigNames returns the names TopicDefaultConfigDef knows,
// sorted.
func TopicDefaultConfigNames() []string { return slices.Sorted(maps.Keys(topicDefaultConfigs)) }

// topicDefaultConfigs are the topic configs' BrokerSynonyms.
var topicDefaultConfigs = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range topicConfigDefs {
		if d.BrokerSynonym != "" {
			m[d.BrokerSynonym] = true
		}
	}
	return m
}()

// TopicConfigNames returns every topic config name, sorted.
func TopicConfigNames() []string { return slices.Sorted(maps.Keys(topicConfigDefs)) }

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

// ValidateBrokerConfigs checks dynamic broker configs, a broker's
// (perBroker) or the cluster-wide defaults, with Kafka's
// DynamicBrokerConfig rules and messages: static configs are refused; a
// keystore or truststore setting only listener-prefixed
// (listener.name.<listener>.ssl.keystore.location) and only per broker;
// known dynamic ones must be valid; unknown ones pass, as custom configs.
// A listener's connection limit (listener.name.<listener>.max.connections)
// may be set per broker and cluster-wide, as Kafka allows. Other
// listener-prefixed configs than the keystore and truststore ones are
// refused as static: Kafka stores some of them (a listener's
// ssl.client.auth, its JAAS configuration) and acts on them, Keel takes
// them only from server.properties, and storing what it would not act on
// would tell an operator a change happened that did not.
func ValidateBrokerConfigs(configs map[string]string, perBroker bool) error {
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	sort.Strings(names)
	var static, unprefixed, listener []string
	for _, n := range names {
		_, base, prefixed := ListenerConfig(n)
		switch {
		case prefixed && clusterLevelListenerConfigs[base]:
			// Per broker or cluster-wide; its value is checked below.
		case brokerStaticConfigs[n], prefixed && !IsReconfigurableSSLConfig(base):
			static = append(static, n)
		case IsReconfigurableSSLConfig(n):
			unprefixed = append(unprefixed, n)
		case prefixed:
			listener = append(listener, n)
		}
	}
	switch {
	case len(static) > 0:
		return fmt.Errorf("Cannot update these configs dynamically: %s", strings.Join(static, ","))
	case len(unprefixed) > 0:
		return fmt.Errorf("These security configs can be dynamically updated only per-listener using the listener prefix: %s", strings.Join(unprefixed, ","))
	case len(listener) > 0 && !perBroker:
		return fmt.Errorf("Cannot update these configs at default cluster level, broker id must be specified: %s", strings.Join(listener, ","))
	}
	for _, n := range names {
		if _, base, prefixed := ListenerConfig(n); prefixed && clusterLevelListenerConfigs[base] {
			// Checked as the broker-wide config, named as set.
			renamed := *brokerDynamicConfigDefs[base]
			renamed.Name = n
			if err := renamed.Validate(configs[n]); err != nil {
				return err
			}
			continue
		}
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
