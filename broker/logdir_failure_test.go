package broker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/metadata"
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

// TestLogDirFailureStopsTheNodeOnlyWhenItMust: a failed log dir stops the
// node (Failed) only when it holds the metadata log or was the last one
// online; otherwise the node goes on and its heartbeat is woken to report
// the dir (KIP-858); also when the controller does not track log dirs.
func TestLogDirFailureStopsTheNodeOnlyWhenItMust(t *testing.T) {
	// The broker's image: registered with its log dirs, as a controller
	// that tracks them records it.
	img, _, err := metadata.EmptyImage().Apply(1, []metadata.Record{&metadata.RegisterBrokerRecord{
		BrokerID: 1, BrokerEpoch: 1, LogDirs: []metadata.Uuid{metadata.NewUuid(), metadata.NewUuid()}}})
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{nodeID: 1}
	b.image.Store(img)
	newNode := func(meta string, dirs ...string) *Node {
		n := &Node{cfg: &Config{LogDirs: dirs, MetadataLogDir: meta}, logger: hclog.NewNullLogger(),
			failed: make(chan error, 1), dirFailed: make(chan struct{}, 1)}
		n.liveBroker.Store(b)
		return n
	}
	stopped := func(n *Node) bool { return received(n.Failed()) }
	woken := func(n *Node) bool { return received(n.dirFailed) }
	ioErr := errors.New("input/output error")

	n := newNode("/d/a", "/d/a", "/d/b", "/d/c")
	n.logDirFailed("/d/b", ioErr)
	if stopped(n) || !woken(n) {
		t.Fatal("one dir of three failed: the node must go on and report it")
	}
	n.logDirFailed("/d/a/", ioErr)
	if !stopped(n) {
		t.Fatal("the dir holding the metadata log failed: the node must stop")
	}

	n = newNode("/meta", "/d/a", "/d/b")
	n.logDirFailed("/d/a", ioErr)
	if stopped(n) || !woken(n) {
		t.Fatal("one dir of two failed: the node must go on")
	}
	n.logDirFailed("/d/b", ioErr)
	if !stopped(n) {
		t.Fatal("the last dir online failed: the node must stop")
	}

	// A controller that does not track log dirs (no LogDirs in the
	// registration), or no broker yet: the node stops.
	for _, tracked := range []*Broker{{nodeID: 2}, nil} {
		if tracked != nil {
			tracked.image.Store(img)
		}
		n = newNode("/meta", "/d/a", "/d/b")
		n.liveBroker.Store(tracked)
		n.logDirFailed("/d/a", ioErr)
		if !stopped(n) {
			t.Fatalf("a dir failed with its log dirs untracked (broker %v): the node must stop", tracked)
		}
	}
}

// received reports whether ch has a value waiting, taking it.
func received[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
