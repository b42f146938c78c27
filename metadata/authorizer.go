package metadata

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorizer is Kafka's StandardAuthorizer (KRaft's authorizer.class.name
// org.apache.kafka.metadata.authorizer.StandardAuthorizer) deciding over the
// ACLs of an image. It holds only configuration; the ACLs are the image's,
// so a decision is made from one consistent image, with no lock.
//
// Concurrency: an Authorizer is read-only after configuration; any number of
// goroutines may call its methods at once, each with the image it holds.
type Authorizer struct {
	// SuperUsers are super.users: principals ("User:admin") allowed
	// everything, whatever the ACLs say.
	SuperUsers map[string]bool
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: the
	// decision for a resource no ACL applies to.
	AllowEveryoneIfNoACLFound bool
}

func (a *Authorizer) superUser(principal string) bool {
	return len(a.SuperUsers) > 0 && a.SuperUsers[principal]
}

// Authorize reports whether principal ("User:alice", "User:ANONYMOUS")
// connected from host (the client's IP address as a string) may do op on
// the resource of type resType named name. It is StandardAuthorizerData's
// authorize:
//
//   - a super user may do anything;
//   - the ACLs that apply to the resource are those of its type with the
//     LITERAL name, the LITERAL wildcard name "*", and every PREFIXED name
//     that is a prefix of name;
//   - of those, an ACL matches when its principal is principal or the
//     wildcard "User:*" (matching any principal, whatever its type), its
//     host is host or "*", and its operation is op or ALL — or, for an
//     ALLOW ACL only, an operation that implies op: READ, WRITE, DELETE
//     and ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (a
//     DENY of READ does not deny DESCRIBE);
//   - a matching DENY denies, whatever ALLOWs match; else a matching ALLOW
//     allows; else, if no ACL applies to the resource at all (for any
//     principal, host or operation), AllowEveryoneIfNoACLFound decides;
//     else it is denied.
//
// The cost is two map lookups (the name and the wildcard) and a walk down
// a radix tree of the type's PREFIXED names, O(len(name)), plus the ACLs
// found; with no ACLs in the image, a few nanoseconds.
func (a *Authorizer) Authorize(img *Image, principal, host string, op kmsg.ACLOperation, resType kmsg.ACLResourceType, name string) bool {
	x := img.acls
	if x == nil {
		return a.AllowEveryoneIfNoACLFound || a.superUser(principal)
	}
	if a.superUser(principal) {
		return true
	}
	var d aclDecision
	if d.scan(x.literal[literalKey{resType, name}], principal, host, op) {
		return false
	}
	if name != ACLWildcardResource && d.scan(x.literal[literalKey{resType, ACLWildcardResource}], principal, host, op) {
		return false
	}
	if resType >= 0 && int(resType) < len(x.prefixed) {
		for n, rest := x.prefixed[resType], name; n != nil; n, rest = n.next(rest) {
			if d.scan(n.acls, principal, host, op) {
				return false
			}
		}
	}
	switch {
	case d.allowed:
		return true
	case d.found:
		return false
	}
	return a.AllowEveryoneIfNoACLFound
}

// aclDecision is Kafka's MatchingRuleBuilder: whether an ACL applies to the
// resource at all, and whether an ALLOW matched.
type aclDecision struct {
	found, allowed bool
}

// scan looks at the ACLs of one pattern that applies to the resource and
// reports whether a DENY matched (the decision is then made).
func (d *aclDecision) scan(entries []aclEntry, principal, host string, op kmsg.ACLOperation) bool {
	if len(entries) > 0 {
		d.found = true
	}
	for i := range entries {
		e := &entries[i]
		if !e.matches(principal, host, op) {
			continue
		}
		if e.perm == kmsg.ACLPermissionTypeDeny {
			return true
		}
		d.allowed = true
	}
	return false
}

