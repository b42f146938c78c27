package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
)

func metadataQuorumCommand() *cli.Command {
	return &cli.Command{
		Name:  "metadata-quorum",
		Usage: "describe the Raft metadata quorum, add and remove controllers (like kafka-metadata-quorum.sh)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "bootstrap-server", Usage: "a broker's HOST:PORT"},
			&cli.StringFlag{Name: "bootstrap-controller", Usage: "a controller's HOST:PORT"},
			&cli.StringFlag{Name: "command-config", Usage: "client properties (security.protocol=SSL and ssl.*: TLS to an SSL listener); for add-controller, the new controller's server.properties"},
		},
		Subcommands: []*cli.Command{
			{
				Name:  "describe",
				Usage: "print the quorum's status (--status) or each replica's progress (--replication)",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "status"},
					&cli.BoolFlag{Name: "replication"},
					&cli.BoolFlag{Name: "human-readable", Usage: "with --replication: timestamps as durations ago"},
				},
				Action: describeQuorum,
			},
			{
				Name:  "add-controller",
				Usage: "make the controller that --command-config configures a voter of a running quorum (KIP-853)",
				Description: "The controller was formatted with keel format --no-initial-controllers and is running;\n" +
					"it joins as a non-voter, copies the metadata log and is made a voter once caught up.\n" +
					"Only for a quorum configured with controller.quorum.bootstrap.servers.\n\n" +
					"Example: keel metadata-quorum --command-config controller4.properties --bootstrap-controller ctl1:9093 add-controller",
				Action: addController,
			},
			{
				Name:  "remove-controller",
				Usage: "remove a voter from the quorum (KIP-853)",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "controller-id", Required: true, Usage: "the voter's node.id"},
					&cli.StringFlag{Name: "controller-directory-id", Usage: "accepted for kafka-metadata-quorum.sh's sake: Keel names a voter by node id"},
				},
				Action: removeController,
			},
			{
				Name:  "dump-log",
				Usage: "decode the metadata log and snapshots offline, one JSON record a line (like kafka-dump-log --cluster-metadata-decoder)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Required: true, Usage: "metadata.log.dir (or its __cluster_metadata-0 directory); the node must be stopped"},
				},
				Action: func(c *cli.Context) error {
					return raftlog.DumpLog(c.String("dir"), c.App.Writer)
				},
			},
		},
	}
}

// quorumAddr is the --bootstrap-controller or --bootstrap-server given,
// and how to dial it (TLS with --command-config's security.protocol=SSL).
// Exactly one is taken, with the messages of the argparse group
// kafka-metadata-quorum.sh and kafka-features.sh declare them in.
func quorumAddr(c *cli.Context) (string, broker.DialFunc, error) {
	addr, ctl := c.String("bootstrap-server"), c.String("bootstrap-controller")
	switch {
	case addr != "" && ctl != "":
		return "", nil, errors.New("argument --bootstrap-controller: not allowed with argument --bootstrap-server")
	case addr == "" && ctl == "":
		return "", nil, errors.New("one of the arguments --bootstrap-server --bootstrap-controller is required")
	case ctl != "":
		addr = ctl
	}
	dial, err := commandDial(c)
	return addr, dial, err
}

func describeQuorum(c *cli.Context) error {
	addr, dial, err := quorumAddr(c)
	if err != nil {
		return err
	}
	if c.Bool("status") == c.Bool("replication") {
		return fmt.Errorf("give exactly one of --status or --replication")
	}
	ctx, cancel := context.WithTimeout(c.Context, 15*time.Second)
	defer cancel()
	resp, err := broker.RequestVia(ctx, dial, addr, broker.NewDescribeQuorumRequest())
	if err != nil {
		return err
	}
	q := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(q.ErrorCode); err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	if len(q.Topics) != 1 || len(q.Topics[0].Partitions) != 1 {
		return fmt.Errorf("describe quorum: malformed response")
	}
	part := q.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	if c.Bool("status") {
		cl, err := broker.RequestVia(ctx, dial, addr, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			return err
		}
		printQuorumStatus(c.App.Writer, cl.(*kmsg.DescribeClusterResponse).ClusterID, part)
		return nil
	}
	printQuorumReplication(c.App.Writer, part, c.Bool("human-readable"), time.Now())
	return nil
}

