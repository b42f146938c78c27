package metadata

import "sort"

// SnapshotRecords returns records that rebuild this image when applied to
// EmptyImage: the content of a metadata snapshot, as KRaft writes them. The
// order is deterministic (brokers, topics with their partitions, configs,
// client quotas, SCRAM credentials, ACLs in the order of ACLs, producer ids,
// features), so equal images give byte-equal snapshots.
func (img *Image) SnapshotRecords() []Record {
	var out []Record
	for _, b := range img.Brokers() {
		out = append(out, &RegisterBrokerRecord{
			BrokerID: b.ID, IncarnationID: b.IncarnationID, BrokerEpoch: b.Epoch,
			Endpoints: b.Endpoints, Rack: b.Rack, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
			Features: b.Features, LogDirs: b.LogDirs,
		})
	}
	for _, t := range img.Topics() {
		out = append(out, &TopicRecord{Name: t.Name, TopicID: t.ID})
		for i, p := range t.Partitions {
			out = append(out, &PartitionRecord{
				PartitionID: int32(i), TopicID: t.ID, Replicas: p.Replicas, ISR: p.ISR,
				RemovingReplicas: p.RemovingReplicas, AddingReplicas: p.AddingReplicas,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				LeaderRecoveryState: p.LeaderRecoveryState, ELR: p.ELR, LastKnownELR: p.LastKnownELR,
				Directories: p.Directories,
			})
		}
	}
	resources := make([]ConfigResource, 0, len(img.configs))
	for r := range img.configs {
		resources = append(resources, r)
	}
	sort.Slice(resources, func(i, j int) bool {
		a, b := resources[i], resources[j]
		return a.Type < b.Type || (a.Type == b.Type && a.Name < b.Name)
	})
	for _, r := range resources {
		names := make([]string, 0, len(img.configs[r]))
		for k := range img.configs[r] {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			v := img.configs[r][k]
			out = append(out, &ConfigRecord{ResourceType: r.Type, ResourceName: r.Name, Name: k, Value: &v})
		}
	}
	for _, e := range img.ClientQuotaEntities() {
		keys := make([]string, 0, len(img.quotas[e]))
		for k := range img.quotas[e] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, &ClientQuotaRecord{Entity: e.Parts(), Key: k, Value: img.quotas[e][k]})
		}
	}
	for _, k := range img.ScramKeys() {
		c := img.scram[k]
		out = append(out, &UserScramCredentialRecord{
			Name: k.User, Mechanism: k.Mechanism, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations,
		})
	}
	for _, a := range img.ACLs() {
		out = append(out, a.Record())
	}
	for _, t := range img.DelegationTokens() {
		out = append(out, t.record())
	}
	if img.nextProducerID > 0 {
		out = append(out, &ProducerIdsRecord{BrokerID: -1, BrokerEpoch: -1, NextProducerID: img.nextProducerID})
	}
	features := make([]string, 0, len(img.features))
	for f := range img.features {
		features = append(features, f)
	}
	sort.Strings(features)
	for _, f := range features {
		out = append(out, &FeatureLevelRecord{Name: f, FeatureLevel: img.features[f]})
	}
	return out
}
