package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
)

// ServerConfig is the TLS configuration of a broker's SSL listener: its
// certificate from the keystore (which an SSL listener must have), the CAs
// of client certificates from the truststore (the system's roots when no
// truststore is set, as the JVM falls back to its cacerts), ssl.client.auth
// (none, requested: verified if given, required), the protocol versions of
// ssl.enabled.protocols and the cipher suites of ssl.cipher.suites.
func (s Settings) ServerConfig() (*tls.Config, error) {
	st, err := s.LoadStores()
	if err != nil {
		return nil, err
	}
	return s.ServerConfigWith(st)
}

// ServerConfigWith is ServerConfig from stores LoadStores has read, so
// that a caller keeping them reads each file once.
func (s Settings) ServerConfigWith(st Stores) (*tls.Config, error) {
	cfg, err := s.baseConfig(false)
	if err != nil {
		return nil, err
	}
	if st.Certificate == nil {
		return nil, fmt.Errorf("%s is not set: an SSL listener needs a keystore "+
			"(%s, or %s=PEM with %s and %s)", keystoreLocationKey, keystoreLocationKey,
			keystoreTypeKey, keystoreCertificateChainKey, keystoreKeyKey)
	}
	cfg.Certificates = []tls.Certificate{*st.Certificate}
	if cfg.ClientAuth, err = s.clientAuth(); err != nil {
		return nil, err
	}
	if st.Trusted != nil {
		cfg.ClientCAs = certPool(st.Trusted)
	}
	return cfg, nil
}

// ClientConfig is the TLS configuration of a client of an SSL listener:
// the brokers' CAs from the truststore (the system's roots when none is
// set), the keystore's certificate if one is configured (for a listener
// with ssl.client.auth), and the versions and cipher suites of
// ssl.enabled.protocols, ssl.protocol and ssl.cipher.suites.
//
// serverName is the broker dialled, a host or host:port (its port is
// dropped). With ssl.endpoint.identification.algorithm=https it is the
// name the broker's certificate must hold; empty leaves ServerName for the
// dialler to set per broker. With the algorithm empty the broker's
// certificate chain is still verified against the truststore, but not its
// host name.
func (s Settings) ClientConfig(serverName string) (*tls.Config, error) {
	st, err := s.LoadStores()
	if err != nil {
		return nil, err
	}
	return s.ClientConfigWith(st, serverName)
}

// ClientConfigWith is ClientConfig from stores LoadStores has read.
func (s Settings) ClientConfigWith(st Stores, serverName string) (*tls.Config, error) {
	cfg, err := s.baseConfig(true)
	if err != nil {
		return nil, err
	}
	if st.Certificate != nil {
		cfg.Certificates = []tls.Certificate{*st.Certificate}
	}
	if st.Trusted != nil {
		cfg.RootCAs = certPool(st.Trusted)
	}
	cfg.ServerName = hostOf(serverName)
	verifyHost, err := s.endpointIdentification()
	if err != nil {
		return nil, err
	}
	if !verifyHost {
		// Go verifies the chain and the host name together, or neither:
		// skip its verification and verify the chain here, as Java's
		// trust manager does without an endpoint identification algorithm.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = verifyChain(cfg.RootCAs)
	}
	return cfg, nil
}

// verifyChain verifies a broker's certificate chain against roots (the
// system's when nil) for server authentication, without checking its host
// name.
func verifyChain(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tlsconf: the broker sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots:         roots,
			Intermediates: inter,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return fmt.Errorf("tlsconf: broker certificate not trusted (%s is empty: its host name is not checked, its chain is): %w",
				endpointIdentificationAlgorithmKey, err)
		}
		return nil
	}
}

// hostOf drops the port of host:port ([::1]:9093 included).
func hostOf(serverName string) string {
	if host, _, err := net.SplitHostPort(serverName); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(serverName, "["), "]")
}

// certPool is a pool of certs.
func certPool(certs []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}

// baseConfig holds what servers and clients share: versions and cipher
// suites.
func (s Settings) baseConfig(client bool) (*tls.Config, error) {
	minV, maxV, err := s.versions(client)
	if err != nil {
		return nil, err
	}
	suites, _, err := resolveCipherSuites(s.CipherSuites)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: minV, MaxVersion: maxV, CipherSuites: suites}, nil
}

// protocolVersions are the versions of ssl.enabled.protocols and
// ssl.protocol, by upper-cased JSSE name.
var protocolVersions = map[string]uint16{
	"TLSV1":   tls.VersionTLS10,
	"TLSV1.1": tls.VersionTLS11,
	"TLSV1.2": tls.VersionTLS12,
	"TLSV1.3": tls.VersionTLS13,
}

