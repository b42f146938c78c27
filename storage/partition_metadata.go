package storage

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PartitionMetadataFile is the file in each partition directory that names
// the topic id the log belongs to, as Kafka's (KIP-516):
//
//	version: 0
//	topic_id: <the id, base64url without padding>
//
// A broker that finds a log whose topic id differs from the metadata's
// holds a stray replica of a deleted (maybe re-created) topic.
const PartitionMetadataFile = "partition.metadata"

// TopicID returns the topic id recorded with the log, and whether one is.
//
// Concurrency: safe from any goroutine.
func (l *Log) TopicID() (id [16]byte, ok bool) {
	l.topicMu.Lock()
	defer l.topicMu.Unlock()
	return l.topicID, l.hasTopicID
}

// SetTopicID records the topic id with the log (a no-op when it already
// is). The file is written to a temporary name and renamed, but not
// fsynced, as Kafka flushes it lazily: after a crash it may be missing, and
// a missing id is adopted from the metadata again.
//
// Concurrency: safe from any goroutine.
//
// A failure here does not take the dir offline: the write may race with the
// partition's deletion, which renames the directory away.
func (l *Log) SetTopicID(id [16]byte) error {
	if err := l.offlineErr(); err != nil {
		return err
	}
	l.topicMu.Lock()
	defer l.topicMu.Unlock()
	if l.hasTopicID && l.topicID == id {
		return nil
	}
	path := filepath.Join(l.path(), PartitionMetadataFile)
	data := fmt.Sprintf("version: 0\ntopic_id: %s\n", base64.RawURLEncoding.EncodeToString(id[:]))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	l.topicID, l.hasTopicID = id, true
	return nil
}

// loadTopicID reads the partition metadata file of a log being opened. A
// missing file is no id; an unreadable one is logged and treated the same.
func (l *Log) loadTopicID() {
	path := filepath.Join(l.path(), PartitionMetadataFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		var id [16]byte
		if id, err = parsePartitionMetadata(data); err == nil {
			l.topicID, l.hasTopicID = id, true
			return
		}
	}
	l.logger.Warn("ignoring an unreadable partition metadata file", "path", path, "error", err)
}

// parsePartitionMetadata parses the file's "key: value" lines.
func parsePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return id, fmt.Errorf("malformed line %q", line)
		}
		fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if fields["version"] != "0" {
		return id, fmt.Errorf("unsupported version %q", fields["version"])
	}
	raw, err := base64.RawURLEncoding.DecodeString(fields["topic_id"])
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("malformed topic id %q", fields["topic_id"])
	}
	copy(id[:], raw)
	return id, nil
}
