package txn

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The records are Kafka's TransactionLog formats: key version 0, value
// version 0, Kafka's state ids, null partitions for Empty, partitions
// grouped by topic otherwise.
func TestRecordsUseKafkasFormat(t *testing.T) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(Key("my-txn")); err != nil || k.Version != 0 || k.TransactionalID != "my-txn" {
		t.Fatalf("key: %+v %v", k, err)
	}
	val := md(Ongoing, 42, 7, TopicPartition{"b", 1}, TopicPartition{"a", 2}, TopicPartition{"a", 0})
	val.timeoutMs, val.startTimestamp, val.lastUpdateTimestamp = 30000, 100, 200
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(encodeValue(val)); err != nil {
		t.Fatal(err)
	}
	want := kmsg.TxnMetadataValue{Version: 0, ProducerID: 42, ProducerEpoch: 7, TimeoutMillis: 30000, State: 1,
		Topics:              []kmsg.TxnMetadataValueTopic{{Topic: "a", Partitions: []int32{0, 2}}, {Topic: "b", Partitions: []int32{1}}},
		LastUpdateTimestamp: 200, StartTimestamp: 100, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("value:\n%+v\nwant\n%+v", v, want)
	}
	if v.State.String() != Ongoing.String() {
		t.Fatalf("state name %s", v.State)
	}
	for s := Empty; s <= PrepareEpochFence; s++ {
		if kmsg.TransactionState(s).String() != s.String() {
			t.Errorf("state %d: %s, kmsg %s", s, s, kmsg.TransactionState(s))
		}
		if p, ok := ParseState(s.String()); !ok || p != s {
			t.Errorf("ParseState(%s) = %v %v", s, p, ok)
		}
	}
	// Empty: null partitions (-1 array length after the state byte).
	empty := encodeValue(metadata{producerID: 1, state: Empty, startTimestamp: -1})
	if off := 2 + 8 + 2 + 4 + 1; string(empty[off:off+4]) != "\xff\xff\xff\xff" {
		t.Fatalf("Empty value partitions % x", empty[off:off+4])
	}
}

// Loading: the last record of an id wins; tombstones and Dead values
// remove it; PrepareEpochFence loads as PrepareAbort; unknown key versions
// are skipped; prepared transactions get marker jobs with the new
// coordinator epoch.
func TestReplayAndFinishLoad(t *testing.T) {
	tp := TopicPartition{"t", 0}
	m := NewManager(DefaultConfig(), 9)
	for _, r := range []Record{
		{Key("gone"), encodeValue(md(Empty, 1, 0))},
		{Key("gone"), nil},
		{Key("dead"), encodeValue(md(Dead, 2, 0))},
		{Key("commit"), encodeValue(md(Ongoing, 3, 1, tp))},
		{Key("commit"), encodeValue(md(PrepareCommit, 3, 1, tp))},
		{Key("fence"), encodeValue(md(PrepareEpochFence, 4, 2, tp))},
		{Key("complete"), encodeValue(md(CompleteAbort, 5, 0))},
		{[]byte{0, 1, 0, 0}, []byte("a future key version")},
		{[]byte{0, 2}, nil},
	} {
		if err := m.Replay(r.Key, r.Value); err != nil {
			t.Fatalf("replay %q: %v", r.Key, err)
		}
	}
	for _, bad := range []Record{
		{Key("x"), []byte{0, 0, 1}}, // truncated value
		{Key("x"), append([]byte{0, 9}, encodeValue(md(Empty, 1, 0))[2:]...)},                  // value version 9
		{Key("x"), func() []byte { b := encodeValue(md(Empty, 1, 0)); b[16] = 8; return b }()}, // state 8
		{[]byte{0, 0, 0}, nil}, // truncated key
	} {
		if err := m.Replay(bad.Key, bad.Value); err == nil {
			t.Errorf("replay of %x/%x: no error", bad.Key, bad.Value)
		}
	}
	eff := m.FinishLoad(500)
	want := []MarkerJob{
		{ID: 1, TransactionalID: "commit", ProducerID: 3, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 9, Partitions: []TopicPartition{tp}},
		{ID: 2, TransactionalID: "fence", ProducerID: 4, ProducerEpoch: 2, Commit: false, CoordinatorEpoch: 9, Partitions: []TopicPartition{tp}},
	}
	if !reflect.DeepEqual(eff.Markers, want) || len(eff.Records) != 0 {
		t.Fatalf("FinishLoad: %+v", eff)
	}
	list, _ := m.List(500, ListFilter{DurationFilterMs: -1})
	wantList := []Listed{{"commit", 3, "PrepareCommit"}, {"complete", 5, "CompleteAbort"}, {"fence", 4, "PrepareAbort"}}
	if !reflect.DeepEqual(list, wantList) {
		t.Fatalf("list %+v", list)
	}
	if err := m.Replay(Key("late"), encodeValue(md(Empty, 1, 0))); !errors.Is(err, ErrLoaded) {
		t.Fatalf("replay after load: %v", err)
	}
	if m.NextDeadline() != 500+DefaultConfig().AbortCheckIntervalMs {
		t.Fatalf("deadline %d", m.NextDeadline())
	}
}

// FuzzReplay: whatever the bytes of a __transaction_state record (clients
// can produce to it), loading never panics, and what loads can be served.
func FuzzReplay(f *testing.F) {
	tp := TopicPartition{"t", 0}
	f.Add(Key("t"), encodeValue(md(Empty, 1, 0)))
	f.Add(Key("t"), encodeValue(md(Ongoing, 1, 0, tp)))
	f.Add(Key("t"), encodeValue(md(PrepareCommit, 1, 0, tp)))
	f.Add(Key("t"), []byte(nil))
	f.Add([]byte{0, 1}, []byte{0, 1, 0})
	v2 := md(PrepareCommit, 1, math.MaxInt16, tp)
	v2.tv2, v2.nextProducerID, v2.lastProducerID = true, 2, 1
	f.Add(Key("t"), encodeValue(v2)) // transaction version 2, rotating the producer id
	f.Fuzz(func(t *testing.T, key, value []byte) {
		m := NewManager(DefaultConfig(), 0)
		_ = m.Replay(key, value)
		id, _ := DecodeKey(key)
		eff := m.FinishLoad(0)
		for _, j := range eff.Markers {
			m.MarkersWritten(0, j)
		}
		alloc := func() (int64, error) { return 1, nil }
		m.InitProducerID(0, InitProducerIDRequest{Waiter: 1, TransactionalID: id, TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, alloc)
		for _, d := range m.Describe([]string{id}) {
			m.AddPartitions(0, AddPartitionsRequest{Waiter: 1, TransactionalID: id, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, Partitions: []TopicPartition{tp}})
			m.EndTxn(0, EndTxnRequest{Waiter: 1, TransactionalID: id, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch})
			m.EndTxn(0, EndTxnRequest{Waiter: 1, TransactionalID: id, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, TV2: true, Alloc: alloc})
		}
		m.Tick(1 << 40)
		m.List(0, ListFilter{DurationFilterMs: -1})
		m.Unload()
	})
}