// versions is the range of TLS versions the settings allow: that of
// ssl.enabled.protocols, capped for clients by ssl.protocol, narrowed as
// JSSE narrows it by the cipher suites enabled (no TLS 1.3 suite: no TLS
// 1.3; only TLS 1.3 suites: only TLS 1.3).
func (s Settings) versions(client bool) (minV, maxV uint16, err error) {
	protocols := s.EnabledProtocols
	if len(protocols) == 0 {
		protocols = Defaults().EnabledProtocols
	}
	for _, p := range protocols {
		v, ok := protocolVersions[strings.ToUpper(p)]
		if !ok {
			return 0, 0, fmt.Errorf("%s: unsupported protocol %q: want TLSv1.2, TLSv1.3 (or the obsolete TLSv1, TLSv1.1)", enabledProtocolsKey, p)
		}
		if minV == 0 || v < minV {
			minV = v
		}
		maxV = max(maxV, v)
	}
	switch p := strings.ToUpper(s.Protocol); p {
	case "", "TLS", "SSL", "TLSV1.3":
	default:
		v, ok := protocolVersions[p]
		if !ok {
			return 0, 0, fmt.Errorf("%s=%s: want TLSv1.3, TLSv1.2 or TLS", protocolKey, s.Protocol)
		}
		if client && v < maxV {
			maxV = v
			if maxV < minV {
				return 0, 0, fmt.Errorf("%s=%s allows no version of %s=%s", protocolKey, s.Protocol,
					enabledProtocolsKey, strings.Join(protocols, ","))
			}
		}
	}
	suites, tls13, err := resolveCipherSuites(s.CipherSuites)
	if err != nil {
		return 0, 0, err
	}
	if len(s.CipherSuites) > 0 {
		if !tls13 && maxV == tls.VersionTLS13 {
			if minV == tls.VersionTLS13 {
				return 0, 0, fmt.Errorf("%s lists no TLS 1.3 suite (TLS_AES_128_GCM_SHA256, ...) but %s allows only TLSv1.3",
					cipherSuitesKey, enabledProtocolsKey)
			}
			maxV = tls.VersionTLS12
		}
		if len(suites) == 0 {
			if maxV < tls.VersionTLS13 {
				return 0, 0, fmt.Errorf("%s lists no cipher suite usable with %s=%s", cipherSuitesKey,
					enabledProtocolsKey, strings.Join(protocols, ","))
			}
			minV = tls.VersionTLS13
		}
	}
	return minV, maxV, nil
}

// tls13Suites are the TLS 1.3 cipher suites, which Go does not let one
// configure (it enables those it implements).
var tls13Suites = map[string]bool{
	"TLS_AES_128_GCM_SHA256":       true,
	"TLS_AES_256_GCM_SHA384":       true,
	"TLS_CHACHA20_POLY1305_SHA256": true,
	"TLS_AES_128_CCM_SHA256":       true,
	"TLS_AES_128_CCM_8_SHA256":     true,
}

// signalingSuites are the pseudo cipher suites JSSE lists among its
// suites; they select nothing.
var signalingSuites = map[string]bool{
	"TLS_EMPTY_RENEGOTIATION_INFO_SCSV": true,
	"TLS_FALLBACK_SCSV":                 true,
}

// resolveCipherSuites maps ssl.cipher.suites names onto Go's TLS 1.0–1.2
// cipher suite IDs, and reports whether a TLS 1.3 suite is listed. The
// JSSE aliases SSL_* of TLS_* suites are accepted. Nil for an empty list.
func resolveCipherSuites(names []string) (ids []uint16, tls13 bool, err error) {
	if len(names) == 0 {
		return nil, false, nil
	}
	known := map[string]*tls.CipherSuite{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[cs.Name] = cs
	}
	for _, name := range names {
		n := strings.ToUpper(name)
		if rest, ok := strings.CutPrefix(n, "SSL_"); ok {
			n = "TLS_" + rest
		}
		switch {
		case tls13Suites[n]:
			tls13 = true
			continue
		case signalingSuites[n]:
			continue
		}
		cs, ok := known[n]
		if !ok {
			return nil, false, fmt.Errorf("%s: unknown cipher suite %q", cipherSuitesKey, name)
		}
		if onlyTLS13(cs) {
			tls13 = true
			continue
		}
		ids = append(ids, cs.ID)
	}
	return ids, tls13, nil
}

// onlyTLS13 reports whether cs is a TLS 1.3 suite.
func onlyTLS13(cs *tls.CipherSuite) bool {
	return len(cs.SupportedVersions) == 1 && cs.SupportedVersions[0] == tls.VersionTLS13
}
