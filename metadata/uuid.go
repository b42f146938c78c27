package metadata

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// Uuid is Kafka's 128-bit id (topic ids, incarnation ids, cluster ids).
// It prints as Kafka prints it: URL-safe base64 without padding.
type Uuid [16]byte

// ZeroUuid is Kafka's Uuid.ZERO_UUID: "no id".
var ZeroUuid Uuid

// NewUuid returns a random id, never zero and never starting with '-' when
// printed (Kafka avoids that so ids are safe on command lines).
func NewUuid() Uuid {
	for {
		var u Uuid
		_, _ = rand.Read(u[:])
		if s := u.String(); u != ZeroUuid && s[0] != '-' {
			return u
		}
	}
}

// String is the base64url form, e.g. "MkU3OEVBNTcwNTJENDM2Qk".
func (u Uuid) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ParseUuid parses the base64url form.
func ParseUuid(s string) (Uuid, error) {
	var u Uuid
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return u, fmt.Errorf("invalid uuid %q", s)
	}
	copy(u[:], b)
	return u, nil
}

// MarshalText encodes the id as its base64url string (JSON, dump-log).
func (u Uuid) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText parses the base64url string.
func (u *Uuid) UnmarshalText(b []byte) error {
	v, err := ParseUuid(string(b))
	if err != nil {
		return err
	}
	*u = v
	return nil
}
