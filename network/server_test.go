package network

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestKgoClientPingsAndRequests(t *testing.T) {
	ts := startServer(t, nil, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// kgo opens with ApiVersions at its newest version (above our v3): it
	// must get UNSUPPORTED_VERSION with our range and retry at v3.
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	resp, err := cl.Request(ctx, metadataRequest())
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	md := resp.(*kmsg.MetadataResponse)
	if md.ClusterID == nil || *md.ClusterID != "keel-test" || len(md.Brokers) != 1 {
		t.Fatalf("unexpected metadata %+v", md)
	}
	av, err := cl.Broker(1).Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatalf("api versions: %v", err)
	}
	if got := av.(*kmsg.ApiVersionsResponse); got.ErrorCode != 0 || len(got.ApiKeys) != len(testVersions) || got.Version != 3 {
		t.Fatalf("api versions v%d error %d, %d keys", got.Version, got.ErrorCode, len(got.ApiKeys))
	}
	if !strings.Contains(ts.logs.String(), "unsupported ApiVersions version") {
		t.Error("kgo's first ApiVersions was not answered with UNSUPPORTED_VERSION")
	}
}

// fetchHandler answers Fetch with file regions: the records of partition
// p are bytes [p*1000, p*1000+700) of f.
func fetchHandler(t testing.TB, recordsFile *fileRegion) func(ctx context.Context, req *Request) (Result, bool) {
	return func(_ context.Context, req *Request) (Result, bool) {
		fr, ok := req.Msg.(*kmsg.FetchRequest)
		if !ok {
			return nil, false
		}
		resp := &FetchResponse{SessionID: 5}
		for _, rt := range fr.Topics {
			topic := FetchTopic{Topic: rt.Topic, TopicID: rt.TopicID}
			for _, rp := range rt.Partitions {
				p := partition(rp.Partition)
				p.Records = []Region{BytesRegion("hdr"), fileRegion{recordsFile.f, int64(rp.Partition) * 1000, 700}}
				topic.Partitions = append(topic.Partitions, p)
			}
			resp.Topics = append(resp.Topics, topic)
		}
		body := AcquireBody()
		if err := resp.Encode(req.Header.APIVersion, body); err != nil {
			t.Errorf("encode: %v", err)
			return &Response{CloseConnection: true}, true
		}
		return &Response{Body: body}, true
	}
}

func fetchRequest(topicID [16]byte) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "orders", topicID
	for p := range int32(3) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func checkFetchRecords(t *testing.T, f *fileRegion, resp *kmsg.FetchResponse) {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 || (resp.Version >= 7 && resp.SessionID != 5) {
		t.Fatalf("v%d: unexpected fetch response: %d topics, session %d", resp.Version, len(resp.Topics), resp.SessionID)
	}
	for _, p := range resp.Topics[0].Partitions {
		want := append([]byte("hdr"), regionBytes(t, fileRegion{f.f, int64(p.Partition) * 1000, 700})...)
		if !bytes.Equal(p.RecordBatches, want) {
			t.Fatalf("partition %d: records differ", p.Partition)
		}
	}
}

func TestFetchResponsesGoThroughSendfile(t *testing.T) {
	f := &fileRegion{f: testRecordFile(t, 10000)}
	ts := startServer(t, fetchHandler(t, f), nil)

	t.Run("kgo", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		resp, err := cl.Broker(1).Request(ctx, fetchRequest([16]byte{1, 2, 3}))
		if err != nil {
			t.Fatal(err)
		}
		checkFetchRecords(t, f, resp.(*kmsg.FetchResponse))
	})
	t.Run("every version", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		for v := MinFetchVersion; v <= MaxFetchVersion; v++ {
			corr := rc.send(fetchRequest([16]byte{byte(v)}), v)
			resp := kmsg.NewPtrFetchResponse()
			rc.read(resp, v, corr)
			checkFetchRecords(t, f, resp)
			if v >= 13 && resp.Topics[0].TopicID != [16]byte{byte(v)} {
				t.Fatalf("v%d: topic id %x", v, resp.Topics[0].TopicID)
			}
		}
	})
}

