package broker

// ElectLeaders (key 43), v0–v2: forwarded to the active controller
// (metadata.ClusterControl.ElectLeaders: preferred and, from v1, unclean
// elections, KIP-460), as kafka-leader-election.sh --bootstrap-server
// expects of a KRaft broker. The answer comes once the leader changes are
// committed and applied here. Transport errors: as CreateTopics, with the
// code in the top-level error (v1+) and in every partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleElectLeaders(ctx context.Context, m *kmsg.ElectLeadersRequest) network.Result {
	return b.forward(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = code
		for _, t := range m.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, kmsg.StringPtr(msg)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}

// DescribeQuorum (key 55), v0–v2: forwarded to the controllers (any
// controller answers it, forwarding in turn to the Raft leader, which alone
// measures follower progress), as kafka-metadata-quorum.sh
// --bootstrap-server expects of a KRaft broker.
func (b *Broker) handleDescribeQuorum(ctx context.Context, m *kmsg.DescribeQuorumRequest) network.Result {
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.DescribeQuorumResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	})
}

// UnregisterBroker (key 64), v0: forwarded to the active controller
// (metadata.ClusterControl.UnregisterBroker), as kafka-cluster.sh
// unregister --bootstrap-server expects of a KRaft broker, to remove a
// decommissioned broker's registration.
func (b *Broker) handleUnregisterBroker(ctx context.Context, m *kmsg.UnregisterBrokerRequest) network.Result {
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.UnregisterBrokerResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	})
}
