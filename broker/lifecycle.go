package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/raftlog"
	"github.com/keelstream/keel/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// controllerChannel sends requests to the active controller, finding it
// among the voters: the Raft leader when this node knows it, otherwise each
// voter in turn until one does not answer NOT_CONTROLLER. Safe for
// concurrent use.
//
// A node keeps one channel per use, as Kafka keeps a
// NodeToControllerChannelManager per use: a broker's heartbeats never wait
// behind a forwarded request (a voter change may take 30 seconds), and a
// controller's forwarding to the quorum leader never waits behind either.
type controllerChannel struct {
	voters   func() map[int32]string
	leader   func() (int32, bool)
	clientID string
	// self is this controller's node id on its channel to the quorum
	// leader (newLeaderChannel), -1 on a broker's. That channel sends only
	// to the leader this node knows, never to this node, and waits while
	// it knows none: a follower's voters do not know the leader either,
	// and passing the request round them could bring it back here.
	self int32
	dial DialFunc // to the controller listener

	mu    sync.Mutex
	conns map[int32]*kafkaConn
	next  int
}

// newControllerChannel returns a broker's channel to the voters voters
// returns (they change when voters are added or removed), dialled with
// dial (nil: plain TCP).
func newControllerChannel(voters func() map[int32]string, leader func() (int32, bool), clientID string, dial DialFunc) *controllerChannel {
	return &controllerChannel{voters: voters, leader: leader, clientID: clientID, self: -1, dial: dial, conns: map[int32]*kafkaConn{}}
}

// newLeaderChannel returns controller self's channel to the quorum leader,
// for what a follower controller forwards (DescribeQuorum, voter changes).
func newLeaderChannel(voters func() map[int32]string, leader func() (int32, bool), self int32, clientID string, dial DialFunc) *controllerChannel {
	c := newControllerChannel(voters, leader, clientID, dial)
	c.self = self
	return c
}

// errNoLeaderKnown: a controller's channel has no leader to send to.
var errNoLeaderKnown = errors.New("no other controller is known to lead the metadata quorum")

func (c *controllerChannel) target() (*kafkaConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	voters := c.voters()
	if len(voters) == 0 {
		return nil, errors.New("no metadata quorum voters known")
	}
	id, ok := c.leader()
	_, voter := voters[id]
	switch {
	case c.self >= 0 && (!ok || !voter || id == c.self):
		return nil, errNoLeaderKnown
	case !ok || !voter:
		ids := slices.Sorted(maps.Keys(voters))
		id = ids[c.next%len(ids)]
	}
	addr := voters[id]
	conn, ok := c.conns[id]
	if ok && conn.addr != addr { // the voter moved (removed and added again)
		conn.close()
		ok = false
	}
	if !ok {
		conn = newKafkaConn(addr, c.clientID, c.dial)
		c.conns[id] = conn
	}
	return conn, nil
}

func (c *controllerChannel) rotate() {
	c.mu.Lock()
	c.next++
	c.mu.Unlock()
}

// send delivers req to the active controller, retrying other voters (with
// a short backoff) until ctx ends.
func (c *controllerChannel) send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	backoff := 50 * time.Millisecond
	for {
		var resp kmsg.Response
		conn, err := c.target()
		if err == nil {
			resp, err = conn.request(ctx, req)
		}
		if err == nil && !isNotController(resp) {
			return resp, nil
		}
		c.rotate()
		if err == nil {
			err = errNotController
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no active controller answered %s: %w (last: %w)", kmsg.NameForKey(req.Key()), ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

func (c *controllerChannel) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.close()
	}
}

// controllerForwarder implements ControllerForwarder over the channel: it
// returns once the controller committed the request's records and this
// node's image has applied them.
type controllerForwarder struct {
	ch   *controllerChannel
	raft *raftlog.Node
}

// Forward implements ControllerForwarder.
func (f *controllerForwarder) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, err := f.ch.send(ctx, req)
	if err != nil {
		return nil, err
	}
	if offset := takeOffsetTag(resp); offset >= 0 {
		if err := f.raft.WaitForOffset(ctx, offset); err != nil {
			return nil, fmt.Errorf("wait for metadata offset %d: %w", offset, err)
		}
	}
	return resp, nil
}

