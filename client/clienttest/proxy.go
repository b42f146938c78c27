package clienttest

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// FaultDialer is a client.Dialer that routes every broker connection
// through an in-process proxy able to lose one Produce response: the request
// reaches the broker (which appends the batch) but the client never sees the
// answer, because the proxy closes the connection instead. That is exactly
// the failure idempotent producers exist for, and it works against any
// broker.
//
// Safe for concurrent use. Close stops every proxy goroutine.
type FaultDialer struct {
	armed   atomic.Bool
	dropped atomic.Int32
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

// DropNextProduceResponse arms the proxy: the next Produce response is
// swallowed and its connection closed.
func (f *FaultDialer) DropNextProduceResponse() { f.armed.Store(true) }

// Dropped is how many Produce responses were swallowed.
func (f *FaultDialer) Dropped() int { return int(f.dropped.Load()) }

// Dial connects to address through the proxy.
func (f *FaultDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	server, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	client, inner := net.Pipe()
	f.mu.Lock()
	f.conns = append(f.conns, server, inner)
	f.mu.Unlock()
	var produceCorr sync.Map // correlation ids of Produce requests to drop
	kill := func() { server.Close(); inner.Close() }
	f.wg.Add(2)
	go func() { // client -> broker
		defer f.wg.Done()
		defer kill()
		for {
			frame, err := readFrame(inner)
			if err != nil {
				return
			}
			if len(frame) >= 12 && binary.BigEndian.Uint16(frame[4:]) == 0 && f.armed.CompareAndSwap(true, false) {
				produceCorr.Store(binary.BigEndian.Uint32(frame[8:]), true)
			}
			if _, err := server.Write(frame); err != nil {
				return
			}
		}
	}()
	go func() { // broker -> client
		defer f.wg.Done()
		defer kill()
		for {
			frame, err := readFrame(server)
			if err != nil {
				return
			}
			if len(frame) >= 8 {
				if _, ok := produceCorr.Load(binary.BigEndian.Uint32(frame[4:])); ok {
					f.dropped.Add(1)
					return // the batch is appended; its answer is lost
				}
			}
			if _, err := inner.Write(frame); err != nil {
				return
			}
		}
	}()
	return client, nil
}

// readFrame reads one size-prefixed Kafka frame, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// Close closes every proxied connection and waits for the proxy goroutines.
func (f *FaultDialer) Close() {
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
