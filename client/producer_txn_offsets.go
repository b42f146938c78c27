package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupMetadata is a consumer group member as SendOffsetsToTransaction
// names it (Java's ConsumerGroupMetadata). With MemberID and GenerationID
// set the group coordinator refuses the offsets of a member that is no
// longer in the generation (KIP-447), so a zombie's transaction cannot
// commit; with only GroupID it accepts them as from outside the group.
type GroupMetadata struct {
	GroupID string
	// GenerationID is sent only with a MemberID (-1 otherwise).
	GenerationID int32
	MemberID     string
	// GroupInstanceID is the static member id (group.instance.id), if any.
	GroupInstanceID string
}

// GroupMetadata returns the consumer's group membership for
// SendOffsetsToTransaction: its group, and its member id and generation
// when it is a member (ConsumeTopics); only the group for a consumer that
// assigned its partitions itself. The generation changes at each
// rebalance, so take it after the Poll whose records the transaction
// processed. Safe for concurrent use.
func (c *Consumer) GroupMetadata() GroupMetadata {
	memberID, generation, _ := c.memberForCommit()
	md := GroupMetadata{GroupID: c.cfg.group, GenerationID: generation, MemberID: memberID}
	if c.cfg.instanceID != nil {
		md.GroupInstanceID = *c.cfg.instanceID
	}
	return md
}

// SendOffsetsToTransaction adds a consumer group's offsets to the open
// transaction (Java's sendOffsetsToTransaction): AddOffsetsToTxn to the
// transaction coordinator, then TxnOffsetCommit to the group's coordinator.
// Under transaction version 2 only TxnOffsetCommit (v5) is sent, and the
// group coordinator adds the offsets to the transaction.
// The offsets (topic → partition → next offset to consume) become the
// group's committed offsets if and only if the transaction commits: the
// consume-transform-produce loop's exactly-once step. The consumer should
// not commit offsets itself (AutoCommit(false)) and should read with
// Isolation(ReadCommitted).
//
// A refusal by the group (the member was fenced: ErrCommitFailed, a
// missing authorization) makes the transaction abortable; ctx ending
// returns ctx's error and leaves the transaction open. Serialized with the
// other transactional calls.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[string]map[int32]int64, group GroupMetadata) error {
	t, err := p.txnFor("send offsets to transaction")
	if err != nil {
		return err
	}
	if group.GroupID == "" {
		return fmt.Errorf("send offsets to transaction: no group id")
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	switch s := t.current(); s {
	case txnInProgress:
	case txnAbortable, txnFatal:
		return fmt.Errorf("send offsets to transaction: %w", t.failure())
	default:
		return fmt.Errorf("send offsets to transaction: %w: %s", ErrTransactionState, s)
	}
	if t.v2.Load() {
		t.mu.Lock()
		t.addSent = true // the commit adds the group's partition
		t.mu.Unlock()
	} else if err := t.addOffsets(ctx, group.GroupID); err != nil {
		return fmt.Errorf("send offsets to transaction: %w", err)
	}
	if err := t.commitOffsets(ctx, offsets, group); err != nil {
		return fmt.Errorf("send offsets to transaction: %w", err)
	}
	return nil
}

// addOffsets is AddOffsetsToTxn: the coordinator adds the group's
// __consumer_offsets partition to the transaction.
func (t *txnManager) addOffsets(ctx context.Context, group string) error {
	id := t.p.currentID()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID = t.id
	req.ProducerID, req.ProducerEpoch = id.id, id.epoch
	req.Group = group
	t.mu.Lock()
	t.addSent = true
	t.mu.Unlock()
	kresp, err := t.request(ctx, req, maxTxnRequestVersion, func(r kmsg.Response) int16 {
		return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	})
	if err != nil {
		if isFatalKafkaError(err) {
			return t.fail(err)
		}
		return err
	}
	if err := errorWithMessage(kresp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode, nil); err != nil {
		return t.fail(fmt.Errorf("add offsets of group %s to transaction: %w", group, err))
	}
	t.mu.Lock()
	t.added = true
	t.mu.Unlock()
	return nil
}

// commitOffsets is TxnOffsetCommit to the group coordinator, retrying the
// partitions whose error is retriable.
func (t *txnManager) commitOffsets(ctx context.Context, offsets map[string]map[int32]int64, group GroupMetadata) error {
	pending := map[groupTP]int64{}
	for topic, parts := range offsets {
		for part, off := range parts {
			pending[groupTP{topic, part}] = off
		}
	}
	maxVersion := t.endVersion()
	var last error
	for attempt := 0; len(pending) > 0; attempt++ {
		if last != nil {
			if err := t.sleep(ctx, t.p.cl.backoffFor(attempt-1)); err != nil {
				return fmt.Errorf("commit offsets of group %s in transaction: %w (last: %v)", group.GroupID, err, last)
			}
		}
		id := t.p.currentID()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID = t.id
		req.Group = group.GroupID
		req.ProducerID, req.ProducerEpoch = id.id, id.epoch
		req.Generation, req.MemberID = -1, ""
		if group.MemberID != "" {
			req.Generation, req.MemberID = group.GenerationID, group.MemberID
		}
		if group.GroupInstanceID != "" {
			req.InstanceID = &group.GroupInstanceID
		}
		byTopic := map[string][]kmsg.TxnOffsetCommitRequestTopicPartition{}
		for _, tp := range slices.SortedFunc(maps.Keys(pending), compareTP) {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = tp.Partition, pending[tp], -1
			byTopic[tp.Topic] = append(byTopic[tp.Topic], rp)
		}
		for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic, rt.Partitions = topic, byTopic[topic]
			req.Topics = append(req.Topics, rt)
		}
		// CoordinatorRequest re-finds the group coordinator on
		// NOT_COORDINATOR and the like.
		kresp, err := t.p.cl.CoordinatorRequest(ctx, GroupCoordinator, group.GroupID, versionCapped{Request: req, max: maxVersion})
		if err != nil {
			if ctx.Err() == nil && IsRetriable(err) {
				last = err
				continue
			}
			err = fmt.Errorf("commit offsets of group %s in transaction: %w", group.GroupID, err)
			if isFatalKafkaError(err) {
				return t.fail(err)
			}
			return err
		}
		last = nil
		for _, rt := range kresp.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				tp := groupTP{rt.Topic, rp.Partition}
				if _, ok := pending[tp]; !ok {
					continue
				}
				switch err := errorWithMessage(rp.ErrorCode, nil); {
				case err == nil:
					delete(pending, tp)
				case IsRetriable(err) || rp.ErrorCode == 51:
					last = err
				case rp.ErrorCode == codeIllegalGeneration || rp.ErrorCode == codeUnknownMemberID:
					return t.fail(fmt.Errorf("commit %s-%d for group %s in transaction: %w: %w", tp.Topic, tp.Partition, group.GroupID, ErrCommitFailed, err))
				default:
					return t.fail(fmt.Errorf("commit %s-%d for group %s in transaction: %w", tp.Topic, tp.Partition, group.GroupID, err))
				}
			}
		}
		if len(pending) > 0 && last == nil {
			last = errors.New("partitions missing from the TxnOffsetCommit response")
		}
	}
	if maxVersion >= txnV2RequestVersion {
		t.mu.Lock()
		t.added = true
		t.mu.Unlock()
	}
	return nil
}

func compareTP(a, b groupTP) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition - b.Partition)
}
