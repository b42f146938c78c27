package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/integration"
)

func TestMain(m *testing.M) {
	code := m.Run()
	integration.RemoveBinaryDir()
	os.Exit(code)
}

// cliResult is one run of the built keel binary.
type cliResult struct {
	stdout, stderr string
	exit           int
}

// keel runs the built binary against the cluster with stdin, as a script
// would, and returns its output and exit code.
func keel(t *testing.T, bootstrap, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if bootstrap != "" {
		args = append(args, "--bootstrap-server", bootstrap)
	}
	cmd := exec.CommandContext(ctx, integration.Binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.exit = exit.ExitCode()
	default:
		t.Fatalf("keel %v: %v", args, err)
	}
	return res
}

// wantLines fails the test for each of wants that out, what a command
// printed, lacks.
func wantLines(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, out)
		}
	}
}

// ok runs keel and fails the test unless it exits 0.
func ok(t *testing.T, bootstrap, stdin string, args ...string) string {
	t.Helper()
	r := keel(t, bootstrap, stdin, args...)
	if r.exit != 0 {
		t.Fatalf("keel %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.exit, r.stdout, r.stderr)
	}
	return r.stdout
}

// lagRow is one data row of `groups describe`.
type lagRow struct {
	topic                    string
	partition                int
	current, logEnd, lag     string
	consumer, host, clientID string
}

// describeRows parses the kafka-consumer-groups.sh --describe table,
// checking its header is exactly Kafka's.
func describeRows(t *testing.T, out string) []lagRow {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("describe header %q, want Kafka's %q", got, want)
	}
	var rows []lagRow
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 9 {
			t.Fatalf("describe row %q: %d columns", l, len(f))
		}
		p, _ := strconv.Atoi(f[2])
		rows = append(rows, lagRow{f[1], p, f[3], f[4], f[5], f[6], f[7], f[8]})
	}
	return rows
}

func totalLag(t *testing.T, rows []lagRow) int {
	t.Helper()
	sum := 0
	for _, r := range rows {
		n, err := strconv.Atoi(r.lag)
		if err != nil {
			t.Fatalf("LAG %q of %s-%d is not a number", r.lag, r.topic, r.partition)
		}
		sum += n
	}
	return sum
}

