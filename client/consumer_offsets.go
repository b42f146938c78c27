package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is where a Consumer's offsets come from and go to: start offsets
// (the group's committed offset, else auto.offset.reset through ListOffsets)
// and commits (OffsetCommit, OffsetFetch), automatic or explicit.

// resolvePositions finds start offsets for partitions that need one: the
// group's committed offset, else auto.offset.reset through ListOffsets. It
// reports whether some are still unresolved after a retriable failure.
func (c *Consumer) resolvePositions(ctx context.Context) (bool, error) {
	type want struct {
		ps  *partState
		gen uint64
		at  int64
	}
	c.mu.Lock()
	var wants []want
	for _, ps := range c.parts {
		if ps.fetchOffset < 0 && ps.resetErr == nil {
			wants = append(wants, want{ps, ps.gen, ps.startAt})
		}
	}
	c.mu.Unlock()
	if len(wants) == 0 {
		return false, nil
	}

	var committedTPs []groupTP
	for _, w := range wants {
		if w.at == offsetCommitted {
			committedTPs = append(committedTPs, w.ps.tp)
		}
	}
	if len(committedTPs) > 0 {
		committed, err := c.fetchCommitted(ctx, committedTPs)
		if err != nil {
			if ctx.Err() != nil || !IsRetriable(err) {
				return false, err
			}
			return true, nil
		}
		c.mu.Lock()
		for i := range wants {
			w := &wants[i]
			if w.at != offsetCommitted || c.parts[w.ps.tp] != w.ps || w.ps.gen != w.gen {
				continue
			}
			if co, ok := committed[w.ps.tp]; ok && co.offset >= 0 {
				w.ps.fetchOffset, w.ps.position, w.ps.leaderEpoch = co.offset, co.offset, co.epoch
				w.at = 0 // resolved
				continue
			}
			w.at = c.resetOffset()
			w.ps.startAt = w.at
		}
		c.mu.Unlock()
	}

	// ListOffsets, one request per partition leader.
	byLeader := map[int32][]want{}
	pending := false
	for _, w := range wants {
		switch w.at {
		case 0:
			continue
		case offsetNone:
			c.mu.Lock()
			if c.parts[w.ps.tp] == w.ps && w.ps.gen == w.gen {
				w.ps.resetErr = fmt.Errorf("%s-%d: %w", w.ps.tp.Topic, w.ps.tp.Partition, ErrNoOffset)
			}
			c.mu.Unlock()
			continue
		}
		leader, err := c.cl.PartitionLeader(ctx, w.ps.tp.Topic, w.ps.tp.Partition)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			c.cl.TriggerMetadataRefresh()
			pending = true
			continue
		}
		byLeader[leader] = append(byLeader[leader], w)
	}
	for leader, ws := range byLeader {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = int8(c.cfg.isolation)
		byTopic := map[string][]kmsg.ListOffsetsRequestTopicPartition{}
		for _, w := range ws {
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition = w.ps.tp.Partition
			p.Timestamp = w.at // -2 earliest, -1 latest: Kafka's sentinels
			p.CurrentLeaderEpoch = -1
			p.MaxNumOffsets = 1
			byTopic[w.ps.tp.Topic] = append(byTopic[w.ps.tp.Topic], p)
		}
		for _, t := range sortedTopics(byTopic) {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic, rt.Partitions = t, byTopic[t]
			req.Topics = append(req.Topics, rt)
		}
		kresp, err := c.cl.BrokerRequest(ctx, leader, req)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			c.cl.TriggerMetadataRefresh()
			pending = true
			continue
		}
		resp := kresp.(*kmsg.ListOffsetsResponse)
		c.mu.Lock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := groupTP{t.Topic, p.Partition}
				ps := c.parts[tp]
				var w *want
				for i := range ws {
					if ws[i].ps == ps {
						w = &ws[i]
					}
				}
				if w == nil || ps.gen != w.gen {
					continue
				}
				if err := errorWithMessage(p.ErrorCode, nil); err != nil {
					if IsRetriable(err) {
						c.cl.TriggerMetadataRefresh()
						pending = true
						continue
					}
					c.fetchErrs = append(c.fetchErrs, fmt.Errorf("list offsets %s-%d: %w", tp.Topic, tp.Partition, err))
					continue
				}
				off := p.Offset
				if resp.Version == 0 && len(p.OldStyleOffsets) > 0 {
					off = p.OldStyleOffsets[0]
				}
				ps.fetchOffset, ps.position = off, off
			}
		}
		c.mu.Unlock()
	}
	c.kickFetch()
	return pending, nil
}

// offsetNone marks a partition that must fail with ErrNoOffset.
const offsetNone int64 = -4

