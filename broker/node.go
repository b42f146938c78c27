package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/sasl"
	"github.com/keelstream/keel/raftlog"
	"github.com/keelstream/keel/storage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Node is one Keel process: the roles of process.roles assembled over one
// set of listeners (DESIGN §3). A controller runs a Raft voter and, while it
// leads, the controller event loop; a broker follows the metadata log (as a
// Raft observer unless it is also a controller), registers with the active
// controller, and serves partitions. Start with StartNode, stop with Close.
type Node struct {
	cfg        *Config
	logger     hclog.Logger
	clusterID  string
	advertised []network.Listener
	raftPorts  map[int]bool // bound ports whose listeners accept Raft
	// raftAuthorizer checks the principal of a Raft connection (nil: no
	// authorizer.class.name).
	raftAuthorizer *metadata.Authorizer

	server *network.Server
	mux    *raftlog.Mux
	raft   *raftlog.Node
	logs   *storage.Manager
	broker *Broker
	driver *controllerDriver
	// channels to the active controller, one per use (controllerChannel):
	// the broker's forwarding, its heartbeats, and a controller's
	// forwarding to the quorum leader, as this node's roles need them.
	channels  []*controllerChannel
	lifecycle *brokerLifecycle

	handlerWG sync.WaitGroup // controller request goroutines
	subStop   func()
	subDone   chan struct{}
	closeOnce sync.Once
	// failed receives the first disk failure (Failed).
	failed chan error
	// offlineDirs counts the log dirs an I/O error took offline;
	// dirFailed tells the lifecycle to report them at once.
	offlineDirs atomic.Int32
	dirFailed   chan struct{}
	// liveBroker is the broker once it exists, for logDirFailed.
	liveBroker atomic.Pointer[Broker]
	// incarnation is the broker's incarnation id, which its registration
	// carries (checkOfflineDirsTracked).
	incarnation metadata.Uuid

	started  time.Time
	requests *RequestMetrics
	metrics  *MetricsServer // nil unless keel.metrics.address is set
}

// StartNode starts a node: it checks meta.properties, binds the listeners,
// opens the metadata log and the partition logs, and starts serving. The
// single-node development default (this node the only voter) formats its
// log dirs itself; any other node must be formatted first (keel format).
func StartNode(cfg *Config, logger hclog.Logger) (*Node, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	n := &Node{cfg: cfg, logger: logger, failed: make(chan error, 1), dirFailed: make(chan struct{}, 1), started: time.Now(), requests: NewRequestMetrics(),
		incarnation: metadata.NewUuid()}
	if err := n.start(); err != nil {
		n.Abort() // release whatever was opened
		return nil, err
	}
	return n, nil
}

