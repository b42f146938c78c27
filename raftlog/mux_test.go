package raftlog

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestParseVoters(t *testing.T) {
	good := map[string]map[int32]string{
		"1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293": {1: "127.0.0.1:9093", 2: "127.0.0.1:9193", 3: "127.0.0.1:9293"},
		" 1@localhost:9093 , 2@host-b:9093 ":                 {1: "localhost:9093", 2: "host-b:9093"},
		"0@[::1]:9093":                                       {0: "[::1]:9093"},
	}
	for in, want := range good {
		got, err := ParseVoters(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %v", in, got)
		}
		for id, addr := range want {
			if got[id] != addr {
				t.Fatalf("%q: voter %d = %q, want %q", in, id, got[id], addr)
			}
		}
	}
	bad := map[string]string{
		"":                             "empty",
		"1@a:1,1@b:2":                  "listed twice",
		"1@a:1,2@a:1":                  "listed for nodes 1 and 2",
		"localhost:9093":               "expected id@host:port",
		"x@a:1":                        "not an integer",
		"-1@a:1":                       "not an integer",
		"1@a":                          "address",
		"1@:9093":                      "empty host",
		"1@a:0":                        "port",
		"1@a:http":                     "port",
		"1@127.0.0.1:9093,":            "entry 2",
		"99999999999@127.0.0.1:9093":   "not an integer",
		"1@127.0.0.1:9093;2@b:9093":    "too many colons",
		"1@127.0.0.1:9093,2@b:9093:12": "address",
	}
	for in, msg := range bad {
		_, err := ParseVoters(in)
		if !errors.Is(err, ErrInvalidVoters) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an ErrInvalidVoters mentioning %q", in, err, msg)
		}
	}
}

// dialAndSend connects to addr and writes b.
func dialAndSend(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRaftMarkerCannotStartAKafkaFrame(t *testing.T) {
	// The largest frame socket.request.max.bytes allows by default.
	var frame [4]byte
	binary.BigEndian.PutUint32(frame[:], 100<<20)
	if frame[0] >= RaftMarker || frame[0] >= 0x07 {
		t.Fatalf("a 100 MiB frame starts with %#x", frame[0])
	}
	if RaftMarker < 0x07 || RaftMarker == 0x16 {
		t.Fatalf("marker %#x collides with Kafka sizes or TLS", RaftMarker)
	}
}

func TestServeRoutesRaftToTheMuxAndKafkaToTheCallback(t *testing.T) {
	checkGoroutines(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := NewMux(ln.Addr().String())
	kafka := make(chan net.Conn, 1)
	l := Serve(ln, mux, func(c net.Conn) { kafka <- c })
	defer l.Close()
	defer mux.Close()

	// A Kafka request frame reaches the callback byte for byte.
	req := []byte{0, 0, 0, 6, 0, 18, 0, 3, 0, 1}
	kc := dialAndSend(t, l.Addr().String(), req)
	defer kc.Close()
	var got net.Conn
	select {
	case got = <-kafka:
	case <-time.After(5 * time.Second):
		t.Fatal("kafka conn not handed to the callback")
	}
	buf := make([]byte, len(req))
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != string(req) {
		t.Fatalf("kafka side read %v, %v; want %v", buf, err, req)
	}
	if nc, ok := got.(interface{ NetConn() net.Conn }); !ok || nc.NetConn() == nil {
		t.Fatal("wrapped kafka conn does not expose the TCP conn")
	}
	got.Close()

	// A Raft dial reaches Accept with the marker consumed.
	out, err := mux.Dial(raft.ServerAddress(l.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := out.Write([]byte("raft")); err != nil {
		t.Fatal(err)
	}
	in, err := mux.Accept()
	if err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, 4)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "raft" {
		t.Fatalf("raft side read %q, %v", buf, err)
	}

	// Close closes every raft conn it accepted or dialed.
	mux.Close()
	if _, err := in.Read(buf); err == nil {
		t.Fatal("accepted raft conn still open after Mux.Close")
	}
	if _, err := mux.Accept(); err == nil {
		t.Fatal("Accept after Close")
	}
	if _, err := mux.Dial(raft.ServerAddress(l.Addr().String()), time.Second); err == nil {
		t.Fatal("Dial after Close")
	}
}

func TestClassifyReportsTheFirstByte(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _, _ = a.Write([]byte{RaftMarker, 'x'}) }()
	isRaft, conn, err := Classify(b)
	if err != nil || !isRaft {
		t.Fatalf("raft: %v %v", isRaft, err)
	}
	one := make([]byte, 1)
	if _, err := io.ReadFull(conn, one); err != nil || one[0] != 'x' {
		t.Fatalf("after marker read %q, %v", one, err)
	}

	c, d := net.Pipe()
	defer c.Close()
	defer d.Close()
	go func() { _, _ = c.Write([]byte{0, 0, 0, 1, 9}); c.Close() }()
	isRaft, conn, err = Classify(d)
	if err != nil || isRaft {
		t.Fatalf("kafka: %v %v", isRaft, err)
	}
	all, err := io.ReadAll(conn)
	if err != nil || string(all) != string([]byte{0, 0, 0, 1, 9}) {
		t.Fatalf("replayed %v, %v", all, err)
	}

	e, f := net.Pipe()
	e.Close()
	if _, _, err := Classify(f); err == nil {
		t.Fatal("classified a closed conn")
	}
}

func TestHandoffWithMarkerDropsTheMarker(t *testing.T) {
	checkGoroutines(t)
	mux := NewMux("127.0.0.1:1")
	defer mux.Close()
	a, b := net.Pipe()
	defer a.Close()
	go func() { _, _ = a.Write([]byte{RaftMarker, 0, 'o', 'k'}) }() // marker, empty cluster id
	if !IsRaftMarker(RaftMarker) || IsRaftMarker(0) {
		t.Fatal("IsRaftMarker")
	}
	go mux.HandoffWithMarker(b)
	in, err := mux.Accept()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read %q, %v", buf, err)
	}

	c, d := net.Pipe()
	defer c.Close()
	go func() { _, _ = c.Write([]byte{0, 0, 0, 1}) }()
	go mux.HandoffWithMarker(d)
	in, err = mux.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Read(buf); err == nil {
		t.Fatal("a conn without the marker was read")
	}
}

func TestMuxRefusesRaftConnectionsFromAnotherCluster(t *testing.T) {
	checkGoroutines(t)
	mux := NewClusterMux("127.0.0.1:1", "cluster-a")
	defer mux.Close()
	for _, tc := range []struct {
		hello []byte
		ok    bool
	}{
		{append([]byte{RaftMarker, 9}, "cluster-a"...), true},
		{append([]byte{RaftMarker, 9}, "cluster-b"...), false},
		{[]byte{RaftMarker, 0}, false},
		{append([]byte{RaftMarker, 11}, "cluster-a/3"...), true}, // with the dialling node's id
		{append([]byte{RaftMarker, 11}, "cluster-b/3"...), false},
	} {
		a, b := net.Pipe()
		go func() { _, _ = a.Write(append(tc.hello, 'o', 'k')) }()
		go mux.HandoffWithMarker(b)
		in, err := mux.Accept()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		_, err = io.ReadFull(in, buf)
		if tc.ok && (err != nil || string(buf) != "ok") {
			t.Fatalf("%q: read %q, %v", tc.hello, buf, err)
		}
		if !tc.ok && !errors.Is(err, ErrClusterIDMismatch) {
			t.Fatalf("%q: got %v, want ErrClusterIDMismatch", tc.hello, err)
		}
		a.Close()
		in.Close()
	}
}
