package clienttest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FaultDialer is a client.Dialer that routes every broker connection
// through an in-process proxy that can spoil Produce responses: the request
// reaches the broker (which appends the batch) but the client never learns
// it, because the proxy closes the connection instead of answering
// (DropNextProduceResponse), or answers with an error (FailProduce). That
// is exactly the failure idempotent producers exist for, and it works
// against any broker.
//
// Safe for concurrent use. Close stops every proxy goroutine; later dials
// fail.
type FaultDialer struct {
	armed   atomic.Bool
	dropped atomic.Int32
	failed  atomic.Int32
	// FailProduce, when set before the first dial, is asked about every
	// Produce request: a non-zero error code replaces every partition's
	// outcome in its response (the broker's work is done either way).
	FailProduce func(*kmsg.ProduceRequest) (errorCode int16)

	mu     sync.Mutex
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// DropNextProduceResponse arms the proxy: the next Produce response is
// swallowed and its connection closed.
func (f *FaultDialer) DropNextProduceResponse() { f.armed.Store(true) }

// Dropped is how many Produce responses were swallowed.
func (f *FaultDialer) Dropped() int { return int(f.dropped.Load()) }

// Failed is how many Produce responses FailProduce turned into errors.
func (f *FaultDialer) Failed() int { return int(f.failed.Load()) }

// Dial connects to address through the proxy.
func (f *FaultDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	server, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	client, inner := net.Pipe()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		server.Close()
		return nil, errors.New("fault dialer closed")
	}
	f.conns = append(f.conns, server, inner)
	f.wg.Add(2)
	f.mu.Unlock()
	// What to do with the responses of Produce requests, by correlation id.
	type fault struct {
		drop bool
		code int16
		ver  int16
	}
	var faults sync.Map
	kill := func() { server.Close(); inner.Close() }
	go func() { // client -> broker
		defer f.wg.Done()
		defer kill()
		for {
			frame, err := readFrame(inner)
			if err != nil {
				return
			}
			if len(frame) >= 12 && binary.BigEndian.Uint16(frame[4:]) == 0 {
				corr := binary.BigEndian.Uint32(frame[8:])
				if f.armed.CompareAndSwap(true, false) {
					faults.Store(corr, fault{drop: true})
				} else if f.FailProduce != nil {
					if req, ver, ok := parseProduce(frame); ok {
						if code := f.FailProduce(req); code != 0 {
							faults.Store(corr, fault{code: code, ver: ver})
						}
					}
				}
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
				if v, ok := faults.LoadAndDelete(binary.BigEndian.Uint32(frame[4:])); ok {
					ft := v.(fault)
					if ft.drop {
						f.dropped.Add(1)
						return // the batch is appended; its answer is lost
					}
					if frame, ok = failProduceResponse(frame, ft.ver, ft.code); ok {
						f.failed.Add(1)
					}
				}
			}
			if _, err := inner.Write(frame); err != nil {
				return
			}
		}
	}()
	return client, nil
}

// parseProduce decodes a Produce request frame (size prefix included).
func parseProduce(frame []byte) (*kmsg.ProduceRequest, int16, bool) {
	b := frame[4:]
	ver := int16(binary.BigEndian.Uint16(b[2:]))
	b = b[8:] // key, version, correlation id
	if len(b) < 2 {
		return nil, 0, false
	}
	n := int(int16(binary.BigEndian.Uint16(b))) // client id, nullable
	b = b[2:]
	if n > 0 {
		if len(b) < n {
			return nil, 0, false
		}
		b = b[n:]
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = ver
	if req.IsFlexible() {
		if len(b) < 1 || b[0] != 0 {
			return nil, 0, false // tagged header fields: none sent by our clients
		}
		b = b[1:]
	}
	if err := req.ReadFrom(b); err != nil {
		return nil, 0, false
	}
	return req, ver, true
}

// failProduceResponse rewrites a Produce response frame so that every
// partition carries code and no offset.
func failProduceResponse(frame []byte, ver, code int16) ([]byte, bool) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = ver
	hdr := 8 // size, correlation id
	if resp.IsFlexible() {
		hdr++ // empty tagged fields
	}
	if len(frame) < hdr || resp.ReadFrom(frame[hdr:]) != nil {
		return frame, false
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			p.ErrorCode, p.BaseOffset, p.LogAppendTime = code, -1, -1
		}
	}
	out := resp.AppendTo(append([]byte(nil), frame[:hdr]...))
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, true
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
	f.closed = true
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
