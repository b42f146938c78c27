package network

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// fileRegion is the test stand-in for storage.FileRegion: a byte range of a
// file, sent with sendfile(2) to sockets and copied to anything else.
type fileRegion struct {
	f        *os.File
	pos, len int64
}

func (r fileRegion) Len() int64 { return r.len }

func (r fileRegion) WriteTo(w io.Writer) (int64, error) {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return io.Copy(w, io.NewSectionReader(r.f, r.pos, r.len))
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var sendErr error
	off, remaining := r.pos, r.len
	err = raw.Write(func(fd uintptr) bool {
		for remaining > 0 {
			n, err := unix.Sendfile(int(fd), int(r.f.Fd()), &off, int(remaining))
			if n > 0 {
				written += int64(n)
				remaining -= int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
				continue
			case err != nil:
				sendErr = err
				return true
			case n == 0:
				sendErr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if sendErr != nil {
		err = sendErr
	}
	return written, err
}

// regionBytes reads a region's bytes.
func regionBytes(t testing.TB, r Region) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// toKmsg builds the kmsg.FetchResponse equal to r, records inlined.
func toKmsg(t testing.TB, r *FetchResponse, version int16) *kmsg.FetchResponse {
	k := kmsg.NewPtrFetchResponse()
	k.Version = version
	k.ThrottleMillis, k.ErrorCode, k.SessionID = r.ThrottleMillis, r.ErrorCode, r.SessionID
	for _, t0 := range r.Topics {
		kt := kmsg.NewFetchResponseTopic()
		kt.Topic, kt.TopicID = t0.Topic, t0.TopicID
		for _, p := range t0.Partitions {
			kp := kmsg.NewFetchResponseTopicPartition()
			kp.Partition, kp.ErrorCode = p.Partition, p.ErrorCode
			kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
			kp.PreferredReadReplica = p.PreferredReadReplica
			if d := p.DivergingEpoch; d != nil {
				kp.DivergingEpoch.Epoch, kp.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
			}
			if l := p.CurrentLeader; l != nil {
				kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = l.LeaderID, l.LeaderEpoch
			}
			if s := p.SnapshotID; s != nil {
				kp.SnapshotID.EndOffset, kp.SnapshotID.Epoch = s.EndOffset, s.Epoch
			}
			if p.AbortedTransactions != nil {
				kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				for _, a := range p.AbortedTransactions {
					ka := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					ka.ProducerID, ka.FirstOffset = a.ProducerID, a.FirstOffset
					kp.AbortedTransactions = append(kp.AbortedTransactions, ka)
				}
			}
			if p.Records != nil {
				kp.RecordBatches = []byte{}
				for _, rg := range p.Records {
					kp.RecordBatches = append(kp.RecordBatches, regionBytes(t, rg)...)
				}
			}
			kt.Partitions = append(kt.Partitions, kp)
		}
		k.Topics = append(k.Topics, kt)
	}
	if version >= 16 {
		for _, n := range r.NodeEndpoints {
			kb := kmsg.NewFetchResponseBroker()
			kb.NodeID, kb.Host, kb.Port, kb.Rack = n.NodeID, n.Host, n.Port, n.Rack
			k.Brokers = append(k.Brokers, kb)
		}
	}
	return k
}

// checkEncoding encodes r at version both ways and compares the bytes.
func checkEncoding(t *testing.T, r *FetchResponse, version int16) {
	t.Helper()
	body := AcquireBody()
	defer ReleaseBody(body)
	if err := r.Encode(version, body); err != nil {
		t.Fatalf("v%d: Encode: %v", version, err)
	}
	var got bytes.Buffer
	n, err := body.WriteTo(&got)
	if err != nil {
		t.Fatalf("v%d: WriteTo: %v", version, err)
	}
	if n != body.Len() || int64(got.Len()) != body.Len() {
		t.Fatalf("v%d: wrote %d bytes, buffer has %d, Len says %d", version, n, got.Len(), body.Len())
	}
	want := toKmsg(t, r, version).AppendTo(nil)
	if !bytes.Equal(got.Bytes(), want) {
		at := 0
		for at < min(len(want), got.Len()) && want[at] == got.Bytes()[at] {
			at++
		}
		t.Fatalf("v%d: encoding differs from kmsg at byte %d (got %d bytes, want %d)\n got %x\nwant %x", version, at, got.Len(), len(want), got.Bytes(), want)
	}
	// And kmsg reads it back.
	back := kmsg.NewPtrFetchResponse()
	back.Version = version
	if err := back.ReadFrom(got.Bytes()); err != nil {
		t.Fatalf("v%d: kmsg cannot read the encoding back: %v", version, err)
	}
}

func testRecordFile(t testing.TB, size int) *os.File {
	f, err := os.CreateTemp(t.TempDir(), "segment")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f
}

func partition(id int32) FetchPartition {
	return FetchPartition{Partition: id, HighWatermark: 100 + int64(id), LastStableOffset: 90, LogStartOffset: 3, PreferredReadReplica: -1}
}

func TestFetchEncodeMatchesKmsg(t *testing.T) {
	f := testRecordFile(t, 64<<10)
	rack := "rack-a"
	manyTopics := func() *FetchResponse {
		r := &FetchResponse{ThrottleMillis: 7, SessionID: 99}
		for ti := range 5 {
			topic := FetchTopic{Topic: fmt.Sprintf("topic-%d", ti), TopicID: [16]byte{byte(ti), 1, 2, 3}}
			for pi := range 7 {
				p := partition(int32(pi))
				p.Records = []Region{fileRegion{f, int64(pi * 100), int64(pi * 37)}}
				topic.Partitions = append(topic.Partitions, p)
			}
			r.Topics = append(r.Topics, topic)
		}
		return r
	}
	cases := []struct {
		name string
		resp func() *FetchResponse
	}{
		{"no topics", func() *FetchResponse { return &FetchResponse{} }},
		{"session error", func() *FetchResponse {
			return &FetchResponse{ThrottleMillis: -1, ErrorCode: 70, SessionID: 1 << 30}
		}},
		{"topic without partitions", func() *FetchResponse {
			return &FetchResponse{Topics: []FetchTopic{{Topic: "empty", TopicID: [16]byte{9}}}}
		}},
		{"many topics and partitions", manyTopics},
		{"null records and empty records", func() *FetchResponse {
			p1, p2 := partition(0), partition(1)
			p1.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER, null records
			p2.Records = []Region{}
			return &FetchResponse{Topics: []FetchTopic{{Topic: "t", Partitions: []FetchPartition{p1, p2}}}}
		}},
		{"aborted transactions nil, empty and present", func() *FetchResponse {
			p1, p2, p3 := partition(0), partition(1), partition(2)
			p2.AbortedTransactions = []FetchAbortedTransaction{}
			p3.AbortedTransactions = []FetchAbortedTransaction{{ProducerID: 1, FirstOffset: 2}, {ProducerID: -5, FirstOffset: 1 << 40}}
			return &FetchResponse{Topics: []FetchTopic{{Topic: "t", Partitions: []FetchPartition{p1, p2, p3}}}}
		}},
		{"tagged fields present", func() *FetchResponse {
			p := partition(3)
			p.DivergingEpoch = &FetchEpochEndOffset{Epoch: 4, EndOffset: 77}
			p.CurrentLeader = &FetchLeader{LeaderID: 2, LeaderEpoch: 9}
			p.SnapshotID = &FetchSnapshotID{EndOffset: 1000, Epoch: 3}
			p.Records = []Region{BytesRegion("abc")}
			return &FetchResponse{Topics: []FetchTopic{{Topic: "t", Partitions: []FetchPartition{p}}}}
		}},
		{"tagged fields at their defaults are not written", func() *FetchResponse {
			p := partition(3)
			p.DivergingEpoch = &FetchEpochEndOffset{Epoch: -1, EndOffset: -1}
			p.CurrentLeader = &FetchLeader{LeaderID: -1, LeaderEpoch: -1}
			p.SnapshotID = &FetchSnapshotID{EndOffset: -1, Epoch: -1}
			return &FetchResponse{Topics: []FetchTopic{{Topic: "t", Partitions: []FetchPartition{p}}}}
		}},
		{"only the current leader tag", func() *FetchResponse {
			p := partition(0)
			p.ErrorCode = 6
			p.CurrentLeader = &FetchLeader{LeaderID: 3, LeaderEpoch: -1}
			return &FetchResponse{
				Topics:        []FetchTopic{{Topic: "t", Partitions: []FetchPartition{p}}},
				NodeEndpoints: []FetchNodeEndpoint{{NodeID: 3, Host: "broker-3.example", Port: 9092, Rack: &rack}, {NodeID: 4, Host: "h", Port: 1}},
			}
		}},
		{"records from several regions, in memory and in a file", func() *FetchResponse {
			p := partition(1)
			big := bytes.Repeat([]byte{0xab}, inlineRegionMax+1)
			p.Records = []Region{BytesRegion("head"), fileRegion{f, 10, 1000}, BytesRegion(big), fileRegion{f, 5000, 0}, fileRegion{f, 2000, 20000}, BytesRegion(nil)}
			return &FetchResponse{Topics: []FetchTopic{{Topic: "t", Partitions: []FetchPartition{p}}}}
		}},
		{"long names need multi-byte varints", func() *FetchResponse {
			p := partition(0)
			p.Records = []Region{fileRegion{f, 0, 300}}
			return &FetchResponse{
				Topics:        []FetchTopic{{Topic: strings.Repeat("x", 200), Partitions: []FetchPartition{p}}},
				NodeEndpoints: []FetchNodeEndpoint{{NodeID: 1, Host: strings.Repeat("h", 300), Port: 9092, Rack: &rack}},
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for v := MinFetchVersion; v <= MaxFetchVersion; v++ {
				checkEncoding(t, tc.resp(), v)
			}
		})
	}
}

func TestFetchEncodeKnowsKmsgMaxVersion(t *testing.T) {
	if got := (&kmsg.FetchResponse{}).MaxVersion(); got != MaxFetchVersion {
		t.Fatalf("kmsg's FetchResponse goes to v%d, the encoder to v%d: check the new version's fields and update MaxFetchVersion", got, MaxFetchVersion)
	}
}

func TestFetchEncodeRejectsWithoutTouchingBody(t *testing.T) {
	body := AcquireBody()
	body.AppendBytes([]byte("prefix"))
	for _, v := range []int16{-1, 0, 3, MaxFetchVersion + 1} {
		if err := (&FetchResponse{}).Encode(v, body); err == nil {
			t.Errorf("v%d encoded", v)
		}
	}
	huge := &FetchResponse{Topics: []FetchTopic{{Topic: "t", Partitions: []FetchPartition{{Records: []Region{fileRegion{len: 1 << 31}}}}}}}
	if err := huge.Encode(12, body); err == nil {
		t.Error("2 GiB of records encoded")
	}
	if body.Len() != 6 || len(body.parts) != 1 {
		t.Fatalf("failed Encode changed the body: %d bytes, %d parts", body.Len(), len(body.parts))
	}
}

// randomFetchResponse builds a random response exercising every field.
func randomFetchResponse(rng *rand.Rand, f *os.File) *FetchResponse {
	r := &FetchResponse{ThrottleMillis: rng.Int32(), ErrorCode: int16(rng.IntN(100)), SessionID: rng.Int32()}
	for range rng.IntN(4) {
		t := FetchTopic{Topic: strings.Repeat("t", rng.IntN(300))}
		for i := range t.TopicID {
			t.TopicID[i] = byte(rng.Uint32())
		}
		for range rng.IntN(5) {
			p := FetchPartition{
				Partition: rng.Int32(), ErrorCode: int16(rng.IntN(120)), HighWatermark: rng.Int64(),
				LastStableOffset: rng.Int64() - rng.Int64(), LogStartOffset: int64(rng.IntN(3)) - 1, PreferredReadReplica: int32(rng.IntN(5)) - 1,
			}
			if rng.IntN(3) == 0 {
				p.DivergingEpoch = &FetchEpochEndOffset{Epoch: int32(rng.IntN(3)) - 1, EndOffset: int64(rng.IntN(3)) - 1}
			}
			if rng.IntN(3) == 0 {
				p.CurrentLeader = &FetchLeader{LeaderID: int32(rng.IntN(3)) - 1, LeaderEpoch: int32(rng.IntN(3)) - 1}
			}
			if rng.IntN(3) == 0 {
				p.SnapshotID = &FetchSnapshotID{EndOffset: int64(rng.IntN(3)) - 1, Epoch: int32(rng.IntN(3)) - 1}
			}
			if rng.IntN(3) > 0 {
				p.AbortedTransactions = []FetchAbortedTransaction{}
				for range rng.IntN(4) {
					p.AbortedTransactions = append(p.AbortedTransactions, FetchAbortedTransaction{ProducerID: rng.Int64(), FirstOffset: rng.Int64()})
				}
			}
			if rng.IntN(4) > 0 {
				p.Records = []Region{}
				for range rng.IntN(4) {
					if rng.IntN(2) == 0 {
						b := make([]byte, rng.IntN(2*inlineRegionMax))
						for i := range b {
							b[i] = byte(rng.Uint32())
						}
						p.Records = append(p.Records, BytesRegion(b))
					} else {
						p.Records = append(p.Records, fileRegion{f, int64(rng.IntN(30000)), int64(rng.IntN(30000))})
					}
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		r.Topics = append(r.Topics, t)
	}
	for range rng.IntN(3) {
		n := FetchNodeEndpoint{NodeID: rng.Int32(), Host: strings.Repeat("h", rng.IntN(200)), Port: rng.Int32()}
		if rng.IntN(2) == 0 {
			rack := strings.Repeat("r", rng.IntN(200))
			n.Rack = &rack
		}
		r.NodeEndpoints = append(r.NodeEndpoints, n)
	}
	return r
}

func TestFetchEncodeRandomResponsesMatchKmsg(t *testing.T) {
	f := testRecordFile(t, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	for range iterations {
		r := randomFetchResponse(rng, f)
		v := MinFetchVersion + int16(rng.IntN(int(MaxFetchVersion-MinFetchVersion+1)))
		checkEncoding(t, r, v)
	}
}

func TestBodyMergesAdjacentBytes(t *testing.T) {
	b := AcquireBody()
	b.AppendBytes([]byte("ab"))
	b.AppendBytes([]byte("cd"))
	b.AppendRegion(BytesRegion("ef"))
	b.AppendRegion(BytesRegion(nil))
	b.AppendBytes([]byte("gh"))
	if len(b.parts) != 3 || b.Len() != 8 {
		t.Fatalf("parts %d, len %d", len(b.parts), b.Len())
	}
	var out bytes.Buffer
	if _, err := b.WriteTo(&out); err != nil || out.String() != "abcdefgh" {
		t.Fatalf("%q %v", out.String(), err)
	}
	ReleaseBody(b)
}

func BenchmarkFetchEncode(b *testing.B) {
	f := testRecordFile(b, 1<<20)
	// A typical consumer fetch: 3 topics × 6 partitions, each a file region.
	r := &FetchResponse{SessionID: 12}
	for ti := range 3 {
		topic := FetchTopic{Topic: fmt.Sprintf("orders-%d", ti)}
		for pi := range 6 {
			p := partition(int32(pi))
			p.Records = []Region{&fileRegion{f, int64(pi) << 14, 1 << 14}}
			topic.Partitions = append(topic.Partitions, p)
		}
		r.Topics = append(r.Topics, topic)
	}
	for _, v := range []int16{11, 12, 16} {
		b.Run(fmt.Sprintf("v%d-18-partitions", v), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				body := AcquireBody()
				if err := r.Encode(v, body); err != nil {
					b.Fatal(err)
				}
				ReleaseBody(body)
			}
		})
	}
	b.Run("kmsg-AppendTo-v12-inlined", func(b *testing.B) {
		k := toKmsg(b, r, 12)
		buf := make([]byte, 0, 2<<20)
		b.ReportAllocs()
		for b.Loop() {
			buf = k.AppendTo(buf[:0])
		}
	})
}
