// Command keel is Keel's single binary: the broker/controller server and the
// operator tools, in the vocabulary of Kafka's own scripts.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

func main() {
	if err := newApp().Run(kafkaStyleArgs(os.Args)); err != nil {
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
			featuresCommand(),
			dumpLogCommand(),
			topicsCommand(),
			logDirsCommand(),
			reassignCommand(),
			leaderElectionCommand(),
			getOffsetsCommand(),
			deleteRecordsCommand(),
			clusterCommand(),
			brokerAPIVersionsCommand(),
			produceCommand(),
			consumeCommand(),
			groupsCommand(),
			usersCommand(),
			aclsCommand(),
			delegationTokensCommand(),
			configsCommand(),
			transactionsCommand(),
			perfCommand(),
		},
	}
}

// kafkaActions are the action flags of kafka-topics.sh and
// kafka-consumer-groups.sh, by command, and the subcommand each stands
// for.
var kafkaActions = map[string]map[string]string{
	"topics":  {"--create": "create", "--list": "list", "--describe": "describe", "--alter": "alter", "--delete": "delete"},
	"groups":  {"--list": "list", "--describe": "describe", "--delete": "delete", "--reset-offsets": "reset-offsets", "--delete-offsets": "delete-offsets"},
	"users":   {"--describe": "describe", "--alter": "alter"},
	"configs": {"--describe": "describe", "--alter": "alter"},
	"acls":    {"--add": "add", "--list": "list", "--remove": "remove"},
	// kafka-log-dirs.sh has --describe alone.
	"log-dirs":            {"--describe": "describe"},
	"reassign-partitions": {"--generate": "generate", "--execute": "execute", "--verify": "verify", "--cancel": "cancel", "--list": "list"},
}

// kafkaStyleArgs lets an operator type the Kafka scripts' form: `keel
// topics --bootstrap-server b:9092 --list` runs `keel topics list
// --bootstrap-server b:9092`, `keel groups --describe --group g` runs
// `keel groups describe --group g`. It rewrites only a command given flags
// and no subcommand, with exactly one action flag among them, or a
// subcommand after the flags (subcommandFirst); anything else is left for
// the parser to accept or explain.
func kafkaStyleArgs(args []string) []string {
	if len(args) < 3 || !strings.HasPrefix(args[2], "-") {
		return args
	}
	actions, ok := kafkaActions[args[1]]
	if !ok {
		return args
	}
	at := -1
	for i := 2; i < len(args); i++ {
		if _, ok := actions[args[i]]; ok {
			if at >= 0 {
				return args // two actions: the parser says what is wrong
			}
			at = i
		}
	}
	if at < 0 {
		return subcommandFirst(args, actions)
	}
	out := make([]string, 0, len(args))
	out = append(out, args[0], args[1], actions[args[at]])
	out = append(out, args[2:at]...)
	return append(out, args[at+1:]...)
}

// subcommandFirst moves a subcommand typed after the command's flags to
// the front of them: `keel topics --bootstrap-server b:9092 create --topic
// t` runs `keel topics create --bootstrap-server b:9092 --topic t` (the
// parser only knows a subcommand's flags after its name). A subcommand
// name right after a flag is that flag's value (`--topic list`), not a
// subcommand, unless the flag carries its value (`--bootstrap-server=b`).
func subcommandFirst(args []string, actions map[string]string) []string {
	isSubcommand := func(a string) bool {
		for _, sub := range actions {
			if sub == a {
				return true
			}
		}
		return false
	}
	for i := 3; i < len(args); i++ {
		if !isSubcommand(args[i]) {
			continue
		}
		if prev := args[i-1]; strings.HasPrefix(prev, "-") && !strings.Contains(prev, "=") {
			return args // a flag's value, or a bool flag we cannot tell apart
		}
		out := make([]string, 0, len(args))
		out = append(out, args[0], args[1], args[i])
		out = append(out, args[2:i]...)
		return append(out, args[i+1:]...)
	}
	return args
}
