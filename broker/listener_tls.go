package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelstream/keel/metadata"
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
// listener-prefixed configs override the plain ones. Over those,
// dynamic (this broker's dynamic configs) may set the listener's
// keystore and truststore keys, listener-prefixed; its other keys are not
// read.
func (c *Config) ListenerTLS(listener string, dynamic map[string]string) (tlsconf.Settings, error) {
	return tlsconf.FromProperties(func(key string) (string, bool) {
		if metadata.IsReconfigurableSSLConfig(key) {
			if v, ok := listenerSetting(dynamic, listener, key, false); ok {
				return v, true
			}
		}
		return listenerSetting(c.SSL, listener, key, true)
	})
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

// brokerSSLKeys are the ssl.* settings a node reads, plain or
// listener-prefixed: a listener's TLS (tlsconf.Keys) and the rules of its
// keystore updates (updateRules).
func brokerSSLKeys() []string {
	return append(tlsconf.Keys(), "ssl.allow.dn.changes", "ssl.allow.san.changes")
}

// nodeTLS is the TLS of a node's listeners: the server side of each SSL
// listener it binds, and the client side of the two it dials on other
// nodes, as Kafka builds a listener's SslFactory for both modes: the
// controller listener (the controller channel, the quorum's bootstrap
// servers, Raft) and the inter-broker listener (replica fetchers,
// transaction markers, Raft to broker observers). A dial is plain TCP
// where that listener is PLAINTEXT.
//
// A listener's keystore and truststore can be replaced at runtime, per
// broker (KIP-226: kafka-configs --entity-type brokers --entity-name 1
// --alter --add-config listener.name.external.ssl.keystore.location=...):
// see update. Connections made after an update use the new stores; the
// open ones keep theirs, as in Kafka.
type nodeTLS struct {
	cfg             *Config
	listeners       map[string]*listenerTLS // by name: every SSL listener bound or dialled
	servers         map[string]*network.TLSListener
	controllerDial  DialFunc
	interBrokerDial DialFunc
}

// listenerTLS is one SSL (or SASL_SSL) listener's TLS as last built.
type listenerTLS struct {
	name    string
	saslSSL bool // SASL_SSL: ssl.client.auth applies only listener-prefixed
	bound   bool // this node serves it
	dialled bool // this node dials other nodes' listener of this name
	rules   tlsconf.UpdateRules

	mu       sync.Mutex // serializes builds and updates
	settings tlsconf.Settings
	stores   tlsconf.Stores
	server   atomic.Pointer[tls.Config] // when bound
	client   atomic.Pointer[tls.Config] // when dialled
}

// loadNodeTLS builds a node's TLS from its listeners' ssl.* settings at
// startup, as Kafka does: a keystore that does not load, a truststore
// missing with ssl.client.auth set, or bad principal mapping rules stop
// the node with the setting named. protocols is the parsed
// listener.security.protocol.map.
func loadNodeTLS(cfg *Config, listeners []network.Listener, protocols map[string]network.SecurityProtocol, log hclog.Logger) (*nodeTLS, error) {
	t := &nodeTLS{cfg: cfg, listeners: map[string]*listenerTLS{}, servers: map[string]*network.TLSListener{},
		controllerDial: dialTCP, interBrokerDial: dialTCP}
	rules, err := updateRules(cfg)
	if err != nil {
		return nil, err
	}
	for _, l := range listeners {
		if l.SecurityProtocol != network.SSL && l.SecurityProtocol != network.SASLSSL {
			continue
		}
		lt := &listenerTLS{name: l.Name, saslSSL: l.SecurityProtocol == network.SASLSSL, bound: true, rules: rules}
		t.listeners[l.Name] = lt
		settings, err := lt.settingsWith(cfg, nil)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		mapper, err := tlsconf.ParsePrincipalMappingRules(settings.PrincipalMappingRules)
		if err != nil {
			return nil, fmt.Errorf("listener %s: ssl.principal.mapping.rules: %w", l.Name, err)
		}
		t.servers[l.Name] = &network.TLSListener{
			// Each handshake takes the listener's current configuration.
			Config:    &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return lt.server.Load(), nil }},
			Principal: func(chain []*x509.Certificate) (string, error) { return mapper.Name(chain[0]) },
		}
	}
	dial := func(listener, mechanismKey string) (DialFunc, error) {
		d := dialTCP
		p := protocols[listener]
		if p == network.SSL || p == network.SASLSSL {
			lt := t.listeners[listener]
			if lt == nil {
				lt = &listenerTLS{name: listener, saslSSL: p == network.SASLSSL, rules: rules}
				t.listeners[listener] = lt
			}
			lt.dialled = true
			d = dialTLSFrom(lt.client.Load)
		}
		if !p.IsSASL() {
			return d, nil
		}
		mech, err := internodeMechanism(cfg, listener, mechanismKey, log)
		if err != nil {
			return nil, err
		}
		return dialSASL(d, listener, mech), nil
	}
	if len(cfg.ControllerListenerNames) > 0 {
		if t.controllerDial, err = dial(cfg.ControllerListenerNames[0], "sasl.mechanism.controller.protocol"); err != nil {
			return nil, err
		}
	}
	if t.interBrokerDial, err = dial(cfg.InterBrokerListenerName, "sasl.mechanism.inter.broker.protocol"); err != nil {
		if cfg.HasRole("broker") {
			return nil, err
		}
		// A controller-only node dials the inter-broker listener only to
		// replicate the metadata log to brokers (Raft observers), which
		// Kafka's controllers do not do: its server.properties need not
		// say how. Those dials fail, naming the setting.
		cause := err
		t.interBrokerDial = func(context.Context, string) (net.Conn, error) {
			return nil, fmt.Errorf("dial a broker observer: %w", cause)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.listeners)) {
		lt := t.listeners[name]
		settings, err := lt.settingsWith(cfg, nil)
		if err == nil {
			err = lt.install(settings)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lt.describe(cfg), err)
		}
	}
	return t, nil
}

