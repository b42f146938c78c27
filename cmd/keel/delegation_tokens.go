package main

// keel delegation-tokens is kafka-delegation-tokens.sh (Kafka's
// DelegationTokenCommand): create, renew, expire and describe delegation
// tokens (KIP-48), with the script's flags, lines and token table. The SDK's
// Admin has no delegation token calls, so the four requests go as kmsg
// messages through its Client, which --command-config has connected
// (SASL, TLS); CreateDelegationToken v3 carries --owner-principal (KIP-373).

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/client"
)

// tokenActions are the script's action flags, in its order.
var tokenActions = []string{"create", "renew", "expire", "describe"}

// delegationTokensCommand is `keel delegation-tokens`.
func delegationTokensCommand() *cli.Command {
	subs := []*cli.Command{
		{
			Name:  "create",
			Usage: "create a delegation token",
			Description: "Like kafka-delegation-tokens.sh --create. The token is owned by the\n" +
				"authenticated user, or by --owner-principal (Kafka 3.3+, KIP-373: the user needs\n" +
				"CreateTokens on that user with an authorizer), may be renewed by its owner and\n" +
				"each --renewer-principal, expires after delegation.token.expiry.time.ms unless\n" +
				"renewed, and never lives past --max-life-time-period (at most the broker's\n" +
				"delegation.token.max.lifetime.ms). The table shows its id and HMAC: what a\n" +
				"client authenticates with (keel delegation-tokens --help).\n\n" +
				"Examples:\n" +
				"  keel delegation-tokens create --command-config alice.properties\n" +
				"  keel delegation-tokens create --command-config alice.properties \\\n" +
				"      --renewer-principal User:scheduler --max-life-time-period 86400000\n" +
				"  keel delegation-tokens --create --command-config admin.properties --owner-principal User:etl",
			Flags:  adminFlags(tokenFlags("create")...),
			Action: tokensCreate,
		},
		{
			Name:  "renew",
			Usage: "renew a delegation token",
			Description: "Like kafka-delegation-tokens.sh --renew. The token's owner or one of its\n" +
				"renewers moves its expiry to --renew-time-period from now (-1: the broker's\n" +
				"delegation.token.expiry.time.ms, which also bounds it), never past the\n" +
				"token's max date.\n\n" +
				"Examples:\n" +
				"  keel delegation-tokens renew --command-config bob.properties --hmac 'tE2...=='\n" +
				"  keel delegation-tokens renew --command-config bob.properties --hmac 'tE2...==' --renew-time-period 3600000",
			Flags:  adminFlags(tokenFlags("renew")...),
			Action: tokensRenew,
		},
		{
			Name:  "expire",
			Usage: "expire a delegation token",
			Description: "Like kafka-delegation-tokens.sh --expire. The token's owner or one of its\n" +
				"renewers ends it: at once with --expiry-time-period -1 (the default), or that\n" +
				"many milliseconds from now. Connections opened with it before are not closed;\n" +
				"new ones are refused.\n\n" +
				"Examples:\n" +
				"  keel delegation-tokens expire --command-config alice.properties --hmac 'tE2...=='\n" +
				"  keel delegation-tokens expire --command-config alice.properties --hmac 'tE2...==' --expiry-time-period 600000",
			Flags:  adminFlags(tokenFlags("expire")...),
			Action: tokensExpire,
		},
		{
			Name:  "describe",
			Usage: "list delegation tokens",
			Description: "Like kafka-delegation-tokens.sh --describe. Without --owner-principal, the\n" +
				"tokens the user owns or may renew and those it has Describe on (the\n" +
				"DelegationToken resource, or DescribeTokens on the owner); with it, only the\n" +
				"tokens one of these principals owns or renews.\n\n" +
				"Examples:\n" +
				"  keel delegation-tokens describe --command-config alice.properties\n" +
				"  keel delegation-tokens describe --command-config admin.properties --owner-principal User:alice -o json",
			Flags:  adminFlags(tokenFlags("describe")...),
			Action: tokensDescribe,
		},
	}
	// The script's form: every flag on the command itself, one action flag
	// saying which subcommand runs (tokensFlagForm).
	flags := adminFlags()
	for _, a := range tokenActions {
		flags = append(flags, &cli.BoolFlag{Name: a, Usage: "the " + a + " subcommand (kafka-delegation-tokens.sh's --" + a + ")"})
	}
	for _, a := range tokenActions {
		for _, f := range tokenFlags(a) {
			if f.Names()[0] == "owner-principal" {
				f = &cli.StringSliceFlag{Name: "owner-principal", Usage: "--create: the token's owner (default: the authenticated user); --describe: only the tokens this principal owns or renews (repeatable); principalType:name"}
			}
			if !slices.ContainsFunc(flags, func(g cli.Flag) bool { return g.Names()[0] == f.Names()[0] }) {
				flags = append(flags, f)
			}
		}
	}
	return &cli.Command{
		Name:  "delegation-tokens",
		Usage: "create, renew, expire and describe delegation tokens (like kafka-delegation-tokens.sh)",
		Description: "Delegation tokens (KIP-48) let a user hand its identity to workers without its\n" +
			"own credential: the user, authenticated some other way, creates a token, and the\n" +
			"workers authenticate with the token over SASL/SCRAM as that user (ACLs and quotas\n" +
			"are the owner's).\n\n" +
			"The brokers need delegation.token.secret.key (the same on every node) and a\n" +
			"SASL listener with SCRAM-SHA-256 or SCRAM-SHA-512. Tokens are asked for over SASL\n" +
			"or SSL with a client certificate, by a connection not itself authenticated with\n" +
			"a token: PLAINTEXT gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. So each action\n" +
			"takes --command-config, e.g.\n\n" +
			"  security.protocol=SASL_SSL\n" +
			"  sasl.mechanism=SCRAM-SHA-512\n" +
			"  sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n" +
			"      username=\"alice\" password=\"alice-secret\";\n\n" +
			"A client then authenticates with the token (any Kafka client, keel's commands too)\n" +
			"with SCRAM, the TOKENID as user name, the HMAC as password, and tokenauth:\n\n" +
			"  security.protocol=SASL_SSL\n" +
			"  sasl.mechanism=SCRAM-SHA-512\n" +
			"  sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n" +
			"      username=\"<TOKENID>\" password=\"<HMAC>\" tokenauth=\"true\";\n\n" +
			"Each action is a subcommand; kafka-delegation-tokens.sh's flag form works too:\n" +
			"keel delegation-tokens --create --command-config alice.properties\n" +
			"--renewer-principal User:bob.",
		Subcommands: subs,
		Flags:       flags,
		Action:      func(c *cli.Context) error { return tokensFlagForm(c, subs) },
	}
}

