package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker"
)

// servedAPIVersions asks the node at addr for its ApiVersions, as the
// expectation the command's output is held to: the versions by key.
func servedAPIVersions(t *testing.T, addr string) map[int16]kmsg.ApiVersionsResponseApiKey {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := broker.RequestVia(ctx, nil, addr, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	served := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		served[k.ApiKey] = k
	}
	return served
}

// apiVersionsBlocks splits kafka-broker-api-versions.sh's output into each
// node's header ("host:port (id: ...)") and API lines, checking the
// block's frame: " -> (", a tab before each API, a comma after every one
// but the last, ")".
func apiVersionsBlocks(t *testing.T, out string) map[string][]string {
	t.Helper()
	blocks := map[string][]string{}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		node, ok := strings.CutSuffix(lines[i], " -> (")
		if !ok {
			t.Fatalf("line %q opens no node's block:\n%s", lines[i], out)
		}
		var apis []string
		for i++; i < len(lines) && lines[i] != ")"; i++ {
			api, ok := strings.CutPrefix(lines[i], "\t")
			if !ok {
				t.Fatalf("API line %q is not tab-indented", lines[i])
			}
			apis = append(apis, api)
		}
		if i == len(lines) {
			t.Fatalf("%s's block is not closed:\n%s", node, out)
		}
		for j, api := range apis {
			last := j == len(apis)-1
			if trimmed, comma := strings.CutSuffix(api, ","); comma == last {
				t.Fatalf("%s: API line %q: a comma after every API but the last", node, api)
			} else {
				apis[j] = trimmed
			}
		}
		blocks[node] = apis
	}
	return blocks
}

// wantAPIs checks a node's API lines against the ApiVersions it serves:
// every API kmsg knows is listed in key order, Produce, Fetch and
// ApiVersions with the node's ranges and the highest version both sides
// speak; and an API kmsg knows that the node does not serve is
// UNSUPPORTED.
func wantAPIs(t *testing.T, node string, apis []string, served map[int16]kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	if len(apis) != len(clientAPIKeys) {
		t.Errorf("%s: %d APIs listed, want kmsg's %d", node, len(apis), len(clientAPIKeys))
	}
	line := func(key int16) string {
		t.Helper()
		for _, a := range apis {
			if strings.HasPrefix(a, fmt.Sprintf("%s(%d): ", apiName(key), key)) {
				return a
			}
		}
		t.Fatalf("%s: no line for API %d in\n%s", node, key, strings.Join(apis, "\n"))
		return ""
	}
	unsupported := int16(-1)
	for _, key := range clientAPIKeys {
		s, ok := served[key]
		if !ok {
			if unsupported < 0 {
				unsupported = key
			}
			continue
		}
		if key != kmsg.Produce.Int16() && key != kmsg.Fetch.Int16() && key != kmsg.ApiVersions.Int16() {
			continue
		}
		usable := min(s.MaxVersion, kmsg.RequestForKey(key).MaxVersion())
		want := fmt.Sprintf("%s(%d): %d to %d [usable: %d]", apiName(key), key, s.MinVersion, s.MaxVersion, usable)
		if got := line(key); got != want {
			t.Errorf("%s: %q, want %q", node, got, want)
		}
	}
	if unsupported < 0 {
		t.Fatalf("%s serves every API kmsg knows: nothing to check UNSUPPORTED with", node)
	}
	// Kafka's names, where kmsg's differ (kafka-broker-api-versions.sh
	// prints "SaslHandshake", kmsg says "SASLHandshake").
	for key, name := range map[int16]string{4: "LeaderAndIsr", 17: "SaslHandshake", 22: "InitProducerId", 29: "DescribeAcls", 50: "DescribeUserScramCredentials"} {
		if got := line(key); !strings.HasPrefix(got, fmt.Sprintf("%s(%d): ", name, key)) {
			t.Errorf("%s: %q, want Kafka's name %s", node, got, name)
		}
	}
	if got, want := line(unsupported), fmt.Sprintf("%s(%d): UNSUPPORTED", apiName(unsupported), unsupported); got != want {
		t.Errorf("%s: %q, want %q", node, got, want)
	}
}

