package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is the connection core shared by Producer, Consumer and Admin: it
// bootstraps from the seed brokers, keeps pipelined connections to each
// broker (one per connClass), caches metadata and group/transaction
// coordinators, and routes any kmsg.Request to a broker, the controller or a
// coordinator with retries.
//
// A Client is safe for concurrent use by any number of goroutines. It owns
// one background goroutine (the metadata refresher) and one reader goroutine
// per open connection; Close stops all of them.
type Client struct {
	cfg clientConfig

	// mu guards brokers and seeds (the map, not the connections inside,
	// which have their own locks) and coordinators.
	mu           sync.Mutex
	brokers      map[int32]*brokerHandle
	seeds        []*brokerHandle
	coordinators map[coordinatorKey]int32

	meta     atomic.Pointer[Metadata]
	metaMu   sync.Mutex // serializes metadata requests and snapshot merges
	interest sync.Map   // topic name -> struct{}: topics the refresher keeps fresh
	// features are the newest finalized feature levels any connection's
	// ApiVersions response gave (the highest epoch), as Java's ApiVersions
	// keeps them.
	features atomic.Pointer[finalizedFeatures]

	refreshCh  chan struct{}
	ctx        context.Context // cancelled by Close; bounds background requests
	cancel     context.CancelFunc
	closed     chan struct{}
	closeOnce  sync.Once
	background sync.WaitGroup
}

// connClass sorts a broker's requests onto connections of their own. A
// Kafka broker reads the next request from a connection only once it has
// answered the previous one (its SocketServer mutes the channel meanwhile),
// so on one shared connection a produce, a heartbeat or a metadata request
// would wait behind a long-poll Fetch (fetch.max.wait.ms) or a JoinGroup
// (up to the rebalance timeout). As franz-go does, produces, fetches and
// group joins each get a connection, and everything else shares one.
type connClass int

const (
	connNormal connClass = iota
	connProduce
	connFetch
	connGroup
	numConnClasses
)

// classOf is the connection class of a request key.
func classOf(key int16) connClass {
	switch key {
	case 0: // Produce
		return connProduce
	case 1: // Fetch
		return connFetch
	case 11, 14: // JoinGroup, SyncGroup
		return connGroup
	}
	return connNormal
}

// brokerHandle is one broker's address and its (lazily dialed)
// connections, one per connClass.
type brokerHandle struct {
	nodeID int32
	addr   string
	slots  [numConnClasses]connSlot
}

// connSlot is one connection of a broker. dialMu is held while dialing so
// that concurrent callers wait for one dial.
type connSlot struct {
	dialMu sync.Mutex
	connMu sync.Mutex
	conn   *brokerConn
}

// live returns the slot's connection unless there is none or it died.
func (s *connSlot) live() *brokerConn {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.conn != nil && !s.conn.isDead() {
		return s.conn
	}
	return nil
}

// Metadata is an immutable snapshot of what a Metadata response said, merged
// over time: brokers and controller from the latest response, topics from
// the latest response that named them. Never modify one.
type Metadata struct {
	ClusterID    string
	ControllerID int32
	Brokers      map[int32]BrokerMetadata
	Topics       map[string]*TopicMetadata
	// Fetched is when the brokers part was last refreshed.
	Fetched time.Time
}

// BrokerMetadata is one broker as Metadata lists it.
type BrokerMetadata struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
}

// Addr is host:port.
func (b BrokerMetadata) Addr() string {
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
}

// TopicMetadata is one topic as Metadata lists it. Err is the topic-level
// error (UNKNOWN_TOPIC_OR_PARTITION for a missing topic), nil when fine.
type TopicMetadata struct {
	Topic      string
	ID         [16]byte
	Internal   bool
	Err        error
	Partitions []PartitionMetadata // indexed by partition id
	Fetched    time.Time
}

// PartitionMetadata is one partition: its leader (-1 if none), leader epoch
// and replica sets. Err is the partition-level error
// (LEADER_NOT_AVAILABLE, ...), nil when fine.
type PartitionMetadata struct {
	Partition       int32
	Leader          int32
	LeaderEpoch     int32
	Replicas        []int32
	ISR             []int32
	OfflineReplicas []int32
	Err             error
}