// tokenFlags are an action's own flags (besides --bootstrap-server and
// --command-config), made anew for each command that takes them.
func tokenFlags(action string) []cli.Flag {
	hmac := &cli.StringFlag{Name: "hmac", Usage: "HMAC of the delegation token (base64, as create and describe print it)"}
	switch action {
	case "create":
		return []cli.Flag{
			&cli.Int64Flag{Name: "max-life-time-period", Value: -1, Usage: "max life period for the token in milliseconds; -1: the broker's delegation.token.max.lifetime.ms"},
			&cli.StringSliceFlag{Name: "renewer-principal", Usage: "a principal that may renew the token, principalType:name, e.g. User:bob (repeatable)"},
			&cli.StringSliceFlag{Name: "owner-principal", Usage: "the token's owner, principalType:name (default: the authenticated user)"},
			outputFlag(),
		}
	case "renew":
		return []cli.Flag{hmac,
			&cli.Int64Flag{Name: "renew-time-period", Value: -1, Usage: "renew time period in milliseconds; -1: the broker's delegation.token.expiry.time.ms"},
			outputFlag(),
		}
	case "expire":
		return []cli.Flag{hmac,
			&cli.Int64Flag{Name: "expiry-time-period", Value: -1, Usage: "expiry time period in milliseconds; -1: the token is invalidated immediately"},
			outputFlag(),
		}
	case "describe":
		return []cli.Flag{
			&cli.StringSliceFlag{Name: "owner-principal", Usage: "only the tokens this principal owns or renews, principalType:name (repeatable)"},
			outputFlag(),
		}
	}
	return nil
}

