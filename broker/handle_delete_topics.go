package broker

// DeleteTopics (key 20), v0–v6: forwarded to the active controller
// (metadata.ClusterControl.DeleteTopics: by name, or by topic id from v6);
// the answer comes once the removal is committed and applied here, which
// has deleted this broker's logs of the topic. Transport errors: as
// CreateTopics. Topics over the client's controller_mutation_rate are
// answered THROTTLING_QUOTA_EXCEEDED from v5 (mutation_quota.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleDeleteTopics(ctx context.Context, req *network.Request, m *kmsg.DeleteTopicsRequest) network.Result {
	// Forwarding re-encodes the request at the newest version, where names
	// travel as Topics entries: v0–v5's TopicNames would not reach the
	// controller (and the client would hear of no topic at all).
	for _, n := range m.TopicNames {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		m.Topics = append(m.Topics, t)
	}
	m.TopicNames = nil
	img := b.currentImage()
	mq := b.mutationQuotas.quotaFor(img, req, strictMutations(m))
	var throttled []kmsg.DeleteTopicsRequestTopic
	var took map[string]int
	m.Topics, throttled, took = takeTopics(mq, m.Topics, b.now(), func(t kmsg.DeleteTopicsRequestTopic) (string, int) {
		topic, ok := img.TopicByID(metadata.Uuid(t.TopicID))
		if t.Topic != nil {
			topic, ok = img.Topic(*t.Topic)
		}
		if !ok {
			return "", 0 // unknown: the controller says so
		}
		return topic.Name, len(topic.Partitions)
	})
	then := func(resp kmsg.Response) kmsg.Response {
		r := resp.(*kmsg.DeleteTopicsResponse)
		for _, t := range r.Topics {
			if t.ErrorCode != 0 && t.Topic != nil {
				mq.refund(took[*t.Topic])
			}
		}
		for _, t := range throttled {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = t.Topic, t.TopicID, codeThrottled, kmsg.StringPtr(throttledMessage)
			r.Topics = append(r.Topics, rt)
		}
		return applyMutationThrottle(req, mq, r)
	}
	if len(m.Topics) == 0 && len(throttled) > 0 {
		return &network.Response{Msg: then(m.ResponseKind())}
	}
	return b.forwardThen(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, t := range m.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = t.Topic, t.TopicID, code, kmsg.StringPtr(msg)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}, then)
}
