package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// Opt configures a Client, a Producer, a Consumer or an Admin, in the style of
// franz-go's kgo: every constructor takes ...Opt. Client options (this file)
// apply to all of them; producer options (producer_options.go) and consumer
// options (consumer_options.go) apply to their own role and are ignored by
// constructors of the other roles.
type Opt interface {
	isOpt()
}

// clientOpt is an Opt that sets connection-level configuration.
type clientOpt struct{ fn func(*clientConfig) }

func (clientOpt) isOpt() {}

// clientConfig is what every role shares: how to find, reach and talk to the
// brokers. It is immutable once a Client is built.
type clientConfig struct {
	seeds                  []string
	clientID               string
	softwareName           string
	softwareVersion        string
	requestTimeout         time.Duration
	dialTimeout            time.Duration
	retryBackoff           time.Duration
	retryBackoffMax        time.Duration
	requestRetries         int
	metadataMaxAge         time.Duration
	metadataMinAge         time.Duration
	dialer                 func(ctx context.Context, network, address string) (net.Conn, error)
	sasl                   SASLMechanism
	allowAutoTopicCreation bool
	maxVersions            map[int16]int16
}

func defaultClientConfig() clientConfig {
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	return clientConfig{
		seeds:           []string{"localhost:9092"},
		clientID:        "keel-go",
		softwareName:    "keel-go",
		softwareVersion: "0.1.0",
		requestTimeout:  30 * time.Second,
		dialTimeout:     10 * time.Second,
		retryBackoff:    100 * time.Millisecond,
		retryBackoffMax: time.Second,
		requestRetries:  20,
		metadataMaxAge:  5 * time.Minute,
		metadataMinAge:  100 * time.Millisecond,
		dialer:          d.DialContext,
		// Topic IDs (Produce v13, Fetch v13+, OffsetCommit and
		// OffsetFetch v10+) are not used by the SDK yet: cap those APIs
		// below the versions that replace topic names with IDs.
		maxVersions: map[int16]int16{0: 12, 1: 12, 8: 9, 9: 9},
	}
}

// splitOpts applies the client options in opts to the defaults and returns
// the others (producer, consumer, ...) for the caller's role to apply.
func splitOpts(opts []Opt) (clientConfig, []Opt) {
	cfg := defaultClientConfig()
	var rest []Opt
	for _, o := range opts {
		if co, ok := o.(clientOpt); ok {
			co.fn(&cfg)
			continue
		}
		rest = append(rest, o)
	}
	return cfg, rest
}

// SeedBrokers sets the bootstrap servers (host:port), Kafka's
// bootstrap.servers. The client tries them in order until one answers a
// Metadata request, then talks to the brokers that metadata names. Default
// "localhost:9092".
func SeedBrokers(addrs ...string) Opt {
	return clientOpt{func(c *clientConfig) { c.seeds = append([]string(nil), addrs...) }}
}

// ClientID sets client.id, sent in every request header; brokers use it in
// logs, quotas and DescribeGroups. Default "keel-go".
func ClientID(id string) Opt {
	return clientOpt{func(c *clientConfig) { c.clientID = id }}
}

// SoftwareNameAndVersion sets what ApiVersions v3+ reports as the client
// software (KIP-511). Default "keel-go" and the SDK's version.
func SoftwareNameAndVersion(name, version string) Opt {
	return clientOpt{func(c *clientConfig) { c.softwareName, c.softwareVersion = name, version }}
}

// RequestTimeout sets request.timeout.ms: how long the client waits for a
// response before it gives up on the request and closes the connection
// (responses on a connection arrive in order, so a missing one poisons every
// later one). Requests that carry their own broker-side timeout (Produce's
// timeout, Fetch's max wait, JoinGroup's rebalance timeout) get that much
// more on top. Default 30s.
func RequestTimeout(d time.Duration) Opt {
	return clientOpt{func(c *clientConfig) { c.requestTimeout = d }}
}

// DialTimeout bounds connecting to a broker (TCP, SASL and ApiVersions).
// Default 10s.
func DialTimeout(d time.Duration) Opt {
	return clientOpt{func(c *clientConfig) { c.dialTimeout = d }}
}

// RetryBackoff sets retry.backoff.ms and retry.backoff.max.ms: the first
// retry of a failed request waits min, each further retry doubles the wait up
// to max, with ±20% jitter (KIP-580). Defaults 100ms and 1s.
func RetryBackoff(min, max time.Duration) Opt {
	return clientOpt{func(c *clientConfig) {
		c.retryBackoff, c.retryBackoffMax = min, max
		if c.retryBackoffMax < min {
			c.retryBackoffMax = min
		}
	}}
}

