package tlsconf

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
)

// CheckUpdate applies Kafka's rules for a dynamic keystore or truststore
// update of a listener.
func TestCheckUpdate(t *testing.T) {
	ca, caKey, err := newCA("update CA")
	if err != nil {
		t.Fatal(err)
	}
	other, otherKey, err := newCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(ca *x509.Certificate, signer crypto.Signer, cn string, dns ...string) Stores {
		t.Helper()
		c, _, err := newLeaf(ca, signer, pkix.Name{CommonName: cn}, []net.IP{net.IPv4(127, 0, 0, 1)}, dns, x509.ExtKeyUsageServerAuth, nil)
		if err != nil {
			t.Fatal(err)
		}
		return Stores{Leaf: c, Chain: []*x509.Certificate{c}, Trusted: []*x509.Certificate{ca}, HasTruststore: true}
	}
	cur := leaf(ca, caKey, "broker", "b1.example", "localhost")
	for _, c := range []struct {
		what  string
		next  Stores
		rules UpdateRules
		want  string // "" accepted
	}{
		{"a renewed certificate", leaf(ca, caKey, "broker", "localhost", "b1.example"), UpdateRules{VerifyTrust: true}, ""},
		{"a SAN added", leaf(ca, caKey, "broker", "localhost", "b1.example", "b1.internal"), UpdateRules{}, ""},
		{"another subject", leaf(ca, caKey, "impostor", "localhost", "b1.example"), UpdateRules{}, "DistinguishedName does not match"},
		{"another subject allowed", leaf(ca, caKey, "impostor", "localhost", "b1.example"), UpdateRules{AllowDNChanges: true}, ""},
		{"a SAN dropped", leaf(ca, caKey, "broker", "localhost"), UpdateRules{}, "SubjectAltNames do not match"},
		{"a SAN dropped, allowed", leaf(ca, caKey, "broker", "localhost"), UpdateRules{AllowSANChanges: true}, ""},
		{"the keystore removed", Stores{Trusted: cur.Trusted, HasTruststore: true}, UpdateRules{}, "Cannot remove the SSL keystore"},
		{"signed by a CA the truststore does not hold", leaf(other, otherKey, "broker", "localhost", "b1.example"), UpdateRules{VerifyTrust: true}, "not trusted by the current truststore"},
		{"the same, without the trust check", leaf(other, otherKey, "broker", "localhost", "b1.example"), UpdateRules{}, ""},
	} {
		err := CheckUpdate(cur, c.next, c.rules)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
	}
	noTrust := cur
	noTrust.Trusted, noTrust.HasTruststore = nil, false
	if err := CheckUpdate(noTrust, cur, UpdateRules{}); err == nil || !strings.Contains(err.Error(), "Cannot add SSL truststore") {
		t.Errorf("a truststore added: %v", err)
	}
	if err := CheckUpdate(Stores{}, cur, UpdateRules{}); err == nil || !strings.Contains(err.Error(), "Cannot add SSL keystore") {
		t.Errorf("a keystore added: %v", err)
	}
}
