package broker

// ListGroups (key 16), v0–v5.
//
// The groups of every offsets partition this node coordinates (group id,
// protocol type, v4+ state). v4's states filter and v5's types filter
// match case-insensitively; an empty filter matches all. A group of the
// consumer protocol (KIP-848) is of type "consumer", with its state
// (Empty, Assigning, Reconciling, Stable); every other group is
// "classic", whatever its protocol type, as Kafka 4 reports it. While a
// partition is still loading, the answer is COORDINATOR_LOAD_IN_PROGRESS,
// as Kafka's.

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleListGroups(_ context.Context, m *kmsg.ListGroupsRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.ListGroupsResponse)
	if b.groups.anyLoading() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return respond(resp)
	}
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	shards := b.groups.loadedShards()
	var mu sync.Mutex
	f := newGroupFanout(len(shards), func() *network.Response {
		slices.SortFunc(resp.Groups, func(a, c kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, c.Group) })
		return &network.Response{Msg: resp}
	})
	for _, s := range shards {
		var once sync.Once
		finish := func() { once.Do(f.done) }
		ok := s.submit(func(int64) {
			var found []group.Listed
			for _, l := range s.mgr.List() {
				if match(m.StatesFilter, l.State) && match(m.TypesFilter, l.Type) {
					found = append(found, l)
				}
			}
			mu.Lock()
			for _, l := range found {
				rg := kmsg.NewListGroupsResponseGroup()
				rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = l.Group, l.ProtocolType, l.State, l.Type
				resp.Groups = append(resp.Groups, rg)
			}
			mu.Unlock()
			finish()
		}, finish)
		if !ok {
			finish()
		}
	}
	return f.result()
}
