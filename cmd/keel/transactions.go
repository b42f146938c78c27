package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// transactionsCommand is `keel transactions`, kafka-transactions.sh: list,
// describe, describe-producers, and find-hanging and abort for hanging
// transactions (KIP-664), with its columns.
func transactionsCommand() *cli.Command {
	return &cli.Command{
		Name:  "transactions",
		Usage: "list and describe transactions and the producers of a partition, find and abort hanging transactions (like kafka-transactions.sh)",
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
					"--duration-filter keeps transactions open longer than that many ms (KIP-994).\n" +
					"--transactional-id-pattern keeps transactional ids the regular expression is\n" +
					"found in (RE2 syntax, KIP-1152; anchor it with ^ and $ for a whole id).\n\n" +
					"Examples:\n" +
					"  keel transactions list\n" +
					"  keel transactions --bootstrap-server b:9092 list --duration-filter 60000\n" +
					"  keel transactions list --transactional-id-pattern '^payments-'\n" +
					"  keel transactions list -o json",
				Flags: adminFlags(
					&cli.Int64Flag{Name: "duration-filter", Value: -1, Usage: "only transactions open longer than this many `MS`"},
					&cli.StringFlag{Name: "transactional-id-pattern", Usage: "only transactional ids this regular expression `RE` is found in"},
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
			{
				Name:  "abort",
				Usage: "abort a hanging transaction on one partition (requires administrative privileges)",
				Description: "Like kafka-transactions.sh abort (KIP-664): writes the ABORT marker the\n" +
					"transaction coordinator never will, so the partition's last stable offset moves\n" +
					"on and read_committed consumers read past the transaction's records.\n" +
					"--start-offset names the transaction by where it starts (find-hanging's\n" +
					"StartOffset, describe-producers' CurrentTransactionStartOffset): the producer,\n" +
					"producer epoch and coordinator epoch are read from the partition's leader.\n" +
					"Or give them yourself: --producer-id, --producer-epoch and --coordinator-epoch\n" +
					"(a negative coordinator epoch is sent as 0, as Kafka does).\n" +
					"Abort only a transaction find-hanging reports: the producer loses it.\n\n" +
					"Examples:\n" +
					"  keel transactions abort --topic orders --partition 0 --start-offset 4711\n" +
					"  keel transactions abort --topic orders --partition 0 --producer-id 3000 \\\n" +
					"      --producer-epoch 2 --coordinator-epoch 5",
				Flags: adminFlags(
					&cli.StringFlag{Name: "topic", Required: true, Usage: "topic name"},
					&cli.IntFlag{Name: "partition", Required: true, Usage: "partition number"},
					&cli.Int64Flag{Name: "start-offset", Usage: "start `OFFSET` of the transaction to abort", DefaultText: "none"},
					&cli.Int64Flag{Name: "producer-id", Usage: "producer `ID` (with --producer-epoch and --coordinator-epoch)", DefaultText: "none"},
					&cli.IntFlag{Name: "producer-epoch", Usage: "producer `EPOCH`", DefaultText: "none"},
					&cli.IntFlag{Name: "coordinator-epoch", Usage: "coordinator `EPOCH`", DefaultText: "none"},
					outputFlag(),
				),
				Action: withConnectionFlags(transactionsAbort),
			},
			{
				Name:  "find-hanging",
				Usage: "find hanging transactions: open on a partition, unknown to their coordinator",
				Description: "Like kafka-transactions.sh find-hanging (KIP-664): asks the leaders of the\n" +
					"partitions (the topic's, or those --broker-id leads) for producers whose open\n" +
					"transaction's last write is older than --max-transaction-timeout minutes, then\n" +
					"asks the transaction coordinators: a transaction hangs when no coordinator\n" +
					"knows its producer id, or its coordinator's transaction no longer includes the\n" +
					"partition (not Ongoing or Prepare*, another producer id, an older epoch).\n" +
					"Nothing will ever write its marker; it holds back the last stable offset.\n" +
					"Prints Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset\n" +
					"LastTimestamp Duration(min); end one with abort --start-offset.\n" +
					"-o json prints one array.\n\n" +
					"Examples:\n" +
					"  keel transactions find-hanging --broker-id 1\n" +
					"  keel transactions find-hanging --topic orders --partition 0 --max-transaction-timeout 60\n" +
					"  keel transactions find-hanging --topic orders -o json",
				Flags: adminFlags(
					&cli.IntFlag{Name: "broker-id", Usage: "search the partitions this broker `ID` leads", DefaultText: "none"},
					&cli.StringFlag{Name: "topic", Usage: "topic name to limit the search to"},
					&cli.IntFlag{Name: "partition", Usage: "partition number (with --topic)", DefaultText: "all"},
					&cli.IntFlag{Name: "max-transaction-timeout", Value: 15,
						Usage: "the longest transaction.timeout.ms of your producers, in `MINUTES`: only older transactions are checked"},
					outputFlag(),
				),
				Action: withConnectionFlags(transactionsFindHanging),
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
	filter.TransactionalIDPattern = c.String("transactional-id-pattern")
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
		parts = append(parts, tp.String())
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
	producers, err := partitionProducers(ctx, adm, topic, partition)
	if err != nil {
		return failed(err)
	}
	if asJSON {
		out := []producerJSON{}
		for _, p := range producers {
			out = append(out, producerJSON{p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, p.LastSequence, p.LastTimestamp, p.CurrentTxnStartOffset})
		}
		return writeJSON(c.App.Writer, out)
	}
	rows := make([][]string, 0, len(producers))
	for _, p := range producers {
		rows = append(rows, []string{strconv.FormatInt(p.ProducerID, 10), strconv.Itoa(int(p.ProducerEpoch)),
			strconv.Itoa(int(p.CoordinatorEpoch)), strconv.Itoa(int(p.LastSequence)), strconv.FormatInt(p.LastTimestamp, 10),
			orNone(p.CurrentTxnStartOffset)})
	}
	return printKafkaTable(c.App.Writer, []string{"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
		"LastTimestamp", "CurrentTransactionStartOffset"}, rows)
}

// abortJSON is `transactions abort -o json`: the marker written.
type abortJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producerId"`
	ProducerEpoch    int16  `json:"producerEpoch"`
	CoordinatorEpoch int32  `json:"coordinatorEpoch"`
}

func transactionsAbort(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	topic, partition := c.String("topic"), c.Int("partition")
	byOffset, byProducer := c.IsSet("start-offset"), c.IsSet("producer-id")
	switch {
	case !byOffset && !byProducer:
		return fmt.Errorf("the transaction to abort must be identified either with --start-offset " +
			"or with --producer-id, --producer-epoch and --coordinator-epoch")
	case byOffset && byProducer:
		// Kafka's tool would silently take --start-offset; an abort
		// should not guess which of two transactions was meant.
		return fmt.Errorf("--start-offset and --producer-id both name the transaction to abort: give one")
	case byProducer && !c.IsSet("producer-epoch"):
		return fmt.Errorf("missing required argument --producer-epoch")
	case byProducer && !c.IsSet("coordinator-epoch"):
		return fmt.Errorf("missing required argument --coordinator-epoch")
	}
	spec := client.AbortTransactionSpec{Topic: topic, Partition: int32(partition)}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	if byProducer {
		epoch, coordEpoch := c.Int("producer-epoch"), c.Int("coordinator-epoch")
		if epoch < 0 || epoch > math.MaxInt16 {
			return fmt.Errorf("--producer-epoch %d: must be 0 to %d", epoch, math.MaxInt16)
		}
		spec.ProducerID, spec.ProducerEpoch, spec.CoordinatorEpoch = c.Int64("producer-id"), int16(epoch), int32(max(coordEpoch, 0))
	} else {
		start := c.Int64("start-offset")
		tp := fmt.Sprintf("%s-%d", topic, partition)
		failed := func(err error) error {
			return fmt.Errorf("failed to validate producer state for partition %s: %w", tp, err)
		}
		producers, err := partitionProducers(ctx, adm, topic, partition)
		if err != nil {
			return failed(err)
		}
		i := slices.IndexFunc(producers, func(p client.ProducerState) bool { return p.CurrentTxnStartOffset == start })
		if start < 0 || i < 0 {
			return fmt.Errorf("could not find any open transactions starting at offset %d on partition %s", start, tp)
		}
		p := producers[i]
		// A producer that never had a marker here reports coordinator
		// epoch -1; Kafka sends 0, which no leader's epoch is below.
		spec.ProducerID, spec.ProducerEpoch, spec.CoordinatorEpoch = p.ProducerID, int16(p.ProducerEpoch), max(p.CoordinatorEpoch, 0)
	}
	if err := adm.AbortTransaction(ctx, spec); err != nil {
		return fmt.Errorf("failed to abort transaction of producer %d (producer epoch %d, coordinator epoch %d) on %s-%d: %w",
			spec.ProducerID, spec.ProducerEpoch, spec.CoordinatorEpoch, topic, partition, err)
	}
	if asJSON {
		return writeJSON(c.App.Writer, abortJSON{topic, spec.Partition, spec.ProducerID, spec.ProducerEpoch, spec.CoordinatorEpoch})
	}
	_, err = fmt.Fprintf(c.App.Writer, "Aborted the transaction of producer %d (producer epoch %d, coordinator epoch %d) on %s-%d.\n",
		spec.ProducerID, spec.ProducerEpoch, spec.CoordinatorEpoch, topic, partition)
	return err
}

// partitionProducers is DescribeProducers of one partition at its leader,
// failing at once for a partition that does not exist.
func partitionProducers(ctx context.Context, adm *client.Admin, topic string, partition int) ([]client.ProducerState, error) {
	if err := checkPartitionExists(ctx, adm, topic, partition); err != nil {
		return nil, err
	}
	res, err := adm.DescribeProducers(ctx, topic, int32(partition))
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return res[0].ActiveProducers, nil
}

// checkPartitionExists fails at once for a missing topic or partition,
// rather than after the SDK's retries for metadata still propagating.
func checkPartitionExists(ctx context.Context, adm *client.Admin, topic string, partition int) error {
	tms, err := adm.DescribeTopics(ctx, topic)
	if err != nil {
		return err
	}
	if tms[0].Err != nil {
		return tms[0].Err
	}
	if partition < 0 || partition >= len(tms[0].Partitions) {
		return fmt.Errorf("the topic has %d partitions: %w", len(tms[0].Partitions), client.ErrUnknownTopicOrPartition)
	}
	return nil
}

// hangingJSON is one transaction of `transactions find-hanging -o json`.
type hangingJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producerId"`
	ProducerEpoch    int32  `json:"producerEpoch"`
	CoordinatorEpoch int32  `json:"coordinatorEpoch"`
	StartOffset      int64  `json:"startOffset"`
	LastTimestamp    int64  `json:"lastTimestamp"`
	DurationMinutes  int64  `json:"durationMinutes"`
}

// openTransaction is a producer's open transaction on one partition.
type openTransaction struct {
	client.TopicPartition
	client.ProducerState
}

func transactionsFindHanging(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	hasBroker, hasTopic := c.IsSet("broker-id"), c.IsSet("topic")
	if !hasBroker && !hasTopic {
		return fmt.Errorf("the `find-hanging` command requires either --topic or --broker-id to limit the scope of the search")
	}
	if c.IsSet("partition") && !hasTopic {
		return fmt.Errorf("the --partition argument requires --topic to be provided")
	}
	if c.Int("max-transaction-timeout") < 0 {
		return fmt.Errorf("--max-transaction-timeout %d: must not be negative", c.Int("max-transaction-timeout"))
	}
	maxTimeout := time.Duration(c.Int("max-transaction-timeout")) * time.Minute
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()

	parts, err := partitionsToSearch(ctx, c, adm)
	if err != nil {
		return err
	}
	candidates, err := candidateOpenTransactions(ctx, adm, parts, maxTimeout)
	if err != nil {
		return err
	}
	hanging, err := filterHanging(ctx, adm, candidates)
	if err != nil {
		return err
	}

	now := time.Now().UnixMilli()
	durationMinutes := func(t openTransaction) int64 { return (now - t.LastTimestamp) / time.Minute.Milliseconds() }
	if asJSON {
		out := []hangingJSON{}
		for _, t := range hanging {
			out = append(out, hangingJSON{t.Topic, t.Partition, t.ProducerID, t.ProducerEpoch, t.CoordinatorEpoch,
				t.CurrentTxnStartOffset, t.LastTimestamp, durationMinutes(t)})
		}
		return writeJSON(c.App.Writer, out)
	}
	rows := make([][]string, 0, len(hanging))
	for _, t := range hanging {
		rows = append(rows, []string{t.Topic, strconv.Itoa(int(t.Partition)), strconv.FormatInt(t.ProducerID, 10),
			strconv.Itoa(int(t.ProducerEpoch)), strconv.Itoa(int(t.CoordinatorEpoch)), strconv.FormatInt(t.CurrentTxnStartOffset, 10),
			strconv.FormatInt(t.LastTimestamp, 10), strconv.FormatInt(durationMinutes(t), 10)})
	}
	return printKafkaTable(c.App.Writer, []string{"Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
		"StartOffset", "LastTimestamp", "Duration(min)"}, rows)
}

// partitionsToSearch are find-hanging's partitions by topic: --topic's
// (one with --partition), else every non-internal topic's (Kafka's
// listTopics), keeping those --broker-id leads when it is given.
func partitionsToSearch(ctx context.Context, c *cli.Context, adm *client.Admin) (map[string][]int32, error) {
	topics := []string{c.String("topic")}
	if !c.IsSet("topic") {
		var err error
		if topics, err = adm.ListTopics(ctx, false); err != nil {
			return nil, fmt.Errorf("failed to list topics: %w", err)
		}
		if len(topics) == 0 {
			return nil, nil
		}
	}
	tms, err := adm.DescribeTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("failed to describe %d topics: %w", len(topics), err)
	}
	out := map[string][]int32{}
	for _, tm := range tms {
		if tm.Err != nil {
			return nil, fmt.Errorf("failed to describe topic %s: %w", tm.Topic, tm.Err)
		}
		if c.IsSet("partition") {
			p := c.Int("partition")
			if p < 0 || p >= len(tm.Partitions) {
				return nil, fmt.Errorf("failed to describe partition %s-%d: the topic has %d partitions: %w",
					tm.Topic, p, len(tm.Partitions), client.ErrUnknownTopicOrPartition)
			}
			out[tm.Topic] = []int32{int32(p)}
			continue
		}
		for _, p := range tm.Partitions {
			// Keel asks leaders only: a follower's producer state may lag
			// the leader's (Kafka's --broker-id asks every replica).
			if !c.IsSet("broker-id") || p.Leader == int32(c.Int("broker-id")) {
				out[tm.Topic] = append(out[tm.Topic], p.Partition)
			}
		}
	}
	return out, nil
}

