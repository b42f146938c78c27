package broker

// The authorization each API needs, as Kafka's KafkaApis asks for it
// (operation on resource → the error code when denied):
//
//   - Produce: WRITE on the transactional id of a transactional one
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), WRITE
//     on each topic (TOPIC_AUTHORIZATION_FAILED).
//   - Fetch: CLUSTER_ACTION for a follower, READ on each topic for a
//     consumer (handle_fetch.go). ListOffsets, DescribeProducers: DESCRIBE,
//     READ on each topic. OffsetForLeaderEpoch: CLUSTER_ACTION from a
//     follower, DESCRIBE on each topic otherwise.
//   - Metadata: DESCRIBE on each topic named (TOPIC_AUTHORIZATION_FAILED),
//     topics not described hidden from a request for all; a topic to be
//     auto-created needs CREATE on the cluster or the topic.
//     DescribeTopicPartitions likewise, without auto-creation (in its
//     handler, since its paging counts only the topics described).
//   - CreateTopics: CREATE on the cluster or the topic. DeleteTopics,
//     DeleteRecords: DELETE on the topic. CreatePartitions: ALTER on the
//     topic. DescribeConfigs / AlterConfigs / IncrementalAlterConfigs:
//     DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, the cluster for a
//     broker resource, the group for a group one.
//   - Groups: FindCoordinator DESCRIBE on the group or transactional id;
//     JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit READ on the
//     group (OffsetCommit also READ on each topic); OffsetFetch and
//     DescribeGroups DESCRIBE on the group (and on each topic); DeleteGroups
//     and OffsetDelete DELETE on the group (OffsetDelete READ on each
//     topic); ListGroups lists the groups the principal may describe
//     (all with DESCRIBE on the cluster).
//   - Transactions: InitProducerId WRITE on the transactional id, or, for
//     an idempotent producer, IDEMPOTENT_WRITE on the cluster or WRITE on
//     some topic (KIP-679); AddPartitionsToTxn WRITE on the id and each
//     topic; AddOffsetsToTxn WRITE on the id, READ on the group; EndTxn
//     WRITE on the id; TxnOffsetCommit WRITE on the id, READ on the group
//     and each topic; DescribeTransactions DESCRIBE on each id;
//     ListTransactions lists the ids the principal may describe;
//     WriteTxnMarkers CLUSTER_ACTION.
//   - Cluster administration: DESCRIBE on the cluster for DescribeLogDirs,
//     DescribeAcls, DescribeUserScramCredentials, DescribeQuorum and
//     ListPartitionReassignments; DESCRIBE_CONFIGS for DescribeClientQuotas
//     and ListConfigResources; ALTER_CONFIGS for AlterClientQuotas; ALTER for
//     CreateAcls, DeleteAcls, AlterUserScramCredentials, ElectLeaders,
//     AlterPartitionReassignments, AlterReplicaLogDirs, UnregisterBroker,
//     UpdateFeatures, AddRaftVoter and RemoveRaftVoter
//     (CLUSTER_AUTHORIZATION_FAILED).
//   - ApiVersions and DescribeCluster need nothing.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/storage"
)

