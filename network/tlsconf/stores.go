package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// maxStoreFileSize bounds a keystore or truststore file: the JVM's own
// cacerts is a few hundred KiB.
const maxStoreFileSize = 32 << 20

// LoadKeystore reads the keystore: the private key entry and its
// certificate chain, leaf first. With several key entries in a JKS
// keystore, the first alias in sorted order is used. It returns nil and no
// error when no keystore is configured. Errors name the setting and the
// file.
func (s Settings) LoadKeystore() (*tls.Certificate, error) {
	if err := s.checkKeystore(); err != nil {
		return nil, err
	}
	typ, _ := storeType(keystoreTypeKey, s.KeystoreType)
	if s.KeystoreKey != "" {
		return inlinePEMKeystore(s.KeystoreCertificateChain, s.KeystoreKey, s.KeyPassword)
	}
	if s.KeystoreLocation == "" {
		return nil, nil
	}
	var cert *tls.Certificate
	data, err := readStoreFile(s.KeystoreLocation)
	if err == nil {
		cert, err = s.decodeKeystore(typ, data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", keystoreLocationKey, s.KeystoreLocation, err)
	}
	return cert, nil
}

// LoadTruststore reads the truststore's certificates: every trusted
// certificate entry of a JKS or PKCS12 truststore (and, as Java's trust
// manager does, the certificate of any key entry in it), or every
// CERTIFICATE of a PEM one. It returns nil and no error when no truststore
// is configured. Errors name the setting and the file.
func (s Settings) LoadTruststore() ([]*x509.Certificate, error) {
	if err := s.checkTruststore(); err != nil {
		return nil, err
	}
	typ, _ := storeType(truststoreTypeKey, s.TruststoreType)
	if s.TruststoreCertificates != "" {
		certs, err := pemCertificates([]byte(s.TruststoreCertificates))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", truststoreCertificatesKey, err)
		}
		return certs, nil
	}
	if s.TruststoreLocation == "" {
		return nil, nil
	}
	var certs []*x509.Certificate
	data, err := readStoreFile(s.TruststoreLocation)
	if err == nil {
		certs, err = s.decodeTruststore(typ, data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", truststoreLocationKey, s.TruststoreLocation, err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s %s: the truststore holds no certificate", truststoreLocationKey, s.TruststoreLocation)
	}
	return certs, nil
}

// decodeKeystore reads a keystore file's contents, of type typ.
func (s Settings) decodeKeystore(typ string, data []byte) (*tls.Certificate, error) {
	format, err := sniffFormat(typ, data, keystoreTypeKey)
	if err != nil {
		return nil, err
	}
	var cert *tls.Certificate
	err = guard(func() (err error) {
		switch format {
		case TypeJKS:
			keyPassword := s.KeyPassword
			if keyPassword == "" {
				keyPassword = s.KeystorePassword
			}
			cert, err = jksKeystore(data, s.KeystorePassword, keyPassword)
		case TypePKCS12:
			cert, err = pkcs12Keystore(data, s.KeystorePassword)
		default:
			cert, err = pemKeystore(data, s.KeyPassword)
		}
		return err
	})
	return cert, err
}

// decodeTruststore reads a truststore file's contents, of type typ.
func (s Settings) decodeTruststore(typ string, data []byte) ([]*x509.Certificate, error) {
	format, err := sniffFormat(typ, data, truststoreTypeKey)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	err = guard(func() (err error) {
		switch format {
		case TypeJKS:
			certs, err = jksTruststore(data, s.TruststorePassword)
		case TypePKCS12:
			certs, err = pkcs12Truststore(data, s.TruststorePassword)
		default:
			certs, err = pemCertificates(data)
		}
		return err
	})
	return certs, err
}

// readStoreFile reads a keystore or truststore file, refusing one too
// large to be one.
func readStoreFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStoreFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxStoreFileSize {
		return nil, fmt.Errorf("larger than %d MiB: not a keystore", maxStoreFileSize>>20)
	}
	if len(data) == 0 {
		return nil, errors.New("the file is empty")
	}
	return data, nil
}

// Magic numbers of Java's binary keystores.
const (
	jksMagic   = 0xFEEDFEED
	jceksMagic = 0xCECECECE
)

// sniffFormat is the format a store file is read as. A JKS or PKCS12 type
// reads either (Java's keystore.type.compat does the same); a PEM file
// must be configured as PEM, and a binary keystore must not be.
func sniffFormat(typ string, data []byte, typeKey string) (string, error) {
	var magic uint32
	if len(data) >= 4 {
		magic = binary.BigEndian.Uint32(data)
	}
	binaryKind := ""
	switch {
	case magic == jksMagic:
		binaryKind = TypeJKS
	case magic == jceksMagic:
		return "", fmt.Errorf("a JCEKS keystore is not supported: convert it with keytool -importkeystore -deststoretype PKCS12")
	case len(data) > 0 && data[0] == 0x30: // an ASN.1 SEQUENCE: PKCS#12's PFX
		binaryKind = TypePKCS12
	}
	if typ == TypePEM {
		if binaryKind != "" {
			return "", fmt.Errorf("%s is PEM but the file is a binary (%s) keystore: set %s=%s", typeKey, binaryKind, typeKey, binaryKind)
		}
		return TypePEM, nil
	}
	if binaryKind == "" {
		if bytes.Contains(data, []byte("-----BEGIN")) {
			return "", fmt.Errorf("the file is PEM text: set %s=PEM", typeKey)
		}
		return "", fmt.Errorf("not a %s keystore (neither JKS nor PKCS12): corrupt file?", typ)
	}
	return binaryKind, nil
}

