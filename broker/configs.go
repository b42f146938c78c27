package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/storage"
)

// Config sources (Kafka's DescribeConfigsResponse.ConfigSource).
const (
	sourceDynamicTopic         = metadata.ConfigSourceDynamicTopic         // 1
	sourceDynamicBroker        = metadata.ConfigSourceDynamicBroker        // 2
	sourceDynamicDefaultBroker = metadata.ConfigSourceDynamicDefaultBroker // 3
	sourceStaticBroker         = metadata.ConfigSourceStaticBroker         // 4
	sourceDefault              = metadata.ConfigSourceDefault              // 5
)

// StaticTopicConfigDefaults returns the server.properties values of the
// broker configs that set topic defaults (log.retention.ms for retention.ms,
// message.max.bytes for max.message.bytes, ...), by broker config name:
// those the file (or an override) set, and any whose value differs from
// Kafka's default. The node
// passes the same map to the controller
// (metadata.ControllerConfig.StaticBrokerConfigs), so that CreateTopics and
// DescribeConfigs agree.
//
// Safe to call from any goroutine; cfg is only read.
func StaticTopicConfigDefaults(cfg *Config) map[string]string {
	out := map[string]string{}
	if cfg == nil {
		return out
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	explicit := func(key string) bool { _, ok := cfg.Explicit[key]; return ok }
	set := func(synonym, value string, present bool) {
		if !present {
			return
		}
		if d, ok := metadata.TopicDefaultConfigDef(synonym); ok && (d.Default != value || explicit(synonym)) {
			out[synonym] = value
		}
	}
	// Times keep the units they were written in (log.retention.hours=48):
	// metadata.ConfigDef.BrokerDefault resolves them as Kafka does, finest
	// unit first, also against dynamic values in other units.
	for _, key := range []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours",
		"log.roll.ms", "log.roll.hours", "log.roll.jitter.ms", "log.roll.jitter.hours"} {
		if v, ok := cfg.Explicit[key]; ok {
			out[key] = v
		}
	}
	set("log.segment.bytes", i64(cfg.LogSegmentBytes), cfg.LogSegmentBytes > 0)
	set("log.retention.bytes", i64(cfg.LogRetentionBytes), cfg.LogRetentionBytes != 0)
	set("log.index.size.max.bytes", i64(int64(cfg.LogIndexSizeMaxBytes)), cfg.LogIndexSizeMaxBytes > 0)
	set("log.index.interval.bytes", i64(int64(cfg.LogIndexIntervalBytes)), cfg.LogIndexIntervalBytes > 0)
	set("log.flush.interval.messages", i64(cfg.LogFlushIntervalMessages), cfg.LogFlushIntervalMessages > 0)
	set("log.flush.interval.ms", i64(cfg.LogFlushIntervalMs), cfg.LogFlushIntervalMs > 0)
	set("log.segment.delete.delay.ms", i64(cfg.LogSegmentDeleteDelayMs), cfg.LogSegmentDeleteDelayMs > 0)
	set("message.max.bytes", i64(int64(cfg.MessageMaxBytes)), cfg.MessageMaxBytes > 0)
	set("log.message.timestamp.type", cfg.LogMessageTimestampType, cfg.LogMessageTimestampType != "")
	set("log.cleanup.policy", cfg.LogCleanupPolicy, cfg.LogCleanupPolicy != "")
	set("log.cleaner.delete.retention.ms", i64(cfg.LogCleanerDeleteRetentionMs), explicit("log.cleaner.delete.retention.ms"))
	set("log.cleaner.min.cleanable.ratio", metadata.JavaDouble(cfg.LogCleanerMinCleanableRatio), explicit("log.cleaner.min.cleanable.ratio"))
	set("log.cleaner.min.compaction.lag.ms", i64(cfg.LogCleanerMinCompactionLagMs), explicit("log.cleaner.min.compaction.lag.ms"))
	set("log.cleaner.max.compaction.lag.ms", i64(cfg.LogCleanerMaxCompactionLagMs), explicit("log.cleaner.max.compaction.lag.ms"))
	set("min.insync.replicas", i64(int64(cfg.MinInsyncReplicas)), cfg.MinInsyncReplicas > 0)
	set("unclean.leader.election.enable", strconv.FormatBool(cfg.UncleanLeaderElectionEnable), true)
	for k, v := range cfg.TopicDefaults {
		out[k] = v
	}
	return out
}

