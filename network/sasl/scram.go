package sasl

import (
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
	"sync"
	"time"
)

// The SCRAM mechanisms (RFC 5802 with RFC 7677's SHA-256, and SHA-512), as
// Kafka's ScramMechanism names and bounds them.
const (
	// MechanismScramSHA256 is SCRAM-SHA-256 in SaslHandshake and
	// sasl.enabled.mechanisms.
	MechanismScramSHA256 = "SCRAM-SHA-256"
	// MechanismScramSHA512 is SCRAM-SHA-512 in SaslHandshake and
	// sasl.enabled.mechanisms.
	MechanismScramSHA512 = "SCRAM-SHA-512"
	// ScramLoginModule is the class name of Kafka's SCRAM login module. On
	// a broker its username and password options are the broker's own
	// credentials for inter-broker connections; users and their
	// credentials live in the cluster metadata (UserScramCredentialRecord,
	// written by AlterUserScramCredentials or kafka-storage format
	// --add-scram), not in the JAAS config.
	ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
	// ScramMinIterations is the fewest PBKDF2 iterations a credential may
	// have, for both mechanisms: Kafka refuses to store fewer, its broker
	// refuses to authenticate a credential with fewer and its client
	// refuses a server-first message asking for fewer.
	ScramMinIterations = 4096
	// ScramMaxIterations is the most PBKDF2 iterations Kafka stores
	// (AlterUserScramCredentials and kafka-storage format --add-scram
	// refuse more).
	ScramMaxIterations = 16384
)

// maxScramMessage bounds a SCRAM client message. Kafka's own client sends
// about 60 bytes plus the escaped user name; 4096 leaves room for long
// names and extensions and bounds the work an unauthenticated client can
// ask for.
const maxScramMessage = 4096

// scramTokenAuth is the client-first extension that asks for delegation
// token authentication (Kafka's ScramLoginModule.TOKEN_AUTH_CONFIG).
const scramTokenAuth = "tokenauth"

var (
	// ErrScramAuthenticationFailed is wrapped by the errors of ScramServer
	// for a bad credential: an unknown user, a wrong password (a client
	// proof that does not match), a user whose stored credential cannot be
	// used, or a request for delegation-token authentication. Kafka raises
	// a plain SaslException for these, so the client learns only the
	// generic "Authentication failed during authentication due to invalid
	// credentials with SASL mechanism <mechanism>" (see ClientMessage).
	ErrScramAuthenticationFailed = errors.New("SCRAM authentication failed")
	// ErrInvalidScramMessage is wrapped by the errors of ScramServer for a
	// message that does not follow RFC 5802 as Kafka's ScramMessages reads
	// it, that does not belong to this exchange (wrong nonce or channel
	// binding), that is too long, or that comes after the exchange ended.
	ErrInvalidScramMessage = errors.New("invalid SASL/SCRAM message")
)

// IsScram reports whether mechanism is SCRAM-SHA-256 or SCRAM-SHA-512
// (case-sensitive, as Kafka's ScramMechanism.isScram).
func IsScram(mechanism string) bool {
	return mechanism == MechanismScramSHA256 || mechanism == MechanismScramSHA512
}

// scramHash is the hash function of a SCRAM mechanism, nil if mechanism is
// not SCRAM.
func scramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New
	case MechanismScramSHA512:
		return sha512.New
	default:
		return nil
	}
}

func errNotScram(mechanism string) error {
	return fmt.Errorf("sasl: mechanism %q is not %s or %s", mechanism, MechanismScramSHA256, MechanismScramSHA512)
}

// ScramCredential is what a broker stores for one user and mechanism:
// Kafka's ScramCredential, the UserScramCredentialRecord of the cluster
// metadata. It holds no password, but StoredKey and ServerKey let whoever
// has them pose as the broker or guess the password offline: never log
// them (String redacts them).
type ScramCredential struct {
	// Salt is the PBKDF2 salt, sent to any client that asks.
	Salt []byte
	// StoredKey is H(HMAC(SaltedPassword, "Client Key")), what a client
	// proof is checked against.
	StoredKey []byte
	// ServerKey is HMAC(SaltedPassword, "Server Key"), which signs the
	// server-final message.
	ServerKey []byte
	// Iterations is the PBKDF2 iteration count.
	Iterations int32
}

