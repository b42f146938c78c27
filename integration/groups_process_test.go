package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupCommitsSurviveCoordinatorKill9: three keel processes; a kgo
// consumer group commits offsets; the coordinator's process is killed with
// SIGKILL; a new coordinator serves exactly the committed offsets, and a new
// member of the group resumes from them.
func TestGroupCommitsSurviveCoordinatorKill9(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{Overrides: []string{"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=6"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var dead int32 = -1
	live := func() []string { // seeds of the running nodes
		var out []string
		for _, s := range c.Specs {
			if s.ID != dead {
				out = append(out, c.Node(s.ID).AdvertisedPlaintext)
			}
		}
		return out
	}
	admin := func() *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(live()...), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	adm := admin()
	const topic, group, total = "kill9-groups", "g-kill9", 300
	if resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := 0; i < total; i++ {
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// A member consumes 200 records and commits them (offsets of acks=all
	// commits in __consumer_offsets, replication factor 3).
	member, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	consumed := 0
	for consumed < 200 {
		fs := member.PollRecords(ctx, 200-consumed)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d", consumed)
		}
		consumed += fs.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	member.Close() // leaves the group; the commits stay
	before, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	coords := adm.FindGroupCoordinators(ctx, group)
	coordinator := coords[group].NodeID
	t.Logf("kill -9 coordinator %d", coordinator)
	c.Kill(coordinator)
	dead = coordinator

	// Once the dead broker is fenced, the offsets partition has a new
	// leader: the new coordinator serves exactly what was committed.
	var after kadm.OffsetResponses
	waitFor(t, 60*time.Second, "the committed offsets from a new coordinator", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(live()...))
		if err != nil {
			return false
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		co := adm.FindGroupCoordinators(cctx, group)
		if co[group].Err != nil || co[group].NodeID == coordinator {
			return false
		}
		after, err = adm.FetchOffsets(cctx, group)
		return err == nil
	})
	if fmt.Sprint(after.Offsets()) != fmt.Sprint(before.Offsets()) {
		t.Fatalf("committed offsets after the kill %v, before %v", after.Offsets(), before.Offsets())
	}
	// A new member resumes exactly there: it reads the remaining records.
	next, err := kgo.NewClient(kgo.SeedBrokers(live()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	rest := 0
	for rest < total-200 {
		fs := next.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the new member read %d of the %d records left", rest, total-200)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if o, ok := before.Lookup(r.Topic, r.Partition); ok && r.Offset < o.At {
				t.Fatalf("record %d/%d redelivered below the committed offset %d", r.Partition, r.Offset, o.At)
			}
			rest++
		})
	}
	c.Start(coordinator)
	c.WaitReady(coordinator)
}