// tokensFlagForm runs the script's form, keel delegation-tokens --create
// ...: exactly one action flag, and only that action's flags, as
// DelegationTokenCommand's checkArgs requires.
func tokensFlagForm(c *cli.Context, subs []*cli.Command) error {
	if c.NArg() > 0 {
		return fmt.Errorf("%q is not an action: create, renew, expire or describe", c.Args().First())
	}
	if c.NumFlags() == 0 {
		return cli.ShowSubcommandHelp(c)
	}
	var chosen []string
	for _, a := range tokenActions {
		if c.Bool(a) {
			chosen = append(chosen, a)
		}
	}
	if len(chosen) != 1 {
		return errors.New("Command must include exactly one action: --create, --renew, --expire or --describe")
	}
	i := slices.Index(tokenActions, chosen[0])
	sub := subs[i]
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if slices.Contains(tokenActions, name) || !c.IsSet(name) {
			continue
		}
		if !slices.ContainsFunc(sub.Flags, func(g cli.Flag) bool { return g.Names()[0] == name }) {
			return fmt.Errorf("Option \"[%s]\" can't be used with option \"[%s]\"", chosen[0], name)
		}
	}
	return sub.Action(c)
}

// principal is a Kafka principal, principalType:name.
type principal struct{ typ, name string }

func (p principal) String() string { return p.typ + ":" + p.name }

// principals reads a principal flag's values as Kafka's
// SecurityUtils.parseKafkaPrincipal does, with its message.
func principals(c *cli.Context, flag string) ([]principal, error) {
	var out []principal
	for _, v := range c.StringSlice(flag) {
		v = strings.TrimSpace(v)
		typ, name, ok := strings.Cut(v, ":")
		if !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("--%s: expected a string in format principalType:principalName but got %s", flag, v)
		}
		out = append(out, principal{typ, name})
	}
	return out, nil
}

// principalList prints principals as Java prints a List: [User:a, User:b].
func principalList(ps []principal) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// delegationToken is a token as the table and -o json show it. Times are
// Unix milliseconds.
type delegationToken struct {
	TokenID         string   `json:"tokenId"`
	HMAC            string   `json:"hmac"`
	Owner           string   `json:"owner"`
	Requester       string   `json:"requester"`
	Renewers        []string `json:"renewers"`
	IssueTimestamp  int64    `json:"issueTimestamp"`
	ExpiryTimestamp int64    `json:"expiryTimestamp"`
	MaxTimestamp    int64    `json:"maxTimestamp"`
}

// tokenDate is a time as the script prints it: SimpleDateFormat
// "yyyy-MM-dd'T'HH:mm", local time.
func tokenDate(ms int64) string {
	return time.UnixMilli(ms).Local().Format("2006-01-02T15:04")
}

// printTokens is DelegationTokenCommand.printToken: a blank line before the
// header and before each token.
func printTokens(w io.Writer, tokens []delegationToken) {
	const row = "\n%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s\n"
	fmt.Fprintf(w, row, "TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE")
	for _, t := range tokens {
		fmt.Fprintf(w, row, t.TokenID, t.HMAC, t.Owner, t.Requester, "["+strings.Join(t.Renewers, ", ")+"]",
			tokenDate(t.IssueTimestamp), tokenDate(t.ExpiryTimestamp), tokenDate(t.MaxTimestamp))
	}
}

// requester is the token's requester principal; before v3 the responses do
// not name one, and the requester was the owner.
func requester(typ, name, owner string) string {
	if name == "" {
		return owner
	}
	return typ + ":" + name
}

