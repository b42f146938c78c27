package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/keelstream/keel/network/record"
	"github.com/twmb/franz-go/pkg/kerr"
)

// What a leader refuses from a producer, with the Kafka error code the
// producer gets (checked against franz-go's table of Kafka codes), and the
// guarantee that a refused record set leaves the log untouched.

// goodBatch is a valid uncompressed 3-record producer batch.
func goodBatch(t *testing.T) []byte {
	return buildBatch(t, record.CompressionNone, tsRange(t0, 3), 20)
}

// edit returns a copy of b changed by f, with the CRC recomputed so only the
// intended inconsistency remains.
func edit(b []byte, f func(b []byte)) []byte {
	b = slices.Clone(b)
	f(b)
	return resign(b)
}

// legacyMessage is a magic-1 message set entry (Kafka 0.10 format), which
// producers using produce v2 and below sent.
func legacyMessage(value []byte) []byte {
	body := []byte{1, 0}                                   // magic 1, attributes
	body = binary.BigEndian.AppendUint64(body, uint64(t0)) // timestamp
	body = binary.BigEndian.AppendUint32(body, ^uint32(0)) // null key
	body = binary.BigEndian.AppendUint32(body, uint32(len(value)))
	body = append(body, value...)
	m := binary.BigEndian.AppendUint64(nil, 0)
	m = binary.BigEndian.AppendUint32(m, uint32(4+len(body)))
	m = binary.BigEndian.AppendUint32(m, crc32.ChecksumIEEE(body))
	return append(m, body...)
}

func setRecordCount(count, lastOffsetDelta uint32) func([]byte) {
	return func(b []byte) {
		binary.BigEndian.PutUint32(b[57:], count)
		binary.BigEndian.PutUint32(b[23:], lastOffsetDelta)
	}
}

func TestAppendRejectsBadInputAndAppendsNothing(t *testing.T) {
	control, err := record.BuildControlBatch(nil, record.ControlCommit, 0, 7, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	big := buildBatch(t, record.CompressionNone, tsRange(t0, 20), 100) // ~2.5 KB
	for _, tc := range []struct {
		name    string
		cfg     LogConfig
		batches []byte
		want    *kerr.Error
	}{
		{"a wrong CRC is CORRUPT_MESSAGE", LogConfig{},
			func() []byte { b := goodBatch(t); b[len(b)-3] ^= 0x40; return b }(), kerr.CorruptMessage},
		// Kafka 4 answers INVALID_RECORD (87) here: produce v3+ (the only
		// versions Kafka 4 accepts, KIP-896) must carry magic-2 batches, and
		// ProduceRequest.validateRecords throws InvalidRecordException.
		{"a legacy magic-1 message is INVALID_RECORD", LogConfig{},
			legacyMessage(bytes.Repeat([]byte{'v'}, 100)), kerr.InvalidRecord},
		{"a v2 batch carrying magic 1 is INVALID_RECORD", LogConfig{},
			func() []byte { b := goodBatch(t); b[16] = 1; return b }(), kerr.InvalidRecord},
		{"a record count above the records present is INVALID_RECORD", LogConfig{},
			edit(goodBatch(t), setRecordCount(4, 3)), kerr.InvalidRecord},
		{"a record count below the records present is INVALID_RECORD", LogConfig{},
			edit(goodBatch(t), setRecordCount(2, 1)), kerr.InvalidRecord},
		{"a record count disagreeing with the last offset delta is INVALID_RECORD", LogConfig{},
			edit(goodBatch(t), setRecordCount(3, 4)), kerr.InvalidRecord},
		{"a record length disagreeing with the record is INVALID_RECORD", LogConfig{},
			edit(goodBatch(t), func(b []byte) { b[record.HeaderSize] += 2 }), kerr.InvalidRecord}, // zigzag varint: +1
		{"a batch with no records is INVALID_RECORD", LogConfig{},
			func() []byte {
				b := slices.Clone(goodBatch(t)[:record.HeaderSize])
				binary.BigEndian.PutUint32(b[8:], record.HeaderSize-record.LogOverhead)
				setRecordCount(0, 0)(b)
				return resign(b)
			}(), kerr.InvalidRecord},
		// Kafka's batch iterator finds no whole batch here and answers
		// INVALID_RECORD; Keel reports the truncation as CORRUPT_MESSAGE.
		{"a batch length beyond the bytes sent is CORRUPT_MESSAGE", LogConfig{},
			edit(goodBatch(t), func(b []byte) { binary.BigEndian.PutUint32(b[8:], binary.BigEndian.Uint32(b[8:])+10) }), kerr.CorruptMessage},
		{"an unknown compression codec is UNSUPPORTED_COMPRESSION_TYPE", LogConfig{},
			edit(goodBatch(t), func(b []byte) { b[22] |= 6 }), kerr.UnsupportedCompressionType},
		{"a batch above max.message.bytes is MESSAGE_TOO_LARGE", LogConfig{MaxMessageBytes: 2000},
			big, kerr.MessageTooLarge},
		{"a record set above segment.bytes is RECORD_LIST_TOO_LARGE", LogConfig{SegmentBytes: 6000},
			bytes.Repeat(big, 3), kerr.RecordListTooLarge},
		{"a good batch followed by a corrupt one appends neither", LogConfig{},
			append(goodBatch(t), func() []byte { b := goodBatch(t); b[70] ^= 1; return b }()...), kerr.CorruptMessage},
		{"a good batch followed by an inconsistent one appends neither", LogConfig{},
			append(goodBatch(t), edit(goodBatch(t), setRecordCount(9, 8))...), kerr.InvalidRecord},
		{"a control batch from a client is INVALID_RECORD", LogConfig{},
			control, kerr.InvalidRecord},
		{"an empty record set is INVALID_RECORD", LogConfig{}, []byte{}, kerr.InvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openTestLog(t, partitionDir(t), OpenOptions{Config: tc.cfg})
			appendOK(t, l, goodBatch(t), 0)
			path := segmentLogPaths(t, l.Dir())[0]
			before, _ := os.Stat(path)
			leo := l.LogEndOffset()

			_, err := l.AppendAsLeader(tc.batches, AppendOptions{LeaderEpoch: 1})
			if got := ErrorCode(err); got != tc.want.Code {
				t.Fatalf("code %d (%v), want %d %s", got, err, tc.want.Code, tc.want.Message)
			}
			after, _ := os.Stat(path)
			if l.LogEndOffset() != leo || after.Size() != before.Size() || l.NumSegments() != 1 {
				t.Fatalf("refused append changed the log: LEO %d -> %d, file %d -> %d bytes, %d segments",
					leo, l.LogEndOffset(), before.Size(), after.Size(), l.NumSegments())
			}
			if got := l.LeaderEpochCache().Entries(); !slices.Equal(got, []EpochEntry{{0, 0}}) {
				t.Fatalf("refused append changed the epoch cache: %v", got)
			}
			checkLogInvariants(t, l)
		})
	}
}