// candidateOpenTransactions are the open transactions on parts whose
// producer last wrote there more than maxTimeout ago: Kafka's
// collectCandidateOpenTransactions, which measures from the producer's
// LastTimestamp, sorted by topic, partition and producer id.
func candidateOpenTransactions(ctx context.Context, adm *client.Admin, parts map[string][]int32, maxTimeout time.Duration) ([]openTransaction, error) {
	var out []openTransaction
	topics := make([]string, 0, len(parts))
	for t := range parts {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		if len(parts[topic]) == 0 {
			continue
		}
		res, err := adm.DescribeProducers(ctx, topic, parts[topic]...)
		if err != nil {
			return nil, fmt.Errorf("failed to describe producers for %d partitions of %s: %w", len(parts[topic]), topic, err)
		}
		now := time.Now().UnixMilli()
		for _, pp := range res {
			if pp.Err != nil {
				return nil, fmt.Errorf("failed to describe producers for partition %s-%d: %w", pp.Topic, pp.Partition, pp.Err)
			}
			for _, ps := range pp.ActiveProducers {
				if ps.CurrentTxnStartOffset >= 0 && now-ps.LastTimestamp > maxTimeout.Milliseconds() {
					out = append(out, openTransaction{pp.TopicPartition, ps})
				}
			}
		}
	}
	return out, nil
}

