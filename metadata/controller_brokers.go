package metadata

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hasValidSession is Kafka's BrokerHeartbeatTracker.hasValidSession: the
// broker's current registration heard from within the session timeout.
func (c *ClusterControl) hasValidSession(b *BrokerRegistration, now time.Time) bool {
	s := c.sessions[b.ID]
	return s != nil && s.epoch == b.Epoch && !now.After(s.lastContact.Add(c.cfg.BrokerSessionTimeout))
}

// Contact records that a heartbeat of broker id at broker epoch arrived
// at the controller at time at, before the controller got to handle it:
// Kafka's BrokerHeartbeatTracker, updated outside the controller's event
// loop since KAFKA-17793. A loop stalled for longer than
// broker.session.timeout.ms (a slow commit) must not fence, on its next
// Tick, a broker whose heartbeats were waiting for it. It only moves the
// last contact of the broker's current session forward, and only with a
// heartbeat that arrived after the last one handled: the heartbeat that
// let a controlled shutdown finish ended the session, and its arrival must
// not start it again. The heartbeat itself does the rest when it is
// handled. Concurrency: see ClusterControl.
func (c *ClusterControl) Contact(id int32, epoch int64, at time.Time) {
	if s := c.sessions[id]; s != nil && s.epoch == epoch && at.After(s.lastContact) && at.After(s.lastHeartbeat) {
		s.lastContact = at
	}
}

// RegisterBroker handles BrokerRegistration (API 62, KIP-631). The broker
// registers fenced, with a new broker epoch; it unfences through
// heartbeats once it has caught up with the metadata log.
//
// Broker epoch: KRaft uses the offset of the RegisterBrokerRecord. With
// hashicorp/raft that index is only known once Apply has run (and adding a
// broker as a non-voter writes configuration entries of its own), so the
// epoch is the image offset + 1 — a lower bound of the record's offset —
// raised if needed above the broker's previous epoch. It increases strictly
// for each broker id, across controller failovers too, because every
// committed registration is at an offset no higher than the image's.
//
// A registration of a node.id whose current registration still has a
// valid session (heard from within broker.session.timeout.ms) and another
// incarnation id is DUPLICATE_BROKER_REGISTRATION: two live processes claim
// the id. The same incarnation (a retry), an expired session (a restart),
// or a current registration in controlled shutdown re-registers: that
// process said it was going away, and stopped before the controller let it
// (killed, or its 5 s grace ran out), as Kafka 4.1 allows (KAFKA-19047).
// The broker leaves every ISR it is in but the ones it is the last member
// of, and its leaderships move to the next live ISR member, as
// for a fenced broker, until it has caught up and the leaders add it back.
// A ClusterID other than the configured one is INCONSISTENT_CLUSTER_ID.
//
// Concurrency: see ClusterControl.
func (c *ClusterControl) RegisterBroker(now time.Time, req *kmsg.BrokerRegistrationRequest) ([]Record, *kmsg.BrokerRegistrationResponse) {
	c.observe(now)
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	resp.Version = req.Version
	resp.BrokerEpoch = -1
	if req.BrokerID < 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return nil, resp
	}
	if c.cfg.ClusterID != "" && req.ClusterID != c.cfg.ClusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return nil, resp
	}
	img := c.img
	epoch := max(img.Offset()+1, 1)
	var out []Record
	if old, ok := img.Broker(req.BrokerID); ok {
		if c.hasValidSession(old, now) && !old.InControlledShutdown && old.IncarnationID != Uuid(req.IncarnationID) {
			resp.ErrorCode = kerr.DuplicateBrokerRegistration.Code
			return nil, resp
		}
		epoch = max(epoch, old.Epoch+1)
		// A new process that did not shut down cleanly after its last
		// registration (KIP-966) may miss records it acknowledged.
		unclean := req.PreviousBrokerEpoch != old.Epoch && old.IncarnationID != Uuid(req.IncarnationID)
		out = c.removeBroker(img, old.ID, unclean)
	}
	if s := c.sessions[req.BrokerID]; s != nil {
		epoch = max(epoch, s.epoch+1) // an earlier registration not yet committed
	}
	rec := &RegisterBrokerRecord{
		BrokerID: req.BrokerID, IncarnationID: Uuid(req.IncarnationID), BrokerEpoch: epoch,
		Fenced: true,
	}
	if req.Rack != nil {
		rec.Rack = *req.Rack
	}
	for _, l := range req.Listeners {
		rec.Endpoints = append(rec.Endpoints, Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: l.SecurityProtocol})
	}
	if !validLogDirs(img, req) {
		resp.ErrorCode = kerr.InvalidRegistration.Code
		return nil, resp
	}
	for _, d := range req.LogDirs {
		rec.LogDirs = append(rec.LogDirs, Uuid(d))
	}
	rec.LogDirs = sortedDirs(rec.LogDirs)
	for _, f := range req.Features {
		if rec.Features == nil {
			rec.Features = map[string]FeatureRange{}
		}
		rec.Features[f.Name] = FeatureRange{Min: f.MinSupportedVersion, Max: f.MaxSupportedVersion}
	}
	// As Kafka's ClusterControlManager: a broker that cannot run at a
	// finalized level may not join.
	for name, level := range img.features {
		if len(rec.Features) > 0 && featureSupportError(&BrokerRegistration{ID: req.BrokerID, Features: rec.Features}, name, level) != "" {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return nil, resp
		}
	}
	out = append(out, rec)
	c.sessions[req.BrokerID] = &brokerSession{
		epoch: epoch, lastContact: now, metadataOffset: -1, registeredAt: -1, shutdownOffset: -1,
	}
	resp.BrokerEpoch = epoch
	return out, resp
}

