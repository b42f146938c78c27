package broker

// AlterPartitionReassignments (key 45), v0–v1: forwarded to the active
// controller (metadata.ClusterControl.AlterPartitionReassignments, KIP-455,
// with KIP-860's AllowReplicationFactorChange from v1), as
// kafka-reassign-partitions.sh --execute and --cancel expect of a KRaft
// broker. The answer comes once the reassignments are started (or
// cancelled), committed and applied here; the new replicas then catch up
// and the partitions complete on their own. Transport errors: as
// CreateTopics, with the code in the top-level error and every partition.
//
// ListPartitionReassignments (key 46), v0: forwarded to the active
// controller, which answers from its image
// (metadata.ListPartitionReassignments), as a KRaft broker forwards it: an
// admin client that started a reassignment through one broker and lists
// them through another sees it, where another broker's image may not have
// it yet.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleAlterPartitionReassignments(ctx context.Context, m *kmsg.AlterPartitionAssignmentsRequest) network.Result {
	// Forwarding re-encodes at the newest version; a v0 request decodes
	// with AllowReplicationFactorChange at kmsg's default, true, which is
	// what v0 meant.
	return b.forward(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		for _, t := range m.Topics {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, kmsg.StringPtr(msg)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}

func (b *Broker) handleListPartitionReassignments(ctx context.Context, m *kmsg.ListPartitionReassignmentsRequest) network.Result {
	return b.forward(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	})
}
