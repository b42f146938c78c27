package broker

// WriteTxnMarkers (key 27), v0–v1: the transaction coordinator's request
// to a partition leader to end a transaction there (Kafka's
// KafkaApis.handleWriteTxnMarkersRequest). Keel's coordinators send it to
// every leader, this node included; no client has a reason to.
//
// Per marker and partition:
//
//   - a partition not hosted here: NOT_LEADER_OR_FOLLOWER when the image
//     knows it, UNKNOWN_TOPIC_OR_PARTITION otherwise; hosted but not led:
//     NOT_LEADER_OR_FOLLOWER (the coordinator looks the leader up again);
//   - the COMMIT or ABORT control batch (coordinator epoch, producer id and
//     epoch) is appended as leader, with acks=all: fewer in-sync replicas
//     than min.insync.replicas is NOT_ENOUGH_REPLICAS, nothing appended;
//     the partition answers once the high watermark passed the marker,
//     REQUEST_TIMED_OUT after request.timeout.ms;
//   - the storage checks: a marker of an older producer epoch is
//     INVALID_PRODUCER_EPOCH, one of an older coordinator epoch
//     TRANSACTION_COORDINATOR_FENCED (a deposed coordinator);
//   - on __consumer_offsets, a committed marker also ends the producer's
//     transactional offset commits there: the group coordinator makes them
//     visible (COMMIT) or drops them (ABORT), as Kafka's
//     onTransactionCompleted.
//
// Markers go to a partition even when its producer has no transaction
// open there (the coordinator retries, and a topic's partitions may have
// been re-created): the storage accepts them, as Kafka does.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// txnMarkerTimeout bounds a marker's wait for the high watermark: Kafka's
// request.timeout.ms default, which its handler uses.
const txnMarkerTimeout = 30 * time.Second

func (b *Broker) handleWriteTxnMarkers(ctx context.Context, m *kmsg.WriteTxnMarkersRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	now := b.now().UnixMilli()
	var pending []producePending
	for _, mk := range m.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		for _, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for i, part := range t.Partitions {
				rp := &rt.Partitions[i]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = part
				p, required, code := b.appendMarker(t.Topic, part, &mk, now)
				rp.ErrorCode = code
				if p == nil {
					continue
				}
				pid, commit := mk.ProducerID, mk.Committed
				committed := func() { b.txnMarkerCommitted(p, pid, commit) }
				if produceMustWait(p, -1, required) {
					// rp stays valid: rt.Partitions keeps its array.
					pending = append(pending, producePending{p: p, code: &rp.ErrorCode, requiredOffset: required, acks: -1, committed: committed})
				} else {
					committed()
				}
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	if len(pending) == 0 {
		return respond(resp)
	}
	return b.parkProduce(ctx, resp, pending, txnMarkerTimeout)
}

// appendMarker appends one control batch as the partition's leader. It
// returns the partition and the offset the high watermark must reach, or
// the error code.
func (b *Broker) appendMarker(topic string, part int32, mk *kmsg.WriteTxnMarkersRequestMarker, now int64) (*partition, int64, int16) {
	p := b.lookup(storage.TopicPartition{Topic: topic, Partition: part})
	if p == nil || p.removed.Load() {
		return nil, 0, b.partitionError(topic, part)
	}
	st := p.state.Load()
	switch {
	case !st.isLeader:
		return nil, 0, kerr.NotLeaderForPartition.Code
	case st.underMinISR():
		return nil, 0, kerr.NotEnoughReplicas.Code
	}
	typ := record.ControlAbort
	if mk.Committed {
		typ = record.ControlCommit
	}
	batch, err := record.BuildControlBatch(nil, typ, mk.CoordinatorEpoch, mk.ProducerID, mk.ProducerEpoch, now)
	if err != nil {
		b.log.Error("building a transaction marker failed", "partition", p.tp, "error", err)
		return nil, 0, kerr.UnknownServerError.Code
	}
	info, err := p.log.AppendAsLeader(batch, storage.AppendOptions{LeaderEpoch: st.leaderEpoch, FromCoordinator: true, DeferFlush: st.durable})
	if err != nil {
		code := storage.ErrorCode(err)
		b.log.Debug("transaction marker refused", "partition", p.tp, "producer_id", mk.ProducerID, "error", err, "error_code", code)
		return nil, 0, code
	}
	p.metrics.produced(int64(info.Records), int64(info.Bytes))
	if st.durable {
		b.flusher.mark(p)
	}
	b.maybeAdvanceHighWatermark(p)
	p.fetchWatch.completeAll()
	return p, info.LastOffset + 1, 0
}

// txnMarkerCommitted runs once a marker is committed: on an offsets
// partition the group coordinator completes the producer's transactional
// offset commits.
func (b *Broker) txnMarkerCommitted(p *partition, producerID int64, commit bool) {
	if p.tp.Topic == offsetsTopic {
		b.groups.completeTxn(p, producerID, commit)
	}
}
