package metadata

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func aclRecord(id byte, typ kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) *AccessControlEntryRecord {
	return ACL{
		ID: Uuid{id}, ResourceType: typ, ResourceName: name, PatternType: pattern,
		Principal: principal, Host: host, Operation: op, Permission: perm,
	}.Record()
}

func TestACLReplayRefusesWhatKafkaRefuses(t *testing.T) {
	read := aclRecord(1, kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "t", "User:a", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	img, _, err := EmptyImage().Apply(1, []Record{read})
	if err != nil {
		t.Fatal(err)
	}
	sameBinding := *read
	sameBinding.ID = Uuid{2}
	sameID := *read
	sameID.ResourceName = "u"
	badPattern := *read
	badPattern.ID, badPattern.PatternType = Uuid{3}, int8(kmsg.ACLResourcePatternTypeMatch)
	badOp := *read
	badOp.ID, badOp.Operation = Uuid{4}, int8(kmsg.ACLOperationAny)
	cases := map[string][]Record{
		"remove an unknown id":        {&RemoveAccessControlEntryRecord{ID: Uuid{9}}},
		"remove the same id twice":    {&RemoveAccessControlEntryRecord{ID: Uuid{1}}, &RemoveAccessControlEntryRecord{ID: Uuid{1}}},
		"an id that exists":           {&sameID},
		"a binding with another id":   {&sameBinding},
		"a MATCH pattern":             {&badPattern},
		"an ANY operation":            {&badOp},
		"valid, then a failing one":   {aclRecord(5, kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypePrefixed, "g", "User:a", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow), &badOp},
		"remove all, add, remove bad": {&RemoveAccessControlEntryRecord{ID: Uuid{1}}, &sameBinding, &RemoveAccessControlEntryRecord{ID: Uuid{1}}},
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			next, _, err := img.Apply(2, recs)
			if err == nil {
				t.Fatal("applied")
			}
			if next != img || img.NumACLs() != 1 {
				t.Fatal("a failed batch changed the image")
			}
		})
	}
}

