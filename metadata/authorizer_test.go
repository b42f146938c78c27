package metadata

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclImage applies ACLs given as (pattern, name, principal, op, perm) on
// topics, all hosts, in one batch.
func aclImage(t testing.TB, acls ...ACL) *Image {
	t.Helper()
	var recs []Record
	for i, a := range acls {
		a.ID = Uuid{byte(i >> 8), byte(i), 1}
		if a.ResourceType == 0 {
			a.ResourceType = kmsg.ACLResourceTypeTopic
		}
		if a.PatternType == 0 {
			a.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if a.Host == "" {
			a.Host = "*"
		}
		recs = append(recs, a.Record())
	}
	img, _, err := EmptyImage().Apply(1, recs)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func allowACL(name, principal string, op kmsg.ACLOperation) ACL {
	return ACL{ResourceName: name, Principal: principal, Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func denyACL(name, principal string, op kmsg.ACLOperation) ACL {
	return ACL{ResourceName: name, Principal: principal, Operation: op, Permission: kmsg.ACLPermissionTypeDeny}
}

func prefixed(a ACL) ACL { a.PatternType = kmsg.ACLResourcePatternTypePrefixed; return a }

// TestAuthorizeAnyIsKafkasDefault pins authorizeByResourceType's rules,
// including the ones that surprise: the "hardcode" probe, and operations
// that imply others only in that probe.
func TestAuthorizeAnyIsKafkasDefault(t *testing.T) {
	write, read, describe := kmsg.ACLOperationWrite, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe
	cases := []struct {
		name string
		acls []ACL
		op   kmsg.ACLOperation
		want bool
	}{
		{"a literal allow", []ACL{allowACL("t", "User:a", write)}, write, true},
		{"an allow of ALL", []ACL{allowACL("t", "User:a", kmsg.ACLOperationAll)}, write, true},
		{"another principal's allow", []ACL{allowACL("t", "User:b", write)}, write, false},
		{"the wildcard principal's allow", []ACL{allowACL("t", "User:*", write)}, write, true},
		{"a literal deny of the same name", []ACL{allowACL("t", "User:a", write), denyACL("t", "User:a", write)}, write, false},
		{"a literal deny of another name", []ACL{allowACL("t", "User:a", write), denyACL("u", "User:a", write)}, write, true},
		{"a prefixed deny of a prefix", []ACL{allowACL("team-1", "User:a", write), prefixed(denyACL("team-", "User:a", write))}, write, false},
		{"a prefixed deny of the whole name", []ACL{prefixed(allowACL("team-", "User:a", write)), prefixed(denyACL("team-", "User:a", write))}, write, false},
		{"a literal deny does not dominate a prefixed allow", []ACL{prefixed(allowACL("team-", "User:a", write)), denyACL("team-", "User:a", write)}, write, true},
		{"a longer prefixed deny does not dominate", []ACL{prefixed(allowACL("team-", "User:a", write)), prefixed(denyACL("team-1", "User:a", write))}, write, true},
		{"one undominated allow among dominated ones", []ACL{allowACL("a1", "User:a", write), allowACL("b1", "User:a", write), prefixed(denyACL("a", "User:a", write))}, write, true},
		{"a wildcard deny beats a wildcard allow", []ACL{allowACL("*", "User:a", write), denyACL("*", "User:*", kmsg.ACLOperationAll)}, write, false},
		{"a wildcard allow beats a prefixed deny", []ACL{allowACL("*", "User:a", write), prefixed(denyACL("t", "User:a", write))}, write, true},
		// Outside the probe, no operation implies another.
		{"READ on one topic does not imply DESCRIBE", []ACL{allowACL("t", "User:a", read)}, describe, false},
		// The probe is Authorize on a topic named "hardcode".
		{"the probe sees a prefix of hardcode", []ACL{prefixed(allowACL("hard", "User:a", write))}, write, true},
		{"the probe sees READ on * imply DESCRIBE", []ACL{allowACL("*", "User:a", read)}, describe, true},
		{"the probe's DENY of hardcode does not stop the scan", []ACL{denyACL("hardcode", "User:a", write), allowACL("t", "User:a", write)}, write, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := aclImage(t, c.acls...)
			if got := (&Authorizer{}).AuthorizeAny(img, "User:a", "10.0.0.1", c.op, kmsg.ACLResourceTypeTopic); got != c.want {
				t.Fatalf("AuthorizeAny = %t, want %t", got, c.want)
			}
		})
	}
	// A resource type without ACLs: the probe finds none, so the default.
	img := aclImage(t, allowACL("t", "User:b", write))
	if !(&Authorizer{AllowEveryoneIfNoACLFound: true}).AuthorizeAny(img, "User:a", "h", write, kmsg.ACLResourceTypeGroup) {
		t.Fatal("no group ACL and allow.everyone.if.no.acl.found, yet denied")
	}
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationAny, kmsg.ACLOperationUnknown, 99} {
		if (&Authorizer{AllowEveryoneIfNoACLFound: true}).AuthorizeAny(EmptyImage(), "User:a", "h", op, kmsg.ACLResourceTypeTopic) {
			t.Errorf("operation %d allowed", op)
		}
	}
}

func TestAuthorizeAllocatesNothing(t *testing.T) {
	az := &Authorizer{SuperUsers: map[string]bool{"User:admin": true}}
	for _, img := range []*Image{EmptyImage(), benchACLImage(t, 1000)} {
		if n := testing.AllocsPerRun(100, func() {
			az.Authorize(img, "User:u42", "10.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "team-42-app-orders")
		}); n != 0 {
			t.Errorf("%d ACLs: %v allocations per Authorize", img.NumACLs(), n)
		}
	}
}

// benchACLImage is n ACLs across topics: 70% LITERAL (an ALLOW of READ per
// user on its own topic, every tenth with a DENY of WRITE), 30% PREFIXED on
// team prefixes of several lengths, one ALLOW and, every fifth, a DENY.
func benchACLImage(t testing.TB, n int) *Image {
	var acls []ACL
	for i := 0; len(acls) < n*7/10; i++ {
		p := fmt.Sprintf("User:u%d", i)
		acls = append(acls, allowACL(fmt.Sprintf("orders-%05d", i), p, kmsg.ACLOperationRead))
		if i%10 == 0 {
			acls = append(acls, denyACL(fmt.Sprintf("orders-%05d", i), p, kmsg.ACLOperationWrite))
		}
	}
	for i := 0; len(acls) < n; i++ {
		p := fmt.Sprintf("User:u%d", i)
		prefix := fmt.Sprintf("team-%d-", i)
		if i%3 == 1 {
			prefix += "app-"
		} else if i%3 == 2 {
			prefix += "service-"
		}
		acls = append(acls, prefixed(allowACL(prefix, p, kmsg.ACLOperationAll)))
		if i%5 == 0 {
			acls = append(acls, prefixed(denyACL(prefix+"secret-", p, kmsg.ACLOperationRead)))
		}
	}
	return aclImage(t, acls[:n]...)
}

// BenchmarkAuthorize measures one decision, as the request path makes one
// per topic of a Produce or Fetch.
func BenchmarkAuthorize(b *testing.B) {
	az := &Authorizer{SuperUsers: map[string]bool{"User:admin": true}}
	empty, loaded := EmptyImage(), benchACLImage(b, 10000)
	if loaded.NumACLs() != 10000 {
		b.Fatalf("%d ACLs", loaded.NumACLs())
	}
	read, write := kmsg.ACLOperationRead, kmsg.ACLOperationWrite
	for _, c := range []struct {
		name      string
		img       *Image
		principal string
		op        kmsg.ACLOperation
		topic     string
		want      bool
	}{
		{"no-acls", empty, "User:u42", read, "orders-00042", false}, // super.users set: one map lookup
		{"10k/allowed-literal", loaded, "User:u42", read, "orders-00042", true},
		{"10k/denied-literal", loaded, "User:u40", write, "orders-00040", false},
		{"10k/allowed-prefixed", loaded, "User:u4", write, "team-4-app-payments", true},
		{"10k/denied-prefixed", loaded, "User:u0", read, "team-0-secret-keys", false},
		{"10k/no-acl-found", loaded, "User:u42", read, "unrelated-topic-name", false},
		{"10k/super-user", loaded, "User:admin", write, "orders-00040", true},
	} {
		if got := az.Authorize(c.img, c.principal, "10.0.0.1", c.op, kmsg.ACLResourceTypeTopic, c.topic); got != c.want {
			b.Fatalf("%s: %t", c.name, got)
		}
		// Only the no-ACL cases are decided by allow.everyone.if.no.acl.found.
		noACL := c.img == empty || c.topic == "unrelated-topic-name"
		everyone := &Authorizer{SuperUsers: az.SuperUsers, AllowEveryoneIfNoACLFound: true}
		if got := everyone.Authorize(c.img, c.principal, "10.0.0.1", c.op, kmsg.ACLResourceTypeTopic, c.topic); got != (c.want || noACL) {
			b.Fatalf("%s: an ACL applies: %t", c.name, !noACL)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				az.Authorize(c.img, c.principal, "10.0.0.1", c.op, kmsg.ACLResourceTypeTopic, c.topic)
			}
		})
	}
	b.Run("no-acls/no-super-users", func(b *testing.B) {
		plain := &Authorizer{AllowEveryoneIfNoACLFound: true}
		for b.Loop() {
			plain.Authorize(empty, "User:u42", "10.0.0.1", read, kmsg.ACLResourceTypeTopic, "orders-00042")
		}
	})
}
