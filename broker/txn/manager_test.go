package txn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// committed drives eff as a caller whose appends all commit and whose
// markers are all written at once: it returns every reply, and the
// records written, in order.
func committed(t *testing.T, m *Manager, now int64, eff Effects) ([]Reply, []Record) {
	t.Helper()
	var replies []Reply
	var records []Record
	queue := []Effects{eff}
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		replies = append(replies, e.Replies...)
		records = append(records, e.Records...)
		if e.Token != 0 {
			queue = append(queue, m.Written(now, e.Token, 0))
		}
		for _, j := range e.Markers {
			queue = append(queue, m.MarkersWritten(now, j))
		}
	}
	return replies, records
}

// loaded returns a Manager that loaded one record per metadata.
func loaded(t *testing.T, now int64, ids map[string]metadata) *Manager {
	t.Helper()
	m := NewManager(DefaultConfig(), 3)
	for id, md := range ids {
		if err := m.Replay(Key(id), encodeValue(md)); err != nil {
			t.Fatal(err)
		}
	}
	m.FinishLoad(now)
	return m
}

func md(state State, pid int64, epoch int16, tps ...TopicPartition) metadata {
	out := metadata{producerID: pid, lastProducerID: noProducerID, producerEpoch: epoch, lastProducerEpoch: noProducerEpoch,
		timeoutMs: 60000, state: state, partitions: map[TopicPartition]struct{}{}, startTimestamp: -1, lastUpdateTimestamp: 0,
		nextProducerID: noProducerID}
	for _, tp := range tps {
		out.partitions[tp] = struct{}{}
	}
	if state != Empty {
		out.startTimestamp = 0
	}
	return out
}

func TestInitProducerID(t *testing.T) {
	tp := TopicPartition{Topic: "a", Partition: 0}
	for _, tc := range []struct {
		name      string
		existing  *metadata
		pid       int64
		epoch     int16
		allocErr  error
		wantCode  int16
		wantPID   int64
		wantEpoch int16
	}{
		{name: "new id gets a new producer id and epoch 0", pid: -1, epoch: -1, wantPID: 5000, wantEpoch: 0},
		{name: "KIP-360 producer unknown to this coordinator gets a new producer id", pid: 7, epoch: 3, wantPID: 5000, wantEpoch: 0},
		{name: "Empty id bumps the epoch", existing: new(md(Empty, 1, 4)), pid: -1, epoch: -1, wantPID: 1, wantEpoch: 5},
		{name: "CompleteCommit bumps the epoch", existing: new(md(CompleteCommit, 1, 4)), pid: -1, epoch: -1, wantPID: 1, wantEpoch: 5},
		{name: "CompleteAbort bumps the epoch", existing: new(md(CompleteAbort, 1, 4)), pid: -1, epoch: -1, wantPID: 1, wantEpoch: 5},
		{name: "KIP-360 current epoch bumps", existing: new(md(CompleteAbort, 1, 4)), pid: 1, epoch: 4, wantPID: 1, wantEpoch: 5},
		{name: "KIP-360 older epoch is fenced", existing: new(md(CompleteAbort, 1, 4)), pid: 1, epoch: 3, wantCode: kerr.ProducerFenced.Code},
		{name: "KIP-360 other producer id is fenced", existing: new(md(Empty, 1, 4)), pid: 2, epoch: 4, wantCode: kerr.ProducerFenced.Code},
		{name: "exhausted epoch rotates the producer id", existing: new(md(Empty, 1, math.MaxInt16-1)), pid: -1, epoch: -1, wantPID: 5000, wantEpoch: 0},
		{name: "epoch fenced to Short.MaxValue rotates", existing: new(md(CompleteAbort, 1, math.MaxInt16)), pid: -1, epoch: -1, wantPID: 5000, wantEpoch: 0},
		{name: "last epoch below exhaustion still bumps", existing: new(md(Empty, 1, math.MaxInt16-2)), pid: -1, epoch: -1, wantPID: 1, wantEpoch: math.MaxInt16 - 1},
		{name: "rotation without a block is retriable", existing: new(md(Empty, 1, math.MaxInt16-1)), pid: -1, epoch: -1, allocErr: fmt.Errorf("no block"), wantCode: kerr.CoordinatorLoadInProgress.Code},
		{name: "new id keeps a Kafka error of the allocator", pid: -1, epoch: -1, allocErr: kerr.NotEnoughReplicas, wantCode: kerr.NotEnoughReplicas.Code},
		{name: "PrepareCommit must complete first", existing: new(md(PrepareCommit, 1, 4, tp)), pid: -1, epoch: -1, wantCode: kerr.ConcurrentTransactions.Code},
		{name: "PrepareAbort must complete first", existing: new(md(PrepareAbort, 1, 4, tp)), pid: -1, epoch: -1, wantCode: kerr.ConcurrentTransactions.Code},
		{name: "Ongoing is fenced and the client retries", existing: new(md(Ongoing, 1, 4, tp)), pid: -1, epoch: -1, wantCode: kerr.ConcurrentTransactions.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := map[string]metadata{}
			if tc.existing != nil {
				ids["t"] = *tc.existing
			}
			m := loaded(t, 100, ids)
			alloc := func() (int64, error) { return 5000, tc.allocErr }
			replies, _ := committed(t, m, 100, m.InitProducerID(100, InitProducerIDRequest{Waiter: "w", TransactionalID: "t",
				TimeoutMs: 1000, ProducerID: tc.pid, ProducerEpoch: tc.epoch}, alloc))
			want := Reply{Waiter: "w", ErrorCode: tc.wantCode, ProducerID: -1, ProducerEpoch: -1}
			if tc.wantCode == 0 {
				want.ProducerID, want.ProducerEpoch = tc.wantPID, tc.wantEpoch
			}
			if len(replies) != 1 || replies[0] != want {
				t.Fatalf("replies %+v, want %+v", replies, want)
			}
		})
	}
}

