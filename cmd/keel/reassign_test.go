package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/integration"
)

// TestCLIReassignPartitions drives kafka-reassign-partitions.sh's workflow
// against three brokers with two log dirs each: generate a plan, execute it
// throttled (a replica moved to another broker, another moved to its
// broker's other log dir), verify until done (which clears the
// throttles); a reordering of replicas and kafka-leader-election.sh's
// preferred election after it; then a reassignment held back by a 1 B/s
// throttle is listed, refused a second execute without --additional, and
// cancelled. Every record stays readable throughout.
func TestCLIReassignPartitions(t *testing.T) {
	nodes := []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}}
	// Small replica fetches, so that a throttled new replica cannot copy
	// a partition in its first fetch.
	c := integration.StartJBODCluster(t, nodes, 2, "replica.fetch.max.bytes=4096")
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, err := client.NewAdmin(ctx, client.SeedBrokers(bs))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	ok(t, bs, "", "topics", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "2")
	var lines strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&lines, "%d-%s\n", i, strings.Repeat("v", 100))
	}
	ok(t, bs, lines.String(), "produce", "--topic", "orders")
	assignment := func() map[int32][]int32 {
		t.Helper()
		mds, err := adm.DescribeTopics(ctx, "orders")
		if err != nil || mds[0].Err != nil {
			t.Fatalf("describe orders: %v %v", err, mds)
		}
		out := map[int32][]int32{}
		for _, p := range mds[0].Partitions {
			out[p.Partition] = p.Replicas
		}
		return out
	}
	before := assignment()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// generate: the current assignment as a plan, and a proposal over the
	// brokers named.
	topics := write("topics.json", `{"topics":[{"topic":"orders"}],"version":1}`)
	out := ok(t, bs, "", "reassign-partitions", "generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2,3")
	parts := strings.Split(out, "\n")
	if len(parts) != 6 || parts[0] != "Current partition replica assignment" || parts[3] != "Proposed partition reassignment configuration" {
		t.Fatalf("generate printed:\n%s", out)
	}
	var current, proposed reassignPlan
	if err := json.Unmarshal([]byte(parts[1]), &current); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(parts[4]), &proposed); err != nil {
		t.Fatal(err)
	}
	if len(current.Partitions) != 3 || len(proposed.Partitions) != 3 {
		t.Fatalf("generate printed:\n%s", out)
	}
	for i, p := range current.Partitions {
		if p.Topic != "orders" || p.Partition != int32(i) || !slices.Equal(p.Replicas, before[int32(i)]) || !slices.Equal(p.LogDirs, []string{"any", "any"}) {
			t.Errorf("current assignment of partition %d: %+v, want %v", i, p, before[int32(i)])
		}
	}
	leaders := map[int32]bool{}
	for _, p := range proposed.Partitions {
		if len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] {
			t.Errorf("proposed %+v", p)
		}
		leaders[p.Replicas[0]] = true
	}
	if len(leaders) != 3 {
		t.Errorf("proposed leaders %v: not spread over the three brokers", leaders)
	}

	// execute: orders-0 gets the broker it lacks in place of its second
	// replica; orders-1 keeps its brokers, its first replica moving to
	// its broker's other log dir. The flag form, as the script's.
	other := func(replicas []int32) int32 {
		for _, b := range []int32{1, 2, 3} {
			if !slices.Contains(replicas, b) {
				return b
			}
		}
		t.Fatalf("no broker outside %v", replicas)
		return 0
	}
	target0 := []int32{before[0][0], other(before[0])}
	mover := before[1][0]
	dirs, err := adm.DescribeLogDirs(ctx, mover)
	if err != nil {
		t.Fatal(err)
	}
	var toDir string
	for _, d := range dirs {
		if !slices.ContainsFunc(d.Replicas, func(r client.LogDirReplica) bool { return r.Topic == "orders" && r.Partition == 1 }) {
			toDir = d.Dir
		}
	}
	if toDir == "" || len(dirs) != 2 {
		t.Fatalf("broker %d's log dirs: %+v", mover, dirs)
	}
	plan := write("plan.json", formatPlan(map[client.TopicPartition][]int32{{Topic: "orders", Partition: 0}: target0, {Topic: "orders", Partition: 1}: before[1]},
		map[replicaRef]string{{client.TopicPartition{Topic: "orders", Partition: 1}, mover}: toDir}))
	out = ok(t, bs, "", "reassign-partitions", "--execute", "--reassignment-json-file", plan, "--throttle", "50000000", "--replica-alter-log-dirs-throttle", "50000000")
	rollback := formatPlan(map[client.TopicPartition][]int32{{Topic: "orders", Partition: 0}: before[0], {Topic: "orders", Partition: 1}: before[1]}, nil)
	wantLines(t, "execute", out,
		"Current partition replica assignment\n\n"+rollback+"\n\nSave this to use as the --reassignment-json-file option during rollback\n",
		"Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n",
		"The inter-broker throttle limit was set to 50000000 B/s\n",
		"The replica-alter-dir throttle limit was set to 50000000 B/s\n",
		"Successfully started partition reassignments for orders-0,orders-1\n",
		fmt.Sprintf("Successfully started moving log directory to %s for replica orders-1 with broker %d\n", toDir, mover))
	// The throttled replicas: the partitions' current replicas lead the
	// copy, orders-0's new replica follows; Kafka's order ("0:1,0:3,...").
	var leaderThrottled []string
	for p := range int32(2) {
		for _, r := range before[p] {
			leaderThrottled = append(leaderThrottled, fmt.Sprintf("%d:%d", p, r))
		}
	}
	slices.Sort(leaderThrottled)
	lt, ft := strings.Join(leaderThrottled, ","), fmt.Sprintf("0:%d", target0[1])
	wantLines(t, "the topic's throttles", ok(t, bs, "", "configs", "describe", "--topic", "orders"),
		"  leader.replication.throttled.replicas="+lt+" sensitive=false ", "  follower.replication.throttled.replicas="+ft+" sensitive=false ")
	wantLines(t, "broker 2's throttles", ok(t, bs, "", "configs", "describe", "--broker", "2"),
		"  leader.replication.throttled.rate=50000000 ", "  follower.replication.throttled.rate=50000000 ")
	wantLines(t, fmt.Sprintf("broker %d's throttles", mover), ok(t, bs, "", "configs", "describe", "--broker", fmt.Sprint(mover)),
		"  replica.alter.log.dirs.io.max.bytes.per.second=50000000 ")

	// verify until done: then the throttles go.
	var verified string
	deadline := time.Now().Add(time.Minute)
	for {
		// Until the broker answering Metadata has the completed
		// assignment too (the controller answers for reassignments).
		verified = ok(t, bs, "", "reassign-partitions", "verify", "--reassignment-json-file", plan)
		if strings.Count(verified, "is completed.") == 2 && strings.Contains(verified, "Clearing broker-level throttles") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	wantLines(t, "verify", verified,
		"Status of partition reassignment:\nReassignment of partition orders-0 is completed.\nReassignment of partition orders-1 is completed.\n",
		fmt.Sprintf("Reassignment of replica orders-1-%d completed successfully.\n", mover),
		"Clearing broker-level throttles on brokers 1,2,3\n",
		"Clearing topic-level throttles on topic orders\n")
	eventually(t, "orders-0 on its new replicas in every broker's metadata", func() bool {
		after := assignment()
		return slices.Equal(after[0], target0) && slices.Equal(after[1], before[1])
	})
	if d := ok(t, bs, "", "configs", "describe", "--topic", "orders"); strings.Contains(d, "throttled") {
		t.Errorf("throttles left on the topic:\n%s", d)
	}
	if d := ok(t, bs, "", "configs", "describe", "--broker", fmt.Sprint(mover)); strings.Contains(d, "throttled") || strings.Contains(d, "alter.log.dirs") {
		t.Errorf("throttles left on broker %d:\n%s", mover, d)
	}
	if d := ok(t, bs, "", "reassign-partitions", "list"); d != "No partition reassignments found.\n" {
		t.Errorf("list printed %q", d)
	}

	// orders-1's replicas reordered: the same replicas, whose leader is
	// not the new preferred one; a preferred leader election moves it
	// (kafka-leader-election.sh).
	reordered := []int32{before[1][1], before[1][0]}
	ok(t, bs, "", "reassign-partitions", "execute", "--reassignment-json-file",
		write("reorder.json", formatPlan(map[client.TopicPartition][]int32{{Topic: "orders", Partition: 1}: reordered}, nil)))
	eventually(t, "orders-1's replicas reordered", func() bool { return slices.Equal(assignment()[1], reordered) })
	leader := func(p int32) int32 {
		mds, err := adm.DescribeTopics(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		return mds[0].Partitions[p].Leader
	}
	if l := leader(1); l != before[1][0] {
		t.Fatalf("orders-1 is led by %d, want %d still", l, before[1][0])
	}
	if out := ok(t, bs, "", "leader-election", "--election-type", "preferred", "--topic", "orders", "--partition", "1"); out != "Successfully completed leader election (PREFERRED) for partitions orders-1\n" {
		t.Errorf("preferred election printed %q", out)
	}
	eventually(t, "orders-1 led by its preferred replica", func() bool { return leader(1) == reordered[0] })
	elections := write("elections.json", `{"partitions":[{"topic":"orders","partition":1},{"topic":"orders","partition":0}]}`)
	if out := ok(t, bs, "", "leader-election", "--election-type", "PREFERRED", "--path-to-json-file", elections); out != "Valid replica already elected for partitions orders-0, orders-1\n" {
		t.Errorf("preferred election of preferred leaders printed %q", out)
	}
	ok(t, bs, "", "leader-election", "--election-type", "preferred", "--all-topic-partitions")
	for _, args := range [][]string{
		{"--election-type", "preferred"},
		{"--election-type", "preferred", "--all-topic-partitions", "--topic", "orders", "--partition", "0"},
		{"--election-type", "preferred", "--topic", "orders"},
		{"--election-type", "dirty", "--all-topic-partitions"},
	} {
		if r := keel(t, bs, "", append([]string{"leader-election"}, args...)...); r.exit == 0 {
			t.Errorf("leader-election %v: exit 0", args)
		}
	}
	if r := keel(t, bs, "", "leader-election", "--election-type", "preferred", "--topic", "nope", "--partition", "0"); r.exit == 0 ||
		!strings.Contains(r.stdout, "Error completing leader election (PREFERRED) for partition: nope-0: UNKNOWN_TOPIC_OR_PARTITION") ||
		!strings.Contains(r.stderr, "1 replica(s) could not be elected") {
		t.Errorf("election of an unknown partition: %+v", r)
	}

	// A reassignment held back: orders-2 gets a third replica, throttled to
	// a byte a second.
	target2 := append(slices.Clone(before[2]), other(before[2]))
	slow := write("slow.json", formatPlan(map[client.TopicPartition][]int32{{Topic: "orders", Partition: 2}: target2}, nil))
	ok(t, bs, "", "reassign-partitions", "execute", "--reassignment-json-file", slow, "--throttle", "1")
	listed := ok(t, bs, "", "reassign-partitions", "list")
	if want := fmt.Sprintf("Current partition reassignments:\norders-2: replicas: %s. adding: %d.\n", joinIDs(target2), target2[2]); listed != want {
		t.Errorf("list printed %q, want %q", listed, want)
	}
	if r := keel(t, bs, "", "reassign-partitions", "execute", "--reassignment-json-file", plan); r.exit == 0 ||
		!strings.Contains(r.stderr, "cannot execute because there is an existing partition assignment") {
		t.Errorf("a second execute without --additional: %+v", r)
	}
	if v := ok(t, bs, "", "reassign-partitions", "verify", "--reassignment-json-file", slow); !strings.Contains(v, "Reassignment of partition orders-2 is still in progress.\n") ||
		strings.Contains(v, "Clearing") {
		t.Errorf("verify of the held-back reassignment:\n%s", v)
	}
	out = ok(t, bs, "", "reassign-partitions", "cancel", "--reassignment-json-file", slow)
	wantLines(t, "cancel", out, "Successfully cancelled partition reassignment for: orders-2\n", "None of the specified partition moves are active.\n",
		"Clearing topic-level throttles on topic orders\n")
	wantVerify := fmt.Sprintf("There is no active reassignment of partition orders-2, but replica set is %s rather than %s.\n", joinIDs(before[2]), joinIDs(target2))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v := ok(t, bs, "", "reassign-partitions", "verify", "--reassignment-json-file", slow)
		if strings.Contains(v, wantVerify) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("verify after the cancel lacks %q:\n%s", wantVerify, v)
			break
		}
	}

	eventually(t, "orders-2 back on its replicas in every broker's metadata", func() bool { return slices.Equal(assignment()[2], before[2]) })

	// Plans Kafka's tool refuses.
	for name, content := range map[string]string{
		"unknown broker id 9":                 `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,9]}]}`,
		"unable to find partition: orders-7":  `{"version":1,"partitions":[{"topic":"orders","partition":7,"replicas":[1,2]}]}`,
		"may not contain duplicate entries":   `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,1]}]}`,
		"different from size of log dirs":     `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`,
		"not supported version field value 2": `{"version":2,"partitions":[]}`,
		"not a valid JSON":                    `{"version":1,`,
	} {
		r := keel(t, bs, "", "reassign-partitions", "execute", "--reassignment-json-file", write("bad.json", content))
		if r.exit == 0 || !strings.Contains(r.stderr, name) {
			t.Errorf("plan %s: exit %d, stderr %q; want %q", content, r.exit, r.stderr, name)
		}
	}

	// Every record is still there.
	consumed := ok(t, bs, "", "consume", "--topic", "orders", "--from-beginning", "--max-messages", "3000", "--timeout-ms", "20000")
	if n := strings.Count(consumed, "\n"); n != 3000 {
		t.Errorf("consumed %d records after the reassignments, want 3000", n)
	}
}

// eventually waits up to 10 s for cond: what one broker applied, another
// may apply a moment later.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
