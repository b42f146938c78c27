// Package broker is everything a Keel broker does: the Kafka client APIs
// (one handle_<api>.go file per API key, each opening with what it supports
// per version), the replica manager (which partitions this node hosts, leader
// or follower, high watermark), the produce and fetch purgatories, and fetch
// sessions (KIP-227). The node (node.go) assembles it with the metadata
// quorum, the controller and the network server.
//
// The broker never decides cluster metadata: it reads committed images
// (MetadataView, ApplyMetadata) and forwards metadata-changing requests to
// the active controller (ControllerForwarder). It never blocks a connection:
// anything slow (acks=all, long-poll fetches, controller round trips)
// returns a network.Deferred completed by a goroutine the Broker owns.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/storage"
)

// MetadataView is the node's view of the committed metadata log.
type MetadataView interface {
	// Image is the latest image the node has published.
	//
	// Concurrency: safe from any goroutine; never blocks.
	Image() *metadata.Image
	// WaitForOffset blocks until the local image has applied offset, or ctx ends.
	WaitForOffset(ctx context.Context, offset int64) error
}

// ControllerForwarder sends a metadata-changing request (CreateTopics,
// DeleteTopics, CreatePartitions, IncrementalAlterConfigs, AlterConfigs,
// AllocateProducerIds, ...) to the active controller and returns its
// response once the records are committed AND applied locally
// (MetadataView.Image has them; the broker then also waits, briefly, for
// its own ApplyMetadata of that offset before answering the client).
// Errors are transport errors (the broker then answers with NOT_CONTROLLER,
// or REQUEST_TIMED_OUT when ctx's deadline passed, as Kafka's forwarding
// does).
//
// Concurrency: called from goroutines the Broker owns, concurrently; it may
// block until ctx ends.
type ControllerForwarder interface {
	Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Options configure a Broker. NodeID, Config, Logs, Metadata and Controller
// are required.
type Options struct {
	NodeID     int32
	ClusterID  string
	Config     *Config
	Logs       *storage.Manager
	Metadata   MetadataView
	Controller ControllerForwarder
	// InterBrokerDial opens connections to other brokers' inter-broker
	// listeners (replica fetchers, transaction markers): TLS when that
	// listener is SSL. Nil: plain TCP.
	InterBrokerDial DialFunc
	// tls is the node's SSL listeners, whose keystores and truststores
	// this broker's dynamic configs may replace; nil: none.
	tls *nodeTLS
	// SetConnectionLimits, if set, applies max.connections, the
	// listeners' own limits, max.connections.per.ip and its overrides set
	// dynamically to the node's listeners
	// (network.Server.SetConnectionLimits).
	SetConnectionLimits func(network.ConnectionLimits)
	// SetIPConnectionRates, if set, applies the ip entities'
	// connection_creation_rate quotas to the node's listeners
	// (network.Server.SetIPConnectionCreationRates).
	SetIPConnectionRates func(map[netip.Addr]int)
	// ListenerNames are the node's listeners, whose own connection
	// limits (listener.name.<listener>.max.connections) the broker
	// applies.
	ListenerNames []string
	// LogDirIDs are the directory ids of Logs' log dirs, by path as in
	// log.dirs (KIP-858): the broker reports to the controller which dir
	// each of its replicas is in (dir_assignments.go). None: it does not.
	LogDirIDs map[string]metadata.Uuid
	// Logger receives the broker's logs; nil discards them.
	Logger hclog.Logger
	// Now is the clock (tests substitute it); time.Now when nil.
	Now func() time.Time
}

// Broker serves the Kafka client APIs of one node. It implements
// network.Handler.
//
// State ownership:
//   - image and partitions are published by ApplyMetadata (one goroutine,
//     serialised by applyMu) and read lock-free by every handler;
//   - each partition's mutable state is owned as written at its struct;
//   - fetch sessions are owned by sessions (its own mutex);
//   - goroutines (purgatory waiters, controller forwards, follower
//     fetchers, the ISR check, AlterPartition calls) are started only
//     through spawn, counted in wg and stopped by Close.
//
// Lock ordering: applyMu, then a partition's producerMu, then its hwMu,
// then its replicasMu, then a watchList's mu (storage's own locks are
// innermost); applyMu, then replicaFetchers.mu, then a fetcher's mu, then
// a partition's hwMu (fetcher.go); the session
// cache's mu before a session's mu, and neither with any of the others;
// appliedMu and autoMu alone.
type Broker struct {
	nodeID    int32
	clusterID string
	cfg       *Config
	logs      *storage.Manager
	meta      MetadataView
	ctrl      ControllerForwarder
	tls       *nodeTLS // the node's SSL listeners (nil: none)
	// setConnLimits is Options.SetConnectionLimits; connLimits the
	// settings last acted on (applied, refused or being resolved;
	// applyMu); connLimitsGen numbers them, so that a resolution that
	// finishes after a newer change applies nothing (connLimitsMu).
	setConnLimits func(network.ConnectionLimits)
	// setIPRates is Options.SetIPConnectionRates; ipRates the quotas last
	// applied (applyMu).
	setIPRates    func(map[netip.Addr]int)
	ipRates       map[netip.Addr]int
	listenerNames []string // Options.ListenerNames
	connLimits    [6]string
	connLimitsMu  sync.Mutex
	connLimitsGen uint64
	// hostLookup, if set, resolves the host names of
	// max.connections.per.ip.overrides (tests substitute a slow one).
	hostLookup atomic.Pointer[func(ctx context.Context, host string) ([]string, error)]
	dial       DialFunc // to other brokers' inter-broker listeners
	log        hclog.Logger
	now        func() time.Time

	// controllerListeners are the listeners this handler does not serve
	// (controller.listener.names): the node routes them elsewhere.
	controllerListeners map[string]bool
	// configs describes this node's configs (DescribeConfigs) and
	// resolves a topic config's effective value.
	configs *nodeConfigs
	// leaderQuota and followerQuota are the replication throttles
	// (quota.go).
	leaderQuota, followerQuota *rateQuota
	// producerQuotas, consumerQuotas and requestQuotas enforce client
	// quotas (client_quota.go).
	producerQuotas, consumerQuotas, requestQuotas *clientQuotas
	mutationQuotas                                *mutationQuotas // controller_mutation_rate (mutation_quota.go)
	// authorizer checks requests against the ACLs (authz.go); nil without
	// authorizer.class.name. denialLog throttles its denial lines.
	authorizer *metadata.Authorizer
	denialLog  logThrottle

	// applyMu serialises ApplyMetadata; initialized is guarded by it.
	applyMu     sync.Mutex
	initialized bool
	// caughtUp is set (under applyMu) by reconcileStrayLogsLocked, once
	// the image has reached caughtUpAt, the metadata offset at which the
	// controller said this node had caught up (-1 before it has said so).
	// ready is closed then.
	caughtUp   bool
	caughtUpAt int64
	ready      chan struct{}
	// image is the last image ApplyMetadata published (nil before).
	image atomic.Pointer[metadata.Image]
	// partitions are the partitions this node hosts, replaced copy-on-write
	// by ApplyMetadata.
	partitions atomic.Pointer[partitionTable]
	// isrStarted is whether isrLoop runs (guarded by applyMu).
	isrStarted bool
	// fetchers are the follower fetchers, one per leader (fetcher.go).
	fetchers *replicaFetchers
	// flusher group-commits the durable mode's fsyncs (durable.go).
	flusher *flusher
	// metrics are the counters /metrics shows (metrics.go).
	metrics *brokerMetrics
	// isrNudge asks isrLoop for an ISR check now.
	isrNudge chan struct{}
	// dirAssign reports replicas' log dirs (dir_assignments.go).
	dirAssign *dirAssigner
	// unplaced are the replicas the metadata places here whose log may be
	// in a log dir offline, so that none is created (mayCreateLog);
	// guarded by applyMu, counted for /metrics by unplacedCount.
	unplaced      map[storage.TopicPartition]bool
	unplacedCount atomic.Int64
	// appliedMu guards applied, closed and replaced after every
	// ApplyMetadata, so that forwarded requests can wait for their records.
	appliedMu sync.Mutex
	applied   chan struct{}

	sessions *fetchSessionCache
	// producerIDs is the block of producer ids InitProducerId hands out.
	producerIDs producerIDBlock
	// groups is the group coordinator (coordinator.go).
	groups *groupCoordinator
	// txns is the transaction coordinator (txn_coordinator.go),
	// txnMarkerConns its connections to partition leaders, and
	// txnVerifyConns a leader's to transaction coordinators
	// (txn_verify.go).
	txns           *txnCoordinator
	txnMarkerConns brokerConns
	txnVerifyConns brokerConns
	txnVerifyLog   logThrottle // coordinators that cannot be asked

	// autoCreating holds the topic names whose auto-creation is in flight.
	autoMu       sync.Mutex
	autoCreating map[string]bool

	// ctx is cancelled by Close: forwarded requests and waiters give up.
	ctx    context.Context
	cancel context.CancelFunc

	goMu   sync.Mutex // guards closed and wg.Add
	closed bool
	wg     sync.WaitGroup
	// parked holds the requests waiting in the purgatory (purgatory.go).
	parked parkedSet
}

// New returns a Broker serving nothing until the node calls ApplyMetadata
// with the first image.
func New(opts Options) (*Broker, error) {
	switch {
	case opts.Logs == nil:
		return nil, errors.New("broker: Options.Logs is required")
	case opts.Metadata == nil:
		return nil, errors.New("broker: Options.Metadata is required")
	case opts.Controller == nil:
		return nil, errors.New("broker: Options.Controller is required")
	case opts.NodeID < 0:
		return nil, fmt.Errorf("broker: node id %d", opts.NodeID)
	}
	cfg := opts.Config
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(nil, nil); err != nil {
			return nil, err
		}
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		caughtUpAt:          -1,
		ready:               make(chan struct{}),
		nodeID:              opts.NodeID,
		clusterID:           opts.ClusterID,
		dial:                opts.InterBrokerDial,
		tls:                 opts.tls,
		setConnLimits:       opts.SetConnectionLimits,
		setIPRates:          opts.SetIPConnectionRates,
		listenerNames:       opts.ListenerNames,
		cfg:                 cfg,
		logs:                opts.Logs,
		meta:                opts.Metadata,
		ctrl:                opts.Controller,
		log:                 opts.Logger.Named("broker"),
		now:                 opts.Now,
		controllerListeners: map[string]bool{},
		configs:             newNodeConfigs(opts.NodeID, cfg),
		autoCreating:        map[string]bool{},
		ctx:                 ctx,
		cancel:              cancel,
		applied:             make(chan struct{}),
		isrNudge:            make(chan struct{}, 1),
		leaderQuota:         newRateQuota(cfg.replicationQuotaWindows()),
		followerQuota:       newRateQuota(cfg.replicationQuotaWindows()),
		producerQuotas:      newClientQuotas(metadata.QuotaProducerByteRate, cfg.clientQuotaWindows()),
		consumerQuotas:      newClientQuotas(metadata.QuotaConsumerByteRate, cfg.clientQuotaWindows()),
		requestQuotas:       newRequestQuotas(cfg.clientQuotaWindows()),
		mutationQuotas:      newMutationQuotas(quotaWindows{samples: cfg.ControllerQuotaWindowNum, window: time.Duration(cfg.ControllerQuotaWindowSizeSeconds) * time.Second}),
		authorizer:          newAuthorizer(cfg),
		metrics:             newBrokerMetrics(),
		txnMarkerConns:      brokerConns{dial: opts.InterBrokerDial, clientID: "keel-txn-markers"},
		txnVerifyConns:      brokerConns{dial: opts.InterBrokerDial, clientID: "keel-txn-verify"},
	}
	b.fetchers = newReplicaFetchers(b)
	b.flusher = newFlusher(b)
	b.dirAssign = newDirAssigner(opts.LogDirIDs)
	b.unplaced = map[storage.TopicPartition]bool{}
	b.groups = newGroupCoordinator(b)
	b.txns = newTxnCoordinator(b)
	for _, l := range cfg.ControllerListenerNames {
		b.controllerListeners[l] = true
	}
	b.sessions = newFetchSessionCache(opts.Config.FetchSessionCacheSlots, defaultFetchSessionEviction, opts.Now)
	b.partitions.Store(&partitionTable{byTP: map[storage.TopicPartition]*partition{}})
	return b, nil
}