// CoordinatorType says which coordinator FindCoordinator looks for.
type CoordinatorType int8

const (
	// GroupCoordinator leads the __consumer_offsets partition of a group.
	GroupCoordinator CoordinatorType = 0
	// TxnCoordinator leads the __transaction_state partition of a
	// transactional id.
	TxnCoordinator CoordinatorType = 1
)

type coordinatorKey struct {
	typ CoordinatorType
	key string
}

// NewClient builds a Client from the client options in opts (others are
// ignored) and bootstraps: it fetches cluster metadata from the first seed
// that answers, so a bad address fails here rather than on first use.
func NewClient(ctx context.Context, opts ...Opt) (*Client, error) {
	cfg, _ := splitOpts(opts)
	return newClient(ctx, cfg)
}

func newClient(ctx context.Context, cfg clientConfig) (*Client, error) {
	if len(cfg.seeds) == 0 {
		return nil, fmt.Errorf("new client: no seed brokers")
	}
	c := &Client{
		cfg:          cfg,
		brokers:      make(map[int32]*brokerHandle),
		coordinators: make(map[coordinatorKey]int32),
		refreshCh:    make(chan struct{}, 1),
		closed:       make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for i, s := range cfg.seeds {
		c.seeds = append(c.seeds, &brokerHandle{nodeID: int32(-1 - i), addr: s})
	}
	c.meta.Store(&Metadata{ControllerID: -1, Brokers: map[int32]BrokerMetadata{}, Topics: map[string]*TopicMetadata{}})
	if _, err := c.refreshMetadata(ctx, nil, false); err != nil {
		c.Close()
		return nil, fmt.Errorf("bootstrap from %v: %w", cfg.seeds, err)
	}
	c.background.Add(1)
	go c.metadataLoop()
	return c, nil
}

// Close closes every connection and stops the metadata refresher. Requests
// in flight fail with ErrClosed or ErrConnectionClosed. Safe to call more
// than once and from any goroutine; it returns when all goroutines the
// Client started have exited.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.cancel()
		c.background.Wait()
		c.mu.Lock()
		handles := append([]*brokerHandle(nil), c.seeds...)
		for _, b := range c.brokers {
			handles = append(handles, b)
		}
		c.mu.Unlock()
		for _, b := range handles {
			for _, conn := range b.takeConns() {
				conn.shutdown()
			}
		}
	})
}

