package metadata

// Feature flags (KIP-584, KIP-778): cluster-wide levels that the active
// controller finalizes in the metadata log (FeatureLevelRecord) and every
// node reports in ApiVersions, as kafka-features.sh reads them.
//
// Keel knows two features:
//   - metadata.version, Kafka's MetadataVersion feature levels from
//     3.3-IV3 (7, Kafka's minimum) to 4.1-IV1 (27, Kafka 4.1's, whose
//     API versions Keel serves). The first active
//     controller of a new cluster finalizes the level `keel format
//     --release-version` chose, else the latest; a cluster whose log
//     predates this feature gets the latest when a controller next becomes
//     active. Keel's metadata records are its own, so no level changes
//     what Keel writes: the level is the compatibility statement Kafka's
//     tools and UIs read (kafka-features.sh, the Kafka release they show),
//     and an upgrade only moves it forward, as Kafka's does.
//   - kraft.version: 1 on a KIP-853 quorum (formatted with --standalone or
//     --initial-controllers, run with controller.quorum.bootstrap.servers),
//     0 on static voters. It is set by how the quorum was formatted, not
//     by UpdateFeatures, and is not a FeatureLevelRecord (in Kafka it lives
//     in the Raft log's control records).
//
//   - eligible.leader.replicas.version: 1 turns on eligible leader replicas
//     (KIP-966 part 1; see EligibleLeaderReplicasFeature), as on a new
//     Kafka 4.1 cluster.
//
//   - transaction.version: 2 turns on KIP-890 part 2 for clients that
//     speak it (kgo as of franz-go 1.22, the Java client 4.0+): every
//     EndTxn bumps the producer's epoch, and a partition joins a
//     transaction on its first batch (Produce v12+, TxnOffsetCommit v5+)
//     instead of by AddPartitionsToTxn. Clients read the finalized level from
//     ApiVersions; at 0 or 1 they keep transaction version 1. A new
//     cluster at 4.0-IV2 or later starts at 2, as a new Kafka 4 cluster
//     does. Level 1 (flexible __transaction_state records) changes nothing
//     Keel writes.
//
// Features Keel does not implement (share.version, streams.version) are
// not advertised: a supported range whose maximum is 0 is left out, as
// Kafka leaves it out.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Feature names.
const (
	MetadataVersionFeature = "metadata.version"
	KRaftVersionFeature    = "kraft.version"
	// GroupVersionFeature at 1 enables the consumer group protocol of
	// KIP-848 (ConsumerGroupHeartbeat); it needs metadata.version
	// 4.0-IV0 (KIP-1022's dependency).
	GroupVersionFeature = "group.version"
	// EligibleLeaderReplicasFeature at 1 turns on eligible leader replicas
	// (KIP-966 part 1): when the ISR falls below min.insync.replicas the
	// replicas leaving it stay eligible to lead, the ISR may become empty,
	// and a broker back from an unclean shutdown leaves every ISR and ELR.
	// It needs metadata.version 4.0-IV1; a new cluster at 4.1-IV0 or later
	// starts with it, as a new Kafka 4.1 cluster does. Lowering it to 0
	// clears every partition's ELR (an empty ISR takes its ELR back).
	EligibleLeaderReplicasFeature = "eligible.leader.replicas.version"
	// TransactionVersionFeature at 2 is KIP-890 part 2's transactions
	// (see above). It depends on no metadata.version; a new cluster
	// starts at 2 from TransactionVersionDefaultMetadataVersion.
	TransactionVersionFeature = "transaction.version"
)

// TransactionVersionDefaultMetadataVersion is the metadata.version from
// which a new cluster starts at transaction.version 2 (4.0-IV2, Kafka's
// TransactionVersion bootstrap version).
const TransactionVersionDefaultMetadataVersion int16 = 24

// FeatureMinMetadataVersion is the metadata.version level 1 of each
// feature that depends on it needs (Kafka's FeatureVersion dependencies).
var FeatureMinMetadataVersion = map[string]int16{
	GroupVersionFeature:           GroupVersionMinMetadataVersion,
	EligibleLeaderReplicasFeature: ELRMinMetadataVersion,
}

// ELRMinMetadataVersion is the metadata.version eligible leader replicas
// need (4.0-IV1); ELRDefaultMetadataVersion the first at which a new
// cluster starts with them (4.1-IV0).
const (
	ELRMinMetadataVersion     int16 = 23
	ELRDefaultMetadataVersion int16 = 26
)

