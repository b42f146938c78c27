package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// SecurityProtocol is a listener's security protocol, as named by Kafka's
// listener.security.protocol.map.
type SecurityProtocol string

// The security protocols Kafka defines.
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// knownProtocols lists every SecurityProtocol Kafka defines.
var knownProtocols = []SecurityProtocol{Plaintext, SSL, SASLPlaintext, SASLSSL}

// Listener is one entry of `listeners` or `advertised.listeners`:
// NAME://host:port plus the security protocol its name maps to.
type Listener struct {
	// Name is the listener name, upper-cased as Kafka normalises it
	// (PLAINTEXT, CONTROLLER, INTERNAL, ...).
	Name string
	// Host is the host or IP to bind or advertise. Empty binds every
	// interface; an empty advertised host is left for the broker to fill in
	// with its own host name, as Kafka does.
	Host string
	// Port is the TCP port; 0 binds an ephemeral port (tests).
	Port int
	// SecurityProtocol is what the name maps to in
	// listener.security.protocol.map.
	SecurityProtocol SecurityProtocol
}

// Address returns host:port in the form net.Listen and net.Dial take.
func (l Listener) Address() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String returns the listener in its configuration form, NAME://host:port.
func (l Listener) String() string { return l.Name + "://" + l.Address() }

// DefaultSecurityProtocolMap returns Kafka's default
// listener.security.protocol.map: every security protocol maps to itself, so
// `listeners=PLAINTEXT://:9092` needs no map. (In KRaft mode Kafka also maps
// controller.listener.names to PLAINTEXT when no map is configured; that
// rule needs controller.listener.names and belongs to the broker's config
// assembly.)
//
// DefaultSecurityProtocolMapValue is the same map as Kafka renders it.
func DefaultSecurityProtocolMap() map[string]SecurityProtocol {
	m := make(map[string]SecurityProtocol, len(knownProtocols))
	for _, p := range knownProtocols {
		m[string(p)] = p
	}
	return m
}

// DefaultSecurityProtocolMapValue is Kafka's default
// listener.security.protocol.map as Kafka writes it (its broker config
// docs, DescribeConfigs): the order is that of the Java HashMap Kafka
// builds it from.
const DefaultSecurityProtocolMapValue = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"

