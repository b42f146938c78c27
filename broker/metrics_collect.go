package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/raftlog"
)

// writeMetrics writes the broker's series (see metrics.go).
func (b *Broker) writeMetrics(w *promWriter) {
	b.writeQuotaMetrics(w)
	m := b.metrics
	m.mu.Lock()
	names := make([]string, 0, len(m.topics))
	for name := range m.topics {
		names = append(names, name)
	}
	topics := make([]*topicMetrics, len(names))
	slices.Sort(names)
	for i, name := range names {
		topics[i] = m.topics[name]
	}
	m.mu.Unlock()

	meters := []struct {
		name, help string
		counter    func(*topicMetrics) *atomic.Int64
		allOnly    bool
	}{
		{"messagesin", "Records producers appended on this leader (MessagesInPerSec).", messagesIn, false},
		{"bytesin", "Bytes producers appended on this leader (BytesInPerSec).", bytesIn, false},
		{"bytesout", "Bytes consumers fetched from this leader (BytesOutPerSec).", bytesOut, false},
		{"totalproducerequests", "Partitions of produce requests (TotalProduceRequestsPerSec).", totalProduce, false},
		{"failedproducerequests", "Partitions of produce requests answered with an error (FailedProduceRequestsPerSec).", failedProduce, false},
		{"totalfetchrequests", "Partitions of fetch requests (TotalFetchRequestsPerSec).", totalFetch, false},
		{"failedfetchrequests", "Partitions of fetch requests answered with an error (FailedFetchRequestsPerSec).", failedFetch, false},
		{"replicationbytesin", "Bytes this node's followers appended (ReplicationBytesInPerSec).", replicationBytesIn, true},
		{"replicationbytesout", "Bytes followers fetched from this leader (ReplicationBytesOutPerSec).", replicationBytesOut, true},
	}
	for _, mt := range meters {
		name := "kafka_server_brokertopicmetrics_" + mt.name + "_total"
		w.family(name, "counter", mt.help+" Without a topic label: all topics.")
		w.sample(name, float64(mt.counter(&m.all).Load()))
		if mt.allOnly {
			continue
		}
		for i, t := range topics {
			w.sample(name, float64(mt.counter(t).Load()), "topic", names[i])
		}
	}

	var parts []*partition
	for _, p := range b.partitions.Load().byTP {
		if !p.removed.Load() {
			parts = append(parts, p)
		}
	}
	slices.SortFunc(parts, func(x, y *partition) int {
		if c := strings.Compare(x.tp.Topic, y.tp.Topic); c != 0 {
			return c
		}
		return int(x.tp.Partition - y.tp.Partition)
	})
	var leaders, under, underMin, atMin, offline int
	var maxLag int64
	for _, p := range parts {
		if p.log.Offline() {
			offline++
		}
		st := p.state.Load()
		if st == nil {
			continue
		}
		if !st.isLeader {
			maxLag = max(maxLag, p.followerLag.Load())
			continue
		}
		leaders++
		under += int(b2f(st.underReplicated()))
		underMin += int(b2f(st.underMinISR()))
		atMin += int(b2f(st.atMinISR()))
	}
	w.gauge("kafka_server_replicamanager_partitioncount", "Partitions this node hosts a replica of.", float64(len(parts)))
	w.gauge("kafka_server_replicamanager_leadercount", "Partitions this node leads.", float64(leaders))
	w.gauge("kafka_server_replicamanager_offlinereplicacount", "Replicas this node hosts in a log dir that failed, or that it has no log of because their log dir is offline (OfflineReplicaCount).", float64(offline+int(b.unplacedCount.Load())))
	w.gauge("kafka_server_replicamanager_underreplicatedpartitions", "Partitions this node leads whose ISR is smaller than their replicas.", float64(under))
	w.gauge("kafka_server_replicamanager_underminisrpartitioncount", "Partitions this node leads whose ISR is smaller than min.insync.replicas: acks=all produces fail.", float64(underMin))
	w.gauge("kafka_server_replicamanager_atminisrpartitioncount", "Partitions this node leads whose ISR is exactly min.insync.replicas.", float64(atMin))
	w.family("kafka_server_replicamanager_isrshrinks_total", "counter", "ISR shrinks this leader had committed (IsrShrinksPerSec).")
	w.sample("kafka_server_replicamanager_isrshrinks_total", float64(m.isrShrinks.Load()))
	w.family("kafka_server_replicamanager_isrexpands_total", "counter", "ISR expansions this leader had committed (IsrExpandsPerSec).")
	w.sample("kafka_server_replicamanager_isrexpands_total", float64(m.isrExpands.Load()))
	w.family("kafka_server_replicafetchermanager_maxlag", "gauge", "The largest lag of this node's follower replicas, in records: the leader's high watermark less the follower's log end offset at its last fetch.")
	w.sample("kafka_server_replicafetchermanager_maxlag", float64(maxLag), "clientId", "Replica")
	const flushName = "kafka_log_logflushstats_logflushrateandtimems"
	w.family(flushName, "histogram", "Milliseconds of each fsync of a partition's records in the durable mode (flush.messages=1), leaders' group commits and followers' alike (LogFlushRateAndTimeMs).")
	m.flushes.write(w, flushName)
	const verifyName = "kafka_server_addpartitionstotxnmanager_verificationtimems"
	w.family(verifyName, "histogram", "Milliseconds of each transaction verification: a leader asking the coordinator whether the partitions of a transaction's first batches are in it (KIP-890, VerificationTimeMs).")
	m.txnVerifyTime.write(w, verifyName)
	w.family("kafka_server_addpartitionstotxnmanager_verificationfailures_total", "counter", "Partitions whose transactional batch failed verification and was not appended (VerificationFailureRate).")
	w.sample("kafka_server_addpartitionstotxnmanager_verificationfailures_total", float64(m.txnVerifyFailures.Load()))
	w.gauge("kafka_log_logmanager_offlinelogdirectorycount", "Log directories that failed.", float64(len(b.logs.OfflineDirs())))

	// Per partition: kafka.log:type=Log and kafka.cluster:type=Partition
	// (the latter non-zero on the leader only, as in Kafka).
	leaderOnly := func(f func(st *partitionState) bool) func(*partition, *partitionState) int64 {
		return func(_ *partition, st *partitionState) int64 {
			if st == nil || !st.isLeader || !f(st) {
				return 0
			}
			return 1
		}
	}
	partGauges := []struct {
		name, help string
		value      func(*partition, *partitionState) int64
	}{
		{"kafka_log_log_size", "Bytes of the partition's segment files on this node.", func(p *partition, _ *partitionState) int64 { return p.log.Size() }},
		{"kafka_log_log_numlogsegments", "Segments of the partition's log on this node.", func(p *partition, _ *partitionState) int64 { return int64(p.log.NumSegments()) }},
		{"kafka_log_log_logstartoffset", "The partition's log start offset on this node.", func(p *partition, _ *partitionState) int64 { return p.log.LogStartOffset() }},
		{"kafka_log_log_logendoffset", "The partition's log end offset on this node.", func(p *partition, _ *partitionState) int64 { return p.log.LogEndOffset() }},
		{"kafka_cluster_partition_underreplicated", "1 when this node leads the partition and its ISR is smaller than its replicas.",
			leaderOnly((*partitionState).underReplicated)},
		{"kafka_cluster_partition_underminisr", "1 when this node leads the partition and its ISR is smaller than min.insync.replicas.",
			leaderOnly((*partitionState).underMinISR)},
		{"kafka_cluster_partition_atminisr", "1 when this node leads the partition and its ISR is exactly min.insync.replicas.",
			leaderOnly((*partitionState).atMinISR)},
		{"kafka_cluster_partition_insyncreplicascount", "The partition's ISR size, on its leader.", func(_ *partition, st *partitionState) int64 {
			if st == nil || !st.isLeader {
				return 0
			}
			return int64(len(st.isr))
		}},
		{"kafka_cluster_partition_replicascount", "The partition's replicas, on its leader.", func(_ *partition, st *partitionState) int64 {
			if st == nil || !st.isLeader {
				return 0
			}
			return int64(len(st.replicas))
		}},
	}
	states := make([]*partitionState, len(parts))
	for i, p := range parts {
		states[i] = p.state.Load()
	}
	for _, g := range partGauges {
		w.family(g.name, "gauge", g.help)
		for i, p := range parts {
			w.sample(g.name, float64(g.value(p, states[i])), "topic", p.tp.Topic, "partition", strconv.Itoa(int(p.tp.Partition)))
		}
	}
}

