package storage

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// regionWriter is the signature shared by WriteRegions and CopyRegions.
type regionWriter func(io.Writer, []FileRegion) (int64, error)

var regionWriters = []struct {
	name  string
	write regionWriter
}{
	{"WriteRegions", WriteRegions},
	{"CopyRegions", CopyRegions},
}

// writeTestFile creates a file of n pseudo-random bytes and returns it open
// for reading, with its content.
func writeTestFile(t testing.TB, dir, name string, n int, seed uint64) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// receiveAll reads conn to EOF on its own goroutine; the returned function
// waits for the bytes.
func receiveAll(conn net.Conn) func() []byte {
	done := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		done <- b
	}()
	return func() []byte { return <-done }
}

func expectedBytes(regions []FileRegion, contents map[*os.File][]byte) []byte {
	var want []byte
	for _, r := range regions {
		want = append(want, contents[r.File][r.Position:r.Position+r.Length]...)
	}
	return want
}

func TestRegionWritersSendExactBytes(t *testing.T) {
	dir := t.TempDir()
	small, smallData := writeTestFile(t, dir, "0.log", 100_000, 1)
	large, largeData := writeTestFile(t, dir, "1.log", 6<<20+12345, 2)
	contents := map[*os.File][]byte{small: smallData, large: largeData}
	layouts := []struct {
		name    string
		regions []FileRegion
	}{
		{"no regions", nil},
		{"one whole file", []FileRegion{{small, 0, 100_000}}},
		{"several regions of one file, out of order and overlapping", []FileRegion{
			{small, 50_000, 10_000}, {small, 0, 1}, {small, 55_000, 45_000}, {small, 99_999, 1}}},
		{"regions from several files", []FileRegion{{small, 10, 20_000}, {large, 1 << 20, 300_000}, {small, 0, 10}}},
		{"zero-length region between others", []FileRegion{{small, 0, 100}, {large, 500, 0}, {small, 100, 100}}},
		{"only a zero-length region", []FileRegion{{small, 100_000, 0}}},
		{"large region beyond one sendfile chunk", []FileRegion{{large, 7, 6<<20 + 12000}}},
	}
	for _, w := range regionWriters {
		for _, l := range layouts {
			t.Run(w.name+"/"+l.name, func(t *testing.T) {
				server, client := tcpPair(t)
				received := receiveAll(client)
				n, err := w.write(server, l.regions)
				if err != nil {
					t.Fatal(err)
				}
				server.CloseWrite()
				got := received()
				want := expectedBytes(l.regions, contents)
				if n != int64(len(want)) || !bytes.Equal(got, want) {
					t.Fatalf("wrote %d, received %d bytes; want %d identical bytes", n, len(got), len(want))
				}
				// The file offset is untouched: readers share segment files.
				if pos, _ := small.Seek(0, io.SeekCurrent); pos != 0 {
					t.Fatalf("file offset moved to %d", pos)
				}
			})
		}
	}
	t.Run("WriteRegions to a regular file", func(t *testing.T) {
		regions := []FileRegion{{small, 10, 1000}, {large, 0, 5 << 20}}
		dst, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer dst.Close()
		n, err := WriteRegions(dst, regions)
		got, rerr := os.ReadFile(dst.Name())
		if want := expectedBytes(regions, contents); err != nil || rerr != nil || n != int64(len(want)) || !bytes.Equal(got, want) {
			t.Fatalf("n=%d err=%v/%v, bytes equal %v", n, err, rerr, bytes.Equal(got, want))
		}
	})
	t.Run("WriteRegions to a writer without a descriptor copies", func(t *testing.T) {
		regions := []FileRegion{{large, 3, 5 << 20}, {small, 0, 0}, {small, 9, 900}}
		var buf bytes.Buffer
		n, err := WriteRegions(&buf, regions)
		if want := expectedBytes(regions, contents); err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("n=%d err=%v, bytes equal %v", n, err, bytes.Equal(buf.Bytes(), want))
		}
	})
}

func TestRegionWritersFailOnShortFile(t *testing.T) {
	dir := t.TempDir()
	f, _ := writeTestFile(t, dir, "0.log", 10_000, 3)
	tests := []struct {
		name      string
		regions   []FileRegion
		wantBytes int
	}{
		{"region running past the end sends what exists", []FileRegion{{f, 9_000, 5_000}}, 1_000},
		{"region starting past the end sends nothing", []FileRegion{{f, 20_000, 10}}, 0},
		{"short region after a good one", []FileRegion{{f, 0, 100}, {f, 9_990, 20}}, 110},
	}
	for _, w := range append(regionWriters, struct {
		name  string
		write regionWriter
	}{"WriteRegions-fallback", func(w io.Writer, r []FileRegion) (int64, error) {
		return WriteRegions(struct{ io.Writer }{w}, r)
	}}) {
		for _, tt := range tests {
			t.Run(w.name+"/"+tt.name, func(t *testing.T) {
				server, client := tcpPair(t)
				received := receiveAll(client)
				n, err := w.write(server, tt.regions)
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
				}
				server.Close()
				got := received()
				if n != int64(tt.wantBytes) || len(got) != tt.wantBytes {
					t.Fatalf("wrote %d, received %d; want %d", n, len(got), tt.wantBytes)
				}
			})
		}
	}
}

