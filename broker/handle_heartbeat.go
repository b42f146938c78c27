package broker

// Heartbeat (key 12), v0–v4 (Kafka's GroupCoordinator.handleHeartbeat).
//
// A member's heartbeat resets its session.timeout.ms. Unknown group or
// member, or an Empty group: UNKNOWN_MEMBER_ID; FENCED_INSTANCE_ID for a
// static member's old incarnation (v3+); ILLEGAL_GENERATION for another
// generation; REBALANCE_IN_PROGRESS while the group prepares a rebalance
// (the member must rejoin). Heartbeats during CompletingRebalance are
// accepted.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleHeartbeat(m *kmsg.HeartbeatRequest) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	}
	if m.Group == "" {
		return respond(errResp(kerr.InvalidGroupID.Code))
	}
	instanceID := ""
	if m.InstanceID != nil {
		instanceID = *m.InstanceID
	}
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		answer(errResp(s.mgr.Heartbeat(now, m.Group, m.MemberID, instanceID, m.Generation)))
	})
}
