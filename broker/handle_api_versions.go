package broker

// ApiVersions (key 18), v0–v5.
//
// The answer lists every API key this handler serves on the request's
// listener with the versions in apiTable (Produce from v0, KAFKA-18659; see
// apis.go), and on a SASL listener SaslHandshake and SaslAuthenticate,
// which the network layer serves. A version above v5 never reaches here: the network layer
// answers it with a v0 UNSUPPORTED_VERSION response (KIP-511).
//
//   - v1+: ThrottleMillis (always 0: no quotas yet).
//   - v3+: client software name and version are not validated (Kafka
//     answers INVALID_REQUEST for names outside its pattern; clients never
//     send such names and refusing them gains nothing). SupportedFeatures,
//     FinalizedFeatures and FinalizedFeaturesEpoch as Kafka fills them
//     (features.go); below v4, features with a 0 minimum are left out.
//   - v5 (KIP-1242): when the client names both a cluster id and a node
//     id, either one not matching this broker is REBOOTSTRAP_REQUIRED
//     (the connection reached the wrong broker); naming only one is
//     INVALID_REQUEST.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleApiVersions(req *network.Request, m *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.ApiVersionsResponse)
	if m.Version >= 5 {
		switch {
		case (m.ClusterID == nil) != (m.NodeID < 0):
			resp.ErrorCode = kerr.InvalidRequest.Code
		case m.ClusterID != nil && (*m.ClusterID != b.clusterID || m.NodeID != b.nodeID):
			b.log.Debug("client reached the wrong broker", "client_cluster_id", *m.ClusterID,
				"client_node_id", strconv.Itoa(int(m.NodeID)), "remote", req.Conn.RemoteAddr.String())
			resp.ErrorCode = kerr.RebootstrapRequired.Code
		}
	}
	if b.controllerListeners[req.Conn.Listener] {
		return resp
	}
	img := b.currentImage()
	setApiVersionsFeatures(resp, m.Version, img, b.cfg.KRaftVersion())
	consumerGroups := b.consumerProtocolEnabled(img)
	for key := range apiTable {
		a := &apiTable[key]
		if !a.served {
			continue
		}
		if (key == 68 || key == 69) && !consumerGroups {
			// Kafka advertises the consumer protocol's APIs only while
			// group.version enables it; clients then use the classic one.
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = int16(key), a.advertisedMin, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}
