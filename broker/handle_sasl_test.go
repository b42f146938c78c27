package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

// TestSaslRequestsOnAPlaintextListener: as Kafka's, a broker lists
// SaslHandshake and SaslAuthenticate on every listener, at the versions
// its SASL listeners serve, and answers them ILLEGAL_SASL_STATE on one
// that is not SASL (a client configured for SASL at a PLAINTEXT port),
// keeping the connection.
func TestSaslRequestsOnAPlaintextListener(t *testing.T) {
	c := newTestCluster(t)
	conn := c.dialRaw(t)
	versions := roundTrip[*kmsg.ApiVersionsResponse](conn, kmsg.NewPtrApiVersionsRequest())
	for _, want := range network.SASLApiVersions() {
		i := slices.IndexFunc(versions.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == want.ApiKey })
		if i < 0 || versions.ApiKeys[i].MinVersion != want.MinVersion || versions.ApiKeys[i].MaxVersion != want.MaxVersion {
			t.Fatalf("ApiVersions on PLAINTEXT: key %d listed %v, want %d–%d", want.ApiKey, i >= 0, want.MinVersion, want.MaxVersion)
		}
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if r := roundTrip[*kmsg.SASLHandshakeResponse](conn, hs); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := roundTrip[*kmsg.SASLAuthenticateResponse](conn, kmsg.NewPtrSASLAuthenticateRequest()); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate on PLAINTEXT: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The connection goes on.
	if r := roundTrip[*kmsg.ApiVersionsResponse](conn, kmsg.NewPtrApiVersionsRequest()); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions after: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
