package metadata

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leader recovery states (KIP-704). A leader elected uncleanly is RECOVERING
// until it has rebuilt its state; only then may its ISR grow.
const (
	LeaderRecovered  int8 = 0
	LeaderRecovering int8 = 1
)

// election is how a partition change picks its leader (Kafka's
// PartitionChangeBuilder.Election).
type election int

const (
	// electOnline keeps a valid leader, else takes the first replica in
	// the ISR that is acceptable.
	electOnline election = iota
	// electPreferred takes the preferred (first) replica if it is in the
	// ISR and acceptable, else behaves as electOnline.
	electPreferred
	// electUnclean is electOnline, then, if nothing in the ISR will do, the
	// first acceptable replica outside it: an unclean election that may
	// lose acknowledged records.
	electUnclean
)

// partitionChange computes one PartitionChangeRecord, following Kafka's
// PartitionChangeBuilder, with eligible leader replicas (KIP-966 part 1)
// when elr is set, and then the last known leader of Kafka's default
// (useLastKnownLeaderInBalancedRecovery).
type partitionChange struct {
	key PartitionKey
	p   *Partition
	// acceptable says whether a broker may lead (Kafka's LeaderAcceptor).
	acceptable func(int32) bool
	election   election
	// targetISR is the ISR asked for; it starts as the current ISR.
	targetISR []int32
	// targetLRS is the leader recovery state asked for.
	targetLRS int8
	// replicas, adding and removing are the replica set and reassignment
	// asked for; they start as the current ones.
	replicas, adding, removing []int32
	// elr says whether eligible leader replicas are on
	// (eligible.leader.replicas.version 1); minISR is the topic's
	// effective min.insync.replicas, capped by its replication factor.
	elr    bool
	minISR int
	// targetELR starts as the current ELR.
	targetELR []int32
	// uncleanShutdown, if not NoLeader, is a broker that came back from an
	// unclean shutdown: it may have lost records it acknowledged, so it
	// may not stay an eligible leader replica.
	uncleanShutdown int32
	// img is the image the change is decided on: a replica new to the
	// partition starts in its broker's defaultDir there. setDirs are
	// replicas' dirs a broker reported (AssignReplicasToDirs).
	img     *Image
	setDirs map[int32]Uuid
}

func (c *ClusterControl) newPartitionChange(img *Image, t *Topic, k PartitionKey, p *Partition) *partitionChange {
	pc := &partitionChange{
		key: k, p: p,
		acceptable: func(id int32) bool { return isActive(img, id) && replicaOnline(img, p, id) },
		targetISR:  p.ISR,
		targetLRS:  p.LeaderRecoveryState,
		replicas:   p.Replicas, adding: p.AddingReplicas, removing: p.RemovingReplicas,
		targetELR:       p.ELR,
		uncleanShutdown: NoLeader,
		img:             img,
	}
	if ELREnabled(img) {
		pc.elr, pc.minISR = true, c.effectiveMinISR(img, t.Name, len(p.Replicas))
	}
	return pc
}

// replicaOnline reports whether broker id's replica of p is in a log dir
// that is online (Kafka's LeaderAcceptor asks the same of a leader): a
// replica in a failed dir may neither lead nor join the ISR.
func replicaOnline(img *Image, p *Partition, id int32) bool {
	b, ok := img.Broker(id)
	return ok && b.HasOnlineDir(p.Directory(id))
}

// defaultDir is the log dir a new replica on broker id is placed in
// (Kafka's ClusterDescriber.defaultDir): the broker's only dir, else
// DirUnassigned until the broker reports where it created the replica, or
// DirMigrating for a broker that reports no dirs.
func defaultDir(img *Image, id int32) Uuid {
	b, ok := img.Broker(id)
	switch {
	case !ok:
		return DirUnassigned
	case len(b.LogDirs) == 0:
		return DirMigrating
	case len(b.LogDirs) == 1:
		return b.LogDirs[0]
	}
	return DirUnassigned
}

