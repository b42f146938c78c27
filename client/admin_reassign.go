package client

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionReassignment is a reassignment under way (KIP-455): Replicas
// is the partition's whole replica set meanwhile, the adding and the
// removing replicas included.
type PartitionReassignment struct {
	Replicas, Adding, Removing []int32
}

// AlterPartitionReassignments starts reassigning partitions to the given
// replicas, the first of which is the preferred leader; a nil replica list
// cancels the partition's reassignment under way
// (AlterPartitionReassignments, KIP-455; what kafka-reassign-partitions.sh
// --execute and --cancel send). It returns each partition's error, nil for
// one accepted.
func (a *Admin) AlterPartitionReassignments(ctx context.Context, targets map[TopicPartition][]int32) (map[TopicPartition]error, error) {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = int32(a.timeout / time.Millisecond)
	byTopic := map[string][]kmsg.AlterPartitionAssignmentsRequestTopicPartition{}
	for tp, replicas := range targets {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition = tp.Partition
		if replicas != nil {
			rp.Replicas = append([]int32{}, replicas...) // non-nil even when empty: only nil cancels
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], rp)
	}
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	out := map[TopicPartition]error{}
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.AlterPartitionAssignmentsResponse)
		if err := errorWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return err
		}
		clear(out)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{t.Topic, p.Partition}] = errorWithMessage(p.ErrorCode, p.ErrorMessage)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alter partition reassignments: %w", err)
	}
	return out, nil
}

// ListPartitionReassignments lists the reassignments under way of the
// given partitions, or of every partition when none is given
// (ListPartitionReassignments, KIP-455; kafka-reassign-partitions.sh
// --list). A partition not being reassigned is not in the result.
func (a *Admin) ListPartitionReassignments(ctx context.Context, parts ...TopicPartition) (map[TopicPartition]PartitionReassignment, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(a.timeout / time.Millisecond)
	byTopic := partitionsByTopic(parts)
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	out := map[TopicPartition]PartitionReassignment{}
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.ListPartitionReassignmentsResponse)
		if err := errorWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return err
		}
		clear(out)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{t.Topic, p.Partition}] = PartitionReassignment{Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list partition reassignments: %w", err)
	}
	return out, nil
}

// partitionsByTopic groups partitions by topic, each topic's sorted and
// without repeats.
func partitionsByTopic(parts []TopicPartition) map[string][]int32 {
	out := map[string][]int32{}
	for _, tp := range parts {
		if !slices.Contains(out[tp.Topic], tp.Partition) {
			out[tp.Topic] = append(out[tp.Topic], tp.Partition)
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// ElectionType is the kind of leader election ElectLeaders asks for.
type ElectionType int8

const (
	// PreferredElection moves a partition's leadership to its preferred
	// replica, the first of its replicas, if that is in the ISR and does
	// not lead it already.
	PreferredElection ElectionType = 0
	// UncleanElection elects a replica out of the ISR for a partition
	// without a leader, losing what only the ISR had.
	UncleanElection ElectionType = 1
)

func (t ElectionType) String() string {
	switch t {
	case PreferredElection:
		return "PREFERRED"
	case UncleanElection:
		return "UNCLEAN"
	}
	return fmt.Sprintf("ElectionType(%d)", int8(t))
}

// ElectLeaders runs leader elections for partitions, or for every
// partition that needs one when none is given (ElectLeaders, KIP-460;
// kafka-leader-election.sh). It returns each partition's outcome: nil for
// an election done, ELECTION_NOT_NEEDED where the right replica leads
// already, another error where none could be elected.
func (a *Admin) ElectLeaders(ctx context.Context, typ ElectionType, parts ...TopicPartition) (map[TopicPartition]error, error) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = int8(typ)
	req.TimeoutMillis = int32(a.timeout / time.Millisecond)
	byTopic := partitionsByTopic(parts)
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	out := map[TopicPartition]error{}
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.ElectLeadersResponse)
		if err := errorWithMessage(resp.ErrorCode, nil); err != nil {
			return err
		}
		clear(out)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{t.Topic, p.Partition}] = errorWithMessage(p.ErrorCode, p.ErrorMessage)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("elect leaders: %w", err)
	}
	return out, nil
}
