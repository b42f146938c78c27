package main

// keel cluster: kafka-cluster.sh.

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/client"
)

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "print the cluster id, unregister a decommissioned broker (like kafka-cluster.sh)",
		Subcommands: []*cli.Command{
			{
				Name:   "cluster-id",
				Usage:  "print the cluster's id",
				Flags:  adminFlags(),
				Action: clusterID,
			},
			{
				Name:  "unregister",
				Usage: "remove a broker that is gone for good from the cluster's metadata",
				Description: "A broker that was shut down for good keeps its registration, and with it its\n" +
					"place in the replicas of its partitions' metadata; unregistering it removes it\n" +
					"(reassign its partitions first). A broker still running registers again.",
				Flags:  adminFlags(&cli.IntFlag{Name: "id", Aliases: []string{"i"}, Required: true, Usage: "the broker's node.id"}),
				Action: clusterUnregister,
			},
		},
	}
}

func clusterID(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	d, err := adm.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	if d.ClusterID == "" {
		fmt.Fprintln(c.App.Writer, "No cluster ID found. The Kafka version is probably too old.")
		return nil
	}
	fmt.Fprintf(c.App.Writer, "Cluster ID: %s\n", d.ClusterID)
	return nil
}

func clusterUnregister(c *cli.Context) error {
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	id := int32(c.Int("id"))
	if err := adm.UnregisterBroker(ctx, id); err != nil {
		if errors.Is(err, client.ErrUnsupportedRequest) {
			fmt.Fprintln(c.App.Writer, "The target cluster does not support the broker unregistration API.")
			return nil
		}
		return err
	}
	fmt.Fprintf(c.App.Writer, "Broker %d is no longer registered.\n", id)
	return nil
}
