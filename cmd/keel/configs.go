package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/client"
)

// configsCommand is `keel configs`: kafka-configs.sh for brokers (their
// dynamic configs, per broker and cluster-wide), broker loggers, topics,
// groups (KIP-848 group configs) and client quotas.
func configsCommand() *cli.Command {
	return &cli.Command{
		Name:  "configs",
		Usage: "describe and alter broker, broker-logger, topic and group configs and client quotas (like kafka-configs.sh)",
		Description: "Each action is a subcommand; kafka-configs.sh's flag form works too:\n" +
			"keel configs --alter --entity-type brokers --entity-name 1 --add-config log.cleaner.threads=2.\n\n" +
			"Entities: --entity-type brokers with --entity-name ID (one broker's dynamic configs,\n" +
			"sent to that broker) or --entity-default (the cluster-wide defaults); broker-loggers\n" +
			"(a broker's log level: root); topics; groups (a consumer-protocol group's\n" +
			"consumer.session.timeout.ms and consumer.heartbeat.interval.ms); users and clients (client quotas:\n" +
			"producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate,\n" +
			"per user, per client id, per user and client id, and their defaults); ips\n" +
			"(connection_creation_rate: the connections a\n" +
			"second each broker accepts from one client address, and the default for every\n" +
			"address). kafka-configs' shorthands work: --broker 1, --broker-defaults,\n" +
			"--broker-logger 1, --topic orders, --group app, --user alice, --user-defaults, --client app,\n" +
			"--client-defaults (--user alice --client app together: alice's connections with\n" +
			"client id app), --ip 10.0.0.7, --ip-defaults. Users' SCRAM credentials are keel users.",
		Subcommands: []*cli.Command{
			{
				Name:  "describe",
				Usage: "print an entity's dynamic configs, or all of them with --all",
				Description: "Like kafka-configs.sh --describe. Without a name: every broker and the cluster\n" +
					"defaults, or every topic. Sensitive values (passwords, keys) print as null.\n\n" +
					"Examples:\n" +
					"  keel configs describe --entity-type brokers --entity-name 1\n" +
					"  keel configs describe --entity-type brokers --entity-default\n" +
					"  keel configs describe --topic orders --all -o json\n" +
					"  keel configs describe --bootstrap-controller ctl1:9093 --broker-defaults\n\n" +
					"With --bootstrap-controller the controllers answer (KIP-919), as a broker would, from\n" +
					"the metadata log and their own server.properties: a controller's id goes to that\n" +
					"controller, as kafka-configs.sh routes it, and --all lists all its configs, as it\n" +
					"does a topic's (by name); a broker-only node's id gets the dynamic configs only, as no\n" +
					"controller knows that node's server.properties. A controller's log level\n" +
					"(--broker-logger ID) comes from that controller.",
				Flags: adminFlags(append(entityFlags(), &cli.BoolFlag{Name: "all", Usage: "every config, not only the dynamic ones"}, outputFlag(),
					&cli.StringFlag{Name: "bootstrap-controller", Usage: "a controller's `HOST:PORT`: ask it instead of a broker, no broker needed"})...),
				Action: configsDescribe,
			},
			{
				Name:  "alter",
				Usage: "set or delete an entity's dynamic configs",
				Description: "Like kafka-configs.sh --alter, incrementally: configs not named stay as they are.\n" +
					"--add-config takes k1=v1,k2=[v1,v2],k3=v3 (a value with commas in square\n" +
					"brackets), --add-config-file a properties file of them; --delete-config takes\n" +
					"k1,k2. A broker's configs go to that broker, which validates what only it can,\n" +
					"such as a new keystore.\n\n" +
					"--bootstrap-controller HOST:PORT sends a broker's, the cluster defaults' or a topic's\n" +
					"configs, or a client quota, to the active controller instead (kafka-configs.sh\n" +
					"--bootstrap-controller, KIP-919): the way in when no broker takes a new connection,\n" +
					"say a listener's listener.name.<listener>.max.connections or the default ip's\n" +
					"connection_creation_rate set to 0 by mistake. A controller's log level\n" +
					"(--broker-logger ID) goes to that controller itself.\n\n" +
					"Examples:\n" +
					"  keel configs alter --entity-type brokers --entity-default --add-config log.retention.hours=72\n" +
					"  keel configs alter --broker 1 --add-config 'listener.name.ssl.ssl.keystore.location=/etc/keel/b1-2027.p12'\n" +
					"  keel configs alter --broker-logger 1 --add-config root=DEBUG\n" +
					"  keel configs alter --topic orders --delete-config retention.ms\n" +
					"  keel configs alter --group app --add-config consumer.session.timeout.ms=60000\n" +
					"  keel configs alter --topic orders --add-config-file orders.properties\n" +
					"  keel configs alter --bootstrap-controller ctl1:9093 --entity-default --entity-type brokers \\\n" +
					"      --delete-config listener.name.plaintext.max.connections\n" +
					"  keel configs alter --ip 10.0.0.7 --add-config connection_creation_rate=10\n" +
					"  keel configs alter --bootstrap-controller ctl1:9093 --ip-defaults --delete-config connection_creation_rate\n" +
					"  keel configs alter --bootstrap-controller ctl1:9093 --broker-logger 3000 --add-config root=DEBUG",
				Flags: adminFlags(append(entityFlags(),
					&cli.StringFlag{Name: "add-config", Usage: "configs to set: k1=v1,k2=[v1,v2]"},
					&cli.StringFlag{Name: "add-config-file", Usage: "configs to set from a properties `FILE` (--add-config wins over it)"},
					&cli.StringFlag{Name: "delete-config", Usage: "configs to delete: k1,k2"},
					&cli.StringFlag{Name: "bootstrap-controller", Usage: "a controller's `HOST:PORT`: alter through the active controller, not a broker"},
				)...),
				Action: configsAlter,
			},
		},
	}
}

func entityFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "entity-type", Usage: "brokers, broker-loggers, topics, groups, users, clients or ips"},
		&cli.StringSliceFlag{Name: "entity-name", Usage: "broker id, topic name, group id, user, client id or ip address (repeatable for describe of brokers, topics and groups)"},
		&cli.BoolFlag{Name: "entity-default", Usage: "the type's default: the cluster-wide broker defaults, or the default user, client id or ip"},
		&cli.StringFlag{Name: "broker", Usage: "broker `ID`: --entity-type brokers --entity-name ID"},
		&cli.BoolFlag{Name: "broker-defaults", Usage: "--entity-type brokers --entity-default"},
		&cli.StringFlag{Name: "broker-logger", Usage: "broker `ID`: --entity-type broker-loggers --entity-name ID"},
		&cli.StringFlag{Name: "topic", Usage: "topic `NAME`: --entity-type topics --entity-name NAME"},
		&cli.StringFlag{Name: "group", Usage: "group `ID`: --entity-type groups --entity-name ID"},
		&cli.StringFlag{Name: "user", Usage: "user `NAME` (client quotas): --entity-type users --entity-name NAME"},
		&cli.BoolFlag{Name: "user-defaults", Usage: "the default user's client quotas"},
		&cli.StringFlag{Name: "client", Usage: "client id `NAME` (client quotas): --entity-type clients --entity-name NAME"},
		&cli.BoolFlag{Name: "client-defaults", Usage: "the default client id's client quotas"},
		&cli.StringFlag{Name: "ip", Usage: "client `ADDRESS` (connection_creation_rate): --entity-type ips --entity-name ADDRESS"},
		&cli.BoolFlag{Name: "ip-defaults", Usage: "the default ip's connection_creation_rate"},
	}
}

