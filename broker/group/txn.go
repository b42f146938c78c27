package group

// Transactional offset commits (KIP-98, KIP-447): Kafka's
// GroupCoordinator.handleTxnCommitOffsets and the pending offsets of
// GroupMetadata / OffsetMetadataManager.
//
// A TxnOffsetCommit's records are ordinary offset commit records in a
// transactional batch of the producer. Their life:
//
//	CommitTxnOffsets   the write is in flight (txnWrites): its partitions
//	                   are already unstable for require_stable fetches, as
//	                   Kafka's prepareTxnOffsetCommit makes them
//	ApplyCommitsAt     the batch is committed: the offsets are pending for
//	                   the producer (pendingTxn), with the batch's offset
//	FailCommits        the batch is not: the write is forgotten
//	CompleteTxn        the producer's COMMIT marker is committed: each
//	                   pending offset replaces the committed one if its
//	                   record is the later of the two; ABORT drops them
//
// Loading rebuilds the same state from the log: ReplayTxn for records of
// transactional batches, ReplayMarker for control batches.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TxnProducer is the producer whose transactional batch must carry an
// Effects' Records (Effects.Txn). Kafka writes the batch with base
// sequence 0, and its log does not check sequences of the coordinator's
// own appends, only the producer epoch.
type TxnProducer struct {
	ProducerID    int64
	ProducerEpoch int16
}

// TxnCommitRequest is a TxnOffsetCommit for one group. Generation is -1,
// MemberID and InstanceID "" when the client sent none (v0–v2, or a
// producer given no consumer group metadata).
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	MemberID      string
	InstanceID    string
	Generation    int32
	Partitions    []CommitPartition
}

// txnWrite is one TxnOffsetCommit appended to the log and not yet
// committed there.
type txnWrite struct {
	producerID int64
	// seq orders the writes in Group.String.
	seq uint64
	// offsets are the partitions whose offsets become pending when the
	// write commits: a tombstone written after it (OffsetDelete) removes
	// its partition, since replaying the log would drop that offset too.
	offsets map[TopicPartition]Offset
}

