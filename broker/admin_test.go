package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTopicsCreateListDescribeDelete(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)

	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "orders", "payments")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range created.Sorted() {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
		if r.ID == [16]byte{} || r.NumPartitions != 3 || r.ReplicationFactor != 1 {
			t.Fatalf("create %s: id %v, %d partitions, rf %d", r.Topic, r.ID, r.NumPartitions, r.ReplicationFactor)
		}
	}
	// Creating it again: TOPIC_ALREADY_EXISTS from the controller.
	again, err := adm.CreateTopic(ctx, 1, 1, nil, "orders")
	if !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v %v", err, again.Err)
	}

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := topics.Names(); !slices.Equal(got, []string{"orders", "payments"}) {
		t.Fatalf("topics %v", got)
	}
	td := topics["orders"]
	if td.ID != created["orders"].ID || len(td.Partitions) != 3 {
		t.Fatalf("orders: %+v", td)
	}
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader != testNodeID || p.LeaderEpoch < 0 || !slices.Equal(p.Replicas, []int32{testNodeID}) || !slices.Equal(p.ISR, []int32{testNodeID}) || len(p.OfflineReplicas) != 0 {
			t.Fatalf("partition %+v", p)
		}
	}
	// The log of every partition exists on this broker.
	for p := int32(0); p < 3; p++ {
		if c.broker.lookup(tp("orders", p)) == nil {
			t.Fatalf("orders-%d not hosted", p)
		}
	}

	// Unknown topics in a metadata request.
	md, err := adm.Metadata(ctx, "missing")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(md.Topics["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing topic: %v", md.Topics["missing"].Err)
	}

	// More partitions.
	cp, err := adm.CreatePartitions(ctx, 2, "payments")
	if err != nil || cp["payments"].Err != nil {
		t.Fatalf("create partitions: %v %v", err, cp["payments"].Err)
	}
	waitFor(t, "payments-4 hosted", 5*time.Second, func() bool { return c.broker.lookup(tp("payments", 4)) != nil })

	deleted, err := adm.DeleteTopics(ctx, "orders")
	if err != nil || deleted["orders"].Err != nil {
		t.Fatalf("delete: %v %v", err, deleted["orders"].Err)
	}
	if c.broker.lookup(tp("orders", 0)) != nil {
		t.Fatal("orders-0 still hosted after the delete was answered")
	}
	if _, ok := c.logs.Log(tp("orders", 0)); ok {
		t.Fatal("orders-0 log still open")
	}
	topics, err = c.admin().ListTopics(ctx) // a new client: no cached metadata
	if err != nil || !slices.Equal(topics.Names(), []string{"payments"}) {
		t.Fatalf("after delete: %v %v", err, topics.Names())
	}
}

func TestDescribeCluster(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != "keel-test-cluster" || md.Controller != testNodeID || len(md.Brokers) != 1 {
		t.Fatalf("metadata: %+v", md)
	}
	b := md.Brokers[0]
	if b.NodeID != testNodeID || b.Host != "127.0.0.1" || int(b.Port) != c.port {
		t.Fatalf("broker %+v, want 127.0.0.1:%d", b, c.port)
	}
	cl := c.client()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp := request[*kmsg.DescribeClusterResponse](t, cl, req)
	if resp.ErrorCode != 0 || resp.ClusterID != "keel-test-cluster" || resp.ControllerID != testNodeID ||
		len(resp.Brokers) != 1 || resp.Brokers[0].Port != int32(c.port) || resp.ClusterAuthorizedOperations != clusterAuthorizedOperations {
		t.Fatalf("describe cluster: %+v", resp)
	}
	// Controllers are described by controllers (KIP-919): an admin client
	// given a broker as a bootstrap controller learns it was the wrong one.
	for typ, want := range map[int8]int16{2: kerr.MismatchedEndpointType.Code, 3: kerr.UnsupportedEndpointType.Code} {
		req.EndpointType = typ
		resp = request[*kmsg.DescribeClusterResponse](t, cl, req)
		if resp.ErrorCode != want || len(resp.Brokers) != 0 {
			t.Errorf("endpoint type %d: %v, %d brokers; want %v", typ, kerr.ErrorForCode(resp.ErrorCode), len(resp.Brokers), kerr.ErrorForCode(want))
		}
	}
}

