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
// Group states follow Kafka: Empty → PreparingRebalance →
// CompletingRebalance → Stable, and Dead (deleted or unloaded). Only the
// classic protocol is implemented (no KIP-848).
//
// Concurrency: a Manager is not safe for concurrent use; one goroutine (the
// broker's coordinator for that partition) owns it.
package group
