package storage

import (
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

// BenchmarkAppendTransactional is a producer appending 16 KiB batches as
// leader (validated and appended, as in BenchmarkAppend's "log"), once as a
// plain idempotent producer and once as a transactional one whose
// transaction the coordinator ends with a COMMIT or ABORT marker every ten
// batches (alternating, so the aborted transaction index is written too).
// The difference is the transaction bookkeeping: opening a transaction,
// the markers (a validation of the control record on the request path and
// again under the log's lock, an append each) and the index entries.
//
//	go test -run '^$' -bench AppendTransactional -count 3 ./storage/
func BenchmarkAppendTransactional(b *testing.B) {
	const batchesPerTxn = 10
	for _, c := range []struct {
		name          string
		transactional bool
	}{
		{"idempotent", false},
		{"transactional-marker-every-10-batches", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			batch := benchProducerBatch(b, c.transactional)
			h, err := record.ParseHeader(batch)
			if err != nil {
				b.Fatal(err)
			}
			var seq int32
			var markerBuf []byte
			commit, err := record.BuildControlBatch(nil, record.ControlCommit, 0, 1, 0, time.Now().UnixMilli())
			if err != nil {
				b.Fatal(err)
			}
			abort, err := record.BuildControlBatch(nil, record.ControlAbort, 0, 1, 0, time.Now().UnixMilli())
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			benchAppendLoop(b, batch, openBenchLog(b, func(l *Log, buf []byte) error {
				record.SetProducerFields(buf, 1, 0, seq)
				seq += h.RecordCount
				if _, err := l.AppendAsLeader(buf, AppendOptions{}); err != nil {
					return err
				}
				if n++; c.transactional && n%batchesPerTxn == 0 {
					marker := commit
					if n%(2*batchesPerTxn) == 0 {
						marker = abort
					}
					markerBuf = append(markerBuf[:0], marker...)
					if _, err := l.AppendAsLeader(markerBuf, AppendOptions{FromCoordinator: true}); err != nil {
						return err
					}
				}
				return nil
			}))
		})
	}
}

// benchProducerBatch is bench16KiBBatch as an idempotent producer's batch,
// transactional or not (producer fields stamped per append).
func benchProducerBatch(b *testing.B, transactional bool) []byte {
	b.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 1, 0, 0, transactional
	bb := record.NewBatchBuilder(opts)
	value := make([]byte, 100)
	now := time.Now().UnixMilli()
	for i := 0; bb.UncompressedSize() < 16<<10-130; i++ {
		bb.Append(now+int64(i), nil, value, nil)
	}
	out, err := bb.Build(nil)
	if err != nil {
		b.Fatal(err)
	}
	return out
}
