package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// groupsCommand is `keel groups`, kafka-consumer-groups.sh.
func groupsCommand() *cli.Command {
	return &cli.Command{
		Name:  "groups",
		Usage: "list, describe, delete consumer groups and reset or delete their offsets (like kafka-consumer-groups.sh)",
		Description: "Each action is a subcommand; kafka-consumer-groups.sh's flag form works too:\n" +
			"keel groups --describe --group billing runs keel groups describe --group billing.",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list consumer groups",
				Description: "Like kafka-consumer-groups.sh --list: --state adds the STATE column and --type the\n" +
					"TYPE column (classic or consumer, KIP-848); as in Kafka, each may be followed by a\n" +
					"comma-separated list of the states (Stable, Empty, PreparingRebalance,\n" +
					"CompletingRebalance, Assigning, Reconciling, Dead) or types to list only those.\n\n" +
					"Examples:\n" +
					"  keel groups list\n" +
					"  keel groups list --state Stable,Empty\n" +
					"  keel groups --list --type consumer --state\n" +
					"  keel groups list --state -o json",
				Flags: adminFlags(&cli.BoolFlag{Name: "state", Usage: "show each group's state; followed by STATE[,STATE...]: only groups in those"},
					&cli.BoolFlag{Name: "type", Usage: "show each group's type; followed by TYPE[,TYPE...]: only groups of those"},
					&cli.StringFlag{Name: "state-in", Hidden: true}, &cli.StringFlag{Name: "type-in", Hidden: true}, outputFlag()),
				Action: groupsList,
			},
			{
				Name:  "describe",
				Usage: "describe groups: per partition committed offset, log end offset, lag and owner",
				Description: "Like kafka-consumer-groups.sh --describe. The default view prints\n" +
					"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID\n" +
					"(\"-\" where unknown); --members and --state print Kafka's other two views:\n" +
					"GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS, and\n" +
					"GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS.\n" +
					"--verbose adds, as Kafka 4 does (KIP-1099): LEADER-EPOCH of the committed\n" +
					"offsets; each member's CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH\n" +
					"TARGET-ASSIGNMENT, and UPGRADED (true for a member of the consumer protocol)\n" +
					"in a group with members of both protocols; the GROUP-EPOCH and\n" +
					"TARGET-ASSIGNMENT-EPOCH of a consumer-protocol group (KIP-848).\n" +
					"-o json prints one array of groups; unknown numbers are -1, unknown strings \"\".\n" +
					"A group that does not exist is an error (GROUP_ID_NOT_FOUND, exit 1).\n\n" +
					"Examples:\n" +
					"  keel groups describe --group billing\n" +
					"  keel groups describe --all-groups --members --verbose\n" +
					"  keel groups describe --group billing -o json",
				Flags: adminFlags(
					&cli.StringSliceFlag{Name: "group", Usage: "group to describe (repeatable)"},
					&cli.BoolFlag{Name: "all-groups", Usage: "describe every group"},
					&cli.BoolFlag{Name: "members", Usage: "print the members view"},
					&cli.BoolFlag{Name: "state", Usage: "print the state view"},
					&cli.BoolFlag{Name: "verbose", Usage: "print the epochs and assignments too (KIP-1099)"},
					outputFlag(),
				),
				Action: groupsDescribe,
			},
			{
				Name:  "delete",
				Usage: "delete empty groups and their committed offsets",
				Description: "Like kafka-consumer-groups.sh --delete. A group with members fails with\n" +
					"NON_EMPTY_GROUP.\n\n" +
					"Examples:\n" +
					"  keel groups delete --group billing",
				Flags: adminFlags(
					&cli.StringSliceFlag{Name: "group", Usage: "group to delete (repeatable)"},
					&cli.BoolFlag{Name: "all-groups", Usage: "delete every group"},
				),
				Action: groupsDelete,
			},
			{
				Name:  "reset-offsets",
				Usage: "move an inactive group's committed offsets",
				Description: "Like kafka-consumer-groups.sh --reset-offsets: without --execute it is a dry run\n" +
					"that prints the new offsets (GROUP TOPIC PARTITION NEW-OFFSET). The group must\n" +
					"have no active members. Offsets outside [log start, log end] are clamped to it.\n" +
					"--topic takes TOPIC or TOPIC:P1,P2; --all-topics means every topic the group\n" +
					"has committed offsets for.\n\n" +
					"Examples:\n" +
					"  keel groups reset-offsets --group billing --topic orders --to-earliest            # dry run\n" +
					"  keel groups reset-offsets --group billing --topic orders --to-earliest --execute\n" +
					"  keel groups reset-offsets --group billing --all-topics --to-datetime 2026-11-29T12:00:00.000 --execute\n" +
					"  keel groups reset-offsets --group billing --topic orders:0 --shift-by -10 --execute\n" +
					"  keel groups reset-offsets --group billing --all-topics --by-duration PT1H --export > plan.csv\n" +
					"  keel groups reset-offsets --group billing --from-file plan.csv --execute",
				Flags: adminFlags(
					&cli.StringFlag{Name: "group", Required: true},
					&cli.StringSliceFlag{Name: "topic", Usage: "TOPIC or TOPIC:P1,P2 (repeatable)"},
					&cli.BoolFlag{Name: "all-topics", Usage: "every topic the group has offsets for"},
					&cli.BoolFlag{Name: "to-earliest", Usage: "reset to the log start offset"},
					&cli.BoolFlag{Name: "to-latest", Usage: "reset to the log end offset"},
					&cli.BoolFlag{Name: "to-current", Usage: "reset to the current committed offset"},
					&cli.StringFlag{Name: "to-offset", Usage: "reset to this offset"},
					&cli.StringFlag{Name: "shift-by", Usage: "move the committed offset by this many (may be negative)"},
					&cli.StringFlag{Name: "to-datetime", Usage: "reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss (or Unix ms)"},
					&cli.StringFlag{Name: "by-duration", Usage: "reset to the first offset at or after this long ago, as Java's Duration: PnDTnHnMnS (P1DT2H, PT30M)"},
					&cli.StringFlag{Name: "from-file", Usage: "reset to the offsets of a CSV `FILE` of topic,partition,offset lines (--export's output)"},
					&cli.BoolFlag{Name: "export", Usage: "print the new offsets as CSV, topic,partition,offset, for --from-file"},
					&cli.BoolFlag{Name: "dry-run", Usage: "only print the new offsets (the default)"},
					&cli.BoolFlag{Name: "execute", Usage: "commit the new offsets"},
					outputFlag(),
				),
				Action: groupsResetOffsets,
			},
			{
				Name:  "delete-offsets",
				Usage: "delete a group's committed offsets for topics or partitions",
				Description: "Like kafka-consumer-groups.sh --delete-offsets: prints TOPIC PARTITION STATUS per\n" +
					"partition. A group with members keeps the offsets of topics it is subscribed to\n" +
					"(GROUP_SUBSCRIBED_TO_TOPIC). --topic takes TOPIC (every partition) or TOPIC:P1,P2.\n\n" +
					"Examples:\n" +
					"  keel groups delete-offsets --group billing --topic orders\n" +
					"  keel groups delete-offsets --group billing --topic orders:0,1",
				Flags: adminFlags(
					&cli.StringFlag{Name: "group", Required: true},
					&cli.StringSliceFlag{Name: "topic", Required: true, Usage: "TOPIC or TOPIC:P1,P2 (repeatable)"},
				),
				Action: groupsDeleteOffsets,
			},
		},
	}
}

