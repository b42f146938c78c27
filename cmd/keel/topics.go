package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// topicsCommand is `keel topics`, kafka-topics.sh (plus the topic half of
// kafka-configs.sh for alter --config).
func topicsCommand() *cli.Command {
	return &cli.Command{
		Name:  "topics",
		Usage: "create, list, describe, alter and delete topics (like kafka-topics.sh)",
		Description: "Each action is a subcommand; kafka-topics.sh's flag form works too:\n" +
			"keel topics --bootstrap-server localhost:9092 --list runs keel topics list, and so does\n" +
			"keel topics --bootstrap-server localhost:9092 list. As in kafka-topics.sh, --topic is a\n" +
			"regular expression for list, describe, alter and delete (the whole name must match;\n" +
			"a comma separates alternatives; escape a dot as \\. to match it alone), and a name\n" +
			"for create.",
		Subcommands: []*cli.Command{
			{
				Name:  "create",
				Usage: "create a topic",
				Description: "Like kafka-topics.sh --create. Partitions and replication factor default to the\n" +
					"broker's num.partitions and default.replication.factor; --replica-assignment places\n" +
					"the replicas instead: each partition's broker ids separated by ':', the\n" +
					"partitions by ',' (1:2:3,2:3:1 is two partitions of three replicas, led by 1 and 2).\n\n" +
					"Examples:\n" +
					"  keel topics create --topic orders --partitions 6 --replication-factor 3 \\\n" +
					"      --config min.insync.replicas=2 --config retention.ms=86400000\n" +
					"  keel topics create --topic orders --replica-assignment 1:2,2:3,3:1\n" +
					"  keel topics create --topic orders --if-not-exists",
				Flags: adminFlags(
					&cli.StringFlag{Name: "topic", Required: true, Usage: "the topic to create"},
					&cli.IntFlag{Name: "partitions", Value: -1, Usage: "number of partitions (-1: the broker's num.partitions)"},
					&cli.IntFlag{Name: "replication-factor", Value: -1, Usage: "replicas per partition (-1: the broker's default.replication.factor)"},
					&cli.StringFlag{Name: "replica-assignment", Usage: "the replicas of each partition: `B1:B2,B1:B2,...` (instead of --partitions and --replication-factor)"},
					&cli.StringSliceFlag{Name: "config", Usage: "topic config `key=value` (repeatable)"},
					&cli.BoolFlag{Name: "if-not-exists", Usage: "succeed if the topic already exists"},
				),
				Action: topicsCreate,
			},
			{
				Name:  "list",
				Usage: "list topic names",
				Description: "Like kafka-topics.sh --list: one name a line, internal topics included unless\n" +
					"--exclude-internal.\n\n" +
					"Examples:\n" +
					"  keel topics list --bootstrap-server localhost:9092\n" +
					"  keel topics list --exclude-internal -o json",
				Flags: adminFlags(&cli.StringSliceFlag{Name: "topic", Usage: "only the topics this regular expression matches (repeatable)"},
					&cli.BoolFlag{Name: "exclude-internal", Usage: "leave out __consumer_offsets and other internal topics"}, outputFlag()),
				Action: topicsList,
			},
			{
				Name:  "describe",
				Usage: "describe topics: partitions, leaders, replicas, ISR and configs",
				Description: "Like kafka-topics.sh --describe: one line per topic (its non-default configs) and\n" +
					"one per partition. All topics when --topic is not given. At most one of the\n" +
					"partition reports (--under-replicated-partitions, --under-min-isr-partitions,\n" +
					"--at-min-isr-partitions, --unavailable-partitions) prints only the partitions it\n" +
					"names, without topic lines.\n\n" +
					"Examples:\n" +
					"  keel topics describe --topic orders\n" +
					"  keel topics describe --under-replicated-partitions\n" +
					"  keel topics describe --at-min-isr-partitions\n" +
					"  keel topics describe --topics-with-overrides\n" +
					"  keel topics describe --topic orders -o json",
				Flags: adminFlags(
					&cli.StringSliceFlag{Name: "topic", Usage: "topics to describe, a regular expression (repeatable; default all)"},
					&cli.BoolFlag{Name: "exclude-internal", Usage: "leave out internal topics"},
					&cli.BoolFlag{Name: "under-replicated-partitions", Usage: "only partitions whose ISR is smaller than their replica set"},
					&cli.BoolFlag{Name: "under-min-isr-partitions", Usage: "only partitions whose ISR is smaller than the topic's min.insync.replicas (or that have no leader)"},
					&cli.BoolFlag{Name: "at-min-isr-partitions", Usage: "only partitions whose ISR is exactly the topic's min.insync.replicas: one more replica lost fails acks=all"},
					&cli.BoolFlag{Name: "unavailable-partitions", Usage: "only partitions without a leader"},
					&cli.BoolFlag{Name: "topics-with-overrides", Usage: "only the topic lines of topics with configs set on the topic, no partitions"},
					&cli.BoolFlag{Name: "if-exists", Usage: "no error when --topic matches no topic"},
					outputFlag(),
				),
				Action: topicsDescribe,
			},
			{
				Name:  "alter",
				Usage: "add partitions, or set / delete topic configs",
				Description: "--partitions is kafka-topics.sh --alter --partitions (the count only grows), with\n" +
					"--replica-assignment placing the new partitions (given for every partition, as\n" +
					"kafka-topics.sh takes it: the existing ones' entries are skipped);\n" +
					"--config / --delete-config are kafka-configs.sh --alter --add-config / --delete-config\n" +
					"for the topic (incremental: other configs are left as they are). Every topic --topic\n" +
					"matches is altered.\n\n" +
					"Examples:\n" +
					"  keel topics alter --topic orders --partitions 12\n" +
					"  keel topics alter --topic orders --partitions 4 --replica-assignment 1:2,2:3,3:1,1:3\n" +
					"  keel topics alter --topic orders --config retention.ms=3600000 --delete-config segment.bytes",
				Flags: adminFlags(
					&cli.StringFlag{Name: "topic", Required: true, Usage: "the topics to alter, a regular expression"},
					&cli.IntFlag{Name: "partitions", Usage: "the new, larger, partition count"},
					&cli.StringFlag{Name: "replica-assignment", Usage: "with --partitions, the replicas of every partition, `B1:B2,B1:B2,...`: those of the new ones are used"},
					&cli.BoolFlag{Name: "if-exists", Usage: "no error when --topic matches no topic"},
					&cli.StringSliceFlag{Name: "config", Aliases: []string{"add-config"}, Usage: "set topic config `key=value` (repeatable)"},
					&cli.StringSliceFlag{Name: "delete-config", Usage: "revert topic config `key` to its default (repeatable)"},
				),
				Action: topicsAlter,
			},
			{
				Name:  "delete",
				Usage: "delete topics",
				Description: "Like kafka-topics.sh --delete: every topic --topic matches (a regular\n" +
					"expression; internal topics are refused by the brokers).\n\n" +
					"Examples:\n" +
					"  keel topics delete --topic orders\n" +
					"  keel topics delete --topic 'test-.*' --if-exists\n" +
					"  keel topics delete --topic a --topic b --if-exists",
				Flags: adminFlags(
					&cli.StringSliceFlag{Name: "topic", Required: true, Usage: "topics to delete, a regular expression (repeatable)"},
					&cli.BoolFlag{Name: "if-exists", Usage: "succeed if --topic matches no topic"},
				),
				Action: topicsDelete,
			},
		},
	}
}