// KIP-360: after a rotation the producer may retry with its old id and
// exhausted epoch and must get the rotated id back, not be fenced.
func TestInitProducerIDRetryAfterRotation(t *testing.T) {
	m := loaded(t, 100, map[string]metadata{"t": md(Empty, 1, math.MaxInt16-1)})
	next := int64(5000)
	alloc := func() (int64, error) { next++; return next, nil }
	req := InitProducerIDRequest{Waiter: "w", TransactionalID: "t", TimeoutMs: 1000, ProducerID: 1, ProducerEpoch: math.MaxInt16 - 1}
	first, _ := committed(t, m, 100, m.InitProducerID(100, req, alloc))
	again, _ := committed(t, m, 100, m.InitProducerID(100, req, alloc))
	want := Reply{Waiter: "w", ProducerID: 5001, ProducerEpoch: 0}
	if len(first) != 1 || first[0] != want || len(again) != 1 || again[0] != want {
		t.Fatalf("first %+v, retry %+v, want %+v", first, again, want)
	}
}

// Fencing a producer at the last epoch a client can hold bumps to
// Short.MaxValue for the abort markers only; the retry rotates the id.
func TestFenceAtLastEpoch(t *testing.T) {
	tp := TopicPartition{Topic: "a", Partition: 0}
	m := loaded(t, 100, map[string]metadata{"t": md(Ongoing, 1, math.MaxInt16-1, tp)})
	alloc := func() (int64, error) { return 5000, nil }
	eff := m.InitProducerID(100, InitProducerIDRequest{Waiter: "w", TransactionalID: "t", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, alloc)
	w := m.Written(100, eff.Token, 0)
	if len(w.Markers) != 1 || w.Markers[0].ProducerEpoch != math.MaxInt16 || w.Markers[0].Commit {
		t.Fatalf("markers %+v", w.Markers)
	}
	committed(t, m, 100, w)
	replies, _ := committed(t, m, 100, m.InitProducerID(100, InitProducerIDRequest{Waiter: "w", TransactionalID: "t", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, alloc))
	if len(replies) != 1 || replies[0].ProducerID != 5000 || replies[0].ProducerEpoch != 0 {
		t.Fatalf("replies %+v", replies)
	}
}

func TestAddPartitionsAndEndTxnErrors(t *testing.T) {
	tp := TopicPartition{Topic: "a", Partition: 0}
	other := TopicPartition{Topic: "b", Partition: 1}
	for _, tc := range []struct {
		name     string
		existing metadata
		pid      int64
		epoch    int16
		add      []TopicPartition
		commit   bool
		wantAdd  int16
		wantEnd  int16
	}{
		{name: "wrong producer id", existing: md(Ongoing, 1, 2, tp), pid: 9, epoch: 2, add: []TopicPartition{tp},
			wantAdd: kerr.InvalidProducerIDMapping.Code, wantEnd: kerr.InvalidProducerIDMapping.Code},
		{name: "older epoch is fenced", existing: md(Ongoing, 1, 2, tp), pid: 1, epoch: 1, add: []TopicPartition{tp},
			wantAdd: kerr.ProducerFenced.Code, wantEnd: kerr.ProducerFenced.Code},
		{name: "newer epoch is fenced too", existing: md(Ongoing, 1, 2, tp), pid: 1, epoch: 3, add: []TopicPartition{tp},
			wantAdd: kerr.ProducerFenced.Code, wantEnd: kerr.ProducerFenced.Code},
		// A prepared transaction always has its markers in flight
		// (Kafka's pending Complete* state), which answers first.
		{name: "PrepareCommit: even abort must wait", existing: md(PrepareCommit, 1, 2, tp), pid: 1, epoch: 2,
			add: []TopicPartition{tp}, commit: false, wantAdd: kerr.ConcurrentTransactions.Code, wantEnd: kerr.ConcurrentTransactions.Code},
		{name: "PrepareAbort: retry abort later", existing: md(PrepareAbort, 1, 2, tp), pid: 1, epoch: 2,
			add: []TopicPartition{other}, commit: false, wantAdd: kerr.ConcurrentTransactions.Code, wantEnd: kerr.ConcurrentTransactions.Code},
		{name: "CompleteAbort: abort again succeeds", existing: md(CompleteAbort, 1, 2), pid: 1, epoch: 2,
			commit: false, wantEnd: 0},
		{name: "CompleteAbort: commit is invalid", existing: md(CompleteAbort, 1, 2), pid: 1, epoch: 2,
			commit: true, wantEnd: kerr.InvalidTxnState.Code},
		{name: "Empty: nothing to end", existing: md(Empty, 1, 2), pid: 1, epoch: 2, commit: false, wantEnd: kerr.InvalidTxnState.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.add != nil {
				m := loaded(t, 100, map[string]metadata{"t": tc.existing})
				eff := m.AddPartitions(100, AddPartitionsRequest{Waiter: "a", TransactionalID: "t", ProducerID: tc.pid, ProducerEpoch: tc.epoch, Partitions: tc.add})
				if len(eff.Records) != 0 || len(eff.Replies) != 1 || eff.Replies[0].ErrorCode != tc.wantAdd {
					t.Fatalf("add: %+v, want %s", eff, code(tc.wantAdd))
				}
			}
			m := loaded(t, 100, map[string]metadata{"t": tc.existing})
			eff := m.EndTxn(100, EndTxnRequest{Waiter: "e", TransactionalID: "t", ProducerID: tc.pid, ProducerEpoch: tc.epoch, Commit: tc.commit})
			if len(eff.Records) != 0 || len(eff.Replies) != 1 || eff.Replies[0].ErrorCode != tc.wantEnd {
				t.Fatalf("end: %+v, want %s", eff, code(tc.wantEnd))
			}
		})
	}
}

func TestAppendErrorCode(t *testing.T) {
	for in, want := range map[*kerr.Error]*kerr.Error{
		kerr.UnknownTopicOrPartition:      kerr.CoordinatorNotAvailable,
		kerr.NotEnoughReplicas:            kerr.CoordinatorNotAvailable,
		kerr.NotEnoughReplicasAfterAppend: kerr.CoordinatorNotAvailable,
		kerr.RequestTimedOut:              kerr.CoordinatorNotAvailable,
		kerr.NotLeaderForPartition:        kerr.NotCoordinator,
		kerr.KafkaStorageError:            kerr.NotCoordinator,
		kerr.MessageTooLarge:              kerr.UnknownServerError,
		kerr.RecordListTooLarge:           kerr.UnknownServerError,
		kerr.CorruptMessage:               kerr.CorruptMessage,
	} {
		if got := AppendErrorCode(in.Code); got != want.Code {
			t.Errorf("%s: %s, want %s", in.Message, code(got), want.Message)
		}
	}
}

// Before FinishLoad every request is answered COORDINATOR_LOAD_IN_PROGRESS;
// nothing is due.
func TestLoadingRefusesRequests(t *testing.T) {
	m := NewManager(DefaultConfig(), 1)
	alloc := func() (int64, error) { t.Fatal("alloc while loading"); return 0, nil }
	for name, eff := range map[string]Effects{
		"init": m.InitProducerID(0, InitProducerIDRequest{Waiter: 1, TransactionalID: "t", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, alloc),
		"add":  m.AddPartitions(0, AddPartitionsRequest{Waiter: 1, TransactionalID: "t"}),
		"end":  m.EndTxn(0, EndTxnRequest{Waiter: 1, TransactionalID: "t"}),
	} {
		if len(eff.Records) != 0 || len(eff.Replies) != 1 || eff.Replies[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
			t.Errorf("%s: %+v", name, eff)
		}
	}
	if d := m.Describe([]string{"t"}); d[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("describe: %+v", d)
	}
	if eff := m.Tick(1 << 40); len(eff.Records) != 0 || m.NextDeadline() != -1 {
		t.Errorf("tick while loading: %+v, deadline %d", eff, m.NextDeadline())
	}
}

// Unload answers the requests waiting for an append NOT_COORDINATOR and
// ignores the reports that come after.
func TestUnload(t *testing.T) {
	tp := TopicPartition{Topic: "a", Partition: 0}
	m := loaded(t, 100, map[string]metadata{"ongoing": md(Ongoing, 1, 0, tp), "empty": md(Empty, 2, 0), "prepared": md(PrepareCommit, 3, 0, tp)})
	jobs := m.FinishLoad(100) // already loaded: nothing
	if len(jobs.Markers) != 0 {
		t.Fatalf("second FinishLoad: %+v", jobs)
	}
	end := m.EndTxn(100, EndTxnRequest{Waiter: "end", TransactionalID: "ongoing", ProducerID: 1, ProducerEpoch: 0, Commit: true})
	add := m.AddPartitions(100, AddPartitionsRequest{Waiter: "add", TransactionalID: "empty", ProducerID: 2, ProducerEpoch: 0, Partitions: []TopicPartition{tp}})
	eff := m.Unload()
	want := []Reply{{Waiter: "end", ErrorCode: kerr.NotCoordinator.Code, ProducerID: -1, ProducerEpoch: -1},
		{Waiter: "add", ErrorCode: kerr.NotCoordinator.Code, ProducerID: -1, ProducerEpoch: -1}}
	if !reflect.DeepEqual(eff.Replies, want) || len(eff.Records) != 0 {
		t.Fatalf("unload: %+v", eff)
	}
	job := MarkerJob{ID: 1, TransactionalID: "prepared", ProducerID: 3}
	for _, e := range []Effects{m.Written(100, end.Token, 0), m.Written(100, add.Token, 0), m.MarkersWritten(100, job), m.Tick(1 << 40)} {
		if len(e.Records)+len(e.Replies)+len(e.Markers) != 0 {
			t.Fatalf("after unload: %+v", e)
		}
	}
	if err := m.Replay(Key("x"), encodeValue(md(Empty, 1, 0))); err == nil {
		t.Fatal("replay after unload")
	}
}

// Replaying every record a Manager wrote into a new Manager rebuilds the
// same transactions: random operations of several producers (some stale,
// some invalid), with ticks that abort and expire.
func TestReplayRebuildsState(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			cfg := DefaultConfig()
			cfg.IDExpirationMs, cfg.ExpireCheckIntervalMs, cfg.AbortCheckIntervalMs = 50000, 7000, 3000
			m := NewManager(cfg, 4)
			now := int64(1000)
			m.FinishLoad(now)
			var log []Record
			var jobs []MarkerJob
			nextPID := int64(100)
			alloc := func() (int64, error) { nextPID++; return nextPID, nil }
			ids := []string{"a", "b", "c", "d"}
			// run applies eff, committing every append, and keeps the
			// marker jobs for later (so transactions stay prepared for a
			// while).
			var run func(Effects)
			run = func(eff Effects) {
				log = append(log, eff.Records...)
				jobs = append(jobs, eff.Markers...)
				if eff.Token != 0 {
					run(m.Written(now, eff.Token, 0))
				}
			}
			// check replays the log into a new Manager and compares.
			check := func() {
				t.Helper()
				r := NewManager(cfg, 5)
				for _, rec := range log {
					if err := r.Replay(rec.Key, rec.Value); err != nil {
						t.Fatal(err)
					}
				}
				loadEff := r.FinishLoad(now)
				if got, want := r.Describe(ids), m.Describe(ids); !reflect.DeepEqual(got, want) {
					t.Fatalf("replayed:\n%+v\nwant:\n%+v", got, want)
				}
				gotList, _ := r.List(now, ListFilter{DurationFilterMs: -1})
				wantList, _ := m.List(now, ListFilter{DurationFilterMs: -1})
				if !reflect.DeepEqual(gotList, wantList) {
					t.Fatalf("list %+v, want %+v", gotList, wantList)
				}
				// The jobs still open are exactly the ones loading restarts,
				// with the new coordinator epoch.
				if len(loadEff.Markers) != len(jobs) {
					t.Fatalf("load restarts %d marker jobs, %d were open", len(loadEff.Markers), len(jobs))
				}
				for _, j := range loadEff.Markers {
					if j.CoordinatorEpoch != 5 {
						t.Fatalf("job %+v", j)
					}
				}
			}
			for step := range 400 {
				if step%40 == 0 {
					check()
				}
				now += rng.Int64N(2000)
				id := ids[rng.IntN(len(ids))]
				pid, epoch := int64(-1), int16(-1)
				if d := m.Describe([]string{id})[0]; d.ErrorCode == 0 {
					pid, epoch = d.ProducerID, d.ProducerEpoch
					if rng.IntN(10) == 0 {
						epoch-- // a zombie
					}
				}
				tps := []TopicPartition{{Topic: "t", Partition: rng.Int32N(4)}, {Topic: "u", Partition: rng.Int32N(2)}}
				switch op := rng.IntN(10); {
				case op < 2:
					run(m.InitProducerID(now, InitProducerIDRequest{Waiter: op, TransactionalID: id, TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1}, alloc))
				case op < 5:
					run(m.AddPartitions(now, AddPartitionsRequest{Waiter: op, TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: tps[:1+rng.IntN(2)]}))
				case op < 7:
					run(m.EndTxn(now, EndTxnRequest{Waiter: op, TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: rng.IntN(2) == 0}))
				case op < 9 && len(jobs) > 0:
					i := rng.IntN(len(jobs))
					j := jobs[i]
					jobs = append(jobs[:i], jobs[i+1:]...)
					run(m.MarkersWritten(now, j))
				default:
					run(m.Tick(now))
				}
			}
			check()
		})
	}
}

