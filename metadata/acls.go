package metadata

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLs (KIP-11; prefixed patterns, KIP-290): who may do what on which
// resource, stored in the metadata log as KRaft stores them (KIP-500,
// AclControlManager): one AccessControlEntryRecord per ACL, with an id, and
// a RemoveAccessControlEntryRecord naming the id to delete it. CreateAcls,
// DeleteAcls and DescribeAcls (kafka-acls.sh) change and read them; the
// Authorizer (authorizer.go) decides from them, from an index the image
// keeps up to date as ACL records are applied.

// ACL names and wildcards (Kafka's ResourcePattern.WILDCARD_RESOURCE,
// Resource.CLUSTER_NAME, StandardAuthorizerData.WILDCARD and
// WILDCARD_PRINCIPAL).
const (
	// ClusterResourceName is the one name of the CLUSTER resource.
	ClusterResourceName = "kafka-cluster"
	// ACLWildcardResource, as a LITERAL resource name, matches every
	// resource of its type.
	ACLWildcardResource = "*"
	// ACLWildcardHost matches every client address.
	ACLWildcardHost = "*"
	// ACLWildcardPrincipal matches every principal, whatever its type.
	ACLWildcardPrincipal = "User:*"
)

// ACLOperationTwoPhaseCommit is Kafka's TWO_PHASE_COMMIT operation on a
// transactional id (KIP-939), newer than kmsg's ACLOperation enum.
const ACLOperationTwoPhaseCommit kmsg.ACLOperation = 15

// AccessControlEntryRecord creates one ACL with its id.
type AccessControlEntryRecord struct {
	ID             Uuid   `json:"id"`
	ResourceType   int8   `json:"resourceType"`
	ResourceName   string `json:"resourceName"`
	PatternType    int8   `json:"patternType"`
	Principal      string `json:"principal"`
	Host           string `json:"host"`
	Operation      int8   `json:"operation"`
	PermissionType int8   `json:"permissionType"`
}

// RemoveAccessControlEntryRecord deletes the ACL with this id.
type RemoveAccessControlEntryRecord struct {
	ID Uuid `json:"id"`
}

// ACL is one stored ACL binding: a resource pattern (type, name, LITERAL
// or PREFIXED) and an entry (principal, host, operation, ALLOW or DENY).
type ACL struct {
	ID           Uuid
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType
	Principal    string
	Host         string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// String is the ACL as kafka-acls.sh prints a binding.
func (a ACL) String() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s): (principal=%s, host=%s, operation=%s, permissionType=%s)",
		a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, ACLOperationName(a.Operation), a.Permission)
}

// Record is the AccessControlEntryRecord that creates the ACL.
func (a ACL) Record() *AccessControlEntryRecord {
	return &AccessControlEntryRecord{
		ID: a.ID, ResourceType: int8(a.ResourceType), ResourceName: a.ResourceName, PatternType: int8(a.PatternType),
		Principal: a.Principal, Host: a.Host, Operation: int8(a.Operation), PermissionType: int8(a.Permission),
	}
}

func aclFromRecord(r *AccessControlEntryRecord) ACL {
	return ACL{
		ID: r.ID, ResourceType: kmsg.ACLResourceType(r.ResourceType), ResourceName: r.ResourceName,
		PatternType: kmsg.ACLResourcePatternType(r.PatternType), Principal: r.Principal, Host: r.Host,
		Operation: kmsg.ACLOperation(r.Operation), Permission: kmsg.ACLPermissionType(r.PermissionType),
	}
}

// binding is the ACL without its id: what makes two ACLs the same.
func (a ACL) binding() ACL { a.ID = ZeroUuid; return a }

// ACLOperationName is Kafka's name of an operation ("DESCRIBE_CONFIGS"),
// "UNKNOWN" for a code Kafka does not define.
func ACLOperationName(op kmsg.ACLOperation) string {
	if op == ACLOperationTwoPhaseCommit {
		return "TWO_PHASE_COMMIT"
	}
	return op.String()
}

// The normalizations below are Kafka's fromCode: a code Kafka does not
// define reads as UNKNOWN, which every validation then refuses.

