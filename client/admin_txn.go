package client

// Transactions seen from outside (KIP-664), what kafka-transactions.sh
// shows: ListTransactions asks every broker for the transactions it
// coordinates, DescribeTransactions asks a transactional id's coordinator,
// DescribeProducers asks a partition's leader which producers it remembers
// and where their open transactions start.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TransactionListing is one transaction as ListTransactions reports it.
type TransactionListing struct {
	TransactionalID string
	ProducerID      int64
	// State is Kafka's TransactionState name: Empty, Ongoing,
	// PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
	// PrepareEpochFence.
	State string
	// Coordinator is the broker that listed the transaction: its
	// transaction coordinator.
	Coordinator int32
}

// ListTransactionsFilter narrows ListTransactions. The zero value lists
// every transaction.
type ListTransactionsFilter struct {
	// States keeps transactions in one of these states (TransactionState
	// names, e.g. "Ongoing"). A name the coordinator does not know matches
	// nothing, as in Kafka.
	States []string
	// ProducerIDs keeps transactions of these producer ids.
	ProducerIDs []int64
	// RunningLongerThan keeps transactions open for longer than this
	// (KIP-994, ListTransactions v1); 0 keeps all. A broker that only
	// speaks v0 fails the call with ErrUnsupportedRequest rather than
	// ignore the filter.
	RunningLongerThan time.Duration
	// TransactionalIDPattern keeps transactions whose transactional id the
	// regular expression (RE2 syntax) is found in (KIP-1152,
	// ListTransactions v2); "" keeps all. A broker that only speaks v0–v1
	// fails the call with ErrUnsupportedRequest, and one that cannot
	// compile the pattern with an INVALID_REGULAR_EXPRESSION error.
	TransactionalIDPattern string
}

