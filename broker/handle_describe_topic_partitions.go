package broker

// DescribeTopicPartitions (key 75), v0 (KIP-966), from the last applied
// image: the paginated topic description that the Java admin client's
// describeTopics (so kafka-topics.sh --describe) uses from Kafka 3.8 on,
// instead of Metadata, where the broker serves it.
//
//   - Topics: the named ones (deduplicated), or every topic for an empty
//     list, in name order, leaving out names before the cursor's topic. A
//     named list must hold the cursor's topic and the cursor's partition
//     must not be negative; otherwise every named topic is INVALID_REQUEST
//     (Kafka's error response to the InvalidRequestException its handler
//     throws).
//   - DESCRIBE on each topic: a named topic refused is
//     TOPIC_AUTHORIZATION_FAILED, without its id, after the described ones;
//     a request for every topic sees only those the principal may describe.
//     Paging counts only the topics described. TopicAuthorizedOperations
//     (the request has no flag for it): every topic operation, narrowed to
//     the principal's by an authorizer.
//   - Paging: at most min(ResponsePartitionLimit,
//     max.request.partition.size.limit) partitions (at least 1), starting at
//     the cursor's partition of the cursor's topic. NextCursor names the
//     first partition left out; when the limit ends exactly at the end of a
//     topic, partition 0 of the next topic, whether or not it still exists
//     then (as in Kafka). A named topic unknown or illegal is
//     UNKNOWN_TOPIC_OR_PARTITION or INVALID_TOPIC_EXCEPTION and costs no
//     partitions (never auto-created); a request for every topic skips
//     one deleted meanwhile.
//   - Partitions as Metadata v13 describes them (leader, leader epoch,
//     replicas, ISR, offline replicas), except that a leader without an
//     endpoint on the listener is leader -1 with no error code, as in
//     Kafka, and with the eligible leader replicas and last known ones
//     (KIP-966), empty unless eligible.leader.replicas.version is 1 and the
//     ISR is below min.insync.replicas.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleDescribeTopicPartitions(req *network.Request, m *kmsg.DescribeTopicPartitionsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	img := b.currentImage()
	z := b.authzFor(req)
	all := len(m.Topics) == 0
	cursorTopic, cursorPartition := "", int32(0)
	if m.Cursor != nil {
		cursorTopic, cursorPartition = m.Cursor.Topic, m.Cursor.Partition
	}

	var names []string
	if all {
		for _, t := range img.Topics() {
			if t.Name >= cursorTopic && z.quiet(opDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, rt := range m.Topics {
			if rt.Topic >= cursorTopic {
				names = append(names, rt.Topic)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if m.Cursor != nil {
			if _, found := slices.BinarySearch(names, cursorTopic); !found {
				return b.describeTopicPartitionsInvalid(req, m, "the topic list does not hold the cursor's topic")
			}
		}
	}
	if cursorPartition < 0 {
		return b.describeTopicPartitionsInvalid(req, m, "the cursor's partition is negative")
	}

	var denied []string
	if !all {
		names = slices.DeleteFunc(names, func(name string) bool {
			if z.topic(opDescribe, name) {
				return false
			}
			denied = append(denied, name)
			return true
		})
	}

	limit := max(min(int(m.ResponsePartitionLimit), b.cfg.MaxRequestPartitionSizeLimit), 1)
	listener := req.Conn.Listener
	for _, name := range names {
		if limit == 0 {
			next := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			next.Topic = name
			resp.NextCursor = &next
			break
		}
		t, ok := img.Topic(name)
		if !ok {
			if all {
				continue
			}
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic, rt.IsInternal = kmsg.StringPtr(name), isInternalTopic(name)
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if validateTopicName(name) != nil {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			rt.AuthorizedOperations = z.operations(kmsg.ACLResourceTypeTopic, name, topicAuthorizedOperations)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		first := 0
		if name == cursorTopic {
			first = int(cursorPartition)
		}
		first = min(first, len(t.Partitions))
		end := min(len(t.Partitions), first+limit)
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.TopicID, rt.IsInternal = kmsg.StringPtr(name), t.ID, isInternalTopic(name)
		rt.AuthorizedOperations = z.operations(kmsg.ACLResourceTypeTopic, name, topicAuthorizedOperations)
		rt.Partitions = make([]kmsg.DescribeTopicPartitionsResponseTopicPartition, 0, end-first)
		for id := first; id < end; id++ {
			rt.Partitions = append(rt.Partitions, describePartition(img, t.Partitions[id], int32(id), listener))
		}
		resp.Topics = append(resp.Topics, rt)
		limit -= end - first
		if end < len(t.Partitions) {
			next := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			next.Topic, next.Partition = name, int32(end)
			resp.NextCursor = &next
			break
		}
	}
	for _, name := range denied {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), codeTopicDenied
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// describePartition is one partition of a DescribeTopicPartitions answer.
func describePartition(img *metadata.Image, p *metadata.Partition, id int32, listener string) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	rp.Partition, rp.LeaderEpoch = id, p.LeaderEpoch
	rp.Replicas, rp.ISR = p.Replicas, p.ISR
	rp.OfflineReplicas = offlineReplicas(img, p, listener)
	rp.EligibleLeaderReplicas = append([]int32{}, p.ELR...)
	rp.LastKnownELR = append([]int32{}, p.LastKnownELR...)
	rp.LeaderID = -1
	if leader, ok := img.Broker(p.Leader); ok && p.Leader >= 0 {
		if _, ok := leader.Endpoint(listener); ok {
			rp.LeaderID = p.Leader
		}
	}
	return rp
}

// describeTopicPartitionsInvalid is Kafka's error response to a request
// its handler refuses: INVALID_REQUEST for every topic named.
func (b *Broker) describeTopicPartitionsInvalid(req *network.Request, m *kmsg.DescribeTopicPartitionsRequest, why string) kmsg.Response {
	b.log.Info("invalid DescribeTopicPartitions request", "remote", req.Conn.RemoteAddr.String(), "client_id", req.Header.ClientID, "reason", why)
	resp := m.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	for _, rt := range m.Topics {
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic, t.ErrorCode = kmsg.StringPtr(rt.Topic), kerr.InvalidRequest.Code
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
