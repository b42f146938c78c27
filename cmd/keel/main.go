// Command keel is Keel's single binary: the broker/controller server and the
// operator tools, in the vocabulary of Kafka's own scripts.
package main

import (
	"fmt"
	"os"
	"slices"
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
	app := &cli.App{
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
			storageCommand(),
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
	refuseStrayArgs(app.Commands)
	return app
}

// refuseStrayArgs makes every command that takes no arguments refuse one.
// The flag parser stops at the first argument that is not a flag, so
// without this `keel perf produce --producer-props acks=1 linger.ms=0
// --throughput 1000` would run with linger.ms and --throughput silently
// left out. (delegation-tokens, the one command with both subcommands and
// an action, checks its own.)
func refuseStrayArgs(cmds []*cli.Command) {
	for _, cmd := range cmds {
		if len(cmd.Subcommands) > 0 {
			refuseStrayArgs(cmd.Subcommands)
			continue
		}
		if cmd.Action == nil {
			continue
		}
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("unexpected argument %q: options are --name value, and none after it was read", c.Args().First())
			}
			return action(c)
		}
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
// the parser to accept or explain. Before that it takes
// kafka-server-start.sh's properties file given first (serverConfigArg)
// and kafka-producer-perf-test.sh's --producer-props values given one
// after another (multiValueFlags); after it, kafka-consumer-groups.sh
// --list's --state and --type with their optional values
// (groupListFilters).
func kafkaStyleArgs(args []string) []string {
	return groupListFilters(actionArgs(multiValueFlags(serverConfigArg(args))))
}

// actionArgs turns an action flag, or a subcommand typed after the flags,
// into the subcommand (kafkaStyleArgs).
func actionArgs(args []string) []string {
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

// serverConfigArg takes kafka-server-start.sh's form, the properties file
// first: `keel server server.properties --override k=v` runs `keel server
// --config server.properties --override k=v`.
func serverConfigArg(args []string) []string {
	if len(args) < 3 || args[1] != "server" || strings.HasPrefix(args[2], "-") {
		return args
	}
	return append([]string{args[0], args[1], "--config"}, args[2:]...)
}

// multiValueOptions are options that take several values in Kafka's tool,
// by command: kafka-producer-perf-test.sh's --producer-props (and its
// Kafka 4.2 name, --command-property) is argparse's nargs("+").
var multiValueOptions = map[[2]string][]string{
	{"perf", "produce"}: {"--producer-props", "--command-property"},
	{"perf", "e2e"}:     {"--producer-props", "--consumer-props"},
}

// multiValueFlags repeats a multi-value option for each of its values:
// `--producer-props acks=1 linger.ms=0` becomes `--producer-props acks=1
// --producer-props linger.ms=0`. Its values are the arguments after it up to
// the next one that starts with "-".
func multiValueFlags(args []string) []string {
	if len(args) < 4 {
		return args
	}
	names := multiValueOptions[[2]string{args[1], args[2]}]
	if names == nil {
		return args
	}
	out := append(make([]string, 0, len(args)+4), args[:3]...)
	name := "" // the multi-value option whose values follow
	for _, a := range args[3:] {
		switch {
		case strings.HasPrefix(a, "-"):
			name = ""
			if opt, _, _ := strings.Cut(a, "="); slices.Contains(names, opt) {
				name = opt
			}
			out = append(out, a)
		case name != "" && out[len(out)-1] != name:
			out = append(out, name, a) // a further value
		default:
			out = append(out, a)
		}
	}
	return out
}

// groupListFilters takes kafka-consumer-groups.sh --list's --state and
// --type, which add a column and may be followed by a comma-separated list
// to filter on: `keel groups list --state Stable,Empty` runs `keel groups
// list --state --state-in=Stable,Empty` (the flag parser has no optional
// values).
func groupListFilters(args []string) []string {
	if len(args) < 4 || args[1] != "groups" || args[2] != "list" {
		return args
	}
	out := append(make([]string, 0, len(args)+2), args[:3]...)
	for i := 3; i < len(args); i++ {
		a := args[i]
		name, value, inline := strings.Cut(a, "=")
		if name != "--state" && name != "--type" {
			out = append(out, a)
			continue
		}
		if !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value, inline = args[i+1], true
			i++
		}
		out = append(out, name)
		if inline {
			out = append(out, name+"-in="+value)
		}
	}
	return out
}
