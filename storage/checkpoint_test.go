package storage

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestTopicPartitionDirNameRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		tp   TopicPartition
		dir  string
	}{
		{"simple topic", TopicPartition{"orders", 3}, "orders-3"},
		{"topic containing dashes splits at the last dash", TopicPartition{"my-app-events", 12}, "my-app-events-12"},
		{"internal topic", TopicPartition{"__consumer_offsets", 49}, "__consumer_offsets-49"},
		{"topic ending in digits", TopicPartition{"t-1", 0}, "t-1-0"},
		{"largest partition", TopicPartition{"t", 2147483647}, "t-2147483647"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tp.DirName(); got != tt.dir {
				t.Fatalf("DirName = %q, want %q", got, tt.dir)
			}
			if got := tt.tp.String(); got != tt.dir {
				t.Fatalf("String = %q, want %q", got, tt.dir)
			}
			got, err := ParseTopicPartitionDir(tt.dir)
			if err != nil || got != tt.tp {
				t.Fatalf("ParseTopicPartitionDir(%q) = %v, %v; want %v", tt.dir, got, err, tt.tp)
			}
		})
	}
}

func TestParseTopicPartitionDirRejectsMalformedNames(t *testing.T) {
	for _, name := range []string{
		"", "orders", "orders-", "-3", "orders-x", "orders-+1", "orders-03",
		"orders-2147483648", "orders-1.abc-delete", "orders- 1", "-",
	} {
		if tp, err := ParseTopicPartitionDir(name); err == nil {
			t.Errorf("ParseTopicPartitionDir(%q) = %v, want error", name, tp)
		}
	}
}

func TestOffsetCheckpointWriteReadRoundTrip(t *testing.T) {
	f := NewOffsetCheckpointFile(filepath.Join(t.TempDir(), "recovery-point-offset-checkpoint"))
	want := map[TopicPartition]int64{
		{"b-topic", 10}: 7,
		{"a", 2}:        1 << 40,
		{"a", 10}:       0,
		{"a", 1}:        -1,
	}
	if err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's format, sorted for deterministic files.
	const wantFile = "0\n4\na 1 -1\na 2 1099511627776\na 10 0\nb-topic 10 7\n"
	if string(b) != wantFile {
		t.Fatalf("file = %q, want %q", b, wantFile)
	}
	got, err := f.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Read = %v, want %v", got, want)
	}
	// Overwrite with fewer entries; no temporary file is left behind.
	if err := f.Write(map[TopicPartition]int64{}); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Read(); err != nil || len(got) != 0 {
		t.Fatalf("Read after empty Write = %v, %v", got, err)
	}
	if _, err := os.Stat(f.Path() + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

func TestOffsetCheckpointReadMissingFileIsEmpty(t *testing.T) {
	got, err := NewOffsetCheckpointFile(filepath.Join(t.TempDir(), "missing")).Read()
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Read = %v, %v; want empty map, nil", got, err)
	}
}

