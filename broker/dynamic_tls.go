package broker

// Dynamic keystore and truststore updates (KIP-226), the broker's side.
// An operator rotates a listener's certificate with
//
//	kafka-configs --bootstrap-server b1:9093 --entity-type brokers --entity-name 1 --alter \
//	  --add-config listener.name.external.ssl.keystore.location=/etc/kafka/new.p12
//
// (the same path again reloads a file replaced in place). As in Kafka:
//   - the broker the resource names validates the new stores where the
//     files are, before the request goes to the controller: they must load
//     and pass tlsconf.CheckUpdate (same subject and SANs unless
//     ssl.allow.dn.changes / ssl.allow.san.changes, trust across the
//     inter-broker and controller listeners); a failure is INVALID_CONFIG
//     and nothing is stored;
//   - the controller checks the rules of metadata.ValidateBrokerConfigs
//     (per broker, listener-prefixed) and commits the configs;
//   - each broker applies its own from the metadata image, at startup too
//     (ApplyMetadata → applyListenerTLS); a store that no longer loads
//     then keeps the listener's current TLS and logs an error;
//   - a set that changes no value commits nothing, so the broker that
//     validated it reloads the files itself once the controller answered.

import (
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/raftlog"
)

// listenerTLSConfig reports whether a dynamic broker config is a
// listener's keystore or truststore setting.
func listenerTLSConfig(name string) bool {
	_, base, ok := metadata.ListenerConfig(name)
	return ok && metadata.IsReconfigurableSSLConfig(base)
}

// ownBrokerConfigs are this broker's dynamic configs in img.
func (b *Broker) ownBrokerConfigs(img *metadata.Image) map[string]string {
	return brokerConfigs(img, strconv.Itoa(int(b.nodeID)))
}

// brokerConfigs are the dynamic configs of broker resource name in img
// ("" the cluster-wide defaults).
func brokerConfigs(img *metadata.Image, name string) map[string]string {
	if img == nil {
		return nil
	}
	return img.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: name})
}

// applyListenerTLS gives the node's SSL listeners this broker's dynamic
// keystore and truststore settings from img. Metadata goroutine.
func (b *Broker) applyListenerTLS(img *metadata.Image) {
	if b.tls != nil {
		b.tls.apply(b.ownBrokerConfigs(img), b.log)
	}
}

// apply gives the listeners a node's dynamic configs, logging a failure:
// the listeners concerned keep their TLS.
func (t *nodeTLS) apply(dynamic map[string]string, logger hclog.Logger) {
	if err := t.update(dynamic, false, logger); err != nil {
		logger.Error("this node's dynamic keystore or truststore configs could not be applied; the listener keeps its current ones",
			"error", err)
	}
}

// applyControllerTLS is a controller-only node's applyListenerTLS: it
// follows the metadata log for its own dynamic configs (a BROKER resource
// named by its node id, as Kafka keeps a controller's) and applies them to
// its SSL listeners, at start and on each change.
func (n *Node) applyControllerTLS(updates <-chan raftlog.Update, t *nodeTLS, nodeID int32, logger hclog.Logger) {
	defer close(n.subDone)
	own := metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: strconv.Itoa(int(nodeID))}
	first := true
	for u := range updates {
		if first || u.Reset || slices.Contains(u.Changes.Configs, own) {
			t.apply(u.Image.Configs(own), logger)
		}
		first = false
	}
}

// checkListenerTLS validates, before it is forwarded, a request that
// would leave next as the dynamic configs of the broker named (resource
// name): 0 when it sets no listener keystore or truststore setting or
// when they check out on this broker, else the error for that resource.
// touched are the config names the request sets or deletes.
func (b *Broker) checkListenerTLS(name string, touched []string, next map[string]string) (int16, string) {
	if !slices.ContainsFunc(touched, listenerTLSConfig) || name == "" {
		return 0, "" // the controller refuses cluster-wide ones
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return 0, "" // the controller refuses it
	}
	if int32(id) != b.nodeID {
		if _, isBroker := b.meta.Image().Broker(int32(id)); !isBroker {
			// A controller-only node: it takes its own from the
			// metadata log, and logs a keystore that does not load.
			return 0, ""
		}
		return kerr.InvalidRequest.Code, "Unexpected broker id, expected " + strconv.Itoa(int(b.nodeID)) + ", but received " + name +
			": a broker's listener keystore and truststore are validated by that broker, where the files are"
	}
	for _, n := range touched {
		if _, set := next[n]; !set {
			continue // deleting is always allowed
		}
		if listener, _, ok := metadata.ListenerConfig(n); ok && listenerTLSConfig(n) && (b.tls == nil || b.tls.listener(listener) == nil) {
			return kerr.InvalidConfig.Code, "Listener " + listener + " of broker " + name + " does not use SSL: " + n + " would have no effect"
		}
	}
	if err := b.tls.update(next, true, nil); err != nil {
		return kerr.InvalidConfig.Code, "Validation of dynamic config update of SSLFactory failed: " + err.Error()
	}
	return 0, ""
}

// reloadListenerTLS rebuilds the listeners whose store files changed
// since they were loaded, with the configs in this broker's image: the
// answer to a request that set a keystore path again (Kafka's
// reloadUpdatedFilesWithoutConfigChange).
func (b *Broker) reloadListenerTLS() {
	b.applyListenerTLS(b.image.Load())
}

// incrementalBrokerConfigs are the dynamic configs of a broker resource
// once an IncrementalAlterConfigs request's SET and DELETE operations
// apply to cur (APPEND and SUBTRACT are for LIST configs, which no
// keystore setting is; the controller decides those), and the names it
// touches.
func incrementalBrokerConfigs(cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, []string) {
	next := make(map[string]string, len(cur)+len(ops))
	for k, v := range cur {
		next[k] = v
	}
	touched := make([]string, 0, len(ops))
	for _, op := range ops {
		touched = append(touched, op.Name)
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value != nil {
				next[op.Name] = *op.Value
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Name)
		}
	}
	return next, touched
}

// listener returns the node's SSL listener of that name (in any case, as
// config keys write it lower-case), or nil.
func (t *nodeTLS) listener(name string) *listenerTLS {
	for n, lt := range t.listeners {
		if strings.EqualFold(n, name) {
			return lt
		}
	}
	return nil
}
