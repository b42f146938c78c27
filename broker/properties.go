package broker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// ReadPropertiesFile is ParseProperties of the file at path. Its errors
// name the file (os.Open's do already).
func ReadPropertiesFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props, _, err := ParseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// ParseProperties reads a Java .properties file (server.properties) the way
// java.util.Properties.load does, for the subset Kafka configs use: '#' and
// '!' comments, '=' or ':' or whitespace between key and value, leading
// whitespace ignored, a trailing backslash continuing the line, and the
// escapes \t \n \r \f \\ \= \: \# \! and \uXXXX. Later keys override earlier
// ones. The line numbers of keys are returned for error messages.
func ParseProperties(r io.Reader) (map[string]string, map[string]int, error) {
	props := map[string]string{}
	lines := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		startLine := lineNo
		line := strings.TrimLeftFunc(sc.Text(), unicode.IsSpace)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines: an odd number of trailing backslashes.
		for endsWithContinuation(line) && sc.Scan() {
			lineNo++
			line = line[:len(line)-1] + strings.TrimLeftFunc(sc.Text(), unicode.IsSpace)
		}
		if endsWithContinuation(line) {
			line = line[:len(line)-1]
		}
		key, value, err := splitProperty(line)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", startLine, err)
		}
		props[key] = value
		lines[key] = startLine
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read properties: %w", err)
	}
	return props, lines, nil
}

func endsWithContinuation(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty separates key and value at the first unescaped '=', ':' or
// whitespace, then unescapes both.
func splitProperty(line string) (string, string, error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	key := line[:end]
	rest := strings.TrimLeft(line[end:], " \t\f")
	if len(rest) > 0 && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescapeProperty(key)
	if err != nil {
		return "", "", err
	}
	v, err := unescapeProperty(rest)
	if err != nil {
		return "", "", err
	}
	return k, v, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uXXXX escape in %q", s)
			}
			var r rune
			for _, h := range s[i+1 : i+5] {
				r <<= 4
				switch {
				case h >= '0' && h <= '9':
					r |= h - '0'
				case h >= 'a' && h <= 'f':
					r |= h - 'a' + 10
				case h >= 'A' && h <= 'F':
					r |= h - 'A' + 10
				default:
					return "", fmt.Errorf("malformed \\uXXXX escape in %q", s)
				}
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
