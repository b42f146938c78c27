package integration

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetricsEndpoint: three keel processes, each serving /metrics
// (keel.metrics.address with port 0); every scrape is parsed with
// Prometheus's own text parser. kgo produces and consumes on an RF=3
// topic; the BrokerTopicMetrics, ReplicaManager and KafkaController
// series add up across the nodes to what the clients did and to the
// topic's layout. A follower is killed with kill -9: the leaders report
// under-replicated partitions and count ISR shrinks; once it is back, the
// ISR expands again and nothing is under-replicated. Then the active
// controller is killed: the survivors count one active controller again.
func TestMetricsEndpoint(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{Overrides: []string{"keel.metrics.address=127.0.0.1:0", "replica.lag.time.max.ms=2000",
			"offsets.topic.num.partitions=3", "group.initial.rebalance.delay.ms=0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic, total = "metered", 2000
	if resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	for i := 0; i < total; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte("value")}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	nodes := []int32{1, 2, 3}
	// The followers have fetched everything once every replica's log end
	// offset is the leader's: then the sums below are exact.
	waitFor(t, 30*time.Second, "every replica caught up", func() bool {
		var leo float64
		for _, id := range nodes {
			leo += sumSeries(scrape(t, c, id), "kafka_log_log_logendoffset", "topic", topic)
		}
		return leo == 3*total
	})
	sum := func(name string, labels ...string) float64 {
		var s float64
		for _, id := range nodes {
			families := scrape(t, c, id)
			if f, _ := seriesFamily(families, name); f == nil {
				t.Fatalf("node %d has no %s", id, name)
			}
			s += sumSeries(families, name, labels...)
		}
		return s
	}
	// Measured before any group exists, whose __consumer_offsets writes
	// would replicate too.
	bytesIn := sum("kafka_server_brokertopicmetrics_bytesin_total", "topic", topic)
	replicated := sum("kafka_server_brokertopicmetrics_replicationbytesin_total")
	if bytesIn <= 0 || replicated != 2*bytesIn {
		t.Errorf("bytes in %v, replication bytes in %v: want twice the bytes in (two followers)", bytesIn, replicated)
	}

	// A group member reads everything (and creates __consumer_offsets).
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumeTopics(topic),
		kgo.ConsumerGroup("metered-group"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for consumed := 0; consumed < total; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", consumed, total)
		}
		consumed += fs.NumRecords()
	}
	defer cons.Close()
	waitFor(t, 30*time.Second, "the group to be stable", func() bool {
		return sum("kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
	})
	for _, check := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"kafka_server_brokertopicmetrics_messagesin_total", []string{"topic", topic}, total},
		// the topic's and __consumer_offsets' 3 partitions, 3 replicas each
		{"kafka_server_replicamanager_partitioncount", nil, 2 * 3 * 3},
		{"kafka_server_replicamanager_leadercount", nil, 2 * 3},
		{"kafka_server_kafkaserver_brokerstate", nil, 3 * 3}, // RUNNING
		{"kafka_coordinator_group_groupmetadatamanager_numgroups", nil, 1},
		{"kafka_coordinator_group_groupmetadatamanager_numgroupsstable", nil, 1},
		{"kafka_server_replicamanager_underreplicatedpartitions", nil, 0},
		{"kafka_cluster_partition_replicascount", []string{"topic", topic}, 3 * 3},
		{"kafka_server_replicamanager_atminisrpartitioncount", nil, 0},
		{"kafka_server_replicafetchermanager_maxlag", []string{"clientId", "Replica"}, 0},
		{"kafka_controller_kafkacontroller_activecontrollercount", nil, 1},
		{"kafka_controller_kafkacontroller_globalpartitioncount", nil, 2 * 3},
		{"kafka_controller_kafkacontroller_activebrokercount", nil, 3},
		{"kafka_controller_kafkacontroller_offlinepartitionscount", nil, 0},
	} {
		if got := sum(check.name, check.labels...); got != check.want {
			t.Errorf("%s%v summed over the nodes = %v, want %v", check.name, check.labels, got, check.want)
		}
	}
	// The group's metadata went into __consumer_offsets: Kafka counts the
	// coordinator's appends as messages in too.
	if n := sum("kafka_server_brokertopicmetrics_messagesin_total", "topic", "__consumer_offsets"); n < 1 {
		t.Errorf("no message in counted for __consumer_offsets after a group formed")
	}
	if out := sum("kafka_server_brokertopicmetrics_bytesout_total", "topic", topic); out < bytesIn {
		t.Errorf("bytes out %v < bytes in %v: the consumer read every batch", out, bytesIn)
	}
	if n := sum("kafka_server_socket_server_metrics_connection_count", "listener", "PLAINTEXT"); n < 3 {
		t.Errorf("%v PLAINTEXT connections open on the nodes, want the client's and the followers' (3 or more)", n)
	}
	if created, closed := sum("kafka_server_socket_server_metrics_connection_creation_total", "listener", "PLAINTEXT"),
		sum("kafka_server_socket_server_metrics_connection_close_total", "listener", "PLAINTEXT"); created < 3 || closed < 0 || created-closed < 3 {
		t.Errorf("PLAINTEXT connections created %v, closed %v: want at least the 3 open", created, closed)
	}
	for _, req := range []string{"Produce", "FetchConsumer", "FetchFollower", "Metadata", "CreateTopics"} {
		if n := sum("kafka_network_requestmetrics_requests_total", "request", req); n <= 0 {
			t.Errorf("no %s requests counted", req)
		}
		n := sum("kafka_network_requestmetrics_totaltimems_count", "request", req)
		if n <= 0 {
			t.Errorf("no %s request times", req)
		}
		// Kafka's stages of each request: every request in each (exactly
		// for the requests that are over; each sum is a scrape of its own).
		over := req == "Produce" || req == "CreateTopics"
		for _, stage := range []string{"requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems"} {
			if c := sum("kafka_network_requestmetrics_"+stage+"_count", "request", req); c <= 0 || over && c != n {
				t.Errorf("%s: %v %s requests, %v in TotalTimeMs", stage, c, req, n)
			}
		}
	}
	// acks=all waited for the followers: remote time; a long-poll fetch
	// waited for records.
	for _, req := range []string{"Produce", "FetchFollower"} {
		if ms := sum("kafka_network_requestmetrics_remotetimems_sum", "request", req); ms <= 0 {
			t.Errorf("%s: no remote time (%v ms)", req, ms)
		}
	}

	// kill -9 a node that leads none of the topic's partitions if there is
	// one, else any but the controller: the other leaders lose it from
	// their ISRs.
	victim := int32(3)
	for _, id := range nodes {
		if sumSeries(scrape(t, c, id), "kafka_controller_kafkacontroller_activecontrollercount") == 0 {
			victim = id
		}
	}
	c.Kill(victim)
	var live []int32
	for _, id := range nodes {
		if id != victim {
			live = append(live, id)
		}
	}
	liveSum := func(name string, labels ...string) float64 {
		var s float64
		for _, id := range live {
			s += sumSeries(scrape(t, c, id), name, labels...)
		}
		return s
	}
	waitFor(t, 60*time.Second, "the leaders to report 6 under-replicated partitions, 3 at min ISR", func() bool {
		return liveSum("kafka_server_replicamanager_underreplicatedpartitions") == 2*3 &&
			liveSum("kafka_server_replicamanager_atminisrpartitioncount") == 3 &&
			liveSum("kafka_cluster_partition_underreplicated", anyLabels...) == 2*3 &&
			liveSum("kafka_cluster_partition_insyncreplicascount", anyLabels...) == 2*3*2
	})
	if n := liveSum("kafka_server_replicamanager_isrshrinks_total"); n < 1 {
		t.Errorf("ISR shrinks = %v after a follower died", n)
	}
	c.Start(victim)
	c.WaitReady(victim)
	waitFor(t, 60*time.Second, "the ISRs to expand again", func() bool {
		return sum("kafka_server_replicamanager_underreplicatedpartitions") == 0 &&
			sum("kafka_server_replicamanager_isrexpands_total") >= 1
	})

	// kill -9 the active controller: another takes over, and the cluster
	// still counts exactly one.
	var active int32 = -1
	for _, id := range nodes {
		if sumSeries(scrape(t, c, id), "kafka_controller_kafkacontroller_activecontrollercount") == 1 {
			active = id
		}
	}
	c.Kill(active)
	live = live[:0]
	for _, id := range nodes {
		if id != active {
			live = append(live, id)
		}
	}
	waitFor(t, 30*time.Second, "a new active controller, known to both survivors", func() bool {
		if liveSum("kafka_controller_kafkacontroller_activecontrollercount") != 1 {
			return false
		}
		for _, id := range live {
			if leader := sumSeries(scrape(t, c, id), "kafka_server_raftmetrics_current_leader"); leader == float64(active) || leader < 0 {
				return false
			}
		}
		return true
	})
}

