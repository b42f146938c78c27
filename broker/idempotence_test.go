package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network/record"
)

// idempotentBatch is a batch of n records of producer pid/epoch starting at
// sequence seq.
func idempotentBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	return producerBatch(t, pid, epoch, seq, n, false)
}

// txnBatchOf is idempotentBatch's transactional batch.
func txnBatchOf(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	return producerBatch(t, pid, epoch, seq, n, true)
}

func producerBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, transactional bool) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, seq, transactional
	bb := record.NewBatchBuilder(opts)
	for i := 0; i < n; i++ {
		bb.Append(time.Now().UnixMilli(), nil, []byte("v"), nil)
	}
	b, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func initProducerID(t testing.TB, rc *rawClient) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	return roundTrip[*kmsg.InitProducerIDResponse](rc, req)
}

// TestInitProducerIDAllocatesBlocks: ids are distinct across block
// boundaries (blocks of 1000 from the controller), with epoch 0.
func TestInitProducerIDAllocatesBlocks(t *testing.T) {
	c := newTestCluster(t)
	rc := c.dialRaw(t)
	seen := map[int64]bool{}
	for i := 0; i < 1500; i++ {
		resp := initProducerID(t, rc)
		if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
			t.Fatalf("init %d: %v id %d epoch %d", i, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
		}
		seen[resp.ProducerID] = true
	}
	if next := c.meta.Image().NextProducerID(); next != 2000 {
		t.Fatalf("controller handed out up to %d, want two blocks", next)
	}
}

func TestIdempotentProduceSequences(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("idem", 1, nil)
	pid := initProducerID(t, c.dialRaw(t)).ProducerID
	leo := func() int64 { return c.broker.lookup(tp("idem", 0)).log.LogEndOffset() }
	send := func(epoch int16, seq int32, n int) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return c.produceRaw(t, "idem", 0, -1, time.Second, idempotentBatch(t, pid, epoch, seq, n))
	}
	steps := []struct {
		name       string
		epoch      int16
		seq        int32
		n          int
		wantCode   *kerr.Error
		wantOffset int64
		wantLEO    int64
	}{
		{"first batch", 0, 0, 3, nil, 0, 3},
		{"retry of the first batch is acknowledged, not appended", 0, 0, 3, nil, 0, 3},
		{"next batch", 0, 3, 2, nil, 3, 5},
		{"retry of an older batch", 0, 0, 3, nil, 0, 5},
		{"gap", 0, 9, 1, kerr.OutOfOrderSequenceNumber, -1, 5},
		{"overlap that is no retry", 0, 4, 2, kerr.OutOfOrderSequenceNumber, -1, 5},
		{"new epoch not at 0", 1, 5, 1, kerr.OutOfOrderSequenceNumber, -1, 5},
		{"new epoch at 0", 1, 0, 1, nil, 5, 6},
		{"old epoch fenced", 0, 5, 1, kerr.InvalidProducerEpoch, -1, 6},
	}
	for _, s := range steps {
		r := send(s.epoch, s.seq, s.n)
		want := int16(0)
		if s.wantCode != nil {
			want = s.wantCode.Code
		}
		if r.ErrorCode != want || (want == 0 && r.BaseOffset != s.wantOffset) || leo() != s.wantLEO {
			t.Fatalf("%s: %v offset %d leo %d, want %v offset %d leo %d", s.name, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, leo(), s.wantCode, s.wantOffset, s.wantLEO)
		}
	}

	// Only the last five batches are remembered: a retry of an older one
	// is out of order.
	for seq := int32(1); seq <= 5; seq++ {
		if r := send(1, seq, 1); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if r := send(1, 0, 1); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("retry of the sixth-newest batch: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// After a restart the state comes back from the log: the last batch
	// is still a duplicate, and the sequence goes on.
	c.restart()
	before := leo()
	if r := send(1, 5, 1); r.ErrorCode != 0 || r.BaseOffset != before-1 || leo() != before {
		t.Fatalf("retry after restart: %v offset %d leo %d (was %d)", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, leo(), before)
	}
	if r := send(1, 6, 1); r.ErrorCode != 0 || r.BaseOffset != before {
		t.Fatalf("next after restart: %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	if r := send(1, 9, 1); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap after restart: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