// configSynonym is one layer a config's value may come from, in Kafka's
// order of precedence.
type configSynonym = metadata.ConfigSynonym

// dynamicBrokerConfig is a broker config set at runtime for this broker,
// else for the cluster (Kafka's dynamic per-broker and default layers);
// ok false when neither sets it (server.properties decides).
func (b *Broker) dynamicBrokerConfig(img *metadata.Image, name string) (v string, ok bool) {
	if v, ok = img.Config(metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: strconv.Itoa(int(b.nodeID))}, name); ok {
		return v, true
	}
	return img.Config(metadata.ConfigResource{Type: metadata.ConfigResourceBroker}, name)
}

// dynamicBrokerInt is an integer dynamic broker config's value in force:
// this broker's, else the cluster-wide one, else static (server.properties'
// or Kafka's default). A stored value below least, or not an integer, is
// passed over (the controller validated it when it was set).
func (b *Broker) dynamicBrokerInt(img *metadata.Image, name string, static, least int64) int64 {
	v, ok := b.dynamicBrokerConfig(img, name)
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); ok && err == nil && n >= least {
		return n
	}
	return static
}

// updateBrokerConfigs takes the dynamic broker configs this broker acts on
// at runtime from the image: on the first image and after each change to
// this broker's or the cluster-wide configs. applyMu is held.
func (b *Broker) updateBrokerConfigs(img *metadata.Image) {
	b.updateReplicationQuotas(img)
	b.updateWritebackBytes(img)
	b.updateDeleteRate(img)
	b.updateCleaner(img)
	b.updateConnectionLimits(img)
	b.updateNumReplicaFetchers(img)
}

// updateWritebackBytes takes keel.log.writeback.bytes and
// keel.log.cache.drop.behind.bytes from the image (this broker's dynamic
// config, else the cluster-wide one, else server.properties) into the log
// manager, whose logs use them from their next append
// (storage/writeback.go). applyMu is held.
func (b *Broker) updateWritebackBytes(img *metadata.Image) {
	if n := b.dynamicBrokerInt(img, "keel.log.writeback.bytes", b.cfg.LogWritebackBytes, 0); b.logs.WritebackBytes() != n {
		b.logs.SetWritebackBytes(n)
		b.log.Info("log writeback", "config", "keel.log.writeback.bytes", "bytes", n)
	}
	if n := b.dynamicBrokerInt(img, "keel.log.cache.drop.behind.bytes", b.cfg.LogDropBehindBytes, 0); b.logs.DropBehindBytes() != n {
		b.logs.SetDropBehindBytes(n)
		b.log.Info("log page cache drop-behind", "config", "keel.log.cache.drop.behind.bytes", "bytes", n)
	}
}

// updateDeleteRate takes keel.log.delete.max.bytes.per.second from the
// image (this broker's dynamic config, else the cluster-wide one, else
// server.properties) into the log manager, whose deleter uses it from its
// next step (storage/deleter.go). applyMu is held.
func (b *Broker) updateDeleteRate(img *metadata.Image) {
	if n := b.dynamicBrokerInt(img, "keel.log.delete.max.bytes.per.second", b.cfg.LogDeleteBytesPerSecond, 0); b.logs.DeleteBytesPerSecond() != deleteBytesPerSecond(n) {
		b.logs.SetDeleteBytesPerSecond(deleteBytesPerSecond(n))
		b.log.Info("log file deletion rate", "config", "keel.log.delete.max.bytes.per.second", "bytes_per_second", n)
	}
}

