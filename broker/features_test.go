package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// ApiVersions reports the features as Kafka does: supported ranges from
// v3, leaving out those with a 0 minimum below v4 (KAFKA-17492); the
// finalized levels with the image's offset as their epoch. UpdateFeatures
// is forwarded to the controller and the next ApiVersions shows its level.
func TestApiVersionsFeatures(t *testing.T) {
	c := newTestCluster(t)
	c.meta.commit(&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: 20})
	rc := c.dialRaw(t)
	apiVersions := func(version int16) *kmsg.ApiVersionsResponse {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = version, "keel-test", "1"
		resp := roundTrip[*kmsg.ApiVersionsResponse](rc, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: %v", version, kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	supported := func(r *kmsg.ApiVersionsResponse) map[string][2]int16 {
		out := map[string][2]int16{}
		for _, f := range r.SupportedFeatures {
			out[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
		}
		return out
	}
	mv := [2]int16{metadata.MinimumMetadataVersion, metadata.LatestMetadataVersion}
	if r := apiVersions(2); len(r.SupportedFeatures)+len(r.FinalizedFeatures) != 0 {
		t.Errorf("v2 has features: %+v", r)
	}
	r3 := apiVersions(3)
	if got := supported(r3); len(got) != 1 || got[metadata.MetadataVersionFeature] != mv {
		t.Errorf("v3 supported features %v, want only metadata.version %v", got, mv)
	}
	r4 := apiVersions(4)
	if got := supported(r4); len(got) != 5 || got[metadata.MetadataVersionFeature] != mv || got[metadata.KRaftVersionFeature] != [2]int16{0, 1} ||
		got[metadata.GroupVersionFeature] != [2]int16{0, 1} || got[metadata.EligibleLeaderReplicasFeature] != [2]int16{0, 1} ||
		got[metadata.TransactionVersionFeature] != [2]int16{0, 2} {
		t.Errorf("v4 supported features %v", got)
	}
	epoch := c.meta.Image().Offset()
	for _, r := range []*kmsg.ApiVersionsResponse{r3, r4} {
		if len(r.FinalizedFeatures) != 1 || r.FinalizedFeatures[0].Name != metadata.MetadataVersionFeature ||
			r.FinalizedFeatures[0].MinVersionLevel != 20 || r.FinalizedFeatures[0].MaxVersionLevel != 20 || r.FinalizedFeaturesEpoch != epoch {
			t.Errorf("finalized %+v epoch %d, want metadata.version 20 at epoch %d", r.FinalizedFeatures, r.FinalizedFeaturesEpoch, epoch)
		}
	}

	uf := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = metadata.MetadataVersionFeature, 21, 1
	uf.Version, uf.FeatureUpdates = 1, append(uf.FeatureUpdates, u)
	if resp := roundTrip[*kmsg.UpdateFeaturesResponse](rc, uf); resp.ErrorCode != 0 || len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("update features: %+v", resp)
	}
	r4 = apiVersions(4)
	if len(r4.FinalizedFeatures) != 1 || r4.FinalizedFeatures[0].MaxVersionLevel != 21 || r4.FinalizedFeaturesEpoch <= epoch {
		t.Errorf("after the upgrade: finalized %+v epoch %d (was %d)", r4.FinalizedFeatures, r4.FinalizedFeaturesEpoch, epoch)
	}
	u.MaxVersionLevel, u.UpgradeType = 20, 2
	uf.FeatureUpdates[0], uf.Version = u, 2
	if resp := roundTrip[*kmsg.UpdateFeaturesResponse](rc, uf); resp.ErrorCode != kerr.InvalidUpdateVersion.Code || len(resp.Results) != 0 {
		t.Fatalf("downgrade: %+v", resp)
	}
}

// The consumer group protocol (KIP-848) follows group.version: at 0 its
// APIs are not advertised and a heartbeat that comes anyway gets
// UNSUPPORTED_VERSION with the reason; at 1 both are advertised.
func TestConsumerGroupHeartbeatDisabled(t *testing.T) {
	c := newTestCluster(t)
	c.meta.commit(&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: metadata.LatestMetadataVersion})
	rc := c.dialRaw(t)
	advertised := func() (keys []int16) {
		resp := roundTrip[*kmsg.ApiVersionsResponse](rc, kmsg.NewPtrApiVersionsRequest())
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 68 || k.ApiKey == 69 {
				keys = append(keys, k.ApiKey)
			}
		}
		return keys
	}
	if keys := advertised(); len(keys) != 0 {
		t.Fatalf("advertised %v at group.version 0", keys)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 1, "g", "m", 1000, []string{"t"}
	resp := roundTrip[*kmsg.ConsumerGroupHeartbeatResponse](rc, hb)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || resp.ErrorMessage == nil || resp.MemberEpoch != -1 {
		t.Fatalf("heartbeat at group.version 0: %+v", resp)
	}
	c.meta.commit(&metadata.FeatureLevelRecord{Name: metadata.GroupVersionFeature, FeatureLevel: 1})
	if keys := advertised(); len(keys) != 2 {
		t.Fatalf("advertised %v at group.version 1", keys)
	}
}