// validLogDirs reports whether a registration's log dirs are valid
// (Kafka's ClusterControlManager.registerBroker): none reserved, none
// repeated, none another broker registered with (a dir copied between
// brokers). BrokerRegistrationResponse has no message to say which.
func validLogDirs(img *Image, req *kmsg.BrokerRegistrationRequest) bool {
	seen := map[Uuid]bool{}
	for _, raw := range req.LogDirs {
		d := Uuid(raw)
		if reservedDir(d) || seen[d] {
			return false
		}
		seen[d] = true
		for _, b := range img.brokers {
			if b.ID != req.BrokerID && slices.Contains(b.LogDirs, d) {
				return false
			}
		}
	}
	return true
}

// brokerState is the broker's state in Kafka's BrokerHeartbeatManager.
type brokerState int

const (
	stateFenced brokerState = iota
	stateUnfenced
	stateControlledShutdown
	stateShutdownNow
)

// Heartbeat handles BrokerHeartbeat (API 63, KIP-631). It renews the
// broker's session and moves it through Kafka's broker states
// (BrokerHeartbeatManager.calculateNextBrokerState):
//
//   - FENCED: WantShutDown → shut down now; otherwise, unless WantFence,
//     unfence once CurrentMetadataOffset has reached the offset of the
//     broker's own registration (UnfenceBrokerRecord, and leaderless
//     partitions it may lead elect it).
//   - UNFENCED: WantFence → fenced (or shut down now, with WantShutDown);
//     WantShutDown → controlled shutdown if it leads anything (it enters
//     InControlledShutdown, its leaderships move to other live ISR members
//     and it leaves the ISRs it is not the last member of), else shut down
//     now.
//   - CONTROLLED_SHUTDOWN: shut down now once it leads nothing and every
//     active broker has replayed the shutdown's records, so no client is
//     sent to it by stale metadata.
//
// Shutting down now fences the broker (its leaderships move as on session
// expiry) and answers ShouldShutdown. An unregistered broker gets
// BROKER_ID_NOT_REGISTERED; another broker epoch STALE_BROKER_EPOCH.
// Concurrency: see ClusterControl.
func (c *ClusterControl) Heartbeat(now time.Time, req *kmsg.BrokerHeartbeatRequest) ([]Record, *kmsg.BrokerHeartbeatResponse) {
	c.observe(now)
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.Version = req.Version
	resp.IsFenced = true
	img := c.img
	b, ok := img.Broker(req.BrokerID)
	if !ok {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		return nil, resp
	}
	if b.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return nil, resp
	}
	s := c.sessions[b.ID]
	if s == nil || s.epoch != b.Epoch {
		s = &brokerSession{epoch: b.Epoch, registeredAt: img.Offset(), shutdownOffset: -1}
		c.sessions[b.ID] = s
	}
	s.lastContact, s.lastHeartbeat = now, now
	s.metadataOffset = req.CurrentMetadataOffset
	caughtUp := s.registeredAt >= 0 && req.CurrentMetadataOffset >= s.registeredAt

	current := stateUnfenced
	switch {
	case b.Fenced:
		current = stateFenced
	case b.InControlledShutdown:
		current = stateControlledShutdown
	}
	// Whether it still leads a partition; asked only when it matters, as
	// it may walk every partition.
	leads := func() bool { return c.partitions().leaderOf[b.ID] > 0 }
	next := current
	switch current {
	case stateFenced:
		switch {
		case req.WantShutdown:
			next = stateShutdownNow
		case !req.WantFence && caughtUp:
			next = stateUnfenced
		}
	case stateUnfenced:
		switch {
		case req.WantFence && req.WantShutdown:
			next = stateShutdownNow
		case req.WantFence:
			next = stateFenced
		case req.WantShutdown && leads():
			next = stateControlledShutdown
		case req.WantShutdown:
			next = stateShutdownNow
		}
	case stateControlledShutdown:
		if s.shutdownOffset >= 0 && !leads() && s.shutdownOffset <= c.lowestActiveOffset(img) {
			next = stateShutdownNow
		}
	}

	var out []Record
	if next != current {
		switch next {
		case stateFenced, stateShutdownNow:
			if !b.Fenced {
				out = c.fenceRecords(img, b)
			}
		case stateUnfenced:
			if b.InControlledShutdown {
				// Only images from before fencing cleared the flag.
				out = append(out, &BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: -1, InControlledShutdown: -1})
			} else {
				out = append(out, &UnfenceBrokerRecord{ID: b.ID, Epoch: b.Epoch})
			}
			out = append(out, c.leaderAndISRUpdates(img, NoLeader, b.ID, NoLeader, c.partitions().leaderless)...)
		case stateControlledShutdown:
			out = append(out, &BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: 1})
			out = append(out, c.leaderAndISRUpdates(img, b.ID, NoLeader, NoLeader, c.partitions().inISR[b.ID])...)
			s.shutdownOffset = shutdownPending
		}
	}
	if len(req.OfflineLogDirs) > 0 {
		work, staged := stage(img, out)
		out = append(staged, c.dirsOffline(work, b.ID, req.OfflineLogDirs)...)
	}
	resp.IsCaughtUp = caughtUp
	resp.IsFenced = next == stateFenced || next == stateShutdownNow
	resp.ShouldShutdown = next == stateShutdownNow
	if resp.ShouldShutdown {
		// The broker has said it is going away and now leads nothing: its
		// session ends here, so the process that replaces it (a restart
		// after a clean shutdown) registers at once instead of waiting out
		// broker.session.timeout.ms as DUPLICATE_BROKER_REGISTRATION. After
		// a crash there was no such goodbye, and the wait stays.
		s.lastContact = time.Time{}
	}
	return out, resp
}