func TestOffsetCheckpointReadIgnoresStaleTemporaryFile(t *testing.T) {
	// A crash between writing .tmp and renaming it leaves the old file intact.
	dir := t.TempDir()
	f := NewOffsetCheckpointFile(filepath.Join(dir, "replication-offset-checkpoint"))
	if err := f.Write(map[TopicPartition]int64{{"t", 0}: 5}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Path()+".tmp", []byte("0\n1\nt 0"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Read(); err != nil || got[TopicPartition{"t", 0}] != 5 {
		t.Fatalf("Read = %v, %v", got, err)
	}
	if err := f.Write(map[TopicPartition]int64{{"t", 0}: 6}); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Read(); err != nil || got[TopicPartition{"t", 0}] != 6 {
		t.Fatalf("Read after rewrite = %v, %v", got, err)
	}
}

func TestOffsetCheckpointReadAcceptsKafkaVariants(t *testing.T) {
	tests := []struct {
		name string
		file string
		want map[TopicPartition]int64
	}{
		{"empty file", "", map[TopicPartition]int64{}},
		{"version line only", "0\n", map[TopicPartition]int64{}},
		{"zero entries", "0\n0\n", map[TopicPartition]int64{}},
		{"no trailing newline", "0\n1\nt 0 5", map[TopicPartition]int64{{"t", 0}: 5}},
		{"CRLF line endings", "0\r\n1\r\nt 0 5\r\n", map[TopicPartition]int64{{"t", 0}: 5}},
		{"several spaces between fields", "0\n1\nt  0\t5\n", map[TopicPartition]int64{{"t", 0}: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := NewOffsetCheckpointFile(path).Read()
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("Read = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestOffsetCheckpointReadRejectsMalformedFiles(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		wantLine string
	}{
		{"unknown version", "1\n0\n", "line 1"},
		{"non-numeric version", "v0\n0\n", "line 1"},
		{"blank first line", "\n", "line 1"},
		{"negative count", "0\n-1\n", "line 2"},
		{"non-numeric count", "0\nfour\n", "line 2"},
		{"fewer entries than the count", "0\n2\nt 0 5\n", "line 4"},
		{"more entries than the count", "0\n1\nt 0 5\nt 1 6\n", "line 4"},
		{"missing offset field", "0\n1\nt 0\n", "line 3"},
		{"extra field", "0\n1\nt 0 5 9\n", "line 3"},
		{"negative partition", "0\n1\nt -1 5\n", "line 3"},
		{"partition beyond int32", "0\n1\nt 2147483648 5\n", "line 3"},
		{"non-numeric offset", "0\n1\nt 0 five\n", "line 3"},
		{"partition listed twice", "0\n2\nt 0 5\nt 0 6\n", "line 4"},
		{"blank entry line", "0\n2\nt 0 5\n\nt 1 5\n", "line 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := NewOffsetCheckpointFile(path).Read()
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("Read = %v, %v; want ErrCorruptCheckpoint", got, err)
			}
			if !strings.Contains(err.Error(), tt.wantLine+":") || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s and the path", err, tt.wantLine)
			}
		})
	}
}

func TestOffsetCheckpointWriteRejectsUnreadableTopics(t *testing.T) {
	f := NewOffsetCheckpointFile(filepath.Join(t.TempDir(), "cp"))
	for _, tp := range []TopicPartition{{"", 0}, {"a b", 0}, {"a\nb", 0}, {"t", -1}} {
		if err := f.Write(map[TopicPartition]int64{tp: 1}); err == nil {
			t.Errorf("Write(%q) succeeded", tp)
		}
	}
	if _, err := os.Stat(f.Path()); !os.IsNotExist(err) {
		t.Fatalf("a rejected Write created the file: %v", err)
	}
}

func TestOffsetCheckpointWriteFailsInMissingDirectory(t *testing.T) {
	f := NewOffsetCheckpointFile(filepath.Join(t.TempDir(), "gone", "cp"))
	if err := f.Write(map[TopicPartition]int64{{"t", 0}: 1}); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func TestOffsetCheckpointConcurrentWritersLeaveOneWholeFile(t *testing.T) {
	f := NewOffsetCheckpointFile(filepath.Join(t.TempDir(), "cp"))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				m := map[TopicPartition]int64{}
				for p := range i + 1 {
					m[TopicPartition{"t", int32(p)}] = int64(j)
				}
				if err := f.Write(m); err != nil {
					t.Error(err)
				}
				if _, err := f.Read(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if _, err := f.Read(); err != nil {
		t.Fatal(err)
	}
}

// FuzzOffsetCheckpointRead feeds untrusted bytes to the offset checkpoint
// parser: it must never panic, must reject with ErrCorruptCheckpoint, and
// whatever it accepts must survive a write/read round trip unchanged.
func FuzzOffsetCheckpointRead(f *testing.F) {
	for _, seed := range []string{
		"", "0\n", "0\n0\n", "0\n1\nt 0 5\n", "0\n2\na-b 1 -1\n__consumer_offsets 49 9223372036854775807\n",
		"1\n0\n", "0\n-5\n", "0\n99999999999\n", "0\r\n1\r\nt 0 5\r\n", "0\n1\nt 0\n", "0\n2\nt 0 5\nt 0 5\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		offsets, err := parseOffsetCheckpoint(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("error %v does not wrap ErrCorruptCheckpoint", err)
			}
			return
		}
		out, err := formatOffsetCheckpoint(offsets)
		if err != nil {
			t.Fatalf("accepted %q but cannot write it back: %v", data, err)
		}
		again, err := parseOffsetCheckpoint(out)
		if err != nil || !maps.Equal(again, offsets) {
			t.Fatalf("round trip of %q: %v, %v; want %v", data, again, err, offsets)
		}
	})
}

// FuzzLeaderEpochCheckpointRead does the same for the leader-epoch
// checkpoint, through OpenLeaderEpochCache.
func FuzzLeaderEpochCheckpointRead(f *testing.F) {
	for _, seed := range []string{"", "0\n2\n0 0\n3 100\n", "0\n1\n-1 5\n", "0\n2\n5 10\n2 20\n", "0\n1\n2147483648 0\n"} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "leader-epoch-checkpoint")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := OpenLeaderEpochCache(path)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("error %v does not wrap ErrCorruptCheckpoint", err)
			}
			return
		}
		entries := c.Entries()
		for i := 1; i < len(entries); i++ {
			if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset {
				t.Fatalf("loaded non-monotonic entries %v from %q", entries, data)
			}
		}
	})
}
