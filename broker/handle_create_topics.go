package broker

// CreateTopics (key 19), v0–v7: forwarded to the active controller, which
// validates and decides (metadata.ClusterControl.CreateTopics); the answer
// comes once the topic's records are committed and applied on this broker,
// so a Metadata request that follows sees the topic. A controller that
// cannot be reached answers NOT_CONTROLLER for every topic, one that does
// not answer within TimeoutMillis REQUEST_TIMED_OUT. Topics over the
// client's controller_mutation_rate are answered THROTTLING_QUOTA_EXCEEDED
// from v6 (mutation_quota.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleCreateTopics(ctx context.Context, req *network.Request, m *kmsg.CreateTopicsRequest) network.Result {
	// Tagged fields kmsg does not know are dropped: a client must not pass
	// the broker's internal-creation mark (markInternalCreate) along.
	m.UnknownTags = kmsg.Tags{}
	// controller_mutation_rate (mutation_quota.go): topics over it are
	// answered here; the others' partitions are counted, and given back
	// for those the controller refuses.
	var mq *mutationQuota
	if !m.ValidateOnly {
		mq = b.mutationQuotas.quotaFor(b.currentImage(), req, strictMutations(m))
	}
	var throttled []kmsg.CreateTopicsRequestTopic
	var took map[string]int
	m.Topics, throttled, took = takeTopics(mq, m.Topics, b.now(), func(t kmsg.CreateTopicsRequestTopic) (string, int) {
		return t.Topic, b.mutationsOfCreate(&t)
	})
	then := func(resp kmsg.Response) kmsg.Response {
		r := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				mq.refund(took[t.Topic])
			}
		}
		for _, rt := range throttled {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = rt.Topic, codeThrottled, kmsg.StringPtr(throttledMessage)
			t.NumPartitions, t.ReplicationFactor = -1, -1
			r.Topics = append(r.Topics, t)
		}
		return applyMutationThrottle(req, mq, r)
	}
	if len(m.Topics) == 0 && len(throttled) > 0 {
		return &network.Response{Msg: then(m.ResponseKind())}
	}
	return b.forwardThen(ctx, m, millis(m.TimeoutMillis), func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range m.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, kmsg.StringPtr(msg)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}, then)
}
