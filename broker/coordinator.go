package broker

// The group coordinator (DESIGN §6): the coordinator of group G is the
// leader of __consumer_offsets partition abs(javaHashCode(G)) % its
// partition count. For every offsets partition this node leads, an
// offsetsShard runs a group.Manager, the pure state machine, in the shared
// coordinator runtime (coordshard.go): it loads the partition's log, serves
// the group requests in arrival order, and answers them once the records
// they wrote are committed (Kafka appends coordinator records with
// acks=all).

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// offsetsTopic is the internal topic of the group coordinator.
const offsetsTopic = "__consumer_offsets"

// groupCoordinator routes group requests to the shard of their offsets
// partition.
type groupCoordinator struct {
	*shardRouter[*offsetsShard]
}

func newGroupCoordinator(b *Broker) *groupCoordinator {
	topic := func() internalTopic {
		return internalTopic{name: offsetsTopic, partitions: b.cfg.OffsetsTopicNumPartitions,
			replicationFactor: b.cfg.OffsetsTopicReplicationFactor, setting: "offsets.topic.replication.factor",
			configs: map[string]string{"cleanup.policy": "compact"}}
	}
	return &groupCoordinator{newShardRouter(b, topic, func(p *partition, epoch int32) *offsetsShard {
		s := &offsetsShard{coordShard: newCoordShard(b, p, epoch)}
		s.m = s
		return s
	})}
}

// completeTxn tells the shard of offsets partition p that a producer's
// transaction ended there (its marker is committed): the producer's
// transactional offset commits become visible or are dropped. Without a
// shard (no longer led here) the next leader's load reads the marker.
func (gc *groupCoordinator) completeTxn(p *partition, producerID int64, commit bool) {
	gc.mu.Lock()
	s, ok := gc.shards[p.tp.Partition]
	gc.mu.Unlock()
	if !ok || s.p != p {
		return
	}
	// Queued behind the load if it still runs: the load may or may not
	// have read the marker, and completing twice is a no-op. The writes
	// appended before the marker are committed too: they are applied
	// first, in log order.
	s.submit(func(now int64) {
		s.flushPending(now)
		s.mgr.CompleteTxn(producerID, commit)
	}, func() {})
}

// offsetsShard is the coordinator of one offsets partition this node
// leads: the shard goroutine owns mgr.
type offsetsShard struct {
	*coordShard
	mgr *group.Manager
}

func (s *offsetsShard) core() *coordShard { return s.coordShard }

func (s *offsetsShard) reset(now int64) {
	s.mgr = group.NewManager(s.b.cfg.groupConfig(), now, newMemberUUID)
	s.mgr.Topics = func() group.TopicImage { return imageTopics{img: s.b.currentImage()} }
	s.mgr.GroupConfigs = func(id string) (int64, int64) { return groupConfigOverrides(s.b.currentImage(), id) }
}

// replay loads one record (Kafka's loadGroupsAndOffsets): a transactional
// batch's offsets are pending for its producer until its marker, which
// commits or drops them.
func (s *offsetsShard) replay(h *record.BatchHeader, r *record.Record) error {
	switch {
	case h.IsControl():
		if !h.HasProducerID() {
			return nil
		}
		typ, err := record.ParseControlRecord(r.Key)
		if err != nil {
			return err
		}
		if typ == record.ControlCommit || typ == record.ControlAbort {
			s.mgr.ReplayMarker(h.ProducerID, typ == record.ControlCommit)
		}
		return nil
	case r.Key == nil:
		return nil
	case h.IsTransactional():
		return s.mgr.ReplayTxn(h.ProducerID, r.Offset, r.Key, r.Value)
	}
	return s.mgr.ReplayAt(r.Offset, r.Key, r.Value)
}

func (s *offsetsShard) loaded(now int64, records int, elapsed time.Duration) {
	s.mgr.FinishLoad(now)
	s.b.log.Info("loaded groups", "partition", s.p.tp, "leader_epoch", s.leaderEpoch, "records", records,
		"groups", len(s.mgr.GroupIDs()), "elapsed", elapsed)
}

func (s *offsetsShard) nextDeadline() int64 { return s.mgr.NextDeadline() }

func (s *offsetsShard) tick(now int64) { s.apply(s.mgr.Tick(now), nil) }

func (s *offsetsShard) unload() {
	if s.mgr != nil {
		s.reply(s.mgr.Unload(), 0)
	}
}

// apply carries out a Manager's Effects: the records are appended as one
// batch and the replies sent once it is committed (done, if not nil, is
// called then with 0 or the error code the replies carry).
func (s *offsetsShard) apply(eff group.Effects, done func(code int16)) {
	s.applyChecked(eff, txnAppendCheck{}, done)
}

