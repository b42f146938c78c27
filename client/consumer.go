package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"
)

// Consumer reads records, either from partitions assigned directly
// (ConsumePartitions, Assign, Seek: Kafka's assign) or as a member of a
// consumer group (ConsumeTopics + ConsumerGroup: Kafka's subscribe).
//
// Records are fetched in the background, one Fetch at a time per partition
// leader, into a buffer that Poll drains; a partition is not fetched again
// until Poll has returned what was fetched for it, so memory stays bounded
// by roughly one fetch per broker.
//
// Concurrency: Poll, Records and Close follow Kafka's single-consumer-thread
// rule: call Poll from one goroutine at a time (concurrent calls are
// serialized). Rebalance callbacks run on that goroutine. Commit*, Seek,
// Position, Assignment, Assign, MemberID and Generation are safe for
// concurrent use from any goroutine, including from callbacks.
//
// Goroutines: the fetch dispatcher, one fetch per busy broker, the group
// heartbeat, and asynchronous commits. All are owned by the Consumer and
// stopped by Close.
type Consumer struct {
	cl        *Client
	ownClient bool
	cfg       consumerConfig
	group     *groupMember // nil without ConsumeTopics

	pollMu sync.Mutex // serializes Poll and Close's group shutdown

	// mu guards everything below it. Lock order: groupMember.mu is never
	// held while taking mu, nor mu while taking groupMember.mu.
	mu            sync.Mutex
	parts         map[groupTP]*partState
	buffered      []*fetchedPartition // fetched, not yet returned by Poll
	fetchErrs     []error             // non-retriable fetch errors for Poll to return
	sessions      map[int32]*fetchSession
	busy          map[int32]bool // brokers with a Fetch in flight
	lastCommit    time.Time
	commitRunning bool
	committed     map[groupTP]int64 // last offsets this consumer committed
	watched       map[string]bool   // topics registered with the metadata refresher

	pollWake  chan struct{} // buffered(1): data, errors or group events for Poll
	fetchWake chan struct{} // buffered(1): the dispatcher should look for work

	closing     context.Context // canceled when Close starts: interrupts Poll
	stopClosing context.CancelFunc
	run         context.Context // canceled when Close has left the group: stops goroutines
	stopRun     context.CancelFunc
	wg          sync.WaitGroup
	closeOnce   sync.Once
	closeErr    error
}

// offsetCommitted is an internal start offset: look up the group's committed
// offset, then fall back on auto.offset.reset.
const offsetCommitted int64 = -3

// partState is one assigned partition's fetch and consume positions.
type partState struct {
	tp groupTP
	// gen is bumped by Seek and resets: fetch results started before carry
	// the old gen and are dropped.
	gen uint64
	// fetchOffset is the next offset to fetch; negative while a start
	// offset must be resolved first, startAt saying how.
	fetchOffset int64
	startAt     int64
	// position is the next offset Poll returns: what a commit stores.
	position    int64
	leaderEpoch int32 // of the last record returned, for commits (KIP-320)
	inflight    bool  // part of a Fetch in flight
	buffered    bool  // fetched records wait in Consumer.buffered
	highWater   int64
	resetErr    error // auto.offset.reset=none found no offset
}

// fetchedPartition is what one Fetch returned for one partition.
type fetchedPartition struct {
	ps   *partState
	gen  uint64
	recs []Record
	idx  int   // next record to return
	next int64 // fetch offset after these records
}

// ErrNoOffset is returned by Poll for a partition with no committed offset
// (or an out-of-range one) when auto.offset.reset is none: Kafka's
// NoOffsetForPartitionException. Seek the partition to go on.
var ErrNoOffset = errors.New("no offset to start from and auto.offset.reset is none")

// ErrNoGroup is returned by commits of a consumer without ConsumerGroup.
var ErrNoGroup = errors.New("consumer has no group.id to commit offsets to")

// NewConsumer connects to the cluster (SeedBrokers and the other client
// options in opts) and returns a Consumer configured by the consumer options
// in opts. It owns its Client and closes it on Close. A group consumer joins
// its group on the first Poll.
func NewConsumer(ctx context.Context, opts ...Opt) (*Consumer, error) {
	ccfg, _ := splitOpts(opts)
	cl, err := newClient(ctx, ccfg)
	if err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	c, err := NewConsumerFromClient(ctx, cl, opts...)
	if err != nil {
		cl.Close()
		return nil, err
	}
	c.ownClient = true
	return c, nil
}

