package main

// keel broker-api-versions: kafka-broker-api-versions.sh.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/broker"
)

func brokerAPIVersionsCommand() *cli.Command {
	return &cli.Command{
		Name:  "broker-api-versions",
		Usage: "print the API versions each broker, or controller, supports (like kafka-broker-api-versions.sh)",
		Description: "Asks every broker of the cluster (as Metadata lists them) for its ApiVersions and\n" +
			"prints, for each, every API this client knows: the broker's version range and\n" +
			"[usable: N], the highest version both sides speak, or UNSUPPORTED where the\n" +
			"broker does not serve the API; [unusable: node too new] where the broker's oldest\n" +
			"version is newer than this client's newest. An API the broker serves but this\n" +
			"client does not know is UNKNOWN(key). With --bootstrap-controller the\n" +
			"controllers are asked instead, at their controller listener (as they list\n" +
			"themselves: DescribeCluster for controllers, KIP-919).\n\n" +
			"A node that does not answer gets its ERROR line, after which the others are\n" +
			"still asked, and the command exits with status 1.\n\n" +
			"Examples:\n" +
			"  keel broker-api-versions --bootstrap-server broker1:9092\n" +
			"  keel broker-api-versions --bootstrap-controller ctl1:9093\n" +
			"  keel broker-api-versions --bootstrap-server broker1:9092 --command-config admin.properties -o json\n\n" +
			"broker1:9092 (id: 1 rack: null isFenced: false) -> (\n" +
			"\tProduce(0): 0 to 13 [usable: 13],\n" +
			"\tFetch(1): 4 to 18 [usable: 18],\n" +
			"\t...\n" +
			"\tLeaderAndIsr(4): UNSUPPORTED,\n" +
			"\t...\n" +
			")",
		Flags:  endpointFlags(outputFlag()),
		Action: brokerAPIVersions,
	}
}

// nodeAPIVersions is one node's ApiVersions, or why it has none.
type nodeAPIVersions struct {
	node nodeEndpoint
	apis []kmsg.ApiVersionsResponseApiKey
	err  error
}

func brokerAPIVersions(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	controllers, err := useControllers(c)
	if err != nil {
		return err
	}
	var results []nodeAPIVersions
	if controllers {
		if results, err = controllerAPIVersions(c); err != nil {
			return err
		}
	} else if results, err = brokersAPIVersions(c); err != nil {
		return err
	}
	if asJSON {
		err = writeJSON(c.App.Writer, apiVersionsJSON(results))
	} else {
		err = printAPIVersions(c.App.Writer, results)
	}
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if r.err != nil {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d nodes did not answer ApiVersions", failed, len(results))
	}
	return nil
}

// brokersAPIVersions asks each broker Metadata lists for its ApiVersions
// through the SDK's client, which speaks every security.protocol
// --command-config may name.
func brokersAPIVersions(c *cli.Context) ([]nodeAPIVersions, error) {
	opts, err := clientOptions(c, roleAdmin, nil)
	if err != nil {
		return nil, err
	}
	ctx, cl, done, err := openClient(c, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	m, err := cl.FetchMetadata(ctx, []string{})
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var nodes []nodeEndpoint
	for _, id := range slices.Sorted(maps.Keys(m.Brokers)) {
		b := m.Brokers[id]
		n := nodeEndpoint{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != "" {
			n.Rack = &b.Rack
		}
		nodes = append(nodes, n)
	}
	return askAPIVersions(nodes, func(n nodeEndpoint) (kmsg.Response, error) {
		return cl.BrokerRequest(ctx, n.ID, kmsg.NewPtrApiVersionsRequest())
	}), nil
}

// controllerAPIVersions asks each controller --bootstrap-controller lists
// for its ApiVersions, at its controller listener.
func controllerAPIVersions(c *cli.Context) ([]nodeAPIVersions, error) {
	ctx, cancel := context.WithTimeout(c.Context, controllerTimeout)
	defer cancel()
	nodes, dial, err := describeControllers(ctx, c)
	if err != nil {
		return nil, err
	}
	return askAPIVersions(nodes, func(n nodeEndpoint) (kmsg.Response, error) {
		return broker.RequestVia(ctx, dial, net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))), kmsg.NewPtrApiVersionsRequest())
	}), nil
}

// askAPIVersions sends ApiVersions to every node at once, so that one
// that does not answer delays the others by nothing, and returns the
// answers in the order of nodes.
func askAPIVersions(nodes []nodeEndpoint, request func(nodeEndpoint) (kmsg.Response, error)) []nodeAPIVersions {
	results := make([]nodeAPIVersions, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = nodeAPIVersions{node: n}
			resp, err := request(n)
			if err != nil {
				results[i].err = err
				return
			}
			r := resp.(*kmsg.ApiVersionsResponse)
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				results[i].err = err
				return
			}
			results[i].apis = r.ApiKeys
		}()
	}
	wg.Wait()
	return results
}

// clientAPIKeys are the API keys this client knows (kmsg's), in order.
var clientAPIKeys = func() []int16 {
	var keys []int16
	for k := int16(0); k < math.MaxInt16; k++ {
		if kmsg.RequestForKey(k) != nil {
			keys = append(keys, k)
		}
	}
	return keys
}()

