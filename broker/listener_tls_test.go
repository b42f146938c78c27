package broker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
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
	ext, err := c.ListenerTLS("EXTERNAL", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ext.ClientAuth != "required" || ext.KeystoreLocation != "/etc/kafka/broker.p12" || !strings.EqualFold(ext.KeystoreType, "PKCS12") {
		t.Errorf("EXTERNAL: %+v", ext)
	}
	other, err := c.ListenerTLS("CLIENTS", nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.ClientAuth != "none" || other.KeystoreLocation != "/etc/kafka/broker.p12" {
		t.Errorf("CLIENTS: %+v", other)
	}
	if in, _ := c.ListenerTLS("INTERNAL", nil); in.KeystoreLocation != "/etc/kafka/internal.p12" {
		t.Errorf("INTERNAL keystore %q", in.KeystoreLocation)
	}
	// Dynamic configs set a listener's keystore, and nothing else.
	dynamic := map[string]string{
		"listener.name.external.ssl.keystore.location": "/etc/kafka/rotated.p12",
		"listener.name.external.ssl.client.auth":       "none",
		"ssl.keystore.location":                        "/etc/kafka/unprefixed.p12",
	}
	ext, err = c.ListenerTLS("EXTERNAL", dynamic)
	if err != nil || ext.KeystoreLocation != "/etc/kafka/rotated.p12" || ext.ClientAuth != "required" {
		t.Errorf("EXTERNAL with dynamic configs: %+v %v", ext, err)
	}
	if in, _ := c.ListenerTLS("INTERNAL", dynamic); in.KeystoreLocation != "/etc/kafka/internal.p12" {
		t.Errorf("INTERNAL keystore %q with another listener's dynamic one", in.KeystoreLocation)
	}
}

// An SSL listener whose keystore does not load stops the node with the
// setting named; so does an SSL controller or inter-broker listener whose
// client side (this node dialling others) does not load. PLAINTEXT ones
// dial plain TCP.
func TestLoadNodeTLS(t *testing.T) {
	protocols := map[string]network.SecurityProtocol{"INTERNAL": network.Plaintext, "CONTROLLER": network.Plaintext, "EXTERNAL": network.SSL}
	listeners := []network.Listener{
		{Name: "INTERNAL", SecurityProtocol: network.Plaintext},
		{Name: "CONTROLLER", SecurityProtocol: network.Plaintext},
		{Name: "EXTERNAL", SecurityProtocol: network.SSL},
	}
	load := func(extra map[string]string) *Config { return loadListenerConfig(t, extra) }
	if _, err := loadNodeTLS(load(nil), listeners, protocols, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "ssl.keystore") {
		t.Errorf("SSL listener without a keystore: %v", err)
	}
	missing := load(map[string]string{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/nonexistent/broker.p12", "ssl.keystore.password": "x"})
	if _, err := loadNodeTLS(missing, listeners, protocols, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "/nonexistent/broker.p12") {
		t.Errorf("missing keystore file: %v", err)
	}
	plain, err := loadNodeTLS(load(nil), listeners[:2], protocols, hclog.NewNullLogger())
	if err != nil || len(plain.servers) != 0 {
		t.Fatalf("PLAINTEXT listeners only: %+v %v", plain, err)
	}

	// The inter-broker listener is SSL: this node dials it with its
	// truststore, which must load even where this node binds no such
	// listener (a controller-only node dialling broker observers).
	sslInternal := map[string]network.SecurityProtocol{"INTERNAL": network.SSL, "CONTROLLER": network.Plaintext}
	bad := load(map[string]string{"listener.name.internal.ssl.truststore.type": "PEM", "listener.name.internal.ssl.truststore.location": "/nonexistent/ca.pem"})
	if _, err := loadNodeTLS(bad, listeners[1:2], sslInternal, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "inter-broker listener INTERNAL") {
		t.Errorf("inter-broker listener's truststore missing: %v", err)
	}
	sslCtl := map[string]network.SecurityProtocol{"INTERNAL": network.Plaintext, "CONTROLLER": network.SSL}
	badCtl := load(map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": "/nonexistent/ca.pem"})
	if _, err := loadNodeTLS(badCtl, listeners[:1], sslCtl, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "controller listener CONTROLLER") {
		t.Errorf("controller listener's truststore missing: %v", err)
	}
}

// loadListenerConfig is a node's config with listeners INTERNAL
// (inter-broker) and CONTROLLER, and extra settings; it fails the test on
// keys reported unknown.
func loadListenerConfig(t *testing.T, extra map[string]string) *Config {
	t.Helper()
	props := map[string]string{"inter.broker.listener.name": "INTERNAL", "controller.listener.names": "CONTROLLER"}
	for k, v := range extra {
		props[k] = v
	}
	c, err := LoadConfig(props, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Unknown) != 0 {
		t.Errorf("unknown keys %v", c.Unknown)
	}
	return c
}
