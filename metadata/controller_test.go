package metadata

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTopicNameRules(t *testing.T) {
	cases := []struct {
		name  string
		legal bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"with space", false},
		{"slash/es", false},
		{"colon:", false},
		{"ünï", false},
		{"tab\t", false},
		{"__internal_looking", true},
	}
	for _, c := range cases {
		err := validateTopicName(c.name)
		if (err == nil) != c.legal {
			t.Errorf("validateTopicName(%q) = %v, want legal=%t", c.name, err, c.legal)
		}
	}
}

func TestTopicConfigValidation(t *testing.T) {
	cases := []struct {
		configs map[string]string
		wantErr string // substring; "" means valid
	}{
		{map[string]string{"retention.ms": "-1"}, ""},
		{map[string]string{"retention.ms": " 1000 "}, ""},
		{map[string]string{"retention.ms": "-2"}, "at least -1"},
		{map[string]string{"retention.bytes": "-5"}, ""},
		{map[string]string{"segment.bytes": "14"}, ""},
		{map[string]string{"segment.bytes": "13"}, "at least 14"},
		{map[string]string{"segment.bytes": "2147483648"}, "INT"},
		{map[string]string{"segment.ms": "0"}, "at least 1"},
		{map[string]string{"segment.index.bytes": "3"}, "at least 4"},
		{map[string]string{"min.insync.replicas": "0"}, "at least 1"},
		{map[string]string{"max.message.bytes": "-1"}, "at least 0"},
		{map[string]string{"cleanup.policy": "compact, delete"}, ""},
		{map[string]string{"cleanup.policy": "compact,none"}, "expected a list"},
		{map[string]string{"compression.type": "lz4"}, ""},
		{map[string]string{"compression.type": "LZ4"}, "one of"},
		{map[string]string{"compression.gzip.level": "-1"}, ""},
		{map[string]string{"compression.gzip.level": "0"}, "between 1 and 9"},
		{map[string]string{"compression.zstd.level": "23"}, "no more than 22"},
		{map[string]string{"message.timestamp.type": "LogAppendTime"}, ""},
		{map[string]string{"unclean.leader.election.enable": "TRUE"}, ""},
		{map[string]string{"preallocate": "1"}, "true or false"},
		{map[string]string{"min.cleanable.dirty.ratio": "NaN"}, "DOUBLE"},
		{map[string]string{"flush.messages": "0"}, "at least 1"},
		{map[string]string{"follower.replication.throttled.replicas": "0:1,1:2"}, ""},
		{map[string]string{"follower.replication.throttled.replicas": "0-1"}, "literal '*'"},
		{map[string]string{"nonsense": "1"}, "Unknown topic config name: nonsense"},
		{map[string]string{"min.compaction.lag.ms": "6", "max.compaction.lag.ms": "5"}, "conflict"},
	}
	for _, c := range cases {
		err := ValidateTopicConfigs(c.configs)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%v: unexpected error %v", c.configs, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: error %v, want one containing %q", c.configs, err, c.wantErr)
		}
	}
}

func TestEveryTopicConfigDefaultIsValid(t *testing.T) {
	for _, n := range TopicConfigNames() {
		d, _ := TopicConfigDef(n)
		if d.Type == ConfigList && d.Default == "" {
			continue // an empty throttled-replicas list is the default
		}
		if err := d.Validate(d.Default); err != nil {
			t.Errorf("%s default %q: %v", n, d.Default, err)
		}
	}
}

func brokersForPlacement(racks ...string) []*BrokerRegistration {
	var out []*BrokerRegistration
	for i, r := range racks {
		out = append(out, &BrokerRegistration{ID: int32(i + 1), Rack: r})
	}
	return out
}

func TestPlacementSpreadsLeadersAndReplicas(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 7; n++ {
		brokers := brokersForPlacement(make([]string, n)...)
		for rf := 1; rf <= n; rf++ {
			parts := placeReplicas(brokers, 4*n, rf, -1, 0, rng)
			leaders := map[int32]int{}
			replicas := map[int32]int{}
			for _, p := range parts {
				if len(p) != rf {
					t.Fatalf("n=%d rf=%d: %v", n, rf, p)
				}
				for i, r := range p {
					if slices.Contains(p[:i], r) {
						t.Fatalf("n=%d rf=%d: replica twice in %v", n, rf, p)
					}
					replicas[r]++
				}
				leaders[p[0]]++
			}
			for _, b := range brokers {
				// 4n partitions round-robin: exactly 4 leaderships and
				// 4·rf replicas each.
				if leaders[b.ID] != 4 || replicas[b.ID] != 4*rf {
					t.Fatalf("n=%d rf=%d: broker %d leads %d, holds %d", n, rf, b.ID, leaders[b.ID], replicas[b.ID])
				}
			}
		}
	}
}

func TestRackAwarePlacementSpansRacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	brokers := brokersForPlacement("a", "a", "a", "b", "b", "c", "c", "c", "c")
	rackOf := map[int32]string{}
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
	}
	for rf := 1; rf <= len(brokers); rf++ {
		for _, p := range placeReplicas(brokers, 50, rf, -1, 0, rng) {
			racks := map[string]bool{}
			for i, r := range p {
				if slices.Contains(p[:i], r) {
					t.Fatalf("rf=%d: replica twice in %v", rf, p)
				}
				racks[rackOf[r]] = true
			}
			if want := min(rf, 3); len(racks) != want {
				t.Fatalf("rf=%d: %v spans %d racks, want %d", rf, p, len(racks), want)
			}
		}
	}
}

// cluster is a controller and its image, committing every batch.
type cluster struct {
	t   testing.TB
	cc  *ClusterControl
	img *Image
	now time.Time
}

func newCluster(t testing.TB, cfg ControllerConfig, brokers int) *cluster {
	c := &cluster{t: t, img: EmptyImage(), now: time.Unix(1700000000, 0)}
	c.cc = NewClusterControl(cfg, c.img, c.now, rand.New(rand.NewPCG(9, 9)))
	for id := int32(1); id <= int32(brokers); id++ {
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID = id
		req.IncarnationID = [16]byte{byte(id)}
		req.LogDirs = [][16]byte{testLogDir(id, 0), testLogDir(id, 1)}
		recs, resp := c.cc.RegisterBroker(c.now, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("register %d: %d", id, resp.ErrorCode)
		}
		c.commit(recs)
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, resp.BrokerEpoch, c.img.Offset()
		recs, _ = c.cc.Heartbeat(c.now, hb)
		c.commit(recs)
	}
	return c
}

func (c *cluster) commit(recs []Record) {
	if len(recs) == 0 {
		return
	}
	next, _, err := c.img.Apply(c.img.Offset()+1, recs)
	if err != nil {
		c.t.Fatalf("records do not apply: %v", err)
	}
	c.img = next
	c.cc.SetImage(next)
}

// checkInvariants checks what every committed image must satisfy: ISRs
// non-empty, made of distinct replicas; a leader is an active ISR member;
// an ISR of several members has only active ones.
func checkInvariants(t testing.TB, img *Image) {
	t.Helper()
	for _, tp := range img.Topics() {
		for i, p := range tp.Partitions {
			where := fmt.Sprintf("%s-%d %+v", tp.Name, i, *p)
			if (len(p.ISR) == 0 && !ELREnabled(img)) || !validISR(p.Replicas, p.ISR) {
				t.Fatalf("%s: bad ISR", where)
			}
			// Eligible leader replicas (KIP-966): replicas outside the ISR,
			// each once, only with the feature on; one last known leader.
			if (len(p.ELR) > 0 || len(p.LastKnownELR) > 0) && !ELREnabled(img) {
				t.Fatalf("%s: ELR without eligible.leader.replicas.version", where)
			}
			for i, r := range p.ELR {
				if !slices.Contains(p.Replicas, r) || slices.Contains(p.ISR, r) || slices.Contains(p.ELR[:i], r) {
					t.Fatalf("%s: ELR member %d not a replica, in the ISR, or twice", where, r)
				}
			}
			if len(p.LastKnownELR) > 1 {
				t.Fatalf("%s: more than one last known leader", where)
			}
			if p.Leader != NoLeader && (!slices.Contains(p.ISR, p.Leader) || !isActive(img, p.Leader)) {
				t.Fatalf("%s: leader not an active ISR member", where)
			}
			if p.Leader != NoLeader && !replicaOnline(img, p, p.Leader) {
				t.Fatalf("%s: leader's replica in an offline log dir", where)
			}
			if len(p.Directories) != 0 && len(p.Directories) != len(p.Replicas) {
				t.Fatalf("%s: %d directories for %d replicas", where, len(p.Directories), len(p.Replicas))
			}
			if len(p.ISR) > 1 {
				for _, r := range p.ISR {
					if !isActive(img, r) {
						t.Fatalf("%s: inactive broker %d in a multi-member ISR", where, r)
					}
				}
			}
			// A recovering leader is the whole ISR; with eligible leader
			// replicas, fenced, it may leave an empty one.
			if p.LeaderRecoveryState == LeaderRecovering && len(p.ISR) != 1 && !(len(p.ISR) == 0 && ELREnabled(img)) {
				t.Fatalf("%s: recovering with ISR %v", where, p.ISR)
			}
			for i, r := range p.Replicas {
				if slices.Contains(p.Replicas[:i], r) {
					t.Fatalf("%s: replica %d twice", where, r)
				}
			}
			for _, r := range p.AddingReplicas {
				if !slices.Contains(p.Replicas, r) || slices.Contains(p.RemovingReplicas, r) {
					t.Fatalf("%s: adding replica %d not a replica, or also removing", where, r)
				}
			}
			for _, r := range p.RemovingReplicas {
				if !slices.Contains(p.Replicas, r) {
					t.Fatalf("%s: removing replica %d not a replica", where, r)
				}
			}
			if len(p.RemovingReplicas) >= len(p.Replicas) {
				t.Fatalf("%s: every replica is leaving", where)
			}
		}
	}
}

