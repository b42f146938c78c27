package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelstream/keel/network/record"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Producer sends records to Kafka topics.
//
// The goroutine that calls Produce partitions the record and appends it to
// its partition's open batch in a bounded buffer (buffer.memory); one sender
// goroutine seals batches that are full (batch.size) or old enough
// (linger.ms), and writes one Produce request per broker, in order; one
// goroutine per broker reads the responses in that order and runs the
// callbacks, so callbacks for one partition run in offset order.
//
// All methods are safe for concurrent use. Close stops every goroutine the
// Producer started.
type Producer struct {
	cl        *Client
	ownClient bool
	cfg       producerConfig

	topicsMu sync.Mutex                             // serializes additions to topics
	topics   atomic.Pointer[map[string]*topicState] // copy on write

	// Buffer memory: memUsed is reserved by Produce and released when a
	// record's batch completes. Waiters for memory wait on memFreed, which
	// is closed and replaced (under memMu) when memory is released.
	memUsed    atomic.Int64
	memMu      sync.Mutex
	memFreed   chan struct{}
	memWaiters int

	// Records accepted and not yet completed, for Flush.
	pending      atomic.Int64
	flushMu      sync.Mutex
	flushDone    chan struct{}
	flushWaiters int
	flushing     atomic.Int32 // >0: linger is ignored

	// Idempotence: the producer id and epoch, guarded by idMu. needBump is
	// set when a batch failed in a way that leaves a sequence gap; the
	// sender bumps the epoch before sending more (KIP-360).
	idMu     sync.Mutex
	id       producerID
	needBump atomic.Bool

	txn *txnManager // nil unless TransactionalID was given

	// closeMu is read-held by every Produce call while it buffers a
	// record, and write-held once by Close, so that Close knows no record
	// can slip into the buffer after it failed what was left.
	closeMu  sync.RWMutex
	wake     chan struct{}
	sinksMu  sync.Mutex
	sinks    map[int32]*brokerSink
	closing  atomic.Bool
	closed   chan struct{} // closed by Close: stop everything
	ctx      context.Context
	cancel   context.CancelFunc
	workers  sync.WaitGroup // the sender and the sinks
	closeErr error
	once     sync.Once
}

type producerID struct {
	id    int64
	epoch int16
}

// topicState is one topic's partitions as the producer knows them.
type topicState struct {
	name        string
	partitioner TopicPartitioner
	mu          sync.Mutex                        // serializes growth of parts
	parts       atomic.Pointer[[]*partitionState] // copy on write, indexed by partition
}

