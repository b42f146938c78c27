package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/integration"
)

// kafka-configs.sh's --add-config: pairs separated by commas, a value with
// commas in square brackets.
func TestParseAddConfig(t *testing.T) {
	got, err := parseAddConfig("retention.ms=1000, cleanup.policy=[compact,delete],segment.bytes=1048576")
	want := [][2]string{{"retention.ms", "1000"}, {"cleanup.policy", "compact,delete"}, {"segment.bytes", "1048576"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := parseAddConfig("listener.name.ssl.ssl.keystore.location=/etc/keel/b1.p12"); err != nil || got[0][1] != "/etc/keel/b1.p12" {
		t.Errorf("a path: %v %v", got, err)
	}
	for in, msg := range map[string]string{
		"retention.ms":            "want key=value",
		"a=1,a=2":                 "a given twice",
		"cleanup.policy=[compact": "missing ]",
		"cleanup.policy=[a]b=1":   "want , after ]",
		"=1":                      "want key=value",
		"retention.ms=1,,bad,x=1": "want key=value",
	} {
		if _, err := parseAddConfig(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", in, err, msg)
		}
	}
}

// keel configs against a broker: kafka-configs.sh's output lines, its
// flag form and shorthands, JSON, and the errors a script can see.
func TestCLIConfigs(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]

	if out := ok(t, bs, "", "configs", "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.hours=72,log.cleaner.threads=2"); strings.TrimSpace(out) != "Completed updating default config for brokers in the cluster." {
		t.Errorf("alter the cluster default printed %q", out)
	}
	ok(t, bs, "", "configs", "alter", "--broker", "1", "--add-config", "leader.replication.throttled.rate=1000000")
	out := ok(t, bs, "", "configs", "describe", "--entity-type", "brokers")
	for _, line := range []string{
		"Dynamic configs for broker 1 are:",
		"  leader.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000000}",
		"Default configs for brokers in the cluster are:",
		"  log.retention.hours=72 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=72}",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("describe brokers: no line %q in\n%s", line, out)
		}
	}
	if all := ok(t, bs, "", "configs", "describe", "--broker", "1", "--all"); !strings.Contains(all, "All configs for broker 1 are:\n") ||
		!strings.Contains(all, "  log.retention.hours=72 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=72, DEFAULT_CONFIG:log.retention.hours=168}\n") {
		t.Errorf("describe --all:\n%s", all)
	}

	ok(t, bs, "", "topics", "create", "--topic", "configured")
	ok(t, bs, "", "configs", "alter", "--topic", "configured", "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
	ok(t, bs, "", "configs", "alter", "--entity-type", "topics", "--entity-name", "configured", "--delete-config", "retention.ms")
	// --add-config-file: a properties file of configs (kafka-configs.sh's),
	// --add-config over it; then gone again.
	props := filepath.Join(t.TempDir(), "topic.properties")
	if err := os.WriteFile(props, []byte("# from a file\nretention.ms = 5000\nmax.message.bytes=2000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, bs, "", "configs", "--alter", "--topic", "configured", "--add-config-file", props, "--add-config", "max.message.bytes=3000000")
	if out := ok(t, bs, "", "configs", "describe", "--topic", "configured"); !strings.Contains(out, "  retention.ms=5000 ") || !strings.Contains(out, "  max.message.bytes=3000000 ") {
		t.Errorf("after --add-config-file:\n%s", out)
	}
	ok(t, bs, "", "configs", "alter", "--topic", "configured", "--delete-config", "retention.ms,max.message.bytes")
	var described []struct {
		Type    string  `json:"entity_type"`
		Name    *string `json:"entity_name"`
		Configs []struct {
			Name, Source string
			Value        *string
		} `json:"configs"`
	}
	if err := json.Unmarshal([]byte(ok(t, bs, "", "configs", "describe", "--topic", "configured", "-o", "json")), &described); err != nil {
		t.Fatal(err)
	}
	if len(described) != 1 || len(described[0].Configs) != 1 || described[0].Configs[0].Name != "cleanup.policy" ||
		*described[0].Configs[0].Value != "compact,delete" || described[0].Configs[0].Source != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("topic configs as JSON: %+v", described)
	}

	// Group configs (KIP-848): --entity-type groups and --group.
	if out := ok(t, bs, "", "configs", "--alter", "--entity-type", "groups", "--entity-name", "app", "--add-config", "consumer.session.timeout.ms=50000"); out != "Completed updating config for group app.\n" {
		t.Errorf("alter group app printed %q", out)
	}
	if out := ok(t, bs, "", "configs", "describe", "--group", "app"); out != "Dynamic configs for group app are:\n"+
		"  consumer.session.timeout.ms=50000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=50000}\n" {
		t.Errorf("describe group app printed %q", out)
	}
	// Every group: app has no members or offsets, only configs
	// (ListConfigResources lists it).
	if out := ok(t, bs, "", "configs", "describe", "--entity-type", "groups"); out != "Dynamic configs for group app are:\n"+
		"  consumer.session.timeout.ms=50000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=50000}\n" {
		t.Errorf("describe every group printed %q", out)
	}
	if out := keel(t, bs, "", "configs", "alter", "--group", "app", "--add-config", "consumer.heartbeat.interval.ms=1"); out.exit == 0 ||
		!strings.Contains(out.stderr, "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms") {
		t.Errorf("a heartbeat interval below the bound: %+v", out)
	}

	// Client quotas: kafka-configs.sh's --entity-type users form and its
	// shorthands, strict per entity.
	ok(t, bs, "", "configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=10485760")
	if out := ok(t, bs, "", "configs", "alter", "--user", "alice", "--client", "app", "--add-config", "producer_byte_rate=1024,request_percentage=12.5"); out != "Completed updating config for user alice.\n" {
		t.Errorf("alter alice/app printed %q", out)
	}
	if out := ok(t, bs, "", "configs", "alter", "--user-defaults", "--add-config", "consumer_byte_rate=4096"); out != "Completed updating default config for users in the cluster.\n" {
		t.Errorf("alter the default user printed %q", out)
	}
	if out := ok(t, bs, "", "configs", "describe", "--entity-type", "users", "--entity-name", "alice"); out != "Quota configs for user-principal 'alice' are consumer_byte_rate=1.048576E7, producer_byte_rate=1048576.0\n" { // Java's Double.toString, as kafka-configs.sh prints it
		t.Errorf("describe alice printed %q", out)
	}
	ok(t, bs, "", "configs", "alter", "--user", "alice", "--delete-config", "consumer_byte_rate")
	if out := ok(t, bs, "", "configs", "describe", "--entity-type", "users"); out != "Quota configs for the default user-principal are consumer_byte_rate=4096.0\n"+
		"Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n"+
		"Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0, request_percentage=12.5\n" {
		t.Errorf("describe users printed %q", out)
	}
	// Connection creation rates of client addresses (KIP-612): --entity-type
	// ips and the --ip shorthands.
	if out := ok(t, bs, "", "configs", "alter", "--entity-type", "ips", "--entity-name", "10.0.0.7", "--add-config", "connection_creation_rate=10"); out != "Completed updating config for ip 10.0.0.7.\n" {
		t.Errorf("alter ip 10.0.0.7 printed %q", out)
	}
	if out := ok(t, bs, "", "configs", "alter", "--ip-defaults", "--add-config", "connection_creation_rate=100"); out != "Completed updating default config for ips in the cluster.\n" {
		t.Errorf("alter the default ip printed %q", out)
	}
	if out := ok(t, bs, "", "configs", "describe", "--entity-type", "ips"); out != "Quota configs for ip '10.0.0.7' are connection_creation_rate=10.0\n"+
		"Quota configs for the default ip are connection_creation_rate=100.0\n" {
		t.Errorf("describe ips printed %q", out)
	}
	if out := ok(t, bs, "", "configs", "describe", "--ip", "10.0.0.7"); out != "Quota configs for ip '10.0.0.7' are connection_creation_rate=10.0\n" {
		t.Errorf("describe ip 10.0.0.7 printed %q", out)
	}
	ok(t, bs, "", "configs", "alter", "--ip", "10.0.0.7", "--delete-config", "connection_creation_rate")
	ok(t, bs, "", "configs", "alter", "--entity-type", "ips", "--entity-default", "--delete-config", "connection_creation_rate")
	if out := ok(t, bs, "", "configs", "describe", "--entity-type", "ips"); out != "" {
		t.Errorf("describe ips after the deletes printed %q", out)
	}

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"configs", "alter", "--user", "alice", "--add-config", "write_rate=50"}, "unknown quota key"},
		{[]string{"configs", "alter", "--user", "alice", "--add-config", "producer_byte_rate=fast"}, "a quota is a number"},
		{[]string{"configs", "alter", "--user", "alice", "--add-config", "SCRAM-SHA-256=[password=x]"}, "keel users alter"},
		{[]string{"configs", "alter", "--user", "alice", "--user-defaults", "--add-config", "producer_byte_rate=1"}, "together"},
		{[]string{"configs", "alter", "--user", "alice", "--topic", "configured", "--add-config", "producer_byte_rate=1"}, "either as --user/--client"},
		{[]string{"configs", "alter", "--broker", "1", "--add-config", "ssl.keystore.location=/etc/keel/b1.p12"}, "only per-listener using the listener prefix"},
		{[]string{"configs", "alter", "--broker-defaults", "--add-config", "log.cleaner.threads=0"}, "alter configs of the cluster-wide broker defaults: INVALID_CONFIG"},
		{[]string{"configs", "alter", "--broker", "1", "--add-config", "listeners=PLAINTEXT://:9092"}, "Cannot update these configs dynamically"},
		{[]string{"configs", "alter", "--entity-type", "topics", "--entity-default", "--add-config", "retention.ms=1"}, "only brokers, users, clients and ips have defaults"},
		{[]string{"configs", "alter", "--ip", "10.0.0.7", "--add-config", "producer_byte_rate=1"}, "only connection_creation_rate"},
		{[]string{"configs", "alter", "--ip", "db.example", "--add-config", "connection_creation_rate=1"}, "not a valid IP address"},
		{[]string{"configs", "alter", "--ip", "10.0.0.7", "--user", "alice", "--add-config", "connection_creation_rate=1"}, "an ip entity stands alone"},
		{[]string{"configs", "alter", "--user", "alice", "--add-config", "connection_creation_rate=1"}, "it is an ip entity's quota"},
		{[]string{"configs", "alter", "--broker", "one", "--add-config", "x=1"}, "is not a broker id"},
		{[]string{"configs", "alter", "--broker", "1"}, "give --add-config, --add-config-file or --delete-config"},
		{[]string{"configs", "alter", "--topic", "configured", "--add-config-file", filepath.Join(t.TempDir(), "none.properties")}, "--add-config-file"},
		{[]string{"configs", "alter", "--topic", "configured", "--broker", "1", "--add-config", "x=1"}, "name one entity"},
	} {
		if r := keel(t, bs, "", c.args...); r.exit != 1 || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("keel %s: exit %d, stderr %q, want %q", strings.Join(c.args, " "), r.exit, r.stderr, c.msg)
		}
	}
}

