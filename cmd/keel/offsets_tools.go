package main

// keel get-offsets (kafka-get-offsets.sh, GetOffsetShell) and keel
// delete-records (kafka-delete-records.sh).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/client"
)

func getOffsetsCommand() *cli.Command {
	return &cli.Command{
		Name:  "get-offsets",
		Usage: "print partitions' offsets at a time: latest, earliest, by timestamp (like kafka-get-offsets.sh)",
		Description: "Prints topic:partition:offset a line, as kafka-get-offsets.sh does, for the\n" +
			"partitions --topic (a regular expression) and --partitions name, or the\n" +
			"--topic-partitions patterns: topic regexes, each with an optional partition, range\n" +
			"(lower inclusive, upper exclusive) or open range: orders:1,payments:0-3,audit:5-,logs:-3.\n" +
			"--time is latest (-1), earliest (-2), max-timestamp (-3: the offset of the record with\n" +
			"the largest timestamp), earliest-local (-4), latest-tiered (-5), or a Unix time in\n" +
			"milliseconds: the first offset at or after it (no line when there is none).\n\n" +
			"Examples:\n" +
			"  keel get-offsets --topic orders --time earliest\n" +
			"  keel get-offsets --topic-partitions 'orders:0-2' --time 1767225600000",
		Flags: adminFlags(
			&cli.StringFlag{Name: "topic", Usage: "a regular expression of the topics (default: all)"},
			&cli.StringFlag{Name: "partitions", Usage: "partition ids, separated by commas (default: all)"},
			&cli.StringFlag{Name: "topic-partitions", Usage: "topic-partition patterns, separated by commas (not with --topic or --partitions)"},
			&cli.StringFlag{Name: "time", Value: "latest", Usage: "latest, earliest, max-timestamp, earliest-local, latest-tiered, their numbers -1 to -5, or a timestamp"},
			&cli.BoolFlag{Name: "exclude-internal-topics", Usage: "leave out internal topics (__consumer_offsets, ...)"},
		),
		Action: getOffsets,
	}
}

