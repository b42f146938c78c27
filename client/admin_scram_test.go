package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The Admin's SCRAM calls against franz-go's reference broker: a credential
// it sets (the password salted here) lets that user authenticate, the
// description shows it, and once deleted the user is refused.
func TestAdminUserScramCredentials(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "admin-secret"))
	ctx := testCtx(t)
	seed := SeedBrokers(fake.ListenAddrs()...)
	adm, err := NewAdmin(ctx, seed, SASL(ScramAuth{User: "admin", Pass: "admin-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	// kfake answers every SCRAM client with 4096 iterations, whatever the
	// credential has: the default, then.
	res, err := adm.AlterUserScramCredentials(ctx, nil, []ScramUpsertion{{User: "carol", Mechanism: "SCRAM-SHA-512", Password: "carol-secret"}})
	if err != nil || res["carol"] != nil {
		t.Fatalf("set carol: %v %v", err, res)
	}
	carol := SASL(ScramAuth{Mechanism: "SCRAM-SHA-512", User: "carol", Pass: "carol-secret"})
	cl, err := NewClient(ctx, seed, carol)
	if err != nil {
		t.Fatalf("carol cannot authenticate with the credential the Admin set: %v", err)
	}
	cl.Close()

	users, err := adm.DescribeUserScramCredentials(ctx, "carol", "dave")
	if err != nil || len(users) != 2 {
		t.Fatalf("describe: %v %+v", err, users)
	}
	for _, u := range users {
		switch u.User {
		case "carol":
			if u.Err != nil || len(u.Credentials) != 1 || u.Credentials[0] != (ScramCredentialInfo{"SCRAM-SHA-512", 4096}) {
				t.Errorf("carol: %+v", u)
			}
		case "dave":
			if !errors.Is(u.Err, ErrorForCode(kerr.ResourceNotFound.Code)) {
				t.Errorf("dave: %+v", u)
			}
		}
	}

	if _, err := adm.AlterUserScramCredentials(ctx, nil, []ScramUpsertion{{User: "x", Mechanism: "SCRAM-SHA-1", Password: "p"}}); err == nil {
		t.Error("an unknown mechanism was sent")
	}
	res, err = adm.AlterUserScramCredentials(ctx, []ScramDeletion{{User: "carol", Mechanism: "SCRAM-SHA-512"}}, nil)
	if err != nil || res["carol"] != nil {
		t.Fatalf("delete carol: %v %v", err, res)
	}
	if cl, err := NewClient(ctx, seed, carol, RequestRetries(0)); err == nil {
		cl.Close()
		t.Fatal("carol authenticated after her credential was deleted")
	}
	if s := fmt.Sprintf("%v %#v", ScramUpsertion{User: "u", Password: "hunter2"}, ScramUpsertion{Password: "hunter2"}); strings.Contains(s, "hunter2") {
		t.Errorf("the password is printed: %s", s)
	}
}
