package raftlog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelstream/keel/metadata"
)

// BenchmarkPropose measures committed metadata throughput on loopback:
// batches of PartitionRecords proposed to the leader of a 1-node and a
// 3-node quorum, one at a time (latency bound: every batch waits for its
// own bbolt fsync on a majority) and from 16 concurrent proposers (Raft
// group-commits them). raft-boltdb fsyncs every append.
func BenchmarkPropose(b *testing.B) {
	const recordsPerBatch = 100
	for _, nodes := range []int{1, 3} {
		for _, inflight := range []int{1, 16} {
			b.Run(fmt.Sprintf("nodes=%d/inflight=%d/records=%d", nodes, inflight, recordsPerBatch), func(b *testing.B) {
				// hashicorp's default timers: the fast test timers let fsync
				// stalls on the shared disk look like a dead leader.
				c := newCluster(b, nodes, func(_ int32, cfg *Config) {
					cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 0, 0, 0
					cfg.CommitTimeout = 0
				})
				c.waitLeader()
				create := createTopic("bench", recordsPerBatch)
				c.propose(create...)
				topicID := create[0].(*metadata.TopicRecord).TopicID
				batch := make([]metadata.Record, recordsPerBatch)
				for p := range batch {
					r := []int32{1, 2, 3}
					batch[p] = &metadata.PartitionRecord{PartitionID: int32(p), TopicID: topicID, Replicas: r, ISR: r, Leader: 1, LeaderEpoch: 1}
				}
				leader := c.waitLeader().node
				ctx := context.Background()

				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, inflight)
				for w := 0; w < inflight; w++ {
					n := b.N / inflight
					if w < b.N%inflight {
						n++
					}
					wg.Add(1)
					go func(n int) {
						defer wg.Done()
						for i := 0; i < n; i++ {
							if _, err := leader.Propose(ctx, batch); err != nil {
								errs <- err
								return
							}
						}
					}(n)
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				select {
				case err := <-errs:
					b.Fatal(err)
				default:
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
				b.ReportMetric(float64(b.N*recordsPerBatch)/elapsed.Seconds(), "records/s")
			})
		}
	}
}
