package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/keelstream/keel/network/sasl"
)

// OAuthBearerAuth is SASL/OAUTHBEARER (RFC 7628, KIP-255): Kafka's
// sasl.mechanism=OAUTHBEARER. Each new connection presents the bearer
// token Token returns (a JWT from the identity provider, which the broker
// validates against the provider's keys); the principal is its subject.
//
//	creds := &client.OAuthClientCredentials{TokenURL: "https://idp/oauth2/token", ClientID: "orders", ClientSecret: "..."}
//	client.SASL(client.OAuthBearerAuth{Token: creds.Token})
//
// Use it over TLS (security.protocol=SASL_SSL): the token travels in the
// clear otherwise. Safe for concurrent use when Token is.
type OAuthBearerAuth struct {
	// Token returns the token for a new connection.
	Token func(ctx context.Context) (string, error)
	// Zid is the authorization id, usually empty. Kafka brokers refuse one
	// that is not empty and not the token's principal.
	Zid string
	// Extensions are SASL extensions (KIP-342) sent with the token, keys
	// of letters only.
	Extensions map[string]string
}

// Name is "OAUTHBEARER".
func (OAuthBearerAuth) Name() string { return "OAUTHBEARER" }

// Authenticate returns the one OAUTHBEARER message: the GS2 header, then
// auth=Bearer <token> and the extensions, each ended by %x01, and a final
// %x01.
func (a OAuthBearerAuth) Authenticate(ctx context.Context, host string) (SASLSession, []byte, error) {
	if a.Token == nil {
		return nil, nil, errors.New("sasl OAUTHBEARER: no Token func")
	}
	token, err := a.Token(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("sasl OAUTHBEARER: get a token: %w", err)
	}
	if token == "" || strings.ContainsAny(token, "\x00\x01 ,") {
		return nil, nil, errors.New("sasl OAUTHBEARER: the token is empty or holds characters a bearer token cannot")
	}
	if strings.ContainsAny(a.Zid, "\x00\x01") {
		return nil, nil, errors.New("sasl OAUTHBEARER: the authorization id contains NUL or %x01")
	}
	zid := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(a.Zid)
	msg := []byte("n,")
	if zid != "" {
		msg = append(msg, "a="+zid...)
	}
	msg = append(msg, ",\x01auth=Bearer "+token+"\x01"...)
	for _, k := range slices.Sorted(maps.Keys(a.Extensions)) {
		if k == "" || k == "auth" || strings.Trim(strings.ToLower(k), "abcdefghijklmnopqrstuvwxyz") != "" {
			return nil, nil, fmt.Errorf("sasl OAUTHBEARER: extension name %q is not letters only (and not auth)", k)
		}
		if v := a.Extensions[k]; v == "" || strings.ContainsAny(v, "\x00\x01") {
			return nil, nil, fmt.Errorf("sasl OAUTHBEARER: extension %s has an empty or invalid value", k)
		}
		msg = append(msg, k+"="+a.Extensions[k]+"\x01"...)
	}
	msg = append(msg, 0x01)
	return &oauthSession{}, msg, nil
}

// oauthSession is the exchange after the OAUTHBEARER message: an empty
// answer is success. A broker that refuses the token may answer with RFC
// 7628's error JSON first (Kafka does); the client acknowledges it with
// %x01 and the broker then fails the exchange with the error code.
type oauthSession struct{ answered bool }

func (s *oauthSession) Challenge(msg []byte) (bool, []byte, error) {
	if len(msg) == 0 {
		return true, nil, nil
	}
	if s.answered {
		return false, nil, fmt.Errorf("sasl OAUTHBEARER: the broker answered again: %q", msg)
	}
	s.answered = true
	return false, []byte{0x01}, nil
}

// OAuthClientCredentials gets tokens from an identity provider's token
// endpoint with the OAuth 2 client credentials grant (RFC 6749 §4.4), as
// Kafka's OAuthBearerLoginCallbackHandler does with
// sasl.oauthbearer.token.endpoint.url and the JAAS clientId, clientSecret
// and scope (KIP-768). Its fields are TokenURL, ClientID, ClientSecret,
// Scope (optional, space-separated), HTTPClient (nil: http.DefaultClient)
// and Settings: when a token is renewed and how a failed request is
// retried (nil: DefaultOAuthLoginSettings, Kafka's defaults).
//
// It is the login Keel's brokers use to authenticate to each other with
// OAUTHBEARER, from network/sasl, a leaf package the SDK shares with them
// as it shares network/record.
//
// Concurrency: Token is safe for concurrent use.
type OAuthClientCredentials = sasl.ClientCredentials

// OAuthJWTBearer gets tokens from an identity provider's token endpoint
// with the JWT bearer grant (RFC 7523), as Kafka 4.1's
// JwtBearerJwtRetriever does (KIP-1139): the client signs an assertion
// with its own private key instead of sending a secret. Its fields are
// TokenURL, Assertion (a function of the time that makes the assertion:
// an OAuthAssertion's Create), HTTPClient (nil: http.DefaultClient) and
// Settings (nil: DefaultOAuthLoginSettings).
//
//	a := &client.OAuthAssertion{Algorithm: "RS256", PrivateKeyFile: "/etc/orders/key.pem",
//		Subject: "orders", Audience: "https://idp/oauth2/token", ExpSeconds: 300, NbfSeconds: 60}
//	jb := &client.OAuthJWTBearer{TokenURL: "https://idp/oauth2/token", Assertion: a.Create}
//	client.SASL(client.OAuthBearerAuth{Token: jb.Token})
//
// Concurrency: Token is safe for concurrent use.
type OAuthJWTBearer = sasl.JWTBearer

// OAuthAssertion makes the signed JWT an OAuthJWTBearer presents, as
// Kafka's sasl.oauthbearer.assertion.* settings do: RS256 or ES256 with
// the PEM private key in PrivateKeyFile (Passphrase for an encrypted
// PKCS#8 one), the claims sub, iss and aud when set, a template file's
// header and claims, then iat, exp (ExpSeconds on), nbf (NbfSeconds back)
// and, with IncludeJTI, a random jti.
type OAuthAssertion = sasl.Assertion

// OAuthLoginSettings are when an OAuthClientCredentials or OAuthJWTBearer
// renews its token and how it retries the token endpoint, Kafka's
// sasl.login.* settings: RetryBackoff and RetryBackoffMax
// (sasl.login.retry.backoff.ms and .max.ms: waits doubling from the
// first, within the second of the first request; statuses retrying cannot
// change, such as 401, are not retried), RefreshWindowFactor,
// RefreshWindowJitter, RefreshMinPeriod and RefreshBuffer
// (sasl.login.refresh.window.factor, .window.jitter, .min.period.seconds
// and .buffer.seconds), and Log for the retries. Start from
// DefaultOAuthLoginSettings: a zero field is zero, not Kafka's default.
// Connect and read timeouts (sasl.login.connect.timeout.ms,
// .read.timeout.ms) are the HTTPClient's.
type OAuthLoginSettings = sasl.LoginSettings

// DefaultOAuthLoginSettings are Kafka's defaults: retries from 100 ms for
// 10 s; renewal at 80–85% of a token's lifetime, at least a minute after
// it was got and 5 minutes before it expires.
func DefaultOAuthLoginSettings() OAuthLoginSettings { return sasl.DefaultLoginSettings() }
