package tlsconf

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// storeVariant is one way to configure a keystore or a truststore.
type storeVariant struct {
	name  string
	apply func(*Settings)
}

// keystoreVariants writes the server's key and chain (leaf, CA) as every
// kind of keystore.
func keystoreVariants(t *testing.T, dir string) []storeVariant {
	p := getPKI(t)
	pemPath := writePEMKeystore(t, dir, "server.pem", p.serverKey, p.ca, p.server) // CA first: any order
	p12Path := writePKCS12Keystore(t, dir, "server.p12", "p12-pass", p.serverKey, p.server, p.ca)
	jksPath := writeJKSKeystore(t, dir, "server.jks", "store-pass", "key-pass",
		jksKey{alias: "broker", key: p.serverKey, chain: []*x509.Certificate{p.server, p.ca}})
	chain, key := string(pemCertsBytes(p.server, p.ca)), string(pkcs8PEM(t, p.serverKey))
	return []storeVariant{
		{"PEM file", func(s *Settings) { s.KeystoreType, s.KeystoreLocation = "PEM", pemPath }},
		{"PEM inline", func(s *Settings) {
			s.KeystoreType, s.KeystoreCertificateChain, s.KeystoreKey = "pem", chain, key
		}},
		{"PKCS12", func(s *Settings) {
			s.KeystoreType, s.KeystoreLocation, s.KeystorePassword = "PKCS12", p12Path, "p12-pass"
		}},
		{"JKS", func(s *Settings) {
			s.KeystoreType, s.KeystoreLocation, s.KeystorePassword, s.KeyPassword = "JKS", jksPath, "store-pass", "key-pass"
		}},
	}
}

// truststoreVariants writes the CA as every kind of truststore.
func truststoreVariants(t *testing.T, dir string) []storeVariant {
	p := getPKI(t)
	pemPath := writeFile(t, dir, "ca.pem", pemCertsBytes(p.ca))
	p12Path := writePKCS12Truststore(t, dir, "trust.p12", "trust-pass", p.ca)
	jksPath := writeJKSTruststore(t, dir, "trust.jks", "trust-pass", p.ca)
	return []storeVariant{
		{"PEM file", func(s *Settings) { s.TruststoreType, s.TruststoreLocation = "PEM", pemPath }},
		{"PEM inline", func(s *Settings) { s.TruststoreType, s.TruststoreCertificates = "PEM", string(pemCertsBytes(p.ca)) }},
		{"PKCS12", func(s *Settings) {
			s.TruststoreType, s.TruststoreLocation, s.TruststorePassword = "PKCS12", p12Path, "trust-pass"
		}},
		{"JKS", func(s *Settings) {
			s.TruststoreType, s.TruststoreLocation, s.TruststorePassword = "JKS", jksPath, "trust-pass"
		}},
		{"JKS without password", func(s *Settings) { s.TruststoreType, s.TruststoreLocation = "jks", jksPath }},
	}
}

func TestLoadKeystoreFormats(t *testing.T) {
	p := getPKI(t)
	for _, v := range keystoreVariants(t, t.TempDir()) {
		t.Run(v.name, func(t *testing.T) {
			s := Defaults()
			v.apply(&s)
			cert, err := s.LoadKeystore()
			if err != nil {
				t.Fatal(err)
			}
			if !cert.Leaf.Equal(p.server) {
				t.Errorf("leaf is %s, want the server's certificate", cert.Leaf.Subject)
			}
			if len(cert.Certificate) != 2 || !bytes.Equal(cert.Certificate[1], p.ca.Raw) {
				t.Errorf("chain has %d certificates, want leaf and CA", len(cert.Certificate))
			}
		})
	}
}

func TestLoadTruststoreFormats(t *testing.T) {
	p := getPKI(t)
	for _, v := range truststoreVariants(t, t.TempDir()) {
		t.Run(v.name, func(t *testing.T) {
			s := Defaults()
			v.apply(&s)
			certs, err := s.LoadTruststore()
			if err != nil {
				t.Fatal(err)
			}
			if len(certs) != 1 || !certs[0].Equal(p.ca) {
				t.Errorf("truststore holds %d certificates, want the CA", len(certs))
			}
		})
	}
}

func TestNoStoreConfigured(t *testing.T) {
	s := Defaults()
	if cert, err := s.LoadKeystore(); cert != nil || err != nil {
		t.Errorf("LoadKeystore = %v, %v; want nil, nil", cert, err)
	}
	if certs, err := s.LoadTruststore(); certs != nil || err != nil {
		t.Errorf("LoadTruststore = %v, %v; want nil, nil", certs, err)
	}
}

