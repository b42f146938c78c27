package metadata

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
)

// Uuid is Kafka's 128-bit id (topic ids, incarnation ids, cluster ids).
// It prints as Kafka prints it: URL-safe base64 without padding.
type Uuid [16]byte

// ZeroUuid is Kafka's Uuid.ZERO_UUID: "no id".
var ZeroUuid Uuid

// The reserved directory ids of KIP-858 (Kafka's DirectoryId): the log dir
// of a replica whose broker has not said where it is. None is a real log
// dir, which is why NewUuid never returns one of the first 100 ids.
var (
	// DirMigrating is a replica in some log dir of a broker that does not
	// report dirs (a record from before directory assignment): it counts
	// as online.
	DirMigrating = ZeroUuid
	// DirUnassigned is a new replica of a broker with several log dirs,
	// until the broker says which dir it created the replica in: online.
	DirUnassigned = Uuid{15: 1}
	// DirLost is a replica in a log dir that is gone: offline.
	DirLost = Uuid{15: 2}
)

// reservedDir reports whether u is one of the 100 ids KIP-858 reserves.
func reservedDir(u Uuid) bool {
	for _, b := range u[:15] {
		if b != 0 {
			return false
		}
	}
	return u[15] < 100
}

// sortedDirs is a sorted copy of dirs (nil for nil).
func sortedDirs(dirs []Uuid) []Uuid {
	out := slices.Clone(dirs)
	slices.SortFunc(out, func(a, b Uuid) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// NewUuid returns a random id, never zero and never starting with '-' when
// printed (Kafka avoids that so ids are safe on command lines).
func NewUuid() Uuid {
	for {
		var u Uuid
		_, _ = rand.Read(u[:])
		if s := u.String(); !reservedDir(u) && s[0] != '-' {
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
