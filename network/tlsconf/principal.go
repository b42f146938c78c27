package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AnonymousPrincipal is the name Kafka gives the client of an SSL
// connection that presented no certificate (User:ANONYMOUS).
const AnonymousPrincipal = "ANONYMOUS"

// ErrNoMatchingRule is the error of a distinguished name that no rule of
// ssl.principal.mapping.rules maps: Kafka fails the client's
// authentication.
var ErrNoMatchingRule = errors.New("no ssl.principal.mapping.rules rule applies")

// PrincipalMapper maps a client certificate to a Kafka principal name (the
// name after "User:"), as Kafka's DefaultKafkaPrincipalBuilder does with
// its SslPrincipalMapper: the certificate's subject in RFC 2253 form (see
// DistinguishedName), rewritten by the first rule of
// ssl.principal.mapping.rules that matches it whole.
type PrincipalMapper struct {
	rules []mappingRule
}

// mappingRule is one rule: DEFAULT, or RULE:pattern/replacement/[LU].
type mappingRule struct {
	isDefault   bool
	pattern     string         // as written (Java syntax), for String
	re          *regexp.Regexp // pattern, for replaceAll's search
	full        *regexp.Regexp // \A(?:pattern)\z, for Java's Matcher.matches
	afterRune   *regexp.Regexp // \A.(?:pattern): the pattern at a position, the rune before it as context
	nullable    bool           // whether pattern can match an empty string (so Java finds more matches than Go)
	replacement string
	lower       bool
	upper       bool
}

// Java's \s and ., spelt out for RE2, whose \s lacks \x0B and whose .
// matches \r and the Unicode line separators.
const (
	javaSpace = `[ \t\n\x0B\f\r]`
	javaDot   = `[^\n\r\x{85}\x{2028}\x{2029}]`
)

// ruleSyntax is Kafka's SslPrincipalMapper.RULE_PATTERN: DEFAULT (group
// 1), RULE:pattern/replacement/ (groups 2 and 4, with / and \ escaped by a
// backslash) and an optional L or U (group 6), or anything else (group 7,
// an invalid rule unless empty).
const ruleSyntax = `(DEFAULT)|RULE:((\\` + javaDot + `|[^\\/])*)/((\\` + javaDot + `|[^\\/])*)/([LU]?)` + javaDot + `*?|(` + javaDot + `*?)`

var (
	// ruleSplitter is RULE_SPLITTER: a rule, then a comma or the end.
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + ruleSyntax + `)` + javaSpace + `*(,` + javaSpace + `*|$)`)
	// ruleParser is RULE_PARSER, used as Matcher.lookingAt uses it.
	ruleParser = regexp.MustCompile(`\A(?:` + ruleSyntax + `)`)
	// backReference is Rule.BACK_REFERENCE_PATTERN.
	backReference = regexp.MustCompile(`\$(\d+)`)
)

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules (KIP-371):
// rules separated by commas (and white space), each either DEFAULT (the
// distinguished name unchanged) or RULE:pattern/replacement/ with an
// optional L or U after the last slash (lower- or upper-case the result).
// A rule applies when its pattern matches the whole distinguished name;
// the name is then the distinguished name with every match of the pattern
// replaced by the replacement, in which $1 (${name}) refers to a group, and
// a reference to a group the pattern does not have is kept as literal text,
// as Kafka does. A slash or backslash inside a pattern or replacement is
// escaped with a backslash.
//
// The patterns are Go regular expressions (RE2), which take the common
// Java syntax but not look-arounds, back-references or possessive
// quantifiers: a pattern using them is an error here rather than a rule
// that behaves differently. Empty rules never match: Kafka rejects every
// client then.
func ParsePrincipalMappingRules(rules string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	for _, split := range ruleSplitter.FindAllStringSubmatch(javaTrim(rules), -1) {
		text := split[1]
		g := ruleParser.FindStringSubmatchIndex(text)
		if g == nil || g[1] != len(text) {
			unmatched := text
			if g != nil {
				unmatched = text[g[1]:]
			}
			return nil, fmt.Errorf("invalid rule %q: unmatched %q (want DEFAULT or RULE:pattern/replacement/ with an optional L or U)", text, unmatched)
		}
		switch {
		case g[2] >= 0:
			m.rules = append(m.rules, mappingRule{isDefault: true})
		case g[4] >= 0:
			r, err := newMappingRule(text[g[4]:g[5]], text[g[8]:g[9]], text[g[12]:g[13]])
			if err != nil {
				return nil, fmt.Errorf("rule %q: %w", text, err)
			}
			m.rules = append(m.rules, r)
		}
		// otherwise an empty rule, ignored as Kafka ignores it
	}
	return m, nil
}

