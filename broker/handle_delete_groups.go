package broker

// DeleteGroups (key 42), v0–v2 (Kafka's GroupCoordinator.handleDeleteGroups).
//
// Per group: an Empty group is deleted, its offsets and metadata
// tombstoned in __consumer_offsets and answered once committed; a group
// with members answers NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND,
// an empty id INVALID_GROUP_ID; NOT_COORDINATOR and
// COORDINATOR_LOAD_IN_PROGRESS as for any group request.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

func (b *Broker) handleDeleteGroups(_ context.Context, m *kmsg.DeleteGroupsRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(m.Groups))
	f := newGroupFanout(len(m.Groups), func() *network.Response { return &network.Response{Msg: resp} })
	for i, id := range m.Groups {
		rg := &resp.Groups[i]
		*rg = kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		fail := func(code int16) { rg.ErrorCode = code }
		if id == "" {
			fail(kerr.InvalidGroupID.Code)
			f.done()
			continue
		}
		b.onGroup(f, id, fail, func(s *offsetsShard, now int64, finish func()) {
			code, eff := s.mgr.Delete(now, id)
			rg.ErrorCode = code
			s.apply(eff, func(c int16) {
				if c != 0 && rg.ErrorCode == 0 {
					rg.ErrorCode = c
				}
				finish()
			})
		})
	}
	return f.result()
}