// String shows the salt and iterations, not the keys.
func (c ScramCredential) String() string {
	return fmt.Sprintf("ScramCredential{Salt: %s, StoredKey: [redacted], ServerKey: [redacted], Iterations: %d}",
		base64.StdEncoding.EncodeToString(c.Salt), c.Iterations)
}

// GoString is String, for %#v.
func (c ScramCredential) GoString() string { return c.String() }

// checkIterations refuses what Kafka refuses to store.
func checkIterations(mechanism string, iterations int) error {
	switch {
	case iterations < ScramMinIterations:
		return fmt.Errorf("sasl %s: %d iterations, fewer than the minimum %d", mechanism, iterations, ScramMinIterations)
	case iterations > ScramMaxIterations:
		return fmt.Errorf("sasl %s: %d iterations, more than the maximum %d", mechanism, iterations, ScramMaxIterations)
	}
	return nil
}

// SaltedPassword is RFC 5802's Hi(password, salt, iterations): PBKDF2 with
// HMAC-SHA-256 or HMAC-SHA-512 and a key as long as the hash, the password
// taken as its UTF-8 bytes (Kafka's ScramFormatter does not apply SASLprep
// either). It is what AlterUserScramCredentials carries and what
// kafka-storage format --add-scram takes as saltedpassword. An error for a
// mechanism that is not SCRAM, an empty salt, or iterations outside
// [ScramMinIterations, ScramMaxIterations].
func SaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h := scramHash(mechanism)
	if h == nil {
		return nil, errNotScram(mechanism)
	}
	if len(salt) == 0 {
		return nil, fmt.Errorf("sasl %s: empty salt", mechanism)
	}
	if err := checkIterations(mechanism, iterations); err != nil {
		return nil, err
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return nil, fmt.Errorf("sasl %s: PBKDF2: %w", mechanism, err)
	}
	return salted, nil
}

// scramCredentialFromSalted derives the credential a broker stores from a
// salted password: StoredKey = H(HMAC(salted, "Client Key")) and ServerKey =
// HMAC(salted, "Server Key"), as Kafka's controller does for an
// AlterUserScramCredentials upsertion.
//
// Stricter than Kafka, which stores any salted password: one that is not
// exactly as long as the mechanism's hash (32 or 64 bytes) is an error, as
// no RFC 5802 client could ever authenticate with it (it is usually the
// other mechanism's). Also an error: a mechanism that is not SCRAM, an empty
// salt, iterations outside [ScramMinIterations, ScramMaxIterations].
func scramCredentialFromSalted(mechanism string, salt, salted []byte, iterations int32) (ScramCredential, error) {
	h := scramHash(mechanism)
	if h == nil {
		return ScramCredential{}, errNotScram(mechanism)
	}
	if len(salt) == 0 {
		return ScramCredential{}, fmt.Errorf("sasl %s: empty salt", mechanism)
	}
	if len(salted) != h().Size() {
		return ScramCredential{}, fmt.Errorf("sasl %s: salted password of %d bytes, want %d", mechanism, len(salted), h().Size())
	}
	if err := checkIterations(mechanism, int(iterations)); err != nil {
		return ScramCredential{}, err
	}
	clientKey := scramHMAC(h, salted, "Client Key")
	storedKey := h()
	storedKey.Write(clientKey)
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  storedKey.Sum(nil),
		ServerKey:  scramHMAC(h, salted, "Server Key"),
		Iterations: iterations,
	}, nil
}

