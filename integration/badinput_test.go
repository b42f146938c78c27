package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The bad-input test sends the running keel process what a broken or
// hostile client might, over raw TCP, while a well-behaved kgo client
// produces and consumes on the side. Each case must get Kafka's answer (an
// error code, or a closed connection: Kafka answers no malformed frame) and
// leave a line in the server's log; the process must stay up and the
// well-behaved client must not notice.

// badInputMaxRequest is socket.request.max.bytes for the test: small, so
// that a whole over-limit frame is cheap to send.
const badInputMaxRequest = 1 << 20

func TestBadInputAgainstLiveServer(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, ProcessOptions{
		LogLevel:  "debug", // refused appends are logged at debug, as Kafka logs them
		Overrides: []string{fmt.Sprintf("socket.request.max.bytes=%d", badInputMaxRequest)},
	})
	pid := c.Pid(1)
	addr := c.BootstrapServers()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(procClient(t, c))
	for _, topic := range []string{"steady", "target"} {
		if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	steady := startSteadyTraffic(t, c, "steady")

	// after checks what must hold after every case: the same process is up,
	// its log has the case's line, and the well-behaved client goes on.
	after := func(t *testing.T, logLines ...string) {
		t.Helper()
		for _, line := range logLines {
			waitFor(t, 10*time.Second, fmt.Sprintf("log line %q", line), func() bool {
				return strings.Contains(c.Log(1), line)
			})
		}
		if !c.Alive(1) || c.Pid(1) != pid {
			t.Fatalf("the server process is gone:\n%s", c.LogTail(1, 40))
		}
		steady.waitProgress(t)
	}

	t.Run("random bytes", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		junk := func(n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return b
		}
		// Pure noise: mostly a size outside the limit.
		for i := 0; i < 20; i++ {
			bc := dialBad(t, addr)
			bc.write(junk(1 + rng.IntN(8192)))
			// Whatever the junk parses as, the server reads to EOF and
			// closes: at most a Kafka response comes first.
			bc.closeWrite()
			bc.drainUntilClosed()
		}
		// Well-framed noise: a valid size, an API key and version the
		// server advertises (and the header that goes with it), then a
		// random body, for the request decoders and the handlers.
		bc := dialBad(t, addr)
		corr := bc.send(kmsg.NewPtrApiVersionsRequest(), 3)
		served := kmsg.NewPtrApiVersionsResponse()
		bc.read(served, 3, corr)
		for i := 0; i < 1000; i++ {
			k := served.ApiKeys[rng.IntN(len(served.ApiKeys))]
			req := kmsg.RequestForKey(k.ApiKey)
			if req == nil {
				continue
			}
			req.SetVersion(k.MinVersion + int16(rng.IntN(int(k.MaxVersion-k.MinVersion)+1)))
			frame := binary.BigEndian.AppendUint32(nil, 0) // size, below
			frame = binary.BigEndian.AppendUint16(frame, uint16(k.ApiKey))
			frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
			frame = binary.BigEndian.AppendUint32(frame, uint32(i))
			frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client id
			if req.IsFlexible() {
				frame = append(frame, 0) // no header tags
			}
			frame = append(frame, junk(rng.IntN(256))...)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			bc := dialBad(t, addr)
			bc.write(frame)
			bc.closeWrite()
			bc.drainUntilClosed()
		}
		after(t, "closing connection", "malformed request body")
		if log := c.Log(1); strings.Contains(log, "panicked") {
			t.Fatalf("random input made a handler panic:\n%s", c.LogTail(1, 60))
		}
	})

	t.Run("truncated frames", func(t *testing.T) {
		// The size says 100 bytes; 20 arrive, then EOF.
		bc := dialBad(t, addr)
		frame, _ := bc.frame(kmsg.NewPtrMetadataRequest(), 12)
		bc.write(append(binary.BigEndian.AppendUint32(nil, 100), frame[4:24]...))
		bc.closeWrite()
		bc.expectClosed()
		after(t, "closing connection: truncated request")

		// A complete frame whose Produce body stops half way.
		bc = dialBad(t, addr)
		frame, _ = bc.frame(produceRequest("target", badBatch(t, nil)), 9)
		short := frame[:len(frame)/2]
		binary.BigEndian.PutUint32(short, uint32(len(short)-4))
		bc.write(short)
		bc.expectClosed()
		after(t, "closing connection: bad request", "malformed request body: Produce v9")

		// Only part of the size prefix.
		bc = dialBad(t, addr)
		bc.write([]byte{0, 0})
		bc.closeWrite()
		bc.expectClosed()
		after(t)
	})

	t.Run("frame over socket.request.max.bytes", func(t *testing.T) {
		// A whole frame one byte over the limit, with a valid header.
		bc := dialBad(t, addr)
		frame, _ := bc.frame(kmsg.NewPtrMetadataRequest(), 12)
		over := make([]byte, 4+badInputMaxRequest+1)
		copy(over[4:], frame[4:])
		binary.BigEndian.PutUint32(over, badInputMaxRequest+1)
		bc.writeIgnoringReset(over)
		bc.expectClosed()
		after(t, fmt.Sprintf("size %d, limit %d", badInputMaxRequest+1, badInputMaxRequest))

		// Sizes that claim 2 GiB or less than nothing, with no body: the
		// server must refuse before allocating.
		for _, size := range []uint32{0x7fffffff, 0xffffffff} {
			bc := dialBad(t, addr)
			bc.write(binary.BigEndian.AppendUint32(nil, size))
			bc.expectClosed()
			after(t, fmt.Sprintf("size %d, limit %d", int32(size), badInputMaxRequest))
		}
	})

	t.Run("unknown api key", func(t *testing.T) {
		bc := dialBad(t, addr)
		var hdr []byte
		hdr = binary.BigEndian.AppendUint16(hdr, 9999)           // api key
		hdr = binary.BigEndian.AppendUint16(hdr, 0)              // api version
		hdr = binary.BigEndian.AppendUint32(hdr, 7)              // correlation id
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(0xffff)) // null client id
		bc.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(hdr))), hdr...))
		bc.expectClosed()
		after(t, "unknown api key 9999")
	})

	t.Run("unsupported version", func(t *testing.T) {
		// ApiVersions v99: a v0 response with UNSUPPORTED_VERSION and
		// ApiVersions' own range (KIP-511); the connection stays open and
		// the client retries with a version the broker knows.
		bc := dialBad(t, addr)
		corr := bc.send(kmsg.NewPtrApiVersionsRequest(), 99)
		resp := kmsg.NewPtrApiVersionsResponse()
		bc.read(resp, 0, corr)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 {
			t.Fatalf("ApiVersions v99: error %d, keys %+v", resp.ErrorCode, resp.ApiKeys)
		}
		v := resp.ApiKeys[0].MaxVersion
		corr = bc.send(kmsg.NewPtrApiVersionsRequest(), v)
		resp = kmsg.NewPtrApiVersionsResponse()
		bc.read(resp, v, corr)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) < 10 {
			t.Fatalf("ApiVersions retry: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
		}
		after(t, "unsupported ApiVersions version; answering with v0")

		// Any other API at a version not served: the connection closes.
		bc = dialBad(t, addr)
		bc.send(kmsg.NewPtrMetadataRequest(), 99)
		bc.expectClosed()
		after(t, "unsupported api version: Metadata v99")

		// Produce v0–v2 are advertised (KAFKA-18659) but refused (KIP-896).
		bc = dialBad(t, addr)
		bc.send(produceRequest("target", badBatch(t, nil)), 2)
		bc.expectClosed()
		after(t, "unsupported api version: Produce v2")
	})

	t.Run("batch with a bad CRC", func(t *testing.T) {
		before := endOffset(t, adm, "target")
		batch := badBatch(t, nil)
		batch[len(batch)-1] ^= 0xff // inside the records: covered by the CRC
		bc := dialBad(t, addr)
		code := bc.produce(t, produceRequest("target", batch))
		if code != kerr.CorruptMessage.Code {
			t.Fatalf("bad CRC: error %d (%v), want CORRUPT_MESSAGE", code, kerr.ErrorForCode(code))
		}
		// The connection stays usable: a good batch goes through.
		if code := bc.produce(t, produceRequest("target", badBatch(t, nil))); code != 0 {
			t.Fatalf("good batch after a bad one: error %d", code)
		}
		if got := endOffset(t, adm, "target"); got != before+1 {
			t.Fatalf("end offset %d after a corrupt and a good batch, want %d", got, before+1)
		}
		after(t, "append refused", "error_code=2")
	})

	t.Run("zip bomb", func(t *testing.T) {
		before := endOffset(t, adm, "target")
		bc := dialBad(t, addr)
		// Validation reads the records as they inflate and refuses the
		// first (zeros: a record of length 0) after the first 64 KiB of
		// output, as Kafka, which reads a compressed batch as a stream,
		// does. Inflating to the bound (64 MiB here) took 4 to 7 s with
		// the race detector.
		batch := badBatch(t, zstdRLEBomb(128<<20)) // 4 KiB that inflate to 128 MiB
		start := time.Now()
		code := bc.produce(t, produceRequest("target", batch))
		if code != kerr.InvalidRecord.Code {
			t.Fatalf("zip bomb: error %d (%v), want INVALID_RECORD", code, kerr.ErrorForCode(code))
		}
		t.Logf("zip bomb refused in %v", time.Since(start).Round(time.Millisecond))
		if got := endOffset(t, adm, "target"); got != before {
			t.Fatalf("end offset %d after a refused batch, want %d", got, before)
		}
		after(t, "error_code=87")
	})

	steady.stop(t)
	t.Logf("well-behaved client: %d records produced and consumed in order alongside", steady.acked.Load())
}