// ParseSecurityProtocol parses a protocol name, case-insensitively.
func ParseSecurityProtocol(name string) (SecurityProtocol, error) {
	up := SecurityProtocol(strings.ToUpper(strings.TrimSpace(name)))
	for _, p := range knownProtocols {
		if up == p {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown security protocol %q (want one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", name)
}

// ParseSecurityProtocolMap parses listener.security.protocol.map
// (`CONTROLLER:PLAINTEXT,INTERNAL:SASL_SSL`). An empty value returns
// DefaultSecurityProtocolMap, as Kafka does when the key is unset. Listener
// names are upper-cased.
func ParseSecurityProtocolMap(value string) (map[string]SecurityProtocol, error) {
	if strings.TrimSpace(value) == "" {
		return DefaultSecurityProtocolMap(), nil
	}
	m := make(map[string]SecurityProtocol)
	for _, entry := range splitCSV(value) {
		name, proto, ok := strings.Cut(entry, ":")
		name = strings.ToUpper(strings.TrimSpace(name))
		if !ok || name == "" || strings.TrimSpace(proto) == "" {
			return nil, fmt.Errorf("listener.security.protocol.map: entry %q is not of the form LISTENER_NAME:SECURITY_PROTOCOL", entry)
		}
		p, err := ParseSecurityProtocol(proto)
		if err != nil {
			return nil, fmt.Errorf("listener.security.protocol.map: listener %s: %w", name, err)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener.security.protocol.map: listener %s is mapped twice", name)
		}
		m[name] = p
	}
	return m, nil
}

// ParseListeners parses `listeners`
// (`PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093`, IPv6 as `[::1]:9092`)
// with Kafka's rules: every name must map to a security protocol in
// protocols (ParseSecurityProtocolMap), names are unique, and two listeners
// may not bind the same non-zero port unless one binds an IPv4 and the other
// an IPv6 address. It does not decide whether a protocol is supported; the
// Server does.
func ParseListeners(value string, protocols map[string]SecurityProtocol) ([]Listener, error) {
	ls, err := parseListenerList("listeners", value, protocols)
	if err != nil {
		return nil, err
	}
	if len(ls) == 0 {
		return nil, errors.New("listeners: no listener configured")
	}
	for i, a := range ls {
		for _, b := range ls[:i] {
			if a.Port != 0 && a.Port == b.Port && !ipv4AndIPv6(a.Host, b.Host) {
				return nil, fmt.Errorf("listeners: %s and %s use the same port %d; each listener must have a different port", b, a, a.Port)
			}
		}
	}
	return ls, nil
}

// ParseAdvertisedListeners parses `advertised.listeners`. An empty value
// advertises the listeners themselves, as Kafka does. Advertised names must
// be a subset of the listeners' names, and 0.0.0.0 (or ::) cannot be
// advertised: clients cannot connect to it.
func ParseAdvertisedListeners(value string, listeners []Listener, protocols map[string]SecurityProtocol) ([]Listener, error) {
	if strings.TrimSpace(value) == "" {
		return append([]Listener(nil), listeners...), nil
	}
	ls, err := parseListenerList("advertised.listeners", value, protocols)
	if err != nil {
		return nil, err
	}
	for _, a := range ls {
		found := false
		for _, l := range listeners {
			found = found || l.Name == a.Name
		}
		if !found {
			return nil, fmt.Errorf("advertised.listeners: listener %s is not in listeners; advertised listener names must be equal to or a subset of the ones in listeners", a.Name)
		}
		if addr, err := netip.ParseAddr(a.Host); err == nil && addr.IsUnspecified() {
			return nil, fmt.Errorf("advertised.listeners: %s uses the non-routable meta-address %s; advertise a routable address", a, a.Host)
		}
	}
	return ls, nil
}

// parseListenerList parses a comma-separated NAME://host:port list.
func parseListenerList(key, value string, protocols map[string]SecurityProtocol) ([]Listener, error) {
	var ls []Listener
	for _, entry := range splitCSV(value) {
		l, err := parseListener(entry, protocols)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		for _, prev := range ls {
			if prev.Name == l.Name {
				return nil, fmt.Errorf("%s: listener name %s appears twice; each listener must have a different name", key, l.Name)
			}
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// parseListener parses one NAME://host:port entry.
func parseListener(entry string, protocols map[string]SecurityProtocol) (Listener, error) {
	name, hostPort, ok := strings.Cut(entry, "://")
	name = strings.ToUpper(strings.TrimSpace(name))
	if !ok || name == "" {
		return Listener{}, fmt.Errorf("%q is not of the form LISTENER_NAME://host:port", entry)
	}
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return Listener{}, fmt.Errorf("%q: %w", entry, err)
	}
	if strings.ContainsAny(host, " /@") {
		return Listener{}, fmt.Errorf("%q: invalid host %q", entry, host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return Listener{}, fmt.Errorf("%q: port %q is not a number in 0..65535", entry, portStr)
	}
	proto, ok := protocols[name]
	if !ok {
		return Listener{}, fmt.Errorf("%q: no security protocol defined for listener %s (add it to listener.security.protocol.map)", entry, name)
	}
	return Listener{Name: name, Host: host, Port: port, SecurityProtocol: proto}, nil
}

// ipv4AndIPv6 reports whether one host is an IPv4 and the other an IPv6
// address: the only case where Kafka lets two listeners share a port.
func ipv4AndIPv6(a, b string) bool {
	x, errA := netip.ParseAddr(a)
	y, errB := netip.ParseAddr(b)
	if errA != nil || errB != nil {
		return false
	}
	return x.Is4() != y.Is4()
}

// splitCSV splits a comma-separated configuration value, trimming entries
// and dropping empty ones as Kafka's parseCsvList does.
func splitCSV(value string) []string {
	var out []string
	for _, s := range strings.Split(value, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
