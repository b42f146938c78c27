package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/storage"
)

// A topic with cleanup.policy=compact, end to end: overwrites produced by a
// Kafka client are cleaned by the log manager's cleaner (woken every
// log.cleaner.backoff.ms), and a consumer reading from the beginning sees
// one record per key, the latest, at its original offset.
func TestCompactedTopicKeepsTheLatestRecordPerKey(t *testing.T) {
	c := newTestCluster(t, withConfig("log.cleaner.backoff.ms=20"))
	const topic, keys, rounds, fillers = "compacted", 10, 20, 40
	c.createTopic(topic, 1, map[string]*string{
		"cleanup.policy":            kmsg.StringPtr("compact"),
		"segment.bytes":             kmsg.StringPtr("1024"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
	})
	prod := c.client(kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	latest := map[string]int64{} // key → offset of its latest record
	produce := func(key, value string) {
		t.Helper()
		r, err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}).First()
		if err != nil {
			t.Fatalf("produce %s: %v", key, err)
		}
		latest[key] = r.Offset
	}
	for round := 0; round < rounds; round++ {
		for k := 0; k < keys; k++ {
			produce(fmt.Sprintf("key-%d", k), fmt.Sprintf("round-%d", round))
		}
	}
	lastOverwrite := latest[fmt.Sprintf("key-%d", keys-1)]
	// Distinct keys after the overwrites roll the segments holding them
	// out of the active one, so all of them become cleanable.
	for i := 0; i < fillers; i++ {
		produce(fmt.Sprintf("filler-%d", i), "x")
	}
	tp := storage.TopicPartition{Topic: topic, Partition: 0}
	waitFor(t, "the log cleaner", 20*time.Second, func() bool { return c.logs.CleanerCheckpoint(tp) > lastOverwrite })

	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for len(seen) < len(latest) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d keys: %v", len(seen), len(latest), ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			seen[k]++
			if seen[k] > 1 {
				t.Fatalf("key %s read twice (offset %d): the topic was not compacted", k, r.Offset)
			}
			if r.Offset != latest[k] {
				t.Fatalf("key %s at offset %d, its latest record is at %d", k, r.Offset, latest[k])
			}
			if want := fmt.Sprintf("round-%d", rounds-1); k[:4] == "key-" && string(r.Value) != want {
				t.Fatalf("key %s = %q, want %q", k, r.Value, want)
			}
		})
	}
}

// max.compaction.lag.ms end to end: with segment.ms at its week-long
// default, the overwritten key would stay in the active segment (never
// cleaned) for a week; with max.compaction.lag.ms=300 the next produce
// after 300 ms rolls it out and the cleaner compacts it.
func TestMaxCompactionLagCompactsWithoutWaitingForSegmentMs(t *testing.T) {
	c := newTestCluster(t, withConfig("log.cleaner.backoff.ms=20"))
	const topic = "lagged"
	c.createTopic(topic, 1, map[string]*string{
		"cleanup.policy":        kmsg.StringPtr("compact"),
		"max.compaction.lag.ms": kmsg.StringPtr("300"),
	})
	prod := c.client(kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last int64
	for _, r := range []*kgo.Record{{Key: []byte("k"), Value: []byte("old")}, {Key: []byte("k"), Value: []byte("new")}} {
		res, err := prod.ProduceSync(ctx, r).First()
		if err != nil {
			t.Fatal(err)
		}
		last = res.Offset
	}
	time.Sleep(400 * time.Millisecond)
	if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("other"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp := storage.TopicPartition{Topic: topic, Partition: 0}
	waitFor(t, "the log cleaner", 20*time.Second, func() bool { return c.logs.CleanerCheckpoint(tp) > last })
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 2 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v: %v", got, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Key)+"="+string(r.Value)) })
	}
	if want := []string{"k=new", "other=x"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumed %v, want %v", got, want)
	}
}
