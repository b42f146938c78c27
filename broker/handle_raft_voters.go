package broker

// AddRaftVoter (80) and RemoveRaftVoter (81), KIP-853: kafka-metadata-quorum
// add-controller and remove-controller (keel metadata-quorum, the same).
//
//   - Only a dynamic quorum's voters change (controller.quorum.bootstrap.
//     servers, formatted with --standalone or --initial-controllers):
//     with controller.quorum.voters every node's configuration names them,
//     and Kafka answers UNSUPPORTED_VERSION ("kraft.version" 0). So does
//     Keel.
//   - A controller that is not the quorum leader forwards the request to
//     the leader, as for DescribeQuorum; so does a broker (kafka-metadata-
//     quorum --bootstrap-server).
//   - AddRaftVoter takes the new voter's endpoint on this controller's
//     listener name (controller.listener.names) from Listeners; it joins
//     as a Raft non-voter, is promoted once its log has caught up, and the
//     response comes once that change is committed (so AckWhenCommitted,
//     v1, is always honoured). Not caught up within TimeoutMillis:
//     REQUEST_TIMED_OUT, and it is not a voter. A voter already:
//     DUPLICATE_VOTER.
//   - RemoveRaftVoter: VOTER_NOT_FOUND for a node that is not a voter; the
//     last voter is never removed (INVALID_REQUEST). Removing the leader
//     makes it step down once the change commits.
//   - ClusterID, when set, must be this cluster's (INCONSISTENT_CLUSTER_ID).
//     VoterDirectoryID is ignored: Keel names a voter by node id alone.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/raftlog"
)

// defaultAddVoterTimeout bounds AddRaftVoter when the request gives no
// timeout.
const defaultAddVoterTimeout = 30 * time.Second

// addVoterTimeout is how long an AddRaftVoter may wait for the new voter
// to catch up; a broker forwarding one waits a little longer for the
// answer.
func addVoterTimeout(r *kmsg.AddRaftVoterRequest) time.Duration {
	if r.TimeoutMillis <= 0 {
		return defaultAddVoterTimeout
	}
	return time.Duration(r.TimeoutMillis) * time.Millisecond
}

func (h *controllerHandler) addRaftVoter(ctx context.Context, r *kmsg.AddRaftVoterRequest) kmsg.Response {
	return h.voterChange(ctx, r, r.ClusterID, addVoterTimeout(r), func(ctx context.Context) error {
		if r.VoterID < 0 {
			return fmt.Errorf("voter id %d is negative", r.VoterID)
		}
		addr := ""
		for _, l := range r.Listeners {
			if l.Name == h.listener && l.Host != "" && l.Port != 0 {
				addr = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
			}
		}
		if addr == "" {
			return fmt.Errorf("the new voter has no %s listener with a host and port", h.listener)
		}
		if err := h.raft.AddVoter(ctx, r.VoterID, addr); err != nil {
			return err
		}
		h.logger.Info("added a controller to the metadata quorum", "voter", r.VoterID, "address", addr)
		return nil
	})
}

// removeVoterTimeout bounds RemoveRaftVoter, which has no timeout field:
// the change commits once a majority of the remaining voters has it.
const removeVoterTimeout = 30 * time.Second

func (h *controllerHandler) removeRaftVoter(ctx context.Context, r *kmsg.RemoveRaftVoterRequest) kmsg.Response {
	return h.voterChange(ctx, r, r.ClusterID, removeVoterTimeout, func(ctx context.Context) error {
		if err := h.raft.RemoveVoter(ctx, r.VoterID); err != nil {
			return err
		}
		h.logger.Info("removed a controller from the metadata quorum", "voter", r.VoterID)
		return nil
	})
}

// voterForwardSlack is how much longer a follower controller waits for the
// leader's answer to a forwarded voter change than the leader may take.
const voterForwardSlack = 2 * time.Second

// voterChange answers AddRaftVoter or RemoveRaftVoter: it checks the
// request, forwards it to the quorum leader when this controller is not
// it, and otherwise runs change with timeout, answering its error as
// Kafka's code.
func (h *controllerHandler) voterChange(ctx context.Context, req kmsg.Request, clusterID *string, timeout time.Duration, change func(context.Context) error) kmsg.Response {
	code, msg := h.checkVoterChange(clusterID)
	if code == 0 {
		if fwd, ok := h.forwardVoterChange(ctx, req, timeout+voterForwardSlack); ok {
			return fwd
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := change(cctx)
		cancel()
		if err != nil {
			h.logger.Warn("metadata quorum voter change failed", "api", kmsg.NameForKey(req.Key()), "error", err)
			code, msg = voterChangeError(err), err.Error()
		}
	}
	resp := req.ResponseKind()
	if code != 0 {
		switch r := resp.(type) {
		case *kmsg.AddRaftVoterResponse:
			r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
		case *kmsg.RemoveRaftVoterResponse:
			r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
		}
	}
	return resp
}

// checkVoterChange refuses a voter change a static quorum cannot take, or
// one meant for another cluster.
func (h *controllerHandler) checkVoterChange(clusterID *string) (int16, string) {
	if !h.dynamic {
		return kerr.UnsupportedVersion.Code, "the metadata quorum's voters are fixed by controller.quorum.voters: " +
			"only a quorum configured with controller.quorum.bootstrap.servers (and formatted with --standalone or --initial-controllers) changes its voters"
	}
	if clusterID != nil && *clusterID != "" && h.clusterID != "" && *clusterID != h.clusterID {
		return kerr.InconsistentClusterID.Code, fmt.Sprintf("cluster id %s is not this cluster's (%s)", *clusterID, h.clusterID)
	}
	return 0, ""
}

// forwardVoterChange sends a voter change to the quorum leader when this
// controller is not it; ok is false when this controller should act.
func (h *controllerHandler) forwardVoterChange(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, bool) {
	if h.raft.IsLeader() || h.forward == nil {
		return nil, false
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := h.forward(fctx, req)
	if err != nil {
		return errorResponse(req, kerr.NotLeaderForPartition.Code), true
	}
	return resp, true
}

// voterChangeError maps AddVoter's and RemoveVoter's errors to Kafka's.
func voterChangeError(err error) int16 {
	var notLeader *raftlog.NotLeaderError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, raftlog.ErrDuplicateVoter):
		return kerr.DuplicateVoter.Code
	case errors.Is(err, raftlog.ErrVoterNotFound):
		return kerr.VoterNotFound.Code
	case errors.Is(err, raftlog.ErrVoterNotCaughtUp), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.As(err, &notLeader):
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.InvalidRequest.Code
}
