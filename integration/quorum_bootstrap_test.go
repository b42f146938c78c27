package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
)

// kafka4ServerProperties is Kafka 4's shipped config/server.properties
// (comments dropped): a combined node whose quorum is a KIP-853 dynamic
// one, found through controller.quorum.bootstrap.servers. The test swaps
// in free ports and a temporary log dir.
const kafka4ServerProperties = `process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`

// runKeel starts the binary with args, its output in a file; the process is
// killed when the test ends. It returns the command, the output path, and
// a channel closed once the process has exited (cmd.ProcessState is set
// then).
func runKeel(t *testing.T, args ...string) (*exec.Cmd, string, <-chan struct{}) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "keel.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary(t), args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, logPath, done
}

// describeQuorum asks addr (a controller or a broker) for the metadata
// quorum.
func describeQuorum(t *testing.T, addr string) *kmsg.DescribeQuorumResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := broker.Request(ctx, addr, broker.NewDescribeQuorumRequest())
	if err != nil {
		t.Fatal(err)
	}
	return r.(*kmsg.DescribeQuorumResponse)
}

// Kafka 4's own server.properties starts a single node unchanged, without
// the kafka-storage.sh format --standalone step of Kafka's quickstart:
// its bootstrap server is its own controller listener. No key of it draws
// an "unknown key" warning, and kgo produces and consumes through it.
func TestKafka4ServerPropertiesStartsUnchanged(t *testing.T) {
	client, controller := FreePort(t), FreePort(t)
	dir := t.TempDir()
	props := strings.NewReplacer(":9092", fmt.Sprintf(":%d", client), ":9093", fmt.Sprintf(":%d", controller),
		"/tmp/kraft-combined-logs", filepath.Join(dir, "logs")).Replace(kafka4ServerProperties)
	path := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	_, logPath, _ := runKeel(t, "server", "--config", path)
	addr := fmt.Sprintf("localhost:%d", client)
	deadline := time.Now().Add(30 * time.Second)
	for err := probeBroker(addr, 1); err != nil; err = probeBroker(addr, 1) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("not serving after 30 s: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("quickstart-events"),
		kgo.ConsumeTopics("quickstart-events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "quickstart-events"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	const n = 1000
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}

	q := describeQuorum(t, fmt.Sprintf("localhost:%d", controller))
	if p := q.Topics[0].Partitions[0]; p.LeaderID != 1 || len(p.CurrentVoters) != 1 {
		t.Fatalf("quorum: leader %d, voters %+v", p.LeaderID, p.CurrentVoters)
	}
	log, _ := os.ReadFile(logPath)
	if strings.Contains(string(log), "unknown config key") {
		t.Errorf("Kafka 4's server.properties drew unknown-key warnings:\n%s", log)
	}
}

// A cluster configured as Kafka 4 configures one: every node has
// controller.quorum.bootstrap.servers and no controller.quorum.voters, each
// controller is formatted with --initial-controllers, and the broker-only
// node learns the voters from a controller. The quorum is the three
// formatted voters, replicated produce and consume work, and a restarted
// controller, a restarted broker-only node and a whole cluster restarted
// at once find the quorum again.
func TestDynamicQuorumCluster(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{
		{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"},
		{ID: 3, Roles: "controller"}, {ID: 4, Roles: "broker"},
	}, ProcessOptions{DynamicQuorum: true})
	if !strings.Contains(c.Log(4), "learned the metadata quorum's voters") {
		t.Errorf("broker 4 did not log the voters it learned:\n%s", c.Log(4))
	}
	checkQuorum := func() {
		t.Helper()
		p := describeQuorum(t, c.Node(3).AdvertisedController).Topics[0].Partitions[0]
		var voters, observers []int32
		for _, v := range p.CurrentVoters {
			voters = append(voters, v.ReplicaID)
		}
		for _, o := range p.Observers {
			observers = append(observers, o.ReplicaID)
		}
		if fmt.Sprint(voters) != "[1 2 3]" || fmt.Sprint(observers) != "[4]" {
			t.Fatalf("voters %v observers %v, want [1 2 3] and [4]", voters, observers)
		}
	}
	checkQuorum()
	// A KIP-853 quorum is kraft.version 1, as brokers and controllers
	// report it (a static one is 0: TestCLIFeatures).
	for addr, what := range map[string]string{c.Node(4).AdvertisedPlaintext: "broker 4", c.Node(3).AdvertisedController: "controller 3"} {
		if got := finalizedFeatures(t, addr); got[metadata.KRaftVersionFeature] != 1 || got[metadata.MetadataVersionFeature] != metadata.LatestMetadataVersion {
			t.Errorf("%s's finalized features: %v", what, got)
		}
	}

	const topic = "dynamic-quorum"
	cl := procClient(t, c, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	acks := newAckLog()
	produceAcked(ctx, cl, acks, "first", 0, 2000)

	c.Kill(3) // a controller: it restarts from its formatted voters
	c.Start(3)
	c.Stop(4) // the broker-only node asks a controller again
	c.Start(4)
	c.WaitReady(4)
	if got := strings.Count(c.Log(4), "learned the metadata quorum's voters"); got != 2 {
		t.Errorf("broker 4 learned the voters %d times over two starts", got)
	}
	produceAcked(ctx, cl, acks, "second", 2000, 2000)

	// Power lost and restored: every node starts at once, so the broker
	// asks for the voters while the controllers are still electing.
	for id := int32(1); id <= 4; id++ {
		c.Kill(id)
	}
	for id := int32(1); id <= 4; id++ {
		c.Start(id)
	}
	for id := int32(1); id <= 4; id++ {
		c.WaitReady(id)
	}
	produceAcked(ctx, cl, acks, "third", 4000, 2000)
	if n, f := acks.count(), acks.failed.Load(); n != 6000 || f != 0 {
		t.Fatalf("%d records acknowledged, %d failed; want 6000", n, f)
	}
	verifyAcked(t, c, topic, acks)
	checkQuorum()
}

// finalizedFeatures are the feature levels addr reports in ApiVersions.
func finalizedFeatures(t *testing.T, addr string) map[string]int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := broker.Request(ctx, addr, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatalf("api versions at %s: %v", addr, err)
	}
	out := map[string]int16{}
	for _, f := range resp.(*kmsg.ApiVersionsResponse).FinalizedFeatures {
		out[f.Name] = f.MaxVersionLevel
	}
	return out
}

// Before Keel knew controller.quorum.bootstrap.servers, controllers
// configured with it and not with voters each took themselves as the only
// voter: three quorums under one cluster id. Now format asks for the
// voters, and a controller not formatted with them refuses to start.
func TestDynamicQuorumControllersNeedTheirVoters(t *testing.T) {
	bin := Binary(t)
	dir := t.TempDir()
	ports := []int{FreePort(t), FreePort(t), FreePort(t)}
	var bootstrap []string
	for _, p := range ports {
		bootstrap = append(bootstrap, fmt.Sprintf("127.0.0.1:%d", p))
	}
	path := filepath.Join(dir, "n1.properties")
	props := fmt.Sprintf("process.roles=controller\nnode.id=1\ncontroller.quorum.bootstrap.servers=%s\n"+
		"listeners=CONTROLLER://127.0.0.1:%d\ncontroller.listener.names=CONTROLLER\nlog.dirs=%s\n",
		strings.Join(bootstrap, ","), ports[0], filepath.Join(dir, "n1"))
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	id := raftlog.NewClusterID()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give --initial-controllers"},
		{[]string{"--no-initial-controllers", "--standalone"}, "only one of"},
		{[]string{"--standalone", "--initial-controllers", "1@" + bootstrap[0]}, "only one of"},
		{[]string{"--initial-controllers", "2@" + bootstrap[1] + ",3@" + bootstrap[2]}, "does not name this controller"},
		{[]string{"--initial-controllers", "1@" + bootstrap[0] + ":nonsense"}, "invalid controller.quorum.voters"},
	} {
		out, err := exec.Command(bin, append([]string{"format", "--cluster-id", id, "--config", path}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("format %v: %v, want an error with %q:\n%s", tc.args, err, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "n1")); !os.IsNotExist(err) {
		t.Errorf("a refused format wrote %s: %v", filepath.Join(dir, "n1"), err)
	}

	cmd, logPath, done := runKeel(t, "server", "--config", path)
	waitForExit(t, done, 30*time.Second)
	log, _ := os.ReadFile(logPath)
	if cmd.ProcessState.Success() || !strings.Contains(string(log), "was not formatted with the quorum's voters") {
		t.Fatalf("keel server on an unformatted dynamic-quorum controller: %v\n%s", cmd.ProcessState, log)
	}

	// Formatted with the voters, with Kafka's directory ids, it starts.
	var initial []string
	for i, b := range bootstrap {
		initial = append(initial, fmt.Sprintf("%d@%s:%s", i+1, b, raftlog.NewClusterID()))
	}
	out, err := exec.Command(bin, "format", "--cluster-id", id, "--config", path, "--initial-controllers", strings.Join(initial, ",")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "initial voters 1@"+bootstrap[0]+",2@"+bootstrap[1]+",3@"+bootstrap[2]) {
		t.Fatalf("format: %v\n%s", err, out)
	}
	voters, err := raftlog.ReadInitialVoters(filepath.Join(dir, "n1"))
	if err != nil || len(voters) != 3 || voters[1] != bootstrap[0] {
		t.Fatalf("initial voters %v: %v", voters, err)
	}
}

// waitForExit waits for a process started by runKeel to exit.
func waitForExit(t *testing.T, done <-chan struct{}, timeout time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("still running after %v", timeout)
	}
}

// A broker-only node whose bootstrap controllers never answer gives up
// after initial.broker.registration.timeout.ms, as Kafka's does, naming
// the servers it tried.
func TestBrokerGivesUpWithoutBootstrapControllers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.properties")
	dead := FreePort(t) // nothing listens there
	props := fmt.Sprintf("process.roles=broker\nnode.id=7\ncontroller.quorum.bootstrap.servers=127.0.0.1:%d\n"+
		"listeners=PLAINTEXT://127.0.0.1:%d\ncontroller.listener.names=CONTROLLER\nlog.dirs=%s\n"+
		"initial.broker.registration.timeout.ms=1500\n", dead, FreePort(t), filepath.Join(dir, "data"))
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd, logPath, done := runKeel(t, "server", "--config", path)
	waitForExit(t, done, 30*time.Second)
	log, _ := os.ReadFile(logPath)
	if cmd.ProcessState.Success() || !strings.Contains(string(log), "initial.broker.registration.timeout.ms") ||
		!strings.Contains(string(log), fmt.Sprintf("127.0.0.1:%d", dead)) {
		t.Fatalf("exit %v after %v:\n%s", cmd.ProcessState, time.Since(start), log)
	}
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Fatalf("gave up after %v, before initial.broker.registration.timeout.ms", el)
	}
}

