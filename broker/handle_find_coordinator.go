package broker

// FindCoordinator (key 10), v0–v5.
//
// Group keys (key type 0, the only one before v1): the coordinator is the
// leader of __consumer_offsets partition abs(javaHashCode(group)) %
// partitions (DESIGN §6). While the topic does not exist, the first request
// creates it through the controller (offsets.topic.num.partitions,
// offsets.topic.replication.factor, compacted; not while fewer brokers are
// alive, KIP-115) and the answer is COORDINATOR_NOT_AVAILABLE, as Kafka's;
// so is a
// partition without a live leader, or a leader without an endpoint on the
// request's listener. An empty group id is INVALID_REQUEST.
//
// Transaction keys (key type 1, v1+): the leader of __transaction_state
// partition abs(javaHashCode(transactional id)) % partitions, created on
// first use the same way (transaction.state.log.num.partitions,
// transaction.state.log.replication.factor, min.insync.replicas from
// transaction.state.log.min.isr, compacted).
//
// v4+ batches keys (KIP-699): one Coordinators entry per key, the
// top-level fields unused. Other key types (v6 share groups) are
// INVALID_REQUEST.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/record"
)

func (b *Broker) handleFindCoordinator(req *network.Request, m *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if m.Version < 4 {
		c := b.findCoordinator(req, m.CoordinatorType, m.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		return resp
	}
	for _, key := range m.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, b.findCoordinator(req, m.CoordinatorType, key))
	}
	return resp
}

// findCoordinator resolves one key.
func (b *Broker) findCoordinator(req *network.Request, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	fail := func(code int16) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode = code
		c.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(code).Error())
		return c
	}
	var topic string
	var ensure func()
	switch {
	case key == "":
		return fail(kerr.InvalidRequest.Code)
	case keyType == 0:
		topic, ensure = offsetsTopic, b.groups.ensureTopic
	case keyType == 1:
		topic, ensure = txnTopic, b.txns.ensureTopic
	default:
		return fail(kerr.InvalidRequest.Code)
	}
	img := b.currentImage()
	t, ok := img.Topic(topic)
	if !ok || len(t.Partitions) == 0 {
		ensure()
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	mp := t.Partitions[record.CoordinatorPartition(key, int32(len(t.Partitions)))]
	if mp.Leader < 0 {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	br, ok := img.Broker(mp.Leader)
	if !ok || br.Fenced {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	ep, ok := br.Endpoint(req.Conn.Listener)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	c.NodeID, c.Host, c.Port = mp.Leader, ep.Host, ep.Port
	return c
}
