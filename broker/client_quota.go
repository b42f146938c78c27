package broker

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// Client quotas (KIP-13, KIP-55, KIP-124, KIP-219): producer_byte_rate
// bounds the bytes of a client's produce requests, consumer_byte_rate
// those of its fetch responses, request_percentage the time its requests
// take to handle, per broker, as Kafka's ClientQuotaManager and
// ClientRequestQuotaManager do.
//
//   - A request's quota is the first of these entities that sets the key
//     (Kafka's DefaultQuotaCallback order): user and client id, user and
//     default client, user alone; default user and client id, default user
//     and default client, default user alone; client id alone, default
//     client. The user is the principal's name (ANONYMOUS until SASL). The
//     rate is measured per the components of the entity that matched:
//     a user quota is shared by all the user's client ids, a client-id
//     default is each client id's own.
//   - Bytes are measured over Kafka's 11 one-second windows (rateQuota).
//     Over the bound, the response carries the time the client must wait
//     for the rate to come back to it — (rate - bound) / bound × the
//     measured window, at most quotaMaxThrottle — and the connection reads
//     no request before that time has passed (KIP-219: the broker mutes
//     the channel; clients also wait on their side).
//   - A throttled fetch returns no records (Kafka sends an empty response
//     so the throttled bytes are not delivered, and unrecords them).
//   - Followers are never client-quota throttled (replication has its own
//     throttles, quota.go).
//
// request_percentage is a share of one request handler's time, in percent
// (Kafka's KIP-124: 100 is a whole thread's). A request's time is from its
// frame having been read to its handler returning: decoding, and what the
// handler did before it answered or parked the request (an acks=all
// produce's appends, a fetch's first reads), not the wait for replicas or
// data, as Kafka counts the request thread's time. Kafka also counts the
// network thread's time writing the response; Keel does not. Its throttle
// is bounded by one window (quota.window.size.seconds), as in Kafka.
// Produce and Fetch answer with the larger of their byte throttle and
// this one; a fetch throttled by either returns no records. Exempt, as in
// Kafka: follower fetches, acks=0 produces (nothing answers them) and
// WriteTxnMarkers (sent by the transaction coordinators).

// clientQuotaSensorKey is what a rate is measured per: the user and the
// client id, each "" when the matched entity has no such component.
type clientQuotaSensorKey struct {
	user, clientID string
	set            uint8 // which of user (1) and clientID (2) are part of the key
}

// clientQuotas measures one quota key (producer_byte_rate or
// consumer_byte_rate) per sensor.
//
// Concurrency: safe for any goroutine.
type clientQuotas struct {
	key     string
	windows quotaWindows // quota.window.num and .size.seconds
	// scale turns a quota's value into the units recorded a second: 1 for
	// the byte rates, 10^7 for request_percentage (1 % is 10 ms of
	// handling a second; time is recorded in nanoseconds).
	scale float64
	// longest bounds a throttle: all the windows for the byte rates, one
	// window for request_percentage (Kafka's ClientRequestQuotaManager).
	longest time.Duration
	mu      sync.Mutex
	sensors map[clientQuotaSensorKey]*rateQuota
	// sweepAt is the number of sensors at which a new one first drops the
	// idle ones (client ids come and go; Kafka expires idle sensors too).
	sweepAt int
}

// minSensorSweep is the fewest sensors a sweep waits for.
const minSensorSweep = 1024

// newClientQuotas measures a byte-rate key.
func newClientQuotas(key string, windows quotaWindows) *clientQuotas {
	return &clientQuotas{key: key, windows: windows, scale: 1, longest: windows.maxThrottle(),
		sensors: map[clientQuotaSensorKey]*rateQuota{}, sweepAt: minSensorSweep}
}

// newRequestQuotas measures request_percentage: handling time in
// nanoseconds.
func newRequestQuotas(windows quotaWindows) *clientQuotas {
	q := newClientQuotas(metadata.QuotaRequestPercentage, windows)
	q.scale, q.longest = float64(time.Second/time.Nanosecond)/100, windows.window
	return q
}

// sensor returns the sensor of sk, creating it. Creating one when there
// are sweepAt of them first drops those that measure nothing any more (a
// dropped sensor recreated later starts at the rate it had: 0), so a
// broker that sees ever new client ids keeps only the active ones: an
// amortised O(1) per sensor created.
func (q *clientQuotas) sensor(sk clientQuotaSensorKey, now time.Time) *rateQuota {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sensors[sk]
	if s != nil {
		return s
	}
	if len(q.sensors) >= q.sweepAt {
		for k, old := range q.sensors {
			if old.idle(now) {
				delete(q.sensors, k)
			}
		}
		q.sweepAt = max(minSensorSweep, 2*len(q.sensors))
	}
	s = newRateQuota(q.windows)
	s.throttles = newThrottleAvg(q.windows)
	q.sensors[sk] = s
	return s
}

// quotaUser is the quota entity name of a principal ("User:alice" →
// "alice").
func quotaUser(principal string) string {
	_, name, ok := strings.Cut(principal, ":")
	if !ok {
		return principal
	}
	return name
}