var metricsURL = regexp.MustCompile(`serving metrics.*url=(http://\S+/metrics)`)

// scrape reads node id's /metrics (its address from the node's log, the
// last start's) and parses it with Prometheus's text parser.
func scrape(t *testing.T, c *ProcessCluster, id int32) map[string]*dto.MetricFamily {
	t.Helper()
	found := metricsURL.FindAllStringSubmatch(c.Log(id), -1)
	if len(found) == 0 {
		t.Fatalf("node %d logged no metrics address", id)
	}
	url := found[len(found)-1][1]
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape node %d: %v", id, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("node %d: Content-Type %q", id, ct)
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("node %d: /metrics does not parse: %v", id, err)
	}
	return families
}

// anyLabels makes sumSeries sum every sample of a family.
var anyLabels = []string{"*"}

// seriesFamily is the family of the series name: its own, or for a
// histogram's _count or _sum the histogram's, with that suffix.
func seriesFamily(families map[string]*dto.MetricFamily, name string) (f *dto.MetricFamily, suffix string) {
	if f = families[name]; f != nil {
		return f, ""
	}
	for _, sfx := range []string{"_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, sfx); ok {
			return families[base], sfx
		}
	}
	return nil, ""
}

// sumSeries sums a family's samples whose labels include labels (name,
// value pairs); with no labels, the samples that have none (Kafka's
// all-topics series); with anyLabels, all. A histogram's _count and _sum
// are asked for by those names.
func sumSeries(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, suffix := seriesFamily(families, name)
	if f == nil {
		return 0
	}
	var s float64
	for _, m := range f.Metric {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case suffix == "_count" && m.Histogram != nil:
			s += float64(m.Histogram.GetSampleCount())
		case suffix == "_sum" && m.Histogram != nil:
			s += m.Histogram.GetSampleSum()
		case m.Counter != nil:
			s += m.Counter.GetValue()
		case m.Gauge != nil:
			s += m.Gauge.GetValue()
		}
	}
	return s
}

