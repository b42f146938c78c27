package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// EligibleLeaders are a partition's eligible leader replicas (KIP-966):
// replicas out of the ISR that hold every committed record and may lead
// when the ISR is empty, and its last known leader.
type EligibleLeaders struct {
	ELR          []int32
	LastKnownELR []int32
}

// elrPageLimit is the partitions asked for in one DescribeTopicPartitions
// (Kafka's admin client's default, partitionSizeLimitPerResponse).
var elrPageLimit int32 = 2000

// EligibleLeaderReplicas describes the named topics' partitions with
// DescribeTopicPartitions (API 75, KIP-966; Kafka's admin client's
// describeTopics from 3.8), page after page, and returns each partition's
// eligible leader replicas. A topic's error (unknown, not authorized) fails
// the call. A broker without the API fails it with ErrUnsupportedRequest,
// which callers take as "no ELR to show", as kafka-topics.sh does.
func (a *Admin) EligibleLeaderReplicas(ctx context.Context, topics ...string) (map[TopicPartition]EligibleLeaders, error) {
	out := map[TopicPartition]EligibleLeaders{}
	if len(topics) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = elrPageLimit
	for _, t := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	for {
		var resp *kmsg.DescribeTopicPartitionsResponse
		err := a.retry(ctx, func() error {
			kresp, err := a.cl.Request(ctx, req)
			if err != nil {
				return err
			}
			resp = kresp.(*kmsg.DescribeTopicPartitionsResponse)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("describe topic partitions: %w", err)
		}
		for _, t := range resp.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			if err := errorWithMessage(t.ErrorCode, nil); err != nil {
				return nil, fmt.Errorf("describe topic partitions of %s: %w", name, err)
			}
			for _, p := range t.Partitions {
				out[TopicPartition{Topic: name, Partition: p.Partition}] = EligibleLeaders{ELR: p.EligibleLeaderReplicas, LastKnownELR: p.LastKnownELR}
			}
		}
		if resp.NextCursor == nil {
			return out, nil
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
}
