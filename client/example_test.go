package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Produce records asynchronously with callbacks, then synchronously.
func ExampleProducer() {
	// A stand-in cluster; use your brokers' addresses instead.
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	ctx := context.Background()
	p, err := client.NewProducer(ctx,
		client.SeedBrokers(fake.ListenAddrs()...),
		client.ProducerCompression(client.CompressionZstd),
		client.Linger(10*time.Millisecond),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	done := make(chan struct{})
	p.Produce(ctx, client.KeyStringRecord("orders", "customer-42", "created"), func(r *client.Record, err error) {
		if err != nil {
			log.Print(err)
		} else {
			fmt.Printf("async: partition %d offset %d\n", r.Partition, r.Offset)
		}
		close(done)
	})
	<-done

	// Records with the same key land on the same partition, in order.
	results := p.ProduceSync(ctx,
		client.KeyStringRecord("orders", "customer-42", "paid"),
		client.KeyStringRecord("orders", "customer-42", "shipped"),
	)
	if err := results.FirstErr(); err != nil {
		log.Fatal(err)
	}
	for _, res := range results {
		fmt.Printf("sync: %s at partition %d offset %d\n", res.Record.Value, res.Record.Partition, res.Record.Offset)
	}
	// Output:
	// async: partition 0 offset 0
	// sync: paid at partition 0 offset 1
	// sync: shipped at partition 0 offset 2
}

// Create a topic, change one of its configs and look at it.
func ExampleAdmin() {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	ctx := context.Background()
	adm, err := client.NewAdmin(ctx, client.SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer adm.Close()

	if err := adm.CreateTopic(ctx, "events", 2, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		log.Fatal(err)
	}
	if _, err := adm.CreatePartitions(ctx, 4, "events"); err != nil {
		log.Fatal(err)
	}
	retention := "86400000"
	if err := adm.IncrementalAlterConfigs(ctx, client.TopicConfig, "events",
		client.AlterConfig{Op: client.SetConfig, Name: "retention.ms", Value: &retention}); err != nil {
		log.Fatal(err)
	}
	topics, err := adm.DescribeTopics(ctx, "events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("partitions:", len(topics[0].Partitions))
	configs, err := adm.DescribeConfigs(ctx, client.TopicConfig, "events")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range configs[0].Configs {
		if c.Name == "cleanup.policy" || c.Name == "retention.ms" {
			fmt.Printf("%s=%s (%s)\n", c.Name, *c.Value, c.Source)
		}
	}
	ends, err := adm.ListOffsets(ctx, client.LatestOffset, "events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("end offset of events-0:", ends[client.TopicPartition{Topic: "events", Partition: 0}].Offset)
	// Output:
	// partitions: 4
	// cleanup.policy=compact (DYNAMIC_TOPIC_CONFIG)
	// retention.ms=86400000 (DYNAMIC_TOPIC_CONFIG)
	// end offset of events-0: 0
}

// Send any Kafka request through the Client core: here the group
// coordinator lookup the Consumer uses.
func ExampleClient_Coordinator() {
	fake, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	ctx := context.Background()
	cl, err := client.NewClient(ctx, client.SeedBrokers(fake.ListenAddrs()[0]))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	fmt.Println("brokers:", len(cl.Metadata().Brokers))
	id, err := cl.Coordinator(ctx, client.GroupCoordinator, "my-group")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("coordinator is kfake's:", id == fake.CoordinatorFor("my-group"))
	// Output:
	// brokers: 3
	// coordinator is kfake's: true
}
