package broker

// AlterClientQuotas (key 49), v0–v1: forwarded to the active controller
// (metadata.ClusterControl.AlterClientQuotas), as kafka-configs --alter
// --entity-type users/clients expects of a KRaft broker. Transport errors:
// the code in every entry.
//
// DescribeClientQuotas (key 48), v0–v1: answered from this broker's image
// (metadata.DescribeClientQuotas).
//
// Enforcement: client_quota.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleAlterClientQuotas(ctx context.Context, m *kmsg.AlterClientQuotasRequest) network.Result {
	return b.forward(ctx, m, defaultForwardTimeout, func(code int16, msg string) kmsg.Response {
		resp := errorResponse(m, code).(*kmsg.AlterClientQuotasResponse)
		for i := range resp.Entries {
			resp.Entries[i].ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	})
}

func (b *Broker) handleDescribeClientQuotas(m *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	return metadata.DescribeClientQuotas(b.currentImage(), m)
}
