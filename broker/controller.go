package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/metadata"
	"github.com/keelstream/keel/network"
	"github.com/keelstream/keel/raftlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetTag is the tagged field in which the controller returns, on a
// flexible response, the metadata offset that committed the request's
// records. A forwarding broker answers its client only once its own image
// has applied that offset (DESIGN §3). Kafka's own forwarding (Envelope)
// needs no such tag because KRaft brokers wait on the request's records
// differently; Keel's tag is ignored by any other reader.
const offsetTag uint32 = 0x4b45454c // "KEEL"

// controllerEvent is one request for the controller's event loop.
type controllerEvent struct {
	req  kmsg.Request
	resp chan controllerResult
}

type controllerResult struct {
	resp   kmsg.Response
	offset int64
	err    error
}

// controllerDriver runs the controller (DESIGN §3): while this node is the
// Raft leader, one goroutine owns a metadata.ClusterControl and processes
// requests and ticks in order; each decision's records are proposed as one
// batch and the response is released only once they are committed. When
// leadership is lost the ClusterControl is dropped and requests are answered
// NOT_CONTROLLER.
type controllerDriver struct {
	raft   *raftlog.Node
	cfg    metadata.ControllerConfig
	logger hclog.Logger
	events chan controllerEvent
	stop   chan struct{}
	wg     sync.WaitGroup
	// onBrokerRegistered adds a broker-only node as a Raft observer.
	interBrokerListener string
	// bootstrap are the records this controller was formatted with
	// (keel format --add-scram): committed by the first active controller
	// of an empty metadata log.
	bootstrap []metadata.Record
	// arrivals are the heartbeats submitted since the last tick, noted as
	// they arrive, whether or not the loop is free to take them.
	arrivals heartbeatArrivals
	// activeNow is set while the active loop runs: only then are arrivals
	// noted (the loop takes them each tick), so an inactive controller
	// keeps none.
	activeNow atomic.Bool
	// beforeTick, when set (tests), runs on each tick before the sessions
	// are checked: a stall of the loop there is one the tick cannot see.
	beforeTick func()
}

// heartbeatArrivals are the latest arrival time of each broker's heartbeat
// (and its broker epoch), taken by the event loop before each Tick.
type heartbeatArrivals struct {
	mu     sync.Mutex
	latest map[int32]heartbeatArrival
}

type heartbeatArrival struct {
	epoch int64
	at    time.Time
}

// note records req's arrival now.
func (a *heartbeatArrivals) note(req *kmsg.BrokerHeartbeatRequest, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.latest == nil {
		a.latest = map[int32]heartbeatArrival{}
	}
	a.latest[req.BrokerID] = heartbeatArrival{epoch: req.BrokerEpoch, at: now}
}

// take returns the arrivals noted since the last take.
func (a *heartbeatArrivals) take() map[int32]heartbeatArrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	latest := a.latest
	a.latest = nil
	return latest
}

func newControllerDriver(raft *raftlog.Node, cfg metadata.ControllerConfig, interBrokerListener string, bootstrap []metadata.Record, logger hclog.Logger) *controllerDriver {
	d := &controllerDriver{
		raft:                raft,
		cfg:                 cfg,
		bootstrap:           bootstrap,
		logger:              logger.Named("controller"),
		events:              make(chan controllerEvent),
		stop:                make(chan struct{}),
		interBrokerListener: interBrokerListener,
	}
	d.wg.Add(1)
	go d.run()
	return d
}