func (n *Node) start() (err error) {
	cfg, logger := n.cfg, n.logger
	for _, k := range cfg.Unknown {
		logger.Warn("ignoring unknown config key", "key", k)
	}
	for _, na := range cfg.NotApplied {
		k, why, _ := strings.Cut(na, ": ")
		logger.Warn("Kafka config key not applied by Keel", "key", k, "why", why)
	}
	for _, caution := range cfg.Cautions() {
		logger.Error(caution)
	}
	protocols, err := network.ParseSecurityProtocolMap(cfg.ListenerSecurityProtocolMap)
	if err != nil {
		return fmt.Errorf("listener.security.protocol.map: %w", err)
	}
	if cfg.ListenerSecurityProtocolMap == "" {
		// KRaft: without a map, controller listener names are PLAINTEXT.
		for _, name := range cfg.ControllerListenerNames {
			if _, ok := protocols[name]; !ok {
				protocols[name] = network.Plaintext
			}
		}
	}
	listeners, err := network.ParseListeners(cfg.Listeners, protocols)
	if err != nil {
		return fmt.Errorf("listeners: %w", err)
	}
	tlsCfg, err := loadNodeTLS(cfg, listeners, protocols, logger)
	if err != nil {
		return err
	}
	warnAnonymousNodes(cfg, listeners, logger)
	voters, source, join, err := quorumVoters(cfg, tlsCfg.controllerDial, logger)
	if err != nil {
		return err
	}
	isController, isBroker := cfg.HasRole("controller"), cfg.HasRole("broker")
	if _, ok := voters[cfg.NodeID]; isController && !ok && !join {
		return fmt.Errorf("node.id %d has the controller role but is not among the voters %s (from %s)", cfg.NodeID, raftlog.FormatVoters(voters), source)
	}

	var controllerListener string
	for _, l := range listeners {
		isCtl := slices.Contains(cfg.ControllerListenerNames, l.Name)
		if isCtl && !isController {
			return fmt.Errorf("listener %s is a controller listener but process.roles has no controller", l.Name)
		}
		if isCtl && controllerListener == "" {
			controllerListener = l.Name
		}
	}
	if isController && controllerListener == "" {
		return fmt.Errorf("process.roles has controller but listeners has none of controller.listener.names %v", cfg.ControllerListenerNames)
	}
	if isBroker && !slices.ContainsFunc(listeners, func(l network.Listener) bool { return l.Name == cfg.InterBrokerListenerName }) {
		return fmt.Errorf("inter.broker.listener.name %s is not among listeners %q", cfg.InterBrokerListenerName, cfg.Listeners)
	}

	_, onlyVoter := voters[cfg.NodeID]
	devDefault := isController && onlyVoter && len(voters) == 1
	// unusable are the log dirs a failed disk left unreadable: a broker
	// starts without them (Kafka 3.7+, KIP-858), their replicas offline.
	var unusable map[string]error
	if _, err := raftlog.ReadMetaProperties(cfg.MetadataLogDir); err == nil {
		// A disk replaced after it failed comes back empty: it is
		// formatted as a new log dir of this node (KIP-858).
		var formatted []string
		formatted, unusable, err = raftlog.FormatEmptyLogDirs(cfg.MetadataLogDir, cfg.LogDirs)
		if err != nil {
			return err
		}
		for _, d := range formatted {
			logger.Info("formatted a new empty log dir", "dir", d)
		}
		if !isBroker || len(unusable) == len(cfg.LogDirs) {
			for d, err := range unusable {
				return fmt.Errorf("log dir %s cannot be used: %w", d, err)
			}
		}
		for d, err := range unusable {
			logger.Error("a log dir cannot be used: the broker starts without it, and its replicas are offline until the disk is repaired or replaced",
				"dir", d, "error", err)
		}
	}
	online := slices.DeleteFunc(slices.Clone(cfg.LogDirs), func(d string) bool { return unusable[d] != nil })
	dirs := slices.Clone(online)
	if !slices.Contains(dirs, cfg.MetadataLogDir) {
		dirs = append(dirs, cfg.MetadataLogDir)
	}
	n.clusterID, err = raftlog.EnsureMetaProperties(dirs, "", cfg.NodeID, devDefault)
	if err != nil {
		return fmt.Errorf("%w (format the log dirs first: keel format --cluster-id ID --config ...)", err)
	}
	var dirIDs map[string]metadata.Uuid
	if isBroker {
		if dirIDs, err = raftlog.LogDirIDs(online); err != nil {
			return err
		}
	}

	// SCRAM reads the credentials from the metadata image once the broker
	// has caught up with the metadata log, as its requests wait to
	// (listenerRouter.Handle): a restarted broker's image may predate a
	// user's credential, and clients take a failed authentication as
	// final. Connections are served only once n.raft and n.broker exist
	// (Serve, below).
	//
	// The nodes' own users do not wait: the metadata log reaches a broker
	// (and a restarted controller) over connections they authenticate,
	// so waiting for it would wait for itself. Before catching up, a node
	// looks them up in its image, then in the credentials it was
	// formatted with (keel format --add-scram), then takes the user and
	// password of its own internode JAAS configuration (internode_sasl.go).
	boot, err := bootstrapRecords(cfg.MetadataLogDir)
	if err != nil {
		return err
	}
	bootImage, _, _ := metadata.EmptyImage().Apply(1, boot) // checked by bootstrapRecords
	own := internodeScramCredentials(cfg)
	caughtUp := func() bool {
		if n.broker == nil { // a controller: it has replayed its own log
			return n.raft.Image().Offset() > 0
		}
		select {
		case <-n.broker.Ready():
			return true
		default:
			return false
		}
	}
	saslListeners, err := loadNodeSASL(cfg, listeners, isBroker, func(mechanism, user string) (sasl.ScramCredential, bool) {
		if caughtUp() {
			return imageScram(n.raft.Image(), mechanism, user)
		}
		ownCred, internode := own[scramUser{mechanism, user}]
		if bootCred, inBoot := imageScram(bootImage, mechanism, user); inBoot || internode {
			if c, ok := imageScram(n.raft.Image(), mechanism, user); ok {
				return c, true
			}
			if inBoot {
				return bootCred, true
			}
			return ownCred, true
		}
		if n.broker != nil {
			t := time.NewTimer(saslCatchUpWait)
			defer t.Stop()
			select {
			case <-n.broker.Ready():
			case <-n.broker.closing():
			case <-t.C:
			}
		}
		return imageScram(n.raft.Image(), mechanism, user)
	}, newTokenSource(cfg.DelegationTokenSecretKey, func() *metadata.Image { return n.raft.Image() }), logger.Named("sasl"))
	if err != nil {
		return err
	}
	router := &listenerRouter{controllerListeners: cfg.ControllerListenerNames, logger: logger}
	perIP, perIPOverrides, err := connectionsPerIP(cfg)
	if err != nil {
		return err
	}
	netCfg := network.Config{
		Listeners:                         listeners,
		TLS:                               tlsCfg.servers,
		SASL:                              saslListeners,
		Handler:                           router,
		Logger:                            logger.Named("network"),
		MaxConnections:                    networkMaxConnections(cfg.MaxConnections),
		MaxListenerConnections:            ListenerConnectionLimits(cfg.ListenerConnectionQuotas, "max.connections", listenerNames(listeners)),
		MaxConnectionCreationRate:         cfg.MaxConnectionCreationRate,
		MaxListenerConnectionCreationRate: ListenerConnectionLimits(cfg.ListenerConnectionQuotas, "max.connection.creation.rate", listenerNames(listeners)),
		ProtectedListener:                 protectedListener(cfg),
		ControllerListeners:               cfg.ControllerListenerNames,
		MaxConnectionsPerIP:               perIP,
		MaxConnectionsPerIPOverrides:      perIPOverrides,
		ConnectionsMaxIdle:                cfg.ConnectionsMaxIdle,
		SocketRequestMaxBytes:             cfg.SocketRequestMaxBytes,
		QueuedMaxRequestBytes:             cfg.QueuedMaxRequestBytes,
		SocketSendBufferBytes:             cfg.SocketSendBufferBytes,
		SocketReceiveBufferBytes:          cfg.SocketReceiveBufferBytes,
		ConnClassifier:                    raftlog.IsRaftMarker,
		HandoffRaft:                       n.handoffRaft,
		RequestDone:                       n.requests.Observe,
	}
	netCfg.ConnectionRateWindows.Samples, netCfg.ConnectionRateWindows.Window = cfg.QuotaWindowNum, time.Duration(cfg.QuotaWindowSizeSeconds)*time.Second
	n.server, err = network.NewServer(netCfg)
	if err != nil {
		return err
	}
	if err := n.server.Listen(); err != nil {
		return err
	}
	bound := n.server.BoundListeners()
	// Raft is accepted only where peers dial it: a controller's controller
	// listener, a broker-only node's inter-broker listener (DESIGN §3), never
	// on a combined node's client listener.
	n.raftPorts = map[int]bool{}
	n.raftAuthorizer = newAuthorizer(cfg)
	for _, l := range bound {
		if (isController && slices.Contains(cfg.ControllerListenerNames, l.Name)) ||
			(!isController && l.Name == cfg.InterBrokerListenerName) {
			n.raftPorts[l.Port] = true
		}
	}
	advertised, err := network.ParseAdvertisedListeners(cfg.AdvertisedListeners, bound, protocols)
	if err != nil {
		return fmt.Errorf("advertised.listeners: %w", err)
	}
	advertised = fillHosts(advertised)
	n.advertised = advertised

	muxAddr := voters[cfg.NodeID]
	if join {
		// Raft dials a joining controller at its own controller listener,
		// the address add-controller gives the leader.
		addr, ok := cfg.OwnControllerAddr()
		if !ok {
			return fmt.Errorf("node %d joins the metadata quorum but has no controller listener address", cfg.NodeID)
		}
		muxAddr = addr
	}
	if !isController {
		for _, l := range advertised {
			if l.Name == cfg.InterBrokerListenerName {
				muxAddr = l.Address()
			}
		}
	}
	n.mux = raftlog.NewClusterMux(muxAddr, n.clusterID)
	n.mux.SetNodeID(cfg.NodeID)
	// A controller dials voters at their controller listener and broker
	// observers at their inter-broker listener: each with that
	// listener's security.
	n.mux.SetDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		if n.isObserverAddr(addr) {
			return tlsCfg.interBrokerDial(ctx, addr)
		}
		return tlsCfg.controllerDial(ctx, addr)
	})
	n.raft, err = raftlog.Open(raftlog.Config{
		NodeID:  cfg.NodeID,
		Voters:  voters,
		Voter:   isController,
		Join:    join,
		DataDir: cfg.MetadataLogDir,
		Mux:     n.mux,
		Logger:  logger.Named("raft"),
		// KRaft's snapshot triggers.
		MaxBytesBetweenSnapshots: cfg.MetadataMaxBytesBetweenSnapshots,
		MaxSnapshotInterval:      cfg.MetadataMaxSnapshotInterval,
		OnStorageError: func(err error) {
			logger.Error("metadata log dir failed: a write to the metadata log failed", "dir", cfg.MetadataLogDir, "error", err)
			n.fail(fmt.Errorf("metadata log dir %s failed: %w", cfg.MetadataLogDir, err))
		},
	})
	if err != nil {
		return err
	}
	// The voters change (AddRaftVoter, RemoveRaftVoter): the Raft
	// configuration has them once this node has one; until then (an
	// observer not yet added, a controller not yet joined) the ones it
	// started with.
	currentVoters := func() map[int32]string {
		if v := n.raft.Voters(); len(v) > 0 {
			return v
		}
		return voters
	}
	clientID := fmt.Sprintf("keel-node-%d", cfg.NodeID)
	channel := func(c *controllerChannel) *controllerChannel {
		n.channels = append(n.channels, c)
		return c
	}

	if isController {
		ccfg := controllerConfig(cfg, n.clusterID)
		boot, err := bootstrapRecords(cfg.MetadataLogDir)
		if err != nil {
			return err
		}
		n.driver = newControllerDriver(n.raft, ccfg, cfg.InterBrokerListenerName, boot, logger)
		router.controller = newControllerHandler(n.driver, n.raft, cfg.NodeID, currentVoters, cfg.DynamicQuorum(), controllerListener, logger, &n.handlerWG)
		router.controller.forward = channel(newLeaderChannel(currentVoters, n.raft.LeaderID, cfg.NodeID, clientID, tlsCfg.controllerDial)).send
		router.controller.clusterID = n.clusterID
		router.controller.authorizer = newAuthorizer(cfg)
		router.controller.configs = newNodeConfigs(cfg.NodeID, cfg)
	}
	if isBroker {
		n.logs, err = storage.OpenManager(storage.ManagerConfig{
			LogDirs:                         cfg.LogDirs,
			RecoveryThreadsPerDataDir:       cfg.NumRecoveryThreadsPerDataDir,
			DefaultConfig:                   cfg.LogConfig(),
			RetentionCheckInterval:          cfg.LogRetentionCheckInterval,
			FlushCheckInterval:              cfg.LogFlushSchedulerInterval,
			CheckpointInterval:              cfg.LogFlushOffsetCheckpointInterval,
			HighWatermarkCheckpointInterval: cfg.HighWatermarkCheckpointInterval,
			DisableLogCleaner:               cfg.cleanerDisabled(),
			CleanerThreads:                  cfg.LogCleanerThreads,
			CleanerBackoff:                  cleanerBackoff(cfg.LogCleanerBackoff),
			CleanerDedupeBufferSize:         cfg.LogCleanerDedupeBufferSize,
			CleanerIOMaxBytesPerSecond:      cfg.LogCleanerIOMaxBytesPerSec,
			WritebackBytes:                  cfg.LogWritebackBytes,
			DropBehindBytes:                 cfg.LogDropBehindBytes,
			DeleteBytesPerSecond:            deleteBytesPerSecond(cfg.LogDeleteBytesPerSecond),
			DeferMoves:                      true, // until reconcileStrayLogsLocked
			InitialOfflineDirs:              slices.Collect(maps.Keys(unusable)),
			OnLogDirFailure:                 n.logDirFailed,
			Logger:                          logger,
		})
		if err != nil {
			return err
		}
		// Dirs offline from the start: unusable, or a partition in them
		// failed to load.
		offline := n.logs.OfflineDirs()
		if slices.ContainsFunc(offline, func(d string) bool { return filepath.Clean(d) == filepath.Clean(cfg.MetadataLogDir) }) {
			return fmt.Errorf("log dir %s failed as it loaded, and the metadata log is in it", cfg.MetadataLogDir)
		}
		n.offlineDirs.Store(int32(len(offline)))
		n.broker, err = New(Options{
			NodeID:               cfg.NodeID,
			ClusterID:            n.clusterID,
			Config:               cfg,
			Logs:                 n.logs,
			Metadata:             n.raft,
			InterBrokerDial:      tlsCfg.interBrokerDial,
			tls:                  tlsCfg,
			SetConnectionLimits:  n.server.SetConnectionLimits,
			SetIPConnectionRates: n.server.SetIPConnectionCreationRates,
			ListenerNames:        listenerNames(listeners),
			Controller:           &controllerForwarder{ch: channel(newControllerChannel(currentVoters, n.raft.LeaderID, clientID, tlsCfg.controllerDial)), raft: n.raft},
			LogDirIDs:            dirIDs,
			Logger:               logger,
		})
		if err != nil {
			return err
		}
		router.broker = n.broker
		n.liveBroker.Store(n.broker)
		updates, cancel := n.raft.Subscribe()
		n.subStop, n.subDone = cancel, make(chan struct{})
		go n.applyMetadata(updates)
	} else if len(tlsCfg.listeners) > 0 {
		updates, cancel := n.raft.Subscribe()
		n.subStop, n.subDone = cancel, make(chan struct{})
		go n.applyControllerTLS(updates, tlsCfg, cfg.NodeID, logger)
	}

	go func() {
		if err := n.server.Serve(); err != nil && !errors.Is(err, network.ErrServerClosed) {
			logger.Error("network server stopped", "error", err)
		}
	}()
	if isBroker {
		var endpoints []network.Listener
		for _, l := range advertised {
			if !slices.Contains(cfg.ControllerListenerNames, l.Name) {
				endpoints = append(endpoints, l)
			}
		}
		heartbeats := channel(newControllerChannel(currentVoters, n.raft.LeaderID, clientID, tlsCfg.controllerDial))
		n.lifecycle = newBrokerLifecycle(heartbeats, n.broker.MetadataOffset, cfg.NodeID, n.clusterID, cfg.BrokerRack, endpoints, cfg.BrokerHeartbeatInterval, n.broker.ReconcileStrayLogs, n.logs, dirIDs, n.dirFailed, n.incarnation, logger)
	}
	if cfg.MetricsAddress != "" {
		// Last: a scrape reads the fields set above.
		if n.metrics, err = StartMetricsServer(cfg.MetricsAddress, n.writeMetrics, logger.Named("metrics")); err != nil {
			return err
		}
	}
	logger.Info("node started", "node_id", cfg.NodeID, "roles", cfg.ProcessRoles, "cluster_id", n.clusterID,
		"listeners", fmt.Sprint(bound))
	return nil
}

