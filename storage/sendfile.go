package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// FileRegion is a byte range of an open segment file, handed to the network
// layer so that records go file→socket without a user-space copy (Kafka's
// FileRecords / TransferableRecords). A fetch response is written as header
// bytes followed by regions.
//
// The region does not own File: the log must keep the file open until the
// write returns, or accept that a write racing with segment deletion fails
// (it never sends another file's bytes: the descriptor is pinned while in
// use, see WriteRegions).
type FileRegion struct {
	File     *os.File
	Position int64
	Length   int64
}

// maxSendfileChunk bounds each sendfile(2) call, as Go's own net package
// does (4 MiB): a call reading a cold page cache blocks in the kernel until
// its pages are read, and smaller calls let the write deadline and other
// writers get a look in between.
const maxSendfileChunk = 4 << 20

// copyBufferSize is the size of CopyRegions' pooled buffers. Large enough
// that per-syscall overhead is small next to the copy itself (see
// BenchmarkServeRegions), small enough to pool one per in-flight fetch.
const copyBufferSize = 256 << 10

var copyBufferPool = sync.Pool{New: func() any {
	b := make([]byte, copyBufferSize)
	return &b
}}

// validate rejects regions no log would produce.
func (r FileRegion) validate() error {
	if r.File == nil {
		return errors.New("nil file")
	}
	if r.Position < 0 || r.Length < 0 {
		return fmt.Errorf("invalid range position %d length %d", r.Position, r.Length)
	}
	return nil
}

// regionError adds the region's identity to err.
func regionError(op string, i int, r FileRegion, err error) error {
	name := "<nil>"
	if r.File != nil {
		name = r.File.Name()
	}
	return fmt.Errorf("%s region %d (%s at %d, %d bytes): %w", op, i, name, r.Position, r.Length, err)
}

// WriteRegions writes the regions, in order, to w and returns the bytes
// written. When w exposes its descriptor (syscall.Conn: *net.TCPConn,
// *net.UnixConn) each region goes file→socket with sendfile(2), through
// RawConn.Write, so the Go netpoller parks the goroutine on EAGAIN and the
// connection's write deadline applies; partial writes are resumed. Other
// writers (a *tls.Conn, a bufio.Writer) get a copy through
// io.Copy(w, io.NewSectionReader(...)).
//
// A region reaching past the end of its file (the segment was truncated
// concurrently) fails with an error wrapping io.ErrUnexpectedEOF once the
// bytes that do exist are sent; the connection must then be closed, since
// the response framing promised more. Deadline expiry returns an error
// wrapping os.ErrDeadlineExceeded.
//
// Concurrency: call from the connection's single response-writer goroutine.
// It holds w's write lock for each region (so other writers on w cannot
// interleave mid-region) and blocks until the region is sent or the write
// deadline expires. The region's file descriptor is pinned while in use: a
// concurrent Close of the segment file makes the write fail (or completes
// after it), but can never redirect it to a reused descriptor number.
func WriteRegions(w io.Writer, regions []FileRegion) (int64, error) {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return copyRegionsIO(w, regions)
	}
	dst, err := sc.SyscallConn()
	if err != nil {
		return copyRegionsIO(w, regions)
	}
	var total int64
	for i, r := range regions {
		if err := r.validate(); err != nil {
			return total, regionError("sendfile", i, r, err)
		}
		if r.Length == 0 {
			continue
		}
		n, err := sendfileRegion(dst, r)
		total += n
		if err != nil {
			return total, regionError("sendfile", i, r, err)
		}
	}
	return total, nil
}