// ELREnabled says whether the image has eligible leader replicas on.
func ELREnabled(img *Image) bool {
	l, _ := img.FeatureLevel(EligibleLeaderReplicasFeature)
	return l >= 1
}

// GroupVersionMinMetadataVersion is the metadata.version group.version 1
// needs (4.0-IV0).
const GroupVersionMinMetadataVersion int16 = 22

// MetadataVersion levels Keel supports.
const (
	MinimumMetadataVersion int16 = 7  // 3.3-IV3, Kafka's MINIMUM_VERSION
	LatestMetadataVersion  int16 = 27 // 4.1-IV1: the release whose protocol Keel serves
)

// metadataVersionNames are Kafka's MetadataVersion names by feature level
// (index 0 unused), up to the last release Keel knows of, so that a level
// Keel does not support is still named in its refusal.
var metadataVersionNames = []string{"",
	"3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", // 1–7
	"3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", // 8–14
	"3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0", // 15–21
	"4.0-IV0", "4.0-IV1", "4.0-IV2", "4.0-IV3", "4.1-IV0", "4.1-IV1", "4.2-IV0", "4.2-IV1", // 22–29
}

// MetadataVersionName is a metadata.version level as Kafka names it
// ("3.7-IV4"), or the number for a level it has no name for.
func MetadataVersionName(level int16) string {
	if level > 0 && int(level) < len(metadataVersionNames) {
		return metadataVersionNames[level]
	}
	return strconv.Itoa(int(level))
}

// ParseMetadataVersion reads a metadata.version as kafka-features.sh and
// kafka-storage.sh take it: a release ("3.7", its latest level), a release
// and its internal version ("3.7-IV2"), or a feature level ("17").
func ParseMetadataVersion(s string) (int16, error) {
	if n, err := strconv.ParseInt(s, 10, 16); err == nil && n > 0 && int(n) < len(metadataVersionNames) {
		return int16(n), nil
	}
	level := int16(-1)
	for i, name := range metadataVersionNames {
		if i == 0 {
			continue
		}
		if name == s || (!strings.Contains(s, "-") && strings.HasPrefix(name, s+"-")) {
			level = int16(i)
		}
	}
	if level < 0 {
		return 0, fmt.Errorf("unknown metadata.version %q (Keel supports %s to %s)", s,
			MetadataVersionName(MinimumMetadataVersion), MetadataVersionName(LatestMetadataVersion))
	}
	return level, nil
}

// FeatureRange is the levels of a feature a node supports.
type FeatureRange struct {
	Min int16 `json:"min"`
	Max int16 `json:"max"`
}

// SupportedFeatures are the feature ranges this build of Keel supports:
// what every node advertises in ApiVersions and registers with the
// controller.
func SupportedFeatures() map[string]FeatureRange {
	return map[string]FeatureRange{
		MetadataVersionFeature: {MinimumMetadataVersion, LatestMetadataVersion},
		KRaftVersionFeature:    {0, 1},
		GroupVersionFeature:    {0, 1},

		EligibleLeaderReplicasFeature: {0, 1},
		TransactionVersionFeature:     {0, 2},
	}
}

// Features returns the finalized feature levels (a copy; levels above 0
// only, as Kafka reports them).
func (img *Image) Features() map[string]int16 { return maps.Clone(img.features) }

// BootstrapFeatures are the records a controller that becomes active
// commits when the image it takes over has no metadata.version (a new
// cluster, or a log written before Keel finalized it): the level in
// bootstrap, the records it was formatted with and commits first, if any
// sets it, else the latest.
//
// With it, the release's default level of each optional feature the
// bootstrap does not set (ReleaseFeatures): a new cluster serves the
// consumer group protocol, as a new Kafka 4 cluster does, and has eligible
// leader replicas from 4.1. A cluster that had a metadata.version before
// keeps its levels (kafka-features.sh upgrade changes them).
func BootstrapFeatures(img *Image, bootstrap []Record) []Record {
	if _, ok := img.FeatureLevel(MetadataVersionFeature); ok {
		return nil
	}
	mv, set := int16(-1), map[string]bool{}
	for _, r := range bootstrap {
		if f, ok := r.(*FeatureLevelRecord); ok {
			if f.Name == MetadataVersionFeature {
				mv = f.FeatureLevel
			}
			set[f.Name] = true
		}
	}
	var out []Record
	if mv < 0 {
		mv = LatestMetadataVersion
		out = append(out, &FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: mv})
	}
	defaults := ReleaseFeatures(mv)
	for _, name := range OptionalFeatures {
		if _, ok := img.FeatureLevel(name); !ok && !set[name] && defaults[name] > 0 {
			out = append(out, &FeatureLevelRecord{Name: name, FeatureLevel: defaults[name]})
		}
	}
	return out
}

