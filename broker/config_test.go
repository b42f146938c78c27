package broker

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/metadata"
)

// The KRaft server.properties from DESIGN.md §1 must load unchanged.
const designProperties = `process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=/var/lib/keel/n1
auto.create.topics.enable=false
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
`

func TestLoadConfigReadsAKRaftServerProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(designProperties+"num.io.threads=8\nsome.typo.key=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfigFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasRole("broker") || !c.HasRole("controller") || c.NodeID != 1 {
		t.Fatalf("roles %v node %d", c.ProcessRoles, c.NodeID)
	}
	if c.ControllerQuorumVoters != "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293" || c.AutoCreateTopicsEnable {
		t.Fatalf("%+v", c)
	}
	if !reflect.DeepEqual(c.LogDirs, []string{"/var/lib/keel/n1"}) || c.MetadataLogDir != "/var/lib/keel/n1" {
		t.Fatalf("log dirs %v metadata %q", c.LogDirs, c.MetadataLogDir)
	}
	if c.TransactionStateLogMinISR != 2 || c.OffsetsTopicReplicationFactor != 3 {
		t.Fatalf("%+v", c)
	}
	if !reflect.DeepEqual(c.Unknown, []string{"some.typo.key"}) || !reflect.DeepEqual(c.Ignored, []string{"num.io.threads"}) {
		t.Fatalf("unknown %v ignored %v", c.Unknown, c.Ignored)
	}
}

func TestLoadConfigDefaultsAreKafkas(t *testing.T) {
	c, err := LoadConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.LogSegmentBytes != 1<<30 || c.LogRetentionMs != 168*3600*1000 || c.MessageMaxBytes != 1048588 ||
		c.BrokerSessionTimeout != 9*time.Second || c.NumPartitions != 1 || c.LogIndexIntervalBytes != 4096 ||
		c.SocketRequestMaxBytes != 100<<20 || !c.AutoCreateTopicsEnable || c.LogRetentionBytes != -1 {
		t.Fatalf("%+v", c)
	}
}

// The embedded default voter follows a moved controller listener (and
// node.id); explicit voters and broker-only nodes are left alone.
func TestDefaultVotersFollowTheControllerListener(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		want      string
	}{
		{nil, "1@localhost:9093"},
		{[]string{"listeners=PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093"}, "1@localhost:19093"},
		{[]string{"node.id=4", "listeners=PLAINTEXT://:9092,CONTROLLER://:9193"}, "4@localhost:9193"},
		{[]string{"listeners=PLAINTEXT://:0,CONTROLLER://127.0.0.1:0"}, "1@localhost:9093"},
		{[]string{"listeners=PLAINTEXT://:1,CONTROLLER://:2", "controller.quorum.voters=1@h:3"}, "1@h:3"},
		{[]string{"process.roles=broker", "listeners=PLAINTEXT://:19092"}, "1@localhost:9093"},
	} {
		c, err := LoadConfig(nil, tc.overrides)
		if err != nil {
			t.Fatalf("%v: %v", tc.overrides, err)
		}
		if c.ControllerQuorumVoters != tc.want {
			t.Errorf("%v: voters %q, want %q", tc.overrides, c.ControllerQuorumVoters, tc.want)
		}
	}
}

// offsets.topic.replication.factor is 1 in the single-node development
// default, as in Kafka's shipped server.properties, and Kafka's 3 once
// the quorum is configured; an explicit value always wins.
func TestOffsetsReplicationDefault(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		want      int16
	}{
		{nil, 1},
		{[]string{"listeners=PLAINTEXT://:19092,CONTROLLER://:19093"}, 1},
		{[]string{"controller.quorum.voters=1@h:9093,2@h2:9093,3@h3:9093"}, 3},
		{[]string{"controller.quorum.voters=1@h:9093", "offsets.topic.replication.factor=2"}, 2},
		{[]string{"offsets.topic.replication.factor=3"}, 3},
	} {
		c, err := LoadConfig(nil, tc.overrides)
		if err != nil {
			t.Fatalf("%v: %v", tc.overrides, err)
		}
		if c.OffsetsTopicReplicationFactor != tc.want {
			t.Errorf("%v: offsets.topic.replication.factor %d, want %d", tc.overrides, c.OffsetsTopicReplicationFactor, tc.want)
		}
	}
}

