package main

import (
	"fmt"
	"slices"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/raftlog"
	"github.com/urfave/cli/v2"
)

func formatCommand() *cli.Command {
	return &cli.Command{
		Name:  "format",
		Usage: "write meta.properties into every log dir (like kafka-storage.sh format)",
		Description: "Every node of a multi-node cluster must be formatted with the same cluster id\n" +
			"before its first start. `keel format --random-uuid` prints a new id to use.\n" +
			"Formatting a dir that already names another cluster or node id fails.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "server.properties file"},
			&cli.StringSliceFlag{Name: "override", Usage: "key=value, applied over the file"},
			&cli.StringFlag{Name: "cluster-id", Aliases: []string{"t"}, Usage: "the cluster id"},
			&cli.BoolFlag{Name: "random-uuid", Usage: "print a new random cluster id and exit"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("random-uuid") {
				fmt.Fprintln(c.App.Writer, raftlog.NewClusterID())
				return nil
			}
			if c.String("cluster-id") == "" {
				return fmt.Errorf("--cluster-id is required (get one with keel format --random-uuid)")
			}
			cfg, err := broker.LoadConfigFile(c.String("config"), c.StringSlice("override"))
			if err != nil {
				return err
			}
			dirs := slices.Clone(cfg.LogDirs)
			if !slices.Contains(dirs, cfg.MetadataLogDir) {
				dirs = append(dirs, cfg.MetadataLogDir)
			}
			id, err := raftlog.EnsureMetaProperties(dirs, c.String("cluster-id"), cfg.NodeID, true)
			if err != nil {
				return err
			}
			for _, d := range dirs {
				fmt.Fprintf(c.App.Writer, "Formatted %s with cluster.id %s and node.id %d\n", d, id, cfg.NodeID)
			}
			return nil
		},
	}
}
