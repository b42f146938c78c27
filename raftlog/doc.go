// Package raftlog replicates Keel's metadata log with hashicorp/raft, the way
// KRaft replicates Kafka's __cluster_metadata topic (DESIGN.md §3).
//
// It owns:
//   - the Raft wiring of one node ([Open], [Node]): raft-boltdb as log and
//     stable store, a file snapshot store, the network transport;
//   - the connection multiplexing that lets a controller carry Raft and the
//     Kafka protocol on one address ([RaftMarker], [Classify], [Mux],
//     [Serve]);
//   - the FSM that applies each committed entry (a [metadata.EncodeBatch]
//     batch) into an immutable [metadata.Image], publishes it atomically and
//     notifies subscribers ([Node.Image], [Node.Subscribe],
//     [Node.WaitForOffset]);
//   - voters and observers: controllers are voters bootstrapped from
//     controller.quorum.voters, broker-only nodes are Raft non-voters the
//     active controller adds ([Node.AddObserver]);
//   - the quorum state DescribeQuorum reports ([Node.QuorumState]), measured
//     by the leader from its own replication traffic;
//   - meta.properties ([EnsureMetaProperties]) and the offline dump of the
//     metadata log ([DumpLog]).
//
// Metadata offsets are Raft log indexes: the batch committed at index i has
// metadata offset i, and [metadata.Image.Offset] is the index of the last
// batch applied into it.
//
// On-disk layout, under Config.DataDir (metadata.log.dir, by default the
// first of log.dirs), named after KRaft's metadata partition directory:
//
//	<DataDir>/__cluster_metadata-0/raft.db        bbolt: Raft log + stable store
//	<DataDir>/__cluster_metadata-0/snapshots/...  hashicorp file snapshots
//
// This package must never decide anything about the metadata itself (that is
// the controller's, in package metadata), never import any Keel package but
// metadata, and never block Raft's FSM goroutine on a consumer.
package raftlog