// NewScramCredential makes a credential for password with a new random
// salt, as kafka-storage format --add-scram and kafka-configs --alter
// --add-config 'SCRAM-SHA-256=[password=...]' do: the salt is Kafka's
// ScramFormatter.secureRandomBytes, the base-36 text of a 130-bit random
// number (about 26 ASCII bytes). Iterations must be in [ScramMinIterations,
// ScramMaxIterations]; Kafka's tools default to 4096. An empty password is
// accepted, as Kafka accepts it.
func NewScramCredential(mechanism, password string, iterations int) (ScramCredential, error) {
	if !IsScram(mechanism) {
		return ScramCredential{}, errNotScram(mechanism)
	}
	salt := []byte(scramRandomString())
	salted, err := SaltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	defer clear(salted)
	return scramCredentialFromSalted(mechanism, salt, salted, int32(iterations))
}

// ScramLookup returns a user's credential for the server's mechanism; ok
// false for an unknown user. It is called once per exchange, from the
// goroutine that calls Next.
type ScramLookup func(user string) (cred ScramCredential, ok bool)

// scramState is where a ScramServer is in its exchange.
type scramState int

const (
	scramReceiveClientFirst scramState = iota
	scramReceiveClientFinal
	scramComplete
	scramFailed
)

// ScramServer is one connection's SASL/SCRAM exchange, broker side: Kafka's
// ScramSaslServer. It is not safe for concurrent use: the goroutine that
// reads the connection calls Next, once per SaslAuthenticate request.
//
// An unknown user is stricter than Kafka on purpose. Kafka fails the
// first message of an unknown user, which tells anyone which user names
// exist. ScramServer answers it with a server-first message like a real
// one, and fails the final message exactly as for a wrong password (same
// error class, same client message, same HMAC work at both steps). The fake salt is an
// HMAC of the mechanism and user name under a random key made once per
// process, written as base-36 text of 130 bits like Kafka's own salts, so
// asking twice gives the same salt and two names give different ones; the
// iterations are ScramMinIterations, the default of Kafka's tools. A client
// can still tell an unknown user from a real one if the operator's salts
// or iterations look different (salts from another tool, more
// iterations), or by watching the fake salt change across broker
// restarts. A user whose stored credential cannot be used (fewer than
// ScramMinIterations iterations, keys of the wrong length, empty salt),
// which Kafka fails at the first message, is treated the same way.
type ScramServer struct {
	mechanism string
	hash      func() hash.Hash
	lookup    ScramLookup
	// tokens looks delegation tokens up (SetTokenLookup); nil: token
	// authentication fails.
	tokens ScramTokenLookup
	// token is the delegation token the exchange authenticates with
	// (tokenauth=true), nil otherwise.
	token *ScramToken
	// serverNonce makes the server's part of the nonce; tests replace it
	// to replay RFC 7677's example.
	serverNonce func() string

	state scramState
	// Set by the client-first message.
	gs2Header       string // "n,," or "n,a=<authzid>,", as the client sent it
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
	user            string
	cred            ScramCredential
	// reject is why the final message must fail whatever its proof: the
	// user is unknown or its credential unusable (cred is then fake).
	reject error
}

// ScramToken is a delegation token as SCRAM authenticates with it: the
// credential derived from its HMAC (the password), its owner, whom the
// connection authenticates as, and when it expires.
type ScramToken struct {
	Credential ScramCredential
	// Owner is the owner's user name (the principal's name).
	Owner  string
	Expiry time.Time
}

// ScramTokenLookup looks a delegation token up by its id, for mechanism's
// credential; ok false for an unknown or expired token.
type ScramTokenLookup func(tokenID string) (ScramToken, bool)

// SetTokenLookup enables delegation token authentication (KIP-48): a
// client-first message with the tokenauth=true extension names a token id
// as its user, and the exchange checks the token's credential and
// authenticates as the token's owner.
func (s *ScramServer) SetTokenLookup(l ScramTokenLookup) { s.tokens = l }

// TokenAuthenticated reports whether the exchange authenticated with a
// delegation token: its user is then the token's owner, and a connection
// so authenticated may not ask for tokens itself.
func (s *ScramServer) TokenAuthenticated() bool { return s.token != nil && s.state == scramComplete }

