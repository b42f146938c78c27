package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/sasl"
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
	const oauthJAAS = sasl.OAuthBearerLoginModule + " required;"
	load := func(extra map[string]string) *Config { return loadListenerConfig(t, extra) }
	for what, tc := range map[string]struct {
		props map[string]string
		want  string
	}{
		"no mechanisms (GSSAPI by default)": {nil, "GSSAPI, is not supported"},
		"GSSAPI":                            {map[string]string{"sasl.enabled.mechanisms": "PLAIN,GSSAPI", "listener.name.clients.plain.sasl.jaas.config": jaas}, "GSSAPI is not supported yet"},
		"OAUTHBEARER without JAAS":          {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER"}, "listener.name.clients.oauthbearer.sasl.jaas.config is not set"},
		"OAUTHBEARER with PLAIN's module":   {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.clients.oauthbearer.sasl.jaas.config": jaas}, "OAuthBearerLoginModule"},
		"OAUTHBEARER, a custom handler": {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.clients.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.clients.oauthbearer.sasl.server.callback.handler.class": "com.example.MyHandler"}, "custom callback handlers are not supported"},
		"OAUTHBEARER, JWKS without a URL": {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.clients.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.clients.oauthbearer.sasl.server.callback.handler.class": oauthValidatorHandler}, "needs sasl.oauthbearer.jwks.endpoint.url"},
		"OAUTHBEARER, a JWKS URL of another scheme": {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.clients.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.clients.oauthbearer.sasl.server.callback.handler.class": oauthValidatorHandler, "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"}, "not an https://"},
		"OAUTHBEARER, a bad clock skew": {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.clients.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.clients.oauthbearer.sasl.server.callback.handler.class": oauthValidatorHandler, "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
			"sasl.oauthbearer.clock.skew.seconds": "-1"}, "sasl.oauthbearer.clock.skew.seconds=-1"},
		"SCRAM with PLAIN's login module": {map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "listener.name.clients.scram-sha-512.sasl.jaas.config": jaas}, "ScramLoginModule"},
		"no JAAS":                         {map[string]string{"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.clients.plain.sasl.jaas.config is not set"},
		"bad JAAS":                        {map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config": "PlainLoginModule required"}, "listener.name.clients.plain.sasl.jaas.config"},
		"another login module":            {map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`}, "PlainLoginModule"},
	} {
		if _, err := loadNodeSASL(load(tc.props), listeners, true, metadata.EmptyImage, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, tc.want)
		}
	}

	good := load(map[string]string{"listener.name.clients.sasl.enabled.mechanisms": "plain", "listener.name.CLIENTS.plain.sasl.jaas.config": jaas})
	got, err := loadNodeSASL(good, listeners, true, metadata.EmptyImage, nil)
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
	if _, err := loadNodeSASL(good, internalSASL, true, metadata.EmptyImage, nil); err == nil || !strings.Contains(err.Error(), "inter.broker.listener.name") {
		t.Errorf("SASL inter-broker listener: %v", err)
	}
	ctlSASL := []network.Listener{{Name: "INTERNAL", SecurityProtocol: network.Plaintext}, {Name: "CONTROLLER", SecurityProtocol: network.SASLPlaintext}}
	if _, err := loadNodeSASL(good, ctlSASL, true, metadata.EmptyImage, nil); err == nil || !strings.Contains(err.Error(), "controller.listener.names") {
		t.Errorf("SASL controller listener: %v", err)
	}
}

// A SCRAM listener authenticates the users of the metadata image it is
// given, read at each exchange: a credential added later counts from the
// next connection, as kafka-configs --alter expects. franz-go's SCRAM
// client is the other side.
func TestSASLScramListener(t *testing.T) {
	listeners := []network.Listener{
		{Name: "INTERNAL", SecurityProtocol: network.Plaintext},
		{Name: "CONTROLLER", SecurityProtocol: network.Plaintext},
		{Name: "CLIENTS", SecurityProtocol: network.SASLSSL},
	}
	cfg := loadListenerConfig(t, map[string]string{
		"sasl.enabled.mechanisms":                              "SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.clients.scram-sha-512.sasl.jaas.config": sasl.ScramLoginModule + " required;",
	})
	img := metadata.EmptyImage()
	got, err := loadNodeSASL(cfg, listeners, true, func() *metadata.Image { return img }, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := got["CLIENTS"]
	if l == nil || strings.Join(l.Mechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("CLIENTS: %+v", l)
	}
	exchange := func(mech string, m kgosasl.Mechanism) (string, error) {
		ex := l.Start(mech)
		session, msg, err := m.Authenticate(context.Background(), "broker")
		if err != nil {
			t.Fatal(err)
		}
		for {
			answer, done, user, err := ex.Next(msg)
			if err != nil {
				return "", err
			}
			clientDone, next, err := session.Challenge(answer)
			if err != nil {
				return "", fmt.Errorf("client: %w", err)
			}
			if done {
				if !clientDone {
					t.Fatal("the broker finished before the client")
				}
				return user, nil
			}
			msg = next
		}
	}
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}
	if _, err := exchange("SCRAM-SHA-512", alice.AsSha512Mechanism()); err == nil {
		t.Fatal("alice authenticated before she had a credential")
	}

	salt := []byte("a salt")
	salted, err := sasl.SaltedPassword("SCRAM-SHA-512", "alice-secret", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := metadata.ScramCredentialFromSalted(metadata.ScramSHA512, salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err = img.Apply(1, []metadata.Record{&metadata.UserScramCredentialRecord{
		Name: "alice", Mechanism: metadata.ScramSHA512, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: 4096,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if user, err := exchange("SCRAM-SHA-512", alice.AsSha512Mechanism()); err != nil || user != "alice" {
		t.Fatalf("alice with SCRAM-SHA-512: %q %v", user, err)
	}
	for what, m := range map[string]kgosasl.Mechanism{
		"a wrong password":                scram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism(),
		"an unknown user":                 scram.Auth{User: "mallory", Pass: "alice-secret"}.AsSha512Mechanism(),
		"a mechanism alice has no key of": alice.AsSha256Mechanism(),
	} {
		_, err := exchange(m.Name(), m)
		var cm interface{ ClientMessage() string }
		if err == nil || !errors.As(err, &cm) || strings.Contains(cm.ClientMessage(), "mallory") || strings.Contains(strings.ToLower(cm.ClientMessage()), "unknown") {
			t.Errorf("%s: %v", what, err)
		}
	}
}
