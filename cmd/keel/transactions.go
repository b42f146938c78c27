package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// transactionsCommand is `keel transactions`, kafka-transactions.sh: list,
// describe and describe-producers, with its columns.
func transactionsCommand() *cli.Command {
	return &cli.Command{
		Name:  "transactions",
		Usage: "list and describe transactions and the producers of a partition (like kafka-transactions.sh)",
		Description: "kafka-transactions.sh's form works too: the connection flags may come before the\n" +
			"subcommand, keel transactions --bootstrap-server b:9092 list.",
		// kafka-transactions.sh takes --bootstrap-server and
		// --command-config before the subcommand; inheritConnectionFlags
		// hands them down.
		Flags: []cli.Flag{bootstrapFlag(), commandConfigFlag()},
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the transactions every broker coordinates",
				Description: "Like kafka-transactions.sh list: asks every broker (each lists the\n" +
					"transactional ids it coordinates) and prints\n" +
					"TransactionalId Coordinator ProducerId TransactionState.\n" +
					"--duration-filter keeps transactions open longer than that many ms (KIP-994).\n\n" +
					"Examples:\n" +
					"  keel transactions list\n" +
					"  keel transactions --bootstrap-server b:9092 list --duration-filter 60000\n" +
					"  keel transactions list -o json",
				Flags: adminFlags(
					&cli.Int64Flag{Name: "duration-filter", Value: -1, Usage: "only transactions open longer than this many `MS`"},
					outputFlag(),
				),
				Action: withConnectionFlags(transactionsList),
			},
			{
				Name:  "describe",
				Usage: "describe the state of a transactional id at its coordinator",
				Description: "Like kafka-transactions.sh describe: finds the transaction coordinator\n" +
					"(FindCoordinator) and prints CoordinatorId TransactionalId ProducerId ProducerEpoch\n" +
					"TransactionState TransactionTimeoutMs CurrentTransactionStartTimeMs\n" +
					"TransactionDurationMs TopicPartitions (\"None\" with no open transaction).\n" +
					"-o json prints one object; unknown numbers are -1.\n" +
					"An unknown transactional id is an error (TRANSACTIONAL_ID_NOT_FOUND, exit 1).\n\n" +
					"Examples:\n" +
					"  keel transactions describe --transactional-id payments-1\n" +
					"  keel transactions describe --transactional-id payments-1 -o json",
				Flags: adminFlags(
					&cli.StringFlag{Name: "transactional-id", Required: true, Usage: "the producer's transactional.id"},
					outputFlag(),
				),
				Action: withConnectionFlags(transactionsDescribe),
			},
			{
				Name:  "describe-producers",
				Usage: "describe the active producers of a partition at its leader",
				Description: "Like kafka-transactions.sh describe-producers: the idempotent and transactional\n" +
					"producers the partition's leader remembers, printing ProducerId ProducerEpoch\n" +
					"LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset\n" +
					"(\"None\" when the producer has no open transaction there). An old start offset\n" +
					"is a transaction holding back the last stable offset (read_committed consumers).\n" +
					"-o json prints one array of producers; unknown numbers are -1.\n\n" +
					"Examples:\n" +
					"  keel transactions describe-producers --topic orders --partition 0\n" +
					"  keel transactions describe-producers --topic orders --partition 0 -o json",
				Flags: adminFlags(
					&cli.StringFlag{Name: "topic", Required: true, Usage: "topic name"},
					&cli.IntFlag{Name: "partition", Required: true, Usage: "partition number"},
					outputFlag(),
				),
				Action: withConnectionFlags(transactionsDescribeProducers),
			},
		},
	}
}

// withConnectionFlags runs action after handing down the connection flags
// given before the subcommand (kafka-transactions.sh --bootstrap-server b
// list): the subcommand's own flags shadow its parent's, even unset.
func withConnectionFlags(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		lineage := c.Lineage()
		if len(lineage) < 2 {
			return action(c)
		}
		parent := lineage[1]
		for _, name := range []string{"bootstrap-server", "command-config"} {
			if c.IsSet(name) || !parent.IsSet(name) {
				continue
			}
			if err := c.Set(name, parent.String(name)); err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
		}
		return action(c)
	}
}

// printKafkaTable prints rows as kafka-transactions.sh does: every cell
// padded to its column's width and followed by a tab.
func printKafkaTable(w io.Writer, headers []string, rows [][]string) error {
	widths := make([]int, len(headers))
	for i, h := range headers {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], len(cell))
		}
	}
	var b strings.Builder
	for _, r := range append([][]string{headers}, rows...) {
		for i, cell := range r {
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-len(cell)))
			b.WriteByte('\t')
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// orNone is v, or kafka-transactions.sh's "None" for an absent (-1) value.
func orNone(v int64) string {
	if v < 0 {
		return "None"
	}
	return strconv.FormatInt(v, 10)
}

// transactionListJSON is one transaction of `transactions list -o json`.
type transactionListJSON struct {
	TransactionalID  string `json:"transactionalId"`
	Coordinator      int32  `json:"coordinator"`
	ProducerID       int64  `json:"producerId"`
	TransactionState string `json:"transactionState"`
}

