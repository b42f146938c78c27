package broker

// Fetch (key 1), v4–v18: the versions network.FetchResponse.Encode writes.
// Records go from segment files to the socket as storage.FileRegions
// (sendfile), never through the broker's memory.
//
//   - Partitions are read in request order (in session order for an
//     incremental fetch), each up to min(PartitionMaxBytes, what is left of
//     MaxBytes), in whole batches, never spanning segments. MaxBytes is
//     capped by the broker's fetch.max.bytes for consumers (KIP-541) and
//     replica.fetch.response.max.bytes for followers. Until a
//     partition has returned data, a batch larger than the limits is still
//     returned whole (storage.Read's minOneBatch), so a consumer never
//     stalls on a large batch (Kafka's rule since KIP-74).
//   - Consumers (replica id -1) read below the high watermark;
//     read_committed (v4+ IsolationLevel 1) below the last stable offset
//     (the first offset of a transaction not yet decided, or the high
//     watermark), with the aborted transactions the records read may hold
//     (from the partition's aborted-transaction index), so that the
//     consumer skips their batches. Followers (replica id ≥ 0; v15+ in
//     ReplicaState, KIP-903) read up to the log end offset; their fetch
//     offset is their log end offset for the high watermark and the ISR
//     (replication.go). Over leader.replication.throttled.rate, a
//     follower outside the ISR gets no records of the partitions
//     leader.replication.throttled.replicas names here (quota.go).
//   - The leader serves followers and consumers; a follower serves
//     consumers' Fetch of v11 and up too (KIP-392, replica_selector.go),
//     up to its own high watermark. Below v11 a broker that does not lead
//     answers NOT_LEADER_OR_FOLLOWER. current_leader_epoch (v9+) is
//     checked first: FENCED_LEADER_EPOCH when older than this broker's,
//     UNKNOWN_LEADER_EPOCH when newer. With v12+ those errors carry
//     CurrentLeader, and v16+ the leader's endpoint in NodeEndpoints
//     (KIP-951).
//   - A partition not hosted here is NOT_LEADER_OR_FOLLOWER if the image
//     knows it, UNKNOWN_TOPIC_OR_PARTITION otherwise; an unknown topic id
//     (v13+) is UNKNOWN_TOPIC_ID. A fetch offset outside [log start, log
//     end] is OFFSET_OUT_OF_RANGE (the client resets per its policy).
//   - LastFetchedEpoch (v12+, KIP-595): a fetch whose last fetched epoch
//     diverges from the leader-epoch cache gets DivergingEpoch and no
//     records.
//   - Long poll: the response waits in the fetch purgatory until MinBytes
//     are available, MaxWaitMillis passes, or a partition errors. Every
//     append and high watermark move wakes the fetches parked on that
//     partition at once.
//   - Sessions (v7+, KIP-227): see fetch_session.go. Session errors
//     (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
//     FETCH_SESSION_TOPIC_ID_ERROR) are top-level, with no partitions.
//   - PreferredReadReplica (v11+): with replica.selector.class set, the
//     leader may send a consumer that named its Rack to a follower in that
//     rack, answering the partition at once with no records
//     (replica_selector.go); -1 otherwise.

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/storage"
)

// fetchOp is one fetch request from its arrival to its response.
type fetchOp struct {
	b        *Broker
	m        *kmsg.FetchRequest
	fc       *fetchContext
	follower bool
	// replicaID and replicaEpoch identify a follower (replica id ≥ 0).
	replicaID    int32
	replicaEpoch int64
	img          *metadata.Image
	listener     string
	req          *network.Request
	// throttle is the client quota throttle of the response, the larger
	// of consumer_byte_rate's and request_percentage's (client_quota.go).
	throttle time.Duration
	// handled is how long the request took to handle before it parked
	// (zero if it did not): the time request_percentage counts for a
	// fetch answered later, whose wait is not handling.
	handled time.Duration
	// authz is the request's authorization (nil: no authorizer); readable
	// caches its answer per topic (authzMu).
	authz    *requestAuthz
	authzMu  sync.Mutex
	readable map[string]bool
}