// Expiry is when the delegation token the exchange authenticated with
// expires (zero when it did not use one): a re-authenticating session
// ends then at the latest (KIP-368).
func (s *ScramServer) Expiry() time.Time {
	if !s.TokenAuthenticated() {
		return time.Time{}
	}
	return s.token.Expiry
}

// NewScramServer starts one connection's exchange of mechanism, which must be
// SCRAM-SHA-256 or SCRAM-SHA-512. A nil lookup knows no user.
func NewScramServer(mechanism string, lookup ScramLookup) (*ScramServer, error) {
	h := scramHash(mechanism)
	if h == nil {
		return nil, errNotScram(mechanism)
	}
	return &ScramServer{mechanism: mechanism, hash: h, lookup: lookup, serverNonce: scramRandomString}, nil
}

// Next takes the client's next message. The client-first message gets the
// server-first message; the client-final message, if its proof is right,
// gets the server-final message v=<ServerSignature> with done true and the
// user name (unescaped). There are exactly two client messages: anything
// after the exchange ended is an error.
//
// As Kafka's ScramSaslServer and ScramMessages:
//   - client-first is gs2-header client-first-bare, the gs2 header
//     "n,," or "n,a=<authzid>," (channel binding, "y" or "p=", is refused),
//     then n=<saslname>,r=<nonce>[,<key>=<value>...]. A saslname is ASCII
//     without NUL in which "=2C" is "," and "=3D" is "=" (any other "=" is
//     malformed); the nonce is printable ASCII without ",". Extensions are
//     ignored but tokenauth=true: the user is then a delegation token's
//     id (SetTokenLookup; without one the exchange fails), and the
//     exchange authenticates as the token's owner. An authorization id other than the user
//     name fails it with ErrAuthorizationIDMismatch, whose text the client
//     gets.
//   - client-final is c=<base64 gs2 header>,r=<nonce>[,extensions],p=<proof>:
//     c must be this exchange's gs2 header, r must end with the whole
//     nonce (Kafka's check, which librdkafka needs), and the proof must
//     match the user's StoredKey.
//
// Differences from Kafka, none of which matters to Kafka's own client
// (which sends neither an authorization id nor extensions other than
// tokenauth): the reserved "m=" attribute is refused (RFC 5802 §5.1; Kafka
// ignores it, then fails the proof); the authorization id is unescaped
// before it is compared (Kafka compares it escaped); c= is checked (Kafka
// only parses it); AuthMessage is built from the messages as received (Kafka
// rebuilds it from what it parsed, extensions in hash-map order); an
// authorization id that is not the user name fails at the first message
// whether or not the user exists (Kafka fails an unknown user first, with
// its generic message).
//
// Every error fails the exchange: wrapping ErrInvalidScramMessage,
// ErrScramAuthenticationFailed or ErrAuthorizationIDMismatch, never holding
// a password, salted password or key. Each has a ClientMessage() method,
// ClientMessage(mechanism, err): what Kafka would tell the client.
func (s *ScramServer) Next(msg []byte) (serverMessage []byte, done bool, user string, err error) {
	switch s.state {
	case scramReceiveClientFirst:
		serverMessage, err = s.clientFirst(msg)
	case scramReceiveClientFinal:
		serverMessage, user, err = s.clientFinal(msg)
	case scramComplete:
		err = fmt.Errorf("sasl %s: %w: message after the exchange completed", s.mechanism, ErrInvalidScramMessage)
	default:
		err = fmt.Errorf("sasl %s: %w: message after the exchange failed", s.mechanism, ErrInvalidScramMessage)
	}
	if err != nil {
		s.fail()
		return nil, false, "", &scramError{mechanism: s.mechanism, err: err}
	}
	if s.state == scramComplete {
		return serverMessage, true, user, nil
	}
	return serverMessage, false, "", nil
}

