package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker"
)

// TestACLs: Kafka's StandardAuthorizer through the real binary, two
// brokers, clients authenticated with SCRAM. The nodes talk PLAINTEXT
// among themselves and are super users as User:ANONYMOUS, as in Kafka's
// documentation; admin is a super user; alice gets ACLs from kadm (the
// Admin API, as kafka-acls.sh) and from keel acls.
//
//   - alice produces to and consumes from the topic she may, in the group
//     she may (a prefixed ACL), with an idempotent producer (WRITE on a
//     topic is enough, KIP-679);
//   - she is refused, with the error Kafka's clients expect, another
//     topic (TOPIC_AUTHORIZATION_FAILED), another group
//     (GROUP_AUTHORIZATION_FAILED), creating topics, reading ACLs
//     (CLUSTER_AUTHORIZATION_FAILED); a Metadata request for every topic
//     does not show her the others;
//   - a removed ACL stops her at once, on both brokers; a DENY beats an
//     ALLOW; the ACLs survive a whole-cluster restart.
func TestACLs(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{
			SSL:  certs.brokerSSL(),
			SASL: []string{"sasl.enabled.mechanisms=SCRAM-SHA-256"},
			Overrides: []string{
				"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
				"super.users=User:ANONYMOUS;User:admin",
			},
			FormatArgs: []string{
				"--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
				"--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
			},
		})
	saslp := fmt.Sprintf("127.0.0.1:%d", c.Node(1).SASLPlaintextPort)
	saslp2 := fmt.Sprintf("127.0.0.1:%d", c.Node(2).SASLPlaintextPort)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	as := func(user, seed string, opts ...kgo.Opt) *kgo.Client {
		return newSASLClient(t, seed, nil, scramMech{"SCRAM-SHA-256", user, user + "-secret"}.kgo(), opts...)
	}
	admin := kadm.NewClient(as("admin", saslp))
	for _, topic := range []string{"orders", "payroll"} {
		if resp, err := admin.CreateTopic(ctx, 2, 2, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("admin creates %s: %v %v", topic, err, resp.Err)
		}
	}

	// alice: write and read orders, and the app- groups.
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").
		Topics("orders").Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || res[0].Err != nil {
		t.Fatalf("create alice's topic ACLs: %v %+v", err, res)
	}
	keel := func(args ...string) string { t.Helper(); return c.Keel(t, ctx, args...) }
	// keel acls, through the PLAINTEXT listener as User:ANONYMOUS (a
	// super user here).
	plain := c.Node(1).PlaintextAddr()
	if out := keel("acls", "--bootstrap-server", plain, "--add", "--allow-principal", "User:alice", "--operation", "Read",
		"--group", "app-", "--resource-pattern-type", "prefixed"); !strings.Contains(out, "Added ACL") {
		t.Fatalf("keel acls --add:\n%s", out)
	}
	// The broker that answers may apply the ACL a moment after the one
	// that forwarded it.
	waitFor(t, 10*time.Second, "keel acls list to show alice's ACLs", func() bool {
		out := keel("acls", "list", "--bootstrap-server", plain)
		return strings.Contains(out, "name=app-, patternType=PREFIXED") &&
			strings.Contains(out, "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)")
	})

	// Each broker answers from its own metadata image: wait until both
	// have the four ACLs. So does the controller, to an admin client that
	// comes with --bootstrap-controller (here as User:ANONYMOUS on its
	// PLAINTEXT listener, a super user).
	adminKgo := as("admin", saslp)
	controller := fmt.Sprintf("127.0.0.1:%d", c.Node(1).ControllerPort)
	waitACLs := func(n int) {
		t.Helper()
		for _, at := range []string{"broker 1", "broker 2", "controller 1"} {
			waitFor(t, 10*time.Second, fmt.Sprintf("%s to have %d ACLs", at, n), func() bool {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.Version, req.ResourceType, req.ResourcePatternType = 3, kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				var resp kmsg.Response
				var err error
				switch at {
				case "broker 1":
					resp, err = adminKgo.Broker(1).Request(ctx, req)
				case "broker 2":
					resp, err = adminKgo.Broker(2).Request(ctx, req)
				default:
					resp, err = broker.Request(ctx, controller, req)
				}
				if err != nil {
					return false
				}
				got := 0
				for _, r := range resp.(*kmsg.DescribeACLsResponse).Resources {
					got += len(r.ACLs)
				}
				return got == n
			})
		}
	}
	waitACLs(4)

	// alice produces (idempotently) to orders and consumes it in app-1,
	// on both brokers.
	p := as("alice", saslp2, kgo.DefaultProduceTopic("orders"))
	const n = 500
	for i := range n {
		p.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("alice produces to orders: %v", err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := as("alice", saslp, kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("app-1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("alice consumes orders in app-1: %v", err)
		}
		seen += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits in app-1: %v", err)
	}

	// A transaction over both brokers' partitions: the leader that is not
	// the coordinator verifies it with AddPartitionsToTxn v5 over the
	// inter-broker listener (KIP-890), which the authorizer lets through as
	// a broker's request (CLUSTER_ACTION, User:ANONYMOUS a super user).
	tx := as("admin", saslp, kgo.TransactionalID("acl-tx"), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for part := range int32(2) {
		if err := tx.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("tx")}).FirstErr(); err != nil {
			t.Fatalf("transactional produce to orders-%d: %v", part, err)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit a transaction over both brokers: %v", err)
	}

	// Refused, with the codes clients know.
	alice := kadm.NewClient(as("alice", saslp))
	if r := as("alice", saslp, kgo.DefaultProduceTopic("payroll"), kgo.RecordRetries(1)).ProduceSync(ctx, &kgo.Record{Value: []byte("x")}); !errors.Is(r.FirstErr(), kerr.TopicAuthorizationFailed) {
		t.Errorf("alice produces to payroll: %v, want TOPIC_AUTHORIZATION_FAILED", r.FirstErr())
	}
	if resp, err := alice.CreateTopic(ctx, 1, 1, nil, "alices"); err == nil && !errors.Is(resp.Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice creates a topic: %v", resp.Err)
	}
	if res, err := alice.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); !errors.Is(err, kerr.ClusterAuthorizationFailed) && (len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Errorf("alice describes ACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
	other := as("alice", saslp, kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("billing"))
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	if err := other.PollFetches(pctx).Err(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("alice joins billing: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	pcancel()
	md, err := alice.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := md.Topics.Names(); len(names) != 1 || names[0] != "orders" {
		t.Errorf("alice sees topics %v, want only orders", names)
	}
	if md, err := alice.Metadata(ctx, "payroll"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(md.Topics["payroll"].Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice asks for payroll: %v %v", err, md.Topics["payroll"].Err)
	}
	waitFor(t, 10*time.Second, "node 1 to log a denial", func() bool { return strings.Contains(c.Log(1), "authorization denied") })

	// librdkafka as alice: orders works, payroll is refused with
	// TOPIC_AUTHORIZATION_FAILED in the delivery report.
	t.Run("librdkafka", func(t *testing.T) {
		python := pythonWith(t, "confluent_kafka", "python3-confluent-kafka")
		script := writePEM(t, t.TempDir(), "acls.py", []byte(librdkafkaACLScript))
		out, err := exec.CommandContext(ctx, python, script, saslp).CombinedOutput()
		t.Logf("librdkafka:\n%s", out)
		if err != nil {
			t.Fatalf("librdkafka as alice: %v", err)
		}
	})

	// A DENY beats her ALLOW; removing it gives the topic back. (The
	// producer is not idempotent: with WRITE denied on her only topic,
	// InitProducerId is refused first, CLUSTER_AUTHORIZATION_FAILED, as in
	// Kafka.)
	deny := kadm.NewACLs().Deny("User:alice").DenyHosts("*").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := admin.CreateACLs(ctx, deny); err != nil || res[0].Err != nil {
		t.Fatalf("deny: %v %+v", err, res)
	}
	produceOrders := func(seed string) error {
		return as("alice", seed, kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1), kgo.DisableIdempotentWrite()).ProduceSync(ctx, &kgo.Record{Value: []byte("y")}).FirstErr()
	}
	waitACLs(5)
	for _, seed := range []string{saslp, saslp2} {
		if err := produceOrders(seed); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("alice produces under a DENY through %s: %v", seed, err)
		}
	}
	if _, err := admin.DeleteACLs(ctx, deny); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "alice to write again once the DENY is gone", func() bool { return produceOrders(saslp2) == nil })

	// The ACLs survive a restart of the whole cluster.
	c.Stop(2)
	c.Restart(1)
	c.Start(2)
	waitFor(t, 60*time.Second, "alice to produce to orders after the restart", func() bool { return produceOrders(saslp) == nil })
	if err := as("alice", saslp, kgo.DefaultProduceTopic("payroll"), kgo.RecordRetries(1)).ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("after the restart, alice produces to payroll: %v", err)
	}
	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:alice").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described[0].Described) != 4 {
		t.Fatalf("alice's ACLs after the restart: %v %+v", err, described)
	}
}

