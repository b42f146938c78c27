package metadata

import (
	"math/rand/v2"
	"slices"
	"time"
)

// ControllerConfig is the controller's share of server.properties. Start
// from DefaultControllerConfig: the zero value of a boolean is not always
// Kafka's default.
type ControllerConfig struct {
	// NodeID is this controller's node.id, named in UpdateFeatures
	// refusals.
	NodeID int32
	// KRaftVersion is the quorum's kraft.version: 1 for a KIP-853 dynamic
	// quorum, 0 for static voters.
	KRaftVersion int16
	// ClusterID (cluster.id from meta.properties), when set, must match the
	// ClusterID of every BrokerRegistration: INCONSISTENT_CLUSTER_ID otherwise.
	ClusterID string
	// NumPartitions is num.partitions: a CreateTopics topic with
	// NumPartitions == -1 gets this many (KIP-464).
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor: a CreateTopics
	// topic with ReplicationFactor == -1 gets it (KIP-464).
	DefaultReplicationFactor int16
	// MinInsyncReplicas is the broker-level min.insync.replicas, reported as
	// the static default of the topic config.
	MinInsyncReplicas int32
	// UncleanLeaderElectionEnable is the broker-level
	// unclean.leader.election.enable; a topic config or a dynamic broker
	// config overrides it.
	UncleanLeaderElectionEnable bool
	// BrokerSessionTimeout is broker.session.timeout.ms: a broker silent for
	// longer is fenced.
	BrokerSessionTimeout time.Duration
	// BrokerHeartbeatInterval is broker.heartbeat.interval.ms. Brokers use
	// it; the controller only carries it so one struct serves both.
	BrokerHeartbeatInterval time.Duration
	// AutoLeaderRebalanceEnable is auto.leader.rebalance.enable: Tick moves
	// leadership back to preferred replicas.
	AutoLeaderRebalanceEnable bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds
	// (300 s): how often Tick looks for imbalanced partitions; 0 means on
	// every Tick.
	LeaderImbalanceCheckInterval time.Duration
	// MaxElectionsPerImbalance bounds the preferred elections of one Tick
	// (Kafka's maxElectionsPerImbalance, 1000); the rest follow on the next
	// Tick.
	MaxElectionsPerImbalance int
	// ProducerIDBlockSize is how many producer ids AllocateProducerIds hands
	// out at a time (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE, 1000).
	ProducerIDBlockSize int64
	// AutoCreateTopicsEnable is auto.create.topics.enable. The broker's
	// Metadata handler reads it; the controller only carries it.
	AutoCreateTopicsEnable bool
	// DeleteTopicEnable is delete.topic.enable: false makes DeleteTopics
	// answer TOPIC_DELETION_DISABLED.
	DeleteTopicEnable bool
	// MaxRecordsPerRequest bounds the records one request may produce
	// (Kafka's MAX_RECORDS_PER_USER_OP, 10000); a larger request fails with
	// POLICY_VIOLATION, so no single metadata batch can grow without bound.
	MaxRecordsPerRequest int
	// StaticBrokerConfigs are server.properties values of the broker
	// synonyms of topic configs (log.retention.ms, log.segment.bytes, ...).
	// They are the topic defaults that CreateTopics reports with source
	// STATIC_BROKER_CONFIG.
	StaticBrokerConfigs map[string]string
	// GroupConfigBounds are the broker's group.consumer.* settings that
	// group configs are checked against.
	GroupConfigBounds GroupConfigBounds
	// DelegationTokens are the delegation.token.* settings.
	DelegationTokens DelegationTokenConfig
}

// DefaultControllerConfig is Kafka's defaults.
func DefaultControllerConfig() ControllerConfig {
	return ControllerConfig{
		NumPartitions:                1,
		DefaultReplicationFactor:     1,
		MinInsyncReplicas:            1,
		UncleanLeaderElectionEnable:  false,
		BrokerSessionTimeout:         9 * time.Second,
		BrokerHeartbeatInterval:      2 * time.Second,
		AutoLeaderRebalanceEnable:    true,
		LeaderImbalanceCheckInterval: 300 * time.Second,
		GroupConfigBounds:            DefaultGroupConfigBounds(),
		MaxElectionsPerImbalance:     1000,
		ProducerIDBlockSize:          1000,
		AutoCreateTopicsEnable:       true,
		DeleteTopicEnable:            true,
		MaxRecordsPerRequest:         10000,
		DelegationTokens:             DefaultDelegationTokenConfig(),
	}
}

