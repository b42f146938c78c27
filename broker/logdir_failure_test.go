package broker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLogDirFailureAnswersStorageError: when an I/O error takes the log dir
// offline (here the kernel's ENOENT: a partition's directory vanished under
// the broker, as on a disk unmounted from under it, so the next roll cannot
// create its segment), the failing produce and every later request for a
// partition in that dir get KAFKA_STORAGE_ERROR, which clients retry
// elsewhere after refreshing metadata, and DescribeLogDirs lists the dir
// offline, as Kafka does.
func TestLogDirFailureAnswersStorageError(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("disk", 2, map[string]*string{"segment.bytes": kmsg.StringPtr("1024")})
	batch := buildBatch(t, 1, 600)
	if r := c.produceRaw(t, "disk", 0, 1, 5*time.Second, batch); r.ErrorCode != 0 {
		t.Fatalf("first produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := os.RemoveAll(filepath.Join(c.dir, "disk-0")); err != nil {
		t.Fatal(err)
	}
	// The open segment's file outlives its name; the roll this batch needs
	// does not.
	for p := range int32(2) {
		if r := c.produceRaw(t, "disk", p, 1, 5*time.Second, batch); r.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("produce to partition %d with the dir failed: %v", p, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	resp := roundTrip[*kmsg.FetchResponse](c.dialRaw(t), c.fetchRequest(12, 0, 1, 1<<20, fetchPartitionReq{"disk", 1, 0, 1 << 20, -1}))
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch with the dir failed: %v", kerr.ErrorForCode(code))
	}
	dirs, err := c.admin().DescribeBrokerLogDirs(testCtx(t), testNodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := dirs[absDir(c.dir)]; !ok || d.Err != kerr.KafkaStorageError || len(d.Topics) != 0 {
		t.Fatalf("DescribeLogDirs with the dir failed: %+v", dirs)
	}
	if got := c.logs.OfflineDirs(); len(got) != 1 || got[0] != c.dir {
		t.Fatalf("offline dirs %v", got)
	}
}
