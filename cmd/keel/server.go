package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/keelstream/keel/broker"
	"github.com/urfave/cli/v2"
)

func serverCommand() *cli.Command {
	return &cli.Command{
		Name:      "server",
		Usage:     "run a broker and/or controller (like kafka-server-start.sh)",
		UsageText: "keel server [server.properties | --config server.properties] [--override key=value ...]",
		Description: "Reads a KRaft-style server.properties, given first as kafka-server-start.sh takes it or\n" +
			"with --config, with --override key=value on top; without a file it runs the\n" +
			"single-node development default: a combined broker+controller, PLAINTEXT on\n" +
			"localhost:9092, CONTROLLER on localhost:9093, data under ./data (formatted on first\n" +
			"start); without controller.quorum.voters a controller is the sole voter at its own\n" +
			"controller listener. Kafka 4's\n" +
			"controller.quorum.bootstrap.servers (a dynamic quorum) works too: a controller takes\n" +
			"the voters it was formatted with (keel format --initial-controllers or --standalone),\n" +
			"or itself alone when it is the only bootstrap server; a broker asks a bootstrap\n" +
			"controller for them. Stop it with Ctrl-C (SIGINT/SIGTERM):\n" +
			"it shuts down cleanly, moving leaderships away first. If a write to a log dir fails\n" +
			"(a full or failing disk), that dir goes offline. With other log.dirs online the broker\n" +
			"goes on without it, as Kafka 3.7+ does (KIP-858): its replicas there leave their ISRs\n" +
			"and their leaderships move to in-sync replicas on other brokers; replace the disk (an\n" +
			"empty dir is formatted at start) and restart to get them back. If the dir holds the\n" +
			"metadata log or was the last one online, the server shuts down the same way, then\n" +
			"exits with status 1, as a Kafka broker halts: fix the disk and start it again. A log\n" +
			"dir that cannot be read at start is left offline the same way (its replicas are not\n" +
			"created elsewhere), unless it holds the metadata log or no other dir can be used.\n\n" +
			"Memory: the Go garbage collector's heap goal is kept at 64 MiB or more (a broker's live heap\n" +
			"is small, its requests large); set GOGC to choose yourself, GOMEMLIMIT to cap the heap.\n\n" +
			"Page cache: each partition's appended data is handed to the kernel's writeback every MiB\n" +
			"(keel.log.writeback.bytes; 0 leaves it to the kernel's schedule, as Kafka does), so dirty\n" +
			"pages never pile up into a writeback burst of GBs that stalls produce. It does not wait\n" +
			"and fsyncs nothing: durability is replication's and log.flush.interval.messages'. It is a\n" +
			"dynamic broker config too: keel configs alter --entity-type brokers --entity-default\n" +
			"--add-config keel.log.writeback.bytes=4194304 (or --entity-name N for one broker).\n" +
			"On a VM whose host takes back free guest memory (virtio free page reporting; the server\n" +
			"logs a hint at start when it finds it), keel.log.cache.drop.behind.bytes=67108864 also\n" +
			"drops each partition's pages 64 MiB behind its end from the page cache, so that appends\n" +
			"reuse them instead of faulting in new memory (default 0: kept, as in Kafka; readers\n" +
			"further behind then read from disk).\n\n" +
			"Deletion: the files of deleted segments (retention) and deleted partitions are removed\n" +
			"16 MiB at a time, at most keel.log.delete.max.bytes.per.second (512 MiB/s; 0: unpaced),\n" +
			"off the partition's lock: a large file unlinked at once stalls other partitions' writes.\n\n" +
			"Log cleaner: log.cleaner.threads compacted logs are cleaned side by side, sharing\n" +
			"log.cleaner.io.max.bytes.per.second; both, log.cleaner.backoff.ms and\n" +
			"log.cleaner.dedupe.buffer.size are dynamic broker configs, as in Kafka.\n\n" +
			"Connections: at max.connections a listener accepts no more connections until one\n" +
			"closes (they wait in the listen backlog, as Kafka's acceptor makes them wait); the\n" +
			"controller listeners count apart, and the inter-broker listener still accepts, closing\n" +
			"the least recently active connection of another listener instead.\n" +
			"listener.name.<listener>.max.connections limits one listener (0: none new), and\n" +
			"max.connection.creation.rate (also per listener) the connections accepted a second (KIP-612).\n" +
			"They, max.connections and max.connections.per.ip[.overrides] are dynamic broker configs.\n\n" +
			"Metrics: --override keel.metrics.address=0.0.0.0:9404 serves Kafka's broker metrics\n" +
			"(UnderReplicatedPartitions, MessagesInPerSec, RequestMetrics, ...) at http://host:9404/metrics\n" +
			"in Prometheus's format, named as the Prometheus JMX exporter names Kafka's MBeans.\n\n" +
			"Transactions: producers with a transactional.id and read_committed consumers work as\n" +
			"with Kafka; the transaction coordinator keeps its state in __transaction_state, created\n" +
			"on first use (transaction.state.log.num.partitions, .replication.factor, .min.isr;\n" +
			"transaction.max.timeout.ms, transactional.id.expiration.ms). keel transactions lists them.\n" +
			"A leader verifies a transaction's partition (its group offsets partition too) with the\n" +
			"coordinator before its first batch (KIP-890: no hanging transactions;\n" +
			"transaction.partition.verification.enable, dynamic).\n\n" +
			"TLS: a listener mapped to SSL in listener.security.protocol.map speaks TLS with Kafka's\n" +
			"ssl.* settings (ssl.keystore.* and ssl.truststore.*: JKS, PKCS12 or PEM; ssl.client.auth;\n" +
			"ssl.principal.mapping.rules), or listener.name.<listener>.ssl.* for one listener: client\n" +
			"listeners, the inter-broker listener and the controller listener alike (a node dialling\n" +
			"another's uses that listener's settings). A listener's keystore and truststore change\n" +
			"at runtime, per node (KIP-226): keel configs --alter --entity-type brokers --entity-name 1\n" +
			"--add-config listener.name.ssl.ssl.keystore.location=NEW.p12 (the same path again\n" +
			"reloads a file replaced in place); ssl.allow.dn.changes and ssl.allow.san.changes let\n" +
			"the certificate's subject and names change.\n\n" +
			"SASL: a SASL_PLAINTEXT or SASL_SSL listener authenticates clients with the\n" +
			"sasl.enabled.mechanisms it names. PLAIN's users are the user_<name>=\"<password>\" options\n" +
			"of listener.name.<listener>.plain.sasl.jaas.config (Kafka's PlainLoginModule).\n" +
			"SCRAM-SHA-256 and SCRAM-SHA-512 credentials live in the metadata log: the first from\n" +
			"keel format --add-scram, then keel users alter or kafka-configs.sh --entity-type users.\n" +
			"delegation.token.secret.key (the same on every node) turns on delegation tokens: keel\n" +
			"delegation-tokens (kafka-delegation-tokens.sh) creates them, and clients authenticate with\n" +
			"one over SCRAM as its owner (tokenauth=\"true\" in the ScramLoginModule).\n" +
			"OAUTHBEARER validates JWTs against the identity provider's JWKS with\n" +
			"listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class=\n" +
			"org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler and\n" +
			"sasl.oauthbearer.jwks.endpoint.url (without it: Kafka's unsecured development tokens);\n" +
			"an identity provider with a private CA is trusted with ssl.truststore.* options of\n" +
			"the listener's OAuthBearerLoginModule (ssl.truststore.location=\"...\"), as in Kafka.\n" +
			"connections.max.reauth.ms above 0 makes clients re-authenticate on their connections.\n" +
			"Nodes authenticate to SASL inter-broker and controller listeners with\n" +
			"sasl.mechanism.inter.broker.protocol and sasl.mechanism.controller.protocol: PLAIN or\n" +
			"SCRAM as the username and password of that listener's JAAS configuration, OAUTHBEARER\n" +
			"with its OAuthBearerLoginModule (clientId and clientSecret with\n" +
			"sasl.oauthbearer.token.endpoint.url, or unsecuredLoginStringClaim_sub), or\n" +
			"Kafka 4.1's sasl.oauthbearer.client.credentials.* and sasl.oauthbearer.jwt.retriever.class\n" +
			"(JwtBearerJwtRetriever: the JWT bearer grant, sasl.oauthbearer.assertion.*); the token\n" +
			"endpoint is retried and tokens renewed as sasl.login.retry.backoff.ms, .retry.backoff.max.ms,\n" +
			".connect.timeout.ms, .read.timeout.ms and .refresh.* say, as in Kafka.\n" +
			"GSSAPI is not supported yet.\n\n" +
			"ACLs: authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer checks\n" +
			"every request against the ACLs in the metadata log (keel acls, kafka-acls.sh);\n" +
			"super.users (User:admin;User:ANONYMOUS) may do anything, and the nodes' own principal\n" +
			"(User:ANONYMOUS over PLAINTEXT) must be one, as in Kafka; allow.everyone.if.no.acl.found.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "server.properties file"},
			&cli.StringSliceFlag{Name: "override", Usage: "key=value, applied over the file (repeatable)"},
			&cli.StringFlag{Name: "log-dirs", Usage: "shorthand for --override log.dirs=..."},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "trace, debug, info, warn, error; change it at runtime with kafka-configs --entity-type broker-loggers --add-config root=DEBUG"},
		},
		Action: func(c *cli.Context) error {
			logger := hclog.New(&hclog.LoggerOptions{Name: "keel", Level: hclog.LevelFromString(c.String("log-level"))})
			overrides := c.StringSlice("override")
			if d := c.String("log-dirs"); d != "" {
				overrides = append(overrides, "log.dirs="+d)
			}
			cfg, err := broker.LoadConfigFile(c.String("config"), overrides)
			if err != nil {
				return err
			}
			if limit, err := broker.RaiseOpenFileLimit(); err != nil {
				logger.Warn("cannot read or raise the open file limit", "error", err)
			} else if limit < 100_000 {
				logger.Warn("the open file limit is low for a broker (Kafka recommends 100000 or more): each partition holds a file open",
					"limit", limit)
			}
			if cfg.LogDropBehindBytes == 0 && freePageReporting(sysVirtioDevices) {
				logger.Info("this VM hands the memory it leaves free back to its host (virtio free page reporting): "+
					"a growing page cache pays a host fault for each new page; keel.log.cache.drop.behind.bytes=67108864 "+
					"keeps it reusing its own pages (README, Storage on disk, Page cache)", "devices", sysVirtioDevices)
			}
			if startGCFloor(gcFloorBytes) {
				logger.Debug("garbage collector: heap goal kept at or above 64 MiB (set GOGC to choose yourself)")
			}
			node, err := broker.StartNode(cfg, logger)
			if err != nil {
				return fmt.Errorf("start node %d: %w", cfg.NodeID, err)
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			logger.Info("ready: point Kafka clients at the broker listener", "bootstrap.servers", node.BootstrapServers())
			var failure error
			select {
			case s := <-sig:
				logger.Info("shutting down: moving leaderships away first (a second signal exits at once)", "signal", s.String())
			case failure = <-node.Failed():
				// Kafka halts a KRaft broker whose metadata log dir,
				// or last log dir online, failed (with another dir
				// online, the node goes on without the failed one); a
				// controlled shutdown moves its leaderships first.
				logger.Error("shutting down: a log dir failed (fix or replace the disk, then start again; the dir is recovered like after a crash)",
					"error", failure)
			}
			go func() {
				<-sig
				logger.Warn("second signal: exiting without a clean shutdown")
				os.Exit(1)
			}()
			err = node.Close()
			if failure != nil {
				return cli.Exit(fmt.Sprintf("keel server: %v", failure), 1)
			}
			return err
		},
	}
}
