// Package sasl holds the broker side of Kafka's SASL authentication:
// parsing sasl.jaas.config values (Kafka's JaasConfig), the PLAIN
// mechanism (RFC 4616, Kafka's PlainSaslServer with its default
// PlainServerCallbackHandler) and the SCRAM-SHA-256 and SCRAM-SHA-512
// mechanisms (RFC 5802 and 7677, Kafka's ScramSaslServer), with the
// credential arithmetic of Kafka's ScramFormatter.
//
// Nothing here reads the network: the broker feeds it the bytes of
// SaslAuthenticate requests and answers with what it returns. Error messages
// never contain a password; see ClientMessage for what a client may be told.
package sasl

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// JAASConfig is one login module entry of a sasl.jaas.config value.
type JAASConfig struct {
	// LoginModule is the login module's class name, e.g.
	// org.apache.kafka.common.security.plain.PlainLoginModule.
	LoginModule string
	// Flag is the control flag, lower case: required, requisite, sufficient
	// or optional. Kafka reads it case-insensitively and otherwise ignores
	// it.
	Flag string
	// Options are the key=value options, values unquoted and unescaped.
	// Options may hold passwords: never log them.
	Options map[string]string
}

// String describes c with every option value redacted, so that a logged
// configuration does not leak its passwords.
func (c JAASConfig) String() string {
	keys := make([]string, 0, len(c.Options))
	for k := range c.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(c.LoginModule)
	b.WriteString(" ")
	b.WriteString(c.Flag)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=[redacted]", k)
	}
	b.WriteString(";")
	return b.String()
}

// ParseJAAS parses a sasl.jaas.config value (or a listener's
// listener.name.<listener>.<mechanism>.sasl.jaas.config): exactly one
//
//	<LoginModule> <flag> key=value ... ;
//
// entry, as Kafka's JaasConfig reads it (Kafka's JaasContext refuses zero or
// several entries in the property).
//
// The tokens follow Kafka's java.io.StreamTokenizer set-up. Whitespace
// (every character up to and including space, newlines too) is free between
// tokens. A value, like the login module, flag and keys, is either a bare
// word — a run of printable characters other than whitespace, quotes, '/',
// ';' and '=' — or a string in double or single quotes, in which a backslash
// escapes the next character (\" \' \\), \n \t \r \b \f \a \v are control
// characters and \ooo is an octal character code. "// ..." and "/* ... */"
// are comments. A duplicated key keeps its last value, as in Kafka.
//
// ParseJAAS is stricter than Kafka where Kafka silently misreads: a quoted
// string that reaches the end of its line or of the value, an unterminated
// /* comment, and a '/' outside quotes that does not start a comment (Kafka
// would drop the rest of the line) are errors. Errors give the line and
// column of the problem and never quote an option value.
func ParseJAAS(s string) (JAASConfig, error) {
	if !utf8.ValidString(s) {
		return JAASConfig{}, fmt.Errorf("JAAS config: not valid UTF-8 (byte %d)", firstInvalidUTF8(s))
	}
	sc := &jaasScanner{src: s, line: 1, col: 1}
	var (
		entries []JAASConfig
		second  position
	)
	for {
		t, err := sc.next()
		if err != nil {
			return JAASConfig{}, err
		}
		if t.kind == tokEOF {
			break
		}
		if len(entries) == 1 {
			second = t.pos
		}
		e, err := parseJAASEntry(sc, t)
		if err != nil {
			return JAASConfig{}, err
		}
		entries = append(entries, e)
	}
	switch len(entries) {
	case 0:
		return JAASConfig{}, errors.New("JAAS config: no login module; want `<LoginModule> <flag> key=value ... ;`")
	case 1:
		return entries[0], nil
	default:
		return JAASConfig{}, fmt.Errorf("JAAS config: %d login modules, should be 1 module (the second starts at %s)", len(entries), second)
	}
}

