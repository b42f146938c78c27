package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/client/clienttest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An open transaction of a kgo transactional producer, seen through the
// Admin against kfake with three brokers, so that DescribeTransactions
// must find the transaction coordinator and DescribeProducers the
// partition leader (kfake answers NOT_COORDINATOR and
// NOT_LEADER_OR_FOLLOWER elsewhere).
func TestAdminTransactionsAgainstKfake(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	tgt := clienttest.Target{Bootstrap: fake.ListenAddrs()}
	adm := clienttest.NewAdmin(t, tgt)
	clienttest.CreateTopic(t, adm, "payments", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	prod, err := kgo.NewClient(kgo.SeedBrokers(tgt.Bootstrap...), kgo.TransactionalID("payments-tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "payments", Partition: 2, Value: []byte("open")}
	if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("list names the open transaction", func(t *testing.T) {
		listed, err := adm.ListTransactions(ctx, client.ListTransactionsFilter{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range listed {
			if l.TransactionalID == "payments-tx" {
				found = true
				if l.ProducerID != pid || l.State != "Ongoing" {
					t.Fatalf("listing %+v, want producer %d Ongoing", l, pid)
				}
			}
		}
		if !found {
			t.Fatalf("payments-tx not listed: %+v", listed)
		}
		byState, err := adm.ListTransactions(ctx, client.ListTransactionsFilter{States: []string{"PrepareCommit"}})
		if err != nil || len(byState) != 0 {
			t.Fatalf("filtered on PrepareCommit: %+v %v", byState, err)
		}
	})

	t.Run("describe asks the coordinator", func(t *testing.T) {
		descs, err := adm.DescribeTransactions(ctx, "payments-tx", "nope")
		if err != nil {
			t.Fatal(err)
		}
		d := descs[0]
		if d.Err != nil || d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch != epoch || d.TransactionStartTimeMs <= 0 ||
			len(d.Partitions) != 1 || d.Partitions[0] != (client.TopicPartition{Topic: "payments", Partition: 2}) {
			t.Fatalf("description %+v, want Ongoing on payments-2 by producer %d/%d", d, pid, epoch)
		}
		if coord, err := adm.Client().Coordinator(ctx, client.TxnCoordinator, "payments-tx"); err != nil || d.Coordinator != coord {
			t.Fatalf("described by %d, the coordinator is %d (%v)", d.Coordinator, coord, err)
		}
		if descs[1].TransactionalID != "nope" || !errors.Is(descs[1].Err, client.ErrorForCode(105)) {
			t.Fatalf("an unknown id: %+v, want TRANSACTIONAL_ID_NOT_FOUND", descs[1])
		}
	})

	t.Run("describe producers asks the leader", func(t *testing.T) {
		res, err := adm.DescribeProducers(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 3 {
			t.Fatalf("%d partitions described, want 3: %+v", len(res), res)
		}
		for _, p := range res {
			if p.Err != nil {
				t.Fatalf("partition %d: %v", p.Partition, p.Err)
			}
			if p.Partition != 2 {
				if len(p.ActiveProducers) != 0 {
					t.Fatalf("partition %d has producers %+v", p.Partition, p.ActiveProducers)
				}
				continue
			}
			if len(p.ActiveProducers) != 1 {
				t.Fatalf("payments-2 producers %+v, want the transactional one", p.ActiveProducers)
			}
			ap := p.ActiveProducers[0]
			if ap.ProducerID != pid || int16(ap.ProducerEpoch) != epoch || ap.CurrentTxnStartOffset != r.Offset || ap.LastSequence != 0 {
				t.Fatalf("producer %+v, want %d/%d with its transaction open at %d", ap, pid, epoch, r.Offset)
			}
		}
		if _, err := adm.DescribeProducers(ctx, "payments", 2); err != nil {
			t.Fatal(err)
		}
	})
}
