package broker

// DeleteTopics (key 20), v0–v6: forwarded to the active controller
// (metadata.ClusterControl.DeleteTopics: by name, or by topic id from v6);
// the answer comes once the removal is committed and applied here, which
// has deleted this broker's logs of the topic. Transport errors: as
// CreateTopics.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleDeleteTopics(ctx context.Context, m *kmsg.DeleteTopicsRequest) network.Result {
	// Forwarding re-encodes the request at the newest version, where names
	// travel as Topics entries: v0–v5's TopicNames would not reach the
	// controller (and the client would hear of no topic at all).
	for _, n := range m.TopicNames {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		m.Topics = append(m.Topics, t)
	}
	m.TopicNames = nil
	return b.forward(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, t := range m.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = t.Topic, t.TopicID, code, kmsg.StringPtr(msg)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