// dirsOffline is Kafka's handleDirectoriesOffline: of the log dirs a
// broker's heartbeat reports offline (KIP-858), those its registration
// still has online leave it (BrokerRegistrationChangeRecord), and its
// replicas there leave the ISR and their leaderships, as a fenced broker's
// do. A replica whose dir failed has lost what it held as far as anyone
// can tell, so, as after an unclean shutdown, it leaves the eligible
// leader replicas too and may leave the ISR as its last member (where
// eligible leader replicas are on). Dirs reported again are ignored.
func (c *ClusterControl) dirsOffline(img *Image, id int32, reported [][16]byte) []Record {
	b, ok := img.Broker(id)
	if !ok {
		return nil
	}
	var failed []Uuid
	for _, d := range reported {
		if slices.Contains(b.LogDirs, Uuid(d)) && !slices.Contains(failed, Uuid(d)) {
			failed = append(failed, Uuid(d))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	var keys []PartitionKey
	for _, t := range img.Topics() {
		for i, p := range t.Partitions {
			if slices.Contains(failed, p.Directory(id)) {
				keys = append(keys, PartitionKey{TopicID: t.ID, Partition: int32(i)})
			}
		}
	}
	online := slices.DeleteFunc(slices.Clone(b.LogDirs), func(d Uuid) bool { return slices.Contains(failed, d) })
	change := &BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: b.Epoch, LogDirs: nonNil(online)}
	// The registration first, so that the elections see the dirs offline.
	work, recs := stage(img, []Record{change})
	uncleanShutdown := NoLeader
	if ELREnabled(img) {
		uncleanShutdown = id
	}
	return append(recs, c.leaderAndISRUpdates(work, id, NoLeader, uncleanShutdown, keys)...)
}

// AssignReplicasToDirs handles AssignReplicasToDirs (API 73, KIP-858): a
// broker reports the log dir each of its replicas is in, after creating a
// replica in a dir of its choosing or moving one between dirs
// (AlterReplicaLogDirs). Each assignment is a PartitionChangeRecord of the
// replica's directory; one into a dir the broker's registration has
// offline also takes the replica out of the ISR and its leadership, as
// Kafka's handleAssignReplicasToDirs does. An unknown topic is
// UNKNOWN_TOPIC_ID, an unknown partition UNKNOWN_TOPIC_OR_PARTITION, a
// partition the broker is not a replica of NOT_LEADER_OR_FOLLOWER; the
// whole request fails with BROKER_ID_NOT_REGISTERED or STALE_BROKER_EPOCH.
// Concurrency: see ClusterControl.
func (c *ClusterControl) AssignReplicasToDirs(req *kmsg.AssignReplicasToDirsRequest) ([]Record, *kmsg.AssignReplicasToDirsResponse) {
	resp := req.ResponseKind().(*kmsg.AssignReplicasToDirsResponse)
	img := c.img
	b, ok := img.Broker(req.BrokerID)
	switch {
	case !ok:
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		return nil, resp
	case b.Epoch != req.BrokerEpoch:
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return nil, resp
	}
	work := img
	var out []Record
	var offline []PartitionKey
	for _, rd := range req.Directories {
		dir := Uuid(rd.ID)
		dr := kmsg.NewAssignReplicasToDirsResponseDirectory()
		dr.ID = rd.ID
		for _, rt := range rd.Topics {
			tr := kmsg.NewAssignReplicasToDirsResponseDirectoryTopic()
			tr.TopicID = rt.TopicID
			t, known := work.TopicByID(Uuid(rt.TopicID))
			for _, rp := range rt.Partitions {
				pr := kmsg.NewAssignReplicasToDirsResponseDirectoryTopicPartition()
				pr.Partition = rp.Partition
				k := PartitionKey{TopicID: Uuid(rt.TopicID), Partition: rp.Partition}
				switch {
				case !known:
					pr.ErrorCode = kerr.UnknownTopicID.Code
				case rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
					pr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case !slices.Contains(t.Partitions[rp.Partition].Replicas, b.ID):
					pr.ErrorCode = kerr.NotLeaderForPartition.Code
				default:
					pc := c.newPartitionChange(work, t, k, t.Partitions[rp.Partition])
					pc.setDirs = map[int32]Uuid{b.ID: dir}
					if rec, changed := pc.build(); changed {
						var recs []Record
						work, recs = stage(work, []Record{rec})
						out = append(out, recs...)
					}
					if !b.HasOnlineDir(dir) {
						offline = append(offline, k)
					}
				}
				tr.Partitions = append(tr.Partitions, pr)
			}
			dr.Topics = append(dr.Topics, tr)
		}
		resp.Directories = append(resp.Directories, dr)
	}
	if len(offline) > 0 {
		out = append(out, c.leaderAndISRUpdates(work, b.ID, NoLeader, NoLeader, offline)...)
	}
	return out, resp
}

// lowestActiveOffset is the lowest metadata offset any active broker has
// reported (math.MaxInt64 when there is none), Kafka's
// BrokerHeartbeatManager.lowestActiveOffset.
func (c *ClusterControl) lowestActiveOffset(img *Image) int64 {
	low := int64(math.MaxInt64)
	for _, b := range activeBrokers(img) {
		if s := c.sessions[b.ID]; s != nil && s.epoch == b.Epoch {
			low = min(low, s.metadataOffset)
		} else {
			low = min(low, -1)
		}
	}
	return low
}

// UnregisterBroker handles UnregisterBroker (API 64, KIP-631:
// kafka-cluster.sh unregister), which removes a decommissioned broker's
// registration, as Kafka's handleBrokerUnregistered: the broker leaves
// every ISR it is not the last member of and its leaderships move (as when
// it is fenced), then its registration goes. Replicas still assigned to it
// are offline until a reassignment moves them; should the broker come back
// it registers anew. An unknown id is BROKER_ID_NOT_REGISTERED.
func (c *ClusterControl) UnregisterBroker(req *kmsg.UnregisterBrokerRequest) ([]Record, *kmsg.UnregisterBrokerResponse) {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	b, ok := c.img.Broker(req.BrokerID)
	if !ok {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Broker ID %d is not currently registered", req.BrokerID)) // Kafka's words
		return nil, resp
	}
	recs := c.removeBroker(c.img, b.ID, true) // decommissioned: no longer eligible either
	return append(recs, &UnregisterBrokerRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch}), resp
}

