package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTopicIDSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-3")
	l := openTestLog(t, dir, OpenOptions{})
	if _, ok := l.TopicID(); ok {
		t.Fatal("a new log has a topic id")
	}
	id := [16]byte{0xfb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff}
	if err := l.SetTopicID(id); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, PartitionMetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's format: Uuid.toString is base64url without padding.
	if want := "version: 0\ntopic_id: -wECAwQFBgcICQoLDA0O_w\n"; string(data) != want {
		t.Fatalf("partition.metadata %q, want %q", data, want)
	}
	l.Close()
	l = openTestLog(t, dir, OpenOptions{})
	if got, ok := l.TopicID(); !ok || got != id {
		t.Fatalf("topic id after reopen %x %v", got, ok)
	}
	l.Close()

	// An unreadable file is no id, not a failure to open.
	for _, bad := range []string{"garbage", "version: 1\ntopic_id: -wECAwQFBgcICQoLDA0O_w\n", "version: 0\ntopic_id: short\n"} {
		if err := os.WriteFile(filepath.Join(dir, PartitionMetadataFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		l = openTestLog(t, dir, OpenOptions{})
		if _, ok := l.TopicID(); ok {
			t.Fatalf("topic id from %q", bad)
		}
		l.Close()
	}
}