// configEntity is what a configs command names: a type and its names
// (none: every entity of the type, for describe); the cluster-wide broker
// default is the name "".
type configEntity struct {
	typeName string // kafka-configs' entity type: brokers, broker-loggers, topics, groups, users, clients, ips
	typ      client.ConfigResourceType
	names    []string
	// quota is a client quota entity (users, clients, ips): a user, a
	// client id or both, or an ip, nil names for defaults; empty with the
	// type alone (every entity with that type, for describe).
	quota      client.QuotaEntity
	quotaTypes []string // the entity types named, in kafka-configs' order
}

// configEntityFrom resolves the entity flags, kafka-configs' shorthands
// included.
func configEntityFrom(c *cli.Context) (configEntity, error) {
	if e, ok, err := quotaEntityFrom(c); ok || err != nil {
		return e, err
	}
	e := configEntity{typeName: c.String("entity-type"), names: c.StringSlice("entity-name")}
	short := 0
	for flag, typ := range map[string]string{"broker": "brokers", "broker-logger": "broker-loggers", "topic": "topics", "group": "groups"} {
		if v := c.String(flag); v != "" {
			e.typeName, e.names = typ, []string{v}
			short++
		}
	}
	defaults := c.Bool("entity-default") || c.Bool("broker-defaults")
	if c.Bool("broker-defaults") {
		e.typeName = "brokers"
		short++
	}
	switch {
	case short > 1 || short == 1 && (c.IsSet("entity-type") || c.IsSet("entity-name")):
		return e, errors.New("name one entity: --entity-type with --entity-name or --entity-default, or one of --broker, --broker-defaults, --broker-logger, --topic, --group")
	case defaults && len(e.names) > 0:
		return e, errors.New("--entity-default and --entity-name together")
	case defaults && e.typeName != "brokers":
		return e, fmt.Errorf("--entity-default: only brokers, users, clients and ips have defaults (not %q)", e.typeName)
	case defaults:
		e.names = []string{""}
	}
	switch e.typeName {
	case "brokers":
		e.typ = client.BrokerConfig
	case "broker-loggers":
		e.typ = client.BrokerLoggerConfig
	case "topics":
		e.typ = client.TopicConfig
	case "groups":
		e.typ = client.GroupConfig
	case "":
		return e, errors.New("--entity-type is missing: brokers, broker-loggers, topics, groups, users, clients or ips")
	default:
		return e, fmt.Errorf("--entity-type %q: brokers, broker-loggers, topics, groups, users, clients or ips", e.typeName)
	}
	if e.typ != client.TopicConfig && e.typ != client.GroupConfig {
		for _, n := range e.names {
			if _, err := strconv.ParseInt(n, 10, 32); n != "" && err != nil {
				return e, fmt.Errorf("%s entity name %q is not a broker id", e.typeName, n)
			}
		}
	}
	return e, nil
}

