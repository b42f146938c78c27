// Package txn is the pure part of Keel's transaction coordinator (KIP-98):
// the state machine of each transactional id (Kafka's TransactionMetadata
// and TransactionCoordinator) and the records it keeps in
// __transaction_state (Kafka's TransactionLog formats, encoded with kmsg so
// Kafka's tools read them).
//
// A Manager holds the transactional ids of one __transaction_state
// partition (Kafka's TransactionStateManager cache for it). It does no I/O,
// starts no goroutine and never reads a clock: every method takes the
// current time in Unix milliseconds and returns Effects, what the caller
// must do:
//
//  1. Replies: answer these parked requests now.
//  2. Records: append them to the partition, in order, as one batch with
//     acks=all; once committed (the high watermark passed them), or once
//     the append failed, call Written with the Effects' Token and the
//     append's Kafka error code (0 on success). Until then the ids those
//     records are for have a pending transition (Kafka's pendingState):
//     other requests for them get CONCURRENT_TRANSACTIONS. The requests
//     that caused the write are answered by the Effects Written returns.
//  3. Markers: write the COMMIT or ABORT markers (WriteTxnMarkers to each
//     partition's leader, retried until every partition has its marker),
//     then call MarkersWritten with the job; it returns the write of the
//     CompleteCommit/CompleteAbort record (back to step 2).
//
// A new leader of the partition creates a Manager with the partition's
// leader epoch (the coordinator epoch, carried by every marker), calls
// Replay for every record of the partition, then FinishLoad, which returns
// the marker jobs of transactions the previous coordinator left in
// PrepareCommit or PrepareAbort. Until FinishLoad, requests are answered
// COORDINATOR_LOAD_IN_PROGRESS. A leader that resigns calls Unload: parked
// requests are answered NOT_COORDINATOR and the Manager answers nothing
// else afterwards; Written and MarkersWritten calls still outstanding are
// ignored. NextDeadline says when Tick must next run (aborting timed-out
// transactions, expiring idle transactional ids, retrying a failed
// completion write).
//
// States follow Kafka's TransactionState: Empty → Ongoing → PrepareCommit
// or PrepareAbort → CompleteCommit or CompleteAbort → Ongoing again, and
// Empty after each InitProducerId. PrepareEpochFence is never stored: a
// fence bumps the epoch and writes PrepareAbort, as Kafka does. Dead is the
// tombstone of an expired id, which the Manager drops.
//
// Transaction version 2 (KIP-890 part 2): an EndTxn with TV2 (v5+) bumps
// the epoch as it prepares the commit or abort (markers and the answer
// carry the new one; a retry one epoch behind is answered the same; an
// abort with nothing open is allowed), allocates a new producer id when
// that takes the epoch to its end (the Complete record moves the id to
// it), and an id whose transaction was begun or ended that way is fenced
// with two bumps (Kafka's endTransaction under version 2). The previous
// and next producer ids and the client's version are kept in value
// version 1's tagged fields. AddPartitions with TV2 is the partition
// leader's add on a producer's first batch.
//
// Concurrency: a Manager is not safe for concurrent use; one goroutine (the
// broker's coordinator for that partition) owns it.
package txn