// MetricsAddress is where /metrics is served (keel.metrics.address, its
// port bound), or "" when it is not.
func (n *Node) MetricsAddress() string {
	if n.metrics == nil {
		return ""
	}
	return n.metrics.Addr()
}

// writeMetrics writes every series of this node: the process's, the
// requests', the quorum's and the controller's, and the broker's.
func (n *Node) writeMetrics(w *promWriter) {
	writeProcessMetrics(w, n.started)
	n.requests.write(w)
	listeners := n.server.BoundListeners()
	writeConnectionMetrics(w, n.server.ConnectionsByListener(), listeners)
	writeListenerMetrics(w, n.server.ListenerStats(), listeners)
	authOK, authFailed := n.server.Authentications()
	writeAuthenticationMetrics(w, authOK, authFailed, listeners)
	reauthOK, reauthFailed, expired := n.server.Reauthentications()
	writeReauthenticationMetrics(w, reauthOK, reauthFailed, expired, listeners)
	writeControllerMetrics(w, n.raft, n.cfg.HasRole("controller"))
	if n.lifecycle != nil {
		w.gauge("kafka_server_kafkaserver_brokerstate", "Kafka's BrokerState: 1 starting, 2 recovery (registered, fenced, catching up), 3 running, 6 pending controlled shutdown.",
			float64(n.lifecycle.brokerState()))
	}
	if n.broker != nil {
		n.broker.writeMetrics(w)
		n.broker.writeGroupMetrics(w)
	}
}