// ACL operations, by Kafka's names.
const (
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

var (
	codeTopicDenied   = kerr.TopicAuthorizationFailed.Code
	codeGroupDenied   = kerr.GroupAuthorizationFailed.Code
	codeClusterDenied = kerr.ClusterAuthorizationFailed.Code
	codeTxnDenied     = kerr.TransactionalIDAuthorizationFailed.Code
)

// authorize checks req: deny is the whole answer to a request denied as a
// whole; otherwise req.Msg may have lost the items it may not touch, and
// post (if not nil) adds their errors to the handler's response.
func (b *Broker) authorize(req *network.Request, z *requestAuthz) (deny kmsg.Response, post func(kmsg.Response) kmsg.Response) {
	switch m := req.Msg.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.FetchRequest, *kmsg.DescribeTopicPartitionsRequest:
		return nil, nil // in handle_fetch.go, handle_describe_topic_partitions.go
	case *kmsg.DescribeClusterRequest:
		if !m.IncludeClusterAuthorizedOperations {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) kmsg.Response {
			r := resp.(*kmsg.DescribeClusterResponse)
			r.ClusterAuthorizedOperations = z.operations(kmsg.ACLResourceTypeCluster, clusterName, r.ClusterAuthorizedOperations)
			return r
		}
	case *kmsg.ProduceRequest:
		return authorizeProduce(z, m)
	case *kmsg.ListOffsetsRequest:
		return topicPartitionsAuthz(m, opDescribe, z, listOffsetsTopics)
	case *kmsg.DescribeProducersRequest:
		return topicPartitionsAuthz(m, opRead, z, describeProducersTopics)
	case *kmsg.DeleteRecordsRequest:
		return topicPartitionsAuthz(m, opDelete, z, deleteRecordsTopics)
	case *kmsg.OffsetForLeaderEpochRequest:
		if m.ReplicaID >= 0 && !z.cluster(opClusterAction) {
			return denyTopicPartitions(m, codeClusterDenied, offsetForLeaderEpochTopics), nil
		}
		return topicPartitionsAuthz(m, opDescribe, z, offsetForLeaderEpochTopics)
	case *kmsg.MetadataRequest:
		post := authorizeMetadata(z, m)
		if !m.IncludeTopicAuthorizedOperations && !m.IncludeClusterAuthorizedOperations {
			return nil, post
		}
		return nil, func(resp kmsg.Response) kmsg.Response {
			if post != nil {
				resp = post(resp)
			}
			r := resp.(*kmsg.MetadataResponse)
			r.AuthorizedOperations = z.operations(kmsg.ACLResourceTypeCluster, clusterName, r.AuthorizedOperations)
			for i := range r.Topics {
				if t := &r.Topics[i]; t.Topic != nil {
					t.AuthorizedOperations = z.operations(kmsg.ACLResourceTypeTopic, *t.Topic, t.AuthorizedOperations)
				}
			}
			return r
		}
	case *kmsg.CreateTopicsRequest:
		return authorizeCreateTopics(z, m)
	case *kmsg.DeleteTopicsRequest:
		return authorizeDeleteTopics(z, m)
	case *kmsg.CreatePartitionsRequest:
		return authorizeCreatePartitions(z, m)
	case *kmsg.DescribeConfigsRequest:
		return authorizeDescribeConfigs(z, m)
	case *kmsg.AlterConfigsRequest:
		return authorizeAlterConfigs(z, m)
	case *kmsg.IncrementalAlterConfigsRequest:
		return authorizeIncrementalAlterConfigs(z, m)

	case *kmsg.AlterReplicaLogDirsRequest:
		if !z.cluster(opAlter) {
			return alterReplicaLogDirsAnswer(m, func(string, storage.TopicPartition) int16 { return codeClusterDenied }), nil
		}
	case *kmsg.DescribeLogDirsRequest:
		if !z.cluster(opDescribe) {
			resp := m.ResponseKind().(*kmsg.DescribeLogDirsResponse)
			resp.ErrorCode = codeClusterDenied
			return resp, nil
		}
	case *kmsg.DescribeACLsRequest, *kmsg.DescribeUserSCRAMCredentialsRequest, *kmsg.DescribeQuorumRequest, *kmsg.ListPartitionReassignmentsRequest:
		if !z.cluster(opDescribe) {
			return clusterDenied(m.(kmsg.Request)), nil
		}
	case *kmsg.DescribeClientQuotasRequest, *kmsg.ListConfigResourcesRequest:
		if !z.cluster(opDescribeConfigs) {
			return clusterDenied(m), nil
		}
	case *kmsg.AlterClientQuotasRequest:
		if !z.cluster(opAlterConfigs) {
			return clusterDenied(m), nil
		}
	case *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.ElectLeadersRequest,
		*kmsg.AlterPartitionAssignmentsRequest, *kmsg.UnregisterBrokerRequest, *kmsg.AddRaftVoterRequest, *kmsg.RemoveRaftVoterRequest,
		*kmsg.UpdateFeaturesRequest:
		if !z.cluster(opAlter) {
			return clusterDenied(m.(kmsg.Request)), nil
		}
	case *kmsg.WriteTxnMarkersRequest:
		if !z.cluster(opClusterAction) {
			return clusterDenied(m), nil
		}

	case *kmsg.FindCoordinatorRequest:
		return authorizeFindCoordinator(z, m)
	case *kmsg.JoinGroupRequest:
		if !z.group(opRead, m.Group) {
			return groupDenied(m), nil
		}
	case *kmsg.SyncGroupRequest:
		if !z.group(opRead, m.Group) {
			return groupDenied(m), nil
		}
	case *kmsg.HeartbeatRequest:
		if !z.group(opRead, m.Group) {
			return groupDenied(m), nil
		}
	case *kmsg.LeaveGroupRequest:
		if !z.group(opRead, m.Group) {
			return groupDenied(m), nil
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if !z.group(opRead, m.Group) {
			return groupDenied(m), nil
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		return describeGroupsAuthz(z, m, &m.Groups, m.IncludeAuthorizedOperations, func(resp kmsg.Response, g string) {
			r := resp.(*kmsg.ConsumerGroupDescribeResponse)
			e := kmsg.NewConsumerGroupDescribeResponseGroup()
			e.Group, e.ErrorCode = g, codeGroupDenied
			r.Groups = append(r.Groups, e)
		}, func(resp kmsg.Response, each func(group string, code int16, ops *int32)) {
			for i := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
				g := &resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[i]
				each(g.Group, g.ErrorCode, &g.AuthorizedOperations)
			}
		})
	case *kmsg.OffsetCommitRequest:
		if !z.group(opRead, m.Group) {
			return denyTopicPartitions(m, codeGroupDenied, offsetCommitTopics), nil
		}
		return topicPartitionsAuthz(m, opRead, z, offsetCommitTopics)
	case *kmsg.OffsetDeleteRequest:
		if !z.group(opDelete, m.Group) {
			return groupDenied(m), nil
		}
		return topicPartitionsAuthz(m, opRead, z, offsetDeleteTopics)
	case *kmsg.OffsetFetchRequest:
		return authorizeOffsetFetch(z, m)
	case *kmsg.DescribeGroupsRequest:
		return describeGroupsAuthz(z, m, &m.Groups, m.IncludeAuthorizedOperations, func(resp kmsg.Response, g string) {
			r := resp.(*kmsg.DescribeGroupsResponse)
			e := kmsg.NewDescribeGroupsResponseGroup()
			e.Group, e.ErrorCode, e.AuthorizedOperations = g, codeGroupDenied, -2147483648
			r.Groups = append(r.Groups, e)
		}, func(resp kmsg.Response, each func(group string, code int16, ops *int32)) {
			for i := range resp.(*kmsg.DescribeGroupsResponse).Groups {
				g := &resp.(*kmsg.DescribeGroupsResponse).Groups[i]
				each(g.Group, g.ErrorCode, &g.AuthorizedOperations)
			}
		})
	case *kmsg.DeleteGroupsRequest:
		return namesAuthz(z, &m.Groups, func(g string) bool { return z.group(opDelete, g) }, func(resp kmsg.Response, g string) {
			r := resp.(*kmsg.DeleteGroupsResponse)
			e := kmsg.NewDeleteGroupsResponseGroup()
			e.Group, e.ErrorCode = g, codeGroupDenied
			r.Groups = append(r.Groups, e)
		}, m)
	case *kmsg.ListGroupsRequest:
		if z.quiet(opDescribe, kmsg.ACLResourceTypeCluster, clusterName) {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) kmsg.Response {
			r := resp.(*kmsg.ListGroupsResponse)
			r.Groups = slices.DeleteFunc(r.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
				return !z.quiet(opDescribe, kmsg.ACLResourceTypeGroup, g.Group)
			})
			return r
		}

	case *kmsg.InitProducerIDRequest:
		if m.TransactionalID != nil {
			if !z.txn(opWrite, *m.TransactionalID) {
				return txnDenied(m), nil
			}
		} else if !z.cluster(opIdempotentWrite) && !z.b.authorizer.AuthorizeAny(z.img, z.principal, z.host, opWrite, kmsg.ACLResourceTypeTopic) {
			return clusterDenied(m), nil
		}
	case *kmsg.AddPartitionsToTxnRequest:
		return authorizeAddPartitionsToTxn(z, m), nil
	case *kmsg.AddOffsetsToTxnRequest:
		switch {
		case !z.txn(opWrite, m.TransactionalID):
			return txnDenied(m), nil
		case !z.group(opRead, m.Group):
			return groupDenied(m), nil
		}
	case *kmsg.EndTxnRequest:
		if !z.txn(opWrite, m.TransactionalID) {
			return txnDenied(m), nil
		}
	case *kmsg.TxnOffsetCommitRequest:
		switch {
		case !z.txn(opWrite, m.TransactionalID):
			return denyTopicPartitions(m, codeTxnDenied, txnOffsetCommitTopics), nil
		case !z.group(opRead, m.Group):
			return denyTopicPartitions(m, codeGroupDenied, txnOffsetCommitTopics), nil
		}
		return topicPartitionsAuthz(m, opRead, z, txnOffsetCommitTopics)
	case *kmsg.DescribeTransactionsRequest:
		return namesAuthz(z, &m.TransactionalIDs, func(id string) bool { return z.txn(opDescribe, id) }, func(resp kmsg.Response, id string) {
			r := resp.(*kmsg.DescribeTransactionsResponse)
			e := kmsg.NewDescribeTransactionsResponseTransactionState()
			e.TransactionalID, e.ErrorCode, e.ProducerID, e.ProducerEpoch = id, codeTxnDenied, -1, -1
			r.TransactionStates = append(r.TransactionStates, e)
		}, m)
	case *kmsg.ListTransactionsRequest:
		return nil, func(resp kmsg.Response) kmsg.Response {
			r := resp.(*kmsg.ListTransactionsResponse)
			r.TransactionStates = slices.DeleteFunc(r.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
				return !z.quiet(opDescribe, kmsg.ACLResourceTypeTransactionalId, s.TransactionalID)
			})
			return r
		}
	}
	return nil, nil
}