// submit hands a request to the event loop and waits for its result. A
// heartbeat's arrival counts as the broker's contact at once, even when the
// loop is busy with a request that takes long to commit (KAFKA-17793).
func (d *controllerDriver) submit(ctx context.Context, req kmsg.Request) (kmsg.Response, int64, error) {
	if hb, ok := req.(*kmsg.BrokerHeartbeatRequest); ok && d.activeNow.Load() {
		d.arrivals.note(hb, time.Now())
	}
	ev := controllerEvent{req: req, resp: make(chan controllerResult, 1)}
	select {
	case d.events <- ev:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-d.stop:
		return nil, 0, errControllerStopped
	}
	select {
	case r := <-ev.resp:
		return r.resp, r.offset, r.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

var (
	// errNotController answers requests on a controller that is not the
	// Raft leader.
	errNotController = errors.New("this controller is not active")
	// errControllerStopped answers requests after shutdown.
	errControllerStopped = errors.New("controller stopped")
)

func (d *controllerDriver) close() {
	close(d.stop)
	d.wg.Wait()
}

// run is the driver's goroutine: it waits for leadership, then runs the
// active loop until leadership is lost, answering NOT_CONTROLLER meanwhile.
func (d *controllerDriver) run() {
	defer d.wg.Done()
	leaderCh := d.raft.LeaderCh()
	isLeader := d.raft.IsLeader()
	for {
		if isLeader {
			isLeader = d.active(leaderCh)
			continue
		}
		select {
		case <-d.stop:
			return
		case isLeader = <-leaderCh:
		case ev := <-d.events:
			ev.resp <- controllerResult{err: errNotController}
		}
	}
}

// active runs while this node leads; it returns the new leadership state.
func (d *controllerDriver) active(leaderCh <-chan bool) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// A new leader may have committed entries it has not applied yet.
	if err := d.raft.Barrier(ctx); err != nil {
		// A stop cancels the barrier: the driver is closing, whatever
		// Raft still says. Otherwise try again shortly while leader.
		select {
		case <-d.stop:
			return false
		default:
		}
		d.logger.Warn("barrier on becoming active failed", "error", err)
		select {
		case <-d.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
		return d.raft.IsLeader()
	}
	now := time.Now()
	control := metadata.NewClusterControl(d.cfg, d.raft.Image(), now, rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x6b65656c)))
	// Heartbeats that arrived before now were answered NOT_CONTROLLER, or
	// are waiting for this loop; every session starts at now anyway.
	d.arrivals.take()
	d.activeNow.Store(true)
	defer d.activeNow.Store(false)
	d.logger.Info("became the active controller", "term", d.raft.Term(), "metadata_offset", d.raft.AppliedOffset())
	// KRaft's new controller commits a record of its own term first; the
	// first one of an empty metadata log commits the bootstrap records
	// with it, in the same batch.
	first := []metadata.Record{&metadata.NoOpRecord{}}
	var boot []metadata.Record
	if d.raft.Image().Offset() < 0 && len(d.bootstrap) > 0 {
		d.logger.Info("the metadata log is empty: committing the bootstrap records", "records", len(d.bootstrap))
		boot = d.bootstrap
	}
	if recs := metadata.BootstrapFeatures(d.raft.Image(), boot); len(recs) > 0 {
		d.logger.Info("finalizing metadata.version", "level", metadata.MetadataVersionName(recs[0].(*metadata.FeatureLevelRecord).FeatureLevel))
		boot = append(slices.Clone(boot), recs...)
	}
	first = append(slices.Clone(boot), first...)
	if _, err := d.raft.Propose(ctx, first); err != nil {
		d.logger.Warn("no-op on becoming active failed", "error", err)
	}
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-d.stop:
			return false
		case l := <-leaderCh:
			if !l {
				d.logger.Info("lost controller leadership")
				return false
			}
		case <-ticker.C:
			if d.beforeTick != nil {
				d.beforeTick()
			}
			control.SetImage(d.raft.Image())
			for id, a := range d.arrivals.take() {
				control.Contact(id, a.epoch, a.at)
			}
			if recs := control.Tick(time.Now()); len(recs) > 0 {
				if _, err := d.commit(ctx, control, recs); err != nil {
					d.logger.Warn("committing tick records failed", "error", err)
				}
			}
		case ev := <-d.events:
			control.SetImage(d.raft.Image())
			resp, offset, err := d.handle(ctx, control, ev.req)
			ev.resp <- controllerResult{resp: resp, offset: offset, err: err}
		}
	}
}

