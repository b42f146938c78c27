package broker

// Metadata (key 3), v0–v13, answered from the last image ApplyMetadata
// published (KRaftMetadataCache in Kafka).
//
//   - Brokers: the registered, unfenced brokers with an endpoint for the
//     listener the request arrived on, as Kafka's getAliveBrokerNodes.
//   - ControllerID (v1+): KRaft hides the controllers from clients and
//     names a live broker instead, which forwards their admin requests:
//     this broker (see controllerForClients); -1 when there is none.
//   - ClusterID (v2+).
//   - Topics: all (v0 with an empty list, v1+ with a null list) or the
//     requested ones, deduplicated, by name or (v10+) by topic id; an
//     unknown id is UNKNOWN_TOPIC_ID. A non-zero id wins over the name, as
//     in Kafka: the Java client's describeTopics by id sends the id with
//     an empty name, not a null one. IsInternal (v1+) for Keel's internal
//     topics. TopicAuthorizedOperations (v8+) when asked: every topic
//     operation, as Kafka answers without an authorizer (narrowed to the
//     principal's by one: authz_apis.go).
//   - An unknown topic name is INVALID_TOPIC_EXCEPTION if the name is
//     illegal; otherwise, if the request allows auto creation (always
//     below v4, AllowAutoTopicCreation from v4) and
//     auto.create.topics.enable is true, a CreateTopics (num.partitions,
//     default.replication.factor) is forwarded to the controller in the
//     background and the topic answers LEADER_NOT_AVAILABLE so the client
//     retries, as Kafka's AutoTopicCreationManager does; else
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - Partitions: leader, leader epoch (v7+), replicas, ISR and offline
//     replicas (v5+: replicas on brokers unregistered, fenced or without
//     the listener). No leader is LEADER_NOT_AVAILABLE; a leader without
//     the listener LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before).
//     v0 lists only live replicas and says REPLICA_NOT_AVAILABLE when it
//     left one out, as Kafka does for v0.
//   - ClusterAuthorizedOperations (v8–v10) when asked: every cluster
//     operation (likewise narrowed). ErrorCode (v13, KIP-1102) is always 0.

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// Kafka's AclOperation codes, for the authorized-operations bitfields.
const (
	aclRead            = 3
	aclWrite           = 4
	aclCreate          = 5
	aclDelete          = 6
	aclAlter           = 7
	aclDescribe        = 8
	aclClusterAction   = 9
	aclDescribeConfigs = 10
	aclAlterConfigs    = 11
	aclIdempotentWrite = 12
)

// Authorized operations without an authorizer: everything the resource type
// supports (Kafka's AclEntry.supportedOperations).
const (
	topicAuthorizedOperations = 1<<aclRead | 1<<aclWrite | 1<<aclCreate | 1<<aclDelete | 1<<aclAlter |
		1<<aclDescribe | 1<<aclDescribeConfigs | 1<<aclAlterConfigs
	clusterAuthorizedOperations = 1<<aclCreate | 1<<aclAlter | 1<<aclDescribe | 1<<aclClusterAction |
		1<<aclDescribeConfigs | 1<<aclAlterConfigs | 1<<aclIdempotentWrite
)

// autoCreateTimeout bounds a background auto-creation forward.
const autoCreateTimeout = 30 * time.Second

