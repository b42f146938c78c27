package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a Kafka protocol error code carried by a response. It is a value
// type compared by code: errors.Is(err, ErrNotLeaderOrFollower) is true for
// any *Error with code 6, whatever its message.
type Error struct {
	// Code is the Kafka error code (never 0).
	Code int16
	// Name is the code's name as Kafka's Errors enum spells it, e.g.
	// "NOT_LEADER_OR_FOLLOWER".
	Name string
	// Retriable says whether Kafka marks the error retriable: the same
	// request may succeed later (after a metadata refresh or a backoff).
	Retriable bool
	// Message is the broker's error message when the response carried one
	// (ErrorMessage fields), else Kafka's description of the code.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s (%d)", e.Name, e.Code)
	}
	return fmt.Sprintf("%s (%d): %s", e.Name, e.Code, e.Message)
}

// Is matches another *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorForCode returns nil for code 0 and an *Error otherwise. Codes the
// table does not know still produce an *Error, named UNKNOWN_<code> and not
// retriable.
func ErrorForCode(code int16) error {
	if code == 0 {
		return nil
	}
	return newError(code, nil)
}

// errorWithMessage is ErrorForCode with the response's ErrorMessage field.
func errorWithMessage(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	return newError(code, msg)
}

func newError(code int16, msg *string) *Error {
	e := &Error{Code: code, Name: fmt.Sprintf("UNKNOWN_%d", code)}
	if k := kerr.TypedErrorForCode(code); k != nil {
		e.Name, e.Retriable, e.Message = k.Message, k.Retriable, k.Description
	}
	if code == 6 { // renamed by KIP-392; kerr keeps the old name
		e.Name = "NOT_LEADER_OR_FOLLOWER"
	}
	if msg != nil && *msg != "" {
		e.Message = *msg
	}
	return e
}

func codeError(code int16) *Error { return newError(code, nil) }

// Kafka error codes the SDK itself reacts to, as values for errors.Is.
var (
	// ErrUnknownTopicOrPartition (3): the topic or partition does not exist
	// (yet). Retriable: metadata may still be propagating.
	ErrUnknownTopicOrPartition = codeError(3)
	// ErrReplicaNotAvailable (9): the broker does not host the replica
	// (yet), say one AlterReplicaLogDirs names before a reassignment
	// created it.
	ErrReplicaNotAvailable = codeError(9)
	// ErrElectionNotNeeded (84): ElectLeaders found the right replica
	// leading already.
	ErrElectionNotNeeded = codeError(84)
	// ErrNotLeaderOrFollower (6): the broker no longer leads the partition;
	// the client refreshes its metadata and retries.
	ErrNotLeaderOrFollower = codeError(6)
	// ErrRequestTimedOut (7): the broker timed the request out (acks=all
	// not satisfied in time).
	ErrRequestTimedOut = codeError(7)
	// ErrCoordinatorNotAvailable (15): the coordinator is loading or moving.
	ErrCoordinatorNotAvailable = codeError(15)
	// ErrNotCoordinator (16): the broker is not the group's coordinator.
	ErrNotCoordinator = codeError(16)
	// ErrNotEnoughReplicas (19): the ISR is below min.insync.replicas.
	ErrNotEnoughReplicas = codeError(19)
	// ErrTopicAlreadyExists (36): CreateTopics for an existing topic.
	ErrTopicAlreadyExists = codeError(36)
	// ErrNotController (41): an admin request reached a non-controller.
	ErrNotController = codeError(41)
	// ErrOutOfOrderSequenceNumber (45): the broker saw a gap in a
	// producer's sequence numbers.
	ErrOutOfOrderSequenceNumber = codeError(45)
	// ErrDuplicateSequenceNumber (46): the batch was already appended.
	ErrDuplicateSequenceNumber = codeError(46)
	// ErrInvalidProducerEpoch (47): a newer producer epoch exists.
	ErrInvalidProducerEpoch = codeError(47)
	// ErrUnknownProducerID (59): the broker lost the producer's state.
	ErrUnknownProducerID = codeError(59)
	// ErrGroupIDNotFound (69): the group does not exist.
	ErrGroupIDNotFound = codeError(69)
	// ErrInvalidTxnState (48): the request does not fit the transaction's
	// state at the coordinator. Fatal for a transactional producer.
	ErrInvalidTxnState = codeError(48)
	// ErrInvalidProducerIDMapping (49): the coordinator does not know the
	// producer id for the transactional id. Fatal for a transactional
	// producer.
	ErrInvalidProducerIDMapping = codeError(49)
	// ErrConcurrentTransactions (51): the previous transaction of the
	// transactional id is still completing; retried.
	ErrConcurrentTransactions = codeError(51)
	// ErrTransactionalIDAuthorizationFailed (53): the principal may not use
	// the transactional id. Fatal for a transactional producer.
	ErrTransactionalIDAuthorizationFailed = codeError(53)
	// ErrProducerFenced (90): a newer producer with the same transactional
	// id has initialized (KIP-588). A transactional producer also reports
	// INVALID_PRODUCER_EPOCH (47) as this. Fatal.
	ErrProducerFenced = codeError(90)
)

