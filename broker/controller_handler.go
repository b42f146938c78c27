package broker

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/raftlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// controllerAPIs are the APIs a controller listener serves: the broker
// lifecycle (KIP-631), partition changes from leaders, the log dirs of
// brokers' replicas (KIP-858), producer id blocks,
// metadata changes forwarded by brokers or sent by admin clients with
// --bootstrap-controller, the reads such clients make (DescribeCluster,
// DescribeConfigs, DescribeAcls, ListPartitionReassignments, as Kafka's
// ControllerApis serves them), and DescribeQuorum. Versions go up to what kmsg
// decodes: the controller logic works on kmsg's structs at any version.
var controllerAPIs = []kmsg.Key{
	kmsg.ApiVersions, kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.AlterPartition,
	kmsg.AllocateProducerIDs, kmsg.DescribeQuorum, kmsg.CreateTopics, kmsg.DeleteTopics,
	kmsg.CreatePartitions, kmsg.IncrementalAlterConfigs, kmsg.AlterConfigs, kmsg.ElectLeaders,
	kmsg.DescribeCluster, kmsg.AlterPartitionAssignments, kmsg.UnregisterBroker, kmsg.AlterClientQuotas,
	kmsg.AlterUserSCRAMCredentials, kmsg.CreateACLs, kmsg.DeleteACLs, kmsg.AddRaftVoter, kmsg.RemoveRaftVoter,
	kmsg.DescribeConfigs, kmsg.DescribeACLs, kmsg.ListPartitionReassignments, kmsg.UpdateFeatures,
	kmsg.AssignReplicasToDirs, kmsg.CreateDelegationToken, kmsg.RenewDelegationToken, kmsg.ExpireDelegationToken,
}

// controllerHandler serves the controller listener (network.Handler).
// Requests that change metadata go through the driver's single event loop;
// each waits on its own goroutine so the connection keeps reading.
type controllerHandler struct {
	driver    *controllerDriver
	raft      *raftlog.Node
	nodeID    int32
	voters    func() map[int32]string // the current voters' controller addresses
	dynamic   bool                    // a KIP-853 quorum: voters can be added and removed
	listener  string                  // the controller listener name, for DescribeQuorum nodes
	logger    hclog.Logger
	wg        *sync.WaitGroup // owned by the node: waited for at shutdown
	apiRanges map[int16][2]int16
	// forward sends a request to the active controller (DescribeQuorum
	// asked of a follower controller).
	forward   func(context.Context, kmsg.Request) (kmsg.Response, error)
	clusterID string
	// authorizer, if set, admits only principals with CLUSTER_ACTION
	// (authorized).
	authorizer *metadata.Authorizer
	// configs answers DescribeConfigs from this node's configuration.
	configs *nodeConfigs
}

func newControllerHandler(driver *controllerDriver, raft *raftlog.Node, nodeID int32, voters func() map[int32]string, dynamic bool, listener string, logger hclog.Logger, wg *sync.WaitGroup) *controllerHandler {
	h := &controllerHandler{driver: driver, raft: raft, nodeID: nodeID, voters: voters, dynamic: dynamic, listener: listener,
		logger: logger.Named("controller-api"), wg: wg, apiRanges: map[int16][2]int16{}}
	for _, k := range controllerAPIs {
		req := kmsg.RequestForKey(k.Int16())
		h.apiRanges[k.Int16()] = [2]int16{0, req.MaxVersion()}
	}
	return h
}

// kraftVersion is the quorum's kraft.version: 1 when dynamic.
func (h *controllerHandler) kraftVersion() int16 {
	if h.dynamic {
		return 1
	}
	return 0
}

// SupportedVersions implements network.Handler.
func (h *controllerHandler) SupportedVersions(_ string, key int16) (int16, int16, bool) {
	r, ok := h.apiRanges[key]
	return r[0], r[1], ok
}