// apiVersion is one line of a node's list: an API this client knows or
// the node serves, with the node's range and the version both speak.
type apiVersion struct {
	Key  int16  `json:"apiKey"`
	Name string `json:"name"`
	// Supported is whether the node serves the API; the range and
	// usable version are absent where it does not.
	Supported  bool   `json:"supported"`
	MinVersion *int16 `json:"minVersion,omitempty"`
	MaxVersion *int16 `json:"maxVersion,omitempty"`
	// UsableVersion is the highest version both the node and this client
	// speak; absent where the ranges do not meet (Unusable says how) or
	// this client does not know the API.
	UsableVersion *int16 `json:"usableVersion,omitempty"`
	Unusable      string `json:"unusable,omitempty"`
}

// apiVersionList is Kafka's NodeApiVersions for a node's ApiVersions: every
// API this client knows, UNSUPPORTED where the node does not serve it, and
// every API the node serves that this client does not know, in key order.
// kmsg's oldest version of every API is 0.
func apiVersionList(served []kmsg.ApiVersionsResponseApiKey) []apiVersion {
	byKey := map[int16]apiVersion{}
	for _, k := range clientAPIKeys {
		byKey[k] = apiVersion{Key: k, Name: apiName(k)}
	}
	for _, s := range served {
		v := apiVersion{Key: s.ApiKey, Name: "UNKNOWN", Supported: true, MinVersion: &s.MinVersion, MaxVersion: &s.MaxVersion}
		if req := kmsg.RequestForKey(s.ApiKey); req != nil {
			v.Name = apiName(s.ApiKey)
			switch newest := req.MaxVersion(); {
			case newest < s.MinVersion:
				v.Unusable = "node too new"
			case s.MaxVersion < 0:
				v.Unusable = "node too old"
			default:
				usable := min(newest, s.MaxVersion)
				v.UsableVersion = &usable
			}
		}
		byKey[s.ApiKey] = v
	}
	list := make([]apiVersion, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		list = append(list, byKey[k])
	}
	return list
}

// kafkaAPINames are the APIs whose name in Kafka (ApiKeys, from its
// message definitions) is not kmsg's.
var kafkaAPINames = map[int16]string{
	4: "LeaderAndIsr", 17: "SaslHandshake", 22: "InitProducerId", 29: "DescribeAcls", 30: "CreateAcls",
	31: "DeleteAcls", 36: "SaslAuthenticate", 45: "AlterPartitionReassignments",
	50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials", 67: "AllocateProducerIds",
}

// apiName is an API's name as Kafka's tools print it.
func apiName(key int16) string {
	if name, ok := kafkaAPINames[key]; ok {
		return name
	}
	return kmsg.NameForKey(key)
}

// String is the API's entry as NodeApiVersions.toString prints it:
// "Produce(0): 3 to 13 [usable: 13]", "Fetch(1): 4 [usable: 4]",
// "LeaderAndIsr(4): UNSUPPORTED", "UNKNOWN(900): 0 to 2".
func (v apiVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%d): ", v.Name, v.Key)
	switch {
	case !v.Supported:
		b.WriteString("UNSUPPORTED")
		return b.String()
	case *v.MinVersion == *v.MaxVersion:
		fmt.Fprintf(&b, "%d", *v.MinVersion)
	default:
		fmt.Fprintf(&b, "%d to %d", *v.MinVersion, *v.MaxVersion)
	}
	switch {
	case v.UsableVersion != nil:
		fmt.Fprintf(&b, " [usable: %d]", *v.UsableVersion)
	case v.Unusable != "":
		fmt.Fprintf(&b, " [unusable: %s]", v.Unusable)
	}
	return b.String()
}

// printAPIVersions prints kafka-broker-api-versions.sh's blocks: a node,
// " -> (", an API a line, tab-indented and comma-separated, ")"; or the
// node, " -> ERROR: " and why.
func printAPIVersions(w io.Writer, results []nodeAPIVersions) error {
	for _, r := range results {
		if r.err != nil {
			if _, err := fmt.Fprintf(w, "%s -> ERROR: %v\n", r.node, r.err); err != nil {
				return err
			}
			continue
		}
		lines := make([]string, 0, len(clientAPIKeys))
		for _, v := range apiVersionList(r.apis) {
			lines = append(lines, v.String())
		}
		if _, err := fmt.Fprintf(w, "%s -> (\n\t%s\n)\n", r.node, strings.Join(lines, ",\n\t")); err != nil {
			return err
		}
	}
	return nil
}

// nodeAPIVersionsJSON is one node of broker-api-versions -o json.
type nodeAPIVersionsJSON struct {
	ID          int32        `json:"id"`
	Host        string       `json:"host"`
	Port        int32        `json:"port"`
	Rack        *string      `json:"rack"`
	IsFenced    bool         `json:"isFenced"`
	APIVersions []apiVersion `json:"apiVersions,omitempty"`
	Error       string       `json:"error,omitempty"`
}

func apiVersionsJSON(results []nodeAPIVersions) []nodeAPIVersionsJSON {
	out := make([]nodeAPIVersionsJSON, 0, len(results))
	for _, r := range results {
		n := nodeAPIVersionsJSON{ID: r.node.ID, Host: r.node.Host, Port: r.node.Port, Rack: r.node.Rack, IsFenced: r.node.Fenced}
		if r.err != nil {
			n.Error = r.err.Error()
		} else {
			n.APIVersions = apiVersionList(r.apis)
		}
		out = append(out, n)
	}
	return out
}
