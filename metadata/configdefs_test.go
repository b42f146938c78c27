package metadata

import (
	"slices"
	"strings"
	"testing"
)

// BrokerDefault resolves a topic config's cluster default from broker
// configs in any unit as Kafka does: the layers overlaid key by key, then
// the finest unit set wins, scaled to the topic config's unit; Kafka's
// default is carried by the coarsest unit (log.retention.hours=168).
func TestBrokerDefaultResolvesEveryUnit(t *testing.T) {
	const dynBroker, dynDefault, static = ConfigSourceDynamicBroker, ConfigSourceDynamicDefaultBroker, ConfigSourceStaticBroker
	layers := func(broker, cluster, file map[string]string) []ConfigLayer {
		return []ConfigLayer{{broker, dynBroker}, {cluster, dynDefault}, {file, static}}
	}
	for _, tc := range []struct {
		name, config        string
		broker, cluster, fl map[string]string
		value               string
		source              int8
		synonyms            []ConfigSynonym
	}{
		{name: "nothing set", config: "retention.ms", value: "604800000", source: ConfigSourceDefault,
			synonyms: []ConfigSynonym{{"log.retention.hours", "168", ConfigSourceDefault}}},
		{name: "hours in the file", config: "retention.ms", fl: map[string]string{"log.retention.hours": "48"},
			value: "172800000", source: static,
			synonyms: []ConfigSynonym{{"log.retention.hours", "48", static}, {"log.retention.hours", "168", ConfigSourceDefault}}},
		{name: "dynamic minutes over static hours", config: "retention.ms",
			cluster: map[string]string{"log.retention.minutes": "90"}, fl: map[string]string{"log.retention.hours": "48"},
			value: "5400000", source: dynDefault,
			synonyms: []ConfigSynonym{{"log.retention.minutes", "90", dynDefault}, {"log.retention.hours", "48", static}, {"log.retention.hours", "168", ConfigSourceDefault}}},
		{name: "a finer unit in a lower layer still wins", config: "retention.ms",
			broker: map[string]string{"log.retention.hours": "2"}, fl: map[string]string{"log.retention.ms": "1000"},
			value: "1000", source: static,
			synonyms: []ConfigSynonym{{"log.retention.hours", "2", dynBroker}, {"log.retention.ms", "1000", static}, {"log.retention.hours", "168", ConfigSourceDefault}}},
		{name: "per broker over cluster in the same unit", config: "retention.ms",
			broker: map[string]string{"log.retention.hours": "2"}, cluster: map[string]string{"log.retention.hours": "3"},
			value: "7200000", source: dynBroker,
			synonyms: []ConfigSynonym{{"log.retention.hours", "2", dynBroker}, {"log.retention.hours", "3", dynDefault}, {"log.retention.hours", "168", ConfigSourceDefault}}},
		{name: "unlimited in hours", config: "retention.ms", cluster: map[string]string{"log.retention.hours": "-1"},
			value: "-1", source: dynDefault,
			synonyms: []ConfigSynonym{{"log.retention.hours", "-1", dynDefault}, {"log.retention.hours", "168", ConfigSourceDefault}}},
		{name: "roll hours", config: "segment.ms", cluster: map[string]string{"log.roll.hours": "1"},
			value: "3600000", source: dynDefault,
			synonyms: []ConfigSynonym{{"log.roll.hours", "1", dynDefault}, {"log.roll.hours", "168", ConfigSourceDefault}}},
		{name: "roll jitter", config: "segment.jitter.ms", fl: map[string]string{"log.roll.jitter.hours": "2"},
			value: "7200000", source: static,
			synonyms: []ConfigSynonym{{"log.roll.jitter.hours", "2", static}, {"log.roll.jitter.hours", "0", ConfigSourceDefault}}},
		{name: "one unit only", config: "retention.bytes", fl: map[string]string{"log.retention.bytes": "1024", "log.retention.hours": "1"},
			value: "1024", source: static,
			synonyms: []ConfigSynonym{{"log.retention.bytes", "1024", static}, {"log.retention.bytes", "-1", ConfigSourceDefault}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := TopicConfigDef(tc.config)
			v, src, syns, ok := d.BrokerDefault(layers(tc.broker, tc.cluster, tc.fl)...)
			if !ok || v != tc.value || src != tc.source || !slices.Equal(syns, tc.synonyms) {
				t.Fatalf("got %s (source %d) %v, want %s (source %d) %v", v, src, syns, tc.value, tc.source, tc.synonyms)
			}
		})
	}
	if d, _ := TopicConfigDef("follower.replication.throttled.replicas"); len(d.BrokerSynonyms()) != 0 {
		t.Fatal("a topic-only config has no broker synonyms")
	} else if _, _, _, ok := d.BrokerDefault(); ok {
		t.Fatal("BrokerDefault of a topic-only config")
	}
}

