package metadata

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newDirCluster registers and unfences one broker per entry of dirs, with
// those log dirs (none: a broker before KIP-858).
func newDirCluster(t *testing.T, dirs ...[]Uuid) *cluster {
	t.Helper()
	c := &cluster{t: t, img: EmptyImage(), now: time.Unix(1700000000, 0)}
	c.cc = NewClusterControl(DefaultControllerConfig(), c.img, c.now, rand.New(rand.NewPCG(3, 3)))
	for i, ds := range dirs {
		id := int32(i + 1)
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID, req.IncarnationID = id, [16]byte{byte(id)}
		for _, d := range ds {
			req.LogDirs = append(req.LogDirs, d)
		}
		recs, resp := c.cc.RegisterBroker(c.now, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("register %d: %v", id, kerr.ErrorForCode(resp.ErrorCode))
		}
		c.commit(recs)
		c.heartbeat(id, nil)
	}
	return c
}

// heartbeat sends broker id's heartbeat reporting offline dirs and commits
// what it produces.
func (c *cluster) heartbeat(id int32, offline []Uuid) []Record {
	b, _ := c.img.Broker(id)
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, b.Epoch, c.img.Offset()
	for _, d := range offline {
		hb.OfflineLogDirs = append(hb.OfflineLogDirs, d)
	}
	recs, resp := c.cc.Heartbeat(c.now, hb)
	if resp.ErrorCode != 0 {
		c.t.Fatalf("heartbeat %d: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	c.commit(recs)
	return recs
}

// createTopic creates topic with the given replica assignments.
func (c *cluster) createTopic(name string, assignments ...[]int32) *Topic {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for i, a := range assignments {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), a
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	recs, resp := c.cc.CreateTopics(req, false)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create %s: %v", name, kerr.ErrorForCode(code))
	}
	c.commit(recs)
	t, _ := c.img.Topic(name)
	return t
}

// assign sends broker id's AssignReplicasToDirs of one partition.
func (c *cluster) assign(id int32, topicID Uuid, partition int32, dir Uuid) int16 {
	b, _ := c.img.Broker(id)
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID, req.BrokerEpoch = id, b.Epoch
	d := kmsg.NewAssignReplicasToDirsRequestDirectory()
	d.ID = dir
	rt := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
	rt.TopicID = topicID
	rp := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
	rp.Partition = partition
	rt.Partitions = append(rt.Partitions, rp)
	d.Topics = append(d.Topics, rt)
	req.Directories = append(req.Directories, d)
	recs, resp := c.cc.AssignReplicasToDirs(req)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	c.commit(recs)
	return resp.Directories[0].Topics[0].Partitions[0].ErrorCode
}

func (c *cluster) partition(topic string, i int32) *Partition {
	t, ok := c.img.Topic(topic)
	if !ok {
		c.t.Fatalf("no topic %s", topic)
	}
	return t.Partitions[i]
}

// TestDirectoryAssignment: a new replica is placed in its broker's only
// log dir, in no dir yet (UNASSIGNED) on a broker with several, and in an
// unknown one (MIGRATING) on a broker that reports none; the broker's
// AssignReplicasToDirs records where it created it, and a snapshot keeps
// the dirs (KIP-858).
func TestDirectoryAssignment(t *testing.T) {
	a1, b1, a2 := NewUuid(), NewUuid(), NewUuid()
	c := newDirCluster(t, []Uuid{a1, b1}, []Uuid{a2}, nil)
	topic := c.createTopic("t", []int32{1, 2, 3})
	p := c.partition("t", 0)
	if want := []Uuid{DirUnassigned, a2, DirMigrating}; !slices.Equal(p.Directories, want) {
		t.Fatalf("new partition dirs %v, want %v", p.Directories, want)
	}
	if code := c.assign(1, topic.ID, 0, b1); code != 0 {
		t.Fatalf("assign: %v", kerr.ErrorForCode(code))
	}
	p = c.partition("t", 0)
	if p.Directory(1) != b1 || p.Directory(2) != a2 || p.Leader != 1 || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("after the assignment: %+v", *p)
	}
	// The same assignment again changes nothing.
	b, _ := c.img.Broker(1)
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID, req.BrokerEpoch = 1, b.Epoch
	d := kmsg.NewAssignReplicasToDirsRequestDirectory()
	d.ID = b1
	for _, tc := range []struct {
		id   Uuid
		part int32
	}{{topic.ID, 0}, {NewUuid(), 0}, {topic.ID, 7}} {
		rt := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
		rt.TopicID = tc.id
		rp := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
		rp.Partition = tc.part
		rt.Partitions = append(rt.Partitions, rp)
		d.Topics = append(d.Topics, rt)
	}
	req.Directories = append(req.Directories, d)
	recs, resp := c.cc.AssignReplicasToDirs(req)
	if len(recs) != 0 {
		t.Fatalf("a repeated assignment wrote %d records", len(recs))
	}
	var codes []int16
	for _, rt := range resp.Directories[0].Topics {
		codes = append(codes, rt.Partitions[0].ErrorCode)
	}
	if want := []int16{0, kerr.UnknownTopicID.Code, kerr.UnknownTopicOrPartition.Code}; !slices.Equal(codes, want) {
		t.Fatalf("partition errors %v, want %v", codes, want)
	}
	// A broker that is not a replica, and a stale broker epoch.
	c.createTopic("u", []int32{2})
	u, _ := c.img.Topic("u")
	if code := c.assign(1, u.ID, 0, a1); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("assignment by a non-replica: %v", kerr.ErrorForCode(code))
	}
	req.BrokerEpoch--
	if _, resp := c.cc.AssignReplicasToDirs(req); resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale epoch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// A reassignment keeps the dirs of the replicas that stay and places
	// the new one in its broker's default.
	ar := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = "u"
	ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	ap.Partition, ap.Replicas = 0, []int32{2, 1}
	at.Partitions = append(at.Partitions, ap)
	ar.Topics = append(ar.Topics, at)
	recs, aresp := c.cc.AlterPartitionReassignments(ar)
	if code := aresp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("reassign: %v", kerr.ErrorForCode(code))
	}
	c.commit(recs)
	if got := c.partition("u", 0).Directories; !slices.Equal(got, []Uuid{a2, DirUnassigned}) {
		t.Fatalf("dirs during the reassignment %v", got)
	}

	// A snapshot keeps the registrations' dirs and the partitions'.
	snap, _, err := EmptyImage().Apply(1, c.img.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := snap.Broker(1)
	st, _ := snap.Topic("t")
	if !slices.Equal(sb.LogDirs, b.LogDirs) || !slices.Equal(st.Partitions[0].Directories, c.partition("t", 0).Directories) {
		t.Fatalf("snapshot lost the dirs: %v %v", sb.LogDirs, st.Partitions[0].Directories)
	}
}

