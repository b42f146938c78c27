package network

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, made fresh for a test.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "keel test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: subject, IPAddresses: ips,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := &testPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.server = issue(2, pkix.Name{CommonName: "broker"}, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.client = issue(3, pkix.Name{CommonName: "client-1", OrganizationalUnit: []string{"payments"}, Organization: []string{"Acme"}}, x509.ExtKeyUsageClientAuth, nil)
	return p
}

// sslListener turns startServer's listener into an SSL one.
func (p *testPKI) sslListener(auth tls.ClientAuthType, principal func([]*x509.Certificate) (string, error)) func(*Config) {
	return func(cfg *Config) {
		cfg.Listeners[0].SecurityProtocol = SSL
		cfg.TLS = map[string]*TLSListener{cfg.Listeners[0].Name: {
			Config:    &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: auth},
			Principal: principal,
		}}
	}
}

func (p *testPKI) clientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1"}
	if withCert {
		c.Certificates = []tls.Certificate{p.client}
	}
	return c
}

// principalRecorder answers Metadata and remembers each request's principal.
type principalRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *principalRecorder) handle(_ context.Context, req *Request) (Result, bool) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Conn.Principal)
	r.mu.Unlock()
	return nil, false
}

func (r *principalRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return ""
	}
	return r.seen[len(r.seen)-1]
}

// An SSL listener serves a Kafka client over TLS: requests, and Fetch
// responses whose file regions (too large to share the buffer) go through
// the copy path instead of sendfile, byte for byte.
func TestSSLListenerServesKgo(t *testing.T) {
	pki := newTestPKI(t)
	f := testRecordFile(t, 1<<20)
	const regionLen = 200 << 10 // above copyRegionMax: writeRegion's path
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		fr, ok := req.Msg.(*kmsg.FetchRequest)
		if !ok {
			return nil, false
		}
		topic := FetchTopic{Topic: fr.Topics[0].Topic}
		for _, rp := range fr.Topics[0].Partitions {
			p := partition(rp.Partition)
			p.Records = []Region{fileRegion{f, int64(rp.Partition) * regionLen, regionLen}}
			topic.Partitions = append(topic.Partitions, p)
		}
		body := AcquireBody()
		if err := (&FetchResponse{Topics: []FetchTopic{topic}}).Encode(req.Header.APIVersion, body); err != nil {
			t.Error(err)
		}
		return &Response{Body: body}, true
	}, pki.sslListener(tls.NoClientCert, nil))

	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.DialTLSConfig(pki.clientConfig(false)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Request(ctx, metadataRequest()); err != nil {
		t.Fatalf("metadata over TLS: %v", err)
	}
	for range 3 {
		resp, err := cl.Broker(1).Request(ctx, fetchRequest([16]byte{1}))
		if err != nil {
			t.Fatalf("fetch over TLS: %v", err)
		}
		for _, p := range resp.(*kmsg.FetchResponse).Topics[0].Partitions {
			want := regionBytes(t, fileRegion{f, int64(p.Partition) * regionLen, regionLen})
			if !bytes.Equal(p.RecordBatches, want) {
				t.Fatalf("partition %d: %d record bytes differ from the file's %d", p.Partition, len(p.RecordBatches), len(want))
			}
		}
	}
}

