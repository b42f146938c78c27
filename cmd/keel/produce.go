package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// produceCommand is `keel produce`, kafka-console-producer.sh.
func produceCommand() *cli.Command {
	return &cli.Command{
		Name:  "produce",
		Usage: "write one record per input line to a topic (like kafka-console-producer.sh)",
		Description: "Reads stdin (or --file) and sends each line as one record. The line reader takes\n" +
			"kafka-console-producer.sh's properties:\n" +
			"  parse.key=true          split each line at key.separator (default TAB) into key and value\n" +
			"  key.separator=:         the separator\n" +
			"  parse.headers=true      lines start with headers: h1:v1,h2:v2<TAB>key<SEP>value\n" +
			"  headers.delimiter, headers.separator, headers.key.separator   (TAB , :)\n" +
			"  null.marker=NULL        a key, value or header value equal to it is null\n" +
			"  ignore.error=true       a line without key.separator becomes a keyless record\n" +
			"--header k=v adds a header to every record (simpler than parse.headers).\n" +
			"The command exits 1 if any record could not be written (the first error is printed).\n\n" +
			"Examples:\n" +
			"  echo hello | keel produce --topic orders\n" +
			"  printf 'k1:v1\\nk2:v2\\n' | keel produce --topic orders --property parse.key=true --property key.separator=:\n" +
			"  keel produce --topic orders --file records.txt --acks 1 --compression zstd --header source=batch\n\n" +
			propertiesHelp,
		Flags: []cli.Flag{
			bootstrapFlag(), commandConfigFlag(),
			&cli.StringFlag{Name: "topic", Required: true, Usage: "the topic to write to"},
			&cli.StringFlag{Name: "file", Usage: "read lines from `FILE` instead of stdin"},
			&cli.StringSliceFlag{Name: "property", Aliases: []string{"reader-property"}, Usage: "line reader property `key=value` (repeatable; see above; --reader-property is Kafka 4.2's name)"},
			&cli.StringSliceFlag{Name: "header", Usage: "header `key=value` added to every record (repeatable)"},
			&cli.IntFlag{Name: "partition", Value: -1, Usage: "write every record to this partition (default: the partitioner decides, murmur2 on the key)"},
			&cli.StringFlag{Name: "acks", Aliases: []string{"request-required-acks"}, Value: "all", Usage: "all (-1), 1 or 0"},
			&cli.StringFlag{Name: "compression", Aliases: []string{"compression-codec"}, Value: "none", Usage: "none, gzip, snappy, lz4 or zstd"},
			&cli.StringSliceFlag{Name: "producer-property", Aliases: []string{"command-property"}, Usage: "producer property `key=value` (repeatable; --command-property is Kafka 4.2's name)"},
			&cli.StringFlag{Name: "producer.config", Usage: "producer properties `FILE` (Kafka's name before 4.2; the same as --command-config)"},
			&cli.BoolFlag{Name: "sync", Usage: "wait for each record's acknowledgement before reading the next line"},
		},
		Action: produce,
	}
}

// lineReader turns input lines into records the way Kafka's
// LineMessageReader does.
type lineReader struct {
	topic         string
	parseKey      bool
	keySep        string
	parseHeaders  bool
	headersDelim  string
	headersSep    string
	headerKeySep  string
	nullMarker    string
	ignoreError   bool
	extraHeaders  []client.Header
	partition     int32
	hasNullMarker bool
	lineNo        int
}

