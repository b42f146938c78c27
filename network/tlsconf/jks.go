package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
)

// jksKeystore reads the private key entry of a JKS keystore (the first
// alias in sorted order if there are several) and its certificate chain.
// storePassword checks the file's integrity, keyPassword decrypts the key.
func jksKeystore(data []byte, storePassword, keyPassword string) (*tls.Certificate, error) {
	ks, err := loadJKS(data, storePassword, keystorePasswordKey, true)
	if err != nil {
		return nil, err
	}
	for _, alias := range ks.Aliases() {
		if !ks.IsPrivateKeyEntry(alias) {
			continue
		}
		pw, err := jksPassword(keyPassword)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyPasswordKey, err)
		}
		entry, err := ks.GetPrivateKeyEntry(alias, pw)
		if err != nil {
			return nil, fmt.Errorf("key entry %q: wrong %s (%s when that is not set): %w",
				alias, keyPasswordKey, keystorePasswordKey, err)
		}
		key, err := x509.ParsePKCS8PrivateKey(entry.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("key entry %q: unsupported private key (Go's TLS takes RSA, EC and Ed25519 keys): %w", alias, err)
		}
		var chain []*x509.Certificate
		for i, c := range entry.CertificateChain {
			cert, err := x509.ParseCertificate(c.Content)
			if err != nil {
				return nil, fmt.Errorf("key entry %q: certificate %d: %w", alias, i, err)
			}
			chain = append(chain, cert)
		}
		cert, err := certificate(key, chain, false)
		if err != nil {
			return nil, fmt.Errorf("key entry %q: %w", alias, err)
		}
		return cert, nil
	}
	return nil, errors.New("the keystore has no private key entry (is it a truststore?)")
}

// jksTruststore reads the certificates a JKS truststore trusts: its
// trusted certificate entries and, as Java's trust manager does, the
// certificate of each key entry. Without a password the file's integrity
// is not checked, as in Java.
func jksTruststore(data []byte, password string) ([]*x509.Certificate, error) {
	ks, err := loadJKS(data, password, truststorePasswordKey, password != "")
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, alias := range ks.Aliases() {
		var raw []byte
		switch {
		case ks.IsTrustedCertificateEntry(alias):
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				return nil, fmt.Errorf("entry %q: %w", alias, err)
			}
			raw = e.Certificate.Content
		case ks.IsPrivateKeyEntry(alias):
			chain, err := ks.GetPrivateKeyEntryCertificateChain(alias)
			if err != nil || len(chain) == 0 {
				continue
			}
			raw = chain[0].Content
		default:
			continue
		}
		cert, err := x509.ParseCertificate(raw)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", alias, err)
		}
		certs = append(certs, cert)
	}
	return certs, nil
}

// loadJKS checks the structure of a JKS file, then loads it. With
// checkIntegrity a digest that does not match password is an error naming
// passwordKey; without, it is ignored (Java skips the check when no
// password is given).
func loadJKS(data []byte, password, passwordKey string, checkIntegrity bool) (keystore.KeyStore, error) {
	if err := scanJKS(data); err != nil {
		return keystore.KeyStore{}, fmt.Errorf("corrupt JKS keystore: %w", err)
	}
	pw, err := jksPassword(password)
	if err != nil {
		return keystore.KeyStore{}, fmt.Errorf("%s: %w", passwordKey, err)
	}
	ks := keystore.New(keystore.WithOrderedAliases(), keystore.WithCaseExactAliases())
	// scanJKS has checked everything Load reads but the final digest, so
	// an error is a wrong password.
	if err := ks.Load(bytes.NewReader(data), pw); err != nil && checkIntegrity {
		return keystore.KeyStore{}, fmt.Errorf("wrong %s (the keystore's integrity check failed)", passwordKey)
	}
	return ks, nil
}

// jksPassword encodes a password the way JKS digests it: each UTF-16 code
// unit as two bytes, which keystore-go builds from single bytes, so only
// characters up to U+00FF can be passed.
func jksPassword(password string) ([]byte, error) {
	out := make([]byte, 0, len(password))
	for _, r := range password {
		if r > 0xFF || r == utf8.RuneError {
			return nil, errors.New("a JKS password with characters beyond U+00FF is not supported: use a PKCS12 keystore")
		}
		out = append(out, byte(r))
	}
	return out, nil
}

// scanJKS walks the structure of a JKS file, checking every length
// against the bytes left, so that the decoder (which allocates what the
// file says) never sees a corrupt one.
func scanJKS(data []byte) error {
	r := jksReader{b: data}
	if r.u32() != jksMagic {
		return errors.New("bad magic number")
	}
	version := r.u32()
	if version != 1 && version != 2 {
		return fmt.Errorf("unknown version %d", version)
	}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		tag := r.u32()
		r.bytes(int(r.u16())) // alias
		r.bytes(8)            // creation time
		switch tag {
		case 1: // private key entry
			if err := checkProtectedKey(r.bytes(int(r.u32()))); err != nil && r.err == nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			certs := r.u32()
			if uint64(certs)*4 > uint64(len(r.b)) {
				r.fail()
			}
			for j := uint32(0); j < certs && r.err == nil; j++ {
				r.cert(version)
			}
		case 2: // trusted certificate entry
			r.cert(version)
		default:
			if r.err == nil {
				return fmt.Errorf("entry %d: unknown tag %d", i, tag)
			}
		}
	}
	r.bytes(20) // SHA-1 digest
	return r.err
}

// checkProtectedKey checks that a JKS key entry's protected key is long
// enough for its salt and digest.
func checkProtectedKey(b []byte) error {
	var info struct {
		Algo       pkix.AlgorithmIdentifier
		PrivateKey []byte
	}
	if _, err := asn1.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("protected key: %w", err)
	}
	if len(info.PrivateKey) < 40 {
		return errors.New("protected key too short")
	}
	return nil
}

// jksReader reads big-endian fields, remembering the first overrun.
type jksReader struct {
	b   []byte
	err error
}

func (r *jksReader) fail() {
	if r.err == nil {
		r.err = errors.New("truncated file")
	}
	r.b = nil
}

func (r *jksReader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *jksReader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *jksReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// cert skips a certificate: its type (version 2) and its encoding.
func (r *jksReader) cert(version uint32) {
	if version == 2 {
		r.bytes(int(r.u16()))
	}
	r.bytes(int(r.u32()))
}
