package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

func findConfig(t testing.TB, rc kadm.ResourceConfig, name string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("%s: no config %s", rc.Name, name)
	return kadm.Config{}
}

func TestTopicConfigsDescribeAndAlter(t *testing.T) {
	// log.retention.ms set in server.properties: topics report it as
	// STATIC_BROKER_CONFIG.
	c := newTestCluster(t, withConfig("log.retention.ms=3600000"))
	c.createTopic("cfg", 1, map[string]*string{"max.message.bytes": kmsgStr("2000")})
	adm := c.admin()
	ctx := testCtx(t)

	describe := func() kadm.ResourceConfig {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("cfg", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe: %v %v", err, rc.Err)
		}
		return rc
	}
	rc := describe()
	for _, want := range []struct {
		name, value string
		source      kmsg.ConfigSource
	}{
		{"max.message.bytes", "2000", kmsg.ConfigSourceDynamicTopicConfig},
		{"retention.ms", "3600000", kmsg.ConfigSourceStaticBrokerConfig},
		{"segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig},
		{"cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig},
	} {
		cfg := findConfig(t, rc, want.name)
		if cfg.MaybeValue() != want.value || cfg.Source != want.source {
			t.Errorf("%s = %s (%v), want %s (%v)", want.name, cfg.MaybeValue(), cfg.Source, want.value, want.source)
		}
	}
	if got := len(rc.Configs); got != len(metadata.TopicConfigNames()) {
		t.Errorf("%d configs described, want all %d", got, len(metadata.TopicConfigNames()))
	}
	// Synonyms: the topic's value, then the static broker value, then the
	// default, named after the broker config.
	syn := findConfig(t, rc, "retention.ms").Synonyms
	if len(syn) != 2 || syn[0].Key != "log.retention.ms" || syn[0].Source != kmsg.ConfigSourceStaticBrokerConfig || syn[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms synonyms %+v", syn)
	}
	if l := c.broker.lookup(tp("cfg", 0)).log.Config(); l.MaxMessageBytes != 2000 || l.RetentionMs != 3600000 {
		t.Fatalf("log config %+v", l)
	}

	// Incremental alter: the log follows once the answer is in.
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsgStr("7200000")},
		{Op: kadm.DeleteConfig, Name: "max.message.bytes"},
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kmsgStr("10485760")},
	}, "cfg")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resp)
	}
	if l := c.broker.lookup(tp("cfg", 0)).log.Config(); l.MaxMessageBytes != 1048588 || l.RetentionMs != 7200000 || l.SegmentBytes != 10485760 {
		t.Fatalf("log config after alter %+v", l)
	}
	rc = describe()
	if cfg := findConfig(t, rc, "retention.ms"); cfg.MaybeValue() != "7200000" || cfg.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms after alter: %s %v", cfg.MaybeValue(), cfg.Source)
	}
	// A bad value is refused by the controller.
	resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsgStr("-7")}}, "cfg")
	if err != nil || !errors.Is(resp[0].Err, kerr.InvalidConfig) {
		t.Fatalf("bad value: %v %+v", err, resp)
	}
	// Legacy AlterConfigs replaces every dynamic config.
	resp, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: kmsgStr("1")}}, "cfg")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter state: %v %+v", err, resp)
	}
	if cfg := findConfig(t, describe(), "retention.ms"); cfg.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("retention.ms after AlterConfigs: %v", cfg.Source)
	}

	// Unknown and illegal topics.
	rcs, _ := adm.DescribeTopicConfigs(ctx, "nope")
	if rc, _ := rcs.On("nope", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", rc.Err)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "bad name")
	if rc, _ := rcs.On("bad name", nil); !errors.Is(rc.Err, kerr.InvalidTopicException) {
		t.Fatalf("illegal topic: %v", rc.Err)
	}
}

// describeConfigsRequest is a v4 DescribeConfigs of one resource, with
// synonyms, of the configs named (all if none).
func describeConfigsRequest(typ kmsg.ConfigResourceType, name string, configs ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms = 4, true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	if len(configs) > 0 {
		r.ConfigNames = configs
	}
	req.Resources = append(req.Resources, r)
	return req
}

func TestDescribeConfigsVersionsAndDocs(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("d", 1, nil)
	rc := c.dialRaw(t)
	req := describeConfigsRequest(kmsg.ConfigResourceTypeTopic, "d", "segment.ms", "no.such.config")
	req.IncludeDocumentation = true
	resp := roundTrip[*kmsg.DescribeConfigsResponse](rc, req)
	cfgs := resp.Resources[0].Configs
	if len(cfgs) != 1 || cfgs[0].Name != "segment.ms" || cfgs[0].ConfigType != kmsg.ConfigTypeLong || cfgs[0].Documentation == nil || cfgs[0].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("configs %+v", cfgs)
	}
	// v0 has no sources, only IsDefault.
	req.Version = 0
	resp = roundTrip[*kmsg.DescribeConfigsResponse](rc, req)
	if cfgs = resp.Resources[0].Configs; len(cfgs) != 1 || !cfgs[0].IsDefault {
		t.Fatalf("v0 %+v", cfgs)
	}
}

