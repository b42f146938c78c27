package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/keelstream/keel/client"
	"github.com/urfave/cli/v2"
)

// usersCommand is `keel users`: SCRAM credentials, as kafka-configs.sh
// --entity-type users manages them.
func usersCommand() *cli.Command {
	return &cli.Command{
		Name:  "users",
		Usage: "describe, add and delete users' SCRAM credentials (like kafka-configs.sh --entity-type users)",
		Description: "Each action is a subcommand; kafka-configs.sh's flag form works too:\n" +
			"keel users --alter --entity-type users --entity-name alice --add-config '...'.\n\n" +
			"SCRAM-SHA-256 and SCRAM-SHA-512 credentials live in the cluster's metadata log:\n" +
			"every broker's SASL listeners that enable the mechanism accept them from the next\n" +
			"connection on. The password is salted on this side and never sent. The first\n" +
			"credentials of a cluster whose every client listener needs SCRAM are given to\n" +
			"keel format --add-scram instead.",
		Subcommands: []*cli.Command{
			{
				Name:  "describe",
				Usage: "list users' SCRAM credentials: mechanism and iterations",
				Description: "Like kafka-configs.sh --describe --entity-type users. Without --user, every\n" +
					"user with a credential. A named user without any is an error (exit 1).\n\n" +
					"Examples:\n" +
					"  keel users describe\n" +
					"  keel users describe --user alice -o json",
				Flags:  adminFlags(&cli.StringSliceFlag{Name: "user", Aliases: []string{"entity-name"}, Usage: "user to describe (repeatable; default all)"}, entityTypeFlag(), outputFlag()),
				Action: usersDescribe,
			},
			{
				Name:  "alter",
				Usage: "add, change or delete a user's SCRAM credentials",
				Description: "Like kafka-configs.sh --alter --entity-type users --entity-name USER.\n" +
					"--add-config takes kafka-configs' form, mechanisms separated by commas:\n" +
					"  SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]\n" +
					"iterations default to 4096 (the least brokers accept; at most 16384). A value\n" +
					"with a comma or ] in it goes in double quotes: password=\"a,b]c\".\n" +
					"--delete-config names mechanisms: SCRAM-SHA-512.\n\n" +
					"Examples:\n" +
					"  keel users alter --user alice --add-config 'SCRAM-SHA-256=[password=alice-secret]'\n" +
					"  keel users alter --user alice --delete-config SCRAM-SHA-256",
				Flags: adminFlags(
					&cli.StringFlag{Name: "user", Aliases: []string{"entity-name"}, Required: true, Usage: "the user"},
					&cli.StringFlag{Name: "add-config", Usage: "credentials to set: MECHANISM=[password=...,iterations=...],..."},
					&cli.StringFlag{Name: "delete-config", Usage: "mechanisms to delete, separated by commas"},
					entityTypeFlag(),
				),
				Action: usersAlter,
			},
		},
	}
}

// entityTypeFlag takes kafka-configs.sh's --entity-type users, so that its
// command lines work; any other entity type is refused.
func entityTypeFlag() cli.Flag {
	return &cli.StringFlag{Name: "entity-type", Value: "users", Usage: "users (accepted for kafka-configs.sh's sake)",
		Action: func(_ *cli.Context, v string) error {
			if v != "users" {
				return fmt.Errorf("--entity-type %s: keel users changes users only (keel configs takes brokers, broker-loggers and topics)", v)
			}
			return nil
		}}
}

