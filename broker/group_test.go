package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupTestCluster is a one-node test cluster whose offsets topic exists
// (FindCoordinator created it) and is loaded; extra are more server
// properties (key=value).
func groupTestCluster(t testing.TB, extra ...string) *testCluster {
	t.Helper()
	c := newTestCluster(t, withConfig(append([]string{"offsets.topic.num.partitions=3", "group.min.session.timeout.ms=100",
		"group.initial.rebalance.delay.ms=0"}, extra...)...))
	cl := c.client()
	waitFor(t, "a group coordinator", 10*time.Second, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g"}
		resp := request[*kmsg.FindCoordinatorResponse](t, cl, req)
		if len(resp.Coordinators) == 1 {
			return resp.Coordinators[0].ErrorCode == 0
		}
		return resp.ErrorCode == 0
	})
	waitFor(t, "the offsets partitions loaded", 10*time.Second, func() bool {
		return len(c.broker.groups.loadedShards()) == int(c.cfg.OffsetsTopicNumPartitions)
	})
	return c
}

// Bad group requests get Kafka's error codes.
func TestGroupRequestErrors(t *testing.T) {
	c := groupTestCluster(t)
	c.createTopic("t", 1, nil)
	cl := c.client()

	join := func(mod func(*kmsg.JoinGroupRequest)) int16 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "g", 1000, 1000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0}
		req.Protocols = append(req.Protocols, p)
		mod(req)
		return request[*kmsg.JoinGroupResponse](t, cl, req).ErrorCode
	}
	for _, tc := range []struct {
		name string
		mod  func(*kmsg.JoinGroupRequest)
		want *kerr.Error
	}{
		{"empty group id", func(r *kmsg.JoinGroupRequest) { r.Group = "" }, kerr.InvalidGroupID},
		{"session below group.min.session.timeout.ms", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 10 }, kerr.InvalidSessionTimeout},
		{"session above group.max.session.timeout.ms", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1 << 30 }, kerr.InvalidSessionTimeout},
		{"no protocols", func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, kerr.InconsistentGroupProtocol},
		{"unknown member id", func(r *kmsg.JoinGroupRequest) { r.MemberID = "ghost" }, kerr.UnknownMemberID},
		{"new member (KIP-394)", func(*kmsg.JoinGroupRequest) {}, kerr.MemberIDRequired},
	} {
		if got := join(tc.mod); got != tc.want.Code {
			t.Errorf("JoinGroup with %s: %v, want %v", tc.name, kerr.ErrorForCode(got), tc.want)
		}
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "simple", -1
	for _, topic := range []string{"t", "missing"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 3
		rt.Partitions = append(rt.Partitions, rp)
		commit.Topics = append(commit.Topics, rt)
	}
	big := string(make([]byte, 5000))
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Metadata = 0, &big
	rt.Partitions = append(rt.Partitions, rp)
	commit.Topics = append(commit.Topics, rt)
	cresp := request[*kmsg.OffsetCommitResponse](t, cl, commit)
	got := []int16{cresp.Topics[0].Partitions[0].ErrorCode, cresp.Topics[1].Partitions[0].ErrorCode, cresp.Topics[2].Partitions[0].ErrorCode}
	want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.OffsetMetadataTooLarge.Code}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("commit partition %d: %v, want %v", i, kerr.ErrorForCode(got[i]), kerr.ErrorForCode(want[i]))
		}
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "nope", "m", 1
	if code := request[*kmsg.HeartbeatResponse](t, cl, hb).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat to an unknown group: %v", kerr.ErrorForCode(code))
	}
}

// The coordinator rebuilds its groups from __consumer_offsets when the node
// restarts: offsets are all there, and its shard goroutines stop on Close
// (the cluster's leak check).
func TestGroupOffsetsSurviveBrokerRestart(t *testing.T) {
	c := groupTestCluster(t)
	c.createTopic("t", 3, nil)
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var os kadm.Offsets
	for p := int32(0); p < 3; p++ {
		os.AddOffset("t", p, int64(10*(p+1)), -1)
	}
	for _, g := range []string{"a", "b", "c", "d"} {
		if resp, err := adm.CommitOffsets(ctx, g, os); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, resp.Error())
		}
	}
	c.restart()
	adm = c.admin()
	for _, g := range []string{"a", "b", "c", "d"} {
		var fetched kadm.OffsetResponses
		waitFor(t, "the offsets of "+g, 10*time.Second, func() bool {
			resp, err := adm.FetchOffsets(ctx, g)
			fetched = resp
			return err == nil && resp.Error() == nil
		})
		for p := int32(0); p < 3; p++ {
			if o, _ := fetched.Lookup("t", p); o.At != int64(10*(p+1)) {
				t.Errorf("group %s partition %d: offset %d after restart, want %d", g, p, o.At, 10*(p+1))
			}
		}
	}
}

// A client cannot create __consumer_offsets, not even by sending the tag
// the broker marks its own creation with.
func TestClientCannotSmuggleInternalCreate(t *testing.T) {
	c := newTestCluster(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = offsetsTopic, 1, 1
	req.Topics = append(req.Topics, rt)
	markInternalCreate(req)
	r := c.dialRaw(t)
	resp := roundTrip[*kmsg.CreateTopicsResponse](r, req)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("client creation of %s: %+v", offsetsTopic, resp.Topics)
	}
}

// While a shard loads, its groups answer COORDINATOR_LOAD_IN_PROGRESS, and
// so does ListGroups; a group of a partition led elsewhere (or of no
// partition yet) NOT_COORDINATOR.
func TestGroupRoutingErrors(t *testing.T) {
	c := newTestCluster(t, withConfig("offsets.topic.num.partitions=3"))
	cl := c.client()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 1
	if code := request[*kmsg.HeartbeatResponse](t, cl, hb).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("heartbeat before the offsets topic exists: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	c.stop()
	c = groupTestCluster(t)
	cl = c.client()
	gc := c.broker.groups
	part := gc.partitionOf("g")
	gc.mu.Lock()
	s := gc.shards[part]
	gc.mu.Unlock()
	s.ready.Store(false) // as while loading
	if code := request[*kmsg.HeartbeatResponse](t, cl, hb).ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("heartbeat while loading: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	if code := request[*kmsg.ListGroupsResponse](t, cl, kmsg.NewPtrListGroupsRequest()).ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("ListGroups while loading: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	s.ready.Store(true)
	if code := request[*kmsg.HeartbeatResponse](t, cl, hb).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat once loaded: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
}