// brokerLifecycle registers this broker with the controller and keeps its
// session alive with heartbeats (KIP-631), re-registering when the
// controller no longer knows its epoch; at shutdown it asks for a
// controlled shutdown so leaderships move first. One goroutine owns it.
type brokerLifecycle struct {
	ch *controllerChannel
	// metadataOffset is the offset of the image the broker answers from,
	// its heartbeat's CurrentMetadataOffset (Kafka reports its published
	// image's too): the Raft log's applied offset runs ahead of it.
	metadataOffset func() int64
	nodeID         int32
	clusterID      string
	incarnation    metadata.Uuid
	endpoints      []network.Listener
	rack           string
	interval       time.Duration
	logger         hclog.Logger

	epoch      atomic.Int64
	fenced     atomic.Bool
	stopping   atomic.Bool   // a controlled shutdown has begun
	registered chan struct{} // closed after the first successful registration
	once       sync.Once
	// onCaughtUp is called once, on the lifecycle goroutine, when the
	// controller first reports this broker caught up with the metadata
	// log, with the offset the heartbeat reported; nil for none.
	onCaughtUp func(offset int64)
	// logs are the partition logs: their clean-shutdown markers hold the
	// broker epoch of the last clean shutdown.
	logs *storage.Manager
	// dirIDs are the directory ids of the log dirs, by path (KIP-858):
	// the registration names the online ones, every heartbeat the offline
	// ones. dirFailed wakes the loop to report a failed dir at once.
	dirIDs    map[string]metadata.Uuid
	dirFailed <-chan struct{}
	caughtUp  bool // run goroutine only
	stop      chan struct{}
	shutdown  chan chan struct{}
	wg        sync.WaitGroup
}

func newBrokerLifecycle(ch *controllerChannel, metadataOffset func() int64, nodeID int32, clusterID, rack string, endpoints []network.Listener, interval time.Duration, onCaughtUp func(int64), logs *storage.Manager, dirIDs map[string]metadata.Uuid, dirFailed <-chan struct{}, incarnation metadata.Uuid, logger hclog.Logger) *brokerLifecycle {
	l := &brokerLifecycle{
		ch: ch, metadataOffset: metadataOffset, nodeID: nodeID, clusterID: clusterID, rack: rack, incarnation: incarnation, onCaughtUp: onCaughtUp,
		logs: logs, dirIDs: dirIDs, dirFailed: dirFailed,
		endpoints: endpoints, interval: interval, logger: logger.Named("lifecycle"),
		registered: make(chan struct{}), stop: make(chan struct{}), shutdown: make(chan chan struct{}),
	}
	l.fenced.Store(true)
	l.epoch.Store(-1)
	l.wg.Add(1)
	go l.run()
	return l
}

func (l *brokerLifecycle) run() {
	defer l.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	var shuttingDown chan struct{}
	for {
		if l.epoch.Load() < 0 {
			if err := l.register(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				l.logger.Warn("broker registration failed; retrying", "error", err)
				select {
				case <-time.After(500 * time.Millisecond):
				case <-l.stop:
					return
				}
				continue
			}
		}
		done := l.heartbeat(ctx, shuttingDown != nil)
		if done && shuttingDown != nil {
			close(shuttingDown)
			return
		}
		wait := l.interval
		if l.fenced.Load() || shuttingDown != nil {
			wait = min(wait, 200*time.Millisecond) // catch up and unfence fast
		}
		select {
		case <-l.stop:
			return
		case c := <-l.shutdown:
			shuttingDown = c
		case <-l.dirFailed:
		case <-time.After(wait):
		}
	}
}

func (l *brokerLifecycle) register(ctx context.Context) error {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = l.nodeID, l.clusterID, l.incarnation
	req.Rack = nil
	if l.rack != "" {
		req.Rack = &l.rack
	}
	for _, e := range l.endpoints {
		le := kmsg.NewBrokerRegistrationRequestListener()
		le.Name, le.Host, le.Port = e.Name, e.Host, uint16(e.Port)
		le.SecurityProtocol = securityProtocolID(e.SecurityProtocol)
		req.Listeners = append(req.Listeners, le)
	}
	req.Features = registrationFeatures()
	online, _ := l.logDirs()
	for _, id := range online {
		req.LogDirs = append(req.LogDirs, id)
	}
	// The epoch this node's last clean shutdown wrote (KIP-966): any other
	// tells the controller this process may have lost acknowledged records.
	req.PreviousBrokerEpoch = l.logs.PreviousBrokerEpoch()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := l.ch.send(rctx, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("controller refused registration: %w", err)
	}
	l.epoch.Store(r.BrokerEpoch)
	l.logs.SetBrokerEpoch(r.BrokerEpoch)
	l.logger.Info("registered with the controller", "broker_epoch", r.BrokerEpoch, "previous_broker_epoch", req.PreviousBrokerEpoch)
	l.once.Do(func() { close(l.registered) })
	return nil
}