// OptionalFeatures are the features besides metadata.version and
// kraft.version that a release turns on by default, in the order their
// records are written.
var OptionalFeatures = []string{GroupVersionFeature, EligibleLeaderReplicasFeature, TransactionVersionFeature}

// ReleaseFeatures are the optional features' default levels at a
// metadata.version, as a new cluster gets them and kafka-storage.sh and
// kafka-features.sh --release-version set them: group.version 1 from 4.0,
// transaction.version 2 from 4.0-IV2, eligible.leader.replicas.version 1
// from 4.1.
func ReleaseFeatures(mv int16) map[string]int16 {
	out := map[string]int16{GroupVersionFeature: 0, EligibleLeaderReplicasFeature: 0, TransactionVersionFeature: 0}
	if mv >= GroupVersionMinMetadataVersion {
		out[GroupVersionFeature] = 1
	}
	if mv >= TransactionVersionDefaultMetadataVersion {
		out[TransactionVersionFeature] = 2
	}
	if mv >= ELRDefaultMetadataVersion {
		out[EligibleLeaderReplicasFeature] = 1
	}
	return out
}

// featureSupportError is why broker b cannot run with feature at level,
// or "" when it can. A registration that lists no features (one from a
// Keel before features) is not checked.
func featureSupportError(b *BrokerRegistration, feature string, level int16) string {
	if len(b.Features) == 0 {
		return ""
	}
	r, ok := b.Features[feature]
	if !ok {
		r = FeatureRange{} // an unlisted feature: level 0 only
	}
	if level < r.Min || level > r.Max {
		return fmt.Sprintf("Broker %d only supports versions %d-%d", b.ID, r.Min, r.Max)
	}
	return ""
}

// Upgrade types of UpdateFeatures v1+ (v0's AllowDowngrade is safe
// downgrade).
const (
	upgradeTypeUpgrade         int8 = 1
	upgradeTypeSafeDowngrade   int8 = 2
	upgradeTypeUnsafeDowngrade int8 = 3
)

// UpdateFeatures handles UpdateFeatures (API 57, KIP-584; v1 ValidateOnly
// and upgrade types, KIP-778; v2 drops the per-feature results), as Kafka's
// FeatureControlManager does; this controller's own ranges are
// SupportedFeatures and its quorum's kraft.version cfg.KRaftVersion:
//
//   - A level must be in the local controller's range and in every
//     registered broker's; a feature this controller does not know can
//     only be set to 0 (it is 0).
//   - Lowering a level needs a downgrade upgrade type (v0:
//     AllowDowngrade); a downgrade type with a higher level is refused.
//     metadata.version never goes down: Kafka refuses downgrades that
//     might lose metadata, and Keel cannot tell which would not.
//   - kraft.version is what the quorum was formatted as; asking for
//     another level is refused.
//
// The update is all or nothing: the first error fails every feature,
// reported at the top level (and, below v2, for each feature), with
// nothing committed. ValidateOnly checks without committing.
func (c *ClusterControl) UpdateFeatures(req *kmsg.UpdateFeaturesRequest) ([]Record, *kmsg.UpdateFeaturesResponse) {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	var recs []Record
	seen := map[string]bool{}
	fail := func(code int16, msg string) ([]Record, *kmsg.UpdateFeaturesResponse) {
		resp.ErrorCode = code
		resp.ErrorMessage = kmsg.StringPtr(msg)
		SetFeatureResults(resp, req.FeatureUpdates)
		return nil, resp
	}
	for _, u := range req.FeatureUpdates {
		if seen[u.Feature] {
			return fail(kerr.InvalidRequest.Code, "Feature "+u.Feature+" appears more than once in the request.")
		}
		seen[u.Feature] = true
		upgradeType := u.UpgradeType
		if req.Version == 0 {
			upgradeType = upgradeTypeUpgrade
			if u.AllowDowngrade {
				upgradeType = upgradeTypeSafeDowngrade
			}
		}
		rec, msg := c.updateFeature(u.Feature, u.MaxVersionLevel, upgradeType, proposedMetadataVersion(req))
		if msg != "" {
			return fail(kerr.InvalidUpdateVersion.Code,
				"The update failed for all features since the following feature had an error: "+msg)
		}
		if rec != nil {
			recs = append(recs, rec)
			if rec.Name == EligibleLeaderReplicasFeature && rec.FeatureLevel == 0 {
				recs = append(recs, c.clearELRs(c.img)...)
			}
		}
	}
	SetFeatureResults(resp, req.FeatureUpdates)
	if req.ValidateOnly {
		return nil, resp
	}
	return recs, resp
}

