package broker

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// controller_mutation_rate (KIP-599) bounds how fast a client creates and
// deletes partitions: CreateTopics counts the partitions it creates,
// CreatePartitions the partitions it adds, DeleteTopics the partitions of
// the topics it deletes. The quota is a user/client-id client quota,
// resolved as the others (client_quota.go), and measured as Kafka's
// ControllerMutationQuotaManager measures it: a token bucket of
// rate × controller.quota.window.num × controller.quota.window.size.seconds
// mutations, refilled at the rate. A throttle is the time the bucket
// needs to come back to zero.
//
//   - Strict, for the versions that know the error (CreateTopics v6+,
//     CreatePartitions v3+, DeleteTopics v5+): while the bucket is below
//     zero, a topic is refused with THROTTLING_QUOTA_EXCEEDED before it
//     reaches the controller, and the response carries the throttle; a
//     topic taken may take the bucket below zero (a large topic is not
//     refused for its size alone). Kafka's clients retry after the
//     throttle (the Java admin client's retry.on.quota.violation).
//   - Permissive, for older versions: every topic goes through; the
//     response carries the throttle once the bucket is below zero.
//
// validate_only requests are not counted. Deviation: Kafka measures on
// the active controller, so the quota holds for the cluster; Keel's
// brokers measure the requests they forward, so a client spreading its
// admin requests over N brokers may mutate N times as fast.

// mutationQuotas are the controller_mutation_rate buckets, per sensor.
//
// Concurrency: safe for any goroutine.
type mutationQuotas struct {
	resolver *clientQuotas // resolves the quota and its sensor; its meters are unused
	windows  quotaWindows  // controller.quota.window.num and .size.seconds
	mu       sync.Mutex
	buckets  map[clientQuotaSensorKey]*tokenBucket
	sweepAt  int
}

func newMutationQuotas(windows quotaWindows) *mutationQuotas {
	return &mutationQuotas{resolver: newClientQuotas(metadata.QuotaControllerMutationRate, windows), windows: windows,
		buckets: map[clientQuotaSensorKey]*tokenBucket{}, sweepAt: minSensorSweep}
}

// tokenBucket is Kafka's TokenBucket stat: tokens, at most burst, refilled
// at rate a second; recording takes tokens, down below zero.
type tokenBucket struct {
	tokens float64
	last   time.Time
	// mutations and throttles are Kafka's mutation-rate and throttle-time
	// metrics of the sensor.
	mutations *network.RateMeter
	throttles *throttleAvg
}

// refill adds the tokens earned since the last update.
func (t *tokenBucket) refill(rate, burst float64, now time.Time) {
	if t.last.IsZero() {
		t.tokens = burst // a new sensor starts full, as Kafka's does
	} else if d := now.Sub(t.last); d > 0 {
		t.tokens = min(burst, t.tokens+rate*d.Seconds())
	}
	t.last = now
}

// throttle is how long a bucket below zero needs to come back to zero,
// unbounded as in Kafka (a request that created many partitions at once
// waits them off); a rate of zero never refills, and answers retry.
func (t *tokenBucket) throttle(rate float64, retry time.Duration) time.Duration {
	if t.tokens >= 0 {
		return 0
	}
	if rate <= 0 {
		return retry
	}
	return time.Duration(min(-t.tokens/rate*float64(time.Second), float64(math.MaxInt32)*float64(time.Millisecond)))
}

// mutationQuota is one request's controller_mutation_rate, nil when none
// applies.
type mutationQuota struct {
	q        *mutationQuotas
	bucket   *tokenBucket
	rate     float64
	strict   bool
	throttle time.Duration // the response's
}

// quotaFor returns req's mutation quota, nil without one.
func (mq *mutationQuotas) quotaFor(img *metadata.Image, req *network.Request, strict bool) *mutationQuota {
	if !img.HasClientQuotas() {
		return nil
	}
	rate, sk, ok := mq.resolver.resolve(img, quotaUser(req.Conn.Principal), req.Header.ClientID)
	if !ok {
		return nil
	}
	mq.mu.Lock()
	defer mq.mu.Unlock()
	b := mq.buckets[sk]
	if b == nil {
		if len(mq.buckets) >= mq.sweepAt {
			// A full bucket idle for a whole burst measures what a new
			// one would.
			for k, old := range mq.buckets {
				if time.Since(old.last) > mq.windows.maxThrottle() {
					delete(mq.buckets, k)
				}
			}
			mq.sweepAt = max(minSensorSweep, 2*len(mq.buckets))
		}
		b = &tokenBucket{mutations: network.NewRateMeter(mq.windows.samples, mq.windows.window), throttles: newThrottleAvg(mq.windows)}
		mq.buckets[sk] = b
	}
	return &mutationQuota{q: mq, bucket: b, rate: rate, strict: strict}
}