func TestACLApplyIsCopyOnWrite(t *testing.T) {
	rec := func(id byte, name string, pattern kmsg.ACLResourcePatternType, principal string, perm kmsg.ACLPermissionType) *AccessControlEntryRecord {
		return aclRecord(id, kmsg.ACLResourceTypeTopic, pattern, name, principal, "*", kmsg.ACLOperationRead, perm)
	}
	literal, prefixed := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	allow, deny := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	img1, _, err := EmptyImage().Apply(1, []Record{
		rec(1, "orders", literal, "User:a", allow), rec(2, "orders", literal, "User:b", allow), rec(3, "orders", literal, "User:c", deny),
		rec(4, "logs-", prefixed, "User:a", allow), rec(5, "logs-", prefixed, "User:b", allow), rec(6, "logs-", prefixed, "User:c", allow),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The next batch removes from and appends to the lists img1 holds,
	// several times each: img1 must not see any of it.
	img2, _, err := img1.Apply(2, []Record{
		&RemoveAccessControlEntryRecord{ID: Uuid{1}},
		rec(7, "orders", literal, "User:d", allow),
		&RemoveAccessControlEntryRecord{ID: Uuid{4}},
		rec(8, "logs-", prefixed, "User:a", deny),
		rec(9, "logs-x", prefixed, "User:b", deny),
		&RemoveAccessControlEntryRecord{ID: Uuid{9}},
		&RemoveAccessControlEntryRecord{ID: Uuid{3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	az := &Authorizer{}
	for _, c := range []struct {
		img             *Image
		principal, name string
		want            bool
	}{
		{img1, "User:a", "orders", true},
		{img1, "User:c", "orders", false},
		{img1, "User:d", "orders", false},
		{img1, "User:a", "logs-1", true},
		{img2, "User:a", "orders", false},
		{img2, "User:d", "orders", true},
		{img2, "User:a", "logs-1", false},
		{img2, "User:b", "logs-x1", true},
	} {
		if got := az.Authorize(c.img, c.principal, "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, c.name); got != c.want {
			t.Errorf("image %d: %s read %s = %t, want %t", c.img.Offset(), c.principal, c.name, got, c.want)
		}
	}
	// A node left without ACLs merges with its only child; the merged node
	// must not share the child's lists with the image before.
	tree1, _, err := EmptyImage().Apply(1, []Record{
		rec(1, "a", prefixed, "User:c", allow), rec(2, "abc", prefixed, "User:a", allow), rec(3, "abc", prefixed, "User:b", allow),
	})
	if err != nil {
		t.Fatal(err)
	}
	tree2, _, err := tree1.Apply(2, []Record{&RemoveAccessControlEntryRecord{ID: Uuid{1}}, &RemoveAccessControlEntryRecord{ID: Uuid{2}}})
	if err != nil {
		t.Fatal(err)
	}
	if !az.Authorize(tree1, "User:a", "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "abcd") ||
		az.Authorize(tree2, "User:a", "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "abcd") {
		t.Error("removing ACLs of a merged node changed the image before")
	}
	if img1.NumACLs() != 6 || img2.NumACLs() != 5 {
		t.Errorf("%d and %d ACLs", img1.NumACLs(), img2.NumACLs())
	}
	// Removing every ACL leaves an image without any: the fast path.
	var all []Record
	for _, a := range img2.ACLs() {
		all = append(all, &RemoveAccessControlEntryRecord{ID: a.ID})
	}
	img3, _, err := img2.Apply(3, all)
	if err != nil {
		t.Fatal(err)
	}
	if img3.HasACLs() || !img2.HasACLs() {
		t.Fatalf("HasACLs: %t after removing all, %t before", img3.HasACLs(), img2.HasACLs())
	}
}

// refAuthorize is StandardAuthorizerData.authorize transcribed as plainly as
// possible, scanning every ACL: the specification the index must agree with.
func refAuthorize(a *Authorizer, acls []ACL, principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if a.SuperUsers[principal] {
		return true
	}
	found, allowed := false, false
	for _, acl := range acls {
		if acl.ResourceType != typ {
			continue
		}
		applies := acl.PatternType == kmsg.ACLResourcePatternTypeLiteral && (acl.ResourceName == name || acl.ResourceName == "*") ||
			acl.PatternType == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(name, acl.ResourceName)
		if !applies {
			continue
		}
		found = true
		if acl.Principal != principal && acl.Principal != "User:*" || acl.Host != "*" && acl.Host != host {
			continue
		}
		opOK := acl.Operation == kmsg.ACLOperationAll || acl.Operation == op
		if !opOK && acl.Permission == kmsg.ACLPermissionTypeAllow {
			switch op {
			case kmsg.ACLOperationDescribe:
				opOK = slices.Contains([]kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter}, acl.Operation)
			case kmsg.ACLOperationDescribeConfigs:
				opOK = acl.Operation == kmsg.ACLOperationAlterConfigs
			}
		}
		if !opOK {
			continue
		}
		if acl.Permission == kmsg.ACLPermissionTypeDeny {
			return false
		}
		allowed = true
	}
	if allowed {
		return true
	}
	return !found && a.AllowEveryoneIfNoACLFound
}

// TestAuthorizeAgreesWithAFullScan drives random ACL creations and deletions
// through the controller and checks after each batch that Authorize, from
// the index, decides as a scan of every ACL does.
func TestAuthorizeAgreesWithAFullScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := newCluster(t, DefaultControllerConfig(), 1)
	names := []string{"a", "ab", "abc", "abd", "b", "*", "*x", "logs-1", "logs-", "l"}
	principals := []string{"User:a", "User:b", "User:*", "Group:a"}
	hosts := []string{"*", "10.0.0.1", "10.0.0.2"}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAll, kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationAlter, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationDescribeConfigs}
	types := []kmsg.ACLResourceType{kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	authorizers := []*Authorizer{{}, {AllowEveryoneIfNoACLFound: true}, {SuperUsers: map[string]bool{"User:b": true}}}
	for step := range 400 {
		var recs []Record
		if rng.IntN(3) > 0 {
			req := kmsg.NewPtrCreateACLsRequest()
			req.Version = 3
			for range rng.IntN(4) + 1 {
				cr := kmsg.NewCreateACLsRequestCreation()
				cr.ResourceType, cr.ResourceName = types[rng.IntN(2)], pick(names)
				cr.ResourcePatternType = kmsg.ACLResourcePatternType(3 + rng.IntN(2))
				cr.Principal, cr.Host = pick(principals), pick(hosts)
				cr.Operation, cr.PermissionType = ops[rng.IntN(len(ops))], kmsg.ACLPermissionType(2+rng.IntN(2))
				req.Creations = append(req.Creations, cr)
			}
			var resp *kmsg.CreateACLsResponse
			recs, resp = c.cc.CreateAcls(req)
			for _, r := range resp.Results {
				if r.ErrorCode != 0 {
					t.Fatalf("step %d: create: %s", step, errWithMessage(r.ErrorCode, r.ErrorMessage))
				}
			}
		} else {
			req := kmsg.NewPtrDeleteACLsRequest()
			req.Version = 3
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeMatch
			f.ResourceName, f.Operation, f.PermissionType = kmsg.StringPtr(pick(names)), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			req.Filters = append(req.Filters, f)
			recs, _ = c.cc.DeleteAcls(req)
		}
		c.commit(recs)
		acls := c.img.ACLs()
		for _, az := range authorizers {
			for _, typ := range types {
				for _, name := range append(names, "abcd", "logs-12", "zzz") {
					for _, p := range principals {
						for _, op := range ops {
							got := az.Authorize(c.img, p, "10.0.0.1", op, typ, name)
							if want := refAuthorize(az, acls, p, "10.0.0.1", op, typ, name); got != want {
								t.Fatalf("step %d: %s %s on %s:%s with %+v = %t, a full scan says %t\nACLs: %v", step, p, ACLOperationName(op), typ, name, *az, got, want, acls)
							}
						}
					}
				}
			}
		}
	}
}

func TestCreateAclsTooManyRecordsFailsTheRequest(t *testing.T) {
	cfg := DefaultControllerConfig()
	cfg.MaxRecordsPerRequest = 2
	c := newCluster(t, cfg, 1)
	req := kmsg.NewPtrCreateACLsRequest()
	for i := range 3 {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.Principal, cr.Host = kmsg.ACLResourceTypeTopic, fmt.Sprint("t", i), "User:a", "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
	}
	empty := kmsg.NewCreateACLsRequestCreation()
	empty.ResourceType, empty.Principal, empty.Host = kmsg.ACLResourceTypeTopic, "User:a", "*"
	empty.Operation, empty.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, empty)
	recs, resp := c.cc.CreateAcls(req)
	if len(recs) != 0 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range resp.Results[:3] {
		if r.ErrorCode != kerr.PolicyViolation.Code || *r.ErrorMessage != errTooLarge {
			t.Errorf("creation %d: %s", i, errWithMessage(r.ErrorCode, r.ErrorMessage))
		}
	}
	// The broker's own checks answered before the controller failed.
	if r := resp.Results[3]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("empty name: %s", errWithMessage(r.ErrorCode, r.ErrorMessage))
	}
}

func TestDeleteAclsTooManyRecordsFailsTheRequest(t *testing.T) {
	cfg := DefaultControllerConfig()
	cfg.MaxRecordsPerRequest = 2
	c := newCluster(t, cfg, 1)
	for i := range 3 {
		req := kmsg.NewPtrCreateACLsRequest()
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.Principal, cr.Host = kmsg.ACLResourceTypeTopic, fmt.Sprint("t", i), "User:a", "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
		recs, _ := c.cc.CreateAcls(req)
		c.commit(recs)
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = append(req.Filters, f, f)
	recs, resp := c.cc.DeleteAcls(req)
	if len(recs) != 0 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range resp.Results {
		if r.ErrorCode != kerr.InvalidRequest.Code || *r.ErrorMessage != "Cannot remove more than 2 acls in a single delete operation." || len(r.MatchingACLs) != 0 {
			t.Errorf("filter: %s, %d matching", errWithMessage(r.ErrorCode, r.ErrorMessage), len(r.MatchingACLs))
		}
	}
	// Two filters naming the same two ACLs remove them once: within bounds.
	f.ResourceType, f.ResourceName = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("t1")
	g := f
	g.ResourceName = kmsg.StringPtr("t2")
	req.Filters = []kmsg.DeleteACLsRequestFilter{f, g, f}
	recs, resp = c.cc.DeleteAcls(req)
	if len(recs) != 2 || len(resp.Results) != 3 || len(resp.Results[2].MatchingACLs) != 1 {
		t.Fatalf("%d records, results %+v", len(recs), resp.Results)
	}
}

func TestACLRecordsSurviveEncoding(t *testing.T) {
	rec := aclRecord(7, kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourcePatternTypePrefixed, "tx-", "User:a", "::1", ACLOperationTwoPhaseCommit, kmsg.ACLPermissionTypeDeny)
	b, err := EncodeBatch([]Record{rec, &RemoveAccessControlEntryRecord{ID: Uuid{7}}})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[0].(*AccessControlEntryRecord); *got != *rec || recs[1].(*RemoveAccessControlEntryRecord).ID != (Uuid{7}) {
		t.Fatalf("decoded %+v %+v", recs[0], recs[1])
	}
	if s := AccessControlEntryType.String() + " " + RemoveAccessControlEntryType.String(); s != "ACCESS_CONTROL_ENTRY_RECORD REMOVE_ACCESS_CONTROL_ENTRY_RECORD" {
		t.Fatal(s)
	}
	if !strings.Contains(string(b), `"permissionType":2`) || !strings.Contains(string(b), `"resourceName":"tx-"`) {
		t.Fatalf("encoding %s", b)
	}
}

// TestACLIndexRandomBatches applies random batches mixing creations and
// removals (of ACLs old and of the same batch) and checks, after each, that
// the new image decides as a full scan of its ACLs does — and that the
// image before it still decides as before: batches copy, never share.
func TestACLIndexRandomBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	names := []string{"", "a", "ab", "abc", "abcd", "abd", "b", "ba", "*", "*a", "team-1-", "team-1-x", "team-10-", "team-2-"}
	principals := []string{"User:a", "User:b", "User:*"}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAll, kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe}
	az := []*Authorizer{{}, {AllowEveryoneIfNoACLFound: true}}
	decisions := func(img *Image) []bool {
		var out []bool
		for _, a := range az {
			for _, name := range names[1:] {
				for _, suffix := range []string{"", "z"} {
					for _, p := range principals[:2] {
						for _, op := range ops[1:] {
							out = append(out, a.Authorize(img, p, "h", op, kmsg.ACLResourceTypeTopic, name+suffix))
						}
					}
				}
			}
		}
		return out
	}
	reference := func(img *Image) []bool {
		acls := img.ACLs()
		var out []bool
		for _, a := range az {
			for _, name := range names[1:] {
				for _, suffix := range []string{"", "z"} {
					for _, p := range principals[:2] {
						for _, op := range ops[1:] {
							out = append(out, refAuthorize(a, acls, p, "h", op, kmsg.ACLResourceTypeTopic, name+suffix))
						}
					}
				}
			}
		}
		return out
	}
	img := EmptyImage()
	live := map[ACL]Uuid{} // binding → id
	nextID := 1
	for step := range 300 {
		var recs []Record
		for range rng.IntN(8) + 1 {
			if len(live) > 0 && rng.IntN(3) == 0 {
				for b, id := range live { // any one
					recs = append(recs, &RemoveAccessControlEntryRecord{ID: id})
					delete(live, b)
					break
				}
				continue
			}
			a := ACL{
				ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: names[rng.IntN(len(names))],
				PatternType: kmsg.ACLResourcePatternType(3 + rng.IntN(2)), Principal: principals[rng.IntN(len(principals))], Host: "*",
				Operation: ops[rng.IntN(len(ops))], Permission: kmsg.ACLPermissionType(2 + rng.IntN(2)),
			}
			if _, dup := live[a]; dup {
				continue
			}
			a.ID = Uuid{byte(nextID >> 8), byte(nextID)}
			nextID++
			live[a.binding()] = a.ID
			recs = append(recs, a.Record())
		}
		before := decisions(img)
		next, _, err := img.Apply(int64(step+1), recs)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got := decisions(img); !slices.Equal(got, before) {
			t.Fatalf("step %d: applying a batch changed the decisions of the image before it", step)
		}
		if got, want := decisions(next), reference(next); !slices.Equal(got, want) {
			t.Fatalf("step %d: decisions differ from a full scan\nACLs: %v", step, next.ACLs())
		}
		if next.NumACLs() != len(live) {
			t.Fatalf("step %d: %d ACLs, want %d", step, next.NumACLs(), len(live))
		}
		img = next
	}
}