// badConn is a raw client connection.
type badConn struct {
	t    *testing.T
	c    *net.TCPConn
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialBad(t *testing.T, addr string) *badConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &badConn{t: t, c: c.(*net.TCPConn), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("bad-input"))}
}

// frame encodes req at version (size prefix included).
func (bc *badConn) frame(req kmsg.Request, version int16) ([]byte, int32) {
	req.SetVersion(version)
	bc.corr++
	return bc.fmt.AppendRequest(nil, req, bc.corr), bc.corr
}

func (bc *badConn) send(req kmsg.Request, version int16) int32 {
	bc.t.Helper()
	b, corr := bc.frame(req, version)
	bc.write(b)
	return corr
}

func (bc *badConn) write(b []byte) {
	bc.t.Helper()
	_ = bc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := bc.c.Write(b); err != nil {
		bc.t.Fatalf("write: %v", err)
	}
}

// writeIgnoringReset writes b; the server may close the connection before
// reading all of it (it refuses an over-limit frame on its size alone).
func (bc *badConn) writeIgnoringReset(b []byte) {
	bc.t.Helper()
	_ = bc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := bc.c.Write(b); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		bc.t.Fatalf("write: %v", err)
	}
}

func (bc *badConn) closeWrite() { _ = bc.c.CloseWrite() }