// mayRead reports whether the fetch may read topic: a follower with
// CLUSTER_ACTION on the cluster, a consumer with READ on the topic, as
// Kafka's fetch authorization; the others get TOPIC_AUTHORIZATION_FAILED.
func (op *fetchOp) mayRead(topic string) bool {
	if op.authz == nil {
		return true
	}
	op.authzMu.Lock()
	defer op.authzMu.Unlock()
	if op.follower {
		topic = "" // one answer for the whole fetch
	}
	ok, known := op.readable[topic]
	if !known {
		if op.follower {
			ok = op.authz.cluster(opClusterAction)
		} else {
			ok = op.authz.topic(opRead, topic)
		}
		if op.readable == nil {
			op.readable = map[string]bool{}
		}
		op.readable[topic] = ok
	}
	return ok
}

// partRead is what reading one partition gave.
type partRead struct {
	code          int16
	highWatermark int64
	lastStable    int64
	// aborted are the aborted transactions of a read_committed read.
	aborted        []network.FetchAbortedTransaction
	logStartOffset int64
	info           storage.ReadInfo
	diverging      *network.FetchEpochEndOffset
	leader         *network.FetchLeader
	// preferred is the replica the consumer should read from instead
	// (KIP-392, replica_selector.go), or -1 (0 until read sets it).
	preferred int32
	// leaderThrottled: a follower read of a partition under this broker's
	// leader replication throttle, whose bytes count toward it.
	leaderThrottled bool
	// metrics are the partition's topic's meters; nil when it is not
	// hosted here.
	metrics *topicMetrics
}

func (b *Broker) handleFetch(ctx context.Context, req *network.Request, m *kmsg.FetchRequest) network.Result {
	img := b.currentImage()
	replicaID, replicaEpoch := m.ReplicaID, int64(-1)
	if m.Version >= 15 {
		replicaID, replicaEpoch = m.ReplicaState.ID, m.ReplicaState.Epoch
	}
	op := &fetchOp{b: b, m: m, follower: replicaID >= 0, replicaID: replicaID, replicaEpoch: replicaEpoch,
		img: img, listener: req.Conn.Listener, req: req, authz: b.authzFor(req)}
	op.fc = b.newFetchContext(m, img, op.follower)
	if op.fc.kind == sessionError {
		return op.errorResponse(op.fc.errorCode)
	}
	if resp := op.check(false); resp != nil {
		return resp
	}
	op.handled = max(time.Since(req.Received), time.Nanosecond)
	return b.park(ctx, op.watched(), func(p *partition) *watchList { return &p.fetchWatch },
		time.Duration(m.MaxWaitMillis)*time.Millisecond, op.check)
}

// errorResponse is a session-level error: the error, session id 0, no
// partitions (Kafka's SessionErrorContext).
func (op *fetchOp) errorResponse(code int16) *network.Response {
	r := network.FetchResponse{ErrorCode: code}
	return op.encode(&r)
}

// partitions returns the partitions the fetch reads, in order. For an
// incremental fetch the session's mu must be held.
func (op *fetchOp) partitions() []*fetchPartition {
	if op.fc.kind == incrementalFetch {
		return op.fc.session.parts
	}
	return op.fc.parts
}

