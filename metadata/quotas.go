package metadata

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (KIP-13, KIP-55, KIP-546, KIP-612): byte-rate quotas of
// users and client ids, and connection creation rates of client addresses,
// stored in the metadata log as ClientQuotaRecords and set and read with
// AlterClientQuotas and DescribeClientQuotas (kafka-configs --entity-type
// users/clients/ips). Keel enforces every key Kafka has:
// producer_byte_rate, consumer_byte_rate and request_percentage
// (broker/client_quota.go), controller_mutation_rate
// (broker/mutation_quota.go) and an ip's connection_creation_rate
// (network.Server).

// Client quota entity types.
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"
)

// Client quota keys Keel enforces.
const (
	QuotaProducerByteRate = "producer_byte_rate"
	QuotaConsumerByteRate = "consumer_byte_rate"
	// QuotaRequestPercentage is the share of one request handler's time a
	// client's requests may take on a broker, in percent (KIP-124).
	QuotaRequestPercentage = "request_percentage"
	// QuotaControllerMutationRate is the partitions a second a client may
	// create and delete (KIP-599).
	QuotaControllerMutationRate = "controller_mutation_rate"
	// QuotaConnectionCreationRate is an ip entity's only key: the
	// connections a second each broker accepts from the address.
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// QuotaEntity is a client quota entity: a user, a client id, a user and a
// client id, or an IP. It is comparable, a map key.
type QuotaEntity struct {
	User, ClientID, IP QuotaEntityName
}

// QuotaEntityName is one component of a QuotaEntity: absent (Set false),
// the type's default entity (<default>), or a name.
type QuotaEntityName struct {
	Set, Default bool
	Name         string
}

func (n QuotaEntityName) String() string {
	if n.Default {
		return "<default>"
	}
	return n.Name
}

// String is the entity as kafka-configs names it, e.g.
// "user=alice,client-id=<default>".
func (e QuotaEntity) String() string {
	var parts []string
	for _, c := range e.components() {
		if c.n.Set {
			parts = append(parts, c.typ+"="+c.n.String())
		}
	}
	return strings.Join(parts, ",")
}

type entityComponent struct {
	typ string
	n   *QuotaEntityName
}

func (e *QuotaEntity) components() []entityComponent {
	return []entityComponent{{QuotaUser, &e.User}, {QuotaClientID, &e.ClientID}, {QuotaIP, &e.IP}}
}

// Parts is the entity as records and responses carry it.
func (e QuotaEntity) Parts() []QuotaEntityPart {
	var out []QuotaEntityPart
	for _, c := range e.components() {
		if !c.n.Set {
			continue
		}
		p := QuotaEntityPart{EntityType: c.typ}
		if !c.n.Default {
			p.EntityName = &c.n.Name
		}
		out = append(out, p)
	}
	return out
}

// QuotaEntityFromParts validates an entity as Kafka's
// ClientQuotaControlManager does: known types, each at most once, a user
// and/or a client id or an IP alone, and names non-empty. An ip entity
// names an IP address (Kafka also takes a host name, resolved when the
// quota is applied; Keel takes the address, so that what is enforced is
// what was written), which is kept in its canonical form.
func QuotaEntityFromParts(parts []QuotaEntityPart) (QuotaEntity, error) {
	var e QuotaEntity
	if len(parts) == 0 {
		return e, errors.New("the entity has no components")
	}
	for _, p := range parts {
		var n *QuotaEntityName
		for _, c := range e.components() {
			if c.typ == p.EntityType {
				n = c.n
			}
		}
		switch {
		case n == nil:
			return e, fmt.Errorf("unknown entity type %q", p.EntityType)
		case n.Set:
			return e, fmt.Errorf("entity type %q given twice", p.EntityType)
		case p.EntityName != nil && *p.EntityName == "":
			return e, fmt.Errorf("empty %s name", p.EntityType)
		}
		n.Set = true
		if p.EntityName == nil {
			n.Default = true
		} else {
			n.Name = *p.EntityName
		}
	}
	if e.IP.Set && (e.User.Set || e.ClientID.Set) {
		return e, errors.New("an ip entity cannot be combined with a user or client-id")
	}
	if e.IP.Set && !e.IP.Default {
		addr, err := netip.ParseAddr(e.IP.Name)
		if err != nil || addr.Zone() != "" {
			return e, fmt.Errorf("%s is not a valid IP address (Keel takes an address, not a host name)", e.IP.Name)
		}
		e.IP.Name = addr.Unmap().String()
	}
	return e, nil
}

// validateQuotaOp checks one key and value of entity e: for users and
// client ids the byte rates Keel enforces, whole and non-negative, as
// Kafka's LONG quota keys, and request_percentage and
// controller_mutation_rate, DOUBLEs; for an ip
// connection_creation_rate alone, an INT of at least 0 (Kafka's ipConfigs).
// Kafka stores a negative rate or percentage; Keel refuses one, as no
// client could stay under it.
func validateQuotaOp(e QuotaEntity, key string, value float64, remove bool) error {
	if e.IP.Set {
		if key != QuotaConnectionCreationRate {
			return fmt.Errorf("invalid configuration key %q for an ip entity: only %s", key, QuotaConnectionCreationRate)
		}
		if !remove && (value != math.Trunc(value) || value < 0 || value > math.MaxInt32) {
			return fmt.Errorf("invalid value %v for %s: a whole number of connections a second, 0 to %d", value, key, math.MaxInt32)
		}
		return nil
	}
	switch key {
	case QuotaProducerByteRate, QuotaConsumerByteRate:
	case QuotaConnectionCreationRate:
		return fmt.Errorf("invalid configuration key %s for a user or client id: it is an ip entity's quota", key)
	case QuotaRequestPercentage, QuotaControllerMutationRate:
		if !remove && (value < 0 || math.IsInf(value, 0) || math.IsNaN(value)) {
			what := "a percentage of one request handler's time"
			if key == QuotaControllerMutationRate {
				what = "partitions created or deleted a second"
			}
			return fmt.Errorf("invalid value %v for %s: %s, at least 0", value, key, what)
		}
		return nil
	default:
		return fmt.Errorf("unknown quota key %q", key)
	}
	if remove {
		return nil
	}
	if value != math.Trunc(value) || value < 0 || math.IsInf(value, 0) {
		return fmt.Errorf("invalid value %v for %s: a whole number of bytes a second, at least 0", value, key)
	}
	return nil
}

// HasClientQuotas reports whether any client quota is set (the request
// path's fast check).
func (img *Image) HasClientQuotas() bool { return len(img.quotas) > 0 }

// IPConnectionCreationRates returns the ip entities' connection_creation_rate
// quotas by address; the zero netip.Addr holds the default entity's (every
// address without a quota of its own). Nil when there are none.
func (img *Image) IPConnectionCreationRates() map[netip.Addr]int {
	var out map[netip.Addr]int
	for e, vals := range img.quotas {
		v, ok := vals[QuotaConnectionCreationRate]
		if !e.IP.Set || !ok {
			continue
		}
		var addr netip.Addr
		if !e.IP.Default {
			a, err := netip.ParseAddr(e.IP.Name)
			if err != nil {
				continue // QuotaEntityFromParts let only addresses in
			}
			addr = a
		}
		if out == nil {
			out = map[netip.Addr]int{}
		}
		out[addr] = int(v)
	}
	return out
}

// ClientQuota returns one quota of an entity.
func (img *Image) ClientQuota(e QuotaEntity, key string) (float64, bool) {
	v, ok := img.quotas[e][key]
	return v, ok
}

// ClientQuotaEntities returns every entity with a quota, sorted by name.
func (img *Image) ClientQuotaEntities() []QuotaEntity {
	out := make([]QuotaEntity, 0, len(img.quotas))
	for e := range img.quotas {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// applyClientQuota replays a ClientQuotaRecord.
func (b *builder) applyClientQuota(r *ClientQuotaRecord) error {
	e, err := QuotaEntityFromParts(r.Entity)
	if err != nil {
		return err
	}
	if b.img.quotas = cloneMap(b.img.quotas); b.img.quotas == nil {
		b.img.quotas = map[QuotaEntity]map[string]float64{}
	}
	vals := cloneMap(b.img.quotas[e])
	if vals == nil {
		vals = map[string]float64{}
	}
	if r.Remove {
		delete(vals, r.Key)
	} else {
		vals[r.Key] = r.Value
	}
	if len(vals) == 0 {
		delete(b.img.quotas, e)
	} else {
		b.img.quotas[e] = vals
	}
	b.changes.ClientQuotas = true
	return nil
}

// AlterClientQuotas handles AlterClientQuotas (API 49, v0–v1): each entry
// is validated whole (entity, then every op) and either all its ops are
// recorded or none; INVALID_REQUEST with the reason otherwise. ValidateOnly
// records nothing.
func (c *ClusterControl) AlterClientQuotas(req *kmsg.AlterClientQuotasRequest) ([]Record, *kmsg.AlterClientQuotasResponse) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	var out []Record
	for _, entry := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		parts := make([]QuotaEntityPart, 0, len(entry.Entity))
		for _, en := range entry.Entity {
			re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: en.Type, Name: en.Name})
			parts = append(parts, QuotaEntityPart{EntityType: en.Type, EntityName: en.Name})
		}
		e, err := QuotaEntityFromParts(parts)
		var recs []Record
		seen := map[string]bool{}
		for _, op := range entry.Ops {
			if err != nil {
				break
			}
			if seen[op.Key] {
				err = fmt.Errorf("quota %s given twice", op.Key)
				break
			}
			seen[op.Key] = true
			if err = validateQuotaOp(e, op.Key, op.Value, op.Remove); err == nil {
				recs = append(recs, &ClientQuotaRecord{Entity: e.Parts(), Key: op.Key, Value: op.Value, Remove: op.Remove})
			}
		}
		if err != nil {
			re.ErrorCode = kerr.InvalidRequest.Code
			re.ErrorMessage = kmsg.StringPtr(err.Error())
		} else if !req.ValidateOnly {
			out = append(out, recs...)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return out, resp
}

// DescribeClientQuotas answers DescribeClientQuotas (API 48, v0–v1) from an
// image: the entities matching every component of the filter (a name, the
// default entity, or any entity with a component of that type) and, with
// Strict, no component of another type; each with its quotas.
func DescribeClientQuotas(img *Image, req *kmsg.DescribeClientQuotasRequest) *kmsg.DescribeClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	types := map[string]bool{}
	for _, f := range req.Components {
		if types[f.EntityType] || !slices.Contains([]string{QuotaUser, QuotaClientID, QuotaIP}, f.EntityType) {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("invalid or repeated entity type %q in the filter", f.EntityType))
			return resp
		}
		types[f.EntityType] = true
		if f.MatchType == kmsg.QuotasMatchTypeExact && (f.Match == nil || *f.Match == "") {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr("an exact match needs a name")
			return resp
		}
	}
	// An empty list, not a null one, when nothing matches: Kafka's answer,
	// which the Java Admin dereferences (kafka-configs.sh --describe
	// --entity-type clients on a cluster without quotas).
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, e := range img.ClientQuotaEntities() {
		if !quotaFilterMatches(e, req) {
			continue
		}
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Parts() {
			re.Entity = append(re.Entity, kmsg.DescribeClientQuotasResponseEntryEntity{Type: p.EntityType, Name: p.EntityName})
		}
		keys := make([]string, 0, len(img.quotas[e]))
		for k := range img.quotas[e] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			re.Values = append(re.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: k, Value: img.quotas[e][k]})
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

