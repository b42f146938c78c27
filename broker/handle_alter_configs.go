package broker

// AlterConfigs (key 33), v0–v2: forwarded to the active controller
// (metadata.ClusterControl.AlterConfigs: each resource's dynamic configs
// replaced wholesale, validated there); the answer comes once the config
// records are committed and applied here, which has reconfigured the logs
// of the topics (or, for a broker resource, of every topic) concerned.
// Transport errors: NOT_CONTROLLER or REQUEST_TIMED_OUT (after 30 s, the
// request has no timeout of its own) for every resource.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleAlterConfigs(ctx context.Context, m *kmsg.AlterConfigsRequest) network.Result {
	return b.forward(ctx, m, 0, func(code int16, msg string) kmsg.Response {
		resp := errorResponse(m, code).(*kmsg.AlterConfigsResponse)
		for i := range resp.Resources {
			resp.Resources[i].ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	})
}
