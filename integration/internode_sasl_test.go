package integration

import (
	"bufio"
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

// TestInternodeSASL: nodes that authenticate to each other with SASL, as
// a secured Kafka cluster's server.properties has them, through the real
// binary.
//
//   - The controller listener is SASL_PLAINTEXT with OAUTHBEARER
//     (sasl.mechanism.controller.protocol): Raft between the three
//     controllers, the brokers' registrations and heartbeats. Each node
//     gets its tokens from the identity provider's token endpoint (the
//     client credentials grant, KIP-768) and validates its peers' against
//     the provider's JWKS. The listener also enables PLAIN, for a user
//     that is not a node.
//   - The inter-broker listener is SASL_PLAINTEXT with SCRAM-SHA-512
//     (sasl.mechanism.inter.broker.protocol), the nodes' user bootstrapped
//     with keel format --add-scram: replica fetchers, and Raft from the
//     controllers to the broker-only node 4, which has no credential in
//     its image before that Raft reaches it.
//   - With StandardAuthorizer, the nodes' user is a super user; another
//     user that authenticates on the controller listener and starts Raft
//     is refused, as is Raft that does not authenticate first.
//   - An acks=all topic of RF 3 replicates; a killed broker comes back,
//     catches up and serves.
func TestInternodeSASL(t *testing.T) {
	const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`
	const oauthJAAS = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="broker" clientSecret="broker-secret";`
	const scramJAAS = `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`
	idp := newOAuthIdP(t, nil)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker,controller"}, {ID: 3, Roles: "broker,controller"}, {ID: 4, Roles: "broker"}},
		ProcessOptions{
			Overrides: []string{"keel.metrics.address=127.0.0.1:0"},
			InternalSASL: []string{
				"sasl.mechanism.controller.protocol=OAUTHBEARER",
				"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
				"listener.name.controller.sasl.enabled.mechanisms=OAUTHBEARER,PLAIN",
				"listener.name.controller.plain.sasl.jaas.config=" + plainJAAS,
				"listener.name.controller.oauthbearer.sasl.jaas.config=" + oauthJAAS,
				"listener.name.controller.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
				"listener.name.controller.oauthbearer.sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
				"sasl.oauthbearer.token.endpoint.url=" + idp.server.URL + "/token",
				"sasl.oauthbearer.jwks.endpoint.url=" + idp.server.URL + "/jwks",
				"sasl.oauthbearer.expected.audience=kafka",
				"listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
				"listener.name.internal.scram-sha-512.sasl.jaas.config=" + scramJAAS,
				"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
				"super.users=User:broker;User:ANONYMOUS",
			},
			FormatArgs: []string{"--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]"},
		})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic, n = "internode-sasl", 3000
	createTopic(t, adm, topic, 4, 3)
	produce := func(from int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)
	// Every replica has every record: the followers fetched them over
	// SCRAM (an offset on each broker's own log, via ListOffsets to the
	// leader only tells the HW, so look at the ISR instead).
	waitFor(t, 30*time.Second, "all replicas in sync", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})

	// The nodes authenticated to each other on both listeners.
	for _, id := range []int32{1, 2, 3, 4} {
		m := scrape(t, c, id)
		for _, l := range []string{"CONTROLLER", "INTERNAL"} {
			if id == 4 && l == "CONTROLLER" {
				continue // a broker-only node has no controller listener
			}
			ok := sumSeries(m, "kafka_server_socket_server_metrics_successful_authentication_total", "listener", l)
			failed := sumSeries(m, "kafka_server_socket_server_metrics_failed_authentication_total", "listener", l)
			if ok == 0 || failed != 0 {
				t.Errorf("node %d, listener %s: %v authentications succeeded, %v failed", id, l, ok, failed)
			}
		}
	}

	// The nodes logged in with tokens from the identity provider, which
	// their peers checked against its keys: each node fetched one token
	// (valid an hour) and the JWKS.
	if grants, reads := idp.grants.Load(), idp.reads.Load(); grants < 4 || reads < 3 {
		t.Errorf("the identity provider gave %d tokens and its JWKS %d times; want a token for each of the 4 nodes and the JWKS for each controller", grants, reads)
	}

	// Raft on the controller listener must authenticate, and as a node.
	ctlAddr := c.Node(1).AdvertisedController
	raw, err := net.Dial("tcp", ctlAddr)
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte{0xFE, 0})
	expectClosed(t, raw)
	alice := saslPlainRaw(t, ctlAddr, "alice", "alice-secret")
	alice.Write([]byte{0xFE, 0})
	expectClosed(t, alice)
	waitFor(t, 10*time.Second, "the refusals logged", func() bool {
		log := c.Log(1)
		return strings.Contains(log, "Raft on a SASL listener must authenticate first") &&
			strings.Contains(log, "refusing a Raft connection: authorization denied") && strings.Contains(log, "User:alice")
	})

	// A broker killed and restarted authenticates again, catches up and
	// serves; the cluster takes writes meanwhile.
	c.Kill(4)
	produce(n)
	c.Start(4)
	c.WaitReady(4)
	waitFor(t, 30*time.Second, "node 4 back in every ISR", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			inReplicas, inISR := false, false
			for _, r := range p.Replicas {
				inReplicas = inReplicas || r == 4
			}
			for _, r := range p.ISR {
				inISR = inISR || r == 4
			}
			if inReplicas && !inISR {
				return false
			}
		}
		return true
	})
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Node(4).PlaintextAddr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < 2*n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), 2*n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Errorf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// saslPlainRaw opens a connection to addr and authenticates it with
// SASL/PLAIN (SaslHandshake v1, SaslAuthenticate v1), as a node's dialler
// does before it sends the Raft marker.
func saslPlainRaw(t *testing.T, addr, user, pass string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-sasl"))
	roundTrip := func(req kmsg.Request, resp kmsg.Response, corr int32) {
		t.Helper()
		req.SetVersion(1)
		if _, err := conn.Write(format.AppendRequest(nil, req, corr)); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(rd, size[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(rd, body); err != nil {
			t.Fatal(err)
		}
		resp.SetVersion(1)
		if err := resp.ReadFrom(body[4:]); err != nil {
			t.Fatal(err)
		}
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	roundTrip(hs, hsResp, 1)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	authResp := kmsg.NewPtrSASLAuthenticateResponse()
	roundTrip(auth, authResp, 2)
	if hsResp.ErrorCode != 0 || authResp.ErrorCode != 0 {
		t.Fatalf("authenticate %s: handshake error %d, authenticate error %d", user, hsResp.ErrorCode, authResp.ErrorCode)
	}
	conn.SetDeadline(time.Time{})
	return conn
}

// expectClosed waits for the peer to close conn.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Fatalf("read %d bytes, want the connection closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection stayed open")
	}
}
