package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/client/clienttest"
)

// TestSDKSuiteAgainstKeel runs the SDK's suite (the one client's tests run
// against franz-go's kfake) against a real single-node Keel cluster.
func TestSDKSuiteAgainstKeel(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	clienttest.Run(t, clienttest.Target{Bootstrap: c.BootstrapServers(), HasQuorum: true, ValidatesConfigValues: true})
}

// BenchmarkSDKProduceVsKgo compares the SDK's producer with franz-go's kgo
// against the same Keel node with the same settings (100-byte records).
func BenchmarkSDKProduceVsKgo(b *testing.B) {
	c := StartCluster(b, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	clienttest.BenchmarkProduce(b, clienttest.Target{Bootstrap: c.BootstrapServers()}, clienttest.DefaultBenchSettings())
}

// TestSDKProducerSurvivesPartitionLeaderKill produces with the SDK
// (acks=all, idempotent) while the partition leader is killed: every record
// is acknowledged, and the log holds each exactly once, in order, on the new
// leader. The producer's NOT_LEADER_OR_FOLLOWER / dead-connection handling
// meets Keel's leader election and producer-state replication.
func TestSDKProducerSurvivesPartitionLeaderKill(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}})
	c.WaitReady(30 * time.Second)
	tgt := clienttest.Target{Bootstrap: c.BootstrapServers()}
	adm := clienttest.NewAdmin(t, tgt)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, "failover", 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	p := clienttest.NewProducer(t, tgt, client.Linger(2*time.Millisecond), client.BatchSize(4096),
		client.RetryBackoff(20*time.Millisecond, 200*time.Millisecond), client.MetadataMinAge(50*time.Millisecond))
	const n = 6000
	recs := make([]*client.Record, n)
	errs := make(chan error, n)
	killed := false
	for i := range recs {
		if i == n/3 {
			// Wait for the first third, so the kill lands mid-stream.
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			leader, err := p.Client().PartitionLeader(ctx, "failover", 0)
			if err != nil {
				t.Fatal(err)
			}
			c.Kill(leader)
			killed = true
			t.Logf("killed leader %d after %d records", leader, i)
		}
		recs[i] = client.StringRecord("failover", strconv.Itoa(i))
		p.Produce(ctx, recs[i], func(_ *client.Record, err error) { errs <- err })
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("record failed: %v", err)
		}
	}
	if !killed {
		t.Fatal("no kill")
	}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, r.Offset)
		}
	}
	got := clienttest.ConsumeWithKgo(t, tgt, "failover", n)[0]
	if len(got) != n {
		t.Fatalf("%d records in the log for %d acknowledged", len(got), n)
	}
	for i, r := range got {
		if string(r.Value) != strconv.Itoa(i) {
			t.Fatalf("offset %d holds %q", i, r.Value)
		}
	}
}
