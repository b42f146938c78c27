package broker

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestartKeepsAcknowledgedRecords: after a clean stop of server, broker
// and storage, a broker reopened on the same directory and image serves
// every acknowledged record at its offset, and takes new ones after them.
func TestRestartKeepsAcknowledgedRecords(t *testing.T) {
	c := newTestCluster(t)
	const partitions, n = 4, 5000
	c.createTopic("durable", partitions, nil)
	acked := map[[2]int64][]byte{}
	produce := func(from, to int) {
		prod, err := kgo.NewClient(kgo.SeedBrokers(c.addr), kgo.DefaultProduceTopic("durable"))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			wg.Add(1)
			r := makeRecord("durable", i)
			prod.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("produce: %v", err)
					return
				}
				mu.Lock()
				acked[[2]int64{int64(r.Partition), r.Offset}] = r.Value
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	produce(0, n)
	c.restart()
	produce(n, n+100)
	if len(acked) != n+100 {
		t.Fatalf("%d acknowledged", len(acked))
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.addr), kgo.ConsumeTopics("durable"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := 0
	for seen < len(acked) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d: %v", seen, len(acked), ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			want, ok := acked[[2]int64{int64(r.Partition), r.Offset}]
			if !ok || !bytes.Equal(want, r.Value) {
				t.Fatalf("partition %d offset %d: not the acknowledged record", r.Partition, r.Offset)
			}
			seen++
		})
	}
}