// Handle implements network.Handler.
func (h *controllerHandler) Handle(ctx context.Context, req *network.Request) network.Result {
	switch r := req.Msg.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range controllerAPIs {
			rng := h.apiRanges[k.Int16()]
			v := kmsg.NewApiVersionsResponseApiKey()
			v.ApiKey, v.MinVersion, v.MaxVersion = k.Int16(), rng[0], rng[1]
			resp.ApiKeys = append(resp.ApiKeys, v)
		}
		if req.Conn.SecurityProtocol.IsSASL() {
			// The network layer serves SaslHandshake and SaslAuthenticate;
			// a SASL client (Java's) takes their versions from here.
			resp.ApiKeys = append(resp.ApiKeys, network.SASLApiVersions()...)
			slices.SortFunc(resp.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
		}
		setApiVersionsFeatures(resp, r.Version, h.raft.Image(), h.kraftVersion())
		return &network.Response{Msg: resp}
	}
	if h.authorizer != nil && !h.authorized(req) {
		return &network.Response{Msg: clusterDenied(req.Msg)}
	}
	switch req.Msg.(type) {
	case *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest:
		if h.authorizer == nil {
			// As Kafka's controller without an authorizer: a cluster
			// whose brokers enforce ACLs must have its controllers
			// configured alike.
			return &network.Response{Msg: errorResponseWithMessage(req.Msg, kerr.SecurityDisabled.Code, noAuthorizer)}
		}
	}
	d := network.NewDeferred()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		d.Complete(&network.Response{Msg: h.serve(ctx, req.Msg)})
	}()
	return d
}

// authorized reports whether req's principal may use the controller
// listener: CLUSTER_ACTION on the cluster, as Kafka's ControllerApis asks
// of brokers and controllers (DESCRIBE for DescribeQuorum). Keel's brokers
// forward admin requests on their own connections, not in Kafka's
// envelopes, so the controller cannot check the client's principal: the
// broker has, and an admin client that comes here with
// --bootstrap-controller needs CLUSTER_ACTION (or to be a super user).
func (h *controllerHandler) authorized(req *network.Request) bool {
	op := kmsg.ACLOperationClusterAction
	switch req.Msg.(type) {
	case *kmsg.DescribeQuorumRequest, *kmsg.DescribeACLsRequest, *kmsg.ListPartitionReassignmentsRequest:
		op = kmsg.ACLOperationDescribe
	case *kmsg.DescribeConfigsRequest:
		op = kmsg.ACLOperationDescribeConfigs
	}
	host := req.Conn.RemoteHost
	if h.authorizer.Authorize(h.raft.Image(), req.Conn.Principal, host, op, kmsg.ACLResourceTypeCluster, clusterName) {
		return true
	}
	h.logger.Info("authorization denied", "principal", req.Conn.Principal, "host", host, "operation", op.String(),
		"resource_type", "CLUSTER", "api", kmsg.NameForKey(req.Header.APIKey))
	return false
}

// serve answers one request; it may block on the event loop and Raft.
func (h *controllerHandler) serve(ctx context.Context, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.DescribeQuorumRequest:
		if !h.raft.IsLeader() && h.forward != nil {
			// The leader measures the quorum, so a follower forwards. With
			// no leader to answer (an election, a lost quorum), the
			// follower answers itself, as a Kafka controller that is not
			// the leader does: NOT_LEADER_OR_FOLLOWER, and the voters'
			// endpoints, which a broker started with
			// controller.quorum.bootstrap.servers is asking for.
			fctx, cancel := context.WithTimeout(ctx, describeQuorumForwardTimeout)
			resp, err := h.forward(fctx, r)
			cancel()
			if err == nil {
				return resp
			}
			if ctx.Err() != nil {
				return errorResponse(req, kerr.RequestTimedOut.Code)
			}
		}
		return h.describeQuorum(ctx, r)
	case *kmsg.DescribeClusterRequest:
		return h.describeCluster(r)
	case *kmsg.DescribeConfigsRequest:
		return h.describeConfigs(r)
	case *kmsg.DescribeACLsRequest:
		return describeAcls(h.authorizer, h.raft.Image(), r)
	case *kmsg.ListPartitionReassignmentsRequest:
		return metadata.ListPartitionReassignments(h.raft.Image(), r)
	case *kmsg.IncrementalAlterConfigsRequest:
		if slices.ContainsFunc(r.Resources, func(r kmsg.IncrementalAlterConfigsRequestResource) bool {
			return r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger
		}) {
			return h.incrementalAlterConfigs(ctx, r)
		}
	case *kmsg.AddRaftVoterRequest:
		return h.addRaftVoter(ctx, r)
	case *kmsg.RemoveRaftVoterRequest:
		return h.removeRaftVoter(ctx, r)
	}
	if ct, ok := req.(*kmsg.CreateTopicsRequest); ok && isInternalCreate(ct) {
		req = &internalCreateTopics{*ct} // the broker's own __consumer_offsets
	}
	return h.submit(ctx, req)
}

