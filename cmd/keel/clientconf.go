package main

// The flags and client properties every client command shares, in the
// vocabulary of Kafka's scripts: --bootstrap-server, --command-config (a
// client properties file), --producer-property / --consumer-property, and
// -o json. The commands are built on the Go SDK (client/) only.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/keelstream/keel/broker"
	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/network/sasl"
	"github.com/keelstream/keel/network/tlsconf"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// role says which part of the client properties a command uses.
type role int

const (
	roleAdmin role = iota
	roleProducer
	roleConsumer
)

func (r role) String() string {
	return [...]string{"admin", "producer", "consumer"}[r]
}

// bootstrapFlag is --bootstrap-server, on every client command.
func bootstrapFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "bootstrap-server",
		Aliases: []string{"b"},
		Value:   "localhost:9092",
		EnvVars: []string{"KEEL_BOOTSTRAP_SERVER"},
		Usage:   "`HOST:PORT`[,HOST:PORT...] of brokers to bootstrap from (Kafka's bootstrap.servers)",
	}
}

// commandConfigFlag is --command-config: a client properties file.
func commandConfigFlag() cli.Flag {
	return &cli.StringFlag{
		Name:  "command-config",
		Usage: "Kafka client properties `FILE`: client.id, request.timeout.ms, ... (the full list is in keel produce --help)",
	}
}

// outputFlag is -o text|json.
func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "output format: text or json"}
}

// jsonOutput reports whether -o json was asked for, rejecting other values.
func jsonOutput(c *cli.Context) (bool, error) {
	switch o := c.String("output"); o {
	case "text", "":
		return false, nil
	case "json":
		return true, nil
	default:
		return false, fmt.Errorf("--output %q: must be text or json", o)
	}
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// clientProperty is one supported client property: the role it belongs to
// and how it becomes an SDK option.
type clientProperty struct {
	role  role // roleAdmin means every role (a client option)
	apply func(v string) (client.Opt, error)
}

func msProp(r role, fn func(time.Duration) client.Opt) clientProperty {
	return clientProperty{r, func(v string) (client.Opt, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a non-negative number of milliseconds", v)
		}
		return fn(time.Duration(n) * time.Millisecond), nil
	}}
}

func intProp(r role, fn func(int) client.Opt) clientProperty {
	return clientProperty{r, func(v string) (client.Opt, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", v)
		}
		return fn(n), nil
	}}
}

func boolProp(r role, fn func(bool) client.Opt) clientProperty {
	return clientProperty{r, func(v string) (client.Opt, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		return fn(b), nil
	}}
}

// parseAcks maps Kafka's acks values (all, -1, 1, 0) to the SDK's.
func parseAcks(v string) (client.Acks, error) {
	switch strings.ToLower(v) {
	case "all", "-1":
		return client.AcksAll, nil
	case "1":
		return client.AcksLeader, nil
	case "0":
		return client.AcksNone, nil
	}
	return 0, fmt.Errorf("acks %q: must be all, -1, 1 or 0", v)
}

// parseCompression maps compression.type to a codec.
func parseCompression(v string) (record.Compression, error) {
	c, err := record.ParseCompression(strings.ToLower(v))
	if err != nil {
		return 0, fmt.Errorf("compression %q: must be none, gzip, snappy, lz4 or zstd", v)
	}
	return c, nil
}

