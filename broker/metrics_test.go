package broker

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

// Kafka's RequestMetrics names (ApiKeys), which dashboards filter on.
func TestRequestNamesAreKafkas(t *testing.T) {
	for kind, want := range map[int]string{
		int(kmsg.Produce):                      "Produce",
		int(kmsg.Fetch):                        "FetchConsumer",
		requestKindFetchFollower:               "FetchFollower",
		int(kmsg.InitProducerID):               "InitProducerId",
		int(kmsg.AllocateProducerIDs):          "AllocateProducerIds",
		int(kmsg.DescribeACLs):                 "DescribeAcls",
		int(kmsg.SASLHandshake):                "SaslHandshake",
		int(kmsg.LeaderAndISR):                 "LeaderAndIsr",
		int(kmsg.DescribeUserSCRAMCredentials): "DescribeUserScramCredentials",
		int(kmsg.OffsetForLeaderEpoch):         "OffsetForLeaderEpoch",
	} {
		if got := requestName(kind); got != want {
			t.Errorf("request kind %d: %q, want %q", kind, got, want)
		}
	}
}

// The exposition parses with Prometheus's own parser: label values that
// need escaping, and the request histogram, whose buckets are cumulative
// and whose count and sum agree with what was observed.
func TestMetricsExpositionParses(t *testing.T) {
	rm := NewRequestMetrics()
	fetch := func(replica int32) *network.Request {
		m := kmsg.NewPtrFetchRequest()
		m.Version, m.ReplicaID = 11, replica
		return &network.Request{Header: network.RequestHeader{APIKey: int16(kmsg.Fetch), APIVersion: 11}, Msg: m}
	}
	// Each request's time: a tenth decoding, half the handler's, a fifth
	// waiting for data, a tenth each queued and sent.
	times := func(d time.Duration) network.RequestTimes {
		rt := network.RequestTimes{Started: d / 10}
		rt.Handled = rt.Started + d/2
		rt.Completed = rt.Handled + d/5
		rt.Sending = rt.Completed + d/10
		rt.Sent = rt.Sending + d/10
		return rt
	}
	for _, d := range []time.Duration{100 * time.Microsecond, 3 * time.Millisecond, 3 * time.Millisecond, time.Minute} {
		rm.Observe(fetch(-1), times(d))
	}
	rm.Observe(fetch(2), times(7*time.Millisecond))
	noResponse := times(time.Second)
	noResponse.NoResponse, noResponse.Sending, noResponse.Sent = true, 0, 0
	rm.Observe(&network.Request{Header: network.RequestHeader{APIKey: int16(kmsg.Produce), APIVersion: 9}, Msg: kmsg.NewPtrProduceRequest()}, noResponse)

	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := &promWriter{w: bw}
	rm.write(w)
	w.family("kafka_log_log_size", "gauge", "Bytes.")
	w.sample("kafka_log_log_size", 42, "topic", "we\"ird\\topic\nname", "partition", "0")
	w.gauge("kafka_server_replicamanager_leadercount", "Leaders.", 3)
	bw.Flush()

	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("does not parse: %v\n%s", err, buf.String())
	}
	size := families["kafka_log_log_size"].GetMetric()
	if len(size) != 1 || size[0].GetGauge().GetValue() != 42 || size[0].GetLabel()[0].GetValue() != "we\"ird\\topic\nname" {
		t.Errorf("escaped label round trip: %v", size)
	}
	if v := families["kafka_server_replicamanager_leadercount"].GetMetric()[0].GetGauge().GetValue(); v != 3 {
		t.Errorf("leader count %v", v)
	}
	byRequest := map[string]float64{}
	for _, m := range families["kafka_network_requestmetrics_requests_total"].GetMetric() {
		byRequest[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if byRequest["FetchConsumer"] != 4 || byRequest["FetchFollower"] != 1 || byRequest["Produce"] != 1 || len(byRequest) != 3 {
		t.Errorf("requests %v, want 4 FetchConsumer, 1 FetchFollower, 1 Produce", byRequest)
	}
	// The stages' sums, per request kind: each its share of the total;
	// the produce without a response ends when handled (0.9 s).
	const consumerMs = 60000 + 6.1
	for _, c := range []struct {
		name              string
		consumer, produce float64
	}{
		{"totaltimems", consumerMs, 800},
		{"requestqueuetimems", consumerMs / 10, 100},
		{"localtimems", consumerMs / 2, 500},
		{"remotetimems", consumerMs / 5, 200},
		{"responsequeuetimems", consumerMs / 10, 0},
		{"responsesendtimems", consumerMs / 10, 0},
	} {
		sums := map[string]float64{}
		counts := map[string]uint64{}
		for _, m := range families["kafka_network_requestmetrics_"+c.name].GetMetric() {
			sums[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleSum()
			counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
		if math.Abs(sums["FetchConsumer"]-c.consumer) > 0.01 || math.Abs(sums["Produce"]-c.produce) > 0.01 {
			t.Errorf("%s sums %v, want FetchConsumer %v and Produce %v", c.name, sums, c.consumer, c.produce)
		}
		if counts["FetchConsumer"] != 4 || counts["FetchFollower"] != 1 || counts["Produce"] != 1 {
			t.Errorf("%s counts %v, want every request counted", c.name, counts)
		}
	}
	for _, m := range families["kafka_network_requestmetrics_totaltimems"].GetMetric() {
		if m.GetLabel()[0].GetValue() != "FetchConsumer" {
			continue
		}
		h := m.GetHistogram()
		if h.GetSampleCount() != 4 {
			t.Errorf("count %d, want 4", h.GetSampleCount())
		}
		if want := 60000 + 6.1; h.GetSampleSum() < want-0.01 || h.GetSampleSum() > want+0.01 {
			t.Errorf("sum %v ms, want %v", h.GetSampleSum(), want)
		}
		cum := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			cum[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		if cum[0.25] != 1 || cum[2.5] != 1 || cum[5] != 3 || cum[30000] != 3 {
			t.Errorf("cumulative buckets %v", cum)
		}
	}
}

// The endpoint serves GET /metrics only, stops on Close, and an address
// already taken fails the start with the key named.
func TestMetricsServer(t *testing.T) {
	ms, err := StartMetricsServer("127.0.0.1:0", func(w *promWriter) { w.gauge("up_test", "A test gauge.", 1) }, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + ms.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "\nup_test 1\n") {
		t.Errorf("GET /metrics: %d %q", resp.StatusCode, body)
	}
	if resp, err := http.Post("http://"+ms.Addr()+"/metrics", "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := StartMetricsServer(ms.Addr(), func(*promWriter) {}, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "keel.metrics.address") {
		t.Errorf("a second server on %s: %v", ms.Addr(), err)
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + ms.Addr() + "/metrics"); err == nil {
		t.Error("still serving after Close")
	}
}

// The per-request cost of RequestMetrics (network.Config.RequestDone).
func BenchmarkRequestMetricsObserve(b *testing.B) {
	rm := NewRequestMetrics()
	m := kmsg.NewPtrFetchRequest()
	m.Version, m.ReplicaID = 11, -1
	req := &network.Request{Header: network.RequestHeader{APIKey: int16(kmsg.Fetch), APIVersion: 11}, Msg: m}
	rt := network.RequestTimes{Handled: time.Millisecond, Completed: 2 * time.Millisecond,
		Sending: 2 * time.Millisecond, Sent: 3 * time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rm.Observe(req, rt)
		}
	})
}

// Authentications are written per secured listener and parse; a node
// with PLAINTEXT listeners only writes none.
func TestAuthenticationMetrics(t *testing.T) {
	listeners := []network.Listener{{Name: "PLAINTEXT", SecurityProtocol: network.Plaintext}, {Name: "CLIENTS", SecurityProtocol: network.SASLSSL}}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	writeAuthenticationMetrics(&promWriter{w: bw}, map[string]int64{"CLIENTS": 7}, map[string]int64{"CLIENTS": 2}, listeners)
	bw.Flush()
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"successful": 7, "failed": 2} {
		f := families["kafka_server_socket_server_metrics_"+name+"_authentication_total"]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter().GetValue() != want || f.GetMetric()[0].GetLabel()[0].GetValue() != "CLIENTS" {
			t.Errorf("%s authentications: %v, want %v on CLIENTS only", name, f, want)
		}
	}
	buf.Reset()
	writeAuthenticationMetrics(&promWriter{w: bw}, nil, nil, listeners[:1])
	bw.Flush()
	if buf.Len() != 0 {
		t.Errorf("PLAINTEXT only: %q", buf.String())
	}
}

// Listener stats are written per listener and parse, an average with no
// throttle in its windows as NaN (Kafka's Avg of nothing).
func TestListenerMetrics(t *testing.T) {
	listeners := []network.Listener{{Name: "PLAINTEXT"}, {Name: "CONTROLLER"}}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	writeListenerMetrics(&promWriter{w: bw}, map[string]network.ListenerStats{
		"PLAINTEXT": {Created: 12, Closed: 5, AcceptorBlocked: 1500 * time.Millisecond, AcceptThrottle: 250, IPAcceptThrottle: math.NaN()},
	}, listeners)
	bw.Flush()
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	value := func(name, listener string) float64 {
		t.Helper()
		f := families[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == listener {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("%s: no %s sample", name, listener)
		return 0
	}
	for name, want := range map[string]float64{
		"kafka_server_socket_server_metrics_connection_creation_total":       12,
		"kafka_server_socket_server_metrics_connection_close_total":          5,
		"kafka_server_socket_server_metrics_connection_accept_throttle_time": 250,
		"kafka_network_acceptor_acceptorblockedpercent":                      1.5e9,
	} {
		if got := value(name, "PLAINTEXT"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
		if got := value(name, "CONTROLLER"); got != 0 && !math.IsNaN(got) {
			t.Errorf("%s on CONTROLLER = %v, want 0", name, got)
		}
	}
	if got := value("kafka_server_socket_server_metrics_ip_connection_accept_throttle_time", "PLAINTEXT"); !math.IsNaN(got) {
		t.Errorf("ip throttle average with none = %v, want NaN", got)
	}
}
