package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Deleting a large file at once stalls the writers of other files: the
// filesystem frees all its blocks in one go (ext4: in journal transactions
// that the next appends then wait for, with discards on a disk mounted
// with -o discard). A deleted partition of 1 GiB per replica on a
// three-node cluster held acks=all produces to another topic for 210–280
// ms (p99 of 300,000 records/s: 112–162 ms, against 14 ms with the files
// left alone). And a retention deletion unlinked its segment under the
// log's lock, so the partition's own appends waited for it too.
//
// The fileDeleter takes both off the hot path: one goroutine of the log
// manager removes deleted segments' log files and deleted partitions'
// directories, truncating each large file a step at a time before
// unlinking it, at most keel.log.delete.max.bytes.per.second (RocksDB's
// DeleteScheduler does the same). Kafka unlinks at once, on a scheduler
// thread for segments and for partitions.
//
// A segment's file is handed over open and truncated through that handle:
// a later deleted segment that takes the same name (its *.deleted path)
// is never touched. A deletion left when the manager closes keeps its
// *.deleted name or -delete directory, which the next start removes, as
// after a crash.

// DefaultDeleteBytesPerSecond is keel.log.delete.max.bytes.per.second's
// default: 512 MiB/s, several times a broker's usual ingest, so retention
// keeps up, while a 1 GiB segment's blocks are freed over two seconds.
const DefaultDeleteBytesPerSecond = 512 << 20

// deleteStep is how much of a file one truncation frees.
const deleteStep = 16 << 20

// fileDeleter is the log manager's deleter (above). Its methods are safe
// for concurrent use; run is its one goroutine.
type fileDeleter struct {
	// rate is keel.log.delete.max.bytes.per.second (not positive:
	// unpaced).
	rate   atomic.Int64
	stop   <-chan struct{}
	logger hclog.Logger
	// behind is how long a deletion may wait in the queue before the
	// deleter logs that it is behind, at most once per that long.
	behind time.Duration

	mu      sync.Mutex
	queue   []deletion
	stopped bool // run has returned: add removes at once
	wake    chan struct{}
}

// deletion is a file (f open, path its name) or a directory (f nil).
type deletion struct {
	path   string
	f      *os.File
	queued time.Time
}

// deleteBacklogWarning is fileDeleter.behind's default.
const deleteBacklogWarning = 30 * time.Second

func newFileDeleter(stop <-chan struct{}, rate int64, logger hclog.Logger) *fileDeleter {
	d := &fileDeleter{stop: stop, logger: logger, behind: deleteBacklogWarning, wake: make(chan struct{}, 1)}
	d.rate.Store(rate)
	return d
}

// addFile queues the open file f, named path, for removal; a nil deleter,
// or one stopped, removes it at once.
func (d *fileDeleter) addFile(path string, f *os.File) error {
	return d.add(deletion{path: path, f: f})
}

// addDir queues a directory, already renamed out of the way, for removal.
func (d *fileDeleter) addDir(path string) error {
	return d.add(deletion{path: path})
}

func (d *fileDeleter) add(del deletion) error {
	del.queued = time.Now()
	if d != nil {
		d.mu.Lock()
		if !d.stopped {
			d.queue = append(d.queue, del)
			d.mu.Unlock()
			select {
			case d.wake <- struct{}{}:
			default:
			}
			return nil
		}
		d.mu.Unlock()
	}
	// Unpaced, as the removal it replaces.
	if del.f != nil {
		del.f.Close()
		if err := os.Remove(del.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.RemoveAll(del.path)
}

// run is the deleter's goroutine, owned by the log manager (its stop).
func (d *fileDeleter) run() {
	defer func() {
		d.mu.Lock()
		d.stopped = true
		left := d.queue
		d.queue = nil
		d.mu.Unlock()
		for _, del := range left {
			if del.f != nil {
				del.f.Close()
			}
		}
	}()
	// The cleaner's throttler (cleaner_throttle.go), with a budget of its
	// own: the deletion rate does not count the cleaner's I/O.
	th := &ioThrottler{rate: func() float64 { return float64(d.rate.Load()) }, stop: d.stop}
	var warned time.Time
	for {
		d.mu.Lock()
		var del deletion
		ok := len(d.queue) > 0
		if ok {
			del = d.queue[0]
			d.queue[0] = deletion{}
			d.queue = d.queue[1:]
		}
		left := len(d.queue)
		d.mu.Unlock()
		if waited := time.Since(del.queued); ok && waited > d.behind && time.Since(warned) > d.behind {
			warned = time.Now()
			d.logger.Warn("removing deleted log files is behind: disk space comes back later than the data went",
				"waited", waited.Round(time.Second), "queued", left, "config", "keel.log.delete.max.bytes.per.second", "bytes_per_second", d.rate.Load())
		}
		if !ok {
			// Time spent with nothing to delete is no credit for a burst.
			th.budget = nil
			select {
			case <-d.stop:
				return
			case <-d.wake:
			}
			continue
		}
		var err error
		if del.f != nil {
			err = d.removeFile(th, del.path, del.f)
		} else {
			err = d.removeDir(th, del.path)
		}
		switch {
		case errors.Is(err, errDeleterStopped):
			return
		case err != nil:
			d.logger.Error("removing deleted log files failed", "path", del.path, "error", err)
		}
	}
}

var errDeleterStopped = errors.New("log manager closing")

// removeFile truncates f a step at a time, as the pace allows, then closes
// it and unlinks path (a name a later deletion may have taken since: then
// that file, also deleted and open elsewhere, loses its name early, which
// is harmless, and its own removal finds it gone).
func (d *fileDeleter) removeFile(th *ioThrottler, path string, f *os.File) error {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	for size := fi.Size(); size > deleteStep; {
		size -= deleteStep
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		if err := th.account(deleteStep); err != nil {
			return errDeleterStopped
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeDir removes a deleted partition's directory, its large files a
// step at a time.
func (d *fileDeleter) removeDir(th *ioThrottler, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			continue // RemoveAll below
		}
		if err := d.removeFile(th, path, f); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}
