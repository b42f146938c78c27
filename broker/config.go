package broker

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/metadata"
)

// Config is a node's configuration, in Kafka's server.properties vocabulary.
// Fields are filled from defaults, then a properties file, then command-line
// overrides (keel server --override key=value, as kafka-server-start.sh).
type Config struct {
	ProcessRoles                         []string      // process.roles
	NodeID                               int32         // node.id
	BrokerRack                           string        // broker.rack
	ReplicaSelectorClass                 string        // replica.selector.class
	ControllerQuorumVoters               string        // controller.quorum.voters
	ControllerQuorumBootstrapServers     []string      // controller.quorum.bootstrap.servers (KIP-853)
	InitialBrokerRegistrationTimeout     time.Duration // initial.broker.registration.timeout.ms
	MetricsAddress                       string        // keel.metrics.address
	LogWritebackBytes                    int64         // keel.log.writeback.bytes
	LogDropBehindBytes                   int64         // keel.log.cache.drop.behind.bytes
	LogDeleteBytesPerSecond              int64         // keel.log.delete.max.bytes.per.second
	ControllerListenerNames              []string      // controller.listener.names
	Listeners                            string        // listeners
	AdvertisedListeners                  string        // advertised.listeners
	ListenerSecurityProtocolMap          string        // listener.security.protocol.map
	InterBrokerListenerName              string        // inter.broker.listener.name
	LogDirs                              []string      // log.dirs (or log.dir)
	MetadataLogDir                       string        // metadata.log.dir (default: first of log.dirs)
	NumPartitions                        int32         // num.partitions
	DefaultReplicationFactor             int16         // default.replication.factor
	MinInsyncReplicas                    int           // min.insync.replicas
	ReplicaLagTimeMax                    time.Duration
	LeaderImbalanceCheckInterval         time.Duration
	NumReplicaFetchers                   int
	ReplicaFetchMaxBytes                 int           // replica.fetch.max.bytes
	ReplicaFetchResponseMaxBytes         int           // replica.fetch.response.max.bytes
	ReplicaFetchWaitMax                  time.Duration // replica.fetch.wait.max.ms
	ReplicaFetchMinBytes                 int           // replica.fetch.min.bytes
	ReplicaFetchBackoff                  time.Duration // replica.fetch.backoff.ms
	ReplicaSocketTimeout                 time.Duration // replica.socket.timeout.ms
	ReplicaSocketReceiveBufferBytes      int           // replica.socket.receive.buffer.bytes; -1: the OS's
	MetadataMaxBytesBetweenSnapshots     int64         // metadata.log.max.record.bytes.between.snapshots
	MetadataMaxSnapshotInterval          time.Duration // metadata.log.max.snapshot.interval.ms
	QuotaWindowNum                       int           // quota.window.num
	QuotaWindowSizeSeconds               int           // quota.window.size.seconds
	ControllerQuotaWindowNum             int           // controller.quota.window.num
	ControllerQuotaWindowSizeSeconds     int           // controller.quota.window.size.seconds
	ReplicationQuotaWindowNum            int           // replication.quota.window.num
	ReplicationQuotaWindowSizeSeconds    int           // replication.quota.window.size.seconds
	UncleanLeaderElectionEnable          bool
	AutoCreateTopicsEnable               bool
	DeleteTopicEnable                    bool  // delete.topic.enable
	FetchMaxBytes                        int32 // fetch.max.bytes (KIP-541)
	FetchSessionCacheSlots               int   // max.incremental.fetch.session.cache.slots
	MaxRequestPartitionSizeLimit         int   // max.request.partition.size.limit
	AutoLeaderRebalanceEnable            bool
	OffsetsTopicReplicationFactor        int16
	OffsetsTopicNumPartitions            int32
	TransactionStateLogReplicationFactor int16
	TransactionStateLogMinISR            int
	TransactionStateLogNumPartitions     int32
	TransactionStateLogSegmentBytes      int
	TransactionMaxTimeout                time.Duration // transaction.max.timeout.ms
	TransactionalIDExpiration            time.Duration // transactional.id.expiration.ms
	TransactionAbortTimedOutInterval     time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms
	TransactionRemoveExpiredInterval     time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms
	// TransactionPartitionVerificationEnable is
	// transaction.partition.verification.enable (KIP-890; dynamic too).
	TransactionPartitionVerificationEnable bool
	BrokerHeartbeatInterval                time.Duration
	BrokerSessionTimeout                   time.Duration
	SocketRequestMaxBytes                  int32
	QueuedMaxRequestBytes                  int64 // queued.max.request.bytes; <= 0: no bound
	SocketSendBufferBytes                  int   // socket.send.buffer.bytes; -1: the OS's (autotuned)
	SocketReceiveBufferBytes               int   // socket.receive.buffer.bytes; -1: the OS's
	MaxConnections                         int
	MaxConnectionsPerIP                    int    // max.connections.per.ip
	MaxConnectionsPerIPOverrides           string // max.connections.per.ip.overrides
	MaxConnectionCreationRate              int    // max.connection.creation.rate
	// ListenerConnectionQuotas holds listener.name.<listener>.max.connections
	// and listener.name.<listener>.max.connection.creation.rate as written
	// (key → value): a listener's own limits.
	ListenerConnectionQuotas      map[string]string
	ConnectionsMaxIdle            time.Duration
	ConnectionsMaxReauth          time.Duration // connections.max.reauth.ms (KIP-368); SASL may override it per listener and mechanism
	NumRecoveryThreadsPerDataDir  int
	GroupInitialRebalanceDelay    time.Duration
	GroupMinSessionTimeout        time.Duration // group.min.session.timeout.ms
	GroupMaxSessionTimeout        time.Duration // group.max.session.timeout.ms
	GroupMaxSize                  int           // group.max.size
	OffsetsRetention              time.Duration // offsets.retention.minutes
	OffsetsRetentionCheckInterval time.Duration // offsets.retention.check.interval.ms
	OffsetsCommitTimeout          time.Duration // offsets.commit.timeout.ms
	OffsetMetadataMaxBytes        int           // offset.metadata.max.bytes
	OffsetsLoadBufferSize         int           // offsets.load.buffer.size

	// Delegation tokens (KIP-48): delegation.token.secret.key (or its
	// deprecated name delegation.token.master.key) enables them; every
	// node must have the same one.
	DelegationTokenSecretKey           string
	DelegationTokenMaxLifetime         time.Duration // delegation.token.max.lifetime.ms
	DelegationTokenExpiryTime          time.Duration // delegation.token.expiry.time.ms
	DelegationTokenExpiryCheckInterval time.Duration // delegation.token.expiry.check.interval.ms

	// Log defaults (log.* keys); topic configs override them per topic.
	LogSegmentBytes                  int64
	LogRollMs                        int64
	LogRollJitterMs                  int64
	LogRetentionMs                   int64
	LogRetentionBytes                int64
	LogRetentionCheckInterval        time.Duration
	LogIndexSizeMaxBytes             int
	LogIndexIntervalBytes            int
	LogFlushIntervalMessages         int64
	LogFlushIntervalMs               int64
	LogFlushSchedulerInterval        time.Duration
	LogFlushOffsetCheckpointInterval time.Duration
	HighWatermarkCheckpointInterval  time.Duration // replica.high.watermark.checkpoint.interval.ms
	LogSegmentDeleteDelayMs          int64
	MessageMaxBytes                  int
	LogMessageTimestampType          string

	// Log cleaner (storage/cleaner*.go): log.cleaner.* keys, and the
	// defaults of the compaction topic configs.
	LogCleanerEnable             bool          // log.cleaner.enable
	LogCleanerThreads            int           // log.cleaner.threads
	LogCleanerBackoff            time.Duration // log.cleaner.backoff.ms
	LogCleanerDedupeBufferSize   int64         // log.cleaner.dedupe.buffer.size
	LogCleanupPolicy             string        // log.cleanup.policy (cleanup.policy)
	LogCleanerDeleteRetentionMs  int64         // log.cleaner.delete.retention.ms (delete.retention.ms)
	LogCleanerMinCleanableRatio  float64       // log.cleaner.min.cleanable.ratio (min.cleanable.dirty.ratio)
	LogCleanerMinCompactionLagMs int64         // log.cleaner.min.compaction.lag.ms (min.compaction.lag.ms)
	LogCleanerMaxCompactionLagMs int64         // log.cleaner.max.compaction.lag.ms (max.compaction.lag.ms)
	LogCleanerIOMaxBytesPerSec   float64       // log.cleaner.io.max.bytes.per.second

	// Idempotent producer state (storage/producer_state.go).
	ProducerIDExpiration              time.Duration // producer.id.expiration.ms
	ProducerIDExpirationCheckInterval time.Duration // producer.id.expiration.check.interval.ms

	// Authorization (ACLs): Kafka's StandardAuthorizer, with ACLs in the
	// metadata log.
	AuthorizerClassName       string   // authorizer.class.name ("" or StandardAuthorizerClass)
	SuperUsers                []string // super.users, principals separated by ";"
	AllowEveryoneIfNoACLFound bool     // allow.everyone.if.no.acl.found

	// SSL holds the ssl.* settings and their listener-prefixed overrides
	// (listener.name.<listener>.ssl.*) as written; ListenerTLS reads them.
	SSL map[string]string
	// SASL holds the sasl.* settings and their listener-prefixed forms
	// (listener.name.<listener>.sasl.enabled.mechanisms,
	// listener.name.<listener>.<mechanism>.sasl.jaas.config) as written;
	// loadNodeSASL reads them.
	SASL map[string]string

	// Explicit holds the known keys that server.properties or an override
	// set (whatever their value), with the value as written: DescribeConfigs
	// reports those as STATIC_BROKER_CONFIG and the rest as DEFAULT_CONFIG,
	// as Kafka does.
	Explicit map[string]string
	// TopicDefaults holds the server.properties values of the broker
	// configs that set a topic config's default and have no field here
	// (compression.type, log.preallocate,
	// log.message.timestamp.before.max.ms, ...; metadata's
	// TopicDefaultConfigNames), as written. They are in Explicit too.
	TopicDefaults map[string]string
	// Unknown lists keys this build does not know; the caller warns about
	// them (a user's server.properties should mostly just work).
	Unknown []string
	// Ignored lists known Kafka keys that have no meaning in Keel (thread
	// pool sizes of the JVM broker, ZooKeeper settings).
	Ignored []string
	// NotApplied lists Kafka keys set to something Keel does not do, each
	// as "key: why"; the caller warns about them.
	NotApplied []string

	// KIP-848 consumer groups.
	GroupRebalanceProtocols   []string      // group.coordinator.rebalance.protocols
	ConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms
	ConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms
	ConsumerGroupMaxSize      int           // group.consumer.max.size
	ConsumerAssignors         []string      // group.consumer.assignors, as names (uniform, range)
	ConsumerMigrationPolicy   string        // group.consumer.migration.policy
	// The bounds of group configs (and of the two defaults above).
	ConsumerMinSessionTimeout    time.Duration // group.consumer.min.session.timeout.ms
	ConsumerMaxSessionTimeout    time.Duration // group.consumer.max.session.timeout.ms
	ConsumerMinHeartbeatInterval time.Duration // group.consumer.min.heartbeat.interval.ms
	ConsumerMaxHeartbeatInterval time.Duration // group.consumer.max.heartbeat.interval.ms
}