// proposedMetadataVersion is the metadata.version an UpdateFeatures asks
// for, -1 if none: features that depend on it are checked against it.
func proposedMetadataVersion(req *kmsg.UpdateFeaturesRequest) int16 {
	for _, u := range req.FeatureUpdates {
		if u.Feature == MetadataVersionFeature {
			return u.MaxVersionLevel
		}
	}
	return -1
}

// SetFeatureResults gives a response below v2 one result per update, each
// with the top-level error (the update is all or nothing), as Kafka
// answers those versions; v2 has none.
func SetFeatureResults(resp *kmsg.UpdateFeaturesResponse, updates []kmsg.UpdateFeaturesRequestFeatureUpdate) {
	resp.Results = nil
	if resp.Version >= 2 {
		return
	}
	for _, u := range updates {
		r := kmsg.NewUpdateFeaturesResponseResult()
		r.Feature, r.ErrorCode = u.Feature, resp.ErrorCode
		if resp.ErrorCode != 0 {
			r.ErrorMessage = resp.ErrorMessage
		}
		resp.Results = append(resp.Results, r)
	}
}

// updateFeature decides one feature update: the record to commit (nil if
// the level does not change), or why it is refused.
func (c *ClusterControl) updateFeature(name string, level int16, upgradeType int8, proposedMV int16) (*FeatureLevelRecord, string) {
	invalid := func(why string) (*FeatureLevelRecord, string) {
		return nil, fmt.Sprintf("Invalid update version %d for feature %s. %s", level, name, why)
	}
	if level < 0 {
		return invalid("A feature version cannot be less than 0.")
	}
	current, _ := c.img.FeatureLevel(name)
	if name == KRaftVersionFeature {
		current = c.cfg.KRaftVersion
	}
	r, known := SupportedFeatures()[name]
	switch {
	case !known && level == 0:
		return nil, ""
	case !known:
		return invalid(fmt.Sprintf("Local controller %d does not support this feature.", c.cfg.NodeID))
	case level < r.Min || level > r.Max:
		return invalid(fmt.Sprintf("Local controller %d only supports versions %d-%d", c.cfg.NodeID, r.Min, r.Max))
	}
	if upgradeType < upgradeTypeUpgrade || upgradeType > upgradeTypeUnsafeDowngrade {
		return invalid(fmt.Sprintf("Unknown upgrade type %d.", upgradeType))
	}
	switch {
	case level < current && upgradeType == upgradeTypeUpgrade:
		return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case level > current && upgradeType != upgradeTypeUpgrade:
		return invalid("Can't downgrade to a newer version.")
	case level == current:
		return nil, ""
	}
	for _, b := range slices.SortedFunc(maps.Values(c.img.brokers), func(a, b *BrokerRegistration) int { return int(a.ID - b.ID) }) {
		if msg := featureSupportError(b, name, level); msg != "" {
			return invalid(msg)
		}
	}
	switch name {
	case GroupVersionFeature, EligibleLeaderReplicasFeature:
		mv, _ := c.img.FeatureLevel(MetadataVersionFeature)
		if proposedMV >= 0 {
			mv = proposedMV
		}
		if need := FeatureMinMetadataVersion[name]; level >= 1 && mv < need {
			return invalid(fmt.Sprintf("Feature %s level %d requires metadata.version %s (%d) or higher; it is %d.",
				name, level, MetadataVersionName(need), need, mv))
		}
	case KRaftVersionFeature:
		return invalid("Keel sets kraft.version when the quorum is formatted (1 with keel format --standalone or --initial-controllers, 0 with controller.quorum.voters); it cannot be changed.")
	case MetadataVersionFeature:
		if level < current {
			why := "Refusing to perform the requested downgrade because it might delete metadata information."
			if upgradeType == upgradeTypeUnsafeDowngrade {
				why = "Unsafe metadata downgrade is not supported in this version."
			}
			return nil, fmt.Sprintf("Invalid metadata.version %d. %s", level, why)
		}
	}
	return &FeatureLevelRecord{Name: name, FeatureLevel: level}, ""
}
