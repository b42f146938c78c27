package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// logDirsCommand is `keel log-dirs`: kafka-log-dirs.sh's --describe, and
// the move of replicas between a broker's log dirs that
// kafka-reassign-partitions.sh makes for a reassignment's "log_dirs".
func logDirsCommand() *cli.Command {
	return &cli.Command{
		Name:  "log-dirs",
		Usage: "describe brokers' log dirs and move replicas between a broker's log dirs (like kafka-log-dirs.sh)",
		Description: "A broker with several log.dirs (JBOD) spreads new partitions over them; a replica\n" +
			"can be moved to another of its broker's dirs while it serves (KIP-113): the broker\n" +
			"copies it into a future replica in the destination and swaps it in once it has\n" +
			"caught up. replica.alter.log.dirs.io.max.bytes.per.second (a dynamic broker config,\n" +
			"keel configs alter --entity-type brokers) bounds the copy.",
		Subcommands: []*cli.Command{
			{
				Name:  "describe",
				Usage: "list each broker's log dirs and the replicas in them",
				Description: "Like kafka-log-dirs.sh --describe; -o json prints its JSON. A replica being moved\n" +
					"into a dir shows as a future one, its lag the offsets it still has to copy.\n\n" +
					"Examples:\n" +
					"  keel log-dirs describe\n" +
					"  keel log-dirs describe --broker-list 1,2 --topic-list orders -o json",
				Flags: adminFlags(
					&cli.StringFlag{Name: "broker-list", Usage: "brokers to describe, separated by commas (default: all)"},
					&cli.StringFlag{Name: "topic-list", Usage: "topics to show, separated by commas (default: all)"},
					outputFlag(),
				),
				Action: logDirsDescribe,
			},
			{
				Name:  "move",
				Usage: "move a broker's replicas of a topic to another of its log dirs",
				Description: "Sends AlterReplicaLogDirs, as kafka-reassign-partitions.sh does for the \"log_dirs\"\n" +
					"of a reassignment. Without --partition, every replica of the topic the broker\n" +
					"hosts moves. With --wait it reports progress until every move completes.\n" +
					"Moving a replica to the dir it is in cancels a move under way.\n\n" +
					"Examples:\n" +
					"  keel log-dirs move --broker 1 --dir /data/disk2 --topic orders --wait\n" +
					"  keel log-dirs move --broker 1 --dir /data/disk2 --topic orders --partition 3",
				Flags: adminFlags(
					&cli.IntFlag{Name: "broker", Required: true, Usage: "the broker whose replicas move"},
					&cli.StringFlag{Name: "dir", Required: true, Usage: "the destination: one of the broker's log.dirs, as an absolute path"},
					&cli.StringFlag{Name: "topic", Required: true, Usage: "the topic"},
					&cli.IntSliceFlag{Name: "partition", Usage: "a partition to move (repeatable; default: every one on the broker)"},
					&cli.BoolFlag{Name: "wait", Usage: "wait until the moves complete, reporting their progress"},
				),
				Action: logDirsMove,
			},
		},
	}
}

