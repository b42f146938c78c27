package broker

// IncrementalAlterConfigs (key 44), v0–v1 (KIP-339): forwarded to the
// active controller (metadata.ClusterControl.IncrementalAlterConfigs: SET,
// DELETE, APPEND, SUBTRACT per config, validated there); the answer comes
// once the config records are committed and applied here. Transport
// errors: as AlterConfigs. BROKER_LOGGER resources are this broker's own
// and are applied here, not forwarded (broker_logger.go), as Kafka's
// ConfigAdminManager does; a request with other resources too forwards
// those and answers both. A BROKER resource that sets a listener's
// keystore or truststore is validated here first (dynamic_tls.go).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, m *kmsg.IncrementalAlterConfigsRequest) network.Result {
	var local []kmsg.IncrementalAlterConfigsResponseResource
	forwarded := *m
	forwarded.Resources = nil
	reload := false
	for _, r := range m.Resources {
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeBrokerLogger:
			local = append(local, b.loggers().alter(r, m.ValidateOnly))
			continue
		case kmsg.ConfigResourceTypeBroker:
			next, touched := incrementalBrokerConfigs(brokerConfigs(b.image.Load(), r.ResourceName), r.Configs)
			code, msg := b.checkListenerTLS(r.ResourceName, touched, next)
			if code == 0 {
				code, msg = b.checkCleanerThreads(r.ResourceName, touched, next)
			}
			if code != 0 {
				rr := kmsg.NewIncrementalAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, code, kmsg.StringPtr(msg)
				local = append(local, rr)
				continue
			}
			reload = reload || slices.ContainsFunc(touched, listenerTLSConfig)
		}
		forwarded.Resources = append(forwarded.Resources, r)
	}
	if len(forwarded.Resources) == 0 {
		resp := m.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = local
		return respond(resp)
	}
	withLocal := func(resp kmsg.Response) kmsg.Response {
		if reload && !m.ValidateOnly {
			b.reloadListenerTLS()
		}
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