// TestCLIConfigsThroughController: keel configs alter --bootstrap-controller
// (kafka-configs.sh's, KIP-919) reaches the active controller from any
// controller, which is the way back in when no broker takes a connection:
// here every broker's PLAINTEXT listener set to take none.
func TestCLIConfigsThroughController(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	answered := func() bool {
		conn, err := net.Dial("tcp", bs)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return integration.AnsweredWithin(conn, 300*time.Millisecond)
	}
	ok(t, bs, "", "configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config", "listener.name.plaintext.max.connections=0")
	deadline := time.Now().Add(10 * time.Second)
	for answered() {
		if time.Now().After(deadline) {
			t.Fatal("the broker still takes connections with its listener's max.connections at 0")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every controller, follower or active, gets the change through.
	for id := int32(1); id <= 3; id++ {
		ctl := c.ControllerAddr(id)
		ok(t, "", "", "configs", "alter", "--bootstrap-controller", ctl, "--entity-type", "brokers", "--entity-default",
			"--add-config", "listener.name.plaintext.max.connections=0,log.retention.hours="+strconv.Itoa(int(100+id)))
	}
	if out := ok(t, "", "", "configs", "alter", "--bootstrap-controller", c.ControllerAddr(2), "--broker-defaults",
		"--delete-config", "listener.name.plaintext.max.connections"); strings.TrimSpace(out) != "Completed updating default config for brokers in the cluster." {
		t.Errorf("printed %q", out)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !answered() {
		if time.Now().After(deadline) {
			t.Fatal("the broker takes no connection after the limit was deleted through the controller")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := ok(t, bs, "", "configs", "describe", "--entity-type", "brokers", "--entity-default"); !strings.Contains(out, "log.retention.hours=103 ") ||
		strings.Contains(out, "max.connections") {
		t.Errorf("cluster defaults after the changes through the controllers:\n%s", out)
	}
	// describe through a controller: the dynamic configs of the metadata
	// log, a topic's too, with the synonyms a broker gives them.
	ctl := c.ControllerAddr(3)
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		out := ok(t, "", "", "configs", "describe", "--bootstrap-controller", ctl, "--broker-defaults")
		if out == "Default configs for brokers in the cluster are:\n  log.retention.hours=103 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=103}\n" {
			t.Logf("converged after %v", time.Since(start))
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("cluster defaults through a controller:\n%s", out)
		}
	}
	ok(t, bs, "", "topics", "create", "--topic", "via-controller")
	ok(t, "", "", "configs", "alter", "--bootstrap-controller", ctl, "--topic", "via-controller", "--add-config", "retention.ms=5000")
	// A follower controller's image may be a moment behind the write.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		out := ok(t, "", "", "configs", "describe", "--bootstrap-controller", ctl, "--topic", "via-controller")
		if strings.Contains(out, "Dynamic configs for topic via-controller are:\n  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=103, DEFAULT_CONFIG:log.retention.hours=168}\n") {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("a topic through a controller:\n%s", out)
		}
	}
	// Client quotas through the controllers: a default ip
	// connection_creation_rate of 0 keeps every new client connection out
	// of the brokers; the controllers' listeners, which ip quotas do not
	// limit, take it back.
	for id := int32(1); id <= 3; id++ {
		ok(t, "", "", "configs", "alter", "--bootstrap-controller", c.ControllerAddr(id), "--ip-defaults", "--add-config", "connection_creation_rate=0")
	}
	for deadline := time.Now().Add(10 * time.Second); answered(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the broker still answers new connections with a default ip connection_creation_rate of 0")
		}
	}
	if out := ok(t, "", "", "configs", "alter", "--bootstrap-controller", c.ControllerAddr(2), "--entity-type", "ips", "--entity-default",
		"--delete-config", "connection_creation_rate"); out != "Completed updating default config for ips in the cluster.\n" {
		t.Errorf("printed %q", out)
	}
	for deadline := time.Now().Add(10 * time.Second); !answered(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the broker answers no new connection after the ip quota was deleted through the controller")
		}
	}
	if out := ok(t, "", "", "configs", "describe", "--bootstrap-controller", ctl, "--entity-type", "brokers"); strings.Count(out, "Dynamic configs for broker ") != 3 ||
		!strings.Contains(out, "Default configs for brokers in the cluster are:") {
		t.Errorf("every broker through a controller:\n%s", out)
	}
	// --all through a controller, as kafka-configs.sh --bootstrap-controller
	// --describe --all: its own id lists its server.properties under the
	// dynamic values, as a broker does; a topic every config.
	// Node 1's configs asked through controller 3 are answered by node 1's
	// controller, as Kafka's admin client routes them.
	out := ok(t, "", "", "configs", "describe", "--bootstrap-controller", ctl, "--entity-type", "brokers", "--entity-name", "1", "--all")
	wantLines(t, "broker 1 --all through controller 3", out, "  node.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:node.id=1}\n")
	out = ok(t, "", "", "configs", "describe", "--bootstrap-controller", ctl, "--entity-type", "brokers", "--entity-name", "3", "--all")
	wantLines(t, "broker 3 --all through its controller", out,
		"All configs for broker 3 are:\n",
		"  node.id=3 sensitive=false synonyms={STATIC_BROKER_CONFIG:node.id=3}\n",
		"  log.retention.hours=103 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=103, DEFAULT_CONFIG:log.retention.hours=168}\n",
		"  authorizer.class.name= sensitive=false synonyms={DEFAULT_CONFIG:authorizer.class.name=}\n")
	out = ok(t, "", "", "configs", "describe", "--bootstrap-controller", ctl, "--topic", "via-controller", "--all")
	wantLines(t, "a topic --all through a controller", out,
		"  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=103, DEFAULT_CONFIG:log.retention.hours=168}\n",
		"  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}\n")

	// A node's log level through the controllers: its own controller
	// applies it, as Kafka's controllers do (KIP-919).
	for _, level := range []string{"WARN", "INFO"} {
		ok(t, "", "", "configs", "alter", "--bootstrap-controller", c.ControllerAddr(1), "--broker-logger", "2", "--add-config", "root="+level)
		out = ok(t, "", "", "configs", "describe", "--bootstrap-controller", ctl, "--broker-logger", "2")
		wantLines(t, "node 2's log level through controller 3", out, "  root="+level+" ")
	}

	for _, bad := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--entity-default", "--entity-type", "brokers", "--add-config", "listener.name.plaintext.max.connections=-1"}, "INVALID_CONFIG"},
		{[]string{"--broker-logger", "9", "--add-config", "root=DEBUG"}, "node 9 is no controller"},
		{[]string{"--broker-logger", "2", "--add-config", "root=LOUD"}, "INVALID_CONFIG"},
		{[]string{"--ip", "db.example", "--add-config", "connection_creation_rate=1"}, "INVALID_REQUEST"},
	} {
		r := keel(t, "", "", append([]string{"configs", "alter", "--bootstrap-controller", c.ControllerAddr(1)}, bad.args...)...)
		if r.exit == 0 || !strings.Contains(r.stderr, bad.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %q", bad.args, r.exit, r.stderr, bad.msg)
		}
	}
	for _, bad := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--broker", "4", "--all"}, "node 4 is no controller"},
		{[]string{"--entity-type", "brokers", "--all"}, "name the controller's own node"},
		{[]string{"--entity-type", "topics"}, "name the topic"},
		{[]string{"--topic", "no-such-topic"}, "UNKNOWN_TOPIC_OR_PARTITION"},
	} {
		r := keel(t, "", "", append([]string{"configs", "describe", "--bootstrap-controller", ctl}, bad.args...)...)
		if r.exit == 0 || !strings.Contains(r.stderr, bad.msg) {
			t.Errorf("describe %v: exit %d, stderr %q; want %q", bad.args, r.exit, r.stderr, bad.msg)
		}
	}
}

