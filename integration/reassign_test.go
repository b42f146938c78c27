package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/broker"
)

// TestPartitionReassignment is kafka-reassign-partitions' path through
// kadm (KIP-455) on three combined nodes: a partition on 1,2 moves to 2,3
// while a producer keeps writing with acks=all. The move waits while the
// new replica's broker is down (listed as adding 3, removing 1), can be
// cancelled and asked for again, and completes once 3 is back and caught
// up: the leadership leaves 1, node 1 deletes its copy, and every
// acknowledged record is on 2 and 3 at its offset. Node 1, empty, is then
// stopped and unregistered (kafka-cluster.sh unregister).
func TestPartitionReassignment(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}})
	c.WaitReady(30 * time.Second)
	cl, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic = "moving"
	createAssigned(t, cl, topic, 1, 2)
	produceKeyed(t, c, topic, 0, 2000)

	assign := func(ctx context.Context, replicas ...int32) error {
		t.Helper()
		req := kadm.AlterPartitionAssignmentsReq{}
		if replicas == nil {
			req.CancelAssign(topic, 0)
		} else {
			req.Assign(topic, 0, replicas)
		}
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatalf("alter partition assignments %v: %v", replicas, err)
		}
		return resp.Error()
	}
	// replicasAre: so says every running node (a restarted one catches up).
	replicasAre := func(want ...int32) func() bool {
		return func() bool {
			for _, n := range c.Nodes {
				t, ok := n.Raft().Image().Topic(topic)
				if !ok {
					return false
				}
				p := t.Partitions[0]
				if !slices.Equal(p.Replicas, want) || len(p.AddingReplicas) != 0 || len(p.RemovingReplicas) != 0 {
					return false
				}
			}
			return true
		}
	}

	// With 3 down the move cannot complete: it stays listed.
	c.Stop(3)
	if err := assign(ctx, 2, 3); err != nil {
		t.Fatalf("reassign to 2,3: %v", err)
	}
	ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := ls[topic][0]
	if !slices.Equal(got.Replicas, []int32{2, 3, 1}) || !slices.Equal(got.AddingReplicas, []int32{3}) || !slices.Equal(got.RemovingReplicas, []int32{1}) {
		t.Fatalf("listed %+v, want replicas [2 3 1] adding [3] removing [1]", got)
	}
	// A controller lists it too, to an admin client that comes with
	// --bootstrap-controller (KIP-919), once its image has the change.
	waitFor(t, 10*time.Second, "controller 1 to list the reassignment", func() bool {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		resp, err := broker.Request(ctx, c.ControllerAddr(1), req)
		if err != nil {
			return false
		}
		ts := resp.(*kmsg.ListPartitionReassignmentsResponse).Topics
		return len(ts) == 1 && ts[0].Topic == topic && len(ts[0].Partitions) == 1 &&
			slices.Equal(ts[0].Partitions[0].AddingReplicas, []int32{3}) && slices.Equal(ts[0].Partitions[0].RemovingReplicas, []int32{1})
	})

	// Refusals, through the forwarding broker.
	for _, tc := range []struct {
		ctx      context.Context
		replicas []int32
		want     error
	}{
		{kadm.ForbidAlterRf(ctx), []int32{2}, kerr.InvalidReplicationFactor},
		{ctx, []int32{2, 9}, kerr.InvalidReplicaAssignment},
	} {
		if err := assign(tc.ctx, tc.replicas...); !errors.Is(err, tc.want) {
			t.Errorf("reassign to %v: %v, want %v", tc.replicas, err, tc.want)
		}
	}

	// Cancelled: back on 1 and 2 (in the merged order, as Kafka reverts);
	// then asked for again.
	if err := assign(ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	waitFor(t, 10*time.Second, "the cancelled reassignment to revert", replicasAre(2, 1))
	if err := assign(ctx); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel again: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
	if err := assign(ctx, 2, 3); err != nil {
		t.Fatalf("reassign to 2,3 again: %v", err)
	}

	// A producer keeps going while 3 comes back, catches up, and the
	// leadership moves from 1 to 2.
	var acked atomic.Int64
	acked.Store(2000)
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		pcl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
		if err != nil {
			produced <- err
			return
		}
		defer pcl.Close()
		for {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			from := int(acked.Load())
			recs := make([]*kgo.Record, 0, 100)
			for i := from; i < from+100; i++ {
				recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
			}
			if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				produced <- fmt.Errorf("produce from %d: %w", from, err)
				return
			}
			acked.Add(100)
		}
	}()
	c.Start(3)
	waitFor(t, 60*time.Second, "the reassignment to complete", replicasAre(2, 3))
	if p, _ := partitionState(c, topic, 0); p.Leader != 2 || !slices.Equal(slices.Sorted(slices.Values(p.ISR)), []int32{2, 3}) {
		t.Fatalf("after the move: leader %d ISR %v, want 2 and [2 3]", p.Leader, p.ISR)
	}
	waitFor(t, 30*time.Second, "node 1 to delete its replica", func() bool {
		if c.Nodes[1].PartitionLog(topic, 0) != nil {
			return false
		}
		_, err := os.Stat(filepath.Join(c.Dir(1), topic+"-0"))
		return errors.Is(err, os.ErrNotExist)
	})
	start := acked.Load()
	waitFor(t, 30*time.Second, "the producer to go on after the move", func() bool { return acked.Load() >= start+500 })
	close(stop)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	n := int(acked.Load())
	waitFor(t, 30*time.Second, "2 and 3 to converge", func() bool { return replicasConverged(c, topic, 0, []int32{2, 3}) })
	consumeAll(t, c, topic, n)
	if ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}}); err != nil || len(ls) != 0 {
		t.Fatalf("still listed: %+v %v", ls, err)
	}

	// Node 1 holds nothing now: decommission it (kafka-cluster.sh
	// unregister, after stopping the broker).
	c.Stop(1)
	unregister := func() error {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = 1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	if err := unregister(); err != nil {
		t.Fatalf("unregister 1: %v", err)
	}
	waitFor(t, 10*time.Second, "every node to forget broker 1", func() bool {
		for _, n := range c.Nodes {
			if _, ok := n.Raft().Image().Broker(1); ok {
				return false
			}
		}
		return true
	})
	if err := unregister(); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unregister 1 again: %v, want BROKER_ID_NOT_REGISTERED", err)
	}
}

