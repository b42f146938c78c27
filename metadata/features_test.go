package metadata

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseMetadataVersion(t *testing.T) {
	for in, want := range map[string]int16{
		"3.3-IV3": 7, "3.7": 19, "3.7-IV2": 17, "4.0": 25, "4.1": 27, "4.1-IV0": 26, "17": 17, "3.0": 1,
	} {
		if got, err := ParseMetadataVersion(in); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "3.", "3.7-IV9", "9.9", "0", "-1", "100", "4.1-"} {
		if got, err := ParseMetadataVersion(in); err == nil {
			t.Errorf("%q: %d, want an error", in, got)
		}
	}
	if MetadataVersionName(19) != "3.7-IV4" || MetadataVersionName(LatestMetadataVersion) != "4.1-IV1" || MetadataVersionName(99) != "99" {
		t.Errorf("names: %s %s %s", MetadataVersionName(19), MetadataVersionName(LatestMetadataVersion), MetadataVersionName(99))
	}
}

// A new cluster's first active controller finalizes metadata.version: the
// bootstrap's level if it has one, else the latest; an image that has a
// level keeps it. A level of 0 removes a feature.
func TestBootstrapFeatures(t *testing.T) {
	img := EmptyImage()
	recs := BootstrapFeatures(img, nil)
	if len(recs) != 4 || *recs[0].(*FeatureLevelRecord) != (FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: LatestMetadataVersion}) ||
		*recs[1].(*FeatureLevelRecord) != (FeatureLevelRecord{Name: GroupVersionFeature, FeatureLevel: 1}) ||
		*recs[2].(*FeatureLevelRecord) != (FeatureLevelRecord{Name: EligibleLeaderReplicasFeature, FeatureLevel: 1}) ||
		*recs[3].(*FeatureLevelRecord) != (FeatureLevelRecord{Name: TransactionVersionFeature, FeatureLevel: 2}) {
		t.Fatalf("empty image: %v", recs)
	}
	// Eligible leader replicas are on from 4.1-IV0, as on a new Kafka 4.1
	// cluster, unless the bootstrap sets them.
	for mv, want := range map[int16]int{ELRDefaultMetadataVersion - 1: 0, ELRDefaultMetadataVersion: 1} {
		boot := []Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: mv}}
		n := 0
		for _, r := range BootstrapFeatures(EmptyImage(), boot) {
			if r.(*FeatureLevelRecord).Name == EligibleLeaderReplicasFeature {
				n++
			}
		}
		if n != want {
			t.Errorf("metadata.version %d: %d eligible.leader.replicas.version records, want %d", mv, n, want)
		}
		boot = append(boot, &FeatureLevelRecord{Name: EligibleLeaderReplicasFeature, FeatureLevel: 0})
		for _, r := range BootstrapFeatures(EmptyImage(), boot) {
			if r.(*FeatureLevelRecord).Name == EligibleLeaderReplicasFeature {
				t.Errorf("metadata.version %d: eligible.leader.replicas.version set over the bootstrap's 0", mv)
			}
		}
	}
	// A release before 4.0 has no group.version; 4.0 has 1, unless the
	// bootstrap sets it.
	boot := []Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: 15}}
	if recs := BootstrapFeatures(img, boot); len(recs) != 0 {
		t.Fatalf("with a bootstrap level: %v", recs)
	}
	boot40 := []Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: 22}}
	if recs := BootstrapFeatures(img, boot40); len(recs) != 1 || recs[0].(*FeatureLevelRecord).Name != GroupVersionFeature {
		t.Fatalf("with a 4.0 bootstrap: %v", recs)
	}
	if recs := BootstrapFeatures(img, append(boot40, &FeatureLevelRecord{Name: GroupVersionFeature, FeatureLevel: 0})); len(recs) != 0 {
		t.Fatalf("with group.version 0 in the bootstrap: %v", recs)
	}
	img, _, err := img.Apply(0, boot)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := img.FeatureLevel(MetadataVersionFeature); !ok || l != 15 || len(BootstrapFeatures(img, nil)) != 0 {
		t.Fatalf("level %d %v", l, ok)
	}
	img, _, _ = img.Apply(1, []Record{&FeatureLevelRecord{Name: "x.version", FeatureLevel: 2}, &FeatureLevelRecord{Name: "x.version", FeatureLevel: 0}})
	if f := img.Features(); len(f) != 1 || f[MetadataVersionFeature] != 15 {
		t.Fatalf("features %v", f)
	}
}

func updateReq(version int16, validateOnly bool, updates ...kmsg.UpdateFeaturesRequestFeatureUpdate) *kmsg.UpdateFeaturesRequest {
	r := kmsg.NewPtrUpdateFeaturesRequest()
	r.Version, r.ValidateOnly, r.FeatureUpdates = version, validateOnly, updates
	return r
}

func update(name string, level int16, upgradeType int8) kmsg.UpdateFeaturesRequestFeatureUpdate {
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, upgradeType
	u.AllowDowngrade = upgradeType != upgradeTypeUpgrade
	return u
}