// kafka-configs.sh --describe --entity-type groups by a principal allowed
// the groups' configs but not DESCRIBE_CONFIGS on the cluster, which
// ListConfigResources needs: the groups ListGroups knows are described,
// where the command failed before.
func TestCLIConfigsGroupsWithoutClusterDescribeConfigs(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}},
		"authorizer.class.name="+broker.StandardAuthorizerClass, "allow.everyone.if.no.acl.found=true")
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ok(t, bs, "", "topics", "create", "--topic", "t")
	ok(t, bs, "", "consume", "--topic", "t", "--group", "app", "--from-beginning", "--timeout-ms", "500")
	ok(t, bs, "", "configs", "alter", "--group", "app", "--add-config", "consumer.session.timeout.ms=50000")
	// Everything on the cluster for every connection (the node's own
	// included: PLAINTEXT is User:ANONYMOUS), but DESCRIBE_CONFIGS.
	ok(t, bs, "", "acls", "add", "--allow-principal", "User:ANONYMOUS", "--operation", "All", "--cluster")
	ok(t, bs, "", "acls", "add", "--deny-principal", "User:ANONYMOUS", "--operation", "DescribeConfigs", "--cluster")
	want := "Dynamic configs for group app are:\n" +
		"  consumer.session.timeout.ms=50000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=50000}\n"
	eventually(t, "the deny ACL in force", func() bool {
		return keel(t, bs, "", "configs", "describe", "--broker", "1").exit != 0
	})
	if out := ok(t, bs, "", "configs", "describe", "--entity-type", "groups"); out != want {
		t.Errorf("describe every group printed %q, want %q", out, want)
	}
}