// removeBroker takes broker id, about to be registered anew or
// unregistered, out of every ISR it is not the last member of and out of
// its leaderships. With eligible leader replicas and gone (an unclean
// shutdown, or an unregistration), it also leaves the ISRs it is the last
// member of and every ELR.
func (c *ClusterControl) removeBroker(img *Image, id int32, gone bool) []Record {
	keys := c.partitions().inISR[id]
	if !gone || !ELREnabled(img) {
		return c.leaderAndISRUpdates(img, id, NoLeader, NoLeader, keys)
	}
	return c.leaderAndISRUpdates(img, id, NoLeader, id, slices.Concat(keys, c.partitions().inELR[id]))
}

// fenceRecords is Kafka's handleBrokerFenced: the broker leaves every ISR
// it is not the last member of, its leaderships move to the first active
// ISR member in replica order (or, where the topic allows unclean election,
// the first active replica; else the partition has no leader), then it is
// fenced.
func (c *ClusterControl) fenceRecords(img *Image, b *BrokerRegistration) []Record {
	var keys []PartitionKey
	if img == c.img {
		keys = c.partitions().inISR[b.ID]
	} else {
		keys = buildPartitionIndex(img).inISR[b.ID]
	}
	out := c.leaderAndISRUpdates(img, b.ID, NoLeader, NoLeader, keys)
	if b.InControlledShutdown {
		// A fenced broker leaves controlled shutdown (Kafka's
		// BrokerHeartbeatManager.touch): should it heartbeat again
		// without restarting, it unfences as an ordinary broker.
		return append(out, &BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: 1, InControlledShutdown: -1})
	}
	return append(out, &FenceBrokerRecord{ID: b.ID, Epoch: b.Epoch})
}

