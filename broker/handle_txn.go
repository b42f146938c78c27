package broker

// The transactional producer's requests to its transaction coordinator
// (KIP-98), served by the shard of the transactional id's
// __transaction_state partition (txn_coordinator.go, broker/txn):
//
//   - InitProducerId (key 22) with a transactional id, v0–v5: a producer id
//     and a bumped epoch (KIP-360 retries with the current id and epoch,
//     v3+), after aborting the id's open transaction (the producer gets
//     CONCURRENT_TRANSACTIONS meanwhile and retries). An empty
//     transactional id is INVALID_REQUEST; a transaction.timeout.ms above
//     transaction.max.timeout.ms is INVALID_TRANSACTION_TIMEOUT.
//   - AddPartitionsToTxn (key 24), v0–v5 (v4+ is the brokers' batched form,
//     txn_verify.go: VerifyOnly asks, KIP-890 part 1; without it a leader
//     adds a partition on a transaction version 2 producer's first batch,
//     part 2): the partitions join the transaction. A
//     partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION
//     and the others OPERATION_NOT_ATTEMPTED, nothing added, as Kafka
//     answers; otherwise one code for every partition.
//   - AddOffsetsToTxn (key 25), v0–v4: the __consumer_offsets partition of
//     the group joins the transaction, so that the group's TxnOffsetCommit
//     is committed or aborted with it.
//   - EndTxn (key 26), v0–v5: PrepareCommit or PrepareAbort is written and
//     answered, then the markers go to every partition (txn_markers.go).
//     v5 is transaction version 2 (KIP-890 part 2): the epoch is bumped by
//     every EndTxn and the answer carries the producer id and epoch of the
//     producer's next transaction; an abort with nothing open is allowed
//     (broker/txn's endTxnV2). v4 may answer TRANSACTION_ABORTABLE.
//   - DescribeTransactions (key 65) v0 and ListTransactions (key 66) v0–v2:
//     the coordinator's view, for kafka-transactions.sh and kadm. v1 adds
//     the duration filter (KIP-994), v2 the transactional id pattern
//     (KIP-1152: an RE2 regular expression, found anywhere in the id; one
//     that does not compile is INVALID_REGULAR_EXPRESSION).
//
// Coordinator errors: NOT_COORDINATOR (another broker leads the
// partition), COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS while
// the id has a write or markers in flight, INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before each API's KIP-588
// version), INVALID_TXN_STATE.

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker/txn"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// initTransactionalProducerID serves an InitProducerId with a transactional
// id.
func (b *Broker) initTransactionalProducerID(m *kmsg.InitProducerIDRequest) network.Result {
	id := *m.TransactionalID
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = -1, -1, fencedCode(code, m.Version, 4)
		return resp
	}
	if id == "" {
		return respond(errResp(kerr.InvalidRequest.Code))
	}
	req := txn.InitProducerIDRequest{TransactionalID: id, TimeoutMs: m.TransactionTimeoutMillis, ProducerID: -1, ProducerEpoch: -1}
	if m.Version >= 3 {
		req.ProducerID, req.ProducerEpoch = m.ProducerID, m.ProducerEpoch
	}
	return onCoordShard(b.txns.shardRouter, id, errResp, func(s *txnShard, now int64, answer func(kmsg.Response)) {
		s.serve(now, func(r txn.Reply) {
			resp := errResp(r.ErrorCode).(*kmsg.InitProducerIDResponse)
			if r.ErrorCode == 0 {
				resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
			}
			answer(resp)
		}, func(now int64, reply func(txn.Reply)) {
			req.Waiter = reply
			s.apply(s.mgr.InitProducerID(now, req, b.allocateTransactionalProducerID))
		})
	})
}

// allocateTransactionalProducerID hands a transaction coordinator a new
// producer id. It runs on the shard goroutine, which waits when the
// broker's block is used up and the next comes from the controller (once
// per producerIDBlock, a controller round trip).
func (b *Broker) allocateTransactionalProducerID() (int64, error) {
	if id, ok := b.producerIDs.tryNext(); ok {
		return id, nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, producerIDAllocTimeout)
	defer cancel()
	return b.producerIDs.next(ctx, b.allocateProducerIDs)
}

func (b *Broker) handleAddPartitionsToTxn(m *kmsg.AddPartitionsToTxnRequest) network.Result {
	if m.Version >= 4 {
		return b.handleAddPartitionsToTxnBatch(m)
	}
	resp := m.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	all := func(code int16) *kmsg.AddPartitionsToTxnResponse {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return resp
	}
	errResp := func(code int16) kmsg.Response { return all(fencedCode(code, m.Version, 2)) }
	if m.TransactionalID == "" {
		return respond(errResp(kerr.InvalidRequest.Code))
	}
	var tps []txn.TopicPartition
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	if codes := unknownTxnPartitions(b.currentImage(), tps); codes != nil {
		k := 0 // the response lists the partitions in tps's order
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = codes[k]
				k++
			}
		}
		return respond(resp)
	}
	req := txn.AddPartitionsRequest{TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Partitions: tps}
	return b.addToTxn(req, errResp)
}

// unknownTxnPartitions is Kafka's check of an AddPartitionsToTxn's
// partitions against the metadata (handleAddPartitionToTransactionRequest):
// nil when it knows them all; otherwise nothing is added, and the code of
// each partition is UNKNOWN_TOPIC_OR_PARTITION for those it does not know,
// OPERATION_NOT_ATTEMPTED for the others.
func unknownTxnPartitions(img *metadata.Image, tps []txn.TopicPartition) []int16 {
	var codes []int16
	for i, tp := range tps {
		if t, ok := img.Topic(tp.Topic); ok && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			continue
		}
		if codes == nil {
			codes = txnCodes(len(tps), kerr.OperationNotAttempted.Code)
		}
		codes[i] = kerr.UnknownTopicOrPartition.Code
	}
	return codes
}