// fail ends the exchange and drops what it knew of the credential.
func (s *ScramServer) fail() {
	s.state = scramFailed
	s.cred = ScramCredential{}
	s.reject = nil
}

// scramError is a failed exchange's error: its text is for the broker's
// log, its ClientMessage for the client.
type scramError struct {
	mechanism string
	err       error
}

func (e *scramError) Error() string         { return e.err.Error() }
func (e *scramError) Unwrap() error         { return e.err }
func (e *scramError) ClientMessage() string { return ClientMessage(e.mechanism, e.err) }

func (s *ScramServer) malformed(format string, args ...any) error {
	return fmt.Errorf("sasl %s: %w: %s", s.mechanism, ErrInvalidScramMessage, fmt.Sprintf(format, args...))
}

// checkMessage bounds msg and requires Kafka's alphabet: every attribute of
// ScramMessages' grammar is ASCII without NUL.
func (s *ScramServer) checkMessage(which string, msg []byte) error {
	if len(msg) > maxScramMessage {
		return s.malformed("%s message of %d bytes, more than %d", which, len(msg), maxScramMessage)
	}
	for i, b := range msg {
		if b == 0 || b > 0x7f {
			return s.malformed("%s message: byte %d is not ASCII or is NUL", which, i)
		}
	}
	return nil
}

func (s *ScramServer) clientFirst(msg []byte) ([]byte, error) {
	if err := s.checkMessage("client-first", msg); err != nil {
		return nil, err
	}
	m := string(msg)

	// gs2-header: no channel binding, an optional authorization id.
	rest, ok := strings.CutPrefix(m, "n,")
	if !ok {
		if strings.HasPrefix(m, "y,") || strings.HasPrefix(m, "p=") {
			return nil, s.malformed("channel binding is not supported (gs2 header must be \"n,\")")
		}
		return nil, s.malformed("client-first message must start with gs2 header \"n,\"")
	}
	var authzid string
	if raw, ok := strings.CutPrefix(rest, "a="); ok {
		raw, rest, ok = strings.Cut(raw, ",")
		if !ok {
			return nil, s.malformed("gs2 header: authorization id not followed by ','")
		}
		var err error
		if authzid, err = s.unescapeName("authorization id", raw); err != nil {
			return nil, err
		}
	} else if rest, ok = strings.CutPrefix(rest, ","); !ok {
		return nil, s.malformed("gs2 header: want \"n,,\" or \"n,a=<authzid>,\"")
	}
	s.gs2Header = m[:len(m)-len(rest)]
	s.clientFirstBare = rest

	if strings.HasPrefix(rest, "m=") {
		return nil, s.malformed("mandatory extension m= is not supported")
	}
	rawName, rest, ok := strings.Cut(rest, ",")
	rawName, isName := strings.CutPrefix(rawName, "n=")
	if !ok || !isName {
		return nil, s.malformed("client-first message: want n=<username>,r=<nonce>")
	}
	user, err := s.unescapeName("username", rawName)
	if err != nil {
		return nil, err
	}
	clientNonce, rest, hasExtensions := strings.Cut(rest, ",")
	clientNonce, ok = strings.CutPrefix(clientNonce, "r=")
	if !ok {
		return nil, s.malformed("client-first message: want r=<nonce> after the username")
	}
	if !printableNonce(clientNonce) {
		return nil, s.malformed("client nonce is empty or not printable")
	}
	var exts map[string]string
	if hasExtensions {
		if exts, err = s.extensions(rest); err != nil {
			return nil, err
		}
	}

	// Kafka's ScramExtensions.tokenAuthenticated: Boolean.parseBoolean,
	// the last value of a repeated key. Other extensions are ignored.
	tokenAuth := strings.EqualFold(exts[scramTokenAuth], "true")
	if tokenAuth && s.tokens == nil {
		return nil, fmt.Errorf("sasl %s: user %q asked for delegation token authentication (tokenauth=true), which is not enabled (delegation.token.secret.key): %w",
			s.mechanism, user, ErrScramAuthenticationFailed)
	}
	if authzid != "" && authzid != user {
		return nil, fmt.Errorf("sasl %s: user %q asked for authorization id %q: %w", s.mechanism, user, authzid, ErrAuthorizationIDMismatch)
	}

	var cred ScramCredential
	var known bool
	switch {
	case tokenAuth:
		var tok ScramToken
		if tok, known = s.tokens(user); known {
			cred, s.token = tok.Credential, &tok
		}
	case s.lookup != nil:
		cred, known = s.lookup(user)
	}
	switch size := s.hash().Size(); {
	case !known && tokenAuth:
		s.reject = fmt.Errorf("sasl %s: delegation token %q is unknown or expired: %w", s.mechanism, user, ErrScramAuthenticationFailed)
	case !known:
		s.reject = fmt.Errorf("sasl %s: unknown user %q: %w", s.mechanism, user, ErrScramAuthenticationFailed)
	case cred.Iterations < ScramMinIterations:
		s.reject = fmt.Errorf("sasl %s: user %q: stored credential has %d iterations, fewer than the minimum %d: %w",
			s.mechanism, user, cred.Iterations, ScramMinIterations, ErrScramAuthenticationFailed)
	case len(cred.Salt) == 0 || len(cred.StoredKey) != size || len(cred.ServerKey) != size:
		s.reject = fmt.Errorf("sasl %s: user %q: stored credential is invalid (empty salt or keys not %d bytes): %w",
			s.mechanism, user, size, ErrScramAuthenticationFailed)
	}
	// The fake credential is made for every user, so that the first
	// answer takes as long for an unknown one.
	fake := fakeScramCredential(s.mechanism, s.hash, user)
	if s.reject != nil {
		cred = fake
	}

	s.user = user
	s.cred = cred
	s.nonce = clientNonce + s.serverNonce()
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	s.state = scramReceiveClientFinal
	return []byte(s.serverFirst), nil
}

