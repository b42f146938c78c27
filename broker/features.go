package broker

// Feature flags in ApiVersions and UpdateFeatures (KIP-584, KIP-778): what
// kafka-features.sh describe, upgrade and downgrade use. The levels are
// the metadata image's (metadata/features.go), answered by brokers and
// controllers alike, as Kafka's both do.

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// setApiVersionsFeatures fills an ApiVersions v3+ response's features as
// Kafka does:
//   - SupportedFeatures: this node's ranges (metadata.SupportedFeatures).
//     Below v4 a feature whose minimum is 0 is left out: older Java
//     clients fail to read a 0 minimum (KAFKA-17011, KAFKA-17492).
//   - FinalizedFeatures: the image's levels above 0, each as its own
//     minimum and maximum, and kraft.version when above 0.
//   - FinalizedFeaturesEpoch: the metadata offset of the image they come
//     from (-1 before any), which only grows.
func setApiVersionsFeatures(resp *kmsg.ApiVersionsResponse, version int16, img *metadata.Image, kraftVersion int16) {
	if version < 3 {
		return
	}
	supported := metadata.SupportedFeatures()
	for _, name := range slices.Sorted(maps.Keys(supported)) {
		r := supported[name]
		if r.Max == 0 || (r.Min == 0 && version < 4) {
			continue
		}
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = name, r.Min, r.Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	}
	finalized := img.Features()
	if kraftVersion > 0 {
		finalized[metadata.KRaftVersionFeature] = kraftVersion
	}
	for _, name := range slices.Sorted(maps.Keys(finalized)) {
		f := kmsg.NewApiVersionsResponseFinalizedFeature()
		f.Name, f.MinVersionLevel, f.MaxVersionLevel = name, finalized[name], finalized[name]
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, f)
	}
	resp.FinalizedFeaturesEpoch = img.Offset()
}

// registrationFeatures are the ranges a broker registers with the
// controller, which refuses it if it cannot run at a finalized level and
// checks them before an upgrade.
func registrationFeatures() []kmsg.BrokerRegistrationRequestFeature {
	supported := metadata.SupportedFeatures()
	var out []kmsg.BrokerRegistrationRequestFeature
	for _, name := range slices.Sorted(maps.Keys(supported)) {
		f := kmsg.NewBrokerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, supported[name].Min, supported[name].Max
		out = append(out, f)
	}
	return out
}

// UpdateFeatures (key 57), v0–v2: forwarded to the active controller
// (metadata.ClusterControl.UpdateFeatures), as a KRaft broker forwards it
// for kafka-features.sh upgrade and downgrade. Needs ALTER on the cluster.
// Forwarding re-encodes the request at the newest version, which has no
// v0 AllowDowngrade and answers without per-feature results: v0's flag
// travels as its upgrade type (safe downgrade), and a v0–v1 client gets
// its results back here.
func (b *Broker) handleUpdateFeatures(ctx context.Context, m *kmsg.UpdateFeaturesRequest) network.Result {
	version, updates := m.Version, slices.Clone(m.FeatureUpdates)
	if version == 0 {
		for i := range m.FeatureUpdates {
			m.FeatureUpdates[i].UpgradeType = 1
			if m.FeatureUpdates[i].AllowDowngrade {
				m.FeatureUpdates[i].UpgradeType = 2
			}
		}
	}
	errorResponse := func(code int16, msg string) kmsg.Response {
		resp := m.ResponseKind().(*kmsg.UpdateFeaturesResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	timeout := time.Duration(m.TimeoutMillis) * time.Millisecond
	return b.forwardThen(ctx, m, timeout, errorResponse, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.UpdateFeaturesResponse)
		resp.Version = version
		metadata.SetFeatureResults(resp, updates)
		return resp
	})
}