// heartbeat sends one heartbeat; it returns true once the controller says
// a controlled shutdown may proceed.
func (l *brokerLifecycle) heartbeat(ctx context.Context, wantShutdown bool) bool {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch = l.nodeID, l.epoch.Load()
	req.CurrentMetadataOffset = l.metadataOffset()
	req.WantShutdown = wantShutdown
	_, offline := l.logDirs()
	for _, id := range offline {
		req.OfflineLogDirs = append(req.OfflineLogDirs, id)
	}
	// A heartbeat not answered within one interval is given up and the
	// next is sent an interval later, as Kafka's broker does since
	// KAFKA-19294: a longer wait would widen the gap one lost heartbeat
	// leaves in the session the controller keeps.
	hctx, cancel := context.WithTimeout(ctx, l.interval)
	defer cancel()
	resp, err := l.ch.send(hctx, req)
	if err != nil {
		if ctx.Err() == nil {
			l.logger.Warn("heartbeat failed", "error", err)
		}
		return false
	}
	r := resp.(*kmsg.BrokerHeartbeatResponse)
	switch r.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code, kerr.BrokerIDNotRegistered.Code:
		l.logger.Warn("controller no longer knows this broker's epoch; registering again", "error", kerr.ErrorForCode(r.ErrorCode))
		l.epoch.Store(-1)
		return false
	default:
		l.logger.Warn("heartbeat refused", "error", kerr.ErrorForCode(r.ErrorCode))
		return false
	}
	if r.IsCaughtUp && !l.caughtUp {
		l.caughtUp = true
		if l.onCaughtUp != nil {
			l.onCaughtUp(req.CurrentMetadataOffset)
		}
	}
	if was := l.fenced.Swap(r.IsFenced); was && !r.IsFenced {
		l.logger.Info("unfenced: serving as a broker", "broker_epoch", req.BrokerEpoch)
	}
	return r.ShouldShutdown
}

// logDirs are the directory ids of the online and the offline log dirs.
func (l *brokerLifecycle) logDirs() (online, offline []metadata.Uuid) {
	failed := l.logs.OfflineDirs()
	for dir, id := range l.dirIDs {
		if slices.Contains(failed, dir) {
			offline = append(offline, id)
		} else {
			online = append(online, id)
		}
	}
	return online, offline
}

// controlledShutdown asks the controller to move this broker's leaderships
// away and waits until it agrees, or ctx ends; then the loop stops.
func (l *brokerLifecycle) controlledShutdown(ctx context.Context) error {
	l.stopping.Store(true)
	done := make(chan struct{})
	select {
	case l.shutdown <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("controlled shutdown did not complete in time")
	}
}

// Kafka's BrokerState values (the KafkaServer BrokerState metric) that a
// KRaft broker passes through.
const (
	brokerStateStarting                  = 1 // not registered yet
	brokerStateRecovery                  = 2 // registered, fenced: catching up
	brokerStateRunning                   = 3
	brokerStatePendingControlledShutdown = 6
)

// brokerState is the broker's state as Kafka's BrokerLifecycleManager
// reports it.
func (l *brokerLifecycle) brokerState() int {
	select {
	case <-l.registered:
	default:
		return brokerStateStarting
	}
	switch {
	case l.stopping.Load():
		return brokerStatePendingControlledShutdown
	case l.fenced.Load():
		return brokerStateRecovery
	}
	return brokerStateRunning
}

func (l *brokerLifecycle) close() {
	close(l.stop)
	l.wg.Wait()
}

// securityProtocolID is Kafka's SecurityProtocol id.
func securityProtocolID(p network.SecurityProtocol) int16 {
	switch p {
	case network.SSL:
		return 1
	case network.SASLPlaintext:
		return 2
	case network.SASLSSL:
		return 3
	}
	return 0
}