// NewProducer builds a Producer with its own Client from opts (client and
// producer options). With idempotence on (the default) it obtains a
// producer id before returning. With TransactionalID it also initializes
// transactions before returning (Java's initTransactions: InitProducerId
// from the transaction coordinator, which fences older producers with the
// same id), retrying for at most max.block.ms.
func NewProducer(ctx context.Context, opts ...Opt) (*Producer, error) {
	ccfg, rest := splitOpts(opts)
	cl, err := newClient(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	p, err := newProducer(ctx, cl, rest)
	if err != nil {
		cl.Close()
		return nil, err
	}
	p.ownClient = true
	return p, nil
}

// NewProducerFromClient builds a Producer on an existing Client, which it
// does not close. Client options in opts are ignored.
func NewProducerFromClient(ctx context.Context, cl *Client, opts ...Opt) (*Producer, error) {
	_, rest := splitOpts(opts)
	return newProducer(ctx, cl, rest)
}

func newProducer(ctx context.Context, cl *Client, opts []Opt) (*Producer, error) {
	cfg := defaultProducerConfig()
	for _, o := range opts {
		if po, ok := o.(producerOpt); ok {
			po.fn(&cfg)
		}
	}
	if cfg.transactionalID != "" {
		// Kafka's rule: transactions need idempotence, hence acks=all.
		if cfg.idempotentSet && !cfg.idempotent {
			return nil, fmt.Errorf("new producer: transactional.id %q requires idempotence, but it was turned off", cfg.transactionalID)
		}
		if cfg.acksSet && cfg.acks != AcksAll {
			return nil, fmt.Errorf("new producer: transactional.id %q requires acks=all, got acks=%d", cfg.transactionalID, cfg.acks)
		}
		if cfg.txnTimeout < time.Millisecond || cfg.txnTimeout > time.Duration(1<<31-1)*time.Millisecond {
			return nil, fmt.Errorf("new producer: transaction timeout %v out of range", cfg.txnTimeout)
		}
		cfg.idempotent = true
	}
	if cfg.acksSet && cfg.acks != AcksAll {
		if cfg.idempotentSet && cfg.idempotent {
			return nil, fmt.Errorf("new producer: idempotence requires acks=all, got acks=%d", cfg.acks)
		}
		cfg.idempotent = false
	}
	if cfg.acks != AcksNone && cfg.acks != AcksLeader && cfg.acks != AcksAll {
		return nil, fmt.Errorf("new producer: acks must be 0, 1 or -1 (all), got %d", cfg.acks)
	}
	if cfg.idempotent && (cfg.maxInFlight > 5 || cfg.maxInFlight < 1) {
		return nil, fmt.Errorf("new producer: idempotence needs max in flight between 1 and 5, got %d", cfg.maxInFlight)
	}
	if cfg.maxInFlight < 1 {
		cfg.maxInFlight = 1
	}
	if cfg.batchSize < 1 {
		cfg.batchSize = 1
	}
	if cfg.batchSize > cfg.maxRequestSize {
		cfg.batchSize = cfg.maxRequestSize // a batch must fit in a request
	}
	if cfg.partitioner == nil {
		cfg.partitioner = DefaultPartitioner(cfg.batchSize)
	}
	p := &Producer{
		cl:        cl,
		cfg:       cfg,
		memFreed:  make(chan struct{}),
		flushDone: make(chan struct{}),
		wake:      make(chan struct{}, 1),
		sinks:     make(map[int32]*brokerSink),
		closed:    make(chan struct{}),
		id:        producerID{id: record.NoProducerID, epoch: record.NoProducerEpoch},
	}
	empty := map[string]*topicState{}
	p.topics.Store(&empty)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if cfg.transactionalID != "" {
		p.txn = newTxnManager(p)
		initCtx, cancel := context.WithTimeout(ctx, cfg.maxBlock)
		err := p.txn.initProducerID(initCtx)
		cancel()
		if err != nil {
			p.cancel()
			return nil, fmt.Errorf("new producer: %w", err)
		}
		p.txn.v2.Store(p.cl.finalizedLevel(transactionVersionName) >= 2)
	} else if cfg.idempotent {
		if err := p.initProducerID(ctx); err != nil {
			p.cancel()
			return nil, err
		}
	}
	p.workers.Add(1)
	go p.senderLoop()
	return p, nil
}

// Client is the Client the producer uses (for metadata or raw requests).
func (p *Producer) Client() *Client { return p.cl }

// initProducerID asks for a producer id, or for an epoch bump of the
// current one when the broker supports InitProducerId v3+ (KIP-360), which
// resets every partition's sequence numbers.
func (p *Producer) initProducerID(ctx context.Context) error {
	p.idMu.Lock()
	cur := p.id
	p.idMu.Unlock()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = cur.id, cur.epoch
	var resp *kmsg.InitProducerIDResponse
	for attempt := 0; ; attempt++ {
		kresp, err := p.cl.Request(ctx, req)
		if err == nil {
			resp = kresp.(*kmsg.InitProducerIDResponse)
			err = ErrorForCode(resp.ErrorCode)
			if err == nil {
				break
			}
			if req.ProducerID >= 0 && !IsRetriable(err) {
				// The broker would not bump this id: start afresh.
				req.ProducerID, req.ProducerEpoch = -1, -1
				continue
			}
		}
		if !IsRetriable(err) || attempt >= p.cl.cfg.requestRetries {
			return fmt.Errorf("init producer id: %w", err)
		}
		if werr := p.cl.backoff(ctx, attempt); werr != nil {
			return fmt.Errorf("init producer id: %w (after %v)", werr, err)
		}
	}
	p.idMu.Lock()
	p.id = producerID{id: resp.ProducerID, epoch: resp.ProducerEpoch}
	p.idMu.Unlock()
	return nil
}

func (p *Producer) currentID() producerID {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.id
}

// Produce buffers r for sending and returns; cb (which may be nil) runs
// once r is acknowledged (err == nil, r.Partition and r.Offset set) or has
// failed. Produce blocks only while the buffer is full or the topic's
// metadata is unknown, for at most max.block.ms (and while ctx lasts); a
// record that fails before it is buffered has its callback run in the
// calling goroutine. Other callbacks run in the producer's goroutines, in
// offset order per partition; they must not block for long (they hold up
// the responses of their broker) and must not call Flush or Close.
//
// A transactional producer accepts records only between BeginTransaction
// and the end of the transaction: otherwise cb gets ErrTransactionState
// (or the transaction's abortable or fatal error).
//
// Safe for concurrent use. The producer owns r until cb runs.
func (p *Producer) Produce(ctx context.Context, r *Record, cb func(*Record, error)) {
	if err := p.produce(ctx, r, cb); err != nil {
		if p.txn != nil && !errors.Is(err, ErrTransactionState) && !errors.Is(err, ErrClosed) {
			p.txn.batchFailed(err) // as in Java, a failed send fails the transaction
		}
		if cb != nil {
			cb(r, err)
		}
	}
}

func (p *Producer) produce(ctx context.Context, r *Record, cb func(*Record, error)) error {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closing.Load() {
		return ErrClosed
	}
	if p.txn != nil {
		if err := p.txn.checkProduce(); err != nil {
			return fmt.Errorf("produce to %s: %w", r.Topic, err)
		}
	}
	size := recordSize(r)
	if size > p.cfg.maxRequestSize || int64(size) > p.cfg.bufferMemory {
		return fmt.Errorf("produce to %s: %d-byte record: %w", r.Topic, size, ErrRecordTooLarge)
	}
	var deadline *time.Timer // made on the first wait only
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	ts, n, err := p.topicFor(ctx, r.Topic, &deadline)
	if err != nil {
		return err
	}
	part := ts.partitioner.Partition(r, n)
	if part < 0 || part >= n {
		return fmt.Errorf("produce to %s-%d (%d partitions): %w", r.Topic, part, n, ErrUnknownTopicOrPartition)
	}
	if err := p.reserve(ctx, int64(size), &deadline); err != nil {
		return fmt.Errorf("produce to %s: %w", r.Topic, err)
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	r.Partition = part
	p.pending.Add(1)
	ps := (*ts.parts.Load())[part]
	if ps.append(p, r, cb, size) {
		p.wakeSender()
	}
	return nil
}

// recordSize estimates a record's bytes in a batch (the buffer.memory and
// max.request.size accounting): key, value, headers and varint overhead.
func recordSize(r *Record) int {
	n := len(r.Key) + len(r.Value) + 21
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}

// topicFor returns the topic's state and partition count, waiting for its
// metadata up to max.block.ms.
func (p *Producer) topicFor(ctx context.Context, topic string, deadline **time.Timer) (*topicState, int32, error) {
	m := p.cl.meta.Load()
	tm := m.Topics[topic]
	for attempt := 0; tm == nil || tm.Err != nil || len(tm.Partitions) == 0; attempt++ {
		if *deadline == nil {
			*deadline = time.NewTimer(p.cfg.maxBlock)
		}
		var err error
		tm, err = p.cl.TopicMetadata(ctx, topic)
		if err == nil && len(tm.Partitions) > 0 {
			break
		}
		if err != nil && !IsRetriable(err) {
			return nil, 0, fmt.Errorf("produce to %s: %w", topic, err)
		}
		t := time.NewTimer(p.cl.backoffFor(attempt))
		select {
		case <-t.C:
		case <-(*deadline).C:
			t.Stop()
			return nil, 0, fmt.Errorf("produce to %s: metadata: %w (last: %v)", topic, ErrMaxBlock, err)
		case <-ctx.Done():
			t.Stop()
			return nil, 0, ctx.Err()
		case <-p.closed:
			t.Stop()
			return nil, 0, ErrClosed
		}
	}
	n := int32(len(tm.Partitions))
	ts := (*p.topics.Load())[topic]
	if ts == nil {
		ts = p.addTopic(topic)
	}
	if parts := *ts.parts.Load(); int32(len(parts)) < n {
		ts.grow(topic, n)
	}
	return ts, n, nil
}

func (p *Producer) addTopic(topic string) *topicState {
	p.topicsMu.Lock()
	defer p.topicsMu.Unlock()
	old := *p.topics.Load()
	if ts := old[topic]; ts != nil {
		return ts
	}
	ts := &topicState{name: topic, partitioner: p.cfg.partitioner.ForTopic(topic)}
	empty := []*partitionState{}
	ts.parts.Store(&empty)
	next := make(map[string]*topicState, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[topic] = ts
	p.topics.Store(&next)
	return ts
}

func (ts *topicState) grow(topic string, n int32) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	old := *ts.parts.Load()
	if int32(len(old)) >= n {
		return
	}
	next := make([]*partitionState, n)
	copy(next, old)
	for i := int32(len(old)); i < n; i++ {
		next[i] = &partitionState{topic: topic, partition: i, seqProducer: record.NoProducerID}
	}
	ts.parts.Store(&next)
}

// reserve takes size bytes of buffer memory, waiting up to max.block.ms.
func (p *Producer) reserve(ctx context.Context, size int64, deadline **time.Timer) error {
	limit := p.cfg.bufferMemory
	for {
		used := p.memUsed.Load()
		if used+size <= limit {
			if p.memUsed.CompareAndSwap(used, used+size) {
				return nil
			}
			continue
		}
		p.memMu.Lock()
		ch := p.memFreed
		p.memWaiters++
		p.memMu.Unlock()
		if p.memUsed.Load()+size <= limit {
			continue // freed meanwhile; the waiter count is harmless
		}
		if *deadline == nil {
			*deadline = time.NewTimer(p.cfg.maxBlock)
		}
		select {
		case <-ch:
		case <-(*deadline).C:
			return fmt.Errorf("buffer.memory (%d bytes) full: %w", limit, ErrMaxBlock)
		case <-ctx.Done():
			return ctx.Err()
		case <-p.closed:
			return ErrClosed
		}
	}
}

func (p *Producer) release(size int64) {
	p.memUsed.Add(-size)
	p.memMu.Lock()
	if p.memWaiters > 0 {
		close(p.memFreed)
		p.memFreed = make(chan struct{})
		p.memWaiters = 0
	}
	p.memMu.Unlock()
}

// finished accounts n completed records for Flush.
func (p *Producer) finished(n int64) {
	if p.pending.Add(-n) != 0 {
		return
	}
	p.flushMu.Lock()
	if p.flushWaiters > 0 {
		close(p.flushDone)
		p.flushDone = make(chan struct{})
		p.flushWaiters = 0
	}
	p.flushMu.Unlock()
}

func (p *Producer) wakeSender() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Flush sends every buffered record at once (ignoring linger.ms) and waits
// until all records produced before the call have completed, or ctx ends.
// Safe for concurrent use; must not be called from a produce callback.
func (p *Producer) Flush(ctx context.Context) error {
	p.flushing.Add(1)
	defer p.flushing.Add(-1)
	p.wakeSender()
	for {
		p.flushMu.Lock()
		if p.pending.Load() == 0 {
			p.flushMu.Unlock()
			return nil
		}
		ch := p.flushDone
		p.flushWaiters++
		p.flushMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush: %w", ctx.Err())
		}
	}
}

// ProduceResult is one record's outcome in ProduceSync.
type ProduceResult struct {
	Record *Record
	Err    error
}

// ProduceResults are the outcomes of a ProduceSync, in argument order.
type ProduceResults []ProduceResult

// FirstErr returns the first record's error, or nil if all succeeded.
func (rs ProduceResults) FirstErr() error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// ProduceSync produces records and waits until each has completed. While it
// waits, linger.ms is ignored so it returns as soon as the broker answers.
// Safe for concurrent use; must not be called from a produce callback.
func (p *Producer) ProduceSync(ctx context.Context, records ...*Record) ProduceResults {
	results := make(ProduceResults, len(records))
	var wg sync.WaitGroup
	wg.Add(len(records))
	p.flushing.Add(1)
	defer p.flushing.Add(-1)
	for i, r := range records {
		i := i
		results[i].Record = r
		p.Produce(ctx, r, func(_ *Record, err error) {
			results[i].Err = err
			wg.Done()
		})
	}
	p.wakeSender()
	wg.Wait()
	return results
}

// Close flushes buffered records (bounded by ctx), then stops the sender
// and the response readers; records still buffered or in flight when ctx
// ends fail with ErrClosed. A transactional producer first aborts a
// transaction left open, as Kafka's does. If the Producer built its own
// Client, Close closes it. Safe to call more than once; later calls return
// the first call's result.
func (p *Producer) Close(ctx context.Context) error {
	p.once.Do(func() {
		if p.txn != nil {
			if err := p.txn.abortOnClose(ctx); err != nil {
				p.closeErr = err
			}
		}
		p.closing.Store(true)
		if err := p.Flush(ctx); err != nil && p.closeErr == nil {
			p.closeErr = err
		}
		close(p.closed) // wakes Produce calls blocked on memory or metadata
		p.closeMu.Lock()
		p.closeMu.Unlock() // every Produce call has returned; none will buffer again
		p.cancel()
		p.wakeSender()
		p.workers.Wait()
		p.failAll(ErrClosed)
		if p.ownClient {
			p.cl.Close()
		}
	})
	return p.closeErr
}

// failAll completes every batch still buffered with err (after Close has
// stopped the goroutines, so nothing else touches them).
func (p *Producer) failAll(err error) {
	for _, ts := range *p.topics.Load() {
		for _, ps := range *ts.parts.Load() {
			ps.mu.Lock()
			batches := ps.queue
			ps.queue = nil
			if ps.cur != nil {
				batches = append(batches, ps.cur)
				ps.cur = nil
			}
			batches = append(batches, ps.retries...)
			ps.retries = nil
			ps.mu.Unlock()
			for _, b := range batches {
				b.complete(p, -1, -1, err)
			}
		}
	}
}

var errSequenceGap = errors.New("idempotent sequence reset after a failed batch")