// resetOffset maps auto.offset.reset onto a start offset sentinel.
func (c *Consumer) resetOffset() int64 {
	switch c.cfg.reset {
	case OffsetResetEarliest:
		return OffsetEarliest
	case OffsetResetNone:
		return offsetNone
	}
	return OffsetLatest
}

type committedOffset struct {
	offset int64
	epoch  int32
}

// fetchCommitted reads the group's committed offsets (OffsetFetch; v8+
// batches groups, KIP-709).
func (c *Consumer) fetchCommitted(ctx context.Context, tps []groupTP) (map[groupTP]committedOffset, error) {
	if c.cfg.group == "" {
		return nil, ErrNoGroup
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = c.cfg.group
	req.RequireStable = true // KIP-447: wait out pending transactional commits
	byTopic := map[string][]int32{}
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = c.cfg.group
	memberID, gen, _ := c.memberForCommit()
	if memberID != "" {
		g.MemberID, g.MemberEpoch = &memberID, gen
	}
	ids := topicIDs(ctx, c, byTopic)
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.TopicID, gt.Partitions = t, ids.id[t], byTopic[t]
		g.Topics = append(g.Topics, gt)
	}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	kresp, err := c.cl.CoordinatorRequest(ctx, GroupCoordinator, c.cfg.group, req)
	if err != nil {
		return nil, fmt.Errorf("offset fetch for group %s: %w", c.cfg.group, err)
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	out := map[groupTP]committedOffset{}
	add := func(topic string, p int32, off int64, epoch int32, code int16) error {
		if err := errorWithMessage(code, nil); err != nil {
			return fmt.Errorf("offset fetch %s-%d for group %s: %w", topic, p, c.cfg.group, err)
		}
		out[groupTP{topic, p}] = committedOffset{off, epoch}
		return nil
	}
	if resp.Version >= 8 {
		for _, g := range resp.Groups {
			if err := errorWithMessage(g.ErrorCode, nil); err != nil {
				return nil, fmt.Errorf("offset fetch for group %s: %w", c.cfg.group, err)
			}
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					if err := add(ids.name(t.Topic, t.TopicID), p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode); err != nil {
						return nil, err
					}
				}
			}
		}
		return out, nil
	}
	if err := errorWithMessage(resp.ErrorCode, nil); err != nil {
		return nil, fmt.Errorf("offset fetch for group %s: %w", c.cfg.group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := add(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// topicIDMap maps topic names to IDs and back for the group APIs whose
// newest versions name topics by ID (OffsetCommit v10+, OffsetFetch v10+).
type topicIDMap struct {
	id    map[string][16]byte
	names map[[16]byte]string
}

// name returns the topic a response entry is about.
func (m topicIDMap) name(topic string, id [16]byte) string {
	if topic != "" {
		return topic
	}
	return m.names[id]
}

// topicIDs looks up the IDs of topics in the metadata cache (fetching
// topics it lacks). Unknown topics get the zero ID, which only matters to a
// broker that negotiates a version using IDs.
func topicIDs[V any](ctx context.Context, c *Consumer, topics map[string]V) topicIDMap {
	m := topicIDMap{id: map[string][16]byte{}, names: map[[16]byte]string{}}
	for t := range topics {
		if tm, err := c.cl.TopicMetadata(ctx, t); err == nil {
			m.id[t], m.names[tm.ID] = tm.ID, t
		}
	}
	return m
}

// Committed returns the group's committed offsets for the given partitions
// (-1 for none), read from the coordinator.
func (c *Consumer) Committed(ctx context.Context, partitions map[string][]int32) (map[string]map[int32]int64, error) {
	var tps []groupTP
	for t, ps := range partitions {
		for _, p := range ps {
			tps = append(tps, groupTP{t, p})
		}
	}
	got, err := c.fetchCommitted(ctx, tps)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]int64{}
	for _, tp := range tps {
		if out[tp.Topic] == nil {
			out[tp.Topic] = map[int32]int64{}
		}
		off := int64(-1)
		if co, ok := got[tp]; ok {
			off = co.offset
		}
		out[tp.Topic][tp.Partition] = off
	}
	return out, nil
}

// memberForCommit is the member id and generation a commit carries: the
// group membership, or "" and -1 for a consumer committing outside a group
// (Kafka's assign + commit, which the coordinator accepts for an empty
// group).
func (c *Consumer) memberForCommit() (string, int32, bool) {
	if c.group == nil {
		return "", -1, true
	}
	return c.group.current()
}

// CommitSync commits the position of every assigned partition (the offset
// after the last record Poll returned) and waits for the coordinator's
// answer. In a group a commit that races with a rebalance fails with
// ErrRebalanceInProgress or ErrCommitFailed.
func (c *Consumer) CommitSync(ctx context.Context) error {
	return c.commitPositions(ctx, nil)
}

// CommitOffsetsSync commits the given offsets (topic → partition → next
// offset to consume) and waits for the answer.
func (c *Consumer) CommitOffsetsSync(ctx context.Context, offsets map[string]map[int32]int64) error {
	return c.commitPositions(ctx, offsets)
}

// CommitAsync commits the positions of every assigned partition in the
// background and calls done (if not nil) with the result, from a goroutine
// the Consumer owns. Commits are sent in call order but done may run
// concurrently with Poll.
func (c *Consumer) CommitAsync(done func(error)) {
	offsets := c.positions()
	if c.run.Err() != nil {
		if done != nil {
			done(ErrClosed)
		}
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.commit(c.run, offsets)
		if done != nil {
			done(err)
		}
	}()
}

// maybeAutoCommit starts an asynchronous commit of what earlier Polls
// returned when auto.commit.interval.ms has passed (one at a time).
func (c *Consumer) maybeAutoCommit() {
	if !c.cfg.autoCommit || c.cfg.group == "" {
		return
	}
	c.mu.Lock()
	due := !c.commitRunning && time.Since(c.lastCommit) >= c.cfg.autoCommitInterval
	if due {
		c.commitRunning = true
		c.lastCommit = time.Now()
	}
	c.mu.Unlock()
	if !due {
		return
	}
	offsets := c.positions()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_ = c.commit(c.run, offsets)
		c.mu.Lock()
		c.commitRunning = false
		c.mu.Unlock()
	}()
}

// positions snapshots the commit-worthy positions.
func (c *Consumer) positions() map[groupTP]committedOffset {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[groupTP]committedOffset, len(c.parts))
	for tp, ps := range c.parts {
		if ps.position >= 0 && (ps.fetchOffset >= 0 || ps.buffered) {
			out[tp] = committedOffset{ps.position, ps.leaderEpoch}
		}
	}
	return out
}

