package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/network"
)

// A listener's TLS under dynamic updates: validateOnly installs nothing;
// a renewed certificate is installed; another subject and a missing file
// are refused and the listener keeps what it serves; unchanged settings
// rebuild nothing unless the file was replaced in place.
func TestListenerTLSUpdate(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := testCA(t)
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	first := writeTestKeystore(t, dir, "first.pem", ca, caKey, "broker")
	renewedPath := filepath.Join(dir, "renewed.pem")
	renewed := writeTestKeystore(t, dir, "renewed.pem", ca, caKey, "broker")
	writeTestKeystore(t, dir, "other.pem", ca, caKey, "other")
	cfg := loadListenerConfig(t, map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "first.pem"),
		"ssl.truststore.type": "PEM", "ssl.truststore.location": caPath})
	nt, err := loadNodeTLS(cfg, []network.Listener{{Name: "EXTERNAL", SecurityProtocol: network.SSL}},
		map[string]network.SecurityProtocol{"EXTERNAL": network.SSL, "INTERNAL": network.Plaintext, "CONTROLLER": network.Plaintext}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	lt := nt.listener("external")
	served := func() *x509.Certificate {
		t.Helper()
		c, err := x509.ParseCertificate(lt.server.Load().Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const key = "listener.name.external.ssl.keystore.location"
	if err := nt.update(map[string]string{key: renewedPath}, true, nil); err != nil || !served().Equal(first) {
		t.Fatalf("validate only: %v, serving %v", err, served().SerialNumber)
	}
	if err := nt.update(map[string]string{key: renewedPath}, false, nil); err != nil || !served().Equal(renewed) {
		t.Fatalf("update: %v, serving %v", err, served().SerialNumber)
	}
	for path, msg := range map[string]string{filepath.Join(dir, "other.pem"): "DistinguishedName", filepath.Join(dir, "gone.pem"): "gone.pem"} {
		if err := nt.update(map[string]string{key: path}, false, nil); err == nil || !strings.Contains(err.Error(), msg) || !served().Equal(renewed) {
			t.Errorf("%s: %v, serving %v", path, err, served().SerialNumber)
		}
	}
	before := lt.server.Load()
	if err := nt.update(map[string]string{key: renewedPath}, false, nil); err != nil || lt.server.Load() != before {
		t.Errorf("unchanged settings rebuilt the listener: %v", err)
	}
	inPlace := writeTestKeystore(t, dir, "renewed.pem", ca, caKey, "broker")
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(renewedPath, later, later); err != nil {
		t.Fatal(err)
	}
	if err := nt.update(map[string]string{key: renewedPath}, false, nil); err != nil || !served().Equal(inPlace) {
		t.Errorf("a file replaced in place: %v, serving %v", err, served().SerialNumber)
	}
}

func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

var testSerial = big.NewInt(1)

// writeTestKeystore writes a PEM keystore (key and certificate) for
// 127.0.0.1 with subject CN=cn, signed by ca, and returns the certificate.
func writeTestKeystore(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	testSerial.Add(testSerial, big.NewInt(1))
	tmpl := &x509.Certificate{SerialNumber: new(big.Int).Set(testSerial), Subject: pkix.Name{CommonName: cn},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
