package broker

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/sasl"
)

// A SASL listener's settings are checked at startup, as Kafka's broker
// does: mechanisms named (not Kafka's GSSAPI default), each supported and
// with its JAAS configuration, and on the listeners nodes dial the
// mechanism they dial with. Good settings give the listener its PLAIN
// users; sasl.* keys are not reported as unknown.
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
		"OAUTHBEARER, a custom JWT validator": {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.clients.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.clients.oauthbearer.sasl.server.callback.handler.class": oauthValidatorHandler, "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
			"listener.name.clients.oauthbearer.sasl.oauthbearer.jwt.validator.class": "com.example.Validator"}, "custom JWT validators are not supported"},
		"OAUTHBEARER, a bad clock skew": {map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.clients.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.clients.oauthbearer.sasl.server.callback.handler.class": oauthValidatorHandler, "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
			"sasl.oauthbearer.clock.skew.seconds": "-1"}, "sasl.oauthbearer.clock.skew.seconds=-1"},
		"SCRAM with PLAIN's login module": {map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "listener.name.clients.scram-sha-512.sasl.jaas.config": jaas}, "ScramLoginModule"},
		"no JAAS":                         {map[string]string{"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.clients.plain.sasl.jaas.config is not set"},
		"bad JAAS":                        {map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config": "PlainLoginModule required"}, "listener.name.clients.plain.sasl.jaas.config"},
		"another login module":            {map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`}, "PlainLoginModule"},
	} {
		if _, err := loadNodeSASL(load(tc.props), listeners, true, scramFromImage(metadata.EmptyImage), nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, tc.want)
		}
	}

	good := load(map[string]string{"listener.name.clients.sasl.enabled.mechanisms": "plain", "listener.name.CLIENTS.plain.sasl.jaas.config": jaas})
	got, err := loadNodeSASL(good, listeners, true, scramFromImage(metadata.EmptyImage), nil, nil)
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

	// The inter-broker and controller listeners may be SASL, with the
	// mechanism the nodes dial them with enabled there.
	internalSASL := []network.Listener{{Name: "INTERNAL", SecurityProtocol: network.SASLSSL}, {Name: "CONTROLLER", SecurityProtocol: network.SASLPlaintext}}
	nodes := load(map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": jaas,
		"listener.name.controller.plain.sasl.jaas.config": jaas, "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.mechanism.controller.protocol": "plain"})
	if got, err := loadNodeSASL(nodes, internalSASL, true, scramFromImage(metadata.EmptyImage), nil, nil); err != nil || got["INTERNAL"] == nil || got["CONTROLLER"] == nil {
		t.Errorf("SASL inter-broker and controller listeners: %v, %v", got, err)
	}
	nodes.SASL["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-256"
	if _, err := loadNodeSASL(nodes, internalSASL, true, scramFromImage(metadata.EmptyImage), nil, nil); err == nil || !strings.Contains(err.Error(), "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256 must be one of listener INTERNAL's sasl.enabled.mechanisms") {
		t.Errorf("inter-broker mechanism not enabled: %v", err)
	}
	nodes.SASL["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
	nodes.SASL["sasl.mechanism.controller.protocol"] = "SCRAM-SHA-512"
	if _, err := loadNodeSASL(nodes, internalSASL, true, scramFromImage(metadata.EmptyImage), nil, nil); err == nil || !strings.Contains(err.Error(), "sasl.mechanism.controller.protocol=SCRAM-SHA-512 must be one of listener CONTROLLER's") {
		t.Errorf("controller mechanism not enabled: %v", err)
	}
}

// A node dialling a SASL listener of another node takes the mechanism of
// sasl.mechanism.inter.broker.protocol or sasl.mechanism.controller.protocol
// and its own user from that listener's JAAS configuration's username and
// password, as Kafka's brokers do; what is missing or unsupported stops it
// at startup with the setting named.
func TestInternodeMechanism(t *testing.T) {
	const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";`
	const scramJAAS = `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`
	const oauthModule = sasl.OAuthBearerLoginModule
	for what, tc := range map[string]struct {
		props map[string]string
		want  string // an error; "" for the mechanism's name
	}{
		"unset (GSSAPI)":       {nil, "set sasl.mechanism.inter.broker.protocol (Kafka's default, GSSAPI, is not supported"},
		"GSSAPI":               {map[string]string{"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "GSSAPI, is not supported"},
		"OAUTHBEARER, no JAAS": {map[string]string{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}, "needs listener.name.internal.oauthbearer.sasl.jaas.config="},
		"OAUTHBEARER, PLAIN's module": {map[string]string{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
			"listener.name.internal.oauthbearer.sasl.jaas.config": plainJAAS}, "is not org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"},
		"OAUTHBEARER, no subject": {map[string]string{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
			"listener.name.internal.oauthbearer.sasl.jaas.config": oauthModule + ` required;`}, "needs unsecuredLoginStringClaim_sub"},
		"OAUTHBEARER, an endpoint without a client": {map[string]string{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
			"listener.name.internal.oauthbearer.sasl.jaas.config": oauthModule + ` required;`,
			"sasl.oauthbearer.token.endpoint.url":                 "https://idp.example/token"}, "needs sasl.oauthbearer.client.credentials.client.id"},
		"OAUTHBEARER, a custom login handler": {map[string]string{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
			"listener.name.internal.oauthbearer.sasl.jaas.config":                  oauthModule + ` required clientId="broker" clientSecret="broker-secret";`,
			"listener.name.internal.oauthbearer.sasl.login.callback.handler.class": "com.example.Login",
			"sasl.oauthbearer.token.endpoint.url":                                  "https://idp.example/token"}, "custom login handlers are not supported"},
		"OAUTHBEARER, unsecured": {map[string]string{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
			"listener.name.internal.oauthbearer.sasl.jaas.config": oauthModule + ` required unsecuredLoginStringClaim_sub="broker";`}, ""},
		"OAUTHBEARER, client credentials": {map[string]string{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
			"listener.name.internal.oauthbearer.sasl.jaas.config":                    oauthModule + ` required clientId="broker" clientSecret="broker-secret";`,
			"listener.name.internal.oauthbearer.sasl.login.callback.handler.class":   sasl.OAuthLoginHandler,
			"listener.name.internal.oauthbearer.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}, ""},
		"unknown":          {map[string]string{"sasl.mechanism.inter.broker.protocol": "DIGEST-MD5"}, "DIGEST-MD5 is not supported"},
		"no JAAS":          {map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "needs listener.name.internal.plain.sasl.jaas.config="},
		"another module":   {map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": scramJAAS}, "is not org.apache.kafka.common.security.plain.PlainLoginModule"},
		"no username":      {map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="x";`}, "needs the username and password options"},
		"PLAIN":            {map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": plainJAAS}, ""},
		"SCRAM-SHA-512":    {map[string]string{"sasl.mechanism.inter.broker.protocol": "scram-sha-512", "listener.name.INTERNAL.scram-sha-512.sasl.jaas.config": scramJAAS}, ""},
		"unprefixed JAAS":  {map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.jaas.config": plainJAAS}, "needs listener.name.internal.plain.sasl.jaas.config="},
		"bad JAAS":         {map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": "PlainLoginModule required"}, "listener.name.internal.plain.sasl.jaas.config: "},
		"SCRAM-SHA-256 ok": {map[string]string{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256", "listener.name.internal.scram-sha-256.sasl.jaas.config": scramJAAS}, ""},
	} {
		mech, err := internodeMechanism(loadListenerConfig(t, tc.props), "INTERNAL", "sasl.mechanism.inter.broker.protocol", hclog.NewNullLogger())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", what, err)
		case tc.want == "" && mech.Name() != strings.ToUpper(tc.props["sasl.mechanism.inter.broker.protocol"]):
			t.Errorf("%s: mechanism %s", what, mech.Name())
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", what, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "broker-secret") {
			t.Errorf("%s: a password reached the error: %v", what, err)
		}
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
	got, err := loadNodeSASL(cfg, listeners, true, scramFromImage(func() *metadata.Image { return img }), nil, nil)
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

// The JWKS of an identity provider whose certificate is from a private CA
// is read over HTTPS with the listener's OAUTHBEARER module's
// ssl.truststore.* options (Kafka's JaasOptionsUtils): a token it signs is
// accepted. Without them the system's roots refuse the endpoint, the read
// fails (logged) and no token is accepted. An unreadable truststore stops
// the listener's setup, naming the JAAS setting and the option.
func TestOAuthBearerJWKSOverHTTPSWithTheModulesTruststore(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	idp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]any{{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "k1",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	}))
	idp.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the refused handshakes
	idp.StartTLS()
	defer idp.Close()
	ca := filepath.Join(t.TempDir(), "idp-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	enc := func(v any) string { b, _ := json.Marshal(v); return b64(b) }
	input := enc(map[string]any{"alg": "RS256", "kid": "k1"}) + "." + enc(map[string]any{"sub": "svc", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	token := input + "." + b64(sig)

	validator := func(module string) (sasl.OAuthBearerValidator, *strings.Builder, error) {
		cfg := loadListenerConfig(t, map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER",
			"listener.name.clients.oauthbearer.sasl.jaas.config":                   module,
			"listener.name.clients.oauthbearer.sasl.server.callback.handler.class": oauthValidatorHandler,
			"sasl.oauthbearer.jwks.endpoint.url":                                   idp.URL + "/jwks"})
		jaas, err := sasl.ParseJAAS(module)
		if err != nil {
			t.Fatal(err)
		}
		logs := &strings.Builder{}
		v, err := oauthBearerValidator(cfg, "CLIENTS", jaas, hclog.New(&hclog.LoggerOptions{Output: logs}))
		return v, logs, err
	}
	trusting := fmt.Sprintf(`%s required ssl.truststore.type="PEM" ssl.truststore.location="%s";`, sasl.OAuthBearerLoginModule, ca)
	v, _, err := validator(trusting)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := v.Validate(token, time.Now()); err != nil || tok.Principal != "svc" {
		t.Fatalf("with the CA in the module's truststore: %+v %v", tok, err)
	}
	v, logs, err := validator(sasl.OAuthBearerLoginModule + " required;")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(token, time.Now()); err == nil || !strings.Contains(err.Error(), "no keys") {
		t.Fatalf("without a truststore (the system's roots): %v, want no keys", err)
	}
	if !strings.Contains(logs.String(), "certificate") {
		t.Errorf("the failed JWKS read is not logged with its certificate error:\n%s", logs)
	}
	missing := fmt.Sprintf(`%s required ssl.truststore.type="PEM" ssl.truststore.location="%s.missing";`, sasl.OAuthBearerLoginModule, ca)
	if _, _, err := validator(missing); err == nil || !strings.Contains(err.Error(), "listener.name.clients.oauthbearer.sasl.jaas.config") ||
		!strings.Contains(err.Error(), "ssl.truststore.location") {
		t.Fatalf("an unreadable truststore: %v", err)
	}
}