// clusterDenied answers req with CLUSTER_AUTHORIZATION_FAILED in every
// error field.
func clusterDenied(req kmsg.Request) kmsg.Response { return deniedResponse(req, codeClusterDenied) }

// groupDenied answers a group request with GROUP_AUTHORIZATION_FAILED.
func groupDenied(req kmsg.Request) kmsg.Response { return deniedResponse(req, codeGroupDenied) }

// txnDenied answers a transaction request with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func txnDenied(req kmsg.Request) kmsg.Response { return deniedResponse(req, codeTxnDenied) }

// deniedResponse answers a request denied as a whole: code in its
// top-level error field, or in the entry of everything it named where the
// response has no top-level one.
func deniedResponse(req kmsg.Request, code int16) kmsg.Response {
	switch m := req.(type) {
	case *kmsg.ElectLeadersRequest:
		resp := m.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = code
		for _, t := range m.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.WriteTxnMarkersRequest:
		resp := m.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, mk := range m.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = mk.ProducerID
			for _, t := range mk.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp
	case *kmsg.OffsetDeleteRequest:
		resp := m.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.InitProducerIDRequest:
		resp := m.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	}
	// The rest have a top-level error code (or one per entry, which
	// errorResponse fills in for the forwarded ones).
	resp := errorResponse(req, code)
	if fields := errorFields(resp); len(fields) == 0 {
		setTopLevelError(resp, code)
	}
	return resp
}

