package broker

// Produce (key 0), v3–v13 served; ApiVersions advertises v0 (KAFKA-18659),
// and a v0–v2 request closes the connection, as Kafka 4 does (KIP-896).
//
// Per partition, in Kafka's order (ReplicaManager.appendRecords,
// Partition.appendRecordsToLeader):
//
//   - acks other than 0, 1, -1: INVALID_REQUIRED_ACKS for every partition;
//   - a topic id (v13+) this broker does not know: UNKNOWN_TOPIC_ID;
//   - a partition not hosted here: NOT_LEADER_OR_FOLLOWER when the image
//     knows it, UNKNOWN_TOPIC_OR_PARTITION otherwise; hosted but not led:
//     NOT_LEADER_OR_FOLLOWER, with the current leader and its endpoint
//     (v10+, KIP-951) so the client need not refresh its metadata;
//   - an internal topic (__consumer_offsets, __transaction_state):
//     INVALID_TOPIC_EXCEPTION, only coordinators append there;
//   - more than one batch for a partition: INVALID_RECORD (Kafka's
//     ProduceRequest.validateRecords); zstd before v7:
//     UNSUPPORTED_COMPRESSION_TYPE;
//   - acks=-1 with fewer in-sync replicas than min.insync.replicas:
//     NOT_ENOUGH_REPLICAS, nothing appended;
//   - the storage validation of every batch (framing, CRC, magic,
//     max.message.bytes, compression, decompressed size): the code of
//     storage.ErrorCode, nothing appended, the reason in ErrorMessage
//     (v8+);
//   - the topic's record policy (record_policy.go): with CreateTime, every
//     record timestamp within message.timestamp.before.max.ms and
//     message.timestamp.after.max.ms of the broker clock
//     (INVALID_TIMESTAMP), and on compacted topics a key on every record
//     (INVALID_RECORD); record_errors (v8+) name each record;
//   - a compression.type naming a codec: batches in another codec are
//     recompressed before the append (compression levels are the codecs'
//     defaults: compression.*.level is not applied yet);
//   - idempotent and transactional batches: the producer's sequence state
//     (storage/producer_state.go): a retried duplicate is acknowledged
//     with its original offsets, OUT_OF_ORDER_SEQUENCE_NUMBER on a gap,
//     INVALID_PRODUCER_EPOCH for an old epoch, INVALID_TXN_STATE for a
//     non-transactional batch of a producer with a transaction open. A
//     transactional batch opens the producer's transaction in the
//     partition (it holds the last stable offset) until the coordinator's
//     marker ends it; the batch that opens it is first verified with the
//     transaction coordinator (KIP-890 part 1, txn_verify.go);
//   - success: BaseOffset, LogAppendTime (v2+; -1 with CreateTime) and
//     LogStartOffset (v5+).
//
// acks=0 gets no response; if any partition failed, the connection is
// closed instead so the client notices (Kafka's behaviour). acks=1 answers
// once appended. acks=-1 answers once the high watermark has passed every
// appended batch: at once when the ISR is the leader alone (the high
// watermark is then the log end offset), otherwise the request parks in the
// produce purgatory (woken by high watermark and ISR changes) until
// TimeoutMillis, when the partitions still waiting answer REQUEST_TIMED_OUT.
// A partition that lost its leadership meanwhile answers
// NOT_LEADER_OR_FOLLOWER, one whose ISR fell below min.insync.replicas
// NOT_ENOUGH_REPLICAS_AFTER_APPEND.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// producePending is a partition of an acks=-1 produce (or of a
// WriteTxnMarkers) waiting for its high watermark.
type producePending struct {
	p *partition
	// code is the response partition's error code, set when settled.
	code           *int16
	requiredOffset int64 // the high watermark must reach it
	// acks is the request's: -1 waits for the high watermark; 1 waits,
	// in the durable mode only, for the local fsync (the durable offset).
	acks int16
	// committed, if set, runs when the partition settles without error.
	committed func()
}

