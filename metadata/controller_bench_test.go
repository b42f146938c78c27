package metadata

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkCreateTopics creates 1,000 topics of 10 partitions (RF 3) on 3
// brokers through ClusterControl, encoding each request's records as one
// metadata batch and applying it to the image, as the controller's event
// loop does (minus raft). It reports partitions created per second over
// the whole run, and per batch the time to decide, to encode and to apply.
func BenchmarkCreateTopics(b *testing.B) {
	const topics, partitions = 1000, 10
	for _, perRequest := range []int{1, 100} {
		b.Run(fmt.Sprintf("topics-per-request=%d", perRequest), func(b *testing.B) {
			var decide, encode, apply time.Duration
			batches := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				c := newCluster(b, DefaultControllerConfig(), 3)
				b.StartTimer()
				for first := 0; first < topics; first += perRequest {
					req := kmsg.NewPtrCreateTopicsRequest()
					for i := first; i < first+perRequest && i < topics; i++ {
						t := kmsg.NewCreateTopicsRequestTopic()
						t.Topic, t.NumPartitions, t.ReplicationFactor = fmt.Sprintf("topic-%04d", i), partitions, 3
						req.Topics = append(req.Topics, t)
					}
					t0 := time.Now()
					recs, resp := c.cc.CreateTopics(req, false)
					t1 := time.Now()
					data, err := EncodeBatch(recs)
					if err != nil {
						b.Fatal(err)
					}
					t2 := time.Now()
					next, _, err := c.img.Apply(c.img.Offset()+1, recs)
					if err != nil {
						b.Fatal(err)
					}
					t3 := time.Now()
					c.img = next
					c.cc.SetImage(next)
					decide, encode, apply = decide+t1.Sub(t0), encode+t2.Sub(t1), apply+t3.Sub(t2)
					batches++
					if resp.Topics[0].ErrorCode != 0 || len(data) == 0 {
						b.Fatalf("create failed: %d", resp.Topics[0].ErrorCode)
					}
				}
				if c.img.NumTopics() != topics {
					b.Fatalf("%d topics", c.img.NumTopics())
				}
			}
			elapsed := b.Elapsed()
			b.ReportMetric(float64(b.N*topics*partitions)/elapsed.Seconds(), "partitions/s")
			b.ReportMetric(float64(decide.Microseconds())/float64(batches), "decide-µs/batch")
			b.ReportMetric(float64(encode.Microseconds())/float64(batches), "encode-µs/batch")
			b.ReportMetric(float64(apply.Microseconds())/float64(batches), "apply-µs/batch")
		})
	}
}

// BenchmarkFenceBroker measures a broker's fencing (Kafka's
// handleBrokerFenced) on 10,000 partitions of replication factor 3 and
// min.insync.replicas 2, each led by the broker fenced second, with
// eligible leader replicas off and on: the first fencing shrinks every ISR
// to the minimum, the second moves every leadership and, with ELR on,
// fills every ELR. Reported: the second fencing's decision per partition.
func BenchmarkFenceBroker(b *testing.B) {
	const topics, partitions = 1000, 10
	for _, elr := range []bool{false, true} {
		b.Run(fmt.Sprintf("elr=%t", elr), func(b *testing.B) {
			var decide time.Duration
			for b.Loop() {
				b.StopTimer()
				c := newCluster(b, DefaultControllerConfig(), 3)
				if elr {
					c.commit([]Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: LatestMetadataVersion},
						&FeatureLevelRecord{Name: EligibleLeaderReplicasFeature, FeatureLevel: 1}})
				}
				createBenchTopics(c, topics, partitions)
				fence := func(id int32) []Record {
					br, _ := c.img.Broker(id)
					return c.cc.fenceRecords(c.img, br)
				}
				c.commit(fence(3))
				b.StartTimer()
				t0 := time.Now()
				recs := fence(1)
				decide += time.Since(t0)
				b.StopTimer()
				if len(recs) != topics*partitions+1 {
					b.Fatalf("%d records", len(recs))
				}
				if pc := recs[0].(*PartitionChangeRecord); pc.Leader != 2 || (elr && len(pc.ELR) != 1) {
					b.Fatalf("change %+v", pc)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(decide.Nanoseconds())/float64(b.N*topics*partitions), "ns/partition")
		})
	}
}

// createBenchTopics creates topics topic-0000... of partitions partitions
// each, on brokers 1, 2 and 3, with min.insync.replicas 2.
func createBenchTopics(c *cluster, topics, partitions int) {
	for first := 0; first < topics; first += 100 {
		req := kmsg.NewPtrCreateTopicsRequest()
		for i := first; i < min(first+100, topics); i++ {
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic = fmt.Sprintf("topic-%04d", i)
			for p := range int32(partitions) {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = p, []int32{1, 2, 3}
				t.ReplicaAssignment = append(t.ReplicaAssignment, a)
			}
			t.NumPartitions, t.ReplicationFactor = -1, -1
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "min.insync.replicas", strp("2")
			t.Configs = append(t.Configs, cfg)
			req.Topics = append(req.Topics, t)
		}
		recs, _ := c.cc.CreateTopics(req, false)
		c.commit(recs)
	}
}

// BenchmarkLogDirOffline measures a heartbeat reporting a log dir offline
// (KIP-858, dirsOffline) on the 10,000 partitions of BenchmarkFenceBroker,
// broker 1 holding half its replicas in each of its two dirs and leading
// them all: the decision moves 5,000 leaderships. Reported per partition
// of the cluster, next to BenchmarkFenceBroker's per partition fenced.
func BenchmarkLogDirOffline(b *testing.B) {
	const topics, partitions = 1000, 10
	var decide time.Duration
	for b.Loop() {
		b.StopTimer()
		c := newCluster(b, DefaultControllerConfig(), 3)
		createBenchTopics(c, topics, partitions)
		br, _ := c.img.Broker(1)
		for _, t := range c.img.Topics() {
			req := kmsg.NewPtrAssignReplicasToDirsRequest()
			req.BrokerID, req.BrokerEpoch = 1, br.Epoch
			for d := range 2 {
				dir := kmsg.NewAssignReplicasToDirsRequestDirectory()
				dir.ID = testLogDir(1, d)
				rt := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
				rt.TopicID = t.ID
				for p := d; p < partitions; p += 2 {
					rt.Partitions = append(rt.Partitions, kmsg.AssignReplicasToDirsRequestDirectoryTopicPartition{Partition: int32(p)})
				}
				dir.Topics = append(dir.Topics, rt)
				req.Directories = append(req.Directories, dir)
			}
			recs, _ := c.cc.AssignReplicasToDirs(req)
			c.commit(recs)
		}
		b.StartTimer()
		t0 := time.Now()
		recs := c.cc.dirsOffline(c.img, 1, [][16]byte{testLogDir(1, 0)})
		decide += time.Since(t0)
		b.StopTimer()
		if len(recs) != topics*partitions/2+1 {
			b.Fatalf("%d records", len(recs))
		}
		if pc := recs[1].(*PartitionChangeRecord); pc.Leader != 2 {
			b.Fatalf("change %+v", pc)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(decide.Nanoseconds())/float64(b.N*topics*partitions), "ns/partition")
}
