package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/keelstream/keel/network"
)

// A SASL listener's settings are checked at startup, as Kafka's broker
// does: mechanisms named (not Kafka's GSSAPI default), each supported and
// with its JAAS configuration; SASL is refused between nodes. Good
// settings give the listener its PLAIN users; sasl.* keys are not
// reported as unknown.
func TestLoadNodeSASL(t *testing.T) {
	listeners := []network.Listener{
		{Name: "INTERNAL", SecurityProtocol: network.Plaintext},
		{Name: "CONTROLLER", SecurityProtocol: network.Plaintext},
		{Name: "CLIENTS", SecurityProtocol: network.SASLPlaintext},
	}
	const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`
	load := func(extra map[string]string) *Config { return loadListenerConfig(t, extra) }
	for what, tc := range map[string]struct {
		props map[string]string
		want  string
	}{
		"no mechanisms (GSSAPI by default)": {nil, "GSSAPI, is not supported"},
		"SCRAM":                             {map[string]string{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "listener.name.clients.plain.sasl.jaas.config": jaas}, "SCRAM-SHA-256 is not supported yet"},
		"no JAAS":                           {map[string]string{"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.clients.plain.sasl.jaas.config is not set"},
		"bad JAAS":                          {map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config": "PlainLoginModule required"}, "listener.name.clients.plain.sasl.jaas.config"},
		"another login module":              {map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`}, "PlainLoginModule"},
	} {
		if _, err := loadNodeSASL(load(tc.props), listeners, true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, tc.want)
		}
	}

	good := load(map[string]string{"listener.name.clients.sasl.enabled.mechanisms": "plain", "listener.name.CLIENTS.plain.sasl.jaas.config": jaas})
	got, err := loadNodeSASL(good, listeners, true)
	if err != nil {
		t.Fatal(err)
	}
	l := got["CLIENTS"]
	if l == nil || len(l.Mechanisms) != 1 || l.Mechanisms[0] != "PLAIN" {
		t.Fatalf("CLIENTS: %+v", l)
	}
	if _, done, user, err := l.Start("PLAIN").Next([]byte("\x00alice\x00alice-secret")); !done || user != "alice" || err != nil {
		t.Errorf("alice: done %v user %q err %v", done, user, err)
	}
	_, _, _, err = l.Start("PLAIN").Next([]byte("\x00mallory\x00alice-secret"))
	var cm interface{ ClientMessage() string }
	if err == nil || !errors.As(err, &cm) || strings.Contains(cm.ClientMessage(), "mallory") || strings.Contains(cm.ClientMessage(), "unknown") {
		t.Errorf("unknown user: %v (the client must not learn the user is unknown)", err)
	}

	// SASL between nodes is not supported yet.
	internalSASL := []network.Listener{{Name: "INTERNAL", SecurityProtocol: network.SASLSSL}, {Name: "CONTROLLER", SecurityProtocol: network.Plaintext}}
	if _, err := loadNodeSASL(good, internalSASL, true); err == nil || !strings.Contains(err.Error(), "inter.broker.listener.name") {
		t.Errorf("SASL inter-broker listener: %v", err)
	}
	ctlSASL := []network.Listener{{Name: "INTERNAL", SecurityProtocol: network.Plaintext}, {Name: "CONTROLLER", SecurityProtocol: network.SASLPlaintext}}
	if _, err := loadNodeSASL(good, ctlSASL, true); err == nil || !strings.Contains(err.Error(), "controller.listener.names") {
		t.Errorf("SASL controller listener: %v", err)
	}
}
