package storage

import (
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Writeback (keel.log.writeback.bytes): left to itself, the kernel lets a
// broker's dirty pages pile up to vm.dirty_background_ratio of memory
// (GBs) and then writes them back in a burst whose CPU and I/O stall
// appends for tens of milliseconds. Handed over as they fill, every
// OpenOptions.WritebackBytes of a segment, the same bytes go out evenly
// (RocksDB's bytes_per_sync). The appender picks the pages under the
// Log's lock (segment.writeback) and hands them over after releasing it,
// to the Manager's writeback goroutine (writebackQueue), so that neither
// the partition's readers nor the produce request wait on a busy disk.

// writebackPage is the granularity pages are handed over in.
const writebackPage = 4096

// writeback is a range of a segment file to hand to the kernel's
// writeback.
type writeback struct {
	file    *os.File
	from, n int64
	started *atomic.Int64 // counted once handed over (tests)
}

// start queues the range's dirty pages for writing to disk
// (sync_file_range with SYNC_FILE_RANGE_WRITE): it does not wait for the
// writes, and makes nothing durable, which fsync alone does. It may block
// while the disk's request queue is full. The segment may have been
// closed meanwhile: then it does nothing and says so.
func (wb writeback) start() error {
	if wb.n <= 0 {
		return nil
	}
	rc, err := wb.file.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SyncFileRange(int(fd), wb.from, wb.n, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("start writeback of %s: %w", wb.file.Name(), serr)
	}
	if wb.started != nil {
		wb.started.Add(1)
	}
	return nil
}

// writebackQueue runs the hand-overs of a Manager's logs on one goroutine,
// off the appenders' path.
type writebackQueue struct {
	jobs chan writeback
	stop <-chan struct{}
}

// writebackQueueLen bounds the hand-overs waiting: more are left to the
// kernel's own writeback (the disk is behind anyway).
const writebackQueueLen = 1024

func newWritebackQueue(stop <-chan struct{}) *writebackQueue {
	return &writebackQueue{jobs: make(chan writeback, writebackQueueLen), stop: stop}
}

// run starts the queued hand-overs until stop is closed; their errors
// are not the appends': a failing disk shows in the next write or fsync,
// which take the log dir offline.
func (q *writebackQueue) run() {
	for {
		select {
		case wb := <-q.jobs:
			_ = wb.start()
		case <-q.stop:
			return
		}
	}
}

// add hands wb over: to the queue, or when the Log has none (opened
// outside a Manager) at once.
func (q *writebackQueue) add(wb writeback) {
	switch {
	case wb.n <= 0:
	case q == nil:
		_ = wb.start()
	default:
		select {
		case q.jobs <- wb:
		default:
		}
	}
}