// underReplicated and atMinISR compare the ISR with the replicas and with
// min.insync.replicas (underMinISR: replicas.go).
func (s *partitionState) underReplicated() bool { return len(s.isr) < len(s.replicas) }
func (s *partitionState) atMinISR() bool        { return len(s.isr) == min(s.minISR, len(s.replicas)) }

// countISRChange counts a committed ISR change from old to new.
func (m *brokerMetrics) countISRChange(old, new []int32) {
	for _, id := range old {
		if !slices.Contains(new, id) {
			m.isrShrinks.Add(1)
			break
		}
	}
	for _, id := range new {
		if !slices.Contains(old, id) {
			m.isrExpands.Add(1)
			break
		}
	}
}

// writeControllerMetrics writes KafkaController's gauges and the quorum's
// raft-metrics. The image-derived gauges are the active controller's, 0
// on the others (Kafka's ActiveControllerCount and OfflinePartitionsCount
// are summed over the cluster).
func writeControllerMetrics(w *promWriter, rn *raftlog.Node, controller bool) {
	active := controller && rn.IsLeader()
	if controller {
		var img *metadata.Image
		if active {
			img = rn.Image()
		}
		var topics, partitions, offline, imbalance, activeBrokers, fenced int
		if img != nil {
			for _, t := range img.Topics() {
				topics++
				for _, p := range t.Partitions {
					partitions++
					if p.Leader < 0 {
						offline++
					} else if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
						imbalance++
					}
				}
			}
			for _, br := range img.Brokers() {
				if br.Fenced {
					fenced++
				} else {
					activeBrokers++
				}
			}
		}
		w.gauge("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, 0 on the other controllers.", b2f(active))
		w.gauge("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader (active controller only).", float64(offline))
		w.gauge("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", "Partitions not led by their preferred replica (active controller only).", float64(imbalance))
		w.gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics (active controller only).", float64(topics))
		w.gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions (active controller only).", float64(partitions))
		w.gauge("kafka_controller_kafkacontroller_activebrokercount", "Registered, unfenced brokers (active controller only).", float64(activeBrokers))
		w.gauge("kafka_controller_kafkacontroller_fencedbrokercount", "Registered, fenced brokers (active controller only).", float64(fenced))
	}
	current := float64(-1)
	if leader, ok := rn.LeaderID(); ok {
		current = float64(leader)
	}
	w.gauge("kafka_server_raftmetrics_current_leader", "The metadata quorum's leader as this node knows it; -1 when none.", current)
	w.gauge("kafka_server_raftmetrics_current_epoch", "The metadata quorum's epoch (Raft term).", float64(rn.Term()))
	w.gauge("kafka_server_raftmetrics_high_watermark", "The metadata log offset this node has applied.", float64(rn.AppliedOffset()))
}

