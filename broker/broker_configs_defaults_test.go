package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
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