// ssl.client.auth=required: a client certificate is the principal (as
// the mapping names it); no certificate, an untrusted one, or a
// principal the mapping refuses fails the handshake — a log line, the
// connection closed, the listener still serving others.
func TestSSLClientAuthAndPrincipal(t *testing.T) {
	pki := newTestPKI(t)
	rec := &principalRecorder{}
	ts := startServer(t, rec.handle, pki.sslListener(tls.RequireAndVerifyClientCert, func(chain []*x509.Certificate) (string, error) {
		if cn := chain[0].Subject.CommonName; cn != "client-1" {
			return "", errors.New("no rule matches")
		}
		return strings.ToUpper(chain[0].Subject.CommonName), nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	request := func(cfg *tls.Config) error { return metadataWith(ctx, ts.addr, kgo.DialTLSConfig(cfg)) }
	if err := request(pki.clientConfig(true)); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if got := rec.last(); got != "User:CLIENT-1" {
		t.Errorf("principal %q, want User:CLIENT-1", got)
	}

	if err := request(pki.clientConfig(false)); err == nil {
		t.Error("a client without a certificate was served")
	}
	other := newTestPKI(t) // a certificate from a CA the broker does not trust
	untrusted := pki.clientConfig(false)
	untrusted.Certificates = []tls.Certificate{other.client}
	if err := request(untrusted); err == nil {
		t.Error("a client with an untrusted certificate was served")
	}
	waitFor(t, "the failed handshakes logged", func() bool {
		return strings.Count(ts.logs.String(), "TLS handshake failed") >= 2
	})

	// A plaintext client on the SSL listener: closed, nothing served.
	rc := dialRaw(t, ts.addr)
	rc.send(metadataRequest(), 12)
	rc.expectClosed()

	if err := request(pki.clientConfig(true)); err != nil {
		t.Fatalf("the listener stopped serving after bad clients: %v", err)
	}
	// The plaintext client's bytes failed a handshake too.
	ok, failed := ts.Authentications()
	if name := cfgListener(ts); ok[name] != 2 || failed[name] != 3 {
		t.Errorf("authentications: %d succeeded, %d failed; want 2 and 3", ok[name], failed[name])
	}
}

// The listener refuses a principal the mapping rejects.
func TestSSLPrincipalMappingFailureClosesTheConnection(t *testing.T) {
	pki := newTestPKI(t)
	rec := &principalRecorder{}
	ts := startServer(t, rec.handle, pki.sslListener(tls.VerifyClientCertIfGiven, func([]*x509.Certificate) (string, error) {
		return "", errors.New("no rule matches")
	}))
	conn, err := tls.Dial("tcp", ts.addr, pki.clientConfig(true))
	if err != nil {
		t.Fatal(err) // TLS 1.3: the client finishes before the server's verdict
	}
	defer conn.Close()
	rc := &rawClient{t: t, c: conn, fmt: kmsg.NewRequestFormatter()}
	rc.send(metadataRequest(), 12)
	rc.expectClosed()
	if len(rec.seen) != 0 {
		t.Errorf("a request was served for a client without a principal: %v", rec.seen)
	}
	if !strings.Contains(ts.logs.String(), "no rule matches") {
		t.Errorf("the mapping's error is not logged:\n%s", ts.logs.String())
	}

	// ssl.client.auth=requested: no certificate is ANONYMOUS.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := metadataWith(ctx, ts.addr, kgo.DialTLSConfig(pki.clientConfig(false))); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); got != AnonymousPrincipal {
		t.Errorf("principal without a certificate %q, want %s", got, AnonymousPrincipal)
	}
}

// A client that opens a TLS connection and never finishes the handshake
// does not hold a goroutine past the handshake timeout, and shutdown does
// not wait for it.
func TestSSLStalledHandshakeIsBounded(t *testing.T) {
	pki := newTestPKI(t)
	base := runtime.NumGoroutine()
	ts := startServer(t, nil, func(cfg *Config) {
		pki.sslListener(tls.NoClientCert, nil)(cfg)
		cfg.ConnectionsMaxIdle = 300 * time.Millisecond // bounds the handshake too
	})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0x16, 0x03, 0x01}); err != nil { // a record header, then nothing
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 64)); err == nil {
		// an alert may come first; the close follows
		_, err = c.Read(make([]byte, 64))
		if err == nil {
			t.Fatal("connection still open after the handshake timeout")
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a stalled handshake open for 5s")
	}
	waitFor(t, "no connections left", func() bool { return ts.NumConnections() == 0 })
	goroutinesSettle(t, base+4) // the server's accept loop and Serve, the test's
}

// metadataWith sends one Metadata request to addr with a kgo client built
// with opts that does not retry, and returns its error.
func metadataWith(ctx context.Context, addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.Request(ctx, metadataRequest())
	return err
}

// An SSL or SASL_SSL listener needs its TLS configuration.
func TestSSLListenerConfigErrors(t *testing.T) {
	h := &testHandler{}
	ssl := Listener{Name: "EXTERNAL", Host: "127.0.0.1", SecurityProtocol: SSL}
	if _, err := NewServer(Config{Listeners: []Listener{ssl}, Handler: h}); err == nil || !strings.Contains(err.Error(), "no TLS configuration") {
		t.Errorf("SSL listener without TLS: %v", err)
	}
	plain := Listener{Name: "INTERNAL", Host: "127.0.0.1", SecurityProtocol: Plaintext}
	if _, err := NewServer(Config{Listeners: []Listener{plain}, Handler: h, TLS: map[string]*TLSListener{"INTERNAL": {Config: &tls.Config{}}}}); err == nil {
		t.Error("a PLAINTEXT listener took a TLS configuration")
	}
	sasl := Listener{Name: "SASL", Host: "127.0.0.1", SecurityProtocol: SASLSSL}
	if _, err := NewServer(Config{Listeners: []Listener{sasl}, Handler: h, SASL: map[string]*SASLListener{"SASL": {Mechanisms: []string{"PLAIN"}, Start: func(string) SASLExchange { return nil }}}}); err == nil || !strings.Contains(err.Error(), "no TLS configuration") {
		t.Errorf("SASL_SSL listener without TLS: %v", err)
	}
}