// The evidence: topics create → produce (stdin) → consume from the
// beginning (every line back, with keys) → consume with a group → groups
// describe shows LAG 0; reset-offsets --to-earliest --execute → lag equals
// the record count.
func TestCLITopicsProduceConsumeGroupsEndToEnd(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]

	out := ok(t, bs, "", "topics", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=86400000")
	if strings.TrimSpace(out) != "Created topic orders." {
		t.Fatalf("create printed %q", out)
	}
	if r := keel(t, bs, "", "topics", "create", "--topic", "orders"); r.exit != 1 || !strings.Contains(r.stderr, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("creating an existing topic: exit %d, stderr %q", r.exit, r.stderr)
	}
	ok(t, bs, "", "topics", "create", "--topic", "orders", "--if-not-exists")

	var names []string
	if err := json.Unmarshal([]byte(ok(t, bs, "", "topics", "list", "-o", "json")), &names); err != nil || !contains(names, "orders") {
		t.Fatalf("topics list -o json: %v %v", names, err)
	}
	// The kafka-topics.sh form of the same.
	if out := ok(t, bs, "", "topics", "--list"); !strings.Contains(out, "orders\n") {
		t.Fatalf("topics --list printed %q", out)
	}
	desc := ok(t, bs, "", "topics", "describe", "--topic", "orders")
	for _, want := range []string{"Topic: orders\tTopicId: ", "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=86400000", "\tTopic: orders\tPartition: 2\tLeader: 1\tReplicas: 1\tIsr: 1"} {
		if !strings.Contains(desc, want) {
			t.Fatalf("topics describe lacks %q:\n%s", want, desc)
		}
	}
	var topics []topicJSON
	if err := json.Unmarshal([]byte(ok(t, bs, "", "topics", "describe", "--topic", "orders", "-o", "json")), &topics); err != nil {
		t.Fatal(err)
	}
	if len(topics) != 1 || len(topics[0].Partitions) != 3 || topics[0].Configs["retention.ms"] != "86400000" {
		t.Fatalf("topics describe -o json: %+v", topics)
	}

	// kafka-topics.sh's reports against min.insync.replicas (1 here, the
	// broker default, so every partition of orders is at it) and its
	// --topics-with-overrides.
	ok(t, bs, "", "topics", "create", "--topic", "strict", "--partitions", "2", "--config", "min.insync.replicas=2")
	ok(t, bs, "", "topics", "create", "--topic", "plain", "--partitions", "1")
	partitionsOf := func(out string) (lines []string) {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "\tTopic: ") {
				f := strings.Fields(l)
				lines = append(lines, f[1]+"-"+f[3])
			} else if l != "" {
				lines = append(lines, "topic line "+l)
			}
		}
		return lines
	}
	for _, c := range []struct {
		flag string
		want string
	}{
		{"--under-min-isr-partitions", "[strict-0 strict-1]"},
		{"--at-min-isr-partitions", "[orders-0 orders-1 orders-2 plain-0]"},
		{"--under-replicated-partitions", "[]"},
	} {
		out := ok(t, bs, "", "topics", "describe", "--topic", "orders", "--topic", "strict", "--topic", "plain", c.flag)
		if got := fmt.Sprint(partitionsOf(out)); got != c.want {
			t.Errorf("topics describe %s: %s, want %s", c.flag, got, c.want)
		}
	}
	out = ok(t, bs, "", "topics", "describe", "--topic", "orders", "--topic", "strict", "--topic", "plain", "--topics-with-overrides")
	if lines := partitionsOf(out); len(lines) != 2 || !strings.Contains(lines[0], "Topic: orders\t") || !strings.Contains(lines[1], "Topic: strict\t") {
		t.Errorf("topics describe --topics-with-overrides: %q", lines)
	}
	if r := keel(t, bs, "", "topics", "describe", "--at-min-isr-partitions", "--unavailable-partitions"); r.exit == 0 || !strings.Contains(r.stderr, "at most one partition report") {
		t.Errorf("two reports: exit %d, stderr %q", r.exit, r.stderr)
	}

	const n = 30
	var input strings.Builder
	var want []string
	for i := range n {
		fmt.Fprintf(&input, "key-%d:value %d\n", i, i)
		want = append(want, fmt.Sprintf("key-%d:value %d", i, i))
	}
	ok(t, bs, input.String(), "produce", "--topic", "orders", "--property", "parse.key=true", "--property", "key.separator=:", "--header", "source=cli")

	r := keel(t, bs, "", "consume", "--topic", "orders", "--from-beginning", "--max-messages", strconv.Itoa(n),
		"--property", "print.key=true", "--property", "key.separator=:")
	if r.exit != 0 {
		t.Fatalf("consume: exit %d: %s", r.exit, r.stderr)
	}
	got := strings.Split(strings.TrimSpace(r.stdout), "\n")
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("consumed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("Processed a total of %d messages", n)) {
		t.Fatalf("consume stderr: %q", r.stderr)
	}

	// -o json lines carry topic, partition, offset, timestamp, key, value
	// and headers; each key lands on the partition murmur2 chooses, so the
	// same key is always on the same partition.
	jsonOut := ok(t, bs, "", "consume", "--topic", "orders", "--partition", "1", "--offset", "earliest", "--timeout-ms", "2000", "-o", "json")
	lines := strings.Split(strings.TrimSpace(jsonOut), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no records on partition 1")
	}
	for _, l := range lines {
		var rec recordJSON
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if rec.Topic != "orders" || rec.Partition != 1 || rec.Key == nil || rec.Value == nil || rec.Timestamp <= 0 ||
			len(rec.Headers) != 1 || rec.Headers[0].Key != "source" || *rec.Headers[0].Value != "cli" ||
			strings.TrimPrefix(*rec.Key, "key-") != strings.TrimPrefix(*rec.Value, "value ") {
			t.Fatalf("json record %s", l)
		}
	}

	// --offset N on one --partition, and --timestamp on all of them.
	if out := ok(t, bs, "", "consume", "--topic", "orders", "--partition", "0", "--offset", "1", "--max-messages", "1", "--property", "print.offset=true"); !strings.HasPrefix(out, "Offset:1\t") {
		t.Fatalf("--partition 0 --offset 1: %q", out)
	}
	hourAgo := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	if out := ok(t, bs, "", "consume", "--topic", "orders", "--timestamp", hourAgo, "--timeout-ms", "2000"); strings.Count(out, "\n") != n {
		t.Fatalf("--timestamp an hour ago: %d records, want %d", strings.Count(out, "\n"), n)
	}
	inAnHour := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	if out := ok(t, bs, "", "consume", "--topic", "orders", "--timestamp", inAnHour, "--timeout-ms", "1000"); out != "" {
		t.Fatalf("--timestamp in an hour: %q", out)
	}

	// A group reads everything and commits it: lag 0 on every partition.
	gr := keel(t, bs, "", "consume", "--topic", "orders", "--group", "billing", "--from-beginning", "--timeout-ms", "3000")
	if gr.exit != 0 || len(strings.Split(strings.TrimSpace(gr.stdout), "\n")) != n {
		t.Fatalf("group consume: exit %d, %d lines\n%s", gr.exit, len(strings.Split(strings.TrimSpace(gr.stdout), "\n")), gr.stderr)
	}
	rows := describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "billing"))
	if len(rows) != 3 || totalLag(t, rows) != 0 {
		t.Fatalf("after consuming: rows %+v, want 3 partitions with LAG 0", rows)
	}
	sumCurrent := 0
	for _, r := range rows {
		cur, _ := strconv.Atoi(r.current)
		sumCurrent += cur
		if r.current != r.logEnd || r.consumer != "-" {
			t.Fatalf("row %+v: current must equal log end, no consumer left", r)
		}
	}
	if sumCurrent != n {
		t.Fatalf("committed offsets add up to %d, want %d", sumCurrent, n)
	}
	if names := ok(t, bs, "", "groups", "list"); !strings.Contains(names, "billing") {
		t.Fatalf("groups list: %q", names)
	}
	// kafka-consumer-groups.sh --list's --state and --type: a column each,
	// and a filter when a list follows (Kafka's widths: the group name + 10,
	// 20 for the others).
	listed := fmt.Sprintf("%-25s %-20s %-20s\n%-25s %-20s %-20s\n", "GROUP", "TYPE", "STATE", "billing", "Classic", "Empty")
	if out := ok(t, bs, "", "groups", "--list", "--state", "Stable,preparingrebalance", "--type"); !strings.HasPrefix(out, "GROUP ") || strings.Contains(out, "billing") {
		t.Fatalf("groups --list --state Stable,preparingrebalance --type: %q", out)
	}
	if out := ok(t, bs, "", "groups", "list", "--type", "classic", "--state", "EMPTY"); out != listed {
		t.Fatalf("groups list --type classic --state EMPTY:\n%q\nwant\n%q", out, listed)
	}
	if out := ok(t, bs, "", "groups", "list", "--type=consumer"); out != fmt.Sprintf("%-25s %-20s\n", "GROUP", "TYPE") {
		t.Fatalf("groups list --type=consumer: %q", out)
	}
	if r := keel(t, bs, "", "groups", "list", "--state", "Sleeping"); r.exit != 1 || !strings.Contains(r.stderr, "Valid states are: ") {
		t.Fatalf("groups list --state Sleeping: exit %d, stderr %q", r.exit, r.stderr)
	}

	// The Kafka Streams quickstart reads its word counts (8-byte longs)
	// with LongDeserializer through DefaultMessageFormatter.
	counts := []*kgo.Record{{Topic: "counts", Key: []byte("kafka"), Value: binary.BigEndian.AppendUint64(nil, 3)},
		{Topic: "counts", Key: []byte("streams"), Value: []byte("oops")}}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("counts"))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(context.Background(), counts...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	streams := []string{"consume", "--topic", "counts", "--from-beginning", "--formatter", "org.apache.kafka.tools.consumer.DefaultMessageFormatter",
		"--property", "print.key=true", "--property", "print.value=true",
		"--property", "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer",
		"--property", "value.deserializer=org.apache.kafka.common.serialization.LongDeserializer"}
	if out := ok(t, bs, "", append(streams, "--max-messages", "1")...); out != "kafka\t3\n" {
		t.Fatalf("the Streams quickstart's consumer: %q", out)
	}
	if r := keel(t, bs, "", append(streams, "--timeout-ms", "3000")...); r.exit != 1 || r.stdout != "kafka\t3\n" || !strings.Contains(r.stderr, "offset 1: value: size of data received by LongDeserializer is not 8") {
		t.Fatalf("a value LongDeserializer refuses: exit %d, stdout %q, stderr %q", r.exit, r.stdout, r.stderr)
	}

	// --skip-message-on-error reports the record LongDeserializer refuses
	// and goes on.
	if r := keel(t, bs, "", append(streams, "--timeout-ms", "3000", "--skip-message-on-error")...); r.exit != 0 || r.stdout != "kafka\t3\n" || !strings.Contains(r.stderr, "skipping a record: counts-0 offset 1: value: size of data received by LongDeserializer is not 8") {
		t.Fatalf("--skip-message-on-error: exit %d, stdout %q, stderr %q", r.exit, r.stdout, r.stderr)
	}
	// __consumer_offsets through Kafka's OffsetsMessageFormatter: billing's
	// commits, one JSON object a line.
	out = ok(t, bs, "", "consume", "--topic", "__consumer_offsets", "--from-beginning", "--timeout-ms", "3000",
		"--formatter", "org.apache.kafka.tools.consumer.OffsetsMessageFormatter")
	commitLine := regexp.MustCompile(`(?m)^\{"key":\{"type":1,"data":\{"group":"billing","topic":"orders","partition":[0-2]\}\},"value":\{"version":3,"data":\{"offset":\d+,"leaderEpoch":-?\d+,"metadata":"","commitTimestamp":\d+\}\}\}$`)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(commitLine.FindAllString(out, -1)) < 3 || len(commitLine.FindAllString(out, -1)) != len(lines) {
		t.Fatalf("__consumer_offsets with OffsetsMessageFormatter:\n%s", out)
	}

	// --include: every topic whose whole name matches, directly or as a
	// group (never __consumer_offsets, which "billing" committed to).
	for _, args := range [][]string{{}, {"--group", "include-group"}} {
		out := ok(t, bs, "", append([]string{"consume", "--include", "ord.*|count.|__consumer_.*", "--from-beginning", "--timeout-ms", "3000",
			"--property", "print.key=true"}, args...)...)
		if lines := strings.Count(out, "\n"); lines != n+2 || !strings.Contains(out, "streams\toops\n") || !strings.Contains(out, "key-") {
			t.Fatalf("consume --include %v: %d lines, want %d\n%s", args, lines, n+2, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--include", "ord.*", "--topic", "orders"}, "exactly one of --include or --topic"},
		{[]string{"--from-beginning"}, "exactly one of --include or --topic"},
		{[]string{"--include", "ord.*", "--partition", "0"}, "the topic is required when partition is specified"},
		{[]string{"--include", "or"}, "no topic matches --include or"},
		{[]string{"--include", "(unclosed"}, "--include"},
	} {
		if r := keel(t, bs, "", append([]string{"consume", "--timeout-ms", "1000"}, tc.args...)...); r.exit != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("consume %v: exit %d, stderr %q; want %q", tc.args, r.exit, r.stderr, tc.want)
		}
	}

	// reset-offsets is a dry run by default, then --execute commits.
	dry := ok(t, bs, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest")
	if !regexp.MustCompile(`(?m)^GROUP\s+TOPIC\s+PARTITION\s+NEW-OFFSET$`).MatchString(dry) || strings.Count(dry, "billing") != 3 {
		t.Fatalf("dry run output:\n%s", dry)
	}
	if lag := totalLag(t, describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "billing"))); lag != 0 {
		t.Fatalf("a dry run changed the offsets: lag %d", lag)
	}
	ok(t, bs, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest", "--execute")
	rows = describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "billing"))
	if lag := totalLag(t, rows); lag != n {
		t.Fatalf("after --to-earliest --execute: lag %d, want %d\n%+v", lag, n, rows)
	}
	var groups []groupDescribeJSON
	if err := json.Unmarshal([]byte(ok(t, bs, "", "groups", "describe", "--group", "billing", "-o", "json")), &groups); err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || len(groups[0].Partitions) != 3 || groups[0].State != "Empty" {
		t.Fatalf("groups describe -o json: %+v", groups)
	}

	// Partition 0 moved to its last record: lag 1 there.
	ok(t, bs, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders:0", "--to-latest", "--execute")
	ok(t, bs, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders:0", "--shift-by", "-1", "--execute")
	for _, r := range describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "billing")) {
		if r.partition == 0 && r.lag != "1" {
			t.Fatalf("after --shift-by -1: %+v", r)
		}
	}
	// --by-duration (every record is younger than an hour: the log
	// starts) with --export's CSV, read back by --from-file.
	plan := ok(t, bs, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders", "--by-duration", "PT1H", "--export")
	if plan != "orders,0,0\norders,1,0\norders,2,0\n" {
		t.Fatalf("--by-duration PT1H --export printed %q", plan)
	}
	csv := filepath.Join(t.TempDir(), "plan.csv")
	if err := os.WriteFile(csv, []byte("orders,0,1\nother-group,orders,1,5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, bs, "", "groups", "reset-offsets", "--group", "billing", "--from-file", csv, "--execute", "--export"); out != "orders,0,1\n" {
		t.Fatalf("--from-file printed %q", out)
	}
	for _, r := range describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "billing")) {
		if r.partition == 0 && r.current != "1" {
			t.Fatalf("after --from-file: %+v", r)
		}
	}
	if r := keel(t, bs, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders", "--by-duration", "1h"); r.exit == 0 || !strings.Contains(r.stderr, "PnDTnHnMnS") {
		t.Fatalf("--by-duration 1h: %+v", r)
	}

	// Partition 0's committed offset deleted (kafka-consumer-groups.sh's
	// form): its row has no current offset any more.
	out = ok(t, bs, "", "groups", "--delete-offsets", "--group", "billing", "--topic", "orders:0")
	if !strings.Contains(out, "Request succeed for deleting offsets with topic orders group billing") ||
		!regexp.MustCompile(`(?m)^orders\s+0\s+Successful`).MatchString(out) {
		t.Fatalf("groups --delete-offsets:\n%s", out)
	}
	rows = describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "billing"))
	kept := 0
	for _, r := range rows {
		if r.partition == 0 && r.current != "-" {
			t.Fatalf("after --delete-offsets: %+v", r)
		}
		if r.partition != 0 && r.current != "-" {
			kept++
		}
	}
	if kept != 2 {
		t.Fatalf("after --delete-offsets of partition 0, the others' offsets: %+v", rows)
	}

	if out := ok(t, bs, "", "groups", "delete", "--group", "billing"); !strings.Contains(out, "Deletion of requested consumer groups ('billing') was successful.") {
		t.Fatalf("groups delete: %q", out)
	}
	if r := keel(t, bs, "", "groups", "describe", "--group", "billing"); r.exit != 1 || !strings.Contains(r.stderr, "GROUP_ID_NOT_FOUND") {
		t.Fatalf("describe of a deleted group: exit %d %q", r.exit, r.stderr)
	}

	ok(t, bs, "", "topics", "alter", "--topic", "orders", "--partitions", "4", "--config", "retention.ms=3600000")
	if desc := ok(t, bs, "", "topics", "describe", "--topic", "orders"); !strings.Contains(desc, "PartitionCount: 4") || !strings.Contains(desc, "retention.ms=3600000") {
		t.Fatalf("after alter:\n%s", desc)
	}

	// kafka-topics.sh's --replica-assignment, on create and on alter (every
	// partition listed, the existing ones skipped), and --topic as a
	// regular expression for list, describe and delete.
	ok(t, bs, "", "topics", "--create", "--topic", "placed.a", "--replica-assignment", "1,1")
	ok(t, bs, "", "topics", "--alter", "--topic", "placed.a", "--partitions", "3", "--replica-assignment", "1,1,1")
	ok(t, bs, "", "topics", "create", "--topic", "placed.b", "--replica-assignment", "1")
	if out := ok(t, bs, "", "topics", "--list", "--topic", `placed\..*`); out != "placed.a\nplaced.b\n" {
		t.Fatalf("topics --list --topic 'placed\\..*': %q", out)
	}
	if desc := ok(t, bs, "", "topics", "--describe", "--topic", "placed.*"); strings.Count(desc, "\tPartition: ") != 4 || !strings.Contains(desc, "Topic: placed.a\tPartition: 2\tLeader: 1\tReplicas: 1\tIsr: 1") {
		t.Fatalf("topics --describe --topic 'placed.*':\n%s", desc)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--topic", "x", "--replica-assignment", "1", "--partitions", "2"}, "cannot be used with --partitions"},
		{[]string{"create", "--topic", "x", "--replica-assignment", "1:1"}, "duplicate entries"},
		{[]string{"alter", "--topic", "placed.a", "--partitions", "4", "--replica-assignment", "1,1"}, "has 2 partitions, --partitions 4"},
		{[]string{"describe", "--topic", "placed-.*"}, "topic 'placed-.*' does not exist as expected"},
		{[]string{"delete", "--topic", "nothing.*"}, "topic 'nothing.*' does not exist as expected"},
	} {
		if r := keel(t, bs, "", append([]string{"topics"}, tc.args...)...); r.exit != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("topics %v: exit %d, stderr %q; want %q", tc.args, r.exit, r.stderr, tc.want)
		}
	}
	ok(t, bs, "", "topics", "delete", "--topic", "nothing.*", "--if-exists")
	if out := ok(t, bs, "", "topics", "delete", "--topic", "placed.*"); out != "Deleted topic placed.a.\nDeleted topic placed.b.\n" {
		t.Fatalf("topics delete --topic 'placed.*': %q", out)
	}

	ok(t, bs, "", "topics", "delete", "--topic", "orders")
	if r := keel(t, bs, "", "topics", "describe", "--topic", "orders"); r.exit != 1 || !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("describe of a deleted topic: exit %d %q", r.exit, r.stderr)
	}
}