// CommitTxnOffsets handles a TxnOffsetCommit (Kafka's
// handleTxnCommitOffsets and doTxnCommitOffsets). It returns one error
// code per partition, and Effects whose Records the caller appends as a
// transactional batch of req's producer (Effects.Txn) and whose Commits it
// hands to ApplyCommitsAt once that batch is committed, or to FailCommits
// if it is not. The offsets stay invisible to FetchOffsets until the
// producer's transaction commits (CompleteTxn).
//
// Unlike an OffsetCommit, a TxnOffsetCommit is accepted while the group
// rebalances and does not count as a heartbeat: Kafka enforces no group
// state for it, and the producer is not the member.
func (m *Manager) CommitTxnOffsets(now int64, req TxnCommitRequest) ([]int16, Effects) {
	codes := make([]int16, len(req.Partitions))
	all := func(code int16) ([]int16, Effects) {
		for i := range codes {
			codes[i] = code
		}
		return codes, Effects{}
	}
	// Kafka's OffsetMetadataManager.validateTransactionalOffsetCommit: a
	// member of a group that is not here is stale; a producer committing
	// for a simple consumer creates the group, Empty.
	g, code := m.commitGroup(now, req.Group, req.Generation)
	if code != 0 {
		return all(code)
	}
	if code := g.validateTxnOffsetCommit(req); code != 0 {
		return all(code)
	}
	m.txnWriteSeq++
	w := &txnWrite{producerID: req.ProducerID, seq: m.txnWriteSeq, offsets: map[TopicPartition]Offset{}}
	// TxnOffsetCommit has no retention: the broker's applies.
	eff := m.offsetRecords(now, g, req.Partitions, -1, codes, w)
	if len(eff.Records) > 0 {
		g.txnWrites[w] = struct{}{}
		eff.Txn = &TxnProducer{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
	}
	return codes, eff
}

// validateTxnOffsetCommit is Kafka's validateOffsetCommit with
// isTransactional set (ClassicGroup.validateOffsetCommit in Kafka 4):
// generation -1 commits to an Empty group need no membership; a request
// naming a member, an instance or a generation must match the group's
// (KIP-447 fences zombie producers by the consumer's generation); one
// naming none is accepted in any state, since TxnOffsetCommit before v3
// carries no member. Never REBALANCE_IN_PROGRESS: Kafka checks
// CompletingRebalance for OffsetCommit only.
func (g *Group) validateTxnOffsetCommit(req TxnCommitRequest) int16 {
	if g.consumer != nil {
		if g.State == Dead {
			return kerr.CoordinatorNotAvailable.Code
		}
		if req.Generation < 0 && req.MemberID == "" && req.InstanceID == "" {
			return 0 // a producer committing for a simple consumer
		}
		code, _ := g.consumerCommitCode(req.MemberID, req.Generation, 0, true, nil, nil)
		if code == kerr.StaleMemberEpoch.Code {
			code = kerr.IllegalGeneration.Code
		}
		return code
	}
	switch {
	case g.State == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case req.Generation < 0 && g.State == Empty:
		return 0
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != "":
		if code := g.checkStatic(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if g.Members[req.MemberID] == nil {
			return kerr.UnknownMemberID.Code
		}
		if req.Generation != g.Generation {
			return kerr.IllegalGeneration.Code
		}
	}
	return 0
}

// CompleteTxn applies a producer's transaction marker (Kafka's
// completePendingTxnOffsetCommit, OffsetMetadataManager.
// replayEndTransactionMarker): on COMMIT each of its pending offsets
// becomes the committed offset of its partition unless an offset written
// later is committed there already (the log order decides, not the order
// of materialization: a plain OffsetCommit written after the
// TxnOffsetCommit wins); on ABORT they are dropped. A producer with no
// pending offsets here is a no-op.
//
// The caller calls it once the marker is committed in this partition, in
// log order with ApplyCommitsAt: TxnOffsetCommit writes still in flight
// were appended after the marker and belong to the producer's next
// transaction, so they are left alone.
func (m *Manager) CompleteTxn(producerID int64, commit bool) {
	for id := range m.txnGroups[producerID] {
		if g := m.groups[id]; g != nil {
			g.completeTxn(producerID, commit)
		}
	}
	delete(m.txnGroups, producerID)
}

func (g *Group) completeTxn(producerID int64, commit bool) {
	pending := g.pendingTxn[producerID]
	delete(g.pendingTxn, producerID)
	if !commit {
		return
	}
	for tp, o := range pending {
		if cur, ok := g.Offsets[tp]; !ok || o.recordOffset > cur.recordOffset {
			g.Offsets[tp] = o
		}
	}
}

// ReplayTxn applies one record of a transactional batch of producerID
// read while loading the partition; offset is the record's offset. An
// offset becomes pending for the producer until ReplayMarker (a tombstone
// drops the producer's pending offset of its partition, as Kafka's
// loader). Group metadata is never written transactionally; such a record
// is loaded as ReplayAt loads it, as Kafka's loader does.
func (m *Manager) ReplayTxn(producerID int64, offset int64, key, value []byte) error {
	k, err := DecodeKey(key)
	if err != nil || !k.IsOffset {
		return m.ReplayAt(offset, key, value)
	}
	m.lastOffset = max(m.lastOffset, offset)
	g := m.groups[k.Group]
	tp := TopicPartition{Topic: k.Topic, Partition: k.Partition}
	if value == nil {
		if g != nil {
			if pending := g.pendingTxn[producerID]; pending != nil {
				delete(pending, tp)
				if len(pending) == 0 {
					delete(g.pendingTxn, producerID)
				}
			}
		}
		return nil
	}
	o, err := DecodeOffsetValue(value)
	if err != nil {
		return err
	}
	if g == nil {
		// Kafka loads a group that only has pending offsets, Empty.
		g = newGroup(k.Group, o.CommitTimestamp)
		m.groups[k.Group] = g
	}
	o.recordOffset = offset
	m.addPendingTxn(g, producerID, tp, o)
	return nil
}

// ReplayMarker applies a control batch (COMMIT or ABORT marker of
// producerID) read while loading the partition: CompleteTxn, in log
// order with the records around it.
func (m *Manager) ReplayMarker(producerID int64, commit bool) {
	m.CompleteTxn(producerID, commit)
}

// FetchStableOffsets is FetchOffsets for an OffsetFetch with
// require_stable (KIP-447, v7+): a partition with a transactional offset
// commit not yet completed, or still being written, answers
// UNSTABLE_OFFSET_COMMIT with offset -1 (Kafka's
// hasPendingOffsetCommitsForTopicPartition), so the consumer retries
// instead of starting from an offset the transaction is about to replace.
// With tps nil only partitions with a committed offset are listed, as
// Kafka's fetchAllOffsets.
func (m *Manager) FetchStableOffsets(group string, tps []TopicPartition) []FetchedOffset {
	out := m.FetchOffsets(group, tps)
	g := m.groups[group]
	if g == nil {
		return out
	}
	for i := range out {
		if g.hasPendingTxnOffset(out[i].TP) {
			out[i] = FetchedOffset{TP: out[i].TP, Offset: -1, LeaderEpoch: -1, ErrorCode: kerr.UnstableOffsetCommit.Code}
		}
	}
	return out
}

// addPendingTxn records a transactional offset whose record is committed
// in the log; of two of the same producer for a partition the later
// record wins.
func (m *Manager) addPendingTxn(g *Group, producerID int64, tp TopicPartition, o Offset) {
	pending := g.pendingTxn[producerID]
	if pending == nil {
		pending = map[TopicPartition]Offset{}
		g.pendingTxn[producerID] = pending
	}
	if cur, ok := pending[tp]; !ok || cur.recordOffset <= o.recordOffset {
		pending[tp] = o
	}
	groups := m.txnGroups[producerID]
	if groups == nil {
		groups = map[string]struct{}{}
		m.txnGroups[producerID] = groups
	}
	groups[g.ID] = struct{}{}
}

// hasPendingTxn reports whether the group has transactional offsets not
// yet completed or still being written (Kafka counts both in
// GroupMetadata.hasOffsets).
func (g *Group) hasPendingTxn() bool {
	return len(g.pendingTxn) > 0 || len(g.txnWrites) > 0
}

// hasPendingTxnOffset reports whether tp has a transactional offset not
// yet completed or still being written.
func (g *Group) hasPendingTxnOffset(tp TopicPartition) bool {
	for _, pending := range g.pendingTxn {
		if _, ok := pending[tp]; ok {
			return true
		}
	}
	for w := range g.txnWrites {
		if _, ok := w.offsets[tp]; ok {
			return true
		}
	}
	return false
}

// dropPendingTxn removes tp's transactional offsets, pending or being
// written, as a tombstone of tp does when the log is replayed.
func (g *Group) dropPendingTxn(tp TopicPartition) {
	for producerID, pending := range g.pendingTxn {
		delete(pending, tp)
		if len(pending) == 0 {
			delete(g.pendingTxn, producerID)
		}
	}
	for w := range g.txnWrites {
		delete(w.offsets, tp)
	}
}

// offsetPartitions returns the partitions with a committed or a
// transactional offset, sorted: those a group deletion writes tombstones
// for.
func (g *Group) offsetPartitions() []TopicPartition {
	seen := map[TopicPartition]bool{}
	for tp := range g.Offsets {
		seen[tp] = true
	}
	for _, pending := range g.pendingTxn {
		for tp := range pending {
			seen[tp] = true
		}
	}
	for w := range g.txnWrites {
		for tp := range w.offsets {
			seen[tp] = true
		}
	}
	out := make([]TopicPartition, 0, len(seen))
	for tp := range seen {
		out = append(out, tp)
	}
	sortPartitions(out)
	return out
}

// pendingTxnString renders the transactional offsets for Group.String:
// pending ones by producer, then writes in flight in the order issued.
func (g *Group) pendingTxnString() string {
	var b strings.Builder
	render := func(label string, producerID int64, offsets map[TopicPartition]Offset) {
		tps := make([]TopicPartition, 0, len(offsets))
		for tp := range offsets {
			tps = append(tps, tp)
		}
		sortPartitions(tps)
		fmt.Fprintf(&b, "\n  %s producer=%d", label, producerID)
		for _, tp := range tps {
			fmt.Fprintf(&b, " %s-%d=%d", tp.Topic, tp.Partition, offsets[tp].Offset)
		}
	}
	producers := make([]int64, 0, len(g.pendingTxn))
	for id := range g.pendingTxn {
		producers = append(producers, id)
	}
	sort.Slice(producers, func(i, j int) bool { return producers[i] < producers[j] })
	for _, id := range producers {
		render("txn-pending", id, g.pendingTxn[id])
	}
	writes := make([]*txnWrite, 0, len(g.txnWrites))
	for w := range g.txnWrites {
		writes = append(writes, w)
	}
	sort.Slice(writes, func(i, j int) bool { return writes[i].seq < writes[j].seq })
	for _, w := range writes {
		render("txn-writing", w.producerID, w.offsets)
	}
	return b.String()
}