// sendfileRegion sends one region with sendfile(2) into dst.
func sendfileRegion(dst syscall.RawConn, r FileRegion) (int64, error) {
	src, err := r.File.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var sendErr error
	// Control pins the source descriptor for the whole transfer, so a
	// concurrent Close of the segment file cannot free the number for reuse.
	ctlErr := src.Control(func(sfd uintptr) {
		offset := r.Position
		remaining := r.Length
		writeErr := dst.Write(func(dfd uintptr) bool {
			for remaining > 0 {
				// sendfile advances offset itself, leaving the file's own
				// position untouched (segment files are shared by readers).
				n, err := unix.Sendfile(int(dfd), int(sfd), &offset, int(min(remaining, maxSendfileChunk)))
				if n > 0 {
					written += int64(n)
					remaining -= int64(n)
				}
				switch {
				case err == unix.EAGAIN:
					return false // socket buffer full: wait for writability
				case err == unix.EINTR:
					continue
				case err != nil:
					sendErr = os.NewSyscallError("sendfile", err)
					return true
				case n == 0:
					sendErr = fmt.Errorf("file ends before offset %d: %w", offset, io.ErrUnexpectedEOF)
					return true
				}
			}
			return true
		})
		if sendErr == nil {
			sendErr = writeErr
		}
	})
	if ctlErr != nil {
		return written, ctlErr
	}
	return written, sendErr
}

// copyRegionsIO is WriteRegions' fallback for writers without a descriptor.
func copyRegionsIO(w io.Writer, regions []FileRegion) (int64, error) {
	var total int64
	for i, r := range regions {
		if err := r.validate(); err != nil {
			return total, regionError("copy", i, r, err)
		}
		n, err := io.Copy(w, io.NewSectionReader(r.File, r.Position, r.Length))
		total += n
		if err == nil && n < r.Length {
			err = fmt.Errorf("file ends at offset %d: %w", r.Position+n, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return total, regionError("copy", i, r, err)
		}
	}
	return total, nil
}

// CopyRegions writes the regions, in order, to w with pread(2) into a pooled
// buffer and w.Write, never sendfile: the path for TLS listeners (the bytes
// must pass through user space to be encrypted) and the baseline that
// BenchmarkServeRegions compares sendfile against. It returns the bytes
// written; short files and deadlines fail as in WriteRegions.
//
// Concurrency: call from the connection's single response-writer goroutine;
// blocks until done or until w's write deadline expires. Reads use ReadAt,
// so concurrent readers of the same file are unaffected.
func CopyRegions(w io.Writer, regions []FileRegion) (int64, error) {
	bp := copyBufferPool.Get().(*[]byte)
	defer copyBufferPool.Put(bp)
	buf := *bp
	var total int64
	for i, r := range regions {
		if err := r.validate(); err != nil {
			return total, regionError("copy", i, r, err)
		}
		for off, end := r.Position, r.Position+r.Length; off < end; {
			n, err := r.File.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			if n > 0 {
				m, werr := w.Write(buf[:n])
				total += int64(m)
				off += int64(m)
				if werr != nil {
					return total, regionError("copy", i, r, werr)
				}
			}
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("file ends at offset %d: %w", off, io.ErrUnexpectedEOF)
			}
			if err != nil {
				return total, regionError("copy", i, r, err)
			}
		}
	}
	return total, nil
}

// Len is the region's length in bytes. With WriteTo it makes *FileRegion a
// network.Region, so a fetch response hands segment ranges to the
// connection writer without copying them (a pointer receiver: boxing
// &info.Regions[i] in the interface allocates nothing).
//
// Safe to call from any goroutine.
func (r *FileRegion) Len() int64 { return r.Length }

// WriteTo writes the region to w exactly as WriteRegions writes one region:
// sendfile(2) when w exposes its descriptor, a copy otherwise. It returns
// the bytes written; anything short of Len comes with an error.
//
// Concurrency: as WriteRegions (the connection's writer goroutine).
func (r *FileRegion) WriteTo(w io.Writer) (int64, error) {
	if err := r.validate(); err != nil {
		return 0, regionError("write", 0, *r, err)
	}
	if r.Length == 0 {
		return 0, nil
	}
	if sc, ok := w.(syscall.Conn); ok {
		if dst, err := sc.SyscallConn(); err == nil {
			n, err := sendfileRegion(dst, *r)
			if err != nil {
				return n, regionError("sendfile", 0, *r, err)
			}
			return n, nil
		}
	}
	n, err := io.Copy(w, io.NewSectionReader(r.File, r.Position, r.Length))
	if err == nil && n < r.Length {
		err = fmt.Errorf("file ends at offset %d: %w", r.Position+n, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return n, regionError("copy", 0, *r, err)
	}
	return n, nil
}