func topicsCreate(c *cli.Context) error {
	topic := c.String("topic")
	parts, rf := c.Int("partitions"), c.Int("replication-factor")
	if parts == 0 || parts < -1 || parts > 1<<20 {
		return fmt.Errorf("--partitions %d: must be positive (or -1 for the broker default)", parts)
	}
	if rf == 0 || rf < -1 || rf > 1<<15-1 {
		return fmt.Errorf("--replication-factor %d: must be positive (or -1 for the broker default)", rf)
	}
	configs, err := parseKeyValues("config", c.StringSlice("config"))
	if err != nil {
		return err
	}
	nt := client.NewTopic{Topic: topic, Partitions: int32(parts), ReplicationFactor: int16(rf), Configs: configs}
	if c.IsSet("replica-assignment") {
		if c.IsSet("partitions") || c.IsSet("replication-factor") {
			return errors.New("--replica-assignment cannot be used with --partitions or --replication-factor")
		}
		if nt.Assignment, err = parseReplicaAssignment(c.String("replica-assignment")); err != nil {
			return err
		}
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	rs, err := adm.CreateTopics(ctx, nt)
	if err == nil && len(rs) == 1 && rs[0].Err != nil {
		err = fmt.Errorf("create topic %s: %w", topic, rs[0].Err)
	}
	if errors.Is(err, client.ErrTopicAlreadyExists) && c.Bool("if-not-exists") {
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "Created topic %s.\n", topic)
	return nil
}

func topicsList(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	names, err := adm.ListTopics(ctx, !c.Bool("exclude-internal"))
	if err != nil {
		return err
	}
	if patterns := c.StringSlice("topic"); len(patterns) > 0 {
		if names, err = matchTopics(names, patterns, true); err != nil {
			return err
		}
	}
	if asJSON {
		if names == nil {
			names = []string{}
		}
		return writeJSON(c.App.Writer, names)
	}
	for _, n := range names {
		fmt.Fprintln(c.App.Writer, n)
	}
	return nil
}

// topicJSON is one topic in `topics describe -o json`.
type topicJSON struct {
	Topic             string            `json:"topic"`
	TopicID           string            `json:"topicId"`
	Internal          bool              `json:"internal"`
	PartitionCount    int               `json:"partitionCount"`
	ReplicationFactor int               `json:"replicationFactor"`
	Configs           map[string]string `json:"configs"`
	Partitions        []partitionJSON   `json:"partitions"`
}

type partitionJSON struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leaderEpoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offlineReplicas"`
	// ELR and LastKnownELR are the eligible leader replicas and the last
	// known leader (KIP-966), when the broker serves DescribeTopicPartitions.
	ELR          []int32 `json:"elr,omitempty"`
	LastKnownELR []int32 `json:"lastKnownElr,omitempty"`
	Error        string  `json:"error,omitempty"`
}

