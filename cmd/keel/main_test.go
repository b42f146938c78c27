package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
)

// run executes the CLI in-process, as the binary would, and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	app.ErrWriter = &out
	err := app.Run(append([]string{"keel"}, args...))
	return out.String(), err
}

func writeLog(t *testing.T, dir string) {
	t.Helper()
	l, err := storage.OpenLog(filepath.Join(dir, "orders-0"), storage.OpenOptions{
		Config: storage.LogConfig{IndexIntervalBytes: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		opts := record.DefaultBatchOptions()
		opts.Compression = record.CompressionSnappy
		b := record.NewBatchBuilder(opts)
		b.Append(int64(1000+i), []byte("key"), []byte("hello"), []record.RecordHeader{{Key: "h", Value: []byte("v")}})
		b.Append(int64(1001+i), nil, []byte("world"), nil)
		batch, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(batch, storage.AppendOptions{LeaderEpoch: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDumpLogPrintsBatchesRecordsAndIndexes(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir)
	seg := filepath.Join(dir, "orders-0", "00000000000000000000")
	out, err := run(t, "dump-log", "--files", seg+".log", "--print-data-log", "--files", seg+".index", "--files", seg+".timeindex")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"baseOffset: 0 lastOffset: 1 count: 2",
		"baseOffset: 4 lastOffset: 5 count: 2",
		"partitionLeaderEpoch: 4",
		"compresscodec: snappy",
		"isvalid: true",
		"| offset: 5 CreateTime: 1003 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: world",
		"| offset: 0 CreateTime: 1000 keySize: 3 valueSize: 5 sequence: -1 headerKeys: [h] key: key payload: hello",
		"offset: 2 position:",
		"timestamp: 1003 offset: 4",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dump-log output lacks %q:\n%s", want, out)
		}
	}
}

func TestDumpLogReportsATornTail(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir)
	path := filepath.Join(dir, "orders-0", "00000000000000000000.log")
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-5); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "dump-log", "--files", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "invalid bytes at the end") || strings.Count(out, "baseOffset:") != 2 {
		t.Fatalf("output:\n%s", out)
	}
}