// TestReassignmentThrottle is kafka-reassign-partitions --throttle on the
// follower side (KIP-73): the new replica's broker, with
// follower.replication.throttled.rate set and the partition named in
// follower.replication.throttled.replicas, copies the partition no faster
// than the rate allows (one fetch's worth of burst); without the throttle
// the move completes.
func TestReassignmentThrottle(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		"replica.fetch.max.bytes=65536")
	c.WaitReady(30 * time.Second)
	cl, adm := newClient(t, c, kgo.DefaultProduceTopic("thr"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(16<<10)) // batches well below a fetch's 64 KiB
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createAssigned(t, cl, "thr", 1, 2)
	value := make([]byte, 1000)
	recs := make([]*kgo.Record, 2000) // 2 MB
	for i := range recs {
		recs[i] = &kgo.Record{Value: value}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const rate = 10_000 // bytes a second
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: kmsgStr("0:3")}}, "thr"); err != nil {
		t.Fatal(err)
	}
	throttle := func(op kadm.IncrementalOp) {
		t.Helper()
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "follower.replication.throttled.rate", Value: kmsgStr(fmt.Sprint(rate))}}, 3)
		if err == nil {
			err = resp[0].Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	throttle(kadm.SetConfig)
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign("thr", 0, []int32{2, 3})
	if resp, err := adm.AlterPartitionAssignments(ctx, req); err != nil || resp.Error() != nil {
		t.Fatalf("reassign: %v %v", err, resp.Error())
	}

	// Allowed in 3 s: the quota's 10-window burst (100 KB) and one fetch
	// past it (64 KiB) at most, of the 2 MB there are.
	start := time.Now()
	time.Sleep(3 * time.Second)
	var copied int64
	if l := c.Nodes[3].PartitionLog("thr", 0); l != nil {
		copied = l.Size()
	}
	if limit := int64(rate*(quotaWindows+time.Since(start).Seconds())) + 65536; copied > limit {
		t.Fatalf("the throttled replica copied %d bytes in %v, over the %d the throttle allows", copied, time.Since(start), limit)
	}
	ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"thr": {0: {}}})
	if err != nil || len(ls["thr"][0].AddingReplicas) != 1 {
		t.Fatalf("the move is not listed as going: %+v %v", ls, err)
	}

	throttle(kadm.DeleteConfig)
	waitFor(t, 30*time.Second, "the move to complete without the throttle", func() bool {
		p, ok := partitionState(c, "thr", 0)
		return ok && slices.Equal(p.Replicas, []int32{2, 3}) && len(p.AddingReplicas) == 0
	})
	t.Logf("copied %d bytes in the first %v under a %d bytes/s throttle", copied, 3*time.Second, rate)
}

// quotaWindows is the replication quota's burst allowance in seconds
// (broker/quota.go: Kafka's 11 windows, divided by at least 10).
const quotaWindows = 10

func kmsgStr(s string) *string { return &s }