func quotaFilterMatches(e QuotaEntity, req *kmsg.DescribeClientQuotasRequest) bool {
	filtered := map[string]bool{}
	for _, f := range req.Components {
		filtered[f.EntityType] = true
		var n QuotaEntityName
		for _, c := range e.components() {
			if c.typ == f.EntityType {
				n = *c.n
			}
		}
		switch {
		case !n.Set:
			return false
		case f.MatchType == kmsg.QuotasMatchTypeExact && (n.Default || n.Name != *f.Match):
			return false
		case f.MatchType == kmsg.QuotasMatchTypeDefault && !n.Default:
			return false
		}
	}
	if req.Strict {
		for _, c := range e.components() {
			if c.n.Set && !filtered[c.typ] {
				return false
			}
		}
	}
	return true
}

// JavaDouble formats v as Java's Double.toString does, as Kafka shows a
// double (DescribeConfigs, kafka-configs' quotas): plain between 10^-3 and 10^7, with at
// least one decimal (1048576.0), else in scientific notation
// (1.7976931348623157E308).
func JavaDouble(v float64) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-3 && a < 1e7) || math.IsInf(v, 0) || math.IsNaN(v) {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.ContainsAny(s, ".IN") {
			s += ".0"
		}
		return s
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(v, 'E', -1, 64), "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
