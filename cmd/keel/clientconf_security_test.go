package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// security.protocol with ssl.* and sasl.* in --command-config: SSL is TLS
// with the truststore and keystore named, SASL_* adds PLAIN with the
// sasl.jaas.config credentials, PLAINTEXT nothing; what cannot work is a
// clear error.
func TestSecurityOptions(t *testing.T) {
	for _, props := range []map[string]string{{}, {"security.protocol": "PLAINTEXT"}, {"security.protocol": "plaintext", "ssl.truststore.location": "/x"}} {
		if o, err := securityOptions(props); len(o) != 0 || err != nil {
			t.Errorf("%v: %v %v, want no TLS", props, o, err)
		}
	}
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`
	scramJAAS := `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`
	oauth := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`
	for props, want := range map[string]int{
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=SCRAM-SHA-256|sasl.jaas.config=" + scramJAAS: 1,
		"security.protocol=SASL_SSL|sasl.mechanism=scram-sha-512|sasl.jaas.config=" + scramJAAS:       2,
		"security.protocol=SSL": 1,
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=PLAIN|sasl.jaas.config=" + jaas: 1,
		"security.protocol=SASL_SSL|sasl.mechanism=plain|sasl.jaas.config=" + jaas:       2,
	} {
		o, err := securityOptions(parseTestProps(props))
		if len(o) != want || err != nil {
			t.Errorf("%s: %d options, %v; want %d", props, len(o), err, want)
		}
	}
	for props, want := range map[string]string{
		"security.protocol=TLS":                                                                "want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
		"ssl.truststore.location=/nonexistent/trust.jks":                                       "/nonexistent/trust.jks",
		"security.protocol=SASL_SSL":                                                           "needs sasl.mechanism",
		"security.protocol=SASL_SSL|sasl.mechanism=GSSAPI":                                     "GSSAPI is not supported yet",
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=PLAIN":                                "needs sasl.jaas.config",
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=PLAIN|sasl.jaas.config=Foo required;": "takes the org.apache.kafka.common.security.plain.PlainLoginModule, not Foo",
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=PLAIN|sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required;": "PlainLoginModule needs username and password",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER":                                                                                      "needs sasl.jaas.config",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + jaas:                                                             "takes the org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + oauth:                                                            "needs unsecuredLoginStringClaim_sub",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + oauth + "|sasl.oauthbearer.token.endpoint.url=https://idp/token": "needs the OAuthBearerLoginModule's clientId",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + oauth + "|sasl.oauthbearer.token.endpoint.url=ldap://idp":        "not an https://",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + oauth + "|sasl.login.callback.handler.class=com.example.Login":   "custom login handlers are not supported",
		"security.protocol=SASL_SSL|sasl.mechanism=SCRAM-SHA-256|sasl.jaas.config=" + jaas:                                                           "takes the org.apache.kafka.common.security.scram.ScramLoginModule",
	} {
		m := parseTestProps(props)
		if _, ok := m["security.protocol"]; !ok {
			m["security.protocol"] = "SSL"
		}
		if _, err := securityOptions(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", props, err, want)
		}
	}
}

// Kafka's unsecured login: an unsigned token of the module's claim
// options, valid unsecuredLoginLifetimeSeconds; a list claim's first
// character is its delimiter.
func TestUnsecuredLoginToken(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	token, err := unsecuredLoginToken(map[string]string{"unsecuredLoginStringClaim_sub": "dev", "unsecuredLoginListClaim_scope": ",kafka,,admin",
		"unsecuredLoginNumberClaim_level": "3", "unsecuredLoginLifetimeSeconds": "60"}, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("token %q is not an unsigned JWS", token)
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil || string(header) != `{"alg":"none"}` {
		t.Fatalf("header %s, claims %s: %v", header, payload, err)
	}
	if claims["sub"] != "dev" || claims["level"] != 3.0 || claims["exp"] != 1_800_000_060.0 || claims["iat"] != 1_800_000_000.0 ||
		fmt.Sprint(claims["scope"]) != "[kafka admin]" {
		t.Fatalf("claims %v", claims)
	}
	if _, err := unsecuredLoginToken(map[string]string{"unsecuredLoginStringClaim_sub": "dev", "unsecuredLoginLifetimeSeconds": "0"}, now); err == nil {
		t.Fatal("a lifetime of 0 was accepted")
	}
}

// parseTestProps reads "k=v|k=v".
func parseTestProps(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, "|") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
