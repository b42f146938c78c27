package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/keelstream/keel/network/record"
)

// A randomized model test: seeded random sequences of appends, rolls,
// truncations, DeleteRecords + retention, high-watermark moves and
// reopens (clean, unclean, crash snapshot) run against a Log and against an
// in-memory model (a slice of batches with offsets). After every operation
// the log's observable answers must match the model's. The same seed runs
// under several segment.bytes and index.interval.bytes settings; the
// observable transcript must be identical across them (metamorphic: segment
// layout and index density are invisible to clients).
//
// Reproduce a failure with KEEL_MODEL_SEED=<seed>; KEEL_LONG=1 runs more
// seeds and longer sequences.

type modelRecord struct {
	offset, ts int64
}

type modelBatch struct {
	bytes      []byte // as the log stored them
	base, next int64
	epoch      int32
	records    []modelRecord
}

// logModel is what a client can observe of a partition log.
type logModel struct {
	batches       []modelBatch // every batch not truncated, including those below the log start
	lso, hw, leo  int64
	epochs        []EpochEntry
	maxTS         int64 // the largest timestamp ever generated: each batch exceeds it
	epoch         int32 // the epoch the next append is written in
	recoveryPoint int64 // a lower bound of the log's, for unclean reopens
}

// containing returns the index of the first batch whose last offset is >=
// offset, or len(batches).
func (m *logModel) containing(offset int64) int {
	return sort64(len(m.batches), func(i int) bool { return m.batches[i].next > offset })
}

func sort64(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if !f(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (m *logModel) epochAt(offset int64) int32 {
	epoch := int32(-1)
	for _, e := range m.epochs {
		if e.StartOffset <= offset {
			epoch = e.Epoch
		}
	}
	return epoch
}

// assignEpoch is Kafka's LeaderEpochFileCache.assign for a new latest
// epoch: entries it contradicts (a start at or after its start; an entry
// left at the log end by truncateEpochsFromStart) go first.
func (m *logModel) assignEpoch(epoch int32, start int64) {
	for len(m.epochs) > 0 && (m.epochs[len(m.epochs)-1].Epoch >= epoch || m.epochs[len(m.epochs)-1].StartOffset >= start) {
		m.epochs = m.epochs[:len(m.epochs)-1]
	}
	m.epochs = append(m.epochs, EpochEntry{epoch, start})
}

// reopened applies what loading a log does to its epoch cache: entries
// starting at or after the log end go (Kafka's truncateFromEnd on load),
// and the cache starts at the log start.
func (m *logModel) reopened() {
	m.truncateEpochsFromEnd(m.leo)
	m.truncateEpochsFromStart(m.lso)
}

func (m *logModel) truncateEpochsFromEnd(end int64) {
	for len(m.epochs) > 0 && m.epochs[len(m.epochs)-1].StartOffset >= end {
		m.epochs = m.epochs[:len(m.epochs)-1]
	}
}

func (m *logModel) truncateEpochsFromStart(start int64) {
	removed := 0
	for removed < len(m.epochs) && m.epochs[removed].StartOffset <= start {
		removed++
	}
	if removed == 0 {
		return
	}
	rest := slices.Clone(m.epochs[removed:])
	m.epochs = append([]EpochEntry{{m.epochs[removed-1].Epoch, start}}, rest...)
}

// truncateTo drops whole batches from the one holding offset, as a
// follower truncation does. At or past the log end no batch goes, but an
// epoch starting at the log end does (Kafka's UnifiedLog.truncateTo).
func (m *logModel) truncateTo(offset int64) {
	if offset >= m.leo {
		m.truncateEpochsFromEnd(m.leo)
		return
	}
	i := m.containing(offset)
	if i < len(m.batches) {
		m.leo = m.batches[i].base
	}
	m.batches = m.batches[:i]
	m.lso = min(m.lso, m.leo)
	m.hw = min(m.hw, m.leo)
	m.recoveryPoint = min(m.recoveryPoint, m.leo)
	m.truncateEpochsFromEnd(m.leo)
}

// firstAtOrAfter is ListOffsets by timestamp: the first record at or after
// the log start whose timestamp is >= ts.
func (m *logModel) firstAtOrAfter(ts int64) OffsetAndTimestamp {
	for _, b := range m.batches[m.containing(m.lso):] {
		for _, r := range b.records {
			if r.offset >= m.lso && r.ts >= ts {
				return OffsetAndTimestamp{Offset: r.offset, Timestamp: r.ts, LeaderEpoch: b.epoch}
			}
		}
	}
	return OffsetAndTimestamp{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
}

// maxTimestamp is ListOffsets -3: the first record holding the largest
// timestamp. Batch maxima strictly increase, so it is in the last batch.
func (m *logModel) maxTimestamp() OffsetAndTimestamp {
	b := m.batches[len(m.batches)-1]
	best := b.records[0]
	for _, r := range b.records {
		if r.ts > best.ts {
			best = r
		}
	}
	return OffsetAndTimestamp{Offset: best.offset, Timestamp: best.ts, LeaderEpoch: b.epoch}
}

type modelConfig struct {
	segmentBytes  int64
	indexInterval int
}

func (c modelConfig) String() string {
	return fmt.Sprintf("segment.bytes=%d,index.interval.bytes=%d", c.segmentBytes, c.indexInterval)
}

// modelConfigs is every combination the metamorphic comparison runs.
func modelConfigs() []modelConfig {
	var out []modelConfig
	for _, sb := range []int64{1 << 10, 16 << 10, 1 << 20} {
		for _, ii := range []int{1, 100, 4096} {
			out = append(out, modelConfig{sb, ii})
		}
	}
	return out
}

func TestLogMatchesModelUnderEveryConfig(t *testing.T) {
	seeds, ops := []uint64{1, 2}, 220
	if os.Getenv("KEEL_LONG") != "" {
		seeds, ops = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 1000
	}
	if s := os.Getenv("KEEL_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KEEL_MODEL_SEED=%q: %v", s, err)
		}
		seeds = []uint64{seed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			var ref []string
			var refCfg modelConfig
			for _, cfg := range modelConfigs() {
				transcript := runModel(t, seed, ops, cfg)
				if ref == nil {
					ref, refCfg = transcript, cfg
					continue
				}
				for i := range max(len(ref), len(transcript)) {
					a, b := "<end>", "<end>"
					if i < len(ref) {
						a = ref[i]
					}
					if i < len(transcript) {
						b = transcript[i]
					}
					if a != b {
						t.Fatalf("seed %d: %v and %v diverge at observation %d:\n  %s\n  %s", seed, refCfg, cfg, i, a, b)
					}
				}
			}
		})
	}
}