// parseJAASEntry parses the rest of the entry whose first token is first:
// the flag, the options and the closing ';'.
func parseJAASEntry(sc *jaasScanner, first token) (JAASConfig, error) {
	if !first.isString() {
		return JAASConfig{}, errAt(first.pos, "login module class name expected, found %s", first.describe())
	}
	if first.text == "" {
		return JAASConfig{}, errAt(first.pos, "empty login module class name")
	}
	c := JAASConfig{LoginModule: first.text, Options: map[string]string{}}

	t, err := sc.next()
	if err != nil {
		return JAASConfig{}, err
	}
	switch {
	case t.kind == tokEOF:
		return JAASConfig{}, errAt(t.pos, "login module control flag not specified after %s", c.LoginModule)
	case !t.isString():
		return JAASConfig{}, errAt(t.pos, "login module control flag expected after %s, found %s", c.LoginModule, t.describe())
	}
	switch f := strings.ToUpper(t.text); f { // Kafka: flag.toUpperCase(Locale.ROOT)
	case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
		c.Flag = strings.ToLower(f)
	default:
		return JAASConfig{}, errAt(t.pos, "invalid login module control flag %q; want required, requisite, sufficient or optional", t.text)
	}

	for {
		key, err := sc.next()
		if err != nil {
			return JAASConfig{}, err
		}
		switch {
		case key.kind == tokSemi:
			return c, nil
		case key.kind == tokEOF:
			return JAASConfig{}, errAt(key.pos, "JAAS config entry of %s not terminated by semi-colon", c.LoginModule)
		case !key.isString():
			return JAASConfig{}, errAt(key.pos, "option name expected, found %s", key.describe())
		}
		eq, err := sc.next()
		if err != nil {
			return JAASConfig{}, err
		}
		if eq.kind != tokEquals {
			// The token is not named: a stray word here is often the
			// second half of an unquoted value with a space in it.
			return JAASConfig{}, errAt(key.pos, "option without '=' (want key=value; quote values containing spaces)")
		}
		val, err := sc.next()
		if err != nil {
			return JAASConfig{}, err
		}
		if !val.isString() {
			return JAASConfig{}, errAt(val.pos, "value not specified for key %q", key.text)
		}
		c.Options[key.text] = val.text
	}
}

// errAt is a JAAS syntax error at pos.
func errAt(pos position, format string, args ...any) error {
	return fmt.Errorf("JAAS config %s: %s", pos, fmt.Sprintf(format, args...))
}

func firstInvalidUTF8(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return len(s)
}

// position is a 1-based line and column (in characters) of the input.
type position struct{ line, col int }

func (p position) String() string { return fmt.Sprintf("line %d, column %d", p.line, p.col) }

type tokenKind int

const (
	tokEOF    tokenKind = iota
	tokWord             // a bare word
	tokQuoted           // a quoted string, unquoted and unescaped
	tokSemi             // ;
	tokEquals           // =
	tokOther            // a character that is none of the above (C1 controls)
)

type token struct {
	kind tokenKind
	text string // tokWord and tokQuoted
	pos  position
}

// isString reports whether t carries a string: a bare word or a quoted
// string, what Kafka's StreamTokenizer returns in sval.
func (t token) isString() bool { return t.kind == tokWord || t.kind == tokQuoted }

// describe names t for an error message without quoting its text, which
// might be (part of) a password.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokWord:
		return "a word"
	case tokQuoted:
		return "a quoted string"
	case tokSemi:
		return "';'"
	case tokEquals:
		return "'='"
	default:
		return "an unexpected control character"
	}
}

// jaasScanner splits a JAAS config into tokens the way Kafka's
// StreamTokenizer does with JaasConfig's syntax table.
type jaasScanner struct {
	src       string
	off       int
	line, col int // of src[off]
}

// peek returns the character at the scanner's offset, or -1 at the end.
func (s *jaasScanner) peek() rune {
	if s.off >= len(s.src) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(s.src[s.off:])
	return r
}

