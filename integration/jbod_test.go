package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/raftlog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLogDirFailureKeepsTheBrokerServing is JBOD failure handling (KIP-858,
// Kafka 3.7+) through three keel server processes with two log dirs each,
// under acks=all load with a tailing consumer (replication factor 3,
// min.insync.replicas 2):
//
//  1. Node 1 holds some replicas in each dir (DescribeLogDirs).
//  2. Node 1's second log dir fails: the directories of its partitions
//     there vanish, as on a disk unmounted from under the broker, so its
//     next segment roll there fails. The broker does not stop: it reports
//     the dir offline in its heartbeat, and the controller takes its
//     replicas there out of the ISR and their leaderships. Metadata lists
//     them as offline replicas, DescribeLogDirs the dir as
//     KAFKA_STORAGE_ERROR, its metrics the dir and the replicas offline.
//     Its replicas in its first dir stay in the ISR, and every partition
//     takes acks=all writes.
//  3. Node 1 restarts with the disk still failed (the dir cannot be used).
//     The broker starts without it (Kafka 3.7+): it serves its other dir's
//     replicas, which rejoin their ISRs, and creates no copy of the failed
//     dir's replicas elsewhere; they stay offline, and its metrics and
//     DescribeLogDirs say so.
//  4. The disk is replaced: node 1 restarts with that dir empty. The broker
//     formats it as a new log dir, creates the lost replicas afresh, and
//     they catch up and rejoin every ISR.
//
// Then the checker finds every acknowledged record at its offset, none that
// a consumer saw vanished.
func TestLogDirFailureKeepsTheBrokerServing(t *testing.T) {
	const (
		topic = "jbod"
		parts = 6
	)
	brokers := []int32{1, 2, 3}
	pc := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{ExtraLogDirs: 1, Overrides: []string{"replica.lag.time.max.ms=5000", "keel.metrics.address=127.0.0.1:0"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.BootstrapServers()...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{
		"min.insync.replicas": kadm.StringPtr("2"),
		"segment.bytes":       kadm.StringPtr("16384"),
	}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	w := StartWorkload(t, pc.BootstrapServers(), topic, 2, 1500)
	t.Cleanup(w.Stop)
	w.WaitEachPartition(parts, 200, 60*time.Second, "before the failure")

	victim := pc.Node(1)
	abs := func(d string) string {
		a, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	good, bad := abs(victim.LogDirs[0]), abs(victim.LogDirs[1]) // the metadata log is in the first
	// hosted lists node 1's partitions of the topic in each of its dirs,
	// and the dirs' errors.
	hosted := func() (map[string][]int32, map[string]error) {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
		if err != nil {
			t.Fatalf("DescribeLogDirs: %v", err)
		}
		out, errs := map[string][]int32{}, map[string]error{}
		for dir, d := range dirs {
			errs[dir] = d.Err
			for p := range d.Topics[topic] {
				out[dir] = append(out[dir], p)
			}
			slices.Sort(out[dir])
		}
		return out, errs
	}
	before, _ := hosted()
	inBad := before[bad]
	if len(inBad) == 0 || len(before[good]) == 0 || len(inBad)+len(before[good]) != parts {
		t.Fatalf("node 1's replicas by dir %v: want some in each of %s and %s", before, good, bad)
	}
	t.Logf("node 1 holds partitions %v in %s, %v in %s", before[good], good, inBad, bad)

	// metadataState checks, from a running broker's Metadata, that node 1
	// is out of the ISR, not the leader and an offline replica of exactly
	// the partitions in failed, and in the ISR of the others.
	metadataState := func(failed []int32) (bool, string) {
		var state string
		ok := false
		err := askRunning(pc, brokers, func(ctx context.Context, _ int32, c *kgo.Client) error {
			md, err := kadm.NewClient(c).Metadata(ctx, topic)
			if err != nil {
				return err
			}
			td := md.Topics[topic]
			if td.Err != nil || len(td.Partitions) != parts {
				return fmt.Errorf("topic metadata: %v, %d partitions", td.Err, len(td.Partitions))
			}
			ok = true
			var ps []int32
			for p := range td.Partitions {
				ps = append(ps, p)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			state = ""
			for _, p := range ps {
				pd := td.Partitions[p]
				state += fmt.Sprintf(" p%d leader=%d isr=%v offline=%v;", p, pd.Leader, pd.ISR, pd.OfflineReplicas)
				if slices.Contains(failed, p) {
					ok = ok && pd.Leader != 1 && pd.Leader >= 0 && !slices.Contains(pd.ISR, 1) && slices.Equal(pd.OfflineReplicas, []int32{1})
				} else {
					ok = ok && slices.Contains(pd.ISR, 1) && len(pd.OfflineReplicas) == 0 && len(pd.ISR) == 3
				}
			}
			return nil
		})
		if err != nil {
			return false, err.Error()
		}
		return ok, state
	}
	waitForState(t, 60*time.Second, "every replica in the ISR before the failure", func() (bool, string) { return metadataState(nil) })

	// 2. The disk under node 1's second dir fails.
	for _, p := range inBad {
		if err := os.RemoveAll(filepath.Join(bad, fmt.Sprintf("%s-%d", topic, p))); err != nil {
			t.Fatal(err)
		}
	}
	waitForState(t, 60*time.Second, "node 1's replicas in the failed dir out of the ISR, offline", func() (bool, string) {
		return metadataState(inBad)
	})
	if !pc.Alive(1) {
		log, _ := os.ReadFile(victim.LogPath)
		t.Fatalf("node 1 stopped when one of its two log dirs failed; its log:\n%s", log[max(0, len(log)-4000):])
	}
	after, errs := hosted()
	if !errors.Is(errs[bad], kerr.KafkaStorageError) || errs[good] != nil || !slices.Equal(after[good], before[good]) {
		t.Fatalf("DescribeLogDirs after the failure: dirs %v, errors %v", after, errs)
	}
	w.WaitEachPartition(parts, 200, 60*time.Second, "with node 1's dir failed")
	// Its metrics count the dir and the replicas in it (Kafka's
	// OfflineLogDirectoryCount and OfflineReplicaCount).
	m := scrape(t, pc, 1)
	if dirs, replicas := sumSeries(m, "kafka_log_logmanager_offlinelogdirectorycount"),
		sumSeries(m, "kafka_server_replicamanager_offlinereplicacount"); dirs != 1 || replicas < float64(len(inBad)) {
		t.Fatalf("offline log dirs %v, offline replicas %v; want 1 and at least %d", dirs, replicas, len(inBad))
	}

	// 3. Node 1 restarts with the disk still failed: its dir cannot be
	// used (a file where the dir was, as a mount point gone). The broker
	// starts without it, and creates no copy of the replicas that were
	// there in its other dir: they stay offline.
	pc.Stop(1)
	if err := os.RemoveAll(bad); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pc.Start(1)
	pc.WaitReady(1)
	waitForState(t, 90*time.Second, "node 1 back in the ISR of the partitions in its good dir only", func() (bool, string) {
		return metadataState(inBad)
	})
	restarted, errs := hosted()
	if !errors.Is(errs[bad], kerr.KafkaStorageError) || errs[good] != nil || !slices.Equal(restarted[good], before[good]) {
		t.Fatalf("DescribeLogDirs after a restart with the dir failed: dirs %v, errors %v", restarted, errs)
	}
	for _, p := range inBad {
		if _, err := os.Stat(filepath.Join(good, fmt.Sprintf("%s-%d", topic, p))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("node 1 created partition %d, whose replica was in the failed dir, in its good dir: %v", p, err)
		}
	}
	m = scrape(t, pc, 1)
	if dirs, replicas := sumSeries(m, "kafka_log_logmanager_offlinelogdirectorycount"),
		sumSeries(m, "kafka_server_replicamanager_offlinereplicacount"); dirs != 1 || replicas != float64(len(inBad)) {
		t.Fatalf("after a restart with the dir failed: offline log dirs %v, offline replicas %v; want 1 and %d", dirs, replicas, len(inBad))
	}
	w.WaitEachPartition(parts, 200, 60*time.Second, "with node 1 restarted without its failed dir")

	// 4. The disk is replaced: empty, and node 1 restarts.
	pc.Stop(1)
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	pc.Start(1)
	pc.WaitReady(1)
	waitForState(t, 90*time.Second, "node 1 back in every ISR", func() (bool, string) { return metadataState(nil) })
	final, errs := hosted()
	var all []int32
	for dir, ps := range final {
		if errs[dir] != nil {
			t.Fatalf("log dir %s after the restart: %v", dir, errs[dir])
		}
		all = append(all, ps...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("node 1's replicas after the restart: %v", final)
	}
	m = scrape(t, pc, 1)
	if dirs, replicas := sumSeries(m, "kafka_log_logmanager_offlinelogdirectorycount"),
		sumSeries(m, "kafka_server_replicamanager_offlinereplicacount"); dirs != 0 || replicas != 0 {
		t.Fatalf("after the restart: offline log dirs %v, offline replicas %v", dirs, replicas)
	}
	w.WaitEachPartition(parts, 200, 60*time.Second, "after the disk was replaced")
	w.Stop()
	t.Logf("checked %d records", w.Check(2*time.Minute))
}

// TestReplicasReportTheirLogDirs: each broker tells the controller which
// log dir it created each replica in (AssignReplicasToDirs, KIP-858), so
// the metadata places every replica in the dir whose meta.properties
// directory.id it is in; after a move between dirs (AlterReplicaLogDirs)
// the metadata follows the replica.
func TestReplicasReportTheirLogDirs(t *testing.T) {
	const topic = "dirs"
	c := StartJBODCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}}, 2)
	c.WaitReady(60 * time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 4, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	// placed reports whether the metadata places every replica in the dir
	// holding its log, and where they are.
	placed := func() (bool, string) {
		img := c.Nodes[1].Raft().Image()
		tp, ok := img.Topic(topic)
		if !ok {
			return false, "no topic"
		}
		state, ok := "", true
		for _, id := range []int32{1, 2, 3} {
			for p, part := range tp.Partitions {
				l := c.Nodes[id].PartitionLog(topic, int32(p))
				if l == nil {
					return false, fmt.Sprintf("node %d has no log of partition %d", id, p)
				}
				mp, err := raftlog.ReadMetaProperties(filepath.Dir(l.Dir()))
				if err != nil {
					t.Fatal(err)
				}
				got := part.Directory(id)
				state += fmt.Sprintf(" n%d/p%d: log in %s, metadata %s;", id, p, mp.DirectoryID, got)
				ok = ok && got == mp.DirectoryID
			}
		}
		return ok, state
	}
	waitForState(t, 30*time.Second, "every replica's dir in the metadata", placed)

	// Move partition 0 of node 2 to its other dir.
	l := c.Nodes[2].PartitionLog(topic, 0)
	from := filepath.Dir(l.Dir())
	to := ""
	for _, d := range strings.Split(c.logDirsAt(c.Dir(2)), ",") {
		if filepath.Clean(d) != from {
			to = d
		}
	}
	toAbs, err := filepath.Abs(to)
	if err != nil {
		t.Fatal(err)
	}
	req := kadm.AlterReplicaLogDirsReq{}
	req.Add(toAbs, kadm.TopicsSet{topic: {0: {}}})
	res, err := adm.AlterBrokerReplicaLogDirs(ctx, 2, req)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			t.Fatalf("move of %s-%d to %s: %v", r.Topic, r.Partition, r.Dir, r.Err)
		}
	})
	waitForState(t, 30*time.Second, "the moved replica's new dir in the metadata", func() (bool, string) {
		if filepath.Dir(c.Nodes[2].PartitionLog(topic, 0).Dir()) == from {
			return false, "not moved yet"
		}
		return placed()
	})
}
