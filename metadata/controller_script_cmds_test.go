package metadata

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The commands of the controller scripts, each building one request from
// its arguments, running it, committing the records and printing the
// response.

func (h *harness) register(a args) string {
	id := int32(h.int(a, "id", 0))
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = id
	req.ClusterID, _ = a.get("cluster")
	inc, ok := a.get("incarnation")
	if !ok {
		inc = fmt.Sprintf("i%d", id)
	}
	req.IncarnationID = h.incarnation(inc)
	req.PreviousBrokerEpoch = h.int(a, "previous-epoch", -1)
	if rack, ok := a.get("rack"); ok {
		req.Rack = &rack
	}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", uint16(9092+id)
	req.Listeners = append(req.Listeners, l)
	recs, resp := h.controller().RegisterBroker(h.now, req)
	out := h.commit(recs)
	if resp.ErrorCode != 0 {
		return out + "\nresponse: " + errName(resp.ErrorCode)
	}
	return out + fmt.Sprintf("\nresponse: epoch=%d", resp.BrokerEpoch)
}

func (h *harness) brokerEpoch(id int32) int64 {
	if b, ok := h.img.Broker(id); ok {
		return b.Epoch
	}
	return 0
}

func (h *harness) heartbeat(a args) string {
	id := int32(h.int(a, "id", 0))
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID = id
	req.BrokerEpoch = h.int(a, "epoch", h.brokerEpoch(id))
	req.CurrentMetadataOffset = h.int(a, "offset", h.img.Offset())
	req.WantFence = a.has("want-fence")
	req.WantShutdown = a.has("want-shutdown")
	recs, resp := h.controller().Heartbeat(h.now, req)
	out := h.commit(recs)
	if resp.ErrorCode != 0 {
		return out + "\nresponse: " + errName(resp.ErrorCode)
	}
	return out + fmt.Sprintf("\nresponse: caught-up=%t fenced=%t should-shutdown=%t", resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown)
}

// contact notes a heartbeat's arrival, now or ago=DURATION before,
// handed to the controller after the fact.
func (h *harness) contact(a args) string {
	id := int32(h.int(a, "id", 0))
	at := h.now
	if ago, ok := a.get("ago"); ok {
		at = at.Add(-h.duration(ago))
	}
	h.controller().Contact(id, h.int(a, "epoch", h.brokerEpoch(id)), at)
	return "ok"
}

