package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/storage"
)

// testNodeID is the broker under test.
const testNodeID = 1

// testMeta is an in-process metadata quorum of one: the real controller
// logic (metadata.ClusterControl) and image, without raft. Every batch of
// records it decides goes through EncodeBatch/DecodeBatch and Image.Apply,
// then to Broker.ApplyMetadata, before Forward returns — as the node's
// raft-backed forwarder answers only once the records are committed and
// applied locally. It implements MetadataView and ControllerForwarder.
//
// Concurrency: mu serialises every controller call, commit and
// ApplyMetadata, as the controller's event loop and the node's publisher do.
type testMeta struct {
	t  testing.TB
	mu sync.Mutex
	cc *metadata.ClusterControl
	// img is the latest committed image.
	img *metadata.Image
	// broker receives every committed image; nil while none is running.
	broker *Broker
	// forwardErr, if set, fails every Forward (transport errors).
	forwardErr error
}

func newTestMeta(t testing.TB) *testMeta {
	cfg := metadata.DefaultControllerConfig()
	cfg.AutoLeaderRebalanceEnable = false
	img := metadata.EmptyImage()
	return &testMeta{t: t, img: img, cc: metadata.NewClusterControl(cfg, img, time.Now(), rand.New(rand.NewPCG(1, 2)))}
}

func (m *testMeta) Image() *metadata.Image {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.img
}

