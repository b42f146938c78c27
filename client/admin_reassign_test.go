package client

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// AlterPartitionReassignments and ListPartitionReassignments against
// franz-go's reference broker, which validates a reassignment without
// moving anything: an accepted one, an unknown partition, and a cancel
// with nothing to cancel each get their own answer; nothing is listed.
func TestAdminPartitionReassignments(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "a"))
	ctx := testCtx(t)
	adm, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	res, err := adm.AlterPartitionReassignments(ctx, map[TopicPartition][]int32{
		{"a", 0}:    {1, 2},
		{"nope", 0}: {1, 2},
		{"a", 1}:    nil, // cancel
	})
	if err != nil {
		t.Fatal(err)
	}
	var noReassignment *Error
	if len(res) != 3 || res[TopicPartition{"a", 0}] != nil || !errors.Is(res[TopicPartition{"nope", 0}], ErrUnknownTopicOrPartition) ||
		!errors.As(res[TopicPartition{"a", 1}], &noReassignment) || noReassignment.Code != 85 { // NO_REASSIGNMENT_IN_PROGRESS
		t.Fatalf("alter: %v", res)
	}
	for _, parts := range [][]TopicPartition{nil, {{"a", 0}, {"a", 1}}} {
		listed, err := adm.ListPartitionReassignments(ctx, parts...)
		if err != nil || len(listed) != 0 {
			t.Fatalf("list %v: %v %v", parts, listed, err)
		}
	}
}

// ElectLeaders against franz-go's reference broker: a partition whose
// preferred replica leads is fine (kfake answers success, Kafka
// ELECTION_NOT_NEEDED); an unknown one is refused.
func TestAdminElectLeaders(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a"))
	ctx := testCtx(t)
	adm, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	res, err := adm.ElectLeaders(ctx, PreferredElection, TopicPartition{"a", 0}, TopicPartition{"nope", 0})
	if err != nil {
		t.Fatal(err)
	}
	if e := res[TopicPartition{"a", 0}]; len(res) != 2 || e != nil && !errors.Is(e, ErrElectionNotNeeded) || !errors.Is(res[TopicPartition{"nope", 0}], ErrUnknownTopicOrPartition) {
		t.Fatalf("elect: %v", res)
	}
	if PreferredElection.String() != "PREFERRED" || UncleanElection.String() != "UNCLEAN" {
		t.Fatal("election type names")
	}
}