func (h *harness) createTopic(a args) string {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.ValidateOnly = a.has("validate-only")
	for _, name := range a.all("name") {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = name
		t.NumPartitions = int32(h.int(a, "partitions", -1))
		t.ReplicationFactor = int16(h.int(a, "rf", -1))
		if as, ok := a.get("assign"); ok {
			for i, rs := range strings.Split(as, ";") {
				ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				ra.Partition, ra.Replicas = int32(i), h.ints(rs)
				t.ReplicaAssignment = append(t.ReplicaAssignment, ra)
			}
		}
		for _, kv := range a.all("config") {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			k, v, hasValue := strings.Cut(kv, "=")
			c.Name = k
			if hasValue {
				c.Value = &v
			}
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
	}
	recs, resp := h.controller().CreateTopics(req, a.has("internal"))
	out := h.commit(recs)
	for _, t := range resp.Topics {
		out += fmt.Sprintf("\n%s: %s", t.Topic, errWithMessage(t.ErrorCode, t.ErrorMessage))
		if t.ErrorCode == 0 {
			out += fmt.Sprintf(" partitions=%d rf=%d", t.NumPartitions, t.ReplicationFactor)
			if a.has("show-configs") {
				for _, c := range t.Configs {
					if c.Source != ConfigSourceDefault {
						out += fmt.Sprintf("\n  %s=%s source=%d", c.Name, *c.Value, c.Source)
					}
				}
			}
		}
	}
	return out
}

func (h *harness) deleteTopic(a args) string {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	for _, kv := range a {
		t := kmsg.NewDeleteTopicsRequestTopic()
		switch kv.k {
		case "name":
			t.Topic = strp(kv.v)
		case "id":
			t.TopicID = h.topicID(kv.v)
		case "both":
			t.Topic, t.TopicID = strp(kv.v), h.topicID(kv.v)
		case "neither":
		default:
			continue
		}
		req.Topics = append(req.Topics, t)
	}
	recs, resp := h.controller().DeleteTopics(req)
	out := h.commit(recs)
	for _, t := range resp.Topics {
		name := "<nil>"
		if t.Topic != nil {
			name = *t.Topic
		}
		out += fmt.Sprintf("\n%s: %s", name, errWithMessage(t.ErrorCode, t.ErrorMessage))
	}
	return out
}

func (h *harness) createPartitions(a args) string {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.ValidateOnly = a.has("validate-only")
	for _, name := range a.all("name") {
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic = name
		t.Count = int32(h.int(a, "count", 0))
		if as, ok := a.get("assign"); ok {
			t.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{}
			for _, rs := range strings.Split(as, ";") {
				ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
				ra.Replicas = h.ints(rs)
				t.Assignment = append(t.Assignment, ra)
			}
		}
		req.Topics = append(req.Topics, t)
	}
	recs, resp := h.controller().CreatePartitions(req)
	out := h.commit(recs)
	for _, t := range resp.Topics {
		out += fmt.Sprintf("\n%s: %s", t.Topic, errWithMessage(t.ErrorCode, t.ErrorMessage))
	}
	return out
}

func (h *harness) alterPartition(a args) string {
	broker := int32(h.int(a, "broker", 0))
	topic, _ := a.get("topic")
	partition := int32(h.int(a, "partition", 0))
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = int16(h.int(a, "version", 3))
	req.BrokerID = broker
	req.BrokerEpoch = h.int(a, "broker-epoch", h.brokerEpoch(broker))
	var p Partition
	if _, cur, ok := partitionOf(h.img, PartitionKey{h.topicID(topic), partition}); ok {
		p = *cur
	}
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic, rt.TopicID = topic, h.topicID(topic)
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition = partition
	rp.LeaderEpoch = int32(h.int(a, "leader-epoch", int64(p.LeaderEpoch)))
	rp.PartitionEpoch = int32(h.int(a, "partition-epoch", int64(p.PartitionEpoch)))
	rp.LeaderRecoveryState = int8(h.int(a, "lrs", 0))
	isr, _ := a.get("isr")
	rp.NewISR = h.ints(isr)
	epochs := map[int32]int64{}
	if v, ok := a.get("isr-epochs"); ok {
		for _, pair := range strings.Split(v, ",") {
			id, e, _ := strings.Cut(pair, ":")
			n, _ := strconv.ParseInt(id, 10, 32)
			ep, _ := strconv.ParseInt(e, 10, 64)
			epochs[int32(n)] = ep
		}
	}
	for _, id := range rp.NewISR {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID, m.BrokerEpoch = id, h.brokerEpoch(id)
		if e, ok := epochs[id]; ok {
			m.BrokerEpoch = e
		}
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	recs, resp := h.controller().AlterPartition(req)
	out := h.commit(recs)
	if resp.ErrorCode != 0 {
		return out + "\nresponse: " + errName(resp.ErrorCode)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out += fmt.Sprintf("\n%s-%d: %s", topic, p.Partition, errName(p.ErrorCode))
			if p.ErrorCode == 0 {
				out += fmt.Sprintf(" leader=%d leader-epoch=%d partition-epoch=%d isr=%s", p.LeaderID, p.LeaderEpoch, p.PartitionEpoch, ids(p.ISR))
			}
		}
	}
	return out
}

func (h *harness) elect(a args) string {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 2
	typ, _ := a.get("type")
	switch typ {
	case "preferred":
		req.ElectionType = ElectionPreferred
	case "unclean":
		req.ElectionType = ElectionUnclean
	default:
		req.ElectionType = int8(h.int(a, "type", 0))
	}
	for _, topic := range a.all("topic") {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = topic
		ps, _ := a.get("partitions")
		rt.Partitions = h.ints(ps)
		req.Topics = append(req.Topics, rt)
	}
	recs, resp := h.controller().ElectLeaders(req)
	out := h.commit(recs)
	if resp.ErrorCode != 0 {
		return out + "\nresponse: " + errName(resp.ErrorCode)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out += fmt.Sprintf("\n%s-%d: %s", t.Topic, p.Partition, errName(p.ErrorCode))
		}
	}
	return out
}