// librdkafkaACLScript produces to orders and consumes it in app-rdk as
// alice, and checks a produce to payroll fails with
// TOPIC_AUTHORIZATION_FAILED.
const librdkafkaACLScript = `
import sys, time
from confluent_kafka import Producer, Consumer, KafkaError

conf = {"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice", "sasl.password": "alice-secret"}
results = {}
def report(err, msg):
    results.setdefault(msg.topic(), []).append(err)
p = Producer(dict(conf, **{"message.timeout.ms": 10000}))
for i in range(100):
    p.produce("orders", ("rdk-%d" % i).encode(), on_delivery=report)
p.produce("payroll", b"secret", on_delivery=report)
p.flush(30)
assert all(e is None for e in results.get("orders", [None])) and len(results["orders"]) == 100, results.get("orders")
err = results["payroll"][0]
assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
print("payroll refused:", err)
c = Consumer(dict(conf, **{"group.id": "app-rdk", "auto.offset.reset": "earliest"}))
c.subscribe(["orders"])
seen, deadline = 0, time.time() + 60
while seen < 100 and time.time() < deadline:
    m = c.poll(1)
    if m is None:
        continue
    assert m.error() is None, m.error()
    seen += 1
c.close()
assert seen >= 100, "consumed %d" % seen
print("ok: librdkafka produced and consumed orders as alice")
`

// A controller without an authorizer answers CreateAcls and DeleteAcls
// SECURITY_DISABLED, as Kafka's does, rather than storing ACLs no node of
// it enforces; DescribeAcls too.
func TestACLsAtAControllerWithoutAnAuthorizer(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	bc := dialBad(t, c.ControllerAddr(1))
	create := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:a", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, cr)
	resp := kmsg.NewPtrCreateACLsResponse()
	bc.read(resp, 3, bc.send(create, 3))
	if len(resp.Results) != 1 || resp.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("CreateAcls at the controller: %+v", resp.Results)
	}
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dresp := kmsg.NewPtrDescribeACLsResponse()
	bc.read(dresp, 3, bc.send(describe, 3))
	if dresp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls at the controller: %v", kerr.ErrorForCode(dresp.ErrorCode))
	}
}
