package broker

// DescribeGroups (key 15), v0–v5 (Kafka's GroupMetadata.summary).
//
// Per group: its state, protocol type, and members (member id, v4+
// instance id, client id and host); the selected protocol and each
// member's metadata and assignment only when the group is Stable. An
// unknown group is reported Dead with no error (GROUP_ID_NOT_FOUND is
// v6+, not served). Per group errors: INVALID_GROUP_ID, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS. v3+ authorized operations, when asked:
// every group operation (there are no ACLs yet).

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

// groupOperations is the authorized operations bitfield of a group
// without an authorizer (with one, authz_apis.go narrows it to the
// principal's): READ (3), DELETE (6), DESCRIBE (8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

func (b *Broker) handleDescribeGroups(_ context.Context, m *kmsg.DescribeGroupsRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(m.Groups))
	f := newGroupFanout(len(m.Groups), func() *network.Response { return &network.Response{Msg: resp} })
	for i, id := range m.Groups {
		rg := &resp.Groups[i]
		*rg = kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		rg.AuthorizedOperations = math.MinInt32
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
			d := s.mgr.Describe(id)
			rg.ErrorCode = d.ErrorCode // a consumer protocol group: not a classic one
			rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
			for _, dm := range d.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.ClientID, rm.ClientHost = dm.ID, dm.ClientID, dm.ClientHost
				if dm.InstanceID != "" {
					rm.InstanceID = kmsg.StringPtr(dm.InstanceID)
				}
				rm.ProtocolMetadata, rm.MemberAssignment = dm.Metadata, dm.Assignment
				if rm.ProtocolMetadata == nil {
					rm.ProtocolMetadata = []byte{}
				}
				if rm.MemberAssignment == nil {
					rm.MemberAssignment = []byte{}
				}
				rg.Members = append(rg.Members, rm)
			}
			finish()
		})
	}
	return f.result()
}
