package network

import "net"

// replayConn is a net.Conn whose first reads return bytes already read from
// it (the peeked Raft marker and whatever arrived with it).
type replayConn struct {
	net.Conn
	prefix []byte
}

// NewReplayConn returns c with prefix put back in front of its input: reads
// return prefix first, then c's own bytes. Everything else (writes,
// deadlines, Close, addresses) is c's.
//
// Concurrency: like any net.Conn, one reader at a time.
func NewReplayConn(c net.Conn, prefix []byte) net.Conn {
	if len(prefix) == 0 {
		return c
	}
	return &replayConn{Conn: c, prefix: prefix}
}

// Read returns the replayed bytes first.
func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
