package client

import (
	"fmt"
	"time"
)

// consumerOpt is an Opt that configures a Consumer. Producers and admins
// ignore it.
type consumerOpt struct{ fn func(*consumerConfig) }

func (consumerOpt) isOpt() {}

// OffsetReset is auto.offset.reset: where a consumer starts a partition that
// has no committed offset, or whose position fell outside the log
// (OFFSET_OUT_OF_RANGE, e.g. after retention deleted it).
type OffsetReset int8

const (
	// OffsetResetLatest starts at the log end: only records produced from
	// now on are consumed. Kafka's default.
	OffsetResetLatest OffsetReset = iota
	// OffsetResetEarliest starts at the log start offset.
	OffsetResetEarliest
	// OffsetResetNone fails Poll with ErrNoOffset for the partition instead
	// of guessing.
	OffsetResetNone
)

// String returns the auto.offset.reset value.
func (r OffsetReset) String() string {
	switch r {
	case OffsetResetEarliest:
		return "earliest"
	case OffsetResetNone:
		return "none"
	}
	return "latest"
}

// ParseOffsetReset maps an auto.offset.reset value ("earliest", "latest",
// "none") to its OffsetReset.
func ParseOffsetReset(s string) (OffsetReset, error) {
	switch s {
	case "earliest":
		return OffsetResetEarliest, nil
	case "latest":
		return OffsetResetLatest, nil
	case "none":
		return OffsetResetNone, nil
	}
	return 0, fmt.Errorf("auto.offset.reset %q: want earliest, latest or none", s)
}

// IsolationLevel is isolation.level: which records of transactional producers
// a consumer sees.
type IsolationLevel int8

const (
	// ReadUncommitted returns every record, including those of open and
	// aborted transactions, up to the high watermark. Kafka's default.
	ReadUncommitted IsolationLevel = 0
	// ReadCommitted returns records only up to the last stable offset and
	// drops records of aborted transactions (the broker's aborted
	// transaction list) and control batches.
	ReadCommitted IsolationLevel = 1
)

// RebalanceListener receives a group member's partition changes (Kafka's
// ConsumerRebalanceListener). The callbacks run on the goroutine that called
// Poll (or Close) while a rebalance completes, so they may call the
// Consumer's methods (CommitSync, Position, Seek) but must not call Poll.
// A nil function is skipped.
type RebalanceListener struct {
	// OnAssigned receives the partitions newly given to this member. For
	// the eager protocol that is the whole new assignment; for the
	// cooperative protocol only what was added. Seek here to start
	// somewhere other than the committed offset.
	OnAssigned func(map[string][]int32)
	// OnRevoked receives partitions taken away while the member is still in
	// the group: commit their progress here (auto commit already did, when
	// enabled). Eager members revoke everything before every rebalance.
	OnRevoked func(map[string][]int32)
	// OnLost receives partitions that may already belong to another member:
	// this member was fenced (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
	// FENCED_INSTANCE_ID) or left after max.poll.interval.ms. Committing
	// them would fail; clean up only. When nil, OnRevoked is called instead,
	// as Kafka's default onPartitionsLost does.
	OnLost func(map[string][]int32)
}

// consumerConfig is a Consumer's configuration, immutable after NewConsumer.
type consumerConfig struct {
	topics []string
	direct map[string]map[int32]int64 // partition → start offset (Offset* sentinels allowed)

	group              string
	instanceID         *string
	assignors          []Assignor
	sessionTimeout     time.Duration
	rebalanceTimeout   time.Duration
	heartbeatInterval  time.Duration
	maxPollInterval    time.Duration
	listener           RebalanceListener
	autoCommit         bool
	autoCommitInterval time.Duration

	maxPollRecords    int
	reset             OffsetReset
	isolation         IsolationLevel
	fetchMinBytes     int32
	fetchMaxBytes     int32
	fetchMaxPartBytes int32
	fetchMaxWait      time.Duration
	fetchSessions     bool
}

func defaultConsumerConfig() consumerConfig {
	return consumerConfig{
		assignors:          []Assignor{RangeAssignor(), CooperativeStickyAssignor()},
		sessionTimeout:     45 * time.Second,
		heartbeatInterval:  3 * time.Second,
		maxPollInterval:    5 * time.Minute,
		autoCommit:         true,
		autoCommitInterval: 5 * time.Second,
		maxPollRecords:     500,
		reset:              OffsetResetLatest,
		isolation:          ReadUncommitted,
		fetchMinBytes:      1,
		fetchMaxBytes:      50 << 20,
		fetchMaxPartBytes:  1 << 20,
		fetchMaxWait:       500 * time.Millisecond,
		fetchSessions:      true,
	}
}

