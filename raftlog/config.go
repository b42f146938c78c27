package raftlog

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config configures one node's metadata quorum membership. Zero durations
// and thresholds take hashicorp/raft's defaults (raft.DefaultConfig), which
// suit production; tests lower them.
type Config struct {
	// NodeID is node.id. Raft server ids are its decimal string.
	NodeID int32
	// Voters is controller.quorum.voters (see ParseVoters): node id → the
	// controller address carrying both Raft and the controller's Kafka APIs.
	Voters map[int32]string
	// Voter is true for a node with the controller role: it must be listed
	// in Voters, and bootstraps the quorum on first start. A broker-only node
	// (Voter false, not listed in Voters) runs Raft as a non-voting observer
	// that the active controller adds with AddObserver.
	Voter bool
	// Join is set on a controller that joins a running quorum (KIP-853: a
	// controller formatted without initial voters, added with
	// AddRaftVoter): it never bootstraps, and need not be among Voters,
	// which are then the voters it learned from the bootstrap servers.
	Join bool
	// DataDir is metadata.log.dir; the node keeps its state in
	// DataDir/__cluster_metadata-0 (see the package doc).
	DataDir string
	// Mux is the stream layer Raft listens and dials on. Its advertised
	// address must equal Voters[NodeID] on a voter; on an observer it is the
	// address the controllers dial (its inter-broker listener). The Node
	// owns the Mux from Open on and closes it in Close, even when Open fails.
	Mux *Mux
	// Logger receives Raft's and this package's logs (nil: hclog.Default()).
	Logger hclog.Logger

	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one (raft default 8192).
	SnapshotThreshold uint64
	// SnapshotInterval is how often the threshold is checked (default 120s).
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries are kept behind a snapshot so a
	// slightly lagging follower can catch up from the log rather than a
	// snapshot (default 10240).
	TrailingLogs uint64
	// SnapshotRetain is how many snapshots are kept on disk (default 2).
	SnapshotRetain int
	// MaxBytesBetweenSnapshots is KRaft's
	// metadata.log.max.record.bytes.between.snapshots: a node snapshots
	// once this many bytes of metadata records were applied since its
	// last snapshot. Raft's SnapshotThreshold still applies too, whichever
	// comes first: it bounds the entries a restart replays (each costs a
	// copy of the image's topic maps). 0: the threshold alone.
	MaxBytesBetweenSnapshots int64
	// MaxSnapshotInterval is KRaft's metadata.log.max.snapshot.interval.ms:
	// a node with records applied since its last snapshot takes one once
	// this long has passed since that snapshot. 0: never by time.
	MaxSnapshotInterval time.Duration

	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout and
	// CommitTimeout are hashicorp/raft's timers (defaults 1s, 1s, 500ms,
	// 50ms). CommitTimeout bounds how late an idle follower learns that an
	// entry committed, so it bounds WaitForOffset on followers too.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// TransportTimeout is the I/O deadline of one Raft RPC (default 10s).
	TransportTimeout time.Duration

	// OnStorageError is called once, with the first write to the metadata
	// log or its stable state that failed (a full or failing disk); the
	// node cannot go on taking part in the quorum and should be stopped.
	// It runs on Raft's goroutine and must not block.
	OnStorageError func(error)
}

// MetadataDirName is the directory under Config.DataDir holding the metadata
// log, named after KRaft's metadata partition.
const MetadataDirName = "__cluster_metadata-0"

// serverID is the Raft server id of a Kafka node id.
func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

// nodeIDOf parses a Raft server id back into a node id.
func nodeIDOf(id raft.ServerID) (int32, bool) {
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil {
		return -1, false
	}
	return int32(n), true
}