// advance moves past the character at the offset.
func (s *jaasScanner) advance() {
	r, size := utf8.DecodeRuneInString(s.src[s.off:])
	s.off += size
	if r == '\n' {
		s.line++
		s.col = 1
	} else {
		s.col++
	}
}

func (s *jaasScanner) pos() position { return position{s.line, s.col} }

// isJAASWordChar reports whether r is part of a bare word: in Kafka's
// syntax table, characters 33..128 and 160 up, less the quotes, '/', ';'
// and '='.
func isJAASWordChar(r rune) bool {
	switch r {
	case '"', '\'', '/', ';', '=':
		return false
	}
	return (r > ' ' && r <= 128) || r >= 160
}

// next returns the next token, skipping whitespace and comments.
func (s *jaasScanner) next() (token, error) {
	for {
		start := s.pos()
		r := s.peek()
		switch {
		case r < 0:
			return token{kind: tokEOF, pos: start}, nil
		case r <= ' ':
			s.advance()
		case r == '/':
			if err := s.skipComment(); err != nil {
				return token{}, err
			}
		case r == '"' || r == '\'':
			return s.quoted()
		case r == ';':
			s.advance()
			return token{kind: tokSemi, pos: start}, nil
		case r == '=':
			s.advance()
			return token{kind: tokEquals, pos: start}, nil
		case isJAASWordChar(r):
			begin := s.off
			for r := s.peek(); r >= 0 && isJAASWordChar(r); r = s.peek() {
				s.advance()
			}
			return token{kind: tokWord, text: s.src[begin:s.off], pos: start}, nil
		default:
			s.advance()
			return token{kind: tokOther, pos: start}, nil
		}
	}
}

// skipComment skips a "// ..." comment to the end of its line or a
// "/* ... */" comment.
func (s *jaasScanner) skipComment() error {
	start := s.pos()
	s.advance() // '/'
	switch s.peek() {
	case '/':
		for r := s.peek(); r >= 0 && r != '\n' && r != '\r'; r = s.peek() {
			s.advance()
		}
		return nil
	case '*':
		s.advance()
		for {
			if s.off >= len(s.src) {
				return errAt(start, "unterminated /* comment")
			}
			if strings.HasPrefix(s.src[s.off:], "*/") {
				s.advance()
				s.advance()
				return nil
			}
			s.advance()
		}
	default:
		return errAt(start, "unexpected '/' (quote values that contain '/': Kafka reads a lone '/' as a comment to the end of the line)")
	}
}

// quoted scans a string in single or double quotes with StreamTokenizer's
// escapes: \a \b \f \n \r \t \v, octal \ooo (up to \377), and a backslash
// before any other character stands for that character.
func (s *jaasScanner) quoted() (token, error) {
	start := s.pos()
	q := s.peek()
	s.advance()
	var b strings.Builder
	for {
		r := s.peek()
		switch r {
		case -1, '\n', '\r':
			return token{}, errAt(start, "unterminated quoted string (a quoted string ends on its line; write a newline as \\n)")
		case q:
			s.advance()
			return token{kind: tokQuoted, text: b.String(), pos: start}, nil
		case '\\':
			s.advance()
			c := s.peek()
			if c < 0 {
				return token{}, errAt(start, "unterminated quoted string (ends with a backslash)")
			}
			s.advance()
			switch c {
			case 'a':
				c = 0x7
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'v':
				c = '\v'
			case '0', '1', '2', '3', '4', '5', '6', '7':
				// Up to three octal digits, three only when the first
				// is 0..3, so the code stays under \400.
				first := c
				c -= '0'
				for n := 1; n < 3; n++ {
					d := s.peek()
					if d < '0' || d > '7' || (n == 2 && first > '3') {
						break
					}
					s.advance()
					c = c<<3 + (d - '0')
				}
			}
			b.WriteRune(c)
		default:
			s.advance()
			b.WriteRune(r)
		}
	}
}
