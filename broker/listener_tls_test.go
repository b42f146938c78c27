package broker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/keelstream/keel/network"
)

// ssl.* keys are read per listener, a listener.name.<listener>.ssl.* key
// winning over the plain one; Java-only ssl.* keys are ignored, not
// reported as typos.
func TestListenerTLSSettings(t *testing.T) {
	c, err := LoadConfig(map[string]string{
		"ssl.keystore.location":                        "/etc/kafka/broker.p12",
		"ssl.keystore.type":                            "PKCS12",
		"ssl.client.auth":                              "none",
		"listener.name.external.ssl.client.auth":       "required",
		"listener.name.EXTERNAL.ssl.keystore.type":     "PKCS12",
		"listener.name.internal.ssl.keystore.location": "/etc/kafka/internal.p12",
		"ssl.keymanager.algorithm":                     "SunX509",
		"ssl.provider":                                 "SunJSSE",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Ignored, []string{"ssl.keymanager.algorithm", "ssl.provider"}) || len(c.Unknown) != 0 {
		t.Errorf("ignored %v unknown %v", c.Ignored, c.Unknown)
	}
	ext, err := c.ListenerTLS("EXTERNAL")
	if err != nil {
		t.Fatal(err)
	}
	if ext.ClientAuth != "required" || ext.KeystoreLocation != "/etc/kafka/broker.p12" || !strings.EqualFold(ext.KeystoreType, "PKCS12") {
		t.Errorf("EXTERNAL: %+v", ext)
	}
	other, err := c.ListenerTLS("CLIENTS")
	if err != nil {
		t.Fatal(err)
	}
	if other.ClientAuth != "none" || other.KeystoreLocation != "/etc/kafka/broker.p12" {
		t.Errorf("CLIENTS: %+v", other)
	}
	if in, _ := c.ListenerTLS("INTERNAL"); in.KeystoreLocation != "/etc/kafka/internal.p12" {
		t.Errorf("INTERNAL keystore %q", in.KeystoreLocation)
	}
}

// Brokers and controllers talk PLAINTEXT among themselves for now: an SSL
// controller or inter-broker listener is refused with a message saying
// what to do; an SSL listener whose keystore does not load stops the node
// with the setting named.
func TestListenerTLSRefusals(t *testing.T) {
	listeners := []network.Listener{
		{Name: "INTERNAL", SecurityProtocol: network.Plaintext},
		{Name: "CONTROLLER", SecurityProtocol: network.Plaintext},
		{Name: "EXTERNAL", SecurityProtocol: network.SSL},
	}
	load := func(props map[string]string) *Config {
		t.Helper()
		c, err := LoadConfig(props, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := map[string]string{"inter.broker.listener.name": "INTERNAL", "controller.listener.names": "CONTROLLER"}

	if _, err := listenerTLS(load(base), listeners, true); err == nil || !strings.Contains(err.Error(), "ssl.keystore") {
		t.Errorf("SSL listener without a keystore: %v", err)
	}
	missing := load(map[string]string{"inter.broker.listener.name": "INTERNAL", "controller.listener.names": "CONTROLLER",
		"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/nonexistent/broker.p12", "ssl.keystore.password": "x"})
	if _, err := listenerTLS(missing, listeners, true); err == nil || !strings.Contains(err.Error(), "/nonexistent/broker.p12") {
		t.Errorf("missing keystore file: %v", err)
	}

	interSSL := []network.Listener{{Name: "INTERNAL", SecurityProtocol: network.SSL}, {Name: "CONTROLLER", SecurityProtocol: network.Plaintext}}
	if _, err := listenerTLS(load(base), interSSL, true); err == nil || !strings.Contains(err.Error(), "inter.broker.listener.name") {
		t.Errorf("SSL inter-broker listener: %v", err)
	}
	ctlSSL := []network.Listener{{Name: "INTERNAL", SecurityProtocol: network.Plaintext}, {Name: "CONTROLLER", SecurityProtocol: network.SSL}}
	if _, err := listenerTLS(load(base), ctlSSL, true); err == nil || !strings.Contains(err.Error(), "controller.listener.names") {
		t.Errorf("SSL controller listener: %v", err)
	}
	plain := listeners[:2]
	if got, err := listenerTLS(load(base), plain, true); err != nil || len(got) != 0 {
		t.Errorf("PLAINTEXT listeners only: %v %v", got, err)
	}
}