func (m *testMeta) WaitForOffset(ctx context.Context, offset int64) error {
	for {
		if m.Image().Offset() >= offset {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// Forward runs the ClusterControl method for the request and commits its
// records.
func (m *testMeta) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forwardErr != nil {
		return nil, m.forwardErr
	}
	var recs []metadata.Record
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		recs, resp = m.cc.CreateTopics(r, isInternalCreate(r))
	case *kmsg.DeleteTopicsRequest:
		recs, resp = m.cc.DeleteTopics(r)
	case *kmsg.CreatePartitionsRequest:
		recs, resp = m.cc.CreatePartitions(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		recs, resp = m.cc.IncrementalAlterConfigs(r)
	case *kmsg.AlterConfigsRequest:
		recs, resp = m.cc.AlterConfigs(r)
	case *kmsg.AllocateProducerIDsRequest:
		recs, resp = m.cc.AllocateProducerIds(r)
	case *kmsg.AlterPartitionRequest:
		recs, resp = m.cc.AlterPartition(r)
	case *kmsg.AlterClientQuotasRequest:
		recs, resp = m.cc.AlterClientQuotas(r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		recs, resp = m.cc.AlterUserScramCredentials(r)
	case *kmsg.CreateACLsRequest:
		recs, resp = m.cc.CreateAcls(r)
	case *kmsg.DeleteACLsRequest:
		recs, resp = m.cc.DeleteAcls(r)
	case *kmsg.UpdateFeaturesRequest:
		recs, resp = m.cc.UpdateFeatures(r)
	default:
		return nil, fmt.Errorf("test controller: unexpected %s", kmsg.NameForKey(req.Key()))
	}
	m.commitLocked(recs)
	return resp, nil
}

// commitLocked commits one batch: encode, decode, apply, publish. m.mu is
// held.
func (m *testMeta) commitLocked(recs []metadata.Record) {
	if len(recs) == 0 {
		return
	}
	raw, err := metadata.EncodeBatch(recs)
	if err != nil {
		m.t.Fatalf("encode metadata batch: %v", err)
	}
	decoded, err := metadata.DecodeBatch(raw)
	if err != nil {
		m.t.Fatalf("decode metadata batch: %v", err)
	}
	next, changes, err := m.img.Apply(m.img.Offset()+1, decoded)
	if err != nil {
		m.t.Fatalf("apply metadata batch: %v", err)
	}
	m.img = next
	m.cc.SetImage(next)
	if m.broker != nil {
		m.broker.ApplyMetadata(next, changes)
	}
}

// registerBroker registers and unfences a broker with one PLAINTEXT
// endpoint, driving RegisterBroker and Heartbeat as a broker would.
func (m *testMeta) registerBroker(id int32, host string, port int) {
	m.registerBrokerInRack(id, host, port, "")
}

// registerBrokerInRack is registerBroker with a broker.rack ("" for none).
func (m *testMeta) registerBrokerInRack(id int32, host string, port int, rack string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID = id
	reg.IncarnationID = [16]byte(metadata.NewUuid())
	if rack != "" {
		reg.Rack = &rack
	}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port, l.SecurityProtocol = "PLAINTEXT", host, uint16(port), 0
	reg.Listeners = append(reg.Listeners, l)
	recs, resp := m.cc.RegisterBroker(now, reg)
	if resp.ErrorCode != 0 {
		m.t.Fatalf("register broker %d: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	m.commitLocked(recs)
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, resp.BrokerEpoch, m.img.Offset()
	recs, hbResp := m.cc.Heartbeat(now, hb)
	if hbResp.ErrorCode != 0 || hbResp.IsFenced {
		m.t.Fatalf("unfence broker %d: %v fenced=%v", id, kerr.ErrorForCode(hbResp.ErrorCode), hbResp.IsFenced)
	}
	m.commitLocked(recs)
}

// commit commits records the test builds itself.
func (m *testMeta) commit(recs ...metadata.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commitLocked(recs)
}

// testCluster is one live broker: real storage in a temp dir, the real
// network server on 127.0.0.1, the in-process metadata quorum.
type testCluster struct {
	t      testing.TB
	dir    string
	cfg    *Config
	meta   *testMeta
	logs   *storage.Manager
	broker *Broker
	srv    *network.Server
	served chan error
	port   int
	addr   string
}

type clusterOpt func(*[]string)

// withConfig adds server.properties overrides.
func withConfig(kv ...string) clusterOpt {
	return func(o *[]string) { *o = append(*o, kv...) }
}

func newTestCluster(t testing.TB, opts ...clusterOpt) *testCluster {
	t.Helper()
	dir := t.TempDir()
	overrides := []string{"node.id=" + strconv.Itoa(testNodeID), "log.dirs=" + dir}
	for _, o := range opts {
		o(&overrides)
	}
	cfg, err := LoadConfig(nil, overrides)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, dir: dir, cfg: cfg, meta: newTestMeta(t)}
	checkNoLeaks(t) // registered first, so it runs after every other cleanup
	c.start(0)
	t.Cleanup(c.stop)
	return c
}

// start opens the storage, the broker and the server (on port, or any
// port when 0), and registers the broker on first start.
func (c *testCluster) start(port int) {
	t := c.t
	t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	logs, err := storage.OpenManager(storage.ManagerConfig{LogDirs: []string{c.dir}, Logger: logger,
		DisableLogCleaner: c.cfg.cleanerDisabled(), CleanerThreads: c.cfg.LogCleanerThreads, CleanerBackoff: cleanerBackoff(c.cfg.LogCleanerBackoff),
		CleanerDedupeBufferSize: c.cfg.LogCleanerDedupeBufferSize, DeleteBytesPerSecond: deleteBytesPerSecond(c.cfg.LogDeleteBytesPerSecond)})
	if err != nil {
		t.Fatal(err)
	}
	var srv *network.Server
	b, err := New(Options{
		NodeID: testNodeID, ClusterID: "keel-test-cluster", Config: c.cfg, Logs: logs,
		Metadata: c.meta, Controller: c.meta, Logger: logger,
		// Called on metadata updates only, once srv is set below.
		SetConnectionLimits:  func(l network.ConnectionLimits) { srv.SetConnectionLimits(l) },
		SetIPConnectionRates: func(r map[netip.Addr]int) { srv.SetIPConnectionCreationRates(r) },
		ListenerNames:        []string{"PLAINTEXT"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err = network.NewServer(network.Config{
		Listeners: []network.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: port, SecurityProtocol: network.Plaintext}},
		Handler:   b,
		Logger:    logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	c.logs, c.broker, c.srv = logs, b, srv
	c.port = srv.Addr("PLAINTEXT").(*net.TCPAddr).Port
	c.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port))
	c.meta.mu.Lock()
	c.meta.broker = b
	img := c.meta.img
	c.meta.mu.Unlock()
	if _, ok := img.Broker(testNodeID); !ok {
		c.meta.registerBrokerInRack(testNodeID, "127.0.0.1", c.port, c.cfg.BrokerRack)
	} else {
		b.ApplyMetadata(img, metadata.Changes{}) // a restart: the first call reconciles everything
	}
	c.served = make(chan error, 1)
	go func() { c.served <- srv.Serve() }()
}

// stop shuts the node down cleanly: broker (parked requests answer), then
// server, then storage.
func (c *testCluster) stop() {
	if c.srv == nil {
		return
	}
	c.meta.mu.Lock()
	c.meta.broker = nil
	c.meta.mu.Unlock()
	c.broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		c.t.Errorf("server shutdown: %v", err)
	}
	if err := <-c.served; !errors.Is(err, network.ErrServerClosed) {
		c.t.Errorf("serve: %v", err)
	}
	if err := c.logs.Close(); err != nil && len(c.logs.OfflineDirs()) == 0 {
		c.t.Errorf("close logs: %v", err)
	}
	c.srv = nil
}

// restart stops the node and starts it again on the same directory, port
// and metadata image.
func (c *testCluster) restart() {
	c.stop()
	c.start(c.port)
}

// clientOpts are the options every test client starts with.
func (c *testCluster) clientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(c.addr), kgo.MetadataMinAge(50 * time.Millisecond)}
}

// client returns a kgo client for the broker, closed at cleanup.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append(c.clientOpts(), opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// admin returns a kadm client for the broker.
func (c *testCluster) admin() *kadm.Client { return kadm.NewClient(c.client()) }

// createTopic creates a topic with the admin API and fails the test on
// error.
func (c *testCluster) createTopic(name string, partitions int32, configs map[string]*string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.admin().CreateTopic(ctx, partitions, 1, configs, name)
	if err != nil || resp.Err != nil {
		c.t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
}

// testWriter sends logs to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// checkNoLeaks fails the test if, once every cleanup has run, goroutines
// of the broker or the network server remain.
func checkNoLeaks(t testing.TB) {
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			var leaked []string
			for _, g := range strings.Split(stacks, "\n\n") {
				if strings.Contains(g, "keel/broker.(*Broker)") || strings.Contains(g, "keel/network.(*conn)") ||
					strings.Contains(g, "keel/network.(*Server)") {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// request sends a raw request through a kgo client to the broker.
func request[R kmsg.Response](t testing.TB, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

func tp(topic string, p int32) storage.TopicPartition {
	return storage.TopicPartition{Topic: topic, Partition: p}
}

// rawClient speaks the Kafka protocol over one TCP connection with exactly
// the versions and fields a test sets (kgo rewrites some, e.g. acks).
type rawClient struct {
	t    testing.TB
	conn net.Conn
	corr int32
}

func (c *testCluster) dialRaw(t testing.TB) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{t: t, conn: conn}
}

// send writes req (at req's version) and returns its correlation id.
func (r *rawClient) send(req kmsg.Request) int32 {
	r.t.Helper()
	return r.sendFrame(encodeFrame(req))
}

// sendFrame writes a frame encodeFrame made, with the next correlation id,
// and returns that id: a benchmark encodes its request once.
func (r *rawClient) sendFrame(frame []byte) int32 {
	r.t.Helper()
	r.corr++
	binary.BigEndian.PutUint32(frame[8:], uint32(r.corr))
	if _, err := r.conn.Write(frame); err != nil {
		r.t.Fatalf("write request: %v", err)
	}
	return r.corr
}

// encodeFrame is req as a size-prefixed request frame, correlation id 0.
func encodeFrame(req kmsg.Request) []byte {
	frame := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, 0)
	frame = binary.BigEndian.AppendUint16(frame, 4)
	frame = append(frame, "test"...)
	if req.IsFlexible() {
		frame = append(frame, 0) // no header tags
	}
	frame = req.AppendTo(frame)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
}

// receive reads the response to req.
func (r *rawClient) receive(req kmsg.Request, corr int32) kmsg.Response {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		r.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.conn, body); err != nil {
		r.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		r.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty header tags
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// roundTrip sends req and reads its response.
func roundTrip[R kmsg.Response](r *rawClient, req kmsg.Request) R {
	r.t.Helper()
	return r.receive(req, r.send(req)).(R)
}

// createAssigned creates a topic with a manual replica assignment (one
// partition per replica list) through the controller.
func (c *testCluster) createAssigned(name string, replicas ...[]int32) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for i, r := range replicas {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), r
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := c.meta.Forward(context.Background(), req)
	if err != nil {
		c.t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create %s: %v", name, kerr.ErrorForCode(code))
	}
}
