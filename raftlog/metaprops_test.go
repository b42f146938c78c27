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

// TestFormatEmptyLogDirsAndDirectoryIDs: a new empty log dir (a replaced
// disk) is formatted like the formatted ones with an id of its own; a dir
// with data is left alone; one that cannot be read or created is reported
// unusable; a dir formatted without a directory.id is given
// one; two dirs with one id are refused (KIP-858).
func TestFormatEmptyLogDirsAndDirectoryIDs(t *testing.T) {
	base := t.TempDir()
	meta, empty, mkfs, data, missing := filepath.Join(base, "meta"), filepath.Join(base, "empty"),
		filepath.Join(base, "mkfs"), filepath.Join(base, "data"), filepath.Join(base, "missing")
	cluster := NewClusterID()
	if _, err := EnsureMetaProperties([]string{meta}, cluster, 4, true); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{empty, filepath.Join(mkfs, "lost+found"), filepath.Join(data, "orders-0")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Dirs that cannot be used (a failed disk): a file where the dir
	// should be, a meta.properties that does not parse, a dir that
	// cannot be created (under a file).
	notDir, garbled, uncreatable := filepath.Join(base, "notdir"), filepath.Join(base, "garbled"), filepath.Join(base, "notdir", "sub")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(garbled, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(garbled, MetaPropertiesFile), []byte("\x00\x01 not properties"), 0o644); err != nil {
		t.Fatal(err)
	}
	formatted, unusable, err := FormatEmptyLogDirs(meta, []string{meta, empty, mkfs, data, missing, notDir, garbled, uncreatable})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{empty, mkfs, missing}; strings.Join(formatted, ",") != strings.Join(want, ",") {
		t.Fatalf("formatted %v, want %v", formatted, want)
	}
	if len(unusable) != 3 || unusable[notDir] == nil || unusable[garbled] == nil || unusable[uncreatable] == nil {
		t.Fatalf("unusable %v, want %s, %s and %s", unusable, notDir, garbled, uncreatable)
	}
	if _, err := ReadMetaProperties(data); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dir with data was formatted: %v", err)
	}
	if _, err := EnsureMetaProperties([]string{meta, empty, mkfs, missing}, "", 4, false); err != nil {
		t.Fatalf("the formatted dirs do not check out: %v", err)
	}
	ids, err := LogDirIDs([]string{meta, empty, mkfs, missing})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[metadata.Uuid]bool{}
	for d, id := range ids {
		if id == metadata.ZeroUuid || seen[id] {
			t.Fatalf("dir %s: id %s zero or repeated (%v)", d, id, ids)
		}
		seen[id] = true
	}

	// A dir formatted before directory ids is given one, kept from then on.
	mp, _ := ReadMetaProperties(empty)
	mp.DirectoryID = metadata.ZeroUuid
	if err := WriteMetaProperties(empty, mp); err != nil {
		t.Fatal(err)
	}
	again, err := LogDirIDs([]string{empty})
	if err != nil || again[empty] == metadata.ZeroUuid {
		t.Fatalf("no id given: %v %v", again, err)
	}
	if mp, _ := ReadMetaProperties(empty); mp.DirectoryID != again[empty] {
		t.Fatalf("the id given was not written: %s, %s", mp.DirectoryID, again[empty])
	}

	// A dir copied from another has its id: refused.
	mp, _ = ReadMetaProperties(meta)
	if err := WriteMetaProperties(mkfs, mp); err != nil {
		t.Fatal(err)
	}
	if _, err := LogDirIDs([]string{meta, mkfs}); err == nil || !strings.Contains(err.Error(), "same directory.id") {
		t.Fatalf("two dirs with one id: %v", err)
	}
}
