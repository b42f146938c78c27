package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"syscall"
)

// Log dir failure, Kafka's LogDirFailureChannel: the first I/O error a log
// meets while changing its files (an append, a roll, an fsync, a
// truncation, a retention delete) takes its whole log dir offline. From
// then on every log in that dir refuses appends, reads and truncations with
// ErrLogDirOffline (KAFKA_STORAGE_ERROR, which clients retry after refreshing
// metadata), nothing more is written there, and the Manager reports the
// failure once (ManagerConfig.OnLogDirFailure) so that the broker can
// stop: Kafka halts a KRaft broker whose log dir failed.
//
// Why the whole dir and why stop writing: after a failed write or fsync
// the kernel may already have dropped the dirty pages it could not write,
// so a later fsync that succeeds proves nothing (PostgreSQL's "fsyncgate");
// a disk that fails one file usually fails the next; and a dir that is
// offline gets neither checkpoints nor the clean-shutdown marker, so the
// next start recovers it from its recovery point instead of trusting it.

// logDir is the failure state shared by the logs of one log dir.
type logDir struct {
	path    string
	offline atomic.Bool
	// failed is called once, with the first error, when the dir goes
	// offline; it must not block (it runs on the failing goroutine).
	failed func(dir string, err error)
}

// fail takes the dir offline; only the first call reports.
func (d *logDir) fail(err error) {
	if d.offline.CompareAndSwap(false, true) && d.failed != nil {
		d.failed(d.path, err)
	}
}

// isOffline reports whether an I/O error took the dir offline (never, for
// the nil logDir of a log outside a Manager).
func (d *logDir) isOffline() bool { return d != nil && d.offline.Load() }

// check takes the dir offline when err is an I/O error, which it returns as
// an ErrStorage (KAFKA_STORAGE_ERROR, not UNKNOWN_SERVER_ERROR, for a
// client); other errors come back as they are. On the nil logDir it only
// wraps.
func (d *logDir) check(err error) error {
	if !isIOError(err) {
		return err
	}
	if !errors.Is(err, ErrStorage) {
		err = fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if d != nil {
		d.fail(err)
	}
	return err
}

// isIOError reports whether err is a failure of the file system underneath
// a log rather than of the request: ErrStorage, or an error from an os
// call (a path, link or syscall error, a bare errno). A file this process
// closed (the log closing under a reader) is not one.
func isIOError(err error) bool {
	if err == nil || errors.Is(err, ErrLogClosed) || errors.Is(err, fs.ErrClosed) {
		return false
	}
	var (
		pathErr *fs.PathError
		linkErr *os.LinkError
		sysErr  *os.SyscallError
		errno   syscall.Errno
	)
	return errors.Is(err, ErrStorage) || errors.As(err, &pathErr) || errors.As(err, &linkErr) ||
		errors.As(err, &sysErr) || errors.As(err, &errno)
}

// offlineErr is ErrLogDirOffline when the log's dir is offline, nil
// otherwise.
func (l *Log) offlineErr() error {
	if l.dirState().isOffline() {
		return fmt.Errorf("%s in %s: %w", l.tp, l.dirState().path, ErrLogDirOffline)
	}
	return nil
}

// Offline reports whether the log's dir went offline after an I/O error.
func (l *Log) Offline() bool { return l.dirState().isOffline() }

// checkIO is logDir.check for the log's dir. Every method that changes the
// log's files passes its error through it.
func (l *Log) checkIO(err error) error { return l.dirState().check(err) }

// dirState is the failure state of the log dir holding the log now.
func (l *Log) dirState() *logDir { return l.logDir.Load() }

// guardIO is checkIO for a method's named error result: defer
// l.guardIO(&err) before taking any lock.
func (l *Log) guardIO(err *error) { *err = l.checkIO(*err) }