func TestUpdateFeatures(t *testing.T) {
	cfg := DefaultControllerConfig()
	cfg.NodeID = 3000
	c := newCluster(t, cfg, 2)
	c.commit([]Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: 15}})
	mv := func() int16 { l, _ := c.img.FeatureLevel(MetadataVersionFeature); return l }

	// Refusals: nothing committed, the top-level error, and below v2
	// each feature's.
	for _, tc := range []struct {
		req  *kmsg.UpdateFeaturesRequest
		code int16
		want string
	}{
		{updateReq(1, false, update(MetadataVersionFeature, 0, upgradeTypeSafeDowngrade)), kerr.InvalidUpdateVersion.Code,
			"Invalid update version 0 for feature metadata.version. Local controller 3000 only supports versions 7-27"},
		{updateReq(1, false, update(MetadataVersionFeature, 28, upgradeTypeUpgrade)), kerr.InvalidUpdateVersion.Code,
			"Local controller 3000 only supports versions 7-27"},
		{updateReq(1, false, update(MetadataVersionFeature, 14, upgradeTypeUpgrade)), kerr.InvalidUpdateVersion.Code,
			"Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."},
		{updateReq(0, false, update(MetadataVersionFeature, 14, upgradeTypeUpgrade)), kerr.InvalidUpdateVersion.Code,
			"Can't downgrade the version of this feature without"},
		{updateReq(1, false, update(MetadataVersionFeature, 16, upgradeTypeSafeDowngrade)), kerr.InvalidUpdateVersion.Code,
			"Can't downgrade to a newer version."},
		{updateReq(1, false, update(MetadataVersionFeature, 14, upgradeTypeSafeDowngrade)), kerr.InvalidUpdateVersion.Code,
			"Invalid metadata.version 14. Refusing to perform the requested downgrade because it might delete metadata information."},
		{updateReq(0, false, update(MetadataVersionFeature, 14, upgradeTypeSafeDowngrade)), kerr.InvalidUpdateVersion.Code,
			"Refusing to perform the requested downgrade"},
		{updateReq(1, false, update(MetadataVersionFeature, 14, upgradeTypeUnsafeDowngrade)), kerr.InvalidUpdateVersion.Code,
			"Invalid metadata.version 14. Unsafe metadata downgrade is not supported in this version."},
		{updateReq(1, false, update(MetadataVersionFeature, 20, 7)), kerr.InvalidUpdateVersion.Code, "Unknown upgrade type 7."},
		{updateReq(1, false, update(MetadataVersionFeature, -1, upgradeTypeSafeDowngrade)), kerr.InvalidUpdateVersion.Code,
			"A feature version cannot be less than 0."},
		{updateReq(1, false, update("share.version", 1, upgradeTypeUpgrade)), kerr.InvalidUpdateVersion.Code,
			"Invalid update version 1 for feature share.version. Local controller 3000 does not support this feature."},
		{updateReq(1, false, update(GroupVersionFeature, 1, upgradeTypeUpgrade)), kerr.InvalidUpdateVersion.Code,
			"Invalid update version 1 for feature group.version. Feature group.version level 1 requires metadata.version 4.0-IV0 (22) or higher; it is 15."},
		{updateReq(1, false, update(MetadataVersionFeature, 21, upgradeTypeUpgrade), update(GroupVersionFeature, 1, upgradeTypeUpgrade)), kerr.InvalidUpdateVersion.Code,
			"requires metadata.version 4.0-IV0 (22) or higher; it is 21."},
		{updateReq(1, false, update(KRaftVersionFeature, 1, upgradeTypeUpgrade)), kerr.InvalidUpdateVersion.Code,
			"Keel sets kraft.version when the quorum is formatted"},
		{updateReq(2, false, update(MetadataVersionFeature, 20, upgradeTypeUpgrade), update("share.version", 1, upgradeTypeUpgrade)),
			kerr.InvalidUpdateVersion.Code, "The update failed for all features since the following feature had an error: Invalid update version 1 for feature share.version."},
		{updateReq(1, false, update(MetadataVersionFeature, 20, upgradeTypeUpgrade), update(MetadataVersionFeature, 21, upgradeTypeUpgrade)),
			kerr.InvalidRequest.Code, "Feature metadata.version appears more than once in the request."},
	} {
		recs, resp := c.cc.UpdateFeatures(tc.req)
		if len(recs) != 0 || resp.ErrorCode != tc.code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, tc.want) {
			t.Errorf("%+v: %d records, %v %v; want %v %q", tc.req.FeatureUpdates, len(recs), kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, kerr.ErrorForCode(tc.code), tc.want)
			continue
		}
		wantResults := len(tc.req.FeatureUpdates)
		if tc.req.Version >= 2 {
			wantResults = 0
		}
		if len(resp.Results) != wantResults {
			t.Errorf("%+v: %d results, want %d", tc.req.FeatureUpdates, len(resp.Results), wantResults)
		}
		for _, r := range resp.Results {
			if r.ErrorCode != tc.code || r.ErrorMessage == nil || *r.ErrorMessage != *resp.ErrorMessage {
				t.Errorf("%+v: result %+v", tc.req.FeatureUpdates, r)
			}
		}
	}
	if mv() != 15 {
		t.Fatalf("a refused update changed metadata.version to %d", mv())
	}

	// Accepted: validate-only commits nothing; the same level and a level
	// 0 of an unknown feature change nothing; an upgrade commits.
	recs, resp := c.cc.UpdateFeatures(updateReq(1, true, update(MetadataVersionFeature, 20, upgradeTypeUpgrade)))
	if resp.ErrorCode != 0 || len(recs) != 0 || len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("validate only: %d records, %+v", len(recs), resp)
	}
	recs, resp = c.cc.UpdateFeatures(updateReq(1, false, update(MetadataVersionFeature, 15, upgradeTypeUpgrade),
		update("group.version", 0, upgradeTypeSafeDowngrade), update(KRaftVersionFeature, 0, upgradeTypeUpgrade)))
	if resp.ErrorCode != 0 || len(recs) != 0 {
		t.Fatalf("no change: %d records, %+v", len(recs), resp)
	}
	recs, resp = c.cc.UpdateFeatures(updateReq(0, false, update(MetadataVersionFeature, 20, upgradeTypeUpgrade)))
	if resp.ErrorCode != 0 || len(recs) != 1 {
		t.Fatalf("upgrade: %d records, %+v", len(recs), resp)
	}
	c.commit(recs)
	if mv() != 20 {
		t.Fatalf("metadata.version %d after the upgrade, want 20", mv())
	}
	// group.version 1 with the metadata.version it needs, in one request.
	recs, resp = c.cc.UpdateFeatures(updateReq(2, false, update(MetadataVersionFeature, 22, upgradeTypeUpgrade), update(GroupVersionFeature, 1, upgradeTypeUpgrade)))
	if resp.ErrorCode != 0 || len(recs) != 2 {
		t.Fatalf("group.version with its metadata.version: %d records, %+v", len(recs), resp)
	}
	c.commit(recs)
	if l, _ := c.img.FeatureLevel(GroupVersionFeature); l != 1 {
		t.Fatalf("group.version %d", l)
	}
}