// ParseVoters parses controller.quorum.voters, "1@host:port,2@host:port".
// Ids are node ids (≥ 0, unique); addresses are host:port ([v6]:port for
// IPv6), unique. Whitespace around entries is ignored. It is a pure
// function, safe from any goroutine.
func ParseVoters(s string) (map[int32]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty; expected id@host:port,... (e.g. 1@localhost:9093)", ErrInvalidVoters)
	}
	out := map[int32]string{}
	byAddr := map[string]int32{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		idStr, addr, ok := strings.Cut(entry, "@")
		if !ok {
			return nil, fmt.Errorf("%w: entry %d %q: expected id@host:port", ErrInvalidVoters, i+1, entry)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(idStr), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%w: entry %d %q: node id %q is not an integer between 0 and %d", ErrInvalidVoters, i+1, entry, idStr, math.MaxInt32)
		}
		host, port, err := net.SplitHostPort(strings.TrimSpace(addr))
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d %q: address: %v", ErrInvalidVoters, i+1, entry, err)
		}
		if host == "" {
			return nil, fmt.Errorf("%w: entry %d %q: empty host", ErrInvalidVoters, i+1, entry)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%w: entry %d %q: port %q is not between 1 and 65535", ErrInvalidVoters, i+1, entry, port)
		}
		addr = net.JoinHostPort(host, port)
		if _, dup := out[int32(id)]; dup {
			return nil, fmt.Errorf("%w: node id %d listed twice", ErrInvalidVoters, id)
		}
		if other, dup := byAddr[addr]; dup {
			return nil, fmt.Errorf("%w: address %s listed for nodes %d and %d", ErrInvalidVoters, addr, other, id)
		}
		out[int32(id)] = addr
		byAddr[addr] = int32(id)
	}
	return out, nil
}

// sortedVoterIDs returns the voter ids in ascending order.
func sortedVoterIDs(voters map[int32]string) []int32 {
	ids := make([]int32, 0, len(voters))
	for id := range voters {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func (c *Config) validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("%w: node.id %d is negative", ErrInvalidConfig, c.NodeID)
	}
	if len(c.Voters) == 0 {
		return fmt.Errorf("%w: no voters (controller.quorum.voters)", ErrInvalidConfig)
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: no data dir (metadata.log.dir)", ErrInvalidConfig)
	}
	if c.Mux == nil {
		return fmt.Errorf("%w: no Mux", ErrInvalidConfig)
	}
	addr, listed := c.Voters[c.NodeID]
	switch {
	case c.Join && !c.Voter:
		return fmt.Errorf("%w: node %d joins the quorum but has no controller role", ErrInvalidConfig, c.NodeID)
	case c.Join:
	case c.Voter && !listed:
		return fmt.Errorf("%w: node %d has the controller role but is not in controller.quorum.voters", ErrInvalidConfig, c.NodeID)
	case !c.Voter && listed:
		return fmt.Errorf("%w: node %d is in controller.quorum.voters but has no controller role", ErrInvalidConfig, c.NodeID)
	case c.Voter && c.Mux.Addr().String() != addr:
		return fmt.Errorf("%w: node %d advertises %s but controller.quorum.voters lists it at %s", ErrInvalidConfig, c.NodeID, c.Mux.Addr(), addr)
	}
	return nil
}

// raftConfig builds hashicorp's config from ours.
func (c *Config) raftConfig(logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(c.NodeID)
	rc.Logger = logger
	// A removed observer (an unregistered broker) keeps running so the
	// controller can add it back when it registers again.
	rc.ShutdownOnRemove = false
	setIf(&rc.HeartbeatTimeout, c.HeartbeatTimeout)
	setIf(&rc.ElectionTimeout, c.ElectionTimeout)
	setIf(&rc.LeaderLeaseTimeout, c.LeaderLeaseTimeout)
	setIf(&rc.CommitTimeout, c.CommitTimeout)
	setIf(&rc.SnapshotInterval, c.SnapshotInterval)
	setIf(&rc.SnapshotThreshold, c.SnapshotThreshold)
	setIf(&rc.TrailingLogs, c.TrailingLogs)
	return rc
}

func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}
