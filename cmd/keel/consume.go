package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// consumeCommand is `keel consume`, kafka-console-consumer.sh.
func consumeCommand() *cli.Command {
	return &cli.Command{
		Name:  "consume",
		Usage: "print a topic's records (like kafka-console-consumer.sh)",
		Description: "Without --group every partition (or --partition) is read directly, starting at the\n" +
			"end unless --from-beginning, --offset or --timestamp says otherwise; no group is\n" +
			"created. With --group the consumer joins the group, starts at its committed\n" +
			"offsets (--from-beginning: earliest where it has none) and commits what it printed.\n" +
			"It stops after --max-messages, after --timeout-ms without a record (exit 0), or on\n" +
			"Ctrl-C; \"Processed a total of N messages\" goes to stderr.\n\n" +
			"Output: the value, one a line; --property print.key=true, print.timestamp,\n" +
			"print.partition, print.offset, print.headers, print.value=false, key.separator\n" +
			"(TAB), line.separator, headers.separator (,), null.literal (null) as\n" +
			"kafka-console-consumer.sh's DefaultMessageFormatter, and key.deserializer,\n" +
			"value.deserializer and headers.deserializer naming Kafka's Deserializers\n" +
			"(org.apache.kafka.common.serialization.LongDeserializer, IntegerDeserializer,\n" +
			"ShortDeserializer, DoubleDeserializer, FloatDeserializer, UUIDDeserializer,\n" +
			"StringDeserializer, BytesDeserializer, ...: bytes of another size stop the command,\n" +
			"exit 1, as Kafka's SerializationException does; another class is warned about and\n" +
			"the bytes printed as they are, as Kafka does); or -o json: one JSON object a\n" +
			"line with topic, partition, offset, timestamp (ms), key, value and headers (a key,\n" +
			"value or header value that is not UTF-8 is given base64 in key_base64 / value_base64).\n\n" +
			"Examples:\n" +
			"  keel consume --topic orders --from-beginning --max-messages 10\n" +
			"  keel consume --topic orders --from-beginning --property print.key=true --property key.separator=:\n" +
			"  keel consume --topic orders --partition 0 --offset 42 -o json\n" +
			"  keel consume --topic orders --timestamp 2026-11-29T12:00:00Z --timeout-ms 5000\n" +
			"  keel consume --topic orders --group billing --from-beginning --timeout-ms 5000\n" +
			"  keel consume --include 'orders\\..*' --from-beginning --property print.key=true\n" +
			"  keel consume --topic streams-wordcount-output --from-beginning --property print.key=true \\\n" +
			"      --property value.deserializer=org.apache.kafka.common.serialization.LongDeserializer\n\n" +
			propertiesHelp,
		Flags: []cli.Flag{
			bootstrapFlag(), commandConfigFlag(),
			&cli.StringFlag{Name: "topic", Usage: "the topic to read"},
			&cli.StringFlag{Name: "include", Usage: "read every topic whose whole name this regular expression matches, internal topics left out (instead of --topic; the topics are matched when the command starts)"},
			&cli.StringFlag{Name: "group", Usage: "consumer group to join and commit to"},
			&cli.BoolFlag{Name: "from-beginning", Usage: "start at the earliest offset (with --group: where the group has no committed offset)"},
			&cli.StringFlag{Name: "offset", Usage: "start offset: a number (needs --partition), earliest or latest"},
			&cli.IntFlag{Name: "partition", Value: -1, Usage: "read only this partition"},
			&cli.StringFlag{Name: "timestamp", Usage: "start at the first record at or after this time (Unix ms or YYYY-MM-DDTHH:mm:SS[.sss][zone])"},
			&cli.IntFlag{Name: "max-messages", Usage: "exit after this many records (0: no limit)"},
			&cli.IntFlag{Name: "timeout-ms", Usage: "exit when no record arrived for this long (0: wait forever)"},
			&cli.StringFlag{Name: "formatter", Usage: "Kafka's `CLASS`: org.apache.kafka.tools.consumer.DefaultMessageFormatter (the default), NoOpMessageFormatter, or for __consumer_offsets OffsetsMessageFormatter and GroupMetadataMessageFormatter (Kafka 3's names too)"},
			&cli.BoolFlag{Name: "skip-message-on-error", Usage: "a record the formatter cannot print (a deserializer refuses it) is reported on stderr and skipped, instead of stopping the command"},
			&cli.StringSliceFlag{Name: "property", Aliases: []string{"formatter-property"}, Usage: "formatter property `key=value` (repeatable; see above; --formatter-property is Kafka 4.2's name)"},
			&cli.StringFlag{Name: "isolation-level", Value: "read_uncommitted", Usage: "read_uncommitted or read_committed"},
			&cli.StringSliceFlag{Name: "consumer-property", Aliases: []string{"command-property"}, Usage: "consumer property `key=value` (repeatable; --command-property is Kafka 4.2's name)"},
			&cli.StringFlag{Name: "consumer.config", Usage: "consumer properties `FILE` (Kafka's name before 4.2; the same as --command-config)"},
			outputFlag(),
		},
		Action: consume,
	}
}

