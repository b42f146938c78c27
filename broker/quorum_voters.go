package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/raftlog"
)

// quorumVoters resolves the metadata quorum's voters (node id → controller
// address) and says where they came from, for error messages:
//
//   - controller.quorum.voters, when set (a static quorum);
//   - with controller.quorum.bootstrap.servers instead (KIP-853), on a
//     controller: the voters it was formatted with (keel format --standalone
//     or --initial-controllers), or itself alone when the bootstrap servers
//     name only its own controller listener (Kafka 4's shipped
//     server.properties);
//   - on a broker-only node, and on a controller formatted with
//     --no-initial-controllers to join a running quorum (join is then
//     true): what a controller at a bootstrap server answers to
//     DescribeQuorum (its KIP-853 Nodes), retried for up to
//     initial.broker.registration.timeout.ms.
//
// dial opens the connections to the bootstrap controllers (TLS when the
// controller listener is SSL). A controller with bootstrap servers naming
// other controllers and no formatted voters is refused: taking itself as the only voter, as a
// single node does, would make each such controller a quorum of its own.
func quorumVoters(cfg *Config, dial DialFunc, logger hclog.Logger) (voters map[int32]string, source string, join bool, err error) {
	if !cfg.DynamicQuorum() {
		voters, err := raftlog.ParseVoters(cfg.ControllerQuorumVoters)
		if err != nil {
			return nil, "", false, fmt.Errorf("controller.quorum.voters: %w", err)
		}
		return voters, "controller.quorum.voters", false, nil
	}
	bootstrap := strings.Join(cfg.ControllerQuorumBootstrapServers, ",")
	if cfg.HasRole("controller") {
		voters, err := raftlog.ReadInitialVoters(cfg.MetadataLogDir)
		switch {
		case err == nil && voters == nil:
			join = true // formatted with --no-initial-controllers
		case err == nil:
			return voters, raftlog.InitialVotersFile, false, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, "", false, err
		}
		if !join {
			if addr, ok := cfg.OwnControllerAddr(); ok && cfg.StandaloneBootstrap() {
				return map[int32]string{cfg.NodeID: addr}, "controller.quorum.bootstrap.servers", false, nil
			}
			return nil, "", false, fmt.Errorf("controller.quorum.bootstrap.servers=%s names other controllers, and %s was not formatted with the quorum's voters: "+
				"format every controller with keel format --cluster-id ID --initial-controllers 1@host:port,2@host:port,... "+
				"(as kafka-storage.sh format --initial-controllers), or a single controller with --standalone, or set controller.quorum.voters",
				bootstrap, cfg.MetadataLogDir)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.InitialBrokerRegistrationTimeout)
	defer cancel()
	voters, err = discoverVoters(ctx, dial, cfg.ControllerQuorumBootstrapServers, cfg.ControllerListenerNames, logger)
	if err != nil {
		return nil, "", false, err
	}
	logger.Info("learned the metadata quorum's voters", "voters", raftlog.FormatVoters(voters), "bootstrap_servers", bootstrap)
	return voters, "controller.quorum.bootstrap.servers", join, nil
}

// discoverVoters asks the bootstrap controllers, in turn and with backoff
// until ctx ends, for the voters and their controller listeners.
func discoverVoters(ctx context.Context, dial DialFunc, servers, listenerNames []string, logger hclog.Logger) (map[int32]string, error) {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var last error
		for _, addr := range servers {
			voters, err := askVoters(ctx, dial, addr, listenerNames)
			if err == nil {
				return voters, nil
			}
			last = err
		}
		if attempt == 0 {
			logger.Info("waiting for a controller at controller.quorum.bootstrap.servers to name the voters",
				"bootstrap_servers", strings.Join(servers, ","), "error", last)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no controller at controller.quorum.bootstrap.servers=%s named the quorum's voters within initial.broker.registration.timeout.ms (last: %w)",
				strings.Join(servers, ","), last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// askVoters sends DescribeQuorum to one controller. Its Nodes give each
// voter's listeners; the first of controller.listener.names that a voter
// has is its address, as brokers reach controllers in Kafka.
func askVoters(ctx context.Context, dial DialFunc, addr string, listenerNames []string) (map[int32]string, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := RequestVia(rctx, dial, addr, NewDescribeQuorumRequest())
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("DescribeQuorum to %s: %w", addr, err)
	}
	voters := map[int32]string{}
	for _, n := range resp.Nodes {
		for _, name := range listenerNames {
			usable := func(l kmsg.DescribeQuorumResponseNodeListener) bool {
				return l.Name == name && l.Host != "" && l.Port != 0
			}
			if i := slices.IndexFunc(n.Listeners, usable); i >= 0 {
				l := n.Listeners[i]
				voters[n.NodeID] = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
				break
			}
		}
	}
	if len(voters) == 0 {
		return nil, fmt.Errorf("DescribeQuorum to %s: no voter has a listener (with a host and port) named in controller.listener.names %v", addr, listenerNames)
	}
	return voters, nil
}
