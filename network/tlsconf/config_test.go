package tlsconf

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
)

// TestHandshakeEveryStoreFormat runs a handshake between a broker whose
// keystore is of each format and a client whose truststore is of each
// format.
func TestHandshakeEveryStoreFormat(t *testing.T) {
	dir := t.TempDir()
	keystores, truststores := keystoreVariants(t, dir), truststoreVariants(t, dir)
	for _, ks := range keystores {
		server := Defaults()
		ks.apply(&server)
		serverCfg := mustServer(t, server)
		for _, ts := range truststores {
			t.Run(ks.name+" keystore/"+ts.name+" truststore", func(t *testing.T) {
				client := Defaults()
				ts.apply(&client)
				if _, err := handshake(t, serverCfg, mustClient(t, client, "127.0.0.1:9093")); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// clientAuthSetup is a broker keystore and truststore, and client
// settings with and without a keystore.
func clientAuthSetup(t *testing.T) (server, withCert, withoutCert Settings) {
	p := getPKI(t)
	dir := t.TempDir()
	server = Defaults()
	server.KeystoreType, server.KeystoreLocation = TypePEM, writePEMKeystore(t, dir, "server.pem", p.serverKey, p.server, p.ca)
	server.TruststoreType, server.TruststoreLocation = TypePEM, writeFile(t, dir, "ca.pem", pemCertsBytes(p.ca))
	withoutCert = Defaults()
	withoutCert.TruststoreType, withoutCert.TruststoreLocation = TypePEM, server.TruststoreLocation
	withCert = withoutCert
	withCert.KeystoreType, withCert.KeystoreLocation, withCert.KeystorePassword = TypePKCS12,
		writePKCS12Keystore(t, dir, "client.p12", "pw", p.clientKey, p.client, p.ca), "pw"
	return server, withCert, withoutCert
}

func TestClientAuth(t *testing.T) {
	p := getPKI(t)
	server, withCert, withoutCert := clientAuthSetup(t)
	tests := []struct {
		clientAuth string
		client     Settings
		wantErr    bool
		wantPeer   bool
	}{
		{"required", withoutCert, true, false},
		{"required", withCert, false, true},
		{"REQUESTED", withoutCert, false, false},
		{"requested", withCert, false, true},
		{"none", withCert, false, false},
		{"", withoutCert, false, false},
	}
	for _, tc := range tests {
		name := tc.clientAuth + "/client certificate " + map[bool]string{true: "given", false: "not given"}[tc.client.KeystoreLocation != ""]
		t.Run(name, func(t *testing.T) {
			s := server
			s.ClientAuth = tc.clientAuth
			peer, err := handshake(t, mustServer(t, s), mustClient(t, tc.client, "localhost"))
			if tc.wantErr {
				if err == nil {
					t.Fatal("handshake succeeded, want the broker to refuse the client")
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(peer) > 0; got != tc.wantPeer {
				t.Fatalf("broker saw a client certificate: %v, want %v", got, tc.wantPeer)
			}
			if tc.wantPeer && !peer[0].Equal(p.client) {
				t.Errorf("broker saw %s", peer[0].Subject)
			}
		})
	}

	// A client certificate from a CA the broker does not trust is refused.
	dir := t.TempDir()
	stranger, strangerKey, err := newLeaf(p.otherCA, p.otherCAKey, p.client.Subject, nil, nil, x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := withoutCert
	c.KeystoreType, c.KeystoreLocation = TypePEM, writePEMKeystore(t, dir, "stranger.pem", strangerKey, stranger)
	s := server
	s.ClientAuth = ClientAuthRequired
	if _, err := handshake(t, mustServer(t, s), mustClient(t, c, "localhost")); err == nil {
		t.Error("a client certificate of an untrusted CA was accepted")
	}
}

func TestServerVerification(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	trustCA := Defaults()
	trustCA.TruststoreType, trustCA.TruststoreLocation = TypePEM, writeFile(t, dir, "ca.pem", pemCertsBytes(p.ca))
	trustOther := Defaults()
	trustOther.TruststoreType, trustOther.TruststoreLocation = TypePEM, writeFile(t, dir, "other.pem", pemCertsBytes(p.otherCA))
	noHostCheck := trustCA
	noHostCheck.EndpointIdentificationAlgorithm = ""
	noHostCheckSystemRoots := Defaults()
	noHostCheckSystemRoots.EndpointIdentificationAlgorithm = ""

	good := serverConfigFor(t, p.serverKey, p.server, p.ca)
	wrongSAN := serverConfigFor(t, p.wrongSANKey, p.wrongSAN, p.ca)
	untrusted := serverConfigFor(t, p.untrustedKey, p.untrusted, p.otherCA)

	tests := []struct {
		name       string
		server     *tls.Config
		client     Settings
		serverName string
		wantErr    string
	}{
		{"trusted, host name matches the IP SAN", good, trustCA, "127.0.0.1", ""},
		{"trusted, host name matches the DNS SAN", good, trustCA, "localhost:9093", ""},
		{"client trusts another CA", good, trustOther, "127.0.0.1", "certificate signed by unknown authority"},
		{"https: SAN does not match", wrongSAN, trustCA, "127.0.0.1", "127.0.0.1"},
		{"empty algorithm: SAN not checked", wrongSAN, noHostCheck, "127.0.0.1", ""},
		{"empty algorithm: untrusted chain still refused", untrusted, noHostCheck, "127.0.0.1", "not trusted"},
		{"empty algorithm, system roots: our CA not trusted", good, noHostCheckSystemRoots, "127.0.0.1", "not trusted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := handshake(t, tc.server, mustClient(t, tc.client, tc.serverName))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// serverConfigFor is a broker serving chain (leaf first) with key, from
// a PEM keystore.
func serverConfigFor(t *testing.T, key crypto.Signer, chain ...*x509.Certificate) *tls.Config {
	t.Helper()
	s := Defaults()
	s.KeystoreType, s.KeystoreLocation = TypePEM, writePEMKeystore(t, t.TempDir(), "server.pem", key, chain...)
	return mustServer(t, s)
}

func TestEnabledProtocols(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	server := Defaults()
	server.KeystoreType, server.KeystoreLocation = TypePEM, writePEMKeystore(t, dir, "server.pem", p.serverKey, p.server, p.ca)
	client := Defaults()
	client.TruststoreType, client.TruststoreCertificates = TypePEM, string(pemCertsBytes(p.ca))

	tls13Only := server
	tls13Only.EnabledProtocols = []string{"TLSv1.3"}
	tls12Client := client
	tls12Client.EnabledProtocols = []string{"TLSv1.2"}
	if _, err := handshake(t, mustServer(t, tls13Only), mustClient(t, tls12Client, "127.0.0.1")); err == nil {
		t.Error("a TLSv1.3-only broker accepted a TLSv1.2-only client")
	}
	// A plain Go client capped at TLS 1.2, as an old client would be.
	old := mustClient(t, client, "127.0.0.1")
	old.MaxVersion = tls.VersionTLS12
	if _, err := handshake(t, mustServer(t, tls13Only), old); err == nil {
		t.Error("a TLSv1.3-only broker accepted a TLS 1.2 client")
	}
	if _, err := handshake(t, mustServer(t, tls13Only), mustClient(t, client, "127.0.0.1")); err != nil {
		t.Errorf("default client, TLSv1.3-only broker: %v", err)
	}
	// The default broker takes a TLS 1.2 client.
	if _, err := handshake(t, mustServer(t, server), mustClient(t, tls12Client, "127.0.0.1")); err != nil {
		t.Errorf("default broker, TLSv1.2 client: %v", err)
	}

	cfg := mustServer(t, server)
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS13 {
		t.Errorf("default versions %x-%x, want TLS 1.2-1.3", cfg.MinVersion, cfg.MaxVersion)
	}
	// ssl.protocol=TLSv1.2 caps clients (not brokers), as Kafka documents.
	capped := client
	capped.Protocol = "TLSv1.2"
	if cfg := mustClient(t, capped, ""); cfg.MaxVersion != tls.VersionTLS12 {
		t.Errorf("ssl.protocol=TLSv1.2: client MaxVersion %x", cfg.MaxVersion)
	}
	server.Protocol = "TLSv1.2"
	if cfg := mustServer(t, server); cfg.MaxVersion != tls.VersionTLS13 {
		t.Errorf("ssl.protocol=TLSv1.2: broker MaxVersion %x", cfg.MaxVersion)
	}
	bad := client
	bad.EnabledProtocols = []string{"TLSv1.2", "SSLv3"}
	if _, err := bad.ClientConfig(""); err == nil || !strings.Contains(err.Error(), "SSLv3") {
		t.Errorf("SSLv3: err = %v", err)
	}
}

func TestCipherSuites(t *testing.T) {
	const (
		ecdsaAES128 = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
		ecdsaAES256 = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	)
	tests := []struct {
		suites       []string
		protocols    []string
		wantIDs      []uint16
		wantMin      uint16
		wantMax      uint16
		wantErrMatch string
	}{
		{suites: nil, wantMin: tls.VersionTLS12, wantMax: tls.VersionTLS13},
		{suites: []string{ecdsaAES128, "TLS_AES_128_GCM_SHA256"}, wantIDs: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
			wantMin: tls.VersionTLS12, wantMax: tls.VersionTLS13},
		// No TLS 1.3 suite: JSSE cannot negotiate TLS 1.3.
		{suites: []string{ecdsaAES128, "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"}, wantIDs: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
			wantMin: tls.VersionTLS12, wantMax: tls.VersionTLS12},
		// Only TLS 1.3 suites: only TLS 1.3.
		{suites: []string{"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}, wantMin: tls.VersionTLS13, wantMax: tls.VersionTLS13},
		// JSSE's SSL_ aliases, an insecure (but known) suite.
		{suites: []string{"SSL_RSA_WITH_3DES_EDE_CBC_SHA"}, wantIDs: []uint16{tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA},
			wantMin: tls.VersionTLS12, wantMax: tls.VersionTLS12},
		{suites: []string{ecdsaAES128, "TLS_NOT_A_SUITE"}, wantErrMatch: `unknown cipher suite "TLS_NOT_A_SUITE"`},
		{suites: []string{ecdsaAES128}, protocols: []string{"TLSv1.3"}, wantErrMatch: "lists no TLS 1.3 suite"},
		{suites: []string{"TLS_AES_128_GCM_SHA256"}, protocols: []string{"TLSv1.2"}, wantErrMatch: "no cipher suite usable"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.suites, ","), func(t *testing.T) {
			s := Defaults()
			s.CipherSuites = tc.suites
			if tc.protocols != nil {
				s.EnabledProtocols = tc.protocols
			}
			cfg, err := s.ClientConfig("")
			if tc.wantErrMatch != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrMatch) || !strings.Contains(err.Error(), "ssl.") {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErrMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.CipherSuites, tc.wantIDs) || cfg.MinVersion != tc.wantMin || cfg.MaxVersion != tc.wantMax {
				t.Errorf("suites %x versions %x-%x, want %x %x-%x", cfg.CipherSuites, cfg.MinVersion, cfg.MaxVersion,
					tc.wantIDs, tc.wantMin, tc.wantMax)
			}
		})
	}

	// A handshake negotiates the one suite both sides enable, and fails
	// when they share none.
	p := getPKI(t)
	dir := t.TempDir()
	server := Defaults()
	server.KeystoreType, server.KeystoreLocation = TypePEM, writePEMKeystore(t, dir, "server.pem", p.serverKey, p.server, p.ca)
	server.CipherSuites = []string{ecdsaAES256}
	client := Defaults()
	client.TruststoreType, client.TruststoreCertificates = TypePEM, string(pemCertsBytes(p.ca))
	clientCfg := mustClient(t, client, "127.0.0.1")
	var negotiated uint16
	clientCfg.VerifyConnection = func(cs tls.ConnectionState) error { negotiated = cs.CipherSuite; return nil }
	if _, err := handshake(t, mustServer(t, server), clientCfg); err != nil {
		t.Fatal(err)
	}
	if negotiated != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Errorf("negotiated %s", tls.CipherSuiteName(negotiated))
	}
	client.CipherSuites = []string{ecdsaAES128}
	if _, err := handshake(t, mustServer(t, server), mustClient(t, client, "127.0.0.1")); err == nil {
		t.Error("handshake without a shared cipher suite succeeded")
	}
}

func TestServerConfigNeedsKeystore(t *testing.T) {
	_, err := Defaults().ServerConfig()
	if err == nil || !strings.Contains(err.Error(), "ssl.keystore.location is not set") {
		t.Fatalf("err = %v, want one naming ssl.keystore.location", err)
	}
}

func TestClientConfig(t *testing.T) {
	tests := []struct{ in, want string }{
		{"broker1:9093", "broker1"},
		{"broker1", "broker1"},
		{"[::1]:9093", "::1"},
		{"", ""},
	}
	for _, tc := range tests {
		cfg := mustClient(t, Defaults(), tc.in)
		if cfg.ServerName != tc.want {
			t.Errorf("ClientConfig(%q).ServerName = %q, want %q", tc.in, cfg.ServerName, tc.want)
		}
		if cfg.InsecureSkipVerify || cfg.RootCAs != nil || len(cfg.Certificates) != 0 {
			t.Errorf("ClientConfig(%q): skip %v, roots %v, %d certificates; want system roots, verification, no certificate",
				tc.in, cfg.InsecureSkipVerify, cfg.RootCAs, len(cfg.Certificates))
		}
	}
	s := Defaults()
	s.EndpointIdentificationAlgorithm = ""
	cfg := mustClient(t, s, "broker1:9093")
	if !cfg.InsecureSkipVerify || cfg.VerifyConnection == nil {
		t.Error("empty ssl.endpoint.identification.algorithm: want Go's verification replaced by a chain check")
	}
}
