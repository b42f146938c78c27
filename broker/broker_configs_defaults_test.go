package broker

import "testing"

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
		if e.def == "" || e.value == nil {
			continue
		}
		if *e.value != e.def {
			t.Errorf("%s: parsed default renders %q, DescribeConfigs reports default %q", e.name, *e.value, e.def)
		}
	}
}