func TestPipelinedResponsesKeepRequestOrder(t *testing.T) {
	const n = 5
	started := make(chan int32, n)
	allStarted := make(chan struct{})
	var count atomic.Int32
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.MetadataRequest); !ok {
			return nil, false
		}
		started <- req.Header.CorrelationID
		if count.Add(1) == n {
			close(allStarted)
		}
		if req.Header.CorrelationID != 0 {
			return nil, false // answered at once by the default handler
		}
		// The first request waits (as acks=all would) until the server has
		// read and started every later one.
		d := NewDeferred()
		go func() {
			select {
			case <-allStarted:
			case <-time.After(10 * time.Second):
				t.Error("later requests were not started while the first was pending")
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.ClusterID = kmsg.StringPtr("first")
			d.Complete(&Response{Msg: resp})
		}()
		return d, true
	}, nil)

	rc := dialRaw(t, ts.addr)
	var batch []byte
	for range n {
		b, _ := rc.frame(metadataRequest(), 12)
		batch = append(batch, b...)
	}
	rc.write(batch) // all five in one write, as a pipelining client does
	for want := range int32(n) {
		resp := kmsg.NewPtrMetadataResponse()
		rc.read(resp, 12, want)
		if want == 0 && (resp.ClusterID == nil || *resp.ClusterID != "first") {
			t.Fatal("first response is not the deferred one")
		}
	}
	for want := range int32(n) {
		if got := <-started; got != want {
			t.Fatalf("handler started request %d, want %d (arrival order)", got, want)
		}
	}
}

func TestAcksZeroProduceGetsNoResponse(t *testing.T) {
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if pr, ok := req.Msg.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
			return nil, true
		}
		return nil, false
	}, nil)
	rc := dialRaw(t, ts.addr)
	first := rc.send(metadataRequest(), 9)
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 0
	rc.send(produce, 9)
	third := rc.send(metadataRequest(), 9)
	rc.read(kmsg.NewPtrMetadataResponse(), 9, first)
	rc.read(kmsg.NewPtrMetadataResponse(), 9, third)
}

func TestCloseConnectionAfterEarlierResponses(t *testing.T) {
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.ProduceRequest); ok {
			return &Response{CloseConnection: true}, true // a failed acks=0 produce
		}
		return nil, false
	}, nil)
	rc := dialRaw(t, ts.addr)
	first := rc.send(metadataRequest(), 4)
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 0
	rc.send(produce, 3)
	rc.read(kmsg.NewPtrMetadataResponse(), 4, first)
	rc.expectClosed()
}

func TestApiVersionsEveryVersion(t *testing.T) {
	ts := startServer(t, nil, nil)
	rc := dialRaw(t, ts.addr)
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "keel-test", "1.0"
		corr := rc.send(req, v)
		resp := kmsg.NewPtrApiVersionsResponse()
		rc.read(resp, v, corr) // header v0 even for flexible v3
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(testVersions) {
			t.Fatalf("v%d: error %d, %d keys", v, resp.ErrorCode, len(resp.ApiKeys))
		}
	}
}

func TestUnsupportedApiVersionsGetsV0Error(t *testing.T) {
	ts := startServer(t, nil, nil)
	frames := map[string]func(rc *rawClient) ([]byte, int32){
		"v4 (kmsg knows it, we do not serve it)": func(rc *rawClient) ([]byte, int32) {
			return rc.frame(kmsg.NewPtrApiVersionsRequest(), 4)
		},
		"v127 with a body nobody can parse": func(rc *rawClient) ([]byte, int32) {
			return rawFrame(apiVersionsKey, 127, 77, "client", true, []byte{0xde, 0xad}), 77
		},
		"negative version": func(rc *rawClient) ([]byte, int32) {
			return rawFrame(apiVersionsKey, -1, 78, "client", false, nil), 78
		},
	}
	for name, mk := range frames {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, ts.addr)
			b, corr := mk(rc)
			rc.write(b)
			resp := kmsg.NewPtrApiVersionsResponse()
			rc.read(resp, 0, corr)
			if resp.ErrorCode != errUnsupportedVersionCode {
				t.Fatalf("error code %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
			}
			// As Kafka (KIP-511): only ApiVersions' own range.
			if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 3 {
				t.Fatalf("api keys %+v", resp.ApiKeys)
			}
			// The connection stays usable.
			corr = rc.send(kmsg.NewPtrApiVersionsRequest(), 3)
			rc.read(kmsg.NewPtrApiVersionsResponse(), 3, corr)
		})
	}
}

