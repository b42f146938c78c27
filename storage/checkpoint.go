package storage

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// checkpointVersion is the only version of Kafka's checkpoint text format.
const checkpointVersion = 0

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", Kafka's usual rendering.
//
// Safe to call from any goroutine (TopicPartition is a value).
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// DirName returns the name of the partition's directory inside a log
// directory: "topic-partition", as in Kafka.
//
// Safe to call from any goroutine.
func (tp TopicPartition) DirName() string { return tp.String() }

// ParseTopicPartitionDir parses a partition directory name ("my-topic-3")
// back into its topic and partition. Like Kafka's Log.parseTopicPartitionName
// it splits at the last '-', since topic names may themselves contain '-'.
// The partition must be a canonical non-negative decimal int32 (so the name
// round-trips through DirName) and the topic must be non-empty. It does not
// understand Kafka's "-delete"/"-future" directory suffixes: strip those
// first.
//
// Safe to call from any goroutine.
func ParseTopicPartitionDir(name string) (TopicPartition, error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, fmt.Errorf("parse partition directory %q: want topic-partition", name)
	}
	topic, part := name[:i], name[i+1:]
	p, err := strconv.ParseInt(part, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != part {
		return TopicPartition{}, fmt.Errorf("parse partition directory %q: partition %q is not a non-negative integer", name, part)
	}
	return TopicPartition{Topic: topic, Partition: int32(p)}, nil
}

// writeFileAtomic replaces path with data so that a crash at any moment
// leaves either the old or the new content, never a mix: it writes
// path+".tmp", fsyncs it, renames it over path and fsyncs the directory so
// the rename itself is durable (Kafka's CheckpointFile does the same through
// Utils.atomicMoveWithFallback). A stale .tmp from an earlier crash is simply
// overwritten.
func writeFileAtomic(path string, data []byte) error {
	return replaceFile(path, data, true)
}

