package broker

// DescribeCluster (key 60), v0–v2 (KIP-700), from the last applied image.
//
//   - EndpointType (v1+) 1 (brokers) lists the registered, unfenced
//     brokers with an endpoint for the request's listener, as Metadata does;
//     with IncludeFencedBrokers (v2+) the fenced ones too, marked IsFenced.
//     Type 2 (controllers) is UNSUPPORTED_ENDPOINT_TYPE on a broker
//     listener, as in Kafka: controllers answer it on their own listener.
//   - ControllerID: a live broker that forwards admin requests, as Metadata
//     names it (controllerForClients).
//   - ClusterAuthorizedOperations when asked: every cluster operation,
//     narrowed to the principal's by an authorizer (authz_apis.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleDescribeCluster(req *network.Request, m *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = m.EndpointType
	if m.Version >= 1 && m.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("brokers only describe broker endpoints; ask a controller for its own")
		return resp
	}
	img := b.currentImage()
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.controllerForClients(img, req.Conn.Listener)
	if m.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterAuthorizedOperations
	}
	for _, br := range img.Brokers() {
		if br.Fenced && !(m.IncludeFencedBrokers && m.Version >= 2) {
			continue
		}
		ep, ok := br.Endpoint(req.Conn.Listener)
		if !ok {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.IsFenced = br.ID, ep.Host, ep.Port, br.Fenced
		if br.Rack != "" {
			rb.Rack = kmsg.StringPtr(br.Rack)
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp
}
