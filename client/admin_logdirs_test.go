package client

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DescribeLogDirs and AlterReplicaLogDirs against franz-go's reference
// broker, which records a partition's dir without moving data: a moved
// partition is then described in its new dir, every other one where it
// was, and an unknown partition gets its own error.
func TestAdminLogDirs(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b"))
	ctx := testCtx(t)
	adm, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	id := int32(0) // kfake numbers its brokers from 0
	res, err := adm.AlterReplicaLogDirs(ctx, id, "/disk2", TopicPartition{"a", 1}, TopicPartition{"nope", 0})
	if err != nil {
		t.Fatal(err)
	}
	if res[TopicPartition{"a", 1}] != nil || !errors.Is(res[TopicPartition{"nope", 0}], ErrUnknownTopicOrPartition) || len(res) != 2 {
		t.Fatalf("alter: %v", res)
	}
	dirs, err := adm.DescribeLogDirs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	where := map[TopicPartition]string{}
	for _, d := range dirs {
		if d.Err != nil || d.Broker != id {
			t.Fatalf("dir %+v", d)
		}
		for _, r := range d.Replicas {
			where[TopicPartition{r.Topic, r.Partition}] = d.Dir
		}
	}
	if len(where) != 4 || where[TopicPartition{"a", 1}] != "/disk2" || where[TopicPartition{"a", 0}] == "/disk2" {
		t.Fatalf("replicas by dir: %v", where)
	}
}