// groupListJSON is one group of `groups list -o json`.
type groupListJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	Type         string `json:"type"`
	ProtocolType string `json:"protocolType"`
	Coordinator  int32  `json:"coordinator"`
}

func groupsList(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	states, err := listFilter("state", c.String("state-in"), groupStates)
	if err != nil {
		return err
	}
	types, err := listFilter("type", c.String("type-in"), groupTypes)
	if err != nil {
		return err
	}
	all, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	var groups []client.ListedGroup
	for _, g := range all {
		if (states == nil || states[strings.ToLower(g.State)]) && (types == nil || types[strings.ToLower(g.Type)]) {
			groups = append(groups, g)
		}
	}
	if asJSON {
		out := []groupListJSON{}
		for _, g := range groups {
			out = append(out, groupListJSON{g.Group, g.State, g.Type, g.ProtocolType, g.Coordinator})
		}
		return writeJSON(c.App.Writer, out)
	}
	withType, withState := c.Bool("type"), c.Bool("state")
	if !withType && !withState {
		for _, g := range groups {
			fmt.Fprintln(c.App.Writer, g.Group)
		}
		return nil
	}
	// Kafka's printGroupInfo: the group column 10 wider than the longest
	// name (15 at least), the others 20.
	width := 15
	for _, g := range groups {
		width = max(width, len(g.Group))
	}
	row := func(group, typ, state string) {
		line := fmt.Sprintf("%-*s", width+10, group)
		if withType {
			line += fmt.Sprintf(" %-20s", typ)
		}
		if withState {
			line += fmt.Sprintf(" %-20s", state)
		}
		fmt.Fprintln(c.App.Writer, line)
	}
	row("GROUP", "TYPE", "STATE")
	for _, g := range groups {
		row(g.Group, cmp.Or(displayGroupType[g.Type], "Unknown"), cmp.Or(g.State, "Unknown"))
	}
	return nil
}