// clientProperties are the Kafka client properties --command-config and
// --producer-property/--consumer-property understand.
var clientProperties = map[string]clientProperty{
	"bootstrap.servers":                  {roleAdmin, func(v string) (client.Opt, error) { return client.SeedBrokers(splitList(v)...), nil }},
	"client.id":                          {roleAdmin, func(v string) (client.Opt, error) { return client.ClientID(v), nil }},
	"request.timeout.ms":                 msProp(roleAdmin, client.RequestTimeout),
	"socket.connection.setup.timeout.ms": msProp(roleAdmin, client.DialTimeout),
	"metadata.max.age.ms":                msProp(roleAdmin, client.MetadataMaxAge),
	"retries": {roleAdmin, func(v string) (client.Opt, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a non-negative integer", v)
		}
		return client.RequestRetries(n), nil
	}},
	"allow.auto.create.topics": {roleAdmin, func(v string) (client.Opt, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		if !b {
			return nil, nil
		}
		return client.AllowAutoTopicCreation(), nil
	}},

	"acks": {roleProducer, func(v string) (client.Opt, error) {
		a, err := parseAcks(v)
		if err != nil {
			return nil, err
		}
		return client.RequiredAcks(a), nil
	}},
	"enable.idempotence": boolProp(roleProducer, client.ProducerIdempotence),
	"compression.type": {roleProducer, func(v string) (client.Opt, error) {
		c, err := parseCompression(v)
		if err != nil {
			return nil, err
		}
		return client.ProducerCompression(c), nil
	}},
	"batch.size": intProp(roleProducer, client.BatchSize),
	"linger.ms":  msProp(roleProducer, client.Linger),
	"buffer.memory": {roleProducer, func(v string) (client.Opt, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", v)
		}
		return client.BufferMemory(n), nil
	}},
	"max.block.ms":                          msProp(roleProducer, client.MaxBlock),
	"max.in.flight.requests.per.connection": intProp(roleProducer, client.MaxInFlight),
	"delivery.timeout.ms":                   msProp(roleProducer, client.DeliveryTimeout),
	"max.request.size":                      intProp(roleProducer, client.MaxRequestSize),

	"auto.offset.reset": {roleConsumer, func(v string) (client.Opt, error) {
		r, err := client.ParseOffsetReset(v)
		if err != nil {
			return nil, err
		}
		return client.AutoOffsetReset(r), nil
	}},
	"isolation.level": {roleConsumer, func(v string) (client.Opt, error) {
		l, err := parseIsolation(v)
		if err != nil {
			return nil, err
		}
		return client.Isolation(l), nil
	}},
	"max.poll.records":      intProp(roleConsumer, client.MaxPollRecords),
	"max.poll.interval.ms":  msProp(roleConsumer, client.MaxPollInterval),
	"session.timeout.ms":    msProp(roleConsumer, client.SessionTimeout),
	"heartbeat.interval.ms": msProp(roleConsumer, client.HeartbeatInterval),
	"fetch.min.bytes":       intProp(roleConsumer, func(n int) client.Opt { return client.FetchMinBytes(int32(n)) }),
	"fetch.max.bytes":       intProp(roleConsumer, func(n int) client.Opt { return client.FetchMaxBytes(int32(n)) }),
	"max.partition.fetch.bytes": intProp(roleConsumer, func(n int) client.Opt {
		return client.FetchMaxPartitionBytes(int32(n))
	}),
	"fetch.max.wait.ms":       msProp(roleConsumer, client.FetchMaxWait),
	"group.instance.id":       {roleConsumer, func(v string) (client.Opt, error) { return client.GroupInstanceID(v), nil }},
	"enable.auto.commit":      boolProp(roleConsumer, client.AutoCommit),
	"auto.commit.interval.ms": msProp(roleConsumer, client.AutoCommitInterval),
	"partition.assignment.strategy": {roleConsumer, func(v string) (client.Opt, error) {
		var as []client.Assignor
		for _, name := range splitList(v) {
			// Java class names are accepted by their simple name.
			switch strings.ToLower(name[strings.LastIndex(name, ".")+1:]) {
			case "range", "rangeassignor":
				as = append(as, client.RangeAssignor())
			case "roundrobin", "roundrobinassignor":
				as = append(as, client.RoundRobinAssignor())
			case "sticky", "stickyassignor":
				as = append(as, client.StickyAssignor())
			case "cooperative-sticky", "cooperativestickyassignor":
				as = append(as, client.CooperativeStickyAssignor())
			default:
				return nil, fmt.Errorf("unknown assignor %q (range, roundrobin, sticky, cooperative-sticky)", name)
			}
		}
		if len(as) == 0 {
			return nil, fmt.Errorf("no assignor named")
		}
		return client.Assignors(as...), nil
	}},
}