// writeConnectionMetrics writes each listener's open Kafka connections
// (Raft connections on a controller listener are not Kafka's, and not
// counted).
func writeConnectionMetrics(w *promWriter, open map[string]int, listeners []network.Listener) {
	const name = "kafka_server_socket_server_metrics_connection_count"
	w.family(name, "gauge", "Open client and inter-broker connections, by listener (socket-server-metrics connection-count).")
	for _, l := range listeners {
		w.sample(name, float64(open[l.Name]), "listener", l.Name)
	}
}

// writeListenerMetrics writes each listener's connection counts and
// throttles (network.ListenerStats): socket-server-metrics'
// connection-creation-total, connection-close-total,
// connection-accept-throttle-time and ip-connection-accept-throttle-time
// (KIP-612), and the count of the Acceptor's AcceptorBlockedPercent meter
// (KIP-402: nanoseconds the acceptor held a connection back at a limit or
// for a throttle; its rate over 10^9 is the share of time blocked).
func writeListenerMetrics(w *promWriter, stats map[string]network.ListenerStats, listeners []network.Listener) {
	for _, m := range []struct {
		name, typ, help string
		value           func(network.ListenerStats) float64
	}{
		{"kafka_server_socket_server_metrics_connection_creation_total", "counter",
			"Connections accepted and served since the node started, by listener (connection-creation-total).",
			func(s network.ListenerStats) float64 { return float64(s.Created) }},
		{"kafka_server_socket_server_metrics_connection_close_total", "counter",
			"Connections that ended since the node started, by listener (connection-close-total).",
			func(s network.ListenerStats) float64 { return float64(s.Closed) }},
		{"kafka_server_socket_server_metrics_connection_accept_throttle_time", "gauge",
			"Average milliseconds a new connection was held back by the listener's or the broker's max.connection.creation.rate, over the quota windows; NaN with none (connection-accept-throttle-time).",
			func(s network.ListenerStats) float64 { return s.AcceptThrottle }},
		{"kafka_server_socket_server_metrics_ip_connection_accept_throttle_time", "gauge",
			"Average milliseconds a new connection was held before being closed by its address's connection_creation_rate quota, over the quota windows; NaN with none (ip-connection-accept-throttle-time).",
			func(s network.ListenerStats) float64 { return s.IPAcceptThrottle }},
		{"kafka_network_acceptor_acceptorblockedpercent", "counter",
			"Nanoseconds the listener's acceptor held a new connection back at a connection limit or for a creation-rate throttle, accepting no other (the count of Kafka's AcceptorBlockedPercent meter; its rate / 1e9 is the share of time blocked).",
			func(s network.ListenerStats) float64 { return float64(s.AcceptorBlocked.Nanoseconds()) }},
	} {
		w.family(m.name, m.typ, m.help)
		for _, l := range listeners {
			w.sample(m.name, m.value(stats[l.Name]), "listener", l.Name)
		}
	}
}