// Scripts must be able to trust the exit code: bad input exits 1 with a
// message naming the problem (and the Kafka error code when there is one).
func TestCLIBadInputExitsNonZero(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ok(t, bs, "", "topics", "create", "--topic", "t1", "--partitions", "1")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"produce to an unknown topic", "x\n", []string{"produce", "--topic", "nope"}, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"consume an unknown topic", "", []string{"consume", "--topic", "nope", "--timeout-ms", "1000"}, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"a partition that does not exist", "x\n", []string{"produce", "--topic", "t1", "--partition", "5"}, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"partitions not a number", "", []string{"topics", "create", "--topic", "t2", "--partitions", "abc"}, "partitions"},
		{"zero partitions", "", []string{"topics", "create", "--topic", "t2", "--partitions", "0"}, "--partitions 0"},
		{"bad acks", "x\n", []string{"produce", "--topic", "t1", "--acks", "2"}, "acks"},
		{"bad compression", "x\n", []string{"produce", "--topic", "t1", "--compression", "brotli"}, "compression"},
		{"a line without the key separator", "nokey\n", []string{"produce", "--topic", "t1", "--property", "parse.key=true"}, "no key separator"},
		{"unknown formatter property", "", []string{"consume", "--topic", "t1", "--property", "print.colour=true"}, "print.colour"},
		{"offset without partition", "", []string{"consume", "--topic", "t1", "--offset", "5"}, "needs --partition"},
		{"group with partition", "", []string{"consume", "--topic", "t1", "--group", "g", "--partition", "0"}, "--group"},
		{"bad output format", "", []string{"topics", "list", "-o", "yaml"}, "text or json"},
		{"unknown group", "", []string{"groups", "describe", "--group", "nope"}, "GROUP_ID_NOT_FOUND"},
		{"reset without a target", "", []string{"groups", "reset-offsets", "--group", "g", "--topic", "t1"}, "exactly one of"},
		{"zero throughput", "", []string{"perf", "produce", "--topic", "t1", "--num-records", "10", "--record-size", "10", "--throughput", "0"}, "--throughput"},
		{"e2e record too small", "", []string{"perf", "e2e", "--topic", "t1", "--num-records", "10", "--record-size", "8"}, "--record-size"},
		{"e2e bad acks", "", []string{"perf", "e2e", "--topic", "t1", "--num-records", "10", "--producer-acks", "2"}, "--producer-acks"},
		{"e2e unknown topic", "", []string{"perf", "e2e", "--topic", "nope", "--num-records", "10"}, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"missing required flag", "", []string{"topics", "create"}, "topic"},
		{"bad property value", "x\n", []string{"produce", "--topic", "t1", "--producer-property", "linger.ms=soon"}, "linger.ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := keel(t, bs, tc.stdin, tc.args...)
			if r.exit != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("keel %v: exit %d, stderr %q; want exit 1 and %q", tc.args, r.exit, r.stderr, tc.want)
			}
		})
	}
	// Nothing of the failed produces reached the topic.
	if out := ok(t, bs, "", "consume", "--topic", "t1", "--from-beginning", "--timeout-ms", "1500"); out != "" {
		t.Fatalf("t1 holds records after failed produces: %q", out)
	}
}