func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// connect returns b's live connection of class cls, dialing if there is
// none.
func (c *Client) connect(ctx context.Context, b *brokerHandle, cls connClass) (*brokerConn, error) {
	slot := &b.slots[cls]
	if conn := slot.live(); conn != nil {
		return conn, nil
	}
	slot.dialMu.Lock()
	defer slot.dialMu.Unlock()
	if conn := slot.live(); conn != nil {
		return conn, nil
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	nc, err := dialBroker(ctx, &c.cfg, b.nodeID, b.addr)
	if err != nil {
		return nil, err
	}
	c.noteFeatures(nc.features)
	slot.connMu.Lock()
	old := slot.conn
	slot.conn = nc
	slot.connMu.Unlock()
	if old != nil {
		old.retire()
	}
	if c.isClosed() { // lost a race with Close: do not leak the reader
		nc.shutdown()
		return nil, ErrClosed
	}
	return nc, nil
}

// noteFeatures keeps f if it is newer than the finalized features known.
func (c *Client) noteFeatures(f *finalizedFeatures) {
	for f != nil {
		cur := c.features.Load()
		if cur != nil && cur.epoch >= f.epoch {
			return
		}
		if c.features.CompareAndSwap(cur, f) {
			return
		}
	}
}

// finalizedLevel is the cluster's finalized level of feature name as the
// newest ApiVersions response known gave it: 0 if not finalized, or if no
// broker has said (before the first connection, or brokers older than
// ApiVersions v3).
func (c *Client) finalizedLevel(name string) int16 {
	return c.features.Load().level(name)
}

// handle returns the broker with node id, from the latest metadata.
func (c *Client) handle(nodeID int32) (*brokerHandle, error) {
	c.mu.Lock()
	b := c.brokers[nodeID]
	c.mu.Unlock()
	if b == nil {
		return nil, fmt.Errorf("broker %d is not in the cluster metadata: %w", nodeID, ErrNoBrokers)
	}
	return b, nil
}

// BrokerRequest sends req once to broker nodeID and returns its response,
// without retrying (the response's own error codes are the caller's
// business). The request's version is set to the highest both sides
// support. A Produce with acks=0 returns (nil, nil) once written.
// Safe for concurrent use; requests to one broker are pipelined on its
// connection for the request's kind (connClass).
func (c *Client) BrokerRequest(ctx context.Context, nodeID int32, req kmsg.Request) (kmsg.Response, error) {
	b, err := c.handle(nodeID)
	if err != nil {
		return nil, err
	}
	return c.sendTo(ctx, b, req)
}

func (c *Client) sendTo(ctx context.Context, b *brokerHandle, req kmsg.Request) (kmsg.Response, error) {
	conn, err := c.connect(ctx, b, classOf(req.Key()))
	if err != nil {
		return nil, err
	}
	return conn.do(ctx, req)
}

// Request sends req to any broker (a random live one), retrying on another
// broker when the connection fails, up to RequestRetries times. Use it for
// requests any broker answers: Metadata, ListGroups on one broker,
// DescribeCluster, CreateTopics (brokers forward to the controller), ...
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.retry(ctx, func() (kmsg.Response, error) {
		return c.sendTo(ctx, c.anyBroker(), req)
	})
}

// ControllerRequest sends req to the controller Metadata names, refreshing
// metadata and retrying on transport errors. In KRaft clusters (Keel
// included) Metadata names a broker, which forwards to the active
// controller, as Kafka's admin client expects. The response's own error
// codes (NOT_CONTROLLER, ...) are the caller's business.
func (c *Client) ControllerRequest(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.retry(ctx, func() (kmsg.Response, error) {
		id := c.meta.Load().ControllerID
		b, err := c.handle(id)
		if err != nil {
			b = c.anyBroker()
		}
		return c.sendTo(ctx, b, req)
	})
}

// retry runs fn until it succeeds, fails with a non-retriable error, the
// context ends or RequestRetries is exhausted, backing off between tries.
// Transport failures also trigger a metadata refresh.
func (c *Client) retry(ctx context.Context, fn func() (kmsg.Response, error)) (kmsg.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := fn()
		if err == nil || !IsRetriable(err) || attempt >= c.cfg.requestRetries {
			return resp, err
		}
		c.TriggerMetadataRefresh()
		if werr := c.backoff(ctx, attempt); werr != nil {
			return nil, fmt.Errorf("%w (after %v)", werr, err)
		}
	}
}

// backoff sleeps retry.backoff.ms * 2^attempt (capped, ±20% jitter), or
// until ctx ends or the client closes.
func (c *Client) backoff(ctx context.Context, attempt int) error {
	d := c.backoffFor(attempt)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return ErrClosed
	}
}

func (c *Client) backoffFor(attempt int) time.Duration {
	d := c.cfg.retryBackoff
	for i := 0; i < attempt && d < c.cfg.retryBackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.retryBackoffMax)
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * jitter)
}

// anyBroker picks a random known broker, or a seed before metadata is known.
func (c *Client) anyBroker() *brokerHandle {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.brokers); n > 0 {
		i := rand.IntN(n)
		for _, b := range c.brokers {
			if i == 0 {
				return b
			}
			i--
		}
	}
	return c.seeds[rand.IntN(len(c.seeds))]
}

// Metadata returns the cached metadata snapshot, which may be stale. Never
// modify it.
func (c *Client) Metadata() *Metadata { return c.meta.Load() }

