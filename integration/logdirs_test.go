package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMoveReplicasBetweenLogDirs moves partitions between the two log dirs
// of a keel process with kadm's AlterReplicaLogDirs (what
// kafka-reassign-partitions.sh sends for "log_dirs") under acks=all load
// with a tailing consumer:
//
//  1. With replica.alter.log.dirs.io.max.bytes.per.second low (the tool's
//     --replica-alter-log-dirs-throttle), DescribeLogDirs shows the moves
//     under way: future replicas in the destination. The broker is killed
//     with -9 and restarted mid-move: the moves resume.
//  2. The throttle lifted, the moves complete: each partition is in its
//     destination alone, and its old directory goes.
//  3. The broker is killed with -9 and restarted: the partitions are where
//     they were moved.
//  4. `keel log-dirs move --wait` moves one back, and `keel log-dirs
//     --describe -o json` (kafka-log-dirs.sh's form and JSON) shows it.
//
// Then the checker finds every acknowledged record at its offset, none
// that a consumer saw vanished.
//
// It also checks the refusals: a dir that is not a log dir
// (LOG_DIR_NOT_FOUND) and a partition the broker does not host
// (REPLICA_NOT_AVAILABLE).
func TestMoveReplicasBetweenLogDirs(t *testing.T) {
	const topic = "moving"
	pc := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}}, ProcessOptions{
		ExtraLogDirs: 1,
		// The moved replicas' old segments are closed and removed after
		// this, as deleted segments are (file.delete.delay.ms).
		Overrides: []string{"log.segment.delete.delay.ms=500"},
	})
	node := pc.Node(1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.BootstrapServers()...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"segment.bytes": kadm.StringPtr("65536")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	w := StartWorkload(t, pc.BootstrapServers(), topic, 2, 2000)
	t.Cleanup(w.Stop)
	w.WaitEachPartition(2, 3000, 60*time.Second, "before the moves")

	// where lists, for each partition of the topic, the dirs holding it
	// and whether that copy is the future one.
	type copyOf struct {
		dir    string
		future bool
		lag    int64
	}
	where := func() map[int32][]copyOf {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
		if err != nil {
			t.Fatalf("DescribeLogDirs: %v", err)
		}
		out := map[int32][]copyOf{}
		for dir, d := range dirs {
			if d.Err != nil {
				t.Fatalf("log dir %s: %v", dir, d.Err)
			}
			for p, lp := range d.Topics[topic] {
				out[p] = append(out[p], copyOf{dir, lp.IsFuture, lp.OffsetLag})
			}
		}
		return out
	}
	abs := func(d string) string {
		a, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	other := func(dir string) string {
		for _, d := range node.LogDirs {
			if abs(d) != dir {
				return abs(d)
			}
		}
		t.Fatalf("no log dir other than %s", dir)
		return ""
	}
	before := where()
	dest := map[int32]string{}
	alter := kadm.AlterReplicaLogDirsReq{}
	for p := range int32(2) {
		if len(before[p]) != 1 || before[p][0].future {
			t.Fatalf("partition %d before the moves: %+v", p, before[p])
		}
		dest[p] = other(before[p][0].dir)
		alter.Add(dest[p], kadm.TopicsSet{topic: {p: {}}})
	}

	// 1. Throttled: the moves are seen under way.
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig,
		Name: "replica.alter.log.dirs.io.max.bytes.per.second", Value: kadm.StringPtr("65536")}}, 1); err != nil {
		t.Fatal(err)
	}
	moved, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, alter)
	if err != nil {
		t.Fatalf("AlterReplicaLogDirs: %v", err)
	}
	moved.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			t.Errorf("move of %s-%d to %s: %v", r.Topic, r.Partition, r.Dir, r.Err)
		}
	})
	underWay := func(what string) {
		t.Helper()
		waitForState(t, 30*time.Second, what, func() (bool, string) {
			now := where()
			for p := range int32(2) {
				found := false
				for _, c := range now[p] {
					found = found || (c.future && c.dir == dest[p])
				}
				if !found {
					return false, fmt.Sprintf("%+v", now)
				}
			}
			return true, ""
		})
	}
	underWay("future replicas in the destinations")
	// A kill -9 mid-move: the moves resume from the future replicas the
	// restarted broker finds.
	pc.Kill(1)
	pc.Start(1)
	pc.WaitReady(1)
	underWay("the moves resumed after a kill -9")

	// The refusals.
	bad := kadm.AlterReplicaLogDirsReq{}
	bad.Add(filepath.Join(t.TempDir(), "not-a-log-dir"), kadm.TopicsSet{topic: {0: {}}})
	bad.Add(dest[0], kadm.TopicsSet{"no-such-topic": {0: {}}})
	refused, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, bad)
	if err != nil {
		t.Fatal(err)
	}
	refused.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		want := kerr.ReplicaNotAvailable
		if r.Topic == topic {
			want = kerr.LogDirNotFound
		}
		if r.Err != want {
			t.Errorf("refused move of %s-%d to %s: %v, want %v", r.Topic, r.Partition, r.Dir, r.Err, want)
		}
	})

	// 2. Unthrottled, the moves complete under load.
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig,
		Name: "replica.alter.log.dirs.io.max.bytes.per.second"}}, 1); err != nil {
		t.Fatal(err)
	}
	waitForState(t, 60*time.Second, "the moves complete", func() (bool, string) {
		now := where()
		for p := range int32(2) {
			if len(now[p]) != 1 || now[p][0].future || now[p][0].dir != dest[p] {
				return false, fmt.Sprintf("%+v", now)
			}
		}
		return true, ""
	})
	w.WaitAcked(w.Acked()+2000, 30*time.Second, "after the moves")
	waitForState(t, 30*time.Second, "the old directories removed", func() (bool, string) {
		for p := range int32(2) {
			entries, err := os.ReadDir(before[p][0].dir)
			if err != nil {
				return false, err.Error()
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), fmt.Sprintf("%s-%d", topic, p)) {
					return false, e.Name()
				}
			}
		}
		return true, ""
	})

	// 3. A kill -9 and a restart keep the partitions where they went.
	pc.Kill(1)
	pc.Start(1)
	pc.WaitReady(1)
	now := where()
	for p := range int32(2) {
		if len(now[p]) != 1 || now[p][0].dir != dest[p] {
			t.Fatalf("partition %d after the restart: %+v, want %s", p, now[p], dest[p])
		}
	}
	w.WaitAcked(w.Acked()+1000, 60*time.Second, "after the restart")

	// 4. keel log-dirs moves partition 0 back and waits for it; its
	// describe -o json is kafka-log-dirs.sh's JSON.
	keel := func(args ...string) string {
		t.Helper()
		args = append(args, "--bootstrap-server", pc.BootstrapServers()[0])
		out, err := exec.CommandContext(ctx, Binary(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("keel %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := keel("log-dirs", "move", "--broker", "1", "--dir", before[0][0].dir, "--topic", topic, "--partition", "0", "--wait")
	if !strings.Contains(out, "Moved 1 replicas") {
		t.Fatalf("keel log-dirs move:\n%s", out)
	}
	var described struct {
		Version int `json:"version"`
		Brokers []struct {
			Broker  int32 `json:"broker"`
			LogDirs []struct {
				LogDir     string  `json:"logDir"`
				Error      *string `json:"error"`
				Partitions []struct {
					Partition string `json:"partition"`
					IsFuture  bool   `json:"isFuture"`
				} `json:"partitions"`
			} `json:"logDirs"`
		} `json:"brokers"`
	}
	out = keel("log-dirs", "--describe", "--topic-list", topic, "-o", "json")
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Fatalf("keel log-dirs describe -o json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, b := range described.Brokers {
		for _, d := range b.LogDirs {
			for _, p := range d.Partitions {
				if p.IsFuture || d.Error != nil {
					t.Fatalf("after keel log-dirs move --wait: %s", out)
				}
				got[p.Partition] = d.LogDir
			}
		}
	}
	if len(got) != 2 || got[topic+"-0"] != before[0][0].dir || got[topic+"-1"] != dest[1] {
		t.Fatalf("keel log-dirs describe after moving %s-0 back to %s: %v\n%s", topic, before[0][0].dir, got, out)
	}
	w.Stop()
	n := w.Check(60 * time.Second)
	t.Logf("%d acknowledged records checked", n)
}
