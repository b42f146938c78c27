package client_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelstream/keel/client"
)

// The OAUTHBEARER message is RFC 7628's: GS2 header (with the escaped
// authorization id), auth=Bearer <token>, sorted extensions, each pair
// ended by %x01, and a final %x01. An error JSON from the broker is
// acknowledged with %x01, as RFC 7628 asks.
func TestOAuthBearerAuthMessage(t *testing.T) {
	token := func(context.Context) (string, error) { return "eyJ.eyJ.sig", nil }
	a := client.OAuthBearerAuth{Token: token, Zid: "svc,a=b", Extensions: map[string]string{"traceId": "7", "env": "prod"}}
	session, msg, err := a.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	if want := "n,a=svc=2Ca=3Db,\x01auth=Bearer eyJ.eyJ.sig\x01env=prod\x01traceId=7\x01\x01"; string(msg) != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	if done, next, err := session.Challenge([]byte(`{"status":"invalid_token"}`)); done || string(next) != "\x01" || err != nil {
		t.Fatalf("error JSON: done %v next %q err %v", done, next, err)
	}
	if _, _, err := session.Challenge([]byte(`{"status":"invalid_token"}`)); err == nil {
		t.Fatal("a second answer was taken")
	}
	if _, msg, _ := (client.OAuthBearerAuth{Token: token}).Authenticate(context.Background(), "b"); string(msg) != "n,,\x01auth=Bearer eyJ.eyJ.sig\x01\x01" {
		t.Fatalf("plain message %q", msg)
	}
	for what, bad := range map[string]client.OAuthBearerAuth{
		"no token func":  {},
		"empty token":    {Token: func(context.Context) (string, error) { return "", nil }},
		"token with %01": {Token: func(context.Context) (string, error) { return "a\x01b", nil }},
		"bad extension":  {Token: token, Extensions: map[string]string{"auth": "x"}},
		"digit in name":  {Token: token, Extensions: map[string]string{"k1": "x"}},
	} {
		if _, _, err := bad.Authenticate(context.Background(), "b"); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}

// OAuthClientCredentials posts the client credentials grant with HTTP
// basic authentication, reuses the token until its refresh window, and
// reports a refusal with the endpoint's answer.
func TestOAuthClientCredentials(t *testing.T) {
	var calls atomic.Int64
	expiresIn := 3600
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		id, secret, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" || !ok {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if id != "orders app" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		answer := map[string]any{"access_token": "tok-" + r.FormValue("scope"), "token_type": "Bearer", "expires_in": expiresIn}
		if expiresIn < 0 { // a JWT whose exp is in an hour, without expires_in
			exp, _ := json.Marshal(map[string]any{"exp": time.Now().Add(time.Hour).Unix()})
			answer = map[string]any{"access_token": "e30." + base64.RawURLEncoding.EncodeToString(exp) + ".sig"}
		}
		json.NewEncoder(w).Encode(answer)
	}))
	defer srv.Close()
	ctx := context.Background()
	c := &client.OAuthClientCredentials{TokenURL: srv.URL, ClientID: "orders app", ClientSecret: "s3cret", Scope: "kafka"}
	for range 3 {
		if tok, err := c.Token(ctx); err != nil || tok != "tok-kafka" {
			t.Fatalf("token %q %v", tok, err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d token requests for a token valid an hour", calls.Load())
	}
	if strings.Contains(c.String(), "s3cret") {
		t.Fatalf("String shows the secret: %s", c)
	}
	// A token about to expire is fetched again each time.
	expiresIn = 0
	short := &client.OAuthClientCredentials{TokenURL: srv.URL, ClientID: "orders app", ClientSecret: "s3cret"}
	short.Token(ctx)
	short.Token(ctx)
	if calls.Load() != 3 {
		t.Fatalf("%d token requests, want 3", calls.Load())
	}
	// Without expires_in, the token's own exp counts.
	expiresIn = -1
	jwt := &client.OAuthClientCredentials{TokenURL: srv.URL, ClientID: "orders app", ClientSecret: "s3cret"}
	jwt.Token(ctx)
	if tok, err := jwt.Token(ctx); err != nil || !strings.HasPrefix(tok, "e30.") || calls.Load() != 4 {
		t.Fatalf("token %q %v after %d requests, want 4", tok, err, calls.Load())
	}
	bad := &client.OAuthClientCredentials{TokenURL: srv.URL, ClientID: "orders app", ClientSecret: "guess"}
	if _, err := bad.Token(ctx); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("a wrong secret: %v", err)
	}
}

// OAuthLoginSettings retry a token endpoint that is briefly down, and a
// zero RetryBackoffMax makes one request, as Kafka's
// sasl.login.retry.backoff.max.ms=0 does.
func TestOAuthLoginSettingsRetry(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%3 != 0 {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "a.b.c", "expires_in": 3600})
	}))
	defer srv.Close()
	s := client.DefaultOAuthLoginSettings()
	s.RetryBackoff = 10 * time.Millisecond
	c := &client.OAuthClientCredentials{TokenURL: srv.URL, ClientID: "id", ClientSecret: "secret", Settings: &s}
	if tok, err := c.Token(context.Background()); err != nil || tok != "a.b.c" || calls.Load() != 3 {
		t.Fatalf("token %q %v after %d requests, want one after 3", tok, err, calls.Load())
	}
	once := client.DefaultOAuthLoginSettings()
	once.RetryBackoffMax = 0
	c = &client.OAuthClientCredentials{TokenURL: srv.URL, ClientID: "id", ClientSecret: "secret", Settings: &once}
	if _, err := c.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "503") || calls.Load() != 4 {
		t.Fatalf("%v after %d requests, want a 503 after 4", err, calls.Load())
	}
}