// runModel runs one seeded operation sequence against a log with cfg and
// returns the transcript of observations. The random stream depends only on
// the seed and the model, never on the log, so every config sees the same
// operations.
func runModel(t *testing.T, seed uint64, ops int, mc modelConfig) []string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cfg := LogConfig{
		SegmentBytes:       mc.segmentBytes,
		IndexIntervalBytes: mc.indexInterval,
		// Small indexes keep crash reopens cheap: recovering a segment
		// zero-fills its whole preallocated index through the mapping
		// (20 MiB of dirty pages per segment at the 10 MiB default).
		SegmentIndexBytes: 64 << 10,
		SegmentMs:         math.MaxInt64,
		RetentionMs:       -1,
		RetentionBytes:    -1,
	}
	clock := newFakeClock()
	dir := partitionDir(t)
	open := func(opts OpenOptions) *Log {
		opts.Config, opts.Now = cfg, clock.Now
		l, err := OpenLog(dir, opts)
		if err != nil {
			t.Fatalf("seed %d %v: open: %v", seed, mc, err)
		}
		return l
	}
	l := open(OpenOptions{})
	defer func() { l.Close() }()
	m := &logModel{maxTS: t0}
	var transcript []string
	var op string
	step := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d %v, op %d (%s): %s", seed, mc, step, op, fmt.Sprintf(format, args...))
	}
	observe := func(format string, args ...any) {
		transcript = append(transcript, fmt.Sprintf("%d %s: ", step, op)+fmt.Sprintf(format, args...))
	}

	for step = range ops {
		switch p := rng.IntN(100); {
		case p < 48:
			set, batches := modelBatches(t, rng, m)
			op = fmt.Sprintf("append %d batches, %d bytes, epoch %d", len(batches), len(set), m.epoch)
			info, err := l.AppendAsLeader(set, AppendOptions{LeaderEpoch: m.epoch})
			if err != nil {
				fail("%v", err)
			}
			first := m.leo
			for i := range batches {
				b := &batches[i]
				b.bytes = set[:len(b.bytes)]
				set = set[len(b.bytes):]
				b.base, b.next, b.epoch = m.leo, m.leo+int64(len(b.records)), m.epoch
				for j := range b.records {
					b.records[j].offset = b.base + int64(j)
				}
				m.leo = b.next
			}
			m.batches = append(m.batches, batches...)
			if len(m.epochs) == 0 || m.epoch > m.epochs[len(m.epochs)-1].Epoch {
				m.assignEpoch(m.epoch, first)
			}
			if info.FirstOffset != first || info.LastOffset != m.leo-1 {
				fail("appended at %d..%d, model %d..%d", info.FirstOffset, info.LastOffset, first, m.leo-1)
			}
		case p < 53:
			op = "roll"
			if err := l.Roll(); err != nil {
				fail("%v", err)
			}
		case p < 61:
			target := m.lso + rng.Int64N(m.leo-m.lso+1)
			if i := m.containing(target); rng.IntN(2) == 0 && i < len(m.batches) {
				target = max(m.batches[i].base, m.lso) // a batch boundary, as KIP-101 truncation uses
			}
			op = fmt.Sprintf("truncate to %d", target)
			if err := l.TruncateTo(target); err != nil {
				fail("%v", err)
			}
			m.truncateTo(target)
		case p < 71:
			m.hw = m.lso + rng.Int64N(m.leo-m.lso+1)
			op = fmt.Sprintf("set high watermark %d", m.hw)
			l.SetHighWatermark(m.hw)
		case p < 79:
			target := m.lso + rng.Int64N(m.hw-m.lso+1)
			op = fmt.Sprintf("delete records before %d, then retention", target)
			if err := l.IncrementLogStartOffset(target); err != nil {
				fail("%v", err)
			}
			if _, err := l.DeleteOldSegments(); err != nil {
				fail("retention: %v", err)
			}
			if target > m.lso {
				m.lso = target
				m.truncateEpochsFromStart(target)
			}
		case p < 81:
			target := m.leo + rng.Int64N(50)
			op = fmt.Sprintf("truncate fully and start at %d", target)
			if err := l.TruncateFullyAndStartAt(target); err != nil {
				fail("%v", err)
			}
			m.batches, m.epochs = nil, nil
			m.lso, m.hw, m.leo, m.recoveryPoint = target, target, target, target
		case p < 83:
			op = "flush"
			if err := l.Flush(); err != nil {
				fail("%v", err)
			}
			m.recoveryPoint = m.leo
		case p < 85:
			op = "sync"
			if err := l.Sync(); err != nil {
				fail("%v", err)
			}
			if d, rp := l.DurableOffset(), l.RecoveryPoint(); d != m.leo || rp > d {
				fail("durable offset %d, recovery point %d, model log end %d", d, rp, m.leo)
			}
		case p < 88:
			op = "close, clean reopen"
			rp := l.RecoveryPoint()
			if err := l.Close(); err != nil {
				fail("%v", err)
			}
			l = open(OpenOptions{CleanShutdown: true, RecoveryPoint: rp, LogStartOffset: m.lso, HighWatermark: m.hw})
			m.reopened()
		case p < 91:
			rp := m.recoveryPoint - rng.Int64N(m.recoveryPoint+1)
			op = fmt.Sprintf("close, unclean reopen from %d", rp)
			if err := l.Close(); err != nil {
				fail("%v", err)
			}
			l = open(OpenOptions{RecoveryPoint: rp, LogStartOffset: m.lso, HighWatermark: m.hw})
			m.reopened()
		default:
			op = "crash (snapshot the open files), reopen"
			crashed := filepath.Join(t.TempDir(), "t-0")
			copyDir(t, dir, crashed)
			if err := l.Close(); err != nil {
				fail("%v", err)
			}
			dir = crashed
			l = open(OpenOptions{RecoveryPoint: m.recoveryPoint, LogStartOffset: m.lso, HighWatermark: m.hw})
			m.reopened()
		}
		checkAgainstModel(t, l, m, rng, fail, observe)
		if step%10 == 0 {
			checkLogInvariants(t, l)
		}
	}
	checkLogInvariants(t, l)
	return transcript
}