func transactionsList(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	filter := client.ListTransactionsFilter{}
	// Kafka's filter keeps transactions running longer than d ms; 0
	// keeps all but those begun this very millisecond, so no filter.
	if d := c.Int64("duration-filter"); d > 0 {
		filter.RunningLongerThan = time.Duration(d) * time.Millisecond
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	listed, err := adm.ListTransactions(ctx, filter)
	if err != nil {
		return fmt.Errorf("failed to list transactions: %w", err)
	}
	if asJSON {
		out := []transactionListJSON{}
		for _, l := range listed {
			out = append(out, transactionListJSON{l.TransactionalID, l.Coordinator, l.ProducerID, l.State})
		}
		return writeJSON(c.App.Writer, out)
	}
	rows := make([][]string, 0, len(listed))
	for _, l := range listed {
		rows = append(rows, []string{l.TransactionalID, strconv.Itoa(int(l.Coordinator)), strconv.FormatInt(l.ProducerID, 10), l.State})
	}
	return printKafkaTable(c.App.Writer, []string{"TransactionalId", "Coordinator", "ProducerId", "TransactionState"}, rows)
}

// topicPartitionJSON is a partition in the JSON outputs.
type topicPartitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// transactionDescribeJSON is `transactions describe -o json`.
type transactionDescribeJSON struct {
	CoordinatorID                 int32                `json:"coordinatorId"`
	TransactionalID               string               `json:"transactionalId"`
	ProducerID                    int64                `json:"producerId"`
	ProducerEpoch                 int16                `json:"producerEpoch"`
	TransactionState              string               `json:"transactionState"`
	TransactionTimeoutMs          int32                `json:"transactionTimeoutMs"`
	CurrentTransactionStartTimeMs int64                `json:"currentTransactionStartTimeMs"`
	TransactionDurationMs         int64                `json:"transactionDurationMs"`
	TopicPartitions               []topicPartitionJSON `json:"topicPartitions"`
}

func transactionsDescribe(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	id := c.String("transactional-id")
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	descs, err := adm.DescribeTransactions(ctx, id)
	if err == nil && descs[0].Err != nil {
		err = descs[0].Err
	}
	if err != nil {
		return fmt.Errorf("failed to describe transaction state of transactional-id `%s`: %w", id, err)
	}
	d := descs[0]
	duration := int64(-1)
	if d.TransactionStartTimeMs >= 0 {
		duration = max(time.Now().UnixMilli()-d.TransactionStartTimeMs, 0)
	}
	if asJSON {
		out := transactionDescribeJSON{CoordinatorID: d.Coordinator, TransactionalID: d.TransactionalID, ProducerID: d.ProducerID,
			ProducerEpoch: d.ProducerEpoch, TransactionState: d.State, TransactionTimeoutMs: d.TransactionTimeoutMs,
			CurrentTransactionStartTimeMs: d.TransactionStartTimeMs, TransactionDurationMs: duration, TopicPartitions: []topicPartitionJSON{}}
		for _, tp := range d.Partitions {
			out.TopicPartitions = append(out.TopicPartitions, topicPartitionJSON{tp.Topic, tp.Partition})
		}
		return writeJSON(c.App.Writer, out)
	}
	parts := make([]string, 0, len(d.Partitions))
	for _, tp := range d.Partitions {
		parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)) // Kafka's TopicPartition.toString
	}
	row := []string{strconv.Itoa(int(d.Coordinator)), d.TransactionalID, strconv.FormatInt(d.ProducerID, 10),
		strconv.Itoa(int(d.ProducerEpoch)), d.State, strconv.Itoa(int(d.TransactionTimeoutMs)),
		orNone(d.TransactionStartTimeMs), orNone(duration), strings.Join(parts, ",")}
	return printKafkaTable(c.App.Writer, []string{"CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
		"TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"},
		[][]string{row})
}

// producerJSON is one producer of `transactions describe-producers -o json`.
type producerJSON struct {
	ProducerID                    int64 `json:"producerId"`
	ProducerEpoch                 int32 `json:"producerEpoch"`
	LatestCoordinatorEpoch        int32 `json:"latestCoordinatorEpoch"`
	LastSequence                  int32 `json:"lastSequence"`
	LastTimestamp                 int64 `json:"lastTimestamp"`
	CurrentTransactionStartOffset int64 `json:"currentTransactionStartOffset"`
}

func transactionsDescribeProducers(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	topic, partition := c.String("topic"), c.Int("partition")
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	failed := func(err error) error {
		return fmt.Errorf("failed to describe producers for partition %s-%d on leader: %w", topic, partition, err)
	}
	// A missing topic or partition fails at once, not after the SDK's
	// retries for metadata that may still be propagating.
	tms, err := adm.DescribeTopics(ctx, topic)
	if err != nil {
		return failed(err)
	}
	if tms[0].Err != nil {
		return failed(tms[0].Err)
	}
	if partition < 0 || partition >= len(tms[0].Partitions) {
		return failed(fmt.Errorf("the topic has %d partitions: %w", len(tms[0].Partitions), client.ErrUnknownTopicOrPartition))
	}
	res, err := adm.DescribeProducers(ctx, topic, int32(partition))
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err != nil {
		return failed(err)
	}
	if asJSON {
		out := []producerJSON{}
		for _, p := range res[0].ActiveProducers {
			out = append(out, producerJSON{p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, p.LastSequence, p.LastTimestamp, p.CurrentTxnStartOffset})
		}
		return writeJSON(c.App.Writer, out)
	}
	rows := make([][]string, 0, len(res[0].ActiveProducers))
	for _, p := range res[0].ActiveProducers {
		rows = append(rows, []string{strconv.FormatInt(p.ProducerID, 10), strconv.Itoa(int(p.ProducerEpoch)),
			strconv.Itoa(int(p.CoordinatorEpoch)), strconv.Itoa(int(p.LastSequence)), strconv.FormatInt(p.LastTimestamp, 10),
			orNone(p.CurrentTxnStartOffset)})
	}
	return printKafkaTable(c.App.Writer, []string{"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
		"LastTimestamp", "CurrentTransactionStartOffset"}, rows)
}