// setTopLevelError sets the ErrorCode field of the responses that have one
// and that errorFields does not know (the group and transaction APIs).
func setTopLevelError(resp kmsg.Response, code int16) {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = code, -1
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode, r.MemberEpoch = code, -1
	case *kmsg.AddOffsetsToTxnResponse:
		r.ErrorCode = code
	case *kmsg.EndTxnResponse:
		r.ErrorCode = code
	case *kmsg.DescribeACLsResponse:
		r.ErrorCode = code
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		r.ErrorCode = code
	case *kmsg.DescribeClientQuotasResponse:
		r.ErrorCode = code
	case *kmsg.ListConfigResourcesResponse:
		r.ErrorCode = code
	case *kmsg.ListPartitionReassignmentsResponse:
		r.ErrorCode = code
	}
}

// topicsOf reads and rewrites the topics of a request and adds denied
// entries to its response: one per request type with topics and
// partitions.
type topicsOf[R kmsg.Request] struct {
	// names lists each topic of the request (by index).
	names func(z *requestAuthz, m R) []string
	// keep keeps the topics whose index keep says.
	keep func(m R, keep func(i int) bool)
	// deny adds to resp the request's topic i, each partition with code.
	deny func(m R, i int, resp kmsg.Response, code int16)
}

// topicPartitionsAuthz is the usual per-topic check: topics not allowed op
// are taken out of the request and answered with
// TOPIC_AUTHORIZATION_FAILED for each of their partitions.
func topicPartitionsAuthz[R kmsg.Request](m R, op kmsg.ACLOperation, z *requestAuthz, t topicsOf[R]) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	names := t.names(z, m)
	var denied []int
	for i, name := range names {
		if !z.topic(op, name) {
			denied = append(denied, i)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	// The denied topics' entries are built now, from the request as it
	// came; the handler then sees only the allowed ones.
	add := func(resp kmsg.Response) kmsg.Response {
		for _, i := range denied {
			t.deny(m, i, resp, codeTopicDenied)
		}
		return resp
	}
	held := m.ResponseKind()
	add(held)
	t.keep(m, func(i int) bool { return !slices.Contains(denied, i) })
	if len(denied) == len(names) {
		return held, nil
	}
	return nil, func(resp kmsg.Response) kmsg.Response { return mergeTopics(resp, held) }
}

// denyTopicPartitions answers every partition of the request with code.
func denyTopicPartitions[R kmsg.Request](m R, code int16, t topicsOf[R]) kmsg.Response {
	resp := m.ResponseKind()
	for i := range t.names(nil, m) {
		t.deny(m, i, resp, code)
	}
	return resp
}

// mergeTopics appends the topic entries of held (the denied ones) to
// resp.
func mergeTopics(resp, held kmsg.Response) kmsg.Response {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		r.Topics = append(r.Topics, held.(*kmsg.ProduceResponse).Topics...)
	case *kmsg.ListOffsetsResponse:
		r.Topics = append(r.Topics, held.(*kmsg.ListOffsetsResponse).Topics...)
	case *kmsg.DescribeProducersResponse:
		r.Topics = append(r.Topics, held.(*kmsg.DescribeProducersResponse).Topics...)
	case *kmsg.DeleteRecordsResponse:
		r.Topics = append(r.Topics, held.(*kmsg.DeleteRecordsResponse).Topics...)
	case *kmsg.OffsetForLeaderEpochResponse:
		r.Topics = append(r.Topics, held.(*kmsg.OffsetForLeaderEpochResponse).Topics...)
	case *kmsg.OffsetCommitResponse:
		r.Topics = append(r.Topics, held.(*kmsg.OffsetCommitResponse).Topics...)
	case *kmsg.TxnOffsetCommitResponse:
		r.Topics = append(r.Topics, held.(*kmsg.TxnOffsetCommitResponse).Topics...)
	case *kmsg.OffsetDeleteResponse:
		r.Topics = append(r.Topics, held.(*kmsg.OffsetDeleteResponse).Topics...)
	}
	return resp
}