// FetchMetadata requests metadata for topics (all topics when topics is
// nil, none but brokers when empty and non-nil), merges it into the cache
// and returns the new snapshot.
func (c *Client) FetchMetadata(ctx context.Context, topics []string) (*Metadata, error) {
	return c.refreshMetadata(ctx, topics, topics == nil)
}

// TopicMetadata returns topic's cached metadata, fetching it if the cache
// has none, and keeps it fresh from then on (metadata.max.age.ms). A topic
// that does not exist yields an *Error with UNKNOWN_TOPIC_OR_PARTITION.
func (c *Client) TopicMetadata(ctx context.Context, topic string) (*TopicMetadata, error) {
	// Registered even on a cache hit: the bootstrap fills the cache with
	// every topic, and a topic in use must be refreshed (leader moves).
	c.interest.Store(topic, struct{}{})
	if t := c.meta.Load().Topics[topic]; t != nil && t.Err == nil {
		return t, nil
	}
	m, err := c.refreshMetadata(ctx, []string{topic}, false)
	if err != nil {
		return nil, err
	}
	t := m.Topics[topic]
	if t == nil {
		return nil, fmt.Errorf("metadata for %s: %w", topic, ErrUnknownTopicOrPartition)
	}
	if t.Err != nil {
		return t, fmt.Errorf("metadata for %s: %w", topic, t.Err)
	}
	return t, nil
}

// PartitionLeader returns the leader of topic-partition from the cache
// (fetching the topic if unknown), or an error when there is none.
func (c *Client) PartitionLeader(ctx context.Context, topic string, partition int32) (int32, error) {
	t, err := c.TopicMetadata(ctx, topic)
	if err != nil {
		return -1, err
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, fmt.Errorf("%s-%d: %w", topic, partition, ErrUnknownTopicOrPartition)
	}
	p := t.Partitions[partition]
	if p.Leader < 0 {
		if p.Err != nil {
			return -1, fmt.Errorf("%s-%d: %w", topic, partition, p.Err)
		}
		return -1, fmt.Errorf("%s-%d has no leader: %w", topic, partition, codeError(5))
	}
	return p.Leader, nil
}

// TriggerMetadataRefresh asks the background refresher to refresh the
// topics in use soon (rate-limited by MetadataMinAge). It never blocks. Call
// it on NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and similar.
func (c *Client) TriggerMetadataRefresh() {
	select {
	case c.refreshCh <- struct{}{}:
	default:
	}
}

// metadataLoop refreshes the topics in use every metadata.max.age.ms and
// whenever TriggerMetadataRefresh asks, at most every metadata min age.
func (c *Client) metadataLoop() {
	defer c.background.Done()
	ticker := time.NewTicker(c.cfg.metadataMaxAge)
	defer ticker.Stop()
	var last time.Time
	for {
		select {
		case <-c.closed:
			return
		case <-ticker.C:
		case <-c.refreshCh:
			if wait := c.cfg.metadataMinAge - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-c.closed:
					t.Stop()
					return
				}
			}
		}
		last = time.Now()
		var topics []string
		c.interest.Range(func(k, _ any) bool {
			topics = append(topics, k.(string))
			return true
		})
		if topics == nil {
			topics = []string{}
		}
		// c.ctx ends at Close, which must not wait for a slow request.
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.requestTimeout)
		_, _ = c.refreshMetadata(ctx, topics, false)
		cancel()
	}
}