func (s *ScramServer) clientFinal(msg []byte) ([]byte, string, error) {
	if err := s.checkMessage("client-final", msg); err != nil {
		return nil, "", err
	}
	m := string(msg)

	channel, rest, _ := strings.Cut(m, ",")
	channel, ok := strings.CutPrefix(channel, "c=")
	if !ok {
		return nil, "", s.malformed("client-final message must start with c=<channel binding>")
	}
	if channel != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, "", s.malformed("channel binding c= is not the base64 of this exchange's gs2 header")
	}
	nonce, rest, _ := strings.Cut(rest, ",")
	nonce, ok = strings.CutPrefix(nonce, "r=")
	if !ok {
		return nil, "", s.malformed("client-final message: want r=<nonce> after c=")
	}
	// RFC 5802 wants r= to be the nonce itself; Kafka's ScramSaslServer
	// checks only that it ends with it, and librdkafka (2.0 at least)
	// relies on that: it sends its own nonce again in front. The proof is
	// computed over the message as sent, so the check below still binds
	// it to this exchange.
	if !strings.HasSuffix(nonce, s.nonce) {
		return nil, "", s.malformed("invalid client nonce in the final client message")
	}
	// The proof is the last attribute; anything between r= and p= is an
	// extension, checked and ignored as Kafka does.
	proofAttr := rest
	if i := strings.LastIndex(rest, ",p="); i >= 0 {
		if _, err := s.extensions(rest[:i]); err != nil {
			return nil, "", err
		}
		proofAttr = rest[i+1:]
	}
	proof64, ok := strings.CutPrefix(proofAttr, "p=")
	if !ok || strings.Contains(proof64, ",") {
		return nil, "", s.malformed("client-final message: want p=<proof> last")
	}
	withoutProof := m[:len(m)-len(proofAttr)-1]
	proof, err := base64.StdEncoding.Strict().DecodeString(proof64)
	if err != nil || len(proof) != s.hash().Size() {
		return nil, "", s.malformed("client proof is not the base64 of %d bytes", s.hash().Size())
	}

	// RFC 5802 §3: ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage)
	// must hash to StoredKey. A rejected (unknown) user goes through the
	// same steps with its fake key and fails whatever the comparison says.
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	clientKey := scramHMAC(s.hash, s.cred.StoredKey, authMessage)
	subtle.XORBytes(clientKey, clientKey, proof)
	h := s.hash()
	h.Write(clientKey)
	genuine := 1
	if s.reject != nil {
		genuine = 0
	}
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey)&genuine != 1 {
		if s.reject != nil {
			return nil, "", s.reject
		}
		return nil, "", fmt.Errorf("sasl %s: user %q: wrong password (invalid client proof): %w", s.mechanism, s.user, ErrScramAuthenticationFailed)
	}

	serverSignature := scramHMAC(s.hash, s.cred.ServerKey, authMessage)
	user := s.user
	if s.token != nil {
		user = s.token.Owner // Kafka's authorizationId: the token's owner
		s.token.Credential = ScramCredential{}
	}
	s.cred = ScramCredential{}
	s.state = scramComplete
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSignature)), user, nil
}

