package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/keelstream/keel/client"
)

// A consumer group member: partitions are shared with the group's other
// members, offsets are committed automatically, and the loop is a plain
// range over the records.
func ExampleConsumer_group() {
	ctx := context.Background()
	c, err := client.NewConsumer(ctx,
		client.SeedBrokers("localhost:9092"),
		client.ConsumerGroup("billing"),
		client.ConsumeTopics("orders"),
		client.AutoOffsetReset(client.OffsetResetEarliest),
		client.Assignors(client.CooperativeStickyAssignor()),
		client.OnRebalance(client.RebalanceListener{
			OnAssigned: func(p map[string][]int32) { log.Printf("assigned %v", p) },
			OnRevoked:  func(p map[string][]int32) { log.Printf("revoked %v", p) },
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	for rec, err := range c.Records(ctx) {
		if err != nil {
			log.Print(err)
			continue
		}
		fmt.Printf("%s-%d@%d: %s\n", rec.Topic, rec.Partition, rec.Offset, rec.Value)
	}
}

// Direct assignment with Poll, a seek, and a manual commit.
func ExampleConsumer_Poll() {
	ctx := context.Background()
	c, err := client.NewConsumer(ctx,
		client.SeedBrokers("localhost:9092"),
		client.ConsumerGroup("audit"), // only used to store offsets
		client.ConsumePartitions(map[string]map[int32]int64{"orders": {0: client.OffsetEarliest, 1: 42}}),
		client.MaxPollRecords(100),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	if err := c.Seek("orders", 0, 1000); err != nil {
		log.Fatal(err)
	}
	recs, err := c.Poll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Println(r.Offset, string(r.Value))
	}
	if err := c.CommitSync(ctx); err != nil {
		log.Fatal(err)
	}
}
