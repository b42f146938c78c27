package main

// keel cluster: kafka-cluster.sh.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
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
				Name:  "cluster-id",
				Usage: "print the cluster's id, as the brokers or, with --bootstrap-controller, the controllers know it",
				Description: "Prints kafka-cluster.sh cluster-id's line: the id the cluster's log dirs were\n" +
					"formatted with, as a broker answers DescribeCluster or, with\n" +
					"--bootstrap-controller, as a controller answers DescribeCluster for\n" +
					"controllers at its controller listener (KIP-919: no broker needs to be up).\n" +
					"Give --bootstrap-server or --bootstrap-controller, not both; with neither,\n" +
					"--bootstrap-server's default is asked.\n\n" +
					"Examples:\n" +
					"  keel cluster cluster-id --bootstrap-server broker1:9092\n" +
					"  keel cluster cluster-id --bootstrap-controller ctl1:9093\n\n" +
					"Cluster ID: MkU3OEVBNTcwNTJENDM2Qk",
				Flags:  serverOrControllerFlags(),
				Action: clusterID,
			},
			{
				Name:  "unregister",
				Usage: "unregister a broker that is gone for good: remove its registration from the cluster's metadata",
				Description: "A broker that was shut down for good keeps its registration, and with it its\n" +
					"place in the replicas of its partitions' metadata; unregistering it removes it\n" +
					"(reassign its partitions first). A broker still running registers again.\n\n" +
					"With --bootstrap-server a broker forwards UnregisterBroker to the active\n" +
					"controller; with --bootstrap-controller it goes to the active controller\n" +
					"straight (KIP-919: no broker needs to be up), the one DescribeCluster for\n" +
					"controllers names, or the next controller listed when that one answers\n" +
					"NOT_CONTROLLER. Give --bootstrap-server or --bootstrap-controller, not both;\n" +
					"with neither, --bootstrap-server's default is asked.\n\n" +
					"Examples:\n" +
					"  keel cluster unregister --bootstrap-server broker1:9092 --id 4\n" +
					"  keel cluster unregister --bootstrap-controller ctl1:9093 --id 4\n\n" +
					"Broker 4 is no longer registered.",
				Flags:  serverOrControllerFlags(&cli.IntFlag{Name: "id", Aliases: []string{"i"}, Required: true, Usage: "the ID of the broker to unregister (its node.id)"}),
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

// clusterID is kafka-cluster.sh cluster-id.
func clusterID(c *cli.Context) error {
	controllers, err := serverOrController(c)
	if err != nil {
		return err
	}
	var id string
	if controllers {
		ctx, cancel := context.WithTimeout(c.Context, controllerTimeout)
		defer cancel()
		cluster, _, err := describeControllerCluster(ctx, c)
		if err != nil {
			return err
		}
		id = cluster.ClusterID
	} else {
		ctx, adm, done, err := openAdmin(c)
		if err != nil {
			return err
		}
		defer done()
		d, err := adm.DescribeCluster(ctx)
		if err != nil {
			return err
		}
		id = d.ClusterID
	}
	if id == "" {
		fmt.Fprintln(c.App.Writer, "No cluster ID found. The Kafka version is probably too old.")
		return nil
	}
	fmt.Fprintf(c.App.Writer, "Cluster ID: %s\n", id)
	return nil
}

// clusterUnregister is kafka-cluster.sh unregister.
func clusterUnregister(c *cli.Context) error {
	controllers, err := serverOrController(c)
	if err != nil {
		return err
	}
	id := int32(c.Int("id"))
	if controllers {
		ctx, cancel := context.WithTimeout(c.Context, controllerTimeout)
		defer cancel()
		if err := unregisterViaControllers(ctx, c, id); err != nil {
			return fmt.Errorf("unregister broker %d: %w", id, err)
		}
		fmt.Fprintf(c.App.Writer, "Broker %d is no longer registered.\n", id)
		return nil
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
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

// unregisterViaControllers sends UnregisterBroker for id to the active
// controller, as Kafka's admin client does given bootstrap.controllers
// (KIP-919): first to the controller DescribeCluster for controllers names
// active, then to the others it lists, since a controller that is not
// active answers NOT_CONTROLLER. While none takes it (an election under
// way, the active controller restarting) it describes the controllers
// again and retries until ctx ends, as the admin client retries until its
// timeout. A controller's error is worded as the SDK words a broker's, so
// that the command fails alike either way.
func unregisterViaControllers(ctx context.Context, c *cli.Context, id int32) error {
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		cluster, dial, err := describeControllerCluster(ctx, c)
		if err != nil {
			return err
		}
		if len(cluster.Controllers) == 0 {
			return errors.New("DescribeCluster for controllers listed no controller")
		}
		var errs []error
		for _, n := range cluster.activeFirst() {
			addr := net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
			resp, err := broker.RequestVia(ctx, dial, addr, req)
			if err != nil {
				errs = append(errs, fmt.Errorf("controller %d: %w", n.ID, err))
				continue
			}
			r := resp.(*kmsg.UnregisterBrokerResponse)
			if r.ErrorCode == 0 {
				return nil
			}
			err = client.ErrorForCode(r.ErrorCode)
			var kafkaErr *client.Error
			if errors.As(err, &kafkaErr) && r.ErrorMessage != nil && *r.ErrorMessage != "" {
				kafkaErr.Message = *r.ErrorMessage
			}
			if !client.IsRetriable(err) {
				return err
			}
			errs = append(errs, fmt.Errorf("controller %d at %s: %w", n.ID, addr, err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no controller took it before the deadline: %w", errors.Join(errs...))
		case <-time.After(backoff):
		}
	}
}

// serverOrControllerFlags are endpointFlags for a command that had only
// --bootstrap-server before it took --bootstrap-controller too: the
// server's default (localhost:9092, or $KEEL_BOOTSTRAP_SERVER) stays for
// when neither is given, so that scripts written for it work on.
// serverOrController reads the variable: urfave/cli counts a flag its
// variable sets as given, and --bootstrap-controller with the variable
// exported is no conflict.
func serverOrControllerFlags(extra ...cli.Flag) []cli.Flag {
	server := bootstrapFlag().(*cli.StringFlag)
	server.Usage = "`HOST:PORT`[,HOST:PORT...] of brokers to bootstrap from (Kafka's bootstrap.servers); $KEEL_BOOTSTRAP_SERVER when set"
	server.EnvVars = nil
	flags := endpointFlags(extra...)
	flags[0] = server
	return flags
}

// serverOrController is useControllers for serverOrControllerFlags: both
// flags given is refused with Kafka's message, but neither is
// --bootstrap-server's default, taken from $KEEL_BOOTSTRAP_SERVER when it
// is set (as bootstrapFlag's EnvVars would).
func serverOrController(c *cli.Context) (bool, error) {
	server, controller := c.IsSet("bootstrap-server"), c.String("bootstrap-controller") != ""
	switch {
	case server && controller:
		return false, errors.New("You cannot specify both --bootstrap-controller and --bootstrap-server.")
	case controller:
		return true, nil
	case !server:
		for _, name := range bootstrapFlag().(*cli.StringFlag).EnvVars {
			if v, ok := os.LookupEnv(name); ok {
				if err := c.Set("bootstrap-server", v); err != nil {
					return false, err
				}
				break
			}
		}
	}
	return false, nil
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

// controllerCluster is the cluster as a controller describes it to a
// client bootstrapping from the controllers (DescribeCluster for
// controllers, KIP-919).
type controllerCluster struct {
	ClusterID string
	// ActiveID is the active controller's node id as the controller asked
	// knows it; -1 when it knows of none (an election under way).
	ActiveID    int32
	Controllers []nodeEndpoint // in node id order
}

// activeFirst is the controllers in the order to send a request only the
// active controller takes: the active one, then the others by node id.
func (cl controllerCluster) activeFirst() []nodeEndpoint {
	nodes := slices.Clone(cl.Controllers)
	if i := slices.IndexFunc(nodes, func(n nodeEndpoint) bool { return n.ID == cl.ActiveID }); i > 0 {
		active := nodes[i]
		nodes = slices.Insert(slices.Delete(nodes, i, i+1), 0, active)
	}
	return nodes
}

// describeControllers lists the controllers as describeControllerCluster
// finds them, with the dialer to reach them.
func describeControllers(ctx context.Context, c *cli.Context) ([]nodeEndpoint, broker.DialFunc, error) {
	cluster, dial, err := describeControllerCluster(ctx, c)
	return cluster.Controllers, dial, err
}

// describeControllerCluster is the cluster as the first of
// --bootstrap-controller's addresses that answers DescribeCluster for
// controllers (EndpointType 2, KIP-919) describes it, with the dialer to
// reach the controllers (TLS with --command-config's
// security.protocol=SSL).
func describeControllerCluster(ctx context.Context, c *cli.Context) (controllerCluster, broker.DialFunc, error) {
	dial, err := commandDial(c)
	if err != nil {
		return controllerCluster{}, nil, err
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
		cluster := controllerCluster{ClusterID: r.ClusterID, ActiveID: r.ControllerID, Controllers: make([]nodeEndpoint, 0, len(r.Brokers))}
		for _, b := range r.Brokers {
			cluster.Controllers = append(cluster.Controllers, nodeEndpoint{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
		}
		slices.SortFunc(cluster.Controllers, func(a, b nodeEndpoint) int { return cmp.Compare(a.ID, b.ID) })
		return cluster, dial, nil
	}
	if len(errs) == 0 {
		return controllerCluster{}, nil, errors.New("--bootstrap-controller: no address given")
	}
	return controllerCluster{}, nil, errors.Join(errs...)
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
