package raftlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/keelstream/keel/metadata"
)

const (
	raftDBName       = "raft.db"
	logCacheEntries  = 512
	transportMaxPool = 3
	defaultRetain    = 2
	// closeGrace bounds how long Close waits for Raft futures that a
	// shutdown can leave unresolved (see Close).
	closeGrace = 5 * time.Second
)

// Node is one node's membership in the metadata quorum: a voter
// (controller) or an observer (broker-only). It replicates the metadata log,
// applies it into images and publishes them.
//
// All methods are safe for concurrent use. Read-only methods (Image,
// AppliedOffset, LeaderID, Term, IsLeader) never block. Propose, Barrier,
// AddObserver, RemoveObserver, WaitForOffset and QuorumState block on Raft
// and honour their context; they return ErrClosed once Close started.
type Node struct {
	cfg    Config
	logger hclog.Logger

	raft  *raft.Raft
	fsm   *fsm
	prog  *progress
	trans *progressTransport
	store *raftboltdb.BoltStore
	snaps *raft.FileSnapshotStore
	mux   *Mux

	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex     // guards waiters' Add against Close's Wait
	waiters sync.WaitGroup // goroutines waiting on Raft futures

	snapLoopDone chan struct{} // closed when snapshotLoop returns; nil: not started

	// observerAddrs are the addresses AddObserver added (string keys):
	// Raft dials them before the broker's registration reaches the image.
	observerAddrs sync.Map
}

// Open starts this node's Raft: it opens (or creates) the on-disk state
// under cfg.DataDir, restores the latest snapshot, replays nothing itself
// (Raft re-applies committed entries as it learns the commit index), and on
// a voter with no state at all bootstraps the configuration from
// cfg.Voters. Bootstrapping on every voter with the identical list is safe:
// the first election settles it. An observer never bootstraps; it waits for
// the active controller to AddObserver it.
//
// Open returns once Raft runs; it does not wait for a leader. The caller
// must Close the Node. If Open fails, cfg.Mux is closed.
func Open(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		if cfg.Mux != nil {
			_ = cfg.Mux.Close()
		}
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.Default()
	}
	logger = logger.Named("raftlog").With("node", cfg.NodeID)
	n := &Node{cfg: cfg, logger: logger, mux: cfg.Mux, closed: make(chan struct{})}
	if err := n.open(); err != nil {
		n.release()
		return nil, fmt.Errorf("open metadata log of node %d in %s: %w", cfg.NodeID, cfg.DataDir, err)
	}
	return n, nil
}