// handoffRaft gives a connection that opened with the Raft marker to the
// Raft transport, if it arrived on a listener that carries Raft and, with
// an authorizer, its principal may CLUSTER_ACTION on the cluster: what
// Kafka asks of the nodes sending its Raft requests (Vote, Fetch,
// BeginQuorumEpoch). Super users may, whatever the image holds, so a
// quorum whose nodes are super users forms before any ACL is known.
func (n *Node) handoffRaft(c net.Conn, info *network.ConnInfo) {
	if addr, ok := c.LocalAddr().(*net.TCPAddr); !ok || !n.raftPorts[addr.Port] {
		n.logger.Warn("refusing a Raft connection on a listener that does not carry Raft",
			"local", c.LocalAddr().String(), "remote", c.RemoteAddr().String())
		c.Close()
		return
	}
	if n.raftAuthorizer != nil && !n.raftAuthorizer.Authorize(n.raft.Image(), info.Principal, info.RemoteHost,
		kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, clusterName) {
		n.logger.Warn("refusing a Raft connection: authorization denied (CLUSTER_ACTION on the cluster; make the nodes' principal a super user)",
			"principal", info.Principal, "listener", info.Listener, "remote", c.RemoteAddr().String())
		c.Close()
		return
	}
	n.mux.HandoffWithMarker(c)
}