func topicsDescribe(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	// Every topic, in one metadata request; --topic's patterns pick from
	// them.
	tms, err := adm.DescribeTopics(ctx)
	if err != nil {
		return err
	}
	if patterns := c.StringSlice("topic"); len(patterns) > 0 {
		var all []string
		for _, tm := range tms {
			if !tm.Internal || !c.Bool("exclude-internal") {
				all = append(all, tm.Topic)
			}
		}
		matched, err := matchTopics(all, patterns, c.Bool("if-exists"))
		if err != nil {
			return err
		}
		if len(matched) == 0 { // --if-exists, and no topic matches
			if asJSON {
				return writeJSON(c.App.Writer, []topicJSON{})
			}
			return nil
		}
		tms = slices.DeleteFunc(tms, func(tm *client.TopicMetadata) bool {
			_, found := slices.BinarySearch(matched, tm.Topic) // matchTopics sorts
			return !found
		})
	}
	var found []*client.TopicMetadata
	for _, tm := range tms {
		switch {
		case tm.Err != nil && c.Bool("if-exists") && errors.Is(tm.Err, client.ErrUnknownTopicOrPartition):
		case tm.Err != nil:
			return fmt.Errorf("describe topic %s: %w", tm.Topic, tm.Err)
		case tm.Internal && c.Bool("exclude-internal"):
		default:
			found = append(found, tm)
		}
	}
	configs, minISR, err := topicConfigs(ctx, adm, found)
	if err != nil {
		return err
	}
	// Eligible leader replicas, as kafka-topics.sh shows them from a broker
	// that serves DescribeTopicPartitions (Kafka 3.8+); none from another.
	names := make([]string, len(found))
	for i, tm := range found {
		names[i] = tm.Topic
	}
	elrs, err := adm.EligibleLeaderReplicas(ctx, names...)
	if errors.Is(err, client.ErrUnsupportedRequest) {
		elrs, err = nil, nil
	}
	if err != nil {
		return err
	}
	if c.Bool("topics-with-overrides") {
		found = slices.DeleteFunc(found, func(tm *client.TopicMetadata) bool { return len(configs[tm.Topic]) == 0 })
	}
	// The partition reports of kafka-topics.sh --describe; like it, at
	// most one at a time.
	reports := map[string]func(topic string, p client.PartitionMetadata) bool{
		"under-replicated-partitions": func(_ string, p client.PartitionMetadata) bool { return len(p.ISR) < len(p.Replicas) },
		"under-min-isr-partitions":    func(t string, p client.PartitionMetadata) bool { return p.Leader < 0 || len(p.ISR) < minISR[t] },
		"at-min-isr-partitions":       func(t string, p client.PartitionMetadata) bool { return len(p.ISR) == minISR[t] },
		"unavailable-partitions":      func(_ string, p client.PartitionMetadata) bool { return p.Leader < 0 },
	}
	var report func(string, client.PartitionMetadata) bool
	var asked []string
	for name, f := range reports {
		if c.Bool(name) {
			report = f
			asked = append(asked, "--"+name)
		}
	}
	if len(asked) > 1 {
		sort.Strings(asked)
		return fmt.Errorf("%s: give at most one partition report", strings.Join(asked, ", "))
	}
	filtered := report != nil
	keep := func(topic string, p client.PartitionMetadata) bool {
		return !c.Bool("topics-with-overrides") && (report == nil || report(topic, p))
	}
	if asJSON {
		out := []topicJSON{}
		for _, tm := range found {
			tj := topicJSON{Topic: tm.Topic, TopicID: topicID(tm.ID), Internal: tm.Internal, PartitionCount: len(tm.Partitions),
				ReplicationFactor: replicationFactor(tm), Configs: configs[tm.Topic], Partitions: []partitionJSON{}}
			for _, p := range tm.Partitions {
				if !keep(tm.Topic, p) {
					continue
				}
				pj := partitionJSON{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
					Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas)}
				if e, ok := elrs[client.TopicPartition{Topic: tm.Topic, Partition: p.Partition}]; ok {
					pj.ELR, pj.LastKnownELR = e.ELR, e.LastKnownELR
				}
				if p.Err != nil {
					pj.Error = p.Err.Error()
				}
				tj.Partitions = append(tj.Partitions, pj)
			}
			if filtered && len(tj.Partitions) == 0 {
				continue
			}
			out = append(out, tj)
		}
		return writeJSON(c.App.Writer, out)
	}
	w := c.App.Writer
	for _, tm := range found {
		if !filtered {
			fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
				tm.Topic, topicID(tm.ID), len(tm.Partitions), replicationFactor(tm), joinConfigs(configs[tm.Topic]))
		}
		for _, p := range tm.Partitions {
			if keep(tm.Topic, p) {
				e, ok := elrs[client.TopicPartition{Topic: tm.Topic, Partition: p.Partition}]
				printPartition(w, tm.Topic, p, e, ok)
			}
		}
	}
	return nil
}