// incrementalAlterConfigs applies m's BROKER_LOGGER resources to this
// node, as a broker applies its own (broker_logger.go; Kafka's controller
// does so too), and submits the others.
func (h *controllerHandler) incrementalAlterConfigs(ctx context.Context, m *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	var local []kmsg.IncrementalAlterConfigsResponseResource
	rest := *m
	rest.Resources = nil
	for _, r := range m.Resources {
		if r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
			local = append(local, h.loggers().alter(r, m.ValidateOnly))
		} else {
			rest.Resources = append(rest.Resources, r)
		}
	}
	resp := m.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	if len(rest.Resources) > 0 {
		resp = h.submit(ctx, &rest).(*kmsg.IncrementalAlterConfigsResponse)
	}
	resp.Resources = append(resp.Resources, local...)
	return resp
}

// loggers is this node's BROKER_LOGGER resource.
func (h *controllerHandler) loggers() nodeLoggers {
	return nodeLoggers{nodeID: h.nodeID, log: h.logger}
}

// submit runs req through the controller's event loop.
func (h *controllerHandler) submit(ctx context.Context, req kmsg.Request) kmsg.Response {
	resp, offset, err := h.driver.submit(ctx, req)
	switch {
	case errors.Is(err, errNotController), errors.Is(err, errControllerStopped):
		return notControllerResponse(req)
	case err != nil:
		h.logger.Warn("controller request failed", "api", kmsg.NameForKey(req.Key()), "error", err)
		return errorResponse(req, kerr.RequestTimedOut.Code)
	}
	setOffsetTag(resp, offset)
	return resp
}

// describeQuorumForwardTimeout bounds how long a follower controller
// waits for the leader to answer a forwarded DescribeQuorum.
const describeQuorumForwardTimeout = time.Second

// metadataTopic is the metadata log's name as Kafka's DescribeQuorum takes it.
const metadataTopic = "__cluster_metadata"

// NewDescribeQuorumRequest asks for the metadata quorum: __cluster_metadata
// partition 0, what kafka-metadata-quorum.sh asks for.
func NewDescribeQuorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = metadataTopic
	t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, t)
	return req
}

