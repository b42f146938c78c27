package broker

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// recordPolicy is the per-record part of Kafka's LogValidator that depends
// on topic configs: timestamps within message.timestamp.before.max.ms and
// message.timestamp.after.max.ms of the broker's clock (CreateTime topics,
// KIP-937), and keys on compacted topics. Immutable, part of
// partitionState.
type recordPolicy struct {
	// createTime is message.timestamp.type=CreateTime: only then are the
	// producer's timestamps checked (LogAppendTime overwrites them).
	createTime bool
	// beforeMaxMs and afterMaxMs bound how far a record timestamp may lag
	// or lead the broker's clock.
	beforeMaxMs, afterMaxMs int64
	// compacted is cleanup.policy containing "compact": every record needs
	// a key.
	compacted bool
	// recompress is a compression.type naming a codec (not "producer"):
	// batches in another codec are recompressed with compression, at
	// level (the topic's compression.<codec>.level, KIP-390).
	recompress  bool
	compression record.Compression
	level       int
}

// setCompression applies a topic's compression.type; level is the value
// of its compression.<codec>.level for that codec ("" for none).
func (rp *recordPolicy) setCompression(v string, level func(codec string) string) {
	c, err := record.ParseCompression(strings.TrimSpace(v))
	rp.recompress, rp.compression, rp.level = err == nil, c, record.DefaultLevel
	if rp.recompress {
		if n, err := strconv.Atoi(strings.TrimSpace(level(c.String()))); err == nil {
			rp.level = n
		}
	}
}

// recompressed returns batch (one validated batch) in the topic's codec
// when it is in another one, with changed true (Kafka's LogValidator
// recompresses when the topic's codec differs from the batch's).
func (rp recordPolicy) recompressed(batch []byte, maxUncompressed int) (out []byte, changed bool, err error) {
	if !rp.recompress {
		return batch, false, nil
	}
	h, err := record.ParseHeader(batch)
	if err != nil || h.Compression() == rp.compression {
		return batch, false, nil
	}
	out, _, err = record.Recompress(make([]byte, 0, len(batch)), batch, h, rp.compression, rp.level, nil, maxUncompressed)
	if err != nil {
		return nil, false, fmt.Errorf("compression.type %s: %w", rp.compression, err)
	}
	return out, true, nil
}

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: never range-checked.
const noTimestamp = -1

// maxRecordErrors bounds the record errors one partition's response lists.
const maxRecordErrors = 1000

// check applies the policy to batches that passed storage validation (info
// is their ValidatedBatches.Info) at broker time nowMs. When a record breaks
// it, check names every such record (a second pass, only then) and returns
// Kafka's code (INVALID_TIMESTAMP or INVALID_RECORD), message and
// record_errors (batch_index = the record's index in the batch).
func (rp recordPolicy) check(batches []byte, info storage.AppendInfo, nowMs int64) (int16, string, []kmsg.ProduceResponseTopicPartitionErrorRecord) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if rp.createTime {
		lo = nowMs - rp.beforeMaxMs // no overflow: both are >= 0
		if rp.afterMaxMs < math.MaxInt64-nowMs {
			hi = nowMs + rp.afterMaxMs
		}
	}
	badTime := rp.createTime && info.Records > 0 && (info.MinTimestamp < lo || info.MaxTimestamp > hi)
	badKey := rp.compacted && info.NullKeys > 0
	if !badTime && !badKey {
		return 0, "", nil
	}
	var errs []kmsg.ProduceResponseTopicPartitionErrorRecord
	add := func(i int32, msg string) {
		if len(errs) < maxRecordErrors {
			e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			e.RelativeOffset, e.ErrorMessage = i, kmsg.StringPtr(msg)
			errs = append(errs, e)
		}
	}
	code := kerr.InvalidRecord.Code
	var scratch []byte
	batchIndex := int32(0)
	it := record.NewBatches(batches)
	for b, h, ok := it.Next(); ok; b, h, ok = it.Next() {
		records := record.RecordsBytes(b)
		if c := h.Compression(); c != record.CompressionNone {
			var err error
			// Already decompressed once within this bound by validation.
			if scratch, err = record.Decompress(c, scratch[:0], records, math.MaxInt32); err != nil {
				return kerr.CorruptMessage.Code, err.Error(), nil
			}
			records = scratch
		}
		ri := record.NewRecordIterator(h, records)
		var r record.Record
		for ri.Next(&r) {
			// A record may break both rules: Kafka reports the key first.
			if rp.compacted && r.Key == nil {
				add(batchIndex, "Compacted topic cannot accept message without key.")
			} else if badTime && r.Timestamp != noTimestamp && (r.Timestamp < lo || r.Timestamp > hi) {
				code = kerr.InvalidTimestamp.Code
				add(batchIndex, fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]", r.Timestamp, r.OffsetDelta, lo, hi))
			}
			batchIndex++
		}
	}
	if len(errs) == 0 { // only NO_TIMESTAMP (-1) records were outside
		return 0, "", nil
	}
	shown := make([]string, 0, 3)
	for _, e := range errs[:min(3, len(errs))] {
		shown = append(shown, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.RelativeOffset, *e.ErrorMessage))
	}
	msg := fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]", len(errs), strings.Join(shown, ", "))
	return code, msg, errs
}