// SDK errors that are not Kafka error codes.
var (
	// ErrClosed is returned by every call on a closed Client, Producer or
	// Admin, and passed to the callbacks of records still buffered at Close.
	ErrClosed = errors.New("client closed")
	// ErrMaxBlock is returned by Produce when the buffer stayed full (or the
	// topic's metadata stayed unknown) for max.block.ms.
	ErrMaxBlock = errors.New("max.block.ms elapsed waiting for buffer memory or metadata")
	// ErrRecordTooLarge is returned by Produce for a record bigger than
	// max.request.size or buffer.memory: it could never be sent.
	ErrRecordTooLarge = errors.New("record larger than max.request.size or buffer.memory")
	// ErrDeliveryTimeout is passed to a record's callback when it was not
	// acknowledged within delivery.timeout.ms (KIP-91).
	ErrDeliveryTimeout = errors.New("delivery.timeout.ms elapsed before the record was acknowledged")
	// ErrNoBrokers means no seed broker and no known broker could be reached.
	ErrNoBrokers = errors.New("no broker reachable")
	// ErrUnsupportedRequest means the broker does not advertise the
	// request's API key in ApiVersions.
	ErrUnsupportedRequest = errors.New("broker does not support the request")
	// ErrConnectionClosed means the broker connection died while a request
	// was in flight; the request may or may not have been processed.
	ErrConnectionClosed = errors.New("broker connection closed")
	// ErrTransactionState is returned by a transactional call that does
	// not fit the producer's state: Produce outside a transaction,
	// BeginTransaction with one open, CommitTransaction without one, any
	// of them on a producer without TransactionalID (Java's
	// IllegalStateException).
	ErrTransactionState = errors.New("illegal transactional state")
	// ErrTransactionAbortable is matched by the errors of a transaction
	// that can no longer commit (a record failed, offsets could not be
	// added); the error also wraps the cause. Produce, CommitTransaction
	// and SendOffsetsToTransaction return it until AbortTransaction.
	ErrTransactionAbortable = errors.New("transaction failed and must be aborted")
	// ErrProducerFatal is matched by every error of a transactional
	// producer after a fatal one (ErrProducerFenced,
	// ErrTransactionalIDAuthorizationFailed, ErrInvalidProducerIDMapping,
	// ErrInvalidTxnState), which the error also wraps. The producer can
	// only be closed.
	ErrProducerFatal = errors.New("producer is unusable")
	// ErrTransactionAborted is passed to the callbacks of records that were
	// still buffered when their transaction was aborted.
	ErrTransactionAborted = errors.New("transaction aborted before the record was sent")
	// ErrRequestTimeout means no response arrived within request.timeout.ms;
	// the connection is closed (responses on it can no longer be trusted
	// to line up).
	ErrRequestTimeout = errors.New("request.timeout.ms elapsed waiting for a response")
)

// IsRetriable reports whether err is worth retrying: a retriable Kafka
// code, a dead connection, or a request timeout. Context errors are not.
func IsRetriable(err error) bool {
	var ae *authError
	if errors.As(err, &ae) {
		return false // a broker closing the connection on bad credentials
	}
	var ke *Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return errors.Is(err, ErrConnectionClosed) || errors.Is(err, ErrRequestTimeout) || isDialError(err)
}

// dialError marks a failure to reach a broker at all: always safe to retry,
// the request never left.
type dialError struct {
	addr string
	err  error
}

// Error names the address unless the dialer's error does ("dial tcp
// 127.0.0.1:9092: connect: connection refused").
func (e *dialError) Error() string {
	if msg := e.err.Error(); strings.Contains(msg, e.addr) {
		return msg
	}
	return fmt.Sprintf("dial %s: %v", e.addr, e.err)
}
func (e *dialError) Unwrap() error { return e.err }

// authError is a failed SASL exchange: never retried, whatever the broker
// did (Kafka answers SASL_AUTHENTICATION_FAILED, others just hang up).
type authError struct{ err error }

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

func isDialError(err error) bool {
	var d *dialError
	return errors.As(err, &d)
}
