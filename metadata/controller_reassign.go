package metadata

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition reassignment (KIP-455), as Kafka's ReplicationControlManager
// does it in KRaft:
//
//   - AlterPartitionReassignments with a target replica list starts one:
//     the replica set becomes the target followed by the current replicas
//     not in it (removing), the target's new brokers are adding. The
//     adding replicas create the log and fetch from the leader like any
//     follower; the leader adds them to the ISR once caught up.
//   - Any partition change that finds every adding replica in the ISR
//     completes it in the same record (partitionChange.build): the
//     removing replicas leave the replica set and the ISR, a leader among
//     them hands over to the target's first eligible replica, and the
//     brokers no longer listed delete their copy.
//   - A null replica list cancels: the adding replicas leave the replica
//     set and the ISR; a leader among them hands back.
//   - A reassignment asked for while another is going starts from the
//     current (merged) replica set, as in Kafka.

// AlterPartitionReassignments handles AlterPartitionReassignments (API 45,
// v0–v1). Per partition: an unknown topic or partition is
// UNKNOWN_TOPIC_OR_PARTITION; an empty list, a duplicate or an unregistered
// broker INVALID_REPLICA_ASSIGNMENT; with AllowReplicationFactorChange off
// (v1+), a target of another size than the partition's replication factor
// INVALID_REPLICATION_FACTOR (KIP-860); cancelling where nothing is going
// NO_REASSIGNMENT_IN_PROGRESS. The answer comes with the records that
// start (or cancel) the reassignments, not with their completion:
// ListPartitionReassignments follows them.
func (c *ClusterControl) AlterPartitionReassignments(req *kmsg.AlterPartitionAssignmentsRequest) ([]Record, *kmsg.AlterPartitionAssignmentsResponse) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	allowRFChange := req.Version < 1 || req.AllowReplicationFactorChange
	img := c.img
	var out []Record
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t, ok := img.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			var rec *PartitionChangeRecord
			var err error
			if !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				err = kerr.UnknownTopicOrPartition
			} else {
				rec, err = c.reassign(img, t, rp.Partition, rp.Replicas, allowRFChange)
			}
			if err != nil {
				sp.ErrorCode = kerr.InvalidRequest.Code
				if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
					sp.ErrorCode = ke.Code
				}
				sp.ErrorMessage = kmsg.StringPtr(err.Error())
			} else if rec != nil {
				out = append(out, rec)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return out, resp
}

// reassign is the change that starts (target non-nil) or cancels (target
// nil) the reassignment of one partition; nil when nothing changes.
func (c *ClusterControl) reassign(img *Image, t *Topic, partition int32, target []int32, allowRFChange bool) (*PartitionChangeRecord, error) {
	p := t.Partitions[partition]
	k := PartitionKey{TopicID: t.ID, Partition: partition}
	pc := c.newPartitionChange(img, t, k, p)
	if c.uncleanElectionEnabled(img, t.Name) {
		pc.election = electUnclean
	}
	if target == nil {
		if len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0 {
			return nil, fmt.Errorf("%w: no reassignment of %s-%d is in progress", kerr.NoReassignmentInProgress, t.Name, partition)
		}
		// Kafka's PartitionReassignmentRevert.
		added := func(r int32) bool { return slices.Contains(p.AddingReplicas, r) }
		pc.replicas = slices.DeleteFunc(slices.Clone(p.Replicas), added)
		pc.adding, pc.removing = nil, nil
		pc.targetISR = slices.DeleteFunc(slices.Clone(p.ISR), added)
		if len(pc.targetISR) == 0 {
			// Only adding replicas were in sync (or, with eligible leader
			// replicas, none): what is left may have fallen behind, so
			// this is an unclean election, which the topic must allow
			// (Kafka's cancelPartitionReassignment).
			if pc.election != electUnclean {
				return nil, fmt.Errorf("%w: Unable to revert partition assignment for %s:%d because it would require an unclean leader election.",
					kerr.InvalidReplicaAssignment, t.Name, partition)
			}
			// The leader is elected uncleanly among what is left, and is
			// the ISR (recovering, KIP-704); with no one to elect, the ISR
			// is the first replica left (Kafka's
			// PartitionReassignmentRevert), or, with eligible leader
			// replicas, empty.
			pc.targetISR = []int32{}
			if !pc.elr && !slices.ContainsFunc(pc.replicas, pc.acceptable) {
				pc.targetISR = slices.Clone(pc.replicas[:1])
			}
		}
		rec, _ := pc.build()
		return rec, nil
	}
	if err := c.validateAssignment(img, target); err != nil {
		return nil, err
	}
	original := slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return slices.Contains(p.AddingReplicas, r) })
	if !allowRFChange && len(target) != len(original) {
		return nil, fmt.Errorf("%w: the replication factor of %s-%d would change from %d to %d, and the request does not allow it",
			kerr.InvalidReplicationFactor, t.Name, partition, len(original), len(target))
	}
	// Kafka's PartitionReassignmentReplicas: the target, then the current
	// replicas it leaves out.
	pc.replicas = slices.Clone(target)
	pc.adding, pc.removing = nil, nil
	for _, r := range p.Replicas {
		if !slices.Contains(target, r) {
			pc.replicas = append(pc.replicas, r)
			pc.removing = append(pc.removing, r)
		}
	}
	for _, r := range target {
		if !slices.Contains(p.Replicas, r) {
			pc.adding = append(pc.adding, r)
		}
	}
	rec, _ := pc.build()
	return rec, nil
}

// validateAssignment is Kafka's validateManualPartitionAssignment: a
// non-empty list of distinct registered brokers.
func (c *ClusterControl) validateAssignment(img *Image, replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: the manual partition assignment includes an empty replica list", kerr.InvalidReplicaAssignment)
	}
	for i, r := range replicas {
		if slices.Contains(replicas[:i], r) {
			return fmt.Errorf("%w: the manual partition assignment includes broker %d more than once", kerr.InvalidReplicaAssignment, r)
		}
		if _, ok := img.Broker(r); !ok {
			return fmt.Errorf("%w: the manual partition assignment includes broker %d, but no such broker is registered", kerr.InvalidReplicaAssignment, r)
		}
	}
	return nil
}

// ListPartitionReassignments answers ListPartitionReassignments (API 46,
// v0) from an image: every partition being reassigned (of the topics and
// partitions asked for; all when Topics is null) with its replicas and the
// adding and removing ones. Partitions that do not exist or are not being
// reassigned are left out, as Kafka does.
func ListPartitionReassignments(img *Image, req *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	add := func(t *Topic, partitions []int32) {
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = t.Name
		for _, i := range partitions {
			if i < 0 || int(i) >= len(t.Partitions) {
				continue
			}
			p := t.Partitions[i]
			if len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0 {
				continue
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = i
			sp.Replicas = slices.Clone(p.Replicas)
			sp.AddingReplicas, sp.RemovingReplicas = slices.Clone(p.AddingReplicas), slices.Clone(p.RemovingReplicas)
			if sp.AddingReplicas == nil {
				sp.AddingReplicas = []int32{}
			}
			if sp.RemovingReplicas == nil {
				sp.RemovingReplicas = []int32{}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if req.Topics == nil {
		for _, t := range img.Topics() {
			all := make([]int32, len(t.Partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(t, all)
		}
		return resp
	}
	for _, rt := range req.Topics {
		if t, ok := img.Topic(rt.Topic); ok {
			add(t, rt.Partitions)
		}
	}
	return resp
}