func TestRegionWritersRejectInvalidRegions(t *testing.T) {
	f, _ := writeTestFile(t, t.TempDir(), "0.log", 100, 4)
	closed, _ := writeTestFile(t, t.TempDir(), "1.log", 100, 5)
	closed.Close()
	for _, w := range regionWriters {
		for name, r := range map[string]FileRegion{
			"nil file":          {nil, 0, 10},
			"negative position": {f, -1, 10},
			"negative length":   {f, 0, -10},
			"closed file":       {closed, 0, 10},
		} {
			t.Run(w.name+"/"+name, func(t *testing.T) {
				server, _ := tcpPair(t)
				if n, err := w.write(server, []FileRegion{r}); err == nil || n != 0 {
					t.Fatalf("n=%d err=%v, want an error and nothing written", n, err)
				}
			})
		}
	}
}

func TestRegionWritersRespectWriteDeadline(t *testing.T) {
	// A sparse 64 MiB file: more than loopback socket buffers hold, so with
	// a peer that never reads the write must stop at the deadline.
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	for _, w := range regionWriters {
		t.Run(w.name, func(t *testing.T) {
			server, _ := tcpPair(t) // the client end is never read
			if err := server.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			n, err := w.write(server, []FileRegion{{f, 0, 64 << 20}})
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("err = %v, want os.ErrDeadlineExceeded", err)
			}
			if n <= 0 || n >= 64<<20 {
				t.Fatalf("wrote %d bytes before the deadline, want a partial write", n)
			}
		})
	}
}

// BenchmarkServeRegions serves a 64 MiB segment file, already in the page
// cache, in 1 MiB regions over loopback TCP to a reader goroutine that
// discards what it reads.
//
//   - sendfile: WriteRegions, sendfile(2) per region.
//   - copy: CopyRegions, pread(2) into a 256 KiB pooled buffer + write(2).
//   - iocopy-baseline: io.Copy(*net.TCPConn, *os.File) of the whole file.
//     Go's TCPConn.ReadFrom recognises the *os.File and itself uses
//     sendfile(2) (4 MiB per call), so this baseline measures the standard
//     library's zero-copy path, not a user-space copy.
//   - iocopy-32k: io.Copy with both ends wrapped so that neither ReaderFrom
//     nor WriterTo applies: a plain read/write loop through io.Copy's 32 KiB
//     buffer, the naive user-space copy.
func BenchmarkServeRegions(b *testing.B) {
	const fileSize, regionSize = 64 << 20, 1 << 20
	f, _ := writeTestFile(b, b.TempDir(), "0.log", fileSize, 6)
	regions := make([]FileRegion, 0, fileSize/regionSize)
	for pos := int64(0); pos < fileSize; pos += regionSize {
		regions = append(regions, FileRegion{f, pos, regionSize})
	}
	serve := map[string]func(w *net.TCPConn) error{
		"sendfile": func(w *net.TCPConn) error { _, err := WriteRegions(w, regions); return err },
		"copy":     func(w *net.TCPConn) error { _, err := CopyRegions(w, regions); return err },
		"iocopy-baseline": func(w *net.TCPConn) error {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			_, err := io.Copy(w, f)
			return err
		},
		"iocopy-32k": func(w *net.TCPConn) error {
			_, err := io.Copy(struct{ io.Writer }{w}, io.NewSectionReader(f, 0, fileSize))
			return err
		},
	}
	for _, name := range []string{"sendfile", "copy", "iocopy-baseline", "iocopy-32k"} {
		b.Run(name, func(b *testing.B) {
			server, client := tcpPair(b)
			drained := make(chan int64, 1)
			go func() {
				buf := make([]byte, 1<<20)
				var n int64
				for {
					m, err := client.Read(buf)
					n += int64(m)
					if err != nil {
						drained <- n
						return
					}
				}
			}()
			b.SetBytes(fileSize)
			b.ResetTimer()
			for range b.N {
				if err := serve[name](server); err != nil {
					b.Fatal(err)
				}
			}
			server.CloseWrite()
			got := <-drained
			b.StopTimer()
			if got != int64(b.N)*fileSize {
				b.Fatalf("reader got %d bytes, want %d", got, int64(b.N)*fileSize)
			}
		})
	}
}