var listOffsetsTopics = topicsOf[*kmsg.ListOffsetsRequest]{
	names: func(_ *requestAuthz, m *kmsg.ListOffsetsRequest) []string {
		return namesOf(m.Topics, func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic })
	},
	keep: func(m *kmsg.ListOffsetsRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.ListOffsetsRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = m.Topics[i].Topic
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

var describeProducersTopics = topicsOf[*kmsg.DescribeProducersRequest]{
	names: func(_ *requestAuthz, m *kmsg.DescribeProducersRequest) []string {
		return namesOf(m.Topics, func(t kmsg.DescribeProducersRequestTopic) string { return t.Topic })
	},
	keep: func(m *kmsg.DescribeProducersRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.DescribeProducersRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.DescribeProducersResponse)
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = m.Topics[i].Topic
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

var deleteRecordsTopics = topicsOf[*kmsg.DeleteRecordsRequest]{
	names: func(_ *requestAuthz, m *kmsg.DeleteRecordsRequest) []string {
		return namesOf(m.Topics, func(t kmsg.DeleteRecordsRequestTopic) string { return t.Topic })
	},
	keep: func(m *kmsg.DeleteRecordsRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.DeleteRecordsRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.DeleteRecordsResponse)
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = m.Topics[i].Topic
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

var offsetForLeaderEpochTopics = topicsOf[*kmsg.OffsetForLeaderEpochRequest]{
	names: func(_ *requestAuthz, m *kmsg.OffsetForLeaderEpochRequest) []string {
		return namesOf(m.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic })
	},
	keep: func(m *kmsg.OffsetForLeaderEpochRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.OffsetForLeaderEpochRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.OffsetForLeaderEpochResponse)
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = m.Topics[i].Topic
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

var offsetCommitTopics = topicsOf[*kmsg.OffsetCommitRequest]{
	names: func(_ *requestAuthz, m *kmsg.OffsetCommitRequest) []string {
		return namesOf(m.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic })
	},
	keep: func(m *kmsg.OffsetCommitRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.OffsetCommitRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.OffsetCommitResponse)
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = m.Topics[i].Topic
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

var txnOffsetCommitTopics = topicsOf[*kmsg.TxnOffsetCommitRequest]{
	names: func(_ *requestAuthz, m *kmsg.TxnOffsetCommitRequest) []string {
		return namesOf(m.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic })
	},
	keep: func(m *kmsg.TxnOffsetCommitRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.TxnOffsetCommitRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.TxnOffsetCommitResponse)
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = m.Topics[i].Topic
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

var offsetDeleteTopics = topicsOf[*kmsg.OffsetDeleteRequest]{
	names: func(_ *requestAuthz, m *kmsg.OffsetDeleteRequest) []string {
		return namesOf(m.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic })
	},
	keep: func(m *kmsg.OffsetDeleteRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.OffsetDeleteRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.OffsetDeleteResponse)
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = m.Topics[i].Topic
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

var produceTopics = topicsOf[*kmsg.ProduceRequest]{
	names: func(z *requestAuthz, m *kmsg.ProduceRequest) []string {
		out := make([]string, len(m.Topics))
		for i, t := range m.Topics {
			out[i] = t.Topic
			if z != nil {
				out[i] = z.topicName(t.Topic, t.TopicID)
			}
		}
		return out
	},
	keep: func(m *kmsg.ProduceRequest, keep func(int) bool) { m.Topics = keepIndexed(m.Topics, keep) },
	deny: func(m *kmsg.ProduceRequest, i int, resp kmsg.Response, code int16) {
		r := resp.(*kmsg.ProduceResponse)
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = m.Topics[i].Topic, m.Topics[i].TopicID
		for _, p := range m.Topics[i].Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogStartOffset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	},
}

// authorizeProduce: WRITE on the transactional id, then on each topic.
// acks=0 gets no answer either way, as in Kafka.
func authorizeProduce(z *requestAuthz, m *kmsg.ProduceRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	if m.TransactionID != nil && !z.txn(opWrite, *m.TransactionID) {
		if m.Acks == 0 {
			m.Topics = nil
			return nil, nil
		}
		return denyTopicPartitions(m, codeTxnDenied, produceTopics), nil
	}
	deny, post := topicPartitionsAuthz(m, opWrite, z, produceTopics)
	if m.Acks == 0 && deny != nil {
		return nil, nil // nothing allowed, nothing answered
	}
	return deny, post
}

// namesOf lists the name of each element.
func namesOf[T any](s []T, name func(T) string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = name(x)
	}
	return out
}

// keepIndexed keeps the elements whose index keep accepts.
func keepIndexed[T any](s []T, keep func(int) bool) []T {
	out := s[:0:0]
	for i, x := range s {
		if keep(i) {
			out = append(out, x)
		}
	}
	return out
}

// namesAuthz checks a request that names groups or transactional ids:
// those allowed stay in *names, the others get deny's entry in the
// response.
func namesAuthz(z *requestAuthz, names *[]string, allowed func(string) bool, deny func(kmsg.Response, string), req kmsg.Request) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	var denied []string
	kept := (*names)[:0:0]
	for _, n := range *names {
		if allowed(n) {
			kept = append(kept, n)
		} else {
			denied = append(denied, n)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	*names = kept
	add := func(resp kmsg.Response) kmsg.Response {
		for _, n := range denied {
			deny(resp, n)
		}
		return resp
	}
	if len(kept) == 0 {
		return add(req.ResponseKind()), nil
	}
	return nil, add
}

// authorizeMetadata: DESCRIBE on each topic named, CREATE on the cluster or
// the topic for one to be auto-created; a request for every topic sees
// only those it may describe. Unknown topics ids are left to the handler.
func authorizeMetadata(z *requestAuthz, m *kmsg.MetadataRequest) func(kmsg.Response) kmsg.Response {
	if m.Topics == nil {
		return func(resp kmsg.Response) kmsg.Response {
			r := resp.(*kmsg.MetadataResponse)
			r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.MetadataResponseTopic) bool {
				return t.Topic != nil && !z.quiet(opDescribe, kmsg.ACLResourceTypeTopic, *t.Topic)
			})
			return r
		}
	}
	autoCreate := m.AllowAutoTopicCreation && z.b.cfg.AutoCreateTopicsEnable
	clusterCreate := autoCreate && z.quiet(opCreate, kmsg.ACLResourceTypeCluster, clusterName)
	type deniedTopic struct {
		name string
		id   [16]byte
	}
	var denied []deniedTopic
	m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.MetadataRequestTopic) bool {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		name = z.topicName(name, t.TopicID)
		if name == "" {
			return false // an unknown topic id: the handler says so
		}
		ok := z.topic(opDescribe, name)
		if ok && autoCreate && !clusterCreate {
			if _, exists := z.img.Topic(name); !exists {
				ok = z.topic(opCreate, name)
			}
		}
		if !ok {
			denied = append(denied, deniedTopic{name, t.TopicID})
		}
		return !ok
	})
	if len(denied) == 0 {
		return nil
	}
	return func(resp kmsg.Response) kmsg.Response {
		r := resp.(*kmsg.MetadataResponse)
		for _, d := range denied {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode = kmsg.StringPtr(d.name), d.id, codeTopicDenied
			t.AuthorizedOperations = -2147483648
			r.Topics = append(r.Topics, t)
		}
		return r
	}
}

