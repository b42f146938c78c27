package broker

// ConsumerGroupHeartbeat (key 68), v0–v1: the consumer group protocol of
// KIP-848 (group.protocol=consumer), with server-side assignment
// (group/consumer.go has the state machine, Kafka's
// GroupMetadataManager.consumerGroupHeartbeat).
//
//   - Served while the cluster's group.version is 1 or more (Kafka 4's
//     default for a new cluster); below it the API is not advertised and a
//     request gets UNSUPPORTED_VERSION, as in Kafka.
//   - Member epoch 0 joins (RebalanceTimeoutMs and a subscription
//     required, INVALID_REQUEST with Kafka's message otherwise), -1 leaves,
//     -2 leaves for now keeping the static member's partitions; any other
//     epoch heartbeats. v0 members may join without an id (the coordinator
//     makes one); v1 members bring their own (KIP-1082).
//   - Errors: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH (the member must
//     give up its partitions and rejoin), UNRELEASED_INSTANCE_ID,
//     FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED (group.consumer.max.size),
//     UNSUPPORTED_ASSIGNOR (not in group.consumer.assignors: uniform,
//     range), INVALID_REGULAR_EXPRESSION (v1 SubscribedTopicRegex, RE2
//     syntax, matched against whole topic names), GROUP_ID_NOT_FOUND for a
//     classic group with members (Kafka would migrate it online; Keel does
//     not), and the coordinator errors.
//   - READ on the group; subscribed topic names the principal may not
//     DESCRIBE fail with TOPIC_AUTHORIZATION_FAILED, and a regex only
//     matches topics it may describe.

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// consumerProtocolEnabled reports whether this broker serves the consumer
// group protocol: group.coordinator.rebalance.protocols lists it and the
// cluster's group.version is 1 or more.
func (b *Broker) consumerProtocolEnabled(img *metadata.Image) bool {
	level, _ := img.FeatureLevel(metadata.GroupVersionFeature)
	return level >= 1 && b.cfg.consumerProtocolServed()
}

// imageTopics is a metadata image as a consumer group sees it. names,
// when not nil, are the topics a regex may match (those the principal may
// describe).
type imageTopics struct {
	img   *metadata.Image
	names func() []string
}

func (t imageTopics) TopicByName(name string) (group.TopicID, int32, bool) {
	tp, ok := t.img.Topic(name)
	if !ok {
		return group.TopicID{}, 0, false
	}
	return group.TopicID(tp.ID), int32(len(tp.Partitions)), true
}

func (t imageTopics) TopicByID(id group.TopicID) (string, int32, bool) {
	tp, ok := t.img.TopicByID(metadata.Uuid(id))
	if !ok {
		return "", 0, false
	}
	return tp.Name, int32(len(tp.Partitions)), true
}

func (t imageTopics) TopicNames() []string {
	if t.names != nil {
		return t.names()
	}
	var out []string
	for _, tp := range t.img.Topics() {
		if !isInternalTopic(tp.Name) {
			out = append(out, tp.Name)
		}
	}
	return out
}

func (b *Broker) handleConsumerGroupHeartbeat(req *network.Request, m *kmsg.ConsumerGroupHeartbeatRequest, describable func(string) bool) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.MemberEpoch = code, -1
		return resp
	}
	img := b.currentImage()
	if !b.consumerProtocolEnabled(img) {
		resp := errResp(kerr.UnsupportedVersion.Code).(*kmsg.ConsumerGroupHeartbeatResponse)
		msg := "The consumer group protocol is not enabled: the cluster's group.version is 0 (keel features upgrade --feature group.version=1)."
		if !b.cfg.consumerProtocolServed() {
			msg = "The consumer group protocol is not enabled: group.coordinator.rebalance.protocols does not list consumer."
		}
		resp.ErrorMessage = kmsg.StringPtr(msg)
		return respond(resp)
	}
	if describable != nil && m.SubscribedTopicNames != nil {
		var denied []string
		for _, t := range m.SubscribedTopicNames {
			if !describable(t) {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 {
			slices.Sort(denied)
			resp := errResp(kerr.TopicAuthorizationFailed.Code).(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorMessage = kmsg.StringPtr("Unauthorized topics: " + strings.Join(slices.Compact(denied), ", "))
			return respond(resp)
		}
	}
	topics := imageTopics{img: img}
	if describable != nil {
		topics.names = func() []string {
			var out []string
			for _, n := range (imageTopics{img: img}).TopicNames() {
				if describable(n) {
					out = append(out, n)
				}
			}
			return out
		}
	}
	hr := group.ConsumerHeartbeatRequest{Version: m.Version, Group: m.Group, MemberID: m.MemberID, MemberEpoch: m.MemberEpoch,
		InstanceID: m.InstanceID, RackID: m.RackID, RebalanceTimeoutMs: m.RebalanceTimeoutMillis,
		SubscribedTopicNames: m.SubscribedTopicNames, SubscribedTopicRegex: m.SubscribedTopicRegex, ServerAssignor: m.ServerAssignor,
		ClientID: clientID(req), ClientHost: clientHost(req), Topics: topics}
	if m.Topics != nil {
		hr.OwnedSet, hr.Owned = true, map[group.TopicID][]int32{}
		for _, t := range m.Topics {
			hr.Owned[t.TopicID] = append(hr.Owned[t.TopicID], t.Partitions...)
		}
	}
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		r, eff := s.mgr.ConsumerHeartbeat(now, hr)
		resp := m.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.MemberEpoch, resp.HeartbeatIntervalMillis = r.ErrorCode, r.MemberEpoch, r.HeartbeatIntervalMs
		if r.ErrorMessage != "" {
			resp.ErrorMessage = kmsg.StringPtr(r.ErrorMessage)
		}
		if r.MemberID != "" {
			resp.MemberID = kmsg.StringPtr(r.MemberID)
		}
		if r.HasAssignment {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			for _, id := range slices.SortedFunc(maps.Keys(r.Assignment), compareUUIDs) {
				t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				t.TopicID, t.Partitions = id, r.Assignment[id]
				a.Topics = append(a.Topics, t)
			}
			resp.Assignment = &a
		}
		if r.ErrorCode != 0 && r.ErrorCode != kerr.UnknownMemberID.Code && r.ErrorCode != kerr.FencedMemberEpoch.Code {
			b.log.Debug("consumer group heartbeat refused", "group", m.Group, "member", m.MemberID, "epoch", m.MemberEpoch,
				"error", kerr.ErrorForCode(r.ErrorCode), "message", r.ErrorMessage)
		}
		s.apply(eff, func(code int16) {
			if code != 0 && resp.ErrorCode == 0 {
				resp = errResp(code).(*kmsg.ConsumerGroupHeartbeatResponse)
			}
			answer(resp)
		})
	})
}

