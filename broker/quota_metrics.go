package broker

import (
	"cmp"
	"slices"
	"time"
)

// Client quota metrics, per sensor, as Kafka's quota managers register
// them (kafka.server:type=Produce|Fetch|Request|ControllerMutation with
// user and client-id tags): the measured rate and throttle-time, the
// average throttle given over the quota's windows (NaN when none was).
// A sensor exists once a request was measured against a quota; the user
// or client id of an entity without that component is "", as in Kafka.

// quotaSeries is one sensor's labels and values.
type quotaSeries struct {
	user, clientID string
	rate, throttle float64
}

// series snapshots q's sensors at now, ordered by user and client id;
// scale turns a measured rate into the metric's unit.
func (q *clientQuotas) series(now time.Time, scale float64) []quotaSeries {
	q.mu.Lock()
	out := make([]quotaSeries, 0, len(q.sensors))
	for sk, s := range q.sensors {
		out = append(out, quotaSeries{user: sk.user, clientID: sk.clientID, rate: s.rate(now) * scale, throttle: s.throttles.avgMs(now)})
	}
	q.mu.Unlock()
	sortQuotaSeries(out)
	return out
}

// series snapshots the mutation buckets at now.
func (mq *mutationQuotas) series(now time.Time) []quotaSeries {
	mq.mu.Lock()
	out := make([]quotaSeries, 0, len(mq.buckets))
	for sk, b := range mq.buckets {
		out = append(out, quotaSeries{user: sk.user, clientID: sk.clientID, rate: b.mutations.Rate(now), throttle: b.throttles.avgMs(now)})
	}
	mq.mu.Unlock()
	sortQuotaSeries(out)
	return out
}

func sortQuotaSeries(s []quotaSeries) {
	slices.SortFunc(s, func(a, b quotaSeries) int {
		return cmp.Or(cmp.Compare(a.user, b.user), cmp.Compare(a.clientID, b.clientID))
	})
}

// writeQuotaMetrics writes the client quota sensors' series; nothing for
// a quota type no request was measured against.
func (b *Broker) writeQuotaMetrics(w *promWriter) {
	now := b.now()
	for _, t := range []struct {
		kind, rateName, rateHelp string
		series                   []quotaSeries
	}{
		{"produce", "byte_rate", "Bytes a second of produce requests, by the user and client id of the producer_byte_rate quota that applies (byte-rate).",
			b.producerQuotas.series(now, 1)},
		{"fetch", "byte_rate", "Bytes a second of fetch responses, by the user and client id of the consumer_byte_rate quota that applies (byte-rate).",
			b.consumerQuotas.series(now, 1)},
		{"request", "request_time", "Percent of one request handler's time taken by the requests of the user and client id of the request_percentage quota that applies (request-time).",
			b.requestQuotas.series(now, 100/float64(time.Second))},
		{"controllermutation", "mutation_rate", "Partitions a second created and deleted, by the user and client id of the controller_mutation_rate quota that applies (mutation-rate).",
			b.mutationQuotas.series(now)},
	} {
		if len(t.series) == 0 {
			continue
		}
		rate, throttle := "kafka_server_"+t.kind+"_"+t.rateName, "kafka_server_"+t.kind+"_throttle_time"
		w.family(rate, "gauge", t.rateHelp)
		for _, s := range t.series {
			w.sample(rate, s.rate, "user", s.user, "client_id", s.clientID)
		}
		w.family(throttle, "gauge", "Average milliseconds a "+t.kind+" quota throttled the user and client id over the quota's windows; NaN with none (throttle-time).")
		for _, s := range t.series {
			w.sample(throttle, s.throttle, "user", s.user, "client_id", s.clientID)
		}
	}
}