// authorizeCreateTopics: CREATE on the cluster, or on each topic.
func authorizeCreateTopics(z *requestAuthz, m *kmsg.CreateTopicsRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	if z.quiet(opCreate, kmsg.ACLResourceTypeCluster, clusterName) {
		return nil, nil
	}
	var denied []string
	m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
		if z.topic(opCreate, t.Topic) {
			return false
		}
		denied = append(denied, t.Topic)
		return true
	})
	return deniedEntries(len(m.Topics) == 0, m, func(resp kmsg.Response) {
		r := resp.(*kmsg.CreateTopicsResponse)
		for _, name := range denied {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode = name, codeTopicDenied
			t.ErrorMessage = kmsg.StringPtr("Authorization failed.")
			t.NumPartitions, t.ReplicationFactor = -1, -1
			r.Topics = append(r.Topics, t)
		}
	}, len(denied))
}

// authorizeDeleteTopics: DELETE on each topic, named or by id.
func authorizeDeleteTopics(z *requestAuthz, m *kmsg.DeleteTopicsRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	type deniedTopic struct {
		name *string
		id   [16]byte
	}
	var denied []deniedTopic
	m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.DeleteTopicsRequestTopic) bool {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if name = z.topicName(name, t.TopicID); name == "" || z.topic(opDelete, name) {
			return false // unknown: the handler says so
		}
		denied = append(denied, deniedTopic{t.Topic, t.TopicID})
		return true
	})
	m.TopicNames = slices.DeleteFunc(m.TopicNames, func(name string) bool {
		if z.topic(opDelete, name) {
			return false
		}
		denied = append(denied, deniedTopic{name: kmsg.StringPtr(name)})
		return true
	})
	return deniedEntries(len(m.Topics)+len(m.TopicNames) == 0, m, func(resp kmsg.Response) {
		r := resp.(*kmsg.DeleteTopicsResponse)
		for _, d := range denied {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode = d.name, d.id, codeTopicDenied
			r.Topics = append(r.Topics, t)
		}
	}, len(denied))
}

