package broker

// SyncGroup (key 14), v0–v5 (Kafka's GroupCoordinator.handleSyncGroup).
//
// Unknown group or member: UNKNOWN_MEMBER_ID; a static member whose
// instance id belongs to another member id: FENCED_INSTANCE_ID; another
// generation: ILLEGAL_GENERATION; v5+ protocol type or name differing from
// the group's: INCONSISTENT_GROUP_PROTOCOL; PreparingRebalance:
// REBALANCE_IN_PROGRESS. In CompletingRebalance a member's request parks
// until the leader's arrives with the assignment; the group metadata is
// then written to __consumer_offsets and every parked member answered once
// it is committed. In Stable the member gets its assignment at once.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleSyncGroup(m *kmsg.SyncGroupRequest) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp
	}
	if m.Group == "" {
		return respond(errResp(kerr.InvalidGroupID.Code))
	}
	sr := group.SyncRequest{Group: m.Group, MemberID: m.MemberID, Generation: m.Generation, Assignments: map[string][]byte{}}
	if m.InstanceID != nil {
		sr.InstanceID = *m.InstanceID
	}
	if m.ProtocolType != nil {
		sr.ProtocolType = *m.ProtocolType
	}
	if m.Protocol != nil {
		sr.Protocol = *m.Protocol
	}
	for _, a := range m.GroupAssignment {
		sr.Assignments[a.MemberID] = a.MemberAssignment
	}
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		sr.Waiter = func(r group.SyncReply) {
			resp := m.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = r.ErrorCode
			if r.ErrorCode == 0 {
				resp.ProtocolType, resp.Protocol = kmsg.StringPtr(r.ProtocolType), kmsg.StringPtr(r.Protocol)
				resp.MemberAssignment = r.Assignment
			}
			if resp.MemberAssignment == nil {
				resp.MemberAssignment = []byte{}
			}
			answer(resp)
		}
		s.apply(s.mgr.Sync(now, sr), nil)
	})
}