func TestLoadConfigFinerRetentionKeysWin(t *testing.T) {
	c, err := LoadConfig(map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2"}, []string{"log.retention.ms=3"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LogRetentionMs != 3 {
		t.Fatalf("retention %d", c.LogRetentionMs)
	}
	c, _ = LoadConfig(map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2"}, nil)
	if c.LogRetentionMs != 2*60*1000 {
		t.Fatalf("retention %d", c.LogRetentionMs)
	}
	c, _ = LoadConfig(map[string]string{"log.dir": "/x"}, nil)
	if !reflect.DeepEqual(c.LogDirs, []string{"/x"}) {
		t.Fatalf("log.dir fallback %v", c.LogDirs)
	}
}

func TestLoadConfigRejectsBadValues(t *testing.T) {
	for _, kv := range []string{"node.id=x", "process.roles=zookeeper", "num.partitions=0",
		"log.message.timestamp.type=Now", "min.insync.replicas=0", "auto.create.topics.enable=maybe", "noequals",
		// below socket.request.max.bytes (100 MiB)
		"queued.max.request.bytes=1048576",
		// an authorizer Keel cannot load: no ACL would be enforced
		"authorizer.class.name=com.example.MyAuthorizer",
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"allow.everyone.if.no.acl.found=maybe",
		"controller.quorum.bootstrap.servers=localhost", "controller.quorum.bootstrap.servers=localhost:0",
		"initial.broker.registration.timeout.ms=0",
		"keel.metrics.address=9404", "keel.metrics.address=localhost:http", "keel.metrics.address=:70000",
	} {
		_, err := LoadConfig(nil, []string{kv})
		if err == nil {
			t.Errorf("%s accepted", kv)
		} else if k, _, _ := strings.Cut(kv, "="); !strings.Contains(err.Error(), k) && kv != "noequals" {
			t.Errorf("%s: error %q does not name the key", kv, err)
		}
	}
	c, err := LoadConfig(nil, []string{"authorizer.class.name=" + StandardAuthorizerClass, "super.users=User:admin; User:CN=broker1,OU=kafka;"})
	if err != nil || c.AuthorizerClassName != StandardAuthorizerClass || !slices.Equal(c.SuperUsers, []string{"User:admin", "User:CN=broker1,OU=kafka"}) {
		t.Errorf("the StandardAuthorizer: %v %+v", err, c)
	}
	if _, err := LoadConfig(nil, []string{"authorizer.class.name="}); err != nil {
		t.Errorf("an empty authorizer.class.name (Kafka's default) refused: %v", err)
	}
}

// A key written in server.properties is STATIC_BROKER_CONFIG even when its
// value is Kafka's default; an absent one stays DEFAULT_CONFIG.
func TestStaticTopicDefaultsFollowWhatTheFileSet(t *testing.T) {
	c, err := LoadConfig(map[string]string{"log.retention.ms": "604800000", "log.segment.bytes": "1048576"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := StaticTopicConfigDefaults(c)
	if got["log.retention.ms"] != "604800000" || got["log.segment.bytes"] != "1048576" {
		t.Fatalf("static defaults %v", got)
	}
	if _, ok := got["message.max.bytes"]; ok {
		t.Fatalf("message.max.bytes was not set by the file: %v", got)
	}
}

// Roll jitter is read in either unit, the finer winning, and reaches the
// default log configuration.
func TestLoadConfigRollJitter(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  int64
	}{
		{nil, 0},
		{map[string]string{"log.roll.jitter.hours": "2"}, 7_200_000},
		{map[string]string{"log.roll.jitter.hours": "2", "log.roll.jitter.ms": "5000"}, 5000},
	} {
		c, err := LoadConfig(tc.props, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.LogConfig().SegmentJitterMs; got != tc.want || len(c.Unknown) != 0 {
			t.Errorf("%v: segment jitter %d (unknown keys %v), want %d", tc.props, got, c.Unknown, tc.want)
		}
	}
}

// socket.*.buffer.bytes are applied (network.Config), not ignored; -1 (the
// OS's autotuned buffers) by default.
func TestSocketBufferConfigs(t *testing.T) {
	c, err := LoadConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.SocketSendBufferBytes != -1 || c.SocketReceiveBufferBytes != -1 {
		t.Fatalf("defaults %d, %d; want -1, -1", c.SocketSendBufferBytes, c.SocketReceiveBufferBytes)
	}
	c, err = LoadConfig(map[string]string{"socket.send.buffer.bytes": "102400", "socket.receive.buffer.bytes": "65536"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.SocketSendBufferBytes != 102400 || c.SocketReceiveBufferBytes != 65536 || len(c.Ignored) != 0 {
		t.Fatalf("send %d, receive %d, ignored %v", c.SocketSendBufferBytes, c.SocketReceiveBufferBytes, c.Ignored)
	}
}

// Kafka 4's shipped server.properties names no controller.quorum.voters: a
// KIP-853 dynamic quorum, found through controller.quorum.bootstrap.servers,
// which here is the node's own controller listener.
func TestLoadConfigReadsKafka4sDynamicQuorum(t *testing.T) {
	kafka4 := map[string]string{
		"process.roles": "broker,controller", "node.id": "1",
		"controller.quorum.bootstrap.servers":              "localhost:9093",
		"listeners":                                        "PLAINTEXT://:9092,CONTROLLER://:9093",
		"advertised.listeners":                             "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
		"controller.listener.names":                        "CONTROLLER",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"log.dirs":                                         t.TempDir(),
	}
	c, err := LoadConfig(kafka4, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := c.OwnControllerAddr()
	if !c.DynamicQuorum() || !c.StandaloneBootstrap() || c.ControllerQuorumVoters != "" || addr != "localhost:9093" {
		t.Fatalf("dynamic %v standalone %v voters %q own %q", c.DynamicQuorum(), c.StandaloneBootstrap(), c.ControllerQuorumVoters, addr)
	}
	if len(c.Unknown) != 0 || c.OffsetsTopicReplicationFactor != 1 || c.InitialBrokerRegistrationTimeout != time.Minute {
		t.Fatalf("unknown %v, offsets replication %d, registration timeout %v", c.Unknown, c.OffsetsTopicReplicationFactor, c.InitialBrokerRegistrationTimeout)
	}

	// Bootstrap servers naming other controllers: not standalone, and
	// Kafka's default offsets replication of 3 stands.
	c, err = LoadConfig(kafka4, []string{"controller.quorum.bootstrap.servers=localhost:9093,10.1.2.3:9093"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.DynamicQuorum() || c.StandaloneBootstrap() || c.OffsetsTopicReplicationFactor != 3 {
		t.Fatalf("dynamic %v standalone %v offsets replication %d", c.DynamicQuorum(), c.StandaloneBootstrap(), c.OffsetsTopicReplicationFactor)
	}
	// Another port of this host is another node.
	c, _ = LoadConfig(kafka4, []string{"controller.quorum.bootstrap.servers=127.0.0.1:9193"})
	if c.StandaloneBootstrap() {
		t.Fatal("a bootstrap server on another port taken for this node")
	}
	// The single-node default's voter stays at the controller listener,
	// where a node started before advertised controller listeners counted
	// has it; a dynamic quorum's own address is the advertised one.
	c, err = LoadConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"advertised.listeners": "PLAINTEXT://broker.example:9092,CONTROLLER://ctl.example:9093"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := c.OwnControllerAddr(); c.ControllerQuorumVoters != "1@127.0.0.1:9093" || own != "ctl.example:9093" {
		t.Fatalf("default voters %q, own dynamic address %q", c.ControllerQuorumVoters, own)
	}
	// With controller.quorum.voters too, the quorum is the static one.
	c, err = LoadConfig(kafka4, []string{"controller.quorum.voters=1@localhost:9093"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DynamicQuorum() || c.ControllerQuorumVoters != "1@localhost:9093" {
		t.Fatalf("dynamic %v voters %q", c.DynamicQuorum(), c.ControllerQuorumVoters)
	}
}

// TestServerPropertiesOfAKafka3Cluster: the settings a Kafka 3.x
// server.properties carries are applied where Keel has them
// (delete.topic.enable, fetch.max.bytes, the fetch session slots, the
// rack and replica selector) and accepted without a warning where KRaft
// does without them (the ZooKeeper-era controlled shutdown, leader
// imbalance percentage and protocol versions); out-of-range values fail
// the start, naming the key.
func TestServerPropertiesOfAKafka3Cluster(t *testing.T) {
	c, err := LoadConfig(map[string]string{
		"delete.topic.enable": "false", "fetch.max.bytes": "1048576", "max.incremental.fetch.session.cache.slots": "10",
		"broker.rack": "eu-west-1a", "replica.selector.class": RackAwareReplicaSelectorClass,
		"controlled.shutdown.enable": "true", "leader.imbalance.per.broker.percentage": "10",
		"inter.broker.protocol.version": "3.7", "log.message.format.version": "3.0", "reserved.broker.max.id": "1000",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DeleteTopicEnable || c.FetchMaxBytes != 1<<20 || c.FetchSessionCacheSlots != 10 || c.BrokerRack != "eu-west-1a" {
		t.Fatalf("delete.topic.enable %v, fetch.max.bytes %d, slots %d, rack %q", c.DeleteTopicEnable, c.FetchMaxBytes, c.FetchSessionCacheSlots, c.BrokerRack)
	}
	if cc := controllerConfig(c, "id"); cc.DeleteTopicEnable {
		t.Fatal("the controller does not get delete.topic.enable=false")
	}
	if len(c.Unknown) != 0 || len(c.Ignored) != 5 {
		t.Fatalf("unknown %v, ignored %v", c.Unknown, c.Ignored)
	}
	d, err := LoadConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !d.DeleteTopicEnable || d.FetchMaxBytes != 57671680 || d.FetchSessionCacheSlots != 1000 || d.BrokerRack != "" || d.ReplicaSelectorClass != "" {
		t.Fatalf("defaults: %v %d %d %q %q", d.DeleteTopicEnable, d.FetchMaxBytes, d.FetchSessionCacheSlots, d.BrokerRack, d.ReplicaSelectorClass)
	}
	for _, bad := range []string{"fetch.max.bytes=1000", "max.incremental.fetch.session.cache.slots=-1", "replica.selector.class=LeaderSelector", "log.cleaner.backoff.ms=-1"} {
		key, _, _ := strings.Cut(bad, "=")
		if _, err := LoadConfig(nil, []string{bad}); err == nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

// broker.id is node.id's synonym, as in Kafka's KafkaConfig: a file naming
// its node by broker.id alone (a Kafka 3.x one) gets that id, both must
// agree, and a ZooKeeper-mode file is refused with what KRaft mode needs;
// security.inter.broker.protocol names the inter-broker listener.
func TestKafkaSynonyms(t *testing.T) {
	for _, tc := range []struct {
		props  map[string]string
		node   int32
		errHas string
	}{
		{props: map[string]string{"broker.id": "3"}, node: 3},
		{props: map[string]string{"broker.id": " 4 ", "node.id": "4"}, node: 4},
		{props: map[string]string{"node.id": "5"}, node: 5},
		{props: map[string]string{"broker.id": "3", "node.id": "4"}, errHas: "node.id to the same value as broker.id"},
		{props: map[string]string{"broker.id": "x"}, errHas: "node.id"},
		{props: map[string]string{"broker.id": "0", "zookeeper.connect": "zk:2181", "listeners": "PLAINTEXT://:9092"}, errHas: "ZooKeeper-mode"},
		{props: map[string]string{"broker.id": "2", "zookeeper.connect": "zk:2181", "process.roles": "broker", "controller.quorum.voters": "1@c:9093"}, node: 2},
	} {
		c, err := LoadConfig(tc.props, nil)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%v: %v; want an error with %q", tc.props, err, tc.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.props, err)
		} else if c.NodeID != tc.node || slices.Contains(c.Unknown, "broker.id") {
			t.Errorf("%v: node %d, unknown keys %v; want node %d", tc.props, c.NodeID, c.Unknown, tc.node)
		}
	}
	// security.inter.broker.protocol names the inter-broker listener when
	// inter.broker.listener.name does not; not both.
	if c, err := LoadConfig(map[string]string{"security.inter.broker.protocol": "SSL"}, nil); err != nil {
		t.Errorf("security.inter.broker.protocol=SSL: %v", err)
	} else if c.InterBrokerListenerName != "SSL" || len(c.Unknown) != 0 {
		t.Errorf("security.inter.broker.protocol=SSL: inter-broker listener %q, unknown keys %v", c.InterBrokerListenerName, c.Unknown)
	}
	for _, bad := range [][]string{{"security.inter.broker.protocol=SSL", "inter.broker.listener.name=INTERNAL"}, {"security.inter.broker.protocol=TLS"}} {
		if _, err := LoadConfig(nil, bad); err == nil || !strings.Contains(err.Error(), "security.inter.broker.protocol") {
			t.Errorf("%v: %v", bad, err)
		}
	}
	// An override's broker.id counts as the file's does.
	if c, err := LoadConfig(map[string]string{"node.id": "6"}, []string{"broker.id=7"}); err == nil {
		t.Fatalf("node.id=6 with --override broker.id=7: node %d, no error", c.NodeID)
	}
}

// TestMaxConnectionsPerIPConfig: the overrides parse as Kafka writes them
// (an IPv6 address's count after its last colon), and 0 is a valid limit
// only with overrides (Kafka's rule).
func TestMaxConnectionsPerIPConfig(t *testing.T) {
	c, err := LoadConfig(nil, []string{"max.connections.per.ip=0", "max.connections.per.ip.overrides=127.0.0.1:5, ::1:6,localhost:7"})
	if err != nil {
		t.Fatal(err)
	}
	limit, overrides, err := connectionsPerIP(c)
	if err != nil {
		t.Fatal(err)
	}
	if limit != -1 || overrides[netip.MustParseAddr("127.0.0.1")] == 0 || overrides[netip.MustParseAddr("::1")] == 0 {
		t.Fatalf("limit %d, overrides %v", limit, overrides)
	}
	for _, bad := range [][]string{
		{"max.connections.per.ip=0"},
		{"max.connections.per.ip=-1"},
		{"max.connections.per.ip.overrides=127.0.0.1"},
		{"max.connections.per.ip.overrides=127.0.0.1:many"},
		{"max.connections.per.ip.overrides=:5"},
	} {
		if _, err := LoadConfig(nil, bad); err == nil || !strings.Contains(err.Error(), "max.connections.per.ip") {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}

// TestListenerMaxConnectionsConfig: listener.name.<listener>.max.connections
// is a known key (no warning), checked as max.connections, and applies to
// its listener whatever the case of the name.
func TestListenerMaxConnectionsConfig(t *testing.T) {
	c, err := LoadConfig(nil, []string{"listener.name.internal.max.connections=5", "listener.name.EXTERNAL.max.connections=0",
		"max.connection.creation.rate=50", "listener.name.external.max.connection.creation.rate=10"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Unknown) != 0 || len(c.NotApplied) != 0 || c.MaxConnectionCreationRate != 50 {
		t.Fatalf("unknown keys %v, not applied %v, max.connection.creation.rate %d", c.Unknown, c.NotApplied, c.MaxConnectionCreationRate)
	}
	listeners := []string{"INTERNAL", "EXTERNAL", "CONTROLLER"}
	got := ListenerConnectionLimits(c.ListenerConnectionQuotas, "max.connections", listeners)
	if len(got) != 2 || got["INTERNAL"] != 5 || got["EXTERNAL"] != 0 {
		t.Fatalf("limits %v", got)
	}
	if rates := ListenerConnectionLimits(c.ListenerConnectionQuotas, "max.connection.creation.rate", listeners); len(rates) != 1 || rates["EXTERNAL"] != 10 {
		t.Fatalf("rates %v", rates)
	}
	for _, bad := range []string{"listener.name.internal.max.connections=-1", "listener.name.internal.max.connections=lots", "listener.name.internal.max.connection.creation.rate=-2"} {
		if _, err := LoadConfig(nil, []string{bad}); err == nil || !strings.Contains(err.Error(), "listener.name.internal.max.connection") {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

// replica.socket.timeout.ms and replica.fetch.wait.max.ms are checked
// against each other and replica.lag.time.max.ms, as Kafka checks them.
func TestReplicaSocketConfig(t *testing.T) {
	c, err := LoadConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReplicaSocketTimeout != 30*time.Second || c.ReplicaSocketReceiveBufferBytes != -1 {
		t.Fatalf("defaults: timeout %v, receive buffer %d", c.ReplicaSocketTimeout, c.ReplicaSocketReceiveBufferBytes)
	}
	for _, bad := range [][]string{
		{"replica.socket.timeout.ms=400"},
		{"replica.fetch.wait.max.ms=40000"},
		{"replica.lag.time.max.ms=100", "replica.socket.timeout.ms=100"},
	} {
		if _, err := LoadConfig(nil, bad); err == nil || !strings.Contains(err.Error(), "replica.") {
			t.Errorf("%v: %v, want it refused", bad, err)
		}
	}
	if _, err := LoadConfig(nil, []string{"replica.socket.timeout.ms=500", "replica.socket.receive.buffer.bytes=131072"}); err != nil {
		t.Fatal(err)
	}
}

// notAppliedKeys returns the keys c reports as not applied, each of which
// must give its reason.
func notAppliedKeys(t *testing.T, c *Config) []string {
	t.Helper()
	var keys []string
	for _, na := range c.NotApplied {
		k, why, _ := strings.Cut(na, ": ")
		if why == "" {
			t.Errorf("%s: no reason given", k)
		}
		keys = append(keys, k)
	}
	return keys
}

// Kafka keys Keel knows but does not carry out are reported with the
// reason, not as unknown; a value that asks for nothing missing is quiet.
func TestNotAppliedKeys(t *testing.T) {
	c, err := LoadConfig(map[string]string{
		"metadata.log.segment.bytes": "1073741824", "metadata.max.retention.ms": "604800000",
		"group.coordinator.rebalance.protocols": "classic,consumer", "group.consumer.regex.refresh.interval.ms": "10000",
		"metric.reporters": "com.example.Reporter", "no.such.key": "1",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := notAppliedKeys(t, c)
	want := []string{"group.consumer.regex.refresh.interval.ms", "metadata.log.segment.bytes", "metadata.max.retention.ms", "metric.reporters"}
	if !slices.Equal(keys, want) || !slices.Equal(c.Unknown, []string{"no.such.key"}) {
		t.Fatalf("not applied %v, unknown %v; want %v and [no.such.key]", keys, c.Unknown, want)
	}
	c, err = LoadConfig(map[string]string{"group.coordinator.rebalance.protocols": "classic", "metric.reporters": ""}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.NotApplied) != 0 || !slices.Equal(c.GroupRebalanceProtocols, []string{"classic"}) || c.consumerProtocolServed() ||
		!slices.Contains(c.Ignored, "metric.reporters") {
		t.Fatalf("classic only: protocols %v, not applied %v, ignored %v", c.GroupRebalanceProtocols, c.NotApplied, c.Ignored)
	}
	// A Kafka 3.x production file's keys for what Keel does differently:
	// each reported with its reason, or quiet where it asks for nothing
	// Keel lacks or only tunes the JVM broker's or ZooKeeper's internals.
	c, err = LoadConfig(map[string]string{
		"controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000",
		"controller.quorum.election.backoff.max.ms": "1000", "controller.quorum.request.timeout.ms": "2000",
		"controller.quorum.retry.backoff.ms": "20", "metadata.max.idle.interval.ms": "500",
		"remote.log.storage.system.enable": "true", "log.dir.failure.timeout.ms": "30000",
		"connection.failed.authentication.delay.ms": "100", "kafka.metrics.reporters": "com.example.Yammer",
		"fetch.purgatory.purge.interval.requests": "1000", "producer.purgatory.purge.interval.requests": "1000",
		"password.encoder.secret": "s",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys = notAppliedKeys(t, c)
	want = []string{"connection.failed.authentication.delay.ms", "controller.quorum.election.backoff.max.ms", "controller.quorum.election.timeout.ms",
		"controller.quorum.fetch.timeout.ms", "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms",
		"kafka.metrics.reporters", "log.dir.failure.timeout.ms", "metadata.max.idle.interval.ms", "remote.log.storage.system.enable"}
	if !slices.Equal(keys, want) || len(c.Unknown) != 0 || len(c.Ignored) != 3 {
		t.Fatalf("not applied %v, unknown %v, ignored %v; want %v, none and 3", keys, c.Unknown, c.Ignored, want)
	}
	// Kafka 4's keys: reported where they ask for what Keel lacks, quiet
	// where they tune the JVM broker or what Keel has none of.
	c, err = LoadConfig(map[string]string{
		"unstable.api.versions.enable": "true", "unstable.feature.versions.enable": "false", "eligible.leader.replicas.enable": "true",
		"transaction.two.phase.commit.enable": "true", "group.share.enable": "false", "share.coordinator.state.topic.num.partitions": "50",
		"group.share.record.lock.duration.ms": "30000", "remote.log.manager.thread.pool.size": "2", "telemetry.max.bytes": "1048576",
		"client.quota.callback.class": "com.example.Quotas", "socket.listen.backlog.size": "50",
		"early.start.listeners": "CONTROLLER", "server.max.startup.time.ms": "1000", "log.initial.task.delay.ms": "30000",
		"group.coordinator.threads": "4", "group.coordinator.append.linger.ms": "10", "auto.include.jmx.reporter": "true",
		"principal.builder.class":        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
		"create.topic.policy.class.name": "", "alter.config.policy.class.name": "",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys = notAppliedKeys(t, c)
	want = []string{"client.quota.callback.class", "eligible.leader.replicas.enable", "socket.listen.backlog.size", "telemetry.max.bytes",
		"transaction.two.phase.commit.enable", "unstable.api.versions.enable"}
	if !slices.Equal(keys, want) || len(c.Unknown) != 0 || len(c.Ignored) != 14 {
		t.Fatalf("Kafka 4's keys: not applied %v, unknown %v, ignored %v; want %v, none and 14", keys, c.Unknown, c.Ignored, want)
	}
	// A plugin class that decides who a client is or what it may do is
	// not dropped: the start fails, as Kafka's does when it cannot load it.
	for _, kv := range []string{"principal.builder.class=com.example.Builder", "create.topic.policy.class.name=com.example.Policy",
		"alter.config.policy.class.name=com.example.Policy"} {
		key, _, _ := strings.Cut(kv, "=")
		if _, err := LoadConfig(nil, []string{kv}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v; want the start refused", kv, err)
		}
	}
	if c, err := LoadConfig(map[string]string{"remote.log.storage.system.enable": "false", "kafka.metrics.reporters": ""}, nil); err != nil {
		t.Fatal(err)
	} else if len(c.NotApplied)+len(c.Unknown) != 0 {
		t.Fatalf("tiered storage off, no reporters: not applied %v, unknown %v", c.NotApplied, c.Unknown)
	}
	// Kafka's streams and share groups are reported, not served; an
	// unknown protocol or a list without classic is refused.
	c, err = LoadConfig(map[string]string{"group.coordinator.rebalance.protocols": "classic,consumer,streams"}, nil)
	if err != nil || !c.consumerProtocolServed() || len(c.NotApplied) != 1 || !strings.Contains(c.NotApplied[0], "streams") {
		t.Fatalf("with streams: %v, not applied %v", err, c.NotApplied)
	}
	for _, v := range []string{"classic,modern", "consumer"} {
		if _, err := LoadConfig(map[string]string{"group.coordinator.rebalance.protocols": v}, nil); err == nil {
			t.Errorf("group.coordinator.rebalance.protocols=%s accepted", v)
		}
	}
	if _, err := LoadConfig(map[string]string{"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"}, nil); err != nil {
		t.Errorf("Kafka's assignor class names: %v", err)
	}
	if _, err := LoadConfig(map[string]string{"group.consumer.assignors": "sticky"}, nil); err == nil {
		t.Error("group.consumer.assignors=sticky accepted")
	}
	// group.consumer.migration.policy: Kafka's values, in any case.
	if c, err := LoadConfig(nil, nil); err != nil || c.groupConfig().ConsumerMigrationPolicy != "bidirectional" {
		t.Errorf("default migration policy: %q %v", c.ConsumerMigrationPolicy, err)
	}
	if c, err := LoadConfig(map[string]string{"group.consumer.migration.policy": "UPGRADE"}, nil); err != nil ||
		c.ConsumerMigrationPolicy != "upgrade" || len(c.NotApplied) != 0 {
		t.Errorf("group.consumer.migration.policy=UPGRADE: %q %v %v", c.ConsumerMigrationPolicy, err, c.NotApplied)
	}
	if _, err := LoadConfig(map[string]string{"group.consumer.migration.policy": "both"}, nil); err == nil {
		t.Error("group.consumer.migration.policy=both accepted")
	}
	// The consumer protocol's session timeout and heartbeat interval
	// within their bounds, as Kafka's GroupCoordinatorConfig requires.
	for _, bad := range []map[string]string{
		{"group.consumer.session.timeout.ms": "30000"},
		{"group.consumer.session.timeout.ms": "70000"},
		{"group.consumer.heartbeat.interval.ms": "20000"},
		{"group.consumer.min.session.timeout.ms": "70000"},
		{"group.consumer.min.session.timeout.ms": "5000", "group.consumer.session.timeout.ms": "6000", "group.consumer.heartbeat.interval.ms": "6000"},
	} {
		if _, err := LoadConfig(bad, nil); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if c, err := LoadConfig(map[string]string{"group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms": "10000",
		"group.consumer.min.heartbeat.interval.ms": "1000", "group.consumer.heartbeat.interval.ms": "1000"}, nil); err != nil ||
		c.groupConfigBounds() != (metadata.GroupConfigBounds{SessionTimeoutMs: 10000, MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 60000,
			HeartbeatIntervalMs: 1000, MinHeartbeatIntervalMs: 1000, MaxHeartbeatIntervalMs: 15000}) {
		t.Errorf("lowered bounds: %v", err)
	}
}

// A broker heartbeat interval of more than half the session timeout is
// accepted, as Kafka accepts it, and logged as an error at start, as Kafka
// 4.2 does (KAFKA-19432).
func TestHeartbeatIntervalAboveHalfTheSessionIsCautioned(t *testing.T) {
	for _, tc := range []struct {
		interval, session string
		caution           bool
	}{
		{"", "", false}, // Kafka's defaults: 2 s and 9 s
		{"4500", "9000", false},
		{"4501", "9000", true},
		{"2000", "3000", true},
		{"500", "3000", false},
	} {
		props := map[string]string{}
		if tc.interval != "" {
			props["broker.heartbeat.interval.ms"], props["broker.session.timeout.ms"] = tc.interval, tc.session
		}
		c, err := LoadConfig(props, nil)
		if err != nil {
			t.Fatalf("%v: %v", props, err)
		}
		cautions := c.Cautions()
		if got := len(cautions) == 1; got != tc.caution || len(cautions) > 1 {
			t.Errorf("%v: cautions %q, want one: %t", props, cautions, tc.caution)
		}
		if tc.caution && len(cautions) == 1 && (!strings.Contains(cautions[0], "broker.heartbeat.interval.ms ("+tc.interval+" ms)") ||
			!strings.Contains(cautions[0], "broker.session.timeout.ms ("+tc.session+" ms)")) {
			t.Errorf("%v: %q does not name both settings with their values", props, cautions[0])
		}
	}
}
