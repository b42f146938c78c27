package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the classic consumer group membership protocol (Kafka's
// ConsumerCoordinator): JoinGroup, SyncGroup, Heartbeat and LeaveGroup
// against the group coordinator, which the Client finds and follows.
//
// As in Kafka's Java consumer, rebalances happen inside Poll, on the
// application's goroutine: that is where the rebalance listener runs and
// where a member proves it is making progress. A background goroutine only
// heartbeats: it notices a rebalance (REBALANCE_IN_PROGRESS), a fencing
// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID) and a member
// that stopped polling (max.poll.interval.ms, KIP-62), and wakes Poll.

// Group protocol error codes the member reacts to.
const (
	codeIllegalGeneration   int16 = 22
	codeInconsistentProto   int16 = 23
	codeUnknownMemberID     int16 = 25
	codeInvalidSession      int16 = 26
	codeRebalanceInProgress int16 = 27
	codeMemberIDRequired    int16 = 79
	codeGroupMaxSize        int16 = 81
	codeFencedInstanceID    int16 = 82
)

// errJoinRestart ends a join whose member was fenced while it still owned
// partitions (cooperative protocol): they must be reported lost first.
var errJoinRestart = errors.New("membership lost during the join")

var (
	// ErrFencedInstanceID means another consumer with the same
	// group.instance.id joined the group: this one is a zombie and stops
	// (FENCED_INSTANCE_ID, KIP-345). Every later Poll returns it.
	ErrFencedInstanceID = codeError(codeFencedInstanceID)
	// ErrRebalanceInProgress is returned by a commit that raced with a
	// rebalance: the partitions may be moving, so the commit is refused.
	// Poll rejoins; commit again after it.
	ErrRebalanceInProgress = codeError(codeRebalanceInProgress)
	// ErrCommitFailed is returned by a commit the coordinator refused because
	// this member is no longer in the generation that owns the partitions
	// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID): another member may already
	// be consuming them. Kafka's CommitFailedException.
	ErrCommitFailed = errors.New("commit failed: the member left the group or the group rebalanced; its partitions may have moved")
)

// groupMember is one Consumer's membership in its group.
//
// Concurrency: mu guards every field below it. Poll drives the membership:
// it runs the listener and starts at most one join at a time (joining), whose
// JoinGroup/SyncGroup exchange runs on a goroutine the Consumer owns; the
// heartbeat goroutine reads the membership and sets flags. Never hold mu
// while calling the coordinator or a listener callback, and never take
// Consumer.mu while holding it.
type groupMember struct {
	c     *Consumer
	group string

	mu         sync.Mutex
	memberID   string
	generation int32
	protocol   string // the assignor the coordinator chose
	synced     bool   // SyncGroup succeeded for generation: heartbeats may run
	stable     bool   // Poll applied the generation's assignment
	joining    *joinAttempt
	// leaderSnapshot is the partition count per subscribed topic that this
	// member, as leader, assigned from; nil on followers.
	leaderSnapshot map[string]int32
	rejoin         bool  // the coordinator started a rebalance, or we revoked
	lost           bool  // fenced or left: owned partitions may be elsewhere
	fatal          error // FENCED_INSTANCE_ID and the like: the member stops
	lastPoll       time.Time
	polling        bool               // the application is inside Poll
	owned          map[string][]int32 // the current assignment
	prevOwned      map[string][]int32 // an eager member's assignment before it revoked
	leftReason     string             // why the heartbeat goroutine left the group (tests, logs)
}

func newGroupMember(c *Consumer) *groupMember {
	return &groupMember{c: c, group: c.cfg.group, generation: -1, owned: map[string][]int32{}, lastPoll: time.Now()}
}

// cooperative reports whether the group runs KIP-429 incremental
// rebalancing: only if every assignor this member offers is cooperative, as
// in Kafka (a group may pick any of them).
func (g *groupMember) cooperative() bool {
	for _, a := range g.c.cfg.assignors {
		if a.Protocol() != RebalanceCooperative {
			return false
		}
	}
	return true
}

// setPolling records that the application entered or left Poll. A member
// waiting inside Poll is making progress; max.poll.interval.ms counts from
// the last time Poll returned (Kafka's poll timer).
func (g *groupMember) setPolling(in bool) {
	g.mu.Lock()
	g.polling = in
	g.lastPoll = time.Now()
	g.mu.Unlock()
}

// requestRejoin asks the next Poll to rejoin the group.
func (g *groupMember) requestRejoin() {
	g.mu.Lock()
	g.rejoin = true
	g.mu.Unlock()
}

// joinAttempt is one JoinGroup + SyncGroup round running in the background.
// The network part runs on its own goroutine so that a Poll with a short
// deadline does not abandon the join (the coordinator may hold JoinGroup
// until every member rejoins); the listener calls around it run on Poll.
type joinAttempt struct {
	done       chan struct{} // closed when assignment and err are set
	cancel     context.CancelFunc
	assignment map[string][]int32
	err        error
}

// ensureActive drives the membership from Poll: it starts a join when one is
// needed (after revoking, for the eager protocol) and applies a finished one.
// It never waits for a join: Poll keeps returning records of the partitions
// a cooperative member still owns, and the join wakes Poll when it is done.
func (g *groupMember) ensureActive(ctx context.Context) error {
	for {
		g.mu.Lock()
		if g.fatal != nil {
			err := g.fatal
			g.mu.Unlock()
			return err
		}
		j := g.joining
		need := !g.stable || g.rejoin || g.lost
		g.mu.Unlock()
		if j == nil {
			if !need && g.metadataChanged() {
				need = true
			}
			if !need {
				return nil
			}
			g.prepareJoin(ctx)
			g.startJoin()
			continue
		}
		select {
		case <-j.done:
		default:
			return nil // still joining
		}
		g.mu.Lock()
		g.joining = nil
		g.mu.Unlock()
		if errors.Is(j.err, errJoinRestart) {
			continue // prepareJoin reports the lost partitions first
		}
		if j.err != nil {
			return j.err
		}
		g.completeJoin(j.assignment)
	}
}

// metadataChanged reports, on the leader, whether a subscribed topic's
// partition count differs from what the current assignment was computed
// from (partitions added, a topic created or deleted): the leader then
// rejoins so the group is reassigned, as Kafka's ConsumerCoordinator does.
func (g *groupMember) metadataChanged() bool {
	g.mu.Lock()
	snapshot := g.leaderSnapshot
	g.mu.Unlock()
	if snapshot == nil {
		return false
	}
	meta := g.c.cl.Metadata()
	for t, n := range snapshot {
		var now int32
		if tm := meta.Topics[t]; tm != nil && tm.Err == nil {
			now = int32(len(tm.Partitions))
		}
		if now != n {
			return true
		}
	}
	return false
}

// prepareJoin is Kafka's onJoinPrepare: report lost partitions, or commit
// and (eager protocol) revoke everything before joining.
func (g *groupMember) prepareJoin(ctx context.Context) {
	c := g.c
	g.mu.Lock()
	lost, owned := g.lost, g.owned
	g.stable = false
	g.mu.Unlock()

	switch {
	case lost:
		// Fenced or timed out: the partitions may already be consumed
		// elsewhere, so they are dropped without a commit.
		if len(owned) > 0 {
			c.callLost(owned)
			c.removePartitions(owned)
		}
		g.mu.Lock()
		g.owned, g.prevOwned, g.lost = map[string][]int32{}, nil, false
		g.mu.Unlock()
	case !g.cooperative():
		// Eager: commit, then give everything up before joining.
		if c.cfg.autoCommit {
			_ = c.commitPositions(ctx, nil)
		}
		if len(owned) > 0 {
			c.callRevoked(owned)
			c.removePartitions(owned)
		}
		g.mu.Lock()
		// Sticky members report what they owned before revoking.
		g.owned, g.prevOwned = map[string][]int32{}, owned
		g.mu.Unlock()
	default:
		// Cooperative: keep consuming what we own; commit so that what
		// moves starts where we stopped.
		if c.cfg.autoCommit && len(owned) > 0 {
			_ = c.commitPositions(ctx, nil)
		}
	}
}

// startJoin runs joinAndSync on a goroutine the Consumer owns.
func (g *groupMember) startJoin() {
	c := g.c
	ctx, cancel := context.WithCancel(c.run)
	j := &joinAttempt{done: make(chan struct{}), cancel: cancel}
	g.mu.Lock()
	g.joining = j
	g.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		j.assignment, j.err = g.joinAndSync(ctx)
		close(j.done)
		c.wakePoll()
	}()
}