// writeAuthenticationMetrics writes each listener's authentications since
// the node started: TLS handshakes on SSL listeners, SASL exchanges on SASL
// ones (socket-server-metrics successful-authentication-total and
// failed-authentication-total).
func writeAuthenticationMetrics(w *promWriter, ok, failed map[string]int64, listeners []network.Listener) {
	writeListenerCounters(w, listeners, func(l network.Listener) bool { return l.SecurityProtocol != network.Plaintext }, []listenerCounter{
		{"kafka_server_socket_server_metrics_successful_authentication_total", "Connections that authenticated, by listener: a TLS handshake on SSL, a SASL exchange on SASL_PLAINTEXT and SASL_SSL (successful-authentication-total).", ok},
		{"kafka_server_socket_server_metrics_failed_authentication_total", "Connections that failed to authenticate, by listener (failed-authentication-total): a bad certificate, a wrong password, a mechanism not enabled.", failed},
	})
}

// writeReauthenticationMetrics writes the SASL listeners' re-authentication
// counters (KIP-368).
func writeReauthenticationMetrics(w *promWriter, ok, failed, expired map[string]int64, listeners []network.Listener) {
	writeListenerCounters(w, listeners, func(l network.Listener) bool { return l.SecurityProtocol.IsSASL() }, []listenerCounter{
		{"kafka_server_socket_server_metrics_successful_reauthentication_total", "SASL sessions renewed by re-authentication on the connection, by listener (successful-reauthentication-total; connections.max.reauth.ms).", ok},
		{"kafka_server_socket_server_metrics_failed_reauthentication_total", "SASL re-authentications that failed and closed their connection, by listener (failed-reauthentication-total).", failed},
		{"kafka_server_socket_server_metrics_expired_connections_killed_count", "Connections closed because their SASL session expired without re-authentication, by listener (expired-connections-killed-count).", expired},
	})
}

// listenerCounter is one counter family by listener.
type listenerCounter struct {
	name, help string
	counts     map[string]int64
}

