package client

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/keelstream/keel/network/record"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerSink reads one broker's Produce responses, in the order the sender
// wrote the requests, and completes their batches. Its goroutine is started
// by the sender and stops when the sender closes ch.
type brokerSink struct {
	id       int32
	inflight atomic.Int32 // requests written and not yet handled
	ch       chan *produceInflight
	// The sender never dials itself (a dead broker would stall every
	// other broker's partitions for the dial timeout): a background dial
	// runs while dialing is set, and a failed one is not retried before
	// redialAt (Unix nanoseconds).
	dialing  atomic.Bool
	redialAt atomic.Int64
	// conn is the connection the requests in flight were written to
	// (sender only). A new connection is not used while any of them is
	// unsettled: requests left on a dead connection fail first, so a
	// partition's batches reach the broker, and their outcomes the
	// partition, in sequence order, as over one connection.
	conn *brokerConn
}

type produceInflight struct {
	fut     *responseFuture // nil when the write failed (err set)
	err     error
	batches []*batch
}

// pendingSend is what one drain pass sends to one broker.
type pendingSend struct {
	sink    *brokerSink
	conn    *brokerConn
	batches []*batch
	bytes   int
}

// senderLoop is the sender goroutine: it drains ready batches whenever
// Produce, a completed response or a linger/backoff deadline wakes it.
func (p *Producer) senderLoop() {
	defer p.workers.Done()
	defer func() {
		p.sinksMu.Lock()
		for _, s := range p.sinks {
			close(s.ch)
		}
		p.sinksMu.Unlock()
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	sends := make(map[int32]*pendingSend)
	for {
		var next time.Time
		for {
			sent, n := p.drain(sends)
			if !n.IsZero() && (next.IsZero() || n.Before(next)) {
				next = n
			}
			if !sent {
				break
			}
		}
		var timerC <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			timerC = timer.C
		}
		select {
		case <-p.wake:
		case <-timerC:
		case <-p.closed:
			timer.Stop()
			return
		}
		if timerC != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// testHookDrainPartition, when set (tests), runs before drain takes each
// partition.
var testHookDrainPartition atomic.Pointer[func()]

// drain makes one pass over every partition: it seals batches that are
// ready, fails expired ones, and sends at most one batch per partition in
// one request per broker. It returns whether anything was sent and the
// earliest time something will become ready.
func (p *Producer) drain(sends map[int32]*pendingSend) (sent bool, next time.Time) {
	now := time.Now()
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if p.txn != nil {
		gen := p.txn.gen.Load() // before the state: see failBuffered
		if err := p.txn.blocked(); err != nil {
			p.failBuffered(err, gen) // aborting, abortable or fatal: send nothing more
			return false, time.Time{}
		}
	} else if p.cfg.idempotent && p.needBump.Load() {
		// KIP-360: bump the epoch once nothing is in flight, then
		// every partition restarts its sequences at 0. (A
		// transactional producer bumps it when it aborts.)
		if p.inflightRequests() > 0 {
			return false, time.Time{}
		}
		if err := p.initProducerID(p.ctx); err != nil {
			later(now.Add(p.cl.cfg.retryBackoff))
			return false, next
		}
		p.needBump.Store(false)
	}
	passID := p.currentID()
	linger := p.cfg.linger
	meta := p.cl.meta.Load()
	var expired []*batch
	var needAdd []*partitionState // transactional: not yet in the transaction
	var joined []*partitionState  // transaction version 2: joining with this pass's Produce
	for _, ts := range *p.topics.Load() {
		tm := meta.Topics[ts.name]
		for _, ps := range *ts.parts.Load() {
			if hook := testHookDrainPartition.Load(); hook != nil {
				(*hook)()
			}
			ps.mu.Lock()
			// delivery.timeout.ms for batches not in flight (KIP-91).
			for len(ps.queue) > 0 && now.Sub(ps.queue[0].created) >= p.cfg.deliveryTimeout {
				b := ps.queue[0]
				ps.queue = ps.queue[1:]
				if b.seq >= 0 && p.cfg.idempotent {
					p.needBump.Store(true) // its sequence numbers leave a gap
				}
				expired = append(expired, b)
			}
			if ps.cur != nil && len(ps.queue) == 0 && now.Sub(ps.cur.created) >= p.cfg.deliveryTimeout {
				expired = append(expired, ps.cur) // never sealed: no leader for that long
				ps.cur = nil
			}
			if ps.cur == nil && len(ps.queue) == 0 {
				ps.mu.Unlock()
				continue
			}
			// Flush and ProduceSync make linger moot, read here under
			// ps.mu rather than once a pass: a record buffered after the
			// flush ended stays lingering, as Java's accumulator decides
			// per batch.
			urgent := p.flushing.Load() > 0 || p.closing.Load() || linger <= 0
			if p.txn != nil && !p.txn.sending() {
				// The transaction turned aborting (abortable, fatal)
				// since the pass began: nothing more is sealed or sent,
				// and the next pass fails what is buffered
				// (failBuffered), as Java aborts the batches not yet
				// drained. Read after flushing: an abort stores its
				// state before its Flush raises flushing, so a pass that
				// saw that Flush as urgency sees the abort here.
				ps.mu.Unlock()
				later(now)
				continue
			}
			if p.txn != nil && !ps.txnAdded {
				if p.txn.v2.Load() {
					// Transaction version 2: the leader adds the
					// partition when its first batch arrives
					// (Produce v12+).
					ps.txnAdded = true
					joined = append(joined, ps)
				} else {
					// Nothing goes out before AddPartitionsToTxn
					// accepted the partition; its success wakes us.
					if !ps.txnAdding {
						ps.txnAdding = true
						needAdd = append(needAdd, ps)
					}
					ps.mu.Unlock()
					continue
				}
			}
			leader := int32(-1)
			if tm != nil && int(ps.partition) < len(tm.Partitions) {
				leader = tm.Partitions[ps.partition].Leader
			}
			var send *pendingSend
			canSend := !ps.failing && ps.inflight < p.cfg.maxInFlight && !now.Before(ps.retryAt) && leader >= 0
			if canSend {
				if send = sends[leader]; send == nil {
					sink := p.sink(leader)
					send = &pendingSend{sink: sink, conn: p.readyConn(leader, sink, now, later)}
					sends[leader] = send
				}
				inflight := int(send.sink.inflight.Load())
				canSend = send.conn != nil && inflight < p.cfg.maxInFlight && (inflight == 0 || send.conn == send.sink.conn)
			}
			// Whatever blocks the partition now must wake the sender
			// later: a leaderless partition retries after a metadata
			// refresh, a backed-off one when its backoff ends (a
			// completion wakes us for the in-flight limits).
			if leader < 0 {
				p.cl.TriggerMetadataRefresh()
				later(now.Add(p.cl.cfg.retryBackoff))
			}
			if now.Before(ps.retryAt) {
				later(ps.retryAt)
			}
			// A batch that is not full is sealed when linger.ms has
			// passed, but only when it can go out now: while the
			// partition waits (in-flight limit, backoff) it keeps
			// filling, which is what makes linger.ms=0 batch well.
			if ps.cur != nil {
				if urgent || now.Sub(ps.cur.created) >= linger {
					if (canSend && len(ps.queue) == 0) || p.closing.Load() {
						ps.queue = append(ps.queue, ps.cur)
						ps.cur = nil
					}
				} else {
					later(ps.cur.created.Add(linger))
				}
			}
			if len(ps.queue) == 0 {
				ps.mu.Unlock()
				continue
			}
			b := ps.queue[0]
			if !canSend || (len(send.batches) > 0 && send.bytes+b.builder.UncompressedSize() > p.cfg.maxRequestSize) {
				ps.mu.Unlock()
				continue // a completion, the backoff or the next pass wakes us
			}
			// Only the sender changes a plain producer's id and epoch
			// (before the pass). A transactional one's are read again
			// here, under ps.mu, after the batch was seen: under
			// transaction version 2 each EndTxn moves the epoch on, and
			// the next transaction's records are buffered (under ps.mu)
			// only after that, so they are never sent at the epoch of a
			// transaction that ended while this pass ran.
			id := passID
			if p.txn != nil {
				id = p.currentID()
			}
			if p.cfg.idempotent && (ps.seqProducer != id.id || ps.seqEpoch != id.epoch) {
				// A new producer id or epoch: sequences restart at
				// 0, and queued batches are renumbered in order.
				ps.seqProducer, ps.seqEpoch, ps.nextSeq = id.id, id.epoch, 0
				for _, q := range ps.queue {
					q.seq = -1
				}
			}
			retry := p.cfg.idempotent && b.seq >= 0
			if ps.inflight > 0 && (retry || ps.retrying) {
				// An idempotent retry goes out alone: after every
				// batch sent before it has settled, and with nothing
				// behind it until it is answered. The broker remembers
				// a producer's last five batches only; were new
				// batches appended behind a retry whose answer is lost
				// again, its next try would no longer be known for a
				// duplicate but refused as out of order, and the epoch
				// bump that follows would write it twice.
				ps.mu.Unlock()
				continue // the completion in flight wakes us
			}
			if err := p.prepare(b, ps, id); err != nil {
				ps.queue = ps.queue[1:]
				expired = append(expired, b) // cannot be encoded: fail it
				b.attempts = -1
				ps.mu.Unlock()
				continue
			}
			ps.queue[0] = nil
			ps.queue = ps.queue[1:]
			ps.inflight++
			ps.retrying = retry
			send.batches = append(send.batches, b)
			send.bytes += len(b.built)
			ps.mu.Unlock()
		}
	}
	if len(needAdd) > 0 {
		p.txn.queueAdds(needAdd)
	}
	if len(joined) > 0 {
		p.txn.join(joined) // before the Produce goes out
	}
	for _, b := range expired {
		err := ErrDeliveryTimeout
		if b.attempts < 0 {
			err = fmt.Errorf("encode batch for %s-%d", b.ps.topic, b.ps.partition)
		}
		b.complete(p, -1, -1, fmt.Errorf("produce to %s-%d: %w", b.ps.topic, b.ps.partition, err))
	}
	for leader, send := range sends {
		if len(send.batches) > 0 {
			p.sendRequest(leader, send)
			sent = true
		}
		delete(sends, leader)
	}
	return sent, next
}

// prepare encodes b on its first send and stamps its producer id, epoch and
// sequence. ps.mu is held.
func (p *Producer) prepare(b *batch, ps *partitionState, id producerID) error {
	if b.built == nil {
		built, err := b.builder.Finish()
		if err != nil {
			return err
		}
		b.built = built
	}
	if !p.cfg.idempotent {
		return nil
	}
	if b.seq < 0 {
		b.seq = ps.nextSeq
		ps.nextSeq = record.IncrementSequence(ps.nextSeq, int32(len(b.recs)))
	}
	if b.pid != id.id || b.epoch != id.epoch || b.stampedSeq != b.seq {
		record.SetProducerFields(b.built, id.id, id.epoch, b.seq)
		b.pid, b.epoch, b.stampedSeq = id.id, id.epoch, b.seq
	}
	return nil
}

func (p *Producer) inflightRequests() int {
	p.sinksMu.Lock()
	defer p.sinksMu.Unlock()
	n := 0
	for _, s := range p.sinks {
		n += int(s.inflight.Load())
	}
	return n
}

// sink returns the broker's response reader, starting it on first use.
// Only the sender goroutine calls it.
func (p *Producer) sink(id int32) *brokerSink {
	p.sinksMu.Lock()
	defer p.sinksMu.Unlock()
	s := p.sinks[id]
	if s == nil {
		s = &brokerSink{id: id, ch: make(chan *produceInflight, p.cfg.maxInFlight+1)}
		p.sinks[id] = s
		p.workers.Add(1)
		go p.sinkLoop(s)
	}
	return s
}

// readyConn returns the leader's live connection, or nil after starting
// (at most one at a time, and not before the redial backoff) a background
// dial that wakes the sender when it ends. Only the sender calls it.
func (p *Producer) readyConn(leader int32, s *brokerSink, now time.Time, later func(time.Time)) *brokerConn {
	h, err := p.cl.handle(leader)
	if err != nil {
		p.cl.TriggerMetadataRefresh()
		later(now.Add(p.cl.cfg.retryBackoff))
		return nil
	}
	if conn := h.slots[connProduce].live(); conn != nil {
		return conn
	}
	if at := s.redialAt.Load(); now.UnixNano() < at {
		later(time.Unix(0, at))
		return nil
	}
	if s.dialing.CompareAndSwap(false, true) {
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			if _, err := p.cl.connect(p.ctx, h, connProduce); err != nil {
				p.cl.TriggerMetadataRefresh()
				s.redialAt.Store(time.Now().Add(p.cl.cfg.retryBackoff).UnixNano())
			}
			s.dialing.Store(false)
			p.wakeSender()
		}()
	}
	return nil
}

// sendRequest writes one Produce request (from the sender goroutine, so
// requests to one broker go out in drain order) and hands it to the
// broker's sink to await.
func (p *Producer) sendRequest(leader int32, send *pendingSend) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = int16(p.cfg.acks)
	req.TimeoutMillis = int32(p.cfg.produceTimeout / time.Millisecond)
	if p.cfg.transactionalID != "" {
		// Kafka refuses transactional batches without it
		// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and the leader
		// verifies a transaction's partitions with its coordinator by it.
		req.TransactionID = kmsg.StringPtr(p.cfg.transactionalID)
	}
	for _, b := range send.batches {
		var rt *kmsg.ProduceRequestTopic
		for i := range req.Topics {
			if req.Topics[i].Topic == b.ps.topic {
				rt = &req.Topics[i]
				break
			}
		}
		if rt == nil {
			req.Topics = append(req.Topics, kmsg.NewProduceRequestTopic())
			rt = &req.Topics[len(req.Topics)-1]
			rt.Topic = b.ps.topic
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = b.ps.partition
		rp.Records = b.built
		rt.Partitions = append(rt.Partitions, rp)
	}
	inf := &produceInflight{batches: append([]*batch(nil), send.batches...)}
	send.batches = send.batches[:0]
	send.bytes = 0
	switch {
	case p.txn != nil && !p.txn.v2.Load():
		// Produce v12+ adds a transactional batch's partition to the
		// transaction (KIP-890 part 2), which this producer does itself
		// with AddPartitionsToTxn under transaction version 1: it stays
		// at v11, as the Java client does.
		inf.fut, inf.err = send.conn.startRequest(cappedProduce{ProduceRequest: req, max: maxTxnProduceVersion})
	case p.txn != nil && send.conn.maxVersion(req.Key(), req.MaxVersion()) < minTxnV2ProduceVersion:
		// Under transaction version 2 only Produce v12+ adds the
		// partition; a broker without it cannot take the batches.
		inf.err = fmt.Errorf("produce to broker %d: %w: transaction version 2 needs Produce v%d", leader, ErrUnsupportedRequest, minTxnV2ProduceVersion)
	default:
		inf.fut, inf.err = send.conn.startRequest(req)
	}
	send.sink.conn = send.conn
	send.sink.inflight.Add(1)
	send.sink.ch <- inf
}

// cappedProduce is a Produce request sent at version max at most; it keeps
// the request's methods (the timeout its response may take).
type cappedProduce struct {
	*kmsg.ProduceRequest
	max int16
}

func (r cappedProduce) MaxVersion() int16 { return min(r.max, r.ProduceRequest.MaxVersion()) }

// sinkLoop awaits the responses of one broker's requests in order. It
// settles each request's batches (retry or done), frees the in-flight slot
// and wakes the sender before running the callbacks, so the next request
// is on the wire while user code runs; callbacks still run in request
// order because one goroutine runs them all.
func (p *Producer) sinkLoop(s *brokerSink) {
	defer p.workers.Done()
	var done []completion
	for inf := range s.ch {
		var resp kmsg.Response
		err := inf.err
		if err == nil {
			resp, err = inf.fut.wait(p.ctx)
		}
		done = p.handleResponse(inf, resp, err, done[:0])
		s.inflight.Add(-1)
		p.wakeSender()
		for i, c := range done {
			c.b.complete(p, c.baseOffset, c.logAppendTime, c.err)
			done[i] = completion{}
		}
	}
}

// completion is a batch's outcome, applied after the sender is woken.
type completion struct {
	b             *batch
	baseOffset    int64
	logAppendTime int64
	err           error
}

// handleResponse settles every batch of one request: it requeues those to
// retry and appends the others' outcomes to done.
func (p *Producer) handleResponse(inf *produceInflight, kresp kmsg.Response, err error, done []completion) []completion {
	if err != nil {
		for _, b := range inf.batches {
			done = p.batchFailed(b, err, done)
		}
		return done
	}
	if kresp == nil { // acks=0: written is all we will ever know
		for _, b := range inf.batches {
			done = p.batchDone(b, -1, -1, done)
		}
		return done
	}
	resp := kresp.(*kmsg.ProduceResponse)
	for _, b := range inf.batches {
		rp := findPartition(resp, b.ps.topic, b.ps.partition)
		if rp == nil {
			done = p.batchFailed(b, fmt.Errorf("produce response has no %s-%d: %w", b.ps.topic, b.ps.partition, ErrUnknownTopicOrPartition), done)
			continue
		}
		switch rp.ErrorCode {
		case 0:
			done = p.batchDone(b, rp.BaseOffset, rp.LogAppendTime, done)
		case 46: // DUPLICATE_SEQUENCE_NUMBER: already appended by an earlier try
			done = p.batchDone(b, -1, -1, done)
		default:
			done = p.batchFailed(b, fmt.Errorf("produce to %s-%d: %w", b.ps.topic, b.ps.partition, errorWithMessage(rp.ErrorCode, rp.ErrorMessage)), done)
		}
	}
	return done
}

func findPartition(resp *kmsg.ProduceResponse, topic string, partition int32) *kmsg.ProduceResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != topic {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == partition {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

func (p *Producer) batchDone(b *batch, baseOffset, logAppendTime int64, done []completion) []completion {
	ps := b.ps
	ps.mu.Lock()
	ps.inflight--
	ps.requeueLocked(p.cl.cfg.retryBackoff)
	ps.mu.Unlock()
	return append(done, completion{b: b, baseOffset: baseOffset, logAppendTime: logAppendTime})
}

// batchFailed retries b when err is retriable and time remains, else fails
// its records. Either way the partition holds further sends until its
// in-flight batches have all come back, so retries keep their order.
func (p *Producer) batchFailed(b *batch, err error, done []completion) []completion {
	ps := b.ps
	var ke *Error
	isKafka := errors.As(err, &ke)
	if !isKafka || ke.Code == 3 || ke.Code == 5 || ke.Code == 6 || ke.Code == 100 {
		// UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
		// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID or a dead connection:
		// the cached metadata is stale.
		p.cl.TriggerMetadataRefresh()
	}
	retriable := IsRetriable(err)
	b.attempts++
	closing := p.ctx.Err() != nil
	expired := time.Since(b.created) >= p.cfg.deliveryTimeout
	ps.mu.Lock()
	if isKafka && p.txn != nil && (ke.Code == 59 || ke.Code == 47 || ke.Code == 90 || (ke.Code == 45 && !ps.failing)) {
		// In a transaction these fail the transaction instead (Java):
		// a sequence error makes it abortable, and AbortTransaction
		// bumps the epoch; a fencing is fatal. (An out-of-order batch
		// behind an earlier failed one is resent in order, below.)
		retriable = false
	} else if isKafka && (ke.Code == 45 || ke.Code == 59 || ke.Code == 47) {
		// OUT_OF_ORDER_SEQUENCE_NUMBER is expected behind an earlier
		// failed batch of the partition: resending in order fixes it,
		// and bumping the epoch then could duplicate an earlier batch
		// whose fate is unknown. Unprovoked, like UNKNOWN_PRODUCER_ID
		// and INVALID_PRODUCER_EPOCH, it means the broker's sequence
		// state is unknown: bump the epoch (KIP-360) and resend under
		// fresh sequences rather than fail the records.
		retriable = true
		if ke.Code != 45 || !ps.failing {
			p.needBump.Store(true)
		}
	}
	ps.inflight--
	ps.failing = true
	// A transaction that is ending or failed retries nothing (read under
	// ps.mu, so failBuffered, which runs after the state changed, sees
	// any batch requeued before).
	if retriable && !closing && !expired && (p.txn == nil || p.txn.sending()) {
		ps.retries = append(ps.retries, b)
		ps.requeueLocked(p.cl.backoffFor(b.attempts - 1))
		ps.mu.Unlock()
		return done
	}
	if p.cfg.idempotent {
		p.needBump.Store(true) // the failed batch's sequences leave a gap
	}
	ps.requeueLocked(p.cl.cfg.retryBackoff)
	ps.mu.Unlock()
	switch {
	case closing:
		err = fmt.Errorf("%w (last: %v)", ErrClosed, err)
	case expired && retriable:
		err = fmt.Errorf("%w (last: %v)", ErrDeliveryTimeout, err)
	}
	return append(done, completion{b: b, baseOffset: -1, logAppendTime: -1, err: err})
}
