package broker

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// With the StandardAuthorizer, each API asks for what Kafka's does and
// answers a refusal in the shape clients expect: the topics (groups,
// transactional ids) refused get the authorization error, the others in
// the same request are served; requests for everything show only what the
// principal may describe. The principal here is User:ANONYMOUS
// (PLAINTEXT), allowed everything on the topic "open", the group "g" and
// the transactional id "tx", nothing else.
func TestAuthorizationPerAPI(t *testing.T) {
	c := newTestCluster(t, withConfig("authorizer.class.name="+StandardAuthorizerClass))
	allow := func(typ kmsg.ACLResourceType, name string) *metadata.AccessControlEntryRecord {
		return &metadata.AccessControlEntryRecord{ID: metadata.NewUuid(), ResourceType: int8(typ), ResourceName: name,
			PatternType: int8(kmsg.ACLResourcePatternTypeLiteral), Principal: "User:ANONYMOUS", Host: "*",
			Operation: int8(kmsg.ACLOperationAll), PermissionType: int8(kmsg.ACLPermissionTypeAllow)}
	}
	// Everything on the cluster while the test sets up, then not.
	setup := allow(kmsg.ACLResourceTypeCluster, clusterName)
	c.meta.commit(setup)
	c.createTopic("open", 1, nil)
	c.createTopic("closed", 1, nil)
	c.meta.commit(&metadata.RemoveAccessControlEntryRecord{ID: setup.ID},
		allow(kmsg.ACLResourceTypeTopic, "open"), allow(kmsg.ACLResourceTypeGroup, "g"), allow(kmsg.ACLResourceTypeTransactionalId, "tx"))
	ctx := testCtx(t)
	rc := c.dialRaw(t)
	code := func(err error) int16 {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke.Code
		}
		return 0
	}

	// Produce: open is written, closed refused, in one request.
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 9, 1, 5000
	for _, topic := range []string{"open", "closed"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = buildBatch(t, 1, 10)
		rt.Partitions = append(rt.Partitions, rp)
		produce.Topics = append(produce.Topics, rt)
	}
	got := map[string]int16{}
	for _, rt := range roundTrip[*kmsg.ProduceResponse](rc, produce).Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if got["open"] != 0 || got["closed"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("produce: %v", got)
	}

	// Fetch and ListOffsets, through kgo's consumer and kadm.
	cl := c.client(kgo.ConsumeTopics("open"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if fs := cl.PollFetches(ctx); fs.Err() != nil || fs.NumRecords() != 1 {
		t.Errorf("fetch open: %v, %d records", fs.Err(), fs.NumRecords())
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxBytes = 11, -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "closed"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if resp := roundTrip[*kmsg.FetchResponse](rc, fetch); resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("fetch closed: %+v", resp.Topics[0].Partitions[0])
	}
	follower := fetch
	follower.ReplicaID = 2
	ft.Topic = "open"
	follower.Topics = []kmsg.FetchRequestTopic{ft}
	if resp := roundTrip[*kmsg.FetchResponse](rc, follower); resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("a follower fetch without CLUSTER_ACTION: %+v", resp.Topics[0].Partitions[0])
	}
	adm := c.admin()
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version, lo.ReplicaID = 7, -1
	for _, topic := range []string{"open", "closed"} {
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
	}
	got = map[string]int16{}
	for _, rt := range roundTrip[*kmsg.ListOffsetsResponse](rc, lo).Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if got["open"] != 0 || got["closed"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("list offsets: %v", got)
	}

	// Metadata: everything shows open only; closed named is refused.
	md, err := adm.Metadata(ctx)
	if err != nil || !slices.Equal(md.Topics.Names(), []string{"open"}) {
		t.Errorf("metadata for everything: %v %v", err, md.Topics.Names())
	}
	if md, err := adm.Metadata(ctx, "closed"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(md.Topics["closed"].Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("metadata for closed: %v %+v", err, md.Topics["closed"])
	}

	// Authorized operations (KIP-430) are the principal's: everything on
	// open (an ALL ACL), nothing on the cluster.
	amd := kmsg.NewPtrMetadataRequest()
	amd.Version, amd.IncludeTopicAuthorizedOperations, amd.IncludeClusterAuthorizedOperations = 10, true, true
	amd.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("open")}}
	if resp := roundTrip[*kmsg.MetadataResponse](rc, amd); resp.AuthorizedOperations != 0 || resp.Topics[0].AuthorizedOperations != topicAuthorizedOperations {
		t.Errorf("authorized operations: cluster %b, open %b (want %b)", resp.AuthorizedOperations, resp.Topics[0].AuthorizedOperations, topicAuthorizedOperations)
	}

	// Topic administration and configs.
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "new"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(resp.Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("create topic: %v %v", err, resp.Err)
	}
	if resp, err := adm.DeleteTopics(ctx, "closed"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(resp["closed"].Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("delete closed: %v %+v", err, resp)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "open"}, {kmsg.ConfigResourceTypeTopic, "closed"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, dr)
	}
	got = map[string]int16{}
	for _, r := range roundTrip[*kmsg.DescribeConfigsResponse](rc, dc).Resources {
		got[r.ResourceName] = r.ErrorCode
	}
	if got["open"] != 0 || got["closed"] != kerr.TopicAuthorizationFailed.Code || got["1"] != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("describe configs: %v", got)
	}

	// Groups: g is usable, h is not; offsets of closed are refused.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "open", Partition: 0, At: 1})
	if committed, err := adm.CommitOffsets(ctx, "g", offs); err != nil || committed.Error() != nil {
		t.Fatalf("commit open in g: %v %v", err, committed.Error())
	}
	commit := func(group string) map[string]int16 {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.Generation = 8, group, -1
		for _, topic := range []string{"open", "closed"} {
			ot := kmsg.NewOffsetCommitRequestTopic()
			ot.Topic = topic
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Offset = 1
			ot.Partitions = append(ot.Partitions, op)
			oc.Topics = append(oc.Topics, ot)
		}
		got := map[string]int16{}
		for _, rt := range roundTrip[*kmsg.OffsetCommitResponse](rc, oc).Topics {
			got[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return got
	}
	if got := commit("g"); got["open"] != 0 || got["closed"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("commit in g: %v", got)
	}
	if got := commit("h"); got["open"] != kerr.GroupAuthorizationFailed.Code || got["closed"] != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("commit in h: %v", got)
	}
	if groups, err := adm.ListGroups(ctx); err != nil || !slices.Equal(groups.Groups(), []string{"g"}) {
		t.Errorf("list groups: %v %v", err, groups.Groups())
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"g", "h"}
	got = map[string]int16{}
	for _, co := range roundTrip[*kmsg.FindCoordinatorResponse](rc, fc).Coordinators {
		got[co.Key] = co.ErrorCode
	}
	if got["g"] != 0 || got["h"] != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("find coordinator: %v", got)
	}

	// The consumer protocol: READ on the group to heartbeat, DESCRIBE on
	// the subscribed topics; DESCRIBE on each group to describe it.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 1, "h", "m", 1000, []string{"open"}
	if resp := roundTrip[*kmsg.ConsumerGroupHeartbeatResponse](rc, hb); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("consumer group heartbeat to h: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	c.meta.commit(&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: metadata.LatestMetadataVersion},
		&metadata.FeatureLevelRecord{Name: metadata.GroupVersionFeature, FeatureLevel: 1})
	hb.Group, hb.SubscribedTopicNames = "g", []string{"open", "closed"}
	if resp := roundTrip[*kmsg.ConsumerGroupHeartbeatResponse](rc, hb); resp.ErrorCode != kerr.TopicAuthorizationFailed.Code ||
		resp.ErrorMessage == nil || *resp.ErrorMessage != "Unauthorized topics: closed" {
		t.Errorf("consumer group heartbeat subscribing to closed: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{"g", "h"}
	got = map[string]int16{}
	for _, g := range roundTrip[*kmsg.ConsumerGroupDescribeResponse](rc, cgd).Groups {
		got[g.Group] = g.ErrorCode
	}
	if got["h"] != kerr.GroupAuthorizationFailed.Code || got["g"] == kerr.GroupAuthorizationFailed.Code {
		t.Errorf("consumer group describe: %v", got)
	}

	// Producer ids: idempotent with WRITE on a topic, transactional only
	// for tx.
	idem := kmsg.NewPtrInitProducerIDRequest()
	idem.Version = 4
	if resp := roundTrip[*kmsg.InitProducerIDResponse](rc, idem); resp.ErrorCode != 0 {
		t.Errorf("idempotent init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.Version, txn.TransactionalID, txn.TransactionTimeoutMillis = 4, kmsg.StringPtr("ty"), 10000
	if resp := roundTrip[*kmsg.InitProducerIDResponse](rc, txn); resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("init producer id for ty: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Cluster administration.
	if res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); err == nil && (len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Errorf("describe ACLs: %v %+v", err, res)
	}
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:x").AllowHosts("*").Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(created) != 1 || !errors.Is(created[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("create ACLs: %v %+v", err, created)
	}
	if _, err := adm.DescribeUserSCRAMs(ctx); code(err) != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("describe SCRAM credentials: %v", err)
	}
	uf := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = metadata.MetadataVersionFeature, metadata.LatestMetadataVersion, 1
	uf.Version, uf.FeatureUpdates = 1, append(uf.FeatureUpdates, u)
	if resp := roundTrip[*kmsg.UpdateFeaturesResponse](rc, uf); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("update features: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// AlterReplicaLogDirs needs ALTER on the cluster: every partition is
	// refused, and none moves.
	alter := kadm.AlterReplicaLogDirsReq{}
	alter.Add(c.dir, kadm.TopicsSet{"open": {0: {}}, "closed": {0: {}}})
	moved, err := adm.AlterBrokerReplicaLogDirs(ctx, testNodeID, alter)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	moved.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err == kerr.ClusterAuthorizationFailed {
			refused++
		}
	})
	if refused != 2 {
		t.Errorf("alter replica log dirs: %+v", moved)
	}
	// ListConfigResources needs DESCRIBE_CONFIGS on the cluster.
	if _, err := adm.ListConfigResources(ctx); code(err) != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("list config resources: %v", err)
	}
}

// Without an authorizer the ACL APIs answer SECURITY_DISABLED, as Kafka's.
func TestACLAPIsWithoutAnAuthorizer(t *testing.T) {
	c := newTestCluster(t)
	ctx := testCtx(t)
	res, err := c.admin().DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err == nil && (len(res) == 0 || res[0].Err == nil) || err != nil && !errors.Is(err, kerr.SecurityDisabled) {
		t.Errorf("describe ACLs: %v %+v", err, res)
	}
}