func (b *Broker) handleMetadata(req *network.Request, m *kmsg.MetadataRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.MetadataResponse)
	img := b.currentImage()
	listener := req.Conn.Listener
	for _, br := range img.Brokers() {
		if br.Fenced {
			continue
		}
		if ep, ok := br.Endpoint(listener); ok {
			mb := kmsg.NewMetadataResponseBroker()
			mb.NodeID, mb.Host, mb.Port = br.ID, ep.Host, ep.Port
			if br.Rack != "" {
				mb.Rack = kmsg.StringPtr(br.Rack)
			}
			resp.Brokers = append(resp.Brokers, mb)
		}
	}
	if b.clusterID != "" {
		resp.ClusterID = kmsg.StringPtr(b.clusterID)
	}
	resp.ControllerID = b.controllerForClients(img, listener)
	if m.IncludeClusterAuthorizedOperations && m.Version >= 8 && m.Version <= 10 {
		resp.AuthorizedOperations = clusterAuthorizedOperations
	}

	allTopics := m.Topics == nil || (m.Version == 0 && len(m.Topics) == 0)
	if allTopics {
		for _, t := range img.Topics() {
			resp.Topics = append(resp.Topics, b.topicMetadata(img, t, m, listener))
		}
		return resp
	}
	autoCreate := (m.Version < 4 || m.AllowAutoTopicCreation) && b.cfg.AutoCreateTopicsEnable
	seenNames, seenIDs := map[string]bool{}, map[[16]byte]bool{}
	for _, rt := range m.Topics {
		if rt.Topic == nil || rt.TopicID != ([16]byte{}) {
			// By topic id (v10+).
			if seenIDs[rt.TopicID] {
				continue
			}
			seenIDs[rt.TopicID] = true
			if t, ok := img.TopicByID(metadata.Uuid(rt.TopicID)); ok {
				resp.Topics = append(resp.Topics, b.topicMetadata(img, t, m, listener))
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicID.Code
			if rt.TopicID == ([16]byte{}) {
				mt.ErrorCode = kerr.InvalidRequest.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		name := *rt.Topic
		if seenNames[name] {
			continue
		}
		seenNames[name] = true
		if t, ok := img.Topic(name); ok {
			resp.Topics = append(resp.Topics, b.topicMetadata(img, t, m, listener))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(name)
		switch {
		case validateTopicName(name) != nil:
			mt.ErrorCode = kerr.InvalidTopicException.Code
		case autoCreate && !isInternalTopic(name):
			b.autoCreateTopic(name)
			mt.ErrorCode = kerr.LeaderNotAvailable.Code
		default:
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// topicMetadata describes one existing topic.
func (b *Broker) topicMetadata(img *metadata.Image, t *metadata.Topic, m *kmsg.MetadataRequest, listener string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	if m.IncludeTopicAuthorizedOperations && m.Version >= 8 {
		mt.AuthorizedOperations = topicAuthorizedOperations
	}
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	for i, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas, mp.ISR = p.Replicas, p.ISR
		mp.OfflineReplicas = offlineReplicas(img, p, listener)
		if m.Version == 0 && len(mp.OfflineReplicas) > 0 {
			offline := func(id int32) bool { return slices.Contains(mp.OfflineReplicas, id) }
			mp.Replicas = slices.DeleteFunc(slices.Clone(p.Replicas), offline)
			mp.ISR = slices.DeleteFunc(slices.Clone(p.ISR), offline)
			mp.ErrorCode = kerr.ReplicaNotAvailable.Code
		}
		mp.Leader = -1
		leader, registered := img.Broker(p.Leader)
		switch {
		case p.Leader < 0 || !registered:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		default:
			if _, ok := leader.Endpoint(listener); ok {
				mp.Leader = p.Leader
			} else if m.Version >= 6 {
				mp.ErrorCode = kerr.ListenerNotFound.Code
			} else {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offlineReplicas are p's replicas on brokers that are not registered, are
// fenced or have no endpoint on the listener, or in a log dir their broker
// reported offline (Kafka's getOfflineReplicas).
func offlineReplicas(img *metadata.Image, p *metadata.Partition, listener string) []int32 {
	var out []int32
	for _, r := range p.Replicas {
		online := false
		if br, ok := img.Broker(r); ok && !br.Fenced && br.HasOnlineDir(p.Directory(r)) {
			_, online = br.Endpoint(listener)
		}
		if !online {
			out = append(out, r)
		}
	}
	return out
}

// controllerForClients is the broker KRaft names to clients as the
// controller, since they cannot reach the real one: the broker their admin
// requests go to, which forwards them. Kafka names a random live broker
// (registered, unfenced) on every answer. Keel names itself when it is
// live, has an endpoint on the listener the client used and is not in a
// controlled shutdown; otherwise a random live broker with one, preferring
// those not shutting down; -1 when there is none. The client has just
// reached this broker, whereas a random one may have died a moment ago and
// stay unfenced until broker.session.timeout.ms passes, and a client sends
// its admin requests to it, with growing backoffs, until a later answer
// names another: just when an operator runs kafka-topics.sh after losing
// a broker.
func (b *Broker) controllerForClients(img *metadata.Image, listener string) int32 {
	reachable := func(br *metadata.BrokerRegistration) bool {
		_, ok := br.Endpoint(listener)
		return ok && !br.Fenced
	}
	if br, ok := img.Broker(b.nodeID); ok && reachable(br) && !br.InControlledShutdown {
		return b.nodeID
	}
	var live, staying []int32
	for _, br := range img.Brokers() {
		if reachable(br) {
			live = append(live, br.ID)
			if !br.InControlledShutdown {
				staying = append(staying, br.ID)
			}
		}
	}
	if len(staying) > 0 {
		live = staying
	}
	if len(live) == 0 {
		return -1
	}
	return live[rand.IntN(len(live))]
}

// autoCreateTopic forwards a CreateTopics for name in the background, once
// at a time per name.
func (b *Broker) autoCreateTopic(name string) {
	b.autoMu.Lock()
	if b.autoCreating[name] {
		b.autoMu.Unlock()
		return
	}
	b.autoCreating[name] = true
	b.autoMu.Unlock()
	started := b.spawn(func() {
		defer func() {
			b.autoMu.Lock()
			delete(b.autoCreating, name)
			b.autoMu.Unlock()
		}()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		req.TimeoutMillis = int32(autoCreateTimeout / time.Millisecond)
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, -1, -1
		req.Topics = append(req.Topics, t)
		ctx, cancel := context.WithTimeout(b.ctx, autoCreateTimeout)
		defer cancel()
		resp, err := b.ctrl.Forward(ctx, req)
		if err != nil {
			b.log.Warn("auto-creating a topic failed", "topic", name, "error", err)
			return
		}
		if cr, ok := resp.(*kmsg.CreateTopicsResponse); ok {
			for _, rt := range cr.Topics {
				if rt.ErrorCode != 0 && rt.ErrorCode != kerr.TopicAlreadyExists.Code {
					b.log.Warn("auto-creating a topic failed", "topic", rt.Topic, "error", kerr.ErrorForCode(rt.ErrorCode))
				} else if rt.ErrorCode == 0 {
					b.log.Info("auto-created topic", "topic", rt.Topic, "partitions", rt.NumPartitions, "replication_factor", rt.ReplicationFactor)
				}
			}
		}
	})
	if !started {
		b.autoMu.Lock()
		delete(b.autoCreating, name)
		b.autoMu.Unlock()
	}
}

// isInternalTopic reports Keel's internal topics (__consumer_offsets,
// __transaction_state), which clients may neither create nor delete.
func isInternalTopic(name string) bool { return slices.Contains(metadata.InternalTopics, name) }

// validateTopicName is Kafka's Topic.validate: not empty, not "." or "..",
// at most 249 characters of [a-zA-Z0-9._-].
func validateTopicName(name string) error {
	switch {
	case name == "", name == ".", name == "..", len(name) > metadata.MaxTopicNameLength:
		return kerr.InvalidTopicException
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return kerr.InvalidTopicException
		}
	}
	return nil
}