func normResourceType(t kmsg.ACLResourceType) kmsg.ACLResourceType {
	if t < kmsg.ACLResourceTypeUnknown || t > kmsg.ACLResourceTypeUser {
		return kmsg.ACLResourceTypeUnknown
	}
	return t
}

func normPatternType(p kmsg.ACLResourcePatternType) kmsg.ACLResourcePatternType {
	if p < kmsg.ACLResourcePatternTypeUnknown || p > kmsg.ACLResourcePatternTypePrefixed {
		return kmsg.ACLResourcePatternTypeUnknown
	}
	return p
}

func normOperation(op kmsg.ACLOperation) kmsg.ACLOperation {
	if op < kmsg.ACLOperationUnknown || op > ACLOperationTwoPhaseCommit {
		return kmsg.ACLOperationUnknown
	}
	return op
}

func normPermission(p kmsg.ACLPermissionType) kmsg.ACLPermissionType {
	if p < kmsg.ACLPermissionTypeUnknown || p > kmsg.ACLPermissionTypeAllow {
		return kmsg.ACLPermissionTypeUnknown
	}
	return p
}

// validateNewACL is the checks a new ACL passes, in Kafka's order: the
// enums (AclControlManager.validateNewAcl), the cluster name and an empty
// name (the broker's AclApis.handleCreateAcls, which answers an empty name
// before the controller would), then a principal without the ':' that
// separates type and name (validateNewAcl, via StandardAcl.kafkaPrincipal).
// It returns why the ACL is refused (INVALID_REQUEST), "" if it is not, and
// whether the broker rather than the controller refused it.
func validateNewACL(a ACL) (msg string, atBroker bool) {
	switch {
	case a.ResourceType == kmsg.ACLResourceTypeUnknown || a.ResourceType == kmsg.ACLResourceTypeAny:
		return "Invalid resourceType " + a.ResourceType.String(), false
	case a.PatternType != kmsg.ACLResourcePatternTypeLiteral && a.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return "Invalid patternType " + a.PatternType.String(), false
	case a.Operation == kmsg.ACLOperationUnknown || a.Operation == kmsg.ACLOperationAny:
		return "Invalid operation " + ACLOperationName(a.Operation), false
	case a.Permission != kmsg.ACLPermissionTypeAllow && a.Permission != kmsg.ACLPermissionTypeDeny:
		return "Invalid permissionType " + a.Permission.String(), false
	case a.ResourceType == kmsg.ACLResourceTypeCluster && a.ResourceName != ClusterResourceName:
		return "The only valid name for the CLUSTER resource is " + ClusterResourceName, true
	case a.ResourceName == "":
		return "Invalid empty resource name", true
	case !strings.Contains(a.Principal, ":"):
		return "Could not parse principal from `" + a.Principal + "` (no colon is present separating the principal type from the principal name)", false
	}
	return "", false
}

// validStored checks what the index relies on of a replayed ACL: the enums
// a controller writes. Kafka replays any record; Keel refuses a record no
// controller writes rather than authorize from it.
func (a ACL) validStored() error {
	if a.ResourceType < kmsg.ACLResourceTypeTopic || a.ResourceType > kmsg.ACLResourceTypeUser ||
		(a.PatternType != kmsg.ACLResourcePatternTypeLiteral && a.PatternType != kmsg.ACLResourcePatternTypePrefixed) ||
		a.Operation < kmsg.ACLOperationAll || a.Operation > ACLOperationTwoPhaseCommit ||
		(a.Permission != kmsg.ACLPermissionTypeAllow && a.Permission != kmsg.ACLPermissionTypeDeny) {
		return fmt.Errorf("ACL %s: invalid resource type, pattern type, operation or permission", a.ID)
	}
	return nil
}

// literalKey names the ACLs of one LITERAL resource pattern.
type literalKey struct {
	typ  kmsg.ACLResourceType
	name string
}

// aclEntry is what Authorize compares of one ACL, laid out for the scan.
type aclEntry struct {
	principal, host string
	op              kmsg.ACLOperation
	perm            kmsg.ACLPermissionType
}

func (a ACL) entry() aclEntry { return aclEntry{a.Principal, a.Host, a.Operation, a.Permission} }