// configKey describes one known key: its default and how to set it.
type configKey struct {
	def string
	set func(c *Config, v string) error
	doc string
}

func setInt32(dst *int32) func(*Config, string) error {
	return func(_ *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		*dst = int32(n)
		return err
	}
}

// configKeys is the table of every key this build understands.
func configKeys(c *Config) map[string]configKey {
	i32 := func(p *int32) func(*Config, string) error { return setInt32(p) }
	i16 := func(p *int16) func(*Config, string) error {
		return func(_ *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 16)
			*p = int16(n)
			return err
		}
	}
	i := func(p *int) func(*Config, string) error {
		return func(_ *Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			*p = n
			return err
		}
	}
	i64 := func(p *int64) func(*Config, string) error {
		return func(_ *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			*p = n
			return err
		}
	}
	secs := func(p *time.Duration) func(*Config, string) error {
		return func(_ *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			*p = time.Duration(n) * time.Second
			return err
		}
	}
	ms := func(p *time.Duration) func(*Config, string) error {
		return func(_ *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			*p = time.Duration(n) * time.Millisecond
			return err
		}
	}
	b := func(p *bool) func(*Config, string) error {
		return func(_ *Config, v string) error {
			x, err := strconv.ParseBool(strings.TrimSpace(v))
			*p = x
			return err
		}
	}
	s := func(p *string) func(*Config, string) error {
		return func(_ *Config, v string) error { *p = strings.TrimSpace(v); return nil }
	}
	f64 := func(p *float64) func(*Config, string) error {
		return func(_ *Config, v string) error {
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			*p = x
			return err
		}
	}
	list := func(p *[]string) func(*Config, string) error {
		return func(_ *Config, v string) error { *p = splitList(v); return nil }
	}
	scaled := func(p *int64, unit int64) func(*Config, string) error {
		return func(_ *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if n > 0 {
				n *= unit
			}
			*p = n
			return err
		}
	}
	const hour, minute = int64(time.Hour / time.Millisecond), int64(time.Minute / time.Millisecond)
	return map[string]configKey{
		"process.roles":            {"broker,controller", list(&c.ProcessRoles), "broker, controller, or both"},
		"node.id":                  {"1", i32(&c.NodeID), "this node's id"},
		"controller.quorum.voters": {"1@localhost:9093", s(&c.ControllerQuorumVoters), "id@host:port of each controller"},
		"broker.rack": {"", s(&c.BrokerRack),
			"this broker's rack (or availability zone): new topics spread each partition's replicas over the racks, Metadata tells clients, and with replica.selector.class consumers that set client.rack read from a replica in their rack"},
		"replica.selector.class": {"", s(&c.ReplicaSelectorClass),
			"org.apache.kafka.common.replica.RackAwareReplicaSelector lets consumers (client.rack) fetch from an in-sync follower in their rack (KIP-392); empty: every consumer reads from the leader"},
		"controller.quorum.bootstrap.servers": {"", list(&c.ControllerQuorumBootstrapServers),
			"host:port of the controllers, for a quorum whose voters were set when formatting (keel format --standalone or --initial-controllers)"},
		"initial.broker.registration.timeout.ms": {"60000", ms(&c.InitialBrokerRegistrationTimeout),
			"how long a broker-only node started with controller.quorum.bootstrap.servers (or a controller formatted with --no-initial-controllers) waits to learn the voters before it exits"},
		"keel.metrics.address": {"", s(&c.MetricsAddress),
			"host:port where http://host:port/metrics serves Kafka's broker metrics in Prometheus's format (Keel's own key; empty: not served)"},
		"keel.log.writeback.bytes": {"1048576", i64(&c.LogWritebackBytes),
			"a partition's appended bytes are handed to the kernel's writeback each time this many have accumulated, so that dirty pages never pile up into a writeback burst that stalls produce (Keel's own key; it neither waits nor fsyncs: log.flush.* decide durability; 0: left to the kernel, as Kafka does)"},
		"keel.log.cache.drop.behind.bytes": {"0", i64(&c.LogDropBehindBytes),
			"with keel.log.writeback.bytes, each hand-over to writeback also drops from the page cache a partition's segment pages further than this many bytes behind it, so that the cache reuses its own pages instead of growing: for VMs whose hypervisor takes back free guest memory (free page reporting, ballooning), where writing into memory the cache has not used for seconds costs a host fault a page; consumers and followers further behind read from disk (Keel's own key; 0: pages stay cached, as in Kafka)"},
		"keel.log.delete.max.bytes.per.second": {"536870912", i64(&c.LogDeleteBytesPerSecond),
			"how fast the files of deleted segments (retention, DeleteRecords) and deleted partitions are removed, a 16 MiB step at a time, off the partition's lock: a large file unlinked at once stalls the writes of other partitions (Keel's own key; Kafka unlinks at once; 0: at once, unpaced)"},
		"delegation.token.secret.key": {"", func(c *Config, v string) error {
			if v != "" || c.DelegationTokenSecretKey == "" {
				c.DelegationTokenSecretKey = v
			}
			return nil
		}, "enables delegation tokens (KIP-48): the key of their HMACs, the same on every node"},
		"delegation.token.master.key": {"", func(c *Config, v string) error {
			if c.DelegationTokenSecretKey == "" {
				c.DelegationTokenSecretKey = v
			}
			return nil
		}, "the deprecated name of delegation.token.secret.key"},
		"delegation.token.max.lifetime.ms": {"604800000", ms(&c.DelegationTokenMaxLifetime),
			"no delegation token outlives this, renewed or not"},
		"delegation.token.expiry.time.ms": {"86400000", ms(&c.DelegationTokenExpiryTime),
			"how long a delegation token lives, and a renewal extends it, by default"},
		"delegation.token.expiry.check.interval.ms": {"3600000", ms(&c.DelegationTokenExpiryCheckInterval),
			"how often the controller removes expired delegation tokens"},
		"controller.listener.names":      {"CONTROLLER", list(&c.ControllerListenerNames), "listeners the controller uses"},
		"listeners":                      {"PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093", s(&c.Listeners), ""},
		"advertised.listeners":           {"", s(&c.AdvertisedListeners), ""},
		"listener.security.protocol.map": {"", s(&c.ListenerSecurityProtocolMap), ""},
		"inter.broker.listener.name":     {"PLAINTEXT", s(&c.InterBrokerListenerName), ""},
		"log.dirs":                       {"./data", list(&c.LogDirs), ""},
		"log.dir": {"", func(c *Config, v string) error {
			if len(c.LogDirs) == 0 {
				c.LogDirs = splitList(v)
			}
			return nil
		}, "used when log.dirs is unset"},
		"metadata.log.dir":                                            {"", s(&c.MetadataLogDir), ""},
		"num.partitions":                                              {"1", i32(&c.NumPartitions), ""},
		"default.replication.factor":                                  {"1", i16(&c.DefaultReplicationFactor), ""},
		"min.insync.replicas":                                         {"1", i(&c.MinInsyncReplicas), ""},
		"replica.lag.time.max.ms":                                     {"30000", ms(&c.ReplicaLagTimeMax), ""},
		"replica.fetch.max.bytes":                                     {"1048576", i(&c.ReplicaFetchMaxBytes), ""},
		"replica.fetch.response.max.bytes":                            {"10485760", i(&c.ReplicaFetchResponseMaxBytes), ""},
		"replica.fetch.wait.max.ms":                                   {"500", ms(&c.ReplicaFetchWaitMax), ""},
		"replica.fetch.min.bytes":                                     {"1", i(&c.ReplicaFetchMinBytes), ""},
		"replica.fetch.backoff.ms":                                    {"1000", ms(&c.ReplicaFetchBackoff), ""},
		"replica.socket.timeout.ms":                                   {"30000", ms(&c.ReplicaSocketTimeout), "how long a follower waits for the leader's answer to one of its requests (Fetch, OffsetForLeaderEpoch, ListOffsets) before it drops the connection and fetches again; at least replica.fetch.wait.max.ms"},
		"metadata.log.max.record.bytes.between.snapshots":             {"20971520", i64(&c.MetadataMaxBytesBetweenSnapshots), "each node snapshots its metadata image once this many bytes of metadata records were applied since its last snapshot"},
		"metadata.log.max.snapshot.interval.ms":                       {"3600000", ms(&c.MetadataMaxSnapshotInterval), "a node with metadata records applied since its last snapshot takes one once this long has passed (0: only by bytes)"},
		"quota.window.num":                                            {"11", i(&c.QuotaWindowNum), "how many windows client quotas (producer_byte_rate, consumer_byte_rate, request_percentage) measure a rate over"},
		"quota.window.size.seconds":                                   {"1", i(&c.QuotaWindowSizeSeconds), "the length of each client quota window"},
		"controller.quota.window.num":                                 {"11", i(&c.ControllerQuotaWindowNum), "controller_mutation_rate's burst: this many windows of the rate"},
		"controller.quota.window.size.seconds":                        {"1", i(&c.ControllerQuotaWindowSizeSeconds), "the length of each controller_mutation_rate window"},
		"replication.quota.window.num":                                {"11", i(&c.ReplicationQuotaWindowNum), "how many windows the replication throttles measure a rate over"},
		"replication.quota.window.size.seconds":                       {"1", i(&c.ReplicationQuotaWindowSizeSeconds), "the length of each replication throttle window"},
		"replica.socket.receive.buffer.bytes":                         {"-1", i(&c.ReplicaSocketReceiveBufferBytes), "SO_RCVBUF of followers' connections to leaders, set before connecting; -1: the OS's (autotuned; Kafka's default is 65536)"},
		"num.replica.fetchers":                                        {"1", i(&c.NumReplicaFetchers), "fetcher goroutines (and connections) per source broker"},
		"unclean.leader.election.enable":                              {"false", b(&c.UncleanLeaderElectionEnable), ""},
		"auto.create.topics.enable":                                   {"true", b(&c.AutoCreateTopicsEnable), ""},
		"delete.topic.enable":                                         {"true", b(&c.DeleteTopicEnable), "false: DeleteTopics answers TOPIC_DELETION_DISABLED"},
		"fetch.max.bytes":                                             {"57671680", i32(&c.FetchMaxBytes), "the most bytes of records a consumer's Fetch gets, whatever its own max bytes (KIP-541)"},
		"max.incremental.fetch.session.cache.slots":                   {"1000", i(&c.FetchSessionCacheSlots), "fetch sessions (KIP-227) kept, across clients and followers"},
		"max.request.partition.size.limit":                            {"2000", i(&c.MaxRequestPartitionSizeLimit), "the most partitions one DescribeTopicPartitions answer describes (the client pages through the rest)"},
		"auto.leader.rebalance.enable":                                {"true", b(&c.AutoLeaderRebalanceEnable), ""},
		"leader.imbalance.check.interval.seconds":                     {"300", secs(&c.LeaderImbalanceCheckInterval), "how often the controller moves leaderships back to preferred replicas"},
		"offsets.topic.replication.factor":                            {"3", i16(&c.OffsetsTopicReplicationFactor), "replicas of __consumer_offsets, which is not created while fewer brokers are alive; 1 in the single-node development default (controller.quorum.voters unset)"},
		"offsets.topic.num.partitions":                                {"50", i32(&c.OffsetsTopicNumPartitions), ""},
		"transaction.state.log.replication.factor":                    {"3", i16(&c.TransactionStateLogReplicationFactor), ""},
		"transaction.state.log.min.isr":                               {"2", i(&c.TransactionStateLogMinISR), ""},
		"transaction.state.log.num.partitions":                        {"50", i32(&c.TransactionStateLogNumPartitions), ""},
		"transaction.state.log.segment.bytes":                         {"104857600", i(&c.TransactionStateLogSegmentBytes), ""},
		"transaction.max.timeout.ms":                                  {"900000", ms(&c.TransactionMaxTimeout), "the longest transaction.timeout.ms a producer may ask for"},
		"transactional.id.expiration.ms":                              {"604800000", ms(&c.TransactionalIDExpiration), "forget a transactional id idle this long"},
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": {"10000", ms(&c.TransactionAbortTimedOutInterval), ""},
		"transaction.remove.expired.transaction.cleanup.interval.ms":  {"3600000", ms(&c.TransactionRemoveExpiredInterval), ""},
		"transaction.partition.verification.enable":                   {"true", b(&c.TransactionPartitionVerificationEnable), "a leader asks the transaction coordinator before it appends a batch that opens a transaction in a partition (KIP-890: no hanging transactions)"},
		"producer.id.expiration.ms":                                   {"86400000", ms(&c.ProducerIDExpiration), "forget idempotent producers idle this long"},
		"producer.id.expiration.check.interval.ms":                    {"600000", ms(&c.ProducerIDExpirationCheckInterval), ""},
		"broker.heartbeat.interval.ms":                                {"2000", ms(&c.BrokerHeartbeatInterval), ""},
		"broker.session.timeout.ms":                                   {"9000", ms(&c.BrokerSessionTimeout), ""},
		"socket.request.max.bytes":                                    {"104857600", i32(&c.SocketRequestMaxBytes), ""},
		"queued.max.request.bytes":                                    {"-1", i64(&c.QueuedMaxRequestBytes), "bytes of requests read and not yet handled beyond which no more are read; -1: no bound"},
		// Kafka's defaults are 102400; Keel's are the OS's: a fixed buffer
		// turns off Linux's autotuning, which loopback and fast links need.
		"socket.send.buffer.bytes":    {"-1", i(&c.SocketSendBufferBytes), "SO_SNDBUF of accepted connections (clients, other brokers); -1: the OS default"},
		"socket.receive.buffer.bytes": {"-1", i(&c.SocketReceiveBufferBytes), "SO_RCVBUF of accepted connections; -1: the OS default"},
		"authorizer.class.name": {"", s(&c.AuthorizerClassName),
			"org.apache.kafka.metadata.authorizer.StandardAuthorizer enforces ACLs (kept in the metadata log); empty, none"},
		"super.users": {"", func(_ *Config, v string) error {
			c.SuperUsers = nil
			for _, p := range strings.Split(v, ";") {
				if p = strings.TrimSpace(p); p != "" {
					c.SuperUsers = append(c.SuperUsers, p)
				}
			}
			return nil
		}, "principals allowed everything, separated by ';' (User:admin;User:CN=broker1)"},
		"allow.everyone.if.no.acl.found":      {"false", b(&c.AllowEveryoneIfNoACLFound), "with an authorizer, whether a resource without any ACL is open to every principal"},
		"max.connections":                     {"2147483647", i(&c.MaxConnections), ""},
		"max.connection.creation.rate":        {"2147483647", i(&c.MaxConnectionCreationRate), "connections a second the broker's listeners accept (KIP-612); the inter-broker listener is exempt"},
		"max.connections.per.ip":              {"2147483647", i(&c.MaxConnectionsPerIP), "connections one client address may hold open; 0 admits only the addresses the overrides name"},
		"max.connections.per.ip.overrides":    {"", s(&c.MaxConnectionsPerIPOverrides), "host:count or ip:count pairs, comma-separated, over max.connections.per.ip"},
		"connections.max.idle.ms":             {"600000", ms(&c.ConnectionsMaxIdle), ""},
		"connections.max.reauth.ms":           {"0", ms(&c.ConnectionsMaxReauth), "above 0, SASL clients re-authenticate within this (or their OAUTHBEARER token's lifetime) or are disconnected (KIP-368)"},
		"num.recovery.threads.per.data.dir":   {"1", i(&c.NumRecoveryThreadsPerDataDir), ""},
		"group.initial.rebalance.delay.ms":    {"3000", ms(&c.GroupInitialRebalanceDelay), ""},
		"group.min.session.timeout.ms":        {"6000", ms(&c.GroupMinSessionTimeout), ""},
		"group.max.session.timeout.ms":        {"1800000", ms(&c.GroupMaxSessionTimeout), ""},
		"group.max.size":                      {"2147483647", i(&c.GroupMaxSize), ""},
		"offsets.retention.minutes":           {"10080", minutesDuration(&c.OffsetsRetention), ""},
		"offsets.retention.check.interval.ms": {"600000", ms(&c.OffsetsRetentionCheckInterval), ""},
		"offsets.commit.timeout.ms":           {"5000", ms(&c.OffsetsCommitTimeout), ""},
		"offset.metadata.max.bytes":           {"4096", i(&c.OffsetMetadataMaxBytes), ""},
		"offsets.load.buffer.size":            {"5242880", i(&c.OffsetsLoadBufferSize), ""},
		"log.segment.bytes":                   {"1073741824", i64(&c.LogSegmentBytes), ""},
		"log.roll.hours":                      {"168", scaled(&c.LogRollMs, hour), ""},
		"log.roll.ms":                         {"", i64(&c.LogRollMs), "overrides log.roll.hours"},
		"log.roll.jitter.hours":               {"0", scaled(&c.LogRollJitterMs, hour), ""},
		"log.roll.jitter.ms":                  {"", i64(&c.LogRollJitterMs), "overrides log.roll.jitter.hours"},
		"log.retention.hours":                 {"168", scaled(&c.LogRetentionMs, hour), ""},
		"log.retention.minutes":               {"", scaled(&c.LogRetentionMs, minute), "overrides log.retention.hours"},
		"log.retention.ms":                    {"", i64(&c.LogRetentionMs), "overrides log.retention.minutes"},
		"log.retention.bytes":                 {"-1", i64(&c.LogRetentionBytes), ""},
		"log.retention.check.interval.ms":     {"300000", ms(&c.LogRetentionCheckInterval), ""},
		"log.index.size.max.bytes":            {"10485760", i(&c.LogIndexSizeMaxBytes), ""},
		"log.index.interval.bytes":            {"4096", i(&c.LogIndexIntervalBytes), ""},
		"log.flush.interval.messages":         {"9223372036854775807", i64(&c.LogFlushIntervalMessages), ""},
		"log.flush.interval.ms":               {"", i64(&c.LogFlushIntervalMs), ""},
		"log.flush.scheduler.interval.ms": {"9223372036854775807", func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if n > int64(time.Hour/time.Millisecond)*24*365 {
				n = int64(time.Second / time.Millisecond)
			}
			c.LogFlushSchedulerInterval = time.Duration(n) * time.Millisecond
			return err
		}, ""},
		"log.flush.offset.checkpoint.interval.ms": {"60000", ms(&c.LogFlushOffsetCheckpointInterval), ""},
		"log.segment.delete.delay.ms":             {"60000", i64(&c.LogSegmentDeleteDelayMs), ""},
		"message.max.bytes":                       {"1048588", i(&c.MessageMaxBytes), ""},
		"log.message.timestamp.type":              {"CreateTime", s(&c.LogMessageTimestampType), ""},
		"log.cleaner.enable":                      {"true", b(&c.LogCleanerEnable), "run the log cleaner for compacted topics"},
		"log.cleaner.threads":                     {"1", i(&c.LogCleanerThreads), "how many logs the cleaner cleans side by side (0: none); changeable at runtime"},
		"log.cleaner.backoff.ms":                  {"15000", ms(&c.LogCleanerBackoff), "how long the cleaner sleeps when no log needs cleaning, at least 10 ms (with 0, Kafka's cleaner looks again at once and spins); changeable at runtime"},
		"log.cleaner.dedupe.buffer.size":          {"134217728", i64(&c.LogCleanerDedupeBufferSize), "memory of the cleaner's key maps, divided between log.cleaner.threads; changeable at runtime"},
		"log.cleanup.policy":                      {"delete", s(&c.LogCleanupPolicy), ""},
		"log.cleaner.delete.retention.ms":         {"86400000", i64(&c.LogCleanerDeleteRetentionMs), ""},
		"log.cleaner.min.cleanable.ratio":         {"0.5", f64(&c.LogCleanerMinCleanableRatio), ""},
		"log.cleaner.io.max.bytes.per.second":     {"1.7976931348623157E308", f64(&c.LogCleanerIOMaxBytesPerSec), "the most bytes a second the log cleaner reads and writes together (Kafka's default, the largest double: unthrottled); changeable at runtime"},
		"log.cleaner.min.compaction.lag.ms":       {"0", i64(&c.LogCleanerMinCompactionLagMs), ""},
		"log.cleaner.max.compaction.lag.ms":       {"9223372036854775807", i64(&c.LogCleanerMaxCompactionLagMs), ""},
		"replica.high.watermark.checkpoint.interval.ms": {"5000", ms(&c.HighWatermarkCheckpointInterval),
			"how often each log dir's high watermarks are written (replication-offset-checkpoint), where a broker restarted after a crash starts from"},

		// KIP-848 consumer groups.
		"group.coordinator.rebalance.protocols": {"classic,consumer", func(c *Config, v string) error { return c.parseRebalanceProtocols(v) },
			"the group protocols served: classic (JoinGroup/SyncGroup) and consumer (KIP-848's ConsumerGroupHeartbeat, with group.version 1)"},
		"group.consumer.session.timeout.ms":    {"45000", ms(&c.ConsumerSessionTimeout), "a consumer-protocol member that does not heartbeat for this long is removed from its group"},
		"group.consumer.heartbeat.interval.ms": {"5000", ms(&c.ConsumerHeartbeatInterval), "how often consumer-protocol members heartbeat"},
		"group.consumer.max.size":              {"2147483647", i(&c.ConsumerGroupMaxSize), "members a consumer-protocol group may have"},
		"group.consumer.assignors": {"uniform,range", func(c *Config, v string) error { return c.parseConsumerAssignors(v) },
			"the server-side assignors consumer-protocol members may name (group.remote.assignor), the default first: uniform, range, or Kafka's class names for them"},
		"group.consumer.min.session.timeout.ms":    {"45000", ms(&c.ConsumerMinSessionTimeout), "the smallest consumer.session.timeout.ms a group config may set"},
		"group.consumer.max.session.timeout.ms":    {"60000", ms(&c.ConsumerMaxSessionTimeout), "the largest consumer.session.timeout.ms a group config may set"},
		"group.consumer.min.heartbeat.interval.ms": {"5000", ms(&c.ConsumerMinHeartbeatInterval), "the smallest consumer.heartbeat.interval.ms a group config may set"},
		"group.consumer.max.heartbeat.interval.ms": {"15000", ms(&c.ConsumerMaxHeartbeatInterval), "the largest consumer.heartbeat.interval.ms a group config may set"},
		"group.consumer.migration.policy": {"bidirectional", func(c *Config, v string) error { return c.parseMigrationPolicy(v) },
			"whether groups convert online between the protocols while they have members: upgrade (a consumer-protocol member joining a classic group), downgrade (the last consumer-protocol member leaving a group of classic members), bidirectional or disabled"},
	}
}