// normalize replaces unusable zero or negative numbers by Kafka's defaults.
func (cfg ControllerConfig) normalize() ControllerConfig {
	def := DefaultControllerConfig()
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = def.NumPartitions
	}
	if cfg.DefaultReplicationFactor <= 0 {
		cfg.DefaultReplicationFactor = def.DefaultReplicationFactor
	}
	if cfg.MinInsyncReplicas <= 0 {
		cfg.MinInsyncReplicas = def.MinInsyncReplicas
	}
	if cfg.BrokerSessionTimeout <= 0 {
		cfg.BrokerSessionTimeout = def.BrokerSessionTimeout
	}
	if cfg.BrokerHeartbeatInterval <= 0 {
		cfg.BrokerHeartbeatInterval = def.BrokerHeartbeatInterval
	}
	if cfg.LeaderImbalanceCheckInterval < 0 {
		cfg.LeaderImbalanceCheckInterval = def.LeaderImbalanceCheckInterval
	}
	if cfg.MaxElectionsPerImbalance <= 0 {
		cfg.MaxElectionsPerImbalance = def.MaxElectionsPerImbalance
	}
	if cfg.ProducerIDBlockSize <= 0 {
		cfg.ProducerIDBlockSize = def.ProducerIDBlockSize
	}
	if cfg.MaxRecordsPerRequest <= 0 {
		cfg.MaxRecordsPerRequest = def.MaxRecordsPerRequest
	}
	dt, defDT := &cfg.DelegationTokens, def.DelegationTokens
	if dt.MaxLifetime <= 0 {
		dt.MaxLifetime = defDT.MaxLifetime
	}
	if dt.ExpiryTime <= 0 {
		dt.ExpiryTime = defDT.ExpiryTime
	}
	if dt.ExpiryCheckInterval <= 0 {
		dt.ExpiryCheckInterval = defDT.ExpiryCheckInterval
	}
	return cfg
}

// ClusterControl is the active controller's decision logic (KRaft's
// QuorumController minus its event loop): it turns requests and the passage
// of time into metadata records and responses, from the current Image and a
// little state that is not in the log (broker heartbeat sessions).
//
// It does no I/O, reads no clock (time is a parameter) and draws randomness
// only from the *rand.Rand it was given, so the same image, inputs and seed
// give the same records on every run — which is what the data-driven tests
// in testdata/controller rely on.
//
// Concurrency: ClusterControl is NOT safe for concurrent use. One goroutine
// (the controller's event loop) owns it and makes every call. Calls never
// block.
//
// Commit contract: decisions are made from the image last passed to
// SetImage. The driver commits the records of a call as ONE metadata batch
// (they are meant to apply atomically), answers the request only once that
// batch is committed, and passes the resulting image to SetImage before the
// next call that may produce records. Two calls decided from the same image
// could otherwise both create a topic of the same name (the second batch then
// fails to apply) or both move the same leadership. Producer id blocks and
// broker epochs are additionally never handed out twice even if the driver
// breaks this contract. If a batch is not committed (the controller lost
// leadership), discard the ClusterControl: the next active controller builds
// a new one from its own image.
type ClusterControl struct {
	cfg ControllerConfig
	rng *rand.Rand
	img *Image
	// now is the latest time any call has passed in; it dates sessions of
	// brokers first seen in an image.
	now time.Time
	// sessions are the heartbeat sessions, by broker id: soft state that the
	// active controller keeps in memory only, as Kafka's
	// BrokerHeartbeatManager does.
	sessions map[int32]*brokerSession
	// lastImbalanceCheck is when Tick last looked for partitions whose
	// preferred replica is not the leader; imbalancePending asks the next
	// Tick to continue at once because the last one hit its bound.
	lastImbalanceCheck time.Time
	imbalancePending   bool
	// nextProducerID guards against handing out a block twice when the
	// driver runs ahead of commits.
	nextProducerID int64
	// index is derived from img on demand and dropped by SetImage.
	index *partitionIndex
	// lastTokenSweep is when Tick last removed expired delegation tokens.
	lastTokenSweep time.Time
}