func usersDescribe(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	users, err := adm.DescribeUserScramCredentials(ctx, c.StringSlice("user")...)
	if err != nil {
		return err
	}
	sort.SliceStable(users, func(i, j int) bool { return users[i].User < users[j].User })
	var errs []error
	type jsonCred struct {
		Mechanism  string `json:"mechanism"`
		Iterations int32  `json:"iterations"`
	}
	type jsonUser struct {
		User        string     `json:"user"`
		Credentials []jsonCred `json:"credentials"`
	}
	out := []jsonUser{}
	for _, u := range users {
		if u.Err != nil {
			errs = append(errs, fmt.Errorf("user %s: %w", u.User, u.Err))
			continue
		}
		ju := jsonUser{User: u.User, Credentials: []jsonCred{}}
		var parts []string
		for _, cr := range u.Credentials {
			ju.Credentials = append(ju.Credentials, jsonCred{cr.Mechanism, cr.Iterations})
			parts = append(parts, fmt.Sprintf("%s=iterations=%d", cr.Mechanism, cr.Iterations))
		}
		out = append(out, ju)
		if !asJSON {
			// kafka-configs.sh's line.
			fmt.Fprintf(c.App.Writer, "SCRAM credential configs for user-principal '%s' are %s\n", u.User, strings.Join(parts, ", "))
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

func usersAlter(c *cli.Context) error {
	user := c.String("user")
	var dels []client.ScramDeletion
	var ups []client.ScramUpsertion
	if s := c.String("delete-config"); s != "" {
		for _, m := range strings.Split(s, ",") {
			m = strings.TrimSpace(m)
			if !isScramMechanism(m) {
				return fmt.Errorf("--delete-config %s: only SCRAM-SHA-256 and SCRAM-SHA-512 are user configs keel users changes", m)
			}
			dels = append(dels, client.ScramDeletion{User: user, Mechanism: m})
		}
	}
	if s := c.String("add-config"); s != "" {
		specs, err := parseScramSpecs(s)
		if err != nil {
			return fmt.Errorf("--add-config: %w", err)
		}
		for _, sp := range specs {
			u, err := sp.upsertion(user)
			if err != nil {
				return fmt.Errorf("--add-config %s: %w", sp.mechanism, err)
			}
			ups = append(ups, u)
		}
	}
	if len(dels)+len(ups) == 0 {
		return errors.New("give --add-config or --delete-config")
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	results, err := adm.AlterUserScramCredentials(ctx, dels, ups)
	if err != nil {
		return err
	}
	if err := results[user]; err != nil {
		return fmt.Errorf("user %s: %w", user, err)
	}
	fmt.Fprintf(c.App.Writer, "Completed updating config for user %s.\n", user)
	return nil
}

func isScramMechanism(m string) bool { return m == "SCRAM-SHA-256" || m == "SCRAM-SHA-512" }

// scramSpec is one MECHANISM=[key=value,...] of kafka-configs' --add-config
// or kafka-storage's --add-scram.
type scramSpec struct {
	mechanism string
	options   map[string]string
}

// parseScramSpecs reads MECHANISM=[key=value,...] specs separated by
// commas. A value is bare (up to the next , or ]) or in double quotes
// (anything but a double quote), as Kafka's tools read them.
func parseScramSpecs(s string) ([]scramSpec, error) {
	var out []scramSpec
	rest := strings.TrimSpace(s)
	for rest != "" {
		mech, after, ok := strings.Cut(rest, "=[")
		mech = strings.TrimSpace(mech)
		if !ok {
			return nil, fmt.Errorf("%q: want MECHANISM=[key=value,...]", rest)
		}
		if !isScramMechanism(mech) {
			return nil, fmt.Errorf("%q is not SCRAM-SHA-256 or SCRAM-SHA-512", mech)
		}
		sp := scramSpec{mechanism: mech, options: map[string]string{}}
		rest = after
		for {
			rest = strings.TrimLeft(rest, " ")
			if strings.HasPrefix(rest, "]") {
				rest = rest[1:]
				break
			}
			key, after, ok := strings.Cut(rest, "=")
			if !ok || key == "" || strings.ContainsAny(key, ",]") {
				return nil, fmt.Errorf("%s: want key=value inside [...]", mech)
			}
			key = strings.ToLower(strings.TrimSpace(key))
			var val string
			if strings.HasPrefix(after, `"`) {
				end := strings.IndexByte(after[1:], '"')
				if end < 0 {
					return nil, fmt.Errorf("%s: %s: unterminated quote", mech, key)
				}
				val, rest = after[1:1+end], after[2+end:]
			} else {
				end := strings.IndexAny(after, ",]")
				if end < 0 {
					return nil, fmt.Errorf("%s: missing ]", mech)
				}
				val, rest = after[:end], after[end:]
			}
			if _, dup := sp.options[key]; dup {
				return nil, fmt.Errorf("%s: %s given twice", mech, key)
			}
			sp.options[key] = val
			switch {
			case strings.HasPrefix(rest, ","):
				rest = rest[1:]
			case strings.HasPrefix(rest, "]"):
			default:
				return nil, fmt.Errorf("%s: missing ] after %s", mech, key)
			}
		}
		out = append(out, sp)
		rest = strings.TrimSpace(rest)
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("%q: want , between mechanisms", rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	return out, nil
}

// upsertion is the credential a spec of kafka-configs' --add-config sets
// for user: password= and, optionally, iterations=.
func (sp scramSpec) upsertion(user string) (client.ScramUpsertion, error) {
	u := client.ScramUpsertion{User: user, Mechanism: sp.mechanism}
	if err := sp.check("password", "iterations"); err != nil {
		return u, err
	}
	var ok bool
	if u.Password, ok = sp.options["password"]; !ok {
		return u, errors.New("password=... is missing")
	}
	var err error
	u.Iterations, err = sp.iterations()
	return u, err
}

// check refuses keys other than allowed.
func (sp scramSpec) check(allowed ...string) error {
	for k := range sp.options {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("unknown key %q (%s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// iterations is the spec's iterations=, 0 when absent.
func (sp scramSpec) iterations() (int32, error) {
	it, ok := sp.options["iterations"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(it, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("iterations=%s: not a number", it)
	}
	return int32(n), nil
}