// modelBatches draws one record set (one batch, sometimes two) whose
// batches' max timestamps exceed every earlier one, small enough for the
// smallest segment.bytes.
func modelBatches(t *testing.T, rng *rand.Rand, m *logModel) ([]byte, []modelBatch) {
	if rng.IntN(10) == 0 {
		m.epoch += 1 + int32(rng.IntN(2))
	}
	var set []byte
	var out []modelBatch
	for range 1 + rng.IntN(2) {
		n := 1 + rng.IntN(8)
		opts := record.DefaultBatchOptions()
		opts.Compression = allCodecs[rng.IntN(len(allCodecs))]
		bb := record.NewBatchBuilder(opts)
		newMax := m.maxTS + 1 + rng.Int64N(100)
		top := rng.IntN(n)
		var recs []modelRecord
		for i := range n {
			ts := newMax - rng.Int64N(300)
			if i == top {
				ts = newMax
			}
			var key, value []byte
			if rng.IntN(5) != 0 {
				key = randomBytes(rng, rng.IntN(10))
			}
			if rng.IntN(10) != 0 {
				value = randomBytes(rng, rng.IntN(60))
			}
			var headers []record.RecordHeader
			if rng.IntN(5) == 0 {
				headers = []record.RecordHeader{{Key: "h", Value: randomBytes(rng, rng.IntN(8))}}
			}
			bb.Append(ts, key, value, headers)
			recs = append(recs, modelRecord{ts: ts})
		}
		b, err := bb.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(set) > 0 && len(set)+len(b) > 1<<10 {
			break // the set must fit the smallest segment
		}
		m.maxTS = newMax
		set = append(set, b...)
		out = append(out, modelBatch{bytes: b, records: recs})
	}
	return set, out
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}

