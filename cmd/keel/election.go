package main

// keel leader-election: kafka-leader-election.sh.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/client"
)

func leaderElectionCommand() *cli.Command {
	return &cli.Command{
		Name:  "leader-election",
		Usage: "move partitions' leadership to their preferred replicas, or elect leaders uncleanly (like kafka-leader-election.sh)",
		Description: "--election-type preferred moves a partition's leadership to its preferred replica\n" +
			"(the first of its replicas) where that replica is in the ISR and does not lead;\n" +
			"unclean elects a replica out of the ISR for a partition without a leader, losing\n" +
			"the records only the ISR had. Name the partitions with --all-topic-partitions,\n" +
			"--topic and --partition, or --path-to-json-file:\n\n" +
			"  {\"partitions\":[{\"topic\":\"orders\",\"partition\":1},{\"topic\":\"payments\",\"partition\":0}]}\n\n" +
			"Examples:\n" +
			"  keel leader-election --election-type preferred --all-topic-partitions\n" +
			"  keel leader-election --election-type unclean --topic orders --partition 3",
		Flags: adminFlags(
			&cli.StringFlag{Name: "election-type", Required: true, Usage: "preferred or unclean"},
			&cli.BoolFlag{Name: "all-topic-partitions", Usage: "every partition the election type applies to"},
			&cli.StringFlag{Name: "topic", Usage: "the topic of the partition to elect a leader for (with --partition)"},
			&cli.IntFlag{Name: "partition", Value: -1, Usage: "the partition (with --topic)"},
			&cli.StringFlag{Name: "path-to-json-file", Usage: "a `FILE` listing the partitions: {\"partitions\":[{\"topic\":\"t\",\"partition\":0}]}"},
		),
		Action: leaderElection,
	}
}

func leaderElection(c *cli.Context) error {
	var typ client.ElectionType
	switch strings.ToLower(c.String("election-type")) {
	case "preferred":
		typ = client.PreferredElection
	case "unclean":
		typ = client.UncleanElection
	default:
		return fmt.Errorf("--election-type %q: preferred or unclean", c.String("election-type"))
	}
	given := 0
	for _, f := range []string{"all-topic-partitions", "topic", "path-to-json-file"} {
		if c.IsSet(f) {
			given++
		}
	}
	if given != 1 {
		return errors.New("one and only one of the following options is required: --all-topic-partitions, --topic, --path-to-json-file")
	}
	var parts []client.TopicPartition
	switch {
	case c.IsSet("topic"):
		if c.Int("partition") < 0 {
			return errors.New("--partition is required with --topic")
		}
		parts = []client.TopicPartition{{Topic: c.String("topic"), Partition: int32(c.Int("partition"))}}
	case c.IsSet("path-to-json-file"):
		var err error
		if parts, err = readElectionPartitions(c.String("path-to-json-file")); err != nil {
			return err
		}
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.ElectLeaders(ctx, typ, parts...)
	if err != nil {
		return err
	}
	var elected, noop, failed []string
	for _, tp := range sortedTPs(res) {
		switch e := res[tp]; {
		case e == nil:
			elected = append(elected, tp.String())
		case errors.Is(e, client.ErrElectionNotNeeded):
			noop = append(noop, tp.String())
		default:
			failed = append(failed, fmt.Sprintf("Error completing leader election (%s) for partition: %s: %v", typ, tp.String(), e))
		}
	}
	w := c.App.Writer
	if len(elected) > 0 {
		fmt.Fprintf(w, "Successfully completed leader election (%s) for partitions %s\n", typ, strings.Join(elected, ", "))
	}
	if len(noop) > 0 {
		fmt.Fprintf(w, "Valid replica already elected for partitions %s\n", strings.Join(noop, ", "))
	}
	if len(failed) > 0 {
		fmt.Fprintln(w, strings.Join(failed, "\n"))
		return fmt.Errorf("%d replica(s) could not be elected", len(failed))
	}
	return nil
}

// readElectionPartitions reads kafka-leader-election.sh's
// --path-to-json-file.
func readElectionPartitions(path string) ([]client.TopicPartition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Partitions *[]struct {
			Topic     *string `json:"topic"`
			Partition *int32  `json:"partition"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if raw.Partitions == nil {
		return nil, errors.New("replica election data is missing \"partitions\" field")
	}
	var parts []client.TopicPartition
	var dup []string
	for _, p := range *raw.Partitions {
		if p.Topic == nil || p.Partition == nil {
			return nil, fmt.Errorf("%s: each partition needs \"topic\" and \"partition\"", path)
		}
		tp := client.TopicPartition{Topic: *p.Topic, Partition: *p.Partition}
		if slices.Contains(parts, tp) {
			dup = append(dup, tp.String())
		}
		parts = append(parts, tp)
	}
	if len(dup) > 0 {
		return nil, fmt.Errorf("replica election data contains duplicate partitions: %s", strings.Join(dup, ","))
	}
	return parts, nil
}