// RequestRetries sets how many times a request that failed with a retriable
// error (a dead connection, NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE,
// ...) is retried before the error is returned. The caller's context bounds
// retries as well. The producer does not use this: its records are retried
// until delivery.timeout.ms. Default 20.
func RequestRetries(n int) Opt {
	return clientOpt{func(c *clientConfig) { c.requestRetries = n }}
}

// MetadataMaxAge sets metadata.max.age.ms: cached metadata is refreshed at
// least this often even without errors, so new partitions and moved leaders
// are noticed. Errors that mean the cache is stale (NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION) trigger an earlier refresh. Default 5m.
func MetadataMaxAge(d time.Duration) Opt {
	return clientOpt{func(c *clientConfig) { c.metadataMaxAge = d }}
}

// MetadataMinAge bounds how often error-triggered metadata refreshes may
// happen, so a storm of NOT_LEADER errors causes one refresh, not hundreds.
// Default 100ms.
func MetadataMinAge(d time.Duration) Opt {
	return clientOpt{func(c *clientConfig) { c.metadataMinAge = d }}
}

// Dialer replaces how connections are opened, for TLS (return a *tls.Conn),
// proxies or tests. fn must honour ctx. Default: a net.Dialer with TCP
// keep-alive.
func Dialer(fn func(ctx context.Context, network, address string) (net.Conn, error)) Opt {
	return clientOpt{func(c *clientConfig) { c.dialer = fn }}
}

// TLS opens every connection with TLS (a broker's SSL listener, Kafka's
// security.protocol=SSL). cfg is cloned per connection; when its
// ServerName is empty it is set to the host dialled, so the broker's
// certificate is verified for the address in its metadata. A client
// certificate in cfg.Certificates is presented to brokers with
// ssl.client.auth=required. TLS runs over the dialer set before it
// (Dialer), so a proxy dialer given first still carries the connections.
func TLS(cfg *tls.Config) Opt {
	return clientOpt{func(c *clientConfig) {
		tcp := c.dialer
		c.dialer = func(ctx context.Context, network, address string) (net.Conn, error) {
			conf := cfg.Clone()
			if conf.ServerName == "" {
				host, _, err := net.SplitHostPort(address)
				if err != nil {
					return nil, err
				}
				conf.ServerName = host
			}
			nc, err := tcp(ctx, network, address)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(nc, conf)
			if err := tc.HandshakeContext(ctx); err != nil {
				nc.Close()
				return nil, fmt.Errorf("TLS handshake with %s: %w", address, err)
			}
			return tc, nil
		}
	}}
}

// SASL authenticates every new connection with m (SaslHandshake v1, then
// SaslAuthenticate round trips, KIP-152) before any other request but
// ApiVersions. Default: no authentication.
func SASL(m SASLMechanism) Opt {
	return clientOpt{func(c *clientConfig) { c.sasl = m }}
}

// AllowAutoTopicCreation sets allow.auto.create.topics: Metadata requests for
// unknown topics ask the broker to create them (the broker's
// auto.create.topics.enable still decides). Default off.
func AllowAutoTopicCreation() Opt {
	return clientOpt{func(c *clientConfig) { c.allowAutoTopicCreation = true }}
}

// MaxVersion caps the version the client uses for one API key, below what
// both sides support. By default Produce and Fetch are capped at v12 and
// OffsetCommit and OffsetFetch at v9 (the last versions that name topics
// rather than topic IDs); MaxVersion(1, 17) lifts Fetch's cap for a
// consumer that fills in topic IDs.
func MaxVersion(apiKey, version int16) Opt {
	return clientOpt{func(c *clientConfig) {
		m := make(map[int16]int16, len(c.maxVersions)+1)
		for k, v := range c.maxVersions {
			m[k] = v
		}
		m[apiKey] = version
		c.maxVersions = m
	}}
}

// SASLMechanism is the hook for SASL authentication (PLAIN, SCRAM,
// OAUTHBEARER, ...). Implementations must be safe for concurrent use: every
// new connection calls Authenticate.
type SASLMechanism interface {
	// Name is the mechanism as SaslHandshake names it, e.g. "PLAIN".
	Name() string
	// Authenticate starts an exchange with the broker at host and returns
	// the first client message.
	Authenticate(ctx context.Context, host string) (SASLSession, []byte, error)
}

// SASLSession is one connection's SASL exchange.
type SASLSession interface {
	// Challenge receives the broker's message and returns whether the
	// exchange is done and, if not, the next client message.
	Challenge(serverMessage []byte) (done bool, clientMessage []byte, err error)
}