// messageFormatter prints records like Kafka's DefaultMessageFormatter.
type messageFormatter struct {
	timestamp, key, offset, partition, headers, value bool
	keySep, lineSep, headersSep, nullLiteral          string
	json                                              bool
	// keyDeser, valueDeser and headersDeser are key.deserializer,
	// value.deserializer and headers.deserializer (nil: the bytes).
	keyDeser, valueDeser, headersDeser deserializer
	noOp                               bool     // NoOpMessageFormatter: print nothing
	coordinator                        []int16  // a coordinator formatter: the key types it prints
	warnings                           []string // for stderr: deserializers Keel does not have
}

// recordFormatError is a record the formatter could not print (a
// deserializer refused its bytes, a coordinator record did not decode):
// it stops the command, or is skipped with --skip-message-on-error.
type recordFormatError struct{ err error }

func (e *recordFormatError) Error() string { return e.err.Error() }
func (e *recordFormatError) Unwrap() error { return e.err }

func newMessageFormatter(props map[string]string, asJSON bool) (*messageFormatter, error) {
	f := &messageFormatter{value: true, keySep: "\t", lineSep: "\n", headersSep: ",", nullLiteral: "null", json: asJSON}
	for k, v := range props {
		var err error
		switch k {
		case "print.timestamp":
			f.timestamp, err = parseBoolProp(k, v)
		case "print.key":
			f.key, err = parseBoolProp(k, v)
		case "print.offset":
			f.offset, err = parseBoolProp(k, v)
		case "print.partition":
			f.partition, err = parseBoolProp(k, v)
		case "print.headers":
			f.headers, err = parseBoolProp(k, v)
		case "print.value":
			f.value, err = parseBoolProp(k, v)
		case "key.separator":
			f.keySep = v
		case "line.separator":
			f.lineSep = v
		case "headers.separator":
			f.headersSep = v
		case "null.literal":
			f.nullLiteral = v
		case "key.deserializer", "value.deserializer", "headers.deserializer":
			// A class Keel does not have is reported and the bytes are
			// printed as they are, as Kafka's formatter does with a
			// deserializer it cannot instantiate.
			d, derr := deserializerFor(k, v)
			if derr != nil {
				f.warnings = append(f.warnings, derr.Error()+"; printing the bytes as they are")
			}
			switch k {
			case "key.deserializer":
				f.keyDeser = d
			case "value.deserializer":
				f.valueDeser = d
			default:
				f.headersDeser = d
			}
		default:
			return nil, fmt.Errorf("--property %s: unknown formatter property (print.timestamp, print.key, print.offset, print.partition, print.headers, print.value, key.separator, line.separator, headers.separator, null.literal, key.deserializer, value.deserializer, headers.deserializer)", k)
		}
		if err != nil {
			return nil, err
		}
	}
	return f, nil
}