// printPartition prints one kafka-topics.sh --describe partition line, with
// its Elr and LastKnownElr when known (hasELR).
func printPartition(w io.Writer, topic string, p client.PartitionMetadata, e client.EligibleLeaders, hasELR bool) {
	leader := "none"
	if p.Leader >= 0 {
		leader = fmt.Sprint(p.Leader)
	}
	line := fmt.Sprintf("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s", topic, p.Partition, leader, joinIDs(p.Replicas), joinIDs(p.ISR))
	if hasELR {
		line += "\tElr: " + joinIDs(e.ELR) + "\tLastKnownElr: " + joinIDs(e.LastKnownELR)
	}
	if len(p.OfflineReplicas) > 0 {
		line += "\tOffline: " + joinIDs(p.OfflineReplicas)
	}
	fmt.Fprintln(w, line)
}

// topicConfigs returns each topic's configs that are set on the topic
// (source TOPIC_CONFIG), as kafka-topics.sh --describe shows them, and its
// effective min.insync.replicas.
func topicConfigs(ctx context.Context, adm *client.Admin, tms []*client.TopicMetadata) (map[string]map[string]string, map[string]int, error) {
	out, minISR := map[string]map[string]string{}, map[string]int{}
	if len(tms) == 0 {
		return out, minISR, nil
	}
	names := make([]string, len(tms))
	for i, tm := range tms {
		names[i] = tm.Topic
		out[tm.Topic] = map[string]string{}
	}
	rcs, err := adm.DescribeConfigs(ctx, client.TopicConfig, names...)
	if err != nil {
		return nil, nil, err
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, nil, fmt.Errorf("describe configs of topic %s: %w", rc.Name, rc.Err)
		}
		for _, e := range rc.Configs {
			if e.Name == "min.insync.replicas" && e.Value != nil {
				minISR[rc.Name], _ = strconv.Atoi(*e.Value)
			}
			if e.Source == "DYNAMIC_TOPIC_CONFIG" || e.Source == "TOPIC_CONFIG" {
				v := ""
				if e.Value != nil {
					v = *e.Value
				}
				out[rc.Name][e.Name] = v
			}
		}
	}
	return out, minISR, nil
}