// directories are the replicas' log dirs after the change, and whether
// they differ from the partition's: a reported dir, else the dir the
// replica had, else (a replica new to the partition) the default. The
// dirs of a partition from before directory assignment stay unknown while
// its replicas do not change.
func (pc *partitionChange) directories() ([]Uuid, bool) {
	if slices.Equal(pc.replicas, pc.p.Replicas) && len(pc.setDirs) == 0 {
		return nil, false
	}
	out := make([]Uuid, len(pc.replicas))
	for i, r := range pc.replicas {
		switch d, ok := pc.setDirs[r]; {
		case ok:
			out[i] = d
		case slices.Contains(pc.p.Replicas, r):
			out[i] = pc.p.Directory(r)
		default:
			out[i] = defaultDir(pc.img, r)
		}
	}
	return out, !slices.Equal(pc.replicas, pc.p.Replicas) || !slices.Equal(out, pc.p.Directories)
}

// effectiveMinISR is a topic's min.insync.replicas, capped by its
// replication factor (Kafka's getTopicEffectiveMinIsr): a partition with
// fewer replicas than the minimum would otherwise always be below it.
func (c *ClusterControl) effectiveMinISR(img *Image, topic string, replicas int) int {
	v, _ := c.effectiveTopicConfig(img, topic, "min.insync.replicas")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		n = 1
	}
	return min(n, max(replicas, 1))
}

// completeReassignment finishes a reassignment whose adding replicas have
// all joined the ISR (Kafka's PartitionReassignmentReplicas
// .maybeCompleteReassignment): the removing replicas leave the replica set
// and the ISR. It leaves the reassignment going if that would empty the
// ISR.
func (pc *partitionChange) completeReassignment() {
	if len(pc.adding) == 0 && len(pc.removing) == 0 {
		return
	}
	for _, r := range pc.adding {
		if !slices.Contains(pc.targetISR, r) {
			return
		}
	}
	removed := func(r int32) bool { return slices.Contains(pc.removing, r) }
	isr := slices.DeleteFunc(slices.Clone(pc.targetISR), removed)
	if len(isr) == 0 {
		return
	}
	pc.targetISR = isr
	pc.replicas = slices.DeleteFunc(slices.Clone(pc.replicas), removed)
	pc.adding, pc.removing = nil, nil
}

// electLeader returns the new leader and whether the election is unclean.
func (pc *partitionChange) electLeader() (int32, bool) {
	valid := func(r int32) bool {
		eligible := slices.Contains(pc.targetISR, r) || (len(pc.targetISR) == 0 && slices.Contains(pc.targetELR, r))
		return eligible && slices.Contains(pc.replicas, r) && pc.acceptable(r)
	}
	if pc.election == electPreferred && len(pc.replicas) > 0 && valid(pc.replicas[0]) {
		return pc.replicas[0], false
	}
	if pc.p.Leader >= 0 && valid(pc.p.Leader) {
		return pc.p.Leader, false // the current leader meets every constraint
	}
	for _, r := range pc.replicas {
		if valid(r) {
			return r, false
		}
	}
	if pc.elr && len(pc.targetISR) == 0 && len(pc.targetELR) == 0 && len(pc.p.LastKnownELR) == 1 {
		// Kafka's canElectLastKnownLeader: with no one in the ISR or ELR
		// left, the last leader leads again when it comes back, as before
		// KIP-966, but as an unclean election: it may have lost records.
		if r := pc.p.LastKnownELR[0]; slices.Contains(pc.replicas, r) && pc.acceptable(r) {
			return r, true
		}
	}
	if pc.election == electUnclean {
		for _, r := range pc.replicas {
			if pc.acceptable(r) {
				return r, true
			}
		}
	}
	return NoLeader, false
}

// populateELR is Kafka's maybePopulateTargetElr. With the ISR at or above
// min.insync.replicas the ELR is empty. Below it, the high watermark cannot
// move, so every replica leaving the ISR (or already in the ELR) holds
// every committed record and is in the ELR, unless it came back from an
// unclean shutdown or a reassignment removed it.
func (pc *partitionChange) populateELR() {
	if !pc.elr {
		return
	}
	if len(pc.targetISR) >= pc.minISR {
		pc.targetELR = []int32{}
		return
	}
	pc.targetELR = slices.DeleteFunc(union(pc.targetELR, pc.p.ISR), func(r int32) bool {
		return slices.Contains(pc.targetISR, r) || r == pc.uncleanShutdown || !slices.Contains(pc.replicas, r)
	})
}

