package broker

// TxnOffsetCommit (key 28), v0–v5: a transactional producer's offset
// commit for a consumer group (KIP-98; v3 carries the group member,
// KIP-447), sent to the group's coordinator after AddOffsetsToTxn; from v5
// (transaction version 2, KIP-890 part 2) without it: the group
// coordinator adds the offsets partition to the transaction itself. v4
// may answer TRANSACTION_ABORTABLE (KIP-890 part 1). The
// offsets are written to __consumer_offsets in a transactional batch of the
// producer, and stay invisible to OffsetFetch until the transaction's
// COMMIT marker reaches that partition (an ABORT drops them); OffsetFetch
// with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile.
//
// Errors as OffsetCommit's (handle_offset_commit.go), plus: an empty
// transactional id is INVALID_REQUEST; the member checks (v3) are
// UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION and FENCED_INSTANCE_ID; a group
// this coordinator does not know is created Empty for a producer without
// a generation; the producer's epoch is checked by the partition's log
// (INVALID_PRODUCER_EPOCH for an old one, as Kafka's append answers).
// With transaction.partition.verification.enable the transaction
// coordinator first confirms that the group's offsets partition is in the
// producer's transaction (txn_verify.go): INVALID_TXN_STATE when it is not,
// INVALID_PRODUCER_EPOCH when fenced, COORDINATOR_NOT_AVAILABLE while it
// cannot say.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/group"
	"github.com/keelstream/keel/network"
)

func (b *Broker) handleTxnOffsetCommit(ctx context.Context, m *kmsg.TxnOffsetCommitRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	all := func(code int16) *kmsg.TxnOffsetCommitResponse {
		code = fencedCode(code, m.Version, 3)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		return resp
	}
	switch {
	case m.TransactionalID == "":
		return respond(all(kerr.InvalidRequest.Code))
	case m.Group == "":
		return respond(all(kerr.InvalidGroupID.Code))
	}
	req := group.TxnCommitRequest{Group: m.Group, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Generation: -1}
	if m.Version >= 3 {
		req.MemberID, req.Generation = m.MemberID, m.Generation
		if m.InstanceID != nil {
			req.InstanceID = *m.InstanceID
		}
	}
	var slots []*kmsg.TxnOffsetCommitResponseTopicPartition
	img := b.currentImage()
	for i, t := range m.Topics {
		mt, known := img.Topic(t.Topic)
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if !known || p.Partition < 0 || int(p.Partition) >= len(mt.Partitions) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			epoch := p.LeaderEpoch
			if m.Version < 2 {
				epoch = -1
			}
			req.Partitions = append(req.Partitions, group.CommitPartition{Topic: t.Topic, Partition: p.Partition,
				Offset: p.Offset, LeaderEpoch: epoch, Metadata: meta})
			slots = append(slots, rp)
		}
	}
	if len(req.Partitions) == 0 {
		return respond(resp)
	}
	// Verified before the group checks, as in Kafka; like a produce
	// request, this one waits for the answer before its connection's
	// next request is read.
	check, code := b.verifyTxnOffsetCommit(ctx, m)
	if code != 0 {
		return respond(all(code))
	}
	errResp := func(code int16) kmsg.Response { return all(code) }
	return b.onShard(m.Group, errResp, func(s *offsetsShard, now int64, answer func(kmsg.Response)) {
		codes, eff := s.mgr.CommitTxnOffsets(now, req)
		for i, c := range codes {
			slots[i].ErrorCode = fencedCode(c, m.Version, 3)
		}
		s.applyChecked(eff, check, func(code int16) {
			if code != 0 {
				for i, c := range codes {
					if c == 0 {
						slots[i].ErrorCode = fencedCode(code, m.Version, 3)
					}
				}
			}
			answer(resp)
		})
	})
}
