package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/keelstream/keel/client"
)

// security.protocol with ssl.* and sasl.* in --command-config: SSL is TLS
// with the truststore and keystore named, SASL_* adds PLAIN with the
// sasl.jaas.config credentials, PLAINTEXT nothing; what cannot work is a
// clear error.
func TestSecurityOptions(t *testing.T) {
	for _, props := range []map[string]string{{}, {"security.protocol": "PLAINTEXT"}, {"security.protocol": "plaintext", "ssl.truststore.location": "/x"}} {
		if o, err := securityOptions(props, nil); len(o) != 0 || err != nil {
			t.Errorf("%v: %v %v, want no TLS", props, o, err)
		}
	}
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`
	scramJAAS := `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`
	oauth := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`
	tokenJAAS := `org.apache.kafka.common.security.scram.ScramLoginModule required username="tokenid" password="aG1hYw==" tokenauth="true";`
	for props, want := range map[string]int{
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=SCRAM-SHA-256|sasl.jaas.config=" + scramJAAS: 1,
		"security.protocol=SASL_SSL|sasl.mechanism=scram-sha-512|sasl.jaas.config=" + scramJAAS:       2,
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=SCRAM-SHA-512|sasl.jaas.config=" + tokenJAAS: 1,
		"security.protocol=SSL": 1,
		"security.protocol=SASL_PLAINTEXT|sasl.mechanism=PLAIN|sasl.jaas.config=" + jaas: 1,
		"security.protocol=SASL_SSL|sasl.mechanism=plain|sasl.jaas.config=" + jaas:       2,
	} {
		o, err := securityOptions(parseTestProps(props), nil)
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
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + oauth + "|sasl.oauthbearer.token.endpoint.url=https://idp/token": "needs sasl.oauthbearer.client.credentials.client.id",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + oauth + "|sasl.oauthbearer.token.endpoint.url=ldap://idp":        "not an https://",
		"security.protocol=SASL_SSL|sasl.mechanism=OAUTHBEARER|sasl.jaas.config=" + oauth + "|sasl.login.callback.handler.class=com.example.Login":   "custom login handlers are not supported",
		"security.protocol=SASL_SSL|sasl.mechanism=SCRAM-SHA-256|sasl.jaas.config=" + jaas:                                                           "takes the org.apache.kafka.common.security.scram.ScramLoginModule",
		"security.protocol=SASL_SSL|sasl.mechanism=SCRAM-SHA-256|sasl.jaas.config=" + strings.Replace(tokenJAAS, `"true"`, `"yes"`, 1):               `tokenauth="yes": want true or false`,
	} {
		m := parseTestProps(props)
		if _, ok := m["security.protocol"]; !ok {
			m["security.protocol"] = "SSL"
		}
		if _, err := securityOptions(m, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", props, err, want)
		}
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

// The CLI's OAUTHBEARER login warns on stderr of each retry of its token
// endpoint, one line each, as Java's client logs them.
func TestOAuthBearerLoginWarnsOfRetries(t *testing.T) {
	var requests atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"access_token":"a.b.c","expires_in":60}`))
	}))
	defer idp.Close()
	var stderr bytes.Buffer
	m, err := oauthBearerMechanism(map[string]string{
		"sasl.oauthbearer.token.endpoint.url": idp.URL, "sasl.login.retry.backoff.ms": "10",
		"sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="a" clientSecret="b";`,
	}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := m.(client.OAuthBearerAuth).Token(context.Background()); err != nil || tok != "a.b.c" {
		t.Fatalf("token %q %v", tok, err)
	}
	want := "warning: an OAUTHBEARER login's request failed; retrying endpoint=" + idp.URL + ` attempt=1 retry_in=10ms error=HTTP 503 Service Unavailable: {"error":"temporarily_unavailable"}` + "\n"
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
