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
//
// Drop-behind (keel.log.cache.drop.behind.bytes, off by default): each
// hand-over also asks the kernel to drop the segment's pages that are
// that many bytes behind it (POSIX_FADV_DONTNEED, which leaves pages still
// dirty or under writeback alone). The page cache then holds the tail of
// each active segment instead of everything written since memory was
// last short, and the kernel reuses the pages it just dropped for the
// next appends. That matters on a VM whose hypervisor takes back the
// memory its guest leaves free (free page reporting, ballooning): there,
// a page-cache page the guest has not used for a few seconds costs a
// host fault when it is next written, and a broker whose cache keeps
// growing pays one for every appended page (a 1 GiB write through the
// page cache ran at ~0.45 GB/s into such memory and ~4.5 GB/s into pages
// just freed, on the VM Keel is developed on). The price is Kafka's
// premise: a consumer or follower reading further behind than that reads
// from disk.

// writebackPage is the granularity pages are handed over in.
const writebackPage = 4096

// writeback is a range of a segment file to hand to the kernel's
// writeback.
type writeback struct {
	file    *os.File
	from, n int64
	// dropTo, when positive, is the end of the pages, from the file's
	// start, to drop from the page cache once handed over (drop-behind).
	dropTo  int64
	started *atomic.Int64 // counted once handed over (tests)
}

// start queues the range's dirty pages for writing to disk
// (sync_file_range with SYNC_FILE_RANGE_WRITE), then drops the clean pages
// before dropTo from the page cache: it does not wait for the writes, and
// makes nothing durable, which fsync alone does. It may block
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
		if serr == nil && wb.dropTo > 0 {
			serr = unix.Fadvise(int(fd), 0, wb.dropTo, unix.FADV_DONTNEED)
		}
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