// produceMustWait reports whether an append answered with acks waits in the
// purgatory: acks=-1 until the high watermark passes required, acks=1 in
// the durable mode (flush.messages=1) until the leader's fsync does.
func produceMustWait(p *partition, acks int16, required int64) bool {
	switch acks {
	case -1:
		return p.log.HighWatermark() < required
	case 1:
		return p.state.Load().durable && p.log.DurableOffset() < required
	}
	return false
}

func (b *Broker) handleProduce(ctx context.Context, req *network.Request, m *kmsg.ProduceRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.ProduceResponse)
	img := b.currentImage()
	acks := m.Acks
	validAcks := acks == 0 || acks == 1 || acks == -1
	var jobs []produceJob
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(m.Topics))
	for i := range m.Topics {
		rt := &m.Topics[i]
		t := &resp.Topics[i]
		*t = kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name, topicCode := rt.Topic, int16(0)
		if m.Version >= 13 {
			if mt, ok := img.TopicByID(metadata.Uuid(rt.TopicID)); ok {
				name = mt.Name
			} else {
				topicCode = kerr.UnknownTopicID.Code
			}
		}
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &t.Partitions[j]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = rt.Partitions[j].Partition
			switch {
			case !validAcks:
				rp.ErrorCode = kerr.InvalidRequiredAcks.Code
				b.metrics.all.add(totalProduce, 1)
				b.metrics.all.add(failedProduce, 1)
			case topicCode != 0:
				rp.ErrorCode = topicCode
				b.metrics.all.add(totalProduce, 1)
			default:
				jobs = append(jobs, produceJob{topic: name, in: &rt.Partitions[j], rp: rp})
			}
		}
	}
	b.checkProduceTxn(ctx, m, img, jobs)
	b.runProduceJobs(m, jobs)
	resp.ThrottleMillis = throttleMillis(b.produceThrottle(img, req, m.Acks))
	var pending []producePending
	var leaders map[int32]bool
	for i := range jobs {
		j := &jobs[i]
		tm := b.partitionMetrics(j.topic, j.in.Partition)
		tm.add(totalProduce, 1)
		if requestFailed(j.rp.ErrorCode) {
			tm.add(failedProduce, 1)
		}
		if j.rp.ErrorCode == kerr.NotLeaderForPartition.Code && m.Version >= 10 {
			if leaders == nil {
				leaders = map[int32]bool{}
			}
			b.setCurrentLeader(img, j.topic, j.rp, leaders)
		}
		if j.p != nil && produceMustWait(j.p, acks, j.required) {
			pending = append(pending, producePending{p: j.p, code: &j.rp.ErrorCode, requiredOffset: j.required, acks: acks})
		}
	}
	if len(leaders) > 0 {
		b.addProduceBrokers(img, req.Conn.Listener, resp, leaders)
	}
	if acks == 0 {
		if produceFailed(resp) {
			return &network.Response{CloseConnection: true}
		}
		return nil
	}
	if len(pending) == 0 {
		return respond(resp)
	}
	return b.parkProduce(ctx, resp, pending, time.Duration(max(m.TimeoutMillis, 0))*time.Millisecond)
}

// produceFailed reports whether any partition of a produce response has
// an error.
func produceFailed(resp *kmsg.ProduceResponse) bool {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}

// produceJob is one partition of a produce request to append; p and
// required are appendToPartition's results.
type produceJob struct {
	topic    string
	in       *kmsg.ProduceRequestTopicPartition
	rp       *kmsg.ProduceResponseTopicPartition
	p        *partition
	required int64
	// skip: answered before the append (checkProduceTxn).
	skip bool
	// verifyTxn and txnGuard are the transaction verification the append
	// requires (txn_verify.go).
	verifyTxn bool
	txnGuard  *storage.TxnVerificationGuard
}

// parallelProduceWork is the estimated work (record bytes, plus
// produceRecordWork per record for parsing it) above which a produce
// request's partitions are validated and appended in parallel. Below it a
// request is cheaper done in line than handed to other threads, which
// must be woken (the latency of a small request is mostly that).
const (
	parallelProduceWork = 64 << 10
	produceRecordWork   = 32
)

