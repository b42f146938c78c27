// Command keel is Keel's single binary: the broker/controller server and the
// operator tools, in the vocabulary of Kafka's own scripts.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "keel:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:  "keel",
		Usage: "a Kafka-compatible streaming log broker: one binary, no JVM, no ZooKeeper",
		// Kafka values hold commas (listeners, controller.quorum.voters,
		// TOPIC:0,1): a repeatable flag is split only where its command
		// says so, never by the flag parser.
		DisableSliceFlagSeparator: true,
		Description: "Keel speaks the Kafka protocol, so existing Kafka clients and most of a\n" +
			"server.properties work unchanged. See README.md for what works today.",
		Commands: []*cli.Command{
			serverCommand(),
			formatCommand(),
			metadataQuorumCommand(),
			dumpLogCommand(),
			topicsCommand(),
			produceCommand(),
			consumeCommand(),
			groupsCommand(),
			perfCommand(),
		},
	}
}