func (n *Node) open() error {
	dir := filepath.Join(n.cfg.DataDir, MetadataDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(dir, raftDBName),
		// A second process on the same dir fails instead of hanging on the
		// file lock.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return fmt.Errorf("open %s (is another node using this dir?): %w", filepath.Join(dir, raftDBName), err)
	}
	n.store = store
	retain := n.cfg.SnapshotRetain
	if retain <= 0 {
		retain = defaultRetain
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, n.logger.Named("snapshots"))
	if err != nil {
		return err
	}
	n.snaps = snaps
	reporting := &reportingStore{BoltStore: store, report: n.cfg.OnStorageError}
	logs, err := raft.NewLogCache(logCacheEntries, reporting)
	if err != nil {
		return err
	}

	timeout := n.cfg.TransportTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	n.prog = newProgress()
	n.trans = &progressTransport{
		NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  n.mux,
			MaxPool: transportMaxPool,
			Timeout: timeout,
			Logger:  n.logger.Named("transport"),
		}),
		prog: n.prog,
	}
	n.fsm = newFSM(n.logger.Named("fsm"))

	rc := n.cfg.raftConfig(n.logger.Named("raft"))
	r, err := raft.NewRaft(rc, n.fsm, logs, reporting, snaps, n.trans)
	if err != nil {
		_ = n.trans.Close()
		return err
	}
	n.raft = r
	n.prog.raft.Store(r)

	if n.cfg.Voter && !n.cfg.Join {
		conf := raft.Configuration{}
		for _, id := range sortedVoterIDs(n.cfg.Voters) {
			conf.Servers = append(conf.Servers, raft.Server{
				Suffrage: raft.Voter, ID: serverID(id), Address: raft.ServerAddress(n.cfg.Voters[id]),
			})
		}
		switch err := r.BootstrapCluster(conf).Error(); {
		case err == nil:
			n.logger.Info("bootstrapped the metadata quorum", "voters", len(conf.Servers))
		case errors.Is(err, raft.ErrCantBootstrap):
			// State exists: the configuration comes from the log.
		default:
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	if voters := n.Voters(); n.cfg.Voter && len(voters) > 0 {
		if _, ok := voters[n.cfg.NodeID]; !ok {
			n.logger.Warn("this controller is not a voter of the metadata quorum its log knows (removed with remove-controller?): "+
				"it takes no part in elections until it is added again with keel metadata-quorum add-controller",
				"voters", FormatVoters(voters))
		}
	}
	if n.cfg.MaxBytesBetweenSnapshots > 0 || n.cfg.MaxSnapshotInterval > 0 {
		// Last: once it runs, only Close stops it.
		n.snapLoopDone = make(chan struct{})
		go n.snapshotLoop()
	}
	return nil
}

// snapshotCheck is how often snapshotLoop looks whether a snapshot is due.
const snapshotCheck = time.Second

// snapshotLoop takes the snapshots metadata.log.max.record.bytes.between.snapshots
// and metadata.log.max.snapshot.interval.ms call for (KRaft's
// SnapshotGenerator): each node its own, from its own applied image. It
// stops when the node closes.
func (n *Node) snapshotLoop() {
	defer close(n.snapLoopDone)
	tick := time.NewTicker(snapshotCheck)
	defer tick.Stop()
	for {
		select {
		case <-n.closed:
			return
		case now := <-tick.C:
			if !n.fsm.snapshotDue(now, n.cfg.MaxBytesBetweenSnapshots, n.cfg.MaxSnapshotInterval) {
				continue
			}
			err := n.raft.Snapshot().Error()
			switch {
			case err == nil:
				n.logger.Debug("took a metadata snapshot", "applied", n.fsm.applied.Load())
			case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
			default:
				n.logger.Warn("metadata snapshot failed; trying again later", "error", err)
			}
		}
	}
}

// release frees whatever open managed to set up.
func (n *Node) release() {
	if n.raft != nil {
		_ = n.raft.Shutdown().Error()
	} else if n.trans != nil {
		_ = n.trans.Close()
	}
	_ = n.mux.Close()
	if n.store != nil {
		_ = n.store.Close()
	}
}

// Close shuts this node's Raft down, closes every Raft connection and the
// log store, and waits for the goroutines it started. It does not hand
// leadership over first: to the others it looks like a crash, and they elect
// a new leader after ElectionTimeout. Idempotent; safe from any goroutine.
//
// hashicorp/raft can leave a future unresolved when it shuts down while the
// entry sits in its FSM queue; such an entry is committed and will be
// applied on restart. Close waits a bounded time for those and logs them.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		close(n.closed)
		n.mu.Unlock()
		if err := n.raft.Shutdown().Error(); err != nil {
			n.closeErr = fmt.Errorf("shut down raft of node %d: %w", n.cfg.NodeID, err)
		}
		if n.snapLoopDone != nil {
			<-n.snapLoopDone // its Snapshot, if any, ended with the shutdown
		}
		_ = n.mux.Close()
		done := make(chan struct{})
		go func() { n.waiters.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeGrace):
			n.logger.Error("raft futures still unresolved after shutdown; their entries are committed and apply on restart")
		}
		if err := n.store.Close(); err != nil && n.closeErr == nil {
			n.closeErr = fmt.Errorf("close metadata log of node %d: %w", n.cfg.NodeID, err)
		}
	})
	return n.closeErr
}

// await waits for a Raft future, honouring ctx and Close. The goroutine
// blocked on the future is tracked so Close can wait for it.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	n.mu.Lock()
	select {
	case <-n.closed:
		n.mu.Unlock()
		return ErrClosed
	default:
	}
	n.waiters.Add(1)
	n.mu.Unlock()
	errCh := make(chan error, 1)
	go func() {
		defer n.waiters.Done()
		errCh <- f.Error()
	}()
	select {
	case err := <-errCh:
		return n.raftError(err)
	case <-ctx.Done():
		return ctx.Err()
	case <-n.closed:
		return ErrClosed
	}
}

// raftError maps hashicorp's errors to ours.
func (n *Node) raftError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrNotVoter):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w (%v: the proposal may still commit)", n.notLeader(), err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return err
}

func (n *Node) notLeader() error {
	id, ok := n.LeaderID()
	if !ok || id == n.cfg.NodeID {
		id = -1
	}
	return &NotLeaderError{LeaderID: id}
}