// completeJoin is Kafka's onJoinComplete: apply the new assignment and run
// the listener.
func (g *groupMember) completeJoin(assignment map[string][]int32) {
	c := g.c
	g.mu.Lock()
	prev := g.owned
	g.mu.Unlock()
	added, revoked := diffAssignment(prev, assignment)
	if len(revoked) > 0 {
		// KIP-429: give up what the leader took away, then rejoin so that
		// the follow-up rebalance can hand it to its new owner.
		c.callRevoked(revoked)
		c.removePartitions(revoked)
	}
	c.addPartitions(added)
	g.mu.Lock()
	g.owned = assignment
	g.stable = true
	if len(revoked) > 0 {
		g.rejoin = true
	}
	g.lastPoll = time.Now()
	g.mu.Unlock()
	c.callAssigned(added)
}

// joinAndSync loops JoinGroup and SyncGroup until the member has an
// assignment for a generation, handling the coordinator's retriable answers.
func (g *groupMember) joinAndSync(ctx context.Context) (map[string][]int32, error) {
	c := g.c
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, c.cl.backoffFor(min(attempt, 5))); err != nil {
				return nil, err
			}
		}
		g.mu.Lock()
		memberID, generation, owned := g.memberID, g.generation, g.owned
		if len(owned) == 0 {
			owned = g.prevOwned
		}
		g.rejoin, g.synced = false, false
		g.mu.Unlock()

		join := kmsg.NewPtrJoinGroupRequest()
		join.Group = g.group
		join.SessionTimeoutMillis = int32(c.cfg.sessionTimeout.Milliseconds())
		join.RebalanceTimeoutMillis = int32(c.cfg.rebalanceTimeout.Milliseconds())
		join.MemberID = memberID
		join.InstanceID = c.cfg.instanceID
		join.ProtocolType = ConsumerProtocolType
		join.Reason = kmsg.StringPtr("rebalance")
		topics := c.subscription()
		for _, a := range c.cfg.assignors {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = a.Name()
			p.Metadata = a.Metadata(topics, owned, generation)
			join.Protocols = append(join.Protocols, p)
		}
		kresp, err := c.cl.CoordinatorRequest(ctx, GroupCoordinator, g.group, join)
		if err != nil {
			if ctx.Err() != nil || !IsRetriable(err) {
				return nil, fmt.Errorf("join group %s: %w", g.group, err)
			}
			continue
		}
		resp := kresp.(*kmsg.JoinGroupResponse)
		switch resp.ErrorCode {
		case 0:
		case codeMemberIDRequired:
			// KIP-394: the coordinator hands out the member id first and
			// expects the member to join again with it at once.
			g.mu.Lock()
			g.memberID = resp.MemberID
			g.mu.Unlock()
			attempt = -1
			continue
		case codeUnknownMemberID, codeIllegalGeneration:
			if g.resetMembership() {
				return nil, errJoinRestart
			}
			continue
		case codeRebalanceInProgress:
			continue
		case codeFencedInstanceID, codeInconsistentProto, codeGroupMaxSize, codeInvalidSession:
			err := fmt.Errorf("join group %s: %w", g.group, errorWithMessage(resp.ErrorCode, nil))
			if resp.ErrorCode == codeFencedInstanceID {
				g.mu.Lock()
				g.fatal = err
				g.mu.Unlock()
			}
			return nil, err
		default:
			err := errorWithMessage(resp.ErrorCode, nil)
			if IsRetriable(err) {
				continue
			}
			return nil, fmt.Errorf("join group %s: %w", g.group, err)
		}

		g.mu.Lock()
		g.memberID, g.generation = resp.MemberID, resp.Generation
		if resp.Protocol != nil {
			g.protocol = *resp.Protocol
		}
		protocol := g.protocol
		g.mu.Unlock()

		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group = g.group
		sync.Generation = resp.Generation
		sync.MemberID = resp.MemberID
		sync.InstanceID = c.cfg.instanceID
		sync.ProtocolType = kmsg.StringPtr(ConsumerProtocolType)
		sync.Protocol = kmsg.StringPtr(protocol)
		// KIP-814: a static leader that rejoined a stable group is told
		// to skip assignment; the coordinator keeps the current one.
		g.mu.Lock()
		g.leaderSnapshot = nil
		g.mu.Unlock()
		if resp.LeaderID == resp.MemberID && !resp.SkipAssignment {
			plan, err := g.lead(ctx, protocol, resp.Members)
			if err != nil {
				return nil, err
			}
			for member, a := range plan {
				sa := kmsg.NewSyncGroupRequestGroupAssignment()
				sa.MemberID = member
				sa.MemberAssignment = encodeAssignment(a)
				sync.GroupAssignment = append(sync.GroupAssignment, sa)
			}
		}
		kresp, err = c.cl.CoordinatorRequest(ctx, GroupCoordinator, g.group, sync)
		if err != nil {
			if ctx.Err() != nil || !IsRetriable(err) {
				return nil, fmt.Errorf("sync group %s: %w", g.group, err)
			}
			continue
		}
		sresp := kresp.(*kmsg.SyncGroupResponse)
		switch sresp.ErrorCode {
		case 0:
		case codeUnknownMemberID, codeIllegalGeneration:
			if g.resetMembership() {
				return nil, errJoinRestart
			}
			continue
		case codeRebalanceInProgress:
			continue
		case codeFencedInstanceID:
			err := fmt.Errorf("sync group %s: %w", g.group, ErrFencedInstanceID)
			g.mu.Lock()
			g.fatal = err
			g.mu.Unlock()
			return nil, err
		default:
			err := errorWithMessage(sresp.ErrorCode, nil)
			if IsRetriable(err) {
				continue
			}
			return nil, fmt.Errorf("sync group %s: %w", g.group, err)
		}
		assignment, err := decodeAssignment(sresp.MemberAssignment)
		if err != nil {
			return nil, fmt.Errorf("sync group %s: %w", g.group, err)
		}
		g.mu.Lock()
		// In the generation now: heartbeats start even before Poll applies
		// the assignment.
		g.synced = true
		g.lastPoll = time.Now()
		g.mu.Unlock()
		return assignment, nil
	}
}

