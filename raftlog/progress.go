package raftlog

import (
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Quorum progress (DescribeQuorum, KIP-595/KIP-836).
//
// hashicorp/raft keeps each follower's match index private, and, unlike
// KRaft, followers never fetch: the leader pushes. So the leader measures
// progress where it happens, in its own transport: progressTransport wraps
// the NetworkTransport and, for every AppendEntries, pipelined
// AppendEntries, heartbeat and InstallSnapshot *response* a follower or
// observer sends back, records
//   - its log end offset: after a successful AppendEntries the follower's
//     log matches the leader's up to PrevLogEntry+len(Entries) (exactly the
//     index hashicorp's leader uses as the match index), after a snapshot
//     up to the snapshot's LastLogIndex;
//   - its last fetch time: when any response arrived (a heartbeat every
//     HeartbeatTimeout/10 keeps it fresh when the log is idle, as KRaft's
//     continuous fetches do);
//   - its last caught-up time: when a response arrived while its log end
//     offset had reached the leader's high watermark.
// Nothing is reported by the followers and nothing is guessed: a replica
// the current leader has not heard from in its term reports -1. No second
// RPC, no cooperation from the controller.

// progressTransport is a raft.Transport that records replication progress
// (see above) and forwards everything to the NetworkTransport.
type progressTransport struct {
	*raft.NetworkTransport
	prog *progress
}

func (t *progressTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.prog.observeAppend(id, args, resp)
	}
	return err
}

func (t *progressTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	if err == nil {
		t.prog.observeSnapshot(id, args, resp)
	}
	return err
}

func (t *progressTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	p := &progressPipeline{
		AppendPipeline: inner, id: id, prog: t.prog,
		out: make(chan raft.AppendFuture), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go p.forward()
	return p, nil
}

// progressPipeline relays the completed futures of a pipeline, recording
// their responses on the way. Its forward goroutine is owned by the
// pipeline: Raft always Closes a pipeline it opened, and Close stops it.
type progressPipeline struct {
	raft.AppendPipeline
	id   raft.ServerID
	prog *progress

	out  chan raft.AppendFuture
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (p *progressPipeline) forward() {
	defer close(p.done)
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil {
				p.prog.observeAppend(p.id, f.Request(), f.Response())
			}
			select {
			case p.out <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

func (p *progressPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *progressPipeline) Close() error {
	err := p.AppendPipeline.Close()
	p.once.Do(func() {
		close(p.stop)
		<-p.done
	})
	return err
}

// replicaProgress is what the leader measured of one replica in one term.
type replicaProgress struct {
	term         uint64
	logEndOffset int64 // exclusive (last matched index + 1); -1 unknown
	lastFetch    time.Time
	lastCaughtUp time.Time
}

// progress holds the leader's measurements. mu guards replicas; the
// replication goroutines of Raft write, QuorumState reads.
type progress struct {
	raft atomic.Pointer[raft.Raft] // set once Raft exists; nil before
	now  func() time.Time

	mu       sync.Mutex
	replicas map[raft.ServerID]*replicaProgress
}

func newProgress() *progress {
	return &progress{now: time.Now, replicas: map[raft.ServerID]*replicaProgress{}}
}

// entry returns id's record for term, starting afresh in a new term: a
// new leader knows nothing of what the previous one measured.
func (p *progress) entryLocked(id raft.ServerID, term uint64) *replicaProgress {
	r := p.replicas[id]
	if r == nil || r.term != term {
		r = &replicaProgress{term: term, logEndOffset: -1}
		p.replicas[id] = r
	}
	return r
}

// observeAppend records one AppendEntries response (heartbeats included).
func (p *progress) observeAppend(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if req == nil || resp == nil || resp.Term > req.Term {
		return // the replica knows a newer term: we are not its leader
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.entryLocked(id, req.Term)
	if resp.Success && (len(req.Entries) > 0 || req.PrevLogEntry > 0) {
		matched := req.PrevLogEntry
		if n := len(req.Entries); n > 0 {
			matched = req.Entries[n-1].Index
		}
		r.logEndOffset = int64(matched) + 1
	}
	p.touchLocked(r)
}

// observeSnapshot records one InstallSnapshot response.
func (p *progress) observeSnapshot(id raft.ServerID, req *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse) {
	if req == nil || resp == nil || resp.Term > req.Term {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.entryLocked(id, req.Term)
	if resp.Success {
		r.logEndOffset = int64(req.LastLogIndex) + 1
	}
	p.touchLocked(r)
}

// touchLocked stamps a response: a fetch, and a caught-up one if the
// replica's log reaches the high watermark (commit index + 1).
func (p *progress) touchLocked(r *replicaProgress) {
	now := p.now()
	r.lastFetch = now
	if rf := p.raft.Load(); rf != nil && r.logEndOffset >= 0 && r.logEndOffset >= int64(rf.CommitIndex())+1 {
		r.lastCaughtUp = now
	}
}

// snapshot returns a copy of the records of term.
func (p *progress) snapshot(term uint64) map[raft.ServerID]replicaProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[raft.ServerID]replicaProgress, len(p.replicas))
	for id, r := range p.replicas {
		if r.term == term {
			out[id] = *r
		}
	}
	return out
}

// ReplicaState is one voter's or observer's replication state as the
// leader measured it, in DescribeQuorum's terms. -1 means unknown: the
// current leader has not heard from the replica in this term yet.
type ReplicaState struct {
	// NodeID is the replica's node.id.
	NodeID int32
	// LogEndOffset is one past the last log offset the replica is known to
	// share with the leader (Kafka's exclusive log end offset).
	LogEndOffset int64
	// LastFetchTimestamp is when the leader last heard from the replica,
	// in Unix milliseconds.
	LastFetchTimestamp int64
	// LastCaughtUpTimestamp is when the leader last heard from the replica
	// while its LogEndOffset had reached the HighWatermark, in Unix ms.
	LastCaughtUpTimestamp int64
}

// QuorumState is the metadata quorum as its leader sees it, for
// DescribeQuorum (API 55) and `keel metadata-quorum describe`.
type QuorumState struct {
	// LeaderID is the leader's node id (this node).
	LeaderID int32
	// LeaderEpoch is the Raft term.
	LeaderEpoch int64
	// HighWatermark is the commit index + 1: every offset below it is
	// committed (Kafka's exclusive high watermark).
	HighWatermark int64
	// Voters and Observers (Raft non-voters), by node id. The leader is
	// among the voters with its own log end offset and the current time as
	// its fetch and caught-up timestamps, as Kafka reports it.
	Voters    []ReplicaState
	Observers []ReplicaState
}

func unixMillisOrUnknown(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

func sortReplicas(s []ReplicaState) {
	sort.Slice(s, func(i, j int) bool { return s[i].NodeID < s[j].NodeID })
}
