package group

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// runtimeModel drives a Manager as the broker's coordinator does: writes
// are appended to the log at once and completed in log order when the
// high watermark passes them (apply, or fail: the records are then
// truncated), transaction markers included. Only commits fail: deletions
// and expiry change the state when decided, and a failed tombstone
// append is not undone (nor is it in Kafka, whose cleanupGroupMetadata
// only logs it).
type runtimeModel struct {
	m        *Manager
	log      []logEntry
	inFlight []modelWrite
}

type modelWrite struct {
	first, last int // log entries
	commits     []PendingCommit
	marker      bool
	producer    int64
	commit      bool
}

func (r *runtimeModel) write(eff Effects) {
	if len(eff.Records) == 0 {
		return
	}
	first := len(r.log)
	for _, rec := range eff.Records {
		r.log = append(r.log, logEntry{rec: rec, txn: eff.Txn})
	}
	r.inFlight = append(r.inFlight, modelWrite{first: first, last: len(r.log) - 1, commits: eff.Commits})
}

func (r *runtimeModel) marker(producer int64, commit bool) {
	result := "abort"
	if commit {
		result = "commit"
	}
	r.log = append(r.log, logEntry{marker: result, producer: producer})
	r.inFlight = append(r.inFlight, modelWrite{first: len(r.log) - 1, last: len(r.log) - 1, marker: true, producer: producer, commit: commit})
}

// complete ends the n oldest writes; fail makes each a failure.
func (r *runtimeModel) complete(n int, fail func() bool) {
	for ; n > 0 && len(r.inFlight) > 0; n-- {
		w := r.inFlight[0]
		r.inFlight = r.inFlight[1:]
		switch {
		case w.marker:
			r.m.CompleteTxn(w.producer, w.commit)
		case len(w.commits) > 0 && fail():
			for i := w.first; i <= w.last; i++ {
				r.log[i].dropped = true
			}
			r.m.FailCommits(w.commits)
		default:
			r.m.ApplyCommitsAt(w.commits, int64(w.last))
		}
	}
}

func (r *runtimeModel) producerInFlight(producer int64) bool {
	for _, w := range r.inFlight {
		for _, c := range w.commits {
			if c.txn != nil && c.txn.producerID == producer {
				return true
			}
		}
	}
	return false
}

func (r *runtimeModel) plainInFlight() bool {
	for _, w := range r.inFlight {
		for _, c := range w.commits {
			if c.txn == nil {
				return true
			}
		}
	}
	return false
}

