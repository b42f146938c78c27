package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLastISRMemberLosesItsTailUnderELR is issue 5's "never elected on a log
// shorter than what was acknowledged" for the last replica standing, which
// eligible leader replicas (KIP-966, on in a new cluster) are for. Three
// brokers and a separate controller, so the quorum outlives them; a topic
// with replication.factor=3 and min.insync.replicas=2 under acks=all load:
//
//  1. Two followers shut down cleanly, one after the other. The ISR falls
//     to the leader alone, below the minimum: the second follower is an
//     eligible leader replica, and the high watermark stays.
//  2. The leader is killed with -9 and loses half its active segment, as a
//     power loss would: acknowledged records are gone from it.
//  3. It comes back without a clean shutdown, so it leaves the ELR, and
//     although it was the last ISR member it may not lead: the partition
//     stays leaderless, its ELR the follower that has every record.
//  4. That follower comes back and leads; the old leader catches up from
//     it and rejoins the ISR; the checker finds every acknowledged record.
//
// Before KIP-966 (and with the feature off) the old leader, the last ISR
// member, would lead again on its shortened log and the checker would fail.
func TestLastISRMemberLosesItsTailUnderELR(t *testing.T) {
	const topic = "elr"
	brokers := []int32{1, 2, 3}
	pc := StartProcessCluster(t, []NodeSpec{{1, "broker"}, {2, "broker"}, {3, "broker"}, {4, "controller"}},
		ProcessOptions{Overrides: []string{"replica.lag.time.max.ms=3000"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.BootstrapServers()...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	w := StartWorkload(t, pc.BootstrapServers(), topic, 2, 150)
	t.Cleanup(w.Stop)
	w.WaitEachPartition(1, 300, 30*time.Second, "before the fault")

	// describe asks a running broker with DescribeTopicPartitions, which
	// carries the ELR.
	describe := func() (kmsg.DescribeTopicPartitionsResponseTopicPartition, error) {
		var out kmsg.DescribeTopicPartitionsResponseTopicPartition
		err := askRunning(pc, brokers, func(ctx context.Context, id int32, c *kgo.Client) error {
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			r, err := req.RequestWith(ctx, c)
			if err != nil {
				return err
			}
			if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 1 {
				return fmt.Errorf("broker %d: no description of %s: %+v", id, topic, r.Topics)
			}
			out = r.Topics[0].Partitions[0]
			return nil
		})
		return out, err
	}
	state := func(p kmsg.DescribeTopicPartitionsResponseTopicPartition) string {
		return fmt.Sprintf("leader %d, ISR %v, ELR %v, last known leader %v", p.LeaderID, p.ISR, p.EligibleLeaderReplicas, p.LastKnownELR)
	}
	waitState := func(what string, ok func(p kmsg.DescribeTopicPartitionsResponseTopicPartition) bool) {
		t.Helper()
		waitForState(t, 60*time.Second, what, func() (bool, string) {
			p, err := describe()
			if err != nil {
				return false, err.Error()
			}
			return ok(p), state(p)
		})
	}
	var leader int32 = -1
	waitState("a leader", func(p kmsg.DescribeTopicPartitionsResponseTopicPartition) bool {
		leader = p.LeaderID
		return leader >= 0 && len(p.ISR) == 3
	})
	var followers []int32
	for _, id := range brokers {
		if id != leader {
			followers = append(followers, id)
		}
	}
	eligible := followers[1]

	t.Logf("leader %d; clean shutdown of follower %d, then of follower %d", leader, followers[0], eligible)
	pc.Stop(followers[0])
	pc.Stop(eligible)
	waitState("the leader alone in the ISR, the follower eligible", func(p kmsg.DescribeTopicPartitionsResponseTopicPartition) bool {
		return p.LeaderID == leader && slices.Equal(p.ISR, []int32{leader}) && slices.Equal(p.EligibleLeaderReplicas, []int32{eligible})
	})

	t.Logf("kill -9 leader %d, then cut its active segment's tail", leader)
	pc.Kill(leader)
	cutActiveSegment(t, pc, leader, topic+"-0")
	pc.Start(leader)
	pc.WaitReady(leader)
	waitState("the crashed leader out of the ELR, the partition leaderless", func(p kmsg.DescribeTopicPartitionsResponseTopicPartition) bool {
		return p.LeaderID == -1 && len(p.ISR) == 0 && slices.Equal(p.EligibleLeaderReplicas, []int32{eligible})
	})
	// It stays so: the crashed leader, unfenced, is not eligible.
	for range 10 {
		time.Sleep(300 * time.Millisecond)
		p, err := describe()
		if err != nil {
			t.Fatal(err)
		}
		if p.LeaderID >= 0 {
			t.Fatalf("broker %d, back from a crash that cut its log, leads: %s", p.LeaderID, state(p))
		}
	}

	// As kafka-topics.sh --describe shows it.
	out := pc.Keel(t, ctx, "topics", "describe", "--bootstrap-server", pc.Node(leader).AdvertisedPlaintext, "--topic", topic)
	if !strings.Contains(out, "\tLeader: none\t") ||
		!strings.Contains(out, fmt.Sprintf("\tIsr: \tElr: %d\tLastKnownElr: %d", eligible, leader)) {
		t.Fatalf("keel topics describe shows no ELR %d and last known leader %d:\n%s", eligible, leader, out)
	}
	t.Logf("keel topics describe:\n%s", out)

	t.Logf("follower %d back: it leads, from the ELR", eligible)
	pc.Start(eligible)
	pc.WaitReady(eligible)
	waitState("the eligible follower leading, the old leader back in the ISR", func(p kmsg.DescribeTopicPartitionsResponseTopicPartition) bool {
		return p.LeaderID == eligible && slices.Contains(p.ISR, leader) && len(p.EligibleLeaderReplicas) == 0
	})
	w.WaitEachPartition(1, 100, 60*time.Second, "after the eligible follower's election")
	pc.Start(followers[0])
	pc.WaitReady(followers[0])
	w.WaitEachPartition(1, 100, 60*time.Second, "with every broker back")
	w.Stop()
	w.Check(60 * time.Second)
}
