package network

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// TLSListener is the TLS side of an SSL listener (Kafka's SslFactory and
// its principal builder).
type TLSListener struct {
	// Config is the server's TLS configuration: its certificate (the
	// keystore), the client CAs (the truststore) and ClientAuth
	// (ssl.client.auth).
	Config *tls.Config
	// Principal names the client of a connection that presented a
	// verified certificate chain (leaf first): the principal's name,
	// without "User:" (ssl.principal.mapping.rules). An error fails the
	// connection, as a failed authentication does in Kafka. Nil names it
	// by the leaf's subject.
	Principal func(chain []*x509.Certificate) (string, error)
}

// tlsHandshakeTimeout bounds a TLS handshake. Kafka bounds it only by
// connections.max.idle.ms; a connection that has not finished its
// handshake in this long is not a client worth keeping a goroutine for.
const tlsHandshakeTimeout = 10 * time.Second

// handshake completes the TLS handshake of a connection on an SSL listener
// and sets its principal from the client's certificate, if it gave one
// (ANONYMOUS otherwise, as in Kafka). Reader goroutine, before the first
// request is read: nothing else reads info yet.
func (c *conn) handshake(tc *tls.Conn, l *TLSListener) error {
	timeout := tlsHandshakeTimeout
	if idle := c.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		timeout = min(timeout, idle)
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	state := tc.ConnectionState()
	if len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return nil
	}
	chain := state.VerifiedChains[0]
	name := chain[0].Subject.String()
	if l.Principal != nil {
		var err error
		if name, err = l.Principal(chain); err != nil {
			return fmt.Errorf("principal of client certificate %q: %w", chain[0].Subject, err)
		}
	}
	c.info.Principal = "User:" + name
	return nil
}

// peerGone reports whether a handshake failed because the peer closed the
// connection or stalled, rather than on a TLS failure (a protocol version,
// a certificate) worth a log line naming the client.
func peerGone(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// copyBufferSize is the buffer a file region is copied through on a TLS
// connection: four full TLS records.
const copyBufferSize = 64 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// copyWriter is what a region is written to on a connection that cannot
// take sendfile (TLS encrypts in user space): an io.ReaderFrom, so a
// storage.FileRegion's io.Copy reads the file through a pooled buffer
// instead of allocating one per region.
type copyWriter struct{ w io.Writer }

func (c copyWriter) Write(p []byte) (int, error) { return c.w.Write(p) }

// ReadFrom copies r to the connection through a pooled buffer.
func (c copyWriter) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w, werr := c.w.Write(buf[:n])
			total += int64(w)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
