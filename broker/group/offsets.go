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
	// Version is the OffsetCommit's; Topics the cluster's topics (a
	// consumer group's member epoch check needs them).
	Version int16
	Topics  TopicImage
}

// PendingCommit is an offset written to the log and applied to the group
// once committed (ApplyCommitsAt).
type PendingCommit struct {
	Group  string
	TP     TopicPartition
	Offset Offset
	// txn is the TxnOffsetCommit the offset belongs to, nil for an
	// OffsetCommit's: applying it makes the offset pending for the
	// producer instead of committed.
	txn *txnWrite
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
	g, code := m.commitGroup(now, req.Group, req.Generation)
	if code != 0 {
		return all(code)
	}
	switch {
	case g.State == Dead:
		return all(kerr.CoordinatorNotAvailable.Code)
	case g.consumer != nil:
		tps := make([]TopicPartition, len(req.Partitions))
		for i, p := range req.Partitions {
			tps[i] = TopicPartition{Topic: p.Topic, Partition: p.Partition}
		}
		if code, _ := g.consumerCommitCode(req.MemberID, req.Generation, req.Version, false, tps, req.Topics); code != 0 {
			return all(code)
		}
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
	expire := int64(-1)
	if req.RetentionMs >= 0 {
		expire = now + req.RetentionMs
	}
	return codes, m.offsetRecords(now, g, req.Partitions, expire, codes, nil)
}

// commitGroup is the group an offset commit goes to: for a commit without
// a generation (a simple consumer, an admin, or a producer committing for
// one), a group that is not here is created Empty, as Kafka does; for a
// member's, it is ILLEGAL_GENERATION (a stale generation, or a coordinator
// that lost the group).
func (m *Manager) commitGroup(now int64, id string, generation int32) (*Group, int16) {
	if id == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	g := m.groups[id]
	if g == nil {
		if generation >= 0 {
			return nil, kerr.IllegalGeneration.Code
		}
		g = newGroup(id, now)
		m.groups[id] = g
	}
	return g, 0
}

// offsetRecords is the Effects of committing parts to g (the partitions of
// a TxnOffsetCommit's write txn, when not nil): a record and a pending
// commit per partition, OFFSET_METADATA_TOO_LARGE in codes instead for
// metadata over offset.metadata.max.bytes.
func (m *Manager) offsetRecords(now int64, g *Group, parts []CommitPartition, expire int64, codes []int16, txn *txnWrite) Effects {
	var eff Effects
	for i, p := range parts {
		if len(p.Metadata) > m.cfg.MaxMetadataSize {
			codes[i] = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		o := Offset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, CommitTimestamp: now, ExpireTimestamp: expire}
		tp := TopicPartition{Topic: p.Topic, Partition: p.Partition}
		eff.Records = append(eff.Records, Record{Key: OffsetKey(g.ID, p.Topic, p.Partition), Value: OffsetValue(o)})
		eff.Commits = append(eff.Commits, PendingCommit{Group: g.ID, TP: tp, Offset: o, txn: txn})
		if txn != nil {
			txn.offsets[tp] = o
		}
	}
	return eff
}

// ApplyCommits is ApplyCommitsAt for a caller that does not know the
// offset of the batch: it takes the highest offset the Manager was given
// so far. That orders an OffsetCommit's offsets right against pending
// transactional ones as long as batches are applied in log order, but not
// a TxnOffsetCommit's against an OffsetCommit applied at that same
// offset: a caller that writes transactional offsets uses ApplyCommitsAt.
func (m *Manager) ApplyCommits(commits []PendingCommit) {
	m.ApplyCommitsAt(commits, m.lastOffset)
}

// ApplyCommitsAt applies the Commits of an Effects whose records are now
// committed in the log (the high watermark passed them); offset is where
// that batch is in __consumer_offsets (any offset inside it, e.g. the
// append's last offset). An OffsetCommit's offsets become visible, unless
// a record written later already set the partition's. A TxnOffsetCommit's
// become pending for its producer (Kafka's onTxnOffsetCommitAppend) until
// CompleteTxn. Offsets of a group deleted meanwhile, or of a partition
// whose offsets were deleted after the write, are dropped.
//
// Call it from the Manager's goroutine, in log order with CompleteTxn: a
// transaction marker must not be completed before the writes appended
// before it are applied (or failed).
func (m *Manager) ApplyCommitsAt(commits []PendingCommit, offset int64) {
	m.lastOffset = max(m.lastOffset, offset)
	for _, c := range commits {
		g := m.groups[c.Group]
		if g == nil || g.State == Dead {
			continue
		}
		o := c.Offset
		o.recordOffset = offset
		if c.txn == nil {
			if cur, ok := g.Offsets[c.TP]; !ok || cur.recordOffset <= offset {
				g.Offsets[c.TP] = o
			}
			continue
		}
		if _, inFlight := g.txnWrites[c.txn]; !inFlight {
			continue // failed, or its group was deleted and created again
		}
		if _, kept := c.txn.offsets[c.TP]; kept {
			m.addPendingTxn(g, c.txn.producerID, c.TP, o)
		}
	}
	m.endTxnWrites(commits)
}

// FailCommits tells the Manager that the records of an Effects with these
// Commits could not be committed (the append failed, leadership was lost,
// the write timed out). A TxnOffsetCommit's partitions stop being
// unstable (Kafka's failPendingTxnOffsetCommit); an OffsetCommit's offsets
// were never applied, so there is nothing to undo.
func (m *Manager) FailCommits(commits []PendingCommit) {
	m.endTxnWrites(commits)
}

// endTxnWrites forgets the TxnOffsetCommit writes of commits, applied or
// failed.
func (m *Manager) endTxnWrites(commits []PendingCommit) {
	for _, c := range commits {
		if c.txn == nil {
			continue
		}
		if g := m.groups[c.Group]; g != nil {
			delete(g.txnWrites, c.txn)
		}
	}
}

// FetchedOffset is one partition of an OffsetFetch answer: Offset -1 when
// nothing is committed. ErrorCode is 0 but for FetchStableOffsets'
// UNSTABLE_OFFSET_COMMIT.
type FetchedOffset struct {
	TP          TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	ErrorCode   int16
}

// FetchOffsets returns a group's committed offsets for tps, or all of them
// when tps is nil (sorted). An unknown group has no offsets. Pending
// transactional offsets are not among them (an OffsetFetch without
// require_stable answers the last committed offset, as Kafka's).
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
// subscribes to stay (GROUP_SUBSCRIBED_TO_TOPIC). As Kafka's
// OffsetMetadataManager.deleteOffsets, a partition with a committed or a
// pending transactional offset gets a tombstone, and the tombstone drops
// both: an open transaction's offset for it is not materialized by its
// COMMIT marker.
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
		if _, ok := g.Offsets[tp]; ok || g.hasPendingTxnOffset(tp) {
			delete(g.Offsets, tp)
			g.dropPendingTxn(tp)
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
// deleted. As Kafka's OffsetMetadataManager.cleanupExpiredOffsets, pending
// transactional offsets never expire, a committed offset does not while
// its partition has one, and a group holding some is not deleted.
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
			if subscribed[tp.Topic] || g.hasPendingTxnOffset(tp) {
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
		if g.State == Empty && len(g.Offsets) == 0 && !g.hasPendingTxn() {
			g.transition(Dead, now)
			delete(m.groups, g.ID)
			eff.Records = append(eff.Records, g.deleteRecords()...)
		}
	}
	return eff
}

// Replay is ReplayAt for a caller that does not know the record's offset:
// it takes the highest offset the Manager was given so far, which is right
// only for a log without transactional offsets.
func (m *Manager) Replay(key, value []byte) error {
	return m.ReplayAt(m.lastOffset, key, value)
}

// ReplayAt applies one record of a non-transactional batch read from the
// partition while loading it (Kafka's loadGroupsAndOffsets); offset is the
// record's offset. The last record of a key wins, a tombstone deletes (an
// offset tombstone drops the partition's pending transactional offsets
// too, as Kafka's OffsetMetadataManager.replay). Records of unknown key
// versions (KIP-848) are skipped. Records of transactional batches go to
// ReplayTxn, control batches to ReplayMarker; call FinishLoad after the
// last record.
func (m *Manager) ReplayAt(offset int64, key, value []byte) error {
	m.lastOffset = max(m.lastOffset, offset)
	k, err := DecodeKey(key)
	if errors.Is(err, ErrUnknownRecord) {
		return nil
	}
	if err != nil {
		return err
	}
	if k.Type >= ConsumerGroupMetadataType {
		return m.replayConsumer(k, value)
	}
	g := m.groups[k.Group]
	if k.IsOffset {
		tp := TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			if g != nil {
				delete(g.Offsets, tp)
				g.dropPendingTxn(tp)
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
		o.recordOffset = offset
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
// offsets (committed or pending) are dropped, and loaded members get a
// full session to send their next heartbeat. Transactions still open at
// the end of the log keep their offsets pending: their markers come later.
func (m *Manager) FinishLoad(now int64) {
	for id, g := range m.groups {
		if g.consumer != nil {
			m.finishConsumerLoad(now, g)
			continue
		}
		if len(g.Members) == 0 && len(g.Offsets) == 0 && g.ProtocolType == "" && !g.hasPendingTxn() {
			delete(m.groups, id)
			continue
		}
		for _, mem := range g.Members {
			mem.heartbeatDeadline = now + mem.SessionTimeoutMs
		}
	}
	m.nextExpiryCheck = now + m.cfg.OffsetsRetentionCheckMs
}
