package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClientMetricsConfig resources are client metrics subscriptions (KIP-714),
// which Kafka lists and Keel has none of.
const ClientMetricsConfig ConfigResourceType = 16

// ConfigResource names a resource configs can be described or altered of.
type ConfigResource struct {
	Type ConfigResourceType
	Name string
}

// ListConfigResources lists the resources of the given types that configs
// can be described or altered of, every type the broker knows when none is
// given (ListConfigResources, KIP-1142; Kafka 4.1's
// Admin.listConfigResources). For groups these are the groups with dynamic
// configs, whether or not the group exists; for brokers and broker loggers
// the brokers; for topics every topic. The broker's order is kept: groups,
// client metrics, broker loggers, brokers, topics, each sorted.
//
// A broker before Kafka 4.1 knows only client metrics subscriptions (the
// API's v0, KIP-714's ListClientMetricsResources), or not the API at all:
// asking it for other types fails with ErrUnsupportedRequest.
func (a *Admin) ListConfigResources(ctx context.Context, types ...ConfigResourceType) ([]ConfigResource, error) {
	req := kmsg.NewPtrListConfigResourcesRequest()
	for _, t := range types {
		req.ResourceTypes = append(req.ResourceTypes, int8(t))
	}
	onlyClientMetrics := len(types) > 0 && !slices.ContainsFunc(types, func(t ConfigResourceType) bool { return t != ClientMetricsConfig })
	var out []ConfigResource
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.ListConfigResourcesResponse)
		if resp.Version == 0 && !onlyClientMetrics {
			return fmt.Errorf("the broker lists client metrics subscriptions only (ListConfigResources v0): %w", ErrUnsupportedRequest)
		}
		if err := errorWithMessage(resp.ErrorCode, nil); err != nil {
			return err
		}
		out = out[:0]
		for _, r := range resp.ConfigResources {
			out = append(out, ConfigResource{Type: ConfigResourceType(r.Type), Name: r.Name})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list config resources: %w", err)
	}
	return out, nil
}
