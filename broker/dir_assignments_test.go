package broker

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/keelstream/keel/metadata"
)

// BenchmarkDirAssignmentPass measures one pass of the loop that reports
// replicas' log dirs (assignDirs) on a broker hosting 2,000 partitions
// whose dirs the metadata already has: the cost it adds every
// dirAssignInterval when there is nothing to report. Reported per hosted
// partition.
func BenchmarkDirAssignmentPass(b *testing.B) {
	const partitions = 2000
	c := newTestCluster(b)
	id := metadata.NewUuid()
	c.broker.dirAssign.ids[filepath.Clean(c.dir)] = id // the loop, started without ids, has returned
	self, _ := c.meta.Image().Broker(testNodeID)
	c.meta.commit(&metadata.BrokerRegistrationChangeRecord{BrokerID: testNodeID, BrokerEpoch: self.Epoch, LogDirs: []metadata.Uuid{id}})
	c.createTopic("dirs", partitions, nil) // in the broker's only dir
	t, _ := c.meta.Image().Topic("dirs")
	if t.Partitions[0].Directory(testNodeID) != id {
		b.Fatalf("partition placed in %s, want the broker's only dir %s", t.Partitions[0].Directory(testNodeID), id)
	}
	var took time.Duration
	for b.Loop() {
		t0 := time.Now()
		c.broker.assignDirs()
		took += time.Since(t0)
	}
	if n := len(c.broker.dirAssign.sent); n != 0 {
		b.Fatalf("%d assignments sent with every dir known", n)
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*partitions), "ns/partition")
}
