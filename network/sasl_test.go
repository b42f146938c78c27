package network

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/keelstream/keel/network/sasl"
)

// plainExchange is SASL/PLAIN over users, as the broker wires it.
type plainExchange struct{ users sasl.PlainUsers }

func (e plainExchange) Next(msg []byte) ([]byte, bool, string, error) {
	user, err := e.users.AuthenticatePlain(msg)
	return nil, err == nil, user, err // the client gets the generic message
}

// saslListener turns startServer's listener into a SASL_PLAINTEXT one
// (SASL_SSL with tlsListener) with PLAIN users alice and admin.
func saslListener(tlsListener *TLSListener) func(*Config) {
	return func(cfg *Config) {
		name := cfg.Listeners[0].Name
		cfg.Listeners[0].SecurityProtocol = SASLPlaintext
		if tlsListener != nil {
			cfg.Listeners[0].SecurityProtocol = SASLSSL
			cfg.TLS = map[string]*TLSListener{name: tlsListener}
		}
		users := sasl.PlainUsers{"alice": "alice-secret", "admin": "admin-secret"}
		cfg.SASL = map[string]*SASLListener{name: {
			Mechanisms: []string{"PLAIN"},
			Start:      func(string) SASLExchange { return plainExchange{users} },
		}}
	}
}

// A SASL listener serves a client that authenticates (the principal is
// its user), and refuses one with a wrong password, an unknown user or a
// mechanism it does not enable, with the error codes Kafka's clients
// expect, a log line without the password, and the connection closed.
func TestSASLPlainListener(t *testing.T) {
	pki := newTestPKI(t)
	for _, tc := range []struct {
		name string
		tls  *TLSListener
	}{{"SASL_PLAINTEXT", nil}, {"SASL_SSL", &TLSListener{Config: &tls.Config{Certificates: []tls.Certificate{pki.server}}}}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &principalRecorder{}
			ts := startServer(t, rec.handle, saslListener(tc.tls))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			request := func(mech kgo.Opt) error {
				if tc.tls != nil {
					return metadataWith(ctx, ts.addr, mech, kgo.DialTLSConfig(pki.clientConfig(false)))
				}
				return metadataWith(ctx, ts.addr, mech)
			}
			if err := request(kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())); err != nil {
				t.Fatalf("alice: %v", err)
			}
			if got := rec.last(); got != "User:alice" {
				t.Errorf("principal %q, want User:alice", got)
			}
			for what, mech := range map[string]kgo.Opt{
				"wrong password": kgo.SASL(plain.Auth{User: "alice", Pass: "wrong-guess"}.AsMechanism()),
				"unknown user":   kgo.SASL(plain.Auth{User: "mallory", Pass: "x"}.AsMechanism()),
			} {
				if err := request(mech); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
					t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", what, err)
				}
			}
			if err := request(kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())); err == nil || !strings.Contains(err.Error(), "UNSUPPORTED_SASL_MECHANISM") {
				t.Errorf("SCRAM: %v, want UNSUPPORTED_SASL_MECHANISM", err)
			}
			logs := ts.logs.String()
			if strings.Count(logs, "SASL authentication failed") < 2 || !strings.Contains(logs, "SASL mechanism not enabled") {
				t.Errorf("refusals not logged:\n%s", logs)
			}
			if strings.Contains(logs, "wrong-guess") {
				t.Error("a password reached the log")
			}
			if err := request(kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())); err != nil {
				t.Fatalf("the listener stopped serving after refusals: %v", err)
			}
			ok, failed := ts.Authentications()
			if name := cfgListener(ts); ok[name] != 2 || failed[name] != 3 {
				t.Errorf("authentications: %d succeeded, %d failed; want 2 and 3", ok[name], failed[name])
			}
		})
	}
}