// lead computes the group's assignment on the leader with the chosen
// assignor, for the partitions that exist of every topic any member wants.
func (g *groupMember) lead(ctx context.Context, protocol string, members []kmsg.JoinGroupResponseMember) (GroupAssignment, error) {
	var assignor Assignor
	for _, a := range g.c.cfg.assignors {
		if a.Name() == protocol {
			assignor = a
		}
	}
	if assignor == nil {
		return nil, fmt.Errorf("group %s chose assignor %q, which this member does not have", g.group, protocol)
	}
	var gms []GroupMember
	topics := map[string]bool{}
	for _, m := range members {
		gm, err := DecodeGroupMember(m.MemberID, m.InstanceID, protocol, m.ProtocolMetadata)
		if err != nil {
			// A member whose metadata we cannot read gets nothing rather
			// than failing the whole group.
			gm = GroupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, Generation: -1}
		}
		gms = append(gms, gm)
		for _, t := range gm.Topics {
			topics[t] = true
		}
	}
	g.c.mu.Lock()
	for t := range topics {
		g.c.watchLocked(t) // the leader watches every member's topics
	}
	g.c.mu.Unlock()
	partitions := map[string]int32{}
	for t := range topics {
		tm, err := g.c.cl.TopicMetadata(ctx, t)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			continue // unknown topics are assigned once they exist
		}
		partitions[t] = int32(len(tm.Partitions))
	}
	plan, err := assignor.Assign(gms, partitions)
	if err != nil {
		return nil, fmt.Errorf("assign group %s with %s: %w", g.group, protocol, err)
	}
	snapshot := make(map[string]int32, len(topics))
	for t := range topics {
		snapshot[t] = partitions[t] // 0 for a topic that does not exist yet
	}
	g.mu.Lock()
	g.leaderSnapshot = snapshot
	g.mu.Unlock()
	return plan, nil
}

