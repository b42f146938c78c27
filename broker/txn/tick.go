package txn

import (
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Tick does what is due as of now: it writes again Complete* records whose
// append failed; every AbortCheckIntervalMs it aborts the transactions that
// ran longer than their timeout (Kafka's abortTimedOutTransactions: the
// epoch is bumped, so the producer that let it time out is fenced); every
// ExpireCheckIntervalMs it removes ids idle for IDExpirationMs with a
// tombstone (Kafka's removeExpiredTransactionalIds). Ids with a pending
// transition are left for a later check, as in Kafka.
func (m *Manager) Tick(now int64) Effects {
	var eff Effects
	if m.loading || m.unloaded {
		return eff
	}
	ids := m.sortedIDs()
	for _, id := range ids {
		if t := m.txns[id]; t.retryCompleteAt != 0 && now >= t.retryCompleteAt {
			t.retryCompleteAt = 0
			m.writeComplete(&eff, now, t)
		}
	}
	if now >= m.nextAbortCheck {
		m.nextAbortCheck = now + m.cfg.AbortCheckIntervalMs
		for _, id := range ids {
			t := m.txns[id]
			if t.state == Ongoing && !t.busy() && t.startTimestamp+int64(t.timeoutMs) < now {
				m.fence(&eff, now, t, nil)
			}
		}
	}
	if now >= m.nextExpireCheck {
		m.nextExpireCheck = now + m.cfg.ExpireCheckIntervalMs
		for _, id := range ids {
			t := m.txns[id]
			if t.state.expirationAllowed() && !t.busy() && t.lastUpdateTimestamp <= now-m.cfg.IDExpirationMs {
				m.write(&eff, t, &transition{kind: opExpire})
			}
		}
	}
	return eff
}

// NextDeadline is when Tick must next run, or -1 before FinishLoad and
// after Unload.
func (m *Manager) NextDeadline() int64 {
	if m.loading || m.unloaded {
		return -1
	}
	next := min(m.nextAbortCheck, m.nextExpireCheck)
	for _, t := range m.txns {
		if t.retryCompleteAt != 0 {
			next = min(next, t.retryCompleteAt)
		}
	}
	return next
}

// Description is a transactional id as DescribeTransactions reports it.
// With an error code only TransactionalID is set.
type Description struct {
	TransactionalID string
	ErrorCode       int16
	State           string
	ProducerID      int64
	ProducerEpoch   int16
	TimeoutMs       int32
	// StartTimestamp is when the transaction began, -1 when none has.
	StartTimestamp int64
	Partitions     []TopicPartition
}

// Describe is Kafka's handleDescribeTransactions for ids of this partition:
// TRANSACTIONAL_ID_NOT_FOUND for unknown ids, INVALID_REQUEST for "", and
// COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR while loading or after
// Unload. Partitions are sorted.
func (m *Manager) Describe(ids []string) []Description {
	out := make([]Description, 0, len(ids))
	for _, id := range ids {
		d := Description{TransactionalID: id}
		t := m.txns[id]
		switch {
		case m.refusal() != 0:
			d.ErrorCode = m.refusal()
		case id == "":
			d.ErrorCode = kerr.InvalidRequest.Code
		case t == nil:
			d.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			d.State, d.ProducerID, d.ProducerEpoch = t.state.String(), t.producerID, t.producerEpoch
			d.TimeoutMs, d.StartTimestamp, d.Partitions = t.timeoutMs, t.startTimestamp, t.sortedPartitions()
		}
		out = append(out, d)
	}
	return out
}

// Listed is one transaction as ListTransactions reports it.
type Listed struct {
	TransactionalID string
	ProducerID      int64
	State           string
}

// ListFilter selects transactions for List; empty lists select all.
type ListFilter struct {
	States      []string
	ProducerIDs []int64
	// DurationFilterMs (v1, KIP-994) keeps only transactions started more
	// than this long ago; -1, Kafka's default, keeps all.
	DurationFilterMs int64
	// IDPattern (v2, KIP-1152) keeps only transactional ids it matches
	// (anywhere in the id, as a regular expression search does); nil
	// keeps all.
	IDPattern *regexp.Regexp
}

// List is Kafka's listTransactionStates for this partition: the
// transactions matching f, sorted by id, and the state names of f that are
// not states (reported back as unknown, as Kafka does). It lists nothing
// before FinishLoad or after Unload.
func (m *Manager) List(now int64, f ListFilter) (txns []Listed, unknownStates []string) {
	var states []State
	for _, name := range f.States {
		if s, ok := ParseState(name); ok {
			states = append(states, s)
		} else {
			unknownStates = append(unknownStates, name)
		}
	}
	if m.refusal() != 0 {
		return nil, unknownStates
	}
	for _, id := range m.sortedIDs() {
		t := m.txns[id]
		switch {
		case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, t.producerID),
			len(states) > 0 && !slices.Contains(states, t.state),
			f.DurationFilterMs >= 0 && now-t.startTimestamp <= f.DurationFilterMs,
			f.IDPattern != nil && !f.IDPattern.MatchString(id):
			continue
		}
		txns = append(txns, Listed{TransactionalID: id, ProducerID: t.producerID, State: t.state.String()})
	}
	return txns, unknownStates
}
