package broker

// SaslHandshake (key 17) v0–v1 and SaslAuthenticate (key 36) v0–v2 reach
// the broker only on a listener that is not SASL: a SASL listener's are
// the network layer's (network/sasl.go). As Kafka's KafkaApis, both answer
// ILLEGAL_SASL_STATE, so that a client configured for SASL at a PLAINTEXT
// or SSL port is told so instead of losing its connection. ApiVersions
// lists both on every listener, as Kafka's does.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleSaslHandshake(m *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp
}

func handleSaslAuthenticate(m *kmsg.SASLAuthenticateRequest) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
	return resp
}