// writeListenerCounters writes each counter for the listeners include
// takes; nothing when it takes none.
func writeListenerCounters(w *promWriter, listeners []network.Listener, include func(network.Listener) bool, counters []listenerCounter) {
	if !slices.ContainsFunc(listeners, include) {
		return
	}
	for _, m := range counters {
		w.family(m.name, "counter", m.help)
		for _, l := range listeners {
			if include(l) {
				w.sample(m.name, float64(m.counts[l.Name]), "listener", l.Name)
			}
		}
	}
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// writeProcessMetrics writes the process series Prometheus's Go client
// writes, for dashboards that show a broker's CPU and memory.
func writeProcessMetrics(w *promWriter, started time.Time) {
	w.gauge("go_goroutines", "Goroutines that currently exist.", float64(runtime.NumGoroutine()))
	if cpu, ok := selfCPUSeconds(); ok {
		w.family("process_cpu_seconds_total", "counter", "User and system CPU seconds of this process.")
		w.sample("process_cpu_seconds_total", cpu)
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				w.gauge("process_resident_memory_bytes", "Resident memory of this process.", float64(pages*int64(os.Getpagesize())))
			}
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		w.gauge("process_open_fds", "Open file descriptors (segments, indexes, sockets).", float64(len(fds)))
	}
	w.gauge("process_start_time_seconds", "When this process started, in Unix seconds.", float64(started.Unix()))
}

// selfCPUSeconds reads this process's user+system time from
// /proc/self/stat (fields 14 and 15, in clock ticks of 1/100 s: Linux's
// USER_HZ for /proc is always 100).
func selfCPUSeconds() (float64, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (u + st) / 100, true
}

// MetricsServer serves /metrics over HTTP on keel.metrics.address.
type MetricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// StartMetricsServer listens on addr and serves write's output at
// /metrics until Close.
func StartMetricsServer(addr string, write func(w *promWriter), logger hclog.Logger) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("keel.metrics.address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		bw := bufio.NewWriterSize(rw, 32<<10)
		write(&promWriter{w: bw})
		_ = bw.Flush()
	})
	ms := &MetricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(ms.done)
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics endpoint stopped", "error", err)
		}
	}()
	logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return ms, nil
}

// Addr is the address the server listens on.
func (ms *MetricsServer) Addr() string { return ms.ln.Addr().String() }

// Close stops the server, waiting up to 5 s for scrapes in progress.
func (ms *MetricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := ms.srv.Shutdown(ctx)
	<-ms.done
	return err
}

// groupStates counts the groups this node coordinates by state (Kafka's
// GroupMetadataManager NumGroups...), asking each loaded offsets shard on
// its own goroutine; shards that do not answer within a second are left
// out of this scrape.
func (gc *groupCoordinator) groupStates() map[string]int {
	shards := gc.loadedShards()
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range shards {
		wg.Add(1)
		var once sync.Once
		done := func() { once.Do(wg.Done) }
		ok := s.submit(func(int64) {
			defer done()
			listed := s.mgr.List()
			mu.Lock()
			defer mu.Unlock()
			for _, l := range listed {
				counts[l.State]++
			}
		}, done)
		if !ok {
			done()
		}
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(counts)
}

// writeGroupMetrics writes the group coordinator's gauges.
func (b *Broker) writeGroupMetrics(w *promWriter) {
	counts := b.groups.groupStates()
	total := 0
	for _, n := range counts {
		total += n
	}
	const prefix = "kafka_coordinator_group_groupmetadatamanager_"
	w.gauge(prefix+"numgroups", "Consumer groups this node coordinates.", float64(total))
	for _, st := range []struct{ metric, state string }{
		{"numgroupsstable", "Stable"},
		{"numgroupspreparingrebalance", "PreparingRebalance"},
		{"numgroupscompletingrebalance", "CompletingRebalance"},
		{"numgroupsempty", "Empty"},
		{"numgroupsdead", "Dead"},
	} {
		w.gauge(prefix+st.metric, "Consumer groups this node coordinates in state "+st.state+".", float64(counts[st.state]))
	}
}
