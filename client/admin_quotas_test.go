package client

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The Admin's client quota calls against franz-go's reference broker: a
// user's, a user's per client id and the default user's quotas are set,
// described by filters (strict or not) and removed.
func TestAdminClientQuotas(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	ctx := testCtx(t)
	adm, err := NewAdmin(ctx, SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	alice, app := "alice", "app"
	aliceE := QuotaEntity{QuotaEntityUser: &alice}
	aliceApp := QuotaEntity{QuotaEntityUser: &alice, QuotaEntityClientID: &app}
	defUser := QuotaEntity{QuotaEntityUser: nil}
	errs, err := adm.AlterClientQuotas(ctx,
		QuotaAlteration{Entity: aliceE, Set: map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048}},
		QuotaAlteration{Entity: aliceApp, Set: map[string]float64{"producer_byte_rate": 512}},
		QuotaAlteration{Entity: defUser, Set: map[string]float64{"consumer_byte_rate": 4096}},
	)
	if err != nil || len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("alter: %v %v", err, errs)
	}

	own, err := adm.DescribeClientQuotas(ctx, true, QuotaFilter{EntityType: QuotaEntityUser, Name: &alice})
	if err != nil || len(own) != 1 || !reflect.DeepEqual(own[0].Values, map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048}) {
		t.Fatalf("alice's own quotas (strict): %v %+v", err, own)
	}
	if got := own[0].Entity.String(); got != "user-principal 'alice'" {
		t.Errorf("entity described as %q", got)
	}
	withClients, err := adm.DescribeClientQuotas(ctx, false, QuotaFilter{EntityType: QuotaEntityUser, Name: &alice})
	if err != nil || len(withClients) != 2 {
		t.Fatalf("alice's quotas with her client ids: %v %+v", err, withClients)
	}
	if got := aliceApp.String(); got != "user-principal 'alice', client-id 'app'" {
		t.Errorf("entity described as %q", got)
	}
	def, err := adm.DescribeClientQuotas(ctx, true, QuotaFilter{EntityType: QuotaEntityUser, Default: true})
	if err != nil || len(def) != 1 || def[0].Values["consumer_byte_rate"] != 4096 || def[0].Entity.String() != "the default user-principal" {
		t.Fatalf("the default user's quotas: %v %+v", err, def)
	}

	if errs, err := adm.AlterClientQuotas(ctx, QuotaAlteration{Entity: aliceE, Remove: []string{"consumer_byte_rate"}}); err != nil || errs[0] != nil {
		t.Fatalf("remove: %v %v", err, errs)
	}
	own, err = adm.DescribeClientQuotas(ctx, true, QuotaFilter{EntityType: QuotaEntityUser, Name: &alice})
	if err != nil || len(own) != 1 || !reflect.DeepEqual(own[0].Values, map[string]float64{"producer_byte_rate": 1024}) {
		t.Fatalf("after the removal: %v %+v", err, own)
	}
}