// A controller that is not the leader forwards DescribeQuorum to the
// leader. With no leader to forward to (here: a quorum that lost two of
// three voters), it answers itself within about a second, as a Kafka
// follower controller does: NOT_LEADER_OR_FOLLOWER, and the voters'
// endpoints, which is what a broker learning the voters needs. It used to
// wait for a leader as long as the client waited.
func TestLeaderlessControllerAnswersDescribeQuorum(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "controller"}, {ID: 2, Roles: "controller"}, {ID: 3, Roles: "controller"}})
	c.WaitReady(30 * time.Second)
	var leader int32
	deadline := time.Now().Add(30 * time.Second)
	for p := describeQuorum(t, c.ControllerAddr(1)).Topics[0].Partitions[0]; ; p = describeQuorum(t, c.ControllerAddr(1)).Topics[0].Partitions[0] {
		if p.ErrorCode == 0 && p.LeaderID > 0 {
			leader = p.LeaderID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader elected: %+v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	survivor := leader%3 + 1
	for id := int32(1); id <= 3; id++ {
		if id != survivor {
			c.Kill(id)
		}
	}
	start := time.Now()
	resp := describeQuorum(t, c.ControllerAddr(survivor))
	took := time.Since(start)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || len(resp.Nodes) != 3 {
		t.Fatalf("after %v: partition error %d, %d nodes", took, p.ErrorCode, len(resp.Nodes))
	}
	if took > 5*time.Second {
		t.Fatalf("answered after %v", took)
	}
}

// A controller-only node answers DescribeConfigs for its own id as a
// broker does (KIP-919, Kafka's ConfigHelper on controllers): every config
// of its server.properties with Kafka's defaults behind them. Another
// broker's id gets the dynamic configs the metadata log holds (here none),
// a name that is no id INVALID_REQUEST.
func TestControllerOnlyNodeDescribesItsConfigs(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "controller"}})
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms = 4, true
	for _, name := range []string{"1", "2", "one"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		req.Resources = append(req.Resources, r)
	}
	resp, err := broker.Request(ctx, c.ControllerAddr(1), req)
	if err != nil {
		t.Fatal(err)
	}
	rs := resp.(*kmsg.DescribeConfigsResponse).Resources
	if len(rs) != 3 {
		t.Fatalf("%d resources answered", len(rs))
	}
	own := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, cfg := range rs[0].Configs {
		own[cfg.Name] = cfg
	}
	for name, want := range map[string]struct {
		value  string
		source kmsg.ConfigSource
	}{
		"node.id":             {"1", kmsg.ConfigSourceStaticBrokerConfig},
		"process.roles":       {"controller", kmsg.ConfigSourceStaticBrokerConfig},
		"log.retention.hours": {"168", kmsg.ConfigSourceDefaultConfig},
		"ssl.client.auth":     {"none", kmsg.ConfigSourceDefaultConfig},
	} {
		if cfg, ok := own[name]; !ok || cfg.Value == nil || *cfg.Value != want.value || cfg.Source != want.source {
			t.Errorf("%s: described %v, %+v; want %s from %v", name, ok, cfg, want.value, want.source)
		}
	}
	if rs[0].ErrorCode != 0 || rs[1].ErrorCode != 0 || len(rs[1].Configs) != 0 || rs[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("errors %d %d %d, %d configs of broker 2", rs[0].ErrorCode, rs[1].ErrorCode, rs[2].ErrorCode, len(rs[1].Configs))
	}
}

