package broker

// ListConfigResources (key 74), v0–v1: the resources an admin client can
// describe or alter configs of, as Kafka 4.1's handleListConfigResources.
// v0 is KIP-714's ListClientMetricsResources, which lists client metrics
// subscriptions only; v1 (KIP-1142) takes the types to list, every
// supported one when empty: GROUP (the groups with dynamic configs),
// CLIENT_METRICS, BROKER_LOGGER and BROKER (each registered broker with an
// endpoint on the request's listener, fenced or not), and TOPIC (every
// topic, internal ones included), in that order, each sorted. A type not
// among these answers UNSUPPORTED_VERSION for the whole request.
//
// Keel has no client metrics subscriptions (KIP-714 is not implemented),
// so CLIENT_METRICS lists nothing, which is what a Kafka cluster without
// subscriptions answers.
//
// It needs DESCRIBE_CONFIGS on the cluster (authz_apis.go).

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// The config resource types ListConfigResources v1 lists, in the order
// Kafka lists them.
var listedConfigResourceTypes = []int8{
	int8(kmsg.ConfigResourceTypeGroupConfig),
	int8(kmsg.ConfigResourceTypeClientMetrics),
	int8(kmsg.ConfigResourceTypeBrokerLogger),
	int8(kmsg.ConfigResourceTypeBroker),
	int8(kmsg.ConfigResourceTypeTopic),
}

func (b *Broker) handleListConfigResources(req *network.Request, m *kmsg.ListConfigResourcesRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	wanted := m.ResourceTypes
	switch {
	case m.Version == 0:
		wanted = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
	case len(wanted) == 0:
		wanted = listedConfigResourceTypes
	}
	for _, t := range wanted {
		if !slices.Contains(listedConfigResourceTypes, t) {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return resp
		}
	}
	img := b.currentImage()
	add := func(typ int8, names []string) {
		for _, name := range names {
			r := kmsg.NewListConfigResourcesResponseConfigResource()
			r.Name, r.Type = name, typ
			resp.ConfigResources = append(resp.ConfigResources, r)
		}
	}
	for _, typ := range listedConfigResourceTypes {
		if !slices.Contains(wanted, typ) {
			continue
		}
		switch kmsg.ConfigResourceType(typ) {
		case kmsg.ConfigResourceTypeGroupConfig:
			var groups []string
			for _, r := range img.ConfigResources() {
				if r.Type == metadata.ConfigResourceGroup {
					groups = append(groups, r.Name)
				}
			}
			slices.Sort(groups)
			add(typ, groups)
		case kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeBroker:
			var ids []string
			for _, br := range img.Brokers() { // by id
				if _, ok := br.Endpoint(req.Conn.Listener); ok {
					ids = append(ids, strconv.Itoa(int(br.ID)))
				}
			}
			add(typ, ids)
		case kmsg.ConfigResourceTypeTopic:
			var topics []string
			for _, t := range img.Topics() { // by name
				topics = append(topics, t.Name)
			}
			add(typ, topics)
		}
	}
	return resp
}
