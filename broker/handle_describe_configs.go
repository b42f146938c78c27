package broker

// DescribeConfigs (key 32), v0–v4, answered from this broker's image and
// configuration (Kafka's ConfigHelper). A controller answers broker and
// topic resources with the same nodeConfigs (controller_handler.go).
//
//   - Topic resources: every topic config (or the requested ones; unknown
//     names are left out) with its effective value and source, in Kafka's
//     precedence: the topic's own dynamic config (DYNAMIC_TOPIC_CONFIG),
//     the dynamic value of its broker synonym for this broker
//     (DYNAMIC_BROKER_CONFIG) or the cluster (DYNAMIC_DEFAULT_BROKER_CONFIG),
//     server.properties (STATIC_BROKER_CONFIG; see
//     StaticTopicConfigDefaults for how it is told apart from the
//     default), Kafka's default (DEFAULT_CONFIG). An illegal name is
//     INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//   - Broker resources: this broker's id gives every static broker config
//     Keel knows with the dynamic ones overlaid; the empty name gives only
//     the cluster-wide dynamic configs; another id is INVALID_REQUEST (the
//     request belongs on that broker), as in Kafka. Configs AlterConfigs
//     cannot change (metadata.IsDynamicBrokerConfig) are read-only.
//   - Broker loggers: the root logger's level (broker_logger.go).
//   - Group resources (KIP-848 group configs): consumer.session.timeout.ms
//     and consumer.heartbeat.interval.ms, the group's own value
//     (GROUP_CONFIG) or its broker synonym's, group.consumer.* (from
//     server.properties, STATIC_BROKER_CONFIG, or Kafka's default); the
//     group need not exist. An empty name is INVALID_REQUEST.
//   - Other resource types (client metrics): INVALID_REQUEST.
//   - v0: IsDefault. v1+: Source, and ConfigSynonyms when IncludeSynonyms,
//     highest precedence first. v3+: ConfigType, and Documentation when
//     IncludeDocumentation (topic configs).

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
)

