package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/integration"
	"github.com/keelstream/keel/network/record"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaTable parses kafka-transactions.sh's table (every cell padded and
// followed by a tab), checking its header is exactly Kafka's.
func kafkaTable(t *testing.T, out string, header ...string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var rows [][]string
	for i, l := range lines {
		if !strings.HasSuffix(l, "\t") {
			t.Fatalf("line %q does not end in a tab, as Kafka's rows do", l)
		}
		cells := strings.Split(strings.TrimSuffix(l, "\t"), "\t")
		for j := range cells {
			cells[j] = strings.TrimRight(cells[j], " ")
		}
		if len(cells) != len(header) {
			t.Fatalf("line %q: %d cells, want %d", l, len(cells), len(header))
		}
		if i == 0 {
			if strings.Join(cells, " ") != strings.Join(header, " ") {
				t.Fatalf("header %q, want Kafka's %q", cells, header)
			}
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

var (
	listHeader      = []string{"TransactionalId", "Coordinator", "ProducerId", "TransactionState"}
	describeHeader  = []string{"CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"}
	producersHeader = []string{"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset"}
)

// kafka-transactions.sh's list, describe and describe-producers against
// three brokers, while a kgo producer holds a transaction open on
// payments-1 after committing one there: the open transaction is listed
// once, by its coordinator; described there with its partition; and the
// partition's leader reports where it starts. Committing it empties both.
func TestCLITransactionsListDescribeAndDescribeProducers(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}})
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ok(t, bs, "", "topics", "create", "--topic", "payments", "--partitions", "2", "--replication-factor", "3")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.TransactionalID("payments-tx"),
		kgo.TransactionTimeout(45*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(values ...string) *kgo.Record {
		t.Helper()
		var last *kgo.Record
		for _, v := range values {
			last = &kgo.Record{Topic: "payments", Partition: 1, Value: []byte(v)}
			if err := prod.ProduceSync(ctx, last).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		return last
	}
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("a", "b")
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	open := produce("open") // after a, b and the commit marker: offset 3
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pidStr := strconv.FormatInt(pid, 10)

	// list, in Keel's form and in kafka-transactions.sh's (connection
	// flags before the subcommand).
	rows := kafkaTable(t, ok(t, bs, "", "transactions", "list"), listHeader...)
	if r := keel(t, "", "", "transactions", "--bootstrap-server", bs, "list"); r.exit != 0 ||
		strings.Join(kafkaTable(t, r.stdout, listHeader...)[0], " ") != strings.Join(rows[0], " ") {
		t.Fatalf("kafka-transactions.sh form: exit %d\n%s%s", r.exit, r.stdout, r.stderr)
	}
	if len(rows) != 1 || rows[0][0] != "payments-tx" || rows[0][2] != pidStr || rows[0][3] != "Ongoing" {
		t.Fatalf("list rows %q, want payments-tx once, producer %s, Ongoing", rows, pidStr)
	}
	coordinator := rows[0][1]
	var listed []transactionListJSON
	if err := json.Unmarshal([]byte(ok(t, bs, "", "transactions", "list", "-o", "json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0] != (transactionListJSON{"payments-tx", listed[0].Coordinator, pid, "Ongoing"}) || strconv.Itoa(int(listed[0].Coordinator)) != coordinator {
		t.Fatalf("list -o json %+v, want payments-tx at coordinator %s", listed, coordinator)
	}
	if out := ok(t, bs, "", "transactions", "list", "--duration-filter", "3600000"); len(kafkaTable(t, out, listHeader...)) != 0 {
		t.Fatalf("transactions open for over an hour:\n%s", out)
	}
	// --transactional-id-pattern (KIP-1152): found in the id; a bad one is
	// the broker's INVALID_REGULAR_EXPRESSION.
	for pattern, want := range map[string]int{"^payments-": 1, "tx$": 1, "^tx": 0} {
		if out := ok(t, bs, "", "transactions", "list", "--transactional-id-pattern", pattern); len(kafkaTable(t, out, listHeader...)) != want {
			t.Fatalf("--transactional-id-pattern %q: want %d rows\n%s", pattern, want, out)
		}
	}
	if r := keel(t, bs, "", "transactions", "list", "--transactional-id-pattern", "pay[ments"); r.exit == 0 || !strings.Contains(r.stderr, "INVALID_REGULAR_EXPRESSION") {
		t.Fatalf("a bad pattern: exit %d\n%s%s", r.exit, r.stdout, r.stderr)
	}

	// describe, at the coordinator list named.
	before := time.Now().UnixMilli()
	rows = kafkaTable(t, ok(t, bs, "", "transactions", "describe", "--transactional-id", "payments-tx"), describeHeader...)
	if len(rows) != 1 {
		t.Fatalf("describe rows %q", rows)
	}
	d := rows[0]
	start, _ := strconv.ParseInt(d[6], 10, 64)
	duration, _ := strconv.ParseInt(d[7], 10, 64)
	if d[0] != coordinator || d[1] != "payments-tx" || d[2] != pidStr || d[3] != strconv.Itoa(int(epoch)) || d[4] != "Ongoing" ||
		d[5] != "45000" || start <= 0 || start > before || duration < 0 || d[8] != "payments-1" {
		t.Fatalf("describe row %q, want coordinator %s, producer %s/%d, Ongoing, 45000 ms, started before %d, on payments-1", d, coordinator, pidStr, epoch, before)
	}
	var desc transactionDescribeJSON
	if err := json.Unmarshal([]byte(ok(t, bs, "", "transactions", "describe", "--transactional-id", "payments-tx", "-o", "json")), &desc); err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(int(desc.CoordinatorID)) != coordinator || desc.ProducerID != pid || desc.ProducerEpoch != epoch || desc.TransactionState != "Ongoing" ||
		desc.CurrentTransactionStartTimeMs != start || desc.TransactionDurationMs < duration ||
		len(desc.TopicPartitions) != 1 || desc.TopicPartitions[0] != (topicPartitionJSON{"payments", 1}) {
		t.Fatalf("describe -o json %+v", desc)
	}

	// describe-producers, at payments-1's leader: the open transaction
	// starts at the "open" record. The cluster is at transaction.version
	// 2, so the commit bumped kgo's epoch and its sequences start again.
	rows = kafkaTable(t, ok(t, bs, "", "transactions", "describe-producers", "--topic", "payments", "--partition", "1"), producersHeader...)
	if open.Offset != 3 || epoch != 1 || len(rows) != 1 || rows[0][0] != pidStr || rows[0][1] != strconv.Itoa(int(epoch)) ||
		rows[0][3] != "0" || rows[0][5] != "3" {
		t.Fatalf("describe-producers rows %q, want producer %s/%d at epoch 1 (transaction version 2), last sequence 0, its transaction open at offset 3 (the record: %d)",
			rows, pidStr, epoch, open.Offset)
	}
	var producers []producerJSON
	if err := json.Unmarshal([]byte(ok(t, bs, "", "transactions", "describe-producers", "--topic", "payments", "--partition", "1", "-o", "json")), &producers); err != nil {
		t.Fatal(err)
	}
	if len(producers) != 1 || producers[0].ProducerID != pid || producers[0].CurrentTransactionStartOffset != 3 || producers[0].LastTimestamp <= 0 {
		t.Fatalf("describe-producers -o json %+v", producers)
	}
	if out := ok(t, bs, "", "transactions", "describe-producers", "--topic", "payments", "--partition", "0", "-o", "json"); out != "[]\n" {
		t.Fatalf("a partition no producer wrote: %q", out)
	}

	for _, args := range [][]string{
		{"list"}, {"list", "-o", "json"},
		{"describe", "--transactional-id", "payments-tx"}, {"describe", "--transactional-id", "payments-tx", "-o", "json"},
		{"describe-producers", "--topic", "payments", "--partition", "1"}, {"describe-producers", "--topic", "payments", "--partition", "1", "-o", "json"},
	} {
		t.Logf("keel transactions %s:\n%s", strings.Join(args, " "), ok(t, bs, "", append([]string{"transactions"}, args...)...))
	}

	// Scripts can trust the exit code.
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"an unknown transactional id", []string{"describe", "--transactional-id", "nope"}, []string{"transactional-id `nope`", "TRANSACTIONAL_ID_NOT_FOUND"}},
		{"a partition that does not exist", []string{"describe-producers", "--topic", "payments", "--partition", "7"}, []string{"payments-7", "UNKNOWN_TOPIC_OR_PARTITION"}},
		{"a topic that does not exist", []string{"describe-producers", "--topic", "nope", "--partition", "0"}, []string{"nope-0", "UNKNOWN_TOPIC_OR_PARTITION"}},
		{"a missing --transactional-id", []string{"describe"}, []string{"transactional-id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := keel(t, bs, "", append([]string{"transactions"}, tc.args...)...)
			for _, want := range tc.want {
				if r.exit != 1 || !strings.Contains(r.stderr, want) {
					t.Fatalf("exit %d, stderr %q; want exit 1 and %q", r.exit, r.stderr, want)
				}
			}
		})
	}

	// Once committed, nothing is open: no partitions (the coordinator
	// keeps the last start time, as Kafka's does), and the leader forgets
	// the start offset when the marker lands.
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := kafkaTable(t, ok(t, bs, "", "transactions", "describe", "--transactional-id", "payments-tx"), describeHeader...)[0]
		p := kafkaTable(t, ok(t, bs, "", "transactions", "describe-producers", "--topic", "payments", "--partition", "1"), producersHeader...)
		if d[4] == "CompleteCommit" && d[8] == "" && len(p) == 1 && p[0][5] == "None" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the commit: describe %q, describe-producers %q", d, p)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var hangingHeader = []string{"Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)"}

// initProducerID gets a producer id as an idempotent producer does
// (InitProducerId without a transactional id): no transaction coordinator
// will ever know it.
func initProducerID(ctx context.Context, t *testing.T, adm *client.Admin) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	kresp, err := adm.Client().Request(ctx, req)
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	resp := kresp.(*kmsg.InitProducerIDResponse)
	if err := client.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// writeHangingTransaction writes one transactional record to
// topic-partition as a buggy client would (KIP-890's case): with no
// AddPartitionsToTxn first, so no coordinator will ever write its marker.
// Only a cluster with transaction.partition.verification.enable=false
// takes it (as a Kafka cluster before 3.6 did). It returns the record's
// offset: the transaction's start offset.
func writeHangingTransaction(ctx context.Context, t *testing.T, adm *client.Admin, topic string, partition int32,
	pid int64, epoch int16, seq int32, ts time.Time, value string) int64 {
	t.Helper()
	b := record.NewBatchBuilder(record.BatchOptions{PartitionLeaderEpoch: record.NoPartitionLeaderEpoch,
		Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
	b.Append(ts.UnixMilli(), nil, []byte(value), nil)
	batch, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID = kmsg.StringPtr("buggy-client")
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = partition, batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		leader, err := adm.Client().PartitionLeader(ctx, topic, partition)
		if err == nil {
			var kresp kmsg.Response
			if kresp, err = adm.Client().BrokerRequest(ctx, leader, req); err == nil {
				p := kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
				if err = client.ErrorForCode(p.ErrorCode); err == nil {
					return p.BaseOffset
				}
			}
		}
		// A topic just created may have no leader yet; a retried batch
		// is a duplicate the leader acknowledges with its offset.
		if !client.IsRetriable(err) || time.Now().After(deadline) {
			t.Fatalf("produce the hanging transaction to %s-%d: %v", topic, partition, err)
		}
		if _, err := adm.Client().FetchMetadata(ctx, []string{topic}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kafka-transactions.sh find-hanging and abort (KIP-664) against three
// brokers: a client writes a transactional record to ledger-0 without
// telling any coordinator, so it hangs, holding the last stable offset
// below a later record; a kgo producer's transaction open on ledger-1 is
// healthy. find-hanging names the first only; abort by its start offset
// ends it, read_committed consumers read past it, and nothing hangs. The
// brokers run without KIP-890's verification, which would refuse the
// hanging record (broker/txn_verify_test.go): the tools are for clusters
// where it is off, or that ran older versions.
func TestCLITransactionsFindHangingAndAbort(t *testing.T) {
	c := integration.StartCluster(t, []integration.NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}},
		"transaction.partition.verification.enable=false")
	c.WaitReady(30 * time.Second)
	bs := c.BootstrapServers()[0]
	ok(t, bs, "", "topics", "create", "--topic", "ledger", "--partitions", "2", "--replication-factor", "3")
	ok(t, bs, "", "topics", "create", "--topic", "sdk", "--partitions", "1", "--replication-factor", "3")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// Produce v11 at most: writeHangingTransaction plays a transaction
	// version 1 client (from v12 the leader adds the partition to the
	// transaction, which no coordinator has for "buggy-client").
	adm, err := client.NewAdmin(ctx, client.SeedBrokers(c.BootstrapServers()...), client.MaxVersion(0, 11))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	producePlain := func(values ...string) {
		t.Helper()
		for _, v := range values {
			if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "ledger", Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
	}

	// ledger-0: a, b, the hanging record (written two minutes "ago"),
	// then c, which read_committed consumers cannot see while it hangs.
	producePlain("a", "b")
	pid, epoch := initProducerID(ctx, t, adm)
	lastWrite := time.Now().Add(-2 * time.Minute)
	start := writeHangingTransaction(ctx, t, adm, "ledger", 0, pid, epoch, 0, lastWrite, "hanging")
	producePlain("c")
	if start != 2 {
		t.Fatalf("the hanging transaction starts at %d, want 2", start)
	}

	// ledger-1: a healthy open transaction, its coordinator knows it.
	txn, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.TransactionalID("ledger-tx"),
		kgo.TransactionTimeout(60*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "ledger", Partition: 1, Value: []byte("healthy")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txnPID, _, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	pidStr, startStr := strconv.FormatInt(pid, 10), strconv.FormatInt(start, 10)
	t.Run("find-hanging names the hanging transaction, not the healthy one", func(t *testing.T) {
		out := ok(t, bs, "", "transactions", "find-hanging", "--topic", "ledger", "--max-transaction-timeout", "0")
		t.Logf("keel transactions find-hanging --topic ledger --max-transaction-timeout 0:\n%s", out)
		rows := kafkaTable(t, out, hangingHeader...)
		want := []string{"ledger", "0", pidStr, strconv.Itoa(int(epoch)), "-1", startStr, strconv.FormatInt(lastWrite.UnixMilli(), 10), "2"}
		if len(rows) != 1 || strings.Join(rows[0], " ") != strings.Join(want, " ") {
			t.Fatalf("find-hanging rows %q, want only %q (not producer %d's healthy transaction)", rows, want, txnPID)
		}
		var js []hangingJSON
		if err := json.Unmarshal([]byte(ok(t, bs, "", "transactions", "find-hanging", "--topic", "ledger", "--partition", "0",
			"--max-transaction-timeout", "0", "-o", "json")), &js); err != nil {
			t.Fatal(err)
		}
		if len(js) != 1 || js[0] != (hangingJSON{"ledger", 0, pid, int32(epoch), -1, start, lastWrite.UnixMilli(), 2}) {
			t.Fatalf("find-hanging -o json %+v", js)
		}
		// The healthy transaction's partition alone: a candidate (older
		// than 0 minutes), cleared by its coordinator.
		if out := ok(t, bs, "", "transactions", "find-hanging", "--topic", "ledger", "--partition", "1", "--max-transaction-timeout", "0"); len(kafkaTable(t, out, hangingHeader...)) != 0 {
			t.Fatalf("the healthy transaction on ledger-1 is listed:\n%s", out)
		}
		// Kafka's default: transactions quiet for 15 minutes only.
		if out := ok(t, bs, "", "transactions", "find-hanging", "--topic", "ledger"); len(kafkaTable(t, out, hangingHeader...)) != 0 {
			t.Fatalf("a transaction quiet for 2 minutes listed with the 15-minute default:\n%s", out)
		}
		// --broker-id searches the partitions that broker leads.
		leader, err := adm.Client().PartitionLeader(ctx, "ledger", 0)
		if err != nil {
			t.Fatal(err)
		}
		for id := int32(1); id <= 3; id++ {
			rows := kafkaTable(t, ok(t, bs, "", "transactions", "find-hanging", "--broker-id", strconv.Itoa(int(id)), "--max-transaction-timeout", "0"), hangingHeader...)
			if want := map[bool]int{true: 1, false: 0}[id == leader]; len(rows) != want {
				t.Fatalf("find-hanging --broker-id %d (ledger-0's leader is %d): rows %q", id, leader, rows)
			}
		}
	})

	t.Run("abort fails when nothing matches", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--topic", "ledger", "--partition", "0", "--start-offset", "1"}, "could not find any open transactions starting at offset 1 on partition ledger-0"},
			{[]string{"--topic", "ledger", "--partition", "0"}, "--start-offset"},
			{[]string{"--topic", "ledger", "--partition", "0", "--producer-id", pidStr, "--coordinator-epoch", "0"}, "--producer-epoch"},
			{[]string{"--topic", "ledger", "--partition", "7", "--start-offset", "2"}, "UNKNOWN_TOPIC_OR_PARTITION"},
		} {
			r := keel(t, bs, "", append([]string{"transactions", "abort"}, tc.args...)...)
			if r.exit != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("abort %q: exit %d, stderr %q; want exit 1 and %q", tc.args, r.exit, r.stderr, tc.want)
			}
		}
		for _, args := range [][]string{{"--max-transaction-timeout", "0"}, {"--partition", "0", "--broker-id", "1"}} {
			if r := keel(t, bs, "", append([]string{"transactions", "find-hanging"}, args...)...); r.exit != 1 || !strings.Contains(r.stderr, "--topic") {
				t.Fatalf("find-hanging %q: exit %d, stderr %q; want exit 1 naming --topic", args, r.exit, r.stderr)
			}
		}
	})

	t.Run("abort by start offset ends it", func(t *testing.T) {
		out := ok(t, bs, "", "transactions", "abort", "--topic", "ledger", "--partition", "0", "--start-offset", startStr)
		t.Logf("keel transactions abort --topic ledger --partition 0 --start-offset %s:\n%s", startStr, out)
		if !strings.Contains(out, "producer "+pidStr) {
			t.Fatalf("abort printed %q, want it to name producer %s", out, pidStr)
		}
		// The plain producer of a, b and c is there too, idempotent.
		rows := kafkaTable(t, ok(t, bs, "", "transactions", "describe-producers", "--topic", "ledger", "--partition", "0"), producersHeader...)
		i := slices.IndexFunc(rows, func(r []string) bool { return r[0] == pidStr })
		if len(rows) != 2 || i < 0 || rows[i][2] != "0" || rows[(i+1)%2][5] != "None" || rows[i][5] != "None" {
			t.Fatalf("describe-producers after the abort %q, want producer %s with coordinator epoch 0 and no open transaction", rows, pidStr)
		}
		// The last stable offset caught up with the high watermark.
		kadmCl := kadm.NewClient(plain)
		ends, err := kadmCl.ListEndOffsets(ctx, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		stable, err := kadmCl.ListCommittedOffsets(ctx, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup("ledger", 0)
		lso, _ := stable.Lookup("ledger", 0)
		if end.Err != nil || lso.Err != nil || end.Offset != 5 || lso.Offset != end.Offset {
			t.Fatalf("ledger-0: last stable offset %d (%v), high watermark %d (%v); want both 5 (a, b, hanging, c, the marker)", lso.Offset, lso.Err, end.Offset, end.Err)
		}
		// A read_committed consumer reads past it, skipping its record.
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ledger": {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		var got []string
		for !slices.Contains(got, "c") {
			fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
			fs := cons.PollFetches(fctx)
			stuck := fctx.Err() != nil
			fcancel()
			if stuck {
				t.Fatalf("read_committed consumer stuck after %q", got)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("read_committed consumer read %q, want a, b, c: the aborted record skipped", got)
		}
		if out := ok(t, bs, "", "transactions", "find-hanging", "--topic", "ledger", "--max-transaction-timeout", "0", "-o", "json"); out != "[]\n" {
			t.Fatalf("find-hanging after the abort: %q", out)
		}
	})

	// The SDK call underneath, with the explicit form's epochs: the
	// leader refuses an older producer or coordinator epoch, takes equal.
	t.Run("AbortTransaction checks the epochs like a coordinator's marker", func(t *testing.T) {
		pid, _ := initProducerID(ctx, t, adm)
		now := time.Now()
		writeHangingTransaction(ctx, t, adm, "sdk", 0, pid, 3, 0, now, "x")
		spec := client.AbortTransactionSpec{Topic: "sdk", Partition: 0, ProducerID: pid, ProducerEpoch: 2, CoordinatorEpoch: 5}
		if err := adm.AbortTransaction(ctx, spec); !errors.Is(err, client.ErrorForCode(47)) {
			t.Fatalf("an older producer epoch: %v, want INVALID_PRODUCER_EPOCH", err)
		}
		spec.ProducerEpoch = 3
		if err := adm.AbortTransaction(ctx, spec); err != nil {
			t.Fatalf("abort: %v", err)
		}
		writeHangingTransaction(ctx, t, adm, "sdk", 0, pid, 3, 1, now, "y")
		spec.CoordinatorEpoch = 4
		if err := adm.AbortTransaction(ctx, spec); !errors.Is(err, client.ErrorForCode(52)) {
			t.Fatalf("an older coordinator epoch: %v, want TRANSACTION_COORDINATOR_FENCED", err)
		}
		// kafka-transactions.sh's explicit form, with the same epochs.
		ok(t, bs, "", "transactions", "abort", "--topic", "sdk", "--partition", "0", "--producer-id", strconv.FormatInt(pid, 10),
			"--producer-epoch", "3", "--coordinator-epoch", "5")
		res, err := adm.DescribeProducers(ctx, "sdk", 0)
		if err != nil || res[0].Err != nil || len(res[0].ActiveProducers) != 1 || res[0].ActiveProducers[0].CurrentTxnStartOffset != -1 ||
			res[0].ActiveProducers[0].CoordinatorEpoch != 5 {
			t.Fatalf("after the aborts: %+v %v, want producer %d with no open transaction, coordinator epoch 5", res, err, pid)
		}
		few, err := client.NewAdmin(ctx, client.SeedBrokers(c.BootstrapServers()...), client.RequestRetries(1))
		if err != nil {
			t.Fatal(err)
		}
		defer few.Close()
		spec.Partition = 9
		if err := few.AbortTransaction(ctx, spec); !errors.Is(err, client.ErrUnknownTopicOrPartition) {
			t.Fatalf("a partition that does not exist: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
	})
}