// Start offsets for ConsumePartitions and Seek that are not real offsets.
const (
	// OffsetEarliest starts at the partition's log start offset.
	OffsetEarliest int64 = -2
	// OffsetLatest starts at the partition's log end offset (high watermark).
	OffsetLatest int64 = -1
)

// ConsumeTopics subscribes to topics. With ConsumerGroup the group's members
// share their partitions; without it NewConsumer fails: a subscription needs
// a group (assign partitions directly with ConsumePartitions instead).
func ConsumeTopics(topics ...string) Opt {
	return consumerOpt{func(c *consumerConfig) { c.topics = append(c.topics, topics...) }}
}

// ConsumePartitions assigns partitions directly, without a group (Kafka's
// KafkaConsumer.assign): topic → partition → start offset, an absolute offset
// or OffsetEarliest / OffsetLatest. Use Consumer.Assign to change the set
// later and Consumer.Seek to move. CommitSync still works when a group id is
// configured (the group is then only an offset store, as in Kafka).
func ConsumePartitions(partitions map[string]map[int32]int64) Opt {
	return consumerOpt{func(c *consumerConfig) {
		if c.direct == nil {
			c.direct = map[string]map[int32]int64{}
		}
		for t, ps := range partitions {
			if c.direct[t] == nil {
				c.direct[t] = map[int32]int64{}
			}
			for p, o := range ps {
				c.direct[t][p] = o
			}
		}
	}}
}

// ConsumerGroup sets group.id: the consumer group this consumer joins (with
// ConsumeTopics) and commits offsets to.
func ConsumerGroup(id string) Opt {
	return consumerOpt{func(c *consumerConfig) { c.group = id }}
}

// GroupInstanceID sets group.instance.id, making the member static (KIP-345):
// it keeps its member identity across restarts, so restarting within
// session.timeout.ms triggers no rebalance. A static member does not send
// LeaveGroup on Close or on max.poll.interval.ms expiry; the coordinator
// removes it after session.timeout.ms. Default: a dynamic member.
func GroupInstanceID(id string) Opt {
	return consumerOpt{func(c *consumerConfig) { c.instanceID = &id }}
}

// Assignors sets partition.assignment.strategy, in order of preference; the
// group uses the first one every member lists. The group is cooperative
// (KIP-429) only if every assignor listed is; otherwise members revoke all
// partitions before each rebalance. Default: RangeAssignor then
// CooperativeStickyAssignor, as Kafka 3.x, which is eager until every member
// drops range.
func Assignors(assignors ...Assignor) Opt {
	return consumerOpt{func(c *consumerConfig) { c.assignors = append([]Assignor(nil), assignors...) }}
}

// SessionTimeout sets session.timeout.ms: a member that sends no heartbeat
// for this long is removed from the group by the coordinator, and its
// partitions reassigned. The broker bounds it with
// group.min/max.session.timeout.ms. Default 45s (KIP-735).
func SessionTimeout(d time.Duration) Opt {
	return consumerOpt{func(c *consumerConfig) { c.sessionTimeout = d }}
}

// RebalanceTimeout sets how long the coordinator waits for every member to
// rejoin during a rebalance; members that do not rejoin in time are dropped.
// Kafka ties it to max.poll.interval.ms, which is the default here too.
func RebalanceTimeout(d time.Duration) Opt {
	return consumerOpt{func(c *consumerConfig) { c.rebalanceTimeout = d }}
}

// HeartbeatInterval sets heartbeat.interval.ms: how often the background
// heartbeat tells the coordinator the member is alive, and so how quickly the
// member learns of a rebalance. Keep it under a third of the session
// timeout. Default 3s.
func HeartbeatInterval(d time.Duration) Opt {
	return consumerOpt{func(c *consumerConfig) { c.heartbeatInterval = d }}
}

// MaxPollInterval sets max.poll.interval.ms: if the application does not call
// Poll for this long, the member is considered stuck and leaves the group
// (LeaveGroup; a static member just stops heartbeating) so its partitions go
// to members that make progress. The next Poll rejoins, after reporting the
// partitions as lost. This bounds how long one slow record batch can stall a
// group, the rebalance storm Kafka's KIP-62 describes. Default 5m.
func MaxPollInterval(d time.Duration) Opt {
	return consumerOpt{func(c *consumerConfig) { c.maxPollInterval = d }}
}

// OnRebalance sets the rebalance listener (assigned / revoked / lost).
func OnRebalance(l RebalanceListener) Opt {
	return consumerOpt{func(c *consumerConfig) { c.listener = l }}
}

