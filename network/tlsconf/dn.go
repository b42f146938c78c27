package tlsconf

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// names by keyword; it writes the others as dotted OIDs.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.1":  "UID",
	"0.9.2342.19200300.100.1.25": "DC",
}

// ia5Attributes are attribute types whose values are IA5Strings (in
// certificates a pkix.Name is marshalled from).
var ia5Attributes = map[string]bool{
	"1.2.840.113549.1.9.1":       true, // emailAddress
	"0.9.2342.19200300.100.1.25": true, // domainComponent
}

// ASN.1 string tags Java renders as text (AVA.isDerString).
const (
	tagUTF8String      = 12
	tagPrintableString = 19
	tagT61String       = 20
	tagIA5String       = 22
	tagGeneralString   = 27
	tagBMPString       = 30
)

// attribute is an AttributeTypeAndValue with its value as encoded.
type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is a RelativeDistinguishedName (a SET OF attributes).
type rdnSET []attribute

// DistinguishedName renders a distinguished name as Java's
// X500Principal.getName() (RFC 2253) does, which is the string Kafka's
// principal mapping rules see: most specific RDN first ("CN=client1,
// OU=eng,O=Acme\, Inc.,L=San Francisco,ST=CA,C=US"), the types CN, C, L,
// ST, O, OU, STREET, DC and UID by keyword, other types as dotted OIDs
// with the #hex of their DER value, and the characters , = + < > # ; " \
// escaped with a backslash, as are leading and trailing spaces.
//
// name.Names (set by parsing) is rendered in its order, one attribute per
// RDN; a name built in code without Names is rendered from
// name.ToRDNSequence. For the exact rendering of a certificate's subject,
// multi-valued RDNs ("CN=a+UID=b") and the string types of its values
// included, PrincipalMapper.Name reads the certificate's raw subject.
func DistinguishedName(name pkix.Name) string {
	var seq pkix.RDNSequence
	if len(name.Names) > 0 {
		for _, atv := range name.Names {
			seq = append(seq, pkix.RelativeDistinguishedNameSET{atv})
		}
	} else {
		seq = name.ToRDNSequence()
	}
	rdns := make([]rdnSET, 0, len(seq))
	for _, set := range seq {
		var rdn rdnSET
		for _, atv := range set {
			rdn = append(rdn, attribute{Type: atv.Type, Value: marshalValue(atv)})
		}
		rdns = append(rdns, rdn)
	}
	return renderDN(rdns)
}

// certificateDN renders a certificate's subject from its DER encoding.
func certificateDN(cert *x509.Certificate) string {
	var rdns []rdnSET
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) > 0 {
		return DistinguishedName(cert.Subject)
	}
	return renderDN(rdns)
}

// marshalValue encodes the value of a parsed or built attribute, as a
// certificate would hold it.
func marshalValue(atv pkix.AttributeTypeAndValue) asn1.RawValue {
	var der []byte
	var err error
	if s, ok := atv.Value.(string); ok && ia5Attributes[atv.Type.String()] {
		der, err = asn1.MarshalWithParams(s, "ia5")
	} else {
		der, err = asn1.Marshal(atv.Value)
	}
	if err != nil {
		// not encodable (a value type encoding/asn1 does not know): render
		// its text as a UTF8String
		der, _ = asn1.MarshalWithParams(strings.ToValidUTF8(toString(atv.Value), "\uFFFD"), "utf8")
	}
	var v asn1.RawValue
	if _, err := asn1.Unmarshal(der, &v); err != nil {
		return asn1.RawValue{}
	}
	return v
}

func toString(v any) string {
	if s, ok := v.(interface{ String() string }); ok {
		return s.String()
	}
	return ""
}

// renderDN joins the RDNs most specific (last) first, as RFC 2253 does.
func renderDN(rdns []rdnSET) string {
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, atv := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			renderAttribute(&b, atv)
		}
	}
	return b.String()
}

// renderAttribute writes TYPE=value as Java's AVA.toRFC2253String does.
func renderAttribute(b *strings.Builder, atv attribute) {
	oid := atv.Type.String()
	keyword, ok := rfc2253Keywords[oid]
	if !ok {
		keyword = oid
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	text, isText := decodeString(atv.Value)
	if !ok || !isText {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		return
	}
	var esc []rune
	for _, c := range text {
		switch {
		case strings.ContainsRune(",=+<>#;\"\\", c):
			esc = append(esc, '\\', c)
		case c == 0:
			esc = append(esc, '\\', '0', '0')
		default:
			esc = append(esc, c)
		}
	}
	// Leading and trailing spaces (and carriage returns) are escaped.
	lead, trail := 0, len(esc)-1
	for lead < len(esc) && (esc[lead] == ' ' || esc[lead] == '\r') {
		lead++
	}
	for trail >= 0 && (esc[trail] == ' ' || esc[trail] == '\r') {
		trail--
	}
	for i, c := range esc {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
}

// decodeString is the text of a value of one of the string types Java
// renders as text, decoded as Java decodes each.
func decodeString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return "", false
	}
	switch v.Tag {
	case tagUTF8String:
		return strings.ToValidUTF8(string(v.Bytes), "\uFFFD"), true
	case tagPrintableString, tagIA5String, tagGeneralString:
		r := make([]rune, len(v.Bytes))
		for i, c := range v.Bytes {
			r[i] = rune(c)
			if c >= 0x80 {
				r[i] = utf8.RuneError
			}
		}
		return string(r), true
	case tagT61String: // as ISO 8859-1
		r := make([]rune, len(v.Bytes))
		for i, c := range v.Bytes {
			r[i] = rune(c)
		}
		return string(r), true
	case tagBMPString: // UTF-16BE
		u := make([]uint16, 0, len(v.Bytes)/2)
		for i := 0; i+1 < len(v.Bytes); i += 2 {
			u = append(u, uint16(v.Bytes[i])<<8|uint16(v.Bytes[i+1]))
		}
		s := string(utf16.Decode(u))
		if len(v.Bytes)%2 != 0 {
			s += "\uFFFD"
		}
		return s, true
	}
	return "", false
}
