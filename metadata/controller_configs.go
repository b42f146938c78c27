package metadata

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config sources, as DescribeConfigs and CreateTopics (v5+) report them
// (Kafka's DescribeConfigsResponse.ConfigSource).
const (
	ConfigSourceDynamicTopic         int8 = 1
	ConfigSourceDynamicBroker        int8 = 2
	ConfigSourceDynamicDefaultBroker int8 = 3
	ConfigSourceStaticBroker         int8 = 4
	ConfigSourceDefault              int8 = 5
	ConfigSourceGroupConfig          int8 = 8
)

// kmsg's ConfigResourceType value for a broker logger (KIP-412).
const configResourceBrokerLogger int8 = 8

// effectiveTopicConfig is the value of a topic config and where it comes
// from: the topic's own dynamic config, else the cluster-wide dynamic
// broker configs of its synonyms, else the static broker configs
// (server.properties), else Kafka's default (ConfigDef.BrokerDefault).
func (c *ClusterControl) effectiveTopicConfig(img *Image, topic, name string) (string, int8) {
	if v, ok := img.Config(ConfigResource{Type: ConfigResourceTopic, Name: topic}, name); ok {
		return v, ConfigSourceDynamicTopic
	}
	d, ok := topicConfigDefs[name]
	if !ok {
		return "", 0
	}
	if v, src, _, ok := d.BrokerDefault(
		ConfigLayer{img.configs[ConfigResource{Type: ConfigResourceBroker}], ConfigSourceDynamicDefaultBroker},
		ConfigLayer{c.cfg.StaticBrokerConfigs, ConfigSourceStaticBroker},
	); ok && src != ConfigSourceDefault {
		return v, src
	}
	switch {
	case name == "unclean.leader.election.enable" && c.cfg.UncleanLeaderElectionEnable:
		return "true", ConfigSourceStaticBroker
	case name == "min.insync.replicas" && c.cfg.MinInsyncReplicas != 1:
		return strconv.Itoa(int(c.cfg.MinInsyncReplicas)), ConfigSourceStaticBroker
	}
	return d.Default, ConfigSourceDefault
}

// describeTopicConfigs is every topic config of a topic with its value and
// source, for the CreateTopics response (v5+, KIP-525). dynamic are the
// topic's own configs, which may not be committed yet.
func (c *ClusterControl) describeTopicConfigs(topic string, dynamic map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	names := TopicConfigNames()
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(names))
	for _, n := range names {
		rc := kmsg.NewCreateTopicsResponseTopicConfig()
		rc.Name = n
		if v, ok := dynamic[n]; ok {
			rc.Value, rc.Source = strp(v), ConfigSourceDynamicTopic
		} else {
			v, src := c.effectiveTopicConfig(c.img, topic, n)
			rc.Value, rc.Source = strp(v), src
		}
		out = append(out, rc)
	}
	return out
}

// configDiff is the ConfigRecords that turn one set of dynamic configs of
// a resource into another, by config name.
func configDiff(res ConfigResource, from, to map[string]string) []Record {
	var names []string
	for n := range from {
		if _, ok := to[n]; !ok {
			names = append(names, n)
		}
	}
	for n, v := range to {
		if old, ok := from[n]; !ok || old != v {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]Record, 0, len(names))
	for _, n := range names {
		rec := &ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: n}
		if v, ok := to[n]; ok {
			rec.Value = strp(v)
		}
		out = append(out, rec)
	}
	return out
}