// take records mutations for one topic and reports whether it may go
// ahead: false when strict and the bucket was already below zero.
func (m *mutationQuota) take(mutations int, now time.Time) bool {
	if m == nil {
		return true
	}
	m.q.mu.Lock()
	defer m.q.mu.Unlock()
	burst := m.rate * m.q.windows.maxThrottle().Seconds()
	m.bucket.refill(m.rate, burst, now)
	if m.strict && m.bucket.tokens < 0 {
		d := m.bucket.throttle(m.rate, m.q.windows.maxThrottle())
		m.bucket.throttles.record(d, now)
		m.throttle = max(m.throttle, d)
		return false
	}
	m.bucket.tokens -= float64(mutations)
	m.bucket.mutations.Record(int64(mutations), now)
	if !m.strict {
		if d := m.bucket.throttle(m.rate, m.q.windows.maxThrottle()); d > 0 {
			m.bucket.throttles.record(d, now)
			m.throttle = max(m.throttle, d)
		}
	}
	return true
}

// refund gives back mutations a topic took but did not make (the
// controller refused it: it exists already, a bad config, ...), as Kafka
// counts only the partitions its controller creates or deletes.
func (m *mutationQuota) refund(mutations int) {
	if m == nil || mutations <= 0 {
		return
	}
	m.q.mu.Lock()
	defer m.q.mu.Unlock()
	m.bucket.tokens = min(m.bucket.tokens+float64(mutations), m.rate*m.q.windows.maxThrottle().Seconds())
	m.bucket.mutations.Record(-int64(mutations), m.bucket.last)
}

// strictMutations reports whether a request version refuses topics over
// the quota (Kafka's strictSinceVersion).
func strictMutations(m kmsg.Request) bool {
	switch m := m.(type) {
	case *kmsg.CreateTopicsRequest:
		return m.Version >= 6
	case *kmsg.CreatePartitionsRequest:
		return m.Version >= 3
	case *kmsg.DeleteTopicsRequest:
		return m.Version >= 5
	}
	return false
}

// throttledMessage is Kafka's ThrottlingQuotaExceededException message.
const throttledMessage = "The throttling quota has been exceeded."

var codeThrottled = kerr.ThrottlingQuotaExceeded.Code

// mutationsOfCreate is the partitions a CreateTopics entry creates:
// its assignments, its count, or num.partitions.
func (b *Broker) mutationsOfCreate(t *kmsg.CreateTopicsRequestTopic) int {
	switch {
	case len(t.ReplicaAssignment) > 0:
		return len(t.ReplicaAssignment)
	case t.NumPartitions > 0:
		return int(t.NumPartitions)
	}
	return int(b.cfg.NumPartitions)
}

// takeTopics lets through the topics of a request that mq takes, in
// order, and returns the ones it refused and the mutations each kept
// topic took, by name (for refunds). of names a topic and counts its
// mutations. Without a quota every topic goes.
func takeTopics[T any](mq *mutationQuota, topics []T, now time.Time, of func(T) (string, int)) (kept, refused []T, took map[string]int) {
	if mq == nil {
		return topics, nil, nil
	}
	took = map[string]int{}
	kept = slices.DeleteFunc(topics, func(t T) bool {
		name, n := of(t)
		if mq.take(n, now) {
			took[name] += n
			return false
		}
		refused = append(refused, t)
		return true
	})
	return kept, refused, took
}

// applyMutationThrottle puts the mutation quota's throttle in resp,
// unless it has a larger one, and mutes the connection for it.
func applyMutationThrottle(req *network.Request, mq *mutationQuota, resp kmsg.Response) kmsg.Response {
	if mq == nil {
		return resp
	}
	return throttleResponse(req, resp, mq.throttle)
}