// The controller a broker names to clients (Metadata and DescribeCluster)
// is the broker itself while it is live: a client's admin requests then go
// to a broker it has just reached, never to one that died and is not
// fenced yet (here broker 2, registered at a port nobody listens on, which
// a random choice would name half of the time). Only a broker in a
// controlled shutdown or fenced names another live one.
func TestControllerNamedToClientsIsTheAnsweringBroker(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	rc := c.dialRaw(t)
	controllers := func() (fromMetadata, fromDescribeCluster int32) {
		mr, dr := kmsg.NewPtrMetadataRequest(), kmsg.NewPtrDescribeClusterRequest()
		mr.Version, dr.Version = 12, 1
		md := roundTrip[*kmsg.MetadataResponse](rc, mr)
		dc := roundTrip[*kmsg.DescribeClusterResponse](rc, dr)
		return md.ControllerID, dc.ControllerID
	}
	for range 50 {
		if md, dc := controllers(); md != testNodeID || dc != testNodeID {
			t.Fatalf("controller named: Metadata %d, DescribeCluster %d; want this broker, %d", md, dc, testNodeID)
		}
	}
	// Through a client that knows broker 2: every admin request reaches
	// this broker at once, with no dial to the dead one to back off from.
	ctx := testCtx(t)
	start := time.Now()
	for i := range 5 {
		if resp, err := c.admin().CreateTopic(ctx, 1, 1, nil, fmt.Sprintf("t%d", i)); err != nil || resp.Err != nil {
			t.Fatalf("create topic: %v %v", err, resp.Err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("5 CreateTopics took %v: a client retried against broker 2", d)
	}

	self, _ := c.meta.Image().Broker(testNodeID)
	c.meta.commit(&metadata.BrokerRegistrationChangeRecord{BrokerID: testNodeID, BrokerEpoch: self.Epoch, InControlledShutdown: 1})
	if md, dc := controllers(); md != 2 || dc != 2 {
		t.Fatalf("in controlled shutdown: controller named Metadata %d, DescribeCluster %d; want broker 2", md, dc)
	}
	c.meta.commit(&metadata.FenceBrokerRecord{ID: testNodeID, Epoch: self.Epoch})
	if md, dc := controllers(); md != 2 || dc != 2 {
		t.Fatalf("fenced: controller named Metadata %d, DescribeCluster %d; want the live broker 2", md, dc)
	}
	two, _ := c.meta.Image().Broker(2)
	c.meta.commit(&metadata.FenceBrokerRecord{ID: 2, Epoch: two.Epoch})
	if md, dc := controllers(); md != -1 || dc != -1 {
		t.Fatalf("no live broker: controller named Metadata %d, DescribeCluster %d; want -1", md, dc)
	}
}

func TestApiVersionsAdvertisesWhatIsServed(t *testing.T) {
	c := newTestCluster(t)
	cl := c.client()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	req.ClientSoftwareName, req.ClientSoftwareVersion = "keel-test", "1"
	resp := request[*kmsg.ApiVersionsResponse](t, cl, req)
	if resp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		lo, hi, ok := c.broker.SupportedVersions("PLAINTEXT", k.ApiKey)
		if !ok || hi != k.MaxVersion || (k.ApiKey != 0 && lo != k.MinVersion) {
			t.Errorf("key %d advertised %d–%d, served %d–%d (%v)", k.ApiKey, k.MinVersion, k.MaxVersion, lo, hi, ok)
		}
		if max := kmsg.RequestForKey(k.ApiKey).MaxVersion(); k.MaxVersion > max {
			t.Errorf("key %d advertised up to %d, kmsg knows %d", k.ApiKey, k.MaxVersion, max)
		}
	}
	if got[0] != [2]int16{0, 13} {
		t.Errorf("produce advertised %v, want 0–13 (KAFKA-18659)", got[0])
	}
	if lo, _, _ := c.broker.SupportedVersions("PLAINTEXT", 0); lo != 3 {
		t.Errorf("produce served from v%d, want v3", lo)
	}
	if got[22] != [2]int16{0, 5} {
		t.Errorf("InitProducerId advertised %v", got[22])
	}

	// v5 (KIP-1242): a client that reached the wrong cluster is told to
	// rebootstrap.
	req.Version = 5
	req.ClusterID, req.NodeID = kmsg.StringPtr("another-cluster"), testNodeID
	resp = request[*kmsg.ApiVersionsResponse](t, cl, req)
	if resp.ErrorCode != kerr.RebootstrapRequired.Code {
		t.Fatalf("wrong cluster: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	req.ClusterID = kmsg.StringPtr("keel-test-cluster")
	resp = request[*kmsg.ApiVersionsResponse](t, cl, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("right cluster: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestEveryServedVersionAnswers sends an empty (default) request of every
// API at every version this broker serves and expects an answer of that
// version on a connection that stays open; Produce v0–v2, advertised but
// refused (KAFKA-18659), close the connection.
func TestEveryServedVersionAnswers(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("t", 1, nil)
	rc := c.dialRaw(t)
	for key := range apiTable {
		a := apiTable[key]
		if !a.served {
			continue
		}
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(int16(key))
			req.SetVersion(v)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = 1
			}
			if d, ok := req.(*kmsg.DescribeClusterRequest); ok && v == 0 {
				d.EndpointType = 1
			}
			resp := rc.receive(req, rc.send(req))
			if resp.GetVersion() != v || resp.Key() != int16(key) {
				t.Fatalf("%s v%d: answered %s v%d", kmsg.NameForKey(int16(key)), v, kmsg.NameForKey(resp.Key()), resp.GetVersion())
			}
		}
	}
	// Produce below v3 closes the connection, as Kafka 4 does.
	old := c.dialRaw(t)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 2, 1
	old.send(req)
	_ = old.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := old.conn.Read(make([]byte, 1)); err == nil {
		t.Fatalf("produce v2 answered (%d bytes); want the connection closed", n)
	}
}

// TestAclApisWithoutAnAuthorizer: kafka-acls.sh and the Admin clients get
// what a Kafka broker without authorizer.class.name answers,
// SECURITY_DISABLED, for listing, creating and deleting ACLs.
func TestAclApisWithoutAnAuthorizer(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)
	b := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	described, err := adm.DescribeACLs(ctx, b)
	if err != nil || len(described) != 1 || !errors.Is(described[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeACLs: %v %+v, want SECURITY_DISABLED", err, described)
	}
	created, err := adm.CreateACLs(ctx, b)
	if err != nil || len(created) != 1 || !errors.Is(created[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateACLs: %v %+v, want SECURITY_DISABLED", err, created)
	}
	deleted, err := adm.DeleteACLs(ctx, b)
	if err != nil || len(deleted) != 1 || !errors.Is(deleted[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DeleteACLs: %v %+v, want SECURITY_DISABLED", err, deleted)
	}
}