// commit proposes records as one batch and refreshes the control's image.
func (d *controllerDriver) commit(ctx context.Context, control *metadata.ClusterControl, recs []metadata.Record) (int64, error) {
	offset, err := d.raft.Propose(ctx, recs)
	control.SetImage(d.raft.Image())
	return offset, err
}

// handle makes the decision for one request and commits its records.
func (d *controllerDriver) handle(ctx context.Context, control *metadata.ClusterControl, req kmsg.Request) (kmsg.Response, int64, error) {
	now := time.Now()
	var recs []metadata.Record
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		recs, resp = control.RegisterBroker(now, r)
		if resp.(*kmsg.BrokerRegistrationResponse).ErrorCode == 0 && !isVoter(d.raft, r.BrokerID) {
			// A broker-only node follows the metadata log as a Raft observer,
			// dialled at its inter-broker listener (DESIGN §3).
			for _, l := range r.Listeners {
				if l.Name == d.interBrokerListener {
					addr := fmt.Sprintf("%s:%d", l.Host, l.Port)
					if err := d.raft.AddObserver(ctx, r.BrokerID, addr); err != nil {
						return nil, 0, fmt.Errorf("add broker %d as observer: %w", r.BrokerID, err)
					}
				}
			}
		}
	case *kmsg.BrokerHeartbeatRequest:
		recs, resp = control.Heartbeat(now, r)
	case *kmsg.AssignReplicasToDirsRequest:
		recs, resp = control.AssignReplicasToDirs(r)
	case *kmsg.CreateTopicsRequest:
		recs, resp = control.CreateTopics(r, false)
	case *internalCreateTopics:
		recs, resp = control.CreateTopics(&r.CreateTopicsRequest, true)
	case *kmsg.DeleteTopicsRequest:
		recs, resp = control.DeleteTopics(r)
	case *kmsg.CreatePartitionsRequest:
		recs, resp = control.CreatePartitions(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		recs, resp = control.IncrementalAlterConfigs(r)
	case *kmsg.AlterConfigsRequest:
		recs, resp = control.AlterConfigs(r)
	case *kmsg.AlterPartitionRequest:
		recs, resp = control.AlterPartition(r)
	case *kmsg.ElectLeadersRequest:
		recs, resp = control.ElectLeaders(r)
	case *kmsg.AlterPartitionAssignmentsRequest:
		recs, resp = control.AlterPartitionReassignments(r)
	case *kmsg.UnregisterBrokerRequest:
		recs, resp = control.UnregisterBroker(r)
	case *kmsg.UpdateFeaturesRequest:
		recs, resp = control.UpdateFeatures(r)
	case *kmsg.AlterClientQuotasRequest:
		recs, resp = control.AlterClientQuotas(r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		recs, resp = control.AlterUserScramCredentials(r)
	case *kmsg.CreateACLsRequest:
		recs, resp = control.CreateAcls(r)
	case *kmsg.DeleteACLsRequest:
		recs, resp = control.DeleteAcls(r)
	case *kmsg.AllocateProducerIDsRequest:
		recs, resp = control.AllocateProducerIds(r)
	case *kmsg.CreateDelegationTokenRequest:
		recs, resp = control.CreateDelegationToken(now, r, takeRequesterTag(r))
	case *kmsg.RenewDelegationTokenRequest:
		recs, resp = control.RenewDelegationToken(now, r, takeRequesterTag(r))
	case *kmsg.ExpireDelegationTokenRequest:
		recs, resp = control.ExpireDelegationToken(now, r, takeRequesterTag(r))
	default:
		return nil, 0, fmt.Errorf("controller cannot handle %s", kmsg.NameForKey(req.Key()))
	}
	offset := d.raft.AppliedOffset()
	if len(recs) > 0 {
		var err error
		if offset, err = d.commit(ctx, control, recs); err != nil {
			return nil, 0, fmt.Errorf("commit %s: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	return resp, offset, nil
}

// internalCreateTopics is a CreateTopics from the broker itself (the
// __consumer_offsets topic), allowed to use internal names.
type internalCreateTopics struct{ kmsg.CreateTopicsRequest }

func isVoter(raft *raftlog.Node, id int32) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	servers, err := raft.Configuration(ctx)
	if err != nil {
		return false
	}
	for _, s := range servers {
		if s.NodeID == id {
			return s.Voter
		}
	}
	return false
}

// setOffsetTag stores offset in a flexible response's unknown tags.
func setOffsetTag(resp kmsg.Response, offset int64) {
	if tags := unknownTags(resp); tags != nil {
		var b [8]byte
		for i := 0; i < 8; i++ {
			b[i] = byte(offset >> (56 - 8*i))
		}
		tags.Set(offsetTag, b[:])
	}
}

// takeOffsetTag reads the committing offset back, -1 if absent, and removes
// the tag: it is for the forwarding broker, not the client.
func takeOffsetTag(resp kmsg.Response) int64 {
	tags := unknownTags(resp)
	if tags == nil {
		return -1
	}
	offset := int64(-1)
	var rest kmsg.Tags
	tags.Each(func(k uint32, v []byte) {
		if k != offsetTag || len(v) != 8 {
			rest.Set(k, v)
			return
		}
		offset = 0
		for _, c := range v {
			offset = offset<<8 | int64(c)
		}
	})
	*tags = rest
	return offset
}

// unknownTags finds the UnknownTags field every flexible kmsg message has.
func unknownTags(msg any) *kmsg.Tags {
	v := reflect.ValueOf(msg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("UnknownTags")
	if !f.IsValid() || !f.CanAddr() {
		return nil
	}
	tags, _ := f.Addr().Interface().(*kmsg.Tags)
	return tags
}

// requesterTag is the tagged field in which a broker forwarding a
// delegation token request passes the principal that sent it, which the
// controller needs and Keel's forwarding (no Envelope) does not otherwise
// carry. The controller listener admits only nodes (CLUSTER_ACTION) when
// there is an authorizer.
const requesterTag uint32 = 0x4b454550 // "KEEP"

// setRequesterTag records principal in a forwarded request.
func setRequesterTag(req kmsg.Request, principal string) {
	if tags := unknownTags(req); tags != nil {
		tags.Set(requesterTag, []byte(principal))
	}
}

// takeRequesterTag reads the forwarding broker's requester back (the
// anonymous principal without one) and removes the tag.
func takeRequesterTag(req kmsg.Request) string {
	principal := network.AnonymousPrincipal
	tags := unknownTags(req)
	if tags == nil {
		return principal
	}
	var rest kmsg.Tags
	tags.Each(func(k uint32, v []byte) {
		if k == requesterTag {
			principal = string(v)
			return
		}
		rest.Set(k, v)
	})
	*tags = rest
	return principal
}

// notControllerResponse answers req with NOT_CONTROLLER in every error
// field, which tells the sender to find the active controller.
func notControllerResponse(req kmsg.Request) kmsg.Response {
	return errorResponse(req, kerr.NotController.Code)
}

// errorResponse answers req with code in every error field: the top-level
// one, and one entry per topic or resource the request named.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, t := range req.(*kmsg.CreateTopicsRequest).Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = t.Topic
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DeleteTopicsResponse:
		dr := req.(*kmsg.DeleteTopicsRequest)
		for _, t := range dr.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			r.Topics = append(r.Topics, rt)
		}
		for _, name := range dr.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range req.(*kmsg.CreatePartitionsRequest).Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic = t.Topic
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, res := range req.(*kmsg.IncrementalAlterConfigsRequest).Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
			r.Resources = append(r.Resources, rr)
		}
	case *kmsg.AlterConfigsResponse:
		for _, res := range req.(*kmsg.AlterConfigsRequest).Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
			r.Resources = append(r.Resources, rr)
		}
	case *kmsg.DescribeConfigsResponse:
		for _, res := range req.(*kmsg.DescribeConfigsRequest).Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
			r.Resources = append(r.Resources, rr)
		}
	case *kmsg.CreateACLsResponse:
		for range req.(*kmsg.CreateACLsRequest).Creations {
			r.Results = append(r.Results, kmsg.NewCreateACLsResponseResult())
		}
	case *kmsg.DeleteACLsResponse:
		for range req.(*kmsg.DeleteACLsRequest).Filters {
			r.Results = append(r.Results, kmsg.NewDeleteACLsResponseResult())
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		ar := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
		var users []string
		for _, d := range ar.Deletions {
			users = append(users, d.Name)
		}
		for _, u := range ar.Upsertions {
			users = append(users, u.Name)
		}
		for _, u := range users {
			if !slices.ContainsFunc(r.Results, func(x kmsg.AlterUserSCRAMCredentialsResponseResult) bool { return x.User == u }) {
				rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				rr.User = u
				r.Results = append(r.Results, rr)
			}
		}
	case *kmsg.AlterClientQuotasResponse:
		for _, e := range req.(*kmsg.AlterClientQuotasRequest).Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, en := range e.Entity {
				re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: en.Type, Name: en.Name})
			}
			r.Entries = append(r.Entries, re)
		}
	}
	for _, f := range errorFields(resp) {
		*f = code
	}
	return resp
}

