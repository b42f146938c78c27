package raftlog

import (
	"errors"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// reportingStore is the Raft log and stable store (raft-boltdb) with its
// write failures reported: Raft logs a failed append and retries it, which
// on a failed disk leaves the node in the quorum with a metadata log that
// no longer moves. Kafka halts a node whose metadata log dir failed; here
// the first failed write goes to Config.OnStorageError, once, and the
// owner stops the node.
type reportingStore struct {
	*raftboltdb.BoltStore
	report   func(error)
	reported atomic.Bool
}

func (s *reportingStore) check(err error) error {
	// A store closed under a late write is this process shutting down,
	// not the disk.
	if err != nil && !errors.Is(err, bbolt.ErrDatabaseNotOpen) && s.report != nil &&
		s.reported.CompareAndSwap(false, true) {
		s.report(err)
	}
	return err
}

// StoreLog implements raft.LogStore.
func (s *reportingStore) StoreLog(l *raft.Log) error { return s.check(s.BoltStore.StoreLog(l)) }

// StoreLogs implements raft.LogStore.
func (s *reportingStore) StoreLogs(ls []*raft.Log) error { return s.check(s.BoltStore.StoreLogs(ls)) }

// DeleteRange implements raft.LogStore.
func (s *reportingStore) DeleteRange(lo, hi uint64) error {
	return s.check(s.BoltStore.DeleteRange(lo, hi))
}

// Set implements raft.StableStore.
func (s *reportingStore) Set(k, v []byte) error { return s.check(s.BoltStore.Set(k, v)) }

// SetUint64 implements raft.StableStore.
func (s *reportingStore) SetUint64(k []byte, v uint64) error {
	return s.check(s.BoltStore.SetUint64(k, v))
}