// brokerSession is what the controller knows of a broker beyond its
// registration.
type brokerSession struct {
	// epoch is the broker epoch the session belongs to.
	epoch int64
	// lastContact is the time of the registration or last heartbeat, or
	// of a heartbeat's arrival (Contact).
	lastContact time.Time
	// lastHeartbeat is when the controller last handled a heartbeat of the
	// session (zero before the first): an arrival from before it is one
	// that handling has already accounted for.
	lastHeartbeat time.Time
	// metadataOffset is the CurrentMetadataOffset of the last heartbeat
	// (-1 before the first).
	metadataOffset int64
	// registeredAt is the image offset at which the registration was first
	// seen committed (-1 while it is not): a broker unfences once it has
	// replayed the log up to its own registration.
	registeredAt int64
	// shutdownOffset is the image offset at which the controlled-shutdown
	// records were seen committed; shutdownPending while they are not and
	// -1 when the broker is not shutting down.
	shutdownOffset int64
}

const shutdownPending = -2

// NewClusterControl returns the controller state machine for a controller
// that has just become active with image img at time now. Every broker of
// the image gets a fresh session starting at now, as Kafka's
// BrokerHeartbeatManager does on activation. rng drives replica placement and
// topic ids; pass a seeded one in tests.
func NewClusterControl(cfg ControllerConfig, img *Image, now time.Time, rng *rand.Rand) *ClusterControl {
	if img == nil {
		img = EmptyImage()
	}
	if rng == nil {
		rng = rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x6b65656c))
	}
	c := &ClusterControl{
		cfg:                cfg.normalize(),
		rng:                rng,
		now:                now,
		sessions:           map[int32]*brokerSession{},
		lastImbalanceCheck: now,
	}
	c.SetImage(img)
	return c
}

// Config returns the configuration in use (defaults filled in). Like every
// method, call it from the goroutine that owns the ClusterControl.
func (c *ClusterControl) Config() ControllerConfig { return c.cfg }

// Image returns the image decisions are made from (the owning goroutine
// only; the image itself is immutable and may then be shared).
func (c *ClusterControl) Image() *Image { return c.img }

// SetImage gives the controller the image after a committed batch. Call it
// after every batch the driver commits (ours or not), before the next call,
// from the goroutine that owns the ClusterControl.
func (c *ClusterControl) SetImage(img *Image) {
	if img == nil {
		return
	}
	c.img = img
	c.index = nil
	c.nextProducerID = max(c.nextProducerID, img.NextProducerID())
	for id := range c.sessions {
		if _, ok := img.Broker(id); !ok {
			delete(c.sessions, id) // unregistered
		}
	}
	for _, b := range img.Brokers() {
		s := c.sessions[b.ID]
		switch {
		case s == nil || s.epoch < b.Epoch:
			// A registration this controller did not make (it was made
			// before this controller became active): a fresh session.
			// An unfenced broker gets the grace of a full session to
			// reach the new controller; a fenced one (after a controlled
			// shutdown, or still catching up) has no session until it
			// heartbeats: as in Kafka 3.x, a fenced broker never holds
			// its node.id against a restarted process.
			lastContact := c.now
			if b.Fenced {
				lastContact = time.Time{}
			}
			c.sessions[b.ID] = &brokerSession{
				epoch: b.Epoch, lastContact: lastContact, metadataOffset: -1,
				registeredAt: img.Offset(), shutdownOffset: -1,
			}
			if b.InControlledShutdown && !b.Fenced {
				c.sessions[b.ID].shutdownOffset = img.Offset()
			}
		case s.epoch == b.Epoch:
			if s.registeredAt < 0 {
				s.registeredAt = img.Offset()
			}
			switch {
			case b.Fenced:
				// Fencing ends a controlled shutdown (Kafka's touch()).
				s.shutdownOffset = -1
			case b.InControlledShutdown:
				if s.shutdownOffset < 0 {
					s.shutdownOffset = img.Offset()
				}
			case s.shutdownOffset != shutdownPending:
				s.shutdownOffset = -1
			}
		}
		// s.epoch > b.Epoch: our registration is not committed yet.
	}
	for id, s := range c.sessions {
		if _, ok := img.Broker(id); !ok && s.registeredAt >= 0 {
			delete(c.sessions, id) // unregistered
		}
	}
}

