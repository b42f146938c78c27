package client

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The SCRAM mechanisms' names and Kafka's bound on iterations.
const (
	scramSHA256 = "SCRAM-SHA-256"
	scramSHA512 = "SCRAM-SHA-512"
	// scramMinIterations is Kafka's ScramMechanism.minIterations: its
	// client refuses a server-first message asking for fewer.
	scramMinIterations = 4096
	// scramMaxIterations bounds the PBKDF2 work a server may ask for.
	// Kafka stores at most 16384; other brokers may use more, but a
	// server asking for 2^31 would keep the client busy for minutes.
	scramMaxIterations = 1 << 20
)

// scramHash is a SCRAM mechanism's hash, nil for another name.
func scramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case scramSHA256:
		return sha256.New
	case scramSHA512:
		return sha512.New
	}
	return nil
}

// ScramAuth is SASL/SCRAM (RFC 5802, RFC 7677) with a user name and
// password: Kafka's sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512, the
// client side of a broker's ScramLoginModule. The password never travels,
// and the broker proves it knows the credential too; still, use TLS
// (SASL_SSL): SCRAM does not protect the connection itself.
//
//	client.SASL(client.ScramAuth{Mechanism: "SCRAM-SHA-512", User: "alice", Pass: "alice-secret"})
//
// As Kafka's ScramSaslClient: the nonce is a 130-bit random number in base
// 36, the user name is escaped ("," as "=2C", "=" as "=3D") but not
// SASLprep-normalized, the server must ask for at least 4096 iterations
// (and, here, at most 2^20), and the server's signature must match. Kafka
// brokers accept only ASCII user names.
//
// A ScramAuth is a value and safe for concurrent use; its String does not
// show the password.
type ScramAuth struct {
	// Mechanism is "SCRAM-SHA-256" (the default when empty) or
	// "SCRAM-SHA-512", as the user's credential on the broker.
	Mechanism string
	// User is the user name.
	User string
	// Pass is the user's password.
	Pass string
	// Zid is the authorization id, usually empty. Kafka brokers refuse one
	// that is not empty and not User.
	Zid string
}

// Name is the mechanism: Mechanism, or "SCRAM-SHA-256" if it is empty.
func (a ScramAuth) Name() string {
	if a.Mechanism == "" {
		return scramSHA256
	}
	return a.Mechanism
}

// Authenticate returns the client-first message, gs2-header n=<user>,r=<nonce>.
// An error for a mechanism other than SCRAM-SHA-256 and SCRAM-SHA-512, an
// empty user name or password, or a field with NUL or invalid UTF-8.
func (a ScramAuth) Authenticate(ctx context.Context, host string) (SASLSession, []byte, error) {
	name := a.Name()
	h := scramHash(name)
	if h == nil {
		return nil, nil, fmt.Errorf("sasl %s: not a SCRAM mechanism; want %s or %s", name, scramSHA256, scramSHA512)
	}
	if a.User == "" || a.Pass == "" {
		return nil, nil, fmt.Errorf("sasl %s: empty user name or password", name)
	}
	for _, f := range []struct{ name, value string }{
		{"user name", a.User},
		{"password", a.Pass},
		{"authorization id", a.Zid},
	} {
		// The error names the field, never its value.
		if strings.IndexByte(f.value, 0) >= 0 || !utf8.ValidString(f.value) {
			return nil, nil, fmt.Errorf("sasl %s: %s contains NUL or is not valid UTF-8", name, f.name)
		}
	}

	// Kafka's ScramFormatter.secureRandomString.
	var b [17]byte
	rand.Read(b[:])
	nonce := new(big.Int).Rsh(new(big.Int).SetBytes(b[:]), 6).Text(36)

	escape := strings.NewReplacer("=", "=3D", ",", "=2C").Replace
	gs2 := "n,,"
	if a.Zid != "" {
		gs2 = "n,a=" + escape(a.Zid) + ","
	}
	s := &scramSession{
		mechanism:   name,
		hash:        h,
		pass:        a.Pass,
		gs2Header:   gs2,
		clientNonce: nonce,
		firstBare:   "n=" + escape(a.User) + ",r=" + nonce,
	}
	return s, []byte(gs2 + s.firstBare), nil
}

// String shows the mechanism, user and authorization id, not the
// password, so that a logged configuration does not leak it.
func (a ScramAuth) String() string {
	return fmt.Sprintf("ScramAuth{Mechanism: %q, User: %q, Pass: [redacted], Zid: %q}", a.Mechanism, a.User, a.Zid)
}

// GoString is String, for %#v.
func (a ScramAuth) GoString() string { return a.String() }

