package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelstream/keel/metadata"
)

// The records keel format --add-scram writes come back as written; the
// same records again are accepted, other ones refused; a damaged file is
// an error, never half a batch; the file is its owner's only.
func TestBootstrapRecordsFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	if recs, err := ReadBootstrapRecords(dir); err != nil || recs != nil {
		t.Fatalf("unformatted dir: %v %v", recs, err)
	}
	alice := &metadata.UserScramCredentialRecord{Name: "alice", Mechanism: metadata.ScramSHA256, Salt: []byte("s"), StoredKey: []byte("k1"), ServerKey: []byte("k2"), Iterations: 4096}
	if err := WriteBootstrapRecords(dir, []metadata.Record{alice}); err != nil {
		t.Fatal(err)
	}
	if err := WriteBootstrapRecords(dir, []metadata.Record{alice}); err != nil {
		t.Fatalf("formatting again with the same records: %v", err)
	}
	bob := *alice
	bob.Name = "bob"
	if err := WriteBootstrapRecords(dir, []metadata.Record{&bob}); err == nil || !strings.Contains(err.Error(), "other bootstrap records") {
		t.Fatalf("other records: %v", err)
	}
	recs, err := ReadBootstrapRecords(dir)
	if err != nil || len(recs) != 1 {
		t.Fatalf("read: %v %v", recs, err)
	}
	if got := recs[0].(*metadata.UserScramCredentialRecord); got.Name != "alice" || string(got.ServerKey) != "k2" || got.Iterations != 4096 {
		t.Fatalf("read back %+v", got)
	}
	path := filepath.Join(dir, BootstrapRecordsFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi.Mode(), err)
	}

	data, _ := os.ReadFile(path)
	data[len(data)-2] ^= 1
	os.WriteFile(path, data, 0o600)
	if _, err := ReadBootstrapRecords(dir); !errors.Is(err, metadata.ErrCorruptRecord) || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt file: %v", err)
	}
	os.WriteFile(path, data[:2], 0o600)
	if _, err := ReadBootstrapRecords(dir); !errors.Is(err, metadata.ErrCorruptRecord) {
		t.Fatalf("truncated file: %v", err)
	}
}