// parseIsolation maps isolation.level values.
func parseIsolation(v string) (client.IsolationLevel, error) {
	switch v {
	case "read_uncommitted":
		return client.ReadUncommitted, nil
	case "read_committed":
		return client.ReadCommitted, nil
	}
	return 0, fmt.Errorf("isolation.level %q: must be read_uncommitted or read_committed", v)
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseKeyValues parses repeated key=value flag values (also accepting
// several comma-separated pairs in one value, as kafka-configs.sh does).
func parseKeyValues(flag string, values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		for _, kv := range splitPairs(v) {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("--%s %q: want key=value", flag, kv)
			}
			out[strings.TrimSpace(k)] = val
		}
	}
	return out, nil
}

// splitPairs splits "a=1,b=2" into pairs, but keeps commas that belong to a
// value ("cleanup.policy=compact,delete") by splitting only before a
// "key=" segment.
func splitPairs(v string) []string {
	parts := strings.Split(v, ",")
	var out []string
	for _, p := range parts {
		if len(out) > 0 && !strings.Contains(p, "=") {
			out[len(out)-1] += "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}

// commandConfigAlias takes a tool's own name for its properties file (the
// console producer's --producer.config, the perf tools' --consumer.config,
// which Kafka 4.2 renamed --command-config, KIP-1147) as --command-config.
// An empty flag name or an unset flag does nothing.
func commandConfigAlias(c *cli.Context, flag string) error {
	f := ""
	if flag != "" {
		f = c.String(flag)
	}
	if f == "" {
		return nil
	}
	if c.IsSet("command-config") {
		return fmt.Errorf("--%s and --command-config are the same; give one", flag)
	}
	return c.Set("command-config", f)
}

// clientOptions builds the SDK options of a command: --bootstrap-server,
// then --command-config, then extra key=value properties (later wins). Keys
// of other roles or unknown keys are warned about on stderr, as Kafka's
// clients warn about unknown configs, and ignored.
func clientOptions(c *cli.Context, r role, extra map[string]string) ([]client.Opt, error) {
	props, err := commandConfig(c)
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		props[k] = v
	}
	// --bootstrap-server given explicitly wins over bootstrap.servers in
	// the file, as with Kafka's tools.
	if c.IsSet("bootstrap-server") {
		delete(props, "bootstrap.servers")
	}
	opts := []client.Opt{client.ClientID("keel-cli"), client.SeedBrokers(splitList(c.String("bootstrap-server"))...)}
	secOpts, err := securityOptions(props, c.App.ErrWriter)
	if err != nil {
		return nil, err
	}
	opts = append(opts, secOpts...)
	proto, _ := securityProtocol(props) // valid: securityOptions checked it
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, ok := clientProperties[k]
		switch {
		case k == "security.protocol":
			continue // read by securityOptions
		case isSecurityProperty(k):
			if !usesSecurityProperty(proto, k) {
				fmt.Fprintf(c.App.ErrWriter, "warning: the property %s is ignored with security.protocol=%s\n", k, proto)
			}
			continue // read by securityOptions
		case !ok:
			fmt.Fprintf(c.App.ErrWriter, "warning: the %s property %s is not supported and is ignored\n", r, k)
			continue
		case p.role != roleAdmin && p.role != r:
			continue // a producer property in a shared file, read by a consumer command
		}
		o, err := p.apply(strings.TrimSpace(props[k]))
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", k, err)
		}
		if o != nil {
			opts = append(opts, o)
		}
	}
	return opts, nil
}