// isObserverAddr reports whether a Raft peer at addr is a broker observer
// (dialled at its inter-broker listener) rather than a controller: a
// registered broker's inter-broker endpoint, or one this node added as an
// observer (the registration may not be in the image yet), that is no
// voter's address. Raft dials only once it runs, so n.raft is set.
func (n *Node) isObserverAddr(addr string) bool {
	for _, a := range n.raft.Voters() {
		if a == addr {
			return false
		}
	}
	if n.raft.AddedObserver(addr) {
		return true
	}
	for _, b := range n.raft.Image().Brokers() {
		if ep, ok := b.Endpoint(n.cfg.InterBrokerListenerName); ok && net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))) == addr {
			return true
		}
	}
	return false
}

// applyMetadata feeds every published image to the broker, in order.
func (n *Node) applyMetadata(updates <-chan raftlog.Update) {
	defer close(n.subDone)
	checkDirs := n.offlineDirs.Load() > 0
	for u := range updates {
		changes := u.Changes
		if u.Reset {
			changes = fullChanges(u.Image)
		}
		n.broker.ApplyMetadata(u.Image, changes)
		if checkDirs {
			checkDirs = !n.checkOfflineDirsTracked(u.Image)
		}
	}
}

// checkOfflineDirsTracked is logDirFailed's last check for the log dirs
// offline from the start, once img holds this process's registration
// (reporting true then): a controller that does not track this broker's
// log dirs (its registration has none: a controller from before KIP-858)
// cannot keep their replicas out of ISRs and leaderships, so the node
// stops, as Kafka halts a broker with a failed dir then.
func (n *Node) checkOfflineDirsTracked(img *metadata.Image) bool {
	self, ok := img.Broker(n.cfg.NodeID)
	if !ok || self.IncarnationID != n.incarnation {
		return false
	}
	if len(self.LogDirs) == 0 {
		n.fail(fmt.Errorf("log dirs %v are offline, and the controller does not track this broker's log dirs", n.logs.OfflineDirs()))
	}
	return true
}

