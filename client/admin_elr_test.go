package client

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// EligibleLeaderReplicas against franz-go's reference broker pages through
// DescribeTopicPartitions until every partition of the named topics is
// described, and fails on an unknown topic.
func TestAdminEligibleLeaderReplicas(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(5, "a", "b"))
	ctx := testCtx(t)
	adm, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	defer func(old int32) { elrPageLimit = old }(elrPageLimit)
	elrPageLimit = 3 // four pages for ten partitions
	got, err := adm.EligibleLeaderReplicas(ctx, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("%d partitions described, want 10: %v", len(got), got)
	}
	for _, topic := range []string{"a", "b"} {
		for p := range int32(5) {
			if _, ok := got[TopicPartition{topic, p}]; !ok {
				t.Errorf("%s-%d not described", topic, p)
			}
		}
	}
	if _, err := adm.EligibleLeaderReplicas(ctx, "a", "nope"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
}
