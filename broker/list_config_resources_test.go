package broker

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// TestListConfigResources lists config resources through kadm as Kafka
// 4.1's admin client does (kafka-configs.sh --describe of every group):
// the groups with dynamic configs, the brokers with an endpoint on the
// request's listener (as brokers and as broker loggers), every topic; v0
// (ListClientMetricsResources) lists client metrics subscriptions only,
// and an unknown type fails the request.
func TestListConfigResources(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("b-topic", 1, nil)
	c.createTopic("a-topic", 1, nil)
	str := kmsg.StringPtr
	group := func(name, key string, value *string) *metadata.ConfigRecord {
		return &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceGroup, ResourceName: name, Name: key, Value: value}
	}
	c.meta.commit(
		group("orders-app", "consumer.session.timeout.ms", str("50000")),
		group("billing", "consumer.heartbeat.interval.ms", str("6000")),
		group("gone", "consumer.heartbeat.interval.ms", str("6000")),
		// A broker only on another listener is not listed, as in Kafka.
		&metadata.RegisterBrokerRecord{BrokerID: 7, BrokerEpoch: 1, Endpoints: []metadata.Endpoint{{Name: "INTERNAL", Host: "127.0.0.1", Port: 1}}},
	)
	c.meta.commit(group("gone", "consumer.heartbeat.interval.ms", nil))

	ctx := testCtx(t)
	adm := c.admin()
	type res struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	list := func(types ...kmsg.ConfigResourceType) []res {
		t.Helper()
		listed, err := adm.ListConfigResources(ctx, types...)
		if err == nil {
			err = listed.Err
		}
		if err != nil {
			t.Fatalf("list %v: %v", types, err)
		}
		var out []res
		for _, r := range listed.Resources {
			out = append(out, res{r.Type, r.Name})
		}
		return out
	}
	groups := []res{{kadm.ConfigResourceGroupConfig, "billing"}, {kadm.ConfigResourceGroupConfig, "orders-app"}}
	topics := []res{{kadm.ConfigResourceTopic, "a-topic"}, {kadm.ConfigResourceTopic, "b-topic"}}
	node := strconv.Itoa(testNodeID)
	all := slices.Concat(groups, []res{{kadm.ConfigResourceBrokerLogger, node}, {kadm.ConfigResourceBroker, node}}, topics)
	if got := list(); !reflect.DeepEqual(got, all) {
		t.Errorf("every type:\n got  %v\n want %v", got, all)
	}
	if got := list(kadm.ConfigResourceGroupConfig); !reflect.DeepEqual(got, groups) {
		t.Errorf("groups: %v, want %v", got, groups)
	}
	// The order is Kafka's, whatever the request's; a type named twice is
	// listed once.
	want := slices.Concat(groups, topics)
	if got := list(kadm.ConfigResourceTopic, kadm.ConfigResourceGroupConfig, kadm.ConfigResourceTopic); !reflect.DeepEqual(got, want) {
		t.Errorf("topics and groups: %v, want %v", got, want)
	}
	if got := list(kmsg.ConfigResourceTypeClientMetrics); len(got) != 0 {
		t.Errorf("client metrics: %v, want none", got)
	}

	rc := c.dialRaw(t)
	v0 := kmsg.NewPtrListConfigResourcesRequest()
	v0.Version = 0
	if resp := roundTrip[*kmsg.ListConfigResourcesResponse](rc, v0); resp.ErrorCode != 0 || len(resp.ConfigResources) != 0 {
		t.Errorf("v0 (client metrics only): %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ConfigResources)
	}
	bad := kmsg.NewPtrListConfigResourcesRequest()
	bad.Version, bad.ResourceTypes = 1, []int8{int8(kmsg.ConfigResourceTypeTopic), 64}
	if resp := roundTrip[*kmsg.ListConfigResourcesResponse](rc, bad); resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ConfigResources) != 0 {
		t.Errorf("an unknown type: %v %v; want UNSUPPORTED_VERSION and nothing", kerr.ErrorForCode(resp.ErrorCode), resp.ConfigResources)
	}
}
