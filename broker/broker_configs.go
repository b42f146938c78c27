package broker

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/tlsconf"
)

// brokerConfigEntry is one broker config as DescribeConfigs reports it.
type brokerConfigEntry struct {
	name  string
	value *string // nil: unset (a null value, as Kafka reports one)
	typ   kmsg.ConfigType
	// def is Kafka's default, rendered as value would be ("" = none,
	// emptyDefault = an empty string or list).
	def string
}

// emptyDefault is the def of a config whose Kafka default is an empty
// string or list (authorizer.class.name, ssl.cipher.suites, ...), which
// DescribeConfigs reports as "", where a config with no default is null.
const emptyDefault = "\x00"

// defaultValue is e's default as DescribeConfigs reports it; false: none.
func (e brokerConfigEntry) defaultValue() (string, bool) {
	switch e.def {
	case "":
		return "", false
	case emptyDefault:
		return "", true
	}
	return e.def, true
}

// brokerConfigEntries lists this node's static broker configs (the
// server.properties keys Keel understands) with their values.
func brokerConfigEntries(c *Config) []brokerConfigEntry {
	str := func(s string) *string { return &s }
	i64 := func(n int64) *string { return str(strconv.FormatInt(n, 10)) }
	i := func(n int) *string { return i64(int64(n)) }
	ms := func(d time.Duration) *string { return i64(d.Milliseconds()) }
	optMs := func(n int64) *string {
		if n <= 0 {
			return nil
		}
		return i64(n)
	}
	b := func(v bool) *string { return str(strconv.FormatBool(v)) }
	// explicit is a key as server.properties wrote it, else its default
	// (nil if none): the time keys, which Kafka keeps in their own units
	// (log.retention.hours=168, log.retention.ms unset).
	explicit := func(key, def string) *string {
		if v, ok := c.Explicit[key]; ok {
			return str(v)
		}
		if def == "" {
			return nil
		}
		return str(def)
	}
	list := func(v []string) *string { return str(strings.Join(v, ",")) }
	const (
		tb, ts, ti, tsh, tl, tli = kmsg.ConfigTypeBoolean, kmsg.ConfigTypeString, kmsg.ConfigTypeInt,
			kmsg.ConfigTypeShort, kmsg.ConfigTypeLong, kmsg.ConfigTypeList
		long = "9223372036854775807"
	)
	entries := []brokerConfigEntry{
		{"advertised.listeners", str(c.AdvertisedListeners), ts, ""},
		{"allow.everyone.if.no.acl.found", b(c.AllowEveryoneIfNoACLFound), tb, "false"},
		{"authorizer.class.name", str(c.AuthorizerClassName), ts, emptyDefault},
		{"auto.create.topics.enable", b(c.AutoCreateTopicsEnable), tb, "true"},
		{"auto.leader.rebalance.enable", b(c.AutoLeaderRebalanceEnable), tb, "true"},
		{"broker.rack", str(c.BrokerRack), ts, ""},
		{"broker.heartbeat.interval.ms", ms(c.BrokerHeartbeatInterval), ti, "2000"},
		{"broker.session.timeout.ms", ms(c.BrokerSessionTimeout), ti, "9000"},
		{"connections.max.idle.ms", ms(c.ConnectionsMaxIdle), tl, "600000"},
		{"connections.max.reauth.ms", ms(c.ConnectionsMaxReauth), tl, "0"},
		{"controller.listener.names", list(c.ControllerListenerNames), ts, ""},
		{"delegation.token.expiry.check.interval.ms", ms(c.DelegationTokenExpiryCheckInterval), tl, "3600000"},
		{"delegation.token.expiry.time.ms", ms(c.DelegationTokenExpiryTime), tl, "86400000"},
		{"delegation.token.max.lifetime.ms", ms(c.DelegationTokenMaxLifetime), tl, "604800000"},
		{"delegation.token.secret.key", str(c.DelegationTokenSecretKey), kmsg.ConfigTypePassword, emptyDefault},
		{"controller.quorum.bootstrap.servers", list(c.ControllerQuorumBootstrapServers), tli, emptyDefault},
		{"controller.quorum.voters", str(c.ControllerQuorumVoters), tli, emptyDefault},
		{"default.replication.factor", i(int(c.DefaultReplicationFactor)), ti, "1"},
		{"delete.topic.enable", b(c.DeleteTopicEnable), tb, "true"},
		{"fetch.max.bytes", i(int(c.FetchMaxBytes)), ti, "57671680"},
		{"group.initial.rebalance.delay.ms", ms(c.GroupInitialRebalanceDelay), ti, "3000"},
		{"group.max.session.timeout.ms", ms(c.GroupMaxSessionTimeout), ti, "1800000"},
		{"group.max.size", i(c.GroupMaxSize), ti, "2147483647"},
		{"group.min.session.timeout.ms", ms(c.GroupMinSessionTimeout), ti, "6000"},
		{"initial.broker.registration.timeout.ms", ms(c.InitialBrokerRegistrationTimeout), ti, "60000"},
		{"inter.broker.listener.name", str(c.InterBrokerListenerName), ts, ""},
		{"keel.log.cache.drop.behind.bytes", i64(c.LogDropBehindBytes), tl, "0"},
		{"keel.log.delete.max.bytes.per.second", i64(c.LogDeleteBytesPerSecond), tl, "536870912"},
		{"keel.log.writeback.bytes", i64(c.LogWritebackBytes), tl, "1048576"},
		{"leader.imbalance.check.interval.seconds", i64(int64(c.LeaderImbalanceCheckInterval / time.Second)), tl, "300"},
		{"listener.security.protocol.map", explicit("listener.security.protocol.map", network.DefaultSecurityProtocolMapValue), ts, network.DefaultSecurityProtocolMapValue},
		{"listeners", str(c.Listeners), ts, ""},
		{"log.cleaner.backoff.ms", ms(c.LogCleanerBackoff), tl, "15000"},
		{"log.cleaner.dedupe.buffer.size", i64(c.LogCleanerDedupeBufferSize), tl, "134217728"},
		{"log.cleaner.delete.retention.ms", i64(c.LogCleanerDeleteRetentionMs), tl, "86400000"},
		{"log.cleaner.enable", b(c.LogCleanerEnable), tb, "true"},
		{"log.cleaner.io.max.bytes.per.second", str(metadata.JavaDouble(c.LogCleanerIOMaxBytesPerSec)), kmsg.ConfigTypeDouble, "1.7976931348623157E308"},
		{"log.cleaner.min.cleanable.ratio", str(metadata.JavaDouble(c.LogCleanerMinCleanableRatio)), kmsg.ConfigTypeDouble, "0.5"},
		{"log.cleaner.min.compaction.lag.ms", i64(c.LogCleanerMinCompactionLagMs), tl, "0"},
		{"log.cleaner.threads", i(c.LogCleanerThreads), ti, "1"},
		{"log.cleaner.max.compaction.lag.ms", i64(c.LogCleanerMaxCompactionLagMs), tl, long},
		{"log.cleanup.policy", str(c.LogCleanupPolicy), tli, "delete"},
		{"log.dirs", list(c.LogDirs), ts, ""},
		{"log.flush.interval.messages", i64(c.LogFlushIntervalMessages), tl, long},
		{"log.flush.interval.ms", optMs(c.LogFlushIntervalMs), tl, ""},
		{"log.flush.offset.checkpoint.interval.ms", ms(c.LogFlushOffsetCheckpointInterval), ti, "60000"},
		{"log.index.interval.bytes", i(c.LogIndexIntervalBytes), ti, "4096"},
		{"log.index.size.max.bytes", i(c.LogIndexSizeMaxBytes), ti, "10485760"},
		{"log.message.timestamp.type", str(c.LogMessageTimestampType), ts, "CreateTime"},
		{"log.retention.bytes", i64(c.LogRetentionBytes), tl, "-1"},
		{"log.retention.check.interval.ms", ms(c.LogRetentionCheckInterval), tl, "300000"},
		{"log.retention.hours", explicit("log.retention.hours", "168"), ti, "168"},
		{"log.retention.minutes", explicit("log.retention.minutes", ""), ti, ""},
		{"log.retention.ms", explicit("log.retention.ms", ""), tl, ""},
		{"log.roll.hours", explicit("log.roll.hours", "168"), ti, "168"},
		{"log.roll.jitter.hours", explicit("log.roll.jitter.hours", "0"), ti, "0"},
		{"log.roll.jitter.ms", explicit("log.roll.jitter.ms", ""), tl, ""},
		{"log.roll.ms", explicit("log.roll.ms", ""), tl, ""},
		{"log.segment.bytes", i64(c.LogSegmentBytes), ti, "1073741824"},
		{"log.segment.delete.delay.ms", i64(c.LogSegmentDeleteDelayMs), tl, "60000"},
		{"max.connections", i(c.MaxConnections), ti, "2147483647"},
		{"max.connection.creation.rate", i(c.MaxConnectionCreationRate), ti, "2147483647"},
		{"max.connections.per.ip", i(c.MaxConnectionsPerIP), ti, "2147483647"},
		{"max.connections.per.ip.overrides", str(c.MaxConnectionsPerIPOverrides), ts, emptyDefault},
		{"max.incremental.fetch.session.cache.slots", i(c.FetchSessionCacheSlots), ti, "1000"},
		{"max.request.partition.size.limit", i(c.MaxRequestPartitionSizeLimit), ti, "2000"},
		{"metadata.log.max.record.bytes.between.snapshots", i64(c.MetadataMaxBytesBetweenSnapshots), tl, "20971520"},
		{"metadata.log.max.snapshot.interval.ms", ms(c.MetadataMaxSnapshotInterval), tl, "3600000"},
		{"num.replica.fetchers", i(c.NumReplicaFetchers), ti, "1"},
		{"message.max.bytes", i(c.MessageMaxBytes), ti, "1048588"},
		{"metadata.log.dir", str(c.MetadataLogDir), ts, ""},
		{"min.insync.replicas", i(c.MinInsyncReplicas), ti, "1"},
		{"node.id", i(int(c.NodeID)), ti, ""},
		{"num.partitions", i(int(c.NumPartitions)), ti, "1"},
		{"num.recovery.threads.per.data.dir", i(c.NumRecoveryThreadsPerDataDir), ti, "1"},
		{"offset.metadata.max.bytes", i(c.OffsetMetadataMaxBytes), ti, "4096"},
		{"offsets.commit.timeout.ms", ms(c.OffsetsCommitTimeout), ti, "5000"},
		{"offsets.load.buffer.size", i(c.OffsetsLoadBufferSize), ti, "5242880"},
		{"offsets.retention.check.interval.ms", ms(c.OffsetsRetentionCheckInterval), tl, "600000"},
		{"offsets.retention.minutes", i(int(c.OffsetsRetention / time.Minute)), ti, "10080"},
		{"offsets.topic.num.partitions", i(int(c.OffsetsTopicNumPartitions)), ti, "50"},
		{"offsets.topic.replication.factor", i(int(c.OffsetsTopicReplicationFactor)), tsh, "3"},
		{"process.roles", list(c.ProcessRoles), tli, ""},
		{"producer.id.expiration.check.interval.ms", ms(c.ProducerIDExpirationCheckInterval), ti, "600000"},
		{"producer.id.expiration.ms", ms(c.ProducerIDExpiration), ti, "86400000"},
		{"queued.max.request.bytes", i64(c.QueuedMaxRequestBytes), tl, "-1"},
		{"quota.window.num", i(c.QuotaWindowNum), ti, "11"},
		{"quota.window.size.seconds", i(c.QuotaWindowSizeSeconds), ti, "1"},
		{"replica.fetch.backoff.ms", ms(c.ReplicaFetchBackoff), ti, "1000"},
		{"replica.fetch.max.bytes", i(c.ReplicaFetchMaxBytes), ti, "1048576"},
		{"replica.fetch.min.bytes", i(c.ReplicaFetchMinBytes), ti, "1"},
		{"replica.fetch.response.max.bytes", i(c.ReplicaFetchResponseMaxBytes), ti, "10485760"},
		{"replica.fetch.wait.max.ms", ms(c.ReplicaFetchWaitMax), ti, "500"},
		{"replica.high.watermark.checkpoint.interval.ms", ms(c.HighWatermarkCheckpointInterval), tl, "5000"},
		{"replica.lag.time.max.ms", ms(c.ReplicaLagTimeMax), tl, "30000"},
		{"replica.selector.class", str(c.ReplicaSelectorClass), ts, ""},
		{"replica.socket.receive.buffer.bytes", i(c.ReplicaSocketReceiveBufferBytes), ti, "-1"},
		{"replica.socket.timeout.ms", ms(c.ReplicaSocketTimeout), ti, "30000"},
		{"replication.quota.window.num", i(c.ReplicationQuotaWindowNum), ti, "11"},
		{"replication.quota.window.size.seconds", i(c.ReplicationQuotaWindowSizeSeconds), ti, "1"},
		{"socket.request.max.bytes", i(int(c.SocketRequestMaxBytes)), ti, "104857600"},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", ms(c.TransactionAbortTimedOutInterval), ti, "10000"},
		{"transaction.max.timeout.ms", ms(c.TransactionMaxTimeout), ti, "900000"},
		{"transaction.partition.verification.enable", b(c.TransactionPartitionVerificationEnable), tb, "true"},
		{"transaction.remove.expired.transaction.cleanup.interval.ms", ms(c.TransactionRemoveExpiredInterval), ti, "3600000"},
		{"transaction.state.log.min.isr", i(c.TransactionStateLogMinISR), ti, "2"},
		{"transaction.state.log.num.partitions", i(int(c.TransactionStateLogNumPartitions)), ti, "50"},
		{"transaction.state.log.replication.factor", i(int(c.TransactionStateLogReplicationFactor)), tsh, "3"},
		{"transaction.state.log.segment.bytes", i(c.TransactionStateLogSegmentBytes), ti, "104857600"},
		{"transactional.id.expiration.ms", ms(c.TransactionalIDExpiration), ti, "604800000"},
		{"unclean.leader.election.enable", b(c.UncleanLeaderElectionEnable), tb, "false"},
	}
	// The topic defaults with no Config field (compression.type,
	// log.preallocate, ...): as server.properties wrote them, else
	// Kafka's default.
	for _, name := range metadata.TopicDefaultConfigNames() {
		if slices.ContainsFunc(entries, func(e brokerConfigEntry) bool { return e.name == name }) {
			continue
		}
		d, _ := metadata.TopicDefaultConfigDef(name)
		entries = append(entries, brokerConfigEntry{name, explicit(name, d.Default), configType(d.Type), d.Default})
	}
	// super.users is the authorizer's, not a broker config of Kafka's:
	// listed, as Kafka lists it, only when server.properties sets it.
	if len(c.SuperUsers) > 0 {
		entries = append(entries, brokerConfigEntry{"super.users", str(strings.Join(c.SuperUsers, ";")), ts, ""})
	}
	// The plain ssl.* and sasl.* settings: as server.properties set them,
	// else Kafka's default.
	for _, d := range securityConfigDefaults() {
		v, ok := c.SSL[d.name]
		if !ok {
			v, ok = c.SASL[d.name]
		}
		var value *string
		if ok {
			value = str(v)
		}
		entries = append(entries, brokerConfigEntry{d.name, value, d.typ, d.def})
	}
	slices.SortFunc(entries, func(a, b brokerConfigEntry) int { return strings.Compare(a.name, b.name) })
	return entries
}

