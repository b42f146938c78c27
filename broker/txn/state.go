package txn

import (
	"cmp"
	"math"
	"slices"
)

// State is a transaction's state, numbered as Kafka's TransactionState ids
// (the numbers __transaction_state values carry).
type State int8

// The states. PrepareEpochFence and Dead are never held by a loaded
// transaction: they exist for the record format and DescribeTransactions
// names.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
	"CompleteAbort", "Dead", "PrepareEpochFence"}

// String is the state's name as DescribeTransactions and ListTransactions
// report it (Kafka's TransactionState.name).
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState is Kafka's TransactionState.fromName: exact names only.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// expirationAllowed is Kafka's isExpirationAllowed: only ids with no
// transaction in flight expire.
func (s State) expirationAllowed() bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// TopicPartition names a partition in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// noProducerID and noProducerEpoch are Kafka's RecordBatch.NO_PRODUCER_ID
// and NO_PRODUCER_EPOCH.
const (
	noProducerID    int64 = -1
	noProducerEpoch int16 = -1
)

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted: the last
// epoch ever handed to a client is Short.MaxValue-1, so that a fence can
// still bump it once (to Short.MaxValue, used only for abort markers).
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// metadata is what a __transaction_state value holds for an id, plus the
// KIP-360 fields Kafka keeps only in memory (lastProducerID,
// lastProducerEpoch: not in the v0 record, so a retry spanning a
// coordinator change is fenced, as in Kafka).
type metadata struct {
	producerID        int64
	lastProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	timeoutMs         int32
	state             State
	partitions        map[TopicPartition]struct{}
	// startTimestamp is when the transaction's first partition was
	// added, -1 when none is (Kafka's txnStartTimestamp).
	startTimestamp      int64
	lastUpdateTimestamp int64
	// tv2 is Kafka's clientTransactionVersion at 2 (KIP-890 part 2): the
	// transaction was begun or ended by a client of transaction version
	// 2, whose epoch is bumped by every EndTxn.
	tv2 bool
	// nextProducerID is the producer id a transaction version 2 EndTxn
	// allocated because the epoch ran out: the Complete record moves the
	// id to it at epoch 0. -1 when none.
	nextProducerID int64
}

func (md metadata) clone() metadata {
	c := md
	c.partitions = make(map[TopicPartition]struct{}, len(md.partitions))
	for tp := range md.partitions {
		c.partitions[tp] = struct{}{}
	}
	return c
}

func (md metadata) sortedPartitions() []TopicPartition {
	out := make([]TopicPartition, 0, len(md.partitions))
	for tp := range md.partitions {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

// txnEntry is one transactional id of the partition.
type txnEntry struct {
	id string
	metadata
	// pending is the transition whose record is being written (Kafka's
	// pendingState while appendTransactionToLog runs).
	pending *transition
	// markerJob is the marker job in flight while the state is
	// PrepareCommit/PrepareAbort, 0 when none (Kafka's pendingState
	// CompleteCommit/CompleteAbort while the markers are sent).
	markerJob uint64
	// retryCompleteAt is when Tick writes the Complete* record again after
	// its append failed, 0 when no retry is due (Kafka's
	// txnLogAppendRetryQueue).
	retryCompleteAt int64
	// failedEpochFence is Kafka's hasFailedEpochFence: the epoch was bumped
	// in memory by a fence whose write failed; the next fence reuses it.
	failedEpochFence bool
}

// busy is Kafka's pendingTransitionInProgress.
func (t *txnEntry) busy() bool {
	return t.pending != nil || t.markerJob != 0 || t.retryCompleteAt != 0
}