// rawFrame builds a request frame by hand.
func rawFrame(key, version int16, corr int32, clientID string, flexible bool, body []byte) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func sizePrefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestBadInputClosesTheConnectionOnly(t *testing.T) {
	ts := startServer(t, nil, nil)
	metadataV1 := rawFrame(3, 1, 1, "c", false, nil)
	cases := []struct {
		name  string
		bytes []byte
		log   string
	}{
		{"frame claiming 2 GiB", sizePrefix(0x7fffffff), "request size outside"},
		{"frame one byte over socket.request.max.bytes", sizePrefix(DefaultSocketRequestMaxBytes + 1), "request size outside"},
		{"negative size", sizePrefix(0xffffffff), "request size outside"},
		{"unknown api key", rawFrame(9999, 0, 1, "c", false, nil), "unknown api key"},
		{"unsupported version", rawFrame(3, 99, 1, "c", true, nil), "unsupported api version"},
		{"api not served", rawFrame(19, 0, 1, "c", false, nil), "not served on this listener"},
		{"malformed body", append(metadataV1[:len(metadataV1):len(metadataV1)], 0, 0, 0x10, 0), "malformed request body"},
		{"client id longer than the frame", append(sizePrefix(12), 0, 3, 0, 1, 0, 0, 0, 1, 0x01, 0xf4, 'a', 'b'), "malformed request header"},
		{"header shorter than 8 bytes", append(sizePrefix(3), 0, 3, 0), "malformed request header"},
		{"bad header tagged fields", rawFrame(3, 12, 1, "c", false, []byte{5, 0}), "malformed request header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rc := dialRaw(t, ts.addr)
			rc.write(tc.bytes)
			rc.expectClosed()
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
				t.Errorf("server allocated %d MiB for a frame it refused", grew>>20)
			}
			waitFor(t, "log line", func() bool { return strings.Contains(ts.logs.String(), tc.log) })
			// Other clients are not disturbed.
			ok := dialRaw(t, ts.addr)
			corr := ok.send(metadataRequest(), 1)
			ok.read(kmsg.NewPtrMetadataResponse(), 1, corr)
		})
	}
}

// A connection that announces a request of socket.request.max.bytes and
// sends a little of it holds memory for what it sent, not for what it
// announced. Frames larger than a chunk, up to one whose first eighth
// spans several chunks, still arrive whole.
func TestAnnouncedFrameSizeIsNotAllocatedAhead(t *testing.T) {
	pattern := func(i int) byte { return byte(i * 7 % 251) }
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		m, ok := req.Msg.(*kmsg.ProduceRequest)
		if !ok {
			return nil, false
		}
		resp := kmsg.NewPtrProduceResponse()
		rt := kmsg.NewProduceResponseTopic()
		rp := kmsg.NewProduceResponseTopicPartition()
		records := m.Topics[0].Partitions[0].Records
		rp.BaseOffset = int64(len(records))
		for i, b := range records {
			if b != pattern(i) {
				rp.BaseOffset = -int64(i) // the first byte that differs
				break
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return &Response{Msg: resp}, true
	}, nil)

	const conns = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range conns {
		rc := dialRaw(t, ts.addr)
		rc.write(append(sizePrefix(DefaultSocketRequestMaxBytes), make([]byte, 4096)...))
	}
	waitFor(t, "the connections", func() bool { return ts.NumConnections() == conns })
	bound := uint64(conns*frameChunk + 32<<20)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > bound {
			t.Fatalf("%d connections that each sent 4 KiB of a %d MiB request made the server allocate %d MiB",
				conns, DefaultSocketRequestMaxBytes>>20, grew>>20)
		}
	}

	rc := dialRaw(t, ts.addr)
	for _, size := range []int{frameChunk - 100, frameChunk + 1, 5 * frameChunk, 20*frameChunk + 3} {
		records := make([]byte, size)
		for i := range records {
			records[i] = pattern(i)
		}
		corr := rc.send(produceRequest(records), 9)
		resp := kmsg.NewPtrProduceResponse()
		rc.read(resp, 9, corr)
		if got := resp.Topics[0].Partitions[0].BaseOffset; got != int64(size) {
			t.Fatalf("a request with %d bytes of records: %d arrived intact (negative: the first byte that differs)", size, got)
		}
	}
}