// union is a and b's members, sorted, each once.
func union(a, b []int32) []int32 {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// build returns the change record, or false when nothing would change.
//
// Without eligible leader replicas the ISR never becomes empty: removing the
// last ISR member leaves it in the ISR (and leaderless if it may not lead),
// so that when it comes back it is known to hold every committed record.
// With them (KIP-966) the ISR may become empty, as the ELR then keeps who
// may lead; a leader elected from the ELR becomes the whole ISR and leaves
// the ELR. An unclean election clears the ELR.
// The leader epoch moves only with the leader (KAFKA-15021: since 3.6 an ISR
// shrink does not bump it); the partition epoch moves with every change,
// which Image.Apply does.
func (pc *partitionChange) build() (*PartitionChangeRecord, bool) {
	rec := &PartitionChangeRecord{
		TopicID: pc.key.TopicID, PartitionID: pc.key.Partition,
		Leader: NoLeaderChange, LeaderRecoveryState: pc.p.LeaderRecoveryState,
	}
	pc.completeReassignment()
	if !slices.Equal(pc.replicas, pc.p.Replicas) || !slices.Equal(pc.adding, pc.p.AddingReplicas) || !slices.Equal(pc.removing, pc.p.RemovingReplicas) {
		rec.Replicas = slices.Clone(pc.replicas)
		rec.AddingReplicas, rec.RemovingReplicas = slices.Clone(pc.adding), slices.Clone(pc.removing)
	}
	if dirs, changed := pc.directories(); changed || rec.Replicas != nil {
		rec.Directories = dirs
	}
	pc.populateELR()
	lrs := pc.targetLRS
	leader, unclean := pc.electLeader()
	if leader != pc.p.Leader {
		rec.Leader = leader
		switch {
		case slices.Contains(pc.targetELR, leader):
			// Elected from the ELR: it holds every committed record, and
			// is now the whole ISR.
			pc.targetISR = []int32{leader}
			pc.targetELR = slices.DeleteFunc(slices.Clone(pc.targetELR), func(r int32) bool { return r == leader })
		case unclean:
			// The new leader's log is all there is now: the ISR is just it,
			// and it is recovering (KIP-704).
			rec.ISR = []int32{leader}
			lrs = LeaderRecovering
		}
	}
	if pc.elr && !unclean {
		if !slices.Equal(pc.targetELR, pc.p.ELR) {
			rec.ELR = nonNil(pc.targetELR)
		}
	} else if len(pc.p.ELR) > 0 {
		// ELR off, or an unclean election: nobody else is known to hold
		// the committed records.
		rec.ELR = []int32{}
	}
	if rec.ISR == nil && (len(pc.targetISR) > 0 || pc.elr) && !slices.Equal(pc.targetISR, pc.p.ISR) {
		rec.ISR = nonNil(pc.targetISR)
	}
	// The last known leader (Kafka's maybeUpdateLastKnownLeader): set when
	// the ISR first becomes empty, cleared once the partition has a leader.
	switch {
	case pc.elr && rec.ISR != nil && len(rec.ISR) == 0 && pc.p.Leader >= 0 &&
		!(len(pc.p.LastKnownELR) == 1 && pc.p.LastKnownELR[0] == pc.p.Leader):
		rec.LastKnownELR = []int32{pc.p.Leader}
	case len(pc.p.LastKnownELR) > 0 && (!pc.elr || rec.Leader >= 0 || (pc.p.Leader >= 0 && rec.Leader != NoLeader)):
		rec.LastKnownELR = []int32{}
	}
	rec.LeaderRecoveryState = lrs
	if rec.Leader == NoLeaderChange && rec.ISR == nil && rec.Replicas == nil && rec.ELR == nil && rec.LastKnownELR == nil &&
		rec.Directories == nil && lrs == pc.p.LeaderRecoveryState {
		return nil, false
	}
	return rec, true
}

// nonNil is a copy of s, or an empty slice for nil: in a
// PartitionChangeRecord or BrokerRegistrationChangeRecord nil means
// "unchanged".
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return slices.Clone(s)
}