// ListTransactions lists the transactions of every broker (each broker
// reports those it coordinates, as Kafka's Admin.listTransactions asks
// each), sorted by transactional id then coordinator. A broker that
// cannot answer within RequestRetries fails the whole call: a partial
// list would hide transactions.
//
// Safe for concurrent use; it blocks until every broker has answered.
func (a *Admin) ListTransactions(ctx context.Context, filter ListTransactionsFilter) ([]TransactionListing, error) {
	m, err := a.cl.FetchMetadata(ctx, []string{})
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	ids := make([]int32, 0, len(m.Brokers))
	for id := range m.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []TransactionListing
	for _, id := range ids {
		var listed []TransactionListing
		err := a.retry(ctx, func() error {
			// A new request each time: sending sets its version.
			req := kmsg.NewPtrListTransactionsRequest()
			req.StateFilters, req.ProducerIDFilters = filter.States, filter.ProducerIDs
			if filter.RunningLongerThan > 0 {
				req.DurationFilterMillis = filter.RunningLongerThan.Milliseconds()
			}
			if filter.TransactionalIDPattern != "" {
				req.TransactionalIDPattern = &filter.TransactionalIDPattern
			}
			kresp, err := a.cl.BrokerRequest(ctx, id, req)
			if err != nil {
				return err
			}
			if filter.RunningLongerThan > 0 && req.Version < 1 {
				return fmt.Errorf("a duration filter needs ListTransactions v1 (KIP-994): %w", ErrUnsupportedRequest)
			}
			if filter.TransactionalIDPattern != "" && req.Version < 2 {
				return fmt.Errorf("a transactional id pattern needs ListTransactions v2 (KIP-1152): %w", ErrUnsupportedRequest)
			}
			resp := kresp.(*kmsg.ListTransactionsResponse)
			if err := ErrorForCode(resp.ErrorCode); err != nil {
				return err
			}
			listed = listed[:0]
			for _, s := range resp.TransactionStates {
				listed = append(listed, TransactionListing{TransactionalID: s.TransactionalID, ProducerID: s.ProducerID, State: s.TransactionState, Coordinator: id})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list transactions on broker %d: %w", id, err)
		}
		out = append(out, listed...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].TransactionalID != out[j].TransactionalID {
			return out[i].TransactionalID < out[j].TransactionalID
		}
		return out[i].Coordinator < out[j].Coordinator
	})
	return out, nil
}

// TransactionDescription is one transactional id as its coordinator
// describes it (DescribeTransactions). Err is the id's own error:
// TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the other fields are then
// unknown (-1).
type TransactionDescription struct {
	TransactionalID string
	Coordinator     int32
	// State is Kafka's TransactionState name (see TransactionListing).
	State         string
	ProducerID    int64
	ProducerEpoch int16
	// TransactionTimeoutMs is the producer's transaction.timeout.ms.
	TransactionTimeoutMs int32
	// TransactionStartTimeMs is when the open transaction began (Unix
	// ms), -1 when none is open.
	TransactionStartTimeMs int64
	// Partitions are the partitions in the open transaction; while it
	// commits or aborts, only those still without their marker.
	Partitions []TopicPartition
	Err        error
}

// DescribeTransactions describes transactional ids, in the order asked,
// asking each id's transaction coordinator (FindCoordinator key type 1).
// The coordinator is looked up again when it moved (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS), up to
// RequestRetries times.
//
// Safe for concurrent use; it blocks until every id is described.
func (a *Admin) DescribeTransactions(ctx context.Context, transactionalIDs ...string) ([]TransactionDescription, error) {
	out := make([]TransactionDescription, 0, len(transactionalIDs))
	for _, id := range transactionalIDs {
		var d TransactionDescription
		err := a.retry(ctx, func() error {
			coord, err := a.cl.Coordinator(ctx, TxnCoordinator, id)
			if err != nil {
				return err
			}
			req := kmsg.NewPtrDescribeTransactionsRequest()
			req.TransactionalIDs = []string{id}
			kresp, err := a.cl.BrokerRequest(ctx, coord, req)
			if err != nil {
				a.cl.InvalidateCoordinator(TxnCoordinator, id)
				return err
			}
			resp := kresp.(*kmsg.DescribeTransactionsResponse)
			if len(resp.TransactionStates) != 1 {
				return fmt.Errorf("%d transactional ids in the response, want 1", len(resp.TransactionStates))
			}
			s := resp.TransactionStates[0]
			terr := ErrorForCode(s.ErrorCode)
			if IsRetriable(terr) {
				a.cl.InvalidateCoordinator(TxnCoordinator, id)
				return fmt.Errorf("coordinator %d: %w", coord, terr)
			}
			d = TransactionDescription{TransactionalID: id, Coordinator: coord, Err: terr,
				ProducerID: -1, ProducerEpoch: -1, TransactionTimeoutMs: -1, TransactionStartTimeMs: -1}
			if terr != nil {
				return nil
			}
			d.State, d.ProducerID, d.ProducerEpoch = s.State, s.ProducerID, s.ProducerEpoch
			d.TransactionTimeoutMs = s.TimeoutMillis
			if s.StartTimestamp >= 0 {
				d.TransactionStartTimeMs = s.StartTimestamp
			}
			for _, t := range s.Topics {
				for _, p := range t.Partitions {
					d.Partitions = append(d.Partitions, TopicPartition{t.Topic, p})
				}
			}
			sort.Slice(d.Partitions, func(i, j int) bool {
				if d.Partitions[i].Topic != d.Partitions[j].Topic {
					return d.Partitions[i].Topic < d.Partitions[j].Topic
				}
				return d.Partitions[i].Partition < d.Partitions[j].Partition
			})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("describe transaction %s: %w", id, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// ProducerState is one producer a partition's leader remembers
// (DescribeProducers).
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int32
	// LastSequence is the last sequence number of the producer's newest
	// batch, -1 when unknown.
	LastSequence int32
	// LastTimestamp is the newest batch's max timestamp (Unix ms), -1
	// when unknown.
	LastTimestamp int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker, -1 when it has written none.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of the producer's open
	// transaction on the partition, -1 when none is open. An old one is
	// what kafka-transactions.sh find-hanging looks for: it holds back
	// the last stable offset.
	CurrentTxnStartOffset int64
}

// PartitionProducers are the active producers of one partition, as its
// leader reported them. Err is the partition's error
// (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, or a retriable
// one that outlived RequestRetries).
type PartitionProducers struct {
	TopicPartition
	// Leader is the broker that answered, -1 if none did.
	Leader          int32
	ActiveProducers []ProducerState
	Err             error
}

// DescribeProducers describes the active (idempotent and transactional)
// producers of topic's partitions, every partition when none are named,
// sorted by partition. Each partition's leader answers; partitions whose
// leader moved are asked again after a metadata refresh, up to
// RequestRetries times.
//
// Safe for concurrent use; it blocks until every partition has an answer
// or an error.
func (a *Admin) DescribeProducers(ctx context.Context, topic string, partitions ...int32) ([]PartitionProducers, error) {
	if len(partitions) == 0 {
		tm, err := a.cl.TopicMetadata(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("describe producers: %w", err)
		}
		for _, p := range tm.Partitions {
			partitions = append(partitions, p.Partition)
		}
	}
	results := make(map[int32]PartitionProducers, len(partitions))
	remaining := slices.Clone(partitions)
	slices.Sort(remaining)
	remaining = slices.Compact(remaining)
	for attempt := 0; len(remaining) > 0; attempt++ {
		byLeader := map[int32][]int32{}
		var retry []int32
		for _, p := range remaining {
			leader, err := a.cl.PartitionLeader(ctx, topic, p)
			if err != nil {
				results[p] = PartitionProducers{TopicPartition: TopicPartition{topic, p}, Leader: -1, Err: err}
				if IsRetriable(err) {
					retry = append(retry, p)
				}
				continue
			}
			byLeader[leader] = append(byLeader[leader], p)
		}
		for _, leader := range sortedIDs(byLeader) {
			ps := byLeader[leader]
			req := kmsg.NewPtrDescribeProducersRequest()
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = topic, ps
			req.Topics = append(req.Topics, rt)
			kresp, err := a.cl.BrokerRequest(ctx, leader, req)
			if err != nil {
				if !IsRetriable(err) {
					return nil, fmt.Errorf("describe producers of %s on broker %d: %w", topic, leader, err)
				}
				for _, p := range ps {
					results[p] = PartitionProducers{TopicPartition: TopicPartition{topic, p}, Leader: -1, Err: err}
				}
				retry = append(retry, ps...)
				continue
			}
			for _, t := range kresp.(*kmsg.DescribeProducersResponse).Topics {
				if t.Topic != topic {
					continue
				}
				for _, rp := range t.Partitions {
					if !slices.Contains(ps, rp.Partition) {
						continue // not asked of this broker
					}
					pp := PartitionProducers{TopicPartition: TopicPartition{topic, rp.Partition}, Leader: leader,
						Err: errorWithMessage(rp.ErrorCode, rp.ErrorMessage)}
					if IsRetriable(pp.Err) {
						retry = append(retry, rp.Partition)
					}
					for _, ap := range rp.ActiveProducers {
						pp.ActiveProducers = append(pp.ActiveProducers, ProducerState{
							ProducerID: ap.ProducerID, ProducerEpoch: ap.ProducerEpoch,
							LastSequence: ap.LastSequence, LastTimestamp: ap.LastTimestamp,
							CoordinatorEpoch: ap.CoordinatorEpoch, CurrentTxnStartOffset: ap.CurrentTxnStartOffset,
						})
					}
					sort.Slice(pp.ActiveProducers, func(i, j int) bool {
						return pp.ActiveProducers[i].ProducerID < pp.ActiveProducers[j].ProducerID
					})
					results[rp.Partition] = pp
				}
			}
			for _, p := range ps {
				if _, ok := results[p]; !ok {
					results[p] = PartitionProducers{TopicPartition: TopicPartition{topic, p}, Leader: leader,
						Err: fmt.Errorf("broker %d did not answer for %s-%d", leader, topic, p)}
				}
			}
		}
		if len(retry) == 0 || attempt >= a.cl.cfg.requestRetries {
			break
		}
		a.cl.TriggerMetadataRefresh()
		if err := a.cl.backoff(ctx, attempt); err != nil {
			return nil, fmt.Errorf("describe producers of %s: %w", topic, err)
		}
		if _, err := a.cl.FetchMetadata(ctx, []string{topic}); err != nil {
			return nil, fmt.Errorf("describe producers of %s: %w", topic, err)
		}
		remaining = retry
	}
	out := make([]PartitionProducers, 0, len(results))
	for _, p := range sortedIDs(results) {
		out = append(out, results[p])
	}
	return out, nil
}

// sortedIDs returns m's partition or broker ids in ascending order.
func sortedIDs[V any](m map[int32]V) []int32 {
	keys := make([]int32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// AbortTransactionSpec names one transaction on one partition for
// AbortTransaction: the producer and epochs its ABORT marker carries, as
// kafka-transactions.sh abort reads them from DescribeProducers
// (ProducerState.ProducerEpoch and CoordinatorEpoch).
type AbortTransactionSpec struct {
	Topic         string
	Partition     int32
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the marker's coordinator epoch. The leader
	// refuses one older than the last marker it has from this producer
	// (TRANSACTION_COORDINATOR_FENCED); for a producer that never had a
	// marker (-1 in DescribeProducers) 0 is what Kafka's tool sends.
	CoordinatorEpoch int32
}

// AbortTransaction ends a hanging transaction on one partition (KIP-664):
// it writes an ABORT marker there itself, sending WriteTxnMarkers to the
// partition's leader as Kafka's Admin.abortTransaction does, in place of
// the transaction coordinator that never will. The leader refuses a
// marker of an older producer epoch (INVALID_PRODUCER_EPOCH) or
// coordinator epoch (TRANSACTION_COORDINATOR_FENCED) than its own; those
// and other Kafka errors are returned as *Error. NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, a partition without a leader and dead
// connections are retried after a metadata refresh, up to RequestRetries
// times: a second ABORT marker is harmless, the leader accepts markers of
// a producer with no transaction open.
//
// Safe for concurrent use; it blocks until the leader has the marker
// in-sync (acks=all) or the call fails.
func (a *Admin) AbortTransaction(ctx context.Context, spec AbortTransactionSpec) error {
	for attempt := 0; ; attempt++ {
		err := a.writeAbortMarker(ctx, spec)
		if err == nil {
			return nil
		}
		if !abortRetriable(err) || attempt >= a.cl.cfg.requestRetries {
			return fmt.Errorf("abort transaction of producer %d (epoch %d) on %s-%d: %w",
				spec.ProducerID, spec.ProducerEpoch, spec.Topic, spec.Partition, err)
		}
		if werr := a.cl.backoff(ctx, attempt); werr != nil {
			return fmt.Errorf("abort transaction on %s-%d: %w (after %v)", spec.Topic, spec.Partition, werr, err)
		}
		// The leader is looked up again from fresh metadata, not the
		// cache that named the wrong one.
		if _, ferr := a.cl.FetchMetadata(ctx, []string{spec.Topic}); ferr != nil && !IsRetriable(ferr) {
			return fmt.Errorf("abort transaction on %s-%d: %w", spec.Topic, spec.Partition, ferr)
		}
	}
}

// abortRetriable says whether AbortTransaction looks the leader up again
// after err: the errors of Kafka's AbortTransactionHandler that unmap the
// partition, a partition between leaders, or a request that never got an
// answer. Other Kafka codes (NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH,
// ...) are the caller's to judge, as in Kafka.
func abortRetriable(err error) bool {
	var ke *Error
	if errors.As(err, &ke) {
		return errors.Is(err, ErrNotLeaderOrFollower) || errors.Is(err, ErrUnknownTopicOrPartition) ||
			errors.Is(err, errLeaderNotAvailable)
	}
	return IsRetriable(err)
}

// errLeaderNotAvailable (5): a partition between leaders.
var errLeaderNotAvailable = codeError(5)

// writeAbortMarker sends spec's ABORT marker once to the partition's
// leader as the cache names it.
func (a *Admin) writeAbortMarker(ctx context.Context, spec AbortTransactionSpec) error {
	leader, err := a.cl.PartitionLeader(ctx, spec.Topic, spec.Partition)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = spec.ProducerID, spec.ProducerEpoch, false, spec.CoordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = spec.Topic, []int32{spec.Partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	kresp, err := a.cl.BrokerRequest(ctx, leader, req)
	if err != nil {
		return fmt.Errorf("broker %d: %w", leader, err)
	}
	for _, rm := range kresp.(*kmsg.WriteTxnMarkersResponse).Markers {
		if rm.ProducerID != spec.ProducerID {
			continue
		}
		for _, rt := range rm.Topics {
			if rt.Topic != spec.Topic {
				continue
			}
			for _, rp := range rt.Partitions {
				if rp.Partition == spec.Partition {
					if err := ErrorForCode(rp.ErrorCode); err != nil {
						return fmt.Errorf("leader %d: %w", leader, err)
					}
					return nil
				}
			}
		}
	}
	return fmt.Errorf("leader %d did not answer for %s-%d", leader, spec.Topic, spec.Partition)
}