// clientQuotaWindows is quota.window.num windows of
// quota.window.size.seconds.
func (c *Config) clientQuotaWindows() quotaWindows {
	return quotaWindows{samples: c.QuotaWindowNum, window: time.Duration(c.QuotaWindowSizeSeconds) * time.Second}
}

// deleteBytesPerSecond is keel.log.delete.max.bytes.per.second as the log
// manager takes it: 0 (unpaced) is negative there.
func deleteBytesPerSecond(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// cleanerDisabled reports whether the log cleaner does not run at all:
// log.cleaner.enable=false, or log.cleaner.threads=0 (Kafka starts no
// cleaner thread then, and a dynamic change cannot add one: more than
// double the current count is refused).
func (c *Config) cleanerDisabled() bool { return !c.LogCleanerEnable || c.LogCleanerThreads == 0 }

// replicationQuotaWindows is replication.quota.window.num windows of
// replication.quota.window.size.seconds.
func (c *Config) replicationQuotaWindows() quotaWindows {
	return quotaWindows{samples: c.ReplicationQuotaWindowNum, window: time.Duration(c.ReplicationQuotaWindowSizeSeconds) * time.Second}
}

// ignoredKeys are Kafka settings that exist for the JVM broker or ZooKeeper
// and mean nothing here; they are accepted without a warning about typos.
var ignoredKeys = map[string]bool{
	"num.network.threads": true, "num.io.threads": true, "num.replica.alter.log.dirs.threads": true,
	"zookeeper.connect": true, "zookeeper.connection.timeout.ms": true, "queued.max.requests": true,
	"background.threads": true,
	// The JVM cleaner's read/write buffers and the load factor of its
	// dedupe hash table; Keel's cleaner sizes its own buffers, and its key
	// map is bounded by log.cleaner.dedupe.buffer.size alone.
	"log.cleaner.io.buffer.size": true, "log.cleaner.io.buffer.load.factor": true,
	// ZooKeeper-era settings a Kafka 3.x server.properties still carries;
	// KRaft does without them (Kafka 4 removed them): controlled shutdown
	// always happens, leaders are rebalanced whenever a partition's is
	// not its preferred one, and metadata.version replaces the protocol
	// and message format versions.
	"controlled.shutdown.enable": true, "controlled.shutdown.max.retries": true, "controlled.shutdown.retry.backoff.ms": true,
	"leader.imbalance.per.broker.percentage": true, "inter.broker.protocol.version": true, "log.message.format.version": true,
	"reserved.broker.max.id": true, "broker.id.generation.enable": true,
	// Kafka 4's shipped server.properties sizes the share-group state topic
	// (KIP-932); Keel has no share groups, so there is no such topic.
	"share.coordinator.state.topic.replication.factor": true, "share.coordinator.state.topic.min.isr": true,
	// The JVM purgatories' sweeps of completed requests; Keel's purgatory
	// drops a request from its watch lists when it completes.
	"fetch.purgatory.purge.interval.requests": true, "producer.purgatory.purge.interval.requests": true,
	"delete.records.purgatory.purge.interval.requests": true,
	// The JVM broker's start-up and scheduling: its listeners started
	// before the authorizer's ACLs load, how long it may take to catch up
	// with the metadata, when its log tasks first run, its group
	// coordinator's threads and write batching, the JMX reporter.
	"early.start.listeners": true, "server.max.startup.time.ms": true, "log.initial.task.delay.ms": true,
	"group.coordinator.threads": true, "group.coordinator.append.linger.ms": true, "auto.include.jmx.reporter": true,
	// The Kafka 3.x-4.0 defaults of the principal builder and the policies
	// (refuseJavaPlugins refuses any other value).
	"principal.builder.class": true, "create.topic.policy.class.name": true, "alter.config.policy.class.name": true,
	// How ZooKeeper-mode Kafka encrypted dynamic password configs in
	// ZooKeeper; KRaft does not use them.
	"password.encoder.secret": true, "password.encoder.old.secret": true, "password.encoder.keyfactory.algorithm": true,
	"password.encoder.cipher.algorithm": true, "password.encoder.key.length": true, "password.encoder.iterations": true,
}

// notApplied reports whether k is a Kafka setting Keel knows but does not
// carry out, and why (a Kafka user's server.properties may well set it);
// why is "" when the value asks for nothing Keel lacks.
func notApplied(k, v string) (why string, ok bool) {
	switch {
	case k == "metadata.log.segment.bytes", k == "metadata.log.segment.ms",
		k == "metadata.max.retention.bytes", k == "metadata.max.retention.ms":
		return "Keel's metadata log is a Raft log store (raft-boltdb), not segment files: " +
			"each node keeps the 10240 entries behind its latest snapshot, and its 2 newest snapshots", true
	case k == "group.consumer.regex.refresh.interval.ms":
		return "Keel resolves consumer-protocol subscription regexes every 10 s", true
	case (k == "metric.reporters" || k == "kafka.metrics.reporters") && strings.TrimSpace(v) == "":
		return "", true
	case k == "metric.reporters", k == "metrics.num.samples", k == "metrics.sample.window.ms", k == "metrics.recording.level",
		k == "kafka.metrics.reporters", k == "kafka.metrics.polling.interval.secs":
		return "Keel has no JMX metrics reporters: it serves Kafka's broker metrics in Prometheus's format at keel.metrics.address", true
	case k == "controller.quorum.election.timeout.ms", k == "controller.quorum.fetch.timeout.ms",
		k == "controller.quorum.election.backoff.max.ms", k == "controller.quorum.request.timeout.ms",
		k == "controller.quorum.retry.backoff.ms":
		return "Keel's metadata quorum runs hashicorp/raft with its own timers: a voter that hears nothing from " +
			"the leader for 1 to 2 s (randomised) starts an election, which a candidate retries after as long", true
	case k == "metadata.max.idle.interval.ms":
		return "Keel's active controller writes no no-op records to an idle metadata log: the Raft leader's " +
			"heartbeats keep followers and observers current", true
	case k == "remote.log.storage.system.enable" && strings.TrimSpace(v) == "false":
		return "", true
	case k == "remote.log.storage.system.enable":
		return "Keel has no tiered storage (KIP-405): every segment stays in log.dirs", true
	case strings.HasPrefix(k, "share.coordinator."), strings.HasPrefix(k, "group.share."), strings.HasPrefix(k, "remote.log."):
		// Share groups' and tiered storage's tuning: quiet, as Keel has
		// neither (group.share.enable=true and
		// remote.log.storage.system.enable=true are reported).
		if k == "group.share.enable" && strings.TrimSpace(v) == "true" {
			return "Keel has no share groups (KIP-932)", true
		}
		return "", true
	case (k == "unstable.api.versions.enable" || k == "unstable.feature.versions.enable" || k == "transaction.two.phase.commit.enable") &&
		strings.TrimSpace(v) != "true":
		return "", true
	case k == "unstable.api.versions.enable", k == "unstable.feature.versions.enable":
		return "Keel serves only the API versions and feature levels it implements", true
	case k == "transaction.two.phase.commit.enable":
		return "Keel has no two-phase commit transactions (KIP-939)", true
	case k == "eligible.leader.replicas.enable":
		return "eligible leader replicas are the eligible.leader.replicas.version feature, as in Kafka 4: " +
			"keel features upgrade --feature eligible.leader.replicas.version=1", true
	case k == "telemetry.max.bytes":
		return "Keel has no client metrics (KIP-714)", true
	case k == "client.quota.callback.class" && strings.TrimSpace(v) == "":
		return "", true
	case k == "client.quota.callback.class":
		return "Keel applies Kafka's default client quotas (users, client ids, their defaults); it cannot load a quota callback class", true
	case k == "socket.listen.backlog.size":
		return "Keel's listeners take the kernel's listen backlog (net.core.somaxconn)", true
	case k == "log.dir.failure.timeout.ms":
		return "Keel reports a failed log dir in every heartbeat and keeps running; a broker that cannot reach " +
			"the controller is fenced after broker.session.timeout.ms, its leaderships moved", true
	case k == "connection.failed.authentication.delay.ms":
		return "Keel closes a connection whose authentication failed as soon as its error response is written", true
	}
	return "", false
}

// consumerAssignorClasses are Kafka's class names of its server-side
// assignors, which group.consumer.assignors may name.
var consumerAssignorClasses = map[string]string{
	"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
	"org.apache.kafka.coordinator.group.assignor.RangeAssignor":   "range",
}

// parseMigrationPolicy reads group.consumer.migration.policy, whose values
// Kafka takes in any case.
func (c *Config) parseMigrationPolicy(v string) error {
	switch p := strings.ToLower(strings.TrimSpace(v)); p {
	case group.MigrationDisabled, group.MigrationUpgrade, group.MigrationDowngrade, group.MigrationBidirectional:
		c.ConsumerMigrationPolicy = p
		return nil
	}
	return fmt.Errorf("unknown policy %q: disabled, upgrade, downgrade or bidirectional", v)
}

// parseConsumerAssignors reads group.consumer.assignors: names or Kafka's
// class names of the uniform and range assignors.
func (c *Config) parseConsumerAssignors(v string) error {
	c.ConsumerAssignors = nil
	for _, a := range splitList(v) {
		if name, ok := consumerAssignorClasses[a]; ok {
			a = name
		}
		if !slices.Contains(group.ServerAssignors, a) {
			return fmt.Errorf("unknown assignor %q: Keel has %s", a, strings.Join(group.ServerAssignors, " and "))
		}
		c.ConsumerAssignors = append(c.ConsumerAssignors, a)
	}
	if len(c.ConsumerAssignors) == 0 {
		return fmt.Errorf("no assignor")
	}
	return nil
}

// parseRebalanceProtocols reads group.coordinator.rebalance.protocols:
// classic and consumer are served; Kafka's streams (KIP-1071) and share
// (KIP-932) groups are not, and are reported as such.
func (c *Config) parseRebalanceProtocols(v string) error {
	c.GroupRebalanceProtocols = nil
	for _, p := range splitList(v) {
		switch p {
		case "classic", "consumer":
			c.GroupRebalanceProtocols = append(c.GroupRebalanceProtocols, p)
		case "streams", "share":
			c.NotApplied = append(c.NotApplied, "group.coordinator.rebalance.protocols: Keel serves no "+p+
				" groups (KIP-1071 streams, KIP-932 share groups); classic and consumer groups are served")
		default:
			return fmt.Errorf("unknown group protocol %q (classic, consumer, streams or share)", p)
		}
	}
	return nil
}

// consumerProtocolServed reports whether group.coordinator.rebalance.protocols
// lists the consumer protocol.
func (c *Config) consumerProtocolServed() bool {
	return slices.Contains(c.GroupRebalanceProtocols, "consumer")
}

// splitList splits a comma-separated list, trimming blanks.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// LoadConfig builds a Config from defaults, then props (a parsed
// server.properties, may be nil), then overrides (key=value). Keys are
// applied in a fixed order so that the finer-grained key wins where Kafka
// says so (log.retention.ms over .minutes over .hours).
func LoadConfig(props map[string]string, overrides []string) (*Config, error) {
	merged := map[string]string{}
	for k, v := range props {
		merged[k] = v
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			return nil, fmt.Errorf("override %q: want key=value", o)
		}
		merged[strings.TrimSpace(k)] = v
	}
	if err := ResolveConfigProviders(merged); err != nil {
		return nil, err
	}
	if err := kafkaSynonyms(merged); err != nil {
		return nil, err
	}
	// An authorizer Keel cannot load must not leave the cluster open:
	// Kafka fails to start when its authorizer class is missing.
	switch v := strings.TrimSpace(merged["authorizer.class.name"]); v {
	case "", StandardAuthorizerClass:
	case "kafka.security.authorizer.AclAuthorizer":
		return nil, fmt.Errorf("authorizer.class.name=%s is ZooKeeper's authorizer: KRaft clusters, Keel's too, use %s", v, StandardAuthorizerClass)
	default:
		return nil, fmt.Errorf("authorizer.class.name=%s: Keel has no such authorizer and would enforce no ACLs; use %s, or remove the setting to run without ACLs", v, StandardAuthorizerClass)
	}
	if err := refuseJavaPlugins(merged); err != nil {
		return nil, err
	}
	c := &Config{}
	keys := configKeys(c)
	// Defaults first, in the precedence order below.
	for _, k := range keyOrder(keys) {
		if d := keys[k].def; d != "" {
			if err := keys[k].set(c, d); err != nil {
				return nil, fmt.Errorf("default of %s: %w", k, err)
			}
		}
	}
	if _, ok := merged["log.dirs"]; !ok {
		if _, ok := merged["log.dir"]; ok {
			c.LogDirs = nil
		}
	}
	for _, k := range keyOrder(keys) {
		v, ok := merged[k]
		if !ok {
			continue
		}
		if err := keys[k].set(c, v); err != nil {
			return nil, fmt.Errorf("invalid value %q for %s: %w", v, k, err)
		}
	}
	c.Explicit = map[string]string{}
	c.SSL, c.SASL, c.TopicDefaults = map[string]string{}, map[string]string{}, map[string]string{}
	c.ListenerConnectionQuotas = map[string]string{}
	for k, v := range merged {
		if _, base, ok := metadata.ListenerConfig(k); ok && metadata.IsListenerConnectionQuota(base) {
			if _, err := listenerConnectionQuota(v); err != nil {
				return nil, fmt.Errorf("invalid value %q for %s: %w", v, k, err)
			}
			c.ListenerConnectionQuotas[k] = strings.TrimSpace(v)
			continue
		}
		if isSASLKey(k) {
			c.SASL[k] = strings.TrimSpace(v)
			continue
		}
		if name, ok := sslKey(k); ok {
			if slices.Contains(brokerSSLKeys(), name) {
				c.SSL[k] = strings.TrimSpace(v)
			} else {
				c.Ignored = append(c.Ignored, k) // the JVM's ssl.provider, ssl.keymanager.algorithm, ...
			}
			continue
		}
		if _, known := keys[k]; known {
			c.Explicit[k] = strings.TrimSpace(v)
			continue
		}
		if d, ok := metadata.TopicDefaultConfigDef(k); ok {
			if err := d.Validate(v); err != nil {
				return nil, fmt.Errorf("invalid value %q for %s: %w", v, k, err)
			}
			c.Explicit[k], c.TopicDefaults[k] = strings.TrimSpace(v), strings.TrimSpace(v)
			continue
		}
		if why, ok := notApplied(k, v); ok {
			if why == "" {
				c.Ignored = append(c.Ignored, k)
			} else {
				c.NotApplied = append(c.NotApplied, k+": "+why)
			}
		} else if ignoredKeys[k] {
			c.Ignored = append(c.Ignored, k)
		} else {
			c.Unknown = append(c.Unknown, k)
		}
	}
	sort.Strings(c.Unknown)
	sort.Strings(c.Ignored)
	sort.Strings(c.NotApplied)
	c.defaultVoters()
	c.defaultOffsetsReplication()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// keyOrder applies coarse keys before the finer ones that override them.
func keyOrder(keys map[string]configKey) []string {
	rank := map[string]int{
		"log.retention.hours": 0, "log.retention.minutes": 1, "log.retention.ms": 2,
		"log.roll.hours": 0, "log.roll.ms": 1, "log.roll.jitter.hours": 0, "log.roll.jitter.ms": 1,
		"log.dirs": 0, "log.dir": 1,
	}
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if rank[out[i]] != rank[out[j]] {
			return rank[out[i]] < rank[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// LoadConfigFile reads a server.properties file and applies overrides.
func LoadConfigFile(path string, overrides []string) (*Config, error) {
	var props map[string]string
	if path != "" {
		var err error
		if props, err = ReadPropertiesFile(path); err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
	}
	return LoadConfig(props, overrides)
}

// kafkaSynonyms reads the keys Kafka takes for others:
//
//   - broker.id as node.id, as Kafka's KafkaConfig does (populateSynonyms):
//     a server.properties that names its node by broker.id alone, as
//     ZooKeeper-era ones do, gets that id, and one naming both must name
//     the same;
//   - security.inter.broker.protocol as inter.broker.listener.name: without
//     the latter, Kafka's inter-broker listener is the one named as the
//     protocol (SSL for SSL://...), and setting both is an error.
//
// A ZooKeeper-mode file (zookeeper.connect without process.roles) is
// refused with what KRaft mode needs, where the defaults would otherwise
// make it a combined node that fails on its listeners.
func kafkaSynonyms(merged map[string]string) error {
	if p, ok := merged["security.inter.broker.protocol"]; ok {
		p = strings.TrimSpace(p)
		if _, set := merged["inter.broker.listener.name"]; set {
			return errors.New("only one of inter.broker.listener.name and security.inter.broker.protocol should be set")
		}
		switch p {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			return fmt.Errorf("invalid value %q for security.inter.broker.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", p)
		}
		delete(merged, "security.inter.broker.protocol")
		merged["inter.broker.listener.name"] = p
	}
	if _, zk := merged["zookeeper.connect"]; zk {
		if _, kraft := merged["process.roles"]; !kraft {
			return errors.New("zookeeper.connect is set and process.roles is not: this is a ZooKeeper-mode server.properties. " +
				"Keel, like Kafka 4, runs in KRaft mode only: set process.roles (broker, controller or both), node.id, " +
				"controller.quorum.voters (or controller.quorum.bootstrap.servers) and controller.listener.names, " +
				"with a listener of that name on controllers")
		}
	}
	b, ok := merged["broker.id"]
	if !ok {
		return nil
	}
	delete(merged, "broker.id")
	n, ok := merged["node.id"]
	if !ok {
		merged["node.id"] = b
		return nil
	}
	if bi, err := strconv.Atoi(strings.TrimSpace(b)); err == nil {
		if ni, err := strconv.Atoi(strings.TrimSpace(n)); err == nil && ni == bi {
			return nil
		}
	}
	if strings.TrimSpace(n) == strings.TrimSpace(b) {
		return nil // the same, if invalid: node.id's check says so
	}
	return fmt.Errorf("you must set node.id to the same value as broker.id (node.id=%s, broker.id=%s)", strings.TrimSpace(n), strings.TrimSpace(b))
}

// javaPlugins are the broker's Java plugin classes that decide who a client
// is or what it may do, with the class Kafka uses when none is set: Kafka
// fails to start when it cannot load one, and so does Keel rather than run
// without the plugin's rule.
var javaPlugins = map[string]string{
	"principal.builder.class":        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
	"create.topic.policy.class.name": "",
	"alter.config.policy.class.name": "",
}

func refuseJavaPlugins(merged map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(javaPlugins)) {
		v := strings.TrimSpace(merged[k])
		if v == "" || v == javaPlugins[k] {
			continue
		}
		return fmt.Errorf("%s=%s: Keel cannot load Java classes and would run without its rule; remove the setting to run without it", k, v)
	}
	return nil
}

// MetaPropertiesDirs are the dirs that hold a meta.properties: log.dirs and
// metadata.log.dir (one of them unless set apart), as kafka-storage.sh
// formats and describes them.
func (c *Config) MetaPropertiesDirs() []string {
	dirs := slices.Clone(c.LogDirs)
	if !slices.Contains(dirs, c.MetadataLogDir) {
		dirs = append(dirs, c.MetadataLogDir)
	}
	return dirs
}

// HasRole reports whether process.roles includes role.
func (c *Config) HasRole(role string) bool {
	for _, r := range c.ProcessRoles {
		if r == role {
			return true
		}
	}
	return false
}

// defaultVoters makes the embedded single-node default follow the
// listeners: controller.quorum.voters defaults to "1@localhost:9093", which
// is right only while node.id and the controller listener keep their
// defaults. A controller whose voters were not set explicitly is the sole
// voter at its own controller listener, so `keel server --override
// listeners=PLAINTEXT://:19092,CONTROLLER://:19093` just works. (Kafka has
// no default voters at all; this default is Keel's.) An ephemeral port (0)
// cannot be a voter address, so the default stays then.
//
// With controller.quorum.bootstrap.servers instead (a KIP-853 dynamic
// quorum, as Kafka 4's shipped server.properties has it), the voters are
// not in the configuration at all: the node resolves them when it starts
// (Node.quorumVoters), so the default is cleared.
func (c *Config) defaultVoters() {
	if _, set := c.Explicit["controller.quorum.voters"]; set {
		return
	}
	if len(c.ControllerQuorumBootstrapServers) > 0 {
		c.ControllerQuorumVoters = ""
		return
	}
	// From listeners alone, as before advertised controller listeners
	// counted: a node started on this default keeps its voter address.
	if addr, ok := c.controllerAddr(false); ok {
		c.ControllerQuorumVoters = fmt.Sprintf("%d@%s", c.NodeID, addr)
	}
}

// DynamicQuorum reports whether the voters come from formatting (keel
// format --standalone or --initial-controllers) or from the controllers
// themselves, not from controller.quorum.voters: controller.quorum.voters is
// not set and controller.quorum.bootstrap.servers is.
func (c *Config) DynamicQuorum() bool {
	_, set := c.Explicit["controller.quorum.voters"]
	return !set && len(c.ControllerQuorumBootstrapServers) > 0
}

// KRaftVersion is the kraft.version feature level of this node's quorum:
// 1 for a dynamic (KIP-853) quorum, 0 for static voters.
func (c *Config) KRaftVersion() int16 {
	if c.DynamicQuorum() {
		return 1
	}
	return 0
}

// OwnControllerAddr is the address this controller is reached at as the
// voter of a dynamic quorum (keel format --standalone, or a bootstrap
// server naming only itself): its first controller listener's, as
// advertised.listeners gives it if it names that listener (as
// kafka-storage.sh format --standalone takes it), "localhost" standing in
// for a wildcard host. False on a node without the controller role or
// whose controller listener has an ephemeral port.
func (c *Config) OwnControllerAddr() (string, bool) { return c.controllerAddr(true) }

func (c *Config) controllerAddr(advertised bool) (string, bool) {
	if !c.HasRole("controller") {
		return "", false
	}
	for _, l := range splitList(c.Listeners) {
		name, addr, ok := strings.Cut(l, "://")
		if !ok || !slices.Contains(c.ControllerListenerNames, name) {
			continue
		}
		for _, a := range splitList(c.AdvertisedListeners) {
			if aname, aaddr, ok := strings.Cut(a, "://"); ok && aname == name && advertised {
				addr = aaddr
			}
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" {
			return "", false
		}
		if isWildcardHost(host) {
			host = "localhost"
		}
		return net.JoinHostPort(host, port), true
	}
	return "", false
}

func isWildcardHost(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// StandaloneBootstrap reports whether controller.quorum.bootstrap.servers
// names only this node, a controller, at its own controller listener: the
// single-node quorum of Kafka 4's shipped server.properties
// (controller.quorum.bootstrap.servers=localhost:9093 with
// listeners=...,CONTROLLER://:9093), which Kafka's quickstart formats with
// kafka-storage.sh format --standalone. Keel takes such a node as
// standalone without that step, as it does for its own single-node default.
func (c *Config) StandaloneBootstrap() bool {
	if !c.HasRole("controller") || len(c.ControllerQuorumBootstrapServers) == 0 {
		return false
	}
	var own []string
	for _, l := range splitList(c.Listeners) {
		name, addr, ok := strings.Cut(l, "://")
		if ok && slices.Contains(c.ControllerListenerNames, name) {
			own = append(own, addr)
		}
	}
	for _, b := range c.ControllerQuorumBootstrapServers {
		if !slices.ContainsFunc(own, func(l string) bool { return sameEndpoint(b, l) }) {
			return false
		}
	}
	return true
}

// sameEndpoint reports whether the address addr (host:port) reaches the
// listener bound at listener (host:port, the host possibly a wildcard):
// the same port, and a host that is the listener's or, for a wildcard
// listener, one of this machine's addresses.
func sameEndpoint(addr, listener string) bool {
	host, port, err := net.SplitHostPort(addr)
	lhost, lport, lerr := net.SplitHostPort(listener)
	if err != nil || lerr != nil || port != lport || port == "0" {
		return false
	}
	if strings.EqualFold(host, lhost) {
		return true
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false
	}
	if isWildcardHost(lhost) {
		local, err := net.InterfaceAddrs()
		if err != nil {
			return false
		}
		return slices.ContainsFunc(ips, func(ip net.IP) bool {
			return ip.IsLoopback() || slices.ContainsFunc(local, func(a net.Addr) bool {
				n, ok := a.(*net.IPNet)
				return ok && n.IP.Equal(ip)
			})
		})
	}
	lips, err := net.LookupIP(lhost)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ips, func(ip net.IP) bool { return slices.ContainsFunc(lips, ip.Equal) })
}

// defaultOffsetsReplication gives the single-node development default
// (controller.quorum.voters not set, and controller.quorum.bootstrap.servers
// not set or naming only this node) offsets.topic.replication.factor=1,
// transaction.state.log.replication.factor=1 and
// transaction.state.log.min.isr=1, as Kafka's shipped
// config/server.properties does. Anywhere else Kafka's defaults (3, and a
// minimum ISR of 2) stand, and they are enforced: the internal topics are
// not created while fewer brokers are alive (KIP-115), lest a cluster still
// starting up keep an unreplicated one for good.
func (c *Config) defaultOffsetsReplication() {
	_, votersSet := c.Explicit["controller.quorum.voters"]
	single := len(c.ControllerQuorumBootstrapServers) == 0 || c.StandaloneBootstrap()
	if votersSet || !single {
		return
	}
	if _, set := c.Explicit["offsets.topic.replication.factor"]; !set {
		c.OffsetsTopicReplicationFactor = 1
	}
	if _, set := c.Explicit["transaction.state.log.replication.factor"]; !set {
		c.TransactionStateLogReplicationFactor = 1
	}
	if _, set := c.Explicit["transaction.state.log.min.isr"]; !set {
		c.TransactionStateLogMinISR = 1
	}
}

// Cautions are settings the config accepts, as Kafka does, but that an
// operator should hear about; the node logs each as an error when it
// starts, as Kafka's broker does.
func (c *Config) Cautions() []string {
	var out []string
	if 2*c.BrokerHeartbeatInterval > c.BrokerSessionTimeout {
		// Kafka 4.2 (KAFKA-19432) logs the same. A broker gives up on an
		// unanswered heartbeat after an interval and sends the next
		// one an interval later: with more than half the session between
		// two, one heartbeat lost or answered late may fence the broker.
		out = append(out, fmt.Sprintf("broker.heartbeat.interval.ms (%d ms) is more than half of broker.session.timeout.ms (%d ms): "+
			"one heartbeat lost or answered late may get a broker fenced; keep the interval at most half the session timeout",
			c.BrokerHeartbeatInterval.Milliseconds(), c.BrokerSessionTimeout.Milliseconds()))
	}
	return out
}

func (c *Config) validate() error {
	if !slices.Contains(c.GroupRebalanceProtocols, "classic") {
		return fmt.Errorf("group.coordinator.rebalance.protocols must include classic")
	}
	// Kafka's GroupCoordinatorConfig requirements.
	switch {
	case c.ConsumerMaxSessionTimeout < c.ConsumerMinSessionTimeout:
		return fmt.Errorf("group.consumer.max.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms")
	case c.ConsumerSessionTimeout < c.ConsumerMinSessionTimeout || c.ConsumerSessionTimeout > c.ConsumerMaxSessionTimeout:
		return fmt.Errorf("group.consumer.session.timeout.ms must be between group.consumer.min.session.timeout.ms and group.consumer.max.session.timeout.ms")
	case c.ConsumerMaxHeartbeatInterval < c.ConsumerMinHeartbeatInterval:
		return fmt.Errorf("group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")
	case c.ConsumerHeartbeatInterval < c.ConsumerMinHeartbeatInterval || c.ConsumerHeartbeatInterval > c.ConsumerMaxHeartbeatInterval:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms must be between group.consumer.min.heartbeat.interval.ms and group.consumer.max.heartbeat.interval.ms")
	case c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
	}
	if c.NumReplicaFetchers < 1 {
		return fmt.Errorf("num.replica.fetchers must be >= 1, got %d", c.NumReplicaFetchers)
	}
	if len(c.ProcessRoles) == 0 {
		return fmt.Errorf("process.roles is empty: set broker, controller, or broker,controller")
	}
	for _, r := range c.ProcessRoles {
		if r != "broker" && r != "controller" {
			return fmt.Errorf("process.roles: unknown role %q (want broker and/or controller)", r)
		}
	}
	if c.NodeID < 0 {
		return fmt.Errorf("node.id must be >= 0, got %d", c.NodeID)
	}
	switch c.ReplicaSelectorClass {
	case "", RackAwareReplicaSelectorClass:
	default:
		return fmt.Errorf("replica.selector.class=%s: Keel has no such selector; use %s, or leave it unset to serve consumers from the leader", c.ReplicaSelectorClass, RackAwareReplicaSelectorClass)
	}
	for _, b := range c.ControllerQuorumBootstrapServers {
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			return fmt.Errorf("controller.quorum.bootstrap.servers: %q: want host:port: %w", b, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
			return fmt.Errorf("controller.quorum.bootstrap.servers: %q: want host:port with a port between 1 and 65535", b)
		}
	}
	if c.MetricsAddress != "" {
		if _, port, err := net.SplitHostPort(c.MetricsAddress); err != nil {
			return fmt.Errorf("keel.metrics.address: %q: want host:port: %w", c.MetricsAddress, err)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("keel.metrics.address: %q: want a port between 0 and 65535", c.MetricsAddress)
		}
	}
	if c.LogDeleteBytesPerSecond < 0 {
		return fmt.Errorf("keel.log.delete.max.bytes.per.second must be >= 0, got %d", c.LogDeleteBytesPerSecond)
	}
	if c.LogDropBehindBytes < 0 {
		return fmt.Errorf("keel.log.cache.drop.behind.bytes must be >= 0, got %d", c.LogDropBehindBytes)
	}
	if c.LogWritebackBytes < 0 {
		return fmt.Errorf("keel.log.writeback.bytes must be >= 0, got %d", c.LogWritebackBytes)
	}
	if c.InitialBrokerRegistrationTimeout <= 0 {
		return fmt.Errorf("initial.broker.registration.timeout.ms must be > 0, got %d", c.InitialBrokerRegistrationTimeout.Milliseconds())
	}
	if len(c.LogDirs) == 0 {
		return fmt.Errorf("log.dirs is empty")
	}
	if c.NumPartitions < 1 {
		return fmt.Errorf("num.partitions must be >= 1, got %d", c.NumPartitions)
	}
	if c.DefaultReplicationFactor < 1 {
		return fmt.Errorf("default.replication.factor must be >= 1, got %d", c.DefaultReplicationFactor)
	}
	if c.MinInsyncReplicas < 1 {
		return fmt.Errorf("min.insync.replicas must be >= 1, got %d", c.MinInsyncReplicas)
	}
	overrides, err := connectionsPerIPOverrides(c.MaxConnectionsPerIPOverrides)
	if err != nil {
		return err
	}
	if err := checkConnectionsPerIP(c.MaxConnectionsPerIP, len(overrides)); err != nil {
		return err
	}
	if c.ReplicaSocketTimeout < c.ReplicaFetchWaitMax {
		// Kafka's check: a fetch parked for replica.fetch.wait.max.ms
		// would time out before the leader answers it.
		return fmt.Errorf("replica.socket.timeout.ms (%d) must be at least replica.fetch.wait.max.ms (%d)", c.ReplicaSocketTimeout.Milliseconds(), c.ReplicaFetchWaitMax.Milliseconds())
	}
	if c.ReplicaFetchWaitMax > c.ReplicaLagTimeMax {
		// Kafka's check: a follower waiting longer than that on an idle
		// leader would fall out of the ISR.
		return fmt.Errorf("replica.fetch.wait.max.ms (%d) must be at most replica.lag.time.max.ms (%d)", c.ReplicaFetchWaitMax.Milliseconds(), c.ReplicaLagTimeMax.Milliseconds())
	}
	if c.LogCleanerBackoff < 0 {
		return fmt.Errorf("log.cleaner.backoff.ms must be >= 0, got %d", c.LogCleanerBackoff.Milliseconds())
	}
	if c.LogCleanerThreads < 0 {
		return fmt.Errorf("log.cleaner.threads must be >= 0, got %d", c.LogCleanerThreads)
	}
	if !(c.LogCleanerIOMaxBytesPerSec > 0) {
		return fmt.Errorf("log.cleaner.io.max.bytes.per.second must be > 0, got %v", c.LogCleanerIOMaxBytesPerSec)
	}
	if c.MetadataMaxBytesBetweenSnapshots < 1 {
		return fmt.Errorf("metadata.log.max.record.bytes.between.snapshots must be >= 1, got %d", c.MetadataMaxBytesBetweenSnapshots)
	}
	if c.MetadataMaxSnapshotInterval < 0 {
		return fmt.Errorf("metadata.log.max.snapshot.interval.ms must be >= 0, got %d", c.MetadataMaxSnapshotInterval.Milliseconds())
	}
	for _, q := range []struct {
		key string
		v   int
	}{
		{"quota.window.num", c.QuotaWindowNum}, {"quota.window.size.seconds", c.QuotaWindowSizeSeconds},
		{"replication.quota.window.num", c.ReplicationQuotaWindowNum}, {"replication.quota.window.size.seconds", c.ReplicationQuotaWindowSizeSeconds},
		{"controller.quota.window.num", c.ControllerQuotaWindowNum}, {"controller.quota.window.size.seconds", c.ControllerQuotaWindowSizeSeconds},
	} {
		if q.v < 1 {
			return fmt.Errorf("%s must be >= 1, got %d", q.key, q.v)
		}
	}
	if c.FetchMaxBytes < 1024 {
		return fmt.Errorf("fetch.max.bytes must be >= 1024, got %d", c.FetchMaxBytes)
	}
	if c.MaxRequestPartitionSizeLimit < 1 {
		return fmt.Errorf("max.request.partition.size.limit must be >= 1, got %d", c.MaxRequestPartitionSizeLimit)
	}
	if c.FetchSessionCacheSlots < 0 {
		return fmt.Errorf("max.incremental.fetch.session.cache.slots must be >= 0, got %d", c.FetchSessionCacheSlots)
	}
	if c.SocketRequestMaxBytes < 1 {
		return fmt.Errorf("socket.request.max.bytes must be >= 1, got %d", c.SocketRequestMaxBytes)
	}
	if c.QueuedMaxRequestBytes > 0 && c.QueuedMaxRequestBytes < int64(c.SocketRequestMaxBytes) {
		return fmt.Errorf("queued.max.request.bytes (%d) must be -1 or at least socket.request.max.bytes (%d)",
			c.QueuedMaxRequestBytes, c.SocketRequestMaxBytes)
	}
	if c.LogMessageTimestampType != "CreateTime" && c.LogMessageTimestampType != "LogAppendTime" {
		return fmt.Errorf("log.message.timestamp.type must be CreateTime or LogAppendTime, got %q", c.LogMessageTimestampType)
	}
	if c.OffsetsTopicNumPartitions < 1 {
		return fmt.Errorf("offsets.topic.num.partitions must be >= 1, got %d", c.OffsetsTopicNumPartitions)
	}
	if c.OffsetsTopicReplicationFactor < 1 {
		return fmt.Errorf("offsets.topic.replication.factor must be >= 1, got %d", c.OffsetsTopicReplicationFactor)
	}
	if c.TransactionStateLogNumPartitions < 1 {
		return fmt.Errorf("transaction.state.log.num.partitions must be >= 1, got %d", c.TransactionStateLogNumPartitions)
	}
	if c.TransactionStateLogReplicationFactor < 1 {
		return fmt.Errorf("transaction.state.log.replication.factor must be >= 1, got %d", c.TransactionStateLogReplicationFactor)
	}
	if c.TransactionMaxTimeout < time.Millisecond {
		return fmt.Errorf("transaction.max.timeout.ms must be >= 1, got %v", c.TransactionMaxTimeout)
	}
	if c.GroupMinSessionTimeout > c.GroupMaxSessionTimeout {
		return fmt.Errorf("group.min.session.timeout.ms (%v) is above group.max.session.timeout.ms (%v)", c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout)
	}
	if c.MetadataLogDir == "" {
		c.MetadataLogDir = c.LogDirs[0]
	}
	return nil
}

// listenerConnectionQuota parses a listener.name.<listener>.max.connections
// or .max.connection.creation.rate value: a whole number, at least 0, as
// the broker-wide ones.
func listenerConnectionQuota(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, errors.New("not a whole number")
	}
	if n < 0 {
		return 0, errors.New("must be at least 0")
	}
	return n, nil
}

// ListenerConnectionLimits are the listeners' own connection limits
// (listener.name.<listener>.<name>: max.connections or
// max.connection.creation.rate) by listener name, from settings (a
// listener name in any case) for each of listeners.
func ListenerConnectionLimits(settings map[string]string, name string, listeners []string) map[string]int {
	out := map[string]int{}
	for _, l := range listeners {
		if v, ok := listenerSetting(settings, l, name, false); ok {
			if n, err := listenerConnectionQuota(v); err == nil {
				out[l] = n
			}
		}
	}
	return out
}

// networkMaxConnections is max.connections as network.Config takes it:
// Kafka's 0, which admits no connection (but on the inter-broker
// listener), is negative there, where 0 means no limit.
func networkMaxConnections(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// connectionsPerIPOverrides parses max.connections.per.ip.overrides
// (metadata.ParseConnectionsPerIPOverrides, which also validates it when
// set dynamically).
func connectionsPerIPOverrides(v string) (map[string]int, error) {
	out, err := metadata.ParseConnectionsPerIPOverrides(splitList(v))
	if err != nil {
		return nil, fmt.Errorf("max.connections.per.ip.overrides: %w", err)
	}
	return out, nil
}

// checkConnectionsPerIP is Kafka's check of max.connections.per.ip against
// its overrides: 0 admits only the addresses the overrides name, so it
// needs some.
func checkConnectionsPerIP(perIP, overrides int) error {
	if perIP < 0 || (perIP == 0 && overrides == 0) {
		return fmt.Errorf("max.connections.per.ip must be >= 1, or 0 with max.connections.per.ip.overrides set, got %d", perIP)
	}
	return nil
}
