package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionsSurviveCoordinatorKill9 runs a kgo transactional producer
// against three keel processes, committing and aborting transactions of
// several records across three partitions (RF=3, min.insync.replicas=2),
// and kill -9s the process leading its transactional id's
// __transaction_state partition in the middle of it, then restarts it. A
// read_committed consumer must then see every committed transaction whole,
// no aborted one, each record once and in order per partition; a
// transaction whose end failed (its outcome unknown to the client) must be
// there whole or not at all.
func TestTransactionsSurviveCoordinatorKill9(t *testing.T) {
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{Overrides: []string{"transaction.state.log.num.partitions=6"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, txnID = "txn-kill9", "txn-kill9-producer"
	var dead int32 = -1
	admin := func() *kadm.Client {
		var seeds []string
		for _, s := range c.Specs {
			if s.ID != dead {
				seeds = append(seeds, c.Node(s.ID).AdvertisedPlaintext)
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	adm := admin()
	if resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	newProducer := func() *kgo.Client {
		prod, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.TransactionalID(txnID),
			kgo.DefaultProduceTopic(topic), kgo.RetryTimeout(60*time.Second), kgo.TransactionTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return prod
	}
	prod := newProducer()
	defer func() { prod.Close() }()

	type outcome int
	const (
		committed outcome = iota
		aborted
		unknown
	)
	outcomes := map[int]outcome{}
	const perTxn, txns, killAt = 6, 40, 15
	for i := range txns {
		if i == killAt {
			coord, err := coordinatorOf(ctx, adm, txnID)
			if err != nil {
				t.Fatalf("transaction coordinator: %v", err)
			}
			t.Logf("killing node %d, the coordinator of %s, after %d transactions", coord, txnID, i)
			c.Kill(coord)
			dead = coord
			adm = admin()
		}
		if i == killAt+10 {
			c.Start(dead)
			c.WaitReady(dead)
			dead = -1
		}
		if err := prod.BeginTransaction(); err != nil {
			// kgo can leave its producer id fatally failed when the
			// dead coordinator is fenced while it still retries
			// AddPartitionsToTxn against it: the broker leaves its
			// Metadata and kgo fails the request with "unknown
			// broker" instead of finding the new coordinator. An
			// application then starts a new producer with the same
			// transactional id, which fences the old one, and so does
			// this test.
			t.Logf("begin %d: %v; starting a new producer", i, err)
			prod.Close()
			prod = newProducer()
			if err := prod.BeginTransaction(); err != nil {
				t.Fatalf("begin %d with a new producer: %v", i, err)
			}
		}
		var produceErr error
		for j := range perTxn {
			r := &kgo.Record{Key: []byte(fmt.Sprint(j)), Value: []byte(fmt.Sprintf("%d-%d", i, j))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				produceErr = err
				break
			}
		}
		commit := produceErr == nil && i%4 != 3
		err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		switch {
		case err != nil:
			t.Logf("transaction %d: end (commit %v): %v", i, commit, err)
			outcomes[i] = unknown
			// kgo needs an abort of what it may still have buffered
			// before the next transaction.
			if err := prod.AbortBufferedRecords(ctx); err != nil {
				t.Fatalf("abort buffered after %d: %v", i, err)
			}
		case commit:
			outcomes[i] = committed
		default:
			outcomes[i] = aborted
		}
	}

	// Read everything committed.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := 0
	for _, o := range outcomes {
		if o == committed {
			want += perTxn
		}
	}
	seen := map[string]bool{}
	perTxnSeen := map[int]int{}
	lastPerPartition := map[int32]int{}
	idle := time.Now()
	for time.Since(idle) < 5*time.Second && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			idle = time.Now()
			v := string(r.Value)
			if seen[v] {
				t.Errorf("%s read twice", v)
			}
			seen[v] = true
			var i, j int
			if _, err := fmt.Sscanf(v, "%d-%d", &i, &j); err != nil {
				t.Fatalf("record %q: %v", v, err)
			}
			perTxnSeen[i]++
			if last, ok := lastPerPartition[r.Partition]; ok && i < last {
				t.Errorf("partition %d: transaction %d's record after transaction %d's", r.Partition, i, last)
			}
			lastPerPartition[r.Partition] = i
		})
	}
	for i, o := range outcomes {
		n := perTxnSeen[i]
		switch {
		case o == committed && n != perTxn:
			t.Errorf("committed transaction %d: %d of %d records read", i, n, perTxn)
		case o == aborted && n != 0:
			t.Errorf("aborted transaction %d: %d records read", i, n)
		case o == unknown && n != 0 && n != perTxn:
			t.Errorf("transaction %d of unknown outcome: %d of %d records read (not all or nothing)", i, n, perTxn)
		}
	}
	var lines []string
	for i := range txns {
		lines = append(lines, fmt.Sprintf("%d:%v/%d", i, outcomes[i], perTxnSeen[i]))
	}
	t.Logf("outcomes (0 committed, 1 aborted, 2 unknown)/records read: %s", strings.Join(lines, " "))
	if len(seen) < want {
		t.Errorf("read %d records, want at least the %d committed", len(seen), want)
	}
}

// coordinatorOf is the node leading the __transaction_state partition of
// transactional id txnID.
func coordinatorOf(ctx context.Context, adm *kadm.Client, txnID string) (int32, error) {
	d, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		return -1, err
	}
	dt, ok := d[txnID]
	if !ok {
		return -1, fmt.Errorf("%s not described", txnID)
	}
	if dt.Err != nil {
		return -1, dt.Err
	}
	return dt.Coordinator, nil
}