// securityConfigDefault is a security setting's type and Kafka's default
// ("" = none, emptyDefault = empty).
type securityConfigDefault struct {
	name string
	typ  kmsg.ConfigType
	def  string
}

// securityConfigDefaults are the plain (not listener-prefixed) ssl.* and
// sasl.* settings a broker reads, with Kafka's types and defaults.
// DescribeConfigs lists each whether set or not, as Kafka does; the
// listener-prefixed forms only when set. Kafka's security settings Keel
// does not read (ssl.provider, sasl.kerberos.*, ...) are not listed.
// sasl.enabled.mechanisms and the internode mechanisms default to GSSAPI,
// as in Kafka, which Keel does not support: a SASL listener names its
// mechanisms.
func securityConfigDefaults() []securityConfigDefault {
	tls := tlsconf.Defaults()
	const (
		ts, tli, tb, ti, tl = kmsg.ConfigTypeString, kmsg.ConfigTypeList, kmsg.ConfigTypeBoolean, kmsg.ConfigTypeInt, kmsg.ConfigTypeLong
		tc, tp, tsh, td     = kmsg.ConfigTypeClass, kmsg.ConfigTypePassword, kmsg.ConfigTypeShort, kmsg.ConfigTypeDouble
	)
	i := strconv.Itoa
	return []securityConfigDefault{
		{"sasl.enabled.mechanisms", tli, "GSSAPI"},
		{"sasl.login.callback.handler.class", tc, ""},
		{"sasl.login.connect.timeout.ms", ti, ""},
		{"sasl.login.read.timeout.ms", ti, ""},
		{"sasl.login.refresh.buffer.seconds", tsh, "300"},
		{"sasl.login.refresh.min.period.seconds", tsh, "60"},
		{"sasl.login.refresh.window.factor", td, "0.8"},
		{"sasl.login.refresh.window.jitter", td, "0.05"},
		{"sasl.login.retry.backoff.max.ms", tl, "10000"},
		{"sasl.login.retry.backoff.ms", tl, "100"},
		{"sasl.mechanism.controller.protocol", ts, "GSSAPI"},
		{"sasl.mechanism.inter.broker.protocol", ts, "GSSAPI"},
		{"sasl.oauthbearer.assertion.algorithm", ts, "RS256"},
		{"sasl.oauthbearer.assertion.claim.aud", ts, ""},
		{"sasl.oauthbearer.assertion.claim.exp.seconds", ti, "300"},
		{"sasl.oauthbearer.assertion.claim.iss", ts, ""},
		{"sasl.oauthbearer.assertion.claim.jti.include", tb, "false"},
		{"sasl.oauthbearer.assertion.claim.nbf.seconds", ti, "60"},
		{"sasl.oauthbearer.assertion.claim.sub", ts, ""},
		{"sasl.oauthbearer.assertion.file", ts, ""},
		{"sasl.oauthbearer.assertion.private.key.file", ts, ""},
		{"sasl.oauthbearer.assertion.private.key.passphrase", tp, ""},
		{"sasl.oauthbearer.assertion.template.file", ts, ""},
		{"sasl.oauthbearer.client.credentials.client.id", ts, ""},
		{"sasl.oauthbearer.client.credentials.client.secret", tp, ""},
		{"sasl.oauthbearer.clock.skew.seconds", ti, i(oauthClockSkewSeconds)},
		{"sasl.oauthbearer.expected.audience", tli, ""},
		{"sasl.oauthbearer.expected.issuer", ts, ""},
		{"sasl.oauthbearer.header.urlencode", tb, "false"},
		{"sasl.oauthbearer.jwks.endpoint.refresh.ms", tl, i(oauthJWKSRefreshMs)},
		{"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", tl, i(oauthJWKSRetryBackoffMaxMs)},
		{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", tl, i(oauthJWKSRetryBackoffMs)},
		{"sasl.oauthbearer.jwks.endpoint.url", ts, ""},
		{"sasl.oauthbearer.jwt.retriever.class", tc, "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever"},
		{"sasl.oauthbearer.jwt.validator.class", tc, oauthJWTValidatorDefault},
		{"sasl.oauthbearer.scope", ts, ""},
		{"sasl.oauthbearer.scope.claim.name", ts, oauthScopeClaim},
		{"sasl.oauthbearer.sub.claim.name", ts, oauthSubClaim},
		{"sasl.oauthbearer.token.endpoint.url", ts, ""},
		{"ssl.allow.dn.changes", tb, "false"},
		{"ssl.allow.san.changes", tb, "false"},
		{"ssl.cipher.suites", tli, emptyDefault},
		{"ssl.client.auth", ts, tls.ClientAuth},
		{"ssl.enabled.protocols", tli, strings.Join(tls.EnabledProtocols, ",")},
		{"ssl.endpoint.identification.algorithm", ts, tls.EndpointIdentificationAlgorithm},
		{"ssl.key.password", tp, ""},
		{"ssl.keystore.certificate.chain", tp, ""},
		{"ssl.keystore.key", tp, ""},
		{"ssl.keystore.location", ts, ""},
		{"ssl.keystore.password", tp, ""},
		{"ssl.keystore.type", ts, tls.KeystoreType},
		{"ssl.principal.mapping.rules", ts, tls.PrincipalMappingRules},
		{"ssl.protocol", ts, tls.Protocol},
		{"ssl.truststore.certificates", tp, ""},
		{"ssl.truststore.location", ts, ""},
		{"ssl.truststore.password", tp, ""},
		{"ssl.truststore.type", ts, tls.TruststoreType},
	}
}

// configType maps a metadata config type to the wire's.
func configType(t metadata.ConfigValueType) kmsg.ConfigType {
	switch t {
	case metadata.ConfigBoolean:
		return kmsg.ConfigTypeBoolean
	case metadata.ConfigString:
		return kmsg.ConfigTypeString
	case metadata.ConfigInt:
		return kmsg.ConfigTypeInt
	case metadata.ConfigLong:
		return kmsg.ConfigTypeLong
	case metadata.ConfigDouble:
		return kmsg.ConfigTypeDouble
	case metadata.ConfigList:
		return kmsg.ConfigTypeList
	}
	return kmsg.ConfigTypeUnknown
}

// topicConfigDocs are the descriptions DescribeConfigs returns with
// IncludeDocumentation (v3+), abridged from Kafka's TopicConfig.
var topicConfigDocs = map[string]string{
	"cleanup.policy":                          "The retention policy of old log segments: delete, compact, or both.",
	"compression.type":                        "The final compression type of the topic's batches; producer keeps the producer's.",
	"compression.gzip.level":                  "The gzip compression level when compression.type is gzip.",
	"compression.lz4.level":                   "The lz4 compression level when compression.type is lz4.",
	"compression.zstd.level":                  "The zstd compression level when compression.type is zstd.",
	"delete.retention.ms":                     "How long delete tombstones are retained on compacted topics.",
	"file.delete.delay.ms":                    "How long a deleted segment's files stay before they are removed.",
	"flush.messages":                          "Force an fsync after this many messages.",
	"flush.ms":                                "Force an fsync when the oldest unflushed message is older than this.",
	"follower.replication.throttled.replicas": "Replicas whose follower replication is throttled.",
	"index.interval.bytes":                    "How many bytes of batches lie between two offset index entries.",
	"leader.replication.throttled.replicas":   "Replicas whose leader replication is throttled.",
	"local.retention.bytes":                   "Local retention by size with tiered storage (-2: retention.bytes).",
	"local.retention.ms":                      "Local retention by time with tiered storage (-2: retention.ms).",
	"max.compaction.lag.ms":                   "The longest a message stays ineligible for compaction.",
	"max.message.bytes":                       "The largest record batch size allowed.",
	"message.downconversion.enable":           "Whether old-format consumers get down-converted batches.",
	"message.timestamp.after.max.ms":          "How far a record timestamp may be ahead of the broker's clock.",
	"message.timestamp.before.max.ms":         "How far a record timestamp may be behind the broker's clock.",
	"message.timestamp.difference.max.ms":     "The largest difference allowed between a record timestamp and the broker's clock.",
	"message.timestamp.type":                  "CreateTime keeps the producer's timestamps, LogAppendTime stamps the broker's.",
	"min.cleanable.dirty.ratio":               "The dirty share of the log above which it is compacted.",
	"min.compaction.lag.ms":                   "The shortest time a message stays uncompacted.",
	"min.insync.replicas":                     "The fewest in-sync replicas an acks=all produce needs.",
	"preallocate":                             "Whether new segment files are preallocated.",
	"remote.storage.enable":                   "Whether tiered storage is enabled for the topic.",
	"retention.bytes":                         "The largest size a partition may grow to before old segments are deleted (-1: no limit).",
	"retention.ms":                            "How long a segment is kept before it is deleted (-1: forever).",
	"segment.bytes":                           "The size of each segment file.",
	"segment.index.bytes":                     "The size of each segment's offset and time indexes.",
	"segment.jitter.ms":                       "The largest random jitter subtracted from segment.ms.",
	"segment.ms":                              "The age after which the active segment rolls even when not full.",
	"unclean.leader.election.enable":          "Whether a replica outside the ISR may become leader, at the cost of data loss.",
}