// TestRandomOperationsKeepInvariants drives the controller with a long
// random sequence of requests and time, commits every batch, and checks
// after each that the batch applied and the invariants hold.
func TestRandomOperationsKeepInvariants(t *testing.T) {
	steps := 3000
	if testing.Short() {
		steps = 500
	}
	started, finished := 0, 0     // reassignments
	elrElections := 0             // leaders elected with an empty ISR, from the ELR
	dirsOffline, assigned := 0, 0 // log dirs reported offline, replicas assigned to dirs
	// Seeds 4-6 run with eligible leader replicas on (KIP-966), topics
	// with a min.insync.replicas of up to 3 and clean and unclean
	// restarts.
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		cfg := DefaultControllerConfig()
		cfg.LeaderImbalanceCheckInterval = 5 * time.Second
		c := newCluster(t, cfg, 4)
		elr := seed > 3
		if elr {
			c.commit([]Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: LatestMetadataVersion},
				&FeatureLevelRecord{Name: EligibleLeaderReplicasFeature, FeatureLevel: 1}})
		}
		incarnation := map[int32]byte{}
		var lastOp string
		defer func() {
			if t.Failed() {
				t.Logf("seed %d, last: %s", seed, lastOp)
			}
		}()
		for step := range steps {
			c.now = c.now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			id := int32(rng.IntN(5) + 1)
			epoch := int64(-1)
			if b, ok := c.img.Broker(id); ok {
				epoch = b.Epoch
			}
			var recs []Record
			op := rng.IntN(14)
			lastOp = fmt.Sprintf("step %d op %d broker %d", step, op, id)
			switch op {
			case 0:
				req := kmsg.NewPtrBrokerRegistrationRequest()
				req.BrokerID = id
				if rng.IntN(3) == 0 {
					incarnation[id]++
				}
				req.IncarnationID = [16]byte{byte(id), incarnation[id]}
				if elr && rng.IntN(2) == 0 {
					req.PreviousBrokerEpoch = epoch // a clean restart
				}
				if rng.IntN(2) == 0 {
					req.Rack = strp(string(rune('a' + id%2)))
				}
				// Its log dirs (KIP-858): now and then the first was
				// replaced by a new disk, or is gone.
				req.LogDirs = [][16]byte{testLogDir(id, 0), testLogDir(id, 1)}
				switch rng.IntN(6) {
				case 0:
					req.LogDirs[0] = testLogDir(id, 2+rng.IntN(3))
				case 1:
					req.LogDirs = req.LogDirs[1:]
				}
				recs, _ = c.cc.RegisterBroker(c.now, req)
			case 1, 2, 3:
				req := kmsg.NewPtrBrokerHeartbeatRequest()
				req.BrokerID, req.BrokerEpoch = id, epoch
				req.CurrentMetadataOffset = c.img.Offset() - int64(rng.IntN(2))
				req.WantFence = rng.IntN(15) == 0
				req.WantShutdown = rng.IntN(15) == 0
				if rng.IntN(20) == 0 {
					req.OfflineLogDirs = [][16]byte{testLogDir(id, rng.IntN(5))}
				}
				recs, _ = c.cc.Heartbeat(c.now, req)
			case 4:
				recs = c.cc.Tick(c.now)
			case 5:
				req := kmsg.NewPtrCreateTopicsRequest()
				tp := kmsg.NewCreateTopicsRequestTopic()
				tp.Topic = fmt.Sprintf("t%d", rng.IntN(30))
				tp.NumPartitions = int32(rng.IntN(4) + 1)
				tp.ReplicationFactor = int16(rng.IntN(3) + 1)
				if rng.IntN(4) == 0 {
					cfg := kmsg.NewCreateTopicsRequestTopicConfig()
					cfg.Name, cfg.Value = "unclean.leader.election.enable", strp("true")
					tp.Configs = append(tp.Configs, cfg)
				}
				if elr && rng.IntN(2) == 0 {
					cfg := kmsg.NewCreateTopicsRequestTopicConfig()
					cfg.Name, cfg.Value = "min.insync.replicas", strp(fmt.Sprint(rng.IntN(3)+1))
					tp.Configs = append(tp.Configs, cfg)
				}
				req.Topics = append(req.Topics, tp)
				recs, _ = c.cc.CreateTopics(req, false)
			case 6, 7, 8:
				recs = randomAlterPartition(c, rng)
			case 9:
				req := kmsg.NewPtrElectLeadersRequest()
				req.Version = 2
				req.ElectionType = int8(rng.IntN(2))
				recs, _ = c.cc.ElectLeaders(req)
			case 10:
				req := kmsg.NewPtrCreatePartitionsRequest()
				tp := kmsg.NewCreatePartitionsRequestTopic()
				tp.Topic = fmt.Sprintf("t%d", rng.IntN(30))
				tp.Count = int32(rng.IntN(6) + 1)
				req.Topics = append(req.Topics, tp)
				recs, _ = c.cc.CreatePartitions(req)
			case 11:
				if rng.IntN(4) == 0 {
					req := kmsg.NewPtrDeleteTopicsRequest()
					req.TopicNames = []string{fmt.Sprintf("t%d", rng.IntN(30))}
					recs, _ = c.cc.DeleteTopics(req)
				}
			case 12:
				req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				rt.Topic = fmt.Sprintf("t%d", rng.IntN(30))
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Partition = int32(rng.IntN(3))
				if rng.IntN(4) != 0 { // else cancel
					rp.Replicas = []int32{}
					for _, b := range rng.Perm(5)[:rng.IntN(3)+1] {
						rp.Replicas = append(rp.Replicas, int32(b+1))
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				recs, _ = c.cc.AlterPartitionReassignments(req)
			case 13:
				// A broker reports where it created a replica.
				req := kmsg.NewPtrAssignReplicasToDirsRequest()
				req.BrokerID, req.BrokerEpoch = id, epoch
				if t, ok := c.img.Topic(fmt.Sprintf("t%d", rng.IntN(30))); ok {
					d := kmsg.NewAssignReplicasToDirsRequestDirectory()
					d.ID = testLogDir(id, rng.IntN(5))
					rt := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
					rt.TopicID = t.ID
					rt.Partitions = []kmsg.AssignReplicasToDirsRequestDirectoryTopicPartition{{Partition: int32(rng.IntN(3))}}
					d.Topics = append(d.Topics, rt)
					req.Directories = append(req.Directories, d)
					recs, _ = c.cc.AssignReplicasToDirs(req)
				}
			}
			for _, r := range recs {
				switch r := r.(type) {
				case *BrokerRegistrationChangeRecord:
					if r.LogDirs != nil {
						dirsOffline++
					}
				case *PartitionChangeRecord:
					if r.Directories != nil && r.Replicas == nil {
						assigned++
					}
				}
				if pc, ok := r.(*PartitionChangeRecord); ok && pc.Leader >= 0 {
					if _, p, ok := partitionOf(c.img, PartitionKey{pc.TopicID, pc.PartitionID}); ok && len(p.ISR) == 0 && slices.Contains(p.ELR, pc.Leader) {
						elrElections++
					}
				}
				if pc, ok := r.(*PartitionChangeRecord); ok && pc.Replicas != nil {
					if len(pc.AddingReplicas) > 0 {
						started++
					} else if _, p, ok := partitionOf(c.img, PartitionKey{pc.TopicID, pc.PartitionID}); ok && len(p.AddingReplicas) > 0 {
						finished++ // completed or cancelled
					}
				}
			}
			c.commit(recs)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, step)
			}
			checkInvariants(t, c.img)
		}
	}
	if started == 0 || finished == 0 {
		t.Errorf("%d reassignments started, %d finished: the sequences exercised none", started, finished)
	}
	if elrElections == 0 {
		t.Errorf("no leader elected from an ELR: the sequences exercised none")
	}
	if dirsOffline == 0 || assigned == 0 {
		t.Errorf("%d log dirs reported offline, %d replicas assigned: the sequences exercised too little", dirsOffline, assigned)
	}
	t.Logf("%d reassignments started, %d finished, %d leaders elected from an ELR, %d log dirs offline, %d replicas assigned",
		started, finished, elrElections, dirsOffline, assigned)
}

