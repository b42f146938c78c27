package raftlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keelstream/keel/metadata"
)

// MetaPropertiesFile is the name of the file that marks a formatted log dir,
// as in Kafka.
const MetaPropertiesFile = "meta.properties"

// MetaProperties is the content of one log dir's meta.properties in
// Kafka's KRaft format (version=1): cluster.id, node.id and the directory's
// own directory.id (KIP-858).
type MetaProperties struct {
	Version     int
	ClusterID   string
	NodeID      int32
	DirectoryID metadata.Uuid
}

// NewClusterID returns a fresh cluster id: a random Kafka Uuid in base64url,
// like `kafka-storage.sh random-uuid`.
func NewClusterID() string { return metadata.NewUuid().String() }

// EnsureMetaProperties checks that every log dir belongs to this cluster and
// node, formatting the unformatted ones if format is set, and returns the
// cluster id in effect.
//
// clusterID may be empty: the id already on disk is used (a server learns
// its cluster id from meta.properties, as Kafka's does), or, when formatting
// dirs none of which is formatted yet, a new one is made (the single-node dev
// default). `keel format --cluster-id ID` passes the id and format=true.
//
// A dir naming another cluster.id fails with ErrClusterIDMismatch, another
// node.id with ErrNodeIDMismatch, dirs disagreeing among themselves with
// ErrClusterIDMismatch, and an unformatted dir without format with
// ErrNotFormatted. Nothing is written unless every formatted dir checks out.
// Files are written atomically (temp file, fsync, rename, fsync dir).
func EnsureMetaProperties(logDirs []string, clusterID string, nodeID int32, format bool) (string, error) {
	if len(logDirs) == 0 {
		return "", errors.New("meta.properties: no log dirs")
	}
	var unformatted []string
	found := "" // the cluster id on disk, and the dir it came from
	foundIn := ""
	for _, dir := range logDirs {
		mp, err := ReadMetaProperties(dir)
		if errors.Is(err, fs.ErrNotExist) {
			unformatted = append(unformatted, dir)
			continue
		}
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, MetaPropertiesFile)
		if clusterID != "" && mp.ClusterID != clusterID {
			return "", fmt.Errorf("%s: %w: the dir belongs to cluster %s, this node is configured for cluster %s", path, ErrClusterIDMismatch, mp.ClusterID, clusterID)
		}
		if found != "" && mp.ClusterID != found {
			return "", fmt.Errorf("%s: %w: cluster %s, but %s says cluster %s", path, ErrClusterIDMismatch, mp.ClusterID, filepath.Join(foundIn, MetaPropertiesFile), found)
		}
		if mp.NodeID != nodeID {
			return "", fmt.Errorf("%s: %w: the dir belongs to node %d, this is node %d (node.id)", path, ErrNodeIDMismatch, mp.NodeID, nodeID)
		}
		found, foundIn = mp.ClusterID, dir
	}
	if clusterID == "" {
		clusterID = found
	}
	if len(unformatted) == 0 {
		return clusterID, nil
	}
	if !format {
		return "", fmt.Errorf("%w: no %s in %s (run `keel format --cluster-id ID`)", ErrNotFormatted, MetaPropertiesFile, strings.Join(unformatted, ", "))
	}
	if clusterID == "" {
		clusterID = NewClusterID()
	} else if _, err := metadata.ParseUuid(clusterID); err != nil {
		return "", fmt.Errorf("cluster id %q is not a Kafka Uuid (22 characters of base64url, as `kafka-storage.sh random-uuid` prints): %w", clusterID, err)
	}
	for _, dir := range unformatted {
		mp := MetaProperties{Version: 1, ClusterID: clusterID, NodeID: nodeID, DirectoryID: metadata.NewUuid()}
		if err := WriteMetaProperties(dir, mp); err != nil {
			return "", err
		}
	}
	return clusterID, nil
}

// ReadMetaProperties reads dir/meta.properties. A missing file returns an
// error matching fs.ErrNotExist. Only version 1 (KRaft) is accepted.
func ReadMetaProperties(dir string) (MetaProperties, error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return MetaProperties{}, fmt.Errorf("read %s: %w", path, err)
	}
	props, err := parseProperties(data)
	if err != nil {
		return MetaProperties{}, fmt.Errorf("read %s: %w", path, err)
	}
	var mp MetaProperties
	if mp.Version, err = strconv.Atoi(props["version"]); err != nil || mp.Version != 1 {
		return MetaProperties{}, fmt.Errorf("read %s: version %q: only version=1 (KRaft) is supported", path, props["version"])
	}
	if mp.ClusterID = props["cluster.id"]; mp.ClusterID == "" {
		return MetaProperties{}, fmt.Errorf("read %s: cluster.id was not found", path)
	}
	id, err := strconv.ParseInt(props["node.id"], 10, 32)
	if err != nil {
		return MetaProperties{}, fmt.Errorf("read %s: node.id %q: %w", path, props["node.id"], err)
	}
	mp.NodeID = int32(id)
	if s, ok := props["directory.id"]; ok {
		if mp.DirectoryID, err = metadata.ParseUuid(s); err != nil {
			return MetaProperties{}, fmt.Errorf("read %s: directory.id: %w", path, err)
		}
	}
	return mp, nil
}