// groupStates and groupTypes are the values --state and --type filter on,
// as Kafka names them; a list matches them in any case, as Kafka's does.
var (
	groupStates = []string{"Unknown", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"}
	groupTypes  = []string{"Classic", "Consumer"}
	// displayGroupType is how Kafka's GroupType prints a ListGroups type.
	displayGroupType = map[string]string{"classic": "Classic", "consumer": "Consumer"}
)

// listFilter parses a comma-separated --state or --type list, as Kafka's
// consumerGroupStatesFromString does; nil when v is empty (no filter).
func listFilter(flag, v string, valid []string) (map[string]bool, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	out := map[string]bool{}
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		i := slices.IndexFunc(valid, func(x string) bool { return strings.EqualFold(x, s) })
		if i < 0 {
			return nil, fmt.Errorf("invalid %s list '%s'. Valid %ss are: %s", flag, v, flag, strings.Join(valid, ", "))
		}
		out[strings.ToLower(valid[i])] = true
	}
	return out, nil
}

// groupNames returns --group, or every group with --all-groups.
func groupNames(ctx context.Context, c *cli.Context, adm *client.Admin) ([]string, error) {
	names := c.StringSlice("group")
	if c.Bool("all-groups") {
		if len(names) > 0 {
			return nil, fmt.Errorf("--group and --all-groups are exclusive")
		}
		groups, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			names = append(names, g.Group)
		}
		return names, nil
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("give --group or --all-groups")
	}
	return names, nil
}

// groupDescribeJSON is one group of `groups describe -o json`.
type groupDescribeJSON struct {
	Group                 string             `json:"group"`
	State                 string             `json:"state"`
	Protocol              string             `json:"assignmentStrategy"`
	Coordinator           int32              `json:"coordinator"`
	GroupEpoch            int32              `json:"groupEpoch"`
	TargetAssignmentEpoch int32              `json:"targetAssignmentEpoch"`
	Members               []memberJSON       `json:"members"`
	Partitions            []partitionLagJSON `json:"partitions"`
}

type memberJSON struct {
	ConsumerID       string                  `json:"consumerId"`
	InstanceID       string                  `json:"groupInstanceId"`
	Host             string                  `json:"host"`
	ClientID         string                  `json:"clientId"`
	Assignment       []client.TopicPartition `json:"assignment"`
	MemberEpoch      int32                   `json:"memberEpoch"`
	TargetAssignment []client.TopicPartition `json:"targetAssignment"`
	MemberType       string                  `json:"memberType"` // "classic", "consumer", or "" in a classic group
}

type partitionLagJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	LeaderEpoch   int32  `json:"leaderEpoch"`
	CurrentOffset int64  `json:"currentOffset"`
	LogEndOffset  int64  `json:"logEndOffset"`
	Lag           int64  `json:"lag"`
	ConsumerID    string `json:"consumerId"`
	Host          string `json:"host"`
	ClientID      string `json:"clientId"`
	Error         string `json:"error,omitempty"`
}

