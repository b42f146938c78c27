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
	"sync"
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

// offsetsShard is the coordinator of one offsets partition this node
// leads: the shard goroutine owns mgr.
type offsetsShard struct {
	*coordShard
	mgr *group.Manager
}

func (s *offsetsShard) core() *coordShard { return s.coordShard }

func (s *offsetsShard) reset(now int64) {
	s.mgr = group.NewManager(s.b.cfg.groupConfig(), now, newMemberUUID)
}

// replay loads one record (Kafka's loadGroupsAndOffsets); control batches
// and tombstone-less keys are skipped.
func (s *offsetsShard) replay(h *record.BatchHeader, r *record.Record) error {
	if h.IsControl() || r.Key == nil {
		return nil
	}
	return s.mgr.Replay(r.Key, r.Value)
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
	if len(eff.Records) == 0 {
		s.reply(eff, 0)
		if done != nil {
			done(0)
		}
		return
	}
	complete := func(code int16) { s.finish(eff, done, code) }
	required, code := s.append(eff.Records, s.nowMs())
	if code != 0 {
		complete(code)
		return
	}
	s.await(required, s.b.cfg.OffsetsCommitTimeout, complete)
}

// finish completes a write: applies its offsets and answers its replies,
// or answers them with code (and rebalances groups whose metadata was lost,
// as Kafka does when storing a group fails).
func (s *offsetsShard) finish(eff group.Effects, done func(code int16), code int16) {
	if code == 0 {
		s.mgr.ApplyCommits(eff.Commits)
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

// append writes records as one batch and returns the offset the high
// watermark must reach, or the coordinator error code (Kafka's mapping in
// GroupMetadataManager.storeOffsets).
func (s *offsetsShard) append(recs []group.Record, now int64) (int64, int16) {
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	for _, r := range recs {
		bb.Append(now, r.Key, r.Value, nil)
	}
	batch, err := bb.Build(nil)
	if err != nil {
		s.b.log.Error("building an offsets batch failed", "partition", s.p.tp, "error", err)
		return 0, kerr.UnknownServerError.Code
	}
	required, code, err := s.appendBatch(batch)
	switch {
	case code != 0:
		return 0, code
	case err == nil:
		return required, 0
	}
	switch storage.ErrorCode(err) {
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
		return 0, kerr.InvalidCommitOffsetSize.Code
	case kerr.KafkaStorageError.Code:
		return 0, kerr.NotCoordinator.Code
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
	s, code := b.groups.shardFor(groupID)
	if code != 0 {
		return respond(errResp(code))
	}
	d := network.NewDeferred()
	var once sync.Once
	answer := func(r kmsg.Response) { once.Do(func() { d.Complete(&network.Response{Msg: r}) }) }
	if !s.submit(func(now int64) { f(s, now, answer) }, func() { answer(errResp(kerr.NotCoordinator.Code)) }) {
		return respond(errResp(kerr.NotCoordinator.Code))
	}
	return d
}