// NewConsumerFromClient returns a Consumer that shares cl's connections and
// metadata. Client options in opts are ignored; Close leaves cl open.
func NewConsumerFromClient(ctx context.Context, cl *Client, opts ...Opt) (*Consumer, error) {
	cfg := defaultConsumerConfig()
	_, rest := splitOpts(opts)
	for _, o := range rest {
		if co, ok := o.(consumerOpt); ok {
			co.fn(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	c := &Consumer{
		cl:        cl,
		cfg:       cfg,
		parts:     map[groupTP]*partState{},
		sessions:  map[int32]*fetchSession{},
		busy:      map[int32]bool{},
		committed: map[groupTP]int64{},
		pollWake:  make(chan struct{}, 1),
		fetchWake: make(chan struct{}, 1),
	}
	c.closing, c.stopClosing = context.WithCancel(context.Background())
	c.run, c.stopRun = context.WithCancel(context.Background())
	c.lastCommit = time.Now()
	if len(cfg.direct) > 0 {
		c.assignDirect(cfg.direct)
	}
	if len(cfg.topics) > 0 {
		c.group = newGroupMember(c)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.group.heartbeatLoop(c.run)
		}()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.fetchDispatcher()
	}()
	return c, nil
}

// subscription is the topics the group member asks for.
func (c *Consumer) subscription() []string { return slices.Clone(c.cfg.topics) }

// Poll returns the next records, at most max.poll.records, waiting until
// some are available or ctx ends (then it returns ctx's error). In a group
// it first joins or rejoins when needed, running the rebalance listener, and
// with auto commit on it commits what earlier Polls returned once
// auto.commit.interval.ms has passed. Records of one partition are returned
// in offset order. Returned records stay valid: the Consumer never reuses
// their memory.
func (c *Consumer) Poll(ctx context.Context) ([]*Record, error) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	if c.closing.Err() != nil {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.closing, cancel)
	defer stop()
	if c.group != nil {
		c.group.setPolling(true)
		defer c.group.setPolling(false)
	}
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		if err := c.pollErr(ctx); err != nil {
			return nil, err
		}
		if c.group != nil {
			if err := c.group.ensureActive(ctx); err != nil {
				if c.closing.Err() != nil {
					return nil, ErrClosed
				}
				return nil, err
			}
		}
		c.maybeAutoCommit()
		pending, err := c.resolvePositions(ctx)
		if err == nil && !c.knowTopics(ctx) {
			pending = true
		}
		if err != nil {
			if c.closing.Err() != nil {
				return nil, ErrClosed
			}
			return nil, err
		}
		if recs, err := c.drain(); len(recs) > 0 || err != nil {
			return recs, err
		}
		c.kickFetch()
		var retryC <-chan time.Time
		if pending {
			// Some start offsets could not be resolved yet (no leader,
			// a retriable error): try again shortly.
			if retry == nil {
				retry = time.NewTimer(c.cl.cfg.retryBackoff)
			} else {
				retry.Reset(c.cl.cfg.retryBackoff)
			}
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
		case <-c.pollWake:
		case <-retryC:
		}
	}
}

// knowTopics makes sure the metadata cache holds (and the Client keeps
// refreshing) every assigned topic, which the fetch dispatcher needs to find
// partition leaders. It reports whether all are known.
func (c *Consumer) knowTopics(ctx context.Context) bool {
	meta := c.cl.Metadata()
	c.mu.Lock()
	var missing []string
	for tp := range c.parts {
		if t := meta.Topics[tp.Topic]; (t == nil || t.Err != nil) && !slices.Contains(missing, tp.Topic) {
			missing = append(missing, tp.Topic)
		}
	}
	c.mu.Unlock()
	c.watchTopics()
	ok := true
	for _, t := range missing {
		if _, err := c.cl.TopicMetadata(ctx, t); err != nil {
			ok = false
		}
	}
	if len(missing) > 0 {
		c.kickFetch()
	}
	return ok
}

// watchTopics makes the Client's metadata refresher keep every assigned and
// subscribed topic fresh (metadata.max.age.ms, and on TriggerMetadataRefresh
// after NOT_LEADER_OR_FOLLOWER), registering them before any of them is
// looked up.
func (c *Consumer) watchTopics() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range c.parts {
		c.watchLocked(tp.Topic)
	}
	for _, t := range c.cfg.topics {
		c.watchLocked(t)
	}
}

