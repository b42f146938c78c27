package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFollowerFetchTimeout: replica.socket.timeout.ms bounds how long a
// follower waits for its leader's answer. With the leader paused (its
// sockets open, nothing answered), the followers drop their fetch and try
// again after the configured second, not after the 10 s or more a
// built-in bound would take; once the leader resumes, replication goes on.
func TestFollowerFetchTimeout(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}},
		ProcessOptions{Overrides: []string{"replica.socket.timeout.ms=1000", "replica.fetch.wait.max.ms=200"}})
	adm := kadm.NewClient(procClient(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 6, 3, nil, "socket-timeout"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	// A leader that is not the active controller: pausing it leaves the
	// quorum alone, and nothing moves its leaderships for the broker
	// session timeout (9 s).
	var leader int32 = -1
	for leader < 0 && ctx.Err() == nil {
		md, err := adm.Metadata(ctx, "socket-timeout")
		if err == nil {
			for _, p := range md.Topics["socket-timeout"].Partitions {
				if p.Leader >= 0 && p.Leader != md.Controller && len(p.ISR) == 3 {
					leader = p.Leader
					break
				}
			}
		}
		if leader < 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if leader < 0 {
		t.Fatal("no partition led by a broker other than the controller with its 3 replicas in sync")
	}
	var followers []int32
	seen := map[int32]int{}
	for _, id := range []int32{1, 2, 3} {
		if id != leader {
			followers = append(followers, id)
			seen[id] = len(c.Log(id))
		}
	}
	timedOut := regexp.MustCompile(`follower fetch failed: leader=` + strconv.Itoa(int(leader)) + `\b.*(deadline exceeded|timeout)`)
	c.Pause(leader)
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			c.Resume(leader)
		}
	}()
	for _, id := range followers {
		for !timedOut.MatchString(c.Log(id)[seen[id]:]) {
			if time.Since(paused) > 5*time.Second {
				t.Fatalf("node %d logged no timed-out fetch from paused leader %d within 5 s (replica.socket.timeout.ms=1000):\n%s", id, leader, c.LogTail(id, 30))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("both followers timed out their fetch from node %d within %v", leader, time.Since(paused).Round(time.Millisecond))
	c.Resume(leader)
	resumed = true
	cl := procClient(t, c)
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "socket-timeout", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce after the resume: %v", err)
		}
	}
}

// TestNumReplicaFetchersResizedUnderLoad: num.replica.fetchers changed at
// runtime, cluster-wide, while acks=all producers run: the followers move
// their partitions between fetchers without losing their place, every
// acknowledged record is read back in order, and the ISR stays whole.
func TestNumReplicaFetchersResizedUnderLoad(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}}, ProcessOptions{})
	cl := procClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("resized"))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 6, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "resized"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	const total = 6000
	produced := make(chan error, 1)
	go func() {
		for i := range total {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 60)), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				produced <- fmt.Errorf("record %d: %w", i, err)
				return
			}
		}
		produced <- nil
	}()
	for _, n := range []string{"4", "2", "1"} {
		time.Sleep(500 * time.Millisecond)
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.replica.fetchers", Value: kadm.StringPtr(n)}})
		if err != nil || resp[0].Err != nil {
			t.Fatalf("num.replica.fetchers=%s: %v %v", n, err, resp[0].Err)
		}
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 3} {
		for _, n := range []string{"4", "2", "1"} {
			if !strings.Contains(c.Log(id), "replica fetchers: config=num.replica.fetchers per_source_broker="+n) {
				t.Fatalf("node %d did not log taking num.replica.fetchers=%s", id, n)
			}
		}
	}
	consumer := procClient(t, c, kgo.ConsumeTopics("resized"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	last := map[string]int{}
	for n := 0; n < total; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume after %d: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			if prev, ok := last[string(r.Key)]; ok && v <= prev {
				t.Fatalf("key %s: %d after %d", r.Key, v, prev)
			}
			last[string(r.Key)] = v
			n++
		})
	}
	for {
		md, err := adm.Metadata(ctx, "resized")
		if err != nil {
			t.Fatal(err)
		}
		whole := true
		for _, p := range md.Topics["resized"].Partitions {
			whole = whole && len(p.ISR) == 3
		}
		if whole {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("ISR not whole again: %+v", md.Topics["resized"].Partitions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