func compareUUIDs(a, b [16]byte) int { return strings.Compare(string(a[:]), string(b[:])) }

// ConsumerGroupDescribe (key 69), v0–v1: consumer groups as
// kafka-consumer-groups.sh --describe shows them for the consumer
// protocol: state (Empty, Assigning, Reconciling, Stable), group and
// target assignment epochs, assignor, and each member with its
// subscription, current and target assignment (topic ids and names).
// GROUP_ID_NOT_FOUND for an unknown group or a classic one, with Kafka's
// message. DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED per group).
func (b *Broker) handleConsumerGroupDescribe(m *kmsg.ConsumerGroupDescribeRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(m.Groups))
	img := b.currentImage()
	f := newGroupFanout(len(m.Groups), func() *network.Response { return &network.Response{Msg: resp} })
	for i, id := range m.Groups {
		rg := &resp.Groups[i]
		*rg = kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = id
		if m.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = groupOperations
		}
		fail := func(code int16) { rg.ErrorCode = code }
		if id == "" {
			fail(kerr.InvalidGroupID.Code)
			f.done()
			continue
		}
		b.onGroup(f, id, fail, func(s *offsetsShard, _ int64, finish func()) {
			d := s.mgr.DescribeConsumer(id)
			rg.ErrorCode = d.ErrorCode
			if d.ErrorMessage != "" {
				rg.ErrorMessage = kmsg.StringPtr(d.ErrorMessage)
			}
			rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
			for _, dm := range d.Members {
				rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = dm.ID, dm.Epoch, dm.ClientID, dm.ClientHost
				rm.InstanceID, rm.RackID = optString(dm.InstanceID), optString(dm.RackID)
				rm.SubscribedTopics = slices.Clone(dm.SubscribedTopicNames)
				if rm.SubscribedTopics == nil {
					rm.SubscribedTopics = []string{}
				}
				rm.SubscribedTopicRegex = optString(dm.SubscribedTopicRegex)
				rm.Assignment = describeAssignment(img, assignedPartitions(dm.Assigned, dm.PendingRevocation))
				rm.TargetAssignment = describeAssignment(img, dm.Target)
				if m.Version >= 1 {
					rm.MemberType = 1 // the consumer protocol
					if dm.Classic != nil {
						rm.MemberType = 0 // classic
					}
				}
				rg.Members = append(rg.Members, rm)
			}
			finish()
		})
	}
	return f.result()
}

// assignedPartitions is what a member owns: its assigned partitions and
// those it has yet to revoke (Kafka describes both as its assignment).
func assignedPartitions(sets ...map[group.TopicID]map[int32]int32) map[group.TopicID][]int32 {
	out := map[group.TopicID][]int32{}
	for _, set := range sets {
		for t, ps := range set {
			for p := range ps {
				out[t] = append(out[t], p)
			}
		}
	}
	for t := range out {
		slices.Sort(out[t])
	}
	return out
}

// describeAssignment lists an assignment with topic names, by name.
func describeAssignment(img *metadata.Image, a map[group.TopicID][]int32) kmsg.Assignment {
	var out kmsg.Assignment
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for id, ps := range a {
		if len(ps) == 0 {
			continue
		}
		tp := kmsg.AssignmentTopicPartition{TopicID: id, Partitions: slices.Clone(ps)}
		if t, ok := img.TopicByID(metadata.Uuid(id)); ok {
			tp.Topic = t.Name
		}
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	slices.SortFunc(out.TopicPartitions, func(x, y kmsg.AssignmentTopicPartition) int {
		if c := strings.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		return compareUUIDs(x.TopicID, y.TopicID)
	})
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