// authorizeCreatePartitions: ALTER on each topic.
func authorizeCreatePartitions(z *requestAuthz, m *kmsg.CreatePartitionsRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	var denied []string
	m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool {
		if z.topic(opAlter, t.Topic) {
			return false
		}
		denied = append(denied, t.Topic)
		return true
	})
	return deniedEntries(len(m.Topics) == 0, m, func(resp kmsg.Response) {
		r := resp.(*kmsg.CreatePartitionsResponse)
		for _, name := range denied {
			t := kmsg.NewCreatePartitionsResponseTopic()
			t.Topic, t.ErrorCode = name, codeTopicDenied
			r.Topics = append(r.Topics, t)
		}
	}, len(denied))
}

// deniedEntries answers with add's entries: as the whole response when
// nothing is left to serve (none), else after the handler's, unless
// nothing was denied.
func deniedEntries(none bool, req kmsg.Request, add func(kmsg.Response), denied int) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	if denied == 0 {
		return nil, nil
	}
	if none {
		resp := req.ResponseKind()
		add(resp)
		return resp, nil
	}
	return nil, func(resp kmsg.Response) kmsg.Response { add(resp); return resp }
}

// configResourceAuthz is the operation's check of one config resource
// (topic, broker or broker logger, group) and the code when denied.
func configResourceAuthz(z *requestAuthz, op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) (bool, int16) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return z.topic(op, name), codeTopicDenied
	case kmsg.ConfigResourceTypeGroupConfig:
		return z.group(op, name), codeGroupDenied
	default: // brokers, broker loggers, client metrics
		return z.cluster(op), codeClusterDenied
	}
}

func authorizeDescribeConfigs(z *requestAuthz, m *kmsg.DescribeConfigsRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	var denied []kmsg.DescribeConfigsResponseResource
	m.Resources = slices.DeleteFunc(m.Resources, func(r kmsg.DescribeConfigsRequestResource) bool {
		ok, code := configResourceAuthz(z, opDescribeConfigs, r.ResourceType, r.ResourceName)
		if !ok {
			e := kmsg.NewDescribeConfigsResponseResource()
			e.ResourceType, e.ResourceName, e.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, e)
		}
		return !ok
	})
	return deniedEntries(len(m.Resources) == 0, m, func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeConfigsResponse)
		r.Resources = append(r.Resources, denied...)
	}, len(denied))
}

func authorizeAlterConfigs(z *requestAuthz, m *kmsg.AlterConfigsRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	var denied []kmsg.AlterConfigsResponseResource
	m.Resources = slices.DeleteFunc(m.Resources, func(r kmsg.AlterConfigsRequestResource) bool {
		ok, code := configResourceAuthz(z, opAlterConfigs, r.ResourceType, r.ResourceName)
		if !ok {
			e := kmsg.NewAlterConfigsResponseResource()
			e.ResourceType, e.ResourceName, e.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, e)
		}
		return !ok
	})
	return deniedEntries(len(m.Resources) == 0, m, func(resp kmsg.Response) {
		r := resp.(*kmsg.AlterConfigsResponse)
		r.Resources = append(r.Resources, denied...)
	}, len(denied))
}

func authorizeIncrementalAlterConfigs(z *requestAuthz, m *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	m.Resources = slices.DeleteFunc(m.Resources, func(r kmsg.IncrementalAlterConfigsRequestResource) bool {
		ok, code := configResourceAuthz(z, opAlterConfigs, r.ResourceType, r.ResourceName)
		if !ok {
			e := kmsg.NewIncrementalAlterConfigsResponseResource()
			e.ResourceType, e.ResourceName, e.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, e)
		}
		return !ok
	})
	return deniedEntries(len(m.Resources) == 0, m, func(resp kmsg.Response) {
		r := resp.(*kmsg.IncrementalAlterConfigsResponse)
		r.Resources = append(r.Resources, denied...)
	}, len(denied))
}

// authorizeFindCoordinator: DESCRIBE on the group or transactional id,
// each of them in a batched (v4+) request.
func authorizeFindCoordinator(z *requestAuthz, m *kmsg.FindCoordinatorRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	allowed := func(key string) (bool, int16) {
		if m.CoordinatorType == 1 {
			return z.txn(opDescribe, key), codeTxnDenied
		}
		return z.group(opDescribe, key), codeGroupDenied
	}
	if m.Version < 4 {
		if ok, code := allowed(m.CoordinatorKey); !ok {
			resp := m.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
			return resp, nil
		}
		return nil, nil
	}
	var denied []kmsg.FindCoordinatorResponseCoordinator
	m.CoordinatorKeys = slices.DeleteFunc(m.CoordinatorKeys, func(key string) bool {
		ok, code := allowed(key)
		if !ok {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.ErrorCode, c.NodeID, c.Port = key, code, -1, -1
			denied = append(denied, c)
		}
		return !ok
	})
	return deniedEntries(len(m.CoordinatorKeys) == 0, m, func(resp kmsg.Response) {
		r := resp.(*kmsg.FindCoordinatorResponse)
		r.Coordinators = append(r.Coordinators, denied...)
	}, len(denied))
}

