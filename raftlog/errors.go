package raftlog

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLeader is returned by operations only the Raft leader (the active
	// controller) may perform. The error is a *NotLeaderError carrying the
	// leader's id when it is known; test with errors.Is.
	ErrNotLeader = errors.New("not the metadata quorum leader")
	// ErrClosed is returned by operations on a Node that was closed.
	ErrClosed = errors.New("raftlog node closed")
	// ErrApplyFailed means a batch was committed but the image rejected it
	// (metadata.Image.Apply failed); every node skipped it alike.
	ErrApplyFailed = errors.New("committed metadata batch rejected by the image")
	// ErrClusterIDMismatch means a log dir's meta.properties names another
	// cluster.
	ErrClusterIDMismatch = errors.New("cluster.id mismatch")
	// ErrNodeIDMismatch means a log dir's meta.properties names another
	// node.id.
	ErrNodeIDMismatch = errors.New("node.id mismatch")
	// ErrNotFormatted means a log dir has no meta.properties and formatting
	// was not requested (run `keel format`).
	ErrNotFormatted = errors.New("log dir not formatted")
	// ErrInvalidVoters is a malformed controller.quorum.voters value.
	ErrInvalidVoters = errors.New("invalid controller.quorum.voters")
	// ErrInvalidConfig is a Config that Open refuses.
	ErrInvalidConfig = errors.New("invalid raftlog config")
	// ErrDuplicateVoter: AddVoter of a node that is a voter already
	// (Kafka's DUPLICATE_VOTER).
	ErrDuplicateVoter = errors.New("already a voter")
	// ErrVoterNotFound: RemoveVoter of a node that is not a voter
	// (Kafka's VOTER_NOT_FOUND).
	ErrVoterNotFound = errors.New("not a voter")
	// ErrVoterNotCaughtUp: AddVoter's node did not catch up with the
	// leader's log in time; it was not made a voter.
	ErrVoterNotCaughtUp = errors.New("the new voter did not catch up in time")
)

// NotLeaderError is returned when this node is not the leader. LeaderID is
// the leader this node knows of, or -1 if it knows none (an election is in
// progress). It matches ErrNotLeader with errors.Is.
type NotLeaderError struct {
	LeaderID int32
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID < 0 {
		return ErrNotLeader.Error() + " (leader unknown)"
	}
	return fmt.Sprintf("%s (leader is node %d)", ErrNotLeader, e.LeaderID)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
