package broker

// IncrementalAlterConfigs (key 44), v0–v1 (KIP-339): forwarded to the
// active controller (metadata.ClusterControl.IncrementalAlterConfigs: SET,
// DELETE, APPEND, SUBTRACT per config, validated there); the answer comes
// once the config records are committed and applied here. Transport
// errors: as AlterConfigs. BROKER_LOGGER resources are this broker's own
// and are applied here, not forwarded (broker_logger.go), as Kafka's
// ConfigAdminManager does; a request with other resources too forwards
// those and answers both.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, m *kmsg.IncrementalAlterConfigsRequest) network.Result {
	var local []kmsg.IncrementalAlterConfigsResponseResource
	forwarded := *m
	forwarded.Resources = nil
	for _, r := range m.Resources {
		if r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
			local = append(local, b.alterBrokerLoggers(r, m.ValidateOnly))
		} else {
			forwarded.Resources = append(forwarded.Resources, r)
		}
	}
	if len(forwarded.Resources) == 0 {
		resp := m.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = local
		return respond(resp)
	}
	withLocal := func(resp kmsg.Response) kmsg.Response {
		r := resp.(*kmsg.IncrementalAlterConfigsResponse)
		r.Resources = append(r.Resources, local...)
		return r
	}
	return b.forwardThen(ctx, &forwarded, 0, func(code int16, msg string) kmsg.Response {
		resp := errorResponse(&forwarded, code).(*kmsg.IncrementalAlterConfigsResponse)
		for i := range resp.Resources {
			resp.Resources[i].ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}, withLocal)
}
