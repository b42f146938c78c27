package client

import (
	"sort"
	"sync"
	"time"

	"github.com/keelstream/keel/network/record"
)

// partitionState is one partition's batches. mu guards every field; the
// goroutines calling Produce append to cur, the sender seals and sends, the
// broker sinks complete and requeue.
type partitionState struct {
	topic     string
	partition int32

	mu       sync.Mutex
	cur      *batch   // open batch, accepting records
	queue    []*batch // sealed batches in send order (retries first)
	retries  []*batch // failed while others were in flight; requeued when inflight is 0
	inflight int      // batches sent and not yet answered
	failing  bool     // a batch failed: send nothing until inflight drains
	retrying bool     // the batch in flight is an idempotent retry, sent alone
	retryAt  time.Time

	// Idempotence: the next base sequence, for the producer id and epoch
	// the partition's sequences belong to (KIP-98; reset to 0 when the
	// epoch is bumped, KIP-360).
	nextSeq     int32
	seqProducer int64
	seqEpoch    int16

	// Transactions: AddPartitionsToTxn accepted the partition in the
	// open transaction, or (transaction version 2) its first batch is
	// going out with Produce v12+ (txnAdded); or the AddPartitionsToTxn
	// is queued or being sent (txnAdding). Both are reset when the
	// transaction ends.
	txnAdded  bool
	txnAdding bool
}

// batch is one partition's records on their way to the broker.
type batch struct {
	ps      *partitionState
	builder *record.ProducerBatchBuilder
	recs    []batchRecord
	bytes   int64 // buffer memory reserved by its records
	created time.Time

	built      []byte // the encoded batch (owned by builder), from its first send on
	seq        int32  // base sequence, or -1 before the first send
	pid        int64  // producer id, epoch and sequence stamped into built
	epoch      int16
	stampedSeq int32
	attempts   int
}

type batchRecord struct {
	r  *Record
	cb func(*Record, error)
}

var batchPool = sync.Pool{New: func() any {
	return &batch{builder: record.NewProducerBatchBuilder(record.DefaultBatchOptions(), 0)}
}}

func newBatch(ps *partitionState, c record.Compression, transactional bool) *batch {
	b := batchPool.Get().(*batch)
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	opts.Transactional = transactional
	b.builder.Reset(opts)
	b.ps = ps
	b.created = time.Now()
	b.seq = -1
	b.pid, b.epoch, b.stampedSeq = record.NoProducerID, record.NoProducerEpoch, record.NoSequence
	b.built = nil
	b.bytes = 0
	b.attempts = 0
	return b
}

// append adds r to the partition's open batch, sealing it when full. It
// reports whether the sender should look (a batch was sealed or opened).
func (ps *partitionState) append(p *Producer, r *Record, cb func(*Record, error), size int) bool {
	wake := false
	ps.mu.Lock()
	b := ps.cur
	if b != nil && b.builder.UncompressedSize()+size > p.cfg.batchSize {
		ps.queue = append(ps.queue, b)
		b = nil
		wake = true
	}
	if b == nil {
		b = newBatch(ps, p.cfg.compression, p.txn != nil)
		b.builder.Grow(max(p.cfg.batchSize, size+64) - b.builder.UncompressedSize())
		ps.cur = b
		wake = true
	}
	b.builder.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, r.Headers)
	b.recs = append(b.recs, batchRecord{r: r, cb: cb})
	b.bytes += int64(size)
	if b.builder.UncompressedSize() >= p.cfg.batchSize {
		ps.queue = append(ps.queue, b)
		ps.cur = nil
		wake = true
	}
	ps.mu.Unlock()
	return wake
}

// complete runs the callbacks of b's records and returns b to the pool.
// baseOffset is -1 when unknown (acks=0, errors); logAppendTime is -1
// unless the topic uses LogAppendTime. Called without locks.
func (b *batch) complete(p *Producer, baseOffset, logAppendTime int64, err error) {
	if err != nil && p.txn != nil {
		p.txn.batchFailed(err) // a failed record fails its transaction
	}
	for i, br := range b.recs {
		r := br.r
		if err == nil {
			r.Offset = -1
			if baseOffset >= 0 {
				r.Offset = baseOffset + int64(i)
			}
			r.TimestampType = CreateTime
			if logAppendTime >= 0 {
				r.Timestamp, r.TimestampType = time.UnixMilli(logAppendTime), LogAppendTime
			}
		}
		if br.cb != nil {
			br.cb(r, err)
		}
		b.recs[i] = batchRecord{}
	}
	n := len(b.recs)
	b.recs = b.recs[:0]
	p.release(b.bytes)
	p.finished(int64(n))
	b.ps = nil
	if b.builder.UncompressedSize() <= 2*p.cfg.batchSize+record.HeaderSize {
		batchPool.Put(b) // keep only buffers of the usual size
	}
}

// requeueLocked moves failed batches back to the front of the queue once
// nothing of the partition is in flight, in sequence order, and sets the
// retry backoff. ps.mu must be held.
func (ps *partitionState) requeueLocked(backoff time.Duration) {
	if ps.inflight > 0 || !ps.failing {
		return
	}
	sort.SliceStable(ps.retries, func(i, j int) bool {
		a, b := ps.retries[i].seq, ps.retries[j].seq
		if a < 0 || b < 0 {
			return a >= 0 && b < 0
		}
		return a < b
	})
	q := make([]*batch, 0, len(ps.retries)+len(ps.queue))
	q = append(q, ps.retries...)
	ps.queue = append(q, ps.queue...)
	ps.retries = ps.retries[:0]
	ps.failing = false
	ps.retryAt = time.Now().Add(backoff)
}
