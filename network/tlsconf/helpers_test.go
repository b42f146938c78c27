package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// testPKI is a CA, the certificates it signs, and an unrelated CA.
type testPKI struct {
	ca, otherCA           *x509.Certificate
	caKey, otherCAKey     crypto.Signer
	server                *x509.Certificate // SAN 127.0.0.1, localhost
	serverKey             crypto.Signer
	serverRSA             *x509.Certificate // an RSA key, SAN 127.0.0.1, localhost
	serverRSAKey          *rsa.PrivateKey
	wrongSAN              *x509.Certificate // SAN wrong.example only
	wrongSANKey           crypto.Signer
	untrusted             *x509.Certificate // signed by otherCA, SAN 127.0.0.1
	untrustedKey          crypto.Signer
	client                *x509.Certificate // CN=client1,OU=eng,O=Acme\, Inc.,L=San Francisco,ST=CA,C=US
	clientKey             crypto.Signer
	clientSubjectExpected string
}

var (
	pkiOnce sync.Once
	pki     *testPKI
	pkiErr  error
)

// getPKI builds the test PKI once per test binary.
func getPKI(t testing.TB) *testPKI {
	t.Helper()
	pkiOnce.Do(func() { pki, pkiErr = newTestPKI() })
	if pkiErr != nil {
		t.Fatal(pkiErr)
	}
	return pki
}

func newTestPKI() (*testPKI, error) {
	p := &testPKI{}
	var err error
	if p.ca, p.caKey, err = newCA("Keel Test CA"); err != nil {
		return nil, err
	}
	if p.otherCA, p.otherCAKey, err = newCA("Other CA"); err != nil {
		return nil, err
	}
	serverName := pkix.Name{CommonName: "localhost", Organization: []string{"Keel"}}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	if p.server, p.serverKey, err = newLeaf(p.ca, p.caKey, serverName, loopback, []string{"localhost"}, x509.ExtKeyUsageServerAuth, nil); err != nil {
		return nil, err
	}
	if p.serverRSAKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	if p.serverRSA, _, err = newLeaf(p.ca, p.caKey, serverName, loopback, []string{"localhost"}, x509.ExtKeyUsageServerAuth, p.serverRSAKey); err != nil {
		return nil, err
	}
	if p.wrongSAN, p.wrongSANKey, err = newLeaf(p.ca, p.caKey, pkix.Name{CommonName: "wrong.example"}, nil, []string{"wrong.example"}, x509.ExtKeyUsageServerAuth, nil); err != nil {
		return nil, err
	}
	if p.untrusted, p.untrustedKey, err = newLeaf(p.otherCA, p.otherCAKey, serverName, loopback, []string{"localhost"}, x509.ExtKeyUsageServerAuth, nil); err != nil {
		return nil, err
	}
	clientName := pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
		{Type: oid(2, 5, 4, 6), Value: "US"},
		{Type: oid(2, 5, 4, 8), Value: "CA"},
		{Type: oid(2, 5, 4, 7), Value: "San Francisco"},
		{Type: oid(2, 5, 4, 10), Value: "Acme, Inc."},
		{Type: oid(2, 5, 4, 11), Value: "eng"},
		{Type: oid(2, 5, 4, 3), Value: "client1"},
	}}
	p.clientSubjectExpected = `CN=client1,OU=eng,O=Acme\, Inc.,L=San Francisco,ST=CA,C=US`
	if p.client, p.clientKey, err = newLeaf(p.ca, p.caKey, clientName, nil, nil, x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	return p, nil
}

func oid(n ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(n) }

var serial int64

func nextSerial() *big.Int {
	serial++
	return big.NewInt(serial)
}