// TestOfflineLogDir: a heartbeat reporting a log dir offline takes it out
// of the broker's registration, and the broker's replicas in it out of the
// ISR and their leaderships; replicas in its other dirs stay. The replica
// may not lead or rejoin the ISR until it is assigned to an online dir,
// and an assignment into an offline dir takes a replica out (KIP-858).
func TestOfflineLogDir(t *testing.T) {
	a1, b1, a2, a3 := NewUuid(), NewUuid(), NewUuid(), NewUuid()
	c := newDirCluster(t, []Uuid{a1, b1}, []Uuid{a2}, []Uuid{a3})
	topic := c.createTopic("t", []int32{1, 2, 3}, []int32{1, 3, 2}, []int32{2, 1, 3})
	for i, d := range []Uuid{a1, b1, a1} {
		if code := c.assign(1, topic.ID, int32(i), d); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	solo := c.createTopic("solo", []int32{1})
	if code := c.assign(1, solo.ID, 0, a1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c.heartbeat(1, []Uuid{a1})
	if b, _ := c.img.Broker(1); !slices.Equal(b.LogDirs, []Uuid{b1}) {
		t.Fatalf("online dirs after the failure %v", b.LogDirs)
	}
	if p := c.partition("t", 0); p.Leader != 2 || slices.Contains(p.ISR, 1) {
		t.Fatalf("partition 0 (in the failed dir) %+v", *p)
	}
	if p := c.partition("t", 2); p.Leader != 2 || slices.Contains(p.ISR, 1) {
		t.Fatalf("partition 2 (in the failed dir) %+v", *p)
	}
	if p := c.partition("t", 1); p.Leader != 1 || !slices.Contains(p.ISR, 1) {
		t.Fatalf("partition 1 (in the dir still online) %+v", *p)
	}
	// Its last in-sync replica gone with the dir, a partition has no
	// leader, and no election gives it one.
	if p := c.partition("solo", 0); p.Leader != NoLeader {
		t.Fatalf("a partition whose only replica is in the failed dir %+v", *p)
	}
	for _, typ := range []int8{0, 1} {
		el := kmsg.NewPtrElectLeadersRequest()
		el.ElectionType = typ
		et := kmsg.NewElectLeadersRequestTopic()
		et.Topic, et.Partitions = "solo", []int32{0}
		el.Topics = append(el.Topics, et)
		recs, resp := c.cc.ElectLeaders(el)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code == 0 || len(recs) != 0 {
			t.Fatalf("election type %d onto a failed dir: %v, %v", typ, kerr.ErrorForCode(code), recs)
		}
	}
	if recs := c.heartbeat(1, []Uuid{a1}); len(recs) != 0 {
		t.Fatalf("a dir reported offline again wrote %v", recs)
	}
	checkInvariants(t, c.img)

	// The leader of partition 0 may not bring the replica back.
	p := c.partition("t", 0)
	b1r, _ := c.img.Broker(1)
	b2r, _ := c.img.Broker(2)
	b3r, _ := c.img.Broker(3)
	alter := func(p *Partition, isr ...int32) int16 {
		req := kmsg.NewPtrAlterPartitionRequest()
		req.Version, req.BrokerID, req.BrokerEpoch = 3, 2, b2r.Epoch
		rt := kmsg.NewAlterPartitionRequestTopic()
		rt.TopicID = topic.ID
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.LeaderEpoch, rp.PartitionEpoch = p.LeaderEpoch, p.PartitionEpoch
		epochs := map[int32]int64{1: b1r.Epoch, 2: b2r.Epoch, 3: b3r.Epoch}
		for _, id := range isr {
			m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			m.BrokerID, m.BrokerEpoch = id, epochs[id]
			rp.NewEpochISR = append(rp.NewEpochISR, m)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		recs, resp := c.cc.AlterPartition(req)
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			c.commit(recs)
		}
		return code
	}
	if code := alter(p, 2, 3, 1); code != kerr.IneligibleReplica.Code {
		t.Fatalf("ISR expansion with a replica in a failed dir: %v", kerr.ErrorForCode(code))
	}
	// Nor may a preferred election make it leader.
	el := kmsg.NewPtrElectLeadersRequest()
	el.ElectionType = 0
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = "t", []int32{0}
	el.Topics = append(el.Topics, et)
	if _, resp := c.cc.ElectLeaders(el); resp.Topics[0].Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election onto a failed dir: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	// Recreated in the dir still online, it may rejoin.
	if code := c.assign(1, topic.ID, 0, b1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := alter(c.partition("t", 0), 2, 3, 1); code != 0 {
		t.Fatalf("ISR expansion once the replica is in an online dir: %v", kerr.ErrorForCode(code))
	}
	// An assignment into the failed dir takes the replica out again.
	if code := c.assign(1, topic.ID, 1, a1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if p := c.partition("t", 1); p.Leader == 1 || slices.Contains(p.ISR, 1) || p.Directory(1) != a1 {
		t.Fatalf("partition 1 assigned into the failed dir %+v", *p)
	}
	if off := offlineOf(c.img, c.partition("t", 1)); !slices.Equal(off, []int32{1}) {
		t.Fatalf("offline replicas %v", off)
	}
	checkInvariants(t, c.img)
}

// offlineOf are p's replicas whose broker has their dir offline.
func offlineOf(img *Image, p *Partition) []int32 {
	var out []int32
	for _, r := range p.Replicas {
		if !replicaOnline(img, p, r) {
			out = append(out, r)
		}
	}
	return out
}

// TestRegistrationLogDirs: a registration with a reserved, repeated, or
// another broker's directory id is INVALID_REGISTRATION, as in Kafka.
func TestRegistrationLogDirs(t *testing.T) {
	a1 := NewUuid()
	c := newDirCluster(t, []Uuid{a1})
	for name, dirs := range map[string][]Uuid{
		"reserved":       {DirUnassigned},
		"repeated":       {NewUuid(), NewUuid(), {}},
		"another broker": {a1},
	} {
		if name == "repeated" {
			dirs[2] = dirs[0]
		}
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID, req.IncarnationID = 2, [16]byte{2}
		for _, d := range dirs {
			req.LogDirs = append(req.LogDirs, d)
		}
		if _, resp := c.cc.RegisterBroker(c.now, req); resp.ErrorCode != kerr.InvalidRegistration.Code {
			t.Errorf("%s: %v", name, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	// Broker 1 re-registering with its own dir is fine.
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.IncarnationID, req.LogDirs = 1, [16]byte{1}, [][16]byte{a1}
	if _, resp := c.cc.RegisterBroker(c.now, req); resp.ErrorCode != 0 {
		t.Fatalf("re-registration: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