// matches is StandardAuthorizerData.findResult without the resource, which
// the caller has matched.
func (e *aclEntry) matches(principal, host string, op kmsg.ACLOperation) bool {
	if e.principal != principal && e.principal != ACLWildcardPrincipal {
		return false
	}
	if e.host != ACLWildcardHost && e.host != host {
		return false
	}
	if e.op == kmsg.ACLOperationAll || e.op == op {
		return true
	}
	if e.perm != kmsg.ACLPermissionTypeAllow {
		return false
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch e.op {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return e.op == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// AuthorizeAny reports whether principal may do op on at least one resource
// of type resType (Kafka's Authorizer.authorizeByResourceType, KIP-679,
// whose default implementation StandardAuthorizer uses: the idempotent
// producer without IDEMPOTENT_WRITE needs WRITE on some topic). Kafka's
// rule, in order:
//
//   - an op or resType that is UNKNOWN or ANY: no (Kafka throws);
//   - if Authorize allows op on a resource named "hardcode" — a super user,
//     a wildcard ALLOW, or no ACL applying to that name with
//     AllowEveryoneIfNoACLFound — yes;
//   - then over the ACLs of resType matching principal and host whose
//     operation is op or ALL (no implied operations here): a DENY of the
//     LITERAL wildcard "*" denies; an ALLOW of "*" allows; otherwise an
//     ALLOW of a LITERAL name allows unless a LITERAL DENY has the same
//     name or a PREFIXED DENY is a prefix of it, and an ALLOW of a PREFIXED
//     name allows unless a PREFIXED DENY is a prefix of it.
//
// It looks at every ACL of the image; callers use it once per request.
func (a *Authorizer) AuthorizeAny(img *Image, principal, host string, op kmsg.ACLOperation, resType kmsg.ACLResourceType) bool {
	if op == kmsg.ACLOperationAny || normOperation(op) == kmsg.ACLOperationUnknown ||
		resType == kmsg.ACLResourceTypeAny || normResourceType(resType) == kmsg.ACLResourceTypeUnknown {
		return false
	}
	if a.Authorize(img, principal, host, op, resType, "hardcode") {
		return true
	}
	if img.acls == nil {
		return false
	}
	var denyLiteral, denyPrefixed, allowLiteral, allowPrefixed map[string]bool
	add := func(m *map[string]bool, name string) {
		if *m == nil {
			*m = map[string]bool{}
		}
		(*m)[name] = true
	}
	wildcardAllow := false
	for _, acl := range img.acls.byID {
		if acl.ResourceType != resType ||
			(acl.Host != host && acl.Host != ACLWildcardHost) ||
			(acl.Principal != principal && acl.Principal != ACLWildcardPrincipal) ||
			(acl.Operation != op && acl.Operation != kmsg.ACLOperationAll) {
			continue
		}
		literal := acl.PatternType == kmsg.ACLResourcePatternTypeLiteral
		switch {
		case acl.Permission == kmsg.ACLPermissionTypeDeny && literal && acl.ResourceName == ACLWildcardResource:
			return false
		case acl.Permission == kmsg.ACLPermissionTypeDeny && literal:
			add(&denyLiteral, acl.ResourceName)
		case acl.Permission == kmsg.ACLPermissionTypeDeny:
			add(&denyPrefixed, acl.ResourceName)
		case literal && acl.ResourceName == ACLWildcardResource:
			wildcardAllow = true
		case literal:
			add(&allowLiteral, acl.ResourceName)
		default:
			add(&allowPrefixed, acl.ResourceName)
		}
	}
	if wildcardAllow {
		return true
	}
	dominated := func(name string) bool {
		for d := range denyPrefixed {
			if strings.HasPrefix(name, d) {
				return true
			}
		}
		return false
	}
	for name := range allowLiteral {
		if !denyLiteral[name] && !dominated(name) {
			return true
		}
	}
	for name := range allowPrefixed {
		if !dominated(name) {
			return true
		}
	}
	return false
}