func TestControlBatchFromTheCoordinatorIsAppended(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	control, err := record.BuildControlBatch(nil, record.ControlAbort, 3, 7, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.AppendAsLeader(control, AppendOptions{LeaderEpoch: 0, FromCoordinator: true})
	if err != nil || info.FirstOffset != 0 || l.LogEndOffset() != 1 {
		t.Fatalf("append: %+v, %v", info, err)
	}
	if hs := batchHeaders(t, readAll(t, l, 0, 1)); !hs[0].IsControl() {
		t.Fatal("stored batch lost its control bit")
	}
}

// gzipBomb returns a gzip stream of size bytes of zeros made of 1 MiB
// members, without ever holding size bytes.
func gzipBomb(t *testing.T, size int) []byte {
	t.Helper()
	var member bytes.Buffer
	w, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if _, err := w.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(member.Bytes(), size>>20)
}

// gzipValidBomb returns the records of a batch of n valid records, each a
// value of 1 MiB of zeros, gzipped (about 1 KiB a record), and the
// batch's record count.
func gzipValidBomb(t *testing.T, n int) ([]byte, int32) {
	t.Helper()
	const value = 1 << 20
	var out bytes.Buffer
	w, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	zeros := make([]byte, value)
	for i := range n {
		var rec []byte
		rec = append(rec, 0)                         // attributes
		rec = binary.AppendVarint(rec, 0)            // timestamp delta
		rec = binary.AppendVarint(rec, int64(i))     // offset delta
		rec = binary.AppendVarint(rec, -1)           // null key
		rec = binary.AppendVarint(rec, int64(value)) // value length
		length := int64(len(rec) + value + 1)        // + the header count
		head := binary.AppendVarint(nil, length)
		for _, p := range [][]byte{head, rec, zeros, {0}} { // {0}: no headers
			if _, err := w.Write(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), int32(n)
}

// A decompression bomb costs the leader little and never reaches the log:
// zeros are refused at their first record (the walk sees the records as
// they inflate), and valid records inflating past the bound, max(64 MiB,
// 16 x max.message.bytes), are refused at the bound.
func TestAppendRefusesAGzipBombWithoutInflatingIt(t *testing.T) {
	valid, count := gzipValidBomb(t, 1024)
	for _, bomb := range []struct {
		name    string
		records []byte
		count   int32
		want    error
		budget  uint64
	}{
		// 1 GiB of zeros in about 1 MiB of gzip.
		{"zeros", gzipBomb(t, 1<<30), 10, record.ErrInvalidRecord, 16 << 20},
		// 1 GiB of valid records in about 1 MiB of gzip.
		{"valid records", valid, count, record.ErrDecompressedTooLarge, 256 << 20},
	} {
		t.Run(bomb.name, func(t *testing.T) {
			b := slices.Clone(buildBatch(t, record.CompressionGzip, tsRange(t0, 1), 10)[:record.HeaderSize])
			b = append(b, bomb.records...)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
			binary.BigEndian.PutUint32(b[23:], uint32(bomb.count-1)) // last offset delta
			binary.BigEndian.PutUint32(b[57:], uint32(bomb.count))   // record count
			resign(b)
			l := openTestLog(t, partitionDir(t), OpenOptions{Config: LogConfig{MaxMessageBytes: 2 << 20}})

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := l.AppendAsLeader(b, AppendOptions{})
			runtime.ReadMemStats(&after)

			if !errors.Is(err, bomb.want) || ErrorCode(err) != kerr.InvalidRecord.Code {
				t.Fatalf("err %v (code %d), want INVALID_RECORD (%v)", err, ErrorCode(err), bomb.want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bomb.budget {
				t.Fatalf("validating the bomb allocated %d MiB", alloc>>20)
			}
			t.Logf("%s: %v; %d KiB allocated", bomb.name, err, (after.TotalAlloc-before.TotalAlloc)>>10)
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("bomb appended: LEO %d size %d", l.LogEndOffset(), l.Size())
			}
		})
	}
}
