package broker

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// The replication quota measures bytes over Kafka's 11 one-second windows,
// dividing by at least 10 of them, and forgets windows older than that.
func TestReplicationQuotaRate(t *testing.T) {
	q := newRateQuota(defaultQuotaWindows)
	t0 := time.Unix(1_000_000, 0)
	q.record(5000, t0)
	if q.exceeded(t0) {
		t.Fatal("an unlimited quota is exceeded")
	}
	if r := q.rate(t0); r != 500 {
		t.Fatalf("rate %v, want 5000 bytes over 10 windows", r)
	}
	q.limit.Store(499)
	if !q.exceeded(t0) {
		t.Fatal("500 bytes/s within a 499 bytes/s quota")
	}
	q.limit.Store(500)
	if q.exceeded(t0) {
		t.Fatal("500 bytes/s over a 500 bytes/s quota")
	}
	q.record(1000, t0.Add(3*time.Second))
	if r := q.rate(t0.Add(10 * time.Second)); r != 600 {
		t.Fatalf("rate %v after 10 s, want both samples", r)
	}
	if r := q.rate(t0.Add(11 * time.Second)); r != 100 {
		t.Fatalf("rate %v after 11 s, want the first sample gone", r)
	}
	if r := q.rate(t0.Add(time.Hour)); r != 0 {
		t.Fatalf("rate %v an hour later", r)
	}
	// A window's slot is reused, not added to, when its time comes round.
	q.record(10, t0.Add(11*time.Second))
	if r := q.rate(t0.Add(11 * time.Second)); r != 101 {
		t.Fatalf("rate %v with a reused slot", r)
	}
}

func TestThrottledReplica(t *testing.T) {
	for _, tc := range []struct {
		value             string
		partition, broker int32
		want              bool
	}{
		{"*", 3, 7, true},
		{" * ", 0, 1, true},
		{"", 0, 1, false},
		{"0:1,1:2", 0, 1, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1,1:2", 0, 2, false},
		{"0:1, 1 : 2", 1, 2, true},
	} {
		if got := throttledReplica(tc.value, tc.partition, tc.broker); got != tc.want {
			t.Errorf("%q partition %d broker %d: %v", tc.value, tc.partition, tc.broker, got)
		}
	}
}

// TestLeaderReplicationThrottle: over leader.replication.throttled.rate, a
// follower outside the ISR gets no records of a partition that
// leader.replication.throttled.replicas names on the leader; consumers and
// in-sync followers are never throttled; without the rate it reads again.
func TestLeaderReplicationThrottle(t *testing.T) {
	c := newTestCluster(t)
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("thr", []int32{testNodeID, 2})
	c.produceN(t, "thr", 0, 20, 200)
	adm := c.admin()
	ctx := testCtx(t)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: kmsgStr("0:1")}}, "thr"); err != nil {
		t.Fatal(err)
	}
	if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.replication.throttled.rate", Value: kmsgStr("100")}}, testNodeID); err != nil || resp[0].Err != nil {
		t.Fatalf("throttle rate: %v %+v", err, resp)
	}
	if got := c.broker.leaderQuota.limit.Load(); got != 100 {
		t.Fatalf("leader quota %d", got)
	}
	setISR := func(isr ...int32) {
		topic, _ := c.meta.Image().Topic("thr")
		c.meta.commit(&metadata.PartitionChangeRecord{TopicID: topic.ID, PartitionID: 0, Leader: metadata.NoLeaderChange, ISR: isr})
		waitFor(t, "the ISR change to apply", 5*time.Second, func() bool {
			st := c.broker.lookup(tp("thr", 0)).state.Load()
			return len(st.isr) == len(isr)
		})
	}
	setISR(testNodeID) // 2 is catching up

	rc := c.dialRaw(t)
	fetch := func(replica int32) int {
		req := c.fetchRequest(15, 0, 1, 1<<20, fetchPartitionReq{"thr", 0, 0, 1 << 20, -1})
		req.ReplicaState.ID = replica
		p := roundTrip[*kmsg.FetchResponse](rc, req).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("replica %d: error %d", replica, p.ErrorCode)
		}
		n, _ := batchesIn(t, p.RecordBatches)
		return n
	}
	if n := fetch(2); n != 20 {
		t.Fatalf("first follower fetch: %d batches; under the rate it reads", n)
	}
	if n := fetch(2); n != 0 {
		t.Fatalf("second follower fetch: %d batches; over the rate it gets none", n)
	}
	if n := fetch(-1); n == 0 {
		t.Fatal("a consumer was throttled")
	}
	setISR(testNodeID, 2)
	if n := fetch(2); n != 20 {
		t.Fatalf("in-sync follower: %d batches; never throttled", n)
	}
	setISR(testNodeID)
	if n := fetch(2); n != 0 {
		t.Fatalf("out of sync again: %d batches", n)
	}
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "leader.replication.throttled.rate"}}, testNodeID); err != nil {
		t.Fatal(err)
	}
	if got := c.broker.leaderQuota.limit.Load(); got != math.MaxInt64 {
		t.Fatalf("leader quota %d after the rate was removed", got)
	}
	if n := fetch(2); n != 20 {
		t.Fatalf("unthrottled: %d batches", n)
	}
}

// quota.window.num and quota.window.size.seconds (and their replication.*
// twins) shape the windows: 3 windows of 2 s divide by 2 of them (4 s) and
// forget a sample after 6 s; a client throttle is at most 6 s.
func TestQuotaWindowsConfig(t *testing.T) {
	c := newTestCluster(t, withConfig("quota.window.num=3", "quota.window.size.seconds=2", "replication.quota.window.num=5"))
	b, cfg := c.broker, c.broker.cfg
	if w := b.producerQuotas.windows; w != (quotaWindows{3, 2 * time.Second}) || b.consumerQuotas.windows != w {
		t.Fatalf("client quota windows %+v", w)
	}
	if w := b.leaderQuota.windows; w != (quotaWindows{5, time.Second}) || b.followerQuota.windows != w {
		t.Fatalf("replication quota windows %+v", w)
	}
	q := newRateQuota(cfg.clientQuotaWindows())
	t0 := time.Unix(1_000_000, 0)
	q.record(6000, t0)
	if r := q.rate(t0.Add(5 * time.Second)); r != 1500 {
		t.Fatalf("rate %v, want 6000 bytes over 4 s", r)
	}
	if r := q.rate(t0.Add(6 * time.Second)); r != 0 {
		t.Fatalf("rate %v after 6 s, want the sample gone", r)
	}
	if d := cfg.clientQuotaWindows().maxThrottle(); d != 6*time.Second {
		t.Fatalf("max throttle %v", d)
	}
	for _, bad := range []string{"quota.window.num=0", "quota.window.size.seconds=0", "replication.quota.window.num=0", "replication.quota.window.size.seconds=-1"} {
		if _, err := LoadConfig(nil, []string{bad}); err == nil || !strings.Contains(err.Error(), strings.Split(bad, "=")[0]) {
			t.Errorf("%s: %v, want it refused", bad, err)
		}
	}
}
