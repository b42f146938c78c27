package client

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (KIP-546), as kafka-configs --entity-type users / clients
// --alter --add-config producer_byte_rate=1048576 and --describe manage
// them through the Admin API.

// Client quota entity types.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// QuotaEntity names what a quota applies to: each entity type (user,
// client-id) with its name, nil for that type's default (all users
// without a quota of their own). {user: alice, client-id: app} is alice's
// connections from client id app.
type QuotaEntity map[string]*string

// String is kafka-configs.sh's description of the entity:
// user-principal 'alice', client-id 'app'; the default user-principal.
func (e QuotaEntity) String() string {
	types := make([]string, 0, len(e))
	for t := range e {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return quotaTypeOrder(types[i]) < quotaTypeOrder(types[j]) })
	parts := make([]string, 0, len(types))
	for _, t := range types {
		label := t
		if t == QuotaEntityUser {
			label = "user-principal"
		}
		if name := e[t]; name != nil {
			parts = append(parts, fmt.Sprintf("%s '%s'", label, *name))
		} else {
			parts = append(parts, "the default "+label)
		}
	}
	return strings.Join(parts, ", ")
}

// key identifies the entity unambiguously, whatever its names hold.
func (e QuotaEntity) key() string {
	var b strings.Builder
	for _, c := range e.request() {
		b.WriteString(c.Type)
		if c.Name == nil {
			b.WriteString("\x01")
		} else {
			b.WriteString("\x00" + *c.Name)
		}
		b.WriteString("\x02")
	}
	return b.String()
}

func quotaTypeOrder(t string) int {
	switch t {
	case QuotaEntityUser:
		return 0
	case QuotaEntityClientID:
		return 1
	}
	return 2
}

func (e QuotaEntity) request() []kmsg.AlterClientQuotasRequestEntryEntity {
	var out []kmsg.AlterClientQuotasRequestEntryEntity
	for t, name := range e {
		out = append(out, kmsg.AlterClientQuotasRequestEntryEntity{Type: t, Name: name})
	}
	sort.Slice(out, func(i, j int) bool { return quotaTypeOrder(out[i].Type) < quotaTypeOrder(out[j].Type) })
	return out
}

// QuotaFilter matches entities by one entity type: Name set, that name;
// Default, the type's default entity; neither, any entity with that type.
type QuotaFilter struct {
	EntityType string
	Name       *string
	Default    bool
}

// EntityQuotas are one entity's quotas: producer_byte_rate,
// consumer_byte_rate, ... and their values.
type EntityQuotas struct {
	Entity QuotaEntity
	Values map[string]float64
}

// DescribeClientQuotas returns the quotas of the entities that match every
// filter; with strict, only entities with no other entity types than the
// filters name (kafka-configs --describe --entity-type users --entity-name
// alice is strict: alice's own quotas, not alice's per client id).
func (a *Admin) DescribeClientQuotas(ctx context.Context, strict bool, filters ...QuotaFilter) ([]EntityQuotas, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = strict
	for _, f := range filters {
		c := kmsg.DescribeClientQuotasRequestComponent{EntityType: f.EntityType, MatchType: 2} // any
		switch {
		case f.Name != nil:
			c.MatchType, c.Match = 0, f.Name
		case f.Default:
			c.MatchType = 1
		}
		req.Components = append(req.Components, c)
	}
	var out []EntityQuotas
	err := a.retry(ctx, func() error {
		out = nil
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.DescribeClientQuotasResponse)
		if err := errorWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return err
		}
		for _, e := range resp.Entries {
			q := EntityQuotas{Entity: QuotaEntity{}, Values: map[string]float64{}}
			for _, c := range e.Entity {
				q.Entity[c.Type] = c.Name
			}
			for _, v := range e.Values {
				q.Values[v.Key] = v.Value
			}
			out = append(out, q)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("describe client quotas: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entity.String() < out[j].Entity.String() })
	return out, nil
}

// QuotaAlteration sets and removes one entity's quotas.
type QuotaAlteration struct {
	Entity QuotaEntity
	Set    map[string]float64
	Remove []string
}

// NewAlterClientQuotasRequest is the AlterClientQuotas request of
// alterations, one entry each: the quotas to set, by key, then those to
// remove. Admin.AlterClientQuotas sends it to any broker; a caller may
// send it to the active controller itself (kafka-configs.sh
// --bootstrap-controller).
func NewAlterClientQuotasRequest(alterations ...QuotaAlteration) *kmsg.AlterClientQuotasRequest {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	for _, alt := range alterations {
		e := kmsg.AlterClientQuotasRequestEntry{Entity: alt.Entity.request()}
		keys := make([]string, 0, len(alt.Set))
		for k := range alt.Set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			e.Ops = append(e.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: k, Value: alt.Set[k]})
		}
		for _, k := range alt.Remove {
			e.Ops = append(e.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: k, Remove: true})
		}
		req.Entries = append(req.Entries, e)
	}
	return req
}

// AlterClientQuotas applies alterations and returns each one's outcome, in
// order (nil for success). Outcomes are matched to alterations by the
// entity each answer names, as the protocol lets a broker answer in any
// order.
func (a *Admin) AlterClientQuotas(ctx context.Context, alterations ...QuotaAlteration) ([]error, error) {
	req := NewAlterClientQuotasRequest(alterations...)
	out := make([]error, len(alterations))
	err := a.retry(ctx, func() error {
		kresp, err := a.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.AlterClientQuotasResponse)
		byEntity := make(map[string]error, len(resp.Entries))
		for _, e := range resp.Entries {
			entity := QuotaEntity{}
			for _, c := range e.Entity {
				entity[c.Type] = c.Name
			}
			byEntity[entity.key()] = errorWithMessage(e.ErrorCode, e.ErrorMessage)
		}
		for i, alt := range alterations {
			err, ok := byEntity[alt.Entity.key()]
			if !ok {
				return fmt.Errorf("no answer for %s", alt.Entity)
			}
			out[i] = err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alter client quotas: %w", err)
	}
	return out, nil
}