func (c *Consumer) watchLocked(topic string) {
	if c.watched == nil {
		c.watched = map[string]bool{}
	}
	if !c.watched[topic] {
		c.watched[topic] = true
		c.cl.interest.Store(topic, struct{}{})
	}
}

// pollErr is why Poll must stop now, if it must.
func (c *Consumer) pollErr(ctx context.Context) error {
	if c.closing.Err() != nil {
		return ErrClosed
	}
	return ctx.Err()
}

// Records returns an iterator over consumed records for a range loop, the
// idiomatic Go form of a poll loop:
//
//	for rec, err := range consumer.Records(ctx) {
//		if err != nil { log.Print(err); continue }
//		process(rec)
//	}
//
// It calls Poll repeatedly and yields each record; Poll errors are yielded
// with a nil record and the loop goes on if the body continues. It ends when
// the body breaks, ctx ends, the Consumer is closed, or after yielding
// ErrFencedInstanceID. The same rules as Poll
// apply: one loop (or Poll caller) at a time.
func (c *Consumer) Records(ctx context.Context) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		for {
			recs, err := c.Poll(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrClosed) {
					return
				}
				if !yield(nil, err) || errors.Is(err, ErrFencedInstanceID) {
					return // a fenced member can never poll again
				}
				continue
			}
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}

// drain takes up to max.poll.records buffered records, advancing positions.
func (c *Consumer) drain() ([]*Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.fetchErrs) > 0 {
		err := c.fetchErrs[0]
		c.fetchErrs = c.fetchErrs[1:]
		return nil, err
	}
	for _, ps := range c.parts {
		if ps.resetErr != nil {
			err := ps.resetErr
			ps.resetErr = nil
			return nil, err
		}
	}
	limit := c.cfg.maxPollRecords
	var out []*Record
	freed := false
	for len(c.buffered) > 0 && len(out) < limit {
		fp := c.buffered[0]
		if c.parts[fp.ps.tp] != fp.ps || fp.ps.gen != fp.gen {
			c.buffered = c.buffered[1:] // revoked or seeked since the fetch
			continue
		}
		if out == nil {
			out = make([]*Record, 0, min(limit, c.bufferedCountLocked()))
		}
		take := min(len(fp.recs)-fp.idx, limit-len(out))
		for i := range take {
			out = append(out, &fp.recs[fp.idx+i])
		}
		fp.idx += take
		last := &fp.recs[fp.idx-1]
		fp.ps.position, fp.ps.leaderEpoch = last.Offset+1, last.LeaderEpoch
		if fp.idx == len(fp.recs) {
			fp.ps.position = max(fp.ps.position, fp.next)
			fp.ps.buffered = false
			c.buffered[0] = nil
			c.buffered = c.buffered[1:]
			freed = true
		}
	}
	if len(c.buffered) == 0 {
		c.buffered = nil
	}
	if freed {
		c.kickFetch()
	}
	return out, nil
}

func (c *Consumer) bufferedCountLocked() int {
	n := 0
	for _, fp := range c.buffered {
		n += len(fp.recs) - fp.idx
	}
	return n
}

// wakePoll wakes a Poll waiting for records. Never blocks.
func (c *Consumer) wakePoll() {
	select {
	case c.pollWake <- struct{}{}:
	default:
	}
}

// kickFetch wakes the fetch dispatcher. Never blocks.
func (c *Consumer) kickFetch() {
	select {
	case c.fetchWake <- struct{}{}:
	default:
	}
}

// assignDirect replaces the direct assignment with partitions and their
// start offsets.
func (c *Consumer) assignDirect(partitions map[string]map[int32]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range c.parts {
		if _, ok := partitions[tp.Topic][tp.Partition]; !ok {
			delete(c.parts, tp)
		}
	}
	for t, ps := range partitions {
		for p, off := range ps {
			tp := groupTP{t, p}
			if _, ok := c.parts[tp]; ok {
				continue
			}
			st := &partState{tp: tp, position: -1, leaderEpoch: -1, highWater: -1}
			st.seekLocked(off)
			c.parts[tp] = st
		}
	}
	c.kickFetch()
}

// Assign replaces the directly assigned partitions (Kafka's assign):
// topic → partition → start offset (an offset, OffsetEarliest or
// OffsetLatest). Partitions already assigned keep their position. It fails
// for a group consumer, whose assignment the group decides.
func (c *Consumer) Assign(partitions map[string]map[int32]int64) error {
	if c.group != nil {
		return errors.New("assign: the consumer's partitions are managed by its group")
	}
	c.assignDirect(partitions)
	c.wakePoll()
	return nil
}