func TestBrokerConfigs(t *testing.T) {
	c := newTestCluster(t, withConfig("num.partitions=3", "message.max.bytes=500000", "log.cleaner.min.cleanable.ratio=1"))
	adm := c.admin()
	ctx := testCtx(t)
	rc := describeOwnBrokerConfigs(ctx, t, adm)
	// A double reads as Java prints it, as kafka-configs.sh shows it.
	if cfg := findConfig(t, rc, "log.cleaner.min.cleanable.ratio"); cfg.MaybeValue() != "1.0" {
		t.Errorf("log.cleaner.min.cleanable.ratio %s, want 1.0", cfg.MaybeValue())
	}
	if cfg := findConfig(t, rc, "num.partitions"); cfg.MaybeValue() != "3" || cfg.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("num.partitions %s %v", cfg.MaybeValue(), cfg.Source)
	}
	if cfg := findConfig(t, rc, "log.segment.bytes"); cfg.MaybeValue() != "1073741824" || cfg.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("log.segment.bytes %s %v", cfg.MaybeValue(), cfg.Source)
	}

	// A cluster-wide dynamic default of a topic config's synonym applies
	// to every topic without its own value.
	c.createTopic("b", 1, nil)
	if l := c.broker.lookup(tp("b", 0)).log.Config(); l.MaxMessageBytes != 500000 {
		t.Fatalf("static message.max.bytes not applied: %d", l.MaxMessageBytes)
	}
	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kmsgStr("60000")}})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter cluster default: %v %+v", err, resp)
	}
	if l := c.broker.lookup(tp("b", 0)).log.Config(); l.RetentionMs != 60000 {
		t.Fatalf("cluster-wide retention not applied: %d", l.RetentionMs)
	}
	trc, _ := adm.DescribeTopicConfigs(ctx, "b")
	rcb, _ := trc.On("b", nil)
	if cfg := findConfig(t, rcb, "retention.ms"); cfg.MaybeValue() != "60000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("retention.ms %s %v", cfg.MaybeValue(), cfg.Source)
	}
	// Describing the cluster default resource lists it.
	rcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("", nil); len(rc.Configs) != 1 || rc.Configs[0].Key != "log.retention.ms" {
		t.Fatalf("cluster defaults %+v", rc)
	}
	// Another broker's configs belong on that broker.
	raw := c.dialRaw(t)
	req := describeConfigsRequest(kmsg.ConfigResourceTypeBroker, "7")
	if got := roundTrip[*kmsg.DescribeConfigsResponse](raw, req).Resources[0]; got.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("other broker: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	// The cluster default's entries have their types, as on a broker.
	req.Resources[0].ResourceName = ""
	if got := roundTrip[*kmsg.DescribeConfigsResponse](raw, req).Resources[0]; len(got.Configs) != 1 || got.Configs[0].ConfigType != kmsg.ConfigTypeLong {
		t.Fatalf("cluster default log.retention.ms: %+v, want type LONG", got.Configs)
	}
	// Read-only are the configs AlterConfigs refuses to change.
	values := map[string]string{"log.retention.ms": "604800000", "max.connections": "1000", "num.replica.fetchers": "2",
		"listeners": "PLAINTEXT://localhost:1", "node.id": "7"}
	req.Resources[0].ResourceName = strconv.Itoa(testNodeID)
	req.Resources[0].ConfigNames = slices.Sorted(maps.Keys(values))
	readOnly := map[string]bool{}
	for _, cfg := range roundTrip[*kmsg.DescribeConfigsResponse](raw, req).Resources[0].Configs {
		readOnly[cfg.Name] = cfg.ReadOnly
	}
	if want := map[string]bool{"log.retention.ms": false, "max.connections": false, "num.replica.fetchers": false, "listeners": true, "node.id": true}; !maps.Equal(readOnly, want) {
		t.Fatalf("read-only %v, want %v", readOnly, want)
	}
	for name, ro := range readOnly {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: kmsgStr(values[name])}}, testNodeID)
		if err != nil {
			t.Fatal(err)
		}
		if refused := resp[0].Err != nil; refused != ro {
			t.Errorf("%s: read-only %v, but AlterConfigs refused: %v", name, ro, resp[0].Err)
		}
	}
}

// TestForwardingErrors: when the controller cannot be reached, forwarded
// requests answer NOT_CONTROLLER (the client retries elsewhere); when it
// does not answer in time, REQUEST_TIMED_OUT.
func TestForwardingErrors(t *testing.T) {
	c := newTestCluster(t)
	rc := c.dialRaw(t)
	create := func(timeout time.Duration) int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 7, int32(timeout/time.Millisecond)
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "x", 1, 1
		req.Topics = append(req.Topics, rt)
		return roundTrip[*kmsg.CreateTopicsResponse](rc, req).Topics[0].ErrorCode
	}
	c.meta.mu.Lock()
	c.meta.forwardErr = errors.New("no route to the controller")
	c.meta.mu.Unlock()
	if code := create(time.Second); code != kerr.NotController.Code {
		t.Fatalf("unreachable controller: %v", kerr.ErrorForCode(code))
	}
	// A request that is partly this broker's own (its log level) answers
	// that part, and the forwarded part with the transport error.
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		key  string
		val  string
	}{{kmsg.ConfigResourceTypeTopic, "x", "retention.ms", "1000"}, {kmsg.ConfigResourceTypeBrokerLogger, strconv.Itoa(testNodeID), "root", c.broker.log.GetLevel().String()}} {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = r.key, kmsg.StringPtr(r.val)
		rr.Configs = append(rr.Configs, cfg)
		iac.Resources = append(iac.Resources, rr)
	}
	got := map[kmsg.ConfigResourceType]kmsg.IncrementalAlterConfigsResponseResource{}
	for _, rr := range roundTrip[*kmsg.IncrementalAlterConfigsResponse](rc, iac).Resources {
		got[rr.ResourceType] = rr
	}
	if tr, lr := got[kmsg.ConfigResourceTypeTopic], got[kmsg.ConfigResourceTypeBrokerLogger]; len(got) != 2 ||
		tr.ErrorCode != kerr.NotController.Code || tr.ErrorMessage == nil || *tr.ErrorMessage == "" || tr.ResourceName != "x" || lr.ErrorCode != 0 {
		t.Fatalf("mixed IncrementalAlterConfigs, unreachable controller: %+v", got)
	}
	c.meta.mu.Lock()
	c.meta.forwardErr = context.DeadlineExceeded
	c.meta.mu.Unlock()
	if code := create(time.Second); code != kerr.RequestTimedOut.Code {
		t.Fatalf("slow controller: %v", kerr.ErrorForCode(code))
	}
	c.meta.mu.Lock()
	c.meta.forwardErr = nil
	c.meta.mu.Unlock()
	if code := create(time.Second); code != 0 {
		t.Fatalf("controller back: %v", kerr.ErrorForCode(code))
	}
}

// TestMetadataAutoCreateAndErrors covers auto creation, illegal names,
// offline replicas and leaderless partitions.
func TestMetadataAutoCreateAndErrors(t *testing.T) {
	c := newTestCluster(t)
	rc := c.dialRaw(t)
	md := func(version int16, allowAuto bool, topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = version, allowAuto
		for _, n := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		return roundTrip[*kmsg.MetadataResponse](rc, req)
	}
	resp := md(12, false, "auto", "bad name!")
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("no auto create: %v %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode), kerr.ErrorForCode(resp.Topics[1].ErrorCode))
	}
	resp = md(12, true, "auto")
	if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("auto create: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	waitFor(t, "auto-created topic", 5*time.Second, func() bool {
		r := md(12, false, "auto")
		return r.Topics[0].ErrorCode == 0 && len(r.Topics[0].Partitions) == 1 && r.Topics[0].Partitions[0].Leader == testNodeID
	})

	// A partition on a fenced broker: offline replica, no leader.
	c.meta.registerBroker(2, "127.0.0.1", 1)
	c.createAssigned("on2", []int32{2, testNodeID})
	b2, _ := c.meta.Image().Broker(2)
	c.meta.commit(&metadata.FenceBrokerRecord{ID: 2, Epoch: b2.Epoch})
	resp = md(12, false, "on2")
	p := resp.Topics[0].Partitions[0]
	if len(p.OfflineReplicas) != 1 || p.OfflineReplicas[0] != 2 || len(resp.Brokers) != 1 {
		t.Fatalf("fenced replica: offline %v, brokers %+v", p.OfflineReplicas, resp.Brokers)
	}
	// All topics (null list) and v0's empty list.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 0
	req.Topics = []kmsg.MetadataRequestTopic{}
	if r := roundTrip[*kmsg.MetadataResponse](rc, req); len(r.Topics) != 2 {
		t.Fatalf("v0 all topics: %d", len(r.Topics))
	}
	// By topic id (v12).
	id := c.meta.Image()
	mt, _ := id.Topic("auto")
	req = kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = mt.ID
	req.Topics = append(req.Topics, rt)
	rt2 := kmsg.NewMetadataRequestTopic()
	rt2.TopicID = [16]byte{9}
	req.Topics = append(req.Topics, rt2)
	r := roundTrip[*kmsg.MetadataResponse](rc, req)
	if *r.Topics[0].Topic != "auto" || r.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("by id: %+v", r.Topics)
	}
	// The Java client's Admin.describeTopics(TopicCollection.ofTopicIds)
	// sends each id with an empty name, not a null one: the id decides.
	rt.Topic = kmsg.StringPtr("")
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	if r := roundTrip[*kmsg.MetadataResponse](rc, req); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || *r.Topics[0].Topic != "auto" {
		t.Fatalf("by id with an empty name: %+v", r.Topics)
	}
}

