package broker

// DescribeCluster (key 60), v0–v2 (KIP-700), from the last applied image.
//
//   - EndpointType (v1+) 1 (brokers) lists the registered, unfenced
//     brokers with an endpoint for the request's listener, as Metadata does;
//     with IncludeFencedBrokers (v2+) the fenced ones too, marked IsFenced.
//     Type 2 (controllers) is MISMATCHED_ENDPOINT_TYPE on a broker
//     listener, as in Kafka (an admin client given a broker as its
//     bootstrap.controllers says so): controllers answer it on their own
//     listener. Any other type is UNSUPPORTED_ENDPOINT_TYPE.
//   - ControllerID: a live broker that forwards admin requests, as Metadata
//     names it (controllerForClients).
//   - ClusterAuthorizedOperations when asked: every cluster operation,
//     narrowed to the principal's by an authorizer (authz_apis.go).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleDescribeCluster(req *network.Request, m *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeClusterResponse)
	if code, msg := describeClusterEndpointCheck(m, endpointTypeBroker); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	resp.EndpointType = endpointTypeBroker
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

// DescribeCluster's endpoint types (KIP-919).
const (
	endpointTypeBroker     int8 = 1
	endpointTypeController int8 = 2
)

// describeClusterEndpointCheck is Kafka's check of the endpoint type a
// DescribeCluster asks for against the one the listener serves: an
// unknown type is UNSUPPORTED_ENDPOINT_TYPE, the other known type
// MISMATCHED_ENDPOINT_TYPE (both INVALID_REQUEST at v0, which has neither).
func describeClusterEndpointCheck(m *kmsg.DescribeClusterRequest, served int8) (int16, string) {
	name := map[int8]string{endpointTypeBroker: "BROKER", endpointTypeController: "CONTROLLER"}
	asked, known := name[m.EndpointType]
	var code int16
	var msg string
	switch {
	case !known:
		code, msg = kerr.UnsupportedEndpointType.Code, fmt.Sprintf("Unsupported endpoint type %d", m.EndpointType)
	case m.EndpointType != served:
		code, msg = kerr.MismatchedEndpointType.Code, "The request was sent to an endpoint of type "+name[served]+", but we wanted an endpoint of type "+asked
	default:
		return 0, ""
	}
	if m.Version == 0 {
		code = kerr.InvalidRequest.Code
	}
	return code, msg
}