func (b *Broker) handleDescribeConfigs(m *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := b.currentImage()
	for _, r := range m.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		want := wantConfig(r)
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			b.configs.describeTopicConfigs(img, m, &rr, want)
		case kmsg.ConfigResourceTypeBroker:
			b.configs.describeBrokerConfigs(img, m, &rr, want)
		case kmsg.ConfigResourceTypeBrokerLogger:
			b.loggers().describe(&rr, want)
		case kmsg.ConfigResourceTypeGroupConfig:
			b.configs.describeGroupConfigs(img, m, &rr, want)
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr("unsupported resource type " + r.ResourceType.String())
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// nodeConfigs answers DescribeConfigs for a node's broker and topic
// resources from its own configuration and a metadata image: a broker's
// handler, and a controller's (KIP-919), as Kafka's ConfigHelper serves
// both.
type nodeConfigs struct {
	cfg    *Config
	nodeID int32
	// staticTopicDefaults are the server.properties values of the broker
	// synonyms of topic configs (log.retention.ms, ...), by synonym name.
	staticTopicDefaults map[string]string
}

func newNodeConfigs(nodeID int32, cfg *Config) *nodeConfigs {
	return &nodeConfigs{cfg: cfg, nodeID: nodeID, staticTopicDefaults: StaticTopicConfigDefaults(cfg)}
}

// setStatically reports whether server.properties (or an override) sets
// broker config name: log.dirs also when log.dir does.
func (n *nodeConfigs) setStatically(name string) bool {
	c := n.cfg
	_, set := c.Explicit[name]
	if _, ssl := c.SSL[name]; ssl {
		set = true
	}
	if _, sasl := c.SASL[name]; sasl {
		set = true
	}
	if _, dir := c.Explicit["log.dir"]; dir && name == "log.dirs" {
		set = true
	}
	return set
}

// wantConfig is a resource's filter of config names: all when it names none.
func wantConfig(r kmsg.DescribeConfigsRequestResource) func(string) bool {
	return func(name string) bool { return r.ConfigNames == nil || slices.Contains(r.ConfigNames, name) }
}

func (n *nodeConfigs) describeTopicConfigs(img *metadata.Image, m *kmsg.DescribeConfigsRequest, rr *kmsg.DescribeConfigsResponseResource, want func(string) bool) {
	topic := rr.ResourceName
	if validateTopicName(topic) != nil {
		rr.ErrorCode = kerr.InvalidTopicException.Code
		rr.ErrorMessage = kmsg.StringPtr("illegal topic name " + strconv.Quote(topic))
		return
	}
	if _, ok := img.Topic(topic); !ok {
		rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
		rr.ErrorMessage = kmsg.StringPtr("unknown topic " + topic)
		return
	}
	for _, name := range metadata.TopicConfigNames() {
		if !want(name) {
			continue
		}
		def, _ := metadata.TopicConfigDef(name)
		value, source, syns, _ := n.topicConfigSynonyms(img, topic, name)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = name
		c.Value = kmsg.StringPtr(value)
		c.Source = kmsg.ConfigSource(source)
		c.IsDefault = source == sourceDefault
		c.ConfigType = configType(def.Type)
		if m.IncludeSynonyms && m.Version >= 1 {
			c.ConfigSynonyms = wireSynonyms(syns)
		}
		if m.IncludeDocumentation {
			if doc, ok := topicConfigDocs[name]; ok {
				c.Documentation = kmsg.StringPtr(doc)
			}
		}
		rr.Configs = append(rr.Configs, c)
	}
}

func (n *nodeConfigs) describeBrokerConfigs(img *metadata.Image, m *kmsg.DescribeConfigsRequest, rr *kmsg.DescribeConfigsResponseResource, want func(string) bool) {
	clusterDefaults := img.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceBroker})
	add := func(name string, value *string, typ kmsg.ConfigType, syns []configSynonym) {
		appendBrokerConfig(rr, m, want, name, value, typ, syns)
	}
	entries := brokerConfigEntries(n.cfg)
	// typeOf is a key's type as a broker describes it; a dynamic key
	// outside that table is a STRING.
	typeOf := func(name string) kmsg.ConfigType {
		for _, e := range entries {
			if e.name == name {
				return e.typ
			}
		}
		return kmsg.ConfigTypeString
	}
	if rr.ResourceName == "" {
		for _, name := range sortedKeys(clusterDefaults) {
			v := clusterDefaults[name]
			add(name, kmsg.StringPtr(v), typeOf(name), []configSynonym{{Name: name, Value: v, Source: sourceDynamicDefaultBroker}})
		}
		return
	}
	if id, err := strconv.ParseInt(rr.ResourceName, 10, 32); err != nil || int32(id) != n.nodeID {
		rr.ErrorCode = kerr.InvalidRequest.Code
		rr.ErrorMessage = kmsg.StringPtr("unexpected broker id, expected " + strconv.Itoa(int(n.nodeID)) + " or empty string, but received " + rr.ResourceName)
		return
	}
	perBroker := img.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: rr.ResourceName})
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.name] = true
		var syns []configSynonym
		if v, ok := perBroker[e.name]; ok {
			syns = append(syns, configSynonym{Name: e.name, Value: v, Source: sourceDynamicBroker})
		}
		if v, ok := clusterDefaults[e.name]; ok {
			syns = append(syns, configSynonym{Name: e.name, Value: v, Source: sourceDynamicDefaultBroker})
		}
		def, hasDef := e.defaultValue()
		switch {
		case e.value != nil && n.setStatically(e.name):
			// As Kafka: what server.properties sets is static, even
			// where it equals the default behind it.
			syns = append(syns, configSynonym{Name: e.name, Value: *e.value, Source: sourceStaticBroker})
			if hasDef {
				syns = append(syns, configSynonym{Name: e.name, Value: def, Source: sourceDefault})
			}
		case e.value != nil && *e.value != "" && (!hasDef || *e.value != def):
			// Unset, and Keel's default is not Kafka's: the
			// single-node defaults of a bare keel server (process.roles,
			// listeners, ...), an internal topic's replication factor
			// lowered to a single voter.
			syns = append(syns, configSynonym{Name: e.name, Value: *e.value, Source: sourceDefault})
		case hasDef:
			syns = append(syns, configSynonym{Name: e.name, Value: def, Source: sourceDefault})
		}
		if len(syns) == 0 { // no default and no value: a null default
			syns = append(syns, configSynonym{Name: e.name, Value: "", Source: sourceDefault})
			add(e.name, nil, e.typ, syns)
			continue
		}
		add(e.name, kmsg.StringPtr(syns[0].Value), e.typ, syns)
	}
	// The listener-prefixed ssl.* and sasl.* settings server.properties
	// set (the plain ones are in entries), and the listeners' connection
	// limits. Passwords, private keys, certificates and JAAS configurations
	// are PASSWORD configs: sensitive, their value never returned, as Kafka
	// does.
	for _, security := range []map[string]string{n.cfg.SSL, n.cfg.SASL, n.cfg.ListenerConnectionQuotas} {
		for _, name := range sortedKeys(security) {
			_, dynamic := perBroker[name]
			if _, cluster := clusterDefaults[name]; cluster {
				dynamic = true
			}
			if dynamic || seen[name] || !want(name) {
				continue // a dynamic setting is listed below, with this one as its synonym
			}
			seen[name] = true
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.ConfigType, c.Source, c.ReadOnly = name, listenerConfigType(name), kmsg.ConfigSource(sourceStaticBroker), !metadata.IsDynamicBrokerConfig(name)
			c.Value = kmsg.StringPtr(security[name])
			if m.IncludeSynonyms && m.Version >= 1 {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = name, c.Value, c.Source
				c.ConfigSynonyms = append(c.ConfigSynonyms, s)
			}
			if metadata.SensitiveConfig(name) {
				hideSensitive(&c)
			}
			rr.Configs = append(rr.Configs, c)
		}
	}
	for _, dyn := range []struct {
		configs map[string]string
		source  int8
	}{{perBroker, sourceDynamicBroker}, {clusterDefaults, sourceDynamicDefaultBroker}} {
		for _, name := range sortedKeys(dyn.configs) {
			if seen[name] {
				continue
			}
			seen[name] = true
			v := dyn.configs[name]
			syns := []configSynonym{{Name: name, Value: v, Source: dyn.source}}
			if cluster, ok := clusterDefaults[name]; ok && dyn.source == sourceDynamicBroker {
				syns = append(syns, configSynonym{Name: name, Value: cluster, Source: sourceDynamicDefaultBroker})
			}
			if static, ok := n.cfg.SSL[name]; ok {
				syns = append(syns, configSynonym{Name: name, Value: static, Source: sourceStaticBroker})
			}
			if static, ok := n.cfg.ListenerConnectionQuotas[name]; ok {
				syns = append(syns, configSynonym{Name: name, Value: static, Source: sourceStaticBroker})
			}
			add(name, kmsg.StringPtr(v), listenerConfigType(name), syns)
		}
	}
}

