package raftlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/keelstream/keel/metadata"
)

func commandLog(t *testing.T, index uint64, records ...metadata.Record) *raft.Log {
	t.Helper()
	data, err := metadata.EncodeBatch(records)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func TestFSMSkipsBadBatchesDeterministically(t *testing.T) {
	f := newFSM(hclog.NewNullLogger())
	resps := f.ApplyBatch([]*raft.Log{
		commandLog(t, 1, createTopic("a", 1)...),
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte{0xff, 1, 2}},
		commandLog(t, 3, &metadata.UnfenceBrokerRecord{ID: 7, Epoch: 1}),
		{Index: 4, Term: 1, Type: raft.LogConfiguration},
		commandLog(t, 5, createTopic("b", 1)...),
	})
	if resps[0] != nil || resps[4] != nil || resps[3] != nil {
		t.Fatalf("good entries answered %v", resps)
	}
	for _, i := range []int{1, 2} {
		if err, _ := resps[i].(error); !errors.Is(err, ErrApplyFailed) {
			t.Fatalf("entry %d answered %v", i, resps[i])
		}
	}
	img := f.image.Load()
	if img.Offset() != 5 || img.NumTopics() != 2 || f.applied.Load() != 5 {
		t.Fatalf("image offset %d, %d topics, applied %d", img.Offset(), img.NumTopics(), f.applied.Load())
	}
}

func TestSlowSubscriberGetsCoalescedUpdatesAndNeverBlocksTheFSM(t *testing.T) {
	f := newFSM(hclog.NewNullLogger())
	updates, cancel := f.subscribe()
	defer cancel()

	a := createTopic("a", 2)
	b := createTopic("b", 1)
	bID := b[0].(*metadata.TopicRecord).TopicID
	done := make(chan struct{})
	go func() {
		// Nobody reads meanwhile: none of these may block.
		f.ApplyBatch([]*raft.Log{commandLog(t, 1, a...)})
		f.ApplyBatch([]*raft.Log{commandLog(t, 2, b...)})
		f.ApplyBatch([]*raft.Log{commandLog(t, 3, &metadata.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 1})})
		f.ApplyBatch([]*raft.Log{commandLog(t, 4, &metadata.RemoveTopicRecord{TopicID: bID})})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("FSM blocked on a subscriber that does not read")
	}

	u := <-updates
	if !u.Reset || u.Image.Offset() != 4 {
		t.Fatalf("coalesced with the initial reset: want reset at offset 4, got reset=%v offset %d", u.Reset, u.Image.Offset())
	}
	select {
	case u := <-updates:
		t.Fatalf("second update %+v", u)
	default:
	}

	// Without the reset in the mailbox, changes are unioned.
	f.ApplyBatch([]*raft.Log{commandLog(t, 5, createTopic("c", 3)...)})
	f.ApplyBatch([]*raft.Log{commandLog(t, 6, &metadata.FenceBrokerRecord{ID: 1, Epoch: 1})})
	u = <-updates
	if u.Reset || u.Image.Offset() != 6 || len(u.Changes.Partitions) != 3 || len(u.Changes.Brokers) != 1 {
		t.Fatalf("coalesced update: reset=%v offset=%d changes=%+v", u.Reset, u.Image.Offset(), u.Changes)
	}

	// A topic created then deleted before the subscriber looks: its
	// partitions are not reported as live changes.
	d := createTopic("d", 2)
	f.ApplyBatch([]*raft.Log{commandLog(t, 7, d...)})
	f.ApplyBatch([]*raft.Log{commandLog(t, 8, &metadata.RemoveTopicRecord{TopicID: d[0].(*metadata.TopicRecord).TopicID})})
	u = <-updates
	if len(u.Changes.Partitions) != 0 || len(u.Changes.DeletedTopics) != 1 {
		t.Fatalf("create+delete coalesced to %+v", u.Changes)
	}

	cancel()
	cancel()
	if _, ok := <-updates; ok {
		t.Fatal("channel open after cancel")
	}
	f.ApplyBatch([]*raft.Log{commandLog(t, 9, &metadata.NoOpRecord{})})
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func TestSnapshotRestoresTheSameImage(t *testing.T) {
	f := newFSM(hclog.NewNullLogger())
	v := "1000"
	f.ApplyBatch([]*raft.Log{
		commandLog(t, 3, &metadata.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 5, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}}),
		commandLog(t, 4, createTopic("orders", 3)...),
		commandLog(t, 5, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "orders", Name: "retention.ms", Value: &v}),
		commandLog(t, 6, &metadata.ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 5, NextProducerID: 2000}),
		{Index: 7, Term: 1, Type: raft.LogConfiguration},
	})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || sink.cancelled {
		t.Fatalf("persist: %v", err)
	}
	snap.Release()

	g := newFSM(hclog.NewNullLogger())
	updates, cancel := g.subscribe()
	defer cancel()
	<-updates
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	want, got := f.image.Load(), g.image.Load()
	if got.Offset() != want.Offset() || !bytes.Equal(imageBytes(t, got), imageBytes(t, want)) {
		t.Fatalf("restored image at %d differs from the one at %d", got.Offset(), want.Offset())
	}
	if g.applied.Load() != 7 {
		t.Fatalf("applied %d after restore", g.applied.Load())
	}
	if u := <-updates; !u.Reset || u.Image != got {
		t.Fatal("restore did not publish a reset")
	}
	if err := g.waitApplied(context.Background(), 7, nil); err != nil {
		t.Fatal(err)
	}

	corrupt := append([]byte(nil), sink.Bytes()...)
	corrupt[0] = 'X'
	if err := g.Restore(io.NopCloser(bytes.NewReader(corrupt))); !errors.Is(err, errCorruptSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}