// resetMembership forgets the member id and generation after the coordinator
// said they are no longer valid: what the member owns is lost.
// It reports whether owned partitions were lost.
func (g *groupMember) resetMembership() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.memberID, g.generation = "", -1
	g.stable, g.synced = false, false
	if len(g.owned) > 0 {
		g.lost = true
	}
	return g.lost
}

// current returns the membership a commit must carry.
func (g *groupMember) current() (memberID string, generation int32, stable bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.memberID, g.generation, g.stable
}

// heartbeatLoop is the background heartbeat (Kafka's heartbeat thread). It
// is owned by the Consumer and exits when ctx ends (Close).
func (g *groupMember) heartbeatLoop(ctx context.Context) {
	c := g.c
	ticker := time.NewTicker(c.cfg.heartbeatInterval)
	defer ticker.Stop()
	// The poll timer is checked more often than heartbeats are sent so
	// that expiry is noticed promptly.
	pollCheck := time.NewTicker(min(c.cfg.heartbeatInterval, c.cfg.maxPollInterval/4+time.Millisecond))
	defer pollCheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pollCheck.C:
			g.checkPollInterval(ctx)
		case <-ticker.C:
			g.heartbeat(ctx)
			if g.metadataChanged() {
				g.requestRejoin()
				c.wakePoll()
			}
		}
	}
}