// configResource resolves the resource of an alter-configs request, as
// Kafka's ControllerConfigurationValidator and existence checker do.
func (c *ClusterControl) configResource(typ int8, name string) (ConfigResource, int16, string) {
	res := ConfigResource{Type: typ, Name: name}
	switch typ {
	case ConfigResourceTopic:
		if name == "" {
			return res, kerr.InvalidRequest.Code, "Default topic resources are not allowed."
		}
		if err := validateTopicName(name); err != nil {
			return res, kerr.InvalidTopicException.Code, err.Error()
		}
		if _, ok := c.img.Topic(name); !ok {
			return res, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("Topic %s does not exist.", name)
		}
	case ConfigResourceBroker:
		if name != "" {
			if id, err := strconv.ParseInt(name, 10, 32); err != nil || id < 0 {
				return res, kerr.InvalidRequest.Code, "Unable to parse broker name as a base 10 number."
			}
		}
	case ConfigResourceGroup:
		if name == "" {
			return res, kerr.InvalidRequest.Code, "Group name must not be empty."
		}
	case configResourceBrokerLogger:
		return res, kerr.InvalidRequest.Code, "Broker loggers are altered on the broker itself, not through the controller."
	default:
		return res, kerr.InvalidRequest.Code, fmt.Sprintf("Unsupported resource type %d.", typ)
	}
	return res, 0, ""
}

// validateConfigs validates a resource's complete dynamic configs.
func (c *ClusterControl) validateConfigs(res ConfigResource, configs map[string]string) error {
	switch res.Type {
	case ConfigResourceTopic:
		return ValidateTopicConfigs(configs)
	case ConfigResourceGroup:
		return ValidateGroupConfigs(configs, c.cfg.GroupConfigBounds)
	}
	return ValidateBrokerConfigs(configs, res.Name != "")
}

// duplicateResources finds the resources named more than once in a
// request: each of their entries fails with INVALID_REQUEST.
func duplicateResources(n int, key func(int) ConfigResource) map[ConfigResource]bool {
	count := map[ConfigResource]int{}
	for i := range n {
		count[key(i)]++
	}
	dup := map[ConfigResource]bool{}
	for r, k := range count {
		if k > 1 {
			dup[r] = true
		}
	}
	return dup
}

// Incremental alter config operations (KIP-339).
const (
	opSet      int8 = 0
	opDelete   int8 = 1
	opAppend   int8 = 2
	opSubtract int8 = 3
)

// IncrementalAlterConfigs handles IncrementalAlterConfigs (API 44, KIP-339)
// for topics and brokers (an empty broker name is the cluster-wide
// default), as Kafka's ConfigurationControlManager:
//
//   - SET and DELETE for any config; APPEND and SUBTRACT only for LIST
//     configs (INVALID_CONFIG otherwise), starting from the current value
//     or the default;
//   - a null value other than for DELETE, a config named twice, a resource
//     named twice or an unknown operation: INVALID_REQUEST;
//   - an unknown topic: UNKNOWN_TOPIC_OR_PARTITION; an unknown topic
//     config, an invalid value or a static broker config: INVALID_CONFIG;
//   - the resulting config set is validated as a whole.
//
// Each resource succeeds or fails alone; ValidateOnly answers without
// records. Concurrency: see ClusterControl.
func (c *ClusterControl) IncrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) ([]Record, *kmsg.IncrementalAlterConfigsResponse) {
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	resp.Version = req.Version
	dup := duplicateResources(len(req.Resources), func(i int) ConfigResource {
		return ConfigResource{Type: int8(req.Resources[i].ResourceType), Name: req.Resources[i].ResourceName}
	})
	var out []Record
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		recs, code, msg := c.incrementalAlterResource(int8(r.ResourceType), r.ResourceName, r.Configs, dup)
		rr.ErrorCode = code
		if msg != "" {
			rr.ErrorMessage = strp(msg)
		}
		if code == 0 && !req.ValidateOnly {
			out = append(out, recs...)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return append(out, c.elrConfigChanges(c.img, out)...), resp
}

func (c *ClusterControl) incrementalAlterResource(typ int8, name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, dup map[ConfigResource]bool) ([]Record, int16, string) {
	if dup[ConfigResource{Type: typ, Name: name}] {
		return nil, kerr.InvalidRequest.Code, "Duplicate resource."
	}
	res, code, msg := c.configResource(typ, name)
	if code != 0 {
		return nil, code, msg
	}
	current := c.img.Configs(res)
	next := c.img.Configs(res)
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, kerr.InvalidRequest.Code, "Error due to duplicate config keys"
		}
		seen[op.Name] = true
		o := int8(op.Op)
		if op.Value == nil && o != opDelete {
			return nil, kerr.InvalidRequest.Code, "Null value not supported for : " + op.Name
		}
		switch o {
		case opSet:
			next[op.Name] = *op.Value
		case opDelete:
			delete(next, op.Name)
		case opAppend, opSubtract:
			verb := "APPEND"
			if o == opSubtract {
				verb = "SUBTRACT"
			}
			d, ok := isListConfig(typ, op.Name)
			if !ok {
				return nil, kerr.InvalidConfig.Code, fmt.Sprintf("Can't %s to key %s because its type is not LIST.", verb, op.Name)
			}
			v, set := next[op.Name]
			if !set {
				v = d.Default
			}
			parts := splitList(v)
			for _, item := range splitList(*op.Value) {
				if o == opAppend && !slices.Contains(parts, item) {
					parts = append(parts, item)
				}
				if o == opSubtract {
					parts = slices.DeleteFunc(parts, func(p string) bool { return p == item })
				}
			}
			next[op.Name] = strings.Join(parts, ",")
		default:
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Unknown alter config operation %d for %s.", o, op.Name)
		}
	}
	if err := c.validateConfigs(res, next); err != nil {
		return nil, kerr.InvalidConfig.Code, err.Error()
	}
	return configDiff(res, current, next), 0, ""
}

