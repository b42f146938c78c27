package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keelstream/keel/integration"
)

// kgoMember consumes topic in group until the test ends, committing what
// it read, as a classic member or (with kgo.ServerSideBalancer) one of the
// consumer protocol.
func kgoMember(t *testing.T, bs, group, topic string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bs), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait(); cl.Close() })
}

// The describe views of a group moving between the protocols, with
// --verbose as Kafka 4's kafka-consumer-groups.sh prints them (KIP-1099):
// the members' epochs and assignments, UPGRADED for a group with members
// of both protocols, the group's epochs, and the committed offsets'
// leader epochs.
func TestCLIGroupsDescribeVerbose(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ok(t, bs, "", "topics", "create", "--topic", "mix", "--partitions", "4", "--replication-factor", "1")
	prod, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // every partition has offsets to commit
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "mix", Partition: int32(i % 4), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()

	kgoMember(t, bs, "mixed", "mix", kgo.ClientID("old-app"), kgo.InstanceID("app-1"))
	kgoMember(t, bs, "mixed", "mix", kgo.ClientID("new-app"), kgo.ServerSideBalancer())

	// Wait for the converted group to settle: two members, each with
	// partitions, every partition committed.
	var members []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := keel(t, bs, "", "groups", "describe", "--group", "mixed", "--members", "--verbose")
		out := r.stdout + r.stderr // GROUP_ID_NOT_FOUND until the first join
		members = strings.Split(strings.TrimSpace(r.stdout), "\n")
		settled := r.exit == 0 && len(members) == 3
		for _, row := range members[1:] {
			f := strings.Fields(row)
			settled = settled && len(f) == 11 && f[5] != "0" && f[7] != "-"
		}
		var lag [][]string
		if settled {
			lag = describeVerboseRows(t, ok(t, bs, "", "groups", "describe", "--group", "mixed", "--verbose"))
		}
		for _, f := range lag {
			settled = settled && f[3] == "2" // CURRENT-OFFSET: all read and committed
		}
		if settled && len(lag) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group did not settle:\n%s\n%v", out, lag)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("groups describe --members --verbose:\n%s", strings.Join(members, "\n"))
	want := "GROUP CONSUMER-ID GROUP-INSTANCE-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT UPGRADED"
	if got := strings.Join(strings.Fields(members[0]), " "); got != want {
		t.Fatalf("members --verbose header %q, want Kafka's %q", got, want)
	}
	for _, row := range members[1:] {
		f := strings.Fields(row)
		switch f[4] {
		case "old-app":
			if f[2] != "app-1" || f[10] != "false" {
				t.Errorf("classic member row %q", row)
			}
		case "new-app":
			if f[2] != "-" || f[10] != "true" {
				t.Errorf("consumer-protocol member row %q", row)
			}
		default:
			t.Errorf("row %q", row)
		}
		if !strings.HasPrefix(f[7], "mix:") || !strings.HasPrefix(f[9], "mix:") || f[6] != f[8] {
			t.Errorf("a settled member's epochs and assignments: %q", row)
		}
	}

	// The plain members view keeps Kafka's columns, with the instance id.
	plain := strings.Split(ok(t, bs, "", "groups", "describe", "--group", "mixed", "--members"), "\n")[0]
	if got := strings.Join(strings.Fields(plain), " "); got != "GROUP CONSUMER-ID GROUP-INSTANCE-ID HOST CLIENT-ID #PARTITIONS" {
		t.Errorf("members header %q", got)
	}

	state := strings.Split(strings.TrimSpace(ok(t, bs, "", "groups", "describe", "--group", "mixed", "--state", "--verbose")), "\n")
	t.Logf("groups describe --state --verbose:\n%s", strings.Join(state, "\n"))
	wantLines(t, "state --verbose", state[0], "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")
	if f := strings.Fields(state[1]); len(f) < 4 || f[len(f)-3] == "-" || f[len(f)-3] != f[len(f)-2] || f[len(f)-1] != "2" {
		t.Errorf("state --verbose row %q: want the group epoch, the same target assignment epoch, 2 members", state[1])
	}

	var groups []groupDescribeJSON
	if err := json.Unmarshal([]byte(ok(t, bs, "", "groups", "describe", "--group", "mixed", "-o", "json")), &groups); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, m := range groups[0].Members {
		types[m.ClientID] = m.MemberType
		if m.MemberEpoch <= 0 || len(m.TargetAssignment) == 0 {
			t.Errorf("json member %+v", m)
		}
	}
	if g := groups[0]; g.GroupEpoch <= 0 || g.TargetAssignmentEpoch != g.GroupEpoch || types["old-app"] != "classic" || types["new-app"] != "consumer" {
		t.Errorf("json group %+v", g)
	}
	for _, p := range groups[0].Partitions {
		if p.LeaderEpoch != 0 {
			t.Errorf("json partition %+v: want the committed leader epoch 0", p)
		}
	}
}

// describeVerboseRows parses the default view with --verbose, checking its
// header is Kafka's: LEADER-EPOCH after PARTITION.
func describeVerboseRows(t *testing.T, out string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := "GROUP TOPIC PARTITION LEADER-EPOCH CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID"
	if got := strings.Join(strings.Fields(lines[0]), " "); got != want {
		t.Fatalf("describe --verbose header %q, want Kafka's %q", got, want)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 10 {
			t.Fatalf("describe --verbose row %q: %d columns", l, len(f))
		}
		rows = append(rows, f[1:])
	}
	return rows
}
