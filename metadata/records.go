package metadata

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// RecordType identifies a metadata record. The numbers are KRaft's
// (org.apache.kafka.common.metadata), so that an operator reading
// `keel metadata-quorum dump-log` sees familiar names and ids.
type RecordType uint16

// The record types of the metadata log.
const (
	RegisterBrokerType            RecordType = 0
	UnregisterBrokerType          RecordType = 1
	TopicType                     RecordType = 2
	PartitionType                 RecordType = 3
	ConfigType                    RecordType = 4
	PartitionChangeType           RecordType = 5
	FenceBrokerType               RecordType = 7
	UnfenceBrokerType             RecordType = 8
	RemoveTopicType               RecordType = 9
	FeatureLevelType              RecordType = 12
	UserScramCredentialType       RecordType = 11
	ClientQuotaType               RecordType = 14
	ProducerIdsType               RecordType = 15
	BrokerRegistrationChangeType  RecordType = 17
	AccessControlEntryType        RecordType = 18
	RemoveAccessControlEntryType  RecordType = 19
	NoOpType                      RecordType = 20
	RemoveUserScramCredentialType RecordType = 22
)

var recordTypeNames = map[RecordType]string{
	RegisterBrokerType:            "REGISTER_BROKER_RECORD",
	UnregisterBrokerType:          "UNREGISTER_BROKER_RECORD",
	TopicType:                     "TOPIC_RECORD",
	PartitionType:                 "PARTITION_RECORD",
	ConfigType:                    "CONFIG_RECORD",
	PartitionChangeType:           "PARTITION_CHANGE_RECORD",
	FenceBrokerType:               "FENCE_BROKER_RECORD",
	UnfenceBrokerType:             "UNFENCE_BROKER_RECORD",
	RemoveTopicType:               "REMOVE_TOPIC_RECORD",
	FeatureLevelType:              "FEATURE_LEVEL_RECORD",
	UserScramCredentialType:       "USER_SCRAM_CREDENTIAL_RECORD",
	ClientQuotaType:               "CLIENT_QUOTA_RECORD",
	ProducerIdsType:               "PRODUCER_IDS_RECORD",
	BrokerRegistrationChangeType:  "BROKER_REGISTRATION_CHANGE_RECORD",
	AccessControlEntryType:        "ACCESS_CONTROL_ENTRY_RECORD",
	RemoveAccessControlEntryType:  "REMOVE_ACCESS_CONTROL_ENTRY_RECORD",
	NoOpType:                      "NO_OP_RECORD",
	RemoveUserScramCredentialType: "REMOVE_USER_SCRAM_CREDENTIAL_RECORD",
	DelegationTokenType:           "DELEGATION_TOKEN_RECORD",
	RemoveDelegationTokenType:     "REMOVE_DELEGATION_TOKEN_RECORD",
}

// String is KRaft's name for the type, e.g. "REGISTER_BROKER_RECORD".
func (t RecordType) String() string {
	if n, ok := recordTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("UNKNOWN_RECORD_%d", uint16(t))
}

// Record is one metadata record. Version is the schema version of its
// encoding; decoders accept every version up to the current one.
type Record interface {
	Type() RecordType
	Version() int16
}

// Special leader values (Kafka's LeaderConstants).
const (
	// NoLeader means the partition has no leader (all replicas offline).
	NoLeader int32 = -1
	// NoLeaderChange in a PartitionChangeRecord keeps the current leader.
	NoLeaderChange int32 = -2
)

// Endpoint is one listener a broker advertises.
type Endpoint struct {
	Name             string `json:"name"`
	Host             string `json:"host"`
	Port             int32  `json:"port"`
	SecurityProtocol int16  `json:"securityProtocol"`
}

// RegisterBrokerRecord registers (or re-registers) a broker with a new
// broker epoch. A registered broker starts fenced.
type RegisterBrokerRecord struct {
	BrokerID             int32      `json:"brokerId"`
	IncarnationID        Uuid       `json:"incarnationId"`
	BrokerEpoch          int64      `json:"brokerEpoch"`
	Endpoints            []Endpoint `json:"endPoints"`
	Rack                 string     `json:"rack,omitempty"`
	Fenced               bool       `json:"fenced"`
	InControlledShutdown bool       `json:"inControlledShutdown"`
	// Features are the broker's supported feature ranges (KIP-584).
	Features map[string]FeatureRange `json:"features,omitempty"`
	// LogDirs are the directory ids of the broker's online log dirs
	// (KIP-858), sorted; none from a Keel before directory assignment.
	LogDirs []Uuid `json:"logDirs,omitempty"`
}