// fullChanges describes an image as if every part of it had just changed
// (after a snapshot restore or at start): its partitions, brokers, every
// resource's dynamic configs and the client quotas, so that a broker that
// caught up by a snapshot takes the configs changed in between (a topic's
// retention, this broker's keystore) as one that followed the log does.
func fullChanges(img *metadata.Image) metadata.Changes {
	ch := metadata.Changes{Partitions: map[metadata.PartitionKey]*metadata.Partition{},
		Configs: img.ConfigResources(), ClientQuotas: true}
	for _, t := range img.Topics() {
		for i, p := range t.Partitions {
			ch.Partitions[metadata.PartitionKey{TopicID: t.ID, Partition: int32(i)}] = p
		}
	}
	for _, b := range img.Brokers() {
		ch.Brokers = append(ch.Brokers, b.ID)
	}
	return ch
}

// fillHosts gives listeners bound to all interfaces a host clients can
// reach, as Kafka advertises the canonical host name.
func fillHosts(ls []network.Listener) []network.Listener {
	out := slices.Clone(ls)
	for i := range out {
		if out[i].Host == "" || out[i].Host == "0.0.0.0" || out[i].Host == "::" {
			if h, err := os.Hostname(); err == nil {
				out[i].Host = h
			} else {
				out[i].Host = "localhost"
			}
		}
	}
	return out
}

// controllerConfig maps the server config onto the controller's.
func controllerConfig(cfg *Config, clusterID string) metadata.ControllerConfig {
	c := metadata.DefaultControllerConfig()
	c.ClusterID = clusterID
	c.NodeID = cfg.NodeID
	c.KRaftVersion = cfg.KRaftVersion()
	c.NumPartitions = cfg.NumPartitions
	c.DefaultReplicationFactor = cfg.DefaultReplicationFactor
	c.MinInsyncReplicas = int32(cfg.MinInsyncReplicas)
	c.UncleanLeaderElectionEnable = cfg.UncleanLeaderElectionEnable
	c.BrokerSessionTimeout = cfg.BrokerSessionTimeout
	c.BrokerHeartbeatInterval = cfg.BrokerHeartbeatInterval
	c.AutoLeaderRebalanceEnable = cfg.AutoLeaderRebalanceEnable
	c.LeaderImbalanceCheckInterval = cfg.LeaderImbalanceCheckInterval
	c.AutoCreateTopicsEnable = cfg.AutoCreateTopicsEnable
	c.DeleteTopicEnable = cfg.DeleteTopicEnable
	c.StaticBrokerConfigs = StaticTopicConfigDefaults(cfg)
	c.GroupConfigBounds = cfg.groupConfigBounds()
	c.DelegationTokens = metadata.DelegationTokenConfig{
		SecretKey: cfg.DelegationTokenSecretKey, MaxLifetime: cfg.DelegationTokenMaxLifetime,
		ExpiryTime: cfg.DelegationTokenExpiryTime, ExpiryCheckInterval: cfg.DelegationTokenExpiryCheckInterval,
	}
	return c
}

// LogConfig is the broker-level default log configuration (the log.* keys).
func (c *Config) LogConfig() storage.LogConfig {
	return storage.LogConfig{
		SegmentBytes:         c.LogSegmentBytes,
		SegmentMs:            c.LogRollMs,
		SegmentJitterMs:      c.LogRollJitterMs,
		SegmentIndexBytes:    c.LogIndexSizeMaxBytes,
		IndexIntervalBytes:   c.LogIndexIntervalBytes,
		RetentionMs:          c.LogRetentionMs,
		RetentionBytes:       c.LogRetentionBytes,
		FlushMessages:        c.LogFlushIntervalMessages,
		FlushMs:              c.LogFlushIntervalMs,
		MaxMessageBytes:      c.MessageMaxBytes,
		FileDeleteDelayMs:    c.LogSegmentDeleteDelayMs,
		MessageTimestampType: c.LogMessageTimestampType,
	}
}

// BootstrapServers lists this node's advertised client (non-controller)
// listeners, host:port, as a client's bootstrap.servers.
func (n *Node) BootstrapServers() string {
	var out []string
	for _, l := range n.advertised {
		if !slices.Contains(n.cfg.ControllerListenerNames, l.Name) {
			out = append(out, l.Address())
		}
	}
	return strings.Join(out, ",")
}

