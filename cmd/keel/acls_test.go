package main

import (
	"strings"
	"testing"
)

// keel acls refuses what kafka-acls.sh refuses before connecting: no
// resource, no principal to add, a pattern type an ACL cannot have, an
// unknown operation, --consumer without a group.
func TestACLsFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"acls", "add", "--allow-principal", "User:a", "--operation", "Read"}, "name a resource"},
		{[]string{"acls", "add", "--topic", "t", "--operation", "Read"}, "give --allow-principal or --deny-principal"},
		{[]string{"acls", "add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"}, "an ACL is literal or prefixed"},
		{[]string{"acls", "add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"}, "--operation Fly: not an ACL operation"},
		{[]string{"acls", "add", "--allow-principal", "User:a", "--topic", "t", "--consumer"}, "--consumer needs --group"},
		{[]string{"acls", "--add", "--topic", "t"}, "give --allow-principal"},
		{[]string{"acls", "list", "--resource-pattern-type", "sideways"}, "--resource-pattern-type sideways"},
	} {
		_, err := run(t, kafkaStyleArgs(append([]string{"keel"}, tc.args...))[1:]...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("keel %s: %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