// guard turns a panic of a third-party decoder on a corrupt file into an
// error.
func guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt keystore (the decoder failed: %v)", r)
		}
	}()
	return f()
}

// pkcs12Keystore reads a PKCS12 keystore's private key and its chain.
func pkcs12Keystore(data []byte, password string) (*tls.Certificate, error) {
	key, leaf, cas, err := pkcs12.DecodeChain(data, password)
	if err != nil {
		switch {
		case errors.Is(err, pkcs12.ErrIncorrectPassword), errors.Is(err, pkcs12.ErrDecryption):
			return nil, fmt.Errorf("wrong %s (or a corrupt keystore): %w", keystorePasswordKey, err)
		case strings.Contains(err.Error(), "private key missing"):
			return nil, errors.New("the keystore has no private key entry (is it a truststore?)")
		case strings.Contains(err.Error(), "expected exactly one key bag"):
			return nil, errors.New("the PKCS12 keystore holds more than one private key: Keel reads one key entry; " +
				"copy the one to use into a keystore of its own with keytool -importkeystore -srcalias ALIAS")
		}
		return nil, fmt.Errorf("not a readable PKCS12 keystore: %w", err)
	}
	return certificate(key, append([]*x509.Certificate{leaf}, cas...), true)
}

// pkcs12Truststore reads the certificates of a PKCS12 truststore: those
// marked as trusted by Java (keytool -importcert), or, for a PKCS12 file
// that is not a pure truststore (a keystore used as a truststore), all of
// its certificates.
func pkcs12Truststore(data []byte, password string) ([]*x509.Certificate, error) {
	certs, err := pkcs12.DecodeTrustStore(data, password)
	if err == nil {
		return certs, nil
	}
	if errors.Is(err, pkcs12.ErrIncorrectPassword) || errors.Is(err, pkcs12.ErrDecryption) {
		if password == "" {
			return nil, fmt.Errorf("the PKCS12 truststore is password-protected: set %s", truststorePasswordKey)
		}
		return nil, fmt.Errorf("wrong %s (or a corrupt truststore): %w", truststorePasswordKey, err)
	}
	_, leaf, cas, err2 := pkcs12.DecodeChain(data, password)
	if err2 == nil {
		return append([]*x509.Certificate{leaf}, cas...), nil
	}
	return nil, fmt.Errorf("not a readable PKCS12 truststore: %w", err)
}

// certificate pairs key with its chain, leaf first. With reorder the
// chain is built from certs in any order: the certificate of key's public
// key, then its issuer's, and so on as far as certs go (the others are
// left out). Without, certs is the chain as given, whose first
// certificate must be key's.
func certificate(key crypto.PrivateKey, certs []*x509.Certificate, reorder bool) (*tls.Certificate, error) {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	if len(certs) == 0 {
		return nil, errors.New("the private key has no certificate")
	}
	chain := certs
	if reorder {
		chain = orderChain(signer.Public(), certs)
		if chain == nil {
			return nil, fmt.Errorf("no certificate matches the private key (first certificate: %s)", certs[0].Subject)
		}
	} else if !publicKeyEqual(certs[0].PublicKey, signer.Public()) {
		return nil, fmt.Errorf("the certificate %s does not match the private key", certs[0].Subject)
	}
	out := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out, nil
}

// orderChain is the chain of the certificate of pub found in certs, leaf
// first; nil if none has pub.
func orderChain(pub crypto.PublicKey, certs []*x509.Certificate) []*x509.Certificate {
	leaf := -1
	for i, c := range certs {
		if publicKeyEqual(c.PublicKey, pub) {
			leaf = i
			break
		}
	}
	if leaf < 0 {
		return nil
	}
	used := make([]bool, len(certs))
	used[leaf] = true
	chain := []*x509.Certificate{certs[leaf]}
	for cur := certs[leaf]; !bytes.Equal(cur.RawIssuer, cur.RawSubject); {
		next := -1
		for i, c := range certs {
			if !used[i] && bytes.Equal(c.RawSubject, cur.RawIssuer) {
				next = i
				break
			}
		}
		if next < 0 {
			break
		}
		used[next] = true
		cur = certs[next]
		chain = append(chain, cur)
	}
	return chain
}

// publicKeyEqual reports whether a certificate's public key is pub.
func publicKeyEqual(certKey, pub crypto.PublicKey) bool {
	k, ok := certKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(pub)
}