// observe advances the controller's notion of the latest time.
func (c *ClusterControl) observe(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
}

// isActive is Kafka's ClusterControlManager.isActive: registered, unfenced
// and not in controlled shutdown. Only active brokers may lead, receive new
// replicas or join an ISR.
func isActive(img *Image, id int32) bool {
	b, ok := img.Broker(id)
	return ok && !b.Fenced && !b.InControlledShutdown
}

// activeBrokers are the brokers new replicas may be placed on, by id.
func activeBrokers(img *Image) []*BrokerRegistration {
	var out []*BrokerRegistration
	for _, b := range img.Brokers() {
		if !b.Fenced && !b.InControlledShutdown {
			out = append(out, b)
		}
	}
	return out
}

// partitionIndex is derived from one image: which partitions each broker is
// in the ISR of or leads, and which partitions are leaderless or led by a
// replica other than the preferred one. Kafka keeps the same as
// BrokersToIsrs and imbalancedPartitions.
type partitionIndex struct {
	inISR      map[int32][]PartitionKey // in the ISR or the leader
	inELR      map[int32][]PartitionKey // eligible leader replicas
	leaderOf   map[int32]int
	leaderless []PartitionKey
	imbalanced []PartitionKey
}

func (c *ClusterControl) partitions() *partitionIndex {
	if c.index == nil {
		c.index = buildPartitionIndex(c.img)
	}
	return c.index
}

// buildPartitionIndex walks every partition in topic-name order, so the
// lists are deterministic.
func buildPartitionIndex(img *Image) *partitionIndex {
	x := &partitionIndex{inISR: map[int32][]PartitionKey{}, inELR: map[int32][]PartitionKey{}, leaderOf: map[int32]int{}}
	for _, t := range img.Topics() {
		for i, p := range t.Partitions {
			k := PartitionKey{TopicID: t.ID, Partition: int32(i)}
			for _, r := range p.ISR {
				x.inISR[r] = append(x.inISR[r], k)
			}
			for _, r := range p.ELR {
				x.inELR[r] = append(x.inELR[r], k)
			}
			if p.Leader >= 0 {
				x.leaderOf[p.Leader]++
				if !slices.Contains(p.ISR, p.Leader) {
					x.inISR[p.Leader] = append(x.inISR[p.Leader], k)
				}
			} else {
				x.leaderless = append(x.leaderless, k)
			}
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				x.imbalanced = append(x.imbalanced, k)
			}
		}
	}
	return x
}

// partition returns a partition of the image.
func partitionOf(img *Image, k PartitionKey) (*Topic, *Partition, bool) {
	t, ok := img.TopicByID(k.TopicID)
	if !ok || k.Partition < 0 || int(k.Partition) >= len(t.Partitions) {
		return nil, nil, false
	}
	return t, t.Partitions[k.Partition], true
}

// stage applies a step's records to a scratch copy of the image so that a
// later step of the same call decides from the state after the earlier ones
// (Tick fencing two brokers, say). The offset does not move. Records that do
// not apply are a controller bug; they are dropped rather than handed to the
// driver, where the whole batch would fail.
func stage(img *Image, recs []Record) (*Image, []Record) {
	if len(recs) == 0 {
		return img, nil
	}
	next, _, err := img.Apply(img.Offset(), recs)
	if err != nil {
		return img, nil
	}
	return next, recs
}

// newID draws an id from the injected rng, as Kafka's Uuid.randomUuid
// makes one: never zero, never starting with '-' when printed; never one
// taken in this request or inUse in the image. It marks the id taken.
func (c *ClusterControl) newID(taken map[Uuid]bool, inUse func(Uuid) bool) Uuid {
	for {
		var u Uuid
		for i := 0; i < 16; i += 8 {
			v := c.rng.Uint64()
			for j := range 8 {
				u[i+j] = byte(v >> (8 * j))
			}
		}
		if u == ZeroUuid || u.String()[0] == '-' || taken[u] || inUse(u) {
			continue
		}
		taken[u] = true
		return u
	}
}

// newTopicID draws a topic id no topic of the image has.
func (c *ClusterControl) newTopicID(taken map[Uuid]bool) Uuid {
	return c.newID(taken, func(u Uuid) bool { _, dup := c.img.TopicByID(u); return dup })
}

func strp(s string) *string { return &s }
