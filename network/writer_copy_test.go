package network

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pathRegion is a fileRegion that notes whether it went to the socket
// (sendfile) or was copied into the writer's buffer.
type pathRegion struct {
	fileRegion
	mu     *sync.Mutex
	paths  map[int64]string // region length → "socket" or "copy"
	length int64
}

func (r pathRegion) WriteTo(w io.Writer) (int64, error) {
	path := "copy"
	if _, ok := w.(syscall.Conn); ok {
		path = "socket"
	}
	r.mu.Lock()
	r.paths[r.length] = path
	r.mu.Unlock()
	return r.fileRegion.WriteTo(w)
}

func TestSmallRegionsShareTheWritevLargeOnesUseSendfile(t *testing.T) {
	f := testRecordFile(t, 1<<20)
	sizes := []int64{1, 700, copyRegionMax, copyRegionMax + 1, 300 << 10}
	var mu sync.Mutex
	paths := map[int64]string{}
	ts := startServer(t, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.FetchRequest); !ok {
			return nil, false
		}
		topic := FetchTopic{Topic: "orders"}
		for i, size := range sizes {
			p := partition(int32(i))
			// Mixed with in-memory bytes around and between the regions.
			p.Records = []Region{BytesRegion("hdr"),
				pathRegion{fileRegion{f, int64(i) * 1000, size}, &mu, paths, size}, BytesRegion("tail")}
			topic.Partitions = append(topic.Partitions, p)
		}
		body := AcquireBody()
		if err := (&FetchResponse{Topics: []FetchTopic{topic}}).Encode(req.Header.APIVersion, body); err != nil {
			t.Error(err)
		}
		return &Response{Body: body}, true
	}, nil)
	rc := dialRaw(t, ts.addr)
	for range 3 { // pipelined responses keep their bytes and order
		corr := rc.send(fetchRequest([16]byte{}), 12)
		resp := kmsg.NewPtrFetchResponse()
		rc.read(resp, 12, corr)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(sizes) {
			t.Fatalf("unexpected response shape: %+v", resp)
		}
		for i, p := range resp.Topics[0].Partitions {
			want := append([]byte("hdr"), regionBytes(t, fileRegion{f, int64(i) * 1000, sizes[i]})...)
			want = append(want, "tail"...)
			if !bytes.Equal(p.RecordBatches, want) {
				t.Fatalf("partition %d (%d-byte region): records differ", i, sizes[i])
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, size := range sizes {
		want := "copy"
		if size > copyRegionMax {
			want = "socket"
		}
		if paths[size] != want {
			t.Errorf("%d-byte region went to %q, want %q", size, paths[size], want)
		}
	}
}

// BenchmarkSmallFetchRoundTrip measures Fetch responses of 6 partitions ×
// size bytes, as a consumer at the tail of the log gets them: regions up to
// copyRegionMax are copied into the writer's buffer (one writev per
// response), larger ones go out with sendfile.
func BenchmarkSmallFetchRoundTrip(b *testing.B) {
	f := testRecordFile(b, 1<<20)
	for _, size := range []int64{200, 4 << 10, 16 << 10, 64 << 10} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			ts := startServer(b, func(_ context.Context, req *Request) (Result, bool) {
				if _, ok := req.Msg.(*kmsg.FetchRequest); !ok {
					return nil, false
				}
				topic := FetchTopic{Topic: "bench"}
				for p := range int32(6) {
					fp := partition(p)
					fp.Records = []Region{fileRegion{f, int64(p) * size, size}}
					topic.Partitions = append(topic.Partitions, fp)
				}
				body := AcquireBody()
				if err := (&FetchResponse{Topics: []FetchTopic{topic}}).Encode(req.Header.APIVersion, body); err != nil {
					b.Error(err)
				}
				return &Response{Body: body}, true
			}, nil)
			c := newBenchClient(b, ts.addr)
			frame, _ := c.rc.frame(fetchRequest([16]byte{}), 12)
			b.SetBytes(6 * size)
			b.ReportAllocs()
			c.roundTrips(b, frame, 1)
		})
	}
}