// appendBrokerConfig adds broker config name to rr if want takes it: its
// value and type, its source that of the first of syns (highest
// precedence first), the synonyms where the request asks for them, a
// PASSWORD config's values hidden.
func appendBrokerConfig(rr *kmsg.DescribeConfigsResponseResource, m *kmsg.DescribeConfigsRequest, want func(string) bool,
	name string, value *string, typ kmsg.ConfigType, syns []configSynonym) {
	if !want(name) {
		return
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.ConfigType = name, value, typ
	c.Source = kmsg.ConfigSource(syns[0].Source)
	c.IsDefault = syns[0].Source == sourceDefault
	c.ReadOnly = !metadata.IsDynamicBrokerConfig(name)
	if m.IncludeSynonyms && m.Version >= 1 {
		c.ConfigSynonyms = wireSynonyms(syns)
		if value == nil { // a null default, its one synonym null too
			c.ConfigSynonyms[0].Value = nil
		}
	}
	if metadata.SensitiveConfig(name) {
		hideSensitive(&c)
	}
	rr.Configs = append(rr.Configs, c)
}

// hideSensitive hides a PASSWORD config's value and its synonyms' values,
// as Kafka describes them.
func hideSensitive(c *kmsg.DescribeConfigsResponseResourceConfig) {
	c.Value, c.ConfigType, c.IsSensitive = nil, kmsg.ConfigTypePassword, true
	for i := range c.ConfigSynonyms {
		c.ConfigSynonyms[i].Value = nil
	}
}

// listenerConfigType is the type DescribeConfigs gives a config outside
// the broker's table: a listener's connection limits are INTs, as
// max.connections; the rest (ssl.*, sasl.*, custom configs) STRING.
func listenerConfigType(name string) kmsg.ConfigType {
	if _, base, ok := metadata.ListenerConfig(name); ok && metadata.IsListenerConnectionQuota(base) {
		return kmsg.ConfigTypeInt
	}
	return kmsg.ConfigTypeString
}

// wireSynonyms is DescribeConfigs' encoding of a config's synonyms.
func wireSynonyms(syns []configSynonym) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	out := make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(syns))
	for _, s := range syns {
		cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		cs.Name, cs.Value, cs.Source = s.Name, kmsg.StringPtr(s.Value), kmsg.ConfigSource(s.Source)
		out = append(out, cs)
	}
	return out
}