func newCA(cn string) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// newLeaf issues a certificate signed by ca; key is generated (P-256)
// when nil.
func newLeaf(ca *x509.Certificate, caKey crypto.Signer, subject pkix.Name, ips []net.IP, dns []string,
	eku x509.ExtKeyUsage, key crypto.Signer) (*x509.Certificate, crypto.Signer, error) {
	if key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		key = k
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{eku},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// Store writers: each writes a file in dir and returns its path.

func pemCertsBytes(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

func pkcs8PEM(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writePEMKeystore writes the chain first and the key last (any order
// must do).
func writePEMKeystore(t testing.TB, dir, name string, key crypto.Signer, chain ...*x509.Certificate) string {
	t.Helper()
	return writeFile(t, dir, name, append(pemCertsBytes(chain...), pkcs8PEM(t, key)...))
}

func writePKCS12Keystore(t testing.TB, dir, name, password string, key crypto.Signer, leaf *x509.Certificate, cas ...*x509.Certificate) string {
	t.Helper()
	data, err := pkcs12.Modern.Encode(key, leaf, cas, password)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, data)
}

func writePKCS12Truststore(t testing.TB, dir, name, password string, certs ...*x509.Certificate) string {
	t.Helper()
	data, err := pkcs12.Modern.EncodeTrustStore(certs, password)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, data)
}

// jksKey is a JKS private key entry.
type jksKey struct {
	alias string
	key   crypto.Signer
	chain []*x509.Certificate
}

func writeJKSKeystore(t testing.TB, dir, name, storePassword, keyPassword string, entries ...jksKey) string {
	t.Helper()
	ks := keystore.New()
	for _, e := range entries {
		der, err := x509.MarshalPKCS8PrivateKey(e.key)
		if err != nil {
			t.Fatal(err)
		}
		var chain []keystore.Certificate
		for _, c := range e.chain {
			chain = append(chain, keystore.Certificate{Type: "X509", Content: c.Raw})
		}
		err = ks.SetPrivateKeyEntry(e.alias, keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der, CertificateChain: chain}, []byte(keyPassword))
		if err != nil {
			t.Fatal(err)
		}
	}
	return storeJKS(t, ks, dir, name, storePassword)
}

func writeJKSTruststore(t testing.TB, dir, name, password string, certs ...*x509.Certificate) string {
	t.Helper()
	ks := keystore.New()
	for i, c := range certs {
		err := ks.SetTrustedCertificateEntry(fmt.Sprintf("ca%d", i), keystore.TrustedCertificateEntry{
			CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: c.Raw}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return storeJKS(t, ks, dir, name, password)
}

func storeJKS(t testing.TB, ks keystore.KeyStore, dir, name, password string) string {
	t.Helper()
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(password)); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, b.Bytes())
}

// handshake runs a TLS handshake over 127.0.0.1 between server and
// client, then has the client send a line the server echoes. It returns
// the first error of either side, and the server's view of the client's
// certificates.
func handshake(t testing.TB, server, client *tls.Config) (peer []*x509.Certificate, err error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		peer []*x509.Certificate
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			done <- result{err: fmt.Errorf("server: %w", err)}
			return
		}
		buf := make([]byte, 6)
		if _, err := io.ReadFull(tc, buf); err != nil {
			done <- result{err: fmt.Errorf("server read: %w", err)}
			return
		}
		if _, err := tc.Write(buf); err != nil {
			done <- result{err: fmt.Errorf("server write: %w", err)}
			return
		}
		done <- result{peer: tc.ConnectionState().PeerCertificates}
	}()
	clientErr := func() error {
		nc, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		tc := tls.Client(nc, client)
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("client: %w", err)
		}
		// With TLS 1.3 a refused client certificate shows on the first read.
		if _, err := tc.Write([]byte("hello\n")); err != nil {
			return fmt.Errorf("client write: %w", err)
		}
		buf := make([]byte, 6)
		if _, err := io.ReadFull(tc, buf); err != nil {
			return fmt.Errorf("client read: %w", err)
		}
		if string(buf) != "hello\n" {
			return fmt.Errorf("client read %q", buf)
		}
		return nil
	}()
	r := <-done
	if clientErr != nil {
		return nil, errors.Join(clientErr, r.err)
	}
	return r.peer, r.err
}

// mustServer and mustClient build configs or fail the test.
func mustServer(t testing.TB, s Settings) *tls.Config {
	t.Helper()
	cfg, err := s.ServerConfig()
	if err != nil {
		t.Fatalf("ServerConfig: %v", err)
	}
	return cfg
}

func mustClient(t testing.TB, s Settings, serverName string) *tls.Config {
	t.Helper()
	cfg, err := s.ClientConfig(serverName)
	if err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	return cfg
}
