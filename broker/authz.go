package broker

// Authorization: with authorizer.class.name set to Kafka's
// StandardAuthorizer, every request is checked against the ACLs of the
// metadata image (metadata.Authorizer) before it is served, as Kafka's
// KafkaApis checks it: the operation and resource each API needs, per
// topic, group or transactional id where the API names several. A request
// denied as a whole gets the API's authorization error in every error
// field; one denied for some of its topics (or groups) is served for the
// others and answered with TOPIC_AUTHORIZATION_FAILED (or
// GROUP_AUTHORIZATION_FAILED) for those, in the same response. Where Kafka
// hides what a principal may not describe (a Metadata or OffsetFetch for
// everything, ListGroups, ListTransactions), so does Keel.
//
// The per-API rules: authz_apis.go. Fetch checks its partitions itself
// (handle_fetch.go), as its response is encoded for sendfile.

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
)

// StandardAuthorizerClass is the authorizer.class.name of Kafka's KRaft
// authorizer, the one Keel implements.
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// clusterName is the one CLUSTER resource's name, "kafka-cluster".
const clusterName = metadata.ClusterResourceName

// newAuthorizer is the configured authorizer, nil without one.
func newAuthorizer(cfg *Config) *metadata.Authorizer {
	if cfg == nil || cfg.AuthorizerClassName == "" {
		return nil
	}
	a := &metadata.Authorizer{SuperUsers: map[string]bool{}, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound}
	for _, u := range cfg.SuperUsers {
		a.SuperUsers[u] = true
	}
	return a
}

// requestAuthz is one request's authorization: its principal and host
// against the image the request is served from. A nil *requestAuthz
// allows everything (no authorizer).
type requestAuthz struct {
	b         *Broker
	img       *metadata.Image
	principal string
	host      string
	api       int16
}

// authzFor is req's authorization, nil without an authorizer.
func (b *Broker) authzFor(req *network.Request) *requestAuthz {
	if b.authorizer == nil {
		return nil
	}
	return &requestAuthz{b: b, img: b.currentImage(), principal: req.Conn.Principal, host: req.Conn.RemoteHost, api: req.Header.APIKey}
}

// allowed reports whether the request's principal may do op on the
// resource; a denial is logged (at most once a second), as Kafka's
// authorizer logger does.
func (z *requestAuthz) allowed(op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if z == nil {
		return true
	}
	if z.b.authorizer.Authorize(z.img, z.principal, z.host, op, typ, name) {
		return true
	}
	if z.b.denialLog.allow(time.Second) {
		z.b.log.Info("authorization denied", "principal", z.principal, "host", z.host, "operation", op.String(),
			"resource_type", typ.String(), "resource", name, "api", kmsg.NameForKey(z.api))
	}
	return false
}

// quiet is allowed without the denial's log line: for filtering what a
// principal may see (topics of a Metadata for everything), where Kafka
// logs nothing either.
func (z *requestAuthz) quiet(op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	return z == nil || z.b.authorizer.Authorize(z.img, z.principal, z.host, op, typ, name)
}

// operations narrows the authorized operations a response reports
// (KIP-430: a bit per operation, all the resource type supports, as
// answered without an authorizer) to those the principal may do. The
// "not asked" value (-2^31) is left as it is.
func (z *requestAuthz) operations(typ kmsg.ACLResourceType, name string, all int32) int32 {
	if all == math.MinInt32 {
		return all
	}
	var out int32
	for op := kmsg.ACLOperation(0); op < 31; op++ {
		if all&(1<<op) != 0 && z.quiet(op, typ, name) {
			out |= 1 << op
		}
	}
	return out
}

// cluster is allowed on the cluster resource.
func (z *requestAuthz) cluster(op kmsg.ACLOperation) bool {
	return z.allowed(op, kmsg.ACLResourceTypeCluster, clusterName)
}

// topic is allowed on a topic.
func (z *requestAuthz) topic(op kmsg.ACLOperation, name string) bool {
	return z.allowed(op, kmsg.ACLResourceTypeTopic, name)
}

// group is allowed on a consumer group.
func (z *requestAuthz) group(op kmsg.ACLOperation, name string) bool {
	return z.allowed(op, kmsg.ACLResourceTypeGroup, name)
}

// txn is allowed on a transactional id.
func (z *requestAuthz) txn(op kmsg.ACLOperation, id string) bool {
	return z.allowed(op, kmsg.ACLResourceTypeTransactionalId, id)
}

// topicName is a request's topic: its name, or the name of its topic id
// in the image ("" if unknown).
func (z *requestAuthz) topicName(name string, id [16]byte) string {
	if name != "" || id == ([16]byte{}) {
		return name
	}
	if t, ok := z.img.TopicByID(metadata.Uuid(id)); ok {
		return t.Name
	}
	return ""
}

// warnAnonymousNodes warns, with an authorizer, when nodes will reach each
// other as User:ANONYMOUS (a PLAINTEXT inter-broker or controller
// listener) and that principal is not a super user: replica fetchers,
// heartbeats and the rest need CLUSTER_ACTION, which only an ACL the
// operator has yet to create would give them. Kafka says nothing and its
// brokers fail to replicate; the warning names the fix.
func warnAnonymousNodes(cfg *Config, listeners []network.Listener, logger hclog.Logger) {
	if cfg.AuthorizerClassName == "" || slices.Contains(cfg.SuperUsers, network.AnonymousPrincipal) {
		return
	}
	for _, l := range listeners {
		internal := l.Name == cfg.InterBrokerListenerName || slices.Contains(cfg.ControllerListenerNames, l.Name)
		if internal && l.SecurityProtocol == network.Plaintext {
			logger.Warn("nodes reach each other as User:ANONYMOUS on a PLAINTEXT listener, which super.users does not name: "+
				"unless an ACL allows it ClusterAction on the cluster, replication and the controller channel are refused",
				"listener", l.Name, "super_users", strings.Join(cfg.SuperUsers, ";"))
		}
	}
}