// Retention and roll times may be set in hours and minutes, in
// server.properties and dynamically (kafka-configs --entity-default
// --add-config log.retention.hours=24), and take effect on every topic
// without its own value, as in Kafka: the finest unit set wins, and
// DescribeConfigs names the key each value came from.
func TestRetentionInHoursAndMinutes(t *testing.T) {
	c := newTestCluster(t, withConfig("log.retention.hours=48"))
	adm := c.admin()
	ctx := testCtx(t)
	c.createTopic("h", 1, nil)
	const hour = int64(3_600_000)
	check := func(what string, retention, roll int64, source kmsg.ConfigSource, synonyms ...string) {
		t.Helper()
		if l := c.broker.lookup(tp("h", 0)).log.Config(); l.RetentionMs != retention || l.SegmentMs != roll {
			t.Fatalf("%s: log has retention.ms %d, segment.ms %d; want %d, %d", what, l.RetentionMs, l.SegmentMs, retention, roll)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On("h", nil)
		cfg := findConfig(t, rc, "retention.ms")
		var got []string
		for _, s := range cfg.Synonyms {
			got = append(got, s.Source.String()+":"+s.Key+"="+*s.Value)
		}
		if cfg.MaybeValue() != strconv.FormatInt(retention, 10) || cfg.Source != source || !slices.Equal(got, synonyms) {
			t.Fatalf("%s: retention.ms=%s %v %v; want %d %v %v", what, cfg.MaybeValue(), cfg.Source, got, retention, source, synonyms)
		}
	}
	alter := func(op kadm.IncrementalOp, name, value string) {
		t.Helper()
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: name, Value: kmsgStr(value)}})
		if err == nil {
			err = resp[0].Err
		}
		if err != nil {
			t.Fatalf("%v %s=%s: %v", op, name, value, err)
		}
	}
	week := 168 * hour
	check("server.properties", 48*hour, week, kmsg.ConfigSourceStaticBrokerConfig,
		"STATIC_BROKER_CONFIG:log.retention.hours=48", "DEFAULT_CONFIG:log.retention.hours=168")

	alter(kadm.SetConfig, "log.retention.minutes", "90")
	check("cluster-wide minutes", 90*60_000, week, kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		"DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.minutes=90", "STATIC_BROKER_CONFIG:log.retention.hours=48", "DEFAULT_CONFIG:log.retention.hours=168")

	alter(kadm.DeleteConfig, "log.retention.minutes", "")
	alter(kadm.SetConfig, "log.retention.hours", "-1")
	alter(kadm.SetConfig, "log.roll.hours", "1")
	check("cluster-wide hours", -1, hour, kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		"DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=-1", "STATIC_BROKER_CONFIG:log.retention.hours=48", "DEFAULT_CONFIG:log.retention.hours=168")

	alter(kadm.SetConfig, "log.roll.jitter.hours", "1")
	if l := c.broker.lookup(tp("h", 0)).log.Config(); l.SegmentJitterMs != hour {
		t.Fatalf("log.roll.jitter.hours=1: segment.jitter.ms %d", l.SegmentJitterMs)
	}

	// A topic's own retention.ms still beats them all.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsgStr("1000")}}, "h"); err != nil {
		t.Fatal(err)
	}
	check("topic", 1000, hour, kmsg.ConfigSourceDynamicTopicConfig,
		"DYNAMIC_TOPIC_CONFIG:retention.ms=1000", "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.hours=-1",
		"STATIC_BROKER_CONFIG:log.retention.hours=48", "DEFAULT_CONFIG:log.retention.hours=168")

	// A bad value is refused, as Kafka's INT would be.
	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.roll.hours", Value: kmsgStr("0")}})
	if err == nil && resp[0].Err == nil {
		t.Fatal("log.roll.hours=0 accepted")
	}

	// The broker's own configs list each unit as written, the unset ones null.
	rc := describeOwnBrokerConfigs(ctx, t, adm)
	for name, want := range map[string]string{"log.retention.hours": "-1", "log.retention.minutes": "<nil>", "log.retention.ms": "<nil>",
		"log.roll.hours": "1", "log.roll.ms": "<nil>", "log.roll.jitter.hours": "1", "log.roll.jitter.ms": "<nil>"} {
		cfg := findConfig(t, rc, name)
		got := "<nil>"
		if cfg.Value != nil {
			got = *cfg.Value
		}
		if got != want {
			t.Errorf("broker %s=%s, want %s", name, got, want)
		}
	}
	if cfg := findConfig(t, rc, "log.retention.hours"); cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("broker log.retention.hours source %v", cfg.Source)
	}
}

