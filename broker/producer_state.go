package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/storage"
)

// Idempotent producer state (KIP-98). The state itself — each producer's
// epoch and last five batches, its snapshots, its rebuild after a restart
// or a truncation — belongs to the partition's storage.Log
// (storage/producer_state.go), as Kafka's ProducerStateManager belongs to
// its UnifiedLog: every append updates it, the leader's and the
// follower's, so a replica that becomes leader has it already and no
// produce ever waits for a scan of the log. The sequence checks run inside
// storage.Log.AppendValidated under the log's lock, atomic with the append
// they guard; the broker maps their outcome to Kafka's answers
// (producerErrorCode) and runs the expiry of idle producers
// (producer.id.expiration.ms, producerExpiryLoop).

// producerErrorCode maps the idempotent producer checks' errors to Kafka's
// codes: OUT_OF_ORDER_SEQUENCE_NUMBER for a gap (or a new epoch not at
// sequence 0), INVALID_PRODUCER_EPOCH for a fenced epoch. ok is false for
// any other error.
func producerErrorCode(err error) (code int16, ok bool) {
	switch {
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code, true
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code, true
	case errors.Is(err, storage.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code, true
	}
	return 0, false
}

// producerExpiryLoop is the goroutine that forgets idle producers every
// producer.id.expiration.check.interval.ms (Kafka's
// PeriodicProducerExpirationCheck), on every hosted replica, leader or
// follower, as Kafka's log manager does. A periodic sweep rather than a
// lazy one on append: only a sweep frees the producers of partitions that
// no longer receive appends, and sweeping on the produce path would cost
// O(producers) there. Started once by applyLocked through spawn; returns
// when Close begins.
func (b *Broker) producerExpiryLoop() {
	t := time.NewTicker(max(b.cfg.ProducerIDExpirationCheckInterval, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-b.closing():
			return
		case <-t.C:
		}
		b.expireProducers(b.now())
	}
}

// expireProducers removes, from every hosted partition, the producers whose
// last batch's timestamp is producer.id.expiration.ms older than now, and
// returns how many it removed. A non-positive expiration (Kafka refuses
// one) expires nothing. Safe from any goroutine: each log takes its own
// lock, and a partition removed meanwhile is skipped (its log answers
// nothing once closed).
func (b *Broker) expireProducers(now time.Time) int {
	if b.cfg.ProducerIDExpiration <= 0 {
		return 0
	}
	n := 0
	for _, p := range b.partitions.Load().byTP {
		if p.removed.Load() {
			continue
		}
		n += p.log.RemoveExpiredProducers(now, b.cfg.ProducerIDExpiration)
	}
	if n > 0 {
		b.log.Debug("expired idle producers", "producers", n)
	}
	return n
}