// securityOptions reads security.protocol with the ssl.* and sasl.*
// properties, as Kafka's clients do: SSL and SASL_SSL connect with TLS
// (tlsConfig), SASL_PLAINTEXT and SASL_SSL authenticate with
// sasl.mechanism=PLAIN and the user name and password of sasl.jaas.config
// (org.apache.kafka.common.security.plain.PlainLoginModule required
// username="..." password="...";). None for PLAINTEXT.
func securityOptions(props map[string]string, stderr io.Writer) ([]client.Opt, error) {
	proto, err := securityProtocol(props)
	if err != nil {
		return nil, err
	}
	var opts []client.Opt
	if usesTLS(proto) {
		cfg, err := tlsConfig(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.TLS(cfg))
	}
	if usesSASL(proto) {
		m, err := saslMechanism(props, stderr)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.SASL(m))
	}
	return opts, nil
}

// securityProtocol is security.protocol, upper-cased: PLAINTEXT when unset.
func securityProtocol(props map[string]string) (string, error) {
	switch proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"])); proto {
	case "", "PLAINTEXT":
		return "PLAINTEXT", nil
	case "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		return proto, nil
	default:
		return "", fmt.Errorf("security.protocol=%s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
}

// isSecurityProperty reports the ssl.* and sasl.* properties
// securityOptions reads.
func isSecurityProperty(k string) bool {
	return k == "sasl.mechanism" || k == "sasl.jaas.config" || k == "sasl.login.callback.handler.class" ||
		sasl.IsOAuthLoginSetting(k) || slices.Contains(tlsconf.Keys(), k)
}

// usesSecurityProperty reports whether security.protocol proto reads the
// ssl.* or sasl.* property k.
func usesSecurityProperty(proto, k string) bool {
	if strings.HasPrefix(k, "sasl.") {
		return usesSASL(proto)
	}
	return usesTLS(proto)
}

// usesTLS and usesSASL report what a security.protocol connects with.
func usesTLS(proto string) bool  { return proto == "SSL" || proto == "SASL_SSL" }
func usesSASL(proto string) bool { return proto == "SASL_PLAINTEXT" || proto == "SASL_SSL" }

// tlsConfig is the TLS of security.protocol=SSL or SASL_SSL: the brokers
// verified against the truststore (the system's roots when none is set)
// and, with a keystore, its certificate presented to a listener with
// ssl.client.auth=required.
func tlsConfig(props map[string]string) (*tls.Config, error) {
	settings, err := tlsconf.FromProperties(func(k string) (string, bool) {
		v, ok := props[k]
		return strings.TrimSpace(v), ok
	})
	if err != nil {
		return nil, err
	}
	return settings.ClientConfig("")
}

// saslMechanism is sasl.mechanism with its sasl.jaas.config credentials:
// PLAIN with the PlainLoginModule, SCRAM-SHA-256 and SCRAM-SHA-512 with the
// ScramLoginModule, each with username="..." password="..." (and, for
// SCRAM with a delegation token, tokenauth="true"), OAUTHBEARER
// with the OAuthBearerLoginModule (oauthBearerMechanism). Kafka's default
// mechanism, GSSAPI, is not supported.
func saslMechanism(props map[string]string, stderr io.Writer) (client.SASLMechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	module := sasl.PlainLoginModule
	switch {
	case mech == sasl.MechanismPlain:
	case sasl.IsScram(mech):
		module = sasl.ScramLoginModule
	case mech == sasl.MechanismOAuthBearer:
		return oauthBearerMechanism(props, stderr)
	case mech == "":
		return nil, fmt.Errorf("security.protocol=%s needs sasl.mechanism (Kafka's default, GSSAPI, is not supported; PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)", props["security.protocol"])
	default:
		return nil, fmt.Errorf("sasl.mechanism=%s is not supported yet (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)", mech)
	}
	text, ok := props["sasl.jaas.config"]
	if !ok {
		return nil, fmt.Errorf(`sasl.mechanism=%s needs sasl.jaas.config=%s required username="..." password="...";`, mech, module)
	}
	jaas, err := sasl.ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("sasl.jaas.config: %w", err)
	}
	if jaas.LoginModule != module {
		return nil, fmt.Errorf("sasl.jaas.config: sasl.mechanism=%s takes the %s, not %s", mech, module, jaas.LoginModule)
	}
	user, pass := jaas.Options["username"], jaas.Options["password"]
	if user == "" || pass == "" {
		return nil, fmt.Errorf("sasl.jaas.config: the %s needs username and password", module[strings.LastIndex(module, ".")+1:])
	}
	if mech == sasl.MechanismPlain {
		return client.PlainAuth{User: user, Pass: pass}, nil
	}
	// KIP-48: tokenauth="true" makes username a delegation token's id and
	// password its HMAC (base64), as keel delegation-tokens prints them.
	// Kafka reads the option with Boolean.parseBoolean; a value that is
	// neither true nor false is refused here rather than read as false.
	if v, ok := jaas.Options["tokenauth"]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return scramTokenAuth(mech, user, pass), nil
		case "false":
		default:
			return nil, fmt.Errorf("sasl.jaas.config: the ScramLoginModule's tokenauth=%q: want true or false", v)
		}
	}
	return client.ScramAuth{Mechanism: mech, User: user, Pass: pass}, nil
}

