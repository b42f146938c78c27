package integration

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

// atVersion sends a request at exactly version v: kgo sends the lower of a
// request's MaxVersion and the broker's.
type atVersion struct {
	kmsg.Request
	v int16
}

func (r atVersion) MaxVersion() int16 { return r.v }

// TestForwardedRequestsWorkAtEveryVersion sends each request a broker
// forwards to the controller at every version the broker advertises, the
// way older clients do (kafkajs sends DeleteTopics v1, sarama v3), and
// checks each had its effect: the broker re-encodes what it forwards at
// the newest version, and a field that only old versions carry must
// survive that; the controller's tagged field for the forwarding broker
// must not reach the client.
func TestForwardedRequestsWorkAtEveryVersion(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}})
	c.WaitReady(20 * time.Second)
	cl, adm := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	advertised := map[int16]int16{}
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range av.ApiKeys {
		advertised[k.ApiKey] = k.MaxVersion
	}
	send := func(req kmsg.Request, v int16) kmsg.Response {
		t.Helper()
		resp, err := cl.Request(ctx, atVersion{req, v})
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), v, err)
		}
		// The controller's answer to the forwarding broker carries a
		// tagged field of Keel's own; it must not reach the client.
		if tags, ok := reflect.ValueOf(resp).Elem().FieldByName("UnknownTags").Addr().Interface().(*kmsg.Tags); ok && tags.Len() > 0 {
			t.Fatalf("%s v%d: the response has %d unknown tagged fields", kmsg.NameForKey(req.Key()), v, tags.Len())
		}
		return resp
	}
	versions := func(key kmsg.Key) []int16 {
		var vs []int16
		for v := int16(0); v <= advertised[key.Int16()]; v++ {
			vs = append(vs, v)
		}
		if len(vs) < 2 {
			t.Fatalf("%s: advertised up to v%d", key.Name(), advertised[key.Int16()])
		}
		return vs
	}
	partitions := func(topic string) int {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		// Wrapped, so that kgo does not answer from its metadata cache.
		resp := send(req, req.MaxVersion()).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			return 0
		}
		return len(resp.Topics[0].Partitions)
	}
	topicConfig := func(topic, key string) string {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		v, err := rc.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Configs {
			if c.Key == key && c.Value != nil {
				return *c.Value
			}
		}
		return ""
	}

	var topics []string
	for _, v := range versions(kmsg.CreateTopics) {
		name := fmt.Sprintf("fwd-%d", v)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr(fmt.Sprint(100_000+int(v)))
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
		resp := send(req, v).(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("CreateTopics v%d: %+v", v, resp.Topics)
		}
		if n, r := partitions(name), topicConfig(name, "retention.ms"); n != 2 || r != fmt.Sprint(100_000+int(v)) {
			t.Fatalf("CreateTopics v%d: %d partitions, retention.ms %q", v, n, r)
		}
		topics = append(topics, name)
	}

	for i, v := range versions(kmsg.CreatePartitions) {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topics[i], 3
		req.Topics = append(req.Topics, rt)
		resp := send(req, v).(*kmsg.CreatePartitionsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || partitions(topics[i]) != 3 {
			t.Fatalf("CreatePartitions v%d: %+v", v, resp.Topics)
		}
	}

	for i, v := range versions(kmsg.AlterConfigs) {
		req := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topics[i]
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "segment.ms", kmsg.StringPtr(fmt.Sprint(200_000+int(v)))
		rr.Configs = append(rr.Configs, cfg)
		req.Resources = append(req.Resources, rr)
		resp := send(req, v).(*kmsg.AlterConfigsResponse)
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || topicConfig(topics[i], "segment.ms") != fmt.Sprint(200_000+int(v)) {
			t.Fatalf("AlterConfigs v%d: %+v", v, resp.Resources)
		}
	}

	for i, v := range versions(kmsg.IncrementalAlterConfigs) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topics[i]
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = "max.message.bytes", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(fmt.Sprint(300_000+int(v)))
		rr.Configs = append(rr.Configs, cfg)
		req.Resources = append(req.Resources, rr)
		resp := send(req, v).(*kmsg.IncrementalAlterConfigsResponse)
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || topicConfig(topics[i], "max.message.bytes") != fmt.Sprint(300_000+int(v)) {
			t.Fatalf("IncrementalAlterConfigs v%d: %+v", v, resp.Resources)
		}
	}

	for _, v := range versions(kmsg.ElectLeaders) {
		req := kmsg.NewPtrElectLeadersRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topics[0], []int32{0, 1}
		req.Topics = append(req.Topics, rt)
		resp := send(req, v).(*kmsg.ElectLeadersResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("ElectLeaders v%d: %+v", v, resp.Topics)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != kerr.ElectionNotNeeded.Code {
				t.Fatalf("ElectLeaders v%d partition %d: %v", v, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}

	// AlterPartitionReassignments: to the replicas it has (nothing to do),
	// then a cancel with nothing going, answered as such.
	for _, v := range versions(kmsg.AlterPartitionAssignments) {
		for _, target := range [][]int32{{1}, nil} {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = topics[0]
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Replicas = target
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := send(req, v).(*kmsg.AlterPartitionAssignmentsResponse)
			want := int16(0)
			if target == nil {
				want = kerr.NoReassignmentInProgress.Code
			}
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != want {
				t.Fatalf("AlterPartitionReassignments v%d to %v: %+v", v, target, resp)
			}
		}
	}

	// UpdateFeatures at every version: a downgrade (v0's AllowDowngrade,
	// which the newest version lacks, must reach the controller: without it
	// the refusal would be for a missing upgrade type) is refused with
	// Kafka's reason, and below v2 with a result per feature; metadata.version
	// at the level it has succeeds.
	for _, v := range versions(kmsg.UpdateFeatures) {
		for _, level := range []int16{metadata.LatestMetadataVersion - 1, metadata.LatestMetadataVersion} {
			req := kmsg.NewPtrUpdateFeaturesRequest()
			req.TimeoutMillis = 30_000
			u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			u.Feature, u.MaxVersionLevel, u.AllowDowngrade, u.UpgradeType = metadata.MetadataVersionFeature, level, true, 2
			req.FeatureUpdates = append(req.FeatureUpdates, u)
			resp := send(req, v).(*kmsg.UpdateFeaturesResponse)
			want, results := int16(0), 1
			if level < metadata.LatestMetadataVersion {
				want = kerr.InvalidUpdateVersion.Code
			}
			if v >= 2 {
				results = 0
			}
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			if resp.ErrorCode != want || (want != 0 && !strings.Contains(msg, "Refusing to perform the requested downgrade")) ||
				len(resp.Results) != results || (results > 0 && (resp.Results[0].Feature != metadata.MetadataVersionFeature || resp.Results[0].ErrorCode != want)) {
				t.Fatalf("UpdateFeatures v%d to %d: %v %q %+v", v, level, kerr.ErrorForCode(resp.ErrorCode), msg, resp.Results)
			}
		}
	}

	// DeleteTopics by name, at every version: one topic that exists and one
	// that does not; both must be answered, and the first must be gone.
	deleteVersions := versions(kmsg.DeleteTopics)
	if len(topics) < len(deleteVersions) {
		t.Fatalf("%d topics for %d DeleteTopics versions", len(topics), len(deleteVersions))
	}
	for i, v := range deleteVersions {
		name, missing := topics[i], fmt.Sprintf("never-created-%d", v)
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 30_000
		if v < 6 {
			req.TopicNames = []string{name, missing}
		} else {
			for _, n := range []string{name, missing} {
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr(n)
				req.Topics = append(req.Topics, rt)
			}
		}
		resp := send(req, v).(*kmsg.DeleteTopicsResponse)
		got := map[string]int16{}
		for _, rt := range resp.Topics {
			if rt.Topic != nil {
				got[*rt.Topic] = rt.ErrorCode
			}
		}
		if code, ok := got[name]; !ok || code != 0 || got[missing] != kerr.UnknownTopicOrPartition.Code || len(got) != 2 {
			t.Fatalf("DeleteTopics v%d: answered %v", v, got)
		}
		if n := partitions(name); n != 0 {
			t.Fatalf("DeleteTopics v%d: %s still has %d partitions", v, name, n)
		}
	}
}
