package broker

// JoinGroup (key 11), v0–v9; the classic group protocol (group/manager.go
// has the state machine, Kafka's GroupCoordinator.handleJoinGroup).
//
//   - an empty group id: INVALID_GROUP_ID; not the coordinator:
//     NOT_COORDINATOR; loading: COORDINATOR_LOAD_IN_PROGRESS;
//   - session.timeout.ms outside group.min/max.session.timeout.ms:
//     INVALID_SESSION_TIMEOUT; group.max.size reached:
//     GROUP_MAX_SIZE_REACHED; a protocol type or protocol list the group
//     does not share: INCONSISTENT_GROUP_PROTOCOL;
//   - v4+ (KIP-394): a dynamic member joining without a member id gets
//     MEMBER_ID_REQUIRED and its id, and joins again with it;
//   - v5+ (KIP-345): group.instance.id; a static member rejoining without
//     its member id takes a new one, fences the old (FENCED_INSTANCE_ID),
//     and a Stable group is not rebalanced; v9+ tells a static leader to
//     skip the assignment (SkipAssignment);
//   - the response parks until the join phase completes (every member
//     rejoined, the rebalance timeout, or group.initial.rebalance.delay.ms
//     for the first rebalance of an Empty group); the leader's lists the
//     members with the metadata of the protocol chosen by vote.
//
// v0 has no rebalance timeout: the session timeout serves as one. v8+'s
// reason is accepted and not logged.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleJoinGroup(req *network.Request, m *kmsg.JoinGroupRequest) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, m.MemberID
		return resp
	}
	if m.Group == "" {
		return respond(errResp(kerr.InvalidGroupID.Code))
	}
	rebalance := m.RebalanceTimeoutMillis
	if m.Version == 0 {
		rebalance = m.SessionTimeoutMillis
	}
	jr := group.JoinRequest{Version: m.Version, Group: m.Group, MemberID: m.MemberID, ClientID: clientID(req),
		ClientHost: clientHost(req), SessionTimeoutMs: int64(m.SessionTimeoutMillis), RebalanceTimeoutMs: int64(rebalance),
		ProtocolType: m.ProtocolType}
	if m.InstanceID != nil {
		jr.InstanceID = *m.InstanceID
	}
	for _, p := range m.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		jr.Waiter = func(r group.JoinReply) {
			resp := m.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation, resp.MemberID = r.ErrorCode, r.Generation, r.MemberID
			if r.ErrorCode == 0 {
				resp.ProtocolType = kmsg.StringPtr(r.ProtocolType)
				resp.Protocol = kmsg.StringPtr(r.Protocol)
				resp.LeaderID, resp.SkipAssignment = r.Leader, r.SkipAssignment
				for _, jm := range r.Members {
					rm := kmsg.NewJoinGroupResponseMember()
					rm.MemberID, rm.ProtocolMetadata = jm.ID, jm.Metadata
					if jm.InstanceID != "" {
						rm.InstanceID = kmsg.StringPtr(jm.InstanceID)
					}
					resp.Members = append(resp.Members, rm)
				}
			}
			answer(resp)
		}
		s.apply(s.mgr.Join(now, jr), nil)
	})
}

// clientID is the request header's client id.
func clientID(req *network.Request) string { return req.Header.ClientID }

// clientHost is Kafka's "/" + the client's IP.
func clientHost(req *network.Request) string {
	if req.Conn == nil || req.Conn.RemoteAddr == nil {
		return ""
	}
	host := req.Conn.RemoteAddr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return "/" + host
}
