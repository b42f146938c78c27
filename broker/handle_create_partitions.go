package broker

// CreatePartitions (key 37), v0–v3: forwarded to the active controller
// (metadata.ClusterControl.CreatePartitions, KIP-195); the answer comes
// once the new partitions are committed and applied here (their logs
// exist on this broker if it hosts them). Transport errors: as
// CreateTopics.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleCreatePartitions(ctx context.Context, m *kmsg.CreatePartitionsRequest) network.Result {
	return b.forward(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range m.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, kmsg.StringPtr(msg)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
