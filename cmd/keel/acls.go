package main

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/client"
)

// aclsCommand is `keel acls`, kafka-acls.sh.
func aclsCommand() *cli.Command {
	resourceFlags := []cli.Flag{
		&cli.StringSliceFlag{Name: "topic", Usage: "a topic (repeatable; \"*\" for every topic)"},
		&cli.StringSliceFlag{Name: "group", Usage: "a consumer group (repeatable; \"*\" for every group)"},
		&cli.StringSliceFlag{Name: "transactional-id", Usage: "a transactional id (repeatable; \"*\" for every one)"},
		&cli.BoolFlag{Name: "cluster", Usage: "the cluster"},
		&cli.StringSliceFlag{Name: "delegation-token", Usage: "a delegation token, by id (repeatable; \"*\" for every one): Describe lets a principal describe it"},
		&cli.StringSliceFlag{Name: "user-principal", Usage: "a user, as a resource (repeatable, e.g. User:carol): CreateTokens lets a principal create delegation tokens owned by it, DescribeTokens describe them"},
		&cli.StringFlag{Name: "resource-pattern-type", Value: "literal", Usage: "literal or prefixed (list and remove: also any and match)"},
	}
	changeFlags := append([]cli.Flag{
		&cli.StringSliceFlag{Name: "allow-principal", Usage: "principal allowed, e.g. User:alice (repeatable)"},
		&cli.StringSliceFlag{Name: "deny-principal", Usage: "principal denied (repeatable)"},
		&cli.StringSliceFlag{Name: "allow-host", Usage: "host the allowed principals may come from (repeatable; default *)"},
		&cli.StringSliceFlag{Name: "deny-host", Usage: "host the denied principals are denied from (repeatable; default *)"},
		&cli.StringSliceFlag{Name: "operation", Usage: "Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All (repeatable)"},
		&cli.BoolFlag{Name: "producer", Usage: "the ACLs a producer needs: Write, Describe and Create on the topics (and Write, Describe on the transactional ids)"},
		&cli.BoolFlag{Name: "consumer", Usage: "the ACLs a consumer needs: Read and Describe on the topics, Read on the groups"},
		&cli.BoolFlag{Name: "force", Usage: "accepted for kafka-acls.sh's sake: keel acls remove never asks"},
	}, resourceFlags...)
	return &cli.Command{
		Name:  "acls",
		Usage: "add, list and remove ACLs (like kafka-acls.sh)",
		Description: "ACLs take effect on brokers with authorizer.class.name=\n" +
			"org.apache.kafka.metadata.authorizer.StandardAuthorizer (see keel server --help);\n" +
			"other brokers answer SECURITY_DISABLED. kafka-acls.sh's flag form works too:\n" +
			"keel acls --add --allow-principal User:alice --operation Read --topic orders.",
		Subcommands: []*cli.Command{
			{
				Name:  "add",
				Usage: "add ACLs",
				Description: "One ACL per principal, host, operation and resource given.\n\n" +
					"Examples:\n" +
					"  keel acls add --allow-principal User:alice --operation Read --operation Write --topic orders\n" +
					"  keel acls add --allow-principal User:alice --consumer --topic orders --group billing\n" +
					"  keel acls add --allow-principal User:app --producer --topic app- --resource-pattern-type prefixed",
				Flags:  adminFlags(changeFlags...),
				Action: aclsAdd,
			},
			{
				Name:  "list",
				Usage: "list ACLs",
				Description: "Without a resource, every ACL; --principal filters by principal.\n\n" +
					"Examples:\n" +
					"  keel acls list\n" +
					"  keel acls list --topic orders --resource-pattern-type match",
				Flags: adminFlags(append([]cli.Flag{
					&cli.StringSliceFlag{Name: "principal", Usage: "only the ACLs of this principal (repeatable)"},
				}, resourceFlags...)...),
				Action: aclsList,
			},
			{
				Name:  "remove",
				Usage: "remove ACLs",
				Description: "Removes the ACLs that match: the principals, hosts and operations given\n" +
					"(any, if none are) on the resources given.\n\n" +
					"Examples:\n" +
					"  keel acls remove --allow-principal User:alice --operation Write --topic orders\n" +
					"  keel acls remove --topic orders",
				Flags:  adminFlags(changeFlags...),
				Action: aclsRemove,
			},
		},
	}
}

// aclResources are the resources the flags name, with the pattern type.
func aclResources(c *cli.Context, filter bool) ([]client.ACLBinding, error) {
	pattern, err := kmsg.ParseACLResourcePatternType(c.String("resource-pattern-type"))
	switch {
	case err != nil:
		return nil, fmt.Errorf("--resource-pattern-type %s: want literal or prefixed", c.String("resource-pattern-type"))
	case !filter && pattern != kmsg.ACLResourcePatternTypeLiteral && pattern != kmsg.ACLResourcePatternTypePrefixed:
		return nil, fmt.Errorf("--resource-pattern-type %s: an ACL is literal or prefixed", c.String("resource-pattern-type"))
	}
	var out []client.ACLBinding
	add := func(typ kmsg.ACLResourceType, names []string) {
		for _, n := range names {
			out = append(out, client.ACLBinding{ResourceType: typ, ResourceName: n, PatternType: pattern})
		}
	}
	add(kmsg.ACLResourceTypeTopic, c.StringSlice("topic"))
	add(kmsg.ACLResourceTypeGroup, c.StringSlice("group"))
	add(kmsg.ACLResourceTypeTransactionalId, c.StringSlice("transactional-id"))
	add(kmsg.ACLResourceTypeDelegationToken, c.StringSlice("delegation-token"))
	add(kmsg.ACLResourceTypeUser, c.StringSlice("user-principal"))
	if c.Bool("cluster") {
		out = append(out, client.ACLBinding{ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: "kafka-cluster", PatternType: kmsg.ACLResourcePatternTypeLiteral})
	}
	return out, nil
}

