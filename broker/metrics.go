package broker

// Metrics: Kafka's broker metrics in Prometheus's text format, served at
// /metrics on keel.metrics.address (metrics_collect.go writes and serves
// them; this file has the counters and the format).
//
// Kafka publishes its metrics as JMX MBeans, and operators read them
// through the Prometheus JMX exporter. Keel has no JVM, so it writes the
// series that exporter's usual rules (lowercased, "kafka_<domain>_<type>_
// <name>", meters as "_total" counters) make of the MBeans, so that the
// dashboards and alerts written for Kafka work unchanged:
//
//	kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T
//	  → kafka_server_brokertopicmetrics_messagesin_total{topic="T"}
//	kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions
//	  → kafka_server_replicamanager_underreplicatedpartitions
//
// What is counted where:
//   - BrokerTopicMetrics (per topic, and without the topic label for all
//     topics, as Kafka has them): MessagesIn and BytesIn for what producers
//     and the group coordinator (__consumer_offsets) append on the leader;
//     BytesOut for what consumers fetch;
//     TotalProduceRequests, FailedProduceRequests, TotalFetchRequests and
//     FailedFetchRequests per partition of a request, as Kafka counts
//     them; ReplicationBytesIn (follower appends) and ReplicationBytesOut
//     (what followers fetch) for all topics only.
//   - ReplicaManager gauges, computed when scraped from the partitions this
//     node hosts; IsrShrinks and IsrExpands when the controller commits a
//     change this leader asked for. ReplicaFetcherManager MaxLag.
//   - Per partition: Log (Size, LogStartOffset, LogEndOffset,
//     NumLogSegments) and Partition (UnderReplicated, UnderMinIsr,
//     AtMinIsr, InSyncReplicasCount, ReplicasCount, on the leader).
//   - KafkaServer BrokerState; GroupMetadataManager's group counts;
//     socket-server-metrics per listener: connection-count,
//     connection-creation-total, connection-close-total, the
//     authentications, connection-accept-throttle-time and
//     ip-connection-accept-throttle-time; the Acceptor's
//     AcceptorBlockedPercent count.
//   - RequestMetrics: Requests per API (request="FetchConsumer" and
//     "FetchFollower" for Fetch, as Kafka splits it), counted once the
//     response is sent, and as Prometheus histograms Kafka's times: from a
//     request's arrival to its response sent (TotalTimeMs), and the stages
//     that add up to it (RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs,
//     ResponseQueueTimeMs, ResponseSendTimeMs).
//   - KafkaController gauges on controllers (the image-derived ones only on
//     the active controller, 0 elsewhere, as in Kafka, so that summing over
//     the cluster counts once); raft-metrics; the process's.
//
// The counters are atomics bumped on the request paths; a topic's are
// reached through its partitions (partition.metrics), so an append costs
// two atomic adds and no lookup.

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/storage"
)

// topicMetrics are one topic's BrokerTopicMetrics meters (or all topics').
type topicMetrics struct {
	messagesIn, bytesIn, bytesOut           atomic.Int64
	totalProduce, failedProduce             atomic.Int64
	totalFetch, failedFetch                 atomic.Int64
	replicationBytesIn, replicationBytesOut atomic.Int64 // all topics only
	all                                     *topicMetrics
}

// produced counts an append on the leader: records producers sent, or the
// group coordinator's.
func (t *topicMetrics) produced(records, bytes int64) {
	t.add(messagesIn, records)
	t.add(bytesIn, bytes)
}

// add adds n to the counter f picks, in t and in all topics'.
func (t *topicMetrics) add(f func(*topicMetrics) *atomic.Int64, n int64) {
	for m := t; m != nil; m = m.all {
		f(m).Add(n)
	}
}

// The counters add picks from.
func messagesIn(t *topicMetrics) *atomic.Int64          { return &t.messagesIn }
func bytesIn(t *topicMetrics) *atomic.Int64             { return &t.bytesIn }
func replicationBytesIn(t *topicMetrics) *atomic.Int64  { return &t.replicationBytesIn }
func replicationBytesOut(t *topicMetrics) *atomic.Int64 { return &t.replicationBytesOut }
func totalProduce(t *topicMetrics) *atomic.Int64        { return &t.totalProduce }
func failedProduce(t *topicMetrics) *atomic.Int64       { return &t.failedProduce }
func totalFetch(t *topicMetrics) *atomic.Int64          { return &t.totalFetch }
func failedFetch(t *topicMetrics) *atomic.Int64         { return &t.failedFetch }
func bytesOut(t *topicMetrics) *atomic.Int64            { return &t.bytesOut }

// requestFailed reports whether a partition's error counts as a failed
// produce or fetch: any error but those that only route the client
// elsewhere (the partition is not led here, the client's metadata or
// offset is stale), which Kafka does not count as failures either.
func requestFailed(code int16) bool {
	switch code {
	case 0, kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code,
		kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.OffsetOutOfRange.Code:
		return false
	}
	return true
}