// kafka-broker-api-versions.sh: each broker's versions against what it
// answers ApiVersions, the controllers' with --bootstrap-controller, -o
// json; a broker that cannot be reached gets its ERROR line after the
// others and fails the command.
func TestCLIBrokerAPIVersions(t *testing.T) {
	// A broker killed stays registered and unfenced for the session's
	// 30 s: Metadata still lists it when it no longer answers.
	c := startEndpointsCluster(t, "broker.session.timeout.ms=30000")
	bs := c.brokers[2]
	out := keelOK(t, "broker-api-versions", "--bootstrap-server", bs)
	blocks := apiVersionsBlocks(t, out)
	if len(blocks) != 2 {
		t.Fatalf("%d nodes listed, want brokers 2 and 3:\n%s", len(blocks), out)
	}
	for id, rack := range map[int32]string{2: "rack-a", 3: "null"} {
		node := fmt.Sprintf("%s (id: %d rack: %s isFenced: false)", c.brokers[id], id, rack)
		apis, ok := blocks[node]
		if !ok {
			t.Fatalf("no block for %q:\n%s", node, out)
		}
		wantAPIs(t, node, apis, servedAPIVersions(t, c.brokers[id]))
	}

	out = keelOK(t, "broker-api-versions", "--bootstrap-controller", c.controller)
	blocks = apiVersionsBlocks(t, out)
	node := fmt.Sprintf("%s (id: 1 rack: null isFenced: false)", c.controller)
	if apis, ok := blocks[node]; !ok || len(blocks) != 1 {
		t.Fatalf("--bootstrap-controller: want controller 1's block alone:\n%s", out)
	} else {
		wantAPIs(t, node, apis, servedAPIVersions(t, c.controller))
	}

	type apiJSON struct {
		Key           int16  `json:"apiKey"`
		Name          string `json:"name"`
		Supported     bool   `json:"supported"`
		MinVersion    *int16 `json:"minVersion"`
		MaxVersion    *int16 `json:"maxVersion"`
		UsableVersion *int16 `json:"usableVersion"`
	}
	type nodeJSON struct {
		ID          int32     `json:"id"`
		Host        string    `json:"host"`
		Port        int32     `json:"port"`
		Rack        *string   `json:"rack"`
		IsFenced    bool      `json:"isFenced"`
		APIVersions []apiJSON `json:"apiVersions"`
		Error       string    `json:"error"`
	}
	var nodes []nodeJSON
	if err := json.Unmarshal([]byte(keelOK(t, "broker-api-versions", "--bootstrap-server", bs, "-o", "json")), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].ID != 2 || nodes[0].Rack == nil || *nodes[0].Rack != "rack-a" || nodes[1].ID != 3 || nodes[1].Rack != nil ||
		fmt.Sprintf("%s:%d", nodes[0].Host, nodes[0].Port) != bs || nodes[0].Error != "" || len(nodes[0].APIVersions) != len(clientAPIKeys) {
		t.Fatalf("-o json: %+v", nodes)
	}
	served := servedAPIVersions(t, bs)
	for _, a := range nodes[0].APIVersions {
		s, ok := served[a.Key]
		switch {
		case a.Name != apiName(a.Key) || a.Supported != ok:
			t.Errorf("-o json: %+v; broker 2 serves it: %t", a, ok)
		case !ok && (a.MinVersion != nil || a.MaxVersion != nil || a.UsableVersion != nil):
			t.Errorf("-o json: an unsupported API with versions: %+v", a)
		case ok && (a.MinVersion == nil || *a.MinVersion != s.MinVersion || *a.MaxVersion != s.MaxVersion ||
			a.UsableVersion == nil || *a.UsableVersion != min(s.MaxVersion, kmsg.RequestForKey(a.Key).MaxVersion())):
			t.Errorf("-o json: %+v; broker 2 serves %d to %d", a, s.MinVersion, s.MaxVersion)
		}
	}

	c.kill(3)
	out, errOut, exit := keelRun(t, "broker-api-versions", "--bootstrap-server", bs)
	head, errLine, found := strings.Cut(out, fmt.Sprintf("%s (id: 3 rack: null isFenced: false) -> ERROR: ", c.brokers[3]))
	if exit != 1 || !found || strings.Count(errLine, "\n") != 1 || !strings.Contains(errOut, "1 of 2 nodes did not answer ApiVersions") {
		t.Fatalf("broker 3 killed: exit %d, stdout:\n%s\nstderr:\n%s", exit, out, errOut)
	}
	if _, ok := apiVersionsBlocks(t, head)[fmt.Sprintf("%s (id: 2 rack: rack-a isFenced: false)", bs)]; !ok {
		t.Errorf("broker 3 killed: broker 2's versions are not printed:\n%s", out)
	}
}

// broker-api-versions takes exactly one of --bootstrap-server and
// --bootstrap-controller, with the messages of Kafka's CommandLineUtils.
func TestCLIBrokerAPIVersionsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "You must specify either --bootstrap-controller or --bootstrap-server."},
		{[]string{"--bootstrap-server", "127.0.0.1:1", "--bootstrap-controller", "127.0.0.1:2"}, "You cannot specify both --bootstrap-controller and --bootstrap-server."},
		{[]string{"--bootstrap-controller", "127.0.0.1:2", "-o", "xml"}, `--output "xml": must be text or json`},
	} {
		out, errOut, exit := keelRun(t, append([]string{"broker-api-versions"}, tc.args...)...)
		if exit != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("broker-api-versions %v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, exit, out, errOut, tc.want)
		}
	}
}

// A broker that cannot be reached is named once in the error, not in a
// wrapper and again in the dialer's message.
func TestCLIUnreachableBrokerNamedOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	once := filepath.Join(t.TempDir(), "once.properties")
	if err := os.WriteFile(once, []byte("retries=0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"topics", "--list", "--bootstrap-server", addr, "--command-config", once},
		{"metadata-quorum", "--bootstrap-server", addr, "describe", "--status"},
	} {
		_, errOut, exit := keelRun(t, args...)
		if exit != 1 || strings.Count(errOut, addr) != 1+strings.Count(errOut, "["+addr+"]") || !strings.Contains(errOut, "dial tcp "+addr+": connect: connection refused") {
			t.Errorf("%v: exit %d, stderr %q; want the address once in the dialer's error", args, exit, errOut)
		}
	}
}
