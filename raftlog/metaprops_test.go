package raftlog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelstream/keel/metadata"
)

func TestMetaPropertiesFormatAndCheck(t *testing.T) {
	base := t.TempDir()
	d1, d2 := filepath.Join(base, "a"), filepath.Join(base, "b")
	cluster := NewClusterID()

	if _, err := EnsureMetaProperties([]string{d1, d2}, cluster, 1, false); !errors.Is(err, ErrNotFormatted) {
		t.Fatalf("unformatted without format: %v", err)
	}
	got, err := EnsureMetaProperties([]string{d1, d2}, cluster, 1, true)
	if err != nil || got != cluster {
		t.Fatalf("format: %q, %v", got, err)
	}
	raw, err := os.ReadFile(filepath.Join(d1, MetaPropertiesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"version=1\n", "cluster.id=" + cluster + "\n", "node.id=1\n", "directory.id="} {
		if !strings.Contains(string(raw), line) {
			t.Fatalf("meta.properties lacks %q:\n%s", line, raw)
		}
	}
	m1, _ := ReadMetaProperties(d1)
	m2, _ := ReadMetaProperties(d2)
	if m1.DirectoryID == m2.DirectoryID || m1.DirectoryID == metadata.ZeroUuid {
		t.Fatal("log dirs share a directory.id")
	}

	// A started server learns the cluster id from disk.
	if got, err := EnsureMetaProperties([]string{d1, d2}, "", 1, false); err != nil || got != cluster {
		t.Fatalf("read back: %q, %v", got, err)
	}
	if _, err := EnsureMetaProperties([]string{d1}, NewClusterID(), 1, true); !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("other cluster: %v", err)
	}
	if _, err := EnsureMetaProperties([]string{d1}, cluster, 2, true); !errors.Is(err, ErrNodeIDMismatch) {
		t.Fatalf("other node: %v", err)
	}

	// A dir added later is formatted with the cluster id of the others.
	d3 := filepath.Join(base, "c")
	if got, err := EnsureMetaProperties([]string{d1, d3}, "", 1, true); err != nil || got != cluster {
		t.Fatalf("new dir: %q, %v", got, err)
	}
	if m3, err := ReadMetaProperties(d3); err != nil || m3.ClusterID != cluster || m3.NodeID != 1 {
		t.Fatalf("new dir: %+v, %v", m3, err)
	}

	// Dirs that disagree are refused before anything is written.
	d4 := filepath.Join(base, "d")
	if err := WriteMetaProperties(d4, MetaProperties{Version: 1, ClusterID: NewClusterID(), NodeID: 1}); err != nil {
		t.Fatal(err)
	}
	d5 := filepath.Join(base, "e")
	if _, err := EnsureMetaProperties([]string{d1, d4, d5}, "", 1, true); !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("disagreeing dirs: %v", err)
	}
	if _, err := ReadMetaProperties(d5); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused format wrote %s: %v", d5, err)
	}
}

func TestMetaPropertiesDevDefaultAndBadInput(t *testing.T) {
	dir := t.TempDir()
	id, err := EnsureMetaProperties([]string{dir}, "", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metadata.ParseUuid(id); err != nil {
		t.Fatalf("generated cluster id %q: %v", id, err)
	}
	if _, err := EnsureMetaProperties([]string{t.TempDir()}, "not a uuid", 1, true); err == nil {
		t.Fatal("formatted with an invalid cluster id")
	}

	// Kafka's own file (Java properties, any key order, comments) reads.
	kdir := t.TempDir()
	kafka := "#\n#Thu Jan 01 00:00:00 UTC 2026\nnode.id=3\ndirectory.id=" + metadata.NewUuid().String() +
		"\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
	if err := os.WriteFile(filepath.Join(kdir, MetaPropertiesFile), []byte(kafka), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := EnsureMetaProperties([]string{kdir}, "MkU3OEVBNTcwNTJENDM2Qk", 3, false); err != nil || got != "MkU3OEVBNTcwNTJENDM2Qk" {
		t.Fatalf("kafka file: %q, %v", got, err)
	}

	v0 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v0, MetaPropertiesFile), []byte("version=0\nbroker.id=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMetaProperties(v0); err == nil || !strings.Contains(err.Error(), "version=1") {
		t.Fatalf("ZooKeeper-era meta.properties: %v", err)
	}
}
