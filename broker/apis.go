package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

// apiSpec is what the broker serves of one API key.
type apiSpec struct {
	served bool
	// min and max bound the versions Handle accepts; a request outside
	// them closes the connection (network.Handler.SupportedVersions).
	min, max int16
	// advertisedMin is the minimum ApiVersions reports. It differs from
	// min only for Produce (KAFKA-18659).
	advertisedMin int16
}

// apiTable is indexed by API key. Every range is capped at kmsg's maximum
// (the network layer could not decode more) and lists only versions whose
// every field the handler honours; see each handle_<api>.go.
var apiTable = func() []apiSpec {
	ranges := []struct{ key, min, max int16 }{
		{0, 3, 13}, // Produce (v0–v2 advertised, refused)
		{1, network.MinFetchVersion, network.MaxFetchVersion}, // Fetch: what the zero-copy encoder writes
		{2, 1, 11}, // ListOffsets
		{3, 0, 13}, // Metadata
		{8, 0, 9},  // OffsetCommit (v10 topic ids: not yet)
		{9, 0, 9},  // OffsetFetch (v10 topic ids: not yet)
		{10, 0, 5}, // FindCoordinator (groups, transactions)
		{11, 0, 9}, // JoinGroup
		{12, 0, 4}, // Heartbeat
		{13, 0, 5}, // LeaveGroup
		{14, 0, 5}, // SyncGroup
		{15, 0, 5}, // DescribeGroups
		{16, 0, 5}, // ListGroups
		{17, 0, 1}, // SaslHandshake (the network's on SASL listeners; ILLEGAL_SASL_STATE elsewhere, as Kafka)
		{18, 0, 5}, // ApiVersions
		{19, 0, 7}, // CreateTopics (forwarded)
		{20, 0, 6}, // DeleteTopics (forwarded)
		{21, 0, 2}, // DeleteRecords
		{22, 0, 5}, // InitProducerId
		{23, 0, 4}, // OffsetForLeaderEpoch
		{24, 0, 5}, // AddPartitionsToTxn (v4+: brokers' verification, KIP-890 part 1)
		{25, 0, 4}, // AddOffsetsToTxn (v4 TRANSACTION_ABORTABLE)
		{26, 0, 5}, // EndTxn (v4 TRANSACTION_ABORTABLE, v5 transaction version 2: KIP-890 part 2)
		{27, 0, 1}, // WriteTxnMarkers (v2's transaction version field: not used)
		{28, 0, 5}, // TxnOffsetCommit (v4 TRANSACTION_ABORTABLE, v5 adds the offsets partition: KIP-890 part 2)
		{29, 0, 3}, // DescribeAcls (SECURITY_DISABLED without an authorizer)
		{30, 0, 3}, // CreateAcls (likewise)
		{31, 0, 3}, // DeleteAcls (likewise)
		{32, 0, 4}, // DescribeConfigs
		{33, 0, 2}, // AlterConfigs (forwarded)
		{34, 0, 2}, // AlterReplicaLogDirs
		{35, 0, 5}, // DescribeLogDirs
		{36, 0, 2}, // SaslAuthenticate (likewise)
		{37, 0, 3}, // CreatePartitions (forwarded)
		{38, 0, 3}, // CreateDelegationToken (forwarded)
		{39, 0, 2}, // RenewDelegationToken (forwarded)
		{40, 0, 2}, // ExpireDelegationToken (forwarded)
		{41, 0, 3}, // DescribeDelegationToken
		{42, 0, 2}, // DeleteGroups
		{43, 0, 2}, // ElectLeaders (forwarded)
		{44, 0, 1}, // IncrementalAlterConfigs (forwarded)
		{45, 0, 1}, // AlterPartitionReassignments (forwarded)
		{46, 0, 0}, // ListPartitionReassignments (forwarded)
		{47, 0, 0}, // OffsetDelete
		{48, 0, 1}, // DescribeClientQuotas
		{49, 0, 1}, // AlterClientQuotas (forwarded)
		{50, 0, 0}, // DescribeUserScramCredentials
		{51, 0, 0}, // AlterUserScramCredentials (forwarded)
		{55, 0, 2}, // DescribeQuorum (forwarded)
		{57, 0, 2}, // UpdateFeatures (forwarded)
		{60, 0, 2}, // DescribeCluster
		{61, 0, 0}, // DescribeProducers
		{64, 0, 0}, // UnregisterBroker (forwarded)
		{65, 0, 0}, // DescribeTransactions
		{66, 0, 2}, // ListTransactions
		{68, 0, 1}, // ConsumerGroupHeartbeat (KIP-848; advertised at group.version 1+)
		{69, 0, 1}, // ConsumerGroupDescribe (KIP-848; advertised at group.version 1+)
		{74, 0, 1}, // ListConfigResources (KIP-1142; no client metrics)
		{75, 0, 0}, // DescribeTopicPartitions (KIP-966; no ELRs)
		{80, 0, 1}, // AddRaftVoter (forwarded)
		{81, 0, 0}, // RemoveRaftVoter (forwarded)
	}
	var maxKey int16
	for _, r := range ranges {
		maxKey = max(maxKey, r.key)
	}
	t := make([]apiSpec, maxKey+1)
	for _, r := range ranges {
		hi := r.max
		if req := kmsg.RequestForKey(r.key); req != nil {
			hi = min(hi, req.MaxVersion())
		}
		t[r.key] = apiSpec{served: true, min: r.min, max: hi, advertisedMin: r.min}
	}
	// Kafka 4 refuses Produce v0–v2 (KIP-896) but still advertises v0:
	// librdkafka before 2.10 disables compression when the broker's
	// minimum Produce version is above 0 (librdkafka#4956, KAFKA-18659).
	// A v0–v2 request is outside SupportedVersions, so the network layer
	// logs it and closes the connection, as Kafka's socket server does.
	t[0].advertisedMin = 0
	return t
}()