// merge is the partition after rec, as Image.Apply computes it.
func merge(p *Partition, rec *PartitionChangeRecord) *Partition {
	n := *p
	if rec.ISR != nil {
		n.ISR = rec.ISR
	}
	if rec.ELR != nil {
		n.ELR = rec.ELR
	}
	if rec.LastKnownELR != nil {
		n.LastKnownELR = rec.LastKnownELR
	}
	if rec.Replicas != nil {
		n.Replicas, n.AddingReplicas, n.RemovingReplicas = rec.Replicas, rec.AddingReplicas, rec.RemovingReplicas
		n.Directories = nil
	}
	if rec.Directories != nil {
		n.Directories = rec.Directories
	}
	if rec.Leader != NoLeaderChange {
		n.Leader = rec.Leader
		n.LeaderEpoch++
	}
	n.LeaderRecoveryState = rec.LeaderRecoveryState
	n.PartitionEpoch++
	return &n
}

// uncleanElectionEnabled is the effective unclean.leader.election.enable of
// a topic: the topic config, else the cluster-wide dynamic broker config,
// else the static broker config (Kafka's
// ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic).
func (c *ClusterControl) uncleanElectionEnabled(img *Image, topic string) bool {
	v, _ := c.effectiveTopicConfig(img, topic, "unclean.leader.election.enable")
	return v == "true"
}

// leaderAndISRUpdates is Kafka's generateLeaderAndIsrUpdates: for each
// partition, remove brokerToRemove (if not NoLeader) from the ISR and from
// leadership, and elect a leader among acceptable brokers, where
// brokerToAdd (if not NoLeader) counts as acceptable although the image
// still shows it fenced. uncleanShutdown (if not NoLeader) is a broker back
// from an unclean shutdown: with eligible leader replicas it leaves the
// ISR, even as its last member, and the ELR.
func (c *ClusterControl) leaderAndISRUpdates(img *Image, brokerToRemove, brokerToAdd, uncleanShutdown int32, keys []PartitionKey) []Record {
	var out []Record
	for _, k := range keys {
		t, p, ok := partitionOf(img, k)
		if !ok {
			continue
		}
		pc := c.newPartitionChange(img, t, k, p)
		pc.acceptable = func(r int32) bool {
			return r != brokerToRemove && (r == brokerToAdd || isActive(img, r)) && replicaOnline(img, p, r)
		}
		if c.uncleanElectionEnabled(img, t.Name) {
			pc.election = electUnclean
		}
		leaving := func(r int32) bool { return r != NoLeader && (r == brokerToRemove || r == uncleanShutdown) }
		if slices.ContainsFunc(p.ISR, leaving) {
			pc.targetISR = slices.DeleteFunc(slices.Clone(p.ISR), leaving)
		}
		pc.uncleanShutdown = uncleanShutdown
		if rec, ok := pc.build(); ok {
			out = append(out, rec)
		}
	}
	return out
}