// WriteMetaProperties writes dir/meta.properties atomically, creating dir
// if needed, in the layout Kafka's storage tool writes (a Java properties
// file with a date comment).
func WriteMetaProperties(dir string, mp MetaProperties) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "#\n#%s\n", time.Now().UTC().Format("Mon Jan 02 15:04:05 MST 2006"))
	fmt.Fprintf(&b, "cluster.id=%s\n", mp.ClusterID)
	if mp.DirectoryID != metadata.ZeroUuid {
		fmt.Fprintf(&b, "directory.id=%s\n", mp.DirectoryID)
	}
	fmt.Fprintf(&b, "node.id=%d\n", mp.NodeID)
	fmt.Fprintf(&b, "version=%d\n", max(mp.Version, 1))
	path := filepath.Join(dir, MetaPropertiesFile)
	if err := writeFileAtomic(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	return nil
}

// writeFileAtomic replaces path with data (mode perm), synced, through a
// temporary file and a rename.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// parseProperties reads the subset of java.util.Properties syntax Kafka's
// files use: key=value or key:value lines, # and ! comments, blank lines,
// whitespace around keys and values.
func parseProperties(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		i := strings.IndexAny(s, "=:")
		if i < 0 {
			return nil, fmt.Errorf("line %d: %q is not key=value", line, s)
		}
		out[strings.TrimSpace(s[:i])] = strings.TrimSpace(s[i+1:])
	}
	return out, sc.Err()
}

// FormatEmptyLogDirs formats each of dirs that has no meta.properties and
// is empty (a disk replaced after it failed, or a log dir added to
// log.dirs) as a log dir of formatted dir from's cluster and node, with a
// new directory id, as a Kafka broker formats new empty log dirs at start
// (KIP-858). A dir that is missing is created; a "lost+found" (what mkfs
// leaves) does not count against empty. A dir that is not empty is left
// alone: EnsureMetaProperties then refuses it, as a dir that may hold
// another node's data.
//
// It returns the dirs it formatted, and those it can use neither way, with
// the error (Kafka's errorLogDirs): a meta.properties that cannot be read or
// does not parse, a dir that cannot be listed, created or formatted. A
// broker starts without them, their replicas offline.
func FormatEmptyLogDirs(from string, dirs []string) (formatted []string, unusable map[string]error, err error) {
	src, err := ReadMetaProperties(from)
	if err != nil {
		return nil, nil, err
	}
	unusable = map[string]error{}
	for _, dir := range dirs {
		if _, err := ReadMetaProperties(dir); !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				unusable[dir] = err
			}
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			unusable[dir] = fmt.Errorf("list log dir %s: %w", dir, err)
			continue
		}
		if slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() != "lost+found" }) {
			continue
		}
		mp := MetaProperties{Version: 1, ClusterID: src.ClusterID, NodeID: src.NodeID, DirectoryID: metadata.NewUuid()}
		if err := WriteMetaProperties(dir, mp); err != nil {
			unusable[dir] = err
			continue
		}
		formatted = append(formatted, dir)
	}
	return formatted, unusable, nil
}

// LogDirIDs returns the directory id of each formatted log dir (KIP-858),
// by path as given. A dir formatted without one (by a Keel before
// directory ids) is given one, written to its meta.properties, as Kafka
// does at start. Two dirs with the same id (one copied from the other)
// are an error: the controller could not tell their replicas apart.
func LogDirIDs(dirs []string) (map[string]metadata.Uuid, error) {
	ids := map[string]metadata.Uuid{}
	owner := map[metadata.Uuid]string{}
	for _, dir := range dirs {
		mp, err := ReadMetaProperties(dir)
		if err != nil {
			return nil, err
		}
		if mp.DirectoryID == metadata.ZeroUuid {
			mp.DirectoryID = metadata.NewUuid()
			if err := WriteMetaProperties(dir, mp); err != nil {
				return nil, err
			}
		}
		if other, dup := owner[mp.DirectoryID]; dup {
			return nil, fmt.Errorf("log dirs %s and %s have the same directory.id %s: one was copied from the other; give the copy a new directory.id in its %s (or, if it holds nothing, delete its %s to have it formatted afresh)",
				other, dir, mp.DirectoryID, MetaPropertiesFile, MetaPropertiesFile)
		}
		owner[mp.DirectoryID] = dir
		ids[dir] = mp.DirectoryID
	}
	return ids, nil
}
