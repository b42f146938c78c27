package metadata

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
)

// BrokerRegistration is a registered broker as the image knows it.
type BrokerRegistration struct {
	ID                   int32
	Epoch                int64
	IncarnationID        Uuid
	Endpoints            []Endpoint
	Rack                 string
	Fenced               bool
	InControlledShutdown bool
	// Features are the feature ranges the broker registered with
	// (none from a Keel before features).
	Features map[string]FeatureRange
	// LogDirs are the directory ids of the broker's online log dirs,
	// sorted (KIP-858); none from a Keel before directory assignment.
	LogDirs []Uuid
}

// HasOnlineDir reports whether a replica the metadata places in log dir
// dir of this broker is online, Kafka's BrokerRegistration.hasOnlineDir:
// DirMigrating and DirUnassigned are (the broker has the replica in some
// dir of its own), DirLost is not, and any other id is when it is among
// the broker's online dirs, or when the broker reports none (a Keel before
// directory assignment).
func (b *BrokerRegistration) HasOnlineDir(dir Uuid) bool {
	switch {
	case dir == DirMigrating || dir == DirUnassigned:
		return true
	case dir == DirLost:
		return false
	}
	return len(b.LogDirs) == 0 || slices.Contains(b.LogDirs, dir)
}

// Endpoint returns the broker's endpoint for a listener name.
func (b *BrokerRegistration) Endpoint(listener string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Name == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Partition is one partition's replication state.
type Partition struct {
	Replicas            []int32
	ISR                 []int32
	RemovingReplicas    []int32
	AddingReplicas      []int32
	Leader              int32
	LeaderEpoch         int32
	PartitionEpoch      int32
	LeaderRecoveryState int8
	// ELR are the eligible leader replicas (KIP-966): replicas out of the
	// ISR that hold every record up to the high watermark, because they
	// left it while it was smaller than min.insync.replicas, when the high
	// watermark cannot move. One may lead when the ISR is empty.
	// LastKnownELR is the last leader of a partition whose ISR became
	// empty, while it has no leader (Kafka's last known leader): should
	// the ELR become empty too, that replica leads again when it comes
	// back, as before KIP-966, through an unclean election.
	ELR, LastKnownELR []int32
	// Directories are the log dir of each replica, in Replicas' order
	// (KIP-858), or nil when unknown (a partition from before directory
	// assignment): Directory is the way to read them.
	Directories []Uuid
}

// Directory is the log dir the metadata places broker's replica in:
// DirMigrating when the partition's dirs are unknown or the broker is not
// a replica.
func (p *Partition) Directory(broker int32) Uuid {
	if i := slices.Index(p.Replicas, broker); i >= 0 && len(p.Directories) == len(p.Replicas) {
		return p.Directories[i]
	}
	return DirMigrating
}

// Topic is one topic: its id, name and partitions (indexed by partition id,
// which Kafka keeps dense from 0).
type Topic struct {
	ID         Uuid
	Name       string
	Partitions []*Partition
}

// ConfigResource names what a config applies to.
type ConfigResource struct {
	Type int8
	Name string
}

// Image is the cluster metadata at one offset of the metadata log. It is
// immutable: Apply returns a new image sharing every part that did not
// change, so readers hold an *Image without locks while the next one is
// built.
type Image struct {
	offset         int64
	brokers        map[int32]*BrokerRegistration
	topicsByID     *topicMap[Uuid]   // shared with the images before and after
	topicsByName   *topicMap[string] // as long as neither changes a topic
	configs        map[ConfigResource]map[string]string
	nextProducerID int64
	features       map[string]int16
	quotas         map[QuotaEntity]map[string]float64
	scram          map[ScramKey]ScramCredential
	tokens         map[string]*DelegationToken // delegation tokens by id
	acls           *aclIndex                   // nil when there are none (acls.go)
}

// EmptyImage is the image before the first record.
func EmptyImage() *Image {
	return &Image{
		offset:       -1,
		brokers:      map[int32]*BrokerRegistration{},
		topicsByID:   &topicMap[Uuid]{},
		topicsByName: &topicMap[string]{},
		configs:      map[ConfigResource]map[string]string{},
		features:     map[string]int16{},
	}
}

// Offset is the metadata log offset of the last batch applied (-1 if none).
func (img *Image) Offset() int64 { return img.offset }

// Broker returns a registered broker.
func (img *Image) Broker(id int32) (*BrokerRegistration, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// Brokers returns every registered broker, by id.
func (img *Image) Brokers() []*BrokerRegistration {
	out := make([]*BrokerRegistration, 0, len(img.brokers))
	for _, b := range img.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Topic returns a topic by name.
func (img *Image) Topic(name string) (*Topic, bool) {
	return img.topicsByName.get(name)
}

// TopicByID returns a topic by id.
func (img *Image) TopicByID(id Uuid) (*Topic, bool) {
	return img.topicsByID.get(id)
}

// Topics returns every topic, by name.
func (img *Image) Topics() []*Topic {
	out := make([]*Topic, 0, img.topicsByName.len())
	for t := range img.topicsByName.all() {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// topicsUnordered iterates every topic in no particular order, for callers
// whose result does not depend on it (Topics sorts, which costs).
func (img *Image) topicsUnordered() iter.Seq[*Topic] { return img.topicsByName.all() }

// NumTopics is the number of topics.
func (img *Image) NumTopics() int { return img.topicsByID.len() }

// Configs returns the dynamic configs set on a resource (a copy).
func (img *Image) Configs(r ConfigResource) map[string]string {
	out := make(map[string]string, len(img.configs[r]))
	for k, v := range img.configs[r] {
		out[k] = v
	}
	return out
}

// ConfigResources lists every resource with dynamic configs, in no
// particular order.
func (img *Image) ConfigResources() []ConfigResource {
	return slices.Collect(maps.Keys(img.configs))
}

// ConfigsView is Configs without the copy, for a caller that only reads
// it while it holds the image (the request path's config lookups): the
// map must not be modified.
func (img *Image) ConfigsView(r ConfigResource) map[string]string { return img.configs[r] }

// Config returns one dynamic config of a resource, without copying the
// resource's map as Configs does.
func (img *Image) Config(r ConfigResource, name string) (string, bool) {
	v, ok := img.configs[r][name]
	return v, ok
}

// NextProducerID is the first producer id not yet handed out in a block.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// FeatureLevel returns a finalized feature's level.
func (img *Image) FeatureLevel(name string) (int16, bool) {
	l, ok := img.features[name]
	return l, ok
}

// PartitionKey names one partition.
type PartitionKey struct {
	TopicID   Uuid
	Partition int32
}

// Changes says what one Apply changed, for subscribers that act on
// differences (the replica manager becomes leader or follower from them).
type Changes struct {
	// Partitions created or changed, with their new state.
	Partitions map[PartitionKey]*Partition
	// DeletedTopics are topics removed, as they were before removal.
	DeletedTopics []*Topic
	// Brokers registered, fenced, unfenced or unregistered.
	Brokers []int32
	// Configs whose values changed.
	Configs []ConfigResource
	// ClientQuotas: a client quota was set or removed.
	ClientQuotas bool
}

// Empty reports whether nothing changed.
func (c *Changes) Empty() bool {
	return len(c.Partitions) == 0 && len(c.DeletedTopics) == 0 && len(c.Brokers) == 0 && len(c.Configs) == 0 && !c.ClientQuotas
}

// builder copies the parts of an image it changes, once each.
type builder struct {
	img           *Image
	brokersCopied bool
	configsCopied bool
	// byID and byName write the batch's copies of the topic maps (nil
	// until it changes a topic: mutTopics).
	byID         *topicMapWriter[Uuid]
	byName       *topicMapWriter[string]
	copiedTopics map[Uuid]bool
	acls         *aclBatch // the ACL index this batch copied (acls.go)
	changes      Changes
}

// Apply applies one batch of records committed at offset and returns the
// new image and what changed. The receiver is not modified. A record that
// contradicts the image (a partition of an unknown topic, say) fails the
// whole batch: nothing of it is applied, on every node alike, because Apply
// is deterministic.
func (img *Image) Apply(offset int64, records []Record) (*Image, Changes, error) {
	next := *img
	next.offset = offset
	b := &builder{img: &next, copiedTopics: map[Uuid]bool{}, changes: Changes{Partitions: map[PartitionKey]*Partition{}}}
	for _, r := range records {
		if err := b.replay(r); err != nil {
			return img, Changes{}, fmt.Errorf("apply metadata offset %d: %s: %w", offset, r.Type(), err)
		}
	}
	return b.img, b.changes, nil
}

func (b *builder) mutBrokers() map[int32]*BrokerRegistration {
	if !b.brokersCopied {
		b.img.brokers = cloneMap(b.img.brokers)
		b.brokersCopied = true
	}
	return b.img.brokers
}

func (b *builder) mutTopics() {
	if b.byID == nil {
		byID, byName := *b.img.topicsByID, *b.img.topicsByName
		b.img.topicsByID, b.img.topicsByName = &byID, &byName
		b.byID, b.byName = b.img.topicsByID.writer(), b.img.topicsByName.writer()
	}
}

// mutTopic returns a private copy of a topic for this batch to change.
func (b *builder) mutTopic(id Uuid) (*Topic, error) {
	t, ok := b.img.topicsByID.get(id)
	if !ok {
		return nil, fmt.Errorf("unknown topic id %s", id)
	}
	if b.copiedTopics[id] {
		return t, nil
	}
	b.mutTopics()
	c := &Topic{ID: t.ID, Name: t.Name, Partitions: slices.Clone(t.Partitions)}
	b.byID.set(id, c)
	b.byName.set(t.Name, c)
	b.copiedTopics[id] = true
	return c, nil
}

func (b *builder) mutBroker(id int32, epoch int64) (*BrokerRegistration, error) {
	old, ok := b.img.brokers[id]
	if !ok {
		return nil, fmt.Errorf("unknown broker %d", id)
	}
	if epoch != old.Epoch {
		return nil, fmt.Errorf("broker %d epoch %d, registered with %d", id, epoch, old.Epoch)
	}
	c := *old
	b.mutBrokers()[id] = &c
	b.changes.Brokers = append(b.changes.Brokers, id)
	return &c, nil
}

func (b *builder) replay(r Record) error {
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		b.mutBrokers()[r.BrokerID] = &BrokerRegistration{
			ID: r.BrokerID, Epoch: r.BrokerEpoch, IncarnationID: r.IncarnationID,
			Endpoints: slices.Clone(r.Endpoints), Rack: r.Rack, Fenced: r.Fenced,
			InControlledShutdown: r.InControlledShutdown, Features: maps.Clone(r.Features),
			LogDirs: sortedDirs(r.LogDirs),
		}
		b.changes.Brokers = append(b.changes.Brokers, r.BrokerID)
	case *UnregisterBrokerRecord:
		if _, err := b.mutBroker(r.BrokerID, r.BrokerEpoch); err != nil {
			return err
		}
		delete(b.img.brokers, r.BrokerID)
		b.changes.Brokers = append(b.changes.Brokers, r.BrokerID)
	case *FenceBrokerRecord:
		br, err := b.mutBroker(r.ID, r.Epoch)
		if err != nil {
			return err
		}
		br.Fenced = true
	case *UnfenceBrokerRecord:
		br, err := b.mutBroker(r.ID, r.Epoch)
		if err != nil {
			return err
		}
		br.Fenced = false
	case *BrokerRegistrationChangeRecord:
		br, err := b.mutBroker(r.BrokerID, r.BrokerEpoch)
		if err != nil {
			return err
		}
		if r.Fenced != 0 {
			br.Fenced = r.Fenced > 0
		}
		if r.InControlledShutdown != 0 {
			br.InControlledShutdown = r.InControlledShutdown > 0
		}
		if r.LogDirs != nil {
			br.LogDirs = sortedDirs(r.LogDirs)
		}
	case *TopicRecord:
		if _, dup := b.img.topicsByName.get(r.Name); dup {
			return fmt.Errorf("topic %q exists", r.Name)
		}
		if _, dup := b.img.topicsByID.get(r.TopicID); dup {
			return fmt.Errorf("topic id %s exists", r.TopicID)
		}
		b.mutTopics()
		t := &Topic{ID: r.TopicID, Name: r.Name}
		b.byID.set(r.TopicID, t)
		b.byName.set(r.Name, t)
		b.copiedTopics[r.TopicID] = true
	case *PartitionRecord:
		t, err := b.mutTopic(r.TopicID)
		if err != nil {
			return err
		}
		if r.PartitionID < 0 || int(r.PartitionID) > len(t.Partitions) {
			return fmt.Errorf("partition %d of %s with %d partitions", r.PartitionID, t.Name, len(t.Partitions))
		}
		p := &Partition{
			Replicas: slices.Clone(r.Replicas), ISR: slices.Clone(r.ISR),
			RemovingReplicas: slices.Clone(r.RemovingReplicas), AddingReplicas: slices.Clone(r.AddingReplicas),
			Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
			LeaderRecoveryState: r.LeaderRecoveryState,
			ELR:                 slices.Clone(r.ELR), LastKnownELR: slices.Clone(r.LastKnownELR),
		}
		if len(r.Directories) == len(r.Replicas) {
			p.Directories = slices.Clone(r.Directories)
		}
		if int(r.PartitionID) == len(t.Partitions) {
			t.Partitions = append(t.Partitions, p)
		} else {
			t.Partitions[r.PartitionID] = p
		}
		b.changes.Partitions[PartitionKey{r.TopicID, r.PartitionID}] = p
	case *PartitionChangeRecord:
		t, err := b.mutTopic(r.TopicID)
		if err != nil {
			return err
		}
		if r.PartitionID < 0 || int(r.PartitionID) >= len(t.Partitions) {
			return fmt.Errorf("partition %d of %s with %d partitions", r.PartitionID, t.Name, len(t.Partitions))
		}
		p := *t.Partitions[r.PartitionID]
		if r.ISR != nil {
			p.ISR = slices.Clone(r.ISR)
		}
		if r.Replicas != nil {
			p.Replicas = slices.Clone(r.Replicas)
			p.AddingReplicas = slices.Clone(r.AddingReplicas)
			p.RemovingReplicas = slices.Clone(r.RemovingReplicas)
			p.Directories = nil // unknown, unless the record sets them
		}
		if r.Directories != nil {
			if len(r.Directories) != len(p.Replicas) {
				return fmt.Errorf("partition %d of %s: %d directories for %d replicas", r.PartitionID, t.Name, len(r.Directories), len(p.Replicas))
			}
			p.Directories = slices.Clone(r.Directories)
		}
		if r.ELR != nil {
			p.ELR = slices.Clone(r.ELR)
		}
		if r.LastKnownELR != nil {
			p.LastKnownELR = slices.Clone(r.LastKnownELR)
		}
		if r.Leader != NoLeaderChange {
			p.Leader = r.Leader
			p.LeaderEpoch++
		}
		p.LeaderRecoveryState = r.LeaderRecoveryState
		p.PartitionEpoch++
		t.Partitions[r.PartitionID] = &p
		b.changes.Partitions[PartitionKey{r.TopicID, r.PartitionID}] = &p
	case *RemoveTopicRecord:
		t, ok := b.img.topicsByID.get(r.TopicID)
		if !ok {
			return fmt.Errorf("unknown topic id %s", r.TopicID)
		}
		b.mutTopics()
		b.byID.delete(r.TopicID)
		b.byName.delete(t.Name)
		for i := range t.Partitions {
			delete(b.changes.Partitions, PartitionKey{r.TopicID, int32(i)})
		}
		b.changes.DeletedTopics = append(b.changes.DeletedTopics, t)
		res := ConfigResource{Type: ConfigResourceTopic, Name: t.Name}
		if _, ok := b.img.configs[res]; ok {
			b.mutConfigs()
			delete(b.img.configs, res)
			b.changes.Configs = append(b.changes.Configs, res)
		}
	case *ConfigRecord:
		b.mutConfigs()
		res := ConfigResource{Type: r.ResourceType, Name: r.ResourceName}
		vals := cloneMap(b.img.configs[res])
		if vals == nil {
			vals = map[string]string{}
		}
		if r.Value == nil {
			delete(vals, r.Name)
		} else {
			vals[r.Name] = *r.Value
		}
		if len(vals) == 0 {
			delete(b.img.configs, res)
		} else {
			b.img.configs[res] = vals
		}
		b.changes.Configs = append(b.changes.Configs, res)
	case *ProducerIdsRecord:
		if r.NextProducerID < b.img.nextProducerID {
			return fmt.Errorf("producer id block moves back from %d to %d", b.img.nextProducerID, r.NextProducerID)
		}
		b.img.nextProducerID = r.NextProducerID
	case *FeatureLevelRecord:
		b.img.features = cloneMap(b.img.features)
		if r.FeatureLevel == 0 {
			delete(b.img.features, r.Name) // level 0: not finalized, as in Kafka
		} else {
			b.img.features[r.Name] = r.FeatureLevel
		}
	case *ClientQuotaRecord:
		return b.applyClientQuota(r)
	case *UserScramCredentialRecord:
		return b.applyScram(r, nil)
	case *RemoveUserScramCredentialRecord:
		return b.applyScram(nil, r)
	case *DelegationTokenRecord:
		return b.applyDelegationToken(r, nil)
	case *RemoveDelegationTokenRecord:
		return b.applyDelegationToken(nil, r)
	case *AccessControlEntryRecord:
		return b.applyACL(r)
	case *RemoveAccessControlEntryRecord:
		return b.removeACL(r)
	case *NoOpRecord:
	default:
		return fmt.Errorf("unhandled record type %T", r)
	}
	return nil
}

func (b *builder) mutConfigs() {
	if !b.configsCopied {
		b.img.configs = cloneMap(b.img.configs)
		b.configsCopied = true
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