func TestTruncatedFrameThenClose(t *testing.T) {
	ts := startServer(t, nil, nil)
	large := append(sizePrefix(3*frameChunk), make([]byte, 3*frameChunk)...)
	for _, tc := range []struct {
		name  string
		bytes func(rc *rawClient) []byte
	}{
		{"three bytes short", func(rc *rawClient) []byte {
			frame, _ := rc.frame(metadataRequest(), 12)
			return frame[:len(frame)-3]
		}},
		{"cut in the first chunk", func(*rawClient) []byte { return large[:frameChunk/2] }},
		{"cut after the first chunk", func(*rawClient) []byte { return large[:2*frameChunk] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, ts.addr)
			rc.write(tc.bytes(rc))
			if err := rc.c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			rc.expectClosed()
			waitFor(t, "log line", func() bool { return strings.Contains(ts.logs.String(), "truncated request") })
			waitFor(t, "connection gone", func() bool { return ts.NumConnections() == 0 })
			ts.logs.reset()
		})
	}
}

func TestRandomBytesNeverHurtTheServer(t *testing.T) {
	ts := startServer(t, nil, nil)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 30 {
		rc := dialRaw(t, ts.addr)
		junk := make([]byte, 4+rng.IntN(300))
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		if i%3 == 0 { // a plausible size, then junk
			binary.BigEndian.PutUint32(junk, uint32(len(junk)-4))
		}
		rc.write(junk)
		_ = rc.c.(interface{ CloseWrite() error }).CloseWrite()
		// Whatever the server makes of it, it must close (never hang).
		_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, err := rc.readFrame(); err != nil {
				break
			}
		}
	}
	rc := dialRaw(t, ts.addr)
	corr := rc.send(metadataRequest(), 12)
	rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if req.Header.ClientID == "boom" {
			panic("handler bug")
		}
		return nil, false
	}, nil)
	rc := dialRaw(t, ts.addr)
	rc.write(rawFrame(3, 1, 1, "boom", false, []byte{0, 0, 0, 0}))
	rc.expectClosed()
	waitFor(t, "panic logged", func() bool { return strings.Contains(ts.logs.String(), "handler panicked") })
	ok := dialRaw(t, ts.addr)
	corr := ok.send(metadataRequest(), 1)
	ok.read(kmsg.NewPtrMetadataResponse(), 1, corr)
}

func TestShortRegionClosesTheConnection(t *testing.T) {
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.FetchRequest); !ok {
			return nil, false
		}
		body := AcquireBody()
		body.AppendRegion(shortRegion{})
		return &Response{Body: body}, true
	}, nil)
	rc := dialRaw(t, ts.addr)
	rc.send(fetchRequest([16]byte{}), 12)
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.readFrame(); err == nil {
		t.Fatal("a response promising 100 bytes and delivering 5 was completed")
	}
	waitFor(t, "log line", func() bool { return strings.Contains(ts.logs.String(), "write region") })
}

// shortRegion is a Region that writes fewer bytes than its Len.
type shortRegion struct{}

func (shortRegion) Len() int64 { return 100 }
func (shortRegion) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write([]byte("short"))
	return int64(n), err
}