// quotaEntityFrom resolves a client quota entity: --user / --user-defaults
// and --client / --client-defaults, --ip / --ip-defaults, or --entity-type
// users|clients|ips with --entity-name or --entity-default. ok is false
// for other entities.
func quotaEntityFrom(c *cli.Context) (e configEntity, ok bool, err error) {
	e.quota = client.QuotaEntity{}
	set := func(typ, flagName, defaultFlag string, name *string, isDefault bool) error {
		switch {
		case name != nil && isDefault:
			return fmt.Errorf("--%s and --%s together", flagName, defaultFlag)
		case name != nil:
			e.quota[typ] = name
		case isDefault:
			e.quota[typ] = nil
		default:
			return nil
		}
		e.quotaTypes = append(e.quotaTypes, typ)
		return nil
	}
	str := func(flag string) *string {
		if v := c.String(flag); c.IsSet(flag) {
			return &v
		}
		return nil
	}
	if err := set(client.QuotaEntityUser, "user", "user-defaults", str("user"), c.Bool("user-defaults")); err != nil {
		return e, true, err
	}
	if err := set(client.QuotaEntityClientID, "client", "client-defaults", str("client"), c.Bool("client-defaults")); err != nil {
		return e, true, err
	}
	if err := set(client.QuotaEntityIP, "ip", "ip-defaults", str("ip"), c.Bool("ip-defaults")); err != nil {
		return e, true, err
	}
	typ := map[string]string{"users": client.QuotaEntityUser, "clients": client.QuotaEntityClientID, "ips": client.QuotaEntityIP}[c.String("entity-type")]
	switch {
	case len(e.quotaTypes) > 0 && (c.IsSet("entity-type") || c.IsSet("entity-name") || c.Bool("entity-default") ||
		c.IsSet("broker") || c.Bool("broker-defaults") || c.IsSet("broker-logger") || c.IsSet("topic")):
		return e, true, errors.New("give the client quota entity either as --user/--client/--ip (and their -defaults) or as --entity-type with --entity-name or --entity-default")
	case slices.Contains(e.quotaTypes, client.QuotaEntityIP) && len(e.quotaTypes) > 1:
		return e, true, errors.New("an ip entity stands alone: not with --user or --client")
	case len(e.quotaTypes) > 0:
	case typ == "":
		return e, false, nil
	default:
		names := c.StringSlice("entity-name")
		if len(names) > 1 {
			return e, true, errors.New("one --entity-name for users, clients or ips")
		}
		var name *string
		if len(names) == 1 {
			name = &names[0]
		}
		if name != nil || c.Bool("entity-default") {
			if err := set(typ, "entity-name", "entity-default", name, c.Bool("entity-default")); err != nil {
				return e, true, err
			}
		} else {
			e.quotaTypes = []string{typ} // the type alone: every entity with it
		}
	}
	e.typeName = map[string]string{client.QuotaEntityUser: "users", client.QuotaEntityClientID: "clients", client.QuotaEntityIP: "ips"}[e.quotaTypes[0]]
	return e, true, nil
}

// label is how kafka-configs.sh names an entity in its output.
func (e configEntity) label(name string) string {
	return strings.TrimSuffix(e.typeName, "s") + " " + name
}

// configsViaController reports whether --bootstrap-controller was given,
// refusing it beside a --bootstrap-server with ConfigCommand's message.
// $KEEL_BOOTSTRAP_SERVER, Keel's default for --bootstrap-server, does
// not count as one given.
func configsViaController(c *cli.Context) (bool, error) {
	if c.String("bootstrap-controller") == "" {
		return false, nil
	}
	server := c.IsSet("bootstrap-server")
	for _, name := range bootstrapFlag().(*cli.StringFlag).EnvVars {
		if v, ok := os.LookupEnv(name); ok && v == c.String("bootstrap-server") {
			server = false
		}
	}
	if server {
		return false, errors.New("Only one of --bootstrap-server or --bootstrap-controller can be specified")
	}
	return true, nil
}