// unescapeName reads a saslname (RFC 5802: "=2C" is ',' and "=3D" is '=');
// it must not be empty, and any other '=' is malformed (Kafka's
// ScramFormatter.username).
func (s *ScramServer) unescapeName(what, raw string) (string, error) {
	if raw == "" {
		return "", s.malformed("empty %s", what)
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		switch raw[i+1 : min(i+3, len(raw))] {
		case "2C":
			b.WriteByte(',')
		case "3D":
			b.WriteByte('=')
		default:
			return "", s.malformed("%s: '=' must be followed by 2C or 3D", what)
		}
		i += 2
	}
	return b.String(), nil
}

// extensions parses key=value[,key=value]... (Kafka's EXTENSIONS: a key of ASCII
// letters, a value of at least one character), the last of a repeated key
// winning as in Kafka's Utils.parseMap.
func (s *ScramServer) extensions(rest string) (map[string]string, error) {
	exts := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" || strings.IndexFunc(k, func(r rune) bool { return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') }) >= 0 {
			return nil, s.malformed("extension: want <letters>=<value>")
		}
		exts[k] = v
	}
	return exts, nil
}

// printableNonce reports whether n is a non-empty RFC 5802 nonce:
// printable ASCII other than ','.
func printableNonce(n string) bool {
	for i := 0; i < len(n); i++ {
		if n[i] < 0x21 || n[i] > 0x7e || n[i] == ',' {
			return false
		}
	}
	return n != ""
}

func scramHMAC(h func() hash.Hash, key []byte, msg string) []byte {
	mac := hmac.New(h, key)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

// scramRandomString is Kafka's ScramFormatter.secureRandomString: a 130-bit
// random number in base 36, used for nonces and salts.
func scramRandomString() string {
	var b [17]byte // 136 bits, 6 dropped
	rand.Read(b[:])
	return base36of130(b[:])
}

// base36of130 writes the first 130 bits of b (at least 17 bytes) in base 36.
func base36of130(b []byte) string {
	return new(big.Int).Rsh(new(big.Int).SetBytes(b[:17]), 6).Text(36)
}

// scramFakeKey keys the fake credentials of unknown users; made once per
// process so that the same name always gets the same salt.
var scramFakeKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
})

// fakeScramCredential is what an unknown user is answered with: see
// ScramServer. Its keys only need the length of real ones, so that checking
// a proof against them costs the same: the exchange fails whatever the
// check says.
func fakeScramCredential(mechanism string, h func() hash.Hash, user string) ScramCredential {
	sum := scramHMAC(sha512.New, scramFakeKey(), mechanism+"\x00"+user)
	key := sum[:h().Size()]
	return ScramCredential{
		Salt:       []byte(base36of130(sum)),
		StoredKey:  key,
		ServerKey:  key,
		Iterations: ScramMinIterations,
	}
}
