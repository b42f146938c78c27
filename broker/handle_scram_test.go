package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
)

// kadm (as kafka-configs --entity-type users does) sets, describes and
// deletes SCRAM credentials through a broker: the change is forwarded to
// the controller, the description answered from the broker's image, with
// Kafka's per-user errors.
func TestUserScramCredentialsAPIs(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}})
	if err != nil || altered["alice"].Err != nil {
		t.Fatalf("alter: %v %+v", err, altered)
	}
	// kadm checks the iterations itself; a raw request reaches the
	// controller's check.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = append(req.Upsertions, kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		Name: "bob", Mechanism: metadata.ScramSHA512, Iterations: 1000, Salt: []byte("s"), SaltedPassword: []byte("p"),
	})
	if resp := roundTrip[*kmsg.AlterUserSCRAMCredentialsResponse](c.dialRaw(t), req); len(resp.Results) != 1 ||
		resp.Results[0].ErrorCode != kerr.UnacceptableCredential.Code || *resp.Results[0].ErrorMessage != "Too few iterations" {
		t.Fatalf("1000 iterations: %+v", resp.Results)
	}
	described, err := adm.DescribeUserSCRAMs(ctx, "alice", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if a := described["alice"]; a.Err != nil || len(a.CredInfos) != 1 || a.CredInfos[0].Mechanism != kadm.ScramSha256 || a.CredInfos[0].Iterations != 4096 {
		t.Fatalf("alice: %+v", a)
	}
	if b := described["bob"]; !errors.Is(b.Err, kerr.ResourceNotFound) {
		t.Fatalf("bob: %+v", b)
	}
	if _, ok := c.meta.Image().ScramCredential("alice", metadata.ScramSHA256); !ok {
		t.Fatal("alice's credential is not in the image")
	}
	deleted, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}, {User: "carol", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || deleted["alice"].Err != nil || !errors.Is(deleted["carol"].Err, kerr.ResourceNotFound) {
		t.Fatalf("delete: %v %+v", err, deleted)
	}
	if all, err := adm.DescribeUserSCRAMs(ctx); err != nil || len(all) != 0 {
		t.Fatalf("describe all after the delete: %v %+v", err, all)
	}
}

// The bootstrap records a controller was formatted with must apply to an
// empty image: a file that would fail the cluster's first batch stops the
// controller at startup instead.
func TestBootstrapRecordsAreCheckedAtStartup(t *testing.T) {
	dir := t.TempDir()
	if recs, err := bootstrapRecords(dir); err != nil || recs != nil {
		t.Fatalf("no file: %v %v", recs, err)
	}
	good := &metadata.UserScramCredentialRecord{Name: "admin", Mechanism: metadata.ScramSHA256, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k"), Iterations: 4096}
	if err := raftlog.WriteBootstrapRecords(dir, []metadata.Record{good}); err != nil {
		t.Fatal(err)
	}
	if recs, err := bootstrapRecords(dir); err != nil || len(recs) != 1 {
		t.Fatalf("good file: %v %v", recs, err)
	}
	os.Remove(filepath.Join(dir, raftlog.BootstrapRecordsFile))
	if err := raftlog.WriteBootstrapRecords(dir, []metadata.Record{&metadata.RemoveUserScramCredentialRecord{Name: "admin", Mechanism: metadata.ScramSHA256}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bootstrapRecords(dir); err == nil || !strings.Contains(err.Error(), "bootstrap records") {
		t.Fatalf("a batch that cannot apply: %v", err)
	}
}