// randomAlterPartition is a leader proposing a plausible ISR change.
func randomAlterPartition(c *cluster, rng *rand.Rand) []Record {
	topics := c.img.Topics()
	if len(topics) == 0 {
		return nil
	}
	tp := topics[rng.IntN(len(topics))]
	pi := rng.IntN(len(tp.Partitions))
	p := tp.Partitions[pi]
	if p.Leader == NoLeader {
		return nil
	}
	isr := []int32{p.Leader}
	for _, r := range p.Replicas {
		if r != p.Leader && rng.IntN(2) == 0 {
			isr = append(isr, r)
		}
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID = p.Leader
	if b, ok := c.img.Broker(p.Leader); ok {
		req.BrokerEpoch = b.Epoch
	}
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = tp.ID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = int32(pi), p.LeaderEpoch, p.PartitionEpoch
	if p.LeaderRecoveryState == LeaderRecovering && rng.IntN(2) == 0 {
		rp.LeaderRecoveryState = LeaderRecovering
		isr = isr[:1]
	}
	for _, id := range isr {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID, m.BrokerEpoch = id, -1
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	recs, resp := c.cc.AlterPartition(req)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == kerr.NotController.Code {
				c.t.Fatalf("the controller's image is current, yet NOT_CONTROLLER")
			}
		}
	}
	return recs
}