// isNotController reports whether a controller's response says it is not
// the active controller.
func isNotController(resp kmsg.Response) bool {
	fields := errorFields(resp)
	return len(fields) > 0 && *fields[0] == kerr.NotController.Code
}

// errorFields points at the error codes of the responses the controller
// listener serves: the top-level one where the response has it, else each
// topic's or resource's.
func errorFields(resp kmsg.Response) []*int16 {
	var out []*int16
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.BrokerHeartbeatResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.AlterPartitionResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.AssignReplicasToDirsResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.CreateDelegationTokenResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.RenewDelegationTokenResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.ExpireDelegationTokenResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.AllocateProducerIDsResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.ElectLeadersResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.AlterPartitionAssignmentsResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.UnregisterBrokerResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.UpdateFeaturesResponse:
		out = append(out, &r.ErrorCode)
		for i := range r.Results {
			out = append(out, &r.Results[i].ErrorCode)
		}
	case *kmsg.AlterClientQuotasResponse:
		for i := range r.Entries {
			out = append(out, &r.Entries[i].ErrorCode)
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for i := range r.Results {
			out = append(out, &r.Results[i].ErrorCode)
		}
	case *kmsg.CreateACLsResponse:
		for i := range r.Results {
			out = append(out, &r.Results[i].ErrorCode)
		}
	case *kmsg.DeleteACLsResponse:
		for i := range r.Results {
			out = append(out, &r.Results[i].ErrorCode)
		}
	case *kmsg.DescribeQuorumResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.AddRaftVoterResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.RemoveRaftVoterResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.DescribeClusterResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.DescribeACLsResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.ListPartitionReassignmentsResponse:
		out = append(out, &r.ErrorCode)
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			out = append(out, &r.Topics[i].ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for i := range r.Topics {
			out = append(out, &r.Topics[i].ErrorCode)
		}
	case *kmsg.CreatePartitionsResponse:
		for i := range r.Topics {
			out = append(out, &r.Topics[i].ErrorCode)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for i := range r.Resources {
			out = append(out, &r.Resources[i].ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for i := range r.Resources {
			out = append(out, &r.Resources[i].ErrorCode)
		}
	case *kmsg.DescribeConfigsResponse:
		for i := range r.Resources {
			out = append(out, &r.Resources[i].ErrorCode)
		}
	}
	return out
}
