package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/integration"
)

// TestCLIGetOffsetsDeleteRecordsAndCluster: kafka-get-offsets.sh's
// offsets at latest, earliest, a timestamp and max-timestamp, for topic
// regexes, partition lists and topic-partition patterns;
// kafka-delete-records.sh's plan moving log start offsets, with an error
// for an unknown partition; kafka-cluster.sh's cluster-id and unregister.
func TestCLIGetOffsetsDeleteRecordsAndCluster(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ok(t, bs, "", "topics", "create", "--topic", "events", "--partitions", "3")
	ok(t, bs, "", "topics", "create", "--topic", "other")
	var lines strings.Builder
	for i := range 60 {
		fmt.Fprintf(&lines, "k%d:v%d\n", i, i)
	}
	ok(t, bs, lines.String(), "produce", "--topic", "events", "--property", "parse.key=true", "--property", "key.separator=:")

	// offsets parses topic:partition:offset lines, in the order printed.
	offsets := func(out string) ([]string, map[string]int64) {
		t.Helper()
		var order []string
		m := map[string]int64{}
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if l == "" {
				continue
			}
			i := strings.LastIndexByte(l, ':')
			n, err := strconv.ParseInt(l[i+1:], 10, 64)
			if err != nil {
				t.Fatalf("line %q", l)
			}
			order = append(order, l[:i])
			m[l[:i]] = n
		}
		return order, m
	}
	order, latest := offsets(ok(t, bs, "", "get-offsets", "--topic", "ev.*"))
	if fmt.Sprint(order) != "[events:0 events:1 events:2]" || latest["events:0"]+latest["events:1"]+latest["events:2"] != 60 {
		t.Fatalf("latest offsets: %v %v", order, latest)
	}
	if _, m := offsets(ok(t, bs, "", "get-offsets", "--topic", "events", "--time", "-2")); len(m) != 3 || m["events:0"]+m["events:1"]+m["events:2"] != 0 {
		t.Errorf("earliest offsets: %v", m)
	}
	if _, m := offsets(ok(t, bs, "", "get-offsets", "--topic", "events", "--time", "max-timestamp")); len(m) != 3 {
		t.Errorf("max-timestamp offsets: %v", m)
	}
	if out := ok(t, bs, "", "get-offsets", "--topic", "events", "--time", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)); out != "" {
		t.Errorf("offsets after the last record's time: %q, want none", out)
	}
	if order, _ := offsets(ok(t, bs, "", "get-offsets", "--topic-partitions", "events:1-,other")); fmt.Sprint(order) != "[events:1 events:2 other:0]" {
		t.Errorf("--topic-partitions events:1-,other: %v", order)
	}
	if order, _ := offsets(ok(t, bs, "", "get-offsets", "--topic", "events", "--partitions", "0,2")); fmt.Sprint(order) != "[events:0 events:2]" {
		t.Errorf("--partitions 0,2: %v", order)
	}
	if order, _ := offsets(ok(t, bs, "", "get-offsets", "--exclude-internal-topics")); fmt.Sprint(order) != "[events:0 events:1 events:2 other:0]" {
		t.Errorf("every topic but internal ones: %v", order)
	}
	for _, args := range [][]string{
		{"--topic", "events", "--partitions", "7"},
		{"--time", "yesterday"},
		{"--topic-partitions", "events:1", "--topic", "events"},
		{"--topic-partitions", "events:x"},
	} {
		if r := keel(t, bs, "", append([]string{"get-offsets"}, args...)...); r.exit == 0 {
			t.Errorf("get-offsets %v: exit 0, printed %q", args, r.stdout)
		}
	}

	// delete-records: events-0 below 2, events-1 entirely; nope-0 fails.
	plan := filepath.Join(t.TempDir(), "delete.json")
	if err := os.WriteFile(plan, []byte(`{"partitions":[{"topic":"events","partition":0,"offset":2},{"topic":"events","partition":1,"offset":-1},{"topic":"nope","partition":0,"offset":1}],"version":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := keel(t, bs, "", "delete-records", "--offset-json-file", plan)
	want := "Executing records delete operation\nRecords delete operation completed:\n" +
		"partition: events-0\tlow_watermark: 2\n" +
		fmt.Sprintf("partition: events-1\tlow_watermark: %d\n", latest["events:1"]) +
		"partition: nope-0\terror: "
	if r.exit != 1 || !strings.HasPrefix(r.stdout, want) || !strings.Contains(r.stdout, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("delete-records: exit %d, printed %q, want %q…", r.exit, r.stdout, want)
	}
	if _, m := offsets(ok(t, bs, "", "get-offsets", "--topic", "events", "--time", "earliest")); m["events:0"] != 2 || m["events:1"] != latest["events:1"] || m["events:2"] != 0 {
		t.Errorf("earliest offsets after deleting records: %v", m)
	}

	if out := ok(t, bs, "", "cluster", "cluster-id"); out != "Cluster ID: "+c.ClusterID+"\n" {
		t.Errorf("cluster-id printed %q, want the cluster's id %s", out, c.ClusterID)
	}
	if r := keel(t, bs, "", "cluster", "unregister", "--id", "9"); r.exit == 0 || !strings.Contains(r.stderr, "BROKER_ID_NOT_REGISTERED") {
		t.Errorf("unregister an unknown broker: %+v", r)
	}
}