// filterHanging keeps the candidates no coordinator will ever end
// (Kafka's filterHangingTransactions): their producer id is not listed by
// any coordinator, its transactional id is not found, or the
// coordinator's transaction does not include the partition: not Ongoing
// or Prepare*, or another producer id, or an epoch older than the
// partition's (its markers would be refused). A newer epoch at the
// coordinator is not hanging: a coordinator aborting a timed-out
// transaction bumps the epoch, and its marker ends the older one.
func filterHanging(ctx context.Context, adm *client.Admin, candidates []openTransaction) ([]openTransaction, error) {
	if len(candidates) == 0 {
		return nil, nil
	}
	var pids []int64
	for _, t := range candidates {
		pids = append(pids, t.ProducerID)
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	listed, err := adm.ListTransactions(ctx, client.ListTransactionsFilter{ProducerIDs: pids})
	if err != nil {
		return nil, fmt.Errorf("failed to list transactions for %d producers: %w", len(pids), err)
	}
	txnIDs := map[int64]string{}
	var ids []string
	for _, l := range listed {
		if slices.Contains(pids, l.ProducerID) {
			txnIDs[l.ProducerID] = l.TransactionalID
			ids = append(ids, l.TransactionalID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	descs := map[string]client.TransactionDescription{}
	if len(ids) > 0 {
		ds, err := adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			return nil, fmt.Errorf("failed to describe %d transactions: %w", len(ids), err)
		}
		for _, d := range ds {
			switch {
			case d.Err == nil:
				descs[d.TransactionalID] = d
			case !errors.Is(d.Err, client.ErrorForCode(transactionalIDNotFound)):
				return nil, fmt.Errorf("failed to describe transaction %s: %w", d.TransactionalID, d.Err)
			}
		}
	}
	var hanging []openTransaction
	for _, t := range candidates {
		d, known := descs[txnIDs[t.ProducerID]]
		ongoing := known && (d.State == "Ongoing" || strings.HasPrefix(d.State, "Prepare")) &&
			d.ProducerID == t.ProducerID && int32(d.ProducerEpoch) >= t.ProducerEpoch && slices.Contains(d.Partitions, t.TopicPartition)
		if !ongoing {
			hanging = append(hanging, t)
		}
	}
	return hanging, nil
}

// transactionalIDNotFound is TRANSACTIONAL_ID_NOT_FOUND: the coordinator
// forgot the id (expired), so the transaction hangs.
const transactionalIDNotFound = 105