// FuzzControllerRequests decodes arbitrary bytes as one of the requests the
// controller serves (every field an attacker controls) and checks that the
// controller answers without panicking and that whatever records it
// returns apply to the image and keep its invariants.
func FuzzControllerRequests(f *testing.F) {
	seed := func(api byte, version int16, req kmsg.Request) {
		req.SetVersion(version)
		f.Add(api, version, req.AppendTo(nil))
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "fuzzed", 3, 2
	ct.Topics = append(ct.Topics, topic)
	seed(0, 7, ct)
	seed(1, 6, kmsg.NewPtrDeleteTopicsRequest())
	seed(2, 3, kmsg.NewPtrCreatePartitionsRequest())
	seed(3, 1, kmsg.NewPtrIncrementalAlterConfigsRequest())
	seed(4, 2, kmsg.NewPtrAlterConfigsRequest())
	seed(5, 3, kmsg.NewPtrAlterPartitionRequest())
	seed(6, 2, kmsg.NewPtrElectLeadersRequest())
	seed(7, 0, kmsg.NewPtrAllocateProducerIDsRequest())
	seed(8, 3, kmsg.NewPtrBrokerRegistrationRequest())
	seed(9, 1, kmsg.NewPtrBrokerHeartbeatRequest())
	apa := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	apaTopic := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	apaPart := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	apaTopic.Topic, apaPart.Replicas = "a", []int32{2, 3}
	apaTopic.Partitions = append(apaTopic.Partitions, apaPart)
	apa.Topics = append(apa.Topics, apaTopic)
	seed(10, 1, apa)
	acq := kmsg.NewPtrAlterClientQuotasRequest()
	acqEntry := kmsg.NewAlterClientQuotasRequestEntry()
	acqEntry.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("u")}, {Type: "client-id"}}
	acqEntry.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: QuotaProducerByteRate, Value: 1024}}
	acq.Entries = append(acq.Entries, acqEntry)
	seed(11, 1, acq)
	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	scram.Upsertions = append(scram.Upsertions, kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		Name: "u", Mechanism: ScramSHA256, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p"),
	})
	scram.Deletions = append(scram.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: "v", Mechanism: ScramSHA512})
	seed(12, 0, scram)
	createACLs := kmsg.NewPtrCreateACLsRequest()
	for _, pattern := range []kmsg.ACLResourcePatternType{kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed} {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "a", pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:u", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		createACLs.Creations = append(createACLs.Creations, c)
	}
	seed(13, 3, createACLs)
	deleteACLs := kmsg.NewPtrDeleteACLsRequest()
	deleteFilter := kmsg.NewDeleteACLsRequestFilter()
	deleteFilter.ResourceType, deleteFilter.ResourceName, deleteFilter.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.StringPtr("a"), kmsg.ACLResourcePatternTypeMatch
	deleteFilter.Operation, deleteFilter.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	deleteACLs.Filters = append(deleteACLs.Filters, deleteFilter)
	seed(14, 3, deleteACLs)
	uf := kmsg.NewPtrUpdateFeaturesRequest()
	for _, u := range []struct {
		name  string
		level int16
		typ   int8
	}{{MetadataVersionFeature, 20, 1}, {MetadataVersionFeature, 9, 2}, {KRaftVersionFeature, 0, 3}} {
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = u.name, u.level, u.typ
		uf.FeatureUpdates = append(uf.FeatureUpdates, fu)
	}
	seed(15, 1, uf)
	// With eligible leader replicas on (api&64): a fencing heartbeat, a
	// re-registration without a clean shutdown, a shrinking AlterPartition.
	fence := kmsg.NewPtrBrokerHeartbeatRequest()
	fence.BrokerID, fence.WantFence = 1, true
	seed(64+9, 1, fence)
	rereg := kmsg.NewPtrBrokerRegistrationRequest()
	rereg.BrokerID, rereg.IncarnationID = 2, [16]byte{9}
	seed(64+8, 3, rereg)
	seed(64+5, 3, kmsg.NewPtrAlterPartitionRequest())

	// Log dirs (KIP-858): broker 1 reports its first dir offline, and
	// assigns a replica of topic "a" to its second.
	base := fuzzCluster(f, 0)
	b1, _ := base.img.Broker(1)
	ta, _ := base.img.Topic("a")
	offline := kmsg.NewPtrBrokerHeartbeatRequest()
	offline.BrokerID, offline.BrokerEpoch, offline.OfflineLogDirs = 1, b1.Epoch, [][16]byte{testLogDir(1, 0)}
	seed(9, 1, offline)
	assign := kmsg.NewPtrAssignReplicasToDirsRequest()
	assign.BrokerID, assign.BrokerEpoch = 1, b1.Epoch
	ad := kmsg.NewAssignReplicasToDirsRequestDirectory()
	ad.ID = testLogDir(1, 1)
	at := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
	at.TopicID = ta.ID
	at.Partitions = []kmsg.AssignReplicasToDirsRequestDirectoryTopicPartition{{Partition: 0}, {Partition: 2}}
	ad.Topics = append(ad.Topics, at)
	assign.Directories = append(assign.Directories, ad)
	seed(16, 0, assign)
	// Delegation tokens: fuzzCluster has fuzzToken, owned by User:u.
	createTok := kmsg.NewPtrCreateDelegationTokenRequest()
	createTok.OwnerPrincipalType, createTok.OwnerPrincipalName = kmsg.StringPtr("User"), kmsg.StringPtr("v")
	createTok.Renewers = []kmsg.CreateDelegationTokenRequestRenewer{{PrincipalType: "User", PrincipalName: "w"}}
	createTok.MaxLifetimeMillis = 60000
	seed(17, 3, createTok)
	renewTok := kmsg.NewPtrRenewDelegationTokenRequest()
	renewTok.HMAC, renewTok.RenewTimeMillis = DelegationTokenHMAC(fuzzTokenSecret, fuzzToken), 1000
	seed(18, 2, renewTok)
	expireTok := kmsg.NewPtrExpireDelegationTokenRequest()
	expireTok.HMAC, expireTok.ExpiryPeriodMillis = DelegationTokenHMAC(fuzzTokenSecret, fuzzToken), -1
	seed(19, 2, expireTok)

	f.Fuzz(func(t *testing.T, api byte, version int16, data []byte) {
		c := fuzzCluster(t, api)

		reqs := []kmsg.Request{
			kmsg.NewPtrCreateTopicsRequest(), kmsg.NewPtrDeleteTopicsRequest(),
			kmsg.NewPtrCreatePartitionsRequest(), kmsg.NewPtrIncrementalAlterConfigsRequest(),
			kmsg.NewPtrAlterConfigsRequest(), kmsg.NewPtrAlterPartitionRequest(),
			kmsg.NewPtrElectLeadersRequest(), kmsg.NewPtrAllocateProducerIDsRequest(),
			kmsg.NewPtrBrokerRegistrationRequest(), kmsg.NewPtrBrokerHeartbeatRequest(),
			kmsg.NewPtrAlterPartitionAssignmentsRequest(), kmsg.NewPtrAlterClientQuotasRequest(),
			kmsg.NewPtrAlterUserSCRAMCredentialsRequest(), kmsg.NewPtrCreateACLsRequest(),
			kmsg.NewPtrDeleteACLsRequest(), kmsg.NewPtrUpdateFeaturesRequest(),
			kmsg.NewPtrAssignReplicasToDirsRequest(), kmsg.NewPtrCreateDelegationTokenRequest(),
			kmsg.NewPtrRenewDelegationTokenRequest(), kmsg.NewPtrExpireDelegationTokenRequest(),
		}
		req := reqs[int(api)%len(reqs)]
		if version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		if err := req.ReadFrom(data); err != nil {
			return
		}
		var recs []Record
		switch r := req.(type) {
		case *kmsg.CreateTopicsRequest:
			recs, _ = c.cc.CreateTopics(r, api >= 128)
		case *kmsg.DeleteTopicsRequest:
			recs, _ = c.cc.DeleteTopics(r)
		case *kmsg.CreatePartitionsRequest:
			recs, _ = c.cc.CreatePartitions(r)
		case *kmsg.IncrementalAlterConfigsRequest:
			recs, _ = c.cc.IncrementalAlterConfigs(r)
		case *kmsg.AlterConfigsRequest:
			recs, _ = c.cc.AlterConfigs(r)
		case *kmsg.AlterPartitionRequest:
			recs, _ = c.cc.AlterPartition(r)
		case *kmsg.ElectLeadersRequest:
			recs, _ = c.cc.ElectLeaders(r)
		case *kmsg.AllocateProducerIDsRequest:
			recs, _ = c.cc.AllocateProducerIds(r)
		case *kmsg.BrokerRegistrationRequest:
			recs, _ = c.cc.RegisterBroker(c.now, r)
		case *kmsg.BrokerHeartbeatRequest:
			recs, _ = c.cc.Heartbeat(c.now, r)
		case *kmsg.AlterPartitionAssignmentsRequest:
			recs, _ = c.cc.AlterPartitionReassignments(r)
		case *kmsg.AssignReplicasToDirsRequest:
			recs, _ = c.cc.AssignReplicasToDirs(r)
		case *kmsg.AlterClientQuotasRequest:
			recs, _ = c.cc.AlterClientQuotas(r)
		case *kmsg.AlterUserSCRAMCredentialsRequest:
			recs, _ = c.cc.AlterUserScramCredentials(r)
		case *kmsg.CreateDelegationTokenRequest:
			var resp *kmsg.CreateDelegationTokenResponse
			recs, resp = c.cc.CreateDelegationToken(c.now, r, "User:u")
			if (resp.ErrorCode == 0) != (len(recs) == 1) {
				t.Fatalf("create token: error %d with %d records", resp.ErrorCode, len(recs))
			}
		case *kmsg.RenewDelegationTokenRequest:
			recs, _ = c.cc.RenewDelegationToken(c.now, r, []string{"User:u", "User:w", "User:x"}[int(api)%3])
		case *kmsg.ExpireDelegationTokenRequest:
			recs, _ = c.cc.ExpireDelegationToken(c.now, r, []string{"User:u", "User:w", "User:x"}[int(api)%3])
		case *kmsg.CreateACLsRequest:
			var resp *kmsg.CreateACLsResponse
			recs, resp = c.cc.CreateAcls(r)
			if len(resp.Results) != len(r.Creations) {
				t.Fatalf("%d results for %d creations", len(resp.Results), len(r.Creations))
			}
		case *kmsg.DeleteACLsRequest:
			var resp *kmsg.DeleteACLsResponse
			recs, resp = c.cc.DeleteAcls(r)
			if len(resp.Results) != len(r.Filters) {
				t.Fatalf("%d results for %d filters", len(resp.Results), len(r.Filters))
			}
		case *kmsg.UpdateFeaturesRequest:
			var resp *kmsg.UpdateFeaturesResponse
			recs, resp = c.cc.UpdateFeatures(r)
			if want := len(r.FeatureUpdates); r.Version < 2 && len(resp.Results) != want {
				t.Fatalf("%d results for %d updates", len(resp.Results), want)
			}
			if resp.ErrorCode != 0 && len(recs) > 0 {
				t.Fatalf("refused (%d) with %d records", resp.ErrorCode, len(recs))
			}
			for _, rec := range recs {
				f, ok := rec.(*FeatureLevelRecord)
				if !ok {
					continue // an ELR downgrade's partition changes
				}
				if r, known := SupportedFeatures()[f.Name]; !known || f.FeatureLevel < r.Min || f.FeatureLevel > r.Max {
					t.Fatalf("committed %s at %d", f.Name, f.FeatureLevel)
				}
			}
		}
		data, err := EncodeBatch(recs)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		if recs, err = DecodeBatch(data); err != nil {
			t.Fatalf("decode: %v", err)
		}
		c.commit(recs)
		checkInvariants(t, c.img)
		checkACLInvariants(t, c.img)
	})
}