// updateConnectionLimits takes max.connections,
// max.connection.creation.rate, the listeners' own ones
// (listener.name.<listener>.max.connections and
// .max.connection.creation.rate), max.connections.per.ip and
// max.connections.per.ip.overrides from the image (each: this broker's
// dynamic config, else the cluster-wide one, else server.properties) to
// the node's listeners, as Kafka's DynamicConnectionQuota and
// DynamicListenerConfig do. Host names
// in the overrides are resolved on a goroutine of their own, within a few
// seconds, so that a slow DNS server never holds up the metadata being
// applied; a resolution overtaken by a newer change applies nothing.
// Settings that do not make a valid whole keep the limits in force, with
// an error logged once. applyMu is held.
func (b *Broker) updateConnectionLimits(img *metadata.Image) {
	if b.setConnLimits == nil {
		return
	}
	setting := func(name, static string) string {
		if v, ok := b.dynamicBrokerConfig(img, name); ok {
			return strings.TrimSpace(v)
		}
		return static
	}
	cur := [6]string{
		setting("max.connections", strconv.Itoa(b.cfg.MaxConnections)),
		setting("max.connections.per.ip", strconv.Itoa(b.cfg.MaxConnectionsPerIP)),
		setting("max.connections.per.ip.overrides", b.cfg.MaxConnectionsPerIPOverrides),
		b.listenerLimitSettings(img, "max.connections"),
		setting("max.connection.creation.rate", strconv.Itoa(b.cfg.MaxConnectionCreationRate)),
		b.listenerLimitSettings(img, "max.connection.creation.rate"),
	}
	if b.connLimits == ([6]string{}) {
		// First call: the listeners started with server.properties'.
		b.connLimits = [6]string{strconv.Itoa(b.cfg.MaxConnections), strconv.Itoa(b.cfg.MaxConnectionsPerIP), b.cfg.MaxConnectionsPerIPOverrides,
			b.listenerLimitSettings(nil, "max.connections"), strconv.Itoa(b.cfg.MaxConnectionCreationRate), b.listenerLimitSettings(nil, "max.connection.creation.rate")}
	}
	if cur == b.connLimits {
		return
	}
	b.connLimits = cur
	b.connLimitsMu.Lock()
	b.connLimitsGen++
	gen := b.connLimitsGen
	b.connLimitsMu.Unlock()
	apply := func() {
		maxConns, err1 := strconv.Atoi(cur[0])
		perIP, err2 := strconv.Atoi(cur[1])
		rate, err4 := strconv.Atoi(cur[4])
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		lookup := net.DefaultResolver.LookupHost
		if f := b.hostLookup.Load(); f != nil {
			lookup = *f
		}
		limit, overrides, err := connectionLimitsPerIP(ctx, lookup, perIP, cur[2])
		b.connLimitsMu.Lock()
		defer b.connLimitsMu.Unlock()
		if gen != b.connLimitsGen {
			return // a newer change is being applied
		}
		listeners, err3 := parseListenerLimits(cur[3], "max.connections")
		listenerRates, err5 := parseListenerLimits(cur[5], "max.connection.creation.rate")
		if err = errors.Join(err1, err2, err, err3, err4, err5); err != nil {
			b.log.Error("connection limits not changed", "max_connections", cur[0], "max_connections_per_ip", cur[1], "overrides", cur[2],
				"listener_limits", cur[3], "max_connection_creation_rate", cur[4], "listener_rates", cur[5], "error", err)
			return
		}
		b.setConnLimits(network.ConnectionLimits{MaxConnections: networkMaxConnections(maxConns), MaxListenerConnections: listeners,
			MaxConnectionCreationRate: rate, MaxListenerConnectionCreationRate: listenerRates,
			MaxConnectionsPerIP: limit, MaxConnectionsPerIPOverrides: overrides})
		b.log.Info("connection limits", "max_connections", cur[0], "max_connections_per_ip", cur[1], "overrides", cur[2],
			"listener_limits", cur[3], "max_connection_creation_rate", cur[4], "listener_rates", cur[5])
	}
	if overridesNeedDNS(cur[2]) && b.spawn(apply) {
		return
	}
	apply()
}