// checkAgainstModel compares everything a client can observe with the
// model and records it in the transcript.
func checkAgainstModel(t *testing.T, l *Log, m *logModel, rng *rand.Rand, fail, observe func(string, ...any)) {
	t.Helper()
	if l.LogStartOffset() != m.lso || l.LogEndOffset() != m.leo || l.HighWatermark() != m.hw {
		fail("log start/end/HW %d/%d/%d, model %d/%d/%d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), m.lso, m.leo, m.hw)
	}
	observe("start %d end %d hw %d", m.lso, m.leo, m.hw)
	if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, m.epochs) && !(len(got) == 0 && len(m.epochs) == 0) {
		fail("epoch cache %v, model %v", got, m.epochs)
	}
	observe("epochs %v", m.epochs)

	// ListOffsets.
	lookups := []struct {
		ts   int64
		want OffsetAndTimestamp
	}{
		{EarliestTimestamp, OffsetAndTimestamp{m.lso, -1, m.epochAt(m.lso)}},
		{LatestTimestamp, OffsetAndTimestamp{m.leo, -1, m.epochAt(m.leo)}},
	}
	if m.lso < m.leo {
		// With records at or above the log start the maximum is in the
		// last batch, which retention never deletes; below that, -3 (as in
		// Kafka) may name a retained record under the log start, which
		// depends on segment layout.
		lookups = append(lookups, struct {
			ts   int64
			want OffsetAndTimestamp
		}{MaxTimestamp, m.maxTimestamp()})
	}
	for range 3 {
		ts := t0 - 50 + rng.Int64N(m.maxTS-t0+100)
		lookups = append(lookups, struct {
			ts   int64
			want OffsetAndTimestamp
		}{ts, m.firstAtOrAfter(ts)})
	}
	for _, lk := range lookups {
		got, err := l.OffsetForTimestamp(lk.ts)
		if err != nil || got != lk.want {
			fail("OffsetForTimestamp(%d) = %+v (%v), model %+v", lk.ts, got, err, lk.want)
		}
		observe("list offsets %d: %+v", lk.ts, got)
	}

	// Reads at random offsets, mid-batch ones included, and just outside
	// the log.
	starts := []int64{m.lso - 1, m.lso, m.leo, m.leo + 1}
	for range 4 {
		starts = append(starts, m.lso+rng.Int64N(m.leo-m.lso+1))
	}
	for _, start := range starts {
		for _, upper := range []int64{math.MaxInt64, m.hw} {
			info, err := l.Read(start, 1, upper, true)
			if start < m.lso || start > m.leo {
				if !errors.Is(err, ErrOffsetOutOfRange) {
					fail("Read(%d) outside [%d, %d]: %v", start, m.lso, m.leo, err)
				}
				observe("read %d: out of range", start)
				continue
			}
			if err != nil {
				fail("Read(%d, upper %d): %v", start, upper, err)
			}
			var want []byte
			if i := m.containing(start); i < len(m.batches) && m.batches[i].next <= upper {
				want = m.batches[i].bytes
			}
			got := regionBytes(t, info.Regions)
			if !bytes.Equal(got, want) {
				fail("Read(%d, upper %d) = %d bytes, model %d", start, upper, len(got), len(want))
			}
			observe("read %d upper %d: %x", start, upper, crc(got))
		}
	}
	if info, err := l.Read(m.lso, 1, math.MaxInt64, false); err != nil || (info.Bytes != 0 && m.lso < m.leo) {
		fail("Read without minOneBatch and maxBytes 1 returned %d bytes, %v", info.Bytes, err)
	}

	// Everything from the log start, reading on across segments.
	var want []byte
	for _, b := range m.batches[m.containing(m.lso):] {
		want = append(want, b.bytes...)
	}
	if got := readAll(t, l, m.lso, m.leo); !bytes.Equal(got, want) {
		fail("reading from the log start gives %d bytes, model %d", len(got), len(want))
	}
	observe("all %x", crc(want))
}

func crc(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return record.ComputeCRC(append(make([]byte, 21), b...))
}