func TestPEMKeyFormats(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	sec1, err := x509.MarshalECPrivateKey(p.serverKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := x509.MarshalPKCS1PrivateKey(p.serverRSAKey)
	chain := pemCertsBytes(p.server, p.ca)
	oneLine := func(b []byte) string { return strings.ReplaceAll(string(b), "\n", " ") }
	tests := []struct {
		name  string
		apply func(*Settings)
		leaf  *x509.Certificate
	}{
		{"SEC1 EC PRIVATE KEY", func(s *Settings) {
			s.KeystoreLocation = writeFile(t, dir, "sec1.pem", append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), chain...))
		}, p.server},
		{"PKCS1 RSA PRIVATE KEY", func(s *Settings) {
			s.KeystoreLocation = writeFile(t, dir, "pkcs1.pem", append(pemCertsBytes(p.serverRSA, p.ca), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: pkcs1})...))
		}, p.serverRSA},
		{"key first, then leaf and CA", func(s *Settings) {
			s.KeystoreLocation = writeFile(t, dir, "keyfirst.pem", append(pkcs8PEM(t, p.serverKey), chain...))
		}, p.server},
		{"inline, one line as a continued properties value", func(s *Settings) {
			s.KeystoreCertificateChain, s.KeystoreKey = oneLine(chain), oneLine(pkcs8PEM(t, p.serverKey))
		}, p.server},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Defaults()
			s.KeystoreType = TypePEM
			tc.apply(&s)
			cert, err := s.LoadKeystore()
			if err != nil {
				t.Fatal(err)
			}
			if !cert.Leaf.Equal(tc.leaf) || len(cert.Certificate) != 2 {
				t.Errorf("got leaf %s and %d certificates, want %s and its CA", cert.Leaf.Subject, len(cert.Certificate), tc.leaf.Subject)
			}
		})
	}
}