// commitPositions commits offsets, or the current positions when nil.
func (c *Consumer) commitPositions(ctx context.Context, offsets map[string]map[int32]int64) error {
	var os map[groupTP]committedOffset
	if offsets == nil {
		os = c.positions()
	} else {
		os = map[groupTP]committedOffset{}
		for t, ps := range offsets {
			for p, o := range ps {
				os[groupTP{t, p}] = committedOffset{o, -1}
			}
		}
	}
	return c.commit(ctx, os)
}

// commit sends one OffsetCommit.
func (c *Consumer) commit(ctx context.Context, offsets map[groupTP]committedOffset) error {
	if c.cfg.group == "" {
		return ErrNoGroup
	}
	if len(offsets) == 0 {
		return nil
	}
	memberID, generation, _ := c.memberForCommit()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = c.cfg.group
	req.Generation = generation
	req.MemberID = memberID
	req.InstanceID = c.cfg.instanceID
	byTopic := map[string][]kmsg.OffsetCommitRequestTopicPartition{}
	for _, tp := range slices.SortedFunc(maps.Keys(offsets), func(a, b groupTP) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	}) {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = offsets[tp].offset
		p.LeaderEpoch = offsets[tp].epoch
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	ids := topicIDs(ctx, c, byTopic)
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID, rt.Partitions = t, ids.id[t], byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	kresp, err := c.cl.CoordinatorRequest(ctx, GroupCoordinator, c.cfg.group, req)
	if err != nil {
		return fmt.Errorf("commit offsets for group %s: %w", c.cfg.group, err)
	}
	resp := kresp.(*kmsg.OffsetCommitResponse)
	var firstErr error
	c.mu.Lock()
	for _, t := range resp.Topics {
		topic := ids.name(t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			tp := groupTP{topic, p.Partition}
			if p.ErrorCode == 0 {
				c.committed[tp] = offsets[tp].offset
				continue
			}
			if firstErr != nil {
				continue
			}
			switch p.ErrorCode {
			case codeIllegalGeneration, codeUnknownMemberID:
				firstErr = fmt.Errorf("commit %s-%d for group %s: %w: %w", tp.Topic, tp.Partition, c.cfg.group, ErrCommitFailed, codeError(p.ErrorCode))
			default:
				firstErr = fmt.Errorf("commit %s-%d for group %s: %w", tp.Topic, tp.Partition, c.cfg.group, errorWithMessage(p.ErrorCode, nil))
			}
		}
	}
	c.mu.Unlock()
	if firstErr != nil && c.group != nil {
		switch {
		case errors.Is(firstErr, ErrCommitFailed):
			c.group.resetMembership()
			c.wakePoll()
		case errors.Is(firstErr, ErrRebalanceInProgress):
			c.group.requestRejoin()
			c.wakePoll()
		}
	}
	return firstErr
}
