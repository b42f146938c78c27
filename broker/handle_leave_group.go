package broker

// LeaveGroup (key 13), v0–v5 (Kafka's GroupCoordinator.handleLeaveGroup).
//
// v0–v2 name one member; v3+ a batch of members (KIP-345), each by member
// id or by group.instance.id, answered one by one: UNKNOWN_MEMBER_ID for a
// member that is not in the group, FENCED_INSTANCE_ID for an instance id
// owned by another member id. Each leaving member triggers a rebalance at
// once (the remaining members learn it from their next heartbeat); a group
// left empty becomes Empty with the next generation, written to
// __consumer_offsets. Before v3 the one member's error is the top-level
// error. v5's reason is accepted and not logged.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleLeaveGroup(m *kmsg.LeaveGroupRequest) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	}
	if m.Group == "" {
		return respond(errResp(kerr.InvalidGroupID.Code))
	}
	var members []group.LeaveMember
	if m.Version < 3 {
		members = []group.LeaveMember{{MemberID: m.MemberID}}
	} else {
		for _, lm := range m.Members {
			gm := group.LeaveMember{MemberID: lm.MemberID}
			if lm.InstanceID != nil {
				gm.InstanceID = *lm.InstanceID
			}
			members = append(members, gm)
		}
	}
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		top, codes, eff := s.mgr.Leave(now, m.Group, members)
		resp := m.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = top
		if m.Version < 3 {
			if top == 0 {
				resp.ErrorCode = codes[0]
			}
		} else if top == 0 {
			for i, lm := range m.Members {
				rm := kmsg.NewLeaveGroupResponseMember()
				rm.MemberID, rm.InstanceID, rm.ErrorCode = lm.MemberID, lm.InstanceID, codes[i]
				resp.Members = append(resp.Members, rm)
			}
		}
		s.apply(eff, func(code int16) {
			if code != 0 && resp.ErrorCode == 0 {
				resp.ErrorCode = code
			}
			answer(resp)
		})
	})
}