func hasLabels(m *dto.Metric, labels []string) bool {
	if len(labels) == 1 && labels[0] == anyLabels[0] {
		return true
	}
	if len(labels) == 0 {
		return len(m.Label) == 0
	}
	for i := 0; i+1 < len(labels); i += 2 {
		ok := false
		for _, l := range m.Label {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestMetricsFollowTheRoles: a controller-only node serves the controller
// and quorum series and no broker ones; a broker-only node the broker
// ones (its BrokerState RUNNING once unfenced) and no KafkaController
// gauges; the active controller reports itself and the broker.
func TestMetricsFollowTheRoles(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "controller"}, {2, "broker"}}, "keel.metrics.address=127.0.0.1:0")
	c.WaitReady(30 * time.Second)
	get := func(id int32) map[string]*dto.MetricFamily {
		t.Helper()
		addr := c.Nodes[id].MetricsAddress()
		if addr == "" {
			t.Fatalf("node %d serves no metrics", id)
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p expfmt.TextParser
		families, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		return families
	}
	waitFor(t, 30*time.Second, "the broker running and counted by the controller", func() bool {
		return sumSeries(get(2), "kafka_server_kafkaserver_brokerstate") == 3 &&
			sumSeries(get(1), "kafka_controller_kafkacontroller_activebrokercount") == 1
	})
	ctl, brk := get(1), get(2)
	for _, name := range []string{"kafka_controller_kafkacontroller_activecontrollercount", "kafka_server_raftmetrics_current_leader", "go_goroutines"} {
		if ctl[name] == nil {
			t.Errorf("the controller has no %s", name)
		}
	}
	for _, name := range []string{"kafka_server_replicamanager_partitioncount", "kafka_server_kafkaserver_brokerstate", "kafka_server_brokertopicmetrics_messagesin_total"} {
		if ctl[name] != nil {
			t.Errorf("the controller-only node has %s", name)
		}
		if brk[name] == nil {
			t.Errorf("the broker has no %s", name)
		}
	}
	if brk["kafka_controller_kafkacontroller_activecontrollercount"] != nil {
		t.Error("the broker-only node has KafkaController gauges")
	}
	if v := sumSeries(ctl, "kafka_controller_kafkacontroller_activecontrollercount"); v != 1 {
		t.Errorf("active controller count %v on the only controller", v)
	}
	if v := sumSeries(brk, "kafka_server_raftmetrics_current_leader"); v != 1 {
		t.Errorf("the broker sees quorum leader %v, want 1", v)
	}
}

// TestMetricsScrapedUnderLoad: scrapes in a loop while kgo produces to and
// consumes from an in-process node, topics are created and deleted, and a
// group rebalances — under -race in make test, so a scrape reading state
// the request paths write shows up as a race. Every scrape parses, and the
// counters never go down.
func TestMetricsScrapedUnderLoad(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}}, "keel.metrics.address=127.0.0.1:0",
		"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=2")
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := "http://" + c.Nodes[1].MetricsAddress() + "/metrics"
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		var last float64
		n := 0
		for {
			select {
			case <-stop:
				if n == 0 {
					scraped <- fmt.Errorf("no scrape")
				} else {
					scraped <- nil
				}
				return
			default:
			}
			resp, err := http.Get(url)
			if err != nil {
				scraped <- err
				return
			}
			var p expfmt.TextParser
			families, err := p.TextToMetricFamilies(resp.Body)
			resp.Body.Close()
			if err != nil {
				scraped <- err
				return
			}
			in := sumSeries(families, "kafka_server_brokertopicmetrics_messagesin_total")
			if in < last {
				scraped <- fmt.Errorf("messages in went down: %v after %v", in, last)
				return
			}
			last = in
			n++
		}
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.DefaultProduceTopic("load"),
		kgo.AllowAutoTopicCreation(), kgo.ConsumerGroup("load-group"), kgo.ConsumeTopics("load"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for round := 0; round < 5; round++ {
		topic := fmt.Sprintf("churn-%d", round)
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2000; i++ {
			cl.Produce(ctx, &kgo.Record{Value: []byte("load")}, nil)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("churn")}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		cl.PollRecords(ctx, 1000)
		if _, err := adm.DeleteTopics(ctx, topic); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-scraped; err != nil {
		t.Fatal(err)
	}
}