// describeQuorum reports the metadata quorum as the Raft leader measures it
// (DescribeQuorum, API 55; KIP-595, KIP-836 timestamps, KIP-853 nodes).
func (h *controllerHandler) describeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic != metadataTopic || p.Partition != 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			qs, err := h.raft.QuorumState(ctx)
			if err != nil {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
				if id, ok := h.raft.LeaderID(); ok {
					rp.LeaderID = id
				} else {
					rp.LeaderID = -1
				}
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = qs.LeaderID, int32(qs.LeaderEpoch), qs.HighWatermark
			for _, v := range qs.Voters {
				rp.CurrentVoters = append(rp.CurrentVoters, replicaState(v))
			}
			for _, o := range qs.Observers {
				rp.Observers = append(rp.Observers, replicaState(o))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, v := range h.voterEndpoints() {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = v.id
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = h.listener, v.host, uint16(v.port)
		n.Listeners = append(n.Listeners, l)
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp
}

// voterEndpoint is a voter's controller address, split.
type voterEndpoint struct {
	id   int32
	host string
	port int
}

// voterEndpoints are the current voters' controller addresses in node id
// order; one that does not parse is left out.
func (h *controllerHandler) voterEndpoints() []voterEndpoint {
	voters := h.voters()
	var out []voterEndpoint
	for _, id := range slices.Sorted(maps.Keys(voters)) {
		host, port, err := net.SplitHostPort(voters[id])
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(port)
		out = append(out, voterEndpoint{id: id, host: host, port: n})
	}
	return out
}

// describeCluster answers DescribeCluster on a controller listener
// (KIP-919). EndpointType 2 (controllers), what an admin client with
// bootstrap.controllers asks (kafka-metadata-quorum.sh and kafka-configs.sh
// --bootstrap-controller), gets the voters at their controller endpoints,
// which the client then sends its requests to by node id, and the active
// controller, as Kafka's controllers answer. EndpointType 1, which Kafka
// refuses on a controller listener (MISMATCHED_ENDPOINT_TYPE), gets the
// registered brokers: keel's own CLI reads the cluster id and the broker
// ids so. Any other type is UNSUPPORTED_ENDPOINT_TYPE.
func (h *controllerHandler) describeCluster(req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.EndpointType != endpointTypeBroker {
		if code, msg := describeClusterEndpointCheck(req, endpointTypeController); code != 0 {
			resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
			return resp
		}
	}
	resp.ClusterID = h.clusterID
	resp.EndpointType = req.EndpointType
	leader, hasLeader := h.raft.LeaderID()
	resp.ControllerID = -1
	if req.EndpointType == endpointTypeController {
		for _, v := range h.voterEndpoints() {
			rb := kmsg.NewDescribeClusterResponseBroker()
			rb.NodeID, rb.Host, rb.Port = v.id, v.host, int32(v.port)
			resp.Brokers = append(resp.Brokers, rb)
			if hasLeader && v.id == leader {
				resp.ControllerID = leader // as Kafka: only a node it lists
			}
		}
		return resp
	}
	if hasLeader {
		resp.ControllerID = leader
	}
	for _, b := range h.raft.Image().Brokers() {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID = b.ID
		if len(b.Endpoints) > 0 {
			rb.Host, rb.Port = b.Endpoints[0].Host, b.Endpoints[0].Port
		}
		if b.Rack != "" {
			rack := b.Rack
			rb.Rack = &rack
		}
		rb.IsFenced = b.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp
}

func replicaState(r raftlog.ReplicaState) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	s.ReplicaID, s.LogEndOffset = r.NodeID, r.LogEndOffset
	s.LastFetchTimestamp, s.LastCaughtUpTimestamp = r.LastFetchTimestamp, r.LastCaughtUpTimestamp
	return s
}

// describeConfigs answers DescribeConfigs on a controller listener (an
// admin client with --bootstrap-controller, KIP-919) from this
// controller's metadata image and its own configuration, as Kafka's
// ConfigHelper does on controllers: this node's id gives every static
// config with the dynamic ones overlaid, the empty name the cluster-wide
// dynamic defaults, a topic every topic config with its effective value
// (this node's server.properties supplying the broker synonyms), exactly
// as a broker answers them. Another broker's id, which Kafka refuses
// (INVALID_REQUEST: the request belongs on that node), gets the dynamic
// configs the metadata log holds for it: a controller knows no other
// node's server.properties. Sensitive values are never returned. Its
// BROKER_LOGGER resource is its log level, as a broker's (broker_logger.go).
func (h *controllerHandler) describeConfigs(req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := h.raft.Image()
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			h.configs.describeTopicConfigs(img, req, &out, wantConfig(rr))
		case kmsg.ConfigResourceTypeBrokerLogger:
			h.loggers().describe(&out, wantConfig(rr))
		case kmsg.ConfigResourceTypeBroker:
			id, err := strconv.ParseInt(rr.ResourceName, 10, 32)
			switch {
			case rr.ResourceName == "" || err == nil && int32(id) == h.nodeID:
				h.configs.describeBrokerConfigs(img, req, &out, wantConfig(rr))
			case err != nil:
				out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("broker resource "+rr.ResourceName+" is not a broker id")
			default:
				describeDynamicBrokerConfigs(img, req, &out, wantConfig(rr))
			}
		default:
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("a controller describes broker, broker logger and topic configs")
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// describeDynamicBrokerConfigs lists the dynamic configs the metadata log
// holds for the broker rr names, with the cluster-wide value each
// overrides as its synonym.
func describeDynamicBrokerConfigs(img *metadata.Image, req *kmsg.DescribeConfigsRequest, rr *kmsg.DescribeConfigsResponseResource, want func(string) bool) {
	perBroker := img.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: rr.ResourceName})
	clusterDefaults := img.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceBroker})
	for _, name := range sortedKeys(perBroker) {
		syns := []configSynonym{{Name: name, Value: perBroker[name], Source: sourceDynamicBroker}}
		if v, ok := clusterDefaults[name]; ok {
			syns = append(syns, configSynonym{Name: name, Value: v, Source: sourceDynamicDefaultBroker})
		}
		appendBrokerConfig(rr, req, want, name, kmsg.StringPtr(perBroker[name]), kmsg.ConfigTypeString, syns)
	}
}