// TestBrokerLoggerResource: kafka-configs --entity-type broker-loggers
// reads and sets the broker's log level at run time, with Kafka's checks;
// a request that also alters a topic forwards that part and answers both.
func TestBrokerLoggerResource(t *testing.T) {
	c := newTestCluster(t)
	c.createTopic("lt", 1, nil)
	raw := c.dialRaw(t)
	before := c.broker.log.GetLevel()
	t.Cleanup(func() { c.broker.log.SetLevel(before) })
	describe := func(name string) kmsg.DescribeConfigsResponseResource {
		t.Helper()
		return roundTrip[*kmsg.DescribeConfigsResponse](raw, describeConfigsRequest(kmsg.ConfigResourceTypeBrokerLogger, name)).Resources[0]
	}
	alter := func(validateOnly bool, resources ...kmsg.IncrementalAlterConfigsRequestResource) map[kmsg.ConfigResourceType]int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly, req.Resources = validateOnly, resources
		codes := map[kmsg.ConfigResourceType]int16{}
		for _, rr := range roundTrip[*kmsg.IncrementalAlterConfigsResponse](raw, req).Resources {
			codes[rr.ResourceType] = rr.ErrorCode
		}
		return codes
	}
	logger := func(name string, op kmsg.IncrementalAlterConfigOp, key, value string) kmsg.IncrementalAlterConfigsRequestResource {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, name
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = key, op, kmsg.StringPtr(value)
		r.Configs = append(r.Configs, cfg)
		return r
	}
	level := func() string {
		t.Helper()
		got := describe(strconv.Itoa(testNodeID))
		if got.ErrorCode != 0 || len(got.Configs) != 1 || got.Configs[0].Name != "root" || got.Configs[0].Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
			t.Fatalf("describe broker loggers: %v %+v", kerr.ErrorForCode(got.ErrorCode), got.Configs)
		}
		return *got.Configs[0].Value
	}
	me := strconv.Itoa(testNodeID)
	if got := alter(false, logger(me, kmsg.IncrementalAlterConfigOpSet, "root", "debug")); got[kmsg.ConfigResourceTypeBrokerLogger] != 0 {
		t.Fatalf("SET root=debug: %v", kerr.ErrorForCode(got[kmsg.ConfigResourceTypeBrokerLogger]))
	}
	if l := level(); l != "DEBUG" || c.broker.log.GetLevel() != hclog.Debug {
		t.Fatalf("level %s (%v) after SET root=debug", l, c.broker.log.GetLevel())
	}
	alter(true, logger(me, kmsg.IncrementalAlterConfigOpSet, "root", "TRACE"))
	if l := level(); l != "DEBUG" {
		t.Fatalf("validate-only changed the level to %s", l)
	}
	for _, tc := range []struct {
		r    kmsg.IncrementalAlterConfigsRequestResource
		want int16
	}{
		{logger(me, kmsg.IncrementalAlterConfigOpSet, "root", "LOUD"), kerr.InvalidConfig.Code},
		{logger(me, kmsg.IncrementalAlterConfigOpSet, "kafka.server.ReplicaManager", "DEBUG"), kerr.InvalidConfig.Code},
		{logger(me, kmsg.IncrementalAlterConfigOpDelete, "root", ""), kerr.InvalidRequest.Code},
		{logger(me, kmsg.IncrementalAlterConfigOpAppend, "root", "INFO"), kerr.InvalidRequest.Code},
		{logger("7", kmsg.IncrementalAlterConfigOpSet, "root", "INFO"), kerr.InvalidRequest.Code},
		{logger("", kmsg.IncrementalAlterConfigOpSet, "root", "INFO"), kerr.InvalidRequest.Code},
	} {
		if got := alter(false, tc.r)[kmsg.ConfigResourceTypeBrokerLogger]; got != tc.want {
			t.Errorf("%s %v %s=%s on %q: %v, want %v", tc.r.Configs[0].Op, tc.r.ResourceType, tc.r.Configs[0].Name,
				*tc.r.Configs[0].Value, tc.r.ResourceName, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	if l := level(); l != "DEBUG" {
		t.Fatalf("a refused change moved the level to %s", l)
	}
	if got := describe("7"); got.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("another broker's loggers: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	// One request for a topic (forwarded) and the loggers (local).
	topic := kmsg.NewIncrementalAlterConfigsRequestResource()
	topic.ResourceType, topic.ResourceName = kmsg.ConfigResourceTypeTopic, "lt"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("123456")
	topic.Configs = append(topic.Configs, cfg)
	got := alter(false, topic, logger(me, kmsg.IncrementalAlterConfigOpSet, "root", "WARN"))
	if len(got) != 2 || got[kmsg.ConfigResourceTypeTopic] != 0 || got[kmsg.ConfigResourceTypeBrokerLogger] != 0 {
		t.Fatalf("mixed request: %v", got)
	}
	if l := level(); l != "WARN" || c.broker.lookup(tp("lt", 0)).log.Config().RetentionMs != 123456 {
		t.Fatalf("mixed request: level %s, retention %d", l, c.broker.lookup(tp("lt", 0)).log.Config().RetentionMs)
	}
}

// The ssl.* and sasl.* settings are described as set, and the plain ones
// a broker reads also when not set, with Kafka's default; passwords,
// private keys, certificates, JAAS configurations and the delegation token
// secret are sensitive and never returned, as Kafka describes PASSWORD
// configs.
func TestDescribeBrokerSecurityConfigs(t *testing.T) {
	c := newTestCluster(t, withConfig("ssl.truststore.location=/etc/kafka/trust.jks", "ssl.truststore.password=trust-secret",
		"ssl.client.auth=required", "ssl.keystore.certificate.chain=secret-chain", "listener.name.clients.ssl.truststore.certificates=secret-certs",
		`listener.name.clients.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
		"delegation.token.secret.key=token-secret"))
	req := describeConfigsRequest(kmsg.ConfigResourceTypeBroker, strconv.Itoa(testNodeID))
	got := roundTrip[*kmsg.DescribeConfigsResponse](c.dialRaw(t), req).Resources[0]
	if got.ErrorCode != 0 {
		t.Fatalf("describe broker: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	configs := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, cfg := range got.Configs {
		configs[cfg.Name] = cfg
		if cfg.Value != nil && strings.Contains(*cfg.Value, "secret") {
			t.Errorf("%s reveals %q", cfg.Name, *cfg.Value)
		}
		for _, s := range cfg.ConfigSynonyms {
			if s.Value != nil && strings.Contains(*s.Value, "secret") {
				t.Errorf("%s's synonym %s reveals %q", cfg.Name, s.Name, *s.Value)
			}
		}
		// Kafka's security settings Keel does not read are not described.
		if cfg.Name == "ssl.provider" || strings.HasPrefix(cfg.Name, "sasl.kerberos.") {
			t.Errorf("%s is described but not read", cfg.Name)
		}
	}
	value := func(cfg kmsg.DescribeConfigsResponseResourceConfig) string {
		if cfg.Value == nil {
			return "null"
		}
		return *cfg.Value
	}
	if cfg := configs["ssl.truststore.location"]; value(cfg) != "/etc/kafka/trust.jks" || cfg.IsSensitive || cfg.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("ssl.truststore.location: %+v", cfg)
	}
	for _, name := range []string{"ssl.truststore.password", "listener.name.clients.plain.sasl.jaas.config", "ssl.keystore.certificate.chain",
		"listener.name.clients.ssl.truststore.certificates", "ssl.keystore.password", "delegation.token.secret.key"} {
		if cfg, ok := configs[name]; !ok || cfg.Value != nil || !cfg.IsSensitive || cfg.ConfigType != kmsg.ConfigTypePassword {
			t.Errorf("%s: described %v, value %v sensitive %v type %v, want a hidden PASSWORD", name, ok, cfg.Value, cfg.IsSensitive, cfg.ConfigType)
		}
	}
	// Set in server.properties: its value, Kafka's default as a synonym.
	auth := configs["ssl.client.auth"]
	if value(auth) != "required" || auth.Source != kmsg.ConfigSourceStaticBrokerConfig || len(auth.ConfigSynonyms) != 2 ||
		auth.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig || auth.ConfigSynonyms[1].Value == nil || *auth.ConfigSynonyms[1].Value != "none" {
		t.Errorf("ssl.client.auth: %+v", auth)
	}
	// Not set: Kafka's default (GSSAPI where Kafka has it, though Keel
	// does not support it), empty where Kafka's is an empty string or
	// list, or null where Kafka has none.
	for name, want := range map[string]struct {
		value string
		typ   kmsg.ConfigType
	}{
		"sasl.enabled.mechanisms":                   {"GSSAPI", kmsg.ConfigTypeList},
		"sasl.mechanism.inter.broker.protocol":      {"GSSAPI", kmsg.ConfigTypeString},
		"sasl.oauthbearer.clock.skew.seconds":       {"30", kmsg.ConfigTypeInt},
		"sasl.oauthbearer.jwks.endpoint.refresh.ms": {"3600000", kmsg.ConfigTypeLong},
		"sasl.oauthbearer.sub.claim.name":           {"sub", kmsg.ConfigTypeString},
		"sasl.oauthbearer.jwks.endpoint.url":        {"null", kmsg.ConfigTypeString},
		"sasl.login.callback.handler.class":         {"null", kmsg.ConfigTypeClass},
		"ssl.enabled.protocols":                     {"TLSv1.2,TLSv1.3", kmsg.ConfigTypeList},
		"ssl.protocol":                              {"TLSv1.3", kmsg.ConfigTypeString},
		"ssl.endpoint.identification.algorithm":     {"https", kmsg.ConfigTypeString},
		"ssl.keystore.type":                         {"JKS", kmsg.ConfigTypeString},
		"ssl.keystore.location":                     {"null", kmsg.ConfigTypeString},
		"ssl.allow.dn.changes":                      {"false", kmsg.ConfigTypeBoolean},
		"ssl.cipher.suites":                         {"", kmsg.ConfigTypeList},
		"authorizer.class.name":                     {"", kmsg.ConfigTypeString},
		"max.connections.per.ip.overrides":          {"", kmsg.ConfigTypeString},
		"controller.quorum.bootstrap.servers":       {"", kmsg.ConfigTypeList},
		"listener.security.protocol.map":            {"SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", kmsg.ConfigTypeString},
		"broker.rack":                               {"null", kmsg.ConfigTypeString},
	} {
		cfg, ok := configs[name]
		if !ok || value(cfg) != want.value || cfg.ConfigType != want.typ || cfg.Source != kmsg.ConfigSourceDefaultConfig || cfg.IsSensitive {
			t.Errorf("%s: described %v, value %s type %v source %v, want %s type %v, the default", name, ok, value(cfg), cfg.ConfigType, cfg.Source, want.value, want.typ)
		}
		if syns := cfg.ConfigSynonyms; len(syns) != 1 || syns[0].Source != kmsg.ConfigSourceDefaultConfig || (syns[0].Value == nil) != (cfg.Value == nil) {
			t.Errorf("%s: synonyms %+v, want the default alone, null where the value is", name, syns)
		}
	}
}

// TestWritebackBytesDynamic: keel.log.writeback.bytes is a dynamic broker
// config. DescribeConfigs lists it (server.properties' value, then the
// cluster-wide and this broker's dynamic values over it), the log manager
// takes the effective value at once and again after a restart, a negative
// one is INVALID_CONFIG, and deleting the dynamic values brings
// server.properties' back.
func TestWritebackBytesDynamic(t *testing.T) {
	c := newTestCluster(t, withConfig("keel.log.writeback.bytes=2097152"))
	adm := c.admin()
	ctx := testCtx(t)
	check := func(what string, want int64, source kmsg.ConfigSource) {
		t.Helper()
		waitFor(t, what, 10*time.Second, func() bool { return c.broker.logs.WritebackBytes() == want })
		cfg := findConfig(t, describeOwnBrokerConfigs(ctx, t, adm), "keel.log.writeback.bytes")
		if cfg.MaybeValue() != strconv.FormatInt(want, 10) || cfg.Source != source {
			t.Fatalf("%s: described %s (%v), want %d (%v)", what, cfg.MaybeValue(), cfg.Source, want, source)
		}
	}
	check("server.properties", 2<<20, kmsg.ConfigSourceStaticBrokerConfig)
	alter := func(value *string, nodes ...int32) error {
		t.Helper()
		return alterBrokerConfig(ctx, t, adm, "keel.log.writeback.bytes", value, nodes...)
	}
	if err := alter(kmsgStr("4194304")); err != nil {
		t.Fatal(err)
	}
	check("cluster-wide", 4<<20, kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if err := alter(kmsgStr("0"), testNodeID); err != nil {
		t.Fatal(err)
	}
	check("this broker's", 0, kmsg.ConfigSourceDynamicBrokerConfig)
	// A restart takes the dynamic value from the metadata, not
	// server.properties'.
	c.restart()
	check("after a restart", 0, kmsg.ConfigSourceDynamicBrokerConfig)
	if err := alter(kmsgStr("-1"), testNodeID); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("keel.log.writeback.bytes=-1: %v, want INVALID_CONFIG", err)
	}
	check("after a refused value", 0, kmsg.ConfigSourceDynamicBrokerConfig)
	if err := alter(nil, testNodeID); err != nil {
		t.Fatal(err)
	}
	check("this broker's deleted", 4<<20, kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if err := alter(nil); err != nil {
		t.Fatal(err)
	}
	check("both deleted", 2<<20, kmsg.ConfigSourceStaticBrokerConfig)
}

// keel.log.cache.drop.behind.bytes: server.properties', then the
// cluster-wide dynamic value; a negative one is INVALID_CONFIG.
func TestDropBehindBytesDynamic(t *testing.T) {
	c := newTestCluster(t, withConfig("keel.log.cache.drop.behind.bytes=8388608"))
	adm := c.admin()
	ctx := testCtx(t)
	check := func(what string, want int64, source kmsg.ConfigSource) {
		t.Helper()
		waitFor(t, what, 10*time.Second, func() bool { return c.broker.logs.DropBehindBytes() == want })
		cfg := findConfig(t, describeOwnBrokerConfigs(ctx, t, adm), "keel.log.cache.drop.behind.bytes")
		if cfg.MaybeValue() != strconv.FormatInt(want, 10) || cfg.Source != source {
			t.Fatalf("%s: described %s (%v), want %d (%v)", what, cfg.MaybeValue(), cfg.Source, want, source)
		}
	}
	check("server.properties", 8<<20, kmsg.ConfigSourceStaticBrokerConfig)
	if err := alterBrokerConfig(ctx, t, adm, "keel.log.cache.drop.behind.bytes", kmsgStr("67108864")); err != nil {
		t.Fatal(err)
	}
	check("cluster-wide", 64<<20, kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if err := alterBrokerConfig(ctx, t, adm, "keel.log.cache.drop.behind.bytes", kmsgStr("-1"), testNodeID); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("keel.log.cache.drop.behind.bytes=-1: %v, want INVALID_CONFIG", err)
	}
	if err := alterBrokerConfig(ctx, t, adm, "keel.log.cache.drop.behind.bytes", nil); err != nil {
		t.Fatal(err)
	}
	check("deleted", 8<<20, kmsg.ConfigSourceStaticBrokerConfig)
}

// keel.log.delete.max.bytes.per.second: server.properties', then
// dynamic; 0 removes deleted files unpaced.
func TestDeleteRateDynamic(t *testing.T) {
	c := newTestCluster(t, withConfig("keel.log.delete.max.bytes.per.second=1048576"))
	adm := c.admin()
	ctx := testCtx(t)
	check := func(what string, want int64, described string) {
		t.Helper()
		waitFor(t, what, 10*time.Second, func() bool { return c.broker.logs.DeleteBytesPerSecond() == want })
		if cfg := findConfig(t, describeOwnBrokerConfigs(ctx, t, adm), "keel.log.delete.max.bytes.per.second"); cfg.MaybeValue() != described {
			t.Fatalf("%s: described %s, want %s", what, cfg.MaybeValue(), described)
		}
	}
	check("server.properties", 1<<20, "1048576")
	if err := alterBrokerConfig(ctx, t, adm, "keel.log.delete.max.bytes.per.second", kmsgStr("0")); err != nil {
		t.Fatal(err)
	}
	check("cluster-wide 0", -1, "0")
	if err := alterBrokerConfig(ctx, t, adm, "keel.log.delete.max.bytes.per.second", kmsgStr("-5"), testNodeID); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("-5: %v, want INVALID_CONFIG", err)
	}
	if err := alterBrokerConfig(ctx, t, adm, "keel.log.delete.max.bytes.per.second", nil); err != nil {
		t.Fatal(err)
	}
	check("deleted", 1<<20, "1048576")
}

// alterBrokerConfig sets (value nil: deletes) broker config name, on the
// given brokers or cluster-wide, and returns the resource's error.
func alterBrokerConfig(ctx context.Context, t *testing.T, adm *kadm.Client, name string, value *string, nodes ...int32) error {
	t.Helper()
	op := kadm.SetConfig
	if value == nil {
		op = kadm.DeleteConfig
	}
	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: name, Value: value}}, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	if resp[0].Err != nil && resp[0].ErrMessage != "" {
		return fmt.Errorf("%w: %s", resp[0].Err, resp[0].ErrMessage)
	}
	return resp[0].Err
}

// describeOwnBrokerConfigs describes the test broker's configs with kadm.
func describeOwnBrokerConfigs(ctx context.Context, t *testing.T, adm *kadm.Client) kadm.ResourceConfig {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(ctx, testNodeID)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(strconv.Itoa(testNodeID), nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker: %v %v", err, rc.Err)
	}
	return rc
}

// TestCleanerIORateDynamic: log.cleaner.io.max.bytes.per.second is a
// dynamic broker config, as in Kafka: the log manager takes the effective
// value (this broker's, else the cluster-wide, else server.properties'),
// DescribeConfigs shows it as Java prints a double, and 0 is INVALID_CONFIG.
func TestCleanerIORateDynamic(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)
	check := func(what string, want float64, described string) {
		t.Helper()
		waitFor(t, what, 10*time.Second, func() bool { return c.broker.logs.CleanerIOMaxBytesPerSecond() == want })
		if cfg := findConfig(t, describeOwnBrokerConfigs(ctx, t, adm), "log.cleaner.io.max.bytes.per.second"); cfg.MaybeValue() != described {
			t.Fatalf("%s: described %s, want %s", what, cfg.MaybeValue(), described)
		}
	}
	check("default", math.MaxFloat64, "1.7976931348623157E308")
	alter := func(value *string, nodes ...int32) error {
		t.Helper()
		return alterBrokerConfig(ctx, t, adm, "log.cleaner.io.max.bytes.per.second", value, nodes...)
	}
	if err := alter(kmsgStr("1048576")); err != nil {
		t.Fatal(err)
	}
	check("cluster-wide", 1<<20, "1048576")
	if err := alter(kmsgStr("0"), testNodeID); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("0: %v, want INVALID_CONFIG", err)
	}
	if err := alter(nil); err != nil {
		t.Fatal(err)
	}
	check("deleted", math.MaxFloat64, "1.7976931348623157E308")
}

// log.cleaner.threads, log.cleaner.backoff.ms and
// log.cleaner.dedupe.buffer.size change at runtime, per broker or
// cluster-wide, as Kafka's LogCleaner reconfigures; 0 threads is refused
// dynamically, and log.cleaner.enable stays static.
func TestCleanerConfigsDynamic(t *testing.T) {
	c := newTestCluster(t, withConfig("log.cleaner.threads=2"))
	adm := c.admin()
	ctx := testCtx(t)
	logs := c.broker.logs
	if n := logs.CleanerThreads(); n != 2 {
		t.Fatalf("%d cleaner goroutines from server.properties' 2", n)
	}
	set := func(name, value string, nodes ...int32) {
		t.Helper()
		var v *string
		if value != "" {
			v = kmsgStr(value)
		}
		if err := alterBrokerConfig(ctx, t, adm, name, v, nodes...); err != nil {
			t.Fatalf("%s=%q: %v", name, value, err)
		}
	}
	set("log.cleaner.threads", "4", testNodeID)
	set("log.cleaner.backoff.ms", "250")
	set("log.cleaner.dedupe.buffer.size", "1048576")
	waitFor(t, "the dynamic cleaner configs", 10*time.Second, func() bool {
		return logs.CleanerThreads() == 4 && logs.CleanerBackoff() == 250*time.Millisecond && logs.CleanerDedupeBufferSize() == 1<<20
	})
	rc := describeOwnBrokerConfigs(ctx, t, adm)
	for name, want := range map[string]string{"log.cleaner.threads": "4", "log.cleaner.backoff.ms": "250", "log.cleaner.dedupe.buffer.size": "1048576"} {
		if cfg := findConfig(t, rc, name); cfg.MaybeValue() != want {
			t.Errorf("%s described %s, want %s", name, cfg.MaybeValue(), want)
		}
	}
	// 0 is Kafka's "look again at once", not the default's 15 s.
	set("log.cleaner.backoff.ms", "0")
	waitFor(t, "log.cleaner.backoff.ms=0", 10*time.Second, func() bool { return logs.CleanerBackoff() == minCleanerBackoff })
	set("log.cleaner.backoff.ms", "250")
	waitFor(t, "log.cleaner.backoff.ms=250", 10*time.Second, func() bool { return logs.CleanerBackoff() == 250*time.Millisecond })
	// Kafka's LogCleaner.validateReconfiguration: at most half or double
	// the threads running, checked by the broker that would act on it.
	for value, msg := range map[string]string{"9": "cannot be increased to more than double the current value 4", "1": "cannot be reduced to less than half the current value 4"} {
		err := alterBrokerConfig(ctx, t, adm, "log.cleaner.threads", kmsgStr(value), testNodeID)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("log.cleaner.threads=%s: %v, want INVALID_CONFIG %q", value, err, msg)
		}
		// The cluster-wide value is not this broker's while its own is set.
		set("log.cleaner.threads", value)
	}
	set("log.cleaner.threads", "")
	for _, bad := range []struct{ name, value string }{{"log.cleaner.threads", "0"}, {"log.cleaner.backoff.ms", "-1"}, {"log.cleaner.dedupe.buffer.size", "0"}} {
		if err := alterBrokerConfig(ctx, t, adm, bad.name, kmsgStr(bad.value), testNodeID); !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG", bad.name, bad.value, err)
		}
	}
	if err := alterBrokerConfig(ctx, t, adm, "log.cleaner.enable", kmsgStr("false"), testNodeID); !errors.Is(err, kerr.InvalidRequest) && !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("log.cleaner.enable: %v, want it refused as static", err)
	}
	set("log.cleaner.threads", "", testNodeID)
	set("log.cleaner.backoff.ms", "")
	set("log.cleaner.dedupe.buffer.size", "")
	waitFor(t, "server.properties' cleaner configs again", 10*time.Second, func() bool {
		return logs.CleanerThreads() == 2 && logs.CleanerBackoff() == c.broker.cfg.LogCleanerBackoff && logs.CleanerDedupeBufferSize() == 128<<20
	})
}

// TestConnectionLimitsDynamic: max.connections.per.ip, its overrides and
// max.connections are dynamic broker configs, as in Kafka: the listeners
// take them when they change (connections already open stay), deleting
// them brings server.properties' back, and settings that do not make a
// valid whole leave the limits in force.
func TestConnectionLimitsDynamic(t *testing.T) {
	c := newTestCluster(t)
	adm := c.admin()
	ctx := testCtx(t)
	alter := func(name string, value *string, nodes ...int32) {
		t.Helper()
		if err := alterBrokerConfig(ctx, t, adm, name, value, nodes...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// admitted dials from src and reports whether the broker keeps the
	// connection open (a refused one is closed at once).
	var open []net.Conn
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	admitted := func(src string) bool {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		conn, err := d.Dial("tcp", c.addr)
		if err != nil {
			t.Skipf("cannot dial from %s: %v", src, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = conn.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			open = append(open, conn)
			return true
		}
		conn.Close()
		return false
	}
	closeAll := func() {
		for _, c := range open {
			c.Close()
		}
		open = nil
		time.Sleep(100 * time.Millisecond) // the server notices the closes
	}
	if !admitted("127.0.0.2") || !admitted("127.0.0.2") {
		t.Fatal("two connections from 127.0.0.2 refused with no limits")
	}
	closeAll()

	alter("max.connections.per.ip.overrides", kmsgStr("127.0.0.2:1"))
	waitFor(t, "the override applied", 10*time.Second, func() bool {
		defer closeAll()
		return admitted("127.0.0.2") && !admitted("127.0.0.2")
	})
	if !admitted("127.0.0.3") || !admitted("127.0.0.3") {
		t.Fatal("127.0.0.3, which no override names, was limited")
	}
	closeAll()
	// 0 with the overrides set: only the addresses they name.
	alter("max.connections.per.ip", kmsgStr("0"), testNodeID)
	waitFor(t, "the allow-list applied", 10*time.Second, func() bool {
		defer closeAll()
		return !admitted("127.0.0.3") && admitted("127.0.0.2")
	})
	// Deleting the overrides would leave 0 alone, which admits nobody:
	// refused as a whole, the limits in force stay.
	alter("max.connections.per.ip.overrides", nil)
	time.Sleep(300 * time.Millisecond)
	if admitted("127.0.0.3") {
		t.Fatal("an invalid whole (max.connections.per.ip=0 without overrides) was applied")
	}
	closeAll()
	alter("max.connections.per.ip", nil, testNodeID)
	waitFor(t, "server.properties' limits back", 10*time.Second, func() bool {
		defer closeAll()
		return admitted("127.0.0.3") && admitted("127.0.0.2") && admitted("127.0.0.2")
	})
	// answered dials and reports whether an ApiVersions request is
	// answered: at max.connections or a listener's own limit, a new
	// connection waits unanswered (Kafka's acceptor waits for a slot).
	answered := func() bool {
		t.Helper()
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		frame := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
		if _, err := conn.Write(frame); err != nil {
			return false
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = conn.Read(make([]byte, 4))
		return err == nil
	}
	alter("max.connections", kmsgStr("1"))
	waitFor(t, "max.connections applied", 10*time.Second, func() bool {
		// The admin client's own connection is open: any new one is
		// beyond 1.
		return !answered()
	})
	alter("max.connections", nil)
	waitFor(t, "max.connections deleted", 10*time.Second, answered)
	// 0 admits none, as in Kafka (it was no limit).
	alter("max.connections", kmsgStr("0"), testNodeID)
	waitFor(t, "max.connections=0 applied", 10*time.Second, func() bool { return !answered() })
	alter("max.connections", nil, testNodeID)
	waitFor(t, "max.connections=0 deleted", 10*time.Second, answered)

	// A listener's own limit, cluster-wide and per broker (Kafka's
	// listener.name.<listener>.max.connections): 0 takes no new
	// connection, connections open stay (the admin client's).
	alter("listener.name.plaintext.max.connections", kmsgStr("0"))
	waitFor(t, "the listener's limit applied", 10*time.Second, func() bool { return !answered() })
	alter("listener.name.plaintext.max.connections", kmsgStr("100"), testNodeID)
	waitFor(t, "this broker's listener limit over the cluster's", 10*time.Second, answered)
	describeBroker := func(name string) kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		resp, err := describeConfigsRequest(kmsg.ConfigResourceTypeBroker, strconv.Itoa(testNodeID), name).RequestWith(ctx, c.client())
		if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
			t.Fatalf("describe %s: %v %+v", name, err, resp)
		}
		return resp.Resources[0].Configs[0]
	}
	if cfg := describeBroker("listener.name.plaintext.max.connections"); cfg.Value == nil || *cfg.Value != "100" ||
		cfg.Source != kmsg.ConfigSourceDynamicBrokerConfig || cfg.ReadOnly || cfg.ConfigType != kmsg.ConfigTypeInt || len(cfg.ConfigSynonyms) != 2 {
		t.Fatalf("described %+v", cfg)
	}
	alter("listener.name.plaintext.max.connections", nil, testNodeID)
	waitFor(t, "the cluster-wide listener limit back", 10*time.Second, func() bool { return !answered() })
	alter("listener.name.plaintext.max.connections", nil)
	waitFor(t, "the listener limit deleted", 10*time.Second, answered)
	for _, bad := range []string{"-1", "many"} {
		if err := alterBrokerConfig(ctx, t, adm, "listener.name.plaintext.max.connections", kmsgStr(bad)); err == nil {
			t.Fatalf("listener.name.plaintext.max.connections=%s accepted", bad)
		}
	}
	// A listener's connection creation rate (KIP-612): 0 takes none.
	alter("listener.name.plaintext.max.connection.creation.rate", kmsgStr("0"))
	waitFor(t, "the listener's creation rate applied", 10*time.Second, func() bool { return !answered() })
	alter("listener.name.plaintext.max.connection.creation.rate", kmsgStr("1000"))
	waitFor(t, "the listener's creation rate raised", 10*time.Second, answered)
	if cfg := describeBroker("listener.name.plaintext.max.connection.creation.rate"); cfg.Value == nil || *cfg.Value != "1000" ||
		cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || cfg.ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("described %+v", cfg)
	}
	alter("listener.name.plaintext.max.connection.creation.rate", nil)
	waitFor(t, "the listener's creation rate deleted", 10*time.Second, answered)
	alter("max.connection.creation.rate", kmsgStr("1000"))
	if cfg := describeBroker("max.connection.creation.rate"); cfg.Value == nil || *cfg.Value != "1000" || cfg.ReadOnly {
		t.Fatalf("described %+v", cfg)
	}
	alter("max.connection.creation.rate", nil)

	// A host name in the overrides is resolved off the metadata-apply
	// path: while its lookup hangs, other configs still apply; and a
	// lookup that a newer change overtook applies nothing when it ends.
	release := make(chan struct{})
	lookup := func(ctx context.Context, host string) ([]string, error) {
		select {
		case <-release:
			return []string{"127.0.0.2"}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.broker.hostLookup.Store(&lookup)
	start := time.Now()
	alter("max.connections.per.ip.overrides", kmsgStr("slow.example:1"))
	alter("keel.log.writeback.bytes", kmsgStr("12345"))
	waitFor(t, "a config applied while a lookup hangs", 10*time.Second, func() bool { return c.logs.WritebackBytes() == 12345 })
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a config change took %v to apply behind a hanging lookup (its timeout is 5 s)", took)
	}
	alter("max.connections.per.ip.overrides", kmsgStr("127.0.0.2:2"))
	waitFor(t, "the newer overrides applied", 10*time.Second, func() bool {
		defer closeAll()
		return admitted("127.0.0.2") && admitted("127.0.0.2") && !admitted("127.0.0.2")
	})
	close(release)
	time.Sleep(300 * time.Millisecond)
	if !admitted("127.0.0.2") || !admitted("127.0.0.2") {
		t.Fatal("the overtaken lookup's limit (slow.example:1) was applied")
	}
	closeAll()
}

// Group configs (KIP-848): consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms per group, described with their broker
// synonyms, altered through the controller within the broker's bounds, and
// used by the group's coordinator.
func TestGroupConfigs(t *testing.T) {
	c := newTestCluster(t, withConfig("group.consumer.heartbeat.interval.ms=6000"))
	c.meta.commit(&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: metadata.LatestMetadataVersion})
	c.meta.commit(&metadata.FeatureLevelRecord{Name: metadata.GroupVersionFeature, FeatureLevel: 1})
	c.createTopic("gc", 1, nil)
	rc := c.dialRaw(t)
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		resp := roundTrip[*kmsg.DescribeConfigsResponse](rc, describeConfigsRequest(kmsg.ConfigResourceTypeGroupConfig, "app"))
		if r := resp.Resources[0]; r.ErrorCode != 0 {
			t.Fatalf("describe group configs: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, cfg := range resp.Resources[0].Configs {
			out[cfg.Name] = cfg
		}
		return out
	}
	cfgs := describe()
	if s, h := cfgs["consumer.session.timeout.ms"], cfgs["consumer.heartbeat.interval.ms"]; len(cfgs) != 2 ||
		*s.Value != "45000" || s.Source != kmsg.ConfigSourceDefaultConfig ||
		*h.Value != "6000" || h.Source != kmsg.ConfigSourceStaticBrokerConfig || h.ConfigSynonyms[0].Name != "group.consumer.heartbeat.interval.ms" {
		t.Fatalf("group configs before any is set: %+v", cfgs)
	}
	alter := func(name, value string) *kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "app"
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = name, kmsg.StringPtr(value)
		r.Configs = append(r.Configs, op)
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(testCtx(t), c.client())
		if err != nil {
			t.Fatal(err)
		}
		return &resp.Resources[0]
	}
	if r := alter("consumer.session.timeout.ms", "30000"); r.ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("session timeout below the minimum: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := alter("consumer.heartbeat.interval.ms", "7000"); r.ErrorCode != 0 {
		t.Fatalf("heartbeat interval: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	waitFor(t, "the group config applied", 10*time.Second, func() bool {
		h := describe()["consumer.heartbeat.interval.ms"]
		return *h.Value == "7000" && h.Source == kmsg.ConfigSourceGroupConfig && len(h.ConfigSynonyms) == 2
	})
	// The group's members are told its heartbeat interval.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 1, "app", "m", 1000, []string{"gc"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"app", "other"}
	waitFor(t, "a consumer group heartbeat", 20*time.Second, func() bool {
		roundTrip[*kmsg.FindCoordinatorResponse](rc, fc) // creates __consumer_offsets
		resp = roundTrip[*kmsg.ConsumerGroupHeartbeatResponse](rc, hb)
		return resp.ErrorCode == 0
	})
	if resp.HeartbeatIntervalMillis != 7000 {
		t.Fatalf("heartbeat interval told to a member: %d", resp.HeartbeatIntervalMillis)
	}
	// Other groups keep the broker's.
	hb.Group = "other"
	if resp = roundTrip[*kmsg.ConsumerGroupHeartbeatResponse](rc, hb); resp.ErrorCode != 0 || resp.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("another group's heartbeat: %v %d", kerr.ErrorForCode(resp.ErrorCode), resp.HeartbeatIntervalMillis)
	}
	if resp := roundTrip[*kmsg.DescribeConfigsResponse](rc, describeConfigsRequest(kmsg.ConfigResourceTypeGroupConfig, "")); resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("group configs of the empty name: %v", kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}
}
