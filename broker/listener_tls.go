package broker

import (
	"crypto/x509"
	"fmt"
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
	return tlsconf.FromProperties(func(key string) (string, bool) { return listenerSetting(c.SSL, listener, key, true) })
}

// listenerSetting looks key up in settings as
// listener.name.<listener>.<key> (the listener name in any case: Kafka
// writes it lower-case) and then, with plain, as <key>.
func listenerSetting(settings map[string]string, listener, key string, plain bool) (string, bool) {
	prefix := "listener.name." + strings.ToLower(listener) + "."
	for k, v := range settings {
		if len(k) > len(prefix) && strings.EqualFold(k[:len(prefix)], prefix) && strings.EqualFold(k[len(prefix):], key) {
			return v, true
		}
	}
	if !plain {
		return "", false
	}
	v, ok := settings[key]
	return v, ok
}

// nodeTLS is the TLS of a node's listeners: the server side of each SSL
// listener it binds, and the client side of the two it dials on other
// nodes, as Kafka builds a listener's SslFactory for both modes: the
// controller listener (the controller channel, the quorum's bootstrap
// servers, Raft) and the inter-broker listener (replica fetchers,
// transaction markers, Raft to broker observers). A dial is plain TCP
// where that listener is PLAINTEXT.
type nodeTLS struct {
	servers         map[string]*network.TLSListener
	controllerDial  DialFunc
	interBrokerDial DialFunc
}

// loadNodeTLS builds a node's TLS from its listeners' ssl.* settings at
// startup, as Kafka does: a keystore that does not load, a truststore
// missing with ssl.client.auth set, or bad principal mapping rules stop
// the node with the setting named. protocols is the parsed
// listener.security.protocol.map.
func loadNodeTLS(cfg *Config, listeners []network.Listener, protocols map[string]network.SecurityProtocol) (*nodeTLS, error) {
	t := &nodeTLS{servers: map[string]*network.TLSListener{}, controllerDial: dialTCP, interBrokerDial: dialTCP}
	for _, l := range listeners {
		if l.SecurityProtocol != network.SSL && l.SecurityProtocol != network.SASLSSL {
			continue
		}
		settings, err := cfg.ListenerTLS(l.Name)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		if _, prefixed := listenerSetting(cfg.SSL, l.Name, "ssl.client.auth", false); l.SecurityProtocol == network.SASLSSL && !prefixed {
			// As Kafka: a SASL_SSL listener's clients authenticate with
			// SASL; ssl.client.auth applies to it only listener-prefixed.
			settings.ClientAuth = tlsconf.ClientAuthNone
		}
		tc, err := settings.ServerConfig()
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		mapper, err := tlsconf.ParsePrincipalMappingRules(settings.PrincipalMappingRules)
		if err != nil {
			return nil, fmt.Errorf("listener %s: ssl.principal.mapping.rules: %w", l.Name, err)
		}
		t.servers[l.Name] = &network.TLSListener{
			Config:    tc,
			Principal: func(chain []*x509.Certificate) (string, error) { return mapper.Name(chain[0]) },
		}
	}
	dial := func(listener, role string) (DialFunc, error) {
		if protocols[listener] != network.SSL {
			return dialTCP, nil
		}
		settings, err := cfg.ListenerTLS(listener)
		if err != nil {
			return nil, fmt.Errorf("%s listener %s: %w", role, listener, err)
		}
		cc, err := settings.ClientConfig("")
		if err != nil {
			return nil, fmt.Errorf("%s listener %s (dialling other nodes): %w", role, listener, err)
		}
		return DialTLS(cc), nil
	}
	var err error
	if len(cfg.ControllerListenerNames) > 0 {
		if t.controllerDial, err = dial(cfg.ControllerListenerNames[0], "controller"); err != nil {
			return nil, err
		}
	}
	if t.interBrokerDial, err = dial(cfg.InterBrokerListenerName, "inter-broker"); err != nil {
		return nil, err
	}
	return t, nil
}