type quorumPartition = kmsg.DescribeQuorumResponseTopicPartition
type replica = kmsg.DescribeQuorumResponseTopicPartitionReplicaState

func leaderOf(p quorumPartition) (replica, bool) {
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			return v, true
		}
	}
	return replica{}, false
}

func ids(rs []replica) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprint(r.ReplicaID)
	}
	return "[" + strings.Join(out, ",") + "]"
}

// printQuorumStatus prints kafka-metadata-quorum.sh's --status block.
func printQuorumStatus(w io.Writer, clusterID string, p quorumPartition) {
	leader, _ := leaderOf(p)
	var maxLag int64
	maxLagTime := int64(0)
	for _, v := range p.CurrentVoters {
		maxLag = max(maxLag, leader.LogEndOffset-v.LogEndOffset)
		if v.LastCaughtUpTimestamp >= 0 && leader.LastCaughtUpTimestamp >= 0 {
			maxLagTime = max(maxLagTime, leader.LastCaughtUpTimestamp-v.LastCaughtUpTimestamp)
		} else {
			maxLagTime = -1
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "ClusterId:\t%s\n", clusterID)
	fmt.Fprintf(tw, "LeaderId:\t%d\n", p.LeaderID)
	fmt.Fprintf(tw, "LeaderEpoch:\t%d\n", p.LeaderEpoch)
	fmt.Fprintf(tw, "HighWatermark:\t%d\n", p.HighWatermark)
	fmt.Fprintf(tw, "MaxFollowerLag:\t%d\n", maxLag)
	fmt.Fprintf(tw, "MaxFollowerLagTimeMs:\t%d\n", maxLagTime)
	fmt.Fprintf(tw, "CurrentVoters:\t%s\n", ids(p.CurrentVoters))
	fmt.Fprintf(tw, "CurrentObservers:\t%s\n", ids(p.Observers))
	tw.Flush()
}

// printQuorumReplication prints kafka-metadata-quorum.sh's --replication table.
func printQuorumReplication(w io.Writer, p quorumPartition, human bool, now time.Time) {
	leader, _ := leaderOf(p)
	type row struct {
		r      replica
		status string
	}
	var rows []row
	for _, v := range p.CurrentVoters {
		s := "Follower"
		if v.ReplicaID == p.LeaderID {
			s = "Leader"
		}
		rows = append(rows, row{v, s})
	}
	for _, o := range p.Observers {
		rows = append(rows, row{o, "Observer"})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		rank := map[string]int{"Leader": 0, "Follower": 1, "Observer": 2}
		if rank[rows[i].status] != rank[rows[j].status] {
			return rank[rows[i].status] < rank[rows[j].status]
		}
		return rows[i].r.ReplicaID < rows[j].r.ReplicaID
	})
	ts := func(ms int64) string {
		if ms < 0 {
			return "-1"
		}
		if human {
			return fmt.Sprintf("%d ms ago", max(0, now.UnixMilli()-ms))
		}
		return fmt.Sprint(ms)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus")
	for _, r := range rows {
		lag := leader.LogEndOffset - r.r.LogEndOffset
		if r.r.LogEndOffset < 0 {
			lag = -1
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\n", r.r.ReplicaID, r.r.LogEndOffset, lag, ts(r.r.LastFetchTimestamp), ts(r.r.LastCaughtUpTimestamp), r.status)
	}
	tw.Flush()
}

// addController sends AddRaftVoter for the controller --command-config
// describes: its node id, its controller listener's advertised endpoint
// and its cluster id (from its metadata log dir's meta.properties).
func addController(c *cli.Context) error {
	addr, dial, err := quorumAddr(c)
	if err != nil {
		return err
	}
	path := c.String("command-config")
	if path == "" {
		return fmt.Errorf("add-controller: --command-config with the new controller's server.properties is required")
	}
	cfg, err := broker.LoadConfigFile(path, nil)
	if err != nil {
		return err
	}
	if !cfg.HasRole("controller") {
		return fmt.Errorf("add-controller: %s configures no controller (process.roles=%s)", path, strings.Join(cfg.ProcessRoles, ","))
	}
	endpoint, ok := cfg.OwnControllerAddr()
	if !ok {
		return fmt.Errorf("add-controller: %s has no controller listener with a host and port", path)
	}
	host, portStr, err := net.SplitHostPort(endpoint)
	if err != nil {
		return fmt.Errorf("add-controller: controller endpoint %s: %w", endpoint, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("add-controller: controller endpoint %s: %w", endpoint, err)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID, req.TimeoutMillis = cfg.NodeID, 60_000
	if meta, err := raftlog.ReadMetaProperties(cfg.MetadataLogDir); err == nil {
		req.ClusterID, req.VoterDirectoryID = kmsg.StringPtr(meta.ClusterID), meta.DirectoryID
	}
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = cfg.ControllerListenerNames[0], host, uint16(port)
	req.Listeners = append(req.Listeners, l)
	ctx, cancel := context.WithTimeout(c.Context, 70*time.Second)
	defer cancel()
	resp, err := requestController(ctx, dial, addr, req, func(r kmsg.Response) int16 { return r.(*kmsg.AddRaftVoterResponse).ErrorCode })
	if err != nil {
		return err
	}
	r := resp.(*kmsg.AddRaftVoterResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("add controller %d: %w%s", cfg.NodeID, err, errorMessage(r.ErrorMessage))
	}
	fmt.Fprintf(c.App.Writer, "Added controller %d with endpoint %s://%s\n", cfg.NodeID, l.Name, endpoint)
	return nil
}

// removeController sends RemoveRaftVoter for --controller-id.
func removeController(c *cli.Context) error {
	addr, dial, err := quorumAddr(c)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = int32(c.Int("controller-id"))
	if d := c.String("controller-directory-id"); d != "" {
		id, err := metadata.ParseUuid(d)
		if err != nil {
			return fmt.Errorf("--controller-directory-id %s: %w", d, err)
		}
		req.VoterDirectoryID = id
	}
	ctx, cancel := context.WithTimeout(c.Context, 35*time.Second)
	defer cancel()
	resp, err := requestController(ctx, dial, addr, req, func(r kmsg.Response) int16 { return r.(*kmsg.RemoveRaftVoterResponse).ErrorCode })
	if err != nil {
		return err
	}
	r := resp.(*kmsg.RemoveRaftVoterResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("remove controller %d: %w%s", req.VoterID, err, errorMessage(r.ErrorMessage))
	}
	fmt.Fprintf(c.App.Writer, "Removed controller %d\n", req.VoterID)
	return nil
}

// requestController sends a request to the controller at addr (an
// AddRaftVoter or RemoveRaftVoter, which controllers forward to the quorum
// leader; an IncrementalAlterConfigs, which only the active controller
// takes) and, as Kafka's admin client does, sends it again while the
// answer is a retriable error (NOT_LEADER_OR_FOLLOWER while the quorum
// elects a leader: right after the controller being removed died, say) or
// the connection fails, until ctx ends. A NOT_CONTROLLER answer sends it
// next to the active controller, as the controller at addr knows it
// (DescribeQuorum). code reads a response's error code.
func requestController(ctx context.Context, dial broker.DialFunc, addr string, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, error) {
	target, backoff := addr, 100*time.Millisecond
	for {
		resp, err := broker.RequestVia(ctx, dial, target, req)
		retriable := err != nil
		if err == nil {
			kerrCode := kerr.ErrorForCode(code(resp))
			retriable = kerr.IsRetriable(kerrCode)
			if errors.Is(kerrCode, kerr.NotController) {
				if active, ok := activeController(ctx, dial, addr); ok {
					target = active
				}
			}
		}
		if !retriable {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return resp, err // the last answer: its error, or the response with its code
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func errorMessage(msg *string) string {
	if msg == nil || *msg == "" {
		return ""
	}
	return ": " + *msg
}

// activeController is the controller listener address of the quorum's
// leader, as the controller at addr knows it (DescribeQuorum).
func activeController(ctx context.Context, dial broker.DialFunc, addr string) (string, bool) {
	resp, err := broker.RequestVia(ctx, dial, addr, broker.NewDescribeQuorumRequest())
	if err != nil {
		return "", false
	}
	q := resp.(*kmsg.DescribeQuorumResponse)
	if len(q.Topics) != 1 || len(q.Topics[0].Partitions) != 1 {
		return "", false
	}
	leader := q.Topics[0].Partitions[0].LeaderID
	for _, n := range q.Nodes {
		if n.NodeID == leader && len(n.Listeners) > 0 {
			l := n.Listeners[0]
			return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), true
		}
	}
	return "", false
}