// partitionMetrics is the meters of a partition's topic when it is hosted
// here; otherwise all topics' alone (a client may name any topic: no
// meters are made for names).
func (b *Broker) partitionMetrics(topic string, part int32) *topicMetrics {
	if p := b.lookup(storage.TopicPartition{Topic: topic, Partition: part}); p != nil && p.metrics != nil {
		return p.metrics
	}
	return &b.metrics.all
}

// brokerMetrics are the broker's counters.
//
// Concurrency: the counters are atomics; mu guards topics.
type brokerMetrics struct {
	all        topicMetrics
	isrShrinks atomic.Int64
	isrExpands atomic.Int64
	flushes    histogram // the durable mode's fsyncs (LogFlushRateAndTimeMs)
	// Transaction verifications (KIP-890, txn_verify.go): their time and
	// the partitions that failed one (Kafka's AddPartitionsToTxnManager
	// VerificationTimeMs and VerificationFailureRate).
	txnVerifyTime     histogram
	txnVerifyFailures atomic.Int64

	mu     sync.Mutex
	topics map[string]*topicMetrics
}

func newBrokerMetrics() *brokerMetrics {
	return &brokerMetrics{topics: map[string]*topicMetrics{}}
}

// topic returns the topic's meters, creating them.
func (m *brokerMetrics) topic(name string) *topicMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.topics[name]
	if t == nil {
		t = &topicMetrics{all: &m.all}
		m.topics[name] = t
	}
	return t
}