// listenerLimitSettings is listener.name.<listener>.<name>
// (max.connections or max.connection.creation.rate) for each of the node's
// listeners that has one, as "LISTENER=n" joined by commas: this broker's
// dynamic setting, else the cluster-wide one (from img; none when nil),
// else server.properties'.
func (b *Broker) listenerLimitSettings(img *metadata.Image, name string) string {
	var sources []map[string]string
	if img != nil {
		sources = append(sources, b.ownBrokerConfigs(img), brokerConfigs(img, ""))
	}
	sources = append(sources, b.cfg.ListenerConnectionQuotas)
	var out []string
	for _, l := range b.listenerNames {
		for _, src := range sources {
			if v, ok := listenerSetting(src, l, name, false); ok {
				out = append(out, l+"="+strings.TrimSpace(v))
				break
			}
		}
	}
	return strings.Join(out, ",")
}

// parseListenerLimits parses listenerLimitSettings' form.
func parseListenerLimits(s, name string) (map[string]int, error) {
	out := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		l, v, _ := strings.Cut(kv, "=")
		n, err := listenerConnectionQuota(v)
		if err != nil {
			return nil, fmt.Errorf("listener.name.%s.%s: %w", strings.ToLower(l), name, err)
		}
		out[l] = n
	}
	return out, nil
}

// overridesNeedDNS reports whether max.connections.per.ip.overrides names
// a host rather than an address.
func overridesNeedDNS(setting string) bool {
	overrides, err := connectionsPerIPOverrides(setting)
	if err != nil {
		return false
	}
	for host := range overrides {
		if _, err := netip.ParseAddr(host); err != nil {
			return true
		}
	}
	return false
}

// updateNumReplicaFetchers takes num.replica.fetchers from the image
// (this broker's dynamic config, else the cluster-wide one, else
// server.properties) to the follower fetchers. applyMu is held.
func (b *Broker) updateNumReplicaFetchers(img *metadata.Image) {
	n := int(b.dynamicBrokerInt(img, "num.replica.fetchers", int64(b.cfg.NumReplicaFetchers), 1))
	b.fetchers.mu.Lock()
	changed := b.fetchers.count != n
	b.fetchers.mu.Unlock()
	if changed {
		b.fetchers.resize(n)
		b.log.Info("replica fetchers", "config", "num.replica.fetchers", "per_source_broker", n)
	}
}

// updateCleaner takes the log cleaner's dynamic configs from the image
// (each: this broker's dynamic config, else the cluster-wide one, else
// server.properties) into the log manager: log.cleaner.io.max.bytes.per.second
// applies from the passes' next read or write, log.cleaner.threads starts
// goroutines or stops them after their pass, log.cleaner.backoff.ms wakes
// the sleeping ones, log.cleaner.dedupe.buffer.size applies from the next
// pass. With the cleaner disabled (log.cleaner.enable=false or
// log.cleaner.threads=0 in server.properties) only the values are kept, as
// Kafka, which has no cleaner threads to change then. applyMu is held.
func (b *Broker) updateCleaner(img *metadata.Image) {
	rate := b.cfg.LogCleanerIOMaxBytesPerSec
	if v, ok := b.dynamicBrokerConfig(img, "log.cleaner.io.max.bytes.per.second"); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > 0 {
			rate = f
		}
	}
	if b.logs.CleanerIOMaxBytesPerSecond() != rate {
		b.logs.SetCleanerIOMaxBytesPerSecond(rate)
		b.log.Info("log cleaner I/O rate", "config", "log.cleaner.io.max.bytes.per.second", "bytes_per_second", rate)
	}
	if d := cleanerBackoff(time.Duration(b.dynamicBrokerInt(img, "log.cleaner.backoff.ms", b.cfg.LogCleanerBackoff.Milliseconds(), 0)) * time.Millisecond); b.logs.CleanerBackoff() != d {
		b.logs.SetCleanerBackoff(d)
		b.log.Info("log cleaner backoff", "config", "log.cleaner.backoff.ms", "backoff", b.logs.CleanerBackoff())
	}
	if n := b.dynamicBrokerInt(img, "log.cleaner.dedupe.buffer.size", b.cfg.LogCleanerDedupeBufferSize, 1); b.logs.CleanerDedupeBufferSize() != n {
		b.logs.SetCleanerDedupeBufferSize(n)
		b.log.Info("log cleaner key map memory", "config", "log.cleaner.dedupe.buffer.size", "bytes", n)
	}
	if b.cfg.cleanerDisabled() {
		return
	}
	if n := int(b.dynamicBrokerInt(img, "log.cleaner.threads", int64(b.cfg.LogCleanerThreads), 1)); b.logs.CleanerThreads() != n {
		b.logs.SetCleanerThreads(n)
		b.log.Info("log cleaner threads", "config", "log.cleaner.threads", "threads", n)
	}
}

