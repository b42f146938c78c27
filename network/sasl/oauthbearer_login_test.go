package sasl

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Kafka's unsecured login: an unsigned token of the module's claim
// options, valid unsecuredLoginLifetimeSeconds; a list claim's first
// character is its delimiter.
func TestUnsecuredLoginToken(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	token, err := UnsecuredLoginToken(map[string]string{"unsecuredLoginStringClaim_sub": "dev", "unsecuredLoginListClaim_scope": ",kafka,,admin",
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
	if _, err := UnsecuredLoginToken(map[string]string{"unsecuredLoginStringClaim_sub": "dev", "unsecuredLoginLifetimeSeconds": "0"}, now); err == nil {
		t.Fatal("a lifetime of 0 was accepted")
	}
}

// A login from the OAuthBearerLoginModule's options: the unsecured login
// issues a fresh token for each connection, which Kafka's unsecured
// validator accepts; a file: endpoint is read for each connection; the
// extension_ options are the extensions; what cannot work fails at once.
func TestNewOAuthBearerLogin(t *testing.T) {
	ctx := context.Background()
	options := map[string]string{"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginLifetimeSeconds": "60", "extension_traceId": "abc"}
	login, err := NewOAuthBearerLogin(options, settings(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(login.Extensions) != 1 || login.Extensions["traceId"] != "abc" {
		t.Errorf("extensions %v", login.Extensions)
	}
	first, err := login.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	second, _ := login.Token(ctx)
	if first == second {
		t.Error("the unsecured login gave the same token twice: it must be issued for each connection")
	}
	tok, err := (&UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}).Validate(second, time.Now())
	if err != nil || tok.Principal != "broker" || time.Until(tok.Expires) > time.Minute {
		t.Errorf("the unsecured validator: %+v %v", tok, err)
	}

	path := filepath.Join(t.TempDir(), "token")
	os.WriteFile(path, []byte("one.two.three\n"), 0o600)
	fromFile, err := NewOAuthBearerLogin(map[string]string{}, settings(map[string]string{
		"sasl.login.callback.handler.class": OAuthLoginHandler, "sasl.oauthbearer.token.endpoint.url": "file:" + path}))
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := fromFile.Token(ctx); err != nil || tok != "one.two.three" {
		t.Errorf("file token %q %v", tok, err)
	}
	os.WriteFile(path, []byte("four.five.six"), 0o600)
	if tok, _ := fromFile.Token(ctx); tok != "four.five.six" {
		t.Errorf("file token %q after the file changed", tok)
	}

	for what, tc := range map[string]struct {
		options           map[string]string
		handler, endpoint string
		want              string
	}{
		"no subject":             {map[string]string{}, "", "", "needs unsecuredLoginStringClaim_sub"},
		"a custom handler":       {options, "com.example.Login", "https://idp/token", "custom login handlers are not supported"},
		"a handler, no endpoint": {options, OAuthLoginHandler, "", "needs sasl.oauthbearer.token.endpoint.url"},
		"an endpoint, no client": {options, "", "https://idp/token", "needs sasl.oauthbearer.client.credentials.client.id"},
		"not a URL we fetch":     {options, "", "ldap://idp", "not an https://"},
		"a bad lifetime":         {map[string]string{"unsecuredLoginStringClaim_sub": "x", "unsecuredLoginLifetimeSeconds": "soon"}, "", "", "unsecuredLoginLifetimeSeconds"},
	} {
		set := settings(map[string]string{"sasl.login.callback.handler.class": tc.handler, "sasl.oauthbearer.token.endpoint.url": tc.endpoint})
		if _, err := NewOAuthBearerLogin(tc.options, set); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, tc.want)
		}
	}
}

// settings is a NewOAuthBearerLogin setting lookup over m.
func settings(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}