// Before authentication only ApiVersions, SaslHandshake and
// SaslAuthenticate are read: anything else closes the connection, as does
// SaslAuthenticate before a handshake (ILLEGAL_SASL_STATE).
func TestSASLStateMachine(t *testing.T) {
	ts := startServer(t, nil, saslListener(nil))

	rc := dialRaw(t, ts.addr)
	rc.send(metadataRequest(), 12)
	rc.expectClosed()

	rc = dialRaw(t, ts.addr)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	corr := rc.send(auth, 2)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	rc.read(resp, 2, corr)
	if resp.ErrorCode != 34 { // ILLEGAL_SASL_STATE
		t.Errorf("SaslAuthenticate before a handshake: error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	rc.expectClosed()

	// The whole exchange by hand: ApiVersions, handshake v1, authenticate,
	// then a request the handler serves; a second handshake is refused
	// without closing.
	rc = dialRaw(t, ts.addr)
	corr = rc.send(kmsg.NewPtrApiVersionsRequest(), 3)
	rc.read(kmsg.NewPtrApiVersionsResponse(), 3, corr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	corr = rc.send(hs, 1)
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	rc.read(hsResp, 1, corr)
	if hsResp.ErrorCode != 0 || len(hsResp.SupportedMechanisms) != 1 || hsResp.SupportedMechanisms[0] != "PLAIN" {
		t.Fatalf("handshake: %+v", hsResp)
	}
	corr = rc.send(auth, 2)
	resp = kmsg.NewPtrSASLAuthenticateResponse()
	rc.read(resp, 2, corr)
	if resp.ErrorCode != 0 {
		t.Fatalf("authenticate: error %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	corr = rc.send(metadataRequest(), 12)
	rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)
	corr = rc.send(hs, 1)
	hsResp = kmsg.NewPtrSASLHandshakeResponse()
	rc.read(hsResp, 1, corr)
	if hsResp.ErrorCode != 34 {
		t.Errorf("a second handshake: error %d, want ILLEGAL_SASL_STATE", hsResp.ErrorCode)
	}
	corr = rc.send(metadataRequest(), 12)
	rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)

	// SaslHandshake v0 (kafka-python 2.0): the token follows as a bare
	// frame and is answered with one (PLAIN: empty); then requests.
	rawExchange := func(token string) *rawClient {
		rc := dialRaw(t, ts.addr)
		corr := rc.send(hs, 0)
		hsResp := kmsg.NewPtrSASLHandshakeResponse()
		rc.read(hsResp, 0, corr)
		if hsResp.ErrorCode != 0 {
			t.Fatalf("handshake v0: error %d", hsResp.ErrorCode)
		}
		rc.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...))
		return rc
	}
	rc = rawExchange("\x00alice\x00alice-secret")
	if answer, err := rc.readFrame(); err != nil || len(answer) != 0 {
		t.Fatalf("v0 token answer %q, %v; want an empty frame", answer, err)
	}
	corr = rc.send(metadataRequest(), 12)
	rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)
	// A wrong password after v0: closed without an answer, as Kafka does.
	rawExchange("\x00alice\x00nope").expectClosed()
}

// reauthListener is saslListener with connections.max.reauth.ms for PLAIN.
func reauthListener(maxReauth time.Duration) func(*Config) {
	return func(cfg *Config) {
		saslListener(nil)(cfg)
		cfg.SASL[cfg.Listeners[0].Name].MaxReauth = map[string]time.Duration{"PLAIN": maxReauth}
	}
}

// handshakeAndAuth runs SaslHandshake v1 and SaslAuthenticate (at
// version) with a PLAIN message on rc, returning the answer.
func handshakeAndAuth(t *testing.T, rc *rawClient, version int16, msg string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	corr := rc.send(hs, 1)
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	rc.read(hsResp, 1, corr)
	if hsResp.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", hsResp.ErrorCode)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte(msg)
	corr = rc.send(auth, version)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	rc.read(resp, version, corr)
	return resp
}

