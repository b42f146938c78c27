package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Stores is what a listener's keystore and truststore held when its TLS
// was built: an update is checked against these, not against the files,
// which may since have been replaced in place.
type Stores struct {
	// Certificate is the keystore's key and chain; nil without one.
	Certificate *tls.Certificate
	// Leaf is the keystore's certificate, Chain its chain (leaf first);
	// nil without a keystore.
	Leaf  *x509.Certificate
	Chain []*x509.Certificate
	// Trusted are the truststore's certificates; HasTruststore is false
	// when none is configured (the system's roots are used).
	Trusted       []*x509.Certificate
	HasTruststore bool
	// modified are the store files read and their modification times.
	modified map[string]time.Time
}

// LoadStores checks the settings (Validate) and reads the keystore and
// the truststore, each file once: ServerConfigWith and ClientConfigWith
// build from them, and CheckUpdate compares a later update with them.
func (s Settings) LoadStores() (Stores, error) {
	var st Stores
	if err := s.Validate(); err != nil {
		return st, err
	}
	files := map[string]time.Time{}
	for _, path := range []string{s.KeystoreLocation, s.TruststoreLocation} {
		if path == "" {
			continue
		}
		if fi, err := os.Stat(path); err == nil {
			files[path] = fi.ModTime()
		}
	}
	cert, err := s.LoadKeystore()
	if err != nil {
		return st, err
	}
	if cert != nil {
		st.Certificate = cert
		for _, der := range cert.Certificate {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return st, fmt.Errorf("%s: certificate: %w", keystoreLocationKey, err)
			}
			st.Chain = append(st.Chain, c)
		}
		if len(st.Chain) > 0 {
			st.Leaf = st.Chain[0]
		}
	}
	if st.Trusted, err = s.LoadTruststore(); err != nil {
		return st, err
	}
	st.HasTruststore = s.TruststoreLocation != "" || s.TruststoreCertificates != ""
	st.modified = files
	return st, nil
}

// Modified reports whether a store file read by LoadStores has changed
// since (its modification time, or it is gone): Kafka reloads a store
// whose file was replaced in place when its config is set again, even to
// the same value.
func (st Stores) Modified() bool {
	for path, t := range st.modified {
		fi, err := os.Stat(path)
		if err != nil || !fi.ModTime().Equal(t) {
			return true
		}
	}
	return false
}

// UpdateRules are the broker settings that relax CheckUpdate.
type UpdateRules struct {
	// AllowDNChanges is ssl.allow.dn.changes: the new certificate may
	// have another subject.
	AllowDNChanges bool
	// AllowSANChanges is ssl.allow.san.changes: it may drop subject
	// alternative names.
	AllowSANChanges bool
	// VerifyTrust checks that the current truststore trusts the new
	// certificate and the new truststore the current one, as Kafka does
	// for the listener other brokers connect to (an update that breaks
	// them is refused before it is made).
	VerifyTrust bool
}

// CheckUpdate is Kafka's validation of a dynamic update of a listener's
// keystore or truststore (SslFactory's reconfiguration checks), from the
// stores in use (cur) to the ones just loaded (next):
//
//   - a keystore cannot be added to a listener without one, nor removed;
//   - the certificate keeps its subject (unless AllowDNChanges) and every
//     subject alternative name it had (unless AllowSANChanges; new ones
//     may be added);
//   - a truststore cannot be added to a listener without one;
//   - with VerifyTrust, each side's truststore accepts the other's
//     certificate.
//
// The messages are Kafka's.
func CheckUpdate(cur, next Stores, rules UpdateRules) error {
	switch {
	case cur.Leaf == nil && next.Leaf != nil:
		return errors.New("Cannot add SSL keystore to an existing listener for which no keystore was configured.")
	case cur.Leaf != nil && next.Leaf == nil:
		return errors.New("Cannot remove the SSL keystore from an existing listener for which a keystore was configured.")
	}
	if cur.Leaf != nil {
		if !rules.AllowDNChanges && !sameSubject(cur.Leaf, next.Leaf) {
			return fmt.Errorf("Keystore DistinguishedName does not match:  existing={DN=%s}, new={DN=%s}",
				cur.Leaf.Subject, next.Leaf.Subject)
		}
		if old, now := subjectAltNames(cur.Leaf), subjectAltNames(next.Leaf); !rules.AllowSANChanges && !containsAll(now, old) {
			return fmt.Errorf("Keystore SubjectAltNames do not match:  existing={SAN=%s}, new={SAN=%s}",
				strings.Join(old, ", "), strings.Join(now, ", "))
		}
	}
	if !cur.HasTruststore && next.HasTruststore {
		return errors.New("Cannot add SSL truststore to an existing listener for which no truststore was configured.")
	}
	if rules.VerifyTrust && cur.Leaf != nil {
		if err := verifyAgainst(next.Chain, cur); err != nil {
			return fmt.Errorf("the new certificate is not trusted by the current truststore: %w", err)
		}
		if err := verifyAgainst(cur.Chain, next); err != nil {
			return fmt.Errorf("the current certificate is not trusted by the new truststore: %w", err)
		}
	}
	return nil
}

// sameSubject compares two subjects as Kafka does: the encoded names, or
// their RFC 2253 strings ignoring case.
func sameSubject(a, b *x509.Certificate) bool {
	return string(a.RawSubject) == string(b.RawSubject) || strings.EqualFold(a.Subject.String(), b.Subject.String())
}

// subjectAltNames lists a certificate's subject alternative names, typed
// as Java lists them apart (a DNS name and an IP of the same text differ).
func subjectAltNames(c *x509.Certificate) []string {
	var out []string
	for _, n := range c.DNSNames {
		out = append(out, "DNS:"+n)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	for _, e := range c.EmailAddresses {
		out = append(out, "email:"+e)
	}
	for _, u := range c.URIs {
		out = append(out, "URI:"+u.String())
	}
	return out
}

func containsAll(set, sub []string) bool {
	for _, s := range sub {
		if !slices.Contains(set, s) {
			return false
		}
	}
	return true
}

// verifyAgainst verifies chain (leaf first) against trust's truststore,
// or the system's roots when it has none, for any key usage: the
// listener's certificate serves as a server and, to other nodes, as a
// client.
func verifyAgainst(chain []*x509.Certificate, trust Stores) error {
	opts := x509.VerifyOptions{Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if trust.HasTruststore {
		opts.Roots = certPool(trust.Trusted)
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(opts)
	return err
}
