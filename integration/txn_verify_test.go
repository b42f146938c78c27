package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/keelstream/keel/network/record"
)

// TestTxnVerificationAcrossBrokers: KIP-890 where the transaction
// coordinator is another broker than the partition's leader, so the
// leader asks it with AddPartitionsToTxn v4+. kgo's transactional producer
// commits across every partition under transaction version 2 (part 2: each
// first batch's leader adds the partition remotely, each commit bumps the
// epoch) and read_committed consumers see it all; a stray transactional
// batch of a version 1 client (Produce v11: VerifyOnly, part 1) for a
// partition the producer never added, and the last transaction's zombie
// under version 2, are refused by their leader and leave no transaction
// open.
func TestTxnVerificationAcrossBrokers(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		"transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3")
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, txnID = "verified", "verified-producer"
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 6, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const perTxn, txns = 60, 3
	for i := range txns {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range perTxn {
			r := &kgo.Record{Partition: int32(j % 6), Value: fmt.Appendf(nil, "%d-%d", i, j)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("transaction %d, record %d: %v", i, j, err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}

	// The coordinator, and a partition led by another broker.
	coord, err := coordinatorOf(ctx, adm, txnID)
	if err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	partition, leader := int32(-1), int32(-1)
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		if p.Leader != coord {
			partition, leader = p.Partition, p.Leader
			break
		}
	}
	if partition < 0 {
		t.Fatalf("every partition is led by the coordinator %d", coord)
	}
	pid, epoch := producerOf(ctx, t, adm, txnID)
	// The cluster is at transaction.version 2 (a new cluster's default),
	// so kgo ran KIP-890 part 2: no AddPartitionsToTxn, and each commit
	// bumped the epoch.
	if epoch != txns {
		t.Fatalf("the producer's epoch after %d commits is %d: transaction version 2 was not used", txns, epoch)
	}
	// The batch follows the producer's sequence in the partition, so that
	// only the verification can refuse it. It is sent once the last
	// commit's marker is in the partition: EndTxn returns before the
	// markers are written (as in Kafka), and until then the transaction
	// is still open there, so its leader takes the batch as one more of
	// that transaction without asking the coordinator (as Kafka's would).
	next, open := int32(-1), int64(0)
	waitFor(t, 10*time.Second, "the last commit's marker in the partition", func() bool {
		described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {partition: {}}})
		if err != nil {
			t.Fatal(err)
		}
		described.EachProducer(func(d kadm.DescribedProducer) {
			if d.ProducerID == pid {
				next, open = d.LastSequence+1, d.CurrentTxnStartOffset
			}
		})
		return next >= 0 && open < 0
	})
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, next, true
	bb := record.NewBatchBuilder(opts)
	bb.Append(time.Now().UnixMilli(), nil, []byte("stray"), nil)
	batch, err := bb.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10000, kmsg.StringPtr(txnID)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// While the last commit's markers are being written the coordinator
	// cannot tell yet (CONCURRENT_TRANSACTIONS): the leader answers
	// NOT_ENOUGH_REPLICAS, which a producer retries. Produce v11 at most
	// (a transaction version 1 client): v12 would add the partition.
	old, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	code := requestWhile(ctx, t, old.Broker(int(leader)), req, kerr.NotEnoughReplicas.Code, func(r *kmsg.ProduceResponse) int16 {
		return r.Topics[0].Partitions[0].ErrorCode
	})
	if code != kerr.InvalidTxnState.Code && code != kerr.TransactionAbortable.Code {
		t.Fatalf("a stray transactional batch to partition %d (leader %d, coordinator %d): %v, want it refused",
			partition, leader, coord, kerr.ErrorForCode(code))
	}
	// Under transaction version 2 the zombie of the last transaction
	// writes at the epoch before the last commit's: its leader asks the
	// coordinator to add the partition, which fences it.
	opts.ProducerEpoch, opts.BaseSequence = epoch-1, 0
	bb = record.NewBatchBuilder(opts)
	bb.Append(time.Now().UnixMilli(), nil, []byte("zombie"), nil)
	if req.Topics[0].Partitions[0].Records, err = bb.Build(nil); err != nil {
		t.Fatal(err)
	}
	code = requestWhile(ctx, t, cl.Broker(int(leader)), req, kerr.NotEnoughReplicas.Code, func(r *kmsg.ProduceResponse) int16 {
		return r.Topics[0].Partitions[0].ErrorCode
	})
	if code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the zombie's batch (Produce v%d) to partition %d (leader %d, coordinator %d): %v, want INVALID_PRODUCER_EPOCH",
			req.Version, partition, leader, coord, kerr.ErrorForCode(code))
	}

	// Nothing hangs: read_committed consumers read every committed record
	// and the end offsets are stable.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := 0
	for seen < perTxn*txns {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d committed records: %v", seen, perTxn*txns, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		seen += fs.NumRecords()
	}
	noOpenTransaction(ctx, t, adm, topic)
}

