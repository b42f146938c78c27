package network

import "sync"

// requestMemory is queued.max.request.bytes (KIP-72): a bound on the bytes
// of requests read and not yet handled, across every connection of the
// Server. A reader takes a frame's size from it after reading the size and
// before reading the body, and gives it back once the handler has
// returned; while none is left the reader waits and reads nothing more, so
// TCP pushes back on its client, as Kafka mutes a channel whose
// MemoryPool.tryAllocate failed.
//
// Like Kafka's SimpleMemoryPool as the socket server uses it (not strict),
// a take succeeds whenever any memory is left, even for more than is left:
// the bound can be overshot by one request per reader, and a request
// larger than what is left still goes through rather than waiting for
// memory that may never all be free at once.
//
// Concurrency: any goroutine. A nil *requestMemory is no bound.
type requestMemory struct {
	mu    sync.Mutex
	avail int64
	freed chan struct{} // closed (and replaced) by each give
}

func newRequestMemory(size int64) *requestMemory {
	return &requestMemory{avail: size, freed: make(chan struct{})}
}

// take takes n bytes, waiting while none are left; it gives up (false)
// when done or drain closes first.
func (m *requestMemory) take(n int64, done, drain <-chan struct{}) bool {
	if m == nil {
		return true
	}
	for {
		m.mu.Lock()
		if m.avail > 0 {
			m.avail -= n
			m.mu.Unlock()
			return true
		}
		freed := m.freed
		m.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			return false
		case <-drain:
			return false
		}
	}
}

// give returns n bytes and wakes the readers waiting for memory.
func (m *requestMemory) give(n int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.avail += n
	close(m.freed)
	m.freed = make(chan struct{})
	m.mu.Unlock()
}