// newMappingRule compiles RULE:pattern/replacement/flag.
func newMappingRule(pattern, replacement, flag string) (mappingRule, error) {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return mappingRule{}, fmt.Errorf("pattern: %w", err)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return mappingRule{}, fmt.Errorf("pattern: %w", err)
	}
	full, err := regexp.Compile(concat(&syntax.Regexp{Op: syntax.OpBeginText}, tree, &syntax.Regexp{Op: syntax.OpEndText}))
	if err != nil {
		return mappingRule{}, fmt.Errorf("pattern: %w", err)
	}
	afterRune, err := regexp.Compile(concat(&syntax.Regexp{Op: syntax.OpBeginText}, &syntax.Regexp{Op: syntax.OpAnyChar}, tree))
	if err != nil {
		return mappingRule{}, fmt.Errorf("pattern: %w", err)
	}
	return mappingRule{
		pattern:     pattern,
		re:          re,
		full:        full,
		afterRune:   afterRune,
		nullable:    nullable(tree),
		replacement: replacement,
		lower:       flag == "L",
		upper:       flag == "U",
	}, nil
}

// concat is the source of the concatenation of subs.
func concat(subs ...*syntax.Regexp) string {
	return (&syntax.Regexp{Op: syntax.OpConcat, Sub: subs}).String()
}