// scramTokenAuth is SCRAM with the tokenauth=true extension in the
// client-first message (KIP-48): the broker looks the user name up as a
// delegation token's id and authenticates the connection as the token's
// owner. The SDK's ScramAuth sends no extensions, so this is franz-go's
// SCRAM client (scram.Auth.IsToken) behind the SDK's SASLMechanism.
func scramTokenAuth(mechanism, tokenID, hmac string) client.SASLMechanism {
	a := scram.Auth{User: tokenID, Pass: hmac, IsToken: true}
	if mechanism == sasl.MechanismScramSHA512 {
		return franzSASL{a.AsSha512Mechanism()}
	}
	return franzSASL{a.AsSha256Mechanism()}
}

// franzSASL adapts a franz-go SASL mechanism to the SDK's: the two
// interfaces have the same methods.
type franzSASL struct{ m franzsasl.Mechanism }

func (f franzSASL) Name() string { return f.m.Name() }

func (f franzSASL) Authenticate(ctx context.Context, host string) (client.SASLSession, []byte, error) {
	session, first, err := f.m.Authenticate(ctx, host)
	if err != nil {
		return nil, nil, err
	}
	return session, first, nil
}

// oauthBearerMechanism is sasl.mechanism=OAUTHBEARER, as Kafka's clients
// log in with the OAuthBearerLoginModule (sasl.jaas.config):
//
//   - with sasl.oauthbearer.token.endpoint.url https://... (and
//     sasl.login.callback.handler.class=OAuthBearerLoginCallbackHandler, as
//     Kafka asks), tokens from the identity provider's token endpoint with
//     the client credentials grant: the module's clientId, clientSecret
//     and optional scope;
//   - with a file: URL, the token in that file, read for each connection;
//   - without one, Kafka's unsecured login: an unsigned token
//     ("alg":"none") of the module's unsecuredLoginStringClaim_<name>,
//     unsecuredLoginNumberClaim_<name> and unsecuredLoginListClaim_<name>
//     options (sub required), valid unsecuredLoginLifetimeSeconds (3600),
//     issued for each connection. For development only: a broker accepts
//     such tokens only with Kafka's default, unsecured validation.
//
// The module's extension_<name> options are sent as SASL extensions
// (sasl.NewOAuthBearerLogin, which Keel's brokers log in with too).
func oauthBearerMechanism(props map[string]string, stderr io.Writer) (client.SASLMechanism, error) {
	text, ok := props["sasl.jaas.config"]
	if !ok {
		return nil, fmt.Errorf(`sasl.mechanism=OAUTHBEARER needs sasl.jaas.config=%s required ...;`, sasl.OAuthBearerLoginModule)
	}
	jaas, err := sasl.ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("sasl.jaas.config: %w", err)
	}
	if jaas.LoginModule != sasl.OAuthBearerLoginModule {
		return nil, fmt.Errorf("sasl.jaas.config: sasl.mechanism=OAUTHBEARER takes the %s, not %s", sasl.OAuthBearerLoginModule, jaas.LoginModule)
	}
	login, err := sasl.NewOAuthBearerLogin(jaas.Options, func(k string) string { return props[k] })
	if err != nil {
		return nil, err // its errors name the setting or the module's option
	}
	if stderr != nil {
		// Each retry of the token endpoint, as Java's client logs it.
		login.Log = func(msg string, args ...any) {
			var b strings.Builder
			fmt.Fprintf(&b, "warning: %s", msg)
			for i := 0; i+1 < len(args); i += 2 {
				fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
			}
			fmt.Fprintln(stderr, b.String())
		}
	}
	return client.OAuthBearerAuth{Token: login.Token, Extensions: login.Extensions}, nil
}

