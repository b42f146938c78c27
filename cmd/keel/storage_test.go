package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
)

// keel storage is kafka-storage.sh: Kafka's quickstart formats a node with
// its random-uuid and format subcommands, and info reports the dirs.
func TestStorageQuickstartAndInfo(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "kraft-combined-logs")
	conf := filepath.Join(dir, "server.properties")
	props := "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.bootstrap.servers=localhost:9093\n" +
		"listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\nlog.dirs=" + data + "\n"
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "storage", "random-uuid")
	id := strings.TrimSpace(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metadata.ParseUuid(id); err != nil {
		t.Fatalf("random-uuid printed %q: %v", out, err)
	}
	if out, err := run(t, "storage", "format", "--standalone", "-t", id, "-c", conf); err != nil || !strings.Contains(out, "Formatted "+data+" with cluster.id "+id) {
		t.Fatalf("storage format: %v\n%s", err, out)
	}

	// One formatted dir: its metadata, no problem; the exit code through
	// the binary.
	mp, err := raftlog.ReadMetaProperties(data)
	if err != nil {
		t.Fatal(err)
	}
	want := "Found log directory:\n  " + data + "\n\nFound metadata: {cluster.id=" + id + ", directory.id=" + mp.DirectoryID.String() + ", node.id=1, version=1}\n\n"
	if r := keel(t, "", "", "storage", "info", "-c", conf); r.exit != 0 || r.stdout != want {
		t.Fatalf("storage info: exit %d, stdout\n%s\nwant\n%s", r.exit, r.stdout, want)
	}

	// Problems: a dir not formatted, one missing, a file, another node's.
	empty, missing, file, other := filepath.Join(dir, "empty"), filepath.Join(dir, "missing"), conf, filepath.Join(dir, "other")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := raftlog.WriteMetaProperties(other, raftlog.MetaProperties{Version: 1, ClusterID: id, NodeID: 2}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if storageInfo(&b, []string{other, missing, data, file, empty}) {
		t.Fatalf("storage info found no problem:\n%s", b.String())
	}
	wantRe := regexp.MustCompile(`^Found log directories:\n  ` + regexp.QuoteMeta(empty) + `\n  ` + regexp.QuoteMeta(data) + `\n  ` + regexp.QuoteMeta(other) + `\n\n` +
		`Found metadata: \{cluster.id=` + id + `, directory.id=\S+, node.id=1, version=1\}\n\n` +
		`Found problems:\n  ` + regexp.QuoteMeta(empty) + ` is not formatted.\n  ` + regexp.QuoteMeta(missing) + ` does not exist\n  ` +
		`Mismatched node IDs between storage directories.\n  ` + regexp.QuoteMeta(file) + ` is not a directory\n\n$`)
	if !wantRe.MatchString(b.String()) {
		t.Fatalf("storage info:\n%s", b.String())
	}
	if r := keel(t, "", "", "storage", "info", "-c", conf, "--override", "log.dirs="+data+","+empty); r.exit != 1 || !strings.Contains(r.stdout, empty+" is not formatted.") {
		t.Fatalf("storage info with an unformatted dir: exit %d, stdout\n%s", r.exit, r.stdout)
	}
}