// checkPollInterval leaves the group when the application stopped polling
// for max.poll.interval.ms, so the group moves on without it (KIP-62).
func (g *groupMember) checkPollInterval(ctx context.Context) {
	c := g.c
	g.mu.Lock()
	expired := g.synced && !g.polling && time.Since(g.lastPoll) > c.cfg.maxPollInterval
	if !expired {
		g.mu.Unlock()
		return
	}
	memberID := g.memberID
	g.stable, g.synced, g.lost = false, false, len(g.owned) > 0
	g.memberID, g.generation = "", -1
	g.leftReason = "max.poll.interval.ms expired"
	g.mu.Unlock()
	if c.cfg.instanceID == nil {
		// A static member stays registered until session.timeout.ms, as
		// in Kafka: it might just be restarting.
		_ = g.leave(ctx, memberID, "consumer poll timeout has expired (max.poll.interval.ms)")
	}
	c.wakePoll()
}

func (g *groupMember) heartbeat(ctx context.Context) {
	c := g.c
	g.mu.Lock()
	if !g.synced {
		g.mu.Unlock()
		return
	}
	memberID, generation := g.memberID, g.generation
	g.mu.Unlock()

	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = g.group
	req.Generation = generation
	req.MemberID = memberID
	req.InstanceID = c.cfg.instanceID
	hctx, cancel := context.WithTimeout(ctx, c.cfg.sessionTimeout)
	kresp, err := c.cl.CoordinatorRequest(hctx, GroupCoordinator, g.group, req)
	cancel()
	if err != nil {
		return // the next tick tries again; the session timeout decides
	}
	code := kresp.(*kmsg.HeartbeatResponse).ErrorCode
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.memberID != memberID || g.generation != generation {
		return // a rebalance completed meanwhile; this answer is stale
	}
	switch code {
	case 0:
		return
	case codeRebalanceInProgress:
		g.rejoin = true
	case codeUnknownMemberID, codeIllegalGeneration:
		g.memberID, g.generation = "", -1
		g.stable, g.synced, g.lost = false, false, len(g.owned) > 0
	case codeFencedInstanceID:
		g.fatal = fmt.Errorf("heartbeat group %s: %w", g.group, ErrFencedInstanceID)
		g.stable, g.synced, g.lost = false, false, len(g.owned) > 0
	default:
		return
	}
	c.wakePoll()
}