// aclIndex is the image's ACLs. Like the rest of an image it is immutable
// once built; Apply copies what ACL records change (once per batch).
// Authorize needs, for a resource, the ACLs of its LITERAL name, of the
// LITERAL wildcard "*", and of every PREFIXED name that is a prefix of its
// name: literal holds the first two by name; prefixed holds, per resource
// type, a radix tree of the PREFIXED names, which a walk down the resource
// name searches in O(len(name)) whatever the number of ACLs.
type aclIndex struct {
	byID     map[Uuid]ACL
	bindings map[ACL]Uuid // by binding(): no two ids hold the same ACL
	literal  map[literalKey][]aclEntry
	prefixed [kmsg.ACLResourceTypeUser + 1]*prefixNode
}

// prefixNode is a node of a radix tree: the labels from the root to it
// spell a prefix, and acls are the ACLs of that PREFIXED name. Children
// have distinct first bytes, in order.
type prefixNode struct {
	label    string
	acls     []aclEntry
	children []*prefixNode
}

// child finds the child whose label starts with c, or where it would go.
func (n *prefixNode) child(c byte) (int, bool) {
	lo, hi := 0, len(n.children)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.children[m].label[0] < c {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(n.children) && n.children[lo].label[0] == c
}

// next steps down the tree along rest: the child whose label rest starts
// with and what follows the label, or nil.
func (n *prefixNode) next(rest string) (*prefixNode, string) {
	if rest == "" {
		return nil, ""
	}
	i, ok := n.child(rest[0])
	if !ok || !strings.HasPrefix(rest, n.children[i].label) {
		return nil, ""
	}
	return n.children[i], rest[len(n.children[i].label):]
}

// aclBatch is what one Apply batch has copied of the index: the literal
// lists and tree nodes it made, which it may change in place.
type aclBatch struct {
	lists map[literalKey]bool
	nodes map[*prefixNode]bool
}

func (x *aclIndex) clone() *aclIndex {
	if x == nil {
		return &aclIndex{byID: map[Uuid]ACL{}, bindings: map[ACL]Uuid{}, literal: map[literalKey][]aclEntry{}}
	}
	c := *x
	c.byID, c.bindings, c.literal = cloneMap(x.byID), cloneMap(x.bindings), cloneMap(x.literal)
	return &c
}

// mutACLs returns the index this batch may change.
func (b *builder) mutACLs() *aclIndex {
	switch {
	case b.acls == nil:
		b.acls = &aclBatch{lists: map[literalKey]bool{}, nodes: map[*prefixNode]bool{}}
		b.img.acls = b.img.acls.clone()
	case b.img.acls == nil: // the batch removed every ACL, and now adds one
		b.img.acls = (*aclIndex)(nil).clone()
	}
	return b.img.acls
}

// ownList returns a literal list this batch may change in place.
func (b *builder) ownList(x *aclIndex, k literalKey) []aclEntry {
	l := x.literal[k]
	if !b.acls.lists[k] {
		l = append(make([]aclEntry, 0, len(l)+1), l...)
		b.acls.lists[k] = true
	}
	return l
}

// ownNode returns a tree node this batch may change in place: n itself if
// the batch made it, else a copy (nil: a new root).
func (b *builder) ownNode(n *prefixNode) *prefixNode {
	if b.acls.nodes[n] {
		return n
	}
	c := &prefixNode{}
	if n != nil {
		c.label, c.acls, c.children = n.label, slices.Clone(n.acls), slices.Clone(n.children)
	}
	b.acls.nodes[c] = true
	return c
}

// insertPrefix adds e under rest, what follows n's label, and returns n's
// replacement.
func (b *builder) insertPrefix(n *prefixNode, rest string, e aclEntry) *prefixNode {
	c := b.ownNode(n)
	if rest == "" {
		c.acls = append(c.acls, e)
		return c
	}
	i, ok := c.child(rest[0])
	if !ok {
		leaf := b.ownNode(nil)
		leaf.label, leaf.acls = rest, []aclEntry{e}
		c.children = slices.Insert(c.children, i, leaf)
		return c
	}
	ch := c.children[i]
	common := 0
	for common < len(rest) && common < len(ch.label) && rest[common] == ch.label[common] {
		common++
	}
	if label := ch.label; common < len(label) { // split ch where rest leaves its label
		tail := b.ownNode(ch) // ch itself if the batch made it
		tail.label = label[common:]
		split := b.ownNode(nil)
		split.label, split.children = label[:common], []*prefixNode{tail}
		ch = split
	}
	c.children[i] = b.insertPrefix(ch, rest[common:], e)
	return c
}

// removePrefix removes e from under rest and returns n's replacement: nil
// if nothing is left under it. A node left with no ACLs and one child
// merges with it, so that the tree stays as shallow as its names.
func (b *builder) removePrefix(n *prefixNode, rest string, e aclEntry, root bool) *prefixNode {
	c := b.ownNode(n)
	if rest == "" {
		c.acls = slices.DeleteFunc(c.acls, func(x aclEntry) bool { return x == e })
	} else if i, ok := c.child(rest[0]); ok && strings.HasPrefix(rest, c.children[i].label) {
		if ch := b.removePrefix(c.children[i], rest[len(c.children[i].label):], e, false); ch != nil {
			c.children[i] = ch
		} else {
			c.children = slices.Delete(c.children, i, i+1)
		}
	}
	switch {
	case len(c.acls) == 0 && len(c.children) == 0:
		return nil
	case !root && len(c.acls) == 0 && len(c.children) == 1:
		only := c.children[0]
		c.label += only.label
		c.acls, c.children = slices.Clone(only.acls), slices.Clone(only.children)
	}
	return c
}

// applyACL replays an AccessControlEntryRecord. An id or an ACL that
// already exists is an error, as in Kafka's AclCache.addAcl.
func (b *builder) applyACL(r *AccessControlEntryRecord) error {
	a := aclFromRecord(r)
	if err := a.validStored(); err != nil {
		return err
	}
	if old := b.img.acls; old != nil {
		if _, dup := old.byID[a.ID]; dup {
			return fmt.Errorf("an ACL with id %s exists", a.ID)
		}
		if id, dup := old.bindings[a.binding()]; dup {
			return fmt.Errorf("ACL %s exists with id %s", a, id)
		}
	}
	x := b.mutACLs()
	x.byID[a.ID], x.bindings[a.binding()] = a, a.ID
	if a.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		x.prefixed[a.ResourceType] = b.insertPrefix(x.prefixed[a.ResourceType], a.ResourceName, a.entry())
		return nil
	}
	k := literalKey{a.ResourceType, a.ResourceName}
	x.literal[k] = append(b.ownList(x, k), a.entry())
	return nil
}