func tokensCreate(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	renewers, err := principals(c, "renewer-principal")
	if err != nil {
		return err
	}
	owners, err := principals(c, "owner-principal")
	switch {
	case err != nil:
		return err
	case len(owners) > 1:
		return fmt.Errorf("--owner-principal: a token has one owner, %d given", len(owners))
	}
	maxLife := c.Int64("max-life-time-period")
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	if !asJSON {
		fmt.Fprintf(c.App.Writer, "Calling create token operation with renewers :%s , max-life-time-period :%d\n", principalList(renewers), maxLife)
	}
	req := kmsg.NewPtrCreateDelegationTokenRequest()
	req.MaxLifetimeMillis = maxLife
	for _, r := range renewers {
		cr := kmsg.NewCreateDelegationTokenRequestRenewer()
		cr.PrincipalType, cr.PrincipalName = r.typ, r.name
		req.Renewers = append(req.Renewers, cr)
	}
	if len(owners) == 1 {
		req.OwnerPrincipalType, req.OwnerPrincipalName = &owners[0].typ, &owners[0].name
	}
	kresp, err := adm.Client().Request(ctx, req)
	if err != nil {
		return fmt.Errorf("create delegation token: %w", err)
	}
	resp := kresp.(*kmsg.CreateDelegationTokenResponse)
	if err := client.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("create delegation token: %w", err)
	}
	if len(owners) == 1 && resp.Version < 3 {
		// Before v3 the owner is not sent: the token is the requester's.
		return fmt.Errorf("create delegation token: the broker does not take --owner-principal (CreateDelegationToken v3, Kafka 3.3+); token %s is owned by %s:%s", resp.TokenID, resp.PrincipalType, resp.PrincipalName)
	}
	owner := resp.PrincipalType + ":" + resp.PrincipalName
	tok := delegationToken{
		TokenID: resp.TokenID, HMAC: base64.StdEncoding.EncodeToString(resp.HMAC), Owner: owner,
		Requester: requester(resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName, owner), Renewers: []string{},
		IssueTimestamp: resp.IssueTimestamp, ExpiryTimestamp: resp.ExpiryTimestamp, MaxTimestamp: resp.MaxTimestamp,
	}
	for _, r := range renewers {
		tok.Renewers = append(tok.Renewers, r.String())
	}
	if asJSON {
		return writeJSON(c.App.Writer, tok)
	}
	fmt.Fprintf(c.App.Writer, "Created delegation token with tokenId : %s\n", tok.TokenID)
	printTokens(c.App.Writer, []delegationToken{tok})
	return nil
}

// tokenHMAC is --hmac, decoded: standard base64, padded or not, as Java's
// Base64.getDecoder() takes it.
func tokenHMAC(c *cli.Context) ([]byte, error) {
	s := strings.TrimSpace(c.String("hmac"))
	if s == "" {
		return nil, errors.New(`Missing required argument "[hmac]": the token to renew or expire, by its HMAC (base64)`)
	}
	mac, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if mac, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("--hmac %s: not base64 (the HMAC column of create or describe)", s)
		}
	}
	return mac, nil
}

// printExpiry ends renew and expire: the script's line, or -o json's
// {"expiryTimestamp": ...}.
func printExpiry(c *cli.Context, asJSON bool, what string, expiry int64) error {
	if asJSON {
		return writeJSON(c.App.Writer, map[string]int64{"expiryTimestamp": expiry})
	}
	// The script's printf ends this line without a newline, leaving the
	// shell's prompt on it; keel ends it.
	fmt.Fprintf(c.App.Writer, "Completed %s operation. New expiry date : %s\n", what, tokenDate(expiry))
	return nil
}

func tokensRenew(c *cli.Context) error {
	return tokensChangeExpiry(c, "renew", "renew-time-period", func(mac []byte, period int64) kmsg.Request {
		req := kmsg.NewPtrRenewDelegationTokenRequest()
		req.HMAC, req.RenewTimeMillis = mac, period
		return req
	})
}