// enqueueTimeout is how long Propose lets Raft take to accept an entry
// when ctx has no deadline.
const enqueueTimeout = 10 * time.Second

func timeoutOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if t := time.Until(d); t > 0 {
			return t
		}
		return time.Millisecond
	}
	return enqueueTimeout
}

// Propose appends records as one batch (applied atomically) to the
// metadata log and waits until it is committed and applied by this node's
// FSM. It returns the batch's metadata offset. Only the leader may propose:
// elsewhere it returns a *NotLeaderError (errors.Is ErrNotLeader) naming the
// leader if known. A batch the image rejects is committed but skipped by
// every node; Propose then returns the offset and an error wrapping
// ErrApplyFailed.
//
// If ctx ends first Propose returns ctx.Err(), and the batch may still
// commit. Safe from any goroutine; proposals from concurrent callers are
// group-committed by Raft.
func (n *Node) Propose(ctx context.Context, records []metadata.Record) (int64, error) {
	data, err := metadata.EncodeBatch(records)
	if err != nil {
		return -1, fmt.Errorf("propose: %w", err)
	}
	f := n.raft.Apply(data, timeoutOf(ctx))
	if err := n.await(ctx, f); err != nil {
		return -1, fmt.Errorf("propose %d records: %w", len(records), err)
	}
	offset := int64(f.Index())
	if err, ok := f.Response().(error); ok && err != nil {
		return offset, fmt.Errorf("propose %d records: %w", len(records), err)
	}
	return offset, nil
}

// Barrier waits until every entry committed before it is applied to this
// node's image. Only the leader may call it. The active controller calls it
// after winning an election, before deciding anything from the image: a
// new Raft leader may hold committed entries it has not applied yet.
func (n *Node) Barrier(ctx context.Context) error {
	if err := n.await(ctx, n.raft.Barrier(timeoutOf(ctx))); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	return nil
}

// TransferLeadership hands leadership to the most up-to-date other voter
// and waits for the handover, as a KRaft controller resigns on controlled
// shutdown: call it before Close on the leader so the quorum does not wait
// ElectionTimeout for a new leader. Leader only (*NotLeaderError).
func (n *Node) TransferLeadership(ctx context.Context) error {
	if err := n.await(ctx, n.raft.LeadershipTransfer()); err != nil {
		return fmt.Errorf("transfer leadership: %w", err)
	}
	return nil
}

// Image returns the latest applied image. It never blocks; the image is
// immutable and may be kept as long as needed.
func (n *Node) Image() *metadata.Image { return n.fsm.image.Load() }

// AppliedOffset is the highest metadata offset this node's FSM has
// processed: Image().Offset() or beyond (batches the image rejected and
// Raft configuration entries advance it too). Never blocks.
func (n *Node) AppliedOffset() int64 { return n.fsm.applied.Load() }

// WaitForOffset blocks until this node has applied metadata offset offset
// (the broker answers a forwarded request only once its record is committed
// and applied locally), ctx ends, or the node closes.
func (n *Node) WaitForOffset(ctx context.Context, offset int64) error {
	return n.fsm.waitApplied(ctx, offset, n.closed)
}

// Subscribe returns a channel of image updates and a cancel func. The
// first Update is the current image with Reset set; each later one carries
// the newest image and what changed since the previous Update this
// subscriber received.
//
// Delivery never blocks Raft: the channel holds one Update, and when the
// subscriber has not taken it yet the next one is coalesced into it (newest
// image, union of changes). A slow subscriber therefore sees fewer, larger
// updates but never misses the latest image. cancel closes the channel; it
// is idempotent. The channel is not closed by Close: cancel it.
func (n *Node) Subscribe() (<-chan Update, func()) { return n.fsm.subscribe() }

// LeaderID returns the current leader's node id, if one is known. Never
// blocks.
func (n *Node) LeaderID() (int32, bool) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return -1, false
	}
	return nodeIDOf(id)
}

// IsLeader reports whether this node is the Raft leader (the active
// controller) right now. Never blocks.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Term is the current Raft term, Kafka's leader epoch of the metadata
// quorum. Never blocks.
func (n *Node) Term() int64 { return int64(n.raft.CurrentTerm()) }

