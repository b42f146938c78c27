package broker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/storage"
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

// TestNoLogIsCreatedForAReplicaInAnOfflineDir: with a log dir offline, the
// broker creates no log for a replica the metadata places in a dir that is
// not one of its online ones (its log may be in the offline dir: Kafka's
// createLogInAssignedDirectoryId, KAFKA-16234); a new replica (in no dir
// yet) or one placed in a dir online is created. With every dir online,
// any replica is.
func TestNoLogIsCreatedForAReplicaInAnOfflineDir(t *testing.T) {
	good, bad := t.TempDir(), t.TempDir()
	idGood, idBad, other := metadata.NewUuid(), metadata.NewUuid(), metadata.NewUuid()
	open := func(offline ...string) *storage.Manager {
		m, err := storage.OpenManager(storage.ManagerConfig{LogDirs: []string{good, bad}, InitialOfflineDirs: offline})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	b := &Broker{dirAssign: newDirAssigner(map[string]metadata.Uuid{good: idGood, bad: idBad}), logs: open(bad)}
	for _, c := range []struct {
		dir  metadata.Uuid
		want bool
	}{
		{metadata.DirUnassigned, true}, {idGood, true}, {idBad, false}, {other, false},
		{metadata.DirMigrating, false}, {metadata.DirLost, false},
	} {
		if got := b.mayCreateLog(c.dir); got != c.want {
			t.Errorf("with %s offline, a replica in dir %s: may create %v, want %v", bad, c.dir, got, c.want)
		}
	}
	b.logs.Close()
	b.logs = open()
	for _, dir := range []metadata.Uuid{metadata.DirUnassigned, idGood, idBad, other, metadata.DirMigrating, metadata.DirLost} {
		if !b.mayCreateLog(dir) {
			t.Errorf("with every dir online, a replica in dir %s: may not create", dir)
		}
	}
}

// TestOfflineDirsAtStartNeedTrackedDirs: a node that started with a log dir
// offline stops once its registration shows that the controller does not
// track its log dirs (it recorded none), and goes on when it does; another
// incarnation's registration (the one before a restart) decides nothing.
func TestOfflineDirsAtStartNeedTrackedDirs(t *testing.T) {
	good, bad := t.TempDir(), t.TempDir()
	logs, err := storage.OpenManager(storage.ManagerConfig{LogDirs: []string{good, bad}, InitialOfflineDirs: []string{bad}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	mine, before := metadata.NewUuid(), metadata.NewUuid()
	register := func(incarnation metadata.Uuid, dirs ...metadata.Uuid) *metadata.Image {
		img, _, err := metadata.EmptyImage().Apply(1, []metadata.Record{&metadata.RegisterBrokerRecord{
			BrokerID: 1, BrokerEpoch: 1, IncarnationID: incarnation, LogDirs: dirs}})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	n := &Node{cfg: &Config{NodeID: 1}, logs: logs, incarnation: mine, failed: make(chan error, 1), logger: hclog.NewNullLogger()}
	if n.checkOfflineDirsTracked(register(before)) || received(n.Failed()) {
		t.Fatal("the registration before the restart decided")
	}
	if !n.checkOfflineDirsTracked(register(mine, metadata.NewUuid())) || received(n.Failed()) {
		t.Fatal("a controller that tracks the log dirs: the node must go on")
	}
	if !n.checkOfflineDirsTracked(register(mine)) || !received(n.Failed()) {
		t.Fatal("a controller that does not track the log dirs: the node must stop")
	}
}

// BenchmarkMayCreateLog is the check applyLocked makes, with a log dir
// offline, before creating the log of each replica it does not host yet:
// against the map lookup of the log it makes first (LogLookup),
// and far below the creation of a log (files, an fsync of the dir).
func BenchmarkMayCreateLog(b *testing.B) {
	good, bad := b.TempDir(), b.TempDir()
	logs, err := storage.OpenManager(storage.ManagerConfig{LogDirs: []string{good, bad}, InitialOfflineDirs: []string{bad}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { logs.Close() })
	idGood, idBad := metadata.NewUuid(), metadata.NewUuid()
	br := &Broker{dirAssign: newDirAssigner(map[string]metadata.Uuid{good: idGood, bad: idBad}), logs: logs}
	dirs := []metadata.Uuid{idGood, idBad, metadata.DirUnassigned, metadata.NewUuid()}
	b.Run("MayCreateLog", func(b *testing.B) {
		for i := range b.N {
			br.mayCreateLog(dirs[i%len(dirs)])
		}
	})
	b.Run("LogLookup", func(b *testing.B) {
		for i := range b.N {
			logs.Log(storage.TopicPartition{Topic: "t", Partition: int32(i % 64)})
		}
	})
}