// groupConfigSynonyms are the broker configs group configs default to.
var groupConfigSynonyms = map[string]string{
	metadata.GroupConsumerSessionTimeoutMs:    "group.consumer.session.timeout.ms",
	metadata.GroupConsumerHeartbeatIntervalMs: "group.consumer.heartbeat.interval.ms",
}

var groupConfigDocs = map[string]string{
	metadata.GroupConsumerSessionTimeoutMs:    "The timeout to detect client failures when using the consumer group protocol.",
	metadata.GroupConsumerHeartbeatIntervalMs: "The heartbeat interval given to the members.",
}

// describeGroupConfigs answers DescribeConfigs for a group (Kafka's
// ConfigHelper for GROUP resources).
func (n *nodeConfigs) describeGroupConfigs(img *metadata.Image, m *kmsg.DescribeConfigsRequest, rr *kmsg.DescribeConfigsResponseResource, want func(string) bool) {
	if rr.ResourceName == "" {
		rr.ErrorCode = kerr.InvalidRequest.Code
		rr.ErrorMessage = kmsg.StringPtr("Group name must not be empty.")
		return
	}
	bounds := n.cfg.groupConfigBounds()
	own := img.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceGroup, Name: rr.ResourceName})
	for _, name := range metadata.GroupConfigNames {
		if !want(name) {
			continue
		}
		broker := groupConfigSynonyms[name]
		var syns []configSynonym
		if v, ok := own[name]; ok {
			syns = append(syns, configSynonym{Name: name, Value: v, Source: metadata.ConfigSourceGroupConfig})
		}
		if _, ok := n.cfg.Explicit[broker]; ok {
			syns = append(syns, configSynonym{Name: broker, Value: bounds.Default(name), Source: sourceStaticBroker})
		}
		value, source := bounds.Default(name), sourceDefault
		if len(syns) > 0 {
			value, source = syns[0].Value, syns[0].Source
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source = name, kmsg.StringPtr(value), kmsg.ConfigSource(source)
		c.IsDefault = source == sourceDefault
		c.ConfigType = kmsg.ConfigTypeInt
		if m.IncludeSynonyms && m.Version >= 1 {
			c.ConfigSynonyms = wireSynonyms(syns)
		}
		if m.IncludeDocumentation {
			c.Documentation = kmsg.StringPtr(groupConfigDocs[name])
		}
		rr.Configs = append(rr.Configs, c)
	}
}
