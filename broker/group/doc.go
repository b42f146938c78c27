// Package group is the pure part of Keel's group coordinator: the classic
// consumer group protocol's state machine (Kafka's GroupCoordinator and
// GroupMetadata) and the records it keeps in __consumer_offsets (Kafka's
// GroupMetadataManager formats).
//
// A Manager holds the groups of one __consumer_offsets partition. It does no
// I/O, starts no goroutine and never reads a clock: every method takes the
// current time, and returns what the caller must do (Effects): records to
// append to the partition, and replies to parked JoinGroup/SyncGroup
// requests, which the caller sends only once those records are committed.
// NextDeadline says when the caller must call Tick (session expiry,
// rebalance timeouts, the initial rebalance delay, offset expiry).
//
// Transactional offset commits (KIP-98, KIP-447; txn.go) are offset
// records in the producer's transactional batch (Effects.Txn): pending,
// invisible to OffsetFetch, until the caller reports the producer's
// COMMIT or ABORT marker (CompleteTxn). Records carry their log offset
// (ApplyCommitsAt, ReplayAt, ReplayTxn) because a committed transaction's
// offset replaces only one written before it.
//
// Group states follow Kafka: Empty → PreparingRebalance →
// CompletingRebalance → Stable, and Dead (deleted or unloaded).
//
// Groups of the consumer protocol (KIP-848; consumer.go) share the
// Manager and the group id space: ConsumerHeartbeat joins, reconciles and
// keeps members, a server-side assignor (assign.go) computes the target
// assignment for each group epoch, and their records (consumer_records.go,
// Kafka's formats) rebuild them on load. A group is one or the other
// (Group.IsConsumer); an empty one switches when a member of the other
// protocol joins.
//
// Concurrency: a Manager is not safe for concurrent use; one goroutine (the
// broker's coordinator for that partition) owns it.
package group
