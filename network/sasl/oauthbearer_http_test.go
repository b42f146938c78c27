package sasl

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An identity provider whose certificate is from a private CA: the token
// endpoint is reached over HTTPS only with that CA in the module's
// ssl.truststore.* options (Kafka's JaasOptionsUtils); without them the
// system's roots refuse it. A truststore that cannot be read fails the
// login's setup, naming the option. With
// ssl.endpoint.identification.algorithm empty the chain is verified but
// not the host name.
func TestOAuthBearerLoginTrustsTheModulesTruststore(t *testing.T) {
	idp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"access_token": "a.b.c", "token_type": "Bearer", "expires_in": 3600})
	}))
	idp.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	idp.StartTLS()
	defer idp.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "idp-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	token := func(endpoint string, options map[string]string) (string, error) {
		t.Helper()
		opts := map[string]string{"clientId": "svc", "clientSecret": "svc-secret"}
		for k, v := range options {
			opts[k] = v
		}
		// A refused handshake is retried, as Kafka's are: here for 200 ms.
		login, err := NewOAuthBearerLogin(opts, settings(map[string]string{
			"sasl.login.callback.handler.class": OAuthLoginHandler, "sasl.oauthbearer.token.endpoint.url": endpoint,
			"sasl.login.retry.backoff.max.ms": "200"}))
		if err != nil {
			return "", err
		}
		return login.Token(ctx)
	}
	trust := map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
	if tok, err := token(idp.URL+"/token", trust); err != nil || tok != "a.b.c" {
		t.Fatalf("with the CA in ssl.truststore.location: %q %v", tok, err)
	}
	if _, err := token(idp.URL+"/token", nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without a truststore (the system's roots): %v, want a certificate error", err)
	}
	missing := map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": filepath.Join(dir, "missing.pem")}
	if _, err := token(idp.URL+"/token", missing); err == nil || !strings.Contains(err.Error(), "ssl.truststore.location") {
		t.Fatalf("an unreadable truststore: %v, want an error naming ssl.truststore.location", err)
	}
	// httptest's certificate names 127.0.0.1 and example.com, not localhost.
	byName := strings.Replace(idp.URL, "127.0.0.1", "localhost", 1) + "/token"
	if _, err := token(byName, trust); err == nil || !strings.Contains(err.Error(), "localhost") {
		t.Fatalf("a host name the certificate does not hold: %v, want a host name error", err)
	}
	noHostCheck := map[string]string{"ssl.endpoint.identification.algorithm": ""}
	for k, v := range trust {
		noHostCheck[k] = v
	}
	if tok, err := token(byName, noHostCheck); err != nil || tok != "a.b.c" {
		t.Fatalf("with ssl.endpoint.identification.algorithm empty: %q %v", tok, err)
	}
}