// testLogDir is the id of broker's log dir i in newCluster's clusters.
func testLogDir(broker int32, i int) Uuid { return Uuid{0: 1, 1: byte(broker), 15: byte(i)} }

// fuzzCluster is FuzzControllerRequests' cluster: three brokers, eligible
// leader replicas on when api&64, topics "a" and "b.c", some ACLs.
// fuzzToken is the delegation token fuzzCluster has, under
// fuzzTokenSecret.
const fuzzToken, fuzzTokenSecret = "fuzz-token", "fuzz-secret"

func fuzzCluster(t testing.TB, api byte) *cluster {
	cfg := DefaultControllerConfig()
	cfg.DelegationTokens.SecretKey = fuzzTokenSecret
	c := newCluster(t, cfg, 3)
	ms := c.now.UnixMilli()
	c.commit([]Record{&DelegationTokenRecord{TokenID: fuzzToken, Owner: "User:u", Requester: "User:u", Renewers: []string{"User:w"},
		IssueTimestamp: ms, MaxTimestamp: ms + 3600000, ExpirationTimestamp: ms + 60000}})
	if api&64 != 0 { // eligible leader replicas on (KIP-966)
		c.commit([]Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: LatestMetadataVersion},
			&FeatureLevelRecord{Name: EligibleLeaderReplicasFeature, FeatureLevel: 1}})
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"a", "b.c"} {
		tp := kmsg.NewCreateTopicsRequestTopic()
		tp.Topic, tp.NumPartitions, tp.ReplicationFactor = name, 3, 3
		ct.Topics = append(ct.Topics, tp)
	}
	recs, _ := c.cc.CreateTopics(ct, false)
	c.commit(recs)
	// Some ACLs for DeleteAcls to match and CreateAcls to duplicate.
	acls := kmsg.NewPtrCreateACLsRequest()
	acls.Version = 3
	for i, name := range []string{"a", "b.", "*"} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName = kmsg.ACLResourceTypeTopic, name
		cr.ResourcePatternType = kmsg.ACLResourcePatternType(3 + i%2)
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:u", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		acls.Creations = append(acls.Creations, cr)
	}
	recs, _ = c.cc.CreateAcls(acls)
	c.commit(recs)
	return c
}

