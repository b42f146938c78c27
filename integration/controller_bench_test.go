package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCreateTopicsThroughRaft creates 1,000 topics × 10 partitions
// (10,000 partitions) through a live controller quorum: kadm CreateTopics
// requests of 100 topics each (one metadata batch per request), each
// committed through hashicorp/raft with raft-boltdb fsyncing every append.
// The target: 10,000 partitions in ≤ 30 s on this 2-core machine.
// Run: go test -run '^$' -bench CreateTopicsThroughRaft -benchtime 1x ./integration/
func BenchmarkCreateTopicsThroughRaft(b *testing.B) {
	if _, err := broker.RaiseOpenFileLimit(); err != nil {
		b.Fatal(err)
	}
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("voters=%d", nodes), func(b *testing.B) {
			var specs []NodeSpec
			for i := 1; i <= nodes; i++ {
				specs = append(specs, NodeSpec{ID: int32(i), Roles: "broker,controller"})
			}
			c := StartCluster(b, specs)
			c.WaitReady(30 * time.Second)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.RequestTimeoutOverhead(time.Minute))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			const topics, perRequest, partitions = 1000, 100, 10
			round := 0
			for b.Loop() {
				start := time.Now()
				for i := 0; i < topics; i += perRequest {
					names := make([]string, perRequest)
					for j := range names {
						names[j] = fmt.Sprintf("r%d-t%04d", round, i+j)
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					resps, err := adm.CreateTopics(ctx, partitions, 1, nil, names...)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					if err := resps.Error(); err != nil {
						b.Fatal(err)
					}
				}
				elapsed := time.Since(start)
				b.ReportMetric(float64(topics*partitions)/elapsed.Seconds(), "partitions/s")
				b.ReportMetric(elapsed.Seconds(), "s/10k-partitions")
				round++
			}
			img := c.Nodes[1].Raft().Image()
			if img.NumTopics() < topics {
				b.Fatalf("image has %d topics", img.NumTopics())
			}
		})
	}
}