func tokensExpire(c *cli.Context) error {
	return tokensChangeExpiry(c, "expire", "expiry-time-period", func(mac []byte, period int64) kmsg.Request {
		req := kmsg.NewPtrExpireDelegationTokenRequest()
		req.HMAC, req.ExpiryPeriodMillis = mac, period
		return req
	})
}

// tokensChangeExpiry is renew and expire: the token named by --hmac gets a
// new expiry, periodFlag from now, which the script's lines print.
func tokensChangeExpiry(c *cli.Context, action, periodFlag string, request func(mac []byte, period int64) kmsg.Request) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	mac, err := tokenHMAC(c)
	if err != nil {
		return err
	}
	period := c.Int64(periodFlag)
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	if !asJSON {
		// The script's words: "expire-time-period" for --expiry-time-period.
		fmt.Fprintf(c.App.Writer, "Calling %s token operation with hmac :%s , %s-time-period :%d\n", action, c.String("hmac"), action, period)
	}
	kresp, err := adm.Client().Request(ctx, request(mac, period))
	if err != nil {
		return fmt.Errorf("%s delegation token: %w", action, err)
	}
	var code int16
	var expiry int64
	switch r := kresp.(type) {
	case *kmsg.RenewDelegationTokenResponse:
		code, expiry = r.ErrorCode, r.ExpiryTimestamp
	case *kmsg.ExpireDelegationTokenResponse:
		code, expiry = r.ErrorCode, r.ExpiryTimestamp
	}
	if err := client.ErrorForCode(code); err != nil {
		return fmt.Errorf("%s delegation token: %w", action, err)
	}
	return printExpiry(c, asJSON, action, expiry)
}

func tokensDescribe(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	owners, err := principals(c, "owner-principal")
	if err != nil {
		return err
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	if !asJSON {
		if len(owners) == 0 {
			fmt.Fprintln(c.App.Writer, "Calling describe token operation for current user.")
		} else {
			fmt.Fprintf(c.App.Writer, "Calling describe token operation for owners: %s\n", principalList(owners))
		}
	}
	req := kmsg.NewPtrDescribeDelegationTokenRequest()
	// No owners is null on the wire: every token the user may see. An
	// empty list would ask for none.
	for _, o := range owners {
		ro := kmsg.NewDescribeDelegationTokenRequestOwner()
		ro.PrincipalType, ro.PrincipalName = o.typ, o.name
		req.Owners = append(req.Owners, ro)
	}
	kresp, err := adm.Client().Request(ctx, req)
	if err != nil {
		return fmt.Errorf("describe delegation tokens: %w", err)
	}
	resp := kresp.(*kmsg.DescribeDelegationTokenResponse)
	if err := client.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("describe delegation tokens: %w", err)
	}
	tokens := []delegationToken{}
	for _, d := range resp.TokenDetails {
		owner := d.PrincipalType + ":" + d.PrincipalName
		t := delegationToken{
			TokenID: d.TokenID, HMAC: base64.StdEncoding.EncodeToString(d.HMAC), Owner: owner,
			Requester: requester(d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName, owner), Renewers: []string{},
			IssueTimestamp: d.IssueTimestamp, ExpiryTimestamp: d.ExpiryTimestamp, MaxTimestamp: d.MaxTimestamp,
		}
		for _, r := range d.Renewers {
			t.Renewers = append(t.Renewers, r.PrincipalType+":"+r.PrincipalName)
		}
		tokens = append(tokens, t)
	}
	if asJSON {
		return writeJSON(c.App.Writer, tokens)
	}
	// The script's count has no newline of its own: the table's header
	// follows on the next line, without a blank line.
	fmt.Fprintf(c.App.Writer, "Total number of tokens : %d", len(tokens))
	printTokens(c.App.Writer, tokens)
	return nil
}
