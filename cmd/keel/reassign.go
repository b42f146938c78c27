package main

// keel reassign-partitions: kafka-reassign-partitions.sh. Its plans are
// Kafka's JSON files, its output Kafka's lines, so that an operator's
// scripts and runbooks work unchanged.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/metadata"
)

// anyLogDir in a plan's "log_dirs" leaves the replica's log dir to its
// broker.
const anyLogDir = "any"

// The throttles a reassignment sets: per broker, and per topic (which
// replicas the broker-level rates apply to).
var (
	brokerThrottles = []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate",
		"replica.alter.log.dirs.io.max.bytes.per.second"}
	topicThrottles = []string{"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
)

func reassignCommand() *cli.Command {
	planFlag := &cli.StringFlag{Name: "reassignment-json-file", Required: true, Usage: "the reassignment plan: a `FILE` of kafka-reassign-partitions.sh's JSON"}
	preserve := &cli.BoolFlag{Name: "preserve-throttles", Usage: "leave the throttles as they are"}
	timeout := &cli.Int64Flag{Name: "timeout", Value: 10000, Usage: "how long, in ms, to keep trying to start the log dir moves of replicas their brokers do not host yet"}
	return &cli.Command{
		Name:  "reassign-partitions",
		Usage: "move partitions' replicas between brokers and log dirs (like kafka-reassign-partitions.sh)",
		Description: "A reassignment (KIP-455) adds the new replicas, lets them catch up, moves the\n" +
			"leadership to the first replica of the new list if it is elsewhere, then drops the\n" +
			"replicas left out, while the partition serves. Plans are kafka-reassign-partitions.sh's\n" +
			"JSON, so existing plans and scripts work:\n\n" +
			"  {\"version\":1,\"partitions\":[{\"topic\":\"orders\",\"partition\":0,\"replicas\":[2,3],\"log_dirs\":[\"any\",\"/data/disk2\"]}]}\n\n" +
			"\"log_dirs\" (optional) names each replica's log dir on its broker, or \"any\"; a named\n" +
			"dir moves the replica there (AlterReplicaLogDirs, KIP-113) once its broker hosts it.\n" +
			"Each action is a subcommand; the script's flag form works too:\n" +
			"keel reassign-partitions --bootstrap-server b:9092 --execute --reassignment-json-file plan.json.",
		Subcommands: []*cli.Command{
			{
				Name:  "generate",
				Usage: "propose a plan that spreads topics over brokers",
				Description: "Prints the topics' current assignment (save it: it is the plan that rolls back)\n" +
					"and a proposed one over --broker-list, placed as a new topic is (leaders spread,\n" +
					"racks alternated). Nothing changes until the plan is executed.\n\n" +
					"  echo '{\"version\":1,\"topics\":[{\"topic\":\"orders\"}]}' > topics.json\n" +
					"  keel reassign-partitions generate --topics-to-move-json-file topics.json --broker-list 1,2,3",
				Flags: adminFlags(
					&cli.StringFlag{Name: "topics-to-move-json-file", Required: true, Usage: "a `FILE` of {\"version\":1,\"topics\":[{\"topic\":\"name\"}]}"},
					&cli.StringFlag{Name: "broker-list", Required: true, Usage: "the brokers to place replicas on, separated by commas"},
					&cli.BoolFlag{Name: "disable-rack-aware", Usage: "ignore the brokers' racks"},
				),
				Action: reassignGenerate,
			},
			{
				Name:  "execute",
				Usage: "start the reassignments of a plan",
				Description: "Prints the current assignment of the plan's partitions (the rollback plan), then\n" +
					"starts the reassignments and the log dir moves. --throttle bounds the replication\n" +
					"traffic of the reassignment (bytes/s per broker, KIP-73: the brokers' leader and\n" +
					"follower.replication.throttled.rate, and the topics' throttled replicas), and\n" +
					"--replica-alter-log-dirs-throttle the log dir moves (replica.alter.log.dirs.io.max.bytes.per.second);\n" +
					"run verify until it reports completion to remove them. Refused while other\n" +
					"reassignments are under way, unless --additional.\n\n" +
					"  keel reassign-partitions execute --reassignment-json-file plan.json --throttle 50000000",
				Flags: adminFlags(planFlag,
					&cli.BoolFlag{Name: "additional", Usage: "execute even though other reassignments are under way (also: resubmit one to change its throttle)"},
					&cli.Int64Flag{Name: "throttle", Value: -1, Usage: "replication throttle of the reassignment, bytes/s per broker (-1: none)"},
					&cli.Int64Flag{Name: "replica-alter-log-dirs-throttle", Value: -1, Usage: "throttle of the log dir moves, bytes/s per broker (-1: none)"},
					timeout,
				),
				Action: reassignExecute,
			},
			{
				Name:  "verify",
				Usage: "report the progress of a plan; remove its throttles once it is done",
				Description: "Once no reassignment is under way and every log dir move of the plan completed,\n" +
					"it clears the reassignment throttles of every broker and of the plan's topics\n" +
					"(unless --preserve-throttles).",
				Flags:  adminFlags(planFlag, preserve),
				Action: reassignVerify,
			},
			{
				Name:  "cancel",
				Usage: "cancel the reassignments and log dir moves of a plan under way",
				Description: "A cancelled reassignment returns the partition to its replicas before it\n" +
					"(the new replicas are dropped); a cancelled log dir move stays in its dir.",
				Flags:  adminFlags(planFlag, preserve, timeout),
				Action: reassignCancel,
			},
			{
				Name:   "list",
				Usage:  "list the reassignments under way",
				Flags:  adminFlags(),
				Action: reassignList,
			},
		},
	}
}

