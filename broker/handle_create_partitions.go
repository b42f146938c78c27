package broker

// CreatePartitions (key 37), v0–v3: forwarded to the active controller
// (metadata.ClusterControl.CreatePartitions, KIP-195); the answer comes
// once the new partitions are committed and applied here (their logs
// exist on this broker if it hosts them). Transport errors: as
// CreateTopics. Topics over the client's controller_mutation_rate are
// answered THROTTLING_QUOTA_EXCEEDED from v3 (mutation_quota.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleCreatePartitions(ctx context.Context, req *network.Request, m *kmsg.CreatePartitionsRequest) network.Result {
	img := b.currentImage()
	var mq *mutationQuota
	if !m.ValidateOnly {
		mq = b.mutationQuotas.quotaFor(img, req, strictMutations(m))
	}
	var throttled []kmsg.CreatePartitionsRequestTopic
	var took map[string]int
	m.Topics, throttled, took = takeTopics(mq, m.Topics, b.now(), func(t kmsg.CreatePartitionsRequestTopic) (string, int) {
		if topic, ok := img.Topic(t.Topic); ok {
			return t.Topic, max(int(t.Count)-len(topic.Partitions), 0)
		}
		return t.Topic, 0
	})
	then := func(resp kmsg.Response) kmsg.Response {
		r := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				mq.refund(took[t.Topic])
			}
		}
		for _, rt := range throttled {
			t := kmsg.NewCreatePartitionsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = rt.Topic, codeThrottled, kmsg.StringPtr(throttledMessage)
			r.Topics = append(r.Topics, t)
		}
		return applyMutationThrottle(req, mq, r)
	}
	if len(m.Topics) == 0 && len(throttled) > 0 {
		return &network.Response{Msg: then(m.ResponseKind())}
	}
	return b.forwardThen(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range m.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, kmsg.StringPtr(msg)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}, then)
}
