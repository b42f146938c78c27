package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/keelstream/keel/network/tlsconf"
)

// JWTBearerGrant is the OAuth grant type of RFC 7523 §2.1.
const JWTBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// JWTBearer gets tokens from an identity provider's token endpoint with
// the JWT bearer grant (RFC 7523): the client proves who it is with an
// assertion, a JWT it signs with its own private key, instead of a client
// secret. It is Kafka 4.1's JwtBearerJwtRetriever (KIP-1139). Tokens are
// renewed and requests retried as Settings say, as ClientCredentials' are.
//
// Concurrency: Token is safe for concurrent use.
type JWTBearer struct {
	TokenURL string
	// Assertion makes the assertion of one request (Assertion.Create, or
	// the contents of an assertion file).
	Assertion func(now time.Time) (string, error)
	// HTTPClient makes the requests; nil is http.DefaultClient.
	HTTPClient *http.Client
	// Settings are when the token is renewed and how failed requests are
	// retried; nil: DefaultLoginSettings.
	Settings *LoginSettings

	held heldToken
}

// Token returns a token, from the endpoint when none is held or the held
// one is due for renewal.
func (j *JWTBearer) Token(ctx context.Context) (string, error) {
	return j.held.get(ctx, j.TokenURL, func() (string, time.Time, error) {
		assertion, err := j.Assertion(time.Now())
		if err != nil {
			return "", time.Time{}, fmt.Errorf("the OAuth assertion: %w", err)
		}
		form := url.Values{"grant_type": {JWTBearerGrant}, "assertion": {assertion}}
		return requestToken(ctx, j.HTTPClient, j.Settings, j.TokenURL, form, nil)
	})
}

// Assertion creates the JWT a JWTBearer presents, as Kafka's
// DefaultAssertionCreator does from the sasl.oauthbearer.assertion.*
// settings: its header and claims are, each overriding the one before,
// the configured sub, iss and aud claims; the template file's "header"
// and "payload" objects; then alg and typ ("JWT"), iat (now), exp (now +
// ExpSeconds), nbf (now - NbfSeconds) and, with IncludeJTI, a random jti.
// It is signed with the PEM private key in PrivateKeyFile (RS256 with an
// RSA key, ES256 with a P-256 key). Both files are read for each
// assertion, so that a key or template replaced on disk is used from the
// next token on, as Kafka reloads them.
type Assertion struct {
	Algorithm      string // RS256 or ES256
	PrivateKeyFile string
	Passphrase     string // of an encrypted PKCS#8 key
	TemplateFile   string // optional
	Subject        string // optional claims
	Issuer         string
	Audience       string
	ExpSeconds     int
	NbfSeconds     int
	IncludeJTI     bool
}

// Create makes and signs an assertion valid from now.
func (a *Assertion) Create(now time.Time) (string, error) {
	header, payload := map[string]any{}, map[string]any{}
	for k, v := range map[string]string{"sub": a.Subject, "iss": a.Issuer, "aud": a.Audience} {
		if v != "" {
			payload[k] = v
		}
	}
	if a.TemplateFile != "" {
		th, tp, err := readAssertionTemplate(a.TemplateFile)
		if err != nil {
			return "", err
		}
		for k, v := range th {
			header[k] = v
		}
		for k, v := range tp {
			payload[k] = v
		}
	}
	header["alg"], header["typ"] = a.Algorithm, "JWT"
	secs := now.Unix()
	payload["iat"], payload["exp"], payload["nbf"] = secs, secs+int64(a.ExpSeconds), secs-int64(a.NbfSeconds)
	if a.IncludeJTI {
		payload["jti"] = randomUUID()
	}
	key, err := a.privateKey()
	if err != nil {
		return "", err
	}
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	sig, err := signJWS(a.Algorithm, key, input)
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// privateKey reads the signing key, which must fit the algorithm.
func (a *Assertion) privateKey() (crypto.Signer, error) {
	text, err := os.ReadFile(a.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("the private key: %w", err)
	}
	if a.Passphrase == "" && strings.Contains(string(text), "ENCRYPTED PRIVATE KEY") {
		return nil, fmt.Errorf("the private key %s is encrypted: it needs sasl.oauthbearer.assertion.private.key.passphrase", a.PrivateKeyFile)
	}
	key, err := tlsconf.PEMPrivateKey(pemOrBare(text), a.Passphrase)
	if err != nil {
		return nil, fmt.Errorf("the private key %s: %w", a.PrivateKeyFile, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if a.Algorithm == "RS256" {
			return k, nil
		}
	case *ecdsa.PrivateKey:
		if a.Algorithm == "ES256" && k.Curve == elliptic.P256() {
			return k, nil
		}
	}
	return nil, fmt.Errorf("the private key %s (%T) cannot sign %s: RS256 takes an RSA key, ES256 a P-256 EC key", a.PrivateKeyFile, key, a.Algorithm)
}

// pemOrBare is text as PEM: a file of the base64 of a PKCS#8 key alone,
// without the PEM lines (which Kafka's code reads too), is wrapped in them.
func pemOrBare(text []byte) []byte {
	s := strings.TrimSpace(string(text))
	if strings.HasPrefix(s, "-----BEGIN") {
		return text
	}
	return []byte("-----BEGIN PRIVATE KEY-----\n" + s + "\n-----END PRIVATE KEY-----\n")
}

// signJWS signs input with key for alg (RFC 7518 §3): RSASSA-PKCS1-v1_5
// for RS256, and for ES256 the ECDSA signature as R || S, 32 bytes each.
func signJWS(alg string, key crypto.Signer, input string) ([]byte, error) {
	d := sha256.Sum256([]byte(input))
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			return nil, err
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig, nil
	}
	return nil, fmt.Errorf("no %s signer for %T", alg, key)
}

// readAssertionTemplate reads a template file: a JSON object with an
// optional "header" object and an optional "payload" object.
func readAssertionTemplate(path string) (header, payload map[string]any, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("the assertion template: %w", err)
	}
	var t struct {
		Header  map[string]any `json:"header"`
		Payload map[string]any `json:"payload"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, nil, fmt.Errorf("the assertion template %s: %w", path, err)
	}
	return t.Header, t.Payload, nil
}

// assertionFromFile is an assertion made beforehand
// (sasl.oauthbearer.assertion.file): the file's JWT, read for each
// request so that a new one replaces it.
func assertionFromFile(path string) func(time.Time) (string, error) {
	return func(time.Time) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		s := strings.TrimSpace(string(b))
		if strings.Count(s, ".") != 2 {
			return "", errors.New("the assertion file does not hold a JWT (header.payload.signature)")
		}
		return s, nil
	}
}

// randomUUID is a version 4 UUID.
func randomUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
