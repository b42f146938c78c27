package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// createAssigned creates a one-partition topic on the given replicas.
func createAssigned(t *testing.T, cl *kgo.Client, topic string, replicas ...int32) metadata.Uuid {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	return metadata.Uuid(resp.Topics[0].TopicID)
}

// TestStrayLogsOfTopicsChangedWhileAway: a broker that was down while its
// topics were deleted (one of them re-created under the same name, placed
// on it again) deletes the stray logs once it has caught up with the
// metadata, and replicates the new topic from scratch instead of serving
// the old incarnation's records (Kafka's KAFKA-14616).
func TestStrayLogsOfTopicsChangedWhileAway(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker"}})
	c.WaitReady(30 * time.Second)
	cl, adm := newClient(t, c)
	oldID := createAssigned(t, cl, "recreated", 2)
	createAssigned(t, cl, "gone", 2)
	produceKeyed(t, c, "recreated", 0, 5)
	produceKeyed(t, c, "gone", 0, 1)
	goneDir := c.Nodes[2].PartitionLog("gone", 0).Dir()

	c.Stop(2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, "recreated", "gone"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "topics deleted", func() bool {
		_, ok := c.Nodes[1].Raft().Image().Topic("recreated")
		return !ok
	})
	newID := createAssigned(t, cl, "recreated", 1, 2)
	if newID == oldID {
		t.Fatal("re-created topic kept its id")
	}
	// The new incarnation gets 3 records, keyed from 100 so that they differ.
	pcl, _ := newClient(t, c, kgo.DefaultProduceTopic("recreated"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 100; i < 103; i++ {
		if err := pcl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	c.Start(2)
	waitFor(t, 30*time.Second, "the returning broker replicates the new incarnation", func() bool {
		l := c.Nodes[2].PartitionLog("recreated", 0)
		if l == nil {
			return false
		}
		id, ok := l.TopicID()
		return ok && metadata.Uuid(id) == newID && replicasConverged(c, "recreated", 0, []int32{1, 2})
	})
	if l := c.Nodes[2].PartitionLog("recreated", 0); l.LogEndOffset() != 3 {
		t.Fatalf("returning broker's log end offset %d, want 3 (the new incarnation only)", l.LogEndOffset())
	}
	waitFor(t, 10*time.Second, "the stray log of the deleted topic is removed", func() bool {
		_, err := os.Stat(goneDir)
		return c.Nodes[2].PartitionLog("gone", 0) == nil && os.IsNotExist(err)
	})
	// Nothing of the old incarnation is left under its name either.
	matches, _ := filepath.Glob(filepath.Join(c.Dir(2), "*", "recreated-0"))
	matches2, _ := filepath.Glob(filepath.Join(c.Dir(2), "recreated-0"))
	if len(matches)+len(matches2) != 1 {
		t.Fatalf("recreated-0 directories: %v %v", matches, matches2)
	}
}