// offsetTimes are --time's names and their ListOffsets timestamps.
var offsetTimes = map[string]int64{"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}

// partitionRule is one --topic-partitions pattern: a topic regex and a
// partition range [lo, hi).
type partitionRule struct {
	topic  *regexp.Regexp
	lo, hi int64
}

var partitionPattern = regexp.MustCompile(`^([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?$`)

func parsePartitionRules(spec string) ([]partitionRule, error) {
	var rules []partitionRule
	for _, s := range strings.Split(spec, ",") {
		m := partitionPattern.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("invalid topic-partition pattern %q", s)
		}
		topic := m[1]
		if topic == "" {
			topic = ".*"
		}
		re, err := regexp.Compile("^(?:" + topic + ")$")
		if err != nil {
			return nil, fmt.Errorf("topic pattern %q: %w", m[1], err)
		}
		r := partitionRule{topic: re, lo: 0, hi: 1 << 31}
		num := func(s string, def int64) int64 {
			if s == "" {
				return def
			}
			n, _ := strconv.ParseInt(s, 10, 32) // the pattern allows digits only
			return n
		}
		switch {
		case m[2] != "":
			r.lo = num(m[2], 0)
			r.hi = r.lo + 1
		case m[3] != "" || m[4] != "":
			r.lo, r.hi = num(m[3], 0), num(m[4], 1<<31)
		case strings.Contains(s, ":"):
			return nil, fmt.Errorf("invalid topic-partition pattern %q: a partition, a range or nothing after ':'", s)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func getOffsets(c *cli.Context) error {
	if c.IsSet("topic-partitions") && (c.IsSet("topic") || c.IsSet("partitions")) {
		return errors.New("--topic-partitions cannot be used with --topic or --partitions")
	}
	ts, named := offsetTimes[c.String("time")]
	if !named {
		var err error
		if ts, err = strconv.ParseInt(c.String("time"), 10, 64); err != nil {
			return fmt.Errorf("malformed time argument %s. Please use -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long format timestamp", c.String("time"))
		}
	}
	var rules []partitionRule
	if c.IsSet("topic-partitions") {
		var err error
		if rules, err = parsePartitionRules(c.String("topic-partitions")); err != nil {
			return err
		}
	} else {
		topic := c.String("topic")
		if topic == "" {
			topic = ".*"
		}
		re, err := regexp.Compile("^(?:" + topic + ")$")
		if err != nil {
			return fmt.Errorf("--topic %q: %w", topic, err)
		}
		if c.IsSet("partitions") {
			ids, err := parseIDs("partitions", c.String("partitions"))
			if err != nil {
				return err
			}
			for _, id := range ids {
				rules = append(rules, partitionRule{topic: re, lo: int64(id), hi: int64(id) + 1})
			}
		} else {
			rules = []partitionRule{{topic: re, lo: 0, hi: 1 << 31}}
		}
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	topics, err := adm.ListTopics(ctx, !c.Bool("exclude-internal-topics"))
	if err != nil {
		return err
	}
	var matched []string
	for _, t := range topics {
		if slices.ContainsFunc(rules, func(r partitionRule) bool { return r.topic.MatchString(t) }) {
			matched = append(matched, t)
		}
	}
	var parts []client.TopicPartition
	if len(matched) > 0 {
		mds, err := adm.DescribeTopics(ctx, matched...)
		if err != nil {
			return err
		}
		for _, md := range mds {
			for _, p := range md.Partitions {
				if slices.ContainsFunc(rules, func(r partitionRule) bool {
					return r.topic.MatchString(md.Topic) && int64(p.Partition) >= r.lo && int64(p.Partition) < r.hi
				}) {
					parts = append(parts, client.TopicPartition{Topic: md.Topic, Partition: p.Partition})
				}
			}
		}
	}
	if len(parts) == 0 {
		return errors.New("could not match any topic-partitions with the specified filters")
	}
	offsets, err := adm.ListPartitionOffsets(ctx, ts, parts...)
	if err != nil {
		return err
	}
	// Kafka's order: by "topic-partition" as a string.
	slices.SortFunc(parts, func(a, b client.TopicPartition) int { return strings.Compare(a.String(), b.String()) })
	for _, tp := range parts {
		o := offsets[tp]
		switch {
		case o.Err != nil:
			fmt.Fprintf(c.App.ErrWriter, "Skip getting offsets for topic-partition %s due to error: %v\n", tp.String(), o.Err)
		case o.Offset >= 0:
			fmt.Fprintf(c.App.Writer, "%s:%d:%d\n", tp.Topic, tp.Partition, o.Offset)
		}
	}
	return nil
}

func deleteRecordsCommand() *cli.Command {
	return &cli.Command{
		Name:  "delete-records",
		Usage: "delete the records of partitions below an offset (like kafka-delete-records.sh)",
		Description: "Moves each partition's log start offset up to the offset given (-1: its high\n" +
			"watermark, everything); the records below it are no longer served and their\n" +
			"segments go. The file is kafka-delete-records.sh's:\n\n" +
			"  {\"partitions\":[{\"topic\":\"orders\",\"partition\":0,\"offset\":1000}],\"version\":1}\n\n" +
			"It prints each partition's new low watermark or error, as kafka-delete-records.sh does,\n" +
			"and exits 1 when a partition failed (Kafka's tool exits 0).\n\n" +
			"Example:\n" +
			"  keel delete-records --offset-json-file delete.json",
		Flags: adminFlags(
			&cli.StringFlag{Name: "offset-json-file", Required: true, Usage: "the partitions and offsets: a `FILE` of kafka-delete-records.sh's JSON"},
		),
		Action: deleteRecords,
	}
}

func deleteRecords(c *cli.Context) error {
	path := c.String("offset-json-file")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var raw struct {
		Version    *int `json:"version"`
		Partitions []struct {
			Topic     *string `json:"topic"`
			Partition *int32  `json:"partition"`
			Offset    *int64  `json:"offset"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if raw.Version != nil && *raw.Version != 1 {
		return fmt.Errorf("not supported version field value %d", *raw.Version)
	}
	before := map[client.TopicPartition]int64{}
	var dup []string
	for _, p := range raw.Partitions {
		if p.Topic == nil || p.Partition == nil || p.Offset == nil {
			return fmt.Errorf("%s: each partition needs \"topic\", \"partition\" and \"offset\"", path)
		}
		tp := client.TopicPartition{Topic: *p.Topic, Partition: *p.Partition}
		if _, seen := before[tp]; seen {
			dup = append(dup, tp.String())
		}
		before[tp] = *p.Offset
	}
	if len(dup) > 0 {
		return fmt.Errorf("offset json file contains duplicate topic partitions: %s", strings.Join(dup, ","))
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	w := c.App.Writer
	fmt.Fprintln(w, "Executing records delete operation")
	res, err := adm.DeleteRecords(ctx, before)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "Records delete operation completed:")
	failed := 0
	for _, tp := range sortedTPs(res) {
		if r := res[tp]; r.Err != nil {
			failed++
			fmt.Fprintf(w, "partition: %s\terror: %v\n", tp.String(), r.Err)
		} else {
			fmt.Fprintf(w, "partition: %s\tlow_watermark: %d\n", tp.String(), r.LowWatermark)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d partition%s failed", failed, plural(failed))
	}
	return nil
}
