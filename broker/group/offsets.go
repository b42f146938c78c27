package group

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// CommitPartition is one partition of an OffsetCommit.
type CommitPartition struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitRequest is an OffsetCommit for one group. Generation is -1 (and
// MemberID "") for a simple consumer or an admin commit; RetentionMs is -1
// unless the request set retention_time_ms (v2–v4).
type CommitRequest struct {
	Group       string
	MemberID    string
	InstanceID  string
	Generation  int32
	RetentionMs int64
	Partitions  []CommitPartition
}

// PendingCommit is an offset written to the log and applied to the group
// once committed (ApplyCommits).
type PendingCommit struct {
	Group  string
	TP     TopicPartition
	Offset Offset
}

// CommitOffsets handles an OffsetCommit (Kafka's handleCommitOffsets and
// doCommitOffsets). It returns one error code per partition; the offsets
// become visible to FetchOffsets once the caller applies the Effects'
// Commits.
func (m *Manager) CommitOffsets(now int64, req CommitRequest) ([]int16, Effects) {
	codes := make([]int16, len(req.Partitions))
	all := func(code int16) ([]int16, Effects) {
		for i := range codes {
			codes[i] = code
		}
		return codes, Effects{}
	}
	if req.Group == "" {
		return all(kerr.InvalidGroupID.Code)
	}
	g := m.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			// A member commit to a group that is not here: a stale
			// generation, or a coordinator that lost the group.
			return all(kerr.IllegalGeneration.Code)
		}
		g = newGroup(req.Group, now)
		m.groups[req.Group] = g
	}
	switch {
	case g.State == Dead:
		return all(kerr.CoordinatorNotAvailable.Code)
	case req.Generation < 0 && req.MemberID == "" && req.InstanceID == "" && g.State == Empty:
		// A simple consumer or an admin: no membership to check.
	default:
		if code := g.checkStatic(req.MemberID, req.InstanceID); code != 0 {
			return all(code)
		}
		mem := g.Members[req.MemberID]
		switch {
		case g.State == CompletingRebalance:
			return all(kerr.RebalanceInProgress.Code)
		case mem == nil:
			return all(kerr.UnknownMemberID.Code)
		case req.Generation != g.Generation:
			return all(kerr.IllegalGeneration.Code)
		}
		mem.heartbeatDeadline = now + mem.SessionTimeoutMs
	}
	var eff Effects
	for i, p := range req.Partitions {
		if len(p.Metadata) > m.cfg.MaxMetadataSize {
			codes[i] = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		o := Offset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, CommitTimestamp: now, ExpireTimestamp: -1}
		if req.RetentionMs >= 0 {
			o.ExpireTimestamp = now + req.RetentionMs
		}
		tp := TopicPartition{Topic: p.Topic, Partition: p.Partition}
		eff.Records = append(eff.Records, Record{Key: OffsetKey(g.ID, p.Topic, p.Partition), Value: OffsetValue(o)})
		eff.Commits = append(eff.Commits, PendingCommit{Group: g.ID, TP: tp, Offset: o})
	}
	return codes, eff
}

// ApplyCommits makes committed offsets visible (their records are
// committed in the log). Offsets of a group deleted meanwhile are dropped.
func (m *Manager) ApplyCommits(commits []PendingCommit) {
	for _, c := range commits {
		if g := m.groups[c.Group]; g != nil && g.State != Dead {
			g.Offsets[c.TP] = c.Offset
		}
	}
}