// reassignPlan is kafka-reassign-partitions.sh's JSON.
type reassignPlan struct {
	Version    int                `json:"version"`
	Partitions []reassignPartPlan `json:"partitions"`
}

type reassignPartPlan struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs"`
}

// replicaRef is one replica: Kafka's TopicPartitionReplica.
type replicaRef struct {
	tp     client.TopicPartition
	broker int32
}

func (r replicaRef) String() string { return fmt.Sprintf("%s-%d", r.tp.String(), r.broker) }

// compareTPs orders partitions by topic, then partition.
func compareTPs(a, b client.TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// compareReplicas orders replicas by broker, then partition.
func compareReplicas(a, b replicaRef) int {
	if a.broker != b.broker {
		return int(a.broker) - int(b.broker)
	}
	return compareTPs(a.tp, b.tp)
}

// parsedPlan is a plan file read: each partition's replicas in the file's
// order, and the replicas given a log dir.
type parsedPlan struct {
	parts   []client.TopicPartition
	targets map[client.TopicPartition][]int32
	dirs    map[replicaRef]string
}

func readPlan(path string) (*parsedPlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Version    *int `json:"version"`
		Partitions []struct {
			Topic     *string   `json:"topic"`
			Partition *int32    `json:"partition"`
			Replicas  *[]int32  `json:"replicas"`
			LogDirs   *[]string `json:"log_dirs"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: the input string is not a valid JSON: %w", path, err)
	}
	if raw.Version != nil && *raw.Version != 1 {
		return nil, fmt.Errorf("%s: not supported version field value %d", path, *raw.Version)
	}
	p := &parsedPlan{targets: map[client.TopicPartition][]int32{}, dirs: map[replicaRef]string{}}
	var dup []string
	for i, e := range raw.Partitions {
		if e.Topic == nil || e.Partition == nil || e.Replicas == nil {
			return nil, fmt.Errorf("%s: partition %d of the plan lacks \"topic\", \"partition\" or \"replicas\"", path, i)
		}
		tp := client.TopicPartition{Topic: *e.Topic, Partition: *e.Partition}
		replicas := *e.Replicas
		dirs := make([]string, len(replicas))
		for j := range dirs {
			dirs[j] = anyLogDir
		}
		if e.LogDirs != nil {
			dirs = *e.LogDirs
		}
		if len(dirs) != len(replicas) {
			return nil, fmt.Errorf("size of replicas list %v is different from size of log dirs list %v for partition %s", replicas, dirs, tp.String())
		}
		if _, seen := p.targets[tp]; seen {
			dup = append(dup, tp.String())
		}
		p.parts = append(p.parts, tp)
		p.targets[tp] = replicas
		for j, d := range dirs {
			if d != anyLogDir {
				p.dirs[replicaRef{tp, replicas[j]}] = d
			}
		}
	}
	if len(dup) > 0 {
		return nil, fmt.Errorf("partition reassignment contains duplicate topic partitions: %s", strings.Join(dup, ","))
	}
	return p, nil
}

// formatPlan writes partitions' replicas (and log dirs) as a plan, sorted.
func formatPlan(assign map[client.TopicPartition][]int32, dirs map[replicaRef]string) string {
	plan := reassignPlan{Version: 1, Partitions: []reassignPartPlan{}}
	tps := make([]client.TopicPartition, 0, len(assign))
	for tp := range assign {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTPs)
	for _, tp := range tps {
		e := reassignPartPlan{Topic: tp.Topic, Partition: tp.Partition, Replicas: append([]int32{}, assign[tp]...), LogDirs: []string{}}
		for _, r := range e.Replicas {
			d, ok := dirs[replicaRef{tp, r}]
			if !ok {
				d = anyLogDir
			}
			e.LogDirs = append(e.LogDirs, d)
		}
		plan.Partitions = append(plan.Partitions, e)
	}
	b, _ := json.Marshal(plan) // of plain values: cannot fail
	return string(b)
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// currentAssignment is the replicas of partitions as the cluster has them;
// an error names those that do not exist.
func currentAssignment(ctx context.Context, adm *client.Admin, parts []client.TopicPartition) (map[client.TopicPartition][]int32, error) {
	var topics []string
	for _, tp := range parts {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	mds, err := adm.DescribeTopics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := map[client.TopicPartition][]int32{}
	for _, md := range mds {
		if md.Err != nil {
			continue
		}
		for _, p := range md.Partitions {
			out[client.TopicPartition{Topic: md.Topic, Partition: p.Partition}] = p.Replicas
		}
	}
	var missing []string
	for _, tp := range parts {
		if _, ok := out[tp]; !ok {
			missing = append(missing, tp.String())
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("unable to find partition: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func reassignGenerate(c *cli.Context) error {
	brokers, err := parseIDs("broker-list", c.String("broker-list"))
	if err != nil {
		return err
	}
	if d := duplicates(brokers); len(d) > 0 {
		return fmt.Errorf("broker list contains duplicate entries: %v", d)
	}
	b, err := os.ReadFile(c.String("topics-to-move-json-file"))
	if err != nil {
		return err
	}
	var raw struct {
		Version *int `json:"version"`
		Topics  []struct {
			Topic string `json:"topic"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: the input string is not a valid JSON: %w", c.String("topics-to-move-json-file"), err)
	}
	if raw.Version != nil && *raw.Version != 1 {
		return fmt.Errorf("not supported version field value %d", *raw.Version)
	}
	var topics []string
	for _, t := range raw.Topics {
		topics = append(topics, t.Topic)
	}
	if d := duplicates(topics); len(d) > 0 {
		return fmt.Errorf("list of topics to reassign contains duplicate entries: %v", d)
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	mds, err := adm.DescribeTopics(ctx, topics...)
	if err != nil {
		return err
	}
	current := map[client.TopicPartition][]int32{}
	for _, md := range mds {
		if md.Err != nil {
			return fmt.Errorf("topic %s not found: %w", md.Topic, md.Err)
		}
		for _, p := range md.Partitions {
			current[client.TopicPartition{Topic: md.Topic, Partition: p.Partition}] = p.Replicas
		}
	}
	cluster, err := adm.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	var placeOn []metadata.BrokerRack
	racked := 0
	for _, br := range cluster.Brokers {
		if !slices.Contains(brokers, br.NodeID) {
			continue
		}
		r := metadata.BrokerRack{ID: br.NodeID}
		if !c.Bool("disable-rack-aware") {
			r.Rack = br.Rack
		}
		if r.Rack != "" {
			racked++
		}
		placeOn = append(placeOn, r)
	}
	if racked > 0 && racked < len(placeOn) {
		return errors.New("not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information")
	}
	proposed := map[client.TopicPartition][]int32{}
	for _, md := range mds {
		if len(md.Partitions) == 0 {
			continue
		}
		assigned, err := metadata.AssignReplicas(placeOn, len(md.Partitions), len(md.Partitions[0].Replicas), rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
		if err != nil {
			return fmt.Errorf("topic %s: %w", md.Topic, err)
		}
		for p, replicas := range assigned {
			proposed[client.TopicPartition{Topic: md.Topic, Partition: int32(p)}] = replicas
		}
	}
	w := c.App.Writer
	fmt.Fprintf(w, "Current partition replica assignment\n%s\n\n", formatPlan(current, nil))
	fmt.Fprintf(w, "Proposed partition reassignment configuration\n%s\n", formatPlan(proposed, nil))
	return nil
}

// duplicates lists the values that occur more than once.
func duplicates[T comparable](s []T) []T {
	seen := map[T]int{}
	var out []T
	for _, v := range s {
		if seen[v]++; seen[v] == 2 {
			out = append(out, v)
		}
	}
	return out
}

func reassignExecute(c *cli.Context) error {
	plan, err := readPlan(c.String("reassignment-json-file"))
	if err != nil {
		return err
	}
	if len(plan.parts) == 0 {
		return errors.New("partition reassignment list cannot be empty")
	}
	var dupMsgs []string
	for _, tp := range plan.parts {
		if len(plan.targets[tp]) == 0 {
			return errors.New("partition replica list cannot be empty")
		}
		if d := duplicates(plan.targets[tp]); len(d) > 0 {
			dupMsgs = append(dupMsgs, fmt.Sprintf("%s contains multiple entries for %s", tp.String(), joinIDs(d)))
		}
	}
	if len(dupMsgs) > 0 {
		return fmt.Errorf("partition replica lists may not contain duplicate entries: %s", strings.Join(dupMsgs, ". "))
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	ongoing, err := adm.ListPartitionReassignments(ctx)
	if err != nil {
		return err
	}
	if !c.Bool("additional") && len(ongoing) > 0 {
		return errors.New("cannot execute because there is an existing partition assignment.  Use --additional to override this and " +
			"create a new partition assignment in addition to the existing one. The --additional flag can also be used to change the throttle by resubmitting the current reassignment")
	}
	cluster, err := adm.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	live := map[int32]bool{}
	for _, b := range cluster.Brokers {
		live[b.NodeID] = true
	}
	for _, tp := range plan.parts {
		for _, r := range plan.targets[tp] {
			if !live[r] {
				return fmt.Errorf("unknown broker id %d", r)
			}
		}
	}
	current, err := currentAssignment(ctx, adm, plan.parts)
	if err != nil {
		return err
	}
	rollback := map[client.TopicPartition][]int32{}
	for _, tp := range plan.parts {
		rollback[tp] = current[tp]
	}
	w := c.App.Writer
	fmt.Fprintf(w, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", formatPlan(rollback, nil))
	throttle, dirThrottle := c.Int64("throttle"), c.Int64("replica-alter-log-dirs-throttle")
	if throttle >= 0 || dirThrottle >= 0 {
		fmt.Fprintln(w, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.")
		if throttle >= 0 {
			if err := setReassignmentThrottles(ctx, adm, w, ongoing, plan, current, throttle); err != nil {
				return err
			}
		}
		if dirThrottle >= 0 && len(plan.dirs) > 0 {
			var moving []int32
			for r := range plan.dirs {
				if !slices.Contains(moving, r.broker) {
					moving = append(moving, r.broker)
				}
			}
			slices.Sort(moving)
			v := strconv.FormatInt(dirThrottle, 10)
			for _, b := range moving {
				if err := adm.IncrementalAlterConfigs(ctx, client.BrokerConfig, strconv.Itoa(int(b)),
					client.AlterConfig{Op: client.SetConfig, Name: brokerThrottles[2], Value: &v}); err != nil {
					return err
				}
			}
			fmt.Fprintf(w, "The replica-alter-dir throttle limit was set to %d B/s\n", dirThrottle)
		}
	}
	failed, err := alterReassignments(ctx, adm, plan.targets)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("error reassigning partition(s):\n%s", strings.Join(failed, "\n"))
	}
	names := make([]string, 0, len(plan.targets))
	for _, tp := range sortedTPs(plan.targets) {
		names = append(names, tp.String())
	}
	fmt.Fprintf(w, "Successfully started partition reassignment%s for %s\n", plural(len(names)), strings.Join(names, ","))
	if len(plan.dirs) > 0 {
		return startLogDirMoves(ctx, adm, w, plan.dirs, time.Duration(c.Int64("timeout"))*time.Millisecond)
	}
	return nil
}

// alterReassignments starts (or, nil, cancels) reassignments and returns
// the partitions refused, as "topic-partition: error" lines.
func alterReassignments(ctx context.Context, adm *client.Admin, targets map[client.TopicPartition][]int32) ([]string, error) {
	res, err := adm.AlterPartitionReassignments(ctx, targets)
	if err != nil {
		return nil, err
	}
	var failed []string
	for _, tp := range sortedTPs(res) {
		if e := res[tp]; e != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", tp.String(), e))
		}
	}
	return failed, nil
}

func sortedTPs[V any](m map[client.TopicPartition]V) []client.TopicPartition {
	out := make([]client.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTPs)
	return out
}

// partitionMove is where a partition's data moves from and to.
type partitionMove struct{ sources, destinations []int32 }

// setReassignmentThrottles throttles the replication of the moves of a
// reassignment and of those under way, as kafka-reassign-partitions.sh
// does: the topics' leader.replication.throttled.replicas list each moving
// partition's sources, follower.replication.throttled.replicas its new
// replicas, and every broker involved gets the rate.
func setReassignmentThrottles(ctx context.Context, adm *client.Admin, w io.Writer, ongoing map[client.TopicPartition]client.PartitionReassignment,
	plan *parsedPlan, current map[client.TopicPartition][]int32, rate int64) error {
	moves := map[client.TopicPartition]partitionMove{}
	for tp, r := range ongoing {
		var m partitionMove
		for _, id := range r.Replicas {
			if !slices.Contains(r.Adding, id) {
				m.sources = append(m.sources, id)
			}
		}
		m.destinations = append(m.destinations, r.Adding...)
		moves[tp] = m
	}
	for _, tp := range plan.parts {
		m := partitionMove{sources: current[tp]}
		if prev, ok := moves[tp]; ok {
			m.sources = prev.sources
		}
		for _, id := range plan.targets[tp] {
			if !slices.Contains(m.sources, id) {
				m.destinations = append(m.destinations, id)
			}
		}
		moves[tp] = m
	}
	leaders, followers := map[string][]string{}, map[string][]string{}
	var brokers []int32
	for _, tp := range sortedTPs(moves) {
		m := moves[tp]
		leaders[tp.Topic] = append(leaders[tp.Topic], throttledReplicas(tp.Partition, m.sources)...)
		followers[tp.Topic] = append(followers[tp.Topic], throttledReplicas(tp.Partition, m.destinations)...)
		for _, id := range slices.Concat(m.sources, m.destinations) {
			if !slices.Contains(brokers, id) {
				brokers = append(brokers, id)
			}
		}
	}
	for topic := range leaders {
		slices.Sort(leaders[topic]) // Kafka's TreeSet of strings
		slices.Sort(followers[topic])
		l, f := strings.Join(leaders[topic], ","), strings.Join(followers[topic], ",")
		if err := adm.IncrementalAlterConfigs(ctx, client.TopicConfig, topic,
			client.AlterConfig{Op: client.SetConfig, Name: topicThrottles[0], Value: &l},
			client.AlterConfig{Op: client.SetConfig, Name: topicThrottles[1], Value: &f}); err != nil {
			return err
		}
	}
	slices.Sort(brokers)
	v := strconv.FormatInt(rate, 10)
	for _, b := range brokers {
		if err := adm.IncrementalAlterConfigs(ctx, client.BrokerConfig, strconv.Itoa(int(b)),
			client.AlterConfig{Op: client.SetConfig, Name: brokerThrottles[0], Value: &v},
			client.AlterConfig{Op: client.SetConfig, Name: brokerThrottles[1], Value: &v}); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "The inter-broker throttle limit was set to %d B/s\n", rate)
	return nil
}

// throttledReplicas are "partition:broker" entries of a throttled replicas
// config.
func throttledReplicas(partition int32, brokers []int32) []string {
	out := make([]string, len(brokers))
	for i, b := range brokers {
		out[i] = fmt.Sprintf("%d:%d", partition, b)
	}
	return out
}

// startLogDirMoves sends AlterReplicaLogDirs for each replica until every
// move started: a replica a reassignment is still creating answers
// REPLICA_NOT_AVAILABLE, and is asked again, until timeout.
func startLogDirMoves(ctx context.Context, adm *client.Admin, w io.Writer, moves map[replicaRef]string, timeout time.Duration) error {
	pending := maps.Clone(moves)
	deadline := time.Now().Add(timeout)
	for {
		started, err := alterLogDirs(ctx, adm, pending)
		if err != nil {
			return err
		}
		slices.SortFunc(started, compareReplicas)
		for _, r := range started {
			fmt.Fprintf(w, "Successfully started moving log directory to %s for replica %s with broker %d\n", pending[r], r.tp.String(), r.broker)
			delete(pending, r)
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []replicaRef
			for r := range pending {
				left = append(left, r)
			}
			slices.SortFunc(left, compareReplicas)
			names := make([]string, len(left))
			for i, r := range left {
				names[i] = r.String()
			}
			return fmt.Errorf("timed out before log directory move%s could be started for: %s", plural(len(left)), strings.Join(names, ","))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// alterLogDirs asks each broker to move its replicas of moves, by dir, and
// returns those whose move started; REPLICA_NOT_AVAILABLE is not an error
// (not yet), any other is.
func alterLogDirs(ctx context.Context, adm *client.Admin, moves map[replicaRef]string) ([]replicaRef, error) {
	type key struct {
		broker int32
		dir    string
	}
	batches := map[key][]client.TopicPartition{}
	for r, d := range moves {
		k := key{r.broker, d}
		batches[k] = append(batches[k], r.tp)
	}
	var started []replicaRef
	for k, tps := range batches {
		res, err := adm.AlterReplicaLogDirs(ctx, k.broker, k.dir, tps...)
		if err != nil {
			return nil, err
		}
		for _, tp := range tps {
			switch e := res[tp]; {
			case e == nil:
				started = append(started, replicaRef{tp, k.broker})
			case errors.Is(e, client.ErrReplicaNotAvailable):
			default:
				return nil, fmt.Errorf("move %s-%d to %s: %w", tp.String(), k.broker, k.dir, e)
			}
		}
	}
	return started, nil
}

// logDirState is where a replica of a plan is, against where the plan
// wants it.
type logDirState struct {
	current, future string
	found, inDir    bool // found on its broker; found in a live dir
}

func logDirStates(ctx context.Context, adm *client.Admin, moves map[replicaRef]string) (map[replicaRef]logDirState, error) {
	byBroker := map[int32][]client.LogDir{}
	out := map[replicaRef]logDirState{}
	for r := range moves {
		dirs, ok := byBroker[r.broker]
		if !ok {
			var err error
			if dirs, err = adm.DescribeLogDirs(ctx, r.broker); err != nil {
				return nil, err
			}
			byBroker[r.broker] = dirs
		}
		var s logDirState
		for _, d := range dirs {
			for _, rep := range d.Replicas {
				if rep.Topic != r.tp.Topic || rep.Partition != r.tp.Partition {
					continue
				}
				s.found = true
				if rep.IsFuture {
					s.future = d.Dir
				} else {
					s.current, s.inDir = d.Dir, true
				}
			}
		}
		out[r] = s
	}
	return out, nil
}

// printLogDirStates prints kafka-reassign-partitions.sh's lines about the
// plan's log dir moves and reports whether any is under way.
func printLogDirStates(w io.Writer, moves map[replicaRef]string, states map[replicaRef]logDirState) bool {
	refs := make([]replicaRef, 0, len(moves))
	for r := range moves {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, compareReplicas)
	var lines []string
	ongoing := false // as Kafka's tool: a move under way, or one it cannot find
	for _, r := range refs {
		s, target := states[r], moves[r]
		name := r.tp.String()
		switch {
		case !s.found:
			ongoing = true
			lines = append(lines, fmt.Sprintf("Partition %s cannot be found in any live log directory on broker %d.", name, r.broker))
		case !s.inDir:
			ongoing = true
			lines = append(lines, fmt.Sprintf("Partition %s is not found in any live log dir on broker %d. There is likely an offline log directory on the broker.", name, r.broker))
		case s.future != "":
			ongoing = true
			if s.future == target {
				lines = append(lines, fmt.Sprintf("Reassignment of replica %s is still in progress.", r))
			} else {
				lines = append(lines, fmt.Sprintf("Partition %s on broker %d is being moved to log dir %s instead of %s.", name, r.broker, s.future, target))
			}
		case s.current == target:
			lines = append(lines, fmt.Sprintf("Reassignment of replica %s completed successfully.", r))
		default:
			lines = append(lines, fmt.Sprintf("Partition %s on broker %d is not being moved from log dir %s to %s.", name, r.broker, s.current, target))
		}
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	return ongoing
}

// openPlan reads the command's plan and connects its Admin; done closes it.
func openPlan(c *cli.Context) (*parsedPlan, context.Context, *client.Admin, func(), error) {
	plan, err := readPlan(c.String("reassignment-json-file"))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, adm, done, err := openAdmin(c)
	return plan, ctx, adm, done, err
}

func reassignVerify(c *cli.Context) error {
	plan, ctx, adm, done, err := openPlan(c)
	if err != nil {
		return err
	}
	defer done()
	ongoing, err := adm.ListPartitionReassignments(ctx)
	if err != nil {
		return err
	}
	var lookUp []string
	for _, tp := range plan.parts {
		if _, ok := ongoing[tp]; !ok && !slices.Contains(lookUp, tp.Topic) {
			lookUp = append(lookUp, tp.Topic)
		}
	}
	replicas := map[client.TopicPartition][]int32{}
	if len(lookUp) > 0 {
		mds, err := adm.DescribeTopics(ctx, lookUp...)
		if err != nil {
			return err
		}
		for _, md := range mds {
			for _, p := range md.Partitions {
				replicas[client.TopicPartition{Topic: md.Topic, Partition: p.Partition}] = p.Replicas
			}
		}
	}
	w := c.App.Writer
	lines := []string{"Status of partition reassignment:"}
	for _, tp := range sortedTPs(plan.targets) {
		target, cur := plan.targets[tp], replicas[tp]
		_, reassigning := ongoing[tp]
		switch {
		case reassigning:
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is still in progress.", tp.String()))
		case slices.Equal(cur, target):
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is completed.", tp.String()))
		default:
			lines = append(lines, fmt.Sprintf("There is no active reassignment of partition %s, but replica set is %s rather than %s.",
				tp.String(), joinIDs(cur), joinIDs(target)))
		}
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	states, err := logDirStates(ctx, adm, plan.dirs)
	if err != nil {
		return err
	}
	movesOngoing := printLogDirStates(w, plan.dirs, states)
	if len(ongoing) == 0 && !movesOngoing && !c.Bool("preserve-throttles") {
		return clearThrottles(ctx, adm, w, plan)
	}
	return nil
}

// clearThrottles removes the reassignment throttles of every broker (and
// any the plan names) and of the plan's topics: a reassignment leaves no
// record of which brokers it throttled.
func clearThrottles(ctx context.Context, adm *client.Admin, w io.Writer, plan *parsedPlan) error {
	cluster, err := adm.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	var brokers []int32
	for _, b := range cluster.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	for _, tp := range plan.parts {
		for _, r := range plan.targets[tp] {
			if !slices.Contains(brokers, r) {
				brokers = append(brokers, r)
			}
		}
	}
	slices.Sort(brokers)
	fmt.Fprintf(w, "Clearing broker-level throttles on broker%s %s\n", plural(len(brokers)), joinIDs(brokers))
	for _, b := range brokers {
		var ops []client.AlterConfig
		for _, name := range brokerThrottles {
			ops = append(ops, client.AlterConfig{Op: client.DeleteConfig, Name: name})
		}
		if err := adm.IncrementalAlterConfigs(ctx, client.BrokerConfig, strconv.Itoa(int(b)), ops...); err != nil {
			return fmt.Errorf("clear the throttles of broker %d: %w", b, err)
		}
	}
	var topics []string
	for _, tp := range plan.parts {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	slices.Sort(topics)
	fmt.Fprintf(w, "Clearing topic-level throttles on topic%s %s\n", plural(len(topics)), strings.Join(topics, ","))
	for _, t := range topics {
		var ops []client.AlterConfig
		for _, name := range topicThrottles {
			ops = append(ops, client.AlterConfig{Op: client.DeleteConfig, Name: name})
		}
		if err := adm.IncrementalAlterConfigs(ctx, client.TopicConfig, t, ops...); err != nil {
			return fmt.Errorf("clear the throttles of topic %s: %w", t, err)
		}
	}
	return nil
}

func reassignCancel(c *cli.Context) error {
	plan, ctx, adm, done, err := openPlan(c)
	if err != nil {
		return err
	}
	defer done()
	ongoing, err := adm.ListPartitionReassignments(ctx, plan.parts...)
	if err != nil {
		return err
	}
	cancel := map[client.TopicPartition][]int32{}
	for tp, r := range ongoing {
		if len(r.Adding) > 0 || len(r.Removing) > 0 {
			cancel[tp] = nil
		}
	}
	w := c.App.Writer
	if len(cancel) > 0 {
		failed, err := alterReassignments(ctx, adm, cancel)
		if err != nil {
			return err
		}
		if len(failed) > 0 {
			return fmt.Errorf("error cancelling partition reassignment%s for:\n%s", plural(len(failed)), strings.Join(failed, "\n"))
		}
		var names []string
		for _, tp := range sortedTPs(cancel) {
			names = append(names, tp.String())
		}
		fmt.Fprintf(w, "Successfully cancelled partition reassignment%s for: %s\n", plural(len(names)), strings.Join(names, ","))
	} else {
		fmt.Fprintln(w, "None of the specified partition reassignments are active.")
	}
	states, err := logDirStates(ctx, adm, plan.dirs)
	if err != nil {
		return err
	}
	back := map[replicaRef]string{}
	for r, s := range states {
		if s.future != "" && s.inDir {
			back[r] = s.current // moving a replica to its own dir cancels its move
		}
	}
	if len(back) == 0 {
		fmt.Fprintln(w, "None of the specified partition moves are active.")
	} else if err := startLogDirMoves(ctx, adm, w, back, time.Duration(c.Int64("timeout"))*time.Millisecond); err != nil {
		return err
	}
	if !c.Bool("preserve-throttles") {
		return clearThrottles(ctx, adm, w, plan)
	}
	return nil
}

func reassignList(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	ongoing, err := adm.ListPartitionReassignments(ctx)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if len(ongoing) == 0 {
		fmt.Fprintln(w, "No partition reassignments found.")
		return nil
	}
	fmt.Fprintln(w, "Current partition reassignments:")
	for _, tp := range sortedTPs(ongoing) {
		r := ongoing[tp]
		line := fmt.Sprintf("%s: replicas: %s.", tp.String(), joinIDs(r.Replicas))
		if len(r.Adding) > 0 {
			line += fmt.Sprintf(" adding: %s.", joinIDs(r.Adding))
		}
		if len(r.Removing) > 0 {
			line += fmt.Sprintf(" removing: %s.", joinIDs(r.Removing))
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