func newLineReader(topic string, props map[string]string, headers []string, partition int32) (*lineReader, error) {
	lr := &lineReader{topic: topic, keySep: "\t", headersDelim: "\t", headersSep: ",", headerKeySep: ":", partition: partition}
	for k, v := range props {
		var err error
		switch k {
		case "parse.key":
			lr.parseKey, err = parseBoolProp(k, v)
		case "key.separator":
			lr.keySep = v
		case "parse.headers":
			lr.parseHeaders, err = parseBoolProp(k, v)
		case "headers.delimiter":
			lr.headersDelim = v
		case "headers.separator":
			lr.headersSep = v
		case "headers.key.separator":
			lr.headerKeySep = v
		case "null.marker":
			lr.nullMarker, lr.hasNullMarker = v, true
		case "ignore.error":
			lr.ignoreError, err = parseBoolProp(k, v)
		default:
			return nil, fmt.Errorf("--property %s: unknown line reader property (parse.key, key.separator, parse.headers, headers.delimiter, headers.separator, headers.key.separator, null.marker, ignore.error)", k)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, sep := range []struct{ name, v string }{{"key.separator", lr.keySep}, {"headers.delimiter", lr.headersDelim}, {"headers.separator", lr.headersSep}, {"headers.key.separator", lr.headerKeySep}} {
		if sep.v == "" {
			return nil, fmt.Errorf("--property %s: must not be empty", sep.name)
		}
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--header %q: want key=value", h)
		}
		lr.extraHeaders = append(lr.extraHeaders, client.Header{Key: k, Value: []byte(v)})
	}
	return lr, nil
}

func parseBoolProp(k, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("--property %s=%s: must be true or false", k, v)
}

// nullable returns nil for the null marker, else the bytes of s.
func (lr *lineReader) nullable(s string) []byte {
	if lr.hasNullMarker && s == lr.nullMarker {
		return nil
	}
	return []byte(s)
}

// record parses one line (without its line terminator).
func (lr *lineReader) record(line string) (*client.Record, error) {
	lr.lineNo++
	r := &client.Record{Topic: lr.topic, Partition: lr.partition}
	rest := line
	if lr.parseHeaders {
		hs, after, ok := strings.Cut(rest, lr.headersDelim)
		if !ok {
			if !lr.ignoreError {
				return nil, fmt.Errorf("line %d: no headers delimiter %q found (parse.headers=true)", lr.lineNo, lr.headersDelim)
			}
		} else {
			rest = after
			for _, h := range strings.Split(hs, lr.headersSep) {
				if h == "" {
					continue
				}
				k, v, ok := strings.Cut(h, lr.headerKeySep)
				if !ok {
					if !lr.ignoreError {
						return nil, fmt.Errorf("line %d: header %q has no key separator %q", lr.lineNo, h, lr.headerKeySep)
					}
					continue
				}
				r.Headers = append(r.Headers, client.Header{Key: k, Value: lr.nullable(v)})
			}
		}
	}
	r.Headers = append(r.Headers, lr.extraHeaders...)
	if lr.parseKey {
		k, v, ok := strings.Cut(rest, lr.keySep)
		if !ok {
			if !lr.ignoreError {
				return nil, fmt.Errorf("line %d: no key separator %q found (parse.key=true; ignore.error=true sends such lines without a key)", lr.lineNo, lr.keySep)
			}
			r.Value = lr.nullable(rest)
			return r, nil
		}
		r.Key, r.Value = lr.nullable(k), lr.nullable(v)
		return r, nil
	}
	r.Value = lr.nullable(rest)
	return r, nil
}

// waitForTopic checks the topic exists before reading input, so that an
// unknown topic fails at once with UNKNOWN_TOPIC_OR_PARTITION instead of
// after max.block.ms. It retries briefly: a topic created a moment ago
// may not have reached this broker's metadata yet.
func waitForTopic(ctx context.Context, cl *client.Client, topic string) (*client.TopicMetadata, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		tm, err := cl.TopicMetadata(ctx, topic)
		if err == nil && tm.Err == nil {
			return tm, nil
		}
		if err == nil {
			err = tm.Err
		}
		if !errors.Is(err, client.ErrUnknownTopicOrPartition) || time.Now().After(deadline) {
			return nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		if _, ferr := cl.FetchMetadata(ctx, []string{topic}); ferr != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("topic %s: %w", topic, ctx.Err())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s: %w", topic, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// producerOptions builds a producer's options: --command-config, then
// extra (--producer-property), then --acks and --compression when given
// (their defaults are the SDK's: acks=all, no compression).
func producerOptions(c *cli.Context, extra map[string]string) ([]client.Opt, error) {
	if extra == nil {
		extra = map[string]string{}
	}
	for flag, prop := range map[string]string{"acks": "acks", "compression": "compression.type"} {
		if c.IsSet(flag) {
			extra[prop] = c.String(flag)
		}
	}
	return clientOptions(c, roleProducer, extra)
}

func produce(c *cli.Context) error {
	if err := commandConfigAlias(c, "producer.config"); err != nil {
		return err
	}
	topic := c.String("topic")
	props, err := parseKeyValues("property", c.StringSlice("property"))
	if err != nil {
		return err
	}
	partition := c.Int("partition")
	if partition < -1 {
		return fmt.Errorf("--partition %d: must not be negative", partition)
	}
	lr, err := newLineReader(topic, props, c.StringSlice("header"), int32(partition))
	if err != nil {
		return err
	}
	extra, err := parseKeyValues("producer-property", c.StringSlice("producer-property"))
	if err != nil {
		return err
	}
	opts, err := producerOptions(c, extra)
	if err != nil {
		return err
	}
	if partition >= 0 {
		opts = append(opts, client.WithPartitioner(client.ManualPartitioner()))
	}
	var in io.Reader = c.App.Reader
	if in == nil {
		in = os.Stdin
	}
	if path := c.String("file"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		in = f
	}

	ctx, cancel := commandContext(c)
	defer cancel()
	p, err := client.NewProducer(ctx, opts...)
	if err != nil {
		return connectError(c, err)
	}
	// Close flushes what is buffered; on Ctrl-C it gets a few seconds.
	defer closeWithin(p.Close)
	tm, err := waitForTopic(ctx, p.Client(), topic)
	if err != nil {
		return err
	}
	if partition >= len(tm.Partitions) {
		return fmt.Errorf("--partition %d: topic %s has %d partitions: %w", partition, topic, len(tm.Partitions), client.ErrUnknownTopicOrPartition)
	}

	var (
		mu       sync.Mutex
		failed   int
		firstErr error
		sent     int
	)
	callback := func(r *client.Record, err error) {
		if err == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		failed++
		if firstErr == nil {
			firstErr = fmt.Errorf("produce to %s: %w", topic, err)
			fmt.Fprintf(c.App.ErrWriter, "error: %v\n", firstErr)
		}
	}
	lines, readErr, stopReading := readLines(in)
	defer stopReading()
read:
	for {
		var line string
		select {
		case <-ctx.Done():
			break read
		case l, ok := <-lines:
			if !ok {
				if err := <-readErr; err != nil {
					return fmt.Errorf("read input: %w", err)
				}
				break read
			}
			line = l
		}
		r, err := lr.record(line)
		if err != nil {
			return err
		}
		sent++
		if c.Bool("sync") {
			res := p.ProduceSync(ctx, r)
			callback(r, res.FirstErr())
			continue
		}
		p.Produce(ctx, r, callback)
	}
	// On Ctrl-C (the usual end of an interactive session) what was read is
	// still delivered, as kafka-console-producer's shutdown hook does.
	flushCtx := ctx
	if ctx.Err() != nil {
		var cancelFlush context.CancelFunc
		flushCtx, cancelFlush = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelFlush()
	}
	if err := p.Flush(flushCtx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed; the first: %w", failed, sent, firstErr)
	}
	return nil
}

// readLines reads lines (without their \n or \r\n) from in on a goroutine,
// so that Ctrl-C interrupts a producer waiting for terminal input. After
// lines is closed, readErr holds the read error (nil at EOF). stop makes the
// goroutine exit after its current read; a read blocked on a terminal
// returns only with the next line or at process exit, and the goroutine
// holds nothing but the input.
func readLines(in io.Reader) (lines <-chan string, readErr <-chan error, stop func()) {
	out := make(chan string)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(out)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			select {
			case out <- strings.TrimSuffix(sc.Text(), "\r"):
			case <-done:
				errc <- nil
				return
			}
		}
		errc <- sc.Err()
	}()
	var once sync.Once
	return out, errc, func() { once.Do(func() { close(done) }) }
}