// retainTopics drops the meters of topics that no longer exist (Kafka
// removes a deleted topic's metrics); a topic created again with the name
// starts from zero, as in Kafka.
func (m *brokerMetrics) retainTopics(exists func(string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.topics {
		if !exists(name) {
			delete(m.topics, name)
		}
	}
}

// bucketsMs are the upper bounds of the millisecond histograms. A long-poll
// fetch waits up to fetch.max.wait.ms (500 by default), a follower's
// replica.fetch.wait.max.ms, acks=all the replication; an fsync takes
// from under a millisecond to seconds on a busy disk.
var bucketsMs = [...]float64{0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// histogram is a Prometheus histogram of durations in milliseconds.
//
// Concurrency: observe is safe from any goroutine and never blocks.
type histogram struct {
	sumNs   atomic.Int64
	buckets [len(bucketsMs) + 1]atomic.Int64 // then +Inf
}

func (h *histogram) observe(d time.Duration) {
	h.sumNs.Add(int64(d))
	i, _ := slices.BinarySearch(bucketsMs[:], float64(d)/float64(time.Millisecond))
	h.buckets[i].Add(1)
}

// count is how many durations were observed.
func (h *histogram) count() int64 {
	var n int64
	for i := range h.buckets {
		n += h.buckets[i].Load()
	}
	return n
}

// write writes the histogram's samples (its family's header is the
// caller's), labelled with labels. The count is the buckets' total, so
// that the series agree within one scrape even while observations land.
func (h *histogram) write(w *promWriter, name string, labels ...string) {
	var cum int64
	for i := range h.buckets {
		cum += h.buckets[i].Load()
		le := "+Inf"
		if i < len(bucketsMs) {
			le = strconv.FormatFloat(bucketsMs[i], 'g', -1, 64)
		}
		w.sample(name+"_bucket", float64(cum), append(labels[:len(labels):len(labels)], "le", le)...)
	}
	w.sample(name+"_sum", float64(h.sumNs.Load())/float64(time.Millisecond), labels...)
	w.sample(name+"_count", float64(cum), labels...)
}

// requestKindFetchFollower is the index of FetchFollower in requestMetrics,
// past every API key (Fetch from consumers keeps the Fetch key).
const (
	maxRequestKey            = 127
	requestKindFetchFollower = maxRequestKey + 1
)

// requestTime is one of Kafka's RequestMetrics times: a stage of a
// request's way through the broker, between two of network.RequestTimes.
type requestTime int

const (
	// totalTime is arrival (the request read) to the response sent
	// (TotalTimeMs), the sum of the others; its count is RequestsPerSec.
	totalTime requestTime = iota
	// requestQueueTime is arrival to the handler (RequestQueueTimeMs).
	// Keel decodes and handles a request on its connection's reader at
	// once, so this is the decode; a request behind an earlier one of its
	// connection waits unread in the socket (as in Kafka, which mutes the
	// connection while a request is in flight) and is not counted.
	requestQueueTime
	// localTime is the handler's own work (LocalTimeMs): for a produce,
	// validating and appending on the leader.
	localTime
	// remoteTime is the wait after the handler for others (RemoteTimeMs):
	// followers for acks=all, more bytes for a long-poll fetch, a group's
	// rebalance, the metadata quorum for a controller's request.
	remoteTime
	// responseQueueTime is the ready response waiting for the connection's
	// writer (ResponseQueueTimeMs): behind an earlier response of its
	// connection, or for the writer to wake.
	responseQueueTime
	// responseSendTime is encoding and writing the response
	// (ResponseSendTimeMs) until its last byte is in the socket: a long
	// one when the client reads slowly.
	responseSendTime
	numRequestTimes
)

// requestTimeNames are the MBean names of the request times, in order.
var requestTimeNames = [numRequestTimes]string{
	"TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs", "ResponseSendTimeMs",
}

// RequestMetrics is Kafka's RequestMetrics: how many requests of each API
// and how long each stage took. Observe is network.Config.RequestDone.
//
// Concurrency: safe for concurrent use; Observe never blocks.
type RequestMetrics struct {
	kinds [requestKindFetchFollower + 1][numRequestTimes]histogram
}

// NewRequestMetrics returns empty request metrics.
func NewRequestMetrics() *RequestMetrics { return &RequestMetrics{} }

// Observe counts req, which passed the server's stages at t. A request
// with no response (acks=0) spends no time in the response queue or
// sending, and its total ends when it was handled.
func (rm *RequestMetrics) Observe(req *network.Request, t network.RequestTimes) {
	kind := int(req.Header.APIKey)
	if kind < 0 || kind > maxRequestKey {
		return
	}
	if f, ok := req.Msg.(*kmsg.FetchRequest); ok && fetchFromFollower(f) {
		kind = requestKindFetchFollower
	}
	h := &rm.kinds[kind]
	end := t.Sent
	if t.NoResponse {
		end, t.Sending, t.Sent = t.Completed, t.Completed, t.Completed
	}
	h[totalTime].observe(end)
	h[requestQueueTime].observe(t.Started)
	h[localTime].observe(t.Handled - t.Started)
	h[remoteTime].observe(t.Completed - t.Handled)
	h[responseQueueTime].observe(t.Sending - t.Completed)
	h[responseSendTime].observe(t.Sent - t.Sending)
}

// fetchFromFollower reports whether a fetch comes from a follower replica.
func fetchFromFollower(f *kmsg.FetchRequest) bool {
	if f.Version >= 15 {
		return f.ReplicaState.ID >= 0
	}
	return f.ReplicaID >= 0
}

// requestName is Kafka's name of a request kind in RequestMetrics (its
// ApiKeys names: kmsg capitalises some acronyms Kafka does not).
func requestName(kind int) string {
	switch kind {
	case int(kmsg.Fetch):
		return "FetchConsumer"
	case requestKindFetchFollower:
		return "FetchFollower"
	}
	return kafkaNames.Replace(kmsg.NameForKey(int16(kind)))
}

var kafkaNames = strings.NewReplacer("IDs", "Ids", "ID", "Id", "ISR", "Isr", "SASL", "Sasl", "ACLs", "Acls", "SCRAM", "Scram")

// write writes the request series.
func (rm *RequestMetrics) write(w *promWriter) {
	w.family("kafka_network_requestmetrics_requests_total", "counter", "Requests served, by API (Kafka's RequestsPerSec).")
	for kind := range rm.kinds {
		if n := rm.kinds[kind][totalTime].count(); n > 0 {
			w.sample("kafka_network_requestmetrics_requests_total", float64(n), "request", requestName(kind))
		}
	}
	for rt := range numRequestTimes {
		name := "kafka_network_requestmetrics_" + strings.ToLower(requestTimeNames[rt])
		w.family(name, "histogram", requestTimeHelp[rt])
		for kind := range rm.kinds {
			if rm.kinds[kind][rt].count() > 0 {
				rm.kinds[kind][rt].write(w, name, "request", requestName(kind))
			}
		}
	}
}

// requestTimeHelp are the request times' HELP lines.
var requestTimeHelp = [numRequestTimes]string{
	"Milliseconds from a request's arrival until its response was sent, by API (Kafka's TotalTimeMs).",
	"Milliseconds from a request's arrival until its handler started (decoding it), by API (Kafka's RequestQueueTimeMs).",
	"Milliseconds of a request's handler, by API (Kafka's LocalTimeMs).",
	"Milliseconds a request waited after its handler, for followers, data or a rebalance, by API (Kafka's RemoteTimeMs).",
	"Milliseconds a ready response waited to be written, by API (Kafka's ResponseQueueTimeMs).",
	"Milliseconds writing a response until its last byte was in the socket, by API (Kafka's ResponseSendTimeMs).",
}

// promWriter writes Prometheus's text exposition format (version 0.0.4).
type promWriter struct {
	w *bufio.Writer
}

// family starts a metric family.
func (w *promWriter) family(name, typ, help string) {
	fmt.Fprintf(w.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample; labels are name, value pairs.
func (w *promWriter) sample(name string, v float64, labels ...string) {
	w.w.WriteString(name)
	if len(labels) > 0 {
		w.w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.w.WriteByte(',')
			}
			w.w.WriteString(labels[i])
			w.w.WriteString(`="`)
			w.w.WriteString(escapeLabel(labels[i+1]))
			w.w.WriteByte('"')
		}
		w.w.WriteByte('}')
	}
	w.w.WriteByte(' ')
	w.w.WriteString(formatValue(v))
	w.w.WriteByte('\n')
}

// gauge writes a family of one unlabelled sample.
func (w *promWriter) gauge(name, help string, v float64) {
	w.family(name, "gauge", help)
	w.sample(name, v)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
