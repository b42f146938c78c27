package client

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failProduce answers one Produce request with code for every partition.
func failProduce(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func TestProducerKeepsOrderAcrossRetriesWithFiveInFlight(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	var seen atomic.Int32
	fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		n := seen.Add(1)
		switch n {
		case 4: // a retriable error in the middle of a pipeline of requests
			return failProduce(kreq, 6), nil, true
		case 9: // and a lost connection
			return nil, errors.New("injected: close the connection"), true
		}
		return nil, nil, false
	})
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), MaxInFlight(5), BatchSize(1024), Linger(0),
		RetryBackoff(5*time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	recs := make([]*Record, n)
	var mu sync.Mutex
	var acked []int64
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range recs {
		recs[i] = &Record{Topic: "t", Value: []byte(strconv.Itoa(i))}
		p.Produce(ctx, recs[i], func(r *Record, err error) {
			if err != nil {
				t.Errorf("record %s: %v", r.Value, err)
			}
			mu.Lock()
			acked = append(acked, r.Offset)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if seen.Load() < 10 {
		t.Fatalf("only %d produce requests: the faults were not exercised", seen.Load())
	}
	for i, off := range acked {
		if off != int64(i) {
			t.Fatalf("callback %d reported offset %d: callbacks out of order", i, off)
		}
	}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, r.Offset)
		}
	}
	got := consumeAll(t, fake.ListenAddrs(), "t", n)[0]
	if len(got) != n {
		t.Fatalf("%d records stored", len(got))
	}
	for i, r := range got {
		if string(r.Value) != strconv.Itoa(i) {
			t.Fatalf("offset %d holds %s", i, r.Value)
		}
	}
}

func TestProducerBumpsTheEpochAfterAnOutOfOrderSequence(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	var inits atomic.Int32
	fake.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		inits.Add(1)
		return nil, nil, false
	})
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, StringRecord("t", "a")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		return failProduce(kreq, 45), nil, true // OUT_OF_ORDER_SEQUENCE_NUMBER, unprovoked
	})
	res := p.ProduceSync(ctx, StringRecord("t", "b"))
	if err := res.FirstErr(); err != nil || res[0].Record.Offset != 1 {
		t.Fatalf("after the epoch bump: %v, offset %d", err, res[0].Record.Offset)
	}
	if inits.Load() != 2 {
		t.Fatalf("%d InitProducerId requests, want 2 (start, bump)", inits.Load())
	}
}

func TestProducerUnknownTopicFailsAfterMaxBlock(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), MaxBlock(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	start := time.Now()
	err = p.ProduceSync(ctx, StringRecord("missing", "x")).FirstErr()
	if !errors.Is(err, ErrMaxBlock) || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
}

func TestProducerCloseFailsWhatCannotBeDelivered(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	// The broker swallows every Produce request from now on.
	fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		return nil, nil, true
	})
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		p.Produce(ctx, StringRecord("t", "x"), func(_ *Record, err error) { errs <- err })
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := p.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v", err)
	}
	for i := 0; i < 10; i++ {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	p.Produce(ctx, StringRecord("t", "late"), func(_ *Record, err error) { errs <- err })
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Fatalf("produce after close: %v", err)
	}
}

func TestProducerAndClientLeaveNoGoroutinesBehind(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "t"))
	ctx := testCtx(t)
	before := runtime.NumGoroutine()
	for round := 0; round < 3; round++ {
		p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		var recs []*Record
		for i := 0; i < 100; i++ {
			recs = append(recs, KeyStringRecord("t", strconv.Itoa(i), "v"))
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		a, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.ListGroups(ctx); err != nil {
			t.Fatal(err)
		}
		a.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

func TestStickyPartitionerFillsABatchBeforeMoving(t *testing.T) {
	tp := DefaultPartitioner(1000).ForTopic("t")
	r := &Record{Value: make([]byte, 84)} // 100 bytes with the partitioner's overhead
	counts := map[int32]int{}
	var order []int32
	for i := 0; i < 100; i++ {
		p := tp.Partition(r, 4)
		if p < 0 || p >= 4 {
			t.Fatalf("partition %d", p)
		}
		if len(order) == 0 || order[len(order)-1] != p {
			order = append(order, p)
		}
		counts[p]++
	}
	// 100 records of 100 bytes with 1000-byte batches: about ten runs of
	// about ten records, never two runs in a row on one partition.
	if len(order) < 8 || len(order) > 12 {
		t.Fatalf("%d runs: %v", len(order), order)
	}
	keyed := &Record{Key: []byte("foobar")}
	if got := tp.Partition(keyed, 10); got != (-790332482&0x7fffffff)%10 {
		t.Fatalf("keyed record on partition %d", got)
	}
}

type evenPartitioner struct{}

func (evenPartitioner) ForTopic(string) TopicPartitioner { return evenPartitioner{} }
func (evenPartitioner) Partition(r *Record, n int32) int32 {
	return int32(len(r.Value)%2) % n
}

func TestProducerUsesACustomPartitioner(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), WithPartitioner(evenPartitioner{}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	res := p.ProduceSync(ctx, StringRecord("t", "ab"), StringRecord("t", "abc"), StringRecord("t", "abcd"))
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if res[0].Record.Partition != 0 || res[1].Record.Partition != 1 || res[2].Record.Partition != 0 {
		t.Fatalf("partitions %d %d %d", res[0].Record.Partition, res[1].Record.Partition, res[2].Record.Partition)
	}
}

func TestNewProducerRejectsIdempotenceWithoutAcksAll(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	ctx := testCtx(t)
	if _, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), RequiredAcks(AcksLeader), ProducerIdempotence(true)); err == nil {
		t.Fatal("idempotence with acks=1 accepted")
	}
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), RequiredAcks(AcksLeader))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if p.cfg.idempotent {
		t.Fatal("acks=1 kept the default idempotence")
	}
}

func TestProducerGivesUpAfterDeliveryTimeout(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	ctx := testCtx(t)
	p, err := NewProducer(ctx, SeedBrokers(fake.ListenAddrs()...), RequestTimeout(100*time.Millisecond),
		ProduceRequestTimeout(100*time.Millisecond), DeliveryTimeout(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		return nil, nil, true // never answered: each try times out
	})
	start := time.Now()
	err = p.ProduceSync(ctx, StringRecord("t", "x")).FirstErr()
	if !errors.Is(err, ErrDeliveryTimeout) {
		t.Fatalf("got %v", err)
	}
	if el := time.Since(start); el < 600*time.Millisecond || el > 5*time.Second {
		t.Fatalf("gave up after %v", el)
	}
}
