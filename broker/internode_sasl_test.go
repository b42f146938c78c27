package broker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// principalsHandler answers DescribeQuorum and records who asked.
type principalsHandler struct {
	mu         sync.Mutex
	principals []string
}

func (h *principalsHandler) SupportedVersions(_ string, key int16) (int16, int16, bool) {
	if key != kmsg.DescribeQuorum.Int16() {
		return 0, 0, false
	}
	return 0, kmsg.NewPtrDescribeQuorumRequest().MaxVersion(), true
}

func (h *principalsHandler) Handle(_ context.Context, req *network.Request) network.Result {
	h.mu.Lock()
	h.principals = append(h.principals, req.Conn.Principal)
	h.mu.Unlock()
	return &network.Response{Msg: req.Msg.ResponseKind()}
}

// A node dials another's SASL listener as Kafka's brokers do: it
// authenticates with the mechanism and JAAS user of its configuration
// before its first request, and is that user there. With
// connections.max.reauth.ms it replaces the connection before the session
// ends, so the listener never closes it for expiry. A wrong password and
// a mechanism the listener does not enable fail the dial with the
// listener's answer.
func TestDialSASL(t *testing.T) {
	const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";`
	cfg := loadListenerConfig(t, map[string]string{
		"sasl.enabled.mechanisms":                         "PLAIN",
		"sasl.mechanism.controller.protocol":              "PLAIN",
		"listener.name.controller.plain.sasl.jaas.config": jaas,
		"connections.max.reauth.ms":                       "2000",
	})
	addr, h, srv, mech := startSASLServer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := newKafkaConn(addr, "test", dialSASL(dialTCP, "CONTROLLER", mech))
	defer conn.close()
	for i := range 4 {
		if _, err := conn.request(ctx, kmsg.NewPtrDescribeQuorumRequest()); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		time.Sleep(600 * time.Millisecond)
	}
	h.mu.Lock()
	principals := strings.Join(h.principals, " ")
	h.mu.Unlock()
	if principals != strings.TrimSpace(strings.Repeat("User:broker ", 4)) {
		t.Errorf("principals %q, want User:broker four times", principals)
	}
	ok, failed := srv.Authentications()
	_, _, expired := srv.Reauthentications()
	// 4 requests 600 ms apart on sessions renewed after 1.7 s: two
	// connections at least, and none closed for expiry.
	if ok["CONTROLLER"] < 2 || failed["CONTROLLER"] != 0 || expired["CONTROLLER"] != 0 {
		t.Errorf("authentications: %d succeeded, %d failed, %d connections expired; want 2 or more, 0, 0", ok["CONTROLLER"], failed["CONTROLLER"], expired["CONTROLLER"])
	}

	for what, tc := range map[string]struct {
		props map[string]string
		want  string
	}{
		"wrong password": {map[string]string{"sasl.mechanism.controller.protocol": "PLAIN",
			"listener.name.controller.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="guess";`},
			"SASL_AUTHENTICATION_FAILED"},
		"a mechanism not enabled": {map[string]string{"sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
			"listener.name.controller.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`},
			"UNSUPPORTED_SASL_MECHANISM"},
	} {
		mech, err := internodeMechanism(loadListenerConfig(t, tc.props), "CONTROLLER", "sasl.mechanism.controller.protocol", hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		_, err = RequestVia(ctx, dialSASL(dialTCP, "CONTROLLER", mech), addr, kmsg.NewPtrDescribeQuorumRequest())
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "listener CONTROLLER") {
			t.Errorf("%s: %v, want an error with %s", what, err, tc.want)
		}
	}
}

// startSASLServer serves a SASL_PLAINTEXT listener CONTROLLER of cfg's
// SASL settings on loopback, with a principalsHandler, and returns the
// mechanism a node of cfg dials it with (sasl.mechanism.controller.protocol).
func startSASLServer(t *testing.T, cfg *Config) (string, *principalsHandler, *network.Server, franzsasl.Mechanism) {
	t.Helper()
	mech, err := internodeMechanism(cfg, "CONTROLLER", "sasl.mechanism.controller.protocol", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	listeners := []network.Listener{{Name: "CONTROLLER", Host: "127.0.0.1", SecurityProtocol: network.SASLPlaintext}}
	saslListeners, err := loadNodeSASL(cfg, listeners, false, scramFromImage(metadata.EmptyImage), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &principalsHandler{}
	srv := serveOnLoopback(t, network.Config{Listeners: listeners, SASL: saslListeners, Handler: h}, nil)
	return srv.Addr("CONTROLLER").String(), h, srv, mech
}

// A node logs in to another's OAUTHBEARER listener with the listener's
// OAuthBearerLoginModule: here Kafka's unsecured login against the
// default, unsecured validator, whose principal is the token's subject.
// A fresh token is issued for each connection.
func TestDialOAuthBearer(t *testing.T) {
	const jaas = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" unsecuredLoginLifetimeSeconds="60";`
	cfg := loadListenerConfig(t, map[string]string{
		"sasl.enabled.mechanisms":                               "OAUTHBEARER",
		"sasl.mechanism.controller.protocol":                    "OAUTHBEARER",
		"listener.name.controller.oauthbearer.sasl.jaas.config": jaas,
	})
	addr, h, srv, mech := startSASLServer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		if _, err := RequestVia(ctx, dialSASL(dialTCP, "CONTROLLER", mech), addr, kmsg.NewPtrDescribeQuorumRequest()); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	principals := strings.Join(h.principals, " ")
	h.mu.Unlock()
	if ok, failed := srv.Authentications(); principals != "User:broker User:broker" || ok["CONTROLLER"] != 2 || failed["CONTROLLER"] != 0 {
		t.Errorf("principals %q, %d authentications, %d failed; want User:broker twice, 2, 0", principals, ok["CONTROLLER"], failed["CONTROLLER"])
	}

	// An identity provider that refuses the node's client credentials
	// fails the dial with its answer.
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
	}))
	defer idp.Close()
	refused, err := internodeMechanism(loadListenerConfig(t, map[string]string{
		"sasl.mechanism.controller.protocol":                    "OAUTHBEARER",
		"listener.name.controller.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="broker" clientSecret="guess";`,
		"sasl.oauthbearer.token.endpoint.url":                   idp.URL,
	}), "CONTROLLER", "sasl.mechanism.controller.protocol", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, err = RequestVia(ctx, dialSASL(dialTCP, "CONTROLLER", refused), addr, kmsg.NewPtrDescribeQuorumRequest())
	if err == nil || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), "listener CONTROLLER") {
		t.Errorf("refused credentials: %v, want the token endpoint's answer", err)
	}
}