// replaceFile writes data to path+".tmp" and renames it over path; with
// durable, it fsyncs the file before the rename and the directory after.
func replaceFile(path string, data []byte, durable bool) (err error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("fsync %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it survive a crash.
func syncDir(dir string) error {
	if err := fsyncPath(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// fsyncPath opens path, fsyncs and closes it.
func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// corruptCheckpointf returns an error wrapping ErrCorruptCheckpoint that
// names the 1-based line at fault.
func corruptCheckpointf(line int, format string, args ...any) error {
	return fmt.Errorf("line %d: %s: %w", line, fmt.Sprintf(format, args...), ErrCorruptCheckpoint)
}

// parseCheckpoint parses Kafka's checkpoint text format, as its
// CheckpointFile reader does: line 1 the version (0), line 2 the entry count,
// then exactly that many entry lines of `fields` whitespace-separated fields,
// each handed to entry with its line number. An empty file, or one holding
// only the version line, has no entries (Kafka reads both as empty). Errors
// wrap ErrCorruptCheckpoint and name the line.
func parseCheckpoint(data []byte, fields int, entry func(line int, f []string) error) error {
	if len(data) == 0 {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the newline ending the last line
	}
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	version, err := strconv.Atoi(lines[0])
	if err != nil {
		return corruptCheckpointf(1, "version %q is not an integer", lines[0])
	}
	if version != checkpointVersion {
		return corruptCheckpointf(1, "unsupported version %d, want %d", version, checkpointVersion)
	}
	if len(lines) < 2 {
		return nil
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count < 0 {
		return corruptCheckpointf(2, "entry count %q is not a non-negative integer", lines[1])
	}
	for i, l := range lines[2:] {
		lineNo := i + 3
		if i >= count {
			return corruptCheckpointf(lineNo, "more entries than the count %d", count)
		}
		f := strings.Fields(l)
		if len(f) != fields {
			return corruptCheckpointf(lineNo, "want %d fields, got %q", fields, l)
		}
		if err := entry(lineNo, f); err != nil {
			return err
		}
	}
	if found := len(lines) - 2; found != count {
		return corruptCheckpointf(len(lines)+1, "found %d entries, the count says %d", found, count)
	}
	return nil
}

// formatCheckpoint renders the header and the given entry lines.
func formatCheckpoint(lines []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(lines))
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readCheckpointFile reads path; a missing file reads as empty.
func readCheckpointFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	return data, nil
}

// OffsetCheckpointFile is one of the per-log-directory offset checkpoint
// files (recovery-point-offset-checkpoint, replication-offset-checkpoint,
// log-start-offset-checkpoint) in Kafka's text format:
//
//	0
//	<entry count>
//	<topic> <partition> <offset>
//	...
//
// Concurrency: any goroutine may call Write and Read; an internal mutex
// serialises them, so concurrent writers never share the temporary file and
// the last Write to return is what the file holds. Both block on disk I/O
// (Write fsyncs twice).
type OffsetCheckpointFile struct {
	path string
	mu   sync.Mutex
}

// NewOffsetCheckpointFile returns the checkpoint file at path. Nothing is
// read or created until Read or Write. Safe to call from any goroutine.
func NewOffsetCheckpointFile(path string) *OffsetCheckpointFile {
	return &OffsetCheckpointFile{path: path}
}

// Path returns the checkpoint file's path.
//
// Safe to call from any goroutine.
func (f *OffsetCheckpointFile) Path() string { return f.path }

// Write atomically replaces the file with offsets (see writeFileAtomic),
// entries sorted by topic then partition so equal maps give equal files.
// Topics that are empty or contain whitespace are rejected: the format could
// not be read back.
//
// Safe to call from any goroutine; blocks until the file and its directory
// are fsynced.
func (f *OffsetCheckpointFile) Write(offsets map[TopicPartition]int64) error {
	data, err := formatOffsetCheckpoint(offsets)
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", f.path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return writeFileAtomic(f.path, data)
}

// Read returns the checkpointed offsets. A missing file gives an empty map
// and no error (a new log directory); a malformed one gives an error wrapping
// ErrCorruptCheckpoint that names the line, as does a partition listed
// twice.
//
// Safe to call from any goroutine; blocks on disk I/O.
func (f *OffsetCheckpointFile) Read() (map[TopicPartition]int64, error) {
	f.mu.Lock()
	data, err := readCheckpointFile(f.path)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	offsets, err := parseOffsetCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", f.path, err)
	}
	return offsets, nil
}

// parseOffsetCheckpoint parses the bytes of an offset checkpoint file.
func parseOffsetCheckpoint(data []byte) (map[TopicPartition]int64, error) {
	offsets := make(map[TopicPartition]int64)
	err := parseCheckpoint(data, 3, func(line int, f []string) error {
		p, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil || p < 0 {
			return corruptCheckpointf(line, "partition %q is not a non-negative int32", f[1])
		}
		off, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return corruptCheckpointf(line, "offset %q is not an int64", f[2])
		}
		tp := TopicPartition{Topic: f[0], Partition: int32(p)}
		if _, dup := offsets[tp]; dup {
			return corruptCheckpointf(line, "%s listed twice", tp)
		}
		offsets[tp] = off
		return nil
	})
	if err != nil {
		return nil, err
	}
	return offsets, nil
}

// formatOffsetCheckpoint renders offsets sorted by topic, then partition.
func formatOffsetCheckpoint(offsets map[TopicPartition]int64) ([]byte, error) {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		if tp.Topic == "" || strings.ContainsFunc(tp.Topic, unicode.IsSpace) {
			return nil, fmt.Errorf("topic %q cannot be checkpointed", tp.Topic)
		}
		if tp.Partition < 0 {
			return nil, fmt.Errorf("partition %s cannot be checkpointed", tp)
		}
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	lines := make([]string, len(tps))
	for i, tp := range tps {
		lines[i] = tp.Topic + " " + strconv.FormatInt(int64(tp.Partition), 10) + " " + strconv.FormatInt(offsets[tp], 10)
	}
	return formatCheckpoint(lines), nil
}

// readEpochCheckpoint reads a leader-epoch checkpoint (`epoch startOffset`
// lines); a missing file reads as no entries. Errors wrap
// ErrCorruptCheckpoint when the content is malformed.
func readEpochCheckpoint(path string) ([]EpochEntry, error) {
	data, err := readCheckpointFile(path)
	if err != nil {
		return nil, err
	}
	var entries []EpochEntry
	err = parseCheckpoint(data, 2, func(line int, f []string) error {
		epoch, err := strconv.ParseInt(f[0], 10, 32)
		if err != nil {
			return corruptCheckpointf(line, "epoch %q is not an int32", f[0])
		}
		start, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return corruptCheckpointf(line, "start offset %q is not an int64", f[1])
		}
		entries = append(entries, EpochEntry{Epoch: int32(epoch), StartOffset: start})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	return entries, nil
}

// writeEpochCheckpoint atomically replaces the leader-epoch checkpoint.
func writeEpochCheckpoint(path string, entries []EpochEntry) error {
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = strconv.FormatInt(int64(e.Epoch), 10) + " " + strconv.FormatInt(e.StartOffset, 10)
	}
	return writeFileAtomic(path, formatCheckpoint(lines))
}