// AutoCommit sets enable.auto.commit. When on, each Poll at least
// auto.commit.interval.ms after the last commit first commits the positions
// of everything previous Polls returned (never records still unreturned),
// and a rebalance or Close commits before partitions are revoked. The
// result is at-least-once: records returned but not processed before a crash
// are not committed only if the crash comes before the next Poll. Default on.
func AutoCommit(enabled bool) Opt {
	return consumerOpt{func(c *consumerConfig) { c.autoCommit = enabled }}
}

// AutoCommitInterval sets auto.commit.interval.ms. Default 5s.
func AutoCommitInterval(d time.Duration) Opt {
	return consumerOpt{func(c *consumerConfig) { c.autoCommitInterval = d }}
}

// MaxPollRecords sets max.poll.records: the most records one Poll returns.
// Records fetched beyond it wait for the next Poll. Default 500.
func MaxPollRecords(n int) Opt {
	return consumerOpt{func(c *consumerConfig) { c.maxPollRecords = n }}
}

// AutoOffsetReset sets auto.offset.reset. Default OffsetResetLatest.
func AutoOffsetReset(r OffsetReset) Opt {
	return consumerOpt{func(c *consumerConfig) { c.reset = r }}
}

// Isolation sets isolation.level. Default ReadUncommitted.
func Isolation(l IsolationLevel) Opt {
	return consumerOpt{func(c *consumerConfig) { c.isolation = l }}
}

// FetchMinBytes sets fetch.min.bytes: the broker holds a Fetch until this
// much data is available or fetch.max.wait.ms passes. Default 1.
func FetchMinBytes(n int32) Opt {
	return consumerOpt{func(c *consumerConfig) { c.fetchMinBytes = n }}
}

// FetchMaxBytes sets fetch.max.bytes: the most a Fetch response should hold
// (the first batch is returned even when bigger, so a large record never
// stalls consumption). Default 50 MiB.
func FetchMaxBytes(n int32) Opt {
	return consumerOpt{func(c *consumerConfig) { c.fetchMaxBytes = n }}
}

// FetchMaxPartitionBytes sets max.partition.fetch.bytes: the most one
// partition contributes to a Fetch response (same first-batch exception).
// Default 1 MiB.
func FetchMaxPartitionBytes(n int32) Opt {
	return consumerOpt{func(c *consumerConfig) { c.fetchMaxPartBytes = n }}
}

// FetchMaxWait sets fetch.max.wait.ms: how long the broker may hold a Fetch
// waiting for fetch.min.bytes. Default 500ms.
func FetchMaxWait(d time.Duration) Opt {
	return consumerOpt{func(c *consumerConfig) { c.fetchMaxWait = d }}
}

// FetchSessions turns incremental fetch sessions (KIP-227) on or off. With
// sessions a Fetch lists only partitions whose state changed, which saves
// bandwidth and broker CPU with many partitions. Default on; brokers that
// do not create sessions are handled transparently.
func FetchSessions(enabled bool) Opt {
	return consumerOpt{func(c *consumerConfig) { c.fetchSessions = enabled }}
}

// validate checks the configuration NewConsumer received.
func (c *consumerConfig) validate() error {
	switch {
	case len(c.topics) > 0 && c.group == "":
		return fmt.Errorf("ConsumeTopics needs ConsumerGroup (group.id); use ConsumePartitions to consume without a group")
	case len(c.topics) > 0 && len(c.direct) > 0:
		return fmt.Errorf("ConsumeTopics and ConsumePartitions are exclusive (Kafka's subscribe vs assign)")
	case len(c.topics) > 0 && len(c.assignors) == 0:
		return fmt.Errorf("Assignors: at least one assignor is needed")
	case c.maxPollRecords <= 0:
		return fmt.Errorf("MaxPollRecords %d: must be positive", c.maxPollRecords)
	case c.sessionTimeout <= 0 || c.heartbeatInterval <= 0 || c.heartbeatInterval >= c.sessionTimeout:
		return fmt.Errorf("HeartbeatInterval %v must be positive and below SessionTimeout %v", c.heartbeatInterval, c.sessionTimeout)
	case c.maxPollInterval <= 0:
		return fmt.Errorf("MaxPollInterval %v: must be positive", c.maxPollInterval)
	case c.autoCommit && c.autoCommitInterval <= 0:
		return fmt.Errorf("AutoCommitInterval %v: must be positive", c.autoCommitInterval)
	}
	if c.rebalanceTimeout <= 0 {
		c.rebalanceTimeout = c.maxPollInterval
	}
	return nil
}