// scramSession is one connection's SCRAM exchange after the client-first
// message; the connection's dialing goroutine alone uses it.
type scramSession struct {
	mechanism   string
	hash        func() hash.Hash
	pass        string
	gs2Header   string
	clientNonce string
	firstBare   string

	step            int    // 0: server-first expected, 1: server-final, 2: over
	serverSignature []byte // expected, set at step 0
}

func (s *scramSession) Challenge(msg []byte) (bool, []byte, error) {
	step := s.step
	s.step = 2 // a failure ends the exchange
	switch step {
	case 0:
		final, err := s.serverFirst(string(msg))
		if err != nil {
			return false, nil, err
		}
		s.step = 1
		return false, final, nil
	case 1:
		if err := s.serverFinal(string(msg)); err != nil {
			return false, nil, err
		}
		return true, nil, nil
	default:
		return false, nil, fmt.Errorf("sasl %s: message after the exchange ended", s.mechanism)
	}
}

// serverFirst checks r=<nonce>,s=<salt>,i=<iterations>[,extensions] and
// returns the client-final message.
func (s *scramSession) serverFirst(msg string) ([]byte, error) {
	attrs := strings.Split(msg, ",")
	if len(attrs) < 3 || !strings.HasPrefix(attrs[0], "r=") || !strings.HasPrefix(attrs[1], "s=") || !strings.HasPrefix(attrs[2], "i=") {
		return nil, fmt.Errorf("sasl %s: invalid server-first message: want r=<nonce>,s=<salt>,i=<iterations>", s.mechanism)
	}
	nonce := attrs[0][2:]
	if !strings.HasPrefix(nonce, s.clientNonce) || len(nonce) == len(s.clientNonce) {
		return nil, fmt.Errorf("sasl %s: invalid server nonce: does not start with the client nonce and add to it", s.mechanism)
	}
	for i := 0; i < len(nonce); i++ {
		if nonce[i] < 0x21 || nonce[i] > 0x7e {
			return nil, fmt.Errorf("sasl %s: invalid server nonce: not printable", s.mechanism)
		}
	}
	salt, err := base64.StdEncoding.DecodeString(attrs[1][2:])
	if err != nil || len(salt) == 0 {
		return nil, fmt.Errorf("sasl %s: invalid server-first message: salt is empty or not base64", s.mechanism)
	}
	iterations, err := strconv.Atoi(attrs[2][2:])
	switch {
	case err != nil || strings.Trim(attrs[2][2:], "0123456789") != "":
		return nil, fmt.Errorf("sasl %s: invalid server-first message: iterations %q", s.mechanism, attrs[2][2:])
	case iterations < scramMinIterations:
		return nil, fmt.Errorf("sasl %s: requested iterations %d is less than the minimum %d", s.mechanism, iterations, scramMinIterations)
	case iterations > scramMaxIterations:
		return nil, fmt.Errorf("sasl %s: requested iterations %d is more than the maximum %d", s.mechanism, iterations, scramMaxIterations)
	}

	salted, err := pbkdf2.Key(s.hash, s.pass, salt, iterations, s.hash().Size())
	if err != nil {
		return nil, fmt.Errorf("sasl %s: PBKDF2: %w", s.mechanism, err)
	}
	defer clear(salted)
	clientKey := s.hmac(salted, "Client Key")
	storedKey := s.hash()
	storedKey.Write(clientKey)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) + ",r=" + nonce
	authMessage := s.firstBare + "," + msg + "," + withoutProof
	proof := s.hmac(storedKey.Sum(nil), authMessage)
	subtle.XORBytes(proof, proof, clientKey)
	s.serverSignature = s.hmac(s.hmac(salted, "Server Key"), authMessage)
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

// serverFinal checks v=<ServerSignature> or reports e=<error>.
func (s *scramSession) serverFinal(msg string) error {
	attr, _, _ := strings.Cut(msg, ",")
	if e, ok := strings.CutPrefix(attr, "e="); ok {
		return fmt.Errorf("sasl %s: broker failed the authentication with error %q", s.mechanism, e)
	}
	v, ok := strings.CutPrefix(attr, "v=")
	if !ok {
		return fmt.Errorf("sasl %s: invalid server-final message: want v=<signature> or e=<error>", s.mechanism)
	}
	sig, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return fmt.Errorf("sasl %s: invalid server-final message: signature is not base64", s.mechanism)
	}
	if !hmac.Equal(sig, s.serverSignature) {
		return errors.New("sasl " + s.mechanism + ": invalid server signature: the broker does not know this user's credential")
	}
	return nil
}

func (s *scramSession) hmac(key []byte, msg string) []byte {
	m := hmac.New(s.hash, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