// recordJSON is one line of consume -o json.
type recordJSON struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"`
	Key         *string      `json:"key"`
	KeyBase64   string       `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 string       `json:"value_base64,omitempty"`
	Headers     []headerJSON `json:"headers"`
}

type headerJSON struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// jsonBytes returns b as a JSON string when it is UTF-8, else in base64.
func jsonBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

func (f *messageFormatter) write(w io.Writer, r *client.Record) error {
	if f.noOp {
		return nil
	}
	// A deserializer that refuses the bytes stops the consumer, as
	// Kafka's SerializationException does.
	var failed error
	deserialized := func(d deserializer, v []byte, what string) []byte {
		if d == nil || v == nil || failed != nil {
			return v
		}
		s, err := d(v)
		if err != nil {
			failed = fmt.Errorf("%s-%d offset %d: %s: %w", r.Topic, r.Partition, r.Offset, what, err)
			return v
		}
		return []byte(s)
	}
	key, value := deserialized(f.keyDeser, r.Key, "key"), deserialized(f.valueDeser, r.Value, "value")
	headers := make([][]byte, len(r.Headers))
	for i, h := range r.Headers {
		headers[i] = deserialized(f.headersDeser, h.Value, "header "+h.Key)
	}
	if failed != nil {
		return &recordFormatError{failed}
	}
	if f.coordinator != nil {
		return writeCoordinatorRecord(w, r, f.coordinator)
	}
	if f.json {
		rj := recordJSON{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Headers: []headerJSON{}}
		rj.Key, rj.KeyBase64 = jsonBytes(key)
		rj.Value, rj.ValueBase64 = jsonBytes(value)
		for i, h := range r.Headers {
			hj := headerJSON{Key: h.Key}
			hj.Value, hj.ValueBase64 = jsonBytes(headers[i])
			rj.Headers = append(rj.Headers, hj)
		}
		return writeJSON(w, rj)
	}
	var b strings.Builder
	sep := func(more bool) {
		if more {
			b.WriteString(f.keySep)
		}
	}
	orNull := func(v []byte) string {
		if v == nil {
			return f.nullLiteral
		}
		return string(v)
	}
	if f.timestamp {
		fmt.Fprintf(&b, "%s:%d", r.TimestampType, r.Timestamp.UnixMilli())
		sep(f.partition || f.offset || f.headers || f.key || f.value)
	}
	if f.partition {
		fmt.Fprintf(&b, "Partition:%d", r.Partition)
		sep(f.offset || f.headers || f.key || f.value)
	}
	if f.offset {
		fmt.Fprintf(&b, "Offset:%d", r.Offset)
		sep(f.headers || f.key || f.value)
	}
	if f.headers {
		if len(r.Headers) == 0 {
			b.WriteString("NO_HEADERS")
		}
		for i, h := range r.Headers {
			if i > 0 {
				b.WriteString(f.headersSep)
			}
			b.WriteString(h.Key + ":" + orNull(headers[i]))
		}
		sep(f.key || f.value)
	}
	if f.key {
		b.WriteString(orNull(key))
		sep(f.value)
	}
	if f.value {
		b.WriteString(orNull(value))
	}
	b.WriteString(f.lineSep)
	_, err := io.WriteString(w, b.String())
	return err
}

// startOffsets resolves where a consumer without a group starts on each
// partition: --offset, --timestamp, --from-beginning, or the end.
func startOffsets(ctx context.Context, c *cli.Context, cl *client.Client, topic string, tm *client.TopicMetadata) (map[int32]int64, error) {
	var parts []int32
	if p := c.Int("partition"); p >= 0 {
		if p >= len(tm.Partitions) {
			return nil, fmt.Errorf("--partition %d: topic %s has %d partitions: %w", p, topic, len(tm.Partitions), client.ErrUnknownTopicOrPartition)
		}
		parts = []int32{int32(p)}
	} else {
		for _, pm := range tm.Partitions {
			parts = append(parts, pm.Partition)
		}
	}
	start := client.OffsetLatest
	switch o := c.String("offset"); {
	case c.Bool("from-beginning"), o == "earliest":
		start = client.OffsetEarliest
	case o == "latest", o == "":
	default:
		n, err := strconv.ParseInt(o, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--offset %q: must be a non-negative number, earliest or latest", o)
		}
		start = n
	}
	out := map[int32]int64{}
	for _, p := range parts {
		out[p] = start
	}
	if !c.IsSet("timestamp") {
		return out, nil
	}
	ts, err := parseTimestamp(c.String("timestamp"))
	if err != nil {
		return nil, fmt.Errorf("--timestamp: %w", err)
	}
	tps := make([]client.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = client.TopicPartition{Topic: topic, Partition: p}
	}
	listed, err := client.NewAdminFromClient(cl).ListPartitionOffsets(ctx, ts, tps...)
	if err != nil {
		return nil, fmt.Errorf("--timestamp: %w", err)
	}
	for _, tp := range tps {
		lo := listed[tp]
		if lo.Err != nil {
			return nil, fmt.Errorf("--timestamp: offset of %s-%d: %w", tp.Topic, tp.Partition, lo.Err)
		}
		if lo.Offset >= 0 {
			out[tp.Partition] = lo.Offset
		} // else no record that new yet: start at the end
	}
	return out, nil
}

// consumeTopics returns the metadata of --topic, or of every topic
// --include matches (internal ones left out, as a Kafka consumer's
// exclude.internal.topics leaves them out of a pattern).
func consumeTopics(ctx context.Context, cl *client.Client, topic, include string, includeRE *regexp.Regexp) (map[string]*client.TopicMetadata, error) {
	if includeRE == nil {
		tm, err := waitForTopic(ctx, cl, topic)
		if err != nil {
			return nil, err
		}
		return map[string]*client.TopicMetadata{topic: tm}, nil
	}
	m, err := cl.FetchMetadata(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]*client.TopicMetadata{}
	for name, tm := range m.Topics {
		if tm.Err == nil && !tm.Internal && includeRE.MatchString(name) {
			out[name] = tm
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no topic matches --include %s", include)
	}
	return out, nil
}

func consume(c *cli.Context) error {
	if err := commandConfigAlias(c, "consumer.config"); err != nil {
		return err
	}
	topic, include, group := c.String("topic"), c.String("include"), c.String("group")
	var includeRE *regexp.Regexp
	switch {
	case (topic == "") == (include == ""):
		return errors.New("exactly one of --include or --topic is required")
	case include != "" && c.IsSet("partition"):
		return errors.New("the topic is required when partition is specified")
	case include != "":
		re, err := regexp.Compile("^(?:" + include + ")$")
		if err != nil {
			return fmt.Errorf("--include %q: %w", include, err)
		}
		includeRE = re
	}
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	props, err := parseKeyValues("property", c.StringSlice("property"))
	if err != nil {
		return err
	}
	format, err := newMessageFormatter(props, asJSON)
	if err != nil {
		return err
	}
	for _, w := range format.warnings {
		fmt.Fprintln(c.App.ErrWriter, "keel: warning:", w)
	}
	switch f := strings.TrimSpace(c.String("formatter")); {
	case f == "", f == "kafka.tools.DefaultMessageFormatter", f == "org.apache.kafka.tools.consumer.DefaultMessageFormatter":
	case asJSON:
		return fmt.Errorf("--formatter %s and -o json: give one", f)
	case f == "kafka.tools.NoOpMessageFormatter", f == "org.apache.kafka.tools.consumer.NoOpMessageFormatter":
		format.noOp = true
	case coordinatorFormatters[f] != nil:
		format.coordinator = coordinatorFormatters[f]
	default:
		return fmt.Errorf("--formatter %s: Keel cannot load Java classes; it has Kafka's DefaultMessageFormatter, NoOpMessageFormatter, "+
			"OffsetsMessageFormatter and GroupMetadataMessageFormatter (org.apache.kafka.tools.consumer)", f)
	}
	maxMessages, idle := c.Int("max-messages"), time.Duration(c.Int("timeout-ms"))*time.Millisecond
	switch {
	case maxMessages < 0:
		return fmt.Errorf("--max-messages %d: must not be negative", maxMessages)
	case idle < 0:
		return fmt.Errorf("--timeout-ms %d: must not be negative", c.Int("timeout-ms"))
	case c.Int("partition") < -1:
		return fmt.Errorf("--partition %d: must not be negative", c.Int("partition"))
	case c.Bool("from-beginning") && (c.IsSet("offset") || c.IsSet("timestamp")):
		return fmt.Errorf("--from-beginning cannot be combined with --offset or --timestamp")
	case c.IsSet("offset") && c.IsSet("timestamp"):
		return fmt.Errorf("--offset and --timestamp are exclusive")
	case group != "" && (c.IsSet("partition") || c.IsSet("offset") || c.IsSet("timestamp")):
		return fmt.Errorf("--partition, --offset and --timestamp assign partitions directly and cannot be used with --group (reset a group's offsets with keel groups reset-offsets)")
	}
	if o := c.String("offset"); o != "" && o != "earliest" && o != "latest" && !c.IsSet("partition") {
		return fmt.Errorf("--offset %s needs --partition (earliest and latest apply to every partition)", o)
	}
	extra, err := parseKeyValues("consumer-property", c.StringSlice("consumer-property"))
	if err != nil {
		return err
	}
	if c.IsSet("isolation-level") {
		extra["isolation.level"] = c.String("isolation-level")
	}
	if _, err := parseIsolation(c.String("isolation-level")); err != nil {
		return fmt.Errorf("--isolation-level: %w", err)
	}
	opts, err := clientOptions(c, roleConsumer, extra)
	if err != nil {
		return err
	}

	ctx, cl, done, err := openClient(c, opts)
	if err != nil {
		return err
	}
	defer done()
	topics, err := consumeTopics(ctx, cl, topic, include, includeRE)
	if err != nil {
		return err
	}

	// The idle timer runs only while the consumer has its partitions: a
	// group's first join can take longer than --timeout-ms.
	var assigned atomic.Bool
	var lastActive atomic.Int64
	touch := func() { lastActive.Store(time.Now().UnixNano()) }
	if maxMessages > 0 && maxMessages < 500 {
		opts = append(opts, client.MaxPollRecords(maxMessages))
	}
	if group != "" {
		opts = append(opts, client.ConsumerGroup(group), client.ConsumeTopics(slices.Sorted(maps.Keys(topics))...), client.AutoCommit(false),
			client.OnRebalance(client.RebalanceListener{OnAssigned: func(map[string][]int32) { assigned.Store(true); touch() }}))
		if c.Bool("from-beginning") {
			opts = append(opts, client.AutoOffsetReset(client.OffsetResetEarliest))
		}
	} else {
		starts := map[string]map[int32]int64{}
		for t, tm := range topics {
			if starts[t], err = startOffsets(ctx, c, cl, t, tm); err != nil {
				return err
			}
		}
		opts = append(opts, client.ConsumePartitions(starts))
		assigned.Store(true)
	}
	cons, err := client.NewConsumerFromClient(ctx, cl, opts...)
	if err != nil {
		return err
	}
	touch()

	pollCtx, stopPolling := context.WithCancelCause(ctx)
	defer stopPolling(nil)
	errIdle := errors.New("idle")
	if idle > 0 {
		watchDone := make(chan struct{})
		defer func() { stopPolling(nil); <-watchDone }()
		go func() {
			defer close(watchDone)
			t := time.NewTicker(min(idle/4+time.Millisecond, 100*time.Millisecond))
			defer t.Stop()
			for {
				select {
				case <-pollCtx.Done():
					return
				case <-t.C:
					if assigned.Load() && time.Since(time.Unix(0, lastActive.Load())) >= idle {
						stopPolling(errIdle)
						return
					}
				}
			}
		}()
	}

	out := bufio.NewWriter(c.App.Writer)
	processed := 0
	// printed is the offset after the last record printed per partition;
	// truncated marks partitions whose returned records were cut by
	// --max-messages (their consumer position is past what was printed).
	printed := map[client.TopicPartition]int64{}
	truncated := map[client.TopicPartition]bool{}
	committed := map[client.TopicPartition]int64{}
	lastCommit := time.Now()
	var runErr error
	// commit stores what was printed, and the positions of assigned
	// partitions nothing was printed from (so that describe shows them
	// with lag 0, as the Java console consumer's auto commit does).
	commit := func() {
		if group == "" {
			return
		}
		offsets := map[string]map[int32]int64{}
		add := func(tp client.TopicPartition, o int64) {
			if prev, ok := committed[tp]; ok && prev == o {
				return
			}
			if offsets[tp.Topic] == nil {
				offsets[tp.Topic] = map[int32]int64{}
			}
			offsets[tp.Topic][tp.Partition] = o
		}
		for t, ps := range cons.Assignment() {
			for _, p := range ps {
				tp := client.TopicPartition{Topic: t, Partition: p}
				if _, ok := printed[tp]; ok || truncated[tp] {
					continue
				}
				if pos, ok := cons.Position(t, p); ok {
					add(tp, pos)
				}
			}
		}
		for tp, o := range printed {
			add(tp, o)
		}
		lastCommit = time.Now()
		if len(offsets) == 0 {
			return
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		if err := cons.CommitOffsetsSync(cctx, offsets); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "warning: commit offsets for group %s: %v\n", group, err)
			return
		}
		for t, ps := range offsets {
			for p, o := range ps {
				committed[client.TopicPartition{Topic: t, Partition: p}] = o
			}
		}
	}
loop:
	for maxMessages == 0 || processed < maxMessages {
		recs, err := cons.Poll(pollCtx)
		if err != nil {
			switch {
			case ctx.Err() != nil || errors.Is(context.Cause(pollCtx), errIdle):
				break loop
			case client.IsRetriable(err):
				fmt.Fprintf(c.App.ErrWriter, "warning: %v\n", err)
				select { // back off: the same error may come straight back
				case <-pollCtx.Done():
				case <-time.After(500 * time.Millisecond):
				}
				continue
			default:
				runErr = fmt.Errorf("consume %s: %w", strings.Join(slices.Sorted(maps.Keys(topics)), ","), err)
				break loop
			}
		}
		for _, r := range recs {
			tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			if maxMessages > 0 && processed >= maxMessages {
				truncated[tp] = true
				continue
			}
			if err := format.write(out, r); err != nil {
				var bad *recordFormatError
				switch {
				case errors.As(err, &bad) && c.Bool("skip-message-on-error"):
					fmt.Fprintf(c.App.ErrWriter, "keel: skipping a record: %v\n", bad.err)
				case errors.As(err, &bad):
					runErr = bad.err
					break loop
				default:
					runErr = fmt.Errorf("write output: %w", err)
					break loop
				}
			}
			processed++
			printed[tp] = r.Offset + 1
		}
		if len(recs) > 0 {
			touch()
			if err := out.Flush(); err != nil {
				runErr = fmt.Errorf("write output: %w", err)
				break
			}
		}
		if time.Since(lastCommit) >= time.Second {
			commit()
		}
	}
	if err := out.Flush(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write output: %w", err)
	}
	commit()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := cons.Close(cctx); err != nil && runErr == nil && !errors.Is(err, client.ErrClosed) {
		fmt.Fprintf(c.App.ErrWriter, "warning: close consumer: %v\n", err)
	}
	fmt.Fprintf(c.App.ErrWriter, "Processed a total of %d messages\n", processed)
	return runErr
}