// commandDial is how a command that talks to one node directly (keel
// metadata-quorum) connects: TLS when --command-config says
// security.protocol=SSL, plain TCP otherwise.
func commandDial(c *cli.Context) (broker.DialFunc, error) {
	props, err := commandConfig(c)
	if err != nil {
		return nil, err
	}
	switch proto, err := securityProtocol(props); {
	case err != nil:
		return nil, err
	case proto == "PLAINTEXT":
		return nil, nil
	case proto != "SSL":
		return nil, fmt.Errorf("security.protocol=%s: this command speaks PLAINTEXT and SSL (give it a controller with --bootstrap-controller)", proto)
	}
	cfg, err := tlsConfig(props)
	if err != nil {
		return nil, err
	}
	return broker.DialTLS(cfg), nil
}

// commandConfig reads the --command-config properties file; empty without
// one.
func commandConfig(c *cli.Context) (map[string]string, error) {
	path := c.String("command-config")
	if path == "" {
		return map[string]string{}, nil
	}
	props, err := broker.ReadPropertiesFile(path)
	if err == nil {
		err = broker.ResolveConfigProviders(props) // as Kafka's clients resolve ${provider:path:key}
	}
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	return props, nil
}

// commandContext is the command's context, canceled on SIGINT/SIGTERM so
// that a consumer or producer stops cleanly (commits, flushes) on Ctrl-C.
func commandContext(c *cli.Context) (context.Context, context.CancelFunc) {
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// closeWithin closes a producer or consumer, giving it 10 s to flush or
// leave its group (for defer).
func closeWithin(close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = close(ctx)
}

// adminFlags are an admin subcommand's connection flags
// (--bootstrap-server, --command-config), then extra.
func adminFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{bootstrapFlag(), commandConfigFlag()}, extra...)
}

// connectError is the failure to connect to --bootstrap-server, naming
// the address unless err does already.
func connectError(c *cli.Context, err error) error {
	if bs := c.String("bootstrap-server"); !strings.Contains(err.Error(), bs) {
		return fmt.Errorf("connect to %s: %w", bs, err)
	}
	return err
}

// openClient is a command's context (cancelled by Ctrl-C) and a Client
// connected with opts; done closes both.
func openClient(c *cli.Context, opts []client.Opt) (ctx context.Context, cl *client.Client, done func(), err error) {
	ctx, cancel := commandContext(c)
	cl, err = client.NewClient(ctx, opts...)
	if err != nil {
		cancel()
		return nil, nil, nil, connectError(c, err)
	}
	return ctx, cl, func() { cl.Close(); cancel() }, nil
}

// openAdmin is an admin command's context (cancelled by Ctrl-C) and a
// connected Admin; done closes both.
func openAdmin(c *cli.Context) (ctx context.Context, adm *client.Admin, done func(), err error) {
	ctx, cancel := commandContext(c)
	adm, err = newAdmin(ctx, c)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, adm, func() { adm.Close(); cancel() }, nil
}