// applyChecked is apply for a TxnOffsetCommit's Effects, whose batch
// carries the transaction verification check.
func (s *offsetsShard) applyChecked(eff group.Effects, check txnAppendCheck, done func(code int16)) {
	if len(eff.Records) == 0 {
		s.reply(eff, 0)
		if done != nil {
			done(0)
		}
		return
	}
	required, code := s.append(eff, check, s.nowMs())
	if code != 0 {
		s.finish(eff, done, code, 0)
		return
	}
	s.await(required, s.b.cfg.OffsetsCommitTimeout, func(code int16) { s.finish(eff, done, code, required-1) })
}

// finish completes a write: applies its offsets (those of the batch at
// offset) and answers its replies, or answers them with code (and
// rebalances groups whose metadata was lost, as Kafka does when storing a
// group fails).
func (s *offsetsShard) finish(eff group.Effects, done func(code int16), code int16, offset int64) {
	if code != 0 {
		s.mgr.FailCommits(eff.Commits)
	} else {
		s.mgr.ApplyCommitsAt(eff.Commits, offset)
		for _, id := range eff.Stored {
			if g := s.mgr.Group(id); g != nil {
				// Kafka's "Stabilized group ... generation ..." line.
				s.b.log.Info("stored group", "group", id, "state", g.State, "generation", g.Generation,
					"protocol", g.Protocol, "members", len(g.Members), "partition", s.p.tp)
			}
		}
	}
	s.reply(eff, code)
	if done != nil {
		done(code)
	}
	if code != 0 && !s.unloading {
		now := s.nowMs()
		for _, g := range eff.Stored {
			s.apply(s.mgr.StoreFailed(now, g), nil)
		}
	}
}

// reply answers the parked requests of eff, with code instead of their own
// when code is not 0.
func (s *offsetsShard) reply(eff group.Effects, code int16) {
	for _, j := range eff.Joins {
		if code != 0 {
			j = group.JoinReply{Waiter: j.Waiter, ErrorCode: code, MemberID: j.MemberID, Generation: -1}
		}
		if f, ok := j.Waiter.(func(group.JoinReply)); ok {
			f(j)
		}
	}
	for _, r := range eff.Syncs {
		if code != 0 {
			r = group.SyncReply{Waiter: r.Waiter, ErrorCode: code}
		}
		if f, ok := r.Waiter.(func(group.SyncReply)); ok {
			f(r)
		}
	}
}

// append writes eff's records as one batch and returns the offset the high
// watermark must reach, or the coordinator error code (Kafka's mapping in
// GroupMetadataManager.storeOffsets). A TxnOffsetCommit's batch is a
// transactional batch of its producer, so that the producer's marker
// decides it; the log checks its epoch, not its sequence (the
// coordinator's own append, as Kafka's AppendOrigin.COORDINATOR).
func (s *offsetsShard) append(eff group.Effects, check txnAppendCheck, now int64) (int64, int16) {
	opts := record.DefaultBatchOptions()
	if eff.Txn != nil {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = eff.Txn.ProducerID, eff.Txn.ProducerEpoch, 0, true
	}
	bb := record.NewBatchBuilder(opts)
	for _, r := range eff.Records {
		bb.Append(now, r.Key, r.Value, nil)
	}
	batch, err := bb.Build(nil)
	if err != nil {
		s.b.log.Error("building an offsets batch failed", "partition", s.p.tp, "error", err)
		return 0, kerr.UnknownServerError.Code
	}
	required, code, err := s.appendBatch(batch, check)
	switch {
	case code != 0:
		return 0, code
	case err == nil:
		return required, 0
	}
	switch c := storage.ErrorCode(err); c {
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
		return 0, kerr.InvalidCommitOffsetSize.Code
	case kerr.KafkaStorageError.Code:
		return 0, kerr.NotCoordinator.Code
	case kerr.InvalidProducerEpoch.Code, kerr.InvalidTxnState.Code:
		return 0, c // a TxnOffsetCommit of a fenced producer
	}
	return 0, kerr.CoordinatorNotAvailable.Code
}

// newMemberUUID is the random part of a member id (Kafka: a UUID).
func newMemberUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// onShard runs f on the shard of groupID and completes the returned result
// with what f answers; errResp builds the response for a group-level error
// code (not the coordinator, loading, or the shard stopped).
func (b *Broker) onShard(groupID string, errResp func(code int16) kmsg.Response, f func(s *offsetsShard, now int64, answer func(kmsg.Response))) network.Result {
	return onCoordShard(b.groups.shardRouter, groupID, errResp, f)
}