// alter-quotas entity=user:alice,client-id:<default> set=KEY:VALUE remove=KEY [validate-only]
// (entity may repeat: one entry each, with the same ops)
func (h *harness) alterQuotas(a args) string {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.ValidateOnly = a.has("validate-only")
	for _, ent := range a.all("entity") {
		entry := kmsg.NewAlterClientQuotasRequestEntry()
		for _, c := range strings.Split(ent, ",") {
			typ, name, _ := strings.Cut(c, ":")
			en := kmsg.NewAlterClientQuotasRequestEntryEntity()
			en.Type = typ
			if name != "<default>" {
				en.Name = kmsg.StringPtr(name)
			}
			entry.Entity = append(entry.Entity, en)
		}
		for _, kv := range a.all("set") {
			k, v, _ := strings.Cut(kv, ":")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				h.t.Fatalf("set=%s: %v", kv, err)
			}
			entry.Ops = append(entry.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: k, Value: f})
		}
		for _, k := range a.all("remove") {
			entry.Ops = append(entry.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: k, Remove: true})
		}
		req.Entries = append(req.Entries, entry)
	}
	recs, resp := h.controller().AlterClientQuotas(req)
	out := h.commit(recs)
	for i, e := range resp.Entries {
		out += fmt.Sprintf("\n%s: %s", a.all("entity")[i], errName(e.ErrorCode))
		if e.ErrorMessage != nil {
			out += " (" + *e.ErrorMessage + ")"
		}
	}
	return out
}

// alter-scram [delete=USER:MECHANISM ...] [upsert=USER:MECHANISM:ITERATIONS[:SALT:SALTED] ...]
// MECHANISM is SCRAM-SHA-256, SCRAM-SHA-512 or a number (another name: 0); SALT and SALTED
// are strings (default "salt" and "salted-<USER>"; "-" for empty).
func (h *harness) alterScram(a args) string {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	mech := func(s string) int8 {
		if m := ScramMechanismFromName(s); m != ScramUnknown {
			return m
		}
		n, _ := strconv.Atoi(s) // any other name: 0, unknown
		return int8(n)
	}
	for _, d := range a.all("delete") {
		user, m, _ := strings.Cut(d, ":")
		req.Deletions = append(req.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: user, Mechanism: mech(m)})
	}
	for _, u := range a.all("upsert") {
		f := strings.Split(u, ":")
		it, err := strconv.Atoi(f[2])
		if err != nil {
			h.t.Fatalf("upsert=%s: %v", u, err)
		}
		salt, salted := "salt", "salted-"+f[0]
		if len(f) == 5 {
			salt, salted = strings.Trim(f[3], "-"), strings.Trim(f[4], "-")
		}
		req.Upsertions = append(req.Upsertions, kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
			Name: f[0], Mechanism: mech(f[1]), Iterations: int32(it), Salt: []byte(salt), SaltedPassword: []byte(salted),
		})
	}
	recs, resp := h.controller().AlterUserScramCredentials(req)
	out := h.commit(recs)
	for _, r := range resp.Results {
		out += fmt.Sprintf("\n%s: %s", r.User, errName(r.ErrorCode))
		if r.ErrorMessage != nil {
			out += " (" + *r.ErrorMessage + ")"
		}
	}
	return out
}