// Re-authentication (KIP-368): with connections.max.reauth.ms set, a
// client on SaslAuthenticate v1+ gets that session lifetime and renews it
// on the connection (franz-go does, and its connection lives on); as
// another user it is refused and closed; a connection used after its
// session expired is closed; a SaslAuthenticate v0 client gets no
// lifetime and is never cut off.
func TestSASLReauthentication(t *testing.T) {
	const lifetime = 1500 * time.Millisecond
	rec := &principalRecorder{}
	ts := startServer(t, rec.handle, reauthListener(lifetime))
	name := cfgListener(ts)

	// franz-go re-authenticates before its session ends, on the same
	// connection.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := cl.Request(ctx, metadataRequest()); err != nil {
			t.Fatalf("a request across re-authentications: %v", err)
		}
	}
	ok, failed, expired := ts.Reauthentications()
	if ok[name] < 2 || failed[name] != 0 || expired[name] != 0 {
		t.Fatalf("re-authentications: %d ok, %d failed, %d expired; want at least 2 renewals in 4 s of %v sessions", ok[name], failed[name], expired[name], lifetime)
	}
	if authOK, _ := ts.Authentications(); authOK[name] != 2 { // franz-go's seed connection and the broker's
		t.Fatalf("%d authentications, want 2: the client reconnected instead of re-authenticating", authOK[name])
	}
	if got := rec.last(); got != "User:alice" {
		t.Fatalf("principal after re-authentication %q", got)
	}

	// By hand: the lifetime is told, a renewal as another user closes.
	rc := dialRaw(t, ts.addr)
	if resp := handshakeAndAuth(t, rc, 1, "\x00alice\x00alice-secret"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("authenticate: error %d, session lifetime %d ms; want %v", resp.ErrorCode, resp.SessionLifetimeMillis, lifetime)
	}
	if resp := handshakeAndAuth(t, rc, 1, "\x00admin\x00admin-secret"); resp.ErrorCode != 58 { // SASL_AUTHENTICATION_FAILED
		t.Fatalf("re-authentication as admin: error %d, want SASL_AUTHENTICATION_FAILED", resp.ErrorCode)
	}
	rc.expectClosed()

	// A session that expired: the next request closes the connection.
	rc = dialRaw(t, ts.addr)
	handshakeAndAuth(t, rc, 2, "\x00alice\x00alice-secret")
	corr := rc.send(metadataRequest(), 12)
	rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)
	time.Sleep(lifetime + 200*time.Millisecond)
	rc.send(metadataRequest(), 12)
	rc.expectClosed()
	if _, _, expired := ts.Reauthentications(); expired[name] != 1 {
		t.Fatalf("%d connections killed for an expired session, want 1", expired[name])
	}
	if !strings.Contains(ts.logs.String(), "SASL session expired") {
		t.Error("the expired session was not logged")
	}

	// SaslAuthenticate v0 cannot re-authenticate: no lifetime, no expiry.
	rc = dialRaw(t, ts.addr)
	if resp := handshakeAndAuth(t, rc, 0, "\x00alice\x00alice-secret"); resp.ErrorCode != 0 {
		t.Fatalf("v0: error %d", resp.ErrorCode)
	}
	time.Sleep(lifetime + 200*time.Millisecond)
	corr = rc.send(metadataRequest(), 12)
	rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)
}

// BenchmarkConnectionSetup measures what a client pays to connect before
// its first request is answered, on a PLAINTEXT, an SSL and a SASL_SSL
// (PLAIN) listener: dial, TLS handshake (ECDSA P-256, TLS 1.3), ApiVersions,
// SaslHandshake and SaslAuthenticate, then a Metadata request. Client and
// server share the process. ssl_swappable is the SSL listener as the
// broker builds it, its configuration taken per handshake from an atomic
// pointer that a keystore update replaces.
func BenchmarkConnectionSetup(b *testing.B) {
	pki := newTestPKI(b)
	serverTLS := &TLSListener{Config: &tls.Config{Certificates: []tls.Certificate{pki.server}}}
	var current atomic.Pointer[tls.Config]
	current.Store(serverTLS.Config)
	swappableTLS := &TLSListener{Config: &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return current.Load(), nil }}}
	// SCRAM-SHA-512 at Kafka's default 4096 iterations: the client's
	// PBKDF2 is most of it (franz-go's client, salting once per
	// connection as every client does).
	scramCred, err := sasl.NewScramCredential(sasl.MechanismScramSHA512, "alice-secret", sasl.ScramMinIterations)
	if err != nil {
		b.Fatal(err)
	}
	scramUsers := func(user string) (sasl.ScramCredential, bool) { return scramCred, user == "alice" }
	for _, mode := range []string{"plaintext", "ssl", "ssl_swappable", "sasl_ssl", "sasl_ssl_scram512"} {
		b.Run(mode, func(b *testing.B) {
			var mod func(*Config)
			mechanism := "PLAIN"
			switch mode {
			case "ssl", "ssl_swappable":
				l := serverTLS
				if mode == "ssl_swappable" {
					l = swappableTLS
				}
				mod = func(cfg *Config) {
					cfg.Listeners[0].SecurityProtocol = SSL
					cfg.TLS = map[string]*TLSListener{cfg.Listeners[0].Name: l}
				}
			case "sasl_ssl":
				mod = saslListener(serverTLS)
			case "sasl_ssl_scram512":
				mechanism = sasl.MechanismScramSHA512
				plainMod := saslListener(serverTLS)
				mod = func(cfg *Config) {
					plainMod(cfg)
					cfg.SASL[cfg.Listeners[0].Name] = &SASLListener{
						Mechanisms: []string{mechanism},
						Start: func(m string) SASLExchange {
							s, _ := sasl.NewScramServer(m, scramUsers)
							return s
						},
					}
				}
			}
			ts := startServer(b, nil, mod)
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Mechanism = mechanism
			for b.Loop() {
				var rc *rawClient
				if mode == "plaintext" {
					nc, err := net.Dial("tcp", ts.addr)
					if err != nil {
						b.Fatal(err)
					}
					rc = &rawClient{t: b, c: nc, fmt: kmsg.NewRequestFormatter()}
				} else {
					rc = newTLSBenchClient(b, ts.addr, pki.clientConfig(false)).rc
				}
				corr := rc.send(kmsg.NewPtrApiVersionsRequest(), 3)
				rc.read(kmsg.NewPtrApiVersionsResponse(), 3, corr)
				if strings.HasPrefix(mode, "sasl_") {
					corr = rc.send(hs, 1)
					rc.read(kmsg.NewPtrSASLHandshakeResponse(), 1, corr)
					saslAuthenticate(b, rc, mechanism)
				}
				corr = rc.send(metadataRequest(), 12)
				rc.read(kmsg.NewPtrMetadataResponse(), 12, corr)
				rc.c.Close()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
		})
	}
}

