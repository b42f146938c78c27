package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelstream/keel/integration"
	"github.com/twmb/franz-go/pkg/kgo"
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
	// starts at the "open" record.
	rows = kafkaTable(t, ok(t, bs, "", "transactions", "describe-producers", "--topic", "payments", "--partition", "1"), producersHeader...)
	if open.Offset != 3 || len(rows) != 1 || rows[0][0] != pidStr || rows[0][1] != strconv.Itoa(int(epoch)) ||
		rows[0][3] != "2" || rows[0][5] != "3" {
		t.Fatalf("describe-producers rows %q, want producer %s/%d, last sequence 2, its transaction open at offset 3 (the record: %d)", rows, pidStr, epoch, open.Offset)
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
