package main

// keel cluster: kafka-cluster.sh.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/client"
)

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "print the cluster id, list the brokers' or controllers' endpoints, unregister a decommissioned broker (like kafka-cluster.sh)",
		Subcommands: []*cli.Command{
			{
				Name:   "cluster-id",
				Usage:  "print the cluster's id",
				Flags:  adminFlags(),
				Action: clusterID,
			},
			{
				Name:  "unregister",
				Usage: "remove a broker that is gone for good from the cluster's metadata",
				Description: "A broker that was shut down for good keeps its registration, and with it its\n" +
					"place in the replicas of its partitions' metadata; unregistering it removes it\n" +
					"(reassign its partitions first). A broker still running registers again.",
				Flags:  adminFlags(&cli.IntFlag{Name: "id", Aliases: []string{"i"}, Required: true, Usage: "the broker's node.id"}),
				Action: clusterUnregister,
			},
			{
				Name:  "list-endpoints",
				Usage: "list the brokers' endpoints, or with --bootstrap-controller the controllers' (KIP-919)",
				Description: "Prints kafka-cluster.sh list-endpoints' table. With --bootstrap-server: the\n" +
					"registered brokers (DescribeCluster) at the listener asked, their rack and\n" +
					"whether they are fenced (STATE); a fenced broker (stopped, or not yet caught up\n" +
					"with the metadata log) is listed only with --include-fenced-brokers, which\n" +
					"needs DescribeCluster v2 (Kafka 4.0). With --bootstrap-controller: the\n" +
					"controllers, at their controller listener, as they list themselves\n" +
					"(DescribeCluster for controllers, KIP-919). Give one of the two.\n\n" +
					"Examples:\n" +
					"  keel cluster list-endpoints --bootstrap-server broker1:9092\n" +
					"  keel cluster list-endpoints --bootstrap-server broker1:9092 --include-fenced-brokers\n" +
					"  keel cluster list-endpoints --bootstrap-controller ctl1:9093\n\n" +
					"ID         HOST      PORT       RACK       STATE      ENDPOINT_TYPE\n" +
					"1          broker1   9092       rack-a     unfenced   broker",
				Flags: endpointFlags(
					&cli.BoolFlag{Name: "include-fenced-brokers", Usage: "list fenced brokers too (only with --bootstrap-server)"},
					outputFlag()),
				Action: clusterListEndpoints,
			},
		},
	}
}

func clusterID(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	d, err := adm.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	if d.ClusterID == "" {
		fmt.Fprintln(c.App.Writer, "No cluster ID found. The Kafka version is probably too old.")
		return nil
	}
	fmt.Fprintf(c.App.Writer, "Cluster ID: %s\n", d.ClusterID)
	return nil
}

func clusterUnregister(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	id := int32(c.Int("id"))
	if err := adm.UnregisterBroker(ctx, id); err != nil {
		if errors.Is(err, client.ErrUnsupportedRequest) {
			fmt.Fprintln(c.App.Writer, "The target cluster does not support the broker unregistration API.")
			return nil
		}
		return err
	}
	fmt.Fprintf(c.App.Writer, "Broker %d is no longer registered.\n", id)
	return nil
}

// endpointFlags are the connection flags of a command that reaches the
// brokers or, with --bootstrap-controller, the controllers (KIP-919):
// exactly one of the two, as Kafka 3.7+'s tools take them. Neither has a
// default, so that giving none is an error rather than localhost.
func endpointFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "bootstrap-server", Aliases: []string{"b"}, Usage: "`HOST:PORT`[,HOST:PORT...] of brokers to bootstrap from"},
		&cli.StringFlag{Name: "bootstrap-controller", Aliases: []string{"C"}, Usage: "`HOST:PORT`[,HOST:PORT...] of controllers (their controller listener) to bootstrap from"},
		commandConfigFlag(),
	}, extra...)
}

// useControllers reports whether the command was given
// --bootstrap-controller rather than --bootstrap-server, refusing neither
// and both with the messages of Kafka's CommandLineUtils.
func useControllers(c *cli.Context) (bool, error) {
	server, controller := c.String("bootstrap-server") != "", c.String("bootstrap-controller") != ""
	switch {
	case server && controller:
		return false, errors.New("You cannot specify both --bootstrap-controller and --bootstrap-server.")
	case !server && !controller:
		return false, errors.New("You must specify either --bootstrap-controller or --bootstrap-server.")
	}
	return controller, nil
}

