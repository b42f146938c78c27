package broker

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDurableModeAcksOnlyWhatIsFsynced: with flush.messages=1 every
// acknowledged record (acks=1 and acks=all) is below the leader's recovery
// point when the client hears of it, and so is the high watermark
// consumers read up to.
func TestDurableModeAcksOnlyWhatIsFsynced(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("durable", 3, map[string]*string{"flush.messages": kmsg.StringPtr("1")})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for _, acks := range []kgo.Acks{kgo.LeaderAck(), kgo.AllISRAcks(), kgo.LeaderAck(), kgo.AllISRAcks()} {
		opts := []kgo.Opt{kgo.DefaultProduceTopic("durable"), kgo.RequiredAcks(acks)}
		if acks == kgo.LeaderAck() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := c.client(opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inner sync.WaitGroup
			for i := 0; i < 300; i++ {
				inner.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: []byte("v")}, func(r *kgo.Record, err error) {
					defer inner.Done()
					if err != nil {
						t.Error(err)
						return
					}
					l := c.broker.lookup(tp("durable", r.Partition)).log
					if rp := l.RecoveryPoint(); rp <= r.Offset {
						t.Errorf("offset %d of partition %d acknowledged with the recovery point at %d", r.Offset, r.Partition, rp)
					}
					if hw := l.HighWatermark(); hw > l.RecoveryPoint() {
						t.Errorf("high watermark %d above the recovery point %d", hw, l.RecoveryPoint())
					}
				})
			}
			inner.Wait()
		}()
	}
	wg.Wait()
}

// BenchmarkProduceDurable is BenchmarkProduce with flush.messages=1: every
// batch fsynced before it is acknowledged, concurrent partitions and
// requests sharing fsyncs.
func BenchmarkProduceDurable(b *testing.B) {
	benchmarkProduce(b, map[string]*string{"flush.messages": kmsg.StringPtr("1")})
}