// resolve finds the request's quota: its bound and the sensor it is
// measured by; ok false when no entity sets the key.
func (q *clientQuotas) resolve(img *metadata.Image, user, clientID string) (bound float64, sk clientQuotaSensorKey, ok bool) {
	named := func(n string) metadata.QuotaEntityName { return metadata.QuotaEntityName{Set: true, Name: n} }
	def := metadata.QuotaEntityName{Set: true, Default: true}
	u, c := named(user), named(clientID)
	both := clientQuotaSensorKey{user, clientID, 3}
	userOnly := clientQuotaSensorKey{user: user, set: 1}
	clientOnly := clientQuotaSensorKey{clientID: clientID, set: 2}
	for _, level := range []struct {
		e  metadata.QuotaEntity
		sk clientQuotaSensorKey
	}{
		{metadata.QuotaEntity{User: u, ClientID: c}, both},
		{metadata.QuotaEntity{User: u, ClientID: def}, both},
		{metadata.QuotaEntity{User: u}, userOnly},
		{metadata.QuotaEntity{User: def, ClientID: c}, both},
		{metadata.QuotaEntity{User: def, ClientID: def}, both},
		{metadata.QuotaEntity{User: def}, userOnly},
		{metadata.QuotaEntity{ClientID: c}, clientOnly},
		{metadata.QuotaEntity{ClientID: def}, clientOnly},
	} {
		if v, ok := img.ClientQuota(level.e, q.key); ok {
			return v, level.sk, true
		}
	}
	return 0, clientQuotaSensorKey{}, false
}

// record counts amount (bytes, or nanoseconds of handling) against the
// request's quota and returns how long the client must be throttled (0 if
// not over the bound, or no quota applies), and an undo that takes the
// amount back (a throttled fetch delivers no bytes). clock is read only
// when a quota applies: without any, a request pays one map-length check.
func (q *clientQuotas) record(img *metadata.Image, principal, clientID string, amount int64, clock func() time.Time) (time.Duration, func()) {
	if !img.HasClientQuotas() {
		return 0, func() {}
	}
	bound, sk, ok := q.resolve(img, quotaUser(principal), clientID)
	if !ok {
		return 0, func() {}
	}
	now := clock()
	s := q.sensor(sk, now)
	s.record(amount, now)
	undo := func() { s.record(-amount, now) }
	d := s.meter.BoundedThrottle(s.rate(now), bound*q.scale, q.longest)
	if d > 0 {
		s.throttles.record(d, now)
	}
	return d, undo
}

// throttleMillis is a throttle as a response's ThrottleMillis.
func throttleMillis(d time.Duration) int32 {
	return int32(min(d.Milliseconds(), math.MaxInt32))
}

// produceThrottle applies producer_byte_rate to a produce request of size
// bytes and, unless acks is 0, request_percentage to the time it took so
// far: it returns the larger throttle, to report, and mutes the
// connection for it.
func (b *Broker) produceThrottle(img *metadata.Image, req *network.Request, acks int16) time.Duration {
	d, _ := b.producerQuotas.record(img, req.Conn.Principal, req.Header.ClientID, int64(req.Size), b.now)
	if acks != 0 {
		d = max(d, b.requestThrottle(img, req, 0))
	}
	if d > 0 {
		req.Conn.Mute(d)
	}
	return d
}

// requestThrottle records req's handling time against request_percentage
// and returns the throttle it earns (0 without a quota). took is the
// handling time; 0 means until now, from the frame having been read.
func (b *Broker) requestThrottle(img *metadata.Image, req *network.Request, took time.Duration) time.Duration {
	if !img.HasClientQuotas() {
		return 0
	}
	if took <= 0 {
		took = time.Since(req.Received)
	}
	d, _ := b.requestQuotas.record(img, req.Conn.Principal, req.Header.ClientID, took.Nanoseconds(), b.now)
	return d
}

// throttleRequest applies request_percentage to a request that is neither
// a Produce nor a Fetch (whose handlers apply it with their byte quotas)
// nor exempt: the response carries the throttle, unless it has a larger
// one, and the connection reads nothing more for it once the response is
// ready (KIP-219).
func (b *Broker) throttleRequest(req *network.Request, res network.Result) network.Result {
	switch req.Msg.(type) {
	case *kmsg.ProduceRequest, *kmsg.FetchRequest, *kmsg.WriteTxnMarkersRequest:
		return res
	}
	img := b.currentImage()
	d := b.requestThrottle(img, req, 0)
	if d <= 0 {
		return res
	}
	if r, ok := res.(*network.Response); ok && (r == nil || r.Msg == nil) {
		req.Conn.Mute(d) // nothing to carry the throttle
		return res
	}
	return network.Then(res, func(m kmsg.Response) kmsg.Response { return throttleResponse(req, m, d) })
}

// throttleResponse puts throttle d in resp, unless it carries a larger
// one, and mutes req's connection for d (KIP-219); nothing for d ≤ 0.
func throttleResponse(req *network.Request, resp kmsg.Response, d time.Duration) kmsg.Response {
	if d <= 0 {
		return resp
	}
	if t, ok := resp.(kmsg.ThrottleResponse); ok {
		if cur, _ := t.Throttle(); cur < throttleMillis(d) {
			resp.(kmsg.SetThrottleResponse).SetThrottle(throttleMillis(d))
		}
	}
	req.Conn.Mute(d)
	return resp
}

// updateIPConnectionRates hands the ip entities' connection_creation_rate
// quotas (KIP-612) in img to the node's listeners, as Kafka's
// ClientQuotaMetadataManager updates its ConnectionQuotas: on the first
// image and after each client quota change. applyMu is held.
func (b *Broker) updateIPConnectionRates(img *metadata.Image) {
	rates := img.IPConnectionCreationRates()
	if b.setIPRates == nil || maps.Equal(rates, b.ipRates) {
		return
	}
	b.ipRates = rates
	b.setIPRates(rates)
	quotas := make([]string, 0, len(rates))
	for addr, n := range rates {
		name := "<default>"
		if addr.IsValid() {
			name = addr.String()
		}
		quotas = append(quotas, name+"="+strconv.Itoa(n))
	}
	slices.Sort(quotas)
	b.log.Info("connection_creation_rate quotas of client addresses", "quotas", strings.Join(quotas, ","))
}