// topicConfigSynonyms returns the effective value of topic config name for
// topic and its source, and every place it may take its value from,
// highest precedence first, as Kafka's DescribeConfigs reports synonyms:
// the topic's own dynamic config, then its broker synonyms (in every unit:
// log.retention.ms, .minutes, .hours) set per broker, cluster-wide and in
// server.properties, and Kafka's default (named after a broker synonym when
// there is one, as Kafka names it; metadata.ConfigDef.BrokerDefault). ok is
// false for an unknown config.
func (n *nodeConfigs) topicConfigSynonyms(img *metadata.Image, topic, name string) (value string, source int8, syns []configSynonym, ok bool) {
	d, ok := metadata.TopicConfigDef(name)
	if !ok {
		return "", 0, nil, false
	}
	if v, ok := img.Config(metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic}, name); ok {
		syns = append(syns, configSynonym{Name: name, Value: v, Source: sourceDynamicTopic})
	}
	v, src, brokerSyns, ok := d.BrokerDefault(
		metadata.ConfigLayer{Configs: img.ConfigsView(metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: strconv.Itoa(int(n.nodeID))}), Source: sourceDynamicBroker},
		metadata.ConfigLayer{Configs: img.ConfigsView(metadata.ConfigResource{Type: metadata.ConfigResourceBroker}), Source: sourceDynamicDefaultBroker},
		metadata.ConfigLayer{Configs: n.staticTopicDefaults, Source: sourceStaticBroker},
	)
	if !ok {
		v, src, brokerSyns = d.Default, sourceDefault, []configSynonym{{Name: name, Value: d.Default, Source: sourceDefault}}
	}
	syns = append(syns, brokerSyns...)
	if syns[0].Source == sourceDynamicTopic {
		return syns[0].Value, sourceDynamicTopic, syns, true
	}
	return v, src, syns, true
}

// topicConfigValue is a topic config's effective value and its source; ""
// and 0 for an unknown config.
func (b *Broker) topicConfigValue(img *metadata.Image, topic, name string) (string, int8) {
	v, src, _, _ := b.configs.topicConfigSynonyms(img, topic, name)
	return v, src
}