// watched are the hosted partitions a parked fetch waits on.
func (op *fetchOp) watched() []*partition {
	if s := op.fc.session; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	var out []*partition
	for _, fp := range op.partitions() {
		if fp.topic == "" {
			continue
		}
		if p := op.b.lookup(storage.TopicPartition{Topic: fp.topic, Partition: fp.key.partition}); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// check reads every partition and returns the response if the fetch can
// complete (or final is set), nil to keep waiting. Kafka's
// DelayedFetch.tryComplete and, on completion, the response generation of
// the fetch context, which updates the session.
func (op *fetchOp) check(final bool) *network.Response {
	m := op.m
	if s := op.fc.session; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	parts := op.partitions()
	reads := make([]partRead, len(parts))
	limit := int64(math.MaxInt32)
	if m.Version >= 3 {
		limit = int64(max(m.MaxBytes, 0))
	}
	if op.follower {
		limit = min(limit, int64(op.b.cfg.ReplicaFetchResponseMaxBytes))
	} else {
		limit = min(limit, int64(op.b.cfg.FetchMaxBytes)) // KIP-541
	}
	minOneBatch := true
	var total int64
	urgent := false // an error or a divergence: answer now
	for i, fp := range parts {
		r := &reads[i]
		op.read(fp, min(int64(max(fp.partitionMaxBytes, 0)), limit), minOneBatch, r)
		if r.code != 0 || r.diverging != nil || r.preferred >= 0 {
			urgent = true
		}
		if n := r.info.Bytes; n > 0 {
			total += n
			limit = max(limit-n, 0)
			minOneBatch = false
		}
	}
	if !final && !urgent && len(parts) > 0 && m.MaxWaitMillis > 0 && total < int64(m.MinBytes) {
		return nil
	}
	if op.follower {
		var throttled int64
		for i := range reads {
			if reads[i].leaderThrottled {
				throttled += reads[i].info.Bytes
			}
		}
		if throttled > 0 {
			op.b.leaderQuota.record(throttled, op.b.now())
		}
	} else if d, undo := op.quotaThrottle(total); d > 0 {
		// Over consumer_byte_rate or request_percentage: an empty
		// response (the bytes are not delivered, so they do not count)
		// and the client waits.
		undo()
		for i := range reads {
			reads[i].info.Regions, reads[i].info.Bytes = nil, 0
		}
		op.throttle = d
		op.req.Conn.Mute(d)
	}
	return op.respond(parts, reads)
}

// quotaThrottle records a consumer's response of total bytes against
// consumer_byte_rate and its handling time against request_percentage,
// and returns the larger throttle and the undo of the bytes (Kafka's
// handleFetchRequest).
func (op *fetchOp) quotaThrottle(total int64) (time.Duration, func()) {
	d, undo := op.b.consumerQuotas.record(op.img, op.req.Conn.Principal, op.req.Header.ClientID, total, op.b.now)
	return max(d, op.b.requestThrottle(op.img, op.req, op.handled)), undo
}

// read reads one partition into r.
func (op *fetchOp) read(fp *fetchPartition, maxBytes int64, minOneBatch bool, r *partRead) {
	r.highWatermark, r.lastStable, r.logStartOffset, r.preferred = -1, -1, -1, -1
	if fp.topic == "" {
		r.code = kerr.UnknownTopicID.Code
		return
	}
	if !op.mayRead(fp.topic) {
		r.code = codeTopicDenied
		return
	}
	b := op.b
	p := b.lookup(storage.TopicPartition{Topic: fp.topic, Partition: fp.key.partition})
	if p == nil || p.removed.Load() {
		r.code = b.partitionError(fp.topic, fp.key.partition)
		if r.code == kerr.NotLeaderForPartition.Code {
			r.leader = op.currentLeader(fp)
		}
		return
	}
	if op.m.Version >= 13 && p.topicID != metadata.Uuid(fp.key.id) {
		r.code = kerr.UnknownTopicID.Code
		return
	}
	r.metrics = p.metrics
	st := p.state.Load()
	if code := st.leaderErrorCode(fp.currentLeaderEpoch, !op.readsAsReplica()); code != 0 {
		r.code = code
		if code == kerr.NotLeaderForPartition.Code || code == kerr.FencedLeaderEpoch.Code {
			r.leader = op.currentLeader(fp)
		}
		return
	}
	l := p.log
	if st.isLeader {
		if id := op.preferredReadReplica(p, st, fp.fetchOffset); id >= 0 {
			// KIP-392: no read here; the consumer goes to the replica.
			r.preferred = id
			r.highWatermark, r.lastStable, r.logStartOffset = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
			return
		}
	} else if fp.fetchOffset > l.LogEndOffset() && fp.currentLeaderEpoch < 0 {
		// A consumer read past a follower's log end: its fetches lag the
		// leader's, or the consumer's metadata is stale. With a leader
		// epoch (KIP-320) it gets OFFSET_OUT_OF_RANGE below, which sends
		// it back to the leader; without one, it cannot tell that from a
		// real reset, so it gets no records and retries (Kafka since
		// apache/kafka#12734).
		r.highWatermark, r.lastStable, r.logStartOffset = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
		return
	}
	if fp.lastFetchedEpoch >= 0 && op.m.Version >= 12 {
		leo := l.LogEndOffset()
		epoch, end := l.LeaderEpochCache().EndOffsetFor(fp.lastFetchedEpoch, leo)
		if epoch < fp.lastFetchedEpoch || end < fp.fetchOffset {
			r.diverging = &network.FetchEpochEndOffset{Epoch: epoch, EndOffset: end}
			r.highWatermark, r.lastStable, r.logStartOffset = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
			return
		}
	}
	upper := int64(math.MaxInt64) // followers read to the log end offset
	committed := !op.follower && op.m.IsolationLevel == 1
	switch {
	case committed:
		upper = l.LastStableOffset()
	case !op.follower:
		upper = l.HighWatermark()
	}
	info, err := l.Read(fp.fetchOffset, int(min(maxBytes, math.MaxInt32)), upper, minOneBatch)
	if err != nil {
		r.code = storage.ErrorCode(err)
		if errors.Is(err, storage.ErrLogClosed) && p.removed.Load() {
			r.code = b.partitionError(fp.topic, fp.key.partition)
		}
		if r.code != kerr.OffsetOutOfRange.Code && !errors.Is(err, storage.ErrLogDirOffline) {
			b.log.Warn("fetch read failed", "partition", p.tp, "offset", fp.fetchOffset, "error", err)
		}
		return
	}
	if op.follower {
		// A valid follower fetch offset is the follower's log end offset
		// (replication.go); not a diverging or out-of-range one (Kafka).
		b.recordFollowerFetch(p, op.replicaID, op.replicaEpoch, fp.fetchOffset, fp.replicaLogStart)
		if st.leaderThrottled {
			r.leaderThrottled = true
			if !slices.Contains(st.isr, op.replicaID) && b.leaderQuota.exceeded(b.now()) {
				info.Regions, info.Bytes = nil, 0 // Kafka's shouldLeaderThrottle
			}
		}
	}
	r.info = info
	r.highWatermark, r.lastStable, r.logStartOffset = info.HighWatermark, info.LastStableOffset, info.LogStartOffset
	if committed && info.Bytes > 0 {
		// The aborted transactions the records read may hold a part of
		// (Kafka bounds them by the fetched batches; the last stable
		// offset bounds them here, which can only list a few more, which
		// the consumer ignores).
		for _, a := range l.AbortedTransactions(fp.fetchOffset, upper) {
			r.aborted = append(r.aborted, network.FetchAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
}

// currentLeader is the partition's leader from the image, for KIP-951
// hints (v12+), or nil.
func (op *fetchOp) currentLeader(fp *fetchPartition) *network.FetchLeader {
	if op.m.Version < 12 {
		return nil
	}
	t, ok := op.img.Topic(fp.topic)
	if !ok || fp.key.partition < 0 || int(fp.key.partition) >= len(t.Partitions) {
		return nil
	}
	mp := t.Partitions[fp.key.partition]
	if mp.Leader < 0 {
		return nil
	}
	return &network.FetchLeader{LeaderID: mp.Leader, LeaderEpoch: mp.LeaderEpoch}
}

// respond builds and encodes the response from the reads, and updates the
// session: a full fetch creates one, an incremental fetch leaves out the
// partitions with nothing new and moves those with records to the end of
// the session (Kafka's FullFetchContext and IncrementalFetchContext).
func (op *fetchOp) respond(parts []*fetchPartition, reads []partRead) *network.Response {
	resp := network.FetchResponse{ThrottleMillis: throttleMillis(op.throttle)}
	isolationCommitted := op.m.IsolationLevel == 1
	var regions []network.Region
	var moved map[*fetchPartition]bool
	var leaders map[int32]bool
	var cur *network.FetchTopic
	var curKey fetchKey
	for i, fp := range parts {
		r := &reads[i]
		op.count(r)
		if op.fc.kind == incrementalFetch && !mustRespond(fp, r) {
			continue
		}
		fp.highWatermark, fp.lastStable, fp.logStartOffset = r.highWatermark, r.lastStable, r.logStartOffset
		if r.code != 0 {
			fp.highWatermark = -1 // resend the partition once the error clears
		}
		if r.info.Bytes > 0 && op.fc.kind == incrementalFetch {
			if moved == nil {
				moved = map[*fetchPartition]bool{}
			}
			moved[fp] = true
		}
		if cur == nil || curKey.id != fp.key.id || curKey.topic != fp.key.topic {
			resp.Topics = append(resp.Topics, network.FetchTopic{Topic: fp.key.topic, TopicID: fp.key.id})
			cur, curKey = &resp.Topics[len(resp.Topics)-1], fp.key
			if op.m.Version < 13 {
				cur.Topic = fp.topic
			}
		}
		fpr := network.FetchPartition{
			Partition:            fp.key.partition,
			ErrorCode:            r.code,
			HighWatermark:        r.highWatermark,
			LastStableOffset:     r.lastStable,
			LogStartOffset:       r.logStartOffset,
			DivergingEpoch:       r.diverging,
			CurrentLeader:        r.leader,
			PreferredReadReplica: r.preferred,
		}
		if isolationCommitted {
			fpr.AbortedTransactions = r.aborted
			if fpr.AbortedTransactions == nil {
				fpr.AbortedTransactions = []network.FetchAbortedTransaction{}
			}
		}
		start := len(regions)
		for j := range r.info.Regions {
			regions = append(regions, &r.info.Regions[j])
		}
		fpr.Records = regions[start:len(regions):len(regions)]
		if fpr.Records == nil {
			// Kafka sends empty, never null, records: librdkafka rejects a
			// -1 size ("invalid MessageSetSize -1").
			fpr.Records = []network.Region{}
		}
		if r.leader != nil && op.m.Version >= 16 {
			if leaders == nil {
				leaders = map[int32]bool{}
			}
			leaders[r.leader.LeaderID] = true
		}
		cur.Partitions = append(cur.Partitions, fpr)
	}
	for id := range leaders {
		if br, ok := op.img.Broker(id); ok {
			if ep, ok := br.Endpoint(op.listener); ok {
				ne := network.FetchNodeEndpoint{NodeID: id, Host: ep.Host, Port: ep.Port}
				if br.Rack != "" {
					rack := br.Rack
					ne.Rack = &rack
				}
				resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
			}
		}
	}
	switch op.fc.kind {
	case incrementalFetch:
		resp.SessionID = op.fc.session.id
		op.fc.session.moveToEnd(moved)
	case fullFetch:
		if s := op.b.sessions.create(parts, op.fc.privileged, op.fc.usesTopicIDs); s != nil {
			resp.SessionID = s.id
		}
	}
	return op.encode(&resp)
}

// count counts one partition of the answer in the BrokerTopicMetrics.
func (op *fetchOp) count(r *partRead) {
	tm := r.metrics
	if tm == nil {
		tm = &op.b.metrics.all
	}
	tm.add(totalFetch, 1)
	if requestFailed(r.code) {
		tm.add(failedFetch, 1)
	}
	switch {
	case r.info.Bytes <= 0:
	case op.follower:
		op.b.metrics.all.replicationBytesOut.Add(r.info.Bytes)
	default:
		tm.add(bytesOut, r.info.Bytes)
	}
}

// mustRespond is Kafka's CachedPartition.maybeUpdateResponseData: an
// incremental response includes a partition with records, an error, a
// divergence, a leader hint, a preferred read replica, or a high
// watermark, last stable offset or log start offset other than the last
// one sent.
func mustRespond(fp *fetchPartition, r *partRead) bool {
	return r.info.Bytes > 0 || r.code != 0 || r.diverging != nil || r.leader != nil || r.preferred >= 0 ||
		fp.highWatermark != r.highWatermark || fp.lastStable != r.lastStable || fp.logStartOffset != r.logStartOffset
}

// encode writes the response with the zero-copy encoder.
func (op *fetchOp) encode(r *network.FetchResponse) *network.Response {
	body := network.AcquireBody()
	if err := r.Encode(op.m.Version, body); err != nil {
		network.ReleaseBody(body)
		op.b.log.Error("encoding a fetch response failed", "error", err)
		kr := op.m.ResponseKind().(*kmsg.FetchResponse)
		kr.ErrorCode = kerr.UnknownServerError.Code
		return &network.Response{Msg: kr}
	}
	return &network.Response{Body: body}
}