// UnregisterBrokerRecord removes a broker's registration.
type UnregisterBrokerRecord struct {
	BrokerID    int32 `json:"brokerId"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// FenceBrokerRecord fences a broker: it may not lead partitions.
type FenceBrokerRecord struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// UnfenceBrokerRecord unfences a broker that has caught up.
type UnfenceBrokerRecord struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// BrokerRegistrationChangeRecord changes a broker's fenced or
// controlled-shutdown state. As in KRaft each field is 0 for "no change",
// 1 for "set" and -1 for "clear".
type BrokerRegistrationChangeRecord struct {
	BrokerID             int32 `json:"brokerId"`
	BrokerEpoch          int64 `json:"brokerEpoch"`
	Fenced               int8  `json:"fenced"`
	InControlledShutdown int8  `json:"inControlledShutdown"`
	// LogDirs, when not nil, are the broker's online log dirs from now on
	// (KIP-858: the dirs it reported offline are gone from it).
	LogDirs []Uuid `json:"logDirs,omitzero"`
}

// TopicRecord creates a topic.
type TopicRecord struct {
	Name    string `json:"name"`
	TopicID Uuid   `json:"topicId"`
}

// PartitionRecord creates (or fully replaces) a partition.
type PartitionRecord struct {
	PartitionID      int32   `json:"partitionId"`
	TopicID          Uuid    `json:"topicId"`
	Replicas         []int32 `json:"replicas"`
	ISR              []int32 `json:"isr"`
	RemovingReplicas []int32 `json:"removingReplicas,omitempty"`
	AddingReplicas   []int32 `json:"addingReplicas,omitempty"`
	Leader           int32   `json:"leader"`
	LeaderEpoch      int32   `json:"leaderEpoch"`
	PartitionEpoch   int32   `json:"partitionEpoch"`
	// LeaderRecoveryState: 0 recovered, 1 recovering (KIP-704). Snapshots
	// must carry it: a leader elected uncleanly stays RECOVERING across a
	// snapshot. Omitted when 0, so older batches decode unchanged.
	LeaderRecoveryState int8 `json:"leaderRecoveryState,omitempty"`
	// ELR and LastKnownELR are the eligible leader replicas and the last
	// known leader (KIP-966; Partition says when each is set).
	ELR          []int32 `json:"eligibleLeaderReplicas,omitempty"`
	LastKnownELR []int32 `json:"lastKnownElr,omitempty"`
	// Directories are the log dir of each replica, in Replicas' order
	// (KIP-858; Partition.Directory).
	Directories []Uuid `json:"directories,omitempty"`
}

// PartitionChangeRecord changes a partition's leader, ISR, eligible leader
// replicas or replicas. Nil slices and Leader == NoLeaderChange leave the
// field as it is; an empty non-nil ISR, ELR or LastKnownELR sets it empty
// (omitzero keeps the two apart on the wire). A record that sets Replicas
// sets the partition's whole reassignment state: its AddingReplicas and
// RemovingReplicas (none when absent). Every change bumps the partition
// epoch; a leader change also bumps the leader epoch.
type PartitionChangeRecord struct {
	PartitionID      int32   `json:"partitionId"`
	TopicID          Uuid    `json:"topicId"`
	ISR              []int32 `json:"isr,omitzero"`
	Leader           int32   `json:"leader"`
	Replicas         []int32 `json:"replicas,omitempty"`
	RemovingReplicas []int32 `json:"removingReplicas,omitempty"`
	AddingReplicas   []int32 `json:"addingReplicas,omitempty"`
	// LeaderRecoveryState: 0 recovered, 1 recovering (unclean election, KIP-704).
	LeaderRecoveryState int8 `json:"leaderRecoveryState"`
	// ELR and LastKnownELR (KIP-966), as in PartitionRecord.
	ELR          []int32 `json:"eligibleLeaderReplicas,omitzero"`
	LastKnownELR []int32 `json:"lastKnownElr,omitzero"`
	// Directories, when not nil, are the replicas' log dirs, in the order
	// of the replicas after this record. A record that sets Replicas sets
	// them too (a record of a Keel before KIP-858 leaves them unknown).
	Directories []Uuid `json:"directories,omitzero"`
}

// RemoveTopicRecord deletes a topic and all its partitions.
type RemoveTopicRecord struct {
	TopicID Uuid `json:"topicId"`
}

// Config resource types (Kafka's ConfigResource.Type).
const (
	ConfigResourceTopic  int8 = 2
	ConfigResourceBroker int8 = 4
)

// ConfigRecord sets (or, with a nil Value, deletes) one dynamic config of a
// topic or broker. An empty ResourceName on a broker config is the
// cluster-wide default.
type ConfigRecord struct {
	ResourceType int8    `json:"resourceType"`
	ResourceName string  `json:"resourceName"`
	Name         string  `json:"name"`
	Value        *string `json:"value"`
}

// Redact is the record as dump-log prints it: a password's or a private
// key's value hidden (Kafka's RecordRedactor). KRaft keeps dynamic
// passwords in the metadata log as they were set, as Keel does.
func (r *ConfigRecord) Redact() any {
	if r.Value == nil || !SensitiveConfig(r.Name) {
		return r
	}
	c := *r
	c.Value = strp("(redacted)")
	return &c
}

// ProducerIdsRecord allocates a block of producer ids to a broker: the next
// block starts at NextProducerID.
type ProducerIdsRecord struct {
	BrokerID       int32 `json:"brokerId"`
	BrokerEpoch    int64 `json:"brokerEpoch"`
	NextProducerID int64 `json:"nextProducerId"`
}

// FeatureLevelRecord sets a finalized feature level (metadata.version).
type FeatureLevelRecord struct {
	Name         string `json:"name"`
	FeatureLevel int16  `json:"featureLevel"`
}

// QuotaEntityPart is one component of a client quota entity: its type
// ("user", "client-id", "ip") and name, nil for the type's default entity
// (<default> in kafka-configs).
type QuotaEntityPart struct {
	EntityType string  `json:"entityType"`
	EntityName *string `json:"entityName"`
}

// ClientQuotaRecord sets (or, with Remove, deletes) one quota of a client
// quota entity (KIP-546).
type ClientQuotaRecord struct {
	Entity []QuotaEntityPart `json:"entity"`
	Key    string            `json:"key"`
	Value  float64           `json:"value"`
	Remove bool              `json:"remove,omitempty"`
}

// NoOpRecord advances the log (the active controller writes one on
// election, so the new leader commits an entry of its own term).
type NoOpRecord struct{}

func (*RegisterBrokerRecord) Type() RecordType            { return RegisterBrokerType }
func (*UnregisterBrokerRecord) Type() RecordType          { return UnregisterBrokerType }
func (*FenceBrokerRecord) Type() RecordType               { return FenceBrokerType }
func (*UnfenceBrokerRecord) Type() RecordType             { return UnfenceBrokerType }
func (*BrokerRegistrationChangeRecord) Type() RecordType  { return BrokerRegistrationChangeType }
func (*TopicRecord) Type() RecordType                     { return TopicType }
func (*PartitionRecord) Type() RecordType                 { return PartitionType }
func (*PartitionChangeRecord) Type() RecordType           { return PartitionChangeType }
func (*RemoveTopicRecord) Type() RecordType               { return RemoveTopicType }
func (*ConfigRecord) Type() RecordType                    { return ConfigType }
func (*ProducerIdsRecord) Type() RecordType               { return ProducerIdsType }
func (*FeatureLevelRecord) Type() RecordType              { return FeatureLevelType }
func (*ClientQuotaRecord) Type() RecordType               { return ClientQuotaType }
func (*NoOpRecord) Type() RecordType                      { return NoOpType }
func (*UserScramCredentialRecord) Type() RecordType       { return UserScramCredentialType }
func (*RemoveUserScramCredentialRecord) Type() RecordType { return RemoveUserScramCredentialType }
func (*AccessControlEntryRecord) Type() RecordType        { return AccessControlEntryType }
func (*RemoveAccessControlEntryRecord) Type() RecordType  { return RemoveAccessControlEntryType }

func (*RegisterBrokerRecord) Version() int16            { return 0 }
func (*UnregisterBrokerRecord) Version() int16          { return 0 }
func (*FenceBrokerRecord) Version() int16               { return 0 }
func (*UnfenceBrokerRecord) Version() int16             { return 0 }
func (*BrokerRegistrationChangeRecord) Version() int16  { return 0 }
func (*TopicRecord) Version() int16                     { return 0 }
func (*PartitionRecord) Version() int16                 { return 0 }
func (*PartitionChangeRecord) Version() int16           { return 0 }
func (*RemoveTopicRecord) Version() int16               { return 0 }
func (*ConfigRecord) Version() int16                    { return 0 }
func (*ProducerIdsRecord) Version() int16               { return 0 }
func (*FeatureLevelRecord) Version() int16              { return 0 }
func (*ClientQuotaRecord) Version() int16               { return 0 }
func (*NoOpRecord) Version() int16                      { return 0 }
func (*UserScramCredentialRecord) Version() int16       { return 0 }
func (*RemoveUserScramCredentialRecord) Version() int16 { return 0 }
func (*AccessControlEntryRecord) Version() int16        { return 0 }
func (*RemoveAccessControlEntryRecord) Version() int16  { return 0 }

// newRecord returns an empty record of type t, or nil for an unknown type.
func newRecord(t RecordType) Record {
	switch t {
	case RegisterBrokerType:
		return &RegisterBrokerRecord{}
	case UnregisterBrokerType:
		return &UnregisterBrokerRecord{}
	case FenceBrokerType:
		return &FenceBrokerRecord{}
	case UnfenceBrokerType:
		return &UnfenceBrokerRecord{}
	case BrokerRegistrationChangeType:
		return &BrokerRegistrationChangeRecord{}
	case TopicType:
		return &TopicRecord{}
	case PartitionType:
		return &PartitionRecord{}
	case PartitionChangeType:
		return &PartitionChangeRecord{}
	case RemoveTopicType:
		return &RemoveTopicRecord{}
	case ConfigType:
		return &ConfigRecord{}
	case ProducerIdsType:
		return &ProducerIdsRecord{}
	case FeatureLevelType:
		return &FeatureLevelRecord{}
	case ClientQuotaType:
		return &ClientQuotaRecord{}
	case NoOpType:
		return &NoOpRecord{}
	case UserScramCredentialType:
		return &UserScramCredentialRecord{}
	case RemoveUserScramCredentialType:
		return &RemoveUserScramCredentialRecord{}
	case AccessControlEntryType:
		return &AccessControlEntryRecord{}
	case RemoveAccessControlEntryType:
		return &RemoveAccessControlEntryRecord{}
	case DelegationTokenType:
		return &DelegationTokenRecord{}
	case RemoveDelegationTokenType:
		return &RemoveDelegationTokenRecord{}
	}
	return nil
}

// ErrCorruptRecord is a metadata record batch that cannot be decoded.
var ErrCorruptRecord = errors.New("corrupt metadata record")

// batchFormat is the first byte of an encoded batch; it changes only if the
// framing below does.
const batchFormat byte = 1

// EncodeBatch encodes records as one metadata log entry. A batch is applied
// atomically: all its records or none (CreateTopics writes a topic and its
// partitions in one batch). Layout: format byte, then per record
// [type u16][version u16][length u32][JSON body]. JSON keeps the log
// readable with dump-log and lets fields be added compatibly.
func EncodeBatch(records []Record) ([]byte, error) {
	out := []byte{batchFormat}
	for _, r := range records {
		body, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", r.Type(), err)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(r.Type()))
		out = binary.BigEndian.AppendUint16(out, uint16(r.Version()))
		out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, nil
}

// DecodeBatch decodes a batch written by EncodeBatch. Unknown record types
// or versions newer than this build's fail with ErrCorruptRecord: applying
// half of a batch we do not understand would fork the image.
func DecodeBatch(b []byte) ([]Record, error) {
	if len(b) < 1 || b[0] != batchFormat {
		return nil, fmt.Errorf("batch format byte: %w", ErrCorruptRecord)
	}
	b = b[1:]
	var out []Record
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, fmt.Errorf("record header of %d bytes: %w", len(b), ErrCorruptRecord)
		}
		t := RecordType(binary.BigEndian.Uint16(b))
		v := int16(binary.BigEndian.Uint16(b[2:]))
		n := binary.BigEndian.Uint32(b[4:])
		b = b[8:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("record of %d bytes with %d left: %w", n, len(b), ErrCorruptRecord)
		}
		r := newRecord(t)
		if r == nil {
			return nil, fmt.Errorf("record type %d: %w", t, ErrCorruptRecord)
		}
		if v > r.Version() || v < 0 {
			return nil, fmt.Errorf("%s version %d (this build reads up to %d): %w", t, v, r.Version(), ErrCorruptRecord)
		}
		if err := json.Unmarshal(b[:n], r); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", t, ErrCorruptRecord, err)
		}
		out = append(out, r)
		b = b[n:]
	}
	return out, nil
}
