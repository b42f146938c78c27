package tlsconf

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// pemBlock is one -----BEGIN type----- ... -----END type----- block.
type pemBlock struct {
	Type string
	// LegacyEncrypted marks an OpenSSL "traditional" encrypted key
	// (Proc-Type: 4,ENCRYPTED headers).
	LegacyEncrypted bool
	Bytes           []byte
}

// parsePEM finds the PEM blocks in text as leniently as Kafka's PemParser
// does: text around the blocks is ignored, and a block need not be split
// into lines (a value continued over lines with a backslash in a
// properties file arrives as one line, its base64 separated by spaces).
func parsePEM(text string) ([]pemBlock, error) {
	const begin, end, dashes = "-----BEGIN ", "-----END ", "-----"
	var blocks []pemBlock
	for {
		i := strings.Index(text, begin)
		if i < 0 {
			return blocks, nil
		}
		text = text[i+len(begin):]
		j := strings.Index(text, dashes)
		if j < 0 {
			return nil, errors.New("PEM: unterminated BEGIN line")
		}
		typ := strings.Join(strings.Fields(text[:j]), " ")
		text = text[j+len(dashes):]
		k := strings.Index(text, end)
		if k < 0 {
			return nil, fmt.Errorf("PEM: no END line for BEGIN %s", typ)
		}
		body := text[:k]
		text = text[k+len(end):]
		l := strings.Index(text, dashes)
		if l < 0 || strings.Join(strings.Fields(text[:l]), " ") != typ {
			return nil, fmt.Errorf("PEM: BEGIN %s does not end with END %s", typ, typ)
		}
		text = text[l+len(dashes):]

		b := pemBlock{Type: typ}
		var b64 strings.Builder
		for line := range strings.SplitSeq(body, "\n") {
			if strings.Contains(line, ":") { // an RFC 1421 header
				if strings.Contains(line, "Proc-Type") && strings.Contains(line, "ENCRYPTED") {
					b.LegacyEncrypted = true
				}
				continue
			}
			b64.WriteString(strings.Join(strings.Fields(line), ""))
		}
		var err error
		if b.Bytes, err = base64.StdEncoding.DecodeString(b64.String()); err != nil {
			return nil, fmt.Errorf("PEM: %s: bad base64: %w", typ, err)
		}
		blocks = append(blocks, b)
	}
}

// pemCertificates parses every CERTIFICATE block of text.
func pemCertificates(text []byte) ([]*x509.Certificate, error) {
	blocks, err := parsePEM(string(text))
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE found")
	}
	return certs, nil
}

// pemPrivateKey parses the one private key in text: PKCS#8 ("PRIVATE
// KEY"), PKCS#1 ("RSA PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS#8
// encrypted with PBES2 ("ENCRYPTED PRIVATE KEY", with password).
func pemPrivateKey(text []byte, password string) (crypto.PrivateKey, error) {
	blocks, err := parsePEM(string(text))
	if err != nil {
		return nil, err
	}
	var keyBlocks []pemBlock
	for _, b := range blocks {
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			keyBlocks = append(keyBlocks, b)
		}
	}
	switch len(keyBlocks) {
	case 0:
		return nil, errors.New("no PEM PRIVATE KEY found")
	case 1:
	default:
		return nil, fmt.Errorf("%d private keys found: want one", len(keyBlocks))
	}
	b := keyBlocks[0]
	if b.LegacyEncrypted {
		return nil, fmt.Errorf("%s is encrypted the legacy OpenSSL way: convert it to PKCS#8 "+
			"(openssl pkcs8 -topk8 -v2 aes-256-cbc) or use a PKCS12 keystore", b.Type)
	}
	var key crypto.PrivateKey
	switch b.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case "ENCRYPTED PRIVATE KEY":
		if password == "" {
			return nil, fmt.Errorf("the private key is encrypted but %s is not set", keyPasswordKey)
		}
		key, err = decryptPKCS8(b.Bytes, password)
	default:
		return nil, fmt.Errorf("unsupported %s: want PRIVATE KEY (PKCS#8), RSA PRIVATE KEY, EC PRIVATE KEY or ENCRYPTED PRIVATE KEY", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Type, err)
	}
	return key, nil
}

// pemKeystore reads a PEM keystore file: a private key and its
// certificate chain, in any order.
func pemKeystore(data []byte, keyPassword string) (*tls.Certificate, error) {
	key, err := pemPrivateKey(data, keyPassword)
	if err != nil {
		return nil, err
	}
	certs, err := pemCertificates(data)
	if err != nil {
		return nil, err
	}
	return certificate(key, certs, true)
}

// inlinePEMKeystore reads the keystore of ssl.keystore.certificate.chain
// and ssl.keystore.key.
func inlinePEMKeystore(chain, keyText, keyPassword string) (*tls.Certificate, error) {
	key, err := pemPrivateKey([]byte(keyText), keyPassword)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keystoreKeyKey, err)
	}
	certs, err := pemCertificates([]byte(chain))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keystoreCertificateChainKey, err)
	}
	cert, err := certificate(key, certs, true)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", keystoreCertificateChainKey, keystoreKeyKey, err)
	}
	return cert, nil
}

// PEMPrivateKey parses the one private key of a PEM file, as the
// keystores' ssl.keystore.key does: PKCS#8, PKCS#1, SEC 1, or PKCS#8
// encrypted with PBES2 (with password). Kafka's OAUTHBEARER assertions
// (sasl.oauthbearer.assertion.private.key.file) are signed with one.
func PEMPrivateKey(text []byte, password string) (crypto.PrivateKey, error) {
	return pemPrivateKey(text, password)
}