// describe names the listener in errors: by the role this node dials it
// in, when it does not bind it.
func (lt *listenerTLS) describe(cfg *Config) string {
	switch {
	case lt.bound:
		return "listener " + lt.name
	case slices.Contains(cfg.ControllerListenerNames, lt.name):
		return "controller listener " + lt.name + " (dialling other nodes)"
	default:
		return "inter-broker listener " + lt.name + " (dialling other nodes)"
	}
}

// updateRules reads ssl.allow.dn.changes and ssl.allow.san.changes.
func updateRules(cfg *Config) (tlsconf.UpdateRules, error) {
	var r tlsconf.UpdateRules
	for key, dst := range map[string]*bool{"ssl.allow.dn.changes": &r.AllowDNChanges, "ssl.allow.san.changes": &r.AllowSANChanges} {
		if v, ok := cfg.SSL[key]; ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return r, fmt.Errorf("%s: %q is not true or false", key, v)
			}
			*dst = b
		}
	}
	return r, nil
}

// settingsWith is the listener's ssl.* settings with dynamic (this
// broker's dynamic configs) over server.properties' (Config.ListenerTLS).
func (lt *listenerTLS) settingsWith(cfg *Config, dynamic map[string]string) (tlsconf.Settings, error) {
	s, err := cfg.ListenerTLS(lt.name, dynamic)
	if err != nil {
		return s, err
	}
	if _, prefixed := listenerSetting(cfg.SSL, lt.name, "ssl.client.auth", false); lt.saslSSL && !prefixed {
		// As Kafka: a SASL_SSL listener's clients authenticate with
		// SASL; ssl.client.auth applies to it only listener-prefixed.
		s.ClientAuth = tlsconf.ClientAuthNone
	}
	return s, nil
}

// build loads settings' stores and the listener's configurations from
// them, without installing anything.
func (lt *listenerTLS) build(settings tlsconf.Settings) (stores tlsconf.Stores, server, client *tls.Config, err error) {
	if stores, err = settings.LoadStores(); err != nil {
		return
	}
	if lt.bound {
		if server, err = settings.ServerConfigWith(stores); err != nil {
			return
		}
	}
	if lt.dialled {
		client, err = settings.ClientConfigWith(stores, "")
	}
	return
}

// install builds and installs the listener's TLS from settings.
func (lt *listenerTLS) install(settings tlsconf.Settings) error {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	stores, server, client, err := lt.build(settings)
	if err != nil {
		return err
	}
	lt.set(settings, stores, server, client)
	return nil
}

func (lt *listenerTLS) set(settings tlsconf.Settings, stores tlsconf.Stores, server, client *tls.Config) {
	lt.settings, lt.stores = settings, stores
	if server != nil {
		lt.server.Store(server)
	}
	if client != nil {
		lt.client.Store(client)
	}
}

// update rebuilds the listener's TLS with dynamic as this broker's
// dynamic configs, if that changes its settings or a store file was
// replaced since it was built (Kafka reloads a store set again to the
// same path). The new stores must pass tlsconf.CheckUpdate against the
// ones in use; the inter-broker and controller listeners also check that
// each side's truststore trusts the other's certificate, as Kafka does
// for the listener other brokers connect to. With validateOnly nothing is
// installed. It reports whether the listener's TLS changed.
func (lt *listenerTLS) update(cfg *Config, dynamic map[string]string, validateOnly bool) (bool, error) {
	settings, err := lt.settingsWith(cfg, dynamic)
	if err != nil {
		return false, err
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if reflect.DeepEqual(settings, lt.settings) && !lt.stores.Modified() {
		return false, nil
	}
	stores, server, client, err := lt.build(settings)
	if err != nil {
		return false, err
	}
	rules := lt.rules
	rules.VerifyTrust = lt.dialled
	if err := tlsconf.CheckUpdate(lt.stores, stores, rules); err != nil {
		return false, err
	}
	if !validateOnly {
		lt.set(settings, stores, server, client)
	}
	return true, nil
}

// update applies dynamic, this broker's dynamic configs, to every SSL
// listener (see listenerTLS.update), logging each one replaced. The
// error names the listeners that failed; those keep their TLS.
func (t *nodeTLS) update(dynamic map[string]string, validateOnly bool, logger hclog.Logger) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(t.listeners)) {
		lt := t.listeners[name]
		changed, err := lt.update(t.cfg, dynamic, validateOnly)
		if err != nil {
			errs = append(errs, fmt.Errorf("listener %s: %w", name, err))
			continue
		}
		if changed && !validateOnly && logger != nil {
			leaf := lt.currentLeaf()
			logger.Info("reloaded a listener's keystore and truststore", "listener", name,
				"subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return errors.Join(errs...)
}

// currentLeaf is the listener's certificate (an empty one without a
// keystore).
func (lt *listenerTLS) currentLeaf() *x509.Certificate {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.stores.Leaf == nil {
		return &x509.Certificate{}
	}
	return lt.stores.Leaf
}
