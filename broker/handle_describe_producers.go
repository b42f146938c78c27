package broker

// DescribeProducers (key 61), v0 (KIP-664; kafka-transactions.sh
// describe-producers): the idempotent producers a partition's leader
// remembers, each with its epoch and its newest batch's last sequence and
// timestamp, and for a transactional producer the coordinator epoch of its
// last marker and the first offset of its open transaction (-1 when none:
// what kafka-transactions.sh find-hanging looks for). Only the leader
// answers: NOT_LEADER_OR_FOLLOWER
// elsewhere, UNKNOWN_TOPIC_OR_PARTITION for a partition the image does not
// know.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeProducers(m *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range m.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, part := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = part
			p, _, code := b.leaderPartition(rt.Topic, part, -1)
			if code != 0 {
				sp.ErrorCode = code
				sp.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(code).Error())
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, ps := range p.log.ActiveProducers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = ps.ProducerID, int32(ps.ProducerEpoch)
				ap.LastSequence, ap.LastTimestamp = ps.LastSequence, ps.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.CoordinatorEpoch, ps.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
