package integration

import (
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AnsweredWithin sends an ApiVersions request on conn and reports whether
// an answer starts within wait. A listener at one of its connection limits
// (max.connections, a listener's own, a creation rate) holds a new
// connection unanswered in its listen backlog, as Kafka's acceptor does.
func AnsweredWithin(conn net.Conn, wait time.Duration) bool {
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
		return false
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	_, err := conn.Read(make([]byte, 4))
	return err == nil
}
