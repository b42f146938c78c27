package tlsconf

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// briefRules are the rules of Kafka's documentation example.
const briefRules = `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT`

func str(tag int, s string) asn1.RawValue { return asn1.RawValue{Tag: tag, Bytes: []byte(s)} }

func TestDistinguishedName(t *testing.T) {
	p := getPKI(t)
	if got := certificateDN(p.client); got != p.clientSubjectExpected {
		t.Errorf("certificate subject: %s\nwant                %s", got, p.clientSubjectExpected)
	}
	if got := DistinguishedName(p.client.Subject); got != p.clientSubjectExpected {
		t.Errorf("DistinguishedName:   %s\nwant                %s", got, p.clientSubjectExpected)
	}
	// A name built in code, without Names: Go's RDN order (C, O, OU, L,
	// ST, ..., CN), most specific last.
	built := pkix.Name{CommonName: "broker-1", Organization: []string{"Acme"}, Country: []string{"DE"},
		ExtraNames: []pkix.AttributeTypeAndValue{{Type: oid(1, 2, 840, 113549, 1, 9, 1), Value: "ops@acme.test"}}}
	if got, want := DistinguishedName(built), "1.2.840.113549.1.9.1=#160d6f70734061636d652e74657374,CN=broker-1,O=Acme,C=DE"; got != want {
		t.Errorf("built name: %s\nwant        %s", got, want)
	}

	// A subject exercising Java's rendering: multi-valued RDN, keywords,
	// OIDs as #hex, escapes, string types. The expected string is what
	// JDK 25's X500Principal.getName() prints for this certificate
	// (JDK 17 differs only for the T61String and BMPString values, which
	// it decodes as UTF-8).
	raw, err := asn1.Marshal([]rdnSET{
		{{oid(2, 5, 4, 6), str(tagPrintableString, "US")}},
		{{oid(0, 9, 2342, 19200300, 100, 1, 25), str(tagIA5String, "com")}},
		{{oid(2, 5, 4, 10), str(tagUTF8String, "Acme, Inc.")}},
		{{oid(2, 5, 4, 11), str(tagUTF8String, "eng")}, {oid(0, 9, 2342, 19200300, 100, 1, 1), str(tagUTF8String, "u1")}},
		{{oid(1, 2, 840, 113549, 1, 9, 1), str(tagIA5String, "a@b.c")}},
		{{oid(2, 5, 4, 5), str(tagPrintableString, "1234")}},
		{{oid(2, 5, 4, 7), str(tagUTF8String, "Zürich")}},
		{{oid(2, 5, 4, 8), str(tagBMPString, "\x00\xC4\x00r\x00g\x00e\x00r")}},
		{{oid(2, 5, 4, 9), str(tagT61String, "Stra\xDFe")}},
		{{oid(2, 5, 4, 12), str(tagUTF8String, "Dr")}},
		{{oid(2, 5, 4, 11), str(tagUTF8String, "\x00nul\r")}},
		{{oid(2, 5, 4, 3), str(tagUTF8String, `  #lead=+<>;"\trail  `)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1000), RawSubject: raw, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, p.clientKey.Public(), p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	want := `CN=\ \ \#lead\=\+\<\>\;\"\\trail\ \ ,OU=\00nul\` + "\r" + `,2.5.4.12=#0c024472,STREET=Straße,ST=Ärger,` +
		`L=Zürich,2.5.4.5=#130431323334,1.2.840.113549.1.9.1=#16056140622e63,OU=eng+UID=u1,O=Acme\, Inc.,DC=com,C=US`
	if got := certificateDN(cert); got != want {
		t.Errorf("tricky subject:\ngot  %q\nwant %q", got, want)
	}
}

func TestPrincipalMapping(t *testing.T) {
	tests := []struct {
		rules, dn, want string
	}{
		// Kafka's documentation example.
		{briefRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"},
		{briefRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"},
		{briefRules, "CN=Duke,OU=JavaSoft,O=Sun Microsystems", "CN=Duke,OU=JavaSoft,O=Sun Microsystems"},
		{briefRules, `CN=client1,OU=eng,O=Acme\, Inc.,L=San Francisco,ST=CA,C=US`, "client1@eng"},
		// Kafka's SslPrincipalMapperTest.
		{kafkaTestRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
		{kafkaTestRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"},
		{kafkaTestRules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"},
		{kafkaTestRules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"},
		{kafkaTestRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`},
		// A reference to a group the pattern lacks stays literal.
		{`RULE:^CN=(.*?),OU=(.*?)$/$1@$3/`, "CN=duke,OU=sme", "duke@$3"},
		// Escapes, named groups, multi-digit references.
		{`RULE:^CN=(?<user>[^,]*).*$/\$${user}\/x/`, "CN=duke,OU=sme", "$duke/x"},
		{`RULE:^CN=([^,]*).*$/$12/`, "CN=duke,OU=sme", "duke2"},
		// Java's replaceAll replaces every match, an empty one at the end
		// included (checked against Java's String.replaceAll).
		{`RULE:(.*)/x$1/`, "CN=a", "xCN=ax"},
		{`RULE:[^,]*(,[^,]*)*/<$0>/`, "CN=a,O=b", "<CN=a,O=b><>"},
		{`RULE:^CN=(.*)$/$1/U`, "CN=Zoë", "ZOË"},
	}
	for _, tc := range tests {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Fatalf("%s: %v", tc.rules, err)
		}
		got, err := m.MapDistinguishedName(tc.dn)
		if err != nil || got != tc.want {
			t.Errorf("rules %s\n  %s -> %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
}

const kafkaTestRules = `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, ` +
	`RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT`

// TestJavaReplaceAll checks replaceAll against what Java's
// String.replaceAll returns for the same input, pattern and replacement
// (recorded from JDK 17), empty matches and group references included.
func TestJavaReplaceAll(t *testing.T) {
	tests := []struct{ in, pattern, replacement, java string }{
		{"CN=a", "(.*)", "x$1", "xCN=ax"},
		{"aaa", "a*", "<$0>", "<aaa><>"},
		{"CN=Duke,OU=ServiceUsers,O=Org,C=US", "^CN=(.*?),OU=ServiceUsers.*$", "$1", "Duke"},
		{"abc", "a|ab|abc", "[$0]", "[a]bc"},
		{"ab", "(a)?", "<$1>", "<a><>b<>"},
		{"x,y", "[^,]*", "<$0>", "<x><>,<y><>"},
		{"CN=a", `\b`, "|", "|CN|=|a|"},
		{"aa", "a*?", "<$0>", "<>a<>a<>"},
		{"CN=Duke", "CN=(.*)", `\$1=$1`, "$1=Duke"},
		{"CN=Duke", "CN=(.*)", "$12", "Duke2"},
		{"CN=Duke", "CN=(?<n>.*)", "${n}!", "Duke!"},
		{"CN=a,OU=b", "(?:CN=([^,]*)|,OU=([^,]*))?", "[$1|$2]", "[a|][|b][|]"},
		{"ééé", "é*", "<$0>", "<ééé><>"},
		{"a b", `a|\b`, "<$0>", "<a><> <>b<>"},
		{"a\nb", "a\n|(?m)^", "<$0>", "<a\n><>b"},
		{"ab", "a|^", "<$0>", "<a>b"},
	}
	for _, tc := range tests {
		r, err := newMappingRule(tc.pattern, tc.replacement, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		got, err := r.replaceAll(tc.in, tc.replacement)
		if err != nil || got != tc.java {
			t.Errorf("%q.replaceAll(%q, %q) = %q, %v; Java gives %q", tc.in, tc.pattern, tc.replacement, got, err, tc.java)
		}
	}
}

func TestPrincipalMappingRulesSplitting(t *testing.T) {
	// Kafka's SslPrincipalMapperTest.testRulesSplitting: the rules as
	// SslPrincipalMapper.toString lists them.
	tests := []struct{ want, rules string }{
		{"[]", ""},
		{"[DEFAULT]", "DEFAULT"},
		{"[RULE:/]", "RULE://"},
		{"[RULE:/.*]", "RULE:/.*/"},
		{"[RULE:/.*/L]", "RULE:/.*/L"},
		{"[RULE:/, DEFAULT]", "RULE://,DEFAULT"},
		{"[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "},
		{"[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "},
		{"[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "},
		{"[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "},
		{"[]", ",   , , ,      , , ,   "},
		{"[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"},
		{"[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "},
		{"[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"},
		{`[RULE:\/\\\(\)\n\t/\/\/]`, `RULE:\/\\\(\)\n\t/\/\//`},
		{`[RULE:\**\/+/*/L, RULE:\/*\**/**]`, `RULE:\**\/+/*/L,RULE:\/*\**/**/`},
		{`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`},
	}
	for _, tc := range tests {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		if got := m.String(); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.rules, got, tc.want)
		}
	}
}

func TestInvalidPrincipalMappingRules(t *testing.T) {
	for _, rules := range []string{
		// Kafka's SslPrincipalMapperTest.testInvalidRules.
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		"DEFAULT DEFAULT",
		// Patterns Java compiles and Go's RE2 does not.
		"RULE:^CN=(?=duke)(.*)$/$1/",
		"RULE:^CN=(.)\\1$/$1/",
		// Patterns neither compiles.
		"RULE:^CN=(.*$/$1/",
	} {
		if m, err := ParsePrincipalMappingRules(rules); err == nil {
			t.Errorf("%q parsed as %s", rules, m)
		}
	}
}

func TestPrincipalMapperName(t *testing.T) {
	p := getPKI(t)
	m, err := ParsePrincipalMappingRules(briefRules)
	if err != nil {
		t.Fatal(err)
	}
	if name, err := m.Name(p.client); err != nil || name != "client1@eng" {
		t.Errorf("Name = %q, %v", name, err)
	}
	if name, err := m.ConnectionName(tls.ConnectionState{PeerCertificates: []*x509.Certificate{p.client}}); err != nil || name != "client1@eng" {
		t.Errorf("ConnectionName = %q, %v", name, err)
	}
	if name, err := m.ConnectionName(tls.ConnectionState{}); err != nil || name != AnonymousPrincipal {
		t.Errorf("ConnectionName without certificate = %q, %v", name, err)
	}
	def, err := ParsePrincipalMappingRules(Defaults().PrincipalMappingRules)
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := def.Name(p.client); name != p.clientSubjectExpected {
		t.Errorf("DEFAULT: %q", name)
	}

	// No rule applies: the client's authentication fails.
	only, err := ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := only.Name(p.client); !errors.Is(err, ErrNoMatchingRule) || !strings.Contains(err.Error(), "CN=client1") {
		t.Errorf("err = %v, want ErrNoMatchingRule naming the DN", err)
	}
	none, err := ParsePrincipalMappingRules("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Name(p.client); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("no rules: err = %v", err)
	}
	// A reference to a group of a pattern without groups fails, as it
	// throws in Java.
	bad, err := ParsePrincipalMappingRules(`RULE:^CN=client1.*$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Name(p.client); err == nil || errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("$1 without groups: err = %v", err)
	}
}

// FuzzParsePrincipalMappingRules parses rules and applies them to a
// distinguished name: neither may panic. It also checks that the
// whole-name and at-a-position forms of each pattern, built from its
// parsed form, match as the same forms written as text do.
func FuzzParsePrincipalMappingRules(f *testing.F) {
	f.Add(briefRules, `CN=client1,OU=eng,O=Acme\, Inc.,L=San Francisco,ST=CA,C=US`)
	f.Add(kafkaTestRules, "cn=duke,ou=sme,dc=mycp,dc=com")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParsePrincipalMappingRules(rules)
		if err != nil {
			return
		}
		_ = m.String()
		name, err := m.MapDistinguishedName(dn)
		if err == nil && len(m.rules) == 0 {
			t.Fatalf("no rules mapped %q to %q", dn, name)
		}
		if !utf8.ValidString(dn) {
			return
		}
		for _, r := range m.rules {
			if r.isDefault || strings.Contains(r.pattern, `\Q`) {
				continue
			}
			full, err1 := regexp.Compile(`\A(?:` + r.pattern + `)\z`)
			after, err2 := regexp.Compile(`\A(?s:.)(?:` + r.pattern + `)`)
			if err1 != nil || err2 != nil {
				continue
			}
			if full.MatchString(dn) != r.full.MatchString(dn) {
				t.Fatalf("%q: whole-name match of %q differs: %v", r.pattern, dn, r.full)
			}
			if !slices.Equal(after.FindStringSubmatchIndex(dn), r.afterRune.FindStringSubmatchIndex(dn)) {
				t.Fatalf("%q: match after the first rune of %q differs: %v", r.pattern, dn, r.afterRune)
			}
		}
	})
}