func (r *runtimeModel) replay(now int64) (*Manager, error) {
	m := NewManager(r.m.cfg, now, func() string { return "x" })
	for i, e := range r.log {
		var err error
		switch {
		case e.dropped:
		case e.marker != "":
			m.ReplayMarker(e.producer, e.marker == "commit")
		case e.txn != nil:
			err = m.ReplayTxn(e.txn.ProducerID, int64(i), e.rec.Key, e.rec.Value)
		default:
			err = m.ReplayAt(int64(i), e.rec.Key, e.rec.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("offset %d: %w", i, err)
		}
	}
	m.FinishLoad(now)
	return m, nil
}

// A coordinator that loads the log sees what the one that wrote it saw:
// the same committed offsets, the same pending transactional offsets, the
// same require_stable answers, whatever the mix of OffsetCommits,
// TxnOffsetCommits, markers, deletions and expiry.
func TestReplayRebuildsTheLiveState(t *testing.T) {
	groups := []string{"a", "b", "c"}
	tps := []TopicPartition{{"t", 0}, {"t", 1}, {"u", 0}}
	for seed := range uint64(300) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		cfg := DefaultConfig()
		cfg.OffsetsRetentionMs, cfg.OffsetsRetentionCheckMs = 50_000, 10_000
		now := int64(1000)
		r := &runtimeModel{m: NewManager(cfg, now, func() string { return "x" })}
		randomPartitions := func() []CommitPartition {
			var ps []CommitPartition
			for _, tp := range tps {
				if rnd.IntN(2) == 0 {
					ps = append(ps, CommitPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: rnd.Int64N(1000), LeaderEpoch: -1})
				}
			}
			return ps
		}
		var ops []string
		for range 60 {
			g := groups[rnd.IntN(len(groups))]
			producer := int64(1 + rnd.IntN(3))
			switch op := rnd.IntN(10); {
			case op < 3:
				ops = append(ops, "commit "+g)
				_, eff := r.m.CommitOffsets(now, CommitRequest{Group: g, Generation: -1, RetentionMs: -1, Partitions: randomPartitions()})
				r.write(eff)
			case op < 6:
				ops = append(ops, fmt.Sprintf("txn-commit %s pid=%d", g, producer))
				_, eff := r.m.CommitTxnOffsets(now, TxnCommitRequest{Group: g, ProducerID: producer, Generation: -1, Partitions: randomPartitions()})
				r.write(eff)
			case op < 7:
				// The transaction coordinator writes a marker once the
				// producer's TxnOffsetCommits were answered.
				if !r.producerInFlight(producer) {
					commit := rnd.IntN(3) > 0
					ops = append(ops, fmt.Sprintf("marker pid=%d commit=%v", producer, commit))
					r.marker(producer, commit)
				}
			case op < 9:
				n := rnd.IntN(3)
				ops = append(ops, fmt.Sprintf("complete %d", n))
				r.complete(n, func() bool { return rnd.IntN(8) == 0 })
			default:
				// Deletions and expiry change the live state when they
				// are decided, as Kafka's do; an OffsetCommit still in
				// flight would then come back when it applies (it is not
				// tracked as a TxnOffsetCommit is), so those go first.
				if r.plainInFlight() {
					r.complete(len(r.inFlight), func() bool { return false })
				}
				switch rnd.IntN(3) {
				case 0:
					tp := tps[rnd.IntN(len(tps))]
					ops = append(ops, fmt.Sprintf("offset-delete %s %v", g, tp))
					_, _, eff := r.m.DeleteOffsets(now, g, []TopicPartition{tp})
					r.write(eff)
				case 1:
					ops = append(ops, "delete "+g)
					_, eff := r.m.Delete(now, g)
					r.write(eff)
				default:
					now += rnd.Int64N(40_000)
					ops = append(ops, fmt.Sprintf("tick to %d", now))
					r.write(r.m.Tick(now))
				}
			}
		}
		r.complete(len(r.inFlight), func() bool { return false })
		replayed, err := r.replay(now)
		if err != nil {
			t.Fatalf("seed %d: replay: %v", seed, err)
		}
		for _, g := range groups {
			live, loaded := offsetState(r.m.Group(g)), offsetState(replayed.Group(g))
			if live != loaded {
				t.Fatalf("seed %d group %s:\n live:%s\n replayed:%s\nops: %q", seed, g, live, loaded, ops)
			}
			if l, p := fmt.Sprint(r.m.FetchStableOffsets(g, tps)), fmt.Sprint(replayed.FetchStableOffsets(g, tps)); l != p {
				t.Fatalf("seed %d group %s: require_stable live %s, replayed %s\nops: %q", seed, g, l, p, ops)
			}
		}
	}
}

// A caller that still uses ApplyCommits and Replay (no offsets) keeps
// today's behaviour: the last applied OffsetCommit wins, and a replayed
// log without transactions loads as before.
func TestOffsetlessCallsKeepWorking(t *testing.T) {
	m := NewManager(DefaultConfig(), 0, func() string { return "x" })
	tp := TopicPartition{"t", 0}
	var log []Record
	for _, off := range []int64{5, 3, 9} {
		_, eff := m.CommitOffsets(0, CommitRequest{Group: "g", Generation: -1, RetentionMs: -1,
			Partitions: []CommitPartition{{Topic: "t", Offset: off, LeaderEpoch: -1}}})
		log = append(log, eff.Records...)
		m.ApplyCommits(eff.Commits)
	}
	if got := m.FetchOffsets("g", []TopicPartition{tp})[0].Offset; got != 9 {
		t.Fatalf("live offset %d, want 9", got)
	}
	loaded := NewManager(DefaultConfig(), 0, func() string { return "x" })
	for _, r := range log {
		if err := loaded.Replay(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	loaded.FinishLoad(0)
	if got := loaded.FetchOffsets("g", []TopicPartition{tp})[0].Offset; got != 9 {
		t.Fatalf("loaded offset %d, want 9", got)
	}
	// A transaction applied with an offset after those commits wins when
	// it commits.
	_, eff := m.CommitTxnOffsets(0, TxnCommitRequest{Group: "g", ProducerID: 1, Generation: -1,
		Partitions: []CommitPartition{{Topic: "t", Offset: 11, LeaderEpoch: -1}}})
	m.ApplyCommitsAt(eff.Commits, 3)
	m.CompleteTxn(1, true)
	if got := m.FetchOffsets("g", []TopicPartition{tp})[0].Offset; got != 11 {
		t.Fatalf("offset after the transaction %d, want 11", got)
	}
}
