package metadata

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxTopicNameLength is Kafka's Topic.MAX_NAME_LENGTH: a partition's
// directory name (topic + "-" + partition) must fit in 255 bytes.
const MaxTopicNameLength = 249

// InternalTopics are the topics Keel itself creates and uses. Clients may
// neither create nor delete them: the broker creates them with their own
// settings (offsets.topic.replication.factor, ...) and losing one loses
// every group's offsets or every transaction's state.
var InternalTopics = []string{"__consumer_offsets", "__transaction_state", "__cluster_metadata"}

// validateTopicName is Kafka's Topic.validate: not empty, not "." or "..",
// at most 249 characters of [a-zA-Z0-9._-].
func validateTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("Topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return errors.New(`Topic name cannot be "." or ".."`)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("Topic name is illegal, it can't be longer than %d characters, topic name: %s", MaxTopicNameLength, name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return fmt.Errorf("Topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// unifyCollisionChars is Kafka's Topic.unifyCollisionChars: metric names
// replace '.' by '_', so "a.b" and "a_b" cannot both exist.
func unifyCollisionChars(name string) string { return strings.ReplaceAll(name, ".", "_") }

func hasCollisionChars(name string) bool { return strings.ContainsAny(name, "._") }

// errTooLarge is Kafka's answer to a request that would produce more than
// MAX_RECORDS_PER_USER_OP records.
const errTooLarge = "Unable to perform excessively large batch operation."

// CreateTopics handles CreateTopics (API 19) as Kafka's
// ReplicationControlManager.createTopics. Per topic, in this order:
//
//   - a name given twice in the request: INVALID_REQUEST (one result);
//   - an illegal name (validateTopicName), a name of InternalTopics unless
//     internal, or a name colliding with an existing topic once '.' and '_'
//     are unified: INVALID_TOPIC_EXCEPTION;
//   - an existing name: TOPIC_ALREADY_EXISTS;
//   - a null config value, an unknown topic config or an invalid value:
//     INVALID_CONFIG;
//   - with a manual assignment: replication factor and partition count
//     must be -1 (INVALID_REQUEST); each partition's replicas registered,
//     distinct, as many as the other partitions', at least one active, and
//     the partitions 0..n-1 (INVALID_REPLICA_ASSIGNMENT);
//   - otherwise partitions ≥ 1 or -1 for num.partitions
//     (INVALID_PARTITIONS); replication factor ≥ 1 or -1 for
//     default.replication.factor, and no more than the active brokers
//     (INVALID_REPLICATION_FACTOR); replicas placed by placeReplicas.
//
// A created topic is a TopicRecord, its ConfigRecords and its
// PartitionRecords (leader = first active replica, ISR = active replicas).
// All records of the request are one batch; if they would exceed
// MaxRecordsPerRequest every topic fails with POLICY_VIOLATION. The result
// carries the topic id, partition count, replication factor and every
// topic config with its source (v5+). ValidateOnly computes the same
// results and no records (and no topic id). internal is true only for the
// broker's own creation of InternalTopics.
// Concurrency: see ClusterControl.
func (c *ClusterControl) CreateTopics(req *kmsg.CreateTopicsRequest, internal bool) ([]Record, *kmsg.CreateTopicsResponse) {
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = req.Version
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	collisions := map[string]string{}
	for t := range c.img.topicsUnordered() {
		if hasCollisionChars(t.Name) {
			collisions[unifyCollisionChars(t.Name)] = t.Name
		}
	}
	reported := map[string]bool{}
	taken := map[Uuid]bool{}
	budget := c.cfg.MaxRecordsPerRequest
	tooLarge := false
	var out []Record
	for _, t := range req.Topics {
		if count[t.Topic] > 1 {
			if !reported[t.Topic] {
				reported[t.Topic] = true
				resp.Topics = append(resp.Topics, createTopicError(t.Topic, kerr.InvalidRequest, "Duplicate topic name."))
			}
			continue
		}
		recs, result := c.createTopic(t, internal, collisions, taken, budget-len(out))
		if result == nil {
			tooLarge = true
			continue
		}
		if result.ErrorCode == 0 {
			out = append(out, recs...)
			if hasCollisionChars(t.Topic) {
				collisions[unifyCollisionChars(t.Topic)] = t.Topic
			}
			if req.ValidateOnly {
				result.TopicID = ZeroUuid
			}
		}
		resp.Topics = append(resp.Topics, *result)
	}
	if tooLarge {
		resp.Topics = resp.Topics[:0]
		for _, t := range req.Topics {
			if !reported[t.Topic] {
				reported[t.Topic] = true
				resp.Topics = append(resp.Topics, createTopicError(t.Topic, kerr.PolicyViolation, errTooLarge))
			}
		}
		return nil, resp
	}
	if req.ValidateOnly {
		return nil, resp
	}
	return out, resp
}

func createTopicError(name string, err *kerr.Error, msg string) kmsg.CreateTopicsResponseTopic {
	r := kmsg.NewCreateTopicsResponseTopic()
	r.Topic, r.ErrorCode, r.ErrorMessage = name, err.Code, strp(msg)
	r.NumPartitions, r.ReplicationFactor = -1, -1
	return r
}

// createTopic decides one topic. A nil result means its records would not
// fit in budget.
func (c *ClusterControl) createTopic(t kmsg.CreateTopicsRequestTopic, internal bool, collisions map[string]string, taken map[Uuid]bool, budget int) ([]Record, *kmsg.CreateTopicsResponseTopic) {
	fail := func(err *kerr.Error, format string, args ...any) ([]Record, *kmsg.CreateTopicsResponseTopic) {
		r := createTopicError(t.Topic, err, fmt.Sprintf(format, args...))
		return nil, &r
	}
	img := c.img
	name := t.Topic
	if err := validateTopicName(name); err != nil {
		return fail(kerr.InvalidTopicException, "%s", err.Error())
	}
	if slices.Contains(InternalTopics, name) && !internal {
		return fail(kerr.InvalidTopicException, "Topic %s is reserved for internal use; the broker creates it.", name)
	}
	if _, ok := img.Topic(name); ok {
		return fail(kerr.TopicAlreadyExists, "Topic '%s' already exists.", name)
	}
	if other, ok := collisions[unifyCollisionChars(name)]; ok && hasCollisionChars(name) {
		return fail(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", name, other)
	}
	configs := map[string]string{}
	var nulls []string
	for _, cfg := range t.Configs {
		if cfg.Value == nil {
			nulls = append(nulls, cfg.Name)
			continue
		}
		configs[cfg.Name] = *cfg.Value // the last of a repeated name wins, as in Kafka
	}
	if len(nulls) > 0 {
		return fail(kerr.InvalidConfig, "Null value not supported for topic configs: %s", strings.Join(nulls, ","))
	}
	if err := ValidateTopicConfigs(configs); err != nil {
		return fail(kerr.InvalidConfig, "%s", err.Error())
	}

	var assignments [][]int32
	if len(t.ReplicaAssignment) > 0 {
		if t.ReplicationFactor != -1 {
			return fail(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		}
		if t.NumPartitions != -1 {
			return fail(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		if 1+len(configs)+len(t.ReplicaAssignment) > budget {
			return nil, nil
		}
		byPartition := map[int32][]int32{}
		rf := -1
		for _, a := range t.ReplicaAssignment {
			if _, dup := byPartition[a.Partition]; dup {
				return fail(kerr.InvalidReplicaAssignment, "Found multiple manual partition assignments for partition %d", a.Partition)
			}
			if msg := validateManualAssignment(img, a.Replicas, rf); msg != "" {
				return fail(kerr.InvalidReplicaAssignment, "%s", msg)
			}
			rf = len(a.Replicas)
			if !slices.ContainsFunc(a.Replicas, func(id int32) bool { return isActive(img, id) }) {
				return fail(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", a.Partition)
			}
			byPartition[a.Partition] = a.Replicas
		}
		for i := range int32(len(byPartition)) {
			replicas, ok := byPartition[i]
			if !ok {
				return fail(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			}
			assignments = append(assignments, replicas)
		}
	} else {
		rf, partitions := int(t.ReplicationFactor), int(t.NumPartitions)
		if rf < -1 || rf == 0 {
			return fail(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
		}
		if partitions < -1 || partitions == 0 {
			return fail(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
		}
		if rf == -1 {
			rf = int(c.cfg.DefaultReplicationFactor)
		}
		if partitions == -1 {
			partitions = int(c.cfg.NumPartitions)
		}
		if 1+len(configs)+partitions > budget {
			return nil, nil
		}
		active := activeBrokers(img)
		if rf > len(active) {
			return fail(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are active.", rf, rf, len(active))
		}
		assignments = placeReplicas(active, partitions, rf, -1, 0, c.rng)
	}

	id := c.newTopicID(taken)
	out := make([]Record, 0, 1+len(configs)+len(assignments))
	out = append(out, &TopicRecord{Name: name, TopicID: id})
	out = append(out, configDiff(ConfigResource{Type: ConfigResourceTopic, Name: name}, nil, configs)...)
	for i, replicas := range assignments {
		out = append(out, newPartitionRecord(img, id, int32(i), replicas))
	}
	r := kmsg.NewCreateTopicsResponseTopic()
	r.Topic, r.TopicID = name, id
	r.NumPartitions, r.ReplicationFactor = int32(len(assignments)), int16(len(assignments[0]))
	r.Configs = c.describeTopicConfigs(name, configs)
	return out, &r
}

// newPartitionRecord is a new partition: the ISR is its active replicas,
// the first of them leads (Kafka's buildPartitionRegistration); each
// replica is in its broker's default dir (defaultDir).
func newPartitionRecord(img *Image, topicID Uuid, partition int32, replicas []int32) *PartitionRecord {
	var isr []int32
	for _, r := range replicas {
		if isActive(img, r) {
			isr = append(isr, r)
		}
	}
	rec := &PartitionRecord{PartitionID: partition, TopicID: topicID, Replicas: slices.Clone(replicas), ISR: isr, Leader: NoLeader}
	for _, r := range replicas {
		rec.Directories = append(rec.Directories, defaultDir(img, r))
	}
	if len(isr) == 0 {
		rec.ISR = slices.Clone(replicas) // callers rule this out; never an empty ISR
	} else {
		rec.Leader = isr[0]
	}
	return rec
}

// validateManualAssignment is Kafka's validateManualPartitionAssignment;
// rf is the replica count of earlier partitions, -1 if none.
func validateManualAssignment(img *Image, replicas []int32, rf int) string {
	if len(replicas) == 0 {
		return "The manual partition assignment includes an empty replica list."
	}
	sorted := slices.Sorted(slices.Values(replicas))
	for i, id := range sorted {
		if _, ok := img.Broker(id); !ok {
			return fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	if rf >= 0 && len(replicas) != rf {
		return fmt.Sprintf("The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), rf)
	}
	return ""
}

// DeleteTopics handles DeleteTopics (API 20): by name (v0-5, and v6+ with a
// name) or by id (v6+, KIP-516). A topic named twice (by name or by id) is
// INVALID_REQUEST, as is an entry with both or neither; an unknown name is
// UNKNOWN_TOPIC_OR_PARTITION and an unknown id UNKNOWN_TOPIC_ID; with
// delete.topic.enable=false every topic is TOPIC_DELETION_DISABLED;
// InternalTopics cannot be deleted (INVALID_REQUEST, where Kafka lets a
// client delete __consumer_offsets). A deleted topic is a RemoveTopicRecord,
// which also drops its configs. Concurrency: see ClusterControl.
func (c *ClusterControl) DeleteTopics(req *kmsg.DeleteTopicsRequest) ([]Record, *kmsg.DeleteTopicsResponse) {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Version = req.Version
	entries := slices.Clone(req.Topics)
	for _, n := range req.TopicNames {
		entries = append(entries, kmsg.DeleteTopicsRequestTopic{Topic: strp(n)})
	}
	names, ids := map[string]int{}, map[Uuid]int{}
	for _, e := range entries {
		if e.Topic != nil {
			names[*e.Topic]++
		} else {
			ids[Uuid(e.TopicID)]++
		}
	}
	reportedName, reportedID := map[string]bool{}, map[Uuid]bool{}
	var out []Record
	for _, e := range entries {
		r := kmsg.NewDeleteTopicsResponseTopic()
		r.Topic, r.TopicID = e.Topic, e.TopicID
		fail := func(err *kerr.Error, msg string) {
			r.ErrorCode = err.Code
			if msg != "" {
				r.ErrorMessage = strp(msg)
			}
		}
		id := Uuid(e.TopicID)
		switch {
		case e.Topic != nil && names[*e.Topic] > 1:
			if reportedName[*e.Topic] {
				continue
			}
			reportedName[*e.Topic] = true
			fail(kerr.InvalidRequest, "Duplicate topic name.")
		case e.Topic == nil && ids[id] > 1:
			if reportedID[id] {
				continue
			}
			reportedID[id] = true
			fail(kerr.InvalidRequest, "Duplicate topic id.")
		case e.Topic == nil && id == ZeroUuid:
			fail(kerr.InvalidRequest, "Neither topic name nor id were specified.")
		case e.Topic != nil && id != ZeroUuid:
			fail(kerr.InvalidRequest, "You may not specify both topic name and topic id.")
		case !c.cfg.DeleteTopicEnable:
			fail(kerr.TopicDeletionDisabled, "Topic deletion is disabled.")
		default:
			var t *Topic
			var ok bool
			if e.Topic != nil {
				if t, ok = c.img.Topic(*e.Topic); !ok {
					fail(kerr.UnknownTopicOrPartition, "")
				}
			} else if t, ok = c.img.TopicByID(id); !ok {
				fail(kerr.UnknownTopicID, "")
			}
			if !ok {
				break
			}
			r.Topic, r.TopicID = strp(t.Name), t.ID
			if slices.Contains(InternalTopics, t.Name) {
				fail(kerr.InvalidRequest, "Topic "+t.Name+" is internal and cannot be deleted.")
				break
			}
			out = append(out, &RemoveTopicRecord{TopicID: t.ID})
		}
		resp.Topics = append(resp.Topics, r)
	}
	if len(out) > c.cfg.MaxRecordsPerRequest {
		for i := range resp.Topics {
			if resp.Topics[i].ErrorCode == 0 {
				resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = kerr.PolicyViolation.Code, strp(errTooLarge)
			}
		}
		return nil, resp
	}
	return out, resp
}

// CreatePartitions handles CreatePartitions (API 37, KIP-195): a topic's
// partition count may only grow (INVALID_PARTITIONS when it would not);
// an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, a topic named twice
// INVALID_REQUEST. Manual assignments must cover exactly the new
// partitions with as many replicas as the topic has
// (INVALID_REPLICA_ASSIGNMENT); otherwise the new partitions continue the
// topic's layout (placeReplicas from the index of partition 0's first
// replica, as Kafka's AdminZkClient.addPartitions) on the active brokers,
// INVALID_REPLICATION_FACTOR if there are too few. ValidateOnly answers
// without records. Concurrency: see ClusterControl.
func (c *ClusterControl) CreatePartitions(req *kmsg.CreatePartitionsRequest) ([]Record, *kmsg.CreatePartitionsResponse) {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.Version = req.Version
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	reported := map[string]bool{}
	budget := c.cfg.MaxRecordsPerRequest
	tooLarge := false
	var out []Record
	for _, t := range req.Topics {
		if count[t.Topic] > 1 && reported[t.Topic] {
			continue
		}
		r := kmsg.NewCreatePartitionsResponseTopic()
		r.Topic = t.Topic
		var recs []Record
		var code int16
		var msg string
		if count[t.Topic] > 1 {
			reported[t.Topic] = true
			code, msg = kerr.InvalidRequest.Code, "Duplicate topic name."
		} else {
			recs, code, msg = c.createPartitions(t, budget-len(out))
			if code == kerr.PolicyViolation.Code {
				tooLarge = true
			}
		}
		r.ErrorCode = code
		if msg != "" {
			r.ErrorMessage = strp(msg)
		}
		out = append(out, recs...)
		resp.Topics = append(resp.Topics, r)
	}
	if tooLarge {
		for i := range resp.Topics {
			if resp.Topics[i].ErrorCode == 0 || resp.Topics[i].ErrorCode == kerr.PolicyViolation.Code {
				resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = kerr.PolicyViolation.Code, strp(errTooLarge)
			}
		}
		return nil, resp
	}
	if req.ValidateOnly {
		return nil, resp
	}
	return out, resp
}

func (c *ClusterControl) createPartitions(t kmsg.CreatePartitionsRequestTopic, budget int) ([]Record, int16, string) {
	img := c.img
	topic, ok := img.Topic(t.Topic)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition.Code, ""
	}
	have := len(topic.Partitions)
	switch {
	case int(t.Count) == have:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("Topic already has %d partition(s).", have)
	case int(t.Count) < have:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("The topic %s currently has %d partition(s); %d would not be an increase.", t.Topic, have, t.Count)
	}
	additional := int(t.Count) - have
	if t.Assignment != nil && len(t.Assignment) != additional {
		return nil, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", additional, len(t.Assignment))
	}
	if additional > budget {
		return nil, kerr.PolicyViolation.Code, errTooLarge
	}
	if have == 0 {
		return nil, kerr.UnknownServerError.Code, fmt.Sprintf("Invalid state: topic %s appears to have no partitions.", t.Topic)
	}
	first := topic.Partitions[0]
	rf := len(first.Replicas)
	var assignments [][]int32
	if t.Assignment != nil {
		for i, a := range t.Assignment {
			if msg := validateManualAssignment(img, a.Replicas, rf); msg != "" {
				return nil, kerr.InvalidReplicaAssignment.Code, msg
			}
			if !slices.ContainsFunc(a.Replicas, func(id int32) bool { return isActive(img, id) }) {
				return nil, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", have+i)
			}
			assignments = append(assignments, a.Replicas)
		}
	} else {
		active := activeBrokers(img)
		if rf > len(active) || rf == 0 {
			return nil, kerr.InvalidReplicationFactor.Code, fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are active.", rf, rf, len(active))
		}
		start := -1
		if len(first.Replicas) > 0 {
			start = slices.IndexFunc(active, func(b *BrokerRegistration) bool { return b.ID == first.Replicas[0] })
		}
		if start >= 0 && slices.ContainsFunc(active, func(b *BrokerRegistration) bool { return b.Rack != "" }) {
			start = slices.Index(rackAlternatedBrokers(active), first.Replicas[0])
		}
		assignments = placeReplicas(active, additional, rf, start, have, c.rng)
	}
	out := make([]Record, 0, len(assignments))
	for i, replicas := range assignments {
		out = append(out, newPartitionRecord(img, topic.ID, int32(have+i), replicas))
	}
	return out, 0, ""
}
