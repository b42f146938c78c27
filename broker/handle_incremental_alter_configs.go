package broker

// IncrementalAlterConfigs (key 44), v0–v1 (KIP-339): forwarded to the
// active controller (metadata.ClusterControl.IncrementalAlterConfigs: SET,
// DELETE, APPEND, SUBTRACT per config, validated there); the answer comes
// once the config records are committed and applied here. Transport
// errors: as AlterConfigs.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, m *kmsg.IncrementalAlterConfigsRequest) network.Result {
	return b.forward(ctx, m, 0, func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, r := range m.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(msg)
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	})
}