// LeaderCh delivers true when this node becomes leader and false when it
// stops being leader (hashicorp's LeaderCh). It has one slot and keeps only
// the latest transition, so it never blocks Raft; a receiver that sees two
// trues lost and regained leadership meanwhile. It has a single consumer:
// the controller that starts and stops its event loop on it.
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// ServerState is one member of the Raft configuration.
type ServerState struct {
	NodeID  int32
	Address string
	Voter   bool
}

// Configuration returns the latest Raft configuration (voters and
// observers) this node knows, by node id.
func (n *Node) Configuration(ctx context.Context) ([]ServerState, error) {
	f := n.raft.GetConfiguration()
	if err := n.await(ctx, f); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	var out []ServerState
	for _, s := range f.Configuration().Servers {
		id, ok := nodeIDOf(s.ID)
		if !ok {
			continue
		}
		out = append(out, ServerState{NodeID: id, Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// AddObserver adds a broker-only node as a Raft non-voter at addr (its
// inter-broker listener, where it accepts Raft connections), so the leader
// starts replicating the metadata log to it. The active controller calls it
// when a broker registers. A node already present with the same address is
// left alone; a voter is never demoted. Leader only (*NotLeaderError).
func (n *Node) AddObserver(ctx context.Context, id int32, addr string) error {
	cur, err := n.Configuration(ctx)
	if err != nil {
		return fmt.Errorf("add observer %d: %w", id, err)
	}
	for _, s := range cur {
		if s.NodeID == id && s.Address == addr && !s.Voter {
			return nil
		}
		if s.NodeID == id && s.Voter {
			return fmt.Errorf("add observer %d: it is a voter", id)
		}
	}
	n.observerAddrs.Store(addr, true)
	if err := n.await(ctx, n.raft.AddNonvoter(serverID(id), raft.ServerAddress(addr), 0, timeoutOf(ctx))); err != nil {
		return fmt.Errorf("add observer %d at %s: %w", id, addr, err)
	}
	n.logger.Info("added observer", "observer", id, "address", addr)
	return nil
}

// RemoveObserver removes a non-voter (an unregistered broker). Removing a
// node that is not in the configuration is a no-op; removing a voter is
// refused. Leader only (*NotLeaderError).
func (n *Node) RemoveObserver(ctx context.Context, id int32) error {
	cur, err := n.Configuration(ctx)
	if err != nil {
		return fmt.Errorf("remove observer %d: %w", id, err)
	}
	found := false
	for _, s := range cur {
		if s.NodeID == id {
			if s.Voter {
				return fmt.Errorf("remove observer %d: it is a voter", id)
			}
			found = true
		}
	}
	if !found {
		return nil
	}
	if err := n.await(ctx, n.raft.RemoveServer(serverID(id), 0, timeoutOf(ctx))); err != nil {
		return fmt.Errorf("remove observer %d: %w", id, err)
	}
	n.logger.Info("removed observer", "observer", id)
	return nil
}

// QuorumState returns the quorum as this node, the leader, measured it
// (see progress.go for how). Elsewhere it returns a *NotLeaderError:
// followers do not know the others' progress, and Kafka answers
// DescribeQuorum only on the leader too.
func (n *Node) QuorumState(ctx context.Context) (QuorumState, error) {
	if n.raft.State() != raft.Leader {
		return QuorumState{}, n.notLeader()
	}
	term := n.raft.CurrentTerm()
	servers, err := n.Configuration(ctx)
	if err != nil {
		return QuorumState{}, fmt.Errorf("quorum state: %w", err)
	}
	measured := n.prog.snapshot(term)
	now := time.Now().UnixMilli()
	qs := QuorumState{
		LeaderID:      n.cfg.NodeID,
		LeaderEpoch:   int64(term),
		HighWatermark: int64(n.raft.CommitIndex()) + 1,
	}
	for _, s := range servers {
		rs := ReplicaState{NodeID: s.NodeID, LogEndOffset: -1, LastFetchTimestamp: -1, LastCaughtUpTimestamp: -1}
		if s.NodeID == n.cfg.NodeID {
			rs.LogEndOffset = int64(n.raft.LastIndex()) + 1
			rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = now, now
		} else if m, ok := measured[serverID(s.NodeID)]; ok {
			rs.LogEndOffset = m.logEndOffset
			rs.LastFetchTimestamp = unixMillisOrUnknown(m.lastFetch)
			rs.LastCaughtUpTimestamp = unixMillisOrUnknown(m.lastCaughtUp)
		}
		if s.Voter {
			qs.Voters = append(qs.Voters, rs)
		} else {
			qs.Observers = append(qs.Observers, rs)
		}
	}
	sortReplicas(qs.Voters)
	sortReplicas(qs.Observers)
	return qs, nil
}

// String names the node for logs.
func (n *Node) String() string { return "raftlog node " + strconv.Itoa(int(n.cfg.NodeID)) }

// Voters returns the voters of the latest Raft configuration this node
// knows (committed or not), node id → address; empty before it has one (an
// observer not yet added, a controller that has not joined yet). Never
// blocks on Raft.
func (n *Node) Voters() map[int32]string {
	out := map[int32]string{}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return out
	}
	for _, s := range f.Configuration().Servers {
		if id, ok := nodeIDOf(s.ID); ok && s.Suffrage == raft.Voter {
			out[id] = string(s.Address)
		}
	}
	return out
}

// AddedObserver reports whether this node's AddObserver added a broker
// observer at addr (while it led).
func (n *Node) AddedObserver(addr string) bool {
	_, ok := n.observerAddrs.Load(addr)
	return ok
}

// addVoterPoll is how often AddVoter checks whether its node caught up.
const addVoterPoll = 50 * time.Millisecond

// AddVoter makes node id, whose controller listener is addr, a voter
// (KIP-853 AddRaftVoter): it joins as a non-voter first, and is promoted
// once its log has reached the leader's commit index as it was when the
// call began, so that the quorum does not wait on a voter still copying
// the log. If it does not catch up before ctx ends it is removed again
// and ErrVoterNotCaughtUp returned. A voter already: ErrDuplicateVoter.
// Leader only (*NotLeaderError).
func (n *Node) AddVoter(ctx context.Context, id int32, addr string) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	cur, err := n.Configuration(ctx)
	if err != nil {
		return fmt.Errorf("add voter %d: %w", id, err)
	}
	for _, s := range cur {
		switch {
		case s.NodeID == id && s.Voter:
			return fmt.Errorf("add voter %d: %w", id, ErrDuplicateVoter)
		case s.NodeID != id && s.Voter && s.Address == addr:
			return fmt.Errorf("add voter %d at %s: voter %d has that address", id, addr, s.NodeID)
		}
	}
	target := int64(n.raft.CommitIndex()) + 1
	if err := n.await(ctx, n.raft.AddNonvoter(serverID(id), raft.ServerAddress(addr), 0, timeoutOf(ctx))); err != nil {
		return fmt.Errorf("add voter %d at %s: %w", id, addr, err)
	}
	n.logger.Info("adding a voter: replicating the log to it", "voter", id, "address", addr)
	for {
		qs, err := n.QuorumState(ctx)
		if err != nil {
			return fmt.Errorf("add voter %d: %w", id, err)
		}
		caught := false
		for _, o := range qs.Observers {
			caught = caught || (o.NodeID == id && o.LogEndOffset >= target)
		}
		if caught {
			break
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = n.await(rctx, n.raft.RemoveServer(serverID(id), 0, 5*time.Second))
			cancel()
			return fmt.Errorf("add voter %d: %w", id, ErrVoterNotCaughtUp)
		case <-n.closed:
			return ErrClosed
		case <-time.After(addVoterPoll):
		}
	}
	if err := n.await(ctx, n.raft.AddVoter(serverID(id), raft.ServerAddress(addr), 0, timeoutOf(ctx))); err != nil {
		return fmt.Errorf("add voter %d at %s: %w", id, addr, err)
	}
	n.logger.Info("added a voter", "voter", id, "address", addr)
	return nil
}

// RemoveVoter removes voter id from the quorum (KIP-853 RemoveRaftVoter).
// Removing the leader itself makes it step down once the change commits.
// Not a voter: ErrVoterNotFound; the last voter is never removed. Leader
// only (*NotLeaderError).
func (n *Node) RemoveVoter(ctx context.Context, id int32) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	voters := n.Voters()
	if _, ok := voters[id]; !ok {
		return fmt.Errorf("remove voter %d: %w", id, ErrVoterNotFound)
	}
	if len(voters) == 1 {
		return fmt.Errorf("remove voter %d: it is the last voter", id)
	}
	if err := n.await(ctx, n.raft.RemoveServer(serverID(id), 0, timeoutOf(ctx))); err != nil {
		return fmt.Errorf("remove voter %d: %w", id, err)
	}
	n.logger.Info("removed a voter", "voter", id)
	return nil
}