// describedGroup is what describe prints for one group.
type describedGroup struct {
	desc client.GroupDescription
	lag  []client.PartitionLag
}

// describeGroup describes one group and its lag, failing with
// GROUP_ID_NOT_FOUND for a group that does not exist (Dead, nothing
// committed), as kafka-consumer-groups.sh does.
func describeGroup(ctx context.Context, adm *client.Admin, group string) (describedGroup, error) {
	descs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return describedGroup{}, err
	}
	d := descs[0]
	if d.Err != nil && !errors.Is(d.Err, client.ErrGroupIDNotFound) {
		return describedGroup{}, fmt.Errorf("describe group %s: %w", group, d.Err)
	}
	lag, err := adm.GroupLag(ctx, group)
	if err != nil {
		return describedGroup{}, err
	}
	if (d.Err != nil || d.State == "Dead" || d.State == "") && len(lag) == 0 && len(d.Members) == 0 {
		return describedGroup{}, fmt.Errorf("consumer group '%s' does not exist: %w", group, client.ErrGroupIDNotFound)
	}
	if d.Err != nil {
		d.State = "Dead"
	}
	return describedGroup{d, lag}, nil
}

func dash[T comparable](v T, unknown T) string {
	if v == unknown {
		return "-"
	}
	return fmt.Sprint(v)
}

func groupsDescribe(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	if c.Bool("members") && c.Bool("state") {
		return fmt.Errorf("--members and --state are exclusive")
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	names, err := groupNames(ctx, c, adm)
	if err != nil {
		return err
	}
	var groups []describedGroup
	for _, g := range names {
		dg, err := describeGroup(ctx, adm, g)
		if err != nil {
			return err
		}
		groups = append(groups, dg)
	}
	if asJSON {
		out := []groupDescribeJSON{}
		for _, dg := range groups {
			gj := groupDescribeJSON{Group: dg.desc.Group, State: dg.desc.State, Protocol: dg.desc.Protocol, Coordinator: dg.desc.Coordinator,
				GroupEpoch: dg.desc.GroupEpoch, TargetAssignmentEpoch: dg.desc.TargetAssignmentEpoch,
				Members: []memberJSON{}, Partitions: []partitionLagJSON{}}
			for _, m := range dg.desc.Members {
				gj.Members = append(gj.Members, memberJSON{ConsumerID: m.MemberID, InstanceID: m.InstanceID, Host: m.ClientHost, ClientID: m.ClientID,
					Assignment: orEmpty(m.Assigned), MemberEpoch: m.MemberEpoch, TargetAssignment: orEmpty(m.TargetAssigned), MemberType: memberTypeName(m.Type)})
			}
			for _, l := range dg.lag {
				pj := partitionLagJSON{Topic: l.Topic, Partition: l.Partition, LeaderEpoch: l.LeaderEpoch, CurrentOffset: l.CurrentOffset, LogEndOffset: l.LogEndOffset,
					Lag: l.Lag, ConsumerID: l.MemberID, Host: l.Host, ClientID: l.ClientID}
				if l.Err != nil {
					pj.Error = l.Err.Error()
				}
				gj.Partitions = append(gj.Partitions, pj)
			}
			out = append(out, gj)
		}
		return writeJSON(c.App.Writer, out)
	}
	verbose := c.Bool("verbose")
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	meta := adm.Client().Metadata()
	for i, dg := range groups {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		d := dg.desc
		switch {
		case d.State == "PreparingRebalance" || d.State == "CompletingRebalance":
			fmt.Fprintf(c.App.ErrWriter, "Warning: Consumer group '%s' is rebalancing.\n", d.Group)
		case len(d.Members) == 0 && !c.Bool("state"):
			fmt.Fprintf(c.App.ErrWriter, "Consumer group '%s' has no active members.\n", d.Group)
		}
		switch {
		case c.Bool("state"):
			coord := fmt.Sprintf("(%d)", d.Coordinator)
			if b, ok := meta.Brokers[d.Coordinator]; ok {
				coord = b.Addr() + " " + coord
			}
			if verbose {
				fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\tGROUP-EPOCH\tTARGET-ASSIGNMENT-EPOCH\t#MEMBERS")
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", d.Group, coord, dash(d.Protocol, ""), d.State,
					dash(d.GroupEpoch, -1), dash(d.TargetAssignmentEpoch, -1), len(d.Members))
				break
			}
			fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\t#MEMBERS")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", d.Group, coord, dash(d.Protocol, ""), d.State, len(d.Members))
		case c.Bool("members"):
			printMembers(tw, d, verbose)
		default:
			epochCol := ""
			if verbose {
				epochCol = "LEADER-EPOCH\t"
			}
			fmt.Fprintf(tw, "GROUP\tTOPIC\tPARTITION\t%sCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID\n", epochCol)
			for _, l := range dg.lag {
				epoch := ""
				if verbose {
					epoch = dash(l.LeaderEpoch, -1) + "\t"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s%s\t%s\t%s\t%s\t%s\t%s\n", d.Group, l.Topic, l.Partition, epoch,
					dash(l.CurrentOffset, -1), dash(l.LogEndOffset, -1), dash(l.Lag, -1),
					dash(l.MemberID, ""), dash(l.Host, ""), dash(l.ClientID, ""))
			}
		}
	}
	return tw.Flush()
}