// refreshMetadata issues one Metadata request (with retries over brokers)
// and merges the answer into the cache. all asks for every topic and
// replaces the topic set; otherwise topics are merged in.
func (c *Client) refreshMetadata(ctx context.Context, topics []string, all bool) (*Metadata, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = c.cfg.allowAutoTopicCreation
	if !all {
		req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	kresp, err := c.retryBootstrap(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if err := ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return c.mergeMetadata(resp, all), nil
}

// retryBootstrap sends a Metadata request to a known broker or, failing
// that, to each seed in turn.
func (c *Client) retryBootstrap(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var lastErr error
	for attempt := 0; attempt <= c.cfg.requestRetries; attempt++ {
		c.mu.Lock()
		candidates := make([]*brokerHandle, 0, len(c.brokers)+len(c.seeds))
		for _, b := range c.brokers {
			candidates = append(candidates, b)
		}
		rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
		candidates = append(candidates, c.seeds...)
		c.mu.Unlock()
		for _, b := range candidates {
			resp, err := c.sendTo(ctx, b, req)
			if err == nil {
				return resp, nil
			}
			lastErr = err
			if ctx.Err() != nil || errors.Is(err, ErrClosed) || !IsRetriable(err) {
				return nil, err // e.g. SASL_AUTHENTICATION_FAILED: retrying will not help
			}
		}
		if err := c.backoff(ctx, attempt); err != nil {
			return nil, fmt.Errorf("%w (last: %v)", err, lastErr)
		}
	}
	return nil, fmt.Errorf("%w: %v", ErrNoBrokers, lastErr)
}

// mergeMetadata builds the next snapshot and reconciles broker handles:
// new brokers are added, moved ones re-addressed, departed ones closed.
func (c *Client) mergeMetadata(resp *kmsg.MetadataResponse, all bool) *Metadata {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	now := time.Now()
	old := c.meta.Load()
	m := &Metadata{
		ControllerID: resp.ControllerID,
		Brokers:      make(map[int32]BrokerMetadata, len(resp.Brokers)),
		Topics:       make(map[string]*TopicMetadata, len(old.Topics)+len(resp.Topics)),
		Fetched:      now,
	}
	if resp.ClusterID != nil {
		m.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		bm := BrokerMetadata{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bm.Rack = *b.Rack
		}
		m.Brokers[b.NodeID] = bm
	}
	if !all {
		for k, v := range old.Topics {
			m.Topics[k] = v
		}
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		tm := &TopicMetadata{Topic: *t.Topic, ID: t.TopicID, Internal: t.IsInternal, Err: ErrorForCode(t.ErrorCode), Fetched: now}
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		for _, p := range t.Partitions {
			if int(p.Partition) != len(tm.Partitions) {
				// A gap: keep the slice indexable by id with a
				// leaderless placeholder.
				for int(p.Partition) > len(tm.Partitions) {
					tm.Partitions = append(tm.Partitions, PartitionMetadata{Partition: int32(len(tm.Partitions)), Leader: -1, LeaderEpoch: -1, Err: codeError(5)})
				}
				if int(p.Partition) < len(tm.Partitions) {
					continue
				}
			}
			tm.Partitions = append(tm.Partitions, PartitionMetadata{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, OfflineReplicas: p.OfflineReplicas,
				Err: ErrorForCode(p.ErrorCode),
			})
		}
		m.Topics[tm.Topic] = tm
	}
	c.meta.Store(m)

	var stale []*brokerConn
	c.mu.Lock()
	for id, bm := range m.Brokers {
		b := c.brokers[id]
		if b != nil && b.addr == bm.Addr() {
			continue
		}
		if b != nil {
			stale = append(stale, b.takeConns()...)
		}
		c.brokers[id] = &brokerHandle{nodeID: id, addr: bm.Addr()}
	}
	for id, b := range c.brokers {
		if _, ok := m.Brokers[id]; !ok {
			stale = append(stale, b.takeConns()...)
			delete(c.brokers, id)
		}
	}
	c.mu.Unlock()
	for _, conn := range stale {
		conn.retire()
	}
	return m
}

// takeConns empties b's slots and returns the connections they held.
func (b *brokerHandle) takeConns() []*brokerConn {
	var out []*brokerConn
	for i := range b.slots {
		s := &b.slots[i]
		s.connMu.Lock()
		if s.conn != nil {
			out = append(out, s.conn)
		}
		s.conn = nil
		s.connMu.Unlock()
	}
	return out
}

// Coordinator returns the node id of the coordinator for key (a group id
// or a transactional id), from the cache or through FindCoordinator,
// retrying while the coordinator is not available.
func (c *Client) Coordinator(ctx context.Context, typ CoordinatorType, key string) (int32, error) {
	ck := coordinatorKey{typ, key}
	c.mu.Lock()
	id, ok := c.coordinators[ck]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	for attempt := 0; ; attempt++ {
		id, err := c.findCoordinator(ctx, typ, key)
		if err == nil {
			c.mu.Lock()
			c.coordinators[ck] = id
			c.mu.Unlock()
			return id, nil
		}
		if !IsRetriable(err) || attempt >= c.cfg.requestRetries {
			return -1, err
		}
		if werr := c.backoff(ctx, attempt); werr != nil {
			return -1, fmt.Errorf("%w (after %v)", werr, err)
		}
	}
}

func (c *Client) findCoordinator(ctx context.Context, typ CoordinatorType, key string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = int8(typ)
	req.CoordinatorKey = key            // v0-v3
	req.CoordinatorKeys = []string{key} // v4+ (KIP-699)
	kresp, err := c.Request(ctx, req)
	if err != nil {
		return -1, fmt.Errorf("find coordinator for %q: %w", key, err)
	}
	resp := kresp.(*kmsg.FindCoordinatorResponse)
	code, msg, node, host, port := resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port
	if resp.Version >= 4 {
		if len(resp.Coordinators) != 1 {
			return -1, fmt.Errorf("find coordinator for %q: %d coordinators in the response", key, len(resp.Coordinators))
		}
		co := resp.Coordinators[0]
		code, msg, node, host, port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
	}
	if err := errorWithMessage(code, msg); err != nil {
		return -1, fmt.Errorf("find coordinator for %q: %w", key, err)
	}
	// The coordinator may be a broker our metadata has not seen yet.
	c.mu.Lock()
	if _, ok := c.brokers[node]; !ok {
		c.brokers[node] = &brokerHandle{nodeID: node, addr: net.JoinHostPort(host, strconv.Itoa(int(port)))}
	}
	c.mu.Unlock()
	return node, nil
}

// InvalidateCoordinator forgets the cached coordinator for key, so the next
// call looks it up again. Call it on NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE in a response body.
func (c *Client) InvalidateCoordinator(typ CoordinatorType, key string) {
	c.mu.Lock()
	delete(c.coordinators, coordinatorKey{typ, key})
	c.mu.Unlock()
}

// CoordinatorRequest sends req to the coordinator for key (FindCoordinator,
// cached). When the connection fails or the response's top-level error is
// NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS
// (for JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
// OffsetFetch, OffsetDelete, TxnOffsetCommit), the coordinator is looked up
// again and the request retried, up to RequestRetries times. Any other
// error code in the response is returned to the caller inside the response.
func (c *Client) CoordinatorRequest(ctx context.Context, typ CoordinatorType, key string, req kmsg.Request) (kmsg.Response, error) {
	return c.retry(ctx, func() (kmsg.Response, error) {
		id, err := c.Coordinator(ctx, typ, key)
		if err != nil {
			return nil, err
		}
		resp, err := c.BrokerRequest(ctx, id, req)
		if err != nil {
			c.InvalidateCoordinator(typ, key)
			return nil, err
		}
		if code := coordinatorErrorCode(resp); code == 14 || code == 15 || code == 16 {
			if code != 14 {
				c.InvalidateCoordinator(typ, key)
			}
			return resp, fmt.Errorf("%s to coordinator %d: %w", kmsg.NameForKey(req.Key()), id, codeError(code))
		}
		return resp, nil
	})
}

// coordinatorErrorCode digs out the error code that says "wrong
// coordinator" in the coordinator APIs' responses.
func coordinatorErrorCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode
	case *kmsg.OffsetDeleteResponse:
		return r.ErrorCode
	case *kmsg.OffsetFetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 14 || p.ErrorCode == 15 || p.ErrorCode == 16 {
					return p.ErrorCode
				}
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 14 || p.ErrorCode == 15 || p.ErrorCode == 16 {
					return p.ErrorCode
				}
			}
		}
	}
	return 0
}