// ClusterID is the cluster id from meta.properties.
func (n *Node) ClusterID() string { return n.clusterID }

// Addr is the bound address of a listener (useful with port 0).
func (n *Node) Addr(listener string) net.Addr { return n.server.Addr(listener) }

// Raft exposes the metadata log node (tests, inspection).
func (n *Node) Raft() *raftlog.Node { return n.raft }

// PartitionLog is the log of this node's replica of topic-partition, or
// nil (not hosted, or not a broker). For tests and tools.
func (n *Node) PartitionLog(topic string, partition int32) *storage.Log {
	if n.broker == nil {
		return nil
	}
	return n.broker.PartitionLog(topic, partition)
}

// WaitRegistered blocks until the broker has registered with the active
// controller and is unfenced, or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	if n.lifecycle == nil {
		return nil
	}
	for {
		if n.lifecycle.epoch.Load() >= 0 && !n.lifecycle.fenced.Load() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker %d not ready: %w", n.cfg.NodeID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logDirFailed is the log manager's OnLogDirFailure. As a Kafka broker
// since 3.7 (KIP-858), the broker goes on with its other log dirs: its
// heartbeat reports the dir offline at once, and the controller moves the
// leaderships and ISR places of the replicas there to other brokers. It
// stops (Failed) when the dir holds the metadata log, or was the last one
// online, or the controller does not track log dirs (a controller from
// before KIP-858 would leave the replicas there leading: Kafka halts then
// too). It runs on the goroutine that met the error, maybe under the
// manager's locks: it only counts and signals.
func (n *Node) logDirFailed(dir string, err error) {
	switch {
	case filepath.Clean(dir) == filepath.Clean(n.cfg.MetadataLogDir):
		n.fail(fmt.Errorf("log dir %s failed, and the metadata log is in it: %w", dir, err))
	case int(n.offlineDirs.Add(1)) >= len(n.cfg.LogDirs):
		n.fail(fmt.Errorf("log dir %s failed, and no other log dir is online: %w", dir, err))
	case !n.liveBroker.Load().tracksLogDirs():
		n.fail(fmt.Errorf("log dir %s failed, and the controller does not track this broker's log dirs: %w", dir, err))
	default:
		n.logger.Warn("a log dir failed: its replicas are offline and their leaderships move to other brokers; this broker goes on serving the partitions in its other log dirs",
			"dir", dir, "error", err)
		select {
		case n.dirFailed <- struct{}{}:
		default:
		}
	}
}

// fail passes the first failure to Failed; later ones were logged where
// they happened.
func (n *Node) fail(err error) {
	select {
	case n.failed <- err:
	default:
	}
}

// Failed receives an error when a disk failed under the node so that it
// cannot go on: an I/O error took offline the log dir holding the metadata
// log or the broker's last log dir online (storage/dirfailure.go: its
// partitions there answer KAFKA_STORAGE_ERROR from then on;
// logDirFailed), or a write to the metadata log failed. The node's owner
// should Close it, as Kafka halts such a KRaft node; the controlled
// shutdown of Close then moves its leaderships to in-sync replicas
// elsewhere at once instead of after the broker session times out. keel
// server does so and exits with status 1.
func (n *Node) Failed() <-chan error { return n.failed }

// Close shuts the node down: a controlled shutdown for a broker (its
// leaderships move first), then the listeners drain, then the controller,
// the metadata log and the partition logs close (cleanly: the next start
// trusts the indexes).
func (n *Node) Close() error { return n.close(true) }

// Abort stops the node without a controlled shutdown and without handing
// Raft leadership over: to the rest of the cluster it looks like a crash
// (the broker's session must time out, a new controller must be elected).
// Local files are still closed properly. Tests use it; `keel server` does on
// a second signal.
func (n *Node) Abort() error { return n.close(false) }

func (n *Node) close(graceful bool) error {
	var errs []error
	n.closeOnce.Do(func() {
		if n.lifecycle != nil {
			if graceful {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := n.lifecycle.controlledShutdown(ctx); err != nil {
					n.logger.Warn("controlled shutdown", "error", err)
				}
				cancel()
			}
			n.lifecycle.close()
		}
		// The broker answers its parked fetches and produces at once, so
		// the listeners' drain does not wait out long polls.
		if n.broker != nil {
			errs = append(errs, n.broker.Close())
		}
		// Scrapes see the controlled shutdown (BrokerState 6) until here.
		if n.metrics != nil {
			errs = append(errs, n.metrics.Close())
		}
		if n.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := n.server.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("shut down listeners: %w", err))
			}
			cancel()
		}
		if n.subStop != nil {
			n.subStop()
			<-n.subDone
		}
		if n.driver != nil {
			n.driver.close()
		}
		n.handlerWG.Wait()
		for _, c := range n.channels {
			c.close()
		}
		if n.raft != nil {
			if graceful && n.raft.IsLeader() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = n.raft.TransferLeadership(ctx)
				cancel()
			}
			errs = append(errs, n.raft.Close())
		}
		if n.mux != nil {
			errs = append(errs, n.mux.Close())
		}
		if n.logs != nil {
			err := n.logs.Close()
			if offline := n.logs.OfflineDirs(); err != nil && len(offline) > 0 && errors.Is(err, storage.ErrStorage) {
				// Every I/O error takes its dir offline and was reported
				// then (logDirFailed); the dirs still online closed
				// cleanly. A node that went on without a failed dir
				// shuts down cleanly.
				n.logger.Warn("partition logs closed with log dirs offline; their partitions are recovered at the next start", "offline_dirs", fmt.Sprint(offline), "error", err)
				err = nil
			}
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}