// readFrame reads one response frame.
func (bc *badConn) readFrame() ([]byte, error) {
	_ = bc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(bc.c, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(bc.c, b)
	return b, err
}

// read decodes one response at version, checking the correlation id.
func (bc *badConn) read(resp kmsg.Response, version int16, wantCorr int32) {
	bc.t.Helper()
	b, err := bc.readFrame()
	if err != nil {
		bc.t.Fatalf("read response %d: %v", wantCorr, err)
	}
	if corr := int32(binary.BigEndian.Uint32(b)); corr != wantCorr {
		bc.t.Fatalf("correlation id %d, want %d", corr, wantCorr)
	}
	b = b[4:]
	resp.SetVersion(version)
	if resp.IsFlexible() && resp.Key() != 18 { // ApiVersions' response header is always v0
		if len(b) == 0 || b[0] != 0 {
			bc.t.Fatalf("response header v1 without empty tagged fields")
		}
		b = b[1:]
	}
	if err := resp.ReadFrom(b); err != nil {
		bc.t.Fatalf("decode %s v%d: %v", kmsg.NameForKey(resp.Key()), version, err)
	}
}

// produce sends a Produce v9 request and returns its one partition's error
// code.
func (bc *badConn) produce(t *testing.T, req *kmsg.ProduceRequest) int16 {
	t.Helper()
	corr := bc.send(req, 9)
	resp := kmsg.NewPtrProduceResponse()
	bc.read(resp, 9, corr)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// isClosed reports an error that means the peer closed the connection.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// expectClosed asserts that the server closes the connection without
// sending anything.
func (bc *badConn) expectClosed() {
	bc.t.Helper()
	_ = bc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 1024)
	n, err := bc.c.Read(b)
	if err == nil {
		bc.t.Fatalf("server sent %d bytes instead of closing: %x", n, b[:n])
	}
	if !isClosed(err) {
		bc.t.Fatalf("want the connection closed, got %v", err)
	}
}

// drainUntilClosed reads whatever the server sends until it closes.
func (bc *badConn) drainUntilClosed() {
	bc.t.Helper()
	_ = bc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, bc.c); err != nil && !isClosed(err) {
		bc.t.Fatalf("want the connection closed, got %v", err)
	}
}

