package storage

import (
	"fmt"
	"time"

	"github.com/keelstream/keel/network/record"
)

// Transaction verification (KIP-890 part 1, Kafka 3.6's
// transaction.partition.verification.enable): a leader appends the first
// transactional batch of a producer's transaction in a partition only once
// the transaction coordinator confirmed that the partition is in the
// producer's ongoing transaction. Without it a late or stray batch (a retry
// that arrives after its transaction was aborted, a client that skipped
// AddPartitionsToTxn) opens a transaction no coordinator knows of: no
// marker ever ends it and the partition's last stable offset, where
// read_committed consumers stop, is stuck for good (a hanging transaction).
//
// The verification runs outside the log's lock (it is a request to the
// coordinator), so the log hands out a guard first
// (StartTxnVerification) and the append must carry it. Appending the
// producer's transactional batch or a transaction marker drops the guard:
// a marker that lands between the coordinator's answer and the append (the
// transaction ended meanwhile) makes the append fail, as Kafka's
// VerificationGuard does (KAFKA-14884). Guards of verifications that never
// led to an append go with the producer expiry (RemoveExpiredProducers).

// TxnVerificationGuard is one verification of a producer's transaction in
// one partition; compared by identity.
type TxnVerificationGuard struct {
	producerID int64
	epoch      int16
	started    time.Time
	// adds: the coordinator is asked to add the partition (transaction
	// version 2, KIP-890 part 2), not only whether it is in.
	adds bool
}

// StartTxnVerification is Kafka's maybeStartTransactionVerification: nil
// when the producer has a transaction of this epoch open in the partition
// (its batch needs no verification), otherwise the guard the append of its
// batch must carry once the coordinator confirmed the partition. A
// verification already in flight for the producer shares its guard.
//
// adds says the coordinator is asked to add the partition to the
// producer's transaction (transaction version 2). Such a guard outlives
// markers of its epoch or older: under transaction version 2 the
// coordinator adds a partition only once the previous transaction's
// markers are all written, and those carry the epoch the next transaction
// runs at, so a marker landing while the add is asked for ends the
// previous transaction, not the one being added to. Ending that one
// takes a marker of a later epoch (a fence bumps the epoch twice).
//
// Concurrency: safe from any goroutine; it takes the log's lock.
func (l *Log) StartTxnVerification(producerID int64, epoch int16, adds bool) *TxnVerificationGuard {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.producers[producerID]; e != nil && e.txnFirstOffset >= 0 && e.epoch == epoch {
		return nil
	}
	g := l.txnGuards[producerID]
	if g == nil || g.epoch < epoch {
		g = &TxnVerificationGuard{producerID: producerID, epoch: epoch, started: l.now(), adds: adds}
		if l.txnGuards == nil {
			l.txnGuards = map[int64]*TxnVerificationGuard{}
		}
		l.txnGuards[producerID] = g
	}
	return g
}

// checkTxnVerifiedLocked is the append's half: every transactional data batch of
// batches that would open a transaction (its producer has none open at its
// epoch, counting the record set's earlier batches) must be the producer
// whose guard is the one given. l.mu is held.
func (l *Log) checkTxnVerifiedLocked(batches []byte, guard *TxnVerificationGuard) error {
	var opened map[int64]bool // by an earlier batch of the record set
	for pos := 0; pos < len(batches); {
		h, err := record.ParseHeader(batches[pos:])
		if err != nil {
			return err
		}
		pos += h.Size()
		if !h.HasProducerID() || !h.IsTransactional() || h.IsControl() || opened[h.ProducerID] {
			continue
		}
		if e := l.producers[h.ProducerID]; e != nil && e.txnFirstOffset >= 0 && e.epoch == h.ProducerEpoch {
			continue
		}
		if g := l.txnGuards[h.ProducerID]; guard == nil || g != guard || g.epoch != h.ProducerEpoch {
			return fmt.Errorf("producer %d: transactional batch of a partition not verified as part of an ongoing transaction: %w", h.ProducerID, ErrInvalidTxnState)
		}
		if opened == nil {
			opened = map[int64]bool{}
		}
		opened[h.ProducerID] = true
	}
	return nil
}

// dropTxnGuardsLocked forgets the verifications of the producers whose
// transactional batches or markers were just appended, but for a
// transaction version 2 add and a marker not past its epoch (see
// StartTxnVerification). l.mu is held.
func (l *Log) dropTxnGuardsLocked(h *record.BatchHeader) {
	if len(l.txnGuards) == 0 || !h.HasProducerID() || !h.IsTransactional() {
		return
	}
	if g := l.txnGuards[h.ProducerID]; g != nil && g.adds && h.IsControl() && h.ProducerEpoch <= g.epoch {
		return
	}
	delete(l.txnGuards, h.ProducerID)
}

// expireTxnGuardsLocked drops the guards of verifications started before
// cutoff (Unix ms) that never led to an append. l.mu is held.
func (l *Log) expireTxnGuardsLocked(cutoff int64) {
	for id, g := range l.txnGuards {
		if g.started.UnixMilli() <= cutoff {
			delete(l.txnGuards, id)
		}
	}
}