// FetchedOffset is one partition of an OffsetFetch answer: Offset -1 when
// nothing is committed.
type FetchedOffset struct {
	TP          TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// FetchOffsets returns a group's committed offsets for tps, or all of them
// when tps is nil (sorted). An unknown group has no offsets.
func (m *Manager) FetchOffsets(group string, tps []TopicPartition) []FetchedOffset {
	g := m.groups[group]
	if tps == nil {
		if g == nil {
			return nil
		}
		tps = sortedOffsets(g)
	}
	out := make([]FetchedOffset, 0, len(tps))
	for _, tp := range tps {
		f := FetchedOffset{TP: tp, Offset: -1, LeaderEpoch: -1}
		if g != nil {
			if o, ok := g.Offsets[tp]; ok {
				f.Offset, f.LeaderEpoch, f.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
			}
		}
		out = append(out, f)
	}
	return out
}

// DeleteOffsets handles an OffsetDelete (KIP-496): a group-level code and
// one code per partition. Offsets of topics a non-empty consumer group
// subscribes to stay (GROUP_SUBSCRIBED_TO_TOPIC).
func (m *Manager) DeleteOffsets(now int64, group string, tps []TopicPartition) (int16, []int16, Effects) {
	codes := make([]int16, len(tps))
	g := m.groups[group]
	switch {
	case group == "":
		return kerr.InvalidGroupID.Code, codes, Effects{}
	case g == nil || g.State == Dead:
		return kerr.GroupIDNotFound.Code, codes, Effects{}
	}
	var subscribed map[string]bool
	if g.State != Empty {
		var ok bool
		if subscribed, ok = g.subscribedTopics(); !ok {
			return kerr.NonEmptyGroup.Code, codes, Effects{}
		}
	}
	var eff Effects
	for i, tp := range tps {
		if subscribed[tp.Topic] {
			codes[i] = kerr.GroupSubscribedToTopic.Code
			continue
		}
		if _, ok := g.Offsets[tp]; ok {
			delete(g.Offsets, tp)
			eff.Records = append(eff.Records, Record{Key: OffsetKey(g.ID, tp.Topic, tp.Partition)})
		}
	}
	return 0, codes, eff
}

// expireOffsets removes offsets whose retention passed (Kafka's
// cleanupGroupMetadata, KIP-211): for an Empty group counted from when it
// became Empty (or from the commit, for a simple consumer's), for a Stable
// consumer group only those of topics it no longer subscribes to; an
// explicit expire timestamp wins. An Empty group left without offsets is
// deleted.
func (m *Manager) expireOffsets(now int64) Effects {
	var eff Effects
	for _, id := range m.GroupIDs() {
		g := m.groups[id]
		var subscribed map[string]bool
		switch g.State {
		case Empty:
		case Stable:
			var ok bool
			if subscribed, ok = g.subscribedTopics(); !ok {
				continue
			}
		default:
			continue
		}
		for _, tp := range sortedOffsets(g) {
			o := g.Offsets[tp]
			if subscribed[tp.Topic] {
				continue
			}
			base := o.CommitTimestamp
			if g.State == Empty && g.ProtocolType != "" {
				base = max(base, g.stateTimestamp)
			}
			expired := now >= base+m.cfg.OffsetsRetentionMs
			if o.ExpireTimestamp >= 0 {
				expired = now >= o.ExpireTimestamp
			}
			if expired {
				delete(g.Offsets, tp)
				eff.Records = append(eff.Records, Record{Key: OffsetKey(g.ID, tp.Topic, tp.Partition)})
			}
		}
		if g.State == Empty && len(g.Offsets) == 0 {
			g.transition(Dead, now)
			delete(m.groups, g.ID)
			eff.Records = append(eff.Records, Record{Key: GroupKey(g.ID)})
		}
	}
	return eff
}

// Replay applies one record read from the partition while loading it
// (Kafka's loadGroupsAndOffsets): the last record of a key wins, a
// tombstone deletes. Records of unknown key versions (transactions,
// KIP-848) are skipped. Call FinishLoad after the last one.
func (m *Manager) Replay(key, value []byte) error {
	k, err := DecodeKey(key)
	if errors.Is(err, ErrUnknownRecord) {
		return nil
	}
	if err != nil {
		return err
	}
	g := m.groups[k.Group]
	if k.IsOffset {
		tp := TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			if g != nil {
				delete(g.Offsets, tp)
			}
			return nil
		}
		o, err := DecodeOffsetValue(value)
		if err != nil {
			return err
		}
		if g == nil {
			g = newGroup(k.Group, o.CommitTimestamp)
			m.groups[k.Group] = g
		}
		g.Offsets[tp] = o
		return nil
	}
	if g == nil {
		g = newGroup(k.Group, 0)
		m.groups[k.Group] = g
	}
	g.Members, g.staticMembers = map[string]*Member{}, map[string]string{}
	g.ProtocolType, g.Protocol, g.Leader, g.State = "", "", "", Empty
	if value == nil {
		g.Generation = 0
		return nil
	}
	v, err := decodeGroupValue(value)
	if err != nil {
		return err
	}
	g.ProtocolType, g.Generation, g.stateTimestamp = v.ProtocolType, v.Generation, v.CurrentStateTimestamp
	if v.Protocol != nil {
		g.Protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.Leader = *v.Leader
	}
	for _, mv := range v.Members {
		mem := &Member{ID: mv.MemberID, ClientID: mv.ClientID, ClientHost: mv.ClientHost,
			SessionTimeoutMs: int64(mv.SessionTimeoutMillis), RebalanceTimeoutMs: int64(mv.RebalanceTimeoutMillis),
			ProtocolType: g.ProtocolType, Protocols: []Protocol{{Name: g.Protocol, Metadata: mv.Subscription}},
			Assignment: mv.Assignment}
		if mem.RebalanceTimeoutMs < 0 {
			mem.RebalanceTimeoutMs = mem.SessionTimeoutMs
		}
		if mv.InstanceID != nil {
			mem.InstanceID = *mv.InstanceID
			g.staticMembers[mem.InstanceID] = mem.ID
		}
		g.Members[mem.ID] = mem
	}
	if len(g.Members) > 0 {
		g.State = Stable
	}
	return nil
}

// FinishLoad ends loading: groups deleted by tombstones and left without
// offsets are dropped, and loaded members get a full session to send their
// next heartbeat.
func (m *Manager) FinishLoad(now int64) {
	for id, g := range m.groups {
		if len(g.Members) == 0 && len(g.Offsets) == 0 && g.ProtocolType == "" {
			delete(m.groups, id)
			continue
		}
		for _, mem := range g.Members {
			mem.heartbeatDeadline = now + mem.SessionTimeoutMs
		}
	}
	m.nextExpiryCheck = now + m.cfg.OffsetsRetentionCheckMs
}
