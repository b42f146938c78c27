package main

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// deserializer turns a record's key, value or header value into the text
// Kafka's DefaultMessageFormatter prints with one of Kafka's Deserializers
// (key.deserializer, value.deserializer, headers.deserializer): the Kafka
// Streams quickstart reads its counts with LongDeserializer.
type deserializer func([]byte) (string, error)

const serializationPackage = "org.apache.kafka.common.serialization."

// deserializers are Kafka's Deserializers by class name (the package may
// be left out).
var deserializers = map[string]deserializer{
	"StringDeserializer": func(b []byte) (string, error) { return string(b), nil },
	// Java prints a byte[] as "[B@<hash>"; the bytes are more use.
	"ByteArrayDeserializer":  func(b []byte) (string, error) { return string(b), nil },
	"ByteBufferDeserializer": func(b []byte) (string, error) { return string(b), nil },
	"BytesDeserializer":      func(b []byte) (string, error) { return javaBytesString(b), nil },
	"ShortDeserializer": fixedSize("ShortDeserializer", 2, func(b []byte) string {
		return strconv.Itoa(int(int16(binary.BigEndian.Uint16(b))))
	}),
	"IntegerDeserializer": fixedSize("IntegerDeserializer", 4, func(b []byte) string {
		return strconv.Itoa(int(int32(binary.BigEndian.Uint32(b))))
	}),
	"LongDeserializer": fixedSize("LongDeserializer", 8, func(b []byte) string {
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(b)), 10)
	}),
	"FloatDeserializer": fixedSize("FloatDeserializer", 4, func(b []byte) string {
		return javaFloatString(float64(math.Float32frombits(binary.BigEndian.Uint32(b))), 32)
	}),
	"DoubleDeserializer": fixedSize("DoubleDeserializer", 8, func(b []byte) string {
		return javaFloatString(math.Float64frombits(binary.BigEndian.Uint64(b)), 64)
	}),
	"UUIDDeserializer": func(b []byte) (string, error) {
		// Java's UUID.fromString, then toString: five groups of hex
		// digits, printed lower-case.
		s := strings.ToLower(string(b))
		groups := strings.Split(s, "-")
		if len(groups) != 5 || len(groups[0]) != 8 || len(groups[1]) != 4 || len(groups[2]) != 4 || len(groups[3]) != 4 || len(groups[4]) != 12 {
			return "", fmt.Errorf("error deserializing UUID %q", b)
		}
		for _, g := range groups {
			if _, err := strconv.ParseUint(g, 16, 64); err != nil {
				return "", fmt.Errorf("error deserializing UUID %q", b)
			}
		}
		return s, nil
	},
	"VoidDeserializer": func([]byte) (string, error) {
		return "", fmt.Errorf("data should be null for a VoidDeserializer")
	},
}

// deserializerFor returns the deserializer a formatter property names.
func deserializerFor(prop, class string) (deserializer, error) {
	class = strings.TrimSpace(class)
	if d, ok := deserializers[strings.TrimPrefix(class, serializationPackage)]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("--property %s=%s: Keel cannot load Java classes; it has Kafka's %s (in %s)",
		prop, class, strings.Join(slices.Sorted(maps.Keys(deserializers)), ", "), strings.TrimSuffix(serializationPackage, "."))
}

// fixedSize is a deserializer of numbers of n bytes, refusing other sizes
// as Kafka's does.
func fixedSize(name string, n int, f func([]byte) string) deserializer {
	return func(b []byte) (string, error) {
		if len(b) != n {
			return "", fmt.Errorf("size of data received by %s is not %d", name, n)
		}
		return f(b), nil
	}
}

// javaBytesString is Kafka's Bytes.toString: printable ASCII as it is,
// every other byte (and the backslash) as \xHH.
func javaBytesString(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		if c >= ' ' && c <= '~' && c != '\\' {
			s.WriteByte(c)
		} else {
			fmt.Fprintf(&s, "\\x%02X", c)
		}
	}
	return s.String()
}

// javaFloatString is Java's Double.toString (bits 64) or Float.toString
// (bits 32): the shortest digits that read back as f, in plain notation
// with at least one digit after the point from 10^-3 up to 10^7, in
// computerized scientific notation (1.0E7, 1.25E-4) outside it.
func javaFloatString(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	if a := math.Abs(f); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, bits), "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