// keel perf prints kafka-producer-perf-test's and kafka-consumer-perf-test's
// figures, with plain periodic lines when its output is not a terminal.
func TestCLIPerfPrintsThroughputAndLatency(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ok(t, bs, "", "topics", "create", "--topic", "perf", "--partitions", "2")
	const n = 20000
	out := ok(t, bs, "", "perf", "produce", "--topic", "perf", "--num-records", strconv.Itoa(n), "--record-size", "100",
		"--throughput", "-1", "--producer-props", "acks=all,linger.ms=2", "--reporting-interval", "200")
	final := regexp.MustCompile(`(?m)^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, [\d.]+ ms 99.9th\.$`)
	m := final.FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(n) {
		t.Fatalf("perf produce output:\n%s", out)
	}
	if strings.Contains(out, "\r") {
		t.Fatalf("a live progress line was written to a pipe:\n%q", out)
	}
	t.Logf("perf produce:\n%s", out)

	// Kafka's form: --producer-props takes its key=value pairs one after
	// another, bootstrap.servers among them (a list, its commas kept), and
	// options after them still count. Each of these runs depends on a
	// property after the first: the servers, then max.request.size.
	kafkaForm := []string{"perf", "produce", "--topic", "perf", "--num-records", "100", "--record-size", "100", "--producer-props",
		"acks=all", "bootstrap.servers=" + bs + "," + bs, "linger.ms=0"}
	if out := ok(t, "", "", append(kafkaForm, "--throughput", "-1")...); !strings.HasPrefix(out, "100 records sent") {
		t.Fatalf("perf produce in Kafka's form:\n%s", out)
	}
	if r := keel(t, "", "", append(kafkaForm, "max.request.size=50", "--throughput", "-1")...); r.exit != 1 || !strings.Contains(r.stderr, "larger than max.request.size") {
		t.Fatalf("perf produce with max.request.size=50 after other properties: exit %d, stderr %q", r.exit, r.stderr)
	}

	// At a rate: the sends are spread over the run (the throttle), and
	// each record carries its send time as its timestamp.
	ok(t, bs, "", "topics", "create", "--topic", "perf-rate", "--partitions", "1")
	const rated, rate = 1500, 3000
	before := time.Now().Add(-time.Millisecond) // timestamps are in ms
	out = ok(t, bs, "", "perf", "produce", "--topic", "perf-rate", "--num-records", strconv.Itoa(rated), "--record-size", "10",
		"--throughput", strconv.Itoa(rate), "--reporting-interval", "200")
	after := time.Now()
	if m := final.FindStringSubmatch(out); m == nil || m[1] != strconv.Itoa(rated) {
		t.Fatalf("perf produce at %d/s output:\n%s", rate, out)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"perf-rate": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stamps []time.Time
	for len(stamps) < rated && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { stamps = append(stamps, r.Timestamp) })
	}
	if len(stamps) != rated {
		t.Fatalf("read %d of %d records", len(stamps), rated)
	}
	first, last := stamps[0], stamps[len(stamps)-1]
	if first.Before(before) || last.After(after) {
		t.Fatalf("timestamps %v..%v outside the run %v..%v", first, last, before, after)
	}
	// 1,500 records at 3,000/s: the last is sent ~0.5 s after the first.
	if spread := last.Sub(first); spread < 400*time.Millisecond {
		t.Fatalf("records sent within %v at --throughput %d: not throttled", spread, rate)
	}

	out = ok(t, bs, "", "perf", "consume", "--topic", "perf", "--messages", strconv.Itoa(n), "--timeout", "10000")
	if !strings.Contains(out, "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec") ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^%d records consumed, [\d.]+ records/sec \([\d.]+ MB/sec\).*99\.9th\.$`, n)).MatchString(out) {
		t.Fatalf("perf consume output:\n%s", out)
	}
	t.Logf("perf consume:\n%s", out)

	// keel perf e2e: one record at a time, then at a rate; every record
	// of the run read back, the earlier ones skipped.
	for _, args := range [][]string{
		{"--num-records", "300"},
		{"--num-records", "3000", "--throughput", "3000", "--producer-acks", "all"},
	} {
		out = ok(t, bs, "", append([]string{"perf", "e2e", "--topic", "perf", "--reporting-interval", "200"}, args...)...)
		n := args[1]
		if !regexp.MustCompile(`(?m)^`+n+` records read, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg end-to-end latency, .* [\d.]+ ms 99\.9th\.$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^Avg latency: [\d.]+ ms\nPercentiles: 50th = [\d.]+, 99th = [\d.]+, 99\.9th = [\d.]+$`).MatchString(out) {
			t.Fatalf("perf e2e %v output:\n%s", args, out)
		}
		t.Logf("perf e2e %v:\n%s", args, out)
	}
}

// --command-config reads Kafka client properties; unknown ones are warned
// about, not fatal.
func TestCLICommandConfig(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	props := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(props, []byte("client.id=ops-script\nrequest.timeout.ms=5000\nacks=1\ncompression.type=zstd\nauto.offset.reset=earliest\nsasl.mechanism=PLAIN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, bs, "", "topics", "create", "--topic", "cfg", "--partitions", "1", "--command-config", props)
	r := keel(t, bs, "a\nb\n", "produce", "--topic", "cfg", "--command-config", props)
	if r.exit != 0 || !strings.Contains(r.stderr, "sasl.mechanism is ignored with security.protocol=PLAINTEXT") {
		t.Fatalf("produce with --command-config: exit %d, stderr %q", r.exit, r.stderr)
	}
	// Offsets committed by a consumer that stopped after --max-messages.
	out := ok(t, bs, "", "consume", "--topic", "cfg", "--group", "cfg-group", "--max-messages", "2", "--command-config", props)
	if out != "a\nb\n" {
		t.Fatalf("consume with auto.offset.reset=earliest from the file: %q", out)
	}
	rows := describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "cfg-group"))
	if len(rows) != 1 || rows[0].lag != "0" || rows[0].current != "2" {
		t.Fatalf("rows %+v", rows)
	}

	// While a member is in the group, describe shows it with the client.id
	// from the file, and reset-offsets refuses (Kafka's rule: the group
	// must be inactive). Ctrl-C stops the consumer cleanly (exit 0).
	member := exec.Command(integration.Binary(t), "consume", "--topic", "cfg", "--group", "cfg-group", "--command-config", props, "--bootstrap-server", bs)
	var memberErr bytes.Buffer
	member.Stderr = &memberErr
	if err := member.Start(); err != nil {
		t.Fatal(err)
	}
	defer member.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows = describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "cfg-group"))
		if len(rows) == 1 && rows[0].consumer != "-" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member never showed up: %+v\n%s", rows, memberErr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rows[0].clientID != "ops-script" || !strings.HasPrefix(rows[0].consumer, "ops-script-") || rows[0].host == "-" {
		t.Fatalf("active member row %+v", rows[0])
	}
	if r := keel(t, bs, "", "groups", "reset-offsets", "--group", "cfg-group", "--all-topics", "--to-earliest", "--execute"); r.exit != 1 || !strings.Contains(r.stderr, "inactive") {
		t.Fatalf("reset of an active group: exit %d %q", r.exit, r.stderr)
	}
	if err := member.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := member.Wait(); err != nil {
		t.Fatalf("consumer after Ctrl-C: %v\n%s", err, memberErr.String())
	}
	ok(t, bs, "", "groups", "reset-offsets", "--group", "cfg-group", "--all-topics", "--to-earliest", "--execute")
	if rows := describeRows(t, ok(t, bs, "", "groups", "describe", "--group", "cfg-group")); rows[0].lag != "2" {
		t.Fatalf("after the member left and the reset: %+v", rows)
	}

	// The console tools' other names for the same things: the file as
	// --producer.config and --consumer.config (Kafka before 4.2), the
	// properties as Kafka 4.2's --command-property, --reader-property and
	// --formatter-property (KIP-1147).
	ok(t, bs, "k:v\n", "produce", "--topic", "cfg", "--producer.config", props, "--command-property", "linger.ms=0",
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
	out = ok(t, bs, "", "consume", "--topic", "cfg", "--group", "cfg-group-2", "--max-messages", "3", "--consumer.config", props,
		"--command-property", "max.poll.records=1", "--formatter-property", "print.key=true")
	if out != "null\ta\nnull\tb\nk\tv\n" {
		t.Fatalf("consume with --consumer.config and --formatter-property print.key=true: %q", out)
	}
	if r := keel(t, bs, "", "consume", "--topic", "cfg", "--consumer.config", props, "--command-config", props); r.exit != 1 || !strings.Contains(r.stderr, "give one") {
		t.Fatalf("consume with both files: exit %d, stderr %q", r.exit, r.stderr)
	}

	// Config providers, as Kafka's clients resolve them: the servers from
	// the environment; a provider class Keel lacks stops the command.
	t.Setenv("KEEL_TEST_BOOTSTRAP", bs)
	provided := filepath.Join(t.TempDir(), "provided.properties")
	if err := os.WriteFile(provided, []byte("config.providers=env\n"+
		"config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"+
		"bootstrap.servers=${env:KEEL_TEST_BOOTSTRAP}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, "", "", "topics", "list", "--command-config", provided); !strings.Contains(out, "cfg") {
		t.Fatalf("topics list with bootstrap.servers from the environment: %q", out)
	}
	if err := os.WriteFile(provided, []byte("config.providers=vault\nconfig.providers.vault.class=com.example.Vault\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := keel(t, bs, "", "topics", "list", "--command-config", provided); r.exit != 1 || !strings.Contains(r.stderr, "cannot load Java classes") {
		t.Fatalf("a provider class Keel lacks: exit %d, stderr %q", r.exit, r.stderr)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The line reader follows kafka-console-producer's LineMessageReader.
func TestCLILineReaderParsesKafkaConsoleProducerLines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		props   map[string]string
		headers []string
		line    string
		key     *string
		value   *string
		hdrs    string // k=v;... with <nil> for a null value
		err     string
	}{
		{name: "a plain line is the value", line: "hello world", value: ptr("hello world")},
		{name: "parse.key splits at the first separator", props: map[string]string{"parse.key": "true", "key.separator": ":"}, line: "k:v:w", key: ptr("k"), value: ptr("v:w")},
		{name: "the default key separator is a tab", props: map[string]string{"parse.key": "true"}, line: "k\tv", key: ptr("k"), value: ptr("v")},
		{name: "a missing separator is an error", props: map[string]string{"parse.key": "true"}, line: "kv", err: "no key separator"},
		{name: "ignore.error sends it without a key", props: map[string]string{"parse.key": "true", "ignore.error": "true"}, line: "kv", value: ptr("kv")},
		{name: "headers come first", props: map[string]string{"parse.headers": "true", "parse.key": "true", "key.separator": ":"},
			line: "h1:a,h2:b\tk:v", key: ptr("k"), value: ptr("v"), hdrs: "h1=a;h2=b"},
		{name: "null.marker makes nulls", props: map[string]string{"parse.key": "true", "key.separator": ":", "null.marker": "NULL"}, line: "NULL:NULL"},
		{name: "--header is added to every record", headers: []string{"src=cli"}, line: "v", value: ptr("v"), hdrs: "src=cli"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lr, err := newLineReader("t", tc.props, tc.headers, -1)
			if err != nil {
				t.Fatal(err)
			}
			r, err := lr.record(tc.line)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sameBytes(r.Key, tc.key) || !sameBytes(r.Value, tc.value) {
				t.Fatalf("key %q value %q", r.Key, r.Value)
			}
			var hs []string
			for _, h := range r.Headers {
				v := "<nil>"
				if h.Value != nil {
					v = string(h.Value)
				}
				hs = append(hs, h.Key+"="+v)
			}
			if strings.Join(hs, ";") != tc.hdrs {
				t.Fatalf("headers %q, want %q", strings.Join(hs, ";"), tc.hdrs)
			}
		})
	}
}

// The text formatter follows kafka-console-consumer's DefaultMessageFormatter.
func TestCLIFormatterPrintsLikeKafkaConsoleConsumer(t *testing.T) {
	rec := &client.Record{Topic: "t", Partition: 2, Offset: 7, Timestamp: time.UnixMilli(1700000000123), Key: []byte("k"), Value: []byte("v"),
		Headers: []client.Header{{Key: "a", Value: []byte("1")}, {Key: "b"}}}
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{nil, "v\n"},
		{map[string]string{"print.key": "true"}, "k\tv\n"},
		{map[string]string{"print.key": "true", "key.separator": ":"}, "k:v\n"},
		{map[string]string{"print.timestamp": "true", "print.partition": "true", "print.offset": "true", "print.headers": "true", "print.key": "true"},
			"CreateTime:1700000000123\tPartition:2\tOffset:7\ta:1,b:null\tk\tv\n"},
		{map[string]string{"print.key": "true", "print.value": "false"}, "k\n"},
	} {
		f, err := newMessageFormatter(tc.props, false)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := f.write(&b, rec); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%v: %q, want %q", tc.props, b.String(), tc.want)
		}
	}
	// A topic with message.timestamp.type=LogAppendTime prints the broker's
	// time under that name, as kafka-console-consumer does.
	appended := *rec
	appended.TimestampType = client.LogAppendTime
	f, err := newMessageFormatter(map[string]string{"print.timestamp": "true"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var lb bytes.Buffer
	if err := f.write(&lb, &appended); err != nil || lb.String() != "LogAppendTime:1700000000123\tv\n" {
		t.Errorf("LogAppendTime record: %q, %v", lb.String(), err)
	}
	keyless := &client.Record{Topic: "t", Value: []byte{0xff, 0x00}, Timestamp: time.UnixMilli(1)}
	f, _ = newMessageFormatter(nil, true)
	var b bytes.Buffer
	if err := f.write(&b, keyless); err != nil {
		t.Fatal(err)
	}
	if want := `{"topic":"t","partition":0,"offset":0,"timestamp":1,"key":null,"value":null,"value_base64":"/wA=","headers":[]}` + "\n"; b.String() != want {
		t.Fatalf("json %s, want %s", b.String(), want)
	}
}

func ptr(s string) *string { return &s }

func sameBytes(b []byte, s *string) bool {
	if s == nil {
		return b == nil
	}
	return b != nil && string(b) == *s
}
