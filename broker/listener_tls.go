package broker

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/tlsconf"
)

// sslKey reports whether a server.properties key is an ssl.* setting,
// plain or listener-prefixed (listener.name.external.ssl.keystore.location),
// and returns its ssl.* name.
func sslKey(k string) (string, bool) {
	if strings.HasPrefix(k, "ssl.") {
		return k, true
	}
	rest, ok := strings.CutPrefix(k, "listener.name.")
	if !ok {
		return "", false
	}
	_, name, ok := strings.Cut(rest, ".")
	if !ok || !strings.HasPrefix(name, "ssl.") {
		return "", false
	}
	return name, true
}

// ListenerTLS returns the ssl.* settings of a listener: each key from
// listener.name.<listener>.<key> when set (the listener name in any case,
// Kafka writes it lower-case), otherwise from <key>, as Kafka's
// listener-prefixed configs override the plain ones.
func (c *Config) ListenerTLS(listener string) (tlsconf.Settings, error) {
	prefix := "listener.name." + strings.ToLower(listener) + "."
	return tlsconf.FromProperties(func(key string) (string, bool) {
		for k, v := range c.SSL {
			if strings.HasPrefix(strings.ToLower(k), prefix) && k[len(prefix):] == key {
				return v, true
			}
		}
		v, ok := c.SSL[key]
		return v, ok
	})
}

// listenerTLS builds the TLS side of each SSL listener from its ssl.*
// settings, as Kafka's SslFactory does at startup: a keystore that does not
// load, a truststore missing with ssl.client.auth set, or bad principal
// mapping rules stop the node with the setting named.
//
// Brokers and controllers talk PLAINTEXT among themselves for now (the
// replica fetchers, the controller channel, transaction markers and Raft
// dial without TLS), so neither a controller listener nor the inter-broker
// listener may be SSL: put SSL on the client listeners.
func listenerTLS(cfg *Config, listeners []network.Listener, isBroker bool) (map[string]*network.TLSListener, error) {
	out := map[string]*network.TLSListener{}
	for _, l := range listeners {
		if l.SecurityProtocol != network.SSL {
			continue
		}
		switch {
		case slices.Contains(cfg.ControllerListenerNames, l.Name):
			return nil, fmt.Errorf("listener %s is a controller listener (controller.listener.names) mapped to SSL: "+
				"Keel's controllers and brokers talk PLAINTEXT among themselves for now; map it to PLAINTEXT and use SSL on client listeners", l.Name)
		case isBroker && l.Name == cfg.InterBrokerListenerName:
			return nil, fmt.Errorf("listener %s is the inter-broker listener (inter.broker.listener.name) mapped to SSL: "+
				"Keel's brokers talk PLAINTEXT among themselves for now; give them a PLAINTEXT listener and use SSL on client listeners", l.Name)
		}
		settings, err := cfg.ListenerTLS(l.Name)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		tc, err := settings.ServerConfig()
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		mapper, err := tlsconf.ParsePrincipalMappingRules(settings.PrincipalMappingRules)
		if err != nil {
			return nil, fmt.Errorf("listener %s: ssl.principal.mapping.rules: %w", l.Name, err)
		}
		out[l.Name] = &network.TLSListener{
			Config:    tc,
			Principal: func(chain []*x509.Certificate) (string, error) { return mapper.Name(chain[0]) },
		}
	}
	return out, nil
}