func configsDescribe(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	e, err := configEntityFrom(c)
	if err != nil {
		return err
	}
	viaController, err := configsViaController(c)
	if err != nil {
		return err
	}
	if viaController {
		return describeViaController(c, e, asJSON)
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	if e.quotaTypes != nil {
		return describeQuotas(c, ctx, adm, e, asJSON)
	}
	names := e.names
	if len(names) == 0 {
		// kafka-configs.sh describes every entity of the type.
		switch e.typ {
		case client.TopicConfig:
			if names, err = adm.ListTopics(ctx, true); err != nil {
				return err
			}
		case client.GroupConfig:
			// The groups the coordinators know and the groups with
			// dynamic configs (which may have no members or offsets),
			// as Kafka 4.1's kafka-configs.sh lists them.
			groups, err := adm.ListGroups(ctx)
			if err != nil {
				return err
			}
			for _, g := range groups {
				names = append(names, g.Group)
			}
			// A broker before Kafka 4.1, or a principal without
			// DESCRIBE_CONFIGS on the cluster, lists the groups alone.
			configured, err := adm.ListConfigResources(ctx, client.GroupConfig)
			var ke *client.Error
			if err != nil && !errors.Is(err, client.ErrUnsupportedRequest) && !(errors.As(err, &ke) && ke.Code == kerr.ClusterAuthorizationFailed.Code) {
				return err
			}
			for _, r := range configured {
				names = append(names, r.Name)
			}
			slices.Sort(names)
			names = slices.Compact(names)
		default:
			cluster, err := adm.DescribeCluster(ctx)
			if err != nil {
				return err
			}
			for _, b := range cluster.Brokers {
				names = append(names, strconv.Itoa(int(b.NodeID)))
			}
			if e.typ == client.BrokerConfig {
				names = append(names, "")
			}
		}
	}
	return printConfigs(c, e, names, func(name string) ([]client.ResourceConfigs, error) { return adm.DescribeConfigs(ctx, e.typ, name) }, asJSON)
}

// printConfigs prints the configs of the entities names (their dynamic
// ones, or all with --all), as kafka-configs.sh --describe does, or as
// JSON; describe fetches one entity's.
func printConfigs(c *cli.Context, e configEntity, names []string, describe func(name string) ([]client.ResourceConfigs, error), asJSON bool) error {
	all := c.Bool("all")
	type jsonSynonym struct {
		Name   string  `json:"name"`
		Value  *string `json:"value"`
		Source string  `json:"source"`
	}
	type jsonConfig struct {
		Name      string        `json:"name"`
		Value     *string       `json:"value"` // null: sensitive or unset
		Source    string        `json:"source"`
		Sensitive bool          `json:"sensitive"`
		ReadOnly  bool          `json:"read_only"`
		Synonyms  []jsonSynonym `json:"synonyms"`
	}
	type jsonEntity struct {
		Type    string       `json:"entity_type"`
		Name    *string      `json:"entity_name"` // null: the cluster-wide default
		Configs []jsonConfig `json:"configs"`
	}
	out := []jsonEntity{}
	var errs []error
	for _, name := range names {
		res, err := describe(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rc := range res {
			if rc.Err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.label(name), rc.Err))
				continue
			}
			shown := slices.DeleteFunc(rc.Configs, func(ce client.ConfigEntry) bool { return !all && !dynamicFor(e.typ, name, ce) })
			je := jsonEntity{Type: e.typeName, Configs: []jsonConfig{}}
			if name != "" {
				je.Name = &name
			}
			for _, ce := range shown {
				jc := jsonConfig{Name: ce.Name, Value: ce.Value, Source: ce.Source, Sensitive: ce.Sensitive, ReadOnly: ce.ReadOnly, Synonyms: []jsonSynonym{}}
				for _, s := range ce.Synonyms {
					jc.Synonyms = append(jc.Synonyms, jsonSynonym(s))
				}
				je.Configs = append(je.Configs, jc)
			}
			out = append(out, je)
			if asJSON {
				continue
			}
			switch {
			case e.typ == client.BrokerConfig && name == "":
				fmt.Fprintln(c.App.Writer, "Default configs for brokers in the cluster are:")
			case all:
				fmt.Fprintf(c.App.Writer, "All configs for %s are:\n", e.label(name))
			default:
				fmt.Fprintf(c.App.Writer, "Dynamic configs for %s are:\n", e.label(name))
			}
			for _, ce := range shown {
				var syns []string
				for _, s := range ce.Synonyms {
					syns = append(syns, fmt.Sprintf("%s:%s=%s", s.Source, s.Name, nullable(s.Value)))
				}
				fmt.Fprintf(c.App.Writer, "  %s=%s sensitive=%t synonyms={%s}\n", ce.Name, nullable(ce.Value), ce.Sensitive, strings.Join(syns, ", "))
			}
		}
	}
	if asJSON {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// dynamicFor reports whether a config is one kafka-configs.sh --describe
// shows without --all: set dynamically on that very entity (a broker's
// own, the cluster-wide defaults, a topic's own); every log level.
func dynamicFor(typ client.ConfigResourceType, name string, ce client.ConfigEntry) bool {
	switch {
	case typ == client.TopicConfig:
		return ce.Source == "DYNAMIC_TOPIC_CONFIG"
	case typ == client.GroupConfig:
		return ce.Source == "GROUP_CONFIG"
	case typ == client.BrokerConfig && name == "":
		return ce.Source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case typ == client.BrokerConfig:
		return ce.Source == "DYNAMIC_BROKER_CONFIG"
	}
	return true
}

// nullable prints a config value as kafka-configs.sh does: null for none.
func nullable(v *string) string {
	if v == nil {
		return "null"
	}
	return *v
}

func configsAlter(c *cli.Context) error {
	e, err := configEntityFrom(c)
	if err != nil {
		return err
	}
	if e.quotaTypes != nil {
		return alterQuotas(c, e)
	}
	if len(e.names) != 1 {
		return errors.New("alter names one entity: --entity-name (or --entity-default for brokers)")
	}
	var changes []client.AlterConfig
	set, err := addedConfigs(c)
	if err != nil {
		return err
	}
	for _, kv := range set {
		changes = append(changes, client.AlterConfig{Op: client.SetConfig, Name: kv[0], Value: &kv[1]})
	}
	if s := c.String("delete-config"); s != "" {
		for _, k := range strings.Split(s, ",") {
			if k = strings.TrimSpace(k); k != "" {
				changes = append(changes, client.AlterConfig{Op: client.DeleteConfig, Name: k})
			}
		}
	}
	if len(changes) == 0 {
		return errors.New("give --add-config, --add-config-file or --delete-config")
	}
	name := e.names[0]
	viaController, err := configsViaController(c)
	if err != nil {
		return err
	}
	if viaController {
		if err := alterViaController(c, e, name, changes); err != nil {
			return err
		}
	} else {
		ctx, adm, done, err := openAdmin(c)
		if err != nil {
			return err
		}
		defer done()
		if err := adm.IncrementalAlterConfigs(ctx, e.typ, name, changes...); err != nil {
			return err
		}
	}
	if e.typ == client.BrokerConfig && name == "" {
		fmt.Fprintln(c.App.Writer, "Completed updating default config for brokers in the cluster.")
	} else {
		fmt.Fprintf(c.App.Writer, "Completed updating config for %s.\n", e.label(name))
	}
	return nil
}

// addedConfigs are the configs to set: --add-config-file's properties
// (a Java properties file, as kafka-configs.sh reads it), then
// --add-config's pairs, which win over the file's.
func addedConfigs(c *cli.Context) ([][2]string, error) {
	var out [][2]string
	at := map[string]int{}
	add := func(k, v string) {
		if i, ok := at[k]; ok {
			out[i][1] = v
			return
		}
		at[k] = len(out)
		out = append(out, [2]string{k, v})
	}
	if path := c.String("add-config-file"); path != "" {
		props, err := broker.ReadPropertiesFile(path)
		if err != nil {
			return nil, fmt.Errorf("--add-config-file: %w", err)
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			add(k, props[k])
		}
	}
	if s := c.String("add-config"); s != "" {
		set, err := parseAddConfig(s)
		if err != nil {
			return nil, fmt.Errorf("--add-config: %w", err)
		}
		for _, kv := range set {
			add(kv[0], kv[1])
		}
	}
	return out, nil
}

// parseAddConfig reads kafka-configs.sh's --add-config: k=v pairs
// separated by commas, a value holding commas in square brackets
// (k=[a,b] sets "a,b"). Keys must not repeat.
func parseAddConfig(s string) ([][2]string, error) {
	var out [][2]string
	seen := map[string]bool{}
	rest := s
	for strings.TrimSpace(rest) != "" {
		key, after, ok := strings.Cut(rest, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.Contains(key, ",") {
			return nil, fmt.Errorf("%q: want key=value", strings.TrimSpace(rest))
		}
		var val string
		if strings.HasPrefix(after, "[") {
			end := strings.IndexByte(after, ']')
			if end < 0 {
				return nil, fmt.Errorf("%s: missing ]", key)
			}
			val, rest = after[1:end], after[end+1:]
			if r := strings.TrimSpace(rest); r != "" && !strings.HasPrefix(r, ",") {
				return nil, fmt.Errorf("%s: want , after ]", key)
			}
		} else {
			val, rest, _ = strings.Cut(after, ",")
			rest = "," + rest
		}
		rest = strings.TrimPrefix(strings.TrimSpace(rest), ",")
		if seen[key] {
			return nil, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		out = append(out, [2]string{key, strings.TrimSpace(val)})
	}
	return out, nil
}

// alterViaController sends IncrementalAlterConfigs to the active
// controller, found from --bootstrap-controller (kafka-configs.sh
// --bootstrap-controller, KIP-919): for when no broker takes a connection.
// requestController takes it to the active controller and retries
// retriable errors, for 30 s.
//
// A node's log level (broker-loggers) is its own, not the metadata log's:
// it goes to that node's controller, as Kafka's admin client sends it.
func alterViaController(c *cli.Context, e configEntity, name string, changes []client.AlterConfig) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(e.typ), name
	for _, ch := range changes {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op, rc.Value = ch.Name, kmsg.IncrementalAlterConfigOp(ch.Op), ch.Value
		r.Configs = append(r.Configs, rc)
	}
	req.Resources = append(req.Resources, r)
	var resp kmsg.Response
	var err error
	if e.typ == client.BrokerLoggerConfig {
		resp, err = toOwnController(c, name, req)
	} else {
		resp, err = viaController(c, req, func(r kmsg.Response) int16 {
			if rr := r.(*kmsg.IncrementalAlterConfigsResponse).Resources; len(rr) == 1 {
				return rr[0].ErrorCode
			}
			return 0 // malformed: reported below
		})
	}
	if err != nil {
		return fmt.Errorf("alter configs of %s: %w", e.label(name), err)
	}
	rr := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
	if len(rr) != 1 {
		return fmt.Errorf("alter configs of %s: %d resources in the answer", e.label(name), len(rr))
	}
	if err := kerr.ErrorForCode(rr[0].ErrorCode); err != nil {
		return fmt.Errorf("alter configs of %s: %w%s", e.label(name), err, errorMessage(rr[0].ErrorMessage))
	}
	return nil
}

// toOwnController sends req to node name's controller, found from
// --bootstrap-controller.
func toOwnController(c *cli.Context, name string, req kmsg.Request) (kmsg.Response, error) {
	return withController(c, func(ctx context.Context, dial broker.DialFunc, bootstrap string) (kmsg.Response, error) {
		controllers, err := controllerAddrs(ctx, dial, bootstrap)
		if err != nil {
			return nil, err
		}
		addr, ok := controllers[name]
		if !ok {
			return nil, fmt.Errorf("--bootstrap-controller: node %s is no controller; give --bootstrap-server", name)
		}
		return broker.RequestVia(ctx, dial, addr, req)
	})
}

// withController runs f with --bootstrap-controller's address, the
// command's dialer and a 30 s deadline.
func withController(c *cli.Context, f func(ctx context.Context, dial broker.DialFunc, bootstrap string) (kmsg.Response, error)) (kmsg.Response, error) {
	dial, err := commandDial(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	return f(ctx, dial, c.String("bootstrap-controller"))
}

// controllerAddrs are the controllers' addresses by node id, as the
// controller at bootstrap lists them (DescribeCluster for controllers,
// KIP-919).
func controllerAddrs(ctx context.Context, dial broker.DialFunc, bootstrap string) (map[string]string, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	resp, err := broker.RequestVia(ctx, dial, bootstrap, req)
	if err != nil {
		return nil, fmt.Errorf("the controllers, from %s: %w", bootstrap, err)
	}
	r := resp.(*kmsg.DescribeClusterResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, fmt.Errorf("the controllers, from %s: %w%s", bootstrap, err, errorMessage(r.ErrorMessage))
	}
	addrs := map[string]string{}
	for _, n := range r.Brokers {
		addrs[strconv.Itoa(int(n.NodeID))] = net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
	}
	return addrs, nil
}

// viaController sends req to the active controller, found from
// --bootstrap-controller, through requestController: for 30 s, retrying
// retriable errors (code reads the answer's).
func viaController(c *cli.Context, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, error) {
	return withController(c, func(ctx context.Context, dial broker.DialFunc, bootstrap string) (kmsg.Response, error) {
		resp, err := requestController(ctx, dial, bootstrap, req, code)
		if err != nil {
			return nil, fmt.Errorf("through the controller at %s: %w", bootstrap, err)
		}
		return resp, nil
	})
}

// describeViaController prints configs as controllers answer
// DescribeConfigs (kafka-configs.sh --describe --bootstrap-controller,
// KIP-919): a broker's, the cluster defaults', a topic's, or a
// controller's log level; without a name, every broker's and the
// defaults. As Kafka's admin client does, a node id that is a
// controller's is asked of that controller (found with DescribeCluster for
// controllers), which knows all its configs; another broker's id is asked
// of the bootstrap controller, which knows its dynamic ones.
func describeViaController(c *cli.Context, e configEntity, asJSON bool) error {
	switch {
	case e.quotaTypes != nil || e.typ == client.GroupConfig:
		return errors.New("--bootstrap-controller describes broker, broker logger and topic configs; give --bootstrap-server for the others")
	case e.typ == client.BrokerLoggerConfig && len(e.names) == 0:
		return errors.New("--bootstrap-controller: name the node whose log level to describe (--entity-name)")
	case e.typ == client.TopicConfig && len(e.names) == 0:
		return errors.New("--bootstrap-controller: name the topic (--topic or --entity-name)")
	case c.Bool("all") && e.typ == client.BrokerConfig && len(e.names) == 0:
		return errors.New("--bootstrap-controller with --all: name the controller's own node (--entity-name), the one whose server.properties it knows")
	}
	dial, err := commandDial(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	addr := c.String("bootstrap-controller")
	controllers := map[string]string{} // node id → controller address
	if e.typ == client.BrokerConfig || e.typ == client.BrokerLoggerConfig {
		if controllers, err = controllerAddrs(ctx, dial, addr); err != nil {
			return err
		}
	}
	names := e.names
	if len(names) == 0 {
		resp, err := broker.RequestVia(ctx, dial, addr, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			return err
		}
		for _, b := range resp.(*kmsg.DescribeClusterResponse).Brokers {
			names = append(names, strconv.Itoa(int(b.NodeID)))
		}
		names = append(names, "")
	}
	return printConfigs(c, e, names, func(name string) ([]client.ResourceConfigs, error) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms = true
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(e.typ), name
		req.Resources = append(req.Resources, r)
		to, own := controllers[name]
		switch {
		case own:
		case e.typ == client.BrokerLoggerConfig || c.Bool("all") && e.typ == client.BrokerConfig && name != "":
			return nil, fmt.Errorf("--bootstrap-controller: node %s is no controller, and only a node knows its own log level and server.properties: give --bootstrap-server", name)
		default:
			to = addr
		}
		resp, err := broker.RequestVia(ctx, dial, to, req)
		if err != nil {
			return nil, err
		}
		return client.DescribeConfigsResults(resp.(*kmsg.DescribeConfigsResponse)), nil
	}, asJSON)
}