// Brokers register their supported ranges; an upgrade beyond one of them
// is refused, and a broker that cannot run at the finalized level may not
// register (UNSUPPORTED_VERSION), as in Kafka. A registration without
// ranges (a Keel before features) is not checked.
func TestFeaturesAgainstBrokerRanges(t *testing.T) {
	cfg := DefaultControllerConfig()
	cfg.NodeID = 1
	c := newCluster(t, cfg, 0)
	c.commit([]Record{&FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: 20}})
	register := func(id int32, ranges map[string]FeatureRange) int16 {
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID, req.IncarnationID = id, [16]byte{byte(id)}
		for name, r := range ranges {
			f := kmsg.NewBrokerRegistrationRequestFeature()
			f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, r.Min, r.Max
			req.Features = append(req.Features, f)
		}
		recs, resp := c.cc.RegisterBroker(c.now, req)
		c.commit(recs)
		return resp.ErrorCode
	}
	if code := register(1, map[string]FeatureRange{MetadataVersionFeature: {7, 21}}); code != 0 {
		t.Fatalf("register 1: %v", kerr.ErrorForCode(code))
	}
	if code := register(2, nil); code != 0 {
		t.Fatalf("register 2: %v", kerr.ErrorForCode(code))
	}
	if code := register(3, map[string]FeatureRange{MetadataVersionFeature: {7, 19}}); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("register 3, supporting up to 19 of finalized 20: %v", kerr.ErrorForCode(code))
	}
	if code := register(4, map[string]FeatureRange{KRaftVersionFeature: {0, 1}}); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("register 4, without metadata.version: %v", kerr.ErrorForCode(code))
	}
	if b, ok := c.img.Broker(1); !ok || b.Features[MetadataVersionFeature] != (FeatureRange{7, 21}) {
		t.Fatalf("broker 1's registration: %+v", b)
	}
	_, resp := c.cc.UpdateFeatures(updateReq(1, false, update(MetadataVersionFeature, 22, upgradeTypeUpgrade)))
	if resp.ErrorCode != kerr.InvalidUpdateVersion.Code || !strings.Contains(*resp.ErrorMessage, "Invalid update version 22 for feature metadata.version. Broker 1 only supports versions 7-21") {
		t.Fatalf("upgrade past broker 1: %+v", resp)
	}
	recs, resp := c.cc.UpdateFeatures(updateReq(1, false, update(MetadataVersionFeature, 21, upgradeTypeUpgrade)))
	if resp.ErrorCode != 0 || len(recs) != 1 {
		t.Fatalf("upgrade to 21: %+v", resp)
	}
	// A snapshot keeps the ranges.
	img, _, err := EmptyImage().Apply(0, c.img.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := img.Broker(1); !ok || b.Features[MetadataVersionFeature] != (FeatureRange{7, 21}) {
		t.Fatalf("broker 1 from a snapshot: %+v", b)
	}
}
