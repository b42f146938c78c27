package broker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network/sasl"
)

// The DescribeConfigs table carries Kafka's default of each broker config
// beside the parser's own defaults (configKeys): with nothing configured,
// every value must render as the default it claims, or the two tables have
// drifted apart.
func TestBrokerConfigDefaultsMatchTheParsersDefaults(t *testing.T) {
	// Voters set: outside the single-node development default, which
	// departs from Kafka's defaults on purpose (defaultOffsetsReplication).
	c, err := LoadConfig(nil, []string{"controller.quorum.voters=1@localhost:9093"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range brokerConfigEntries(c) {
		def, ok := e.defaultValue()
		if _, set := c.Explicit[e.name]; set || !ok || e.value == nil {
			continue
		}
		if *e.value != def {
			t.Errorf("%s: parsed default renders %q, DescribeConfigs reports default %q", e.name, *e.value, def)
		}
	}
}

// DescribeConfigs lists every plain ssl.* setting a broker reads (a
// setting added to tlsconf is not left out), each with Kafka's type: a
// PASSWORD one exactly where its value is hidden (metadata.SensitiveConfig).
func TestSecurityConfigDefaultsCoverTheSettingsRead(t *testing.T) {
	listed := map[string]bool{}
	for _, d := range securityConfigDefaults() {
		listed[d.name] = true
		if password := d.typ == kmsg.ConfigTypePassword; password != metadata.SensitiveConfig(d.name) {
			t.Errorf("%s: PASSWORD type %v, sensitive %v", d.name, password, metadata.SensitiveConfig(d.name))
		}
	}
	for _, k := range brokerSSLKeys() {
		if !listed[k] {
			t.Errorf("%s is read but not described", k)
		}
	}
	// The sasl.login.* settings a node's OAUTHBEARER login reads are
	// described with the defaults it reads them with.
	described := map[string]string{}
	for _, d := range securityConfigDefaults() {
		if strings.HasPrefix(d.name, "sasl.login.") && d.name != "sasl.login.callback.handler.class" {
			if !sasl.IsOAuthLoginSetting(d.name) {
				t.Errorf("%s is described but not read", d.name)
			}
			described[d.name] = d.def
		}
	}
	s, connect, read, err := sasl.LoginSettingsFrom(func(k string) string { return described[k] })
	if err != nil || connect != 0 || read != 0 || !reflect.DeepEqual(s, sasl.DefaultLoginSettings()) || len(described) != 8 {
		t.Errorf("the described sasl.login.* defaults %v read as %+v, %v, %v, %v; want the defaults", described, s, connect, read, err)
	}
}

// super.users, the authorizer's setting, is described only when
// server.properties sets it, as Kafka lists it.
func TestSuperUsersDescribedOnlyWhenSet(t *testing.T) {
	listed := func(overrides ...string) *string {
		t.Helper()
		c, err := LoadConfig(nil, overrides)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range brokerConfigEntries(c) {
			if e.name == "super.users" {
				return e.value
			}
		}
		return nil
	}
	if v := listed(); v != nil {
		t.Errorf("unset super.users described as %q", *v)
	}
	if v := listed("super.users=User:admin;User:ops"); v == nil || *v != "User:admin;User:ops" {
		t.Errorf("super.users described as %v", v)
	}
}

// A broker config's source is STATIC_BROKER_CONFIG when server.properties
// sets it, even to its default, as in Kafka; unset, it is DEFAULT_CONFIG,
// with Keel's own default where that is not Kafka's (process.roles of a
// bare keel server), and null where there is none.
func TestBrokerConfigSources(t *testing.T) {
	c, err := LoadConfig(nil, []string{"controller.quorum.voters=1@localhost:9093", "num.partitions=1"})
	if err != nil {
		t.Fatal(err)
	}
	req := describeConfigsRequest(kmsg.ConfigResourceTypeBroker, "1")
	rr := kmsg.NewDescribeConfigsResponseResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	newNodeConfigs(1, c).describeBrokerConfigs(metadata.EmptyImage(), req, &rr, func(string) bool { return true })
	got := map[string]string{}
	for _, cfg := range rr.Configs {
		line := "null"
		if cfg.Value != nil {
			line = *cfg.Value
		}
		for _, s := range cfg.ConfigSynonyms {
			v := "null"
			if s.Value != nil {
				v = *s.Value
			}
			line += " " + s.Source.String() + ":" + v
		}
		got[cfg.Name] = line
	}
	for name, want := range map[string]string{
		"num.partitions":             "1 STATIC_BROKER_CONFIG:1 DEFAULT_CONFIG:1",
		"controller.quorum.voters":   "1@localhost:9093 STATIC_BROKER_CONFIG:1@localhost:9093 DEFAULT_CONFIG:",
		"process.roles":              "broker,controller DEFAULT_CONFIG:broker,controller",
		"default.replication.factor": "1 DEFAULT_CONFIG:1",
		"advertised.listeners":       "null DEFAULT_CONFIG:null",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}
