package broker

import (
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// Replication throttling (KIP-73), as kafka-reassign-partitions --throttle
// sets it up: the broker configs leader.replication.throttled.rate and
// follower.replication.throttled.rate bound, in bytes a second, what this
// broker sends to and fetches from other replicas of the partitions the
// topic configs leader.replication.throttled.replicas and
// follower.replication.throttled.replicas name for it ("partition:broker"
// pairs, or "*"). As in Kafka, a replica in the ISR is never throttled: the
// throttle slows down replicas catching up (a reassignment's new ones), not
// acks=all. Over its rate, a leader leaves a throttled partition's records
// out of a follower's fetch (Kafka's shouldLeaderThrottle) and a follower
// leaves the partition out of its fetches (shouldFollowerThrottle).

// quotaWindows is how a quota measures its rate, as Kafka's quota sensors
// do: over samples windows of window each (quota.window.num and
// quota.window.size.seconds for the client quotas,
// replication.quota.window.num and .size.seconds for the replication
// throttles; Kafka's defaults are 11 windows of a second).
type quotaWindows struct {
	samples int
	window  time.Duration
}

// defaultQuotaWindows are Kafka's defaults.
var defaultQuotaWindows = quotaWindows{samples: 11, window: time.Second}

// maxThrottle bounds one client throttle: all the windows' worth.
func (w quotaWindows) maxThrottle() time.Duration { return time.Duration(w.samples) * w.window }

// rateQuota is a byte rate measured over its windows, as Kafka's quota
// sensors measure it (network.RateMeter), and its bound: the replication
// throttles (Kafka's ReplicationQuotaManager) and each client quota's
// sensor (client_quota.go).
//
// Concurrency: safe for any goroutine.
type rateQuota struct {
	limit   atomic.Int64 // bytes a second; math.MaxInt64: unlimited
	windows quotaWindows
	meter   *network.RateMeter
	// throttles is the client quota sensors' throttle-time (Kafka's Avg
	// over the same windows of the throttles given); nil for the
	// replication throttles.
	throttles *throttleAvg
}

func newRateQuota(windows quotaWindows) *rateQuota {
	q := &rateQuota{windows: windows, meter: network.NewRateMeter(windows.samples, windows.window)}
	q.limit.Store(math.MaxInt64)
	return q
}

// throttleAvg is the average of the throttles given over a quota's
// windows (Kafka's throttle-time metric of a client quota sensor).
//
// Concurrency: safe for any goroutine.
type throttleAvg struct {
	sum, count *network.RateMeter
}

func newThrottleAvg(windows quotaWindows) *throttleAvg {
	return &throttleAvg{sum: network.NewRateMeter(windows.samples, windows.window), count: network.NewRateMeter(windows.samples, windows.window)}
}

// record counts a throttle given at now.
func (a *throttleAvg) record(d time.Duration, now time.Time) {
	a.sum.Record(d.Milliseconds(), now)
	a.count.Record(1, now)
}

// avgMs is the average throttle in milliseconds over the windows; NaN
// with none, as Kafka's Avg.
func (a *throttleAvg) avgMs(now time.Time) float64 {
	n := a.count.Rate(now)
	if n <= 0 {
		return math.NaN()
	}
	return a.sum.Rate(now) / n
}

// record counts n bytes sent or fetched at now.
func (q *rateQuota) record(n int64, now time.Time) { q.meter.Record(n, now) }

// rate is the measured bytes a second at now. Like Kafka's Rate, it divides
// by at least samples-1 windows, so a quota that was idle allows a burst
// of that many windows' worth before it throttles.
func (q *rateQuota) rate(now time.Time) float64 { return q.meter.Rate(now) }

// idle reports whether nothing was recorded in the windows the rate
// covers: such a quota measures 0, as a new one would.
func (q *rateQuota) idle(now time.Time) bool { return q.meter.Idle(now) }

// exceeded reports whether the rate is over the bound.
func (q *rateQuota) exceeded(now time.Time) bool {
	limit := q.limit.Load()
	return limit != math.MaxInt64 && q.rate(now) > float64(limit)
}

// updateReplicationQuotas takes the throttle rates from the image: this
// broker's dynamic config, else the cluster-wide one, else unlimited.
// applyMu is held.
func (b *Broker) updateReplicationQuotas(img *metadata.Image) {
	for name, q := range map[string]*rateQuota{
		"leader.replication.throttled.rate":   b.leaderQuota,
		"follower.replication.throttled.rate": b.followerQuota,
	} {
		if limit := b.dynamicBrokerInt(img, name, math.MaxInt64, 0); q.limit.Swap(limit) != limit {
			b.log.Info("replication throttle", "config", name, "bytes_per_second", limit)
		}
	}
	// The copy of replicas moving between this broker's log dirs
	// (AlterReplicaLogDirs), kafka-reassign-partitions.sh's
	// --replica-alter-log-dirs-throttle.
	limit := b.dynamicBrokerInt(img, "replica.alter.log.dirs.io.max.bytes.per.second", math.MaxInt64, 0)
	switch limit {
	case math.MaxInt64:
		limit = 0 // unbounded, for the log manager
	case 0:
		limit = 1 // Kafka's quota of 0 holds the copy still
	}
	if b.logs.AlterLogDirsBytesPerSecond() != limit {
		b.logs.SetAlterLogDirsBytesPerSecond(limit)
		b.log.Info("log dir move throttle", "config", "replica.alter.log.dirs.io.max.bytes.per.second", "bytes_per_second", limit)
	}
}

// throttledReplica reports whether a throttled-replicas topic config
// (validated by metadata: "*" or partition:broker pairs) names this
// partition on broker.
func throttledReplica(value string, partition, broker int32) bool {
	value = strings.TrimSpace(value)
	if value == "*" {
		return true
	}
	for _, pair := range strings.Split(value, ",") {
		p, bk, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok {
			continue
		}
		pn, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bn, err2 := strconv.ParseInt(strings.TrimSpace(bk), 10, 32)
		if err1 == nil && err2 == nil && int32(pn) == partition && int32(bn) == broker {
			return true
		}
	}
	return false
}
