package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInterBrokerListenerAtMaxConnections: with clients holding every
// connection max.connections allows, a broker restarted after kill -9
// still reaches the others over the inter-broker listener and rejoins
// every ISR: that listener accepts at the limit and the least recently
// active client connection is closed for it, as in Kafka. Client
// connections beyond the limit wait unanswered meanwhile.
func TestInterBrokerListenerAtMaxConnections(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{1, "broker,controller"}, {2, "broker,controller"}, {3, "broker,controller"}},
		ProcessOptions{SSL: certs.brokerSSL(), InternalSSL: true, Overrides: []string{"replica.lag.time.max.ms=3000", "max.connections=12"}})
	const topic, partitions = "at-max-connections", 6
	func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 3, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create topic: %v %v", err, resp.Err)
		}
	}()

	// The ISRs are read from broker 1 over one connection opened before
	// it fills up and kept busy, so never the least recently active one.
	probe := dialMetadataProbe(t, c.Node(1).PlaintextPort)
	isr := func(want int) func() bool {
		return func() bool {
			ps, err := probe.partitions(topic)
			if err != nil {
				t.Fatalf("metadata from broker 1: %v", err)
			}
			if len(ps) != partitions {
				return false
			}
			for _, p := range ps {
				if len(p.ISR) != want {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 30*time.Second, "every replica in sync", isr(3))

	// fill opens idle client connections to a broker until one waits
	// unanswered: the broker is at max.connections.
	var fillers []net.Conn
	defer func() {
		for _, f := range fillers {
			f.Close()
		}
	}()
	fill := func(id int32) {
		t.Helper()
		for n := 0; ; n++ {
			if n > 20 {
				t.Fatalf("broker %d answered %d connections beyond its clients'", id, n)
			}
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.Node(id).PlaintextPort))
			if err != nil {
				t.Fatal(err)
			}
			fillers = append(fillers, conn)
			if !AnsweredWithin(conn, 500*time.Millisecond) {
				return // waiting: the broker is full
			}
		}
	}
	c.Kill(3)
	waitFor(t, 30*time.Second, "broker 3 out of every ISR", isr(2))
	fill(1)
	fill(2)
	c.Start(3)
	waitFor(t, 60*time.Second, "broker 3 back in every ISR with brokers 1 and 2 at max.connections", isr(3))
	closed := 0
	for _, id := range []int32{1, 2} {
		closed += strings.Count(c.Log(id), "closing the least recently active connection")
	}
	if closed == 0 {
		t.Fatal("no client connection was closed for the inter-broker listener: was any broker at max.connections?")
	}
	// The brokers are still full: a new client connection waits.
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.Node(1).PlaintextPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if AnsweredWithin(conn, 500*time.Millisecond) {
		t.Fatal("a client connection beyond max.connections was answered")
	}
}

// metadataProbe asks one broker for a topic's partitions over one raw
// connection (Metadata v8).
type metadataProbe struct {
	conn net.Conn
	corr int32
}

func dialMetadataProbe(t *testing.T, port int) *metadataProbe {
	t.Helper()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &metadataProbe{conn: conn}
}

func (p *metadataProbe) partitions(topic string) ([]kmsg.MetadataResponseTopicPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 8
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	p.corr++
	_ = p.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := p.conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, p.corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(p.conn, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(p.conn, body); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != p.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, p.corr)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 8
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("%d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions, nil
}