// TestTV2EpochOverflow: a transaction version 2 EndTxn at the last epoch a
// client may hold allocates a new producer id. The markers carry the old id
// at Short.MaxValue, the client goes on with the new id at epoch 0, and a
// retry with the old id and epoch gets the new ones, also from a new
// coordinator (the ids are in the version 1 records).
func TestTV2EpochOverflow(t *testing.T) {
	tp := TopicPartition{Topic: "a", Partition: 0}
	last := int16(math.MaxInt16 - 1)
	start := md(CompleteCommit, 7, last)
	start.tv2 = true
	m := loaded(t, 1000, map[string]metadata{"t": start})
	replies, _ := committed(t, m, 1000, m.AddPartitions(1000, AddPartitionsRequest{Waiter: "a", TransactionalID: "t",
		ProducerID: 7, ProducerEpoch: last, Partitions: []TopicPartition{tp}, TV2: true}))
	if len(replies) != 1 || replies[0].ErrorCode != 0 {
		t.Fatalf("add: %+v", replies)
	}
	eff := m.EndTxn(1000, EndTxnRequest{Waiter: "e", TransactionalID: "t", ProducerID: 7, ProducerEpoch: last, Commit: true,
		TV2: true, Alloc: func() (int64, error) { return 9, nil }})
	var log []Record
	log = append(log, eff.Records...)
	eff = m.Written(1000, eff.Token, 0)
	if len(eff.Replies) != 1 || eff.Replies[0].ErrorCode != 0 || eff.Replies[0].ProducerID != 9 || eff.Replies[0].ProducerEpoch != 0 {
		t.Fatalf("EndTxn answer: %+v, want the new producer id 9 at epoch 0", eff.Replies)
	}
	if len(eff.Markers) != 1 || eff.Markers[0].ProducerID != 7 || eff.Markers[0].ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers: %+v, want producer 7 at epoch %d", eff.Markers, math.MaxInt16)
	}
	// The producer goes on with the new id before the transaction it
	// ended is complete: retried, not refused.
	early := m.AddPartitions(1000, AddPartitionsRequest{Waiter: "early", TransactionalID: "t", ProducerID: 9, ProducerEpoch: 0,
		Partitions: []TopicPartition{tp}, TV2: true})
	earlyEnd := m.EndTxn(1000, EndTxnRequest{Waiter: "early-end", TransactionalID: "t", ProducerID: 9, ProducerEpoch: 0, TV2: true})
	for _, e := range []Effects{early, earlyEnd} {
		if len(e.Replies) != 1 || e.Replies[0].ErrorCode != kerr.ConcurrentTransactions.Code {
			t.Fatalf("the new id's request before the completion: %+v, want CONCURRENT_TRANSACTIONS", e.Replies)
		}
	}
	eff = m.MarkersWritten(1000, eff.Markers[0])
	log = append(log, eff.Records...)
	m.Written(1000, eff.Token, 0)
	got := m.txns["t"].metadata
	if got.producerID != 9 || got.producerEpoch != 0 || got.lastProducerID != 7 || got.nextProducerID != noProducerID || got.state != CompleteCommit {
		t.Fatalf("after the commit: %+v", got)
	}

	retry := func(m *Manager) Reply {
		t.Helper()
		eff := m.EndTxn(1000, EndTxnRequest{Waiter: "r", TransactionalID: "t", ProducerID: 7, ProducerEpoch: last, Commit: true,
			TV2: true, Alloc: func() (int64, error) { t.Fatal("a retry allocated a producer id"); return 0, nil }})
		if len(eff.Replies) != 1 || len(eff.Records) != 0 {
			t.Fatalf("retry: %+v", eff)
		}
		return eff.Replies[0]
	}
	if r := retry(m); r.ErrorCode != 0 || r.ProducerID != 9 || r.ProducerEpoch != 0 {
		t.Fatalf("retry: %+v", r)
	}
	m2 := NewManager(DefaultConfig(), 4)
	for _, r := range log {
		if err := m2.Replay(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	m2.FinishLoad(1000)
	if r := retry(m2); r.ErrorCode != 0 || r.ProducerID != 9 || r.ProducerEpoch != 0 {
		t.Fatalf("retry at a new coordinator: %+v", r)
	}
	// The new id's next transaction works as any other.
	replies, _ = committed(t, m2, 1000, m2.AddPartitions(1000, AddPartitionsRequest{Waiter: "a2", TransactionalID: "t",
		ProducerID: 9, ProducerEpoch: 0, Partitions: []TopicPartition{tp}, TV2: true}))
	if len(replies) != 1 || replies[0].ErrorCode != 0 {
		t.Fatalf("add with the new id: %+v", replies)
	}
}

// TestTV2RecordsRoundTrip: a transaction version 2 id's record is value
// version 1 with its tagged fields, and reads back the same; others stay
// version 0.
func TestTV2RecordsRoundTrip(t *testing.T) {
	v2 := md(PrepareCommit, 7, 3, TopicPartition{Topic: "a", Partition: 1})
	v2.tv2, v2.lastProducerID, v2.nextProducerID, v2.lastProducerEpoch = true, 5, 9, noProducerEpoch
	v1 := md(Ongoing, 7, 3, TopicPartition{Topic: "a", Partition: 1})
	for _, in := range []metadata{v2, v1} {
		b := encodeValue(in)
		wantVersion := int16(0)
		if in.tv2 {
			wantVersion = 1
		}
		if version := int16(b[0])<<8 | int16(b[1]); version != wantVersion {
			t.Fatalf("tv2=%v: value version %d, want %d", in.tv2, version, wantVersion)
		}
		out, err := decodeValue(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
		}
	}
}