func TestEncryptedPEMKeys(t *testing.T) {
	tests := []struct {
		file, password string
		wantErr        string // empty: loads
	}{
		{"encrypted-pkcs8-aes256.pem", "keel-key-pass", ""},
		{"encrypted-pkcs8-des3-sha1.pem", "keel-key-pass", ""},
		{"encrypted-pkcs8-aes256.pem", "wrong", "wrong ssl.key.password"},
		{"encrypted-pkcs8-aes256.pem", "", "ssl.key.password is not set"},
		{"encrypted-pkcs8-pbes1.pem", "keel-key-pass", "unencrypted PKCS#8 key or a PKCS12 keystore"},
		{"encrypted-legacy-ec.pem", "keel-key-pass", "convert it to PKCS#8"},
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.password, func(t *testing.T) {
			s := Defaults()
			s.KeystoreType, s.KeystoreLocation, s.KeyPassword = TypePEM, filepath.Join("testdata", tc.file), tc.password
			cert, err := s.LoadKeystore()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cert.Leaf.Subject.CommonName != "encrypted-key-test" {
					t.Errorf("leaf %s", cert.Leaf.Subject)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "ssl.keystore.location") {
				t.Fatalf("err = %v, want one naming ssl.keystore.location and saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestEncryptedInlinePEMKey reads an encrypted ssl.keystore.key, as
// KIP-651 allows with ssl.key.password.
func TestEncryptedInlinePEMKey(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "encrypted-pkcs8-aes256.pem"))
	if err != nil {
		t.Fatal(err)
	}
	s := Defaults()
	s.KeystoreType, s.KeystoreKey, s.KeystoreCertificateChain, s.KeyPassword = TypePEM, string(text), string(text), "keel-key-pass"
	if _, err := s.LoadKeystore(); err != nil {
		t.Fatal(err)
	}
	s.KeyPassword = "wrong"
	if _, err := s.LoadKeystore(); err == nil || !strings.Contains(err.Error(), "ssl.keystore.key: ") {
		t.Fatalf("err = %v, want one naming ssl.keystore.key", err)
	}
}

func TestJKSFirstKeyAliasAndCompat(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	path := writeJKSKeystore(t, dir, "two.jks", "store-pass", "store-pass",
		jksKey{alias: "zeta", key: p.clientKey, chain: []*x509.Certificate{p.client, p.ca}},
		jksKey{alias: "alpha", key: p.serverKey, chain: []*x509.Certificate{p.server, p.ca}})
	s := Defaults()
	s.KeystoreLocation, s.KeystorePassword = path, "store-pass" // ssl.key.password unset: the store's
	cert, err := s.LoadKeystore()
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Leaf.Equal(p.server) {
		t.Errorf("leaf %s, want that of alias alpha (the first in sorted order)", cert.Leaf.Subject)
	}

	// A PKCS12 file configured as JKS (or the reverse) is read by its
	// format, as Java does.
	p12 := writePKCS12Keystore(t, dir, "server.p12", "pw", p.serverKey, p.server, p.ca)
	s = Defaults()
	s.KeystoreType, s.KeystoreLocation, s.KeystorePassword = "JKS", p12, "pw"
	if _, err := s.LoadKeystore(); err != nil {
		t.Errorf("PKCS12 file as ssl.keystore.type=JKS: %v", err)
	}
	s.KeystoreType, s.KeystoreLocation, s.KeystorePassword = "PKCS12", path, "store-pass"
	if _, err := s.LoadKeystore(); err != nil {
		t.Errorf("JKS file as ssl.keystore.type=PKCS12: %v", err)
	}

	// A keystore used as a truststore trusts its key entries' certificates
	// (JKS) or all its certificates (PKCS12).
	s = Defaults()
	s.TruststoreLocation, s.TruststorePassword = path, "store-pass"
	certs, err := s.LoadTruststore()
	if err != nil || len(certs) != 2 {
		t.Errorf("JKS keystore as truststore: %d certificates, %v; want the 2 leaves", len(certs), err)
	}
	s.TruststoreType, s.TruststoreLocation, s.TruststorePassword = "PKCS12", p12, "pw"
	certs, err = s.LoadTruststore()
	if err != nil || len(certs) != 2 {
		t.Errorf("PKCS12 keystore as truststore: %d certificates, %v; want leaf and CA", len(certs), err)
	}
}

func TestStoreErrors(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	jks := writeJKSKeystore(t, dir, "server.jks", "store-pass", "key-pass",
		jksKey{alias: "broker", key: p.serverKey, chain: []*x509.Certificate{p.server, p.ca}})
	mismatchedJKS := writeJKSKeystore(t, dir, "mismatch.jks", "store-pass", "store-pass",
		jksKey{alias: "broker", key: p.clientKey, chain: []*x509.Certificate{p.server, p.ca}})
	p12 := writePKCS12Keystore(t, dir, "server.p12", "p12-pass", p.serverKey, p.server, p.ca)
	trustJKS := writeJKSTruststore(t, dir, "trust.jks", "trust-pass", p.ca)
	trustP12 := writePKCS12Truststore(t, dir, "trust.p12", "trust-pass", p.ca)
	mismatchedPEM := writePEMKeystore(t, dir, "mismatch.pem", p.clientKey, p.server, p.ca)
	caPEM := writeFile(t, dir, "ca.pem", pemCertsBytes(p.ca))
	jceks := writeFile(t, dir, "store.jceks", []byte{0xCE, 0xCE, 0xCE, 0xCE, 0, 0, 0, 2})
	garbage := writeFile(t, dir, "garbage", []byte("this is not a keystore at all"))
	empty := writeFile(t, dir, "empty", nil)
	missing := filepath.Join(dir, "missing.jks")

	keystore := func(typ, path, password, keyPassword string) Settings {
		s := Defaults()
		s.KeystoreType, s.KeystoreLocation, s.KeystorePassword, s.KeyPassword = typ, path, password, keyPassword
		return s
	}
	truststore := func(typ, path, password string) Settings {
		s := Defaults()
		s.TruststoreType, s.TruststoreLocation, s.TruststorePassword = typ, path, password
		return s
	}
	tests := []struct {
		name  string
		s     Settings
		trust bool
		want  []string // substrings of the error
	}{
		{"missing keystore file", keystore("JKS", missing, "pw", ""), false, []string{"ssl.keystore.location", missing, "no such file"}},
		{"missing truststore file", truststore("JKS", missing, ""), true, []string{"ssl.truststore.location", missing}},
		{"wrong JKS store password", keystore("JKS", jks, "nope", "key-pass"), false, []string{jks, "wrong ssl.keystore.password"}},
		{"wrong JKS key password", keystore("JKS", jks, "store-pass", "nope"), false, []string{jks, "wrong ssl.key.password"}},
		{"JKS key password unset, differs from the store's", keystore("JKS", jks, "store-pass", ""), false, []string{"wrong ssl.key.password"}},
		{"wrong PKCS12 password", keystore("PKCS12", p12, "nope", ""), false, []string{p12, "wrong ssl.keystore.password"}},
		{"wrong JKS truststore password", truststore("JKS", trustJKS, "nope"), true, []string{trustJKS, "wrong ssl.truststore.password"}},
		{"wrong PKCS12 truststore password", truststore("PKCS12", trustP12, "nope"), true, []string{trustP12, "wrong ssl.truststore.password"}},
		{"PKCS12 truststore without its password", truststore("PKCS12", trustP12, ""), true, []string{"set ssl.truststore.password"}},
		{"JKS keystore without a private key", keystore("JKS", trustJKS, "trust-pass", ""), false, []string{"no private key entry"}},
		{"PKCS12 keystore without a private key", keystore("PKCS12", trustP12, "trust-pass", ""), false, []string{"no private key"}},
		{"PEM keystore without a private key", keystore("PEM", caPEM, "", ""), false, []string{caPEM, "no PEM PRIVATE KEY"}},
		{"JKS certificate not matching its key", keystore("JKS", mismatchedJKS, "store-pass", ""), false, []string{"does not match the private key"}},
		{"PEM certificate not matching its key", keystore("PEM", mismatchedPEM, "", ""), false, []string{"no certificate matches the private key"}},
		{"PEM type, JKS file", keystore("PEM", jks, "", ""), false, []string{"binary (JKS) keystore"}},
		{"JKS type, PEM file", keystore("JKS", caPEM, "pw", ""), false, []string{"set ssl.keystore.type=PEM"}},
		{"JCEKS", keystore("JKS", jceks, "pw", ""), false, []string{"JCEKS"}},
		{"garbage", keystore("PKCS12", garbage, "pw", ""), false, []string{garbage, "neither JKS nor PKCS12"}},
		{"empty file", truststore("PKCS12", empty, ""), true, []string{empty, "empty"}},
		{"unknown type", keystore("BCFKS", jks, "pw", ""), false, []string{"ssl.keystore.type=BCFKS"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.trust {
				_, err = tc.s.LoadTruststore()
			} else {
				_, err = tc.s.LoadKeystore()
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	_, err := keystore("JKS", missing, "pw", "").LoadKeystore()
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v does not wrap fs.ErrNotExist", err)
	}
}

// TestCorruptStoresDoNotPanic feeds truncated and bit-flipped keystores
// and truststores of every format to the decoders.
func TestCorruptStoresDoNotPanic(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	files := map[string]string{
		"jks": writeJKSKeystore(t, dir, "k.jks", "pw", "pw",
			jksKey{alias: "a", key: p.serverKey, chain: []*x509.Certificate{p.server, p.ca}}),
		"p12":      writePKCS12Keystore(t, dir, "k.p12", "pw", p.serverKey, p.server, p.ca),
		"pem":      writePEMKeystore(t, dir, "k.pem", p.serverKey, p.server, p.ca),
		"trustjks": writeJKSTruststore(t, dir, "t.jks", "pw", p.ca),
		"trustp12": writePKCS12Truststore(t, dir, "t.p12", "pw", p.ca),
	}
	s := Defaults()
	s.KeystorePassword, s.TruststorePassword = "pw", "pw"
	for name, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		typ := TypeJKS
		if name == "pem" {
			typ = TypePEM
		}
		var variants [][]byte
		for n := 0; n < len(data); n += 1 + len(data)/64 {
			variants = append(variants, data[:n])
		}
		for i := 0; i < len(data); i += 1 + len(data)/64 {
			flipped := bytes.Clone(data)
			flipped[i] ^= 0xFF
			variants = append(variants, flipped)
		}
		for _, v := range variants {
			_, _ = s.decodeKeystore(typ, v)
			_, _ = s.decodeTruststore(typ, v)
		}
	}
}

// FuzzDecodeStore checks that no keystore or truststore content, of any
// type, panics the decoders.
func FuzzDecodeStore(f *testing.F) {
	p := getPKI(f)
	dir := f.TempDir()
	for _, path := range []string{
		writeJKSKeystore(f, dir, "k.jks", "pw", "pw", jksKey{alias: "a", key: p.serverKey, chain: []*x509.Certificate{p.server, p.ca}}),
		writeJKSTruststore(f, dir, "t.jks", "pw", p.ca),
		writePEMKeystore(f, dir, "k.pem", p.serverKey, p.server, p.ca),
		writePKCS12Keystore(f, dir, "k.p12", "pw", p.serverKey, p.server, p.ca),
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	s := Defaults()
	s.KeystorePassword, s.TruststorePassword, s.KeyPassword = "pw", "pw", "pw"
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range []string{TypeJKS, TypePEM} {
			_, _ = s.decodeKeystore(typ, data)
			_, _ = s.decodeTruststore(typ, data)
		}
	})
}
