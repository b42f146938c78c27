package txn

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record for __transaction_state: a key and a value, or a nil
// Value for a tombstone (an expired transactional id; compaction then
// removes the key).
type Record struct {
	Key   []byte
	Value []byte
}

// Versions as Kafka's TransactionLog writes them: key 0; value 0, or the
// flexible value 1 with KIP-890's tagged fields (the previous and next
// producer ids and the client's transaction version) for a transaction of
// transaction version 2, whose retries and producer id rotation need them
// after a coordinator change.
const (
	keyVersion      int16 = 0
	valueVersion    int16 = 0
	maxValueVersion int16 = 1
)

// Key encodes the key of a transactional id's record.
func Key(transactionalID string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = keyVersion, transactionalID
	return k.AppendTo(nil)
}

// DecodeKey decodes a __transaction_state key into its transactional id.
// Versions other than 0 are ErrUnknownRecord.
func DecodeKey(key []byte) (string, error) {
	if len(key) < 2 {
		return "", fmt.Errorf("key of %d bytes: %w", len(key), ErrUnknownRecord)
	}
	if version := int16(key[0])<<8 | int16(key[1]); version != keyVersion {
		return "", fmt.Errorf("key version %d: %w", version, ErrUnknownRecord)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", fmt.Errorf("decode transaction key: %w", err)
	}
	return k.TransactionalID, nil
}

// encodeValue encodes a transactional id's metadata as Kafka's
// TransactionLog.valueToBytes: an Empty transaction has null partitions,
// others an array grouped by topic.
func encodeValue(md metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	if md.tv2 {
		v.Version = maxValueVersion
		v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion = md.lastProducerID, md.nextProducerID, 2
	}
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = md.producerID, md.producerEpoch, md.timeoutMs
	v.State = kmsg.TransactionState(md.state)
	v.LastUpdateTimestamp, v.StartTimestamp = md.lastUpdateTimestamp, md.startTimestamp
	if md.state != Empty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range md.sortedPartitions() {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewTxnMetadataValueTopic()
				t.Topic = tp.Topic
				v.Topics = append(v.Topics, t)
			}
			last := &v.Topics[len(v.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
	}
	return v.AppendTo(nil)
}

// decodeValue is Kafka's TransactionLog.readTxnRecordValue. The in-memory
// KIP-360 fields start unknown. A value in PrepareEpochFence (never written
// by Kafka, which writes the fence as PrepareAbort) loads as PrepareAbort so
// that loading finishes the abort.
func decodeValue(value []byte) (metadata, error) {
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return metadata{}, fmt.Errorf("decode transaction value: %w", err)
	}
	if v.Version < 0 || v.Version > maxValueVersion {
		return metadata{}, fmt.Errorf("transaction value version %d: %w", v.Version, ErrUnknownRecord)
	}
	md := metadata{producerID: v.ProducerID, lastProducerID: noProducerID, producerEpoch: v.ProducerEpoch,
		lastProducerEpoch: noProducerEpoch, timeoutMs: v.TimeoutMillis, state: State(v.State),
		partitions: map[TopicPartition]struct{}{}, startTimestamp: v.StartTimestamp,
		lastUpdateTimestamp: v.LastUpdateTimestamp, nextProducerID: noProducerID}
	if v.Version >= 1 {
		md.lastProducerID, md.nextProducerID, md.tv2 = v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion >= 2
	}
	switch md.state {
	case Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead:
	case PrepareEpochFence:
		md.state = PrepareAbort
	default:
		return metadata{}, fmt.Errorf("transaction value with state %d", v.State)
	}
	if md.state != Empty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				md.partitions[TopicPartition{Topic: t.Topic, Partition: p}] = struct{}{}
			}
		}
	}
	return md, nil
}

// Replay applies one record of the partition while loading (Kafka's
// loadTransactionsForTxnTopicPartition): the last value of an id wins, a
// tombstone (nil value) or a Dead value removes it. Records of unknown key
// versions are skipped; an undecodable record is an error and changes
// nothing. Replay must not be called after FinishLoad.
func (m *Manager) Replay(key, value []byte) error {
	id, err := DecodeKey(key)
	if errors.Is(err, ErrUnknownRecord) {
		return nil
	}
	if err != nil {
		return err
	}
	if !m.loading {
		return fmt.Errorf("replay %q: %w", id, ErrLoaded)
	}
	if value == nil {
		delete(m.txns, id)
		return nil
	}
	md, err := decodeValue(value)
	if err != nil {
		return fmt.Errorf("replay %q: %w", id, err)
	}
	if md.state == Dead {
		delete(m.txns, id)
		return nil
	}
	m.txns[id] = &txnEntry{id: id, metadata: md}
	return nil
}

// FinishLoad ends loading: requests are served from now on, and every
// transaction found in PrepareCommit or PrepareAbort gets its marker job
// (Kafka resends the markers of such transactions on load, then writes the
// Complete record).
func (m *Manager) FinishLoad(now int64) Effects {
	if !m.loading {
		return Effects{}
	}
	m.loading = false
	m.nextAbortCheck = now + m.cfg.AbortCheckIntervalMs
	m.nextExpireCheck = now + m.cfg.ExpireCheckIntervalMs
	var eff Effects
	for _, id := range m.sortedIDs() {
		t := m.txns[id]
		if t.state == PrepareCommit || t.state == PrepareAbort {
			eff.Markers = append(eff.Markers, m.startMarkers(t))
		}
	}
	return eff
}
