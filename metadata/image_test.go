package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestImageApplyIsCopyOnWrite(t *testing.T) {
	topicID := NewUuid()
	img0 := EmptyImage()
	img1, ch, err := img0.Apply(1, []Record{
		&RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 10, Fenced: true, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}},
		&TopicRecord{Name: "orders", TopicID: topicID},
		&PartitionRecord{PartitionID: 0, TopicID: topicID, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Partitions) != 1 || len(ch.Brokers) != 1 {
		t.Fatalf("changes %+v", ch)
	}
	if img0.NumTopics() != 0 || len(img0.Brokers()) != 0 {
		t.Fatal("apply modified the previous image")
	}
	img2, ch, err := img1.Apply(2, []Record{
		&UnfenceBrokerRecord{ID: 1, Epoch: 10},
		&PartitionChangeRecord{PartitionID: 0, TopicID: topicID, Leader: NoLeader, ISR: []int32{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p1 := mustTopic(t, img1, "orders").Partitions[0]
	p2 := mustTopic(t, img2, "orders").Partitions[0]
	if p1.Leader != 1 || p1.LeaderEpoch != 0 || p1.PartitionEpoch != 0 {
		t.Fatalf("old partition changed: %+v", p1)
	}
	if p2.Leader != NoLeader || p2.LeaderEpoch != 1 || p2.PartitionEpoch != 1 || len(p2.ISR) != 0 {
		t.Fatalf("new partition %+v", p2)
	}
	if b, _ := img1.Broker(1); !b.Fenced {
		t.Fatal("old broker registration changed")
	}
	if b, _ := img2.Broker(1); b.Fenced {
		t.Fatal("broker not unfenced")
	}
	if img2.Offset() != 2 {
		t.Fatalf("offset %d", img2.Offset())
	}
}

func TestImageApplyRejectsContradictionsAtomically(t *testing.T) {
	img, _, _ := EmptyImage().Apply(1, []Record{&RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 5}})
	cases := map[string][]Record{
		"partition of unknown topic":   {&PartitionRecord{TopicID: NewUuid()}},
		"fence with a stale epoch":     {&FenceBrokerRecord{ID: 1, Epoch: 4}},
		"unfence an unknown broker":    {&UnfenceBrokerRecord{ID: 9, Epoch: 1}},
		"second record of batch fails": {&TopicRecord{Name: "a", TopicID: NewUuid()}, &TopicRecord{Name: "a", TopicID: NewUuid()}},
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			next, _, err := img.Apply(2, recs)
			if err == nil {
				t.Fatal("applied")
			}
			if next != img || img.NumTopics() != 0 {
				t.Fatal("a failed batch changed the image")
			}
		})
	}
}

func TestSnapshotRecordsRebuildTheImage(t *testing.T) {
	topicID := NewUuid()
	v := "1000"
	img, _, err := EmptyImage().Apply(7, []Record{
		&RegisterBrokerRecord{BrokerID: 2, BrokerEpoch: 3, Rack: "r1"},
		&TopicRecord{Name: "t", TopicID: topicID},
		&PartitionRecord{PartitionID: 0, TopicID: topicID, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
		&PartitionRecord{PartitionID: 1, TopicID: topicID, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
		&PartitionRecord{PartitionID: 2, TopicID: topicID, Replicas: []int32{2, 3, 4}, ISR: []int32{2, 3}, Leader: 2},
		// An empty ISR (KIP-966) is a change, not "no change".
		&PartitionChangeRecord{PartitionID: 2, TopicID: topicID, Leader: NoLeader, ISR: []int32{}, ELR: []int32{2, 3}, LastKnownELR: []int32{2}},
		&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "t", Name: "retention.ms", Value: &v},
		&ProducerIdsRecord{BrokerID: 2, BrokerEpoch: 3, NextProducerID: 1000},
		&FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 1},
		&ClientQuotaRecord{Entity: []QuotaEntityPart{{EntityType: QuotaUser, EntityName: &v}, {EntityType: QuotaClientID}},
			Key: QuotaProducerByteRate, Value: 4096},
		&UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512, Salt: []byte("s"), StoredKey: []byte("k1"), ServerKey: []byte("k2"), Iterations: 8192},
		&AccessControlEntryRecord{ID: Uuid{9}, ResourceType: int8(kmsg.ACLResourceTypeTopic), ResourceName: "t", PatternType: int8(kmsg.ACLResourcePatternTypeLiteral),
			Principal: "User:alice", Host: "*", Operation: int8(kmsg.ACLOperationRead), PermissionType: int8(kmsg.ACLPermissionTypeAllow)},
		&AccessControlEntryRecord{ID: Uuid{3}, ResourceType: int8(kmsg.ACLResourceTypeGroup), ResourceName: "g-", PatternType: int8(kmsg.ACLResourcePatternTypePrefixed),
			Principal: "User:*", Host: "10.0.0.1", Operation: int8(kmsg.ACLOperationAll), PermissionType: int8(kmsg.ACLPermissionTypeDeny)},
		&AccessControlEntryRecord{ID: Uuid{5}, ResourceType: int8(kmsg.ACLResourceTypeTopic), ResourceName: "t", PatternType: int8(kmsg.ACLResourcePatternTypeLiteral),
			Principal: "User:bob", Host: "*", Operation: int8(kmsg.ACLOperationRead), PermissionType: int8(kmsg.ACLPermissionTypeAllow)},
		&RemoveAccessControlEntryRecord{ID: Uuid{5}},
	})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := EncodeBatch(img.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := DecodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := EmptyImage().Apply(7, recs)
	if err != nil {
		t.Fatal(err)
	}
	enc2, _ := EncodeBatch(again.SnapshotRecords())
	if !bytes.Equal(enc, enc2) {
		t.Fatalf("snapshot round trip differs:\n%s\n%s", enc, enc2)
	}
	if t2, _ := again.Topic("t"); len(t2.Partitions) != 3 || len(t2.Partitions[2].ISR) != 0 || t2.Partitions[2].Leader != NoLeader ||
		!slices.Equal(t2.Partitions[2].ELR, []int32{2, 3}) || !slices.Equal(t2.Partitions[2].LastKnownELR, []int32{2}) {
		t.Fatalf("eligible leader replicas lost: %+v", t2.Partitions[2])
	}
	if again.Configs(ConfigResource{ConfigResourceTopic, "t"})["retention.ms"] != "1000" || again.NextProducerID() != 1000 {
		t.Fatal("configs or producer ids lost")
	}
	quota := QuotaEntity{User: QuotaEntityName{Set: true, Name: "1000"}, ClientID: QuotaEntityName{Set: true, Default: true}}
	if q, ok := again.ClientQuota(quota, QuotaProducerByteRate); !ok || q != 4096 {
		t.Fatalf("client quota lost: %v %v", q, ok)
	}
	if c, ok := again.ScramCredential("alice", ScramSHA512); !ok || c.Iterations != 8192 || string(c.ServerKey) != "k2" {
		t.Fatalf("SCRAM credential lost: %v %v", c, ok)
	}
	if got, want := again.ACLs(), img.ACLs(); len(want) != 2 || !slices.Equal(got, want) || want[0].ID != (Uuid{9}) {
		t.Fatalf("ACLs %v, want %v", got, want)
	}
	if az := (&Authorizer{}); !az.Authorize(again, "User:alice", "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "t") ||
		az.Authorize(again, "User:x", "10.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, "g-1") {
		t.Fatal("the rebuilt image decides differently")
	}
}

func TestDecodeBatchRejectsGarbage(t *testing.T) {
	good, _ := EncodeBatch([]Record{&NoOpRecord{}, &TopicRecord{Name: "x", TopicID: NewUuid()}})
	cases := map[string][]byte{
		"empty":           {},
		"wrong format":    {9},
		"short header":    good[:5],
		"length too long": good[:len(good)-1],
		"unknown type":    {1, 0, 99, 0, 0, 0, 0, 0, 2, '{', '}'},
		"future version":  {1, 0, 20, 0, 5, 0, 0, 0, 2, '{', '}'},
		"bad json":        {1, 0, 2, 0, 0, 0, 0, 0, 1, '{'},
	}
	for name, b := range cases {
		if _, err := DecodeBatch(b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	good, _ := EncodeBatch([]Record{&RegisterBrokerRecord{BrokerID: 1}, &PartitionChangeRecord{Leader: NoLeaderChange}})
	f.Add(good)
	acls, _ := EncodeBatch([]Record{
		&AccessControlEntryRecord{ID: Uuid{1}, ResourceType: 2, ResourceName: "ab", PatternType: 4, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3},
		&AccessControlEntryRecord{ID: Uuid{2}, ResourceType: 2, ResourceName: "a", PatternType: 4, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 2},
		&RemoveAccessControlEntryRecord{ID: Uuid{1}},
	})
	f.Add(acls)
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeBatch(b)
		if err != nil {
			return
		}
		// Whatever decodes must apply or be refused, never panic.
		_, _, _ = EmptyImage().Apply(0, recs)
	})
}

func mustTopic(t *testing.T, img *Image, name string) *Topic {
	t.Helper()
	tp, ok := img.Topic(name)
	if !ok {
		t.Fatalf("no topic %q", name)
	}
	return tp
}

// The topic maps are sharded copy-on-write: across many topics and
// batches that create, change and delete them, every image keeps exactly
// its own topics, however many shards later batches copied.
func TestImageTopicMapsAcrossBatches(t *testing.T) {
	type state struct {
		img   *Image
		names map[string]Uuid
	}
	cur := state{img: EmptyImage(), names: map[string]Uuid{}}
	var states []state
	off := int64(0)
	apply := func(recs []Record) {
		t.Helper()
		next, _, err := cur.img.Apply(off, recs)
		if err != nil {
			t.Fatal(err)
		}
		off++
		cur.img = next
		states = append(states, state{img: next, names: maps.Clone(cur.names)})
	}
	for b := range 20 {
		var recs []Record
		for i := range 100 {
			name, id := fmt.Sprintf("t-%d-%d", b, i), NewUuid()
			cur.names[name] = id
			recs = append(recs, &TopicRecord{Name: name, TopicID: id}, &PartitionRecord{TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
		}
		if b%3 == 2 { // delete a few of the earlier ones in the same batch
			for i := range 30 {
				name := fmt.Sprintf("t-%d-%d", b-1, i)
				recs = append(recs, &RemoveTopicRecord{TopicID: cur.names[name]})
				delete(cur.names, name)
			}
		}
		apply(recs)
		// An ISR change touches one topic's shard only.
		apply([]Record{&PartitionChangeRecord{TopicID: cur.names[fmt.Sprintf("t-%d-%d", b, 50)], ISR: []int32{}, Leader: NoLeader}})
	}
	for i, s := range states {
		if s.img.NumTopics() != len(s.names) {
			t.Fatalf("image %d: %d topics, want %d", i, s.img.NumTopics(), len(s.names))
		}
		topics := s.img.Topics()
		if len(topics) != len(s.names) || !slices.IsSortedFunc(topics, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("image %d: Topics() has %d, want %d sorted", i, len(topics), len(s.names))
		}
		for name, id := range s.names {
			byName, ok1 := s.img.Topic(name)
			byID, ok2 := s.img.TopicByID(id)
			if !ok1 || !ok2 || byName != byID || byName.ID != id {
				t.Fatalf("image %d: topic %s: by name %v %v, by id %v %v", i, name, byName, ok1, byID, ok2)
			}
		}
	}
	// The last image changed t-19-50's partition; the one before did not.
	before, after := states[len(states)-2].img, states[len(states)-1].img
	if p := mustTopic(t, before, "t-19-50").Partitions[0]; p.Leader != 1 {
		t.Fatalf("the image before the change sees leader %d", p.Leader)
	}
	if p := mustTopic(t, after, "t-19-50").Partitions[0]; p.Leader != NoLeader {
		t.Fatalf("the image after the change sees leader %d", p.Leader)
	}
}
