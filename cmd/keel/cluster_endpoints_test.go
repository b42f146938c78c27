package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/integration"
	"github.com/keelstream/keel/raftlog"
)

// endpointsCluster is an in-process cluster for the endpoint listings: a
// controller of its own (node 1) and brokers 2, in rack-a, and 3, in no
// rack. integration.StartCluster gives every node the same properties;
// these tests need one broker with a rack and one without.
type endpointsCluster struct {
	t          *testing.T
	controller string           // node 1's CONTROLLER listener
	brokers    map[int32]string // PLAINTEXT listener by node id
	nodes      map[int32]*broker.Node
}

// startEndpointsCluster formats and starts the three nodes, each with
// overrides (key=value), and waits until every node's metadata has both
// brokers unfenced.
func startEndpointsCluster(t *testing.T, overrides ...string) *endpointsCluster {
	t.Helper()
	c := &endpointsCluster{t: t, brokers: map[int32]string{}, nodes: map[int32]*broker.Node{}}
	controllerPort := integration.FreePort(t)
	c.controller = fmt.Sprintf("127.0.0.1:%d", controllerPort)
	clusterID := raftlog.NewClusterID()
	configs := map[int32]*broker.Config{}
	for id, rack := range map[int32]string{1: "", 2: "rack-a", 3: ""} {
		props := map[string]string{
			"node.id":                                  fmt.Sprint(id),
			"controller.quorum.voters":                 "1@" + c.controller,
			"controller.listener.names":                "CONTROLLER",
			"listener.security.protocol.map":           "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"log.dirs":                                 filepath.Join(t.TempDir(), fmt.Sprintf("n%d", id)),
			"broker.heartbeat.interval.ms":             "500",
			"broker.session.timeout.ms":                "3000",
			"offsets.topic.replication.factor":         "2",
			"transaction.state.log.replication.factor": "2",
		}
		if id == 1 {
			props["process.roles"], props["listeners"] = "controller", "CONTROLLER://"+c.controller
		} else {
			c.brokers[id] = fmt.Sprintf("127.0.0.1:%d", integration.FreePort(t))
			props["process.roles"], props["listeners"] = "broker", "PLAINTEXT://"+c.brokers[id]
		}
		if rack != "" {
			props["broker.rack"] = rack
		}
		cfg, err := broker.LoadConfig(props, overrides)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raftlog.EnsureMetaProperties(cfg.LogDirs, clusterID, id, true); err != nil {
			t.Fatal(err)
		}
		configs[id] = cfg
	}
	t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id)
		}
	})
	for id := int32(1); id <= 3; id++ {
		n, err := broker.StartNode(configs[id], nil)
		if err != nil {
			t.Fatalf("start node %d: %v", id, err)
		}
		c.nodes[id] = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id, n := range c.nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
	}
	// A broker is ready once it is unfenced in its own metadata; the other
	// nodes apply that record a moment later, and until then broker 2's
	// Metadata lists broker 2 alone (two fresh-clone CI runs failed so).
	for id, n := range c.nodes {
		for !c.seesBrokersUnfenced(n) {
			select {
			case <-ctx.Done():
				t.Fatalf("node %d: the brokers are not all unfenced in its metadata: %v", id, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return c
}

// seesBrokersUnfenced reports whether every broker of the cluster is
// registered and unfenced in n's metadata image.
func (c *endpointsCluster) seesBrokersUnfenced(n *broker.Node) bool {
	img := n.Raft().Image()
	for id := range c.brokers {
		if b, ok := img.Broker(id); !ok || b.Fenced {
			return false
		}
	}
	return true
}

// stop shuts node id down cleanly (a controlled shutdown for a broker).
func (c *endpointsCluster) stop(id int32) {
	c.t.Helper()
	if n := c.nodes[id]; n != nil {
		delete(c.nodes, id)
		if err := n.Close(); err != nil {
			c.t.Logf("close node %d: %v", id, err)
		}
	}
}

// kill stops node id abruptly: its listeners close, and the controller
// keeps it registered, unfenced, until its session times out.
func (c *endpointsCluster) kill(id int32) {
	c.t.Helper()
	if n := c.nodes[id]; n != nil {
		delete(c.nodes, id)
		if err := n.Abort(); err != nil {
			c.t.Logf("abort node %d: %v", id, err)
		}
	}
}

// port is the port of addr (host:port).
func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// kafka-cluster.sh list-endpoints: the brokers with their racks and
// STATE, the controllers with --bootstrap-controller, -o json; a broker
// stopped is fenced, and listed only with --include-fenced-brokers.
func TestCLIClusterListEndpoints(t *testing.T) {
	c := startEndpointsCluster(t)
	bs := c.brokers[2]
	// ClusterTool's format, with HOST as wide as 127.0.0.1 and RACK as
	// rack-a.
	brokerRow := func(id int32, rack, state string) string {
		return fmt.Sprintf("%-10d %-9s %-10s %-6s %-10s %-15s\n", id, "127.0.0.1", port(c.brokers[id]), rack, state, "broker")
	}
	header := fmt.Sprintf("%-10s %-9s %-10s %-6s %-10s %-15s\n", "ID", "HOST", "PORT", "RACK", "STATE", "ENDPOINT_TYPE")
	want := header + brokerRow(2, "rack-a", "unfenced") + brokerRow(3, "null", "unfenced")
	out := keelOK(t, "cluster", "list-endpoints", "--bootstrap-server", bs)
	if out != want {
		t.Errorf("list-endpoints --bootstrap-server printed\n%q\nwant\n%q", out, want)
	}
	// Without a rack, RACK is Kafka's 10 wide.
	wantControllers := fmt.Sprintf("%-10s %-9s %-10s %-10s %-15s\n", "ID", "HOST", "PORT", "RACK", "ENDPOINT_TYPE") +
		fmt.Sprintf("%-10s %-9s %-10s %-10s %-15s\n", "1", "127.0.0.1", port(c.controller), "null", "controller")
	if out := keelOK(t, "cluster", "list-endpoints", "--bootstrap-controller", c.controller); out != wantControllers {
		t.Errorf("list-endpoints --bootstrap-controller printed\n%q\nwant\n%q", out, wantControllers)
	}

	// A broker's listener is no controller's (Kafka's brokers say so too).
	if out, errOut, exit := keelRun(t, "cluster", "list-endpoints", "--bootstrap-controller", bs); exit != 1 || out != "" ||
		!strings.Contains(errOut, "MISMATCHED_ENDPOINT_TYPE") {
		t.Errorf("list-endpoints --bootstrap-controller at a broker: exit %d, stdout %q, stderr %q", exit, out, errOut)
	}

	type endpoint struct {
		ID           int32   `json:"id"`
		Host         string  `json:"host"`
		Port         int32   `json:"port"`
		Rack         *string `json:"rack"`
		State        string  `json:"state"`
		EndpointType string  `json:"endpointType"`
	}
	var rows []endpoint
	if err := json.Unmarshal([]byte(keelOK(t, "cluster", "list-endpoints", "--bootstrap-server", bs, "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != 2 || rows[0].Rack == nil || *rows[0].Rack != "rack-a" || rows[1].ID != 3 || rows[1].Rack != nil ||
		rows[0].State != "unfenced" || rows[1].EndpointType != "broker" || fmt.Sprintf("%s:%d", rows[1].Host, rows[1].Port) != c.brokers[3] {
		t.Errorf("list-endpoints -o json: %+v", rows)
	}
	rows = nil
	if err := json.Unmarshal([]byte(keelOK(t, "cluster", "list-endpoints", "--bootstrap-controller", c.controller, "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != 1 || rows[0].EndpointType != "controller" || rows[0].State != "" {
		t.Errorf("list-endpoints --bootstrap-controller -o json: %+v", rows)
	}

	// Broker 3 shuts down: it stays registered, fenced.
	c.stop(3)
	wantFenced := header + brokerRow(2, "rack-a", "unfenced") + brokerRow(3, "null", "fenced")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if out = keelOK(t, "cluster", "list-endpoints", "--bootstrap-server", bs, "--include-fenced-brokers"); out == wantFenced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker 3 stopped; list-endpoints --include-fenced-brokers printed\n%q\nwant\n%q", out, wantFenced)
		}
	}
	if out := keelOK(t, "cluster", "list-endpoints", "--bootstrap-server", bs); out != header+brokerRow(2, "rack-a", "unfenced") {
		t.Errorf("list-endpoints without --include-fenced-brokers printed\n%q; want broker 2 alone", out)
	}
}

// list-endpoints takes exactly one of --bootstrap-server and
// --bootstrap-controller, and --include-fenced-brokers with brokers only,
// with Kafka's messages.
func TestCLIClusterListEndpointsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "You must specify either --bootstrap-controller or --bootstrap-server."},
		{[]string{"--bootstrap-server", "127.0.0.1:1", "--bootstrap-controller", "127.0.0.1:2"}, "You cannot specify both --bootstrap-controller and --bootstrap-server."},
		{[]string{"--bootstrap-controller", "127.0.0.1:2", "--include-fenced-brokers"}, "The option --include-fenced-brokers is only supported with --bootstrap-server option"},
		{[]string{"--bootstrap-server", "127.0.0.1:1", "-o", "yaml"}, `--output "yaml": must be text or json`},
	} {
		out, errOut, exit := keelRun(t, append([]string{"cluster", "list-endpoints"}, tc.args...)...)
		if exit != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("list-endpoints %v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, exit, out, errOut, tc.want)
		}
	}
}