func joinConfigs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// topicID prints a topic id as Kafka's Uuid.toString does (URL-safe
// base64 without padding).
func topicID(id [16]byte) string {
	if id == ([16]byte{}) {
		return "AAAAAAAAAAAAAAAAAAAAAA"
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func replicationFactor(tm *client.TopicMetadata) int {
	if len(tm.Partitions) == 0 {
		return 0
	}
	return len(tm.Partitions[0].Replicas)
}

func topicsAlter(c *cli.Context) error {
	sets, err := parseKeyValues("config", c.StringSlice("config"))
	if err != nil {
		return err
	}
	deletes := c.StringSlice("delete-config")
	if !c.IsSet("partitions") && len(sets) == 0 && len(deletes) == 0 {
		return fmt.Errorf("nothing to alter: give --partitions, --config or --delete-config")
	}
	total := c.Int("partitions")
	if c.IsSet("partitions") && total <= 0 {
		return fmt.Errorf("--partitions %d: must be positive", total)
	}
	var assignment [][]int32
	if c.IsSet("replica-assignment") {
		if !c.IsSet("partitions") {
			return errors.New("--replica-assignment needs --partitions")
		}
		if assignment, err = parseReplicaAssignment(c.String("replica-assignment")); err != nil {
			return err
		}
		if len(assignment) != total {
			return fmt.Errorf("--replica-assignment has %d partitions, --partitions %d", len(assignment), total)
		}
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	topics, err := matchingTopics(ctx, adm, []string{c.String("topic")}, false, c.Bool("if-exists"))
	if err != nil {
		return err
	}
	for _, topic := range topics {
		if err := alterTopic(ctx, c, adm, topic, int32(total), assignment, sets, deletes); err != nil {
			return err
		}
	}
	return nil
}

// alterTopic makes topicsAlter's changes to one topic.
func alterTopic(ctx context.Context, c *cli.Context, adm *client.Admin, topic string, total int32, assignment [][]int32, sets map[string]string, deletes []string) error {
	if c.IsSet("partitions") {
		var r client.TopicResult
		var err error
		if assignment == nil {
			var rs []client.TopicResult
			if rs, err = adm.CreatePartitions(ctx, total, topic); err == nil && len(rs) == 1 {
				r = rs[0]
			}
		} else {
			// kafka-topics.sh's assignment lists every partition: the
			// existing ones' entries are skipped.
			var tms []*client.TopicMetadata
			if tms, err = adm.DescribeTopics(ctx, topic); err == nil && tms[0].Err != nil {
				err = fmt.Errorf("alter partitions of topic %s: %w", topic, tms[0].Err)
			}
			if err == nil {
				have := min(len(tms[0].Partitions), len(assignment))
				r, err = adm.CreatePartitionsAssigned(ctx, topic, total, assignment[have:])
			}
		}
		if err != nil {
			return err
		}
		if r.Err != nil {
			return fmt.Errorf("alter partitions of topic %s: %w", topic, r.Err)
		}
		fmt.Fprintf(c.App.Writer, "Topic %s now has %d partitions.\n", topic, total)
	}
	if len(sets)+len(deletes) > 0 {
		var changes []client.AlterConfig
		for _, k := range sortedKeys(sets) {
			v := sets[k]
			changes = append(changes, client.AlterConfig{Op: client.SetConfig, Name: k, Value: &v})
		}
		for _, k := range deletes {
			changes = append(changes, client.AlterConfig{Op: client.DeleteConfig, Name: k})
		}
		if err := adm.IncrementalAlterConfigs(ctx, client.TopicConfig, topic, changes...); err != nil {
			return fmt.Errorf("alter configs of topic %s: %w", topic, err)
		}
		fmt.Fprintf(c.App.Writer, "Completed updating config for topic %s.\n", topic)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func topicsDelete(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	names, err := matchingTopics(ctx, adm, c.StringSlice("topic"), false, c.Bool("if-exists"))
	if err != nil || len(names) == 0 {
		return err
	}
	rs, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rs {
		switch {
		case r.Err == nil:
			fmt.Fprintf(c.App.Writer, "Deleted topic %s.\n", r.Topic)
		case c.Bool("if-exists") && errors.Is(r.Err, client.ErrUnknownTopicOrPartition):
		default:
			errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

// matchingTopics lists the cluster's topics (internal ones unless
// excludeInternal) and returns those --topic's patterns match
// (matchTopics); a pattern that matches none is an error naming it, as
// kafka-topics.sh's "does not exist as expected", unless ifExists.
func matchingTopics(ctx context.Context, adm *client.Admin, patterns []string, excludeInternal, ifExists bool) ([]string, error) {
	names, err := adm.ListTopics(ctx, !excludeInternal)
	if err != nil {
		return nil, err
	}
	return matchTopics(names, patterns, ifExists)
}

// matchTopics returns, sorted, the names a pattern matches whole, as
// kafka-topics.sh reads --topic (a regular expression whose commas are
// alternatives: Kafka's IncludeList). Unless quiet, a pattern matching no
// name is an error.
func matchTopics(names, patterns []string, quiet bool) ([]string, error) {
	matched := map[string]bool{}
	for _, p := range patterns {
		re, err := regexp.Compile("^(?:" + strings.ReplaceAll(strings.TrimSpace(p), ",", "|") + ")$")
		if err != nil {
			return nil, fmt.Errorf("--topic %q: %w", p, err)
		}
		n := 0
		for _, name := range names {
			if re.MatchString(name) {
				matched[name] = true
				n++
			}
		}
		if n == 0 && !quiet {
			return nil, fmt.Errorf("topic '%s' does not exist as expected: %w", p, client.ErrUnknownTopicOrPartition)
		}
	}
	return slices.Sorted(maps.Keys(matched)), nil
}

// parseReplicaAssignment reads kafka-topics.sh's --replica-assignment:
// partitions separated by ',', each one's broker ids by ':', with Kafka's
// checks (no broker twice in a partition, every partition as many
// replicas).
func parseReplicaAssignment(v string) ([][]int32, error) {
	var out [][]int32
	for i, part := range strings.Split(v, ",") {
		var replicas []int32
		for _, b := range strings.Split(part, ":") {
			id, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("--replica-assignment %q: partition %d: broker id %q is not a number", v, i, b)
			}
			if slices.Contains(replicas, int32(id)) {
				return nil, fmt.Errorf("--replica-assignment %q: partition replica lists may not contain duplicate entries: %d", v, id)
			}
			replicas = append(replicas, int32(id))
		}
		if len(out) > 0 && len(replicas) != len(out[0]) {
			return nil, fmt.Errorf("--replica-assignment %q: partition %d has different replication factor: %v", v, i, replicas)
		}
		out = append(out, replicas)
	}
	return out, nil
}