// Tick is the passage of time: it fences every unfenced broker whose session
// expired (no heartbeat for longer than broker.session.timeout.ms), one
// after the other so each fencing sees the ones before it, and then, with
// auto.leader.rebalance.enable, every leader.imbalance.check.interval,
// moves leadership back to preferred replicas that are active and in the ISR
// (at most MaxElectionsPerImbalance a Tick; the rest on the next Tick).
// Call it about once a second. Concurrency: see ClusterControl.
func (c *ClusterControl) Tick(now time.Time) []Record {
	c.observe(now)
	work := c.img
	var out []Record
	var expired []int32
	for id, s := range c.sessions {
		b, ok := work.Broker(id)
		if ok && !b.Fenced && s.epoch == b.Epoch && now.After(s.lastContact.Add(c.cfg.BrokerSessionTimeout)) {
			expired = append(expired, id)
		}
	}
	slices.Sort(expired)
	for _, id := range expired {
		b, _ := work.Broker(id)
		var recs []Record
		work, recs = stage(work, c.fenceRecords(work, b))
		out = append(out, recs...)
	}
	if c.cfg.AutoLeaderRebalanceEnable &&
		(c.imbalancePending || !now.Before(c.lastImbalanceCheck.Add(c.cfg.LeaderImbalanceCheckInterval))) {
		c.lastImbalanceCheck = now
		recs, more := c.preferredLeaderElections(work, c.cfg.MaxElectionsPerImbalance)
		c.imbalancePending = more
		out = append(out, recs...)
	}
	return append(out, c.expiredTokens(now)...)
}

// AllocateProducerIds handles AllocateProducerIds (API 67, KIP-730): the
// next block of ProducerIDBlockSize ids, for a broker's idempotent and
// transactional producers. A broker epoch other than the broker's current
// one is STALE_BROKER_EPOCH; running out of ids is UNKNOWN_SERVER_ERROR, as
// in Kafka. Concurrency: see ClusterControl.
func (c *ClusterControl) AllocateProducerIds(req *kmsg.AllocateProducerIDsRequest) ([]Record, *kmsg.AllocateProducerIDsResponse) {
	resp := kmsg.NewPtrAllocateProducerIDsResponse()
	resp.Version = req.Version
	if b, ok := c.img.Broker(req.BrokerID); !ok || b.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return nil, resp
	}
	start := max(c.img.NextProducerID(), c.nextProducerID)
	size := c.cfg.ProducerIDBlockSize
	if size > math.MaxInt32 || start > math.MaxInt64-size {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return nil, resp
	}
	c.nextProducerID = start + size
	resp.ProducerIDStart, resp.ProducerIDLen = start, int32(size)
	return []Record{&ProducerIdsRecord{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, NextProducerID: start + size}}, resp
}