// produceRequest is an acks=1 Produce of batch to partition 0 of topic.
func produceRequest(topic string, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// badBatch is a one-record batch; with compressed set, its record bytes are
// replaced by those zstd bytes (attributes and CRC fixed up to match), which
// need not decode to a record.
func badBatch(t *testing.T, compressed []byte) []byte {
	t.Helper()
	bb := record.NewBatchBuilder(record.DefaultBatchOptions())
	bb.Append(time.Now().UnixMilli(), []byte("key"), []byte("a value of some bytes"), nil)
	batch, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if compressed == nil {
		return batch
	}
	batch = append(batch[:record.HeaderSize], compressed...)
	be := binary.BigEndian
	be.PutUint32(batch[8:], uint32(len(batch)-record.LogOverhead))                 // batch length
	be.PutUint16(batch[21:], be.Uint16(batch[21:])|uint16(record.CompressionZstd)) // attributes
	be.PutUint32(batch[17:], record.ComputeCRC(batch))                             // CRC
	return batch
}

// zstdRLEBomb is a zstd frame of RLE blocks that decompresses to size zero
// bytes (rounded up to 128 KiB blocks) from 4 bytes per block: RFC 8878
// §3.1.1 (frame header without content size, window 128 KiB) and §3.1.1.2
// (Block_Type 1, RLE_Block).
func zstdRLEBomb(size int) []byte {
	const block = 128 << 10
	b := []byte{0x28, 0xb5, 0x2f, 0xfd} // magic
	b = append(b, 0x00)                 // frame header descriptor: window descriptor follows, no checksum
	b = append(b, (17-10)<<3)           // window descriptor: 2^17 bytes
	n := (size + block - 1) / block
	for i := 0; i < n; i++ {
		hdr := uint32(block)<<3 | 1<<1 // Block_Size, Block_Type RLE
		if i == n-1 {
			hdr |= 1 // Last_Block
		}
		b = append(b, byte(hdr), byte(hdr>>8), byte(hdr>>16), 0x00)
	}
	return b
}

func endOffset(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok {
		t.Fatalf("no end offset for %s-0", topic)
	}
	return o.Offset
}

// steadyTraffic is a well-behaved kgo producer and consumer on one
// partition: every record must be acknowledged without error and consumed
// in order.
type steadyTraffic struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	acked    atomic.Int64
	consumed atomic.Int64
	mu       sync.Mutex
	errs     []error
}

func startSteadyTraffic(t *testing.T, c *ProcessCluster, topic string) *steadyTraffic {
	ctx, cancel := context.WithCancel(context.Background())
	s := &steadyTraffic{cancel: cancel}
	prod := procClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	cons := procClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for i := int64(0); ctx.Err() == nil; i++ {
			err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr()
			switch {
			case err == nil:
				s.acked.Add(1)
			case ctx.Err() == nil:
				s.fail(fmt.Errorf("produce %d: %w", i, err))
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if ctx.Err() == nil {
					s.fail(fmt.Errorf("fetch: %w", err))
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if want := s.consumed.Load(); r.Offset != want || string(r.Value) != fmt.Sprint(want) {
					s.fail(fmt.Errorf("consumed offset %d value %s, want offset and value %d", r.Offset, r.Value, want))
				}
				s.consumed.Add(1)
			})
		}
	}()
	t.Cleanup(func() { s.cancel(); s.wg.Wait() })
	return s
}

func (s *steadyTraffic) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *steadyTraffic) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) > 0 {
		t.Fatalf("the well-behaved client was disturbed: %v", errors.Join(s.errs...))
	}
}

// waitProgress waits until the client has produced and consumed more.
func (s *steadyTraffic) waitProgress(t *testing.T) {
	t.Helper()
	p, c := s.acked.Load(), s.consumed.Load()
	waitFor(t, 20*time.Second, "the well-behaved client to make progress", func() bool {
		return s.acked.Load() >= p+20 && s.consumed.Load() >= c+20
	})
	s.check(t)
}

// stop ends the traffic and checks that everything acknowledged was
// consumed, in order, without an error.
func (s *steadyTraffic) stop(t *testing.T) {
	t.Helper()
	acked := s.acked.Load()
	waitFor(t, 20*time.Second, "the consumer to catch up", func() bool { return s.consumed.Load() >= acked })
	s.cancel()
	s.wg.Wait()
	s.check(t)
}
