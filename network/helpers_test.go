package network

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testVersions is what the test handler serves: ApiVersions only up to v3,
// so that clients asking for v4 exercise the UNSUPPORTED_VERSION path.
var testVersions = map[int16][2]int16{
	0:  {3, 12}, // Produce
	1:  {4, 18}, // Fetch
	3:  {0, 12}, // Metadata
	18: {0, 3},  // ApiVersions
}

// testHandler answers ApiVersions and Metadata like a one-broker cluster;
// fn, when set, sees every request first and may answer it instead.
type testHandler struct {
	fn   func(ctx context.Context, req *Request) (Result, bool)
	host string
	port int32
}

func (h *testHandler) SupportedVersions(_ string, key int16) (int16, int16, bool) {
	v, ok := testVersions[key]
	return v[0], v[1], ok
}

func (h *testHandler) Handle(ctx context.Context, req *Request) Result {
	if h.fn != nil {
		if res, ok := h.fn(ctx, req); ok {
			return res
		}
	}
	switch req.Msg.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := apiVersionsResponse()
		if req.Conn.SecurityProtocol.IsSASL() { // as the broker does
			resp.ApiKeys = append(resp.ApiKeys, SASLApiVersions()...)
		}
		return &Response{Msg: resp}
	case *kmsg.MetadataRequest:
		resp := kmsg.NewPtrMetadataResponse()
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, h.host, h.port
		resp.Brokers = append(resp.Brokers, b)
		resp.ControllerID = 1
		resp.ClusterID = kmsg.StringPtr("keel-test")
		return &Response{Msg: resp}
	}
	return nil
}

func apiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	keys := make([]int, 0, len(testVersions))
	for k := range testVersions {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	for _, k := range keys {
		v := testVersions[int16(k)]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = int16(k), v[0], v[1]
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is a running Server on 127.0.0.1:0.
type testServer struct {
	*Server
	addr    string
	logs    *syncBuffer
	handler *testHandler
	served  chan error
}

// startServer starts a server with the test handler; mod may adjust the
// config. The server is closed (and its goroutines awaited) at cleanup.
func startServer(t testing.TB, fn func(ctx context.Context, req *Request) (Result, bool), mod func(*Config)) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	h := &testHandler{fn: fn}
	cfg := Config{
		Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext}},
		Handler:   h,
		Logger:    hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr("PLAINTEXT").String()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	h.host, h.port = host, int32(p)
	ts := &testServer{Server: srv, addr: addr, logs: logs, handler: h, served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve() }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := <-ts.served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return ts
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawClient speaks the protocol over a plain socket, to test framing.
type rawClient struct {
	t    testing.TB
	c    net.Conn
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// frame encodes req at version with the next correlation id.
func (rc *rawClient) frame(req kmsg.Request, version int16) ([]byte, int32) {
	req.SetVersion(version)
	corr := rc.corr
	rc.corr++
	return rc.fmt.AppendRequest(nil, req, corr), corr
}

// send writes req at version and returns its correlation id.
func (rc *rawClient) send(req kmsg.Request, version int16) int32 {
	rc.t.Helper()
	b, corr := rc.frame(req, version)
	rc.write(b)
	return corr
}

func (rc *rawClient) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame.
func (rc *rawClient) readFrame() ([]byte, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(rc.c, b)
	return b, err
}

// read reads one response into resp (at version), checking the
// correlation id and the response header version.
func (rc *rawClient) read(resp kmsg.Response, version int16, wantCorr int32) {
	rc.t.Helper()
	b, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("read response %d: %v", wantCorr, err)
	}
	if corr := int32(binary.BigEndian.Uint32(b)); corr != wantCorr {
		rc.t.Fatalf("correlation id %d, want %d", corr, wantCorr)
	}
	b = b[4:]
	resp.SetVersion(version)
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		if len(b) == 0 || b[0] != 0 {
			rc.t.Fatalf("response header v1 without empty tagged fields: %x", b[:min(len(b), 8)])
		}
		b = b[1:]
	}
	if err := resp.ReadFrom(b); err != nil {
		rc.t.Fatalf("decode %s v%d: %v", kmsg.NameForKey(resp.Key()), version, err)
	}
}

// expectClosed asserts the server closes the connection without sending
// anything.
func (rc *rawClient) expectClosed() {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 1024)
	n, err := rc.c.Read(b)
	if err == nil {
		rc.t.Fatalf("server sent %d bytes instead of closing: %x", n, b[:n])
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		rc.t.Fatalf("want the connection closed, got %v", err)
	}
}

// goroutinesSettle waits until at most base goroutines run.
func goroutinesSettle(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines leaked: %d running, %d before\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metadataRequest is a broker-only Metadata request.
func metadataRequest() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	return req
}

// produceRequest is an acks=1 Produce request of one partition whose
// records are the given bytes (the network layer does not parse them).
func produceRequest(records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