// parseIDs parses a comma-separated list of ids.
func parseIDs(flag, s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is not a broker id", flag, f)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func logDirsDescribe(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	brokers, err := parseIDs("broker-list", c.String("broker-list"))
	if err != nil {
		return err
	}
	var topics []string
	for _, t := range strings.Split(c.String("topic-list"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	if len(brokers) == 0 {
		cluster, err := adm.DescribeCluster(ctx)
		if err != nil {
			return err
		}
		for _, b := range cluster.Brokers {
			brokers = append(brokers, b.NodeID)
		}
		slices.Sort(brokers)
	}
	// Kafka's JSON (LogDirsCommand.formatAsJson).
	type jsonReplica struct {
		Partition string `json:"partition"`
		Size      int64  `json:"size"`
		OffsetLag int64  `json:"offsetLag"`
		IsFuture  bool   `json:"isFuture"`
	}
	type jsonDir struct {
		LogDir     string        `json:"logDir"`
		Error      *string       `json:"error"`
		Partitions []jsonReplica `json:"partitions"`
	}
	type jsonBroker struct {
		Broker  int32     `json:"broker"`
		LogDirs []jsonDir `json:"logDirs"`
	}
	out := struct {
		Version int          `json:"version"`
		Brokers []jsonBroker `json:"brokers"`
	}{Version: 1, Brokers: []jsonBroker{}}
	var errs []error
	w := c.App.Writer
	for _, b := range brokers {
		dirs, err := adm.DescribeLogDirs(ctx, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		jb := jsonBroker{Broker: b, LogDirs: []jsonDir{}}
		for _, d := range dirs {
			jd := jsonDir{LogDir: d.Dir, Partitions: []jsonReplica{}}
			state := fmt.Sprintf("Total: %s\tUsable: %s", bytesOrUnknown(d.TotalBytes), bytesOrUnknown(d.UsableBytes))
			if d.Err != nil {
				msg := d.Err.Error()
				jd.Error, state = &msg, "Error: "+msg
			}
			if !asJSON {
				fmt.Fprintf(w, "Broker: %d\tLogDir: %s\t%s\n", b, d.Dir, state)
			}
			for _, r := range d.Replicas {
				if len(topics) > 0 && !slices.Contains(topics, r.Topic) {
					continue
				}
				name := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
				jd.Partitions = append(jd.Partitions, jsonReplica{name, r.Size, r.OffsetLag, r.IsFuture})
				if !asJSON {
					future := ""
					if r.IsFuture {
						future = "\tFuture: true"
					}
					fmt.Fprintf(w, "\tPartition: %s\tSize: %d\tOffsetLag: %d%s\n", name, r.Size, r.OffsetLag, future)
				}
			}
			jb.LogDirs = append(jb.LogDirs, jd)
		}
		out.Brokers = append(out.Brokers, jb)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// bytesOrUnknown prints a byte count, or "unknown" for a broker's -1.
func bytesOrUnknown(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}

func logDirsMove(c *cli.Context) error {
	broker, dir, topic := int32(c.Int("broker")), c.String("dir"), c.String("topic")
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	var parts []client.TopicPartition
	for _, p := range c.IntSlice("partition") {
		parts = append(parts, client.TopicPartition{Topic: topic, Partition: int32(p)})
	}
	if len(parts) == 0 {
		dirs, err := adm.DescribeLogDirs(ctx, broker)
		if err != nil {
			return err
		}
		hosted := 0
		for _, d := range dirs {
			for _, r := range d.Replicas {
				if r.Topic != topic || r.IsFuture {
					continue
				}
				hosted++
				if filepath.Clean(d.Dir) == filepath.Clean(dir) {
					fmt.Fprintf(c.App.Writer, "%s-%d on broker %d is in %s already\n", topic, r.Partition, broker, d.Dir)
					continue
				}
				parts = append(parts, client.TopicPartition{Topic: topic, Partition: r.Partition})
			}
		}
		if hosted == 0 {
			return fmt.Errorf("broker %d hosts no replica of %s", broker, topic)
		}
	}
	res, err := adm.AlterReplicaLogDirs(ctx, broker, dir, parts...)
	if err != nil {
		return err
	}
	var errs []error
	var moving []client.TopicPartition
	for _, tp := range parts {
		if e := res[tp]; e != nil {
			errs = append(errs, fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, e))
			continue
		}
		moving = append(moving, tp)
		fmt.Fprintf(c.App.Writer, "Moving %s-%d on broker %d to %s\n", tp.Topic, tp.Partition, broker, dir)
	}
	if c.Bool("wait") && len(moving) > 0 {
		errs = append(errs, waitMoves(ctx, c, adm, broker, moving))
	}
	return errors.Join(errs...)
}

// waitMoves polls the broker's log dirs until none of parts has a future
// replica left, printing the offsets still to copy every few seconds.
func waitMoves(ctx context.Context, c *cli.Context, adm *client.Admin, broker int32, parts []client.TopicPartition) error {
	last := time.Time{}
	for {
		dirs, err := adm.DescribeLogDirs(ctx, broker)
		if err != nil {
			return err
		}
		var lag int64
		left := 0
		for _, d := range dirs {
			for _, r := range d.Replicas {
				if r.IsFuture && slices.Contains(parts, client.TopicPartition{Topic: r.Topic, Partition: r.Partition}) {
					left++
					lag += r.OffsetLag
				}
			}
		}
		if left == 0 {
			fmt.Fprintf(c.App.Writer, "Moved %d replicas\n", len(parts))
			return nil
		}
		if time.Since(last) >= 5*time.Second {
			fmt.Fprintf(c.App.Writer, "%d of %d replicas still moving, %d offsets to copy\n", left, len(parts), lag)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