// checkACLInvariants checks the ACLs of an image: every one valid as
// CreateAcls requires, no binding twice, and DescribeAcls listing each once.
func checkACLInvariants(t testing.TB, img *Image) {
	t.Helper()
	seen := map[ACL]bool{}
	for _, a := range img.ACLs() {
		if msg, _ := validateNewACL(a); msg != "" {
			t.Fatalf("stored ACL %s: %s", a, msg)
		}
		if seen[a.binding()] {
			t.Fatalf("ACL %s twice", a)
		}
		seen[a.binding()] = true
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = 3
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	n := 0
	for _, r := range DescribeAcls(img, req).Resources {
		n += len(r.ACLs)
	}
	if n != img.NumACLs() {
		t.Fatalf("DescribeAcls lists %d ACLs of %d", n, img.NumACLs())
	}
}

func TestControllerNeverReusesProducerIDBlocks(t *testing.T) {
	c := newCluster(t, DefaultControllerConfig(), 1)
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = 1, 1
	// The driver breaks the commit contract: two allocations, no commit.
	_, a := c.cc.AllocateProducerIds(req)
	_, b := c.cc.AllocateProducerIds(req)
	if a.ProducerIDStart == b.ProducerIDStart {
		t.Fatalf("block %d handed out twice", a.ProducerIDStart)
	}
}

func TestControllerSurvivesFailover(t *testing.T) {
	// A new active controller built from the image: brokers keep their
	// registrations, and get a full session from the moment it starts.
	c := newCluster(t, DefaultControllerConfig(), 2)
	later := c.now.Add(time.Hour)
	cc := NewClusterControl(DefaultControllerConfig(), c.img, later, rand.New(rand.NewPCG(1, 1)))
	if recs := cc.Tick(later.Add(9 * time.Second)); len(recs) != 0 {
		t.Fatalf("fenced within the first session: %v", recs)
	}
	if recs := cc.Tick(later.Add(10 * time.Second)); len(recs) != 2 {
		t.Fatalf("want both brokers fenced after a silent session, got %d records", len(recs))
	}
	// A re-registration after failover gets an epoch above every earlier one.
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.IncarnationID = 1, [16]byte{1}
	_, resp := cc.RegisterBroker(later.Add(20*time.Second), req)
	if b, _ := c.img.Broker(1); resp.BrokerEpoch <= b.Epoch {
		t.Fatalf("epoch %d after %d", resp.BrokerEpoch, b.Epoch)
	}
}

// A broker that completed a controlled shutdown said goodbye: the process
// replacing it registers at once. So does one killed while its controlled
// shutdown was still moving its leaderships (Kafka 4.1, KAFKA-19047): it
// had said it was going away. One that vanished (a crash) keeps its
// node.id until broker.session.timeout.ms passes (Kafka's duplicate
// registration rule).
func TestRestartAfterControlledShutdownRegistersAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shutdown bool // the broker asked for a controlled shutdown
		leads    bool // it led a partition then, so the shutdown had not finished
		want     int16
	}{
		{"finished", true, false, 0},
		{"killed during it", true, true, 0},
		{"crash", false, true, kerr.DuplicateBrokerRegistration.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, DefaultControllerConfig(), 2)
			if tc.leads {
				c.createTopic("t", []int32{1, 2})
			}
			if tc.shutdown {
				b, _ := c.img.Broker(1)
				hb := kmsg.NewPtrBrokerHeartbeatRequest()
				hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset, hb.WantShutdown = 1, b.Epoch, c.img.Offset(), true
				recs, resp := c.cc.Heartbeat(c.now, hb)
				c.commit(recs)
				if resp.ShouldShutdown == tc.leads {
					t.Fatalf("ShouldShutdown %t for a broker that leads: %t", resp.ShouldShutdown, tc.leads)
				}
				if b, _ := c.img.Broker(1); b.InControlledShutdown != tc.leads {
					t.Fatalf("in controlled shutdown: %t, want %t", b.InControlledShutdown, tc.leads)
				}
			}
			req := kmsg.NewPtrBrokerRegistrationRequest()
			req.BrokerID, req.IncarnationID = 1, [16]byte{9, 9}
			req.LogDirs = [][16]byte{testLogDir(1, 0), testLogDir(1, 1)}
			_, resp := c.cc.RegisterBroker(c.now.Add(time.Second), req)
			if resp.ErrorCode != tc.want {
				t.Fatalf("registration answered %d, want %d", resp.ErrorCode, tc.want)
			}
			// The same after the controller itself restarted (a single
			// combined node): the new controller knows only the image.
			fresh := NewClusterControl(DefaultControllerConfig(), c.img, c.now.Add(time.Second), rand.New(rand.NewPCG(1, 2)))
			recs, resp := fresh.RegisterBroker(c.now.Add(time.Second), req)
			if resp.ErrorCode != tc.want {
				t.Fatalf("after a controller restart, registration answered %d, want %d", resp.ErrorCode, tc.want)
			}
			if tc.want != 0 {
				return
			}
			// The new incarnation registers fenced, out of the ISR it
			// was in (the process may have lost its unsynced tail).
			c.commit(recs)
			if b, _ := c.img.Broker(1); !b.Fenced || b.InControlledShutdown || b.IncarnationID != Uuid(req.IncarnationID) {
				t.Fatalf("new registration %+v", b)
			}
			if tc.leads {
				if p := c.partition("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
					t.Fatalf("partition after the new registration: leader %d ISR %v", p.Leader, p.ISR)
				}
			}
		})
	}
}
