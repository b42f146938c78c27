package broker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/network/sasl"
)

// isSASLKey reports whether a server.properties key is a SASL setting:
// sasl.*, or listener-prefixed (listener.name.<listener>.sasl.* and
// listener.name.<listener>.<mechanism>.sasl.jaas.config).
func isSASLKey(k string) bool {
	if strings.HasPrefix(k, "sasl.") {
		return true
	}
	rest, ok := strings.CutPrefix(k, "listener.name.")
	return ok && strings.Contains(rest, ".sasl.")
}

// loadNodeSASL builds the SASL side of each SASL_PLAINTEXT and SASL_SSL
// listener from its settings, as Kafka's broker does at startup:
//
//   - sasl.enabled.mechanisms (or listener.name.<listener>.sasl.enabled.
//     mechanisms) names the mechanisms; Kafka's default, GSSAPI, is not
//     supported, so a SASL listener must set it. PLAIN is supported;
//     SCRAM, OAUTHBEARER and GSSAPI are refused with the setting named.
//   - PLAIN's users are the user_<name>="<password>" options of
//     listener.name.<listener>.plain.sasl.jaas.config
//     (org.apache.kafka.common.security.plain.PlainLoginModule).
//
// Brokers and controllers do not authenticate to each other with SASL yet,
// so neither the inter-broker nor a controller listener may be SASL.
func loadNodeSASL(cfg *Config, listeners []network.Listener, isBroker bool) (map[string]*network.SASLListener, error) {
	out := map[string]*network.SASLListener{}
	for _, l := range listeners {
		if !l.SecurityProtocol.IsSASL() {
			continue
		}
		switch {
		case slices.Contains(cfg.ControllerListenerNames, l.Name):
			return nil, fmt.Errorf("listener %s is a controller listener (controller.listener.names) mapped to %s: "+
				"Keel's nodes do not authenticate to each other with SASL yet; use SSL (with ssl.client.auth=required) or PLAINTEXT", l.Name, l.SecurityProtocol)
		case isBroker && l.Name == cfg.InterBrokerListenerName:
			return nil, fmt.Errorf("listener %s is the inter-broker listener (inter.broker.listener.name) mapped to %s: "+
				"Keel's brokers do not authenticate to each other with SASL yet; use SSL (with ssl.client.auth=required) or PLAINTEXT", l.Name, l.SecurityProtocol)
		}
		enabled, ok := listenerSetting(cfg.SASL, l.Name, "sasl.enabled.mechanisms", true)
		if !ok {
			return nil, fmt.Errorf("listener %s is %s: set sasl.enabled.mechanisms (Kafka's default, GSSAPI, is not supported; PLAIN is)", l.Name, l.SecurityProtocol)
		}
		var mechs []string
		users := map[string]sasl.PlainUsers{}
		for _, m := range strings.Split(enabled, ",") {
			m = strings.ToUpper(strings.TrimSpace(m))
			if m == "" || slices.Contains(mechs, m) {
				continue
			}
			if m != sasl.MechanismPlain {
				return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not supported yet (PLAIN is)", l.Name, m)
			}
			key := "listener.name." + strings.ToLower(l.Name) + "." + strings.ToLower(m) + ".sasl.jaas.config"
			text, ok := listenerSetting(cfg.SASL, l.Name, strings.ToLower(m)+".sasl.jaas.config", false)
			if !ok {
				return nil, fmt.Errorf("listener %s enables %s but %s is not set (the PlainLoginModule with its user_<name>=\"<password>\" options)", l.Name, m, key)
			}
			jaas, err := sasl.ParseJAAS(text)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			u, err := sasl.PlainUsersFromJAAS(jaas)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			users[m] = u
			mechs = append(mechs, m)
		}
		if len(mechs) == 0 {
			return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", l.Name)
		}
		out[l.Name] = &network.SASLListener{
			Mechanisms: mechs,
			Start:      func(m string) network.SASLExchange { return plainExchange{users[m]} },
		}
	}
	return out, nil
}

// plainExchange is a connection's SASL/PLAIN exchange: one message.
type plainExchange struct{ users sasl.PlainUsers }

func (e plainExchange) Next(msg []byte) ([]byte, bool, string, error) {
	user, err := e.users.AuthenticatePlain(msg)
	if err != nil {
		return nil, false, "", saslFailure{sasl.MechanismPlain, err}
	}
	return nil, true, user, nil
}

// saslFailure is a failed exchange: the network layer logs the error and
// tells the client only its ClientMessage, as Kafka's broker does (not
// whether the user exists).
type saslFailure struct {
	mechanism string
	err       error
}

func (f saslFailure) Error() string         { return f.err.Error() }
func (f saslFailure) Unwrap() error         { return f.err }
func (f saslFailure) ClientMessage() string { return sasl.ClientMessage(f.mechanism, f.err) }