// requestWhile sends req to b until code reads something else than
// transient from its response, or 10 s have passed, and returns that code.
func requestWhile[R kmsg.Response](ctx context.Context, t *testing.T, b *kgo.Broker, req kmsg.Request, transient int16, code func(R) int16) int16 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := b.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if c := code(resp.(R)); c != transient || time.Now().After(deadline) {
			return c
		}
	}
}

// noOpenTransaction fails t for each partition of topic whose last stable
// offset is below its log end: a transaction is open there.
func noOpenTransaction(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stable.Each(func(o kadm.ListedOffset) {
		if e, ok := latest.Lookup(topic, o.Partition); !ok || e.Offset != o.Offset {
			t.Errorf("%s-%d: last stable offset %d, log end %d: a transaction is open", topic, o.Partition, o.Offset, e.Offset)
		}
	})
}

// producerOf is the producer id and epoch of transactional id txnID.
func producerOf(ctx context.Context, t *testing.T, adm *kadm.Client, txnID string) (int64, int16) {
	t.Helper()
	d, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		t.Fatal(err)
	}
	dt, ok := d[txnID]
	if !ok || dt.Err != nil {
		t.Fatalf("describe %s: %v", txnID, dt.Err)
	}
	return dt.ProducerID, dt.ProducerEpoch
}

// TestTxnOffsetCommitVerificationAcrossBrokers: a TxnOffsetCommit's batch
// in the group's __consumer_offsets partition is verified as a produced
// batch is, here by a transaction coordinator on another broker than the
// group coordinator. kgo's exactly-once session (consume, produce, commit
// the offsets in the transaction) works through it; a stray
// TxnOffsetCommit of a partition never added is refused and leaves no
// transaction open in the offsets topic.
func TestTxnOffsetCommitVerificationAcrossBrokers(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		"transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3")
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const in, out, txnID, n = "eos-in", "eos-out", "eos-producer", 300
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{in, out} {
		if resp, err := adm.CreateTopic(ctx, 3, 2, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// A group whose coordinator is not the transaction coordinator.
	var txnCoord int32 = -1
	for txnCoord < 0 {
		r := adm.FindTxnCoordinators(ctx, txnID)[txnID]
		switch {
		case r.Err == nil:
			txnCoord = r.NodeID
		case ctx.Err() != nil:
			t.Fatalf("transaction coordinator: %v", r.Err)
		default:
			time.Sleep(50 * time.Millisecond) // the transaction topic is being created
		}
	}
	group := ""
	for i := 0; group == "" && i < 100; {
		g := fmt.Sprintf("eos-%d", i)
		switch r := adm.FindGroupCoordinators(ctx, g)[g]; {
		case r.Err != nil && ctx.Err() == nil: // the offsets topic is being created
			time.Sleep(50 * time.Millisecond)
			continue
		case r.Err == nil && r.NodeID != txnCoord:
			group = g
		}
		i++
	}
	if group == "" {
		t.Fatalf("every group is coordinated by the transaction coordinator %d", txnCoord)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.BootstrapServers()...), kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(out), kgo.RequireStableFetchOffsets())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for moved := 0; moved < n; {
		fs := sess.PollRecords(ctx, 100)
		if err := ctx.Err(); err != nil {
			t.Fatalf("moved %d of %d records: %v", moved, n, err)
		}
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			moved++
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
		})
		if committed, err := sess.End(ctx, kgo.TryCommit); err != nil || !committed {
			t.Fatalf("end: committed %v, %v", committed, err)
		}
	}
	// The last transaction's offsets become visible once its COMMIT
	// marker reaches the offsets partition, after EndTxn was answered.
	total := int64(0)
	for deadline := time.Now().Add(10 * time.Second); total != n && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		total = 0
		offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	}
	if total != n {
		t.Fatalf("group %s committed offsets summing to %d, want %d", group, total, n)
	}

	// A stray TxnOffsetCommit of the producer, whose transaction holds no
	// offsets partition now.
	pid, epoch := producerOf(ctx, t, adm, txnID)
	gc := adm.FindGroupCoordinators(ctx, group)[group].NodeID
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txnID, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = in
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// COORDINATOR_NOT_AVAILABLE while the last commit's markers are
	// written (CONCURRENT_TRANSACTIONS). TxnOffsetCommit v4 at most (a
	// transaction version 1 client): v5 would add the offsets partition.
	old, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	code := requestWhile(ctx, t, old.Broker(int(gc)), req, kerr.CoordinatorNotAvailable.Code, func(r *kmsg.TxnOffsetCommitResponse) int16 {
		return r.Topics[0].Partitions[0].ErrorCode
	})
	if code != kerr.InvalidTxnState.Code && code != kerr.TransactionAbortable.Code {
		t.Fatalf("a stray TxnOffsetCommit (v%d) to group coordinator %d (transaction coordinator %d): %v, want it refused",
			req.Version, gc, txnCoord, kerr.ErrorForCode(code))
	}
	noOpenTransaction(ctx, t, adm, "__consumer_offsets")
}