// leave sends LeaveGroup for memberID (v3+ batches members; earlier
// versions take the member id at the top level).
func (g *groupMember) leave(ctx context.Context, memberID, reason string) error {
	if memberID == "" {
		return nil
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = g.group
	req.MemberID = memberID
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = memberID
	m.InstanceID = g.c.cfg.instanceID
	m.Reason = kmsg.StringPtr(reason)
	req.Members = []kmsg.LeaveGroupRequestMember{m}
	kresp, err := g.c.cl.CoordinatorRequest(ctx, GroupCoordinator, g.group, req)
	if err != nil {
		return fmt.Errorf("leave group %s: %w", g.group, err)
	}
	resp := kresp.(*kmsg.LeaveGroupResponse)
	if err := errorWithMessage(resp.ErrorCode, nil); err != nil {
		return fmt.Errorf("leave group %s: %w", g.group, err)
	}
	for _, m := range resp.Members {
		if err := errorWithMessage(m.ErrorCode, nil); err != nil && m.ErrorCode != codeUnknownMemberID {
			return fmt.Errorf("leave group %s: %w", g.group, err)
		}
	}
	return nil
}

// close revokes the assignment (committing first when auto commit is on) and
// leaves the group; a static member only revokes (KIP-345: it may be back
// before session.timeout.ms). Runs on the goroutine calling Consumer.Close.
func (g *groupMember) close(ctx context.Context) error {
	c := g.c
	g.mu.Lock()
	if g.joining != nil {
		g.joining.cancel()
	}
	owned, lost, memberID := g.owned, g.lost, g.memberID
	g.owned, g.stable, g.synced = map[string][]int32{}, false, false
	g.mu.Unlock()
	var err error
	if len(owned) > 0 {
		if lost {
			c.callLost(owned)
		} else {
			if c.cfg.autoCommit {
				err = c.commitPositions(ctx, nil)
			}
			c.callRevoked(owned)
		}
	}
	if c.cfg.instanceID == nil {
		if lerr := g.leave(ctx, memberID, "the consumer is being closed"); lerr != nil && err == nil {
			err = lerr
		}
	}
	return err
}

// diffAssignment returns what next adds to prev and what it takes away.
func diffAssignment(prev, next map[string][]int32) (added, revoked map[string][]int32) {
	added, revoked = map[string][]int32{}, map[string][]int32{}
	for t, ps := range next {
		for _, p := range ps {
			if !slices.Contains(prev[t], p) {
				added[t] = append(added[t], p)
			}
		}
	}
	for t, ps := range prev {
		for _, p := range ps {
			if !slices.Contains(next[t], p) {
				revoked[t] = append(revoked[t], p)
			}
		}
	}
	return added, revoked
}

func cloneAssignment(a map[string][]int32) map[string][]int32 {
	out := make(map[string][]int32, len(a))
	for t, ps := range maps.All(a) {
		out[t] = slices.Clone(ps)
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