// printMembers is kafka-consumer-groups.sh --describe --members: a
// GROUP-INSTANCE-ID column when a member has one; with verbose, each
// member's epochs and assignments (KIP-1099), and UPGRADED (whether it
// speaks the consumer protocol) when the group has members of both.
func printMembers(tw *tabwriter.Writer, d client.GroupDescription, verbose bool) {
	withInstance, classic, consumer := false, false, false
	for _, m := range d.Members {
		withInstance = withInstance || m.InstanceID != ""
		classic = classic || m.Type == client.MemberTypeClassic
		consumer = consumer || m.Type == client.MemberTypeConsumer
	}
	cols := []string{"GROUP", "CONSUMER-ID"}
	if withInstance {
		cols = append(cols, "GROUP-INSTANCE-ID")
	}
	cols = append(cols, "HOST", "CLIENT-ID", "#PARTITIONS")
	if verbose {
		cols = append(cols, "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT")
		if classic && consumer {
			cols = append(cols, "UPGRADED")
		}
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, m := range d.Members {
		row := []string{d.Group, m.MemberID}
		if withInstance {
			row = append(row, dash(m.InstanceID, ""))
		}
		row = append(row, m.ClientHost, m.ClientID, strconv.Itoa(len(m.Assigned)))
		if verbose {
			row = append(row, dash(m.MemberEpoch, -1), assignmentString(m.Assigned), dash(d.TargetAssignmentEpoch, -1), assignmentString(m.TargetAssigned))
			if classic && consumer {
				row = append(row, dash(memberTypeUpgraded(m.Type), ""))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
}

// assignmentString is Kafka's form of an assignment in the members view:
// "topic:0,1;other:3", topics and partitions sorted; "-" when empty.
func assignmentString(tps []client.TopicPartition) string {
	if len(tps) == 0 {
		return "-"
	}
	byTopic := map[string][]int32{}
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		ps := byTopic[t]
		slices.Sort(ps)
		nums := make([]string, len(ps))
		for i, p := range ps {
			nums[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t+":"+strings.Join(nums, ","))
	}
	return strings.Join(parts, ";")
}

// memberTypeUpgraded is the UPGRADED column: whether a member of a
// consumer-protocol group speaks that protocol ("" when unknown).
func memberTypeUpgraded(t client.MemberType) string {
	if name := memberTypeName(t); name != "" {
		return strconv.FormatBool(name == "consumer")
	}
	return ""
}

// memberTypeName is a member's protocol in -o json.
func memberTypeName(t client.MemberType) string {
	switch t {
	case client.MemberTypeClassic:
		return "classic"
	case client.MemberTypeConsumer:
		return "consumer"
	}
	return ""
}

// orEmpty is tps, or an empty list for JSON's [] instead of null.
func orEmpty(tps []client.TopicPartition) []client.TopicPartition {
	if tps == nil {
		return []client.TopicPartition{}
	}
	return tps
}

func groupsDelete(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	names, err := groupNames(ctx, c, adm)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return nil
	}
	res, err := adm.DeleteGroups(ctx, names...)
	if err != nil {
		return err
	}
	var ok, failed []string
	for _, g := range names {
		if gerr, seen := res[g]; seen && gerr != nil {
			failed = append(failed, fmt.Sprintf("* Group '%s' could not be deleted due to: %v", g, gerr))
			continue
		}
		ok = append(ok, "'"+g+"'")
	}
	if len(ok) > 0 {
		fmt.Fprintf(c.App.Writer, "Deletion of requested consumer groups (%s) was successful.\n", strings.Join(ok, ", "))
	}
	if len(failed) > 0 {
		return fmt.Errorf("deletion of some consumer groups failed:\n%s", strings.Join(failed, "\n"))
	}
	return nil
}

func groupsDeleteOffsets(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	parts, err := resetPartitions(ctx, c, adm, nil)
	if err != nil {
		return err
	}
	group := c.String("group")
	res, err := adm.DeleteOffsets(ctx, group, parts...)
	if err != nil {
		return err
	}
	var topics []string
	for _, tp := range parts {
		if len(topics) == 0 || topics[len(topics)-1] != tp.Topic {
			topics = append(topics, tp.Topic)
		}
	}
	w := c.App.Writer
	fmt.Fprintf(w, "Request succeed for deleting offsets with topic %s group %s\n\n", strings.Join(topics, ", "), group)
	fmt.Fprintf(w, "%-30s %-15s %-15s\n", "TOPIC", "PARTITION", "STATUS")
	var failed int
	for _, tp := range parts {
		status := "Successful"
		if perr, ok := res[tp]; !ok {
			status, failed = "Error: no answer for this partition", failed+1
		} else if perr != nil {
			status, failed = "Error: "+perr.Error(), failed+1
		}
		fmt.Fprintf(w, "%-30s %-15d %-15s\n", tp.Topic, tp.Partition, status)
	}
	if failed > 0 {
		return fmt.Errorf("the offsets of %d partition(s) were not deleted", failed)
	}
	return nil
}

// resetSpec is the one --to-* / --shift-by option reset-offsets was given.
type resetSpec struct {
	name  string
	value int64
}

func parseResetSpec(c *cli.Context) (resetSpec, error) {
	var specs []resetSpec
	for _, b := range []string{"to-earliest", "to-latest", "to-current"} {
		if c.Bool(b) {
			specs = append(specs, resetSpec{name: b})
		}
	}
	for _, n := range []string{"to-offset", "shift-by"} {
		if c.IsSet(n) {
			v, err := strconv.ParseInt(c.String(n), 10, 64)
			if err != nil || (n == "to-offset" && v < 0) {
				return resetSpec{}, fmt.Errorf("--%s %q: must be a%s integer", n, c.String(n), map[bool]string{true: " non-negative", false: "n"}[n == "to-offset"])
			}
			specs = append(specs, resetSpec{n, v})
		}
	}
	if c.IsSet("to-datetime") {
		ts, err := parseTimestamp(c.String("to-datetime"))
		if err != nil {
			return resetSpec{}, fmt.Errorf("--to-datetime: %w", err)
		}
		specs = append(specs, resetSpec{"to-datetime", ts})
	}
	if c.IsSet("by-duration") {
		d, err := parseJavaDuration(c.String("by-duration"))
		if err != nil {
			return resetSpec{}, fmt.Errorf("--by-duration: %w", err)
		}
		// A time, as --to-datetime: the first offset at or after it.
		specs = append(specs, resetSpec{"to-datetime", time.Now().Add(-d).UnixMilli()})
	}
	if c.IsSet("from-file") {
		specs = append(specs, resetSpec{name: "from-file"})
	}
	if len(specs) != 1 {
		return resetSpec{}, fmt.Errorf("give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime, --by-duration, --from-file")
	}
	return specs[0], nil
}

// resetPartitions resolves --topic / --all-topics to partitions.
func resetPartitions(ctx context.Context, c *cli.Context, adm *client.Admin, committed map[client.TopicPartition]client.CommittedOffset) ([]client.TopicPartition, error) {
	topics := c.StringSlice("topic")
	if c.Bool("all-topics") == (len(topics) > 0) {
		return nil, fmt.Errorf("give exactly one of --topic or --all-topics")
	}
	var out []client.TopicPartition
	if c.Bool("all-topics") {
		for tp := range committed {
			out = append(out, tp)
		}
	}
	for _, spec := range topics {
		name, list, hasList := strings.Cut(spec, ":")
		tms, err := adm.DescribeTopics(ctx, name)
		if err != nil {
			return nil, err
		}
		if tms[0].Err != nil {
			return nil, fmt.Errorf("topic %s: %w", name, tms[0].Err)
		}
		if !hasList {
			for _, p := range tms[0].Partitions {
				out = append(out, client.TopicPartition{Topic: name, Partition: p.Partition})
			}
			continue
		}
		for _, ps := range splitList(list) {
			p, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || p < 0 || int(p) >= len(tms[0].Partitions) {
				return nil, fmt.Errorf("--topic %s: partition %q does not exist (the topic has %d): %w", spec, ps, len(tms[0].Partitions), client.ErrUnknownTopicOrPartition)
			}
			out = append(out, client.TopicPartition{Topic: name, Partition: int32(p)})
		}
	}
	slices.SortFunc(out, compareTPs)
	return out, nil
}

// resetJSON is one row of `reset-offsets -o json`.
type resetJSON struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	NewOffset int64  `json:"newOffset"`
}

func groupsResetOffsets(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	group := c.String("group")
	spec, err := parseResetSpec(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") && c.Bool("execute") {
		return fmt.Errorf("--dry-run and --execute are exclusive")
	}
	if !c.Bool("dry-run") && !c.Bool("execute") {
		fmt.Fprintln(c.App.ErrWriter, "WARN: No action will be performed as the --execute option is missing (add --dry-run to keep this behaviour explicitly).")
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	descs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	if d := descs[0]; d.Err == nil && d.State != "Empty" && d.State != "Dead" && d.State != "" {
		return fmt.Errorf("assignments can only be reset if the group '%s' is inactive, but the current state is %s", group, d.State)
	} else if d.Err != nil && !errors.Is(d.Err, client.ErrGroupIDNotFound) {
		return fmt.Errorf("describe group %s: %w", group, d.Err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	var fromFile map[client.TopicPartition]int64
	var tps []client.TopicPartition
	if spec.name == "from-file" {
		if fromFile, err = readResetFile(c.String("from-file"), group); err != nil {
			return err
		}
		tps = sortedTPs(fromFile)
	} else if tps, err = resetPartitions(ctx, c, adm, committed); err != nil {
		return err
	}
	if len(tps) == 0 {
		return fmt.Errorf("group %s has no committed offsets to reset (name the topics with --topic)", group)
	}
	list := func(ts int64) (map[client.TopicPartition]int64, error) {
		listed, err := adm.ListPartitionOffsets(ctx, ts, tps...)
		if err != nil {
			return nil, err
		}
		out := map[client.TopicPartition]int64{}
		for _, tp := range tps {
			lo, ok := listed[tp]
			if !ok {
				return nil, fmt.Errorf("list offsets of %s-%d: no answer", tp.Topic, tp.Partition)
			}
			if lo.Err != nil {
				return nil, fmt.Errorf("list offsets of %s-%d: %w", tp.Topic, tp.Partition, lo.Err)
			}
			out[tp] = lo.Offset
		}
		return out, nil
	}
	earliest, err := list(client.EarliestOffset)
	if err != nil {
		return err
	}
	latest, err := list(client.LatestOffset)
	if err != nil {
		return err
	}
	var atTime map[client.TopicPartition]int64
	if spec.name == "to-datetime" {
		if atTime, err = list(spec.value); err != nil {
			return err
		}
	}
	clamp := func(tp client.TopicPartition, o int64) int64 {
		return max(earliest[tp], min(o, latest[tp]))
	}
	current := func(tp client.TopicPartition) int64 {
		if co, ok := committed[tp]; ok && co.Err == nil && co.Offset >= 0 {
			return co.Offset
		}
		return latest[tp] // Kafka's tool falls back on the log end
	}
	newOffsets := map[client.TopicPartition]int64{}
	var rows []resetJSON
	for _, tp := range tps {
		var o int64
		switch spec.name {
		case "to-earliest":
			o = earliest[tp]
		case "to-latest":
			o = latest[tp]
		case "to-current":
			o = current(tp)
		case "to-offset":
			o = clamp(tp, spec.value)
		case "shift-by":
			o = clamp(tp, current(tp)+spec.value)
		case "to-datetime":
			o = atTime[tp]
			if o < 0 {
				o = latest[tp]
			}
		case "from-file":
			o = clamp(tp, fromFile[tp])
		}
		newOffsets[tp] = o
		rows = append(rows, resetJSON{group, tp.Topic, tp.Partition, o})
	}
	if c.Bool("execute") {
		// As Kafka's tool: a commit outside any generation, which the
		// coordinator takes only while the group is empty.
		res, err := adm.AlterGroupOffsets(ctx, group, newOffsets)
		if err != nil {
			return fmt.Errorf("reset offsets of group %s: %w", group, err)
		}
		for _, tp := range tps {
			if perr, ok := res[tp]; !ok || perr != nil {
				if !ok {
					perr = errors.New("no answer for this partition")
				}
				return fmt.Errorf("reset offsets of group %s: %s-%d: %w", group, tp.Topic, tp.Partition, perr)
			}
		}
	}
	switch {
	case c.Bool("export"):
		// kafka-consumer-groups.sh --export: what --from-file reads.
		for _, r := range rows {
			fmt.Fprintf(c.App.Writer, "%s,%d,%d\n", r.Topic, r.Partition, r.NewOffset)
		}
		return nil
	case asJSON:
		return writeJSON(c.App.Writer, rows)
	}
	return printResetRows(c.App.Writer, rows)
}

// readResetFile reads --from-file: kafka-consumer-groups.sh --export's CSV,
// topic,partition,offset lines, or group,topic,partition,offset ones of
// several groups (only group's are taken).
func readResetFile(path, group string) (map[client.TopicPartition]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[client.TopicPartition]int64{}
	for i, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) == 4 {
			if f[0] != group {
				continue
			}
			f = f[1:]
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: %q is not topic,partition,offset", path, i+1, line)
		}
		p, perr := strconv.ParseInt(f[1], 10, 32)
		o, oerr := strconv.ParseInt(f[2], 10, 64)
		if perr != nil || oerr != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not topic,partition,offset", path, i+1, line)
		}
		out[client.TopicPartition{Topic: f[0], Partition: int32(p)}] = o
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no offsets for group %s", path, group)
	}
	return out, nil
}

// parseJavaDuration parses Java's Duration.parse format, PnDTnHnMn.nS (a
// leading - negates), which kafka-consumer-groups.sh --by-duration takes.
func parseJavaDuration(s string) (time.Duration, error) {
	m := javaDuration.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || m[2] == "" && m[3] == "" && m[4] == "" && m[5] == "" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, fmt.Errorf("%q is not a duration like PnDTnHnMnS (P1DT2H, PT30M, PT0.5S)", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if v := m[2+i]; v != "" {
			f, err := strconv.ParseFloat(strings.Replace(v, ",", ".", 1), 64) // Java takes either
			if err != nil {
				return 0, fmt.Errorf("%q: %w", s, err)
			}
			d += time.Duration(f * float64(unit))
		}
	}
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}

var javaDuration = regexp.MustCompile(`^([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+(?:[.,][0-9]{0,9})?)S)?)?$`)

func printResetRows(w io.Writer, rows []resetJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.Group, r.Topic, r.Partition, r.NewOffset)
	}
	return tw.Flush()
}
