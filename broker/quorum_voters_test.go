package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveDescribeQuorum answers every request on a loopback listener with
// resp, as a controller would answer DescribeQuorum v2, and returns the
// listener's address.
func serveDescribeQuorum(t *testing.T, resp *kmsg.DescribeQuorumResponse) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					frame, err := readTestFrame(r)
					if err != nil {
						return
					}
					resp.SetVersion(int16(binary.BigEndian.Uint16(frame[2:])))
					out := append(make([]byte, 4), frame[4:8]...) // size, correlation id
					out = append(out, 0)                          // no header tags (v2 is flexible)
					out = resp.AppendTo(out)
					binary.BigEndian.PutUint32(out, uint32(len(out)-4))
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// readTestFrame reads one size-prefixed Kafka request frame, for the
// loopback servers that script a peer's answers.
func readTestFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r, frame)
	return frame, err
}

func quorumNode(id int32, listeners ...kmsg.DescribeQuorumResponseNodeListener) kmsg.DescribeQuorumResponseNode {
	n := kmsg.NewDescribeQuorumResponseNode()
	n.NodeID, n.Listeners = id, listeners
	return n
}

func nodeListener(name, host string, port uint16) kmsg.DescribeQuorumResponseNodeListener {
	l := kmsg.NewDescribeQuorumResponseNodeListener()
	l.Name, l.Host, l.Port = name, host, port
	return l
}

// A broker learning the voters takes, for each, the first listener named
// in controller.listener.names that has a host and a port, and refuses an
// answer that leaves it none.
func TestAskVotersTakesUsableControllerListeners(t *testing.T) {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.Nodes = []kmsg.DescribeQuorumResponseNode{
		quorumNode(1, nodeListener("CONTROLLER", "", 9093), nodeListener("SECOND", "c1", 9193)),
		quorumNode(2, nodeListener("OTHER", "c2", 9000), nodeListener("CONTROLLER", "c2", 9093)),
		quorumNode(3, nodeListener("CONTROLLER", "c3", 0)),
	}
	ctx := context.Background()
	voters, err := askVoters(ctx, nil, serveDescribeQuorum(t, resp), []string{"CONTROLLER", "SECOND"})
	if err != nil {
		t.Fatal(err)
	}
	if len(voters) != 2 || voters[1] != "c1:9193" || voters[2] != "c2:9093" {
		t.Fatalf("voters %v", voters)
	}

	if _, err := askVoters(ctx, nil, serveDescribeQuorum(t, resp), []string{"NONE"}); err == nil || !strings.Contains(err.Error(), "controller.listener.names") {
		t.Fatalf("no usable listener: %v", err)
	}
	// discoverVoters tries the next bootstrap server after one that fails.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	voters, err = discoverVoters(ctx, nil, []string{deadAddr, serveDescribeQuorum(t, resp)}, []string{"CONTROLLER", "SECOND"}, hclog.NewNullLogger())
	if err != nil || len(voters) != 2 {
		t.Fatalf("discover: %v %v", voters, err)
	}
}