// runProduceJobs appends a produce request's partitions. Each partition's
// validation (decompressing and parsing every record) is the broker's
// main cost per record, and the request's response waits for all of them:
// a large request's partitions run on up to GOMAXPROCS goroutines, so its
// round trip — which bounds a producer's throughput, its buffer divided by
// the round trip — is not the sum of its partitions. (Kafka's request
// handler appends them one after the other; the partitions are
// independent logs, so the order between them is not observable.) A
// request naming a partition twice runs in order.
func (b *Broker) runProduceJobs(m *kmsg.ProduceRequest, jobs []produceJob) {
	workers := min(len(jobs), runtime.GOMAXPROCS(0))
	if workers < 2 || !worthParallel(jobs) {
		for i := range jobs {
			if j := &jobs[i]; !j.skip {
				j.p, j.required = b.appendToPartition(m, j)
			}
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Value
	work := func() {
		defer func() {
			// The connection's dispatch recovers a handler's panic; one
			// in a helper goroutine would kill the process, so it is
			// carried back to the handler.
			if r := recover(); r != nil {
				panicked.CompareAndSwap(nil, fmt.Sprintf("%v\n%s", r, debug.Stack()))
			}
		}()
		for {
			i := int(next.Add(1) - 1)
			if i >= len(jobs) {
				return
			}
			if j := &jobs[i]; !j.skip {
				j.p, j.required = b.appendToPartition(m, j)
			}
		}
	}
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if r := panicked.Load(); r != nil {
		panic(r)
	}
}

// worthParallel reports whether a produce request's partitions are worth
// appending in parallel: enough work, and no partition named twice.
func worthParallel(jobs []produceJob) bool {
	work := 0
	for i := range jobs {
		work += len(jobs[i].in.Records)
		if h, err := record.ParseHeader(jobs[i].in.Records); err == nil {
			work += produceRecordWork * int(max(h.RecordCount, 0))
		}
	}
	if work < parallelProduceWork {
		return false
	}
	type key struct {
		topic     string
		partition int32
	}
	seen := make(map[key]struct{}, len(jobs))
	for i := range jobs {
		k := key{jobs[i].topic, jobs[i].in.Partition}
		if _, dup := seen[k]; dup {
			return false
		}
		seen[k] = struct{}{}
	}
	return true
}

// appendToPartition appends one partition's batches as leader and fills in
// its response partition. On success it returns the partition and the
// offset its high watermark must reach for the batches to be committed
// (the last appended offset + 1); on failure nil (rp carries the error).
func (b *Broker) appendToPartition(m *kmsg.ProduceRequest, j *produceJob) (*partition, int64) {
	topic, in, rp := j.topic, j.in, j.rp
	if isInternalTopic(topic) {
		// Only the coordinators write there (ReplicaManager's
		// "Cannot append to internal topic").
		rp.ErrorCode = kerr.InvalidTopicException.Code
		if m.Version >= 8 {
			rp.ErrorMessage = kmsg.StringPtr("Cannot append to internal topic " + topic)
		}
		return nil, 0
	}
	p := b.lookup(storage.TopicPartition{Topic: topic, Partition: in.Partition})
	if p == nil || p.removed.Load() {
		rp.ErrorCode = b.partitionError(topic, in.Partition)
		return nil, 0
	}
	st := p.state.Load()
	if !st.isLeader {
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
		return nil, 0
	}
	// Kafka's ProduceRequest.validateRecords (v3+): exactly one batch.
	if n, err := record.PeekBatchSize(in.Records); err == nil && n < len(in.Records) {
		rp.ErrorCode = kerr.InvalidRecord.Code
		if m.Version >= 8 {
			rp.ErrorMessage = kmsg.StringPtr("produce requests may contain exactly one record batch per partition")
		}
		return nil, 0
	}
	// ProduceRequest.validateRecords again: zstd needs v7+ (KIP-110).
	if h, err := record.ParseHeader(in.Records); err == nil && h.Compression() == record.CompressionZstd && m.Version < 7 {
		rp.ErrorCode = kerr.UnsupportedCompressionType.Code
		return nil, 0
	}
	idempotent := hasProducerID(in.Records)
	if m.Acks == -1 && st.underMinISR() {
		rp.ErrorCode = kerr.NotEnoughReplicas.Code
		if m.Version >= 8 {
			rp.ErrorMessage = kmsg.StringPtr("the in-sync replicas are fewer than min.insync.replicas")
		}
		return nil, 0
	}
	fail := func(err error) (*partition, int64) {
		rp.ErrorCode = storage.ErrorCode(err)
		if errors.Is(err, storage.ErrLogClosed) && p.removed.Load() {
			rp.ErrorCode = b.partitionError(topic, in.Partition) // deleted meanwhile
		}
		if m.Version >= 8 {
			rp.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		if (rp.ErrorCode == kerr.UnknownServerError.Code || rp.ErrorCode == kerr.KafkaStorageError.Code) &&
			!errors.Is(err, storage.ErrLogDirOffline) { // the log manager logged that once
			b.log.Error("append failed", "partition", p.tp, "error", err)
		} else {
			b.log.Debug("append refused", "partition", p.tp, "error", err, "error_code", rp.ErrorCode)
		}
		return nil, 0
	}
	// Validation (CRC, decompression, every record) runs outside any lock,
	// in parallel with other appends to the partition.
	v, err := p.log.ValidateProduce(in.Records, false)
	if err != nil {
		return fail(err)
	}
	if code, msg, recordErrs := st.policy.check(in.Records, v.Info(), b.now().UnixMilli()); code != 0 {
		rp.ErrorCode = code
		if m.Version >= 8 {
			rp.ErrorMessage, rp.ErrorRecords = kmsg.StringPtr(msg), recordErrs
		}
		b.log.Debug("produce refused by a record policy", "partition", p.tp, "error", msg)
		return nil, 0
	}
	records := in.Records
	if st.policy.recompress {
		var changed bool
		if records, changed, err = st.policy.recompressed(in.Records, max(64<<20, 16*p.log.Config().MaxMessageBytes)); err != nil {
			return fail(err)
		}
		if changed {
			if v, err = p.log.ValidateProduce(records, false); err != nil {
				return fail(err)
			}
		}
	}
	// The durable mode group-commits: the flusher fsyncs (durable.go).
	opts := storage.AppendOptions{LeaderEpoch: st.leaderEpoch, DeferFlush: st.durable, VerifyTxn: j.verifyTxn, TxnGuard: j.txnGuard}
	var info storage.AppendInfo
	if idempotent {
		// The log checks the producer's sequences against its producer
		// state under its own lock, atomically with the append
		// (producer_state.go); producerMu serialises the partition's
		// idempotent appends as before.
		p.producerMu.Lock()
		info, err = p.log.AppendValidated(v, opts)
		p.producerMu.Unlock()
		if code, ok := producerErrorCode(err); ok {
			rp.ErrorCode = code
			if m.Version >= 8 {
				rp.ErrorMessage = kmsg.StringPtr(err.Error())
			}
			b.log.Debug("idempotent batch refused", "partition", p.tp, "error", err)
			return nil, 0
		}
		if err == nil && info.Duplicate {
			// A retry of a batch already appended: acknowledge it with
			// its original offsets, append nothing.
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = info.FirstOffset, info.LogAppendTime, info.LogStartOffset
			return p, info.LastOffset + 1
		}
	} else {
		info, err = p.log.AppendValidated(v, opts)
	}
	if err != nil {
		return fail(err)
	}
	rp.BaseOffset = info.FirstOffset
	rp.LogAppendTime = info.LogAppendTime
	rp.LogStartOffset = info.LogStartOffset
	p.metrics.produced(int64(info.Records), int64(info.Bytes))
	if st.durable {
		b.flusher.mark(p)
	}
	// Requests this append completes (long polls; acks=all produces when
	// the leader is alone in the ISR) are answered from here, without a
	// hop through another goroutine (end-to-end latency). Followers'
	// fetches want every append, consumers' only high watermark moves.
	if b.advanceHighWatermark(p) {
		p.produceWatch.completeAll()
	}
	p.fetchWatch.completeAll()
	return p, info.LastOffset + 1
}

// parkProduce waits until the high watermark of every pending partition
// reaches its required offset, or timeout, then answers resp.
func (b *Broker) parkProduce(ctx context.Context, resp kmsg.Response, pending []producePending, timeout time.Duration) network.Result {
	parts := make([]*partition, len(pending))
	settled := make([]bool, len(pending))
	for i := range pending {
		parts[i] = pending[i].p
	}
	check := func(final bool) *network.Response {
		done := true
		for i := range pending {
			if settled[i] {
				continue
			}
			pp := &pending[i]
			code, ok := produceReady(pp)
			switch {
			case ok:
				*pp.code, settled[i] = code, true
				if code == 0 && pp.committed != nil {
					pp.committed()
				}
			case final:
				*pp.code, settled[i] = kerr.RequestTimedOut.Code, true
			default:
				done = false
			}
		}
		if !done {
			return nil
		}
		return &network.Response{Msg: resp}
	}
	return b.park(ctx, parts, func(p *partition) *watchList { return &p.produceWatch }, timeout, check)
}

// produceReady is Kafka's Partition.checkEnoughReplicasReachOffset for one
// pending partition: settled with 0 once the high watermark passed it (or
// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
// min.insync.replicas meanwhile), settled with NOT_LEADER_OR_FOLLOWER when
// the leadership moved, unsettled otherwise.
func produceReady(pp *producePending) (code int16, settled bool) {
	if pp.p.removed.Load() {
		return kerr.NotLeaderForPartition.Code, true
	}
	st := pp.p.state.Load()
	if !st.isLeader {
		return kerr.NotLeaderForPartition.Code, true
	}
	if pp.acks == 1 {
		return 0, pp.p.log.DurableOffset() >= pp.requiredOffset
	}
	if pp.p.log.HighWatermark() >= pp.requiredOffset {
		if st.underMinISR() {
			return kerr.NotEnoughReplicasAfterAppend.Code, true
		}
		return 0, true
	}
	return 0, false
}

// setCurrentLeader fills a NOT_LEADER_OR_FOLLOWER partition's CurrentLeader
// (v10+, KIP-951) and notes the leader for the Brokers list.
func (b *Broker) setCurrentLeader(img *metadata.Image, topic string, rp *kmsg.ProduceResponseTopicPartition, leaders map[int32]bool) {
	t, ok := img.Topic(topic)
	if !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
		return
	}
	mp := t.Partitions[rp.Partition]
	if mp.Leader < 0 || mp.Leader == b.nodeID {
		return
	}
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = mp.Leader, mp.LeaderEpoch
	leaders[mp.Leader] = true
}

// addProduceBrokers lists the endpoints of the leaders named in
// CurrentLeader fields (v10+).
func (b *Broker) addProduceBrokers(img *metadata.Image, listener string, resp *kmsg.ProduceResponse, leaders map[int32]bool) {
	for id := range leaders {
		br, ok := img.Broker(id)
		if !ok {
			continue
		}
		ep, ok := br.Endpoint(listener)
		if !ok {
			continue
		}
		rb := kmsg.NewProduceResponseBroker()
		rb.NodeID, rb.Host, rb.Port = id, ep.Host, ep.Port
		if br.Rack != "" {
			rb.Rack = kmsg.StringPtr(br.Rack)
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
}

// hasProducerID reports whether a record set holds batches of an
// idempotent or transactional producer. Framing errors are left to the
// storage validation.
func hasProducerID(batches []byte) bool {
	for pos := 0; pos < len(batches); {
		h, err := record.ParseHeader(batches[pos:])
		if err != nil {
			return false
		}
		if h.HasProducerID() {
			return true
		}
		pos += h.Size()
	}
	return false
}