// The coarser units are dynamic broker configs, validated as Kafka's INTs.
func TestCoarseTimeUnitsAreDynamicBrokerConfigs(t *testing.T) {
	for _, name := range []string{"log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.retention.ms", "log.roll.ms",
		"log.roll.jitter.hours", "log.roll.jitter.ms"} {
		if !IsDynamicBrokerConfig(name) {
			t.Errorf("%s is not dynamic", name)
		}
	}
	for cfg, ok := range map[string]bool{
		"log.retention.hours=24": true, "log.retention.hours=-1": true, "log.retention.minutes=90": true,
		"log.roll.hours=1": true, "log.roll.hours=0": false, "log.retention.hours=a day": false,
		"log.roll.jitter.hours=0": true, "log.roll.jitter.hours=-1": false,
		"log.retention.hours=4294967296": false,
	} {
		name, value, _ := strings.Cut(cfg, "=")
		if err := ValidateBrokerConfigs(map[string]string{name: value}, false); (err == nil) != ok {
			t.Errorf("%s: %v, want accepted %v", cfg, err, ok)
		}
	}
}

// A listener's keystore and truststore are dynamic per broker and only
// listener-prefixed, as Kafka's DynamicBrokerConfig has them; other
// listener-prefixed configs are refused, not stored and ignored.
func TestListenerSSLConfigsAreDynamicPerBroker(t *testing.T) {
	const ks = "listener.name.external.ssl.keystore.location"
	for _, c := range []struct {
		configs   map[string]string
		perBroker bool
		want      string // "" accepted, else part of the error
	}{
		{map[string]string{ks: "/etc/keel/new.p12", "listener.name.external.ssl.keystore.password": "x"}, true, ""},
		{map[string]string{"listener.name.internal.ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"}, true, ""},
		{map[string]string{ks: "/etc/keel/new.p12"}, false, "Cannot update these configs at default cluster level, broker id must be specified: " + ks},
		{map[string]string{"ssl.keystore.location": "/etc/keel/new.p12"}, true, "only per-listener using the listener prefix: ssl.keystore.location"},
		{map[string]string{"listener.name.external.ssl.client.auth": "required"}, true, "Cannot update these configs dynamically: listener.name.external.ssl.client.auth"},
		{map[string]string{"listener.name.sasl_ssl.plain.sasl.jaas.config": "x"}, true, "Cannot update these configs dynamically"},
		{map[string]string{"my.custom.config": "x"}, false, ""},
		// A listener's connection limit: per broker and cluster-wide
		// (Kafka's ClusterLevelListenerConfigs), checked as
		// max.connections.
		{map[string]string{"listener.name.external.max.connections": "100"}, false, ""},
		{map[string]string{"listener.name.external.max.connections": "0"}, true, ""},
		{map[string]string{"listener.name.external.max.connections": "-1"}, true, "max.connections"},
		{map[string]string{"listener.name.external.max.connections": "many"}, false, "max.connections"},
		{map[string]string{"listener.name.external.max.connection.creation.rate": "20", "max.connection.creation.rate": "100"}, false, ""},
		{map[string]string{"listener.name.external.max.connection.creation.rate": "-5"}, true, "max.connection.creation.rate"},
	} {
		err := ValidateBrokerConfigs(c.configs, c.perBroker)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v per broker %v: %v, want %q", c.configs, c.perBroker, err, c.want)
		}
	}
	if !IsDynamicBrokerConfig(ks) || IsDynamicBrokerConfig("listener.name.external.ssl.client.auth") || IsDynamicBrokerConfig("ssl.keystore.location") ||
		!IsDynamicBrokerConfig("listener.name.external.max.connections") {
		t.Error("IsDynamicBrokerConfig of listener configs")
	}
	for name, want := range map[string]bool{"listener.name.external.ssl.keystore.password": true, "ssl.keystore.key": true,
		"listener.name.sasl_ssl.plain.sasl.jaas.config": true, "listener.name.external.ssl.keystore.certificate.chain": true,
		"ssl.truststore.certificates": true, ks: false, "ssl.truststore.location": false} {
		if SensitiveConfig(name) != want {
			t.Errorf("SensitiveConfig(%s) = %v", name, !want)
		}
	}
	pw := &ConfigRecord{ResourceType: ConfigResourceBroker, ResourceName: "1", Name: "listener.name.external.ssl.keystore.password", Value: strp("secret")}
	if r := pw.Redact().(*ConfigRecord); *r.Value != "(redacted)" || *pw.Value != "secret" {
		t.Errorf("redacted %q, record left %q", *r.Value, *pw.Value)
	}
	loc := &ConfigRecord{ResourceType: ConfigResourceBroker, ResourceName: "1", Name: ks, Value: strp("/etc/keel/new.p12")}
	if r := loc.Redact().(*ConfigRecord); *r.Value != "/etc/keel/new.p12" {
		t.Errorf("a path redacted: %q", *r.Value)
	}
}

// Kafka 3.9's remote.log.copy.disable and remote.log.delete.on.disable
// (KIP-950) are topic configs a Kafka 4 cluster's topics may carry; they are
// accepted as booleans, while remote.storage.enable=true is still refused.
func TestTieredStorageSwitchesAreTopicConfigs(t *testing.T) {
	if err := ValidateTopicConfigs(map[string]string{"remote.log.copy.disable": "true", "remote.log.delete.on.disable": "false", "remote.storage.enable": "false"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{{"remote.log.copy.disable": "yes"}, {"remote.storage.enable": "true"}} {
		if err := ValidateTopicConfigs(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