// newAdmin connects an Admin for a command.
func newAdmin(ctx context.Context, c *cli.Context) (*client.Admin, error) {
	opts, err := clientOptions(c, roleAdmin, nil)
	if err != nil {
		return nil, err
	}
	adm, err := client.NewAdmin(ctx, opts...)
	if err != nil {
		return nil, connectError(c, err)
	}
	return adm, nil
}

// isTerminal reports whether w is a terminal (for live progress lines).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// parseTimestamp reads a --timestamp / --to-datetime value: Unix
// milliseconds, or a date-time as kafka-consumer-groups.sh takes it
// (YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone; local time without one).
func parseTimestamp(v string) (int64, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("timestamp %d: must not be negative", ms)
		}
		return ms, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000Z0700"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UnixMilli(), nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("timestamp %q: want Unix milliseconds or YYYY-MM-DDTHH:mm:SS[.sss][zone]", v)
}

// propertiesHelp lists the supported client properties in --help texts.
const propertiesHelp = `Client properties (--command-config FILE, --producer-property, --consumer-property,
--producer-props), with Kafka's names:

  every command  bootstrap.servers client.id request.timeout.ms
                 socket.connection.setup.timeout.ms metadata.max.age.ms retries
                 allow.auto.create.topics
  producer       acks enable.idempotence compression.type batch.size linger.ms
                 buffer.memory max.block.ms max.in.flight.requests.per.connection
                 delivery.timeout.ms max.request.size
  consumer       auto.offset.reset isolation.level max.poll.records
                 max.poll.interval.ms session.timeout.ms heartbeat.interval.ms
                 fetch.min.bytes fetch.max.bytes max.partition.fetch.bytes
                 fetch.max.wait.ms group.instance.id enable.auto.commit
                 auto.commit.interval.ms partition.assignment.strategy

  security       security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)
                 ssl.truststore.location ssl.truststore.type ssl.truststore.password
                 ssl.truststore.certificates ssl.keystore.location
                 ssl.keystore.type ssl.keystore.password ssl.key.password
                 ssl.keystore.certificate.chain ssl.keystore.key
                 ssl.endpoint.identification.algorithm ssl.enabled.protocols
                 ssl.cipher.suites (JKS, PKCS12 or PEM stores, as Kafka's)
                 sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
                 OAUTHBEARER)
                 sasl.jaas.config (PlainLoginModule or ScramLoginModule
                 required username="..." password="...";, with
                 tokenauth="true" for a delegation token, or the
                 OAuthBearerLoginModule with clientId="..." clientSecret="..."
                 [scope="..."] and sasl.oauthbearer.token.endpoint.url, and
                 ssl.truststore.* options for an identity provider with a
                 private CA; or unsecuredLoginStringClaim_sub="..." for
                 development)
                 sasl.oauthbearer.token.endpoint.url (https://..., file:...)
                 sasl.login.callback.handler.class
                 sasl.oauthbearer.client.credentials.client.id and
                 .client.secret, sasl.oauthbearer.scope (Kafka 4.1; over
                 the module's clientId, clientSecret and scope),
                 sasl.oauthbearer.header.urlencode
                 sasl.oauthbearer.jwt.retriever.class (Default,
                 ClientCredentials, File or JwtBearerJwtRetriever: the
                 JWT bearer grant, with sasl.oauthbearer.assertion.*:
                 private.key.file, algorithm RS256 or ES256, claim.sub,
                 claim.iss, claim.aud, template.file, file, ...)
                 sasl.login.retry.backoff.ms and .max.ms (how the token
                 endpoint is retried), sasl.login.connect.timeout.ms,
                 sasl.login.read.timeout.ms, sasl.login.refresh.window.factor,
                 .window.jitter, .min.period.seconds, .buffer.seconds (when a
                 token is renewed)

Other keys are warned about and ignored.
`