// seekLocked moves the partition to offset (or OffsetEarliest/OffsetLatest,
// or offsetCommitted) and invalidates anything fetched before.
func (ps *partState) seekLocked(offset int64) {
	ps.gen++
	ps.buffered = false
	ps.resetErr = nil
	if offset >= 0 {
		ps.fetchOffset, ps.position = offset, offset
		return
	}
	ps.fetchOffset, ps.startAt = -1, offset
}

// Seek sets the next offset Poll returns for an assigned partition: an
// offset, OffsetEarliest or OffsetLatest. Records already fetched for it are
// dropped. Seeking an unassigned partition is an error.
func (c *Consumer) Seek(topic string, partition int32, offset int64) error {
	c.mu.Lock()
	ps := c.parts[groupTP{topic, partition}]
	if ps == nil {
		c.mu.Unlock()
		return fmt.Errorf("seek %s-%d: partition not assigned", topic, partition)
	}
	ps.seekLocked(offset)
	c.mu.Unlock()
	c.kickFetch()
	c.wakePoll()
	return nil
}

// Position returns the next offset Poll will return for a partition, and
// false if the partition is not assigned or its start offset is not known
// yet.
func (c *Consumer) Position(topic string, partition int32) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.parts[groupTP{topic, partition}]
	if ps == nil || ps.position < 0 || ps.fetchOffset < 0 && !ps.buffered {
		return -1, false
	}
	return ps.position, true
}

// Assignment returns the partitions currently assigned, directly or by the
// group.
func (c *Consumer) Assignment() map[string][]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]int32{}
	for tp := range c.parts {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// MemberID returns the group member id ("" outside a group or before the
// first join).
func (c *Consumer) MemberID() string {
	if c.group == nil {
		return ""
	}
	id, _, _ := c.group.current()
	return id
}

// Generation returns the group generation the member is in, -1 if none.
func (c *Consumer) Generation() int32 {
	if c.group == nil {
		return -1
	}
	_, gen, _ := c.group.current()
	return gen
}

// addPartitions adds group-assigned partitions, to start at their committed
// offsets.
func (c *Consumer) addPartitions(a map[string][]int32) {
	c.mu.Lock()
	for t, ps := range a {
		for _, p := range ps {
			tp := groupTP{t, p}
			if _, ok := c.parts[tp]; !ok {
				c.parts[tp] = &partState{tp: tp, fetchOffset: -1, startAt: offsetCommitted, position: -1, leaderEpoch: -1, highWater: -1}
			}
		}
	}
	c.mu.Unlock()
	c.kickFetch()
}

// removePartitions drops partitions; their buffered records are discarded.
func (c *Consumer) removePartitions(a map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ps := range a {
		for _, p := range ps {
			delete(c.parts, groupTP{t, p})
		}
	}
}

func (c *Consumer) callAssigned(a map[string][]int32) {
	if f := c.cfg.listener.OnAssigned; f != nil {
		f(cloneAssignment(a))
	}
}

func (c *Consumer) callRevoked(a map[string][]int32) {
	if f := c.cfg.listener.OnRevoked; f != nil {
		f(cloneAssignment(a))
	}
}

func (c *Consumer) callLost(a map[string][]int32) {
	if f := c.cfg.listener.OnLost; f != nil {
		f(cloneAssignment(a))
		return
	}
	c.callRevoked(a)
}

// Close stops the Consumer: a group member commits (auto commit), runs
// OnRevoked and leaves the group (a static member does not leave, KIP-345);
// then every goroutine is stopped and, if the Consumer created its Client,
// the connections are closed. A Poll blocked in another goroutine returns
// ErrClosed. ctx bounds the commit and LeaveGroup. Safe to call more than
// once; later calls return the first call's result. It must not be called
// from a rebalance callback (the Poll running the callback holds the
// consumer; Close would wait for it forever).
func (c *Consumer) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.stopClosing()
		c.pollMu.Lock()
		switch {
		case c.group != nil:
			c.closeErr = c.group.close(ctx)
		case c.cfg.autoCommit && c.cfg.group != "":
			// Direct assignment that stores offsets in a group.
			c.closeErr = c.commitPositions(ctx, nil)
		}
		c.pollMu.Unlock()
		c.stopRun()
		c.wg.Wait()
		if c.ownClient {
			c.cl.Close()
		}
	})
	return c.closeErr
}