// aclOperations are --operation's, or --producer's and --consumer's for
// a resource type.
func aclOperations(c *cli.Context, typ kmsg.ACLResourceType) ([]kmsg.ACLOperation, error) {
	var ops []kmsg.ACLOperation
	for _, s := range c.StringSlice("operation") {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationAny {
			return nil, fmt.Errorf("--operation %s: not an ACL operation", s)
		}
		ops = append(ops, op)
	}
	if c.Bool("producer") {
		switch typ {
		case kmsg.ACLResourceTypeTopic:
			ops = append(ops, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate)
		case kmsg.ACLResourceTypeTransactionalId:
			ops = append(ops, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
		}
	}
	if c.Bool("consumer") {
		switch typ {
		case kmsg.ACLResourceTypeTopic:
			ops = append(ops, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe)
		case kmsg.ACLResourceTypeGroup:
			ops = append(ops, kmsg.ACLOperationRead)
		}
	}
	return ops, nil
}

// aclBindings are the ACLs the change flags describe on each resource.
func aclBindings(c *cli.Context, filter bool) ([]client.ACLBinding, error) {
	resources, err := aclResources(c, filter)
	if err != nil {
		return nil, err
	}
	if len(resources) == 0 {
		return nil, errors.New("name a resource: --topic, --group, --transactional-id, --cluster, --delegation-token or --user-principal")
	}
	if c.Bool("consumer") && len(c.StringSlice("group")) == 0 && !filter {
		return nil, errors.New("--consumer needs --group")
	}
	type who struct {
		principal  string
		hosts      []string
		permission kmsg.ACLPermissionType
	}
	var whos []who
	hosts := func(flag string) []string {
		if h := c.StringSlice(flag); len(h) > 0 {
			return h
		}
		if filter {
			return []string{""}
		}
		return []string{"*"}
	}
	for _, p := range c.StringSlice("allow-principal") {
		whos = append(whos, who{p, hosts("allow-host"), kmsg.ACLPermissionTypeAllow})
	}
	for _, p := range c.StringSlice("deny-principal") {
		whos = append(whos, who{p, hosts("deny-host"), kmsg.ACLPermissionTypeDeny})
	}
	if len(whos) == 0 {
		if !filter {
			return nil, errors.New("give --allow-principal or --deny-principal")
		}
		whos = []who{{"", []string{""}, kmsg.ACLPermissionTypeAny}}
	}
	var out []client.ACLBinding
	for _, r := range resources {
		ops, err := aclOperations(c, r.ResourceType)
		if err != nil {
			return nil, err
		}
		if len(ops) == 0 {
			if c.Bool("producer") || c.Bool("consumer") {
				continue // --producer on a group, ...
			}
			ops = []kmsg.ACLOperation{kmsg.ACLOperationAll}
			if filter {
				ops = []kmsg.ACLOperation{kmsg.ACLOperationAny}
			}
		}
		for _, w := range whos {
			for _, h := range w.hosts {
				for _, op := range ops {
					b := r
					b.Principal, b.Host, b.Operation, b.Permission = w.principal, h, op, w.permission
					out = append(out, b)
				}
			}
		}
	}
	return out, nil
}

func aclsAdd(c *cli.Context) error {
	acls, err := aclBindings(c, false)
	if err != nil {
		return err
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	results, err := adm.CreateACLs(ctx, acls...)
	if err != nil {
		return err
	}
	var errs []error
	for i, e := range results {
		if e != nil {
			errs = append(errs, fmt.Errorf("%v: %w", acls[i], e))
			continue
		}
		fmt.Fprintf(c.App.Writer, "Added ACL %v\n", acls[i])
	}
	return errors.Join(errs...)
}

func aclsRemove(c *cli.Context) error {
	filters, err := aclBindings(c, true)
	if err != nil {
		return err
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	deleted, err := adm.DeleteACLs(ctx, filters...)
	if err != nil {
		return err
	}
	n := 0
	for _, acls := range deleted {
		for _, a := range acls {
			fmt.Fprintf(c.App.Writer, "Removed ACL %v\n", a)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(c.App.Writer, "No ACL matched")
	}
	return nil
}

func aclsList(c *cli.Context) error {
	resources, err := aclResources(c, true)
	if err != nil {
		return err
	}
	if len(resources) == 0 {
		resources = []client.ACLBinding{{}} // everything
		if c.String("resource-pattern-type") == "literal" && !c.IsSet("resource-pattern-type") {
			resources[0].PatternType = kmsg.ACLResourcePatternTypeAny
		}
	}
	principals := c.StringSlice("principal")
	if len(principals) == 0 {
		principals = []string{""}
	}
	ctx, adm, done, err := openAdmin(c)
	if err != nil {
		return err
	}
	defer done()
	byResource := map[string][]string{}
	for _, r := range resources {
		for _, p := range principals {
			f := r
			f.Principal = p
			acls, err := adm.DescribeACLs(ctx, f)
			if err != nil {
				return err
			}
			for _, a := range acls {
				key := fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", a.ResourceType, a.ResourceName, a.PatternType)
				line := fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", a.Principal, a.Host, a.Operation, a.Permission)
				if !slices.Contains(byResource[key], line) {
					byResource[key] = append(byResource[key], line)
				}
			}
		}
	}
	keys := make([]string, 0, len(byResource))
	for k := range byResource {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// kafka-acls.sh's listing.
		fmt.Fprintf(c.App.Writer, "Current ACLs for resource `%s`:\n \t%s \n\n", k, strings.Join(byResource[k], "\n \t"))
	}
	return nil
}