// removeACL replays a RemoveAccessControlEntryRecord: an unknown id is an
// error, as in Kafka's AclControlManager.replay.
func (b *builder) removeACL(r *RemoveAccessControlEntryRecord) error {
	a, ok := b.img.ACL(r.ID)
	if !ok {
		return fmt.Errorf("no ACL with id %s to remove", r.ID)
	}
	x := b.mutACLs()
	delete(x.byID, a.ID)
	delete(x.bindings, a.binding())
	switch {
	case len(x.byID) == 0:
		b.img.acls = nil
	case a.PatternType == kmsg.ACLResourcePatternTypePrefixed:
		x.prefixed[a.ResourceType] = b.removePrefix(x.prefixed[a.ResourceType], a.ResourceName, a.entry(), true)
	default:
		k := literalKey{a.ResourceType, a.ResourceName}
		if l := slices.DeleteFunc(b.ownList(x, k), func(e aclEntry) bool { return e == a.entry() }); len(l) > 0 {
			x.literal[k] = l
		} else {
			delete(x.literal, k)
		}
	}
	return nil
}

// HasACLs reports whether any ACL exists (the request path's fast check).
func (img *Image) HasACLs() bool { return img.acls != nil }

// NumACLs is the number of ACLs.
func (img *Image) NumACLs() int {
	if img.acls == nil {
		return 0
	}
	return len(img.acls.byID)
}

// ACL returns the ACL with an id.
func (img *Image) ACL(id Uuid) (ACL, bool) {
	if img.acls == nil {
		return ACL{}, false
	}
	a, ok := img.acls.byID[id]
	return a, ok
}

// ACLs returns every ACL, by resource type, resource name, pattern type,
// principal, host, operation and permission.
func (img *Image) ACLs() []ACL {
	if img.acls == nil {
		return nil
	}
	out := make([]ACL, 0, len(img.acls.byID))
	for _, a := range img.acls.byID {
		out = append(out, a)
	}
	slices.SortFunc(out, compareACLs)
	return out
}