// spawn runs f on a goroutine the Broker owns, unless Close has begun
// (then it reports false and f never runs).
func (b *Broker) spawn(f func()) bool {
	if !b.enter() {
		return false
	}
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// enter counts the calling goroutine as one the Broker owns (Close waits
// for it; the caller must call b.wg.Done), unless Close has begun.
func (b *Broker) enter() bool {
	b.goMu.Lock()
	defer b.goMu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

// Close stops the broker's goroutines: parked fetches complete at once with
// what they have, parked produces with REQUEST_TIMED_OUT, forwarded
// requests are cancelled (NOT_CONTROLLER). It waits for all of them.
// Requests handled after Close are still answered, but nothing parks any
// more, and ApplyMetadata keeps working. Logs are not closed: the node
// closes the storage.Manager after Close and after the network server
// stopped. Call Close before (or while) the server drains: a drain waits
// for parked requests, which would otherwise hold it for up to their
// max.wait.ms or produce timeout.
//
// Concurrency: safe from any goroutine, more than once.
func (b *Broker) Close() error {
	b.goMu.Lock()
	already := b.closed
	b.closed = true
	b.goMu.Unlock()
	if !already {
		b.cancel()
		// Parked requests answer with what they have (fetches) or
		// REQUEST_TIMED_OUT (produces), as at their deadline.
		for _, w := range b.parked.drain() {
			w.attempt(true)
		}
	}
	b.wg.Wait()
	b.txnMarkerConns.close()
	b.txnVerifyConns.close()
	return nil
}

// closing reports whether Close has begun.
func (b *Broker) closing() <-chan struct{} { return b.ctx.Done() }

// SupportedVersions implements network.Handler: the versions Handle serves
// on a listener. It agrees with ApiVersions except for Produce, which
// ApiVersions advertises from v0 while v0–v2 are refused (KAFKA-18659).
//
// Concurrency: safe from any goroutine; never blocks.
func (b *Broker) SupportedVersions(listener string, key int16) (min, max int16, ok bool) {
	if b.controllerListeners[listener] {
		return 0, 0, false
	}
	if key < 0 || int(key) >= len(apiTable) || !apiTable[key].served {
		return 0, 0, false
	}
	a := &apiTable[key]
	return a.min, a.max, true
}

// Handle implements network.Handler: it serves one request, returning a
// Response, a Deferred (completed by a purgatory or a controller forward)
// or nil (acks=0 Produce), throttled by the client's request_percentage
// quota if it has one (client_quota.go).
//
// Concurrency: called on each connection's reader goroutine; never blocks
// on replication, long polls or the controller.
func (b *Broker) Handle(ctx context.Context, req *network.Request) network.Result {
	return b.throttleRequest(req, b.handle(ctx, req))
}

// handle authorizes a request, if there is an authorizer, and serves it.
func (b *Broker) handle(ctx context.Context, req *network.Request) network.Result {
	if b.authorizer != nil {
		deny, post := b.authorize(req, b.authzFor(req))
		if deny != nil {
			return &network.Response{Msg: deny}
		}
		if post != nil {
			return network.Then(b.serve(ctx, req), post)
		}
	}
	return b.serve(ctx, req)
}

// serve dispatches a request (authorized, if there is an authorizer) to
// its handler.
func (b *Broker) serve(ctx context.Context, req *network.Request) network.Result {
	switch m := req.Msg.(type) {
	case *kmsg.ProduceRequest:
		return b.handleProduce(ctx, req, m)
	case *kmsg.FetchRequest:
		return b.handleFetch(ctx, req, m)
	case *kmsg.ListOffsetsRequest:
		return respond(b.handleListOffsets(m))
	case *kmsg.MetadataRequest:
		return respond(b.handleMetadata(req, m))
	case *kmsg.ApiVersionsRequest:
		return respond(b.handleApiVersions(req, m))
	case *kmsg.CreateTopicsRequest:
		return b.handleCreateTopics(ctx, req, m)
	case *kmsg.DeleteTopicsRequest:
		return b.handleDeleteTopics(ctx, req, m)
	case *kmsg.DeleteRecordsRequest:
		return respond(b.handleDeleteRecords(m))
	case *kmsg.OffsetForLeaderEpochRequest:
		return respond(b.handleOffsetForLeaderEpoch(m))
	case *kmsg.DescribeConfigsRequest:
		return respond(b.handleDescribeConfigs(m))
	case *kmsg.AlterConfigsRequest:
		return b.handleAlterConfigs(ctx, m)
	case *kmsg.DescribeLogDirsRequest:
		return respond(b.handleDescribeLogDirs(m))
	case *kmsg.AlterReplicaLogDirsRequest:
		return respond(b.handleAlterReplicaLogDirs(m))
	case *kmsg.CreatePartitionsRequest:
		return b.handleCreatePartitions(ctx, req, m)
	case *kmsg.IncrementalAlterConfigsRequest:
		return b.handleIncrementalAlterConfigs(ctx, m)
	case *kmsg.DescribeClusterRequest:
		return respond(b.handleDescribeCluster(req, m))
	case *kmsg.DescribeTopicPartitionsRequest:
		return respond(b.handleDescribeTopicPartitions(req, m))
	case *kmsg.ListConfigResourcesRequest:
		return respond(b.handleListConfigResources(req, m))
	case *kmsg.InitProducerIDRequest:
		return b.handleInitProducerID(ctx, req, m)
	case *kmsg.AddPartitionsToTxnRequest:
		return b.handleAddPartitionsToTxn(m)
	case *kmsg.AddOffsetsToTxnRequest:
		return b.handleAddOffsetsToTxn(m)
	case *kmsg.EndTxnRequest:
		return b.handleEndTxn(m)
	case *kmsg.WriteTxnMarkersRequest:
		return b.handleWriteTxnMarkers(ctx, m)
	case *kmsg.TxnOffsetCommitRequest:
		return b.handleTxnOffsetCommit(ctx, m)
	case *kmsg.DescribeTransactionsRequest:
		return b.handleDescribeTransactions(m)
	case *kmsg.ListTransactionsRequest:
		return b.handleListTransactions(m)
	case *kmsg.ElectLeadersRequest:
		return b.handleElectLeaders(ctx, m)
	case *kmsg.UnregisterBrokerRequest:
		return b.handleUnregisterBroker(ctx, m)
	case *kmsg.UpdateFeaturesRequest:
		return b.handleUpdateFeatures(ctx, m)
	case *kmsg.DescribeProducersRequest:
		return respond(b.handleDescribeProducers(m))
	case *kmsg.DescribeACLsRequest:
		return respond(b.handleDescribeAcls(m))
	case *kmsg.CreateACLsRequest:
		return b.handleCreateAcls(ctx, m)
	case *kmsg.DeleteACLsRequest:
		return b.handleDeleteAcls(ctx, m)
	case *kmsg.AlterClientQuotasRequest:
		return b.handleAlterClientQuotas(ctx, m)
	case *kmsg.DescribeClientQuotasRequest:
		return respond(b.handleDescribeClientQuotas(m))
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return b.handleAlterUserScramCredentials(ctx, m)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return respond(b.handleDescribeUserScramCredentials(m))
	case *kmsg.SASLHandshakeRequest:
		return respond(handleSaslHandshake(m))
	case *kmsg.SASLAuthenticateRequest:
		return respond(handleSaslAuthenticate(m))
	case *kmsg.CreateDelegationTokenRequest:
		return b.handleCreateDelegationToken(ctx, req, m)
	case *kmsg.RenewDelegationTokenRequest:
		return b.handleRenewDelegationToken(ctx, req, m)
	case *kmsg.ExpireDelegationTokenRequest:
		return b.handleExpireDelegationToken(ctx, req, m)
	case *kmsg.DescribeDelegationTokenRequest:
		return respond(b.handleDescribeDelegationToken(req, m))
	case *kmsg.AlterPartitionAssignmentsRequest:
		return b.handleAlterPartitionReassignments(ctx, m)
	case *kmsg.ListPartitionReassignmentsRequest:
		return b.handleListPartitionReassignments(ctx, m)
	case *kmsg.DescribeQuorumRequest:
		return b.handleDescribeQuorum(ctx, m)
	case *kmsg.AddRaftVoterRequest:
		return b.forward(ctx, m, addVoterTimeout(m)+5*time.Second, func(code int16, msg string) kmsg.Response {
			resp := m.ResponseKind().(*kmsg.AddRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
			return resp
		})
	case *kmsg.RemoveRaftVoterRequest:
		return b.forward(ctx, m, removeVoterTimeout+5*time.Second, func(code int16, msg string) kmsg.Response {
			resp := m.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
			return resp
		})
	case *kmsg.FindCoordinatorRequest:
		return respond(b.handleFindCoordinator(req, m))
	case *kmsg.JoinGroupRequest:
		return b.handleJoinGroup(req, m)
	case *kmsg.SyncGroupRequest:
		return b.handleSyncGroup(m)
	case *kmsg.HeartbeatRequest:
		return b.handleHeartbeat(m)
	case *kmsg.LeaveGroupRequest:
		return b.handleLeaveGroup(m)
	case *kmsg.OffsetCommitRequest:
		return b.handleOffsetCommit(m)
	case *kmsg.OffsetFetchRequest:
		return b.handleOffsetFetch(ctx, m)
	case *kmsg.OffsetDeleteRequest:
		return b.handleOffsetDelete(m)
	case *kmsg.DescribeGroupsRequest:
		return b.handleDescribeGroups(ctx, m)
	case *kmsg.ListGroupsRequest:
		return b.handleListGroups(ctx, m)
	case *kmsg.DeleteGroupsRequest:
		return b.handleDeleteGroups(ctx, m)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		var describable func(string) bool
		if b.authorizer != nil {
			z := b.authzFor(req)
			describable = func(topic string) bool { return z.quiet(opDescribe, kmsg.ACLResourceTypeTopic, topic) }
		}
		return b.handleConsumerGroupHeartbeat(req, m, describable)
	case *kmsg.ConsumerGroupDescribeRequest:
		return b.handleConsumerGroupDescribe(m)
	}
	// SupportedVersions refuses every other key, so this is a bug; close
	// the connection rather than leave the client waiting.
	b.log.Error("no handler for request", "api_key", req.Header.APIKey, "api_version", req.Header.APIVersion)
	return &network.Response{CloseConnection: true}
}

// respond wraps a ready response.
func respond(msg kmsg.Response) network.Result { return &network.Response{Msg: msg} }

// logThrottle lets a log line about a condition that every client retry
// meets again through at most once per interval. Safe for concurrent use.
type logThrottle struct {
	last atomic.Int64 // unix ns of the last line let through
}

// allow reports whether a line may be logged now.
func (t *logThrottle) allow(every time.Duration) bool {
	now, last := time.Now().UnixNano(), t.last.Load()
	return now-last > int64(every) && t.last.CompareAndSwap(last, now)
}

// currentImage is the image the handlers answer from: the last one
// ApplyMetadata published (so a partition is advertised only once its log
// exists here), or an empty image before the first.
func (b *Broker) currentImage() *metadata.Image {
	if img := b.image.Load(); img != nil {
		return img
	}
	return emptyImage
}

var emptyImage = metadata.EmptyImage()

// waitApplied blocks until ApplyMetadata has published an image at offset
// or later, or ctx ends.
func (b *Broker) waitApplied(ctx context.Context, offset int64) error {
	for {
		b.appliedMu.Lock()
		ch := b.applied
		b.appliedMu.Unlock()
		if img := b.image.Load(); img != nil && img.Offset() >= offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signalApplied wakes waitApplied after an image was published.
func (b *Broker) signalApplied() {
	b.appliedMu.Lock()
	close(b.applied)
	b.applied = make(chan struct{})
	b.appliedMu.Unlock()
}