// nodeEndpoint is one node as Kafka's Node describes it: a broker from
// DescribeCluster or Metadata, or a controller from DescribeCluster for
// controllers (KIP-919), which are never fenced.
type nodeEndpoint struct {
	ID     int32
	Host   string
	Port   int32
	Rack   *string
	Fenced bool
}

// rack is the node's rack as Kafka's tools print it: "null" for none.
func (n nodeEndpoint) rack() string {
	if n.Rack == nil {
		return "null"
	}
	return *n.Rack
}

// String is Kafka 4's Node.toString: "host:9092 (id: 1 rack: null
// isFenced: false)".
func (n nodeEndpoint) String() string {
	return fmt.Sprintf("%s:%d (id: %d rack: %s isFenced: %t)", n.Host, n.Port, n.ID, n.rack(), n.Fenced)
}

// controllerTimeout bounds the requests a command sends straight to the
// controllers (--bootstrap-controller).
const controllerTimeout = 15 * time.Second

// describeControllers lists the controllers as the first of
// --bootstrap-controller's addresses that answers DescribeCluster for
// controllers (EndpointType 2, KIP-919) lists them, in node id order, with
// the dialer to reach them (TLS with --command-config's
// security.protocol=SSL).
func describeControllers(ctx context.Context, c *cli.Context) ([]nodeEndpoint, broker.DialFunc, error) {
	dial, err := commandDial(c)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, addr := range splitList(c.String("bootstrap-controller")) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 2
		resp, err := broker.RequestVia(ctx, dial, addr, req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r := resp.(*kmsg.DescribeClusterResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			// MISMATCHED_ENDPOINT_TYPE: a broker's listener, given as a
			// controller's.
			errs = append(errs, fmt.Errorf("the controllers, from %s: %w%s", addr, err, errorMessage(r.ErrorMessage)))
			continue
		}
		nodes := make([]nodeEndpoint, 0, len(r.Brokers))
		for _, b := range r.Brokers {
			nodes = append(nodes, nodeEndpoint{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
		}
		slices.SortFunc(nodes, func(a, b nodeEndpoint) int { return cmp.Compare(a.ID, b.ID) })
		return nodes, dial, nil
	}
	if len(errs) == 0 {
		return nil, nil, errors.New("--bootstrap-controller: no address given")
	}
	return nil, nil, errors.Join(errs...)
}

// describeBrokers lists the registered brokers as a broker answers
// DescribeCluster (KIP-700) at the listener asked, the fenced ones too
// with includeFenced; ok is false, with nothing listed, when that needs a
// DescribeCluster version the broker does not serve (v2, KIP-1073: Kafka
// 4.0). A broker without DescribeCluster (before 2.8) is answered from
// Metadata, which lists the unfenced brokers, as Kafka's admin client
// falls back.
func describeBrokers(ctx context.Context, cl *client.Client, includeFenced bool) (nodes []nodeEndpoint, ok bool, err error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 1
	req.IncludeFencedBrokers = includeFenced
	resp, err := cl.Request(ctx, req)
	switch {
	case errors.Is(err, client.ErrUnsupportedRequest) && includeFenced:
		return nil, false, nil
	case errors.Is(err, client.ErrUnsupportedRequest):
		m, err := cl.FetchMetadata(ctx, []string{})
		if err != nil {
			return nil, false, err
		}
		for _, b := range m.Brokers {
			n := nodeEndpoint{ID: b.NodeID, Host: b.Host, Port: b.Port}
			if b.Rack != "" {
				n.Rack = &b.Rack
			}
			nodes = append(nodes, n)
		}
	case err != nil:
		return nil, false, fmt.Errorf("describe cluster: %w", err)
	case includeFenced && req.GetVersion() < 2:
		return nil, false, nil
	default:
		r := resp.(*kmsg.DescribeClusterResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, false, fmt.Errorf("describe cluster: %w%s", err, errorMessage(r.ErrorMessage))
		}
		for _, b := range r.Brokers {
			nodes = append(nodes, nodeEndpoint{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Fenced: b.IsFenced})
		}
	}
	slices.SortFunc(nodes, func(a, b nodeEndpoint) int { return cmp.Compare(a.ID, b.ID) })
	return nodes, true, nil
}

// endpointJSON is one row of list-endpoints -o json.
type endpointJSON struct {
	ID           int32   `json:"id"`
	Host         string  `json:"host"`
	Port         int32   `json:"port"`
	Rack         *string `json:"rack"`
	State        string  `json:"state,omitempty"` // brokers only
	EndpointType string  `json:"endpointType"`
}

// clusterListEndpoints is kafka-cluster.sh list-endpoints (KIP-919).
func clusterListEndpoints(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	controllers, err := useControllers(c)
	if err != nil {
		return err
	}
	includeFenced := c.Bool("include-fenced-brokers")
	if includeFenced && controllers {
		return errors.New("The option --include-fenced-brokers is only supported with --bootstrap-server option")
	}
	if controllers {
		ctx, cancel := context.WithTimeout(c.Context, controllerTimeout)
		defer cancel()
		nodes, _, err := describeControllers(ctx, c)
		if err != nil {
			return err
		}
		return printEndpoints(c.App.Writer, nodes, "controller", asJSON)
	}
	opts, err := clientOptions(c, roleAdmin, nil)
	if err != nil {
		return err
	}
	ctx, cl, done, err := openClient(c, opts)
	if err != nil {
		return err
	}
	defer done()
	nodes, ok, err := describeBrokers(ctx, cl, includeFenced)
	if err != nil {
		return err
	}
	if !ok {
		// Kafka's tool prints the admin client's
		// UnsupportedVersionException and succeeds.
		fmt.Fprintln(c.App.Writer, "The broker does not support listing fenced brokers: that needs DescribeCluster v2 (Kafka 4.0 or later).")
		return nil
	}
	return printEndpoints(c.App.Writer, nodes, "broker", asJSON)
}

// printEndpoints prints ClusterTool's listEndpoints table of nodes of
// endpointType (broker or controller): the HOST column as wide as the
// longest host (100 when there is none), RACK as the longest rack (10
// when no node has one), and STATE for brokers only.
func printEndpoints(w io.Writer, nodes []nodeEndpoint, endpointType string, asJSON bool) error {
	brokers := endpointType == "broker"
	if asJSON {
		rows := make([]endpointJSON, 0, len(nodes))
		for _, n := range nodes {
			row := endpointJSON{ID: n.ID, Host: n.Host, Port: n.Port, Rack: n.Rack, EndpointType: endpointType}
			if brokers {
				row.State = fenceState(n.Fenced)
			}
			rows = append(rows, row)
		}
		return writeJSON(w, rows)
	}
	var hosts, racks []int
	for _, n := range nodes {
		hosts = append(hosts, len(n.Host))
		if n.Rack != nil {
			racks = append(racks, len(*n.Rack))
		}
	}
	hostWidth, rackWidth := widest(hosts, 100), widest(racks, 10)
	if !brokers {
		fmt.Fprintf(w, "%-10s %-*s %-10s %-*s %-15s\n", "ID", hostWidth, "HOST", "PORT", rackWidth, "RACK", "ENDPOINT_TYPE")
		for _, n := range nodes {
			fmt.Fprintf(w, "%-10d %-*s %-10d %-*s %-15s\n", n.ID, hostWidth, n.Host, n.Port, rackWidth, n.rack(), endpointType)
		}
		return nil
	}
	fmt.Fprintf(w, "%-10s %-*s %-10s %-*s %-10s %-15s\n", "ID", hostWidth, "HOST", "PORT", rackWidth, "RACK", "STATE", "ENDPOINT_TYPE")
	for _, n := range nodes {
		fmt.Fprintf(w, "%-10d %-*s %-10d %-*s %-10s %-15s\n", n.ID, hostWidth, n.Host, n.Port, rackWidth, n.rack(), fenceState(n.Fenced), endpointType)
	}
	return nil
}

// widest is the largest of lengths, or none when there are none.
func widest(lengths []int, none int) int {
	if len(lengths) == 0 {
		return none
	}
	return slices.Max(lengths)
}

// fenceState is list-endpoints' STATE of a broker.
func fenceState(fenced bool) string {
	if fenced {
		return "fenced"
	}
	return "unfenced"
}