// describe-scram [user=NAME ...]
func (h *harness) describeScram(a args) string {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range a.all("user") {
		req.Users = append(req.Users, kmsg.DescribeUserSCRAMCredentialsRequestUser{Name: u})
	}
	resp := DescribeUserScramCredentials(h.img, req)
	if len(resp.Results) == 0 {
		return "none"
	}
	var lines []string
	for _, r := range resp.Results {
		line := r.User + ":"
		if r.ErrorCode != 0 {
			line += " " + errName(r.ErrorCode) + " (" + *r.ErrorMessage + ")"
		}
		for _, c := range r.CredentialInfos {
			line += fmt.Sprintf(" %s/%d", ScramMechanismName(c.Mechanism), c.Iterations)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// describe-quotas [filter=TYPE:exact:NAME|TYPE:default|TYPE:any ...] [strict]
func (h *harness) describeQuotas(a args) string {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = a.has("strict")
	for _, f := range a.all("filter") {
		parts := strings.SplitN(f, ":", 3)
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType = parts[0]
		switch parts[1] {
		case "exact":
			c.MatchType, c.Match = kmsg.QuotasMatchTypeExact, kmsg.StringPtr(parts[2])
		case "default":
			c.MatchType = kmsg.QuotasMatchTypeDefault
		default:
			c.MatchType = kmsg.QuotasMatchTypeAny
		}
		req.Components = append(req.Components, c)
	}
	resp := DescribeClientQuotas(h.img, req)
	if resp.ErrorCode != 0 {
		return "response: " + errName(resp.ErrorCode) + " (" + *resp.ErrorMessage + ")"
	}
	if resp.Entries == nil {
		// Encoded as a null array, which the Java Admin dereferences.
		return "response: null entries"
	}
	var lines []string
	for _, e := range resp.Entries {
		var parts []QuotaEntityPart
		for _, en := range e.Entity {
			parts = append(parts, QuotaEntityPart{EntityType: en.Type, EntityName: en.Name})
		}
		ent, _ := QuotaEntityFromParts(parts)
		line := ent.String() + ":"
		for _, v := range e.Values {
			line += fmt.Sprintf(" %s=%s", v.Key, quotaValue(v.Value))
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

// unregister id=N
func (h *harness) unregister(a args) string {
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = int32(h.int(a, "id", 0))
	recs, resp := h.controller().UnregisterBroker(req)
	return h.commit(recs) + "\nresponse: " + errName(resp.ErrorCode)
}

// reassign topic=T partition=N replicas=1,2 (or cancel) [no-rf-change]
func (h *harness) reassign(a args) string {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version = 1
	req.AllowReplicationFactorChange = !a.has("no-rf-change")
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic, _ = a.get("topic")
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition = int32(h.int(a, "partition", 0))
	if v, ok := a.get("replicas"); ok {
		rp.Replicas = h.ints(v)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	recs, resp := h.controller().AlterPartitionReassignments(req)
	out := h.commit(recs)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out += fmt.Sprintf("\n%s-%d: %s", t.Topic, p.Partition, errName(p.ErrorCode))
		}
	}
	return out
}

// list-reassignments [topic=T partitions=0,1]
func (h *harness) listReassignments(a args) string {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	if topic, ok := a.get("topic"); ok {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic = topic
		ps, _ := a.get("partitions")
		rt.Partitions = h.ints(ps)
		req.Topics = append(req.Topics, rt)
	}
	resp := ListPartitionReassignments(h.img, req)
	var lines []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			lines = append(lines, fmt.Sprintf("%s-%d replicas=%s adding=%s removing=%s", t.Topic, p.Partition, ids(p.Replicas), ids(p.AddingReplicas), ids(p.RemovingReplicas)))
		}
	}
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

func (h *harness) allocPIDs(a args) string {
	broker := int32(h.int(a, "broker", 0))
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID = broker
	req.BrokerEpoch = h.int(a, "epoch", h.brokerEpoch(broker))
	recs, resp := h.controller().AllocateProducerIds(req)
	out := h.commit(recs)
	if resp.ErrorCode != 0 {
		return out + "\nresponse: " + errName(resp.ErrorCode)
	}
	return out + fmt.Sprintf("\nresponse: start=%d len=%d", resp.ProducerIDStart, resp.ProducerIDLen)
}

func resourceType(s string) kmsg.ConfigResourceType {
	switch s {
	case "topic":
		return kmsg.ConfigResourceTypeTopic
	case "broker":
		return kmsg.ConfigResourceTypeBroker
	case "broker-logger":
		return kmsg.ConfigResourceTypeBrokerLogger
	}
	n, _ := strconv.Atoi(s)
	return kmsg.ConfigResourceType(n)
}

func (h *harness) incrAlterConfigs(a args) string {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = a.has("validate-only")
	var r *kmsg.IncrementalAlterConfigsRequestResource
	for _, kv := range a {
		ops := map[string]kmsg.IncrementalAlterConfigOp{"set": 0, "delete": 1, "append": 2, "subtract": 3, "op9": 9}
		switch kv.k {
		case "type":
			req.Resources = append(req.Resources, kmsg.NewIncrementalAlterConfigsRequestResource())
			r = &req.Resources[len(req.Resources)-1]
			r.ResourceType = resourceType(kv.v)
		case "name":
			r.ResourceName = kv.v
		case "set", "delete", "append", "subtract", "op9":
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Op = ops[kv.k]
			k, v, hasValue := strings.Cut(kv.v, "=")
			c.Name = k
			if hasValue {
				c.Value = &v
			}
			r.Configs = append(r.Configs, c)
		}
	}
	recs, resp := h.controller().IncrementalAlterConfigs(req)
	out := h.commit(recs)
	for _, r := range resp.Resources {
		out += fmt.Sprintf("\n%s:%s: %s", strings.ToLower(r.ResourceType.String()), r.ResourceName, errWithMessage(r.ErrorCode, r.ErrorMessage))
	}
	return out
}

func (h *harness) alterConfigs(a args) string {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.ValidateOnly = a.has("validate-only")
	var r *kmsg.AlterConfigsRequestResource
	for _, kv := range a {
		switch kv.k {
		case "type":
			req.Resources = append(req.Resources, kmsg.NewAlterConfigsRequestResource())
			r = &req.Resources[len(req.Resources)-1]
			r.ResourceType = resourceType(kv.v)
		case "name":
			r.ResourceName = kv.v
		case "config":
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			k, v, hasValue := strings.Cut(kv.v, "=")
			c.Name = k
			if hasValue {
				c.Value = &v
			}
			r.Configs = append(r.Configs, c)
		}
	}
	recs, resp := h.controller().AlterConfigs(req)
	out := h.commit(recs)
	for _, r := range resp.Resources {
		out += fmt.Sprintf("\n%s:%s: %s", strings.ToLower(r.ResourceType.String()), r.ResourceName, errWithMessage(r.ErrorCode, r.ErrorMessage))
	}
	return out
}

// The ACL commands write an ACL as TYPE,PATTERN,NAME,PRINCIPAL,HOST,OP,PERM
// (commas, since principals and IPv6 hosts hold colons): each enum by its
// Kafka name in any case (topic, prefixed, describe-configs, allow) or by
// its code; in a filter, <null> for a null name, principal or host.

func aclEnum[T ~int8](parse func(string) (T, error), s string) T {
	if v, err := parse(s); err == nil {
		return v
	}
	if s == "two-phase-commit" {
		return T(ACLOperationTwoPhaseCommit)
	}
	n, _ := strconv.Atoi(s) // another name: 0, UNKNOWN
	return T(n)
}

type aclArg struct {
	typ             kmsg.ACLResourceType
	pattern         kmsg.ACLResourcePatternType
	name            *string
	principal, host *string
	op              kmsg.ACLOperation
	perm            kmsg.ACLPermissionType
}

func (h *harness) aclArg(v string) aclArg {
	f := strings.Split(v, ",")
	if len(f) != 7 {
		h.t.Fatalf("ACL %q: want TYPE,PATTERN,NAME,PRINCIPAL,HOST,OP,PERM", v)
	}
	str := func(s string) *string {
		if s == "<null>" {
			return nil
		}
		return &s
	}
	return aclArg{
		typ: aclEnum(kmsg.ParseACLResourceType, f[0]), pattern: aclEnum(kmsg.ParseACLResourcePatternType, f[1]),
		name: str(f[2]), principal: str(f[3]), host: str(f[4]),
		op: aclEnum(kmsg.ParseACLOperation, f[5]), perm: aclEnum(kmsg.ParseACLPermissionType, f[6]),
	}
}

func aclLine(a ACL) string {
	return fmt.Sprintf("%s:%s:%s %s host=%s %s %s", a.ResourceType, a.PatternType, a.ResourceName, a.Principal, a.Host, ACLOperationName(a.Operation), a.Permission)
}

// create-acls [version=N] acl=TYPE,PATTERN,NAME,PRINCIPAL,HOST,OP,PERM ...
func (h *harness) createACLs(a args) string {
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = int16(h.int(a, "version", 3))
	for _, v := range a.all("acl") {
		x := h.aclArg(v)
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourcePatternType, c.ResourceName = x.typ, x.pattern, *x.name
		c.Principal, c.Host, c.Operation, c.PermissionType = *x.principal, *x.host, x.op, x.perm
		req.Creations = append(req.Creations, c)
	}
	recs, resp := h.controller().CreateAcls(req)
	out := h.commit(recs)
	for i, r := range resp.Results {
		out += fmt.Sprintf("\n%s: %s", a.all("acl")[i], errWithMessage(r.ErrorCode, r.ErrorMessage))
	}
	return out
}

// delete-acls [version=N] filter=TYPE,PATTERN,NAME,PRINCIPAL,HOST,OP,PERM ...
func (h *harness) deleteACLs(a args) string {
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = int16(h.int(a, "version", 3))
	for _, v := range a.all("filter") {
		x := h.aclArg(v)
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType, f.ResourceName = x.typ, x.pattern, x.name
		f.Principal, f.Host, f.Operation, f.PermissionType = x.principal, x.host, x.op, x.perm
		req.Filters = append(req.Filters, f)
	}
	recs, resp := h.controller().DeleteAcls(req)
	out := h.commit(recs)
	for i, r := range resp.Results {
		out += fmt.Sprintf("\n%s: %s", a.all("filter")[i], errWithMessage(r.ErrorCode, r.ErrorMessage))
		for _, m := range r.MatchingACLs {
			out += "\n  " + aclLine(ACL{
				ResourceType: m.ResourceType, ResourceName: m.ResourceName, PatternType: m.ResourcePatternType,
				Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType,
			})
			if m.ErrorCode != 0 {
				out += " " + errWithMessage(m.ErrorCode, m.ErrorMessage)
			}
		}
	}
	return out
}

// describe-acls [version=N] filter=TYPE,PATTERN,NAME,PRINCIPAL,HOST,OP,PERM
func (h *harness) describeACLs(a args) string {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = int16(h.int(a, "version", 3))
	v, _ := a.get("filter")
	x := h.aclArg(v)
	req.ResourceType, req.ResourcePatternType, req.ResourceName = x.typ, x.pattern, x.name
	req.Principal, req.Host, req.Operation, req.PermissionType = x.principal, x.host, x.op, x.perm
	resp := DescribeAcls(h.img, req)
	if resp.ErrorCode != 0 {
		return "response: " + errWithMessage(resp.ErrorCode, resp.ErrorMessage)
	}
	var lines []string
	for _, r := range resp.Resources {
		lines = append(lines, fmt.Sprintf("%s:%s:%s", r.ResourceType, r.ResourcePatternType, r.ResourceName))
		for _, e := range r.ACLs {
			lines = append(lines, fmt.Sprintf("  %s host=%s %s %s", e.Principal, e.Host, ACLOperationName(e.Operation), e.PermissionType))
		}
	}
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

func (h *harness) authorizer(a args) *Authorizer {
	az := &Authorizer{AllowEveryoneIfNoACLFound: a.has("allow-if-none")}
	for _, s := range a.all("super") {
		if az.SuperUsers == nil {
			az.SuperUsers = map[string]bool{}
		}
		az.SuperUsers[s] = true
	}
	return az
}

func decision(allowed bool) string {
	if allowed {
		return "ALLOWED"
	}
	return "DENIED"
}

// authorize principal=P host=H op=OP resource=TYPE:NAME [super=P ...] [allow-if-none]
func (h *harness) authorize(a args) string {
	principal, _ := a.get("principal")
	host, _ := a.get("host")
	op, _ := a.get("op")
	res, _ := a.get("resource")
	typ, name, _ := strings.Cut(res, ":")
	return decision(h.authorizer(a).Authorize(h.img, principal, host, aclEnum(kmsg.ParseACLOperation, op), aclEnum(kmsg.ParseACLResourceType, typ), name))
}

// authorize-any principal=P host=H op=OP type=TYPE [super=P ...] [allow-if-none]
func (h *harness) authorizeAny(a args) string {
	principal, _ := a.get("principal")
	host, _ := a.get("host")
	op, _ := a.get("op")
	typ, _ := a.get("type")
	return decision(h.authorizer(a).AuthorizeAny(h.img, principal, host, aclEnum(kmsg.ParseACLOperation, op), aclEnum(kmsg.ParseACLResourceType, typ)))
}

// updateFeatures sets feature levels (name=level ...), as kafka-features.sh
// upgrade does; "downgrade" makes it a safe downgrade.
func (h *harness) updateFeatures(a args) string {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version = 1
	for _, kv := range a {
		if kv.k == "downgrade" {
			continue
		}
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = kv.k, int16(h.int(a, kv.k, 0)), 1
		if a.has("downgrade") {
			u.UpgradeType = 2
		}
		req.FeatureUpdates = append(req.FeatureUpdates, u)
	}
	recs, resp := h.controller().UpdateFeatures(req)
	out := h.commit(recs)
	return out + "\nresponse: " + errWithMessage(resp.ErrorCode, resp.ErrorMessage)
}