// AlterPartition handles AlterPartition (API 56, KIP-497/KIP-841): a leader
// asks to change its partitions' ISR. Each partition is validated in the
// order of Kafka's ReplicationControlManager.validateAlterPartitionData:
//
//   - unknown topic: UNKNOWN_TOPIC_ID (v2+, by id) or
//     UNKNOWN_TOPIC_OR_PARTITION (by name); unknown partition:
//     UNKNOWN_TOPIC_OR_PARTITION;
//   - a leader or partition epoch newer than the image's: NOT_CONTROLLER
//     (this controller is behind; the leader retries elsewhere);
//   - an older leader epoch: FENCED_LEADER_EPOCH;
//   - the requester is not the leader: INVALID_REQUEST (as Kafka);
//   - an older partition epoch: INVALID_UPDATE_VERSION;
//   - an ISR with a non-replica or a duplicate, without the leader, or of
//     more than the leader while RECOVERING, or RECOVERED → RECOVERING:
//     INVALID_REQUEST;
//   - an ISR member that is unregistered, fenced, in controlled shutdown or
//     (v3+) of another broker epoch, or a new member whose replica is in a
//     log dir its broker reported offline (KIP-858): INELIGIBLE_REPLICA
//     (v2+) or OPERATION_NOT_ATTEMPTED (v0-1).
//
// A valid change answers with the partition as it will be once the record
// commits: partition epoch + 1 and the new ISR. A request that changes
// nothing answers with the current state. The whole request fails with
// STALE_BROKER_EPOCH when the requester's broker epoch is not its current
// one. Concurrency: see ClusterControl.
func (c *ClusterControl) AlterPartition(req *kmsg.AlterPartitionRequest) ([]Record, *kmsg.AlterPartitionResponse) {
	resp := kmsg.NewPtrAlterPartitionResponse()
	resp.Version = req.Version
	img := c.img
	if b, ok := img.Broker(req.BrokerID); !ok || b.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return nil, resp
	}
	var out []Record
	seen := map[PartitionKey]bool{}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID
		var t *Topic
		var ok bool
		if req.Version >= 2 {
			t, ok = img.TopicByID(Uuid(rt.TopicID))
		} else {
			t, ok = img.Topic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			if !ok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if req.Version >= 2 {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			k := PartitionKey{TopicID: t.ID, Partition: rp.Partition}
			if seen[k] {
				// A second change of the same partition in one request
				// would be validated against the state before the first.
				sp.ErrorCode = kerr.InvalidRequest.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			seen[k] = true
			rec, p, code := c.alterPartition(img, req, t, k, rp)
			sp.ErrorCode = code
			if code == 0 {
				if rec != nil {
					out = append(out, rec)
					p = merge(p, rec)
				}
				sp.LeaderID, sp.LeaderEpoch, sp.PartitionEpoch = p.Leader, p.LeaderEpoch, p.PartitionEpoch
				sp.ISR = slices.Clone(p.ISR)
				sp.LeaderRecoveryState = p.LeaderRecoveryState
				if p.Leader != req.BrokerID {
					// Kafka: the change moved leadership (only a completed
					// reassignment can); the old leader must refetch.
					sp.ErrorCode = kerr.FencedLeaderEpoch.Code
					if req.Version >= 2 {
						sp.ErrorCode = kerr.NewLeaderElected.Code
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return out, resp
}

func (c *ClusterControl) alterPartition(img *Image, req *kmsg.AlterPartitionRequest, t *Topic, k PartitionKey, rp kmsg.AlterPartitionRequestTopicPartition) (*PartitionChangeRecord, *Partition, int16) {
	if k.Partition < 0 || int(k.Partition) >= len(t.Partitions) {
		return nil, nil, kerr.UnknownTopicOrPartition.Code
	}
	p := t.Partitions[k.Partition]
	switch {
	case rp.LeaderEpoch > p.LeaderEpoch || rp.PartitionEpoch > p.PartitionEpoch:
		return nil, nil, kerr.NotController.Code
	case rp.LeaderEpoch < p.LeaderEpoch:
		return nil, nil, kerr.FencedLeaderEpoch.Code
	case req.BrokerID != p.Leader:
		return nil, nil, kerr.InvalidRequest.Code
	case rp.PartitionEpoch < p.PartitionEpoch:
		return nil, nil, kerr.InvalidUpdateVersion.Code
	}
	type member struct {
		id    int32
		epoch int64
	}
	var isr []member
	if req.Version >= 3 {
		for _, m := range rp.NewEpochISR {
			isr = append(isr, member{m.BrokerID, m.BrokerEpoch})
		}
	} else {
		for _, id := range rp.NewISR {
			isr = append(isr, member{id, -1})
		}
	}
	newISR := make([]int32, len(isr))
	for i, m := range isr {
		newISR[i] = m.id
	}
	if !validISR(p.Replicas, newISR) || !slices.Contains(newISR, p.Leader) {
		return nil, nil, kerr.InvalidRequest.Code
	}
	switch {
	case rp.LeaderRecoveryState != LeaderRecovered && rp.LeaderRecoveryState != LeaderRecovering:
		return nil, nil, kerr.InvalidRequest.Code
	case rp.LeaderRecoveryState == LeaderRecovering && len(newISR) > 1:
		return nil, nil, kerr.InvalidRequest.Code
	case p.LeaderRecoveryState == LeaderRecovered && rp.LeaderRecoveryState == LeaderRecovering:
		return nil, nil, kerr.InvalidRequest.Code
	}
	for _, m := range isr {
		b, ok := img.Broker(m.id)
		// A replica joining the ISR from a failed log dir is not caught
		// up, whatever its leader thinks (KIP-858).
		offline := !slices.Contains(p.ISR, m.id) && !replicaOnline(img, p, m.id)
		if !ok || b.InControlledShutdown || b.Fenced || (m.epoch != -1 && m.epoch != b.Epoch) || offline {
			if req.Version >= 2 {
				return nil, nil, kerr.IneligibleReplica.Code
			}
			return nil, nil, kerr.OperationNotAttempted.Code
		}
	}
	pc := c.newPartitionChange(img, t, k, p)
	if c.uncleanElectionEnabled(img, t.Name) {
		pc.election = electUnclean
	}
	pc.targetISR = newISR
	pc.targetLRS = rp.LeaderRecoveryState
	rec, ok := pc.build()
	if !ok {
		return nil, p, 0
	}
	return rec, p, 0
}

// validISR is Kafka's Replicas.validateIsr: every member a replica, none
// twice.
func validISR(replicas, isr []int32) bool {
	for i, r := range isr {
		if !slices.Contains(replicas, r) || slices.Contains(isr[:i], r) {
			return false
		}
	}
	return true
}

// Election types of ElectLeaders (Kafka's ElectionType, KIP-460).
const (
	ElectionPreferred int8 = 0
	ElectionUnclean   int8 = 1
)

// ElectLeaders handles ElectLeaders (API 43, KIP-460), as Kafka's
// ReplicationControlManager.electLeaders:
//
//   - preferred: ELECTION_NOT_NEEDED when the preferred replica leads;
//     PREFERRED_LEADER_NOT_AVAILABLE when no change can be made (the
//     preferred replica is not in the ISR or not active, and the current
//     leader is fine); otherwise the preferred replica leads (or, when the
//     partition has no usable leader, the first usable ISR member).
//   - unclean: ELECTION_NOT_NEEDED when the partition has a leader;
//     ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is active; otherwise
//     the first active ISR member, or failing that the first active
//     replica, which may lose records.
//
// Nil Topics means every partition; results then leave out the partitions
// whose election was not needed. v0 has no election type (preferred). An
// unknown election type fails the request with INVALID_REQUEST.
// Concurrency: see ClusterControl.
func (c *ClusterControl) ElectLeaders(req *kmsg.ElectLeadersRequest) ([]Record, *kmsg.ElectLeadersResponse) {
	resp := kmsg.NewPtrElectLeadersResponse()
	resp.Version = req.Version
	typ := req.ElectionType
	if req.Version == 0 {
		typ = ElectionPreferred
	}
	if typ != ElectionPreferred && typ != ElectionUnclean {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return nil, resp
	}
	img := c.img
	var out []Record
	done := map[PartitionKey]int16{}
	elect := func(topic string, partition int32) (int16, *string) {
		t, ok := img.Topic(topic)
		if !ok {
			return kerr.UnknownTopicOrPartition.Code, strp("No such topic as " + topic)
		}
		k := PartitionKey{TopicID: t.ID, Partition: partition}
		_, p, ok := partitionOf(img, k)
		if !ok {
			return kerr.UnknownTopicOrPartition.Code, strp(fmt.Sprintf("No such partition as %s-%d", topic, partition))
		}
		if code, dup := done[k]; dup {
			return code, nil
		}
		code := c.electLeader(img, t, k, p, typ, &out)
		done[k] = code
		return code, nil
	}
	if req.Topics == nil {
		for _, t := range img.Topics() {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = t.Name
			for i := range t.Partitions {
				code, msg := elect(t.Name, int32(i))
				if code == kerr.ElectionNotNeeded.Code {
					continue
				}
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = int32(i), code, msg
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return out, resp
	}
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, partition := range rt.Partitions {
			code, msg := elect(rt.Topic, partition)
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.ErrorMessage = partition, code, msg
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return out, resp
}

func (c *ClusterControl) electLeader(img *Image, t *Topic, k PartitionKey, p *Partition, typ int8, out *[]Record) int16 {
	hasPreferred := len(p.Replicas) > 0 && p.Leader == p.Replicas[0]
	if (typ == ElectionPreferred && hasPreferred) || (typ == ElectionUnclean && p.Leader >= 0) {
		return kerr.ElectionNotNeeded.Code
	}
	pc := c.newPartitionChange(img, t, k, p)
	pc.election = electPreferred
	if typ == ElectionUnclean {
		pc.election = electUnclean
	}
	rec, ok := pc.build()
	if !ok {
		if typ == ElectionPreferred {
			return kerr.PreferredLeaderNotAvailable.Code
		}
		return kerr.EligibleLeadersNotAvailable.Code
	}
	*out = append(*out, rec)
	return 0
}

// preferredLeaderElections is auto.leader.rebalance.enable: for at most
// limit imbalanced partitions, a preferred election (Kafka's
// maybeBalancePartitionLeaders). It reports whether the bound cut it short.
func (c *ClusterControl) preferredLeaderElections(img *Image, limit int) ([]Record, bool) {
	var out []Record
	for _, k := range buildPartitionIndex(img).imbalanced {
		if len(out) >= limit {
			return out, true
		}
		t, p, ok := partitionOf(img, k)
		if !ok {
			continue
		}
		pc := c.newPartitionChange(img, t, k, p)
		pc.election = electPreferred
		if rec, ok := pc.build(); ok {
			out = append(out, rec)
		}
	}
	return out, false
}

// resetELR is the change that empties a partition's ELR and last known
// ELR, or nil when both are empty. An empty ISR takes the ELR's members,
// which hold every committed record, and the first of them that is active,
// in replica order, leads.
func resetELR(img *Image, t *Topic, partition int32) *PartitionChangeRecord {
	p := t.Partitions[partition]
	if len(p.ELR) == 0 && len(p.LastKnownELR) == 0 {
		return nil
	}
	rec := &PartitionChangeRecord{
		TopicID: t.ID, PartitionID: partition, Leader: NoLeaderChange, LeaderRecoveryState: p.LeaderRecoveryState,
		ELR: []int32{}, LastKnownELR: []int32{},
	}
	if len(p.ISR) == 0 && len(p.ELR) > 0 {
		rec.ISR = slices.Clone(p.ELR)
		if p.Leader < 0 {
			for _, r := range p.Replicas {
				if slices.Contains(p.ELR, r) && isActive(img, r) {
					rec.Leader = r
					break
				}
			}
		}
	}
	return rec
}

// clearELRs resets the ELR of every partition, for
// eligible.leader.replicas.version going to 0.
func (c *ClusterControl) clearELRs(img *Image) []Record {
	return resetTopicsELR(img, img.Topics())
}

// resetTopicsELR is resetELR for every partition of topics.
func resetTopicsELR(img *Image, topics []*Topic) []Record {
	var out []Record
	for _, t := range topics {
		for i := range t.Partitions {
			if rec := resetELR(img, t, int32(i)); rec != nil {
				out = append(out, rec)
			}
		}
	}
	return out
}

// elrConfigChanges resets the ELR of the partitions whose
// min.insync.replicas a batch of config records changes (a topic's, or the
// cluster-wide default, which may change every topic's): the ELR was
// computed for the old minimum (Kafka's
// getPartitionElrUpdatesForConfigChanges).
func (c *ClusterControl) elrConfigChanges(img *Image, recs []Record) []Record {
	if !ELREnabled(img) {
		return nil
	}
	var topics []*Topic
	for _, r := range recs {
		cr, ok := r.(*ConfigRecord)
		if !ok || cr.Name != "min.insync.replicas" {
			continue
		}
		switch {
		case cr.ResourceType == ConfigResourceBroker && cr.ResourceName == "":
			return resetTopicsELR(img, img.Topics())
		case cr.ResourceType == ConfigResourceTopic:
			if t, ok := img.Topic(cr.ResourceName); ok && !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	return resetTopicsELR(img, topics)
}