// logConfig is the storage configuration of a topic's partitions: every
// topic config the log honours, from its effective value.
func (b *Broker) logConfig(img *metadata.Image, topic string) storage.LogConfig {
	cfg := storage.DefaultLogConfig()
	long := func(name string, dst *int64) {
		v, _ := b.topicConfigValue(img, topic, name)
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			*dst = n
		}
	}
	integer := func(name string, dst *int) {
		var n int64 = int64(*dst)
		long(name, &n)
		*dst = int(n)
	}
	long("segment.bytes", &cfg.SegmentBytes)
	long("segment.ms", &cfg.SegmentMs)
	long("segment.jitter.ms", &cfg.SegmentJitterMs)
	integer("segment.index.bytes", &cfg.SegmentIndexBytes)
	integer("index.interval.bytes", &cfg.IndexIntervalBytes)
	long("retention.ms", &cfg.RetentionMs)
	long("retention.bytes", &cfg.RetentionBytes)
	long("flush.messages", &cfg.FlushMessages)
	long("flush.ms", &cfg.FlushMs)
	integer("max.message.bytes", &cfg.MaxMessageBytes)
	long("file.delete.delay.ms", &cfg.FileDeleteDelayMs)
	if v, _ := b.topicConfigValue(img, topic, "message.timestamp.type"); v != "" {
		cfg.MessageTimestampType = strings.TrimSpace(v)
	}
	cleanup, _ := b.topicConfigValue(img, topic, "cleanup.policy")
	cfg.Compact = slices.Contains(splitList(cleanup), "compact")
	cfg.NoDelete = !slices.Contains(splitList(cleanup), "delete")
	long("delete.retention.ms", &cfg.DeleteRetentionMs)
	long("min.compaction.lag.ms", &cfg.MinCompactionLagMs)
	long("max.compaction.lag.ms", &cfg.MaxCompactionLagMs)
	if v, _ := b.topicConfigValue(img, topic, "min.cleanable.dirty.ratio"); v != "" {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			cfg.MinCleanableDirtyRatio = f
		}
	}
	if v, _ := b.topicConfigValue(img, topic, "preallocate"); v != "" {
		cfg.Preallocate, _ = strconv.ParseBool(strings.TrimSpace(v))
	}
	// storage.LogConfig reads 0 as "Kafka's default": an explicit 0 is -1.
	if cfg.DeleteRetentionMs == 0 {
		cfg.DeleteRetentionMs = -1
	}
	if cfg.MinCleanableDirtyRatio == 0 {
		cfg.MinCleanableDirtyRatio = -1
	}
	return cfg
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sortedStrings sorts s in place and returns it.
func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}

// checkCleanerThreads is Kafka's LogCleaner.validateReconfiguration for a
// change of log.cleaner.threads this broker would act on (its own config,
// or the cluster-wide one it has no own value over): a running cleaner's
// threads may at most halve or double at a time. touched are the configs
// the change sets or deletes, next the resource's configs after it.
func (b *Broker) checkCleanerThreads(name string, touched []string, next map[string]string) (int16, string) {
	const key = "log.cleaner.threads"
	v, set := next[key]
	if !set || !slices.Contains(touched, key) {
		return 0, ""
	}
	switch own := strconv.Itoa(int(b.nodeID)); {
	case name == own:
	case name == "":
		if _, overridden := b.ownBrokerConfigs(b.image.Load())[key]; overridden {
			return 0, ""
		}
	default:
		return 0, "" // another broker's: it checks against its own cleaner
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	cur := b.logs.CleanerThreads()
	if err != nil || cur == 0 {
		return 0, "" // the controller checks the value; no cleaner runs to resize
	}
	switch {
	case n < cur/2:
		return kerr.InvalidConfig.Code, fmt.Sprintf("Log cleaner threads cannot be reduced to less than half the current value %d", cur)
	case n > cur*2:
		return kerr.InvalidConfig.Code, fmt.Sprintf("Log cleaner threads cannot be increased to more than double the current value %d", cur)
	}
	return 0, ""
}

// minCleanerBackoff is the shortest wait between a cleaner's looks for a
// log to clean. Kafka's cleaner threads do not wait at all with
// log.cleaner.backoff.ms=0 and so spin on a core; Keel's wait this long.
const minCleanerBackoff = 10 * time.Millisecond

// cleanerBackoff is log.cleaner.backoff.ms as the cleaners wait it: at
// least minCleanerBackoff, so that 0 (Kafka: look again at once) is not the
// log manager's default, which its zero value asks for.
func cleanerBackoff(d time.Duration) time.Duration { return max(d, minCleanerBackoff) }
