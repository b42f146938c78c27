package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafka-cluster.sh cluster-id and unregister with --bootstrap-controller
// (KIP-919) say what they say with --bootstrap-server: the same cluster id,
// the same success line, the same errors; an unregistered broker is gone
// from the brokers' listing; a controller answering NOT_CONTROLLER sends
// the request on to the next controller listed.
func TestCLIClusterBootstrapController(t *testing.T) {
	c := startEndpointsCluster(t)
	bs := c.brokers[2]

	viaServer := keelOK(t, "cluster", "cluster-id", "--bootstrap-server", bs)
	if !strings.HasPrefix(viaServer, "Cluster ID: ") || !strings.HasSuffix(viaServer, "\n") || len(viaServer) < len("Cluster ID: x\n") {
		t.Fatalf("cluster-id --bootstrap-server printed %q", viaServer)
	}
	if out := keelOK(t, "cluster", "cluster-id", "--bootstrap-controller", c.controller); out != viaServer {
		t.Errorf("cluster-id --bootstrap-controller printed %q; --bootstrap-server printed %q", out, viaServer)
	}
	if out := keelOK(t, "cluster", "cluster-id", "-C", c.controller); out != viaServer {
		t.Errorf("cluster-id -C printed %q, want %q", out, viaServer)
	}
	// A broker's listener is no controller's.
	if out, errOut, exit := keelRun(t, "cluster", "cluster-id", "--bootstrap-controller", bs); exit != 1 || out != "" ||
		!strings.Contains(errOut, "MISMATCHED_ENDPOINT_TYPE") {
		t.Errorf("cluster-id --bootstrap-controller at a broker: exit %d, stdout %q, stderr %q", exit, out, errOut)
	}

	// $KEEL_BOOTSTRAP_SERVER is --bootstrap-server's default, not a
	// --bootstrap-server given: --bootstrap-controller overrides it.
	t.Setenv("KEEL_BOOTSTRAP_SERVER", bs)
	if out := keelOK(t, "cluster", "cluster-id"); out != viaServer {
		t.Errorf("cluster-id with $KEEL_BOOTSTRAP_SERVER printed %q, want %q", out, viaServer)
	}
	if out := keelOK(t, "cluster", "cluster-id", "--bootstrap-controller", c.controller); out != viaServer {
		t.Errorf("cluster-id --bootstrap-controller with $KEEL_BOOTSTRAP_SERVER printed %q, want %q", out, viaServer)
	}

	// An unknown broker id fails alike both ways, in Kafka's words.
	_, errServer, exit := keelRun(t, "cluster", "unregister", "--bootstrap-server", bs, "--id", "9")
	if exit != 1 || !strings.Contains(errServer, "BROKER_ID_NOT_REGISTERED") || !strings.Contains(errServer, "Broker ID 9 is not currently registered") {
		t.Fatalf("unregister --bootstrap-server --id 9: exit %d, stderr %q", exit, errServer)
	}
	if out, errOut, exit := keelRun(t, "cluster", "unregister", "--bootstrap-controller", c.controller, "--id", "9"); exit != 1 || out != "" || errOut != errServer {
		t.Errorf("unregister --bootstrap-controller --id 9: exit %d, stdout %q, stderr %q; want exit 1 and %q", exit, out, errOut, errServer)
	}

	// A controller that thinks itself active, but answers NOT_CONTROLLER:
	// the request goes on to the next controller listed, node 1.
	stale := serveStaleController(t, c.controller)
	if out, errOut, exit := keelRun(t, "cluster", "unregister", "--bootstrap-controller", stale.addr, "--id", "9"); exit != 1 || out != "" || errOut != errServer {
		t.Errorf("unregister --bootstrap-controller at a stale controller: exit %d, stdout %q, stderr %q; want exit 1 and %q", exit, out, errOut, errServer)
	}
	if n := stale.unregisters.Load(); n != 1 {
		t.Errorf("the controller named active was sent UnregisterBroker %d times, want 1 (before the others)", n)
	}

	// Broker 3 shuts down for good, and is unregistered through the
	// controller, with no broker asked.
	c.stop(3)
	if out := keelOK(t, "cluster", "unregister", "--bootstrap-controller", c.controller, "--id", "3"); out != "Broker 3 is no longer registered.\n" {
		t.Errorf("unregister --bootstrap-controller --id 3 printed %q", out)
	}
	var listed string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		listed = keelOK(t, "cluster", "list-endpoints", "--bootstrap-server", bs, "--include-fenced-brokers")
		if !strings.Contains(listed, "\n3 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker 3 unregistered; list-endpoints --include-fenced-brokers still lists it:\n%s", listed)
		}
	}
	if !strings.Contains(listed, "\n2 ") {
		t.Errorf("list-endpoints --include-fenced-brokers lost broker 2 too:\n%s", listed)
	}
	if out, errOut, exit := keelRun(t, "cluster", "unregister", "--bootstrap-controller", c.controller, "--id", "3"); exit != 1 || out != "" ||
		!strings.Contains(errOut, "BROKER_ID_NOT_REGISTERED") {
		t.Errorf("unregister --bootstrap-controller --id 3 again: exit %d, stdout %q, stderr %q", exit, out, errOut)
	}
}