// listenerRouter dispatches each request to the controller or the broker
// by the listener it arrived on (a controller listener serves only
// controller APIs; Kafka refuses client APIs there).
type listenerRouter struct {
	controllerListeners []string
	controller          *controllerHandler
	broker              *Broker
	logger              hclog.Logger
	waitLogged          atomic.Bool
}

func (r *listenerRouter) handlerFor(listener string) network.Handler {
	if slices.Contains(r.controllerListeners, listener) {
		if r.controller != nil {
			return r.controller
		}
		return nil
	}
	if r.broker != nil {
		return r.broker
	}
	return nil
}

// SupportedVersions implements network.Handler.
func (r *listenerRouter) SupportedVersions(listener string, key int16) (int16, int16, bool) {
	h := r.handlerFor(listener)
	if h == nil {
		return 0, 0, false
	}
	return h.SupportedVersions(listener, key)
}

// Handle implements network.Handler. A broker's requests wait until it
// has caught up with the metadata log (Broker.Ready), as Kafka's
// BrokerServer starts processing requests only after its initial catch-up:
// the image it would answer from before then can be the one of its last
// metadata snapshot, and a client told that a topic does not exist gives
// up on its records (kgo after four such answers). ApiVersions is answered
// at once, so clients connect meanwhile.
func (r *listenerRouter) Handle(ctx context.Context, req *network.Request) network.Result {
	h := r.handlerFor(req.Conn.Listener)
	if h == nil {
		return &network.Response{CloseConnection: true}
	}
	if _, versions := req.Msg.(*kmsg.ApiVersionsRequest); h == network.Handler(r.broker) && !versions {
		select {
		case <-r.broker.Ready():
		default:
			if !r.waitLogged.Swap(true) {
				r.logger.Info("client requests wait until this broker has caught up with the metadata log")
			}
			select {
			case <-r.broker.Ready():
			case <-ctx.Done():
				return &network.Response{CloseConnection: true}
			}
		}
	}
	return h.Handle(ctx, req)
}

// connectionsPerIP maps max.connections.per.ip and its overrides onto the
// network server's: Kafka's 0 (only the overrides' addresses) is -1 there,
// and a host name in the overrides counts for each address it resolves to
// now, as Kafka resolves it when it reads the setting.
func connectionsPerIP(cfg *Config) (int, map[netip.Addr]int, error) {
	return connectionLimitsPerIP(context.Background(), net.DefaultResolver.LookupHost, cfg.MaxConnectionsPerIP, cfg.MaxConnectionsPerIPOverrides)
}

// connectionLimitsPerIP is connectionsPerIP of the two settings' values,
// resolving host names within ctx.
func connectionLimitsPerIP(ctx context.Context, lookupHost func(context.Context, string) ([]string, error), perIP int, overridesSetting string) (int, map[netip.Addr]int, error) {
	overrides, err := connectionsPerIPOverrides(overridesSetting)
	if err != nil {
		return 0, nil, err
	}
	out := map[netip.Addr]int{}
	for host, n := range overrides {
		if ip, err := netip.ParseAddr(host); err == nil {
			out[ip.Unmap()] = n
			continue
		}
		addrs, err := lookupHost(ctx, host)
		if err != nil {
			return 0, nil, fmt.Errorf("max.connections.per.ip.overrides: resolve %s: %w", host, err)
		}
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(a); err == nil {
				out[ip.Unmap()] = n
			}
		}
	}
	if err := checkConnectionsPerIP(perIP, len(overrides)); err != nil {
		return 0, nil, err
	}
	limit := perIP
	if limit == 0 {
		limit = -1
	}
	return limit, out, nil
}

// listenerNames are the names of listeners.
func listenerNames(listeners []network.Listener) []string {
	out := make([]string, len(listeners))
	for i, l := range listeners {
		out[i] = l.Name
	}
	return out
}

// protectedListener is the listener exempt from max.connections: the
// inter-broker listener of a node with the broker role (on a
// controller-only node, inter.broker.listener.name names no listener of
// its own).
func protectedListener(cfg *Config) string {
	if !cfg.HasRole("broker") {
		return ""
	}
	return cfg.InterBrokerListenerName
}
