package broker

// InitProducerId (key 22), v0–v5, for idempotent producers (KIP-98).
//
//   - Without a transactional id: a new producer id with epoch 0, from the
//     block of ids this broker holds; when the block is used up, the next is
//     allocated through the controller (AllocateProducerIds, KIP-730) on a
//     goroutine the Broker owns while the request waits. A producer that
//     names its current id and epoch (v3+, KIP-360) also gets a new id, as
//     Kafka's TransactionCoordinator answers when there is no transactional
//     id. A block that cannot be had in time answers
//     COORDINATOR_LOAD_IN_PROGRESS (retriable), as Kafka's
//     RPCProducerIdManager does.
//   - With a transactional id: the transaction coordinator answers
//     (handle_txn.go).

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

// producerIDAllocTimeout bounds a producer id block allocation.
const producerIDAllocTimeout = 10 * time.Second

func (b *Broker) handleInitProducerID(ctx context.Context, req *network.Request, m *kmsg.InitProducerIDRequest) network.Result {
	resp := m.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if m.TransactionalID != nil {
		return b.initTransactionalProducerID(m)
	}
	if id, ok := b.producerIDs.tryNext(); ok {
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return respond(resp)
	}
	d := network.NewDeferred()
	started := b.spawn(func() {
		actx, cancel := context.WithTimeout(b.ctx, producerIDAllocTimeout)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		id, err := b.producerIDs.next(actx, b.allocateProducerIDs)
		switch {
		case ctx.Err() != nil:
			d.Complete(nil)
			return
		case err != nil:
			b.log.Warn("allocating producer ids failed", "error", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		default:
			resp.ProducerID, resp.ProducerEpoch = id, 0
		}
		d.Complete(&network.Response{Msg: resp})
	})
	if !started {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return respond(resp)
	}
	return d
}

// allocateProducerIDs asks the controller for the next block of ids.
func (b *Broker) allocateProducerIDs(ctx context.Context) (start int64, n int32, err error) {
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID = b.nodeID
	if reg, ok := b.currentImage().Broker(b.nodeID); ok {
		req.BrokerEpoch = reg.Epoch
	}
	resp, err := b.ctrl.Forward(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	ar, ok := resp.(*kmsg.AllocateProducerIDsResponse)
	if !ok {
		return 0, 0, kerr.UnknownServerError
	}
	if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
		return 0, 0, err
	}
	if ar.ProducerIDLen <= 0 || ar.ProducerIDStart < 0 {
		return 0, 0, kerr.UnknownServerError
	}
	return ar.ProducerIDStart, ar.ProducerIDLen, nil
}

// producerIDBlock hands out producer ids from the current block and
// fetches the next block when it runs out, one fetch at a time.
//
// Concurrency: mu guards every field; safe from any goroutine.
type producerIDBlock struct {
	mu       sync.Mutex
	nextID   int64 // next id to hand out
	end      int64 // end of the block, exclusive
	fetching chan struct{}
}

// tryNext hands out an id without waiting, if the block has one.
func (p *producerIDBlock) tryNext() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nextID < p.end {
		p.nextID++
		return p.nextID - 1, true
	}
	return 0, false
}

// next hands out an id, fetching a new block with alloc when needed. It
// blocks until an id is available or ctx ends.
func (p *producerIDBlock) next(ctx context.Context, alloc func(context.Context) (int64, int32, error)) (int64, error) {
	for {
		p.mu.Lock()
		if p.nextID < p.end {
			p.nextID++
			id := p.nextID - 1
			p.mu.Unlock()
			return id, nil
		}
		if wait := p.fetching; wait != nil {
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		done := make(chan struct{})
		p.fetching = done
		p.mu.Unlock()
		start, n, err := alloc(ctx)
		p.mu.Lock()
		if err == nil {
			p.nextID, p.end = start, start+int64(n)
		}
		p.fetching = nil
		close(done)
		p.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
}
