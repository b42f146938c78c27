package broker

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// Idempotent producer state (KIP-98), Kafka's ProducerStateManager: per
// partition and producer id, the producer's epoch and its last five
// batches (first and last sequence, first and last offset). A batch is
//
//   - a duplicate when a remembered batch of the same epoch has its exact
//     sequence range: it is acknowledged with the original offsets and not
//     appended again;
//   - fenced (INVALID_PRODUCER_EPOCH) when its epoch is older than the
//     producer's;
//   - out of order (OUT_OF_ORDER_SEQUENCE_NUMBER) when its first sequence
//     does not follow the last one (with a wrap from int32 max to 0), or
//     when a new epoch does not start at sequence 0.
//
// A producer the partition has no state for (new, or whose batches were
// all deleted) may start at any sequence, as Kafka accepts since KIP-360.
// The state is not snapshotted: the log itself is its persistent form, and
// a partition rebuilds it from its batch headers the first time an
// idempotent batch arrives after the broker started (a scan of 61 bytes
// per batch). Producers are never expired yet (producer.id.expiration.ms).

// producerBatchesKept is Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN.
const producerBatchesKept = 5

// producerBatch is what a partition remembers of one appended batch.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	logAppendTime           int64 // -1 with CreateTime
}

// producerEntry is one producer's state in one partition.
type producerEntry struct {
	epoch   int16
	batches []producerBatch // oldest first, at most producerBatchesKept
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return record.NoSequence
	}
	return e.batches[len(e.batches)-1].lastSeq
}

func (e *producerEntry) add(b producerBatch) {
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, b)
}

// producerState is a partition's idempotent producer state.
//
// Concurrency: owned by the partition's producerMu, which is held across
// check, the append and update, so that the sequence checked is the
// sequence appended.
type producerState struct {
	producers map[int64]*producerEntry
}

// inSequence is Kafka's ProducerStateEntry/ProducerAppendInfo.inSequence.
func inSequence(last, next int32) bool {
	return next == last+1 || (next == 0 && last == math.MaxInt32)
}

// check validates every producer batch of a record set against the state
// without changing it. It returns the first duplicate batch found (the
// set must then be acknowledged with its offsets, not appended), or an
// error code and message.
func (s *producerState) check(batches []byte) (dup *producerBatch, code int16, msg string) {
	type view struct {
		epoch int16
		last  int32
		known bool
	}
	pending := map[int64]view{}
	for pos := 0; pos < len(batches); {
		h, err := record.ParseHeader(batches[pos:])
		if err != nil {
			return nil, kerr.CorruptMessage.Code, err.Error()
		}
		pos += h.Size()
		if !h.HasProducerID() {
			continue
		}
		v, seen := pending[h.ProducerID]
		e := s.producers[h.ProducerID]
		if !seen {
			if e != nil {
				v = view{epoch: e.epoch, last: e.lastSeq(), known: true}
			}
		}
		if e != nil && h.ProducerEpoch == e.epoch {
			for i := range e.batches {
				if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == h.LastSequence() {
					return b, 0, ""
				}
			}
		}
		switch {
		case v.known && h.ProducerEpoch < v.epoch:
			return nil, kerr.InvalidProducerEpoch.Code, fmt.Sprintf("producer %d epoch %d is older than the current %d", h.ProducerID, h.ProducerEpoch, v.epoch)
		case v.known && h.ProducerEpoch > v.epoch:
			if h.BaseSequence != 0 {
				return nil, kerr.OutOfOrderSequenceNumber.Code, fmt.Sprintf("producer %d: the new epoch %d starts at sequence %d, not 0", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
			}
		case v.known && v.last != record.NoSequence && !inSequence(v.last, h.BaseSequence):
			return nil, kerr.OutOfOrderSequenceNumber.Code, fmt.Sprintf("producer %d: sequence %d after %d", h.ProducerID, h.BaseSequence, v.last)
		}
		pending[h.ProducerID] = view{epoch: h.ProducerEpoch, last: h.LastSequence(), known: true}
	}
	return nil, 0, ""
}

// update records the producer batches of a record set that was just
// appended (its base offsets are the assigned ones).
func (s *producerState) update(batches []byte, logAppendTime int64) {
	for pos := 0; pos < len(batches); {
		h, err := record.ParseHeader(batches[pos:])
		if err != nil {
			return
		}
		pos += h.Size()
		s.apply(&h, logAppendTime)
	}
}

// apply adds one batch to the state.
func (s *producerState) apply(h *record.BatchHeader, logAppendTime int64) {
	if !h.HasProducerID() || h.IsControl() {
		return
	}
	e := s.producers[h.ProducerID]
	if e == nil || h.ProducerEpoch != e.epoch {
		e = &producerEntry{epoch: h.ProducerEpoch}
		s.producers[h.ProducerID] = e
	}
	e.add(producerBatch{
		firstSeq: h.BaseSequence, lastSeq: h.LastSequence(),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(), logAppendTime: logAppendTime,
	})
}

// loadProducerState rebuilds a partition's producer state from the batch
// headers of its log, from the log start offset to the log end offset.
func loadProducerState(l *storage.Log) (*producerState, error) {
	s := &producerState{producers: map[int64]*producerEntry{}}
	offset, end := l.LogStartOffset(), l.LogEndOffset()
	hdr := make([]byte, record.HeaderSize)
	for offset < end {
		info, err := l.Read(offset, math.MaxInt32, end, true)
		if err != nil {
			return nil, fmt.Errorf("rebuild producer state of %s: %w", l.TopicPartition(), err)
		}
		if len(info.Regions) == 0 {
			break
		}
		for _, r := range info.Regions {
			for pos := r.Position; pos < r.Position+r.Length; {
				if _, err := r.File.ReadAt(hdr, pos); err != nil {
					return nil, fmt.Errorf("rebuild producer state of %s: %w", l.TopicPartition(), err)
				}
				h, err := record.ParseHeader(hdr)
				if err != nil {
					return nil, fmt.Errorf("rebuild producer state of %s at byte %d: %w", l.TopicPartition(), pos, err)
				}
				logAppendTime := int64(-1)
				if h.TimestampType() == record.LogAppendTime {
					logAppendTime = h.MaxTimestamp
				}
				s.apply(&h, logAppendTime)
				pos += int64(h.Size())
				offset = h.NextOffset()
			}
		}
	}
	return s, nil
}