// An admin client given bootstrap.controllers (kafka-metadata-quorum.sh
// and kafka-configs.sh --bootstrap-controller, KIP-919) learns the
// controllers from DescribeCluster with EndpointType 2: the voters at
// their controller endpoints, the active one among them, and the type it
// asked for echoed (Kafka's admin refuses a response of another type).
func TestControllerDescribesTheControllers(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "controller"}})
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	describe := func(version int16, endpointType int8) *kmsg.DescribeClusterResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = version, endpointType
		resp, err := broker.Request(ctx, c.ControllerAddr(1), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.DescribeClusterResponse)
	}
	resp := describe(1, 2)
	for deadline := time.Now().Add(10 * time.Second); resp.ControllerID == -1 && time.Now().Before(deadline); resp = describe(1, 2) {
		time.Sleep(20 * time.Millisecond) // no leader elected yet
	}
	host, port, _ := net.SplitHostPort(c.ControllerAddr(1))
	if resp.ErrorCode != 0 || resp.EndpointType != 2 || resp.ControllerID != 1 || resp.ClusterID == "" || len(resp.Brokers) != 1 ||
		resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != host || strconv.Itoa(int(resp.Brokers[0].Port)) != port {
		t.Errorf("controllers: %+v, want node 1 at %s", resp, c.ControllerAddr(1))
	}
	if resp := describe(1, 3); resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Errorf("endpoint type 3: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
