package broker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelstream/keel/metadata"
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
//     supported, so a SASL listener must set it. PLAIN, SCRAM-SHA-256 and
//     SCRAM-SHA-512 are supported; OAUTHBEARER and GSSAPI are refused with
//     the setting named.
//   - PLAIN's users are the user_<name>="<password>" options of
//     listener.name.<listener>.plain.sasl.jaas.config
//     (org.apache.kafka.common.security.plain.PlainLoginModule).
//   - SCRAM's users are the cluster's SCRAM credentials, in the metadata
//     log (kafka-configs --entity-type users, keel users, keel format
//     --add-scram), looked up in image at each authentication: a
//     credential added, changed or deleted counts from the next
//     connection. listener.name.<listener>.scram-sha-256.sasl.jaas.config
//     may name the ScramLoginModule, as Kafka's brokers need; it has
//     nothing else to say here.
//
// Brokers and controllers do not authenticate to each other with SASL yet,
// so neither the inter-broker nor a controller listener may be SASL.
func loadNodeSASL(cfg *Config, listeners []network.Listener, isBroker bool, image func() *metadata.Image) (map[string]*network.SASLListener, error) {
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
			return nil, fmt.Errorf("listener %s is %s: set sasl.enabled.mechanisms (Kafka's default, GSSAPI, is not supported; PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are)", l.Name, l.SecurityProtocol)
		}
		var mechs []string
		users := map[string]sasl.PlainUsers{}
		for _, m := range strings.Split(enabled, ",") {
			m = strings.ToUpper(strings.TrimSpace(m))
			if m == "" || slices.Contains(mechs, m) {
				continue
			}
			if m != sasl.MechanismPlain && !sasl.IsScram(m) {
				return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not supported yet (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are)", l.Name, m)
			}
			key := "listener.name." + strings.ToLower(l.Name) + "." + strings.ToLower(m) + ".sasl.jaas.config"
			text, ok := listenerSetting(cfg.SASL, l.Name, strings.ToLower(m)+".sasl.jaas.config", false)
			switch {
			case !ok && m == sasl.MechanismPlain:
				return nil, fmt.Errorf("listener %s enables %s but %s is not set (the PlainLoginModule with its user_<name>=\"<password>\" options)", l.Name, m, key)
			case ok:
				jaas, err := sasl.ParseJAAS(text)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				if m == sasl.MechanismPlain {
					if users[m], err = sasl.PlainUsersFromJAAS(jaas); err != nil {
						return nil, fmt.Errorf("%s: %w", key, err)
					}
				} else if jaas.LoginModule != sasl.ScramLoginModule {
					return nil, fmt.Errorf("%s: login module %s is not %s", key, jaas.LoginModule, sasl.ScramLoginModule)
				}
			}
			mechs = append(mechs, m)
		}
		if len(mechs) == 0 {
			return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", l.Name)
		}
		out[l.Name] = &network.SASLListener{
			Mechanisms: mechs,
			Start: func(m string) network.SASLExchange {
				if m == sasl.MechanismPlain {
					return plainExchange{users[m]}
				}
				return newScramExchange(m, image)
			},
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

// saslCatchUpWait bounds how long a SCRAM exchange waits for its broker to
// catch up with the metadata log before it looks the user up anyway.
const saslCatchUpWait = 30 * time.Second

// scramExchange is a connection's SASL/SCRAM exchange: two messages, the
// user's credential read from the metadata image at the first.
type scramExchange struct {
	mechanism string
	server    *sasl.ScramServer
}

func newScramExchange(mechanism string, image func() *metadata.Image) *scramExchange {
	m := metadata.ScramMechanismFromName(mechanism)
	lookup := func(user string) (sasl.ScramCredential, bool) {
		c, ok := image().ScramCredential(user, m)
		return sasl.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, ok
	}
	// Only SCRAM mechanisms reach here: loadNodeSASL enabled no other.
	server, _ := sasl.NewScramServer(mechanism, lookup)
	return &scramExchange{mechanism, server}
}

func (e *scramExchange) Next(msg []byte) ([]byte, bool, string, error) {
	answer, done, user, err := e.server.Next(msg)
	if err != nil {
		return nil, false, "", saslFailure{e.mechanism, err}
	}
	return answer, done, user, nil
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
