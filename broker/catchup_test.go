package broker

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/storage"
)

// A restarted broker first answers from its last metadata snapshot's image,
// which can predate topics it hosts. When the controller says it has caught
// up, at an offset that image has not reached, the logs of those topics are
// not strays: the reconciliation waits for the image that reaches the
// offset, deletes only the logs that image does not place here, and only
// then is the broker Ready.
func TestStrayLogsWaitForTheImageTheControllerSawCaughtUp(t *testing.T) {
	c := newTestCluster(t)
	snapshot := c.meta.Image() // before either topic
	c.createTopic("kept", 1, nil)
	c.createTopic("gone", 1, nil)
	for _, topic := range []string{"kept", "gone"} {
		if r := c.produceRaw(t, topic, 0, 1, time.Second, buildBatch(t, 3, 10)); r.ErrorCode != 0 {
			t.Fatalf("produce to %s: error %d", topic, r.ErrorCode)
		}
	}
	c.stop()
	// While the broker is away, "gone" is deleted.
	gone, _ := c.meta.Image().Topic("gone")
	c.meta.commit(&metadata.RemoveTopicRecord{TopicID: gone.ID})
	current := c.meta.Image()

	b, logs := restartBroker(t, c)
	onDisk := func(topic string) bool {
		for _, l := range logs.Logs() {
			if l.TopicPartition() == tp(topic, 0) {
				return true
			}
		}
		return false
	}

	b.ApplyMetadata(snapshot, fullChanges(snapshot))
	b.ReconcileStrayLogs(current.Offset()) // the heartbeat of an observer ahead of its image
	if !onDisk("kept") || !onDisk("gone") {
		t.Fatalf("logs deleted as strays of an image older than the catch-up offset: kept %v, gone %v", onDisk("kept"), onDisk("gone"))
	}
	select {
	case <-b.Ready():
		t.Fatal("ready before the image reached the offset the controller saw")
	default:
	}

	b.ApplyMetadata(current, fullChanges(current))
	select {
	case <-b.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("not ready once the image reached the catch-up offset")
	}
	if onDisk("gone") {
		t.Fatal("the deleted topic's log is still on disk")
	}
	p := b.lookup(tp("kept", 0))
	if p == nil || p.log.LogEndOffset() != 3 {
		t.Fatalf("kept-0 after the reconciliation: %+v", p)
	}
}

// A broker that catches up by a snapshot gets the image without the
// changes that led to it (a Reset): the configs changed while it was away
// must still reach its logs, as they would have record by record.
func TestCatchUpBySnapshotTakesChangedConfigs(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("configured", 1, nil)
	before := c.meta.Image()
	c.stop()
	c.meta.commit(&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "configured",
		Name: "retention.ms", Value: kmsg.StringPtr("1234")})
	current := c.meta.Image()

	b, _ := restartBroker(t, c)
	b.ApplyMetadata(before, fullChanges(before))
	b.ApplyMetadata(current, fullChanges(current))
	p := b.lookup(tp("configured", 0))
	if p == nil || p.log.Config().RetentionMs != 1234 {
		t.Fatalf("after catching up by a snapshot: %+v", p)
	}
}

// restartBroker starts a new broker on a stopped test cluster's log dir,
// with no metadata applied yet: the test gives it the images it wants.
func restartBroker(t *testing.T, c *testCluster) (*Broker, *storage.Manager) {
	t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	logs, err := storage.OpenManager(storage.ManagerConfig{LogDirs: []string{c.dir}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	b, err := New(Options{NodeID: testNodeID, ClusterID: "keel-test-cluster", Config: c.cfg, Logs: logs,
		Metadata: c.meta, Controller: c.meta, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, logs
}