// saslAuthenticate runs a benchmark client's SaslAuthenticate exchange as
// alice: PLAIN's one message, or franz-go's SCRAM client's two.
func saslAuthenticate(b *testing.B, rc *rawClient, mechanism string) {
	var session interface {
		Challenge([]byte) (bool, []byte, error)
	}
	msg := []byte("\x00alice\x00alice-secret")
	if mechanism != "PLAIN" {
		s, first, err := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism().Authenticate(context.Background(), "")
		if err != nil {
			b.Fatal(err)
		}
		session, msg = s, first
	}
	for {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = msg
		corr := rc.send(auth, 2)
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		rc.read(resp, 2, corr)
		if resp.ErrorCode != 0 {
			b.Fatalf("SaslAuthenticate: error %d", resp.ErrorCode)
		}
		if session == nil {
			return
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			b.Fatal(err)
		}
		if done {
			return
		}
		msg = next
	}
}

// cfgListener is the name of a test server's listener.
func cfgListener(ts *testServer) string { return ts.BoundListeners()[0].Name }

// Raft on a SASL listener authenticates first: a Raft marker before
// authentication closes the connection; after SaslHandshake and
// SaslAuthenticate the marker hands the connection off with the SASL
// principal, its bytes replayed and the writer stopped.
func TestSASLRaftHandoff(t *testing.T) {
	const marker = 0xFE
	type handoff struct {
		nc        net.Conn
		principal string
	}
	handed := make(chan handoff, 1)
	ts := startServer(t, nil, func(c *Config) {
		saslListener(nil)(c)
		c.ConnClassifier = func(first byte) bool { return first == marker }
		c.HandoffRaft = func(nc net.Conn, info *ConnInfo) { handed <- handoff{nc, info.Principal} }
	})

	rc := dialRaw(t, ts.addr)
	rc.write([]byte{marker, 'r', 'a', 'f', 't'})
	rc.expectClosed()
	if !strings.Contains(ts.logs.String(), "Raft on a SASL listener must authenticate first") {
		t.Errorf("the unauthenticated Raft connection was not logged:\n%s", ts.logs.String())
	}

	rc = dialRaw(t, ts.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	rc.read(hsResp, 1, rc.send(hs, 1))
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	authResp := kmsg.NewPtrSASLAuthenticateResponse()
	rc.read(authResp, 1, rc.send(auth, 1))
	if hsResp.ErrorCode != 0 || authResp.ErrorCode != 0 {
		t.Fatalf("authentication: handshake error %d, authenticate error %d", hsResp.ErrorCode, authResp.ErrorCode)
	}
	rc.write([]byte{marker, 'r', 'a', 'f', 't'})
	var h handoff
	select {
	case h = <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("the authenticated Raft connection was not handed off")
	}
	defer h.nc.Close()
	if h.principal != "User:alice" {
		t.Errorf("handed off as %q, want User:alice", h.principal)
	}
	got := make([]byte, 5)
	_ = h.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(h.nc, got); err != nil || string(got) != "\xferaft" {
		t.Fatalf("handed-off bytes %q, %v", got, err)
	}
	if _, err := h.nc.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 4)
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(rc.c, back); err != nil || string(back) != "pong" {
		t.Fatalf("the Raft side's bytes did not reach the dialler: %q, %v", back, err)
	}
}