// cluster-id and unregister take --bootstrap-server or
// --bootstrap-controller, refusing both with Kafka's message.
func TestCLIClusterBootstrapControllerUsage(t *testing.T) {
	const want = "You cannot specify both --bootstrap-controller and --bootstrap-server."
	for _, args := range [][]string{
		{"cluster-id", "--bootstrap-server", "127.0.0.1:1", "--bootstrap-controller", "127.0.0.1:2"},
		{"unregister", "--bootstrap-server", "127.0.0.1:1", "--bootstrap-controller", "127.0.0.1:2", "--id", "4"},
		{"unregister", "-b", "127.0.0.1:1", "-C", "127.0.0.1:2", "--id", "4"},
	} {
		out, errOut, exit := keelRun(t, append([]string{"cluster"}, args...)...)
		if exit != 1 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("cluster %v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, exit, out, errOut, want)
		}
	}
}

// staleController is a scripted controller listener that lists itself,
// node 5, as the active controller and next as node 1, but
// answers UnregisterBroker NOT_CONTROLLER, as a controller that has not yet
// learnt of an election would.
type staleController struct {
	addr        string
	unregisters atomic.Int32 // UnregisterBroker requests answered
}

func serveStaleController(t *testing.T, next string) *staleController {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := &staleController{addr: l.Addr().String()}
	endpoint := func(id int32, addr string) kmsg.DescribeClusterResponseBroker {
		host, port, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = id, host, int32(n)
		return b
	}
	answer := func(req kmsg.Request) kmsg.Response {
		switch req.(type) {
		case *kmsg.DescribeClusterRequest:
			resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
			resp.ClusterID, resp.ControllerID, resp.EndpointType = "stale", 5, 2
			resp.Brokers = []kmsg.DescribeClusterResponseBroker{endpoint(1, next), endpoint(5, s.addr)}
			return resp
		case *kmsg.UnregisterBrokerRequest:
			s.unregisters.Add(1)
			resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
			resp.ErrorCode = kerr.NotController.Code
			return resp
		}
		return nil
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					req, corr, err := readRequest(r)
					if err != nil {
						return
					}
					resp := answer(req)
					if resp == nil {
						return
					}
					resp.SetVersion(req.GetVersion())
					out := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(corr))
					if resp.IsFlexible() {
						out = append(out, 0) // no header tags
					}
					out = resp.AppendTo(out)
					binary.BigEndian.PutUint32(out, uint32(len(out)-4))
					if _, err := conn.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

// readRequest reads one Kafka request frame: its header's correlation id
// and its body, decoded.
func readRequest(r io.Reader) (kmsg.Request, int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, 0, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, 0, err
	}
	if len(frame) < 10 {
		return nil, 0, fmt.Errorf("request header of %d bytes", len(frame))
	}
	req := kmsg.RequestForKey(int16(binary.BigEndian.Uint16(frame)))
	if req == nil {
		return nil, 0, fmt.Errorf("unknown API key %d", binary.BigEndian.Uint16(frame))
	}
	req.SetVersion(int16(binary.BigEndian.Uint16(frame[2:])))
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	body := frame[10:]
	if n := int16(binary.BigEndian.Uint16(frame[8:])); n > 0 { // the client id
		body = body[n:]
	}
	if req.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			return nil, 0, fmt.Errorf("request header tags")
		}
		body = body[1:]
	}
	return req, corr, req.ReadFrom(body)
}

// metadata-quorum, features and configs take one of --bootstrap-server
// and --bootstrap-controller, refusing both with the messages of Kafka's
// tools (argparse's for the first two, ConfigCommand's for configs);
// $KEEL_BOOTSTRAP_SERVER does not count as a --bootstrap-server given.
func TestCLIBootstrapEitherOr(t *testing.T) {
	const argparseBoth = "argument --bootstrap-controller: not allowed with argument --bootstrap-server"
	const configsBoth = "Only one of --bootstrap-server or --bootstrap-controller can be specified"
	both := []string{"--bootstrap-server", "127.0.0.1:1", "--bootstrap-controller", "127.0.0.1:2"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(append([]string{"metadata-quorum"}, both...), "describe", "--status"), argparseBoth},
		{[]string{"metadata-quorum", "describe", "--status"}, "one of the arguments --bootstrap-server --bootstrap-controller is required"},
		{append(append([]string{"features"}, both...), "describe"), argparseBoth},
		{append([]string{"configs", "describe", "--entity-type", "topics", "--entity-name", "t"}, both...), configsBoth},
		{append([]string{"configs", "alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "retention.ms=1"}, both...), configsBoth},
	} {
		out, errOut, exit := keelRun(t, tc.args...)
		if exit != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, exit, out, errOut, tc.want)
		}
	}
	t.Setenv("KEEL_BOOTSTRAP_SERVER", "127.0.0.1:1")
	_, errOut, _ := keelRun(t, "configs", "describe", "--entity-type", "topics", "--entity-name", "t", "--bootstrap-controller", "127.0.0.1:2")
	if strings.Contains(errOut, configsBoth) || !strings.Contains(errOut, "127.0.0.1:2") {
		t.Errorf("configs --bootstrap-controller with $KEEL_BOOTSTRAP_SERVER: stderr %q, want the controller tried", errOut)
	}
}