// AlterConfigs handles the legacy AlterConfigs (API 33): each resource's
// dynamic configs are replaced by the ones given, so a config left out is
// deleted. Errors are those of IncrementalAlterConfigs.
// Concurrency: see ClusterControl.
func (c *ClusterControl) AlterConfigs(req *kmsg.AlterConfigsRequest) ([]Record, *kmsg.AlterConfigsResponse) {
	resp := kmsg.NewPtrAlterConfigsResponse()
	resp.Version = req.Version
	dup := duplicateResources(len(req.Resources), func(i int) ConfigResource {
		return ConfigResource{Type: int8(req.Resources[i].ResourceType), Name: req.Resources[i].ResourceName}
	})
	var out []Record
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		recs, code, msg := c.alterResource(int8(r.ResourceType), r.ResourceName, r.Configs, dup)
		rr.ErrorCode = code
		if msg != "" {
			rr.ErrorMessage = strp(msg)
		}
		if code == 0 && !req.ValidateOnly {
			out = append(out, recs...)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return append(out, c.elrConfigChanges(c.img, out)...), resp
}

// alterResource is the legacy replace-all: every config given is SET and
// every dynamic config not given is DELETEd, through the same checks and
// validation as IncrementalAlterConfigs.
func (c *ClusterControl) alterResource(typ int8, name string, configs []kmsg.AlterConfigsRequestResourceConfig, dup map[ConfigResource]bool) ([]Record, int16, string) {
	ops := make([]kmsg.IncrementalAlterConfigsRequestResourceConfig, 0, len(configs))
	given := map[string]bool{}
	for _, cfg := range configs {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = cfg.Name, kmsg.IncrementalAlterConfigOp(opSet), cfg.Value
		ops = append(ops, op)
		given[cfg.Name] = true
	}
	if res, code, _ := c.configResource(typ, name); code == 0 {
		current := c.img.Configs(res)
		names := make([]string, 0, len(current))
		for k := range current {
			if !given[k] {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			op.Name, op.Op = k, kmsg.IncrementalAlterConfigOp(opDelete)
			ops = append(ops, op)
		}
	}
	return c.incrementalAlterResource(typ, name, ops, dup)
}