// addToTxn runs an AddPartitions on the transactional id's shard.
func (b *Broker) addToTxn(req txn.AddPartitionsRequest, errResp func(int16) kmsg.Response) network.Result {
	return onCoordShard(b.txns.shardRouter, req.TransactionalID, errResp, func(s *txnShard, now int64, answer func(kmsg.Response)) {
		s.serve(now, func(r txn.Reply) { answer(errResp(r.ErrorCode)) }, func(now int64, reply func(txn.Reply)) {
			req.Waiter = reply
			s.apply(s.mgr.AddPartitions(now, req))
		})
	})
}

func (b *Broker) handleAddOffsetsToTxn(m *kmsg.AddOffsetsToTxnRequest) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = fencedCode(code, m.Version, 2)
		return resp
	}
	switch {
	case m.TransactionalID == "":
		return respond(errResp(kerr.InvalidRequest.Code))
	case m.Group == "":
		return respond(errResp(kerr.InvalidGroupID.Code))
	}
	part := b.groups.partitionOf(m.Group)
	if part < 0 {
		// Kafka computes the partition from offsets.topic.num.partitions;
		// without the topic the group has no coordinator to commit to.
		b.groups.ensureTopic()
		return respond(errResp(kerr.CoordinatorNotAvailable.Code))
	}
	req := txn.AddPartitionsRequest{TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		Partitions: []txn.TopicPartition{{Topic: offsetsTopic, Partition: part}}}
	return b.addToTxn(req, errResp)
}

func (b *Broker) handleEndTxn(m *kmsg.EndTxnRequest) network.Result {
	errResp := func(code int16) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = fencedCode(code, m.Version, 2)
		return resp
	}
	if m.TransactionalID == "" {
		return respond(errResp(kerr.InvalidRequest.Code))
	}
	req := txn.EndTxnRequest{TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit,
		TV2: m.Version >= 5, Alloc: b.allocateTransactionalProducerID}
	return onCoordShard(b.txns.shardRouter, m.TransactionalID, errResp, func(s *txnShard, now int64, answer func(kmsg.Response)) {
		s.serve(now, func(r txn.Reply) {
			resp := errResp(r.ErrorCode).(*kmsg.EndTxnResponse)
			if r.ErrorCode == 0 && req.TV2 {
				resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
			}
			answer(resp)
		}, func(now int64, reply func(txn.Reply)) {
			req.Waiter = reply
			s.apply(s.mgr.EndTxn(now, req))
		})
	})
}

func (b *Broker) handleDescribeTransactions(m *kmsg.DescribeTransactionsRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	f := newGroupFanout(len(m.TransactionalIDs), func() *network.Response { return &network.Response{Msg: resp} })
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(m.TransactionalIDs))
	for i, id := range m.TransactionalIDs {
		st := &resp.TransactionStates[i]
		*st = kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		fail := func(code int16) {
			st.ErrorCode = code
			f.done()
		}
		if id == "" {
			fail(kerr.InvalidRequest.Code) // no shard to ask
			continue
		}
		s, code := b.txns.shardFor(id)
		if code != 0 {
			fail(code)
			continue
		}
		if !s.submit(func(int64) {
			d := s.mgr.Describe([]string{id})[0]
			st.ErrorCode, st.State, st.TimeoutMillis, st.StartTimestamp = d.ErrorCode, d.State, d.TimeoutMs, d.StartTimestamp
			if d.ErrorCode == 0 {
				st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			}
			for _, tp := range d.Partitions {
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					st.Topics = append(st.Topics, t)
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, tp.Partition)
			}
			f.done()
		}, func() { fail(kerr.NotCoordinator.Code) }) {
			fail(kerr.NotCoordinator.Code)
		}
	}
	return f.result()
}

func (b *Broker) handleListTransactions(m *kmsg.ListTransactionsRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.ListTransactionsResponse)
	if b.txns.anyLoading() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return respond(resp)
	}
	filter := txn.ListFilter{States: m.StateFilters, ProducerIDs: m.ProducerIDFilters, DurationFilterMs: -1}
	if m.Version >= 1 {
		filter.DurationFilterMs = m.DurationFilterMillis
	}
	if p := m.TransactionalIDPattern; m.Version >= 2 && p != nil && *p != "" {
		re, err := regexp.Compile(*p)
		if err != nil {
			b.log.Debug("list transactions: bad transactional id pattern", "pattern", *p, "error", err)
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return respond(resp)
		}
		filter.IDPattern = re
	}
	// Kafka reports the filter's unknown state names even with no shard.
	for _, name := range m.StateFilters {
		if _, ok := txn.ParseState(name); !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	shards := b.txns.loadedShards()
	var mu sync.Mutex
	f := newGroupFanout(len(shards), func() *network.Response {
		slices.SortFunc(resp.TransactionStates, func(a, c kmsg.ListTransactionsResponseTransactionState) int {
			return strings.Compare(a.TransactionalID, c.TransactionalID)
		})
		return &network.Response{Msg: resp}
	})
	for _, s := range shards {
		var once sync.Once
		finish := func() { once.Do(f.done) }
		ok := s.submit(func(now int64) {
			listed, _ := s.mgr.List(now, filter)
			mu.Lock()
			for _, l := range listed {
				st := kmsg.NewListTransactionsResponseTransactionState()
				st.TransactionalID, st.ProducerID, st.TransactionState = l.TransactionalID, l.ProducerID, l.State
				resp.TransactionStates = append(resp.TransactionStates, st)
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
