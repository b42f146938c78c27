package broker

// CreateTopics (key 19), v0–v7: forwarded to the active controller, which
// validates and decides (metadata.ClusterControl.CreateTopics); the answer
// comes once the topic's records are committed and applied on this broker,
// so a Metadata request that follows sees the topic. A controller that
// cannot be reached answers NOT_CONTROLLER for every topic, one that does
// not answer within TimeoutMillis REQUEST_TIMED_OUT.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleCreateTopics(ctx context.Context, m *kmsg.CreateTopicsRequest) network.Result {
	// Tagged fields kmsg does not know are dropped: a client must not pass
	// the broker's internal-creation mark (markInternalCreate) along.
	m.UnknownTags = kmsg.Tags{}
	return b.forward(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range m.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, kmsg.StringPtr(msg)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
