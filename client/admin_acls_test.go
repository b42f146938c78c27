package client

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Admin's ACL calls against franz-go's reference broker: created ACLs
// are described by a filter (empty fields match anything) and deleted by
// one, which returns what it deleted.
func TestAdminACLs(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin-secret"))
	ctx := testCtx(t)
	adm, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...), SASL(PlainAuth{User: "admin", Pass: "admin-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	read := ACLBinding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	write := read
	write.Operation = kmsg.ACLOperationWrite
	group := read
	group.ResourceType, group.ResourceName, group.PatternType = kmsg.ACLResourceTypeGroup, "app-", kmsg.ACLResourcePatternTypePrefixed
	results, err := adm.CreateACLs(ctx, read, write, group)
	if err != nil || len(results) != 3 || results[0] != nil || results[1] != nil || results[2] != nil {
		t.Fatalf("create: %v %v", err, results)
	}
	all, err := adm.DescribeACLs(ctx, ACLBinding{Principal: "User:alice"})
	if err != nil || len(all) != 3 {
		t.Fatalf("describe alice's: %v %v", err, all)
	}
	topics, err := adm.DescribeACLs(ctx, ACLBinding{ResourceType: kmsg.ACLResourceTypeTopic})
	if err != nil || len(topics) != 2 {
		t.Fatalf("describe topic ACLs: %v %v", err, topics)
	}
	deleted, err := adm.DeleteACLs(ctx, ACLBinding{ResourceType: kmsg.ACLResourceTypeTopic, Operation: kmsg.ACLOperationWrite})
	if err != nil || len(deleted) != 1 || len(deleted[0]) != 1 || deleted[0][0] != write {
		t.Fatalf("delete the write ACL: %v %v", err, deleted)
	}
	if left, err := adm.DescribeACLs(ctx, ACLBinding{}); err != nil || len(left) != 2 {
		t.Fatalf("left: %v %v", err, left)
	}
}
