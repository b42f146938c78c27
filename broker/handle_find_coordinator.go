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
// v4+ batches keys (KIP-699): one Coordinators entry per key, the
// top-level fields unused. Transaction keys (type 1) are INVALID_REQUEST
// with a message saying transactions are not supported (refuseTransactions),
// as are other key types (v6 share groups).

import (
	"time"

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
	switch {
	case keyType == 1:
		c.ErrorCode, c.ErrorMessage = b.refuseTransactions(req, key)
		return c
	case keyType != 0, key == "":
		return fail(kerr.InvalidRequest.Code)
	}
	img := b.currentImage()
	t, ok := img.Topic(offsetsTopic)
	if !ok || len(t.Partitions) == 0 {
		b.groups.ensureTopic()
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

// refuseTransactions answers a transactional client (FindCoordinator for a
// transactional id, InitProducerId with one): Keel has no transaction
// coordinator. INVALID_REQUEST is not retriable, so the client fails at
// once with the message, where COORDINATOR_NOT_AVAILABLE had it retry a
// coordinator that never comes (kafkajs for 8 s, the Java producer until
// max.block.ms) before failing with a misleading error. The log says which
// client, at most every 10 s.
func (b *Broker) refuseTransactions(req *network.Request, transactionalID string) (code int16, msg *string) {
	const why = "transactions are not supported by this broker (Keel): use the idempotent producer without a transactional.id"
	if b.txnRefusedLog.allow(10 * time.Second) {
		b.log.Warn("refusing a transactional client: transactions are not supported", "client_id", req.Header.ClientID,
			"remote", req.Conn.RemoteAddr.String(), "transactional_id", transactionalID, "api", kmsg.NameForKey(req.Header.APIKey))
	}
	return kerr.InvalidRequest.Code, kmsg.StringPtr(why)
}