// String lists the rules, as Kafka's SslPrincipalMapper.toString does.
func (m *PrincipalMapper) String() string {
	var parts []string
	for _, r := range m.rules {
		if r.isDefault {
			parts = append(parts, "DEFAULT")
			continue
		}
		s := "RULE:" + r.pattern + "/" + r.replacement
		switch {
		case r.lower:
			s += "/L"
		case r.upper:
			s += "/U"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Name is the principal name of a client certificate: its subject's
// distinguished name mapped by the rules. An error (ErrNoMatchingRule
// among them) fails the client's authentication, as in Kafka.
func (m *PrincipalMapper) Name(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", errors.New("no client certificate")
	}
	return m.MapDistinguishedName(certificateDN(cert))
}

// ConnectionName is the principal name of an SSL connection's client: that
// of its certificate (the first of the peer's certificates), or
// AnonymousPrincipal when it presented none.
func (m *PrincipalMapper) ConnectionName(state tls.ConnectionState) (string, error) {
	if len(state.PeerCertificates) == 0 {
		return AnonymousPrincipal, nil
	}
	return m.Name(state.PeerCertificates[0])
}

// MapDistinguishedName maps an RFC 2253 distinguished name by the rules:
// the result of the first rule that applies, or an error wrapping
// ErrNoMatchingRule.
func (m *PrincipalMapper) MapDistinguishedName(dn string) (string, error) {
	dn = strings.ToValidUTF8(dn, "\uFFFD")
	for _, r := range m.rules {
		name, ok, err := r.apply(dn)
		if err != nil {
			return "", fmt.Errorf("ssl.principal.mapping.rules: RULE:%s/%s/ on %q: %w", r.pattern, r.replacement, dn, err)
		}
		if ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w to %q (rules %s)", ErrNoMatchingRule, dn, m)
}

// apply is Rule.apply: the name if the rule applies to dn.
func (r *mappingRule) apply(dn string) (string, bool, error) {
	if r.isDefault {
		return dn, true, nil
	}
	if !r.full.MatchString(dn) {
		return "", false, nil
	}
	repl, err := escapeLiteralBackReferences(r.replacement, r.re.NumSubexp())
	if err != nil {
		return "", false, err
	}
	name, err := r.replaceAll(dn, repl)
	if err != nil {
		return "", false, err
	}
	switch {
	case r.lower:
		name = strings.ToLower(name)
	case r.upper:
		name = strings.ToUpper(name)
	}
	return name, true, nil
}

// escapeLiteralBackReferences is Kafka's method of that name: a $n
// referring to a group the pattern does not have (after dropping trailing
// digits down to one) gets a backslash, so that it stays literal text. As
// in Kafka, the positions are those of the original replacement even
// after a backslash was inserted.
func escapeLiteralBackReferences(replacement string, groups int) (string, error) {
	if groups == 0 {
		return replacement, nil
	}
	value := replacement
	for _, loc := range backReference.FindAllStringSubmatchIndex(replacement, -1) {
		num := replacement[loc[2]:loc[3]]
		if strings.HasPrefix(num, "0") {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 32)
		if err != nil {
			return "", fmt.Errorf("back reference $%s: %w", num, err)
		}
		for n > int64(groups) && n >= 10 {
			n /= 10
		}
		if n > int64(groups) {
			at := min(loc[2]-1, len(value))
			value = value[:at] + `\` + value[at:]
		}
	}
	return value, nil
}

// replaceAll is Java's String.replaceAll(pattern, replacement): every
// match of the pattern in dn, found as Java's Matcher.find finds them,
// replaced as Matcher.appendReplacement does.
func (r *mappingRule) replaceAll(dn, replacement string) (string, error) {
	matches := r.re.FindAllStringSubmatchIndex(dn, -1)
	if r.nullable {
		matches = r.withJavaEmptyMatches(dn, matches)
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		b.WriteString(dn[last:m[0]])
		if err := appendReplacement(&b, dn, m, replacement, r.re); err != nil {
			return "", err
		}
		last = m[1]
	}
	b.WriteString(dn[last:])
	return b.String(), nil
}

// withJavaEmptyMatches adds to Go's matches the ones Java finds and Go
// does not: an empty match right where a non-empty one ended (Go skips
// it, Java does not: "a*" finds "aa" and then "" at the end of "aa").
// Where Go found no match starting at such a position, the pattern's
// preferred match there, if it has one, is empty. It is found by matching
// the pattern right after the rune before the position: a match there
// sees the same context (\b, (?m)^) as at the position in dn, and none of
// \A.
func (r *mappingRule) withJavaEmptyMatches(dn string, matches [][]int) [][]int {
	var out [][]int
	for i, m := range matches {
		out = append(out, m)
		end := m[1]
		if m[0] == end || i+1 < len(matches) && matches[i+1][0] == end {
			continue
		}
		_, w := utf8.DecodeLastRuneInString(dn[:end])
		loc := r.afterRune.FindStringSubmatchIndex(dn[end-w:])
		if loc == nil || loc[1] != w {
			continue
		}
		empty := []int{end, end}
		for _, x := range loc[2:] {
			if x >= 0 {
				x += end - w
			}
			empty = append(empty, x)
		}
		out = append(out, empty)
	}
	return out
}

// appendReplacement is Java's Matcher.appendReplacement: replacement with
// $n (as many digits as make a group number the pattern has) and ${name}
// replaced by the groups of match m, and \c standing for c.
func appendReplacement(b *strings.Builder, src string, m []int, replacement string, re *regexp.Regexp) error {
	groups := re.NumSubexp()
	for i := 0; i < len(replacement); {
		c := replacement[i]
		switch c {
		case '\\':
			i++
			if i == len(replacement) {
				return errors.New("replacement: character to be escaped is missing")
			}
			fallthrough
		default:
			b.WriteByte(replacement[i])
			i++
			continue
		case '$':
		}
		i++
		if i == len(replacement) {
			return errors.New("replacement: illegal group reference: group index is missing")
		}
		var ref int
		if replacement[i] == '{' {
			i++
			start := i
			for i < len(replacement) && isASCIIAlnum(replacement[i]) {
				i++
			}
			name := replacement[start:i]
			switch {
			case name == "":
				return errors.New("replacement: named capturing group has 0 length name")
			case i == len(replacement) || replacement[i] != '}':
				return errors.New("replacement: named capturing group is missing trailing '}'")
			case name[0] >= '0' && name[0] <= '9':
				return fmt.Errorf("replacement: capturing group name {%s} starts with digit character", name)
			}
			i++
			if ref = re.SubexpIndex(name); ref < 0 {
				return fmt.Errorf("replacement: no group with name {%s}", name)
			}
		} else {
			d := replacement[i]
			if d < '0' || d > '9' {
				return errors.New("replacement: illegal group reference")
			}
			ref = int(d - '0')
			i++
			for i < len(replacement) && replacement[i] >= '0' && replacement[i] <= '9' {
				next := ref*10 + int(replacement[i]-'0')
				if next > groups {
					break
				}
				ref = next
				i++
			}
			if ref > groups {
				return fmt.Errorf("replacement: no group %d", ref)
			}
		}
		if s, e := m[2*ref], m[2*ref+1]; s >= 0 && e >= 0 {
			b.WriteString(src[s:e])
		}
	}
	return nil
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// nullable reports whether re can match an empty string somewhere
// (assertions taken as satisfied).
func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !nullable(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if nullable(s) {
				return true
			}
		}
		return false
	default: // characters, classes, no match
		return false
	}
}