func compareACLs(a, b ACL) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
		slices.Compare(a.ID[:], b.ID[:]),
	)
}

// aclFilter is Kafka's AclBindingFilter: a nil name, principal or host and
// the ANY values match anything.
type aclFilter struct {
	resourceType kmsg.ACLResourceType
	name         *string
	pattern      kmsg.ACLResourcePatternType
	principal    *string
	host         *string
	op           kmsg.ACLOperation
	perm         kmsg.ACLPermissionType
}

func newACLFilter(version int16, typ kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType,
	principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclFilter {
	pattern = normPatternType(pattern)
	if version == 0 && pattern == kmsg.ACLResourcePatternTypeAny {
		// Version 0 predates pattern types: every ACL was LITERAL (Kafka's
		// DescribeAclsRequest / DeleteAclsRequest normalizeAndValidate).
		pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	return aclFilter{normResourceType(typ), name, pattern, principal, host, normOperation(op), normPermission(perm)}
}

// unknownPattern and unknownEntry are AclBindingFilter's isUnknown halves.
func (f aclFilter) unknownPattern() bool {
	return f.resourceType == kmsg.ACLResourceTypeUnknown || f.pattern == kmsg.ACLResourcePatternTypeUnknown
}

func (f aclFilter) unknownEntry() bool {
	return f.op == kmsg.ACLOperationUnknown || f.perm == kmsg.ACLPermissionTypeUnknown
}

// matches is AclBindingFilter.matches: ResourcePatternFilter.matches, where
// MATCH selects the patterns that apply to the named resource (its literal
// name, the wildcard, its prefixes), then AccessControlEntryFilter.matches.
func (f aclFilter) matches(a ACL) bool {
	if f.resourceType != kmsg.ACLResourceTypeAny && f.resourceType != a.ResourceType {
		return false
	}
	anyPattern := f.pattern == kmsg.ACLResourcePatternTypeAny
	if !anyPattern && f.pattern != kmsg.ACLResourcePatternTypeMatch && f.pattern != a.PatternType {
		return false
	}
	if f.name != nil {
		switch {
		case anyPattern || f.pattern == a.PatternType:
			if *f.name != a.ResourceName {
				return false
			}
		case a.PatternType == kmsg.ACLResourcePatternTypeLiteral:
			if *f.name != a.ResourceName && a.ResourceName != ACLWildcardResource {
				return false
			}
		default: // PREFIXED
			if !strings.HasPrefix(*f.name, a.ResourceName) {
				return false
			}
		}
	}
	return (f.principal == nil || *f.principal == a.Principal) &&
		(f.host == nil || *f.host == a.Host) &&
		(f.op == kmsg.ACLOperationAny || f.op == a.Operation) &&
		(f.perm == kmsg.ACLPermissionTypeAny || f.perm == a.Permission)
}

// errTooManyACLDeletes is Kafka's answer to a DeleteAcls removing more ACLs
// than one batch may hold (AclControlManager.deleteAcls).
const errTooManyACLDeletes = "Cannot remove more than %d acls in a single delete operation."

// CreateAcls handles CreateAcls (API 30, v0–v3) as Kafka's broker
// (AclApis) and AclControlManager.createAcls together: each creation is
// validated (validateNewACL: INVALID_REQUEST with Kafka's message); a
// valid ACL identical to an existing one, or to an earlier one of the
// request, succeeds without a record; any other gets a new id and an
// AccessControlEntryRecord. Results come in request order. If the records
// would exceed MaxRecordsPerRequest, nothing is created and every creation
// that reached the controller fails with POLICY_VIOLATION, as Kafka fails
// the whole controller operation (a BoundedListTooLongException).
// Concurrency: see ClusterControl.
func (c *ClusterControl) CreateAcls(req *kmsg.CreateACLsRequest) ([]Record, *kmsg.CreateACLsResponse) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	var out []Record
	taken := map[Uuid]bool{}
	created := map[ACL]bool{}
	brokerSide := make([]bool, len(req.Creations)) // failed in AclApis, before the controller
	for i, cr := range req.Creations {
		pattern := cr.ResourcePatternType
		if req.Version == 0 {
			pattern = kmsg.ACLResourcePatternTypeLiteral // v0 carries no pattern type
		}
		a := ACL{
			ResourceType: normResourceType(cr.ResourceType), ResourceName: cr.ResourceName,
			PatternType: normPatternType(pattern), Principal: cr.Principal, Host: cr.Host,
			Operation: normOperation(cr.Operation), Permission: normPermission(cr.PermissionType),
		}
		r := kmsg.NewCreateACLsResponseResult()
		if msg, atBroker := validateNewACL(a); msg != "" {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
			brokerSide[i] = atBroker
		} else if _, exists := c.img.aclID(a); !exists && !created[a] {
			created[a] = true
			a.ID = c.newACLID(taken)
			out = append(out, a.Record())
		}
		resp.Results = append(resp.Results, r)
	}
	if len(out) > c.cfg.MaxRecordsPerRequest {
		for i := range resp.Results {
			if !brokerSide[i] {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.PolicyViolation.Code, kmsg.StringPtr(errTooLarge)
			}
		}
		return nil, resp
	}
	return out, resp
}

// aclID returns the id of the ACL equal to a but for its id.
func (img *Image) aclID(a ACL) (Uuid, bool) {
	if img.acls == nil {
		return ZeroUuid, false
	}
	id, ok := img.acls.bindings[a.binding()]
	return id, ok
}

// newACLID draws an ACL id no ACL of the image has (Kafka's
// AclControlManager.newAclId draws Uuid.randomUuid).
func (c *ClusterControl) newACLID(taken map[Uuid]bool) Uuid {
	return c.newID(taken, func(u Uuid) bool { _, used := c.img.ACL(u); return used })
}

// DeleteAcls handles DeleteAcls (API 31, v0–v3) as Kafka's
// AclControlManager.deleteAcls: each filter is validated (an UNKNOWN
// resource or pattern type is INVALID_REQUEST "Unknown patternFilter.", an
// UNKNOWN operation or permission "Unknown entryFilter.") and lists every
// ACL it matches, which is removed; an ACL two filters match is listed by
// both and removed once. If more than MaxRecordsPerRequest ACLs would go,
// none does and every filter fails with INVALID_REQUEST. Concurrency: see
// ClusterControl.
func (c *ClusterControl) DeleteAcls(req *kmsg.DeleteACLsRequest) ([]Record, *kmsg.DeleteACLsResponse) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	acls := c.img.ACLs()
	removed := map[Uuid]bool{}
	var out []Record
	for _, rf := range req.Filters {
		f := newACLFilter(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
		r := kmsg.NewDeleteACLsResponseResult()
		switch {
		case f.unknownPattern():
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Unknown patternFilter.")
		case f.unknownEntry():
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Unknown entryFilter.")
		default:
			r.MatchingACLs = []kmsg.DeleteACLsResponseResultMatchingACL{}
			for _, a := range acls {
				if !f.matches(a) {
					continue
				}
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
				r.MatchingACLs = append(r.MatchingACLs, m)
				if !removed[a.ID] {
					removed[a.ID] = true
					out = append(out, &RemoveAccessControlEntryRecord{ID: a.ID})
				}
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if len(out) > c.cfg.MaxRecordsPerRequest {
		msg := fmt.Sprintf(errTooManyACLDeletes, c.cfg.MaxRecordsPerRequest)
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		}
		return nil, resp
	}
	return out, resp
}

// DescribeAcls answers DescribeAcls (API 29, v0–v3) from an image: the ACLs
// the filter matches (as DeleteAcls matches them), one resource per
// (resource type, name, pattern type), in the order of Image.ACLs. A
// filter with an UNKNOWN part is INVALID_REQUEST (Kafka refuses to parse
// such a request).
func DescribeAcls(img *Image, req *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := newACLFilter(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	resp.Resources = []kmsg.DescribeACLsResponseResource{}
	if f.unknownPattern() || f.unknownEntry() {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("DescribeAclsRequest contains UNKNOWN elements")
		return resp
	}
	for _, a := range img.ACLs() {
		if !f.matches(a) {
			continue
		}
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != a.ResourceType || resp.Resources[n-1].ResourceName != a.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != a.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			resp.Resources = append(resp.Resources, res)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	return resp
}
