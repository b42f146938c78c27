package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/keelstream/keel/client"
	"github.com/keelstream/keel/metadata"
)

// describeQuotas is keel configs describe for users, clients and ips: each
// matching entity's client quotas, as kafka-configs.sh prints them. A
// named entity (or default) is matched strictly: alice's own quotas, not
// alice's per client id; a type alone matches every entity with it.
func describeQuotas(c *cli.Context, ctx context.Context, adm *client.Admin, e configEntity, asJSON bool) error {
	var filters []client.QuotaFilter
	for _, t := range e.quotaTypes {
		f := client.QuotaFilter{EntityType: t}
		if name, named := e.quota[t]; named {
			f.Name, f.Default = name, name == nil
		}
		filters = append(filters, f)
	}
	quotas, err := adm.DescribeClientQuotas(ctx, len(e.quota) > 0, filters...)
	if err != nil {
		return err
	}
	if asJSON {
		type jsonQuotas struct {
			Entity client.QuotaEntity `json:"entity"` // a null name: the default
			Quotas map[string]float64 `json:"quotas"`
		}
		out := []jsonQuotas{}
		for _, q := range quotas {
			out = append(out, jsonQuotas{q.Entity, q.Values})
		}
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, q := range quotas {
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"="+metadata.JavaDouble(q.Values[k]))
		}
		fmt.Fprintf(c.App.Writer, "Quota configs for %s are %s\n", q.Entity, strings.Join(parts, ", "))
	}
	return nil
}

// alterQuotas is keel configs alter for users, clients and ips: --add-config
// sets quotas (numbers), --delete-config removes them.
func alterQuotas(c *cli.Context, e configEntity) error {
	if len(e.quota) == 0 {
		return errors.New("alter names an entity: --entity-name or --entity-default (or --user, --client and their -defaults)")
	}
	alt := client.QuotaAlteration{Entity: e.quota, Set: map[string]float64{}}
	set, err := addedConfigs(c)
	if err != nil {
		return err
	}
	for _, kv := range set {
		if strings.HasPrefix(kv[0], "SCRAM-SHA-") {
			return fmt.Errorf("--add-config %s: SCRAM credentials are set with keel users alter", kv[0])
		}
		v, err := strconv.ParseFloat(kv[1], 64)
		if err != nil {
			return fmt.Errorf("--add-config %s=%s: a quota is a number", kv[0], kv[1])
		}
		alt.Set[kv[0]] = v
	}
	if s := c.String("delete-config"); s != "" {
		for _, k := range strings.Split(s, ",") {
			if k = strings.TrimSpace(k); k != "" {
				alt.Remove = append(alt.Remove, k)
			}
		}
	}
	if len(alt.Set)+len(alt.Remove) == 0 {
		return errors.New("give --add-config, --add-config-file or --delete-config")
	}
	if c.String("bootstrap-controller") != "" {
		if err := alterQuotasViaController(c, alt); err != nil {
			return err
		}
	} else {
		ctx, adm, done, err := openAdmin(c)
		if err != nil {
			return err
		}
		defer done()
		errs, err := adm.AlterClientQuotas(ctx, alt)
		if err != nil {
			return err
		}
		if errs[0] != nil {
			return fmt.Errorf("%s: %w", e.quota, errs[0])
		}
	}
	// kafka-configs.sh's line names the first entity type given.
	head := e.quotaTypes[0]
	kind := map[string]string{client.QuotaEntityUser: "user", client.QuotaEntityClientID: "client", client.QuotaEntityIP: "ip"}[head]
	if name := e.quota[head]; name != nil {
		fmt.Fprintf(c.App.Writer, "Completed updating config for %s %s.\n", kind, *name)
	} else {
		fmt.Fprintf(c.App.Writer, "Completed updating default config for %ss in the cluster.\n", kind)
	}
	return nil
}

// alterQuotasViaController sends AlterClientQuotas to the active
// controller, found from --bootstrap-controller, as alterViaController
// does configs: the way to lift a quota that keeps every client out, such
// as a default ip's connection_creation_rate of 0 (the controller's
// listeners are not limited by ip quotas).
func alterQuotasViaController(c *cli.Context, alt client.QuotaAlteration) error {
	resp, err := viaController(c, client.NewAlterClientQuotasRequest(alt), func(r kmsg.Response) int16 {
		if entries := r.(*kmsg.AlterClientQuotasResponse).Entries; len(entries) == 1 {
			return entries[0].ErrorCode
		}
		return 0 // malformed: reported below
	})
	if err != nil {
		return fmt.Errorf("alter client quotas of %s: %w", alt.Entity, err)
	}
	entries := resp.(*kmsg.AlterClientQuotasResponse).Entries
	if len(entries) != 1 {
		return fmt.Errorf("alter client quotas of %s: %d entries in the answer", alt.Entity, len(entries))
	}
	if err := kerr.ErrorForCode(entries[0].ErrorCode); err != nil {
		return fmt.Errorf("%s: %w%s", alt.Entity, err, errorMessage(entries[0].ErrorMessage))
	}
	return nil
}
