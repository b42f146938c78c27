package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
	"github.com/urfave/cli/v2"
)

// storageCommand is `keel storage`, kafka-storage.sh: its format,
// random-uuid and info subcommands, so that Kafka's quickstart reads the
// same with keel in place of the scripts.
func storageCommand() *cli.Command {
	return &cli.Command{
		Name:  "storage",
		Usage: "format log dirs, print a new cluster id, describe a node's log dirs (like kafka-storage.sh)",
		Description: "Kafka's quickstart, with keel:\n" +
			"  KAFKA_CLUSTER_ID=\"$(keel storage random-uuid)\"\n" +
			"  keel storage format --standalone -t $KAFKA_CLUSTER_ID -c config/server.properties\n" +
			"  keel server config/server.properties\n\n" +
			"keel storage format is keel format.",
		Subcommands: []*cli.Command{
			formatCommand(),
			{
				Name:  "random-uuid",
				Usage: "print a new random cluster id (as keel format --random-uuid)",
				Action: func(c *cli.Context) error {
					fmt.Fprintln(c.App.Writer, raftlog.NewClusterID())
					return nil
				},
			},
			{
				Name:  "info",
				Usage: "describe this node's log dirs and their meta.properties; exits 1 on a problem",
				Description: "Reads the log.dirs and metadata.log.dir of --config and prints, as kafka-storage.sh\n" +
					"info does, the dirs found, the metadata of the first formatted one, and any problem:\n" +
					"a dir missing or not formatted, dirs of different clusters or nodes.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Required: true, Usage: "server.properties `FILE`"},
					&cli.StringSliceFlag{Name: "override", Usage: "key=value, applied over the file"},
				},
				Action: func(c *cli.Context) error {
					cfg, err := broker.LoadConfigFile(c.String("config"), c.StringSlice("override"))
					if err != nil {
						return err
					}
					if !storageInfo(c.App.Writer, cfg.MetaPropertiesDirs()) {
						return cli.Exit("", 1)
					}
					return nil
				},
			},
		},
	}
}

// storageInfo prints kafka-storage.sh info's report of dirs and reports
// whether it found no problem.
func storageInfo(w io.Writer, dirs []string) bool {
	if len(dirs) == 0 {
		fmt.Fprintln(w, "No directories specified.")
		return true
	}
	dirs = slices.Clone(dirs)
	slices.Sort(dirs)
	var found, problems []string
	var first *raftlog.MetaProperties
	for _, dir := range dirs {
		dir = filepath.Clean(dir)
		if st, err := os.Stat(dir); err != nil {
			problems = append(problems, dir+" does not exist")
			continue
		} else if !st.IsDir() {
			problems = append(problems, dir+" is not a directory")
			continue
		}
		found = append(found, dir)
		mp, err := raftlog.ReadMetaProperties(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, dir+" is not formatted.")
		case err != nil:
			problems = append(problems, "Error loading "+filepath.Join(dir, raftlog.MetaPropertiesFile)+": "+err.Error())
		case first == nil:
			first = &mp
		case mp.ClusterID != first.ClusterID:
			problems = append(problems, "Mismatched cluster IDs between storage directories.")
		case mp.NodeID != first.NodeID:
			problems = append(problems, "Mismatched node IDs between storage directories.")
		}
	}
	if len(found) > 0 {
		if len(found) == 1 {
			fmt.Fprintln(w, "Found log directory:")
		} else {
			fmt.Fprintln(w, "Found log directories:")
		}
		for _, d := range found {
			fmt.Fprintf(w, "  %s\n", d)
		}
		fmt.Fprintln(w)
	}
	if first != nil {
		// Java's TreeMap of the file's keys: sorted, directory.id only
		// when the file has one.
		dirID := ""
		if first.DirectoryID != metadata.ZeroUuid {
			dirID = fmt.Sprintf("directory.id=%s, ", first.DirectoryID)
		}
		fmt.Fprintf(w, "Found metadata: {cluster.id=%s, %snode.id=%d, version=%d}\n\n", first.ClusterID, dirID, first.NodeID, first.Version)
	}
	if len(problems) == 0 {
		return true
	}
	fmt.Fprintf(w, "Found problem%s:\n", plural(len(problems)))
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintln(w)
	return false
}
