// Package client is Keel's Go SDK: a Producer, a Consumer (consumer groups)
// and an Admin that speak only the Kafka protocol (encoded with franz-go's
// kmsg), so they work against Keel and against any Kafka cluster.
//
// The package must never import anything of Keel's but network/record (the
// batch format and partitioner hashes): it is a client, not a broker.
//
// # The core: Client
//
// Producer, Consumer and Admin are built on a *Client (cluster.go), which
// owns the connections and the caches. What the roles use:
//
//   - NewClient(ctx, opts...) bootstraps from SeedBrokers (fetches metadata);
//     Close stops everything. Options are Opt values (options.go): client
//     options apply to every role; a role's constructor takes ...Opt and
//     calls splitOpts to apply the client options and get its own back.
//   - Request(ctx, req): any broker, retried on another broker when the
//     connection fails (RequestRetries, RetryBackoff).
//   - BrokerRequest(ctx, nodeID, req): one broker, one attempt — what Fetch
//     (to a partition leader) and Produce use.
//   - ControllerRequest(ctx, req): the controller Metadata names.
//   - CoordinatorRequest(ctx, GroupCoordinator, groupID, req): the group's
//     coordinator (FindCoordinator, cached); it re-finds the coordinator and
//     retries on NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
//     COORDINATOR_LOAD_IN_PROGRESS for JoinGroup, SyncGroup, Heartbeat,
//     LeaveGroup, OffsetCommit, OffsetFetch. Coordinator and
//     InvalidateCoordinator expose the cache.
//   - Metadata() is the cached, immutable snapshot; TopicMetadata(ctx, topic)
//     and PartitionLeader(ctx, topic, p) fetch a topic on first use and keep
//     it fresh (metadata.max.age.ms); FetchMetadata forces a request;
//     TriggerMetadataRefresh asks for a refresh soon without blocking (call
//     it on NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...).
//   - Every request's version is set to the highest both sides support
//     (ApiVersions per connection), capped by MaxVersion; Produce and Fetch
//     are capped at v12, OffsetCommit and OffsetFetch at v9 (topic names,
//     not topic IDs).
//   - Connections are pipelined: concurrent requests to one broker share a
//     connection and are matched by correlation id. A response that does not
//     arrive within RequestTimeout (plus the request's own broker-side
//     timeout: Fetch max wait, Produce timeout, JoinGroup rebalance timeout)
//     closes the connection. Each broker gets one connection for produces,
//     one for fetches, one for JoinGroup/SyncGroup and one for the rest
//     (connClass): Kafka reads a connection's next request only after
//     answering the previous one, so a long poll would otherwise hold up
//     every other request to that broker.
//   - Errors: response codes become *Error (errors.go) with Code, Name and
//     Retriable; errors.Is(err, ErrNotLeaderOrFollower) compares codes.
//     IsRetriable(err) covers codes, dead connections and timeouts.
//   - Record, Header and TopicPartition (record.go) are shared by producing,
//     consuming and Admin.
//   - Lock order: Client.mu, and separately connSlot.dialMu, before
//     connSlot.connMu; a producer partition's mutex before
//     Producer.sinksMu. No lock is held across network I/O except dialMu
//     (one dial per broker connection at a time) and a connection's write
//     lock.
//
// # Producing
//
//	p, err := client.NewProducer(ctx, client.SeedBrokers("localhost:9092"))
//	if err != nil { ... }
//	defer p.Close(ctx)
//	p.Produce(ctx, client.KeyStringRecord("orders", "k", "v"), func(r *client.Record, err error) {
//		// runs once the record is acknowledged or failed
//	})
//	results := p.ProduceSync(ctx, client.StringRecord("orders", "v2"))
//	if err := results.FirstErr(); err != nil { ... }
//
// The Producer follows the Java client's design: the calling goroutine
// partitions (murmur2 on the key, sticky for keyless records) and appends to a
// per-partition batch inside a bounded buffer (buffer.memory, blocking up to
// max.block.ms); one sender goroutine drains batches that are full
// (batch.size) or old enough (linger.ms) into one Produce request per broker.
// Idempotence is on by default (acks=all, at most 5 requests in flight per
// broker, ordering preserved across retries, epoch bump after a sequence gap,
// KIP-360). As in the Java client, a retried batch goes out alone and a new
// connection is used only once the dead one's requests have failed, so a
// retry always stays within the five batches the broker remembers. A broker's responses are read by one goroutine per broker, which
// runs the callbacks, in order per partition.
//
// # Transactions
//
//	p, err := client.NewProducer(ctx, client.SeedBrokers("localhost:9092"),
//		client.TransactionalID("billing-1")) // InitProducerId: fences older "billing-1"s
//	if err != nil { ... }
//	for {
//		recs, err := c.Poll(ctx) // c: ConsumerGroup, AutoCommit(false), Isolation(ReadCommitted)
//		if err != nil { ... }
//		if err := p.BeginTransaction(); err != nil { ... }
//		for _, r := range recs {
//			p.Produce(ctx, client.StringRecord("invoices", transform(r)), nil)
//		}
//		err = p.SendOffsetsToTransaction(ctx, nextOffsets(recs), c.GroupMetadata())
//		if err == nil {
//			err = p.CommitTransaction(ctx)
//		}
//		switch {
//		case errors.Is(err, client.ErrProducerFatal): // fenced: stop
//			return err
//		case err != nil: // ErrTransactionAbortable and the like
//			_ = p.AbortTransaction(ctx) // then rewind c to its committed offsets
//		}
//	}
//
// With TransactionalID the Producer is Java's transactional producer
// (KIP-98, KIP-447; producer_txn.go): records only between
// BeginTransaction and CommitTransaction or AbortTransaction, each
// partition added with AddPartitionsToTxn before its first batch (or,
// under transaction version 2 (KIP-890), by the leader with the batch,
// and the epoch bumped by each EndTxn), a failed record making the
// transaction abortable, fencing making the producer unusable. Lock order: txnManager.opMu before txnManager.mu;
// txnManager.mu and a partition's mutex are never held together.
//
// # Consuming
//
//	c, err := client.NewConsumer(ctx,
//		client.SeedBrokers("localhost:9092"),
//		client.ConsumerGroup("billing"), // or ConsumePartitions for direct assignment
//		client.ConsumeTopics("orders"),
//		client.AutoOffsetReset(client.OffsetResetEarliest),
//		client.Assignors(client.CooperativeStickyAssignor()),
//	)
//	if err != nil { ... }
//	defer c.Close(ctx) // leaves the group, commits what Poll returned
//	for rec, err := range c.Records(ctx) { // or: recs, err := c.Poll(ctx)
//		if err != nil { ... }
//		fmt.Printf("%s-%d@%d %s\n", rec.Topic, rec.Partition, rec.Offset, rec.Value)
//	}
//
// The Consumer joins the group (JoinGroup, SyncGroup with the leader's
// assignment from range, round-robin, sticky or cooperative-sticky), keeps
// it with background heartbeats, and fetches from each partition's leader;
// auto commit (enable.auto.commit) commits only what earlier Polls
// returned, CommitSync/CommitAsync commit explicitly, and
// max.poll.interval.ms takes a member that stops polling out of the group.
//
// # Administering
//
//	adm, err := client.NewAdmin(ctx, client.SeedBrokers("localhost:9092"))
//	if err != nil { ... }
//	defer adm.Close()
//	err = adm.CreateTopic(ctx, "orders", 6, 3, map[string]string{"min.insync.replicas": "2"})
//	lag, err := adm.GroupLag(ctx, "billing") // kafka-consumer-groups.sh --describe
//
// Admin covers topics (CreateTopics, DeleteTopics, ListTopics,
// DescribeTopics, CreatePartitions), configs (DescribeConfigs,
// IncrementalAlterConfigs), groups (ListGroups, DescribeGroups,
// DeleteGroups, FetchOffsets, GroupLag), offsets (ListOffsets,
// DeleteRecords) and the cluster (DescribeCluster, DescribeQuorum).
//
// The package's tests run one suite (client/clienttest) against franz-go's
// kfake and, in integration/sdk_test.go, against a real Keel node.
package client
