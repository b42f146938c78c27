package broker

// AlterConfigs (key 33), v0–v2: forwarded to the active controller
// (metadata.ClusterControl.AlterConfigs: each resource's dynamic configs
// replaced wholesale, validated there); the answer comes once the config
// records are committed and applied here, which has reconfigured the logs
// of the topics (or, for a broker resource, of every topic) concerned.
// Transport errors: NOT_CONTROLLER or REQUEST_TIMED_OUT (after 30 s, the
// request has no timeout of its own) for every resource. A BROKER
// resource whose listener keystore or truststore settings change is
// validated here first (dynamic_tls.go).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleAlterConfigs(ctx context.Context, m *kmsg.AlterConfigsRequest) network.Result {
	var local []kmsg.AlterConfigsResponseResource
	forwarded := *m
	forwarded.Resources = nil
	reload := false
	for _, r := range m.Resources {
		if r.ResourceType == kmsg.ConfigResourceTypeBroker {
			// The request replaces the resource's configs: the ones it
			// drops change too.
			next, touched := map[string]string{}, []string{}
			for _, c := range r.Configs {
				if c.Value != nil {
					next[c.Name] = *c.Value
				}
				touched = append(touched, c.Name)
			}
			for name := range brokerConfigs(b.image.Load(), r.ResourceName) {
				touched = append(touched, name)
			}
			code, msg := b.checkListenerTLS(r.ResourceName, touched, next)
			if code == 0 {
				code, msg = b.checkCleanerThreads(r.ResourceName, touched, next)
			}
			if code != 0 {
				rr := kmsg.NewAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, code, kmsg.StringPtr(msg)
				local = append(local, rr)
				continue
			}
			reload = reload || slices.ContainsFunc(touched, listenerTLSConfig)
		}
		forwarded.Resources = append(forwarded.Resources, r)
	}
	if len(forwarded.Resources) == 0 {
		resp := m.ResponseKind().(*kmsg.AlterConfigsResponse)
		resp.Resources = local
		return respond(resp)
	}
	return b.forwardThen(ctx, &forwarded, 0, func(code int16, msg string) kmsg.Response {
		resp := errorResponse(&forwarded, code).(*kmsg.AlterConfigsResponse)
		for i := range resp.Resources {
			resp.Resources[i].ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}, func(resp kmsg.Response) kmsg.Response {
		if reload && !m.ValidateOnly {
			b.reloadListenerTLS()
		}
		r := resp.(*kmsg.AlterConfigsResponse)
		r.Resources = append(r.Resources, local...)
		return r
	})
}