// authorizeOffsetFetch: DESCRIBE on the group (each group of a v8+
// request), then on each topic: a topic named and denied answers
// TOPIC_AUTHORIZATION_FAILED, a fetch of every committed offset leaves the
// denied topics out.
func authorizeOffsetFetch(z *requestAuthz, m *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	if m.Version < 8 {
		if !z.group(opDescribe, m.Group) {
			resp := m.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = codeGroupDenied
			for _, t := range m.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, codeGroupDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		var denied []kmsg.OffsetFetchResponseTopic
		m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.OffsetFetchRequestTopic) bool {
			if z.topic(opDescribe, t.Topic) {
				return false
			}
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
			return true
		})
		return nil, func(resp kmsg.Response) kmsg.Response {
			r := resp.(*kmsg.OffsetFetchResponse)
			if m.Topics == nil {
				r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
					return !z.quiet(opDescribe, kmsg.ACLResourceTypeTopic, t.Topic)
				})
			}
			r.Topics = append(r.Topics, denied...)
			return r
		}
	}
	deniedGroups := map[string]bool{}
	deniedTopics := map[string][]kmsg.OffsetFetchResponseGroupTopic{}
	for gi := range m.Groups {
		g := &m.Groups[gi]
		if !z.group(opDescribe, g.Group) {
			deniedGroups[g.Group] = true
			continue
		}
		g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool {
			if z.topic(opDescribe, t.Topic) {
				return false
			}
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			deniedTopics[g.Group] = append(deniedTopics[g.Group], rt)
			return true
		})
	}
	allTopics := map[string]bool{}
	for _, g := range m.Groups {
		allTopics[g.Group] = g.Topics == nil
	}
	m.Groups = slices.DeleteFunc(m.Groups, func(g kmsg.OffsetFetchRequestGroup) bool { return deniedGroups[g.Group] })
	add := func(resp kmsg.Response) kmsg.Response {
		r := resp.(*kmsg.OffsetFetchResponse)
		for i := range r.Groups {
			g := &r.Groups[i]
			if allTopics[g.Group] {
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
					return !z.quiet(opDescribe, kmsg.ACLResourceTypeTopic, t.Topic)
				})
			}
			g.Topics = append(g.Topics, deniedTopics[g.Group]...)
		}
		for name := range deniedGroups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = name, codeGroupDenied
			r.Groups = append(r.Groups, g)
		}
		return r
	}
	if len(m.Groups) == 0 {
		return add(m.ResponseKind()), nil
	}
	return nil, add
}

// authorizeAddPartitionsToTxn: WRITE on the transactional id, then on each
// topic; as Kafka, if any topic is denied nothing is added: the denied
// partitions answer TOPIC_AUTHORIZATION_FAILED, the others
// OPERATION_NOT_ATTEMPTED.
func authorizeAddPartitionsToTxn(z *requestAuthz, m *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	if m.Version >= 4 {
		// The brokers' form (KIP-890): Kafka's CLUSTER_ACTION.
		if !z.cluster(opClusterAction) {
			resp := m.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			resp.ErrorCode = codeClusterDenied
			return resp
		}
		return nil
	}
	idOK := z.txn(opWrite, m.TransactionalID)
	denied := map[string]bool{}
	for _, t := range m.Topics {
		if idOK && !z.topic(opWrite, t.Topic) {
			denied[t.Topic] = true
		}
	}
	if idOK && len(denied) == 0 {
		return nil
	}
	resp := m.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		code := kerr.OperationNotAttempted.Code
		switch {
		case !idOK:
			code = codeTxnDenied
		case denied[t.Topic]:
			code = codeTopicDenied
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// describeGroupsAuthz authorizes DescribeGroups and ConsumerGroupDescribe:
// DESCRIBE on each group, a denied one answered with
// GROUP_AUTHORIZATION_FAILED (denied), and, when the request asks for
// them, each described group's authorized operations narrowed to the
// principal's (KIP-430); groups visits the response's groups.
func describeGroupsAuthz(z *requestAuthz, m kmsg.Request, names *[]string, includeOps bool, denied func(kmsg.Response, string),
	groups func(kmsg.Response, func(group string, code int16, ops *int32))) (kmsg.Response, func(kmsg.Response) kmsg.Response) {
	deny, post := namesAuthz(z, names, func(g string) bool { return z.group(opDescribe, g) }, denied, m)
	if deny != nil || !includeOps {
		return deny, post
	}
	return nil, func(resp kmsg.Response) kmsg.Response {
		if post != nil {
			resp = post(resp)
		}
		groups(resp, func(group string, code int16, ops *int32) {
			if code == 0 {
				*ops = z.operations(kmsg.ACLResourceTypeGroup, group, *ops)
			}
		})
		return resp
	}
}
