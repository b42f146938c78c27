package network

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchClient drives a server over loopback with pre-encoded requests.
type benchClient struct {
	rc *rawClient
	br *bufio.Reader
}

func newBenchClient(b *testing.B, addr string) *benchClient {
	rc := dialRaw(b, addr)
	return &benchClient{rc: rc, br: bufio.NewReaderSize(rc.c, 256<<10)}
}

// newTLSBenchClient is newBenchClient over TLS.
func newTLSBenchClient(b *testing.B, addr string, cfg *tls.Config) *benchClient {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	rc := &rawClient{t: b, c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))}
	return &benchClient{rc: rc, br: bufio.NewReaderSize(c, 256<<10)}
}

// roundTrips sends window requests in one write and reads window
// responses, until n requests are answered.
func (c *benchClient) roundTrips(b *testing.B, req []byte, window int) {
	batch := make([]byte, 0, len(req)*window)
	for range window {
		batch = append(batch, req...)
	}
	var size [4]byte
	for b.Loop() {
		if _, err := c.rc.c.Write(batch); err != nil {
			b.Fatal(err)
		}
		for range window {
			if _, err := io.ReadFull(c.br, size[:]); err != nil {
				b.Fatal(err)
			}
			if _, err := c.br.Discard(int(binary.BigEndian.Uint32(size[:]))); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*window)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkRoundTrip measures a small request's whole path over loopback:
// read, header parse, kmsg decode, dispatch, kmsg encode, write. Client
// and server share the process (and the machine's cores).
func BenchmarkRoundTrip(b *testing.B) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ClusterID = kmsg.StringPtr("bench")
	ts := startServer(b, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.MetadataRequest); ok {
			return &Response{Msg: resp}, true
		}
		return nil, false
	}, nil)
	for _, window := range []int{1, 5, 32} {
		b.Run(fmt.Sprintf("metadata-v12-in-flight-%d", window), func(b *testing.B) {
			c := newBenchClient(b, ts.addr)
			frame, _ := c.rc.frame(metadataRequest(), 12)
			b.ReportAllocs()
			c.roundTrips(b, frame, window)
		})
	}
}

// copyRegion sends a file region without sendfile, to compare the paths.
type copyRegion struct{ fileRegion }

func (r copyRegion) WriteTo(w io.Writer) (int64, error) {
	return r.fileRegion.WriteTo(struct{ io.Writer }{w}) // hide syscall.Conn
}

// BenchmarkFetchRoundTrip measures Fetch responses of 6 partitions × 64 KiB
// of records, sent with sendfile, with read+write copies, and over TLS (an
// SSL listener: copies through the pooled buffer, encrypted).
func BenchmarkFetchRoundTrip(b *testing.B) {
	f := testRecordFile(b, 1<<20)
	pki := newTestPKI(b)
	for _, mode := range []string{"sendfile", "copy", "tls"} {
		b.Run(mode, func(b *testing.B) {
			var mod func(*Config)
			if mode == "tls" {
				mod = pki.sslListener(tls.NoClientCert, nil)
			}
			ts := startServer(b, func(_ context.Context, req *Request) (Result, bool) {
				if _, ok := req.Msg.(*kmsg.FetchRequest); !ok {
					return nil, false
				}
				topic := FetchTopic{Topic: "bench"}
				for p := range int32(6) {
					fp := partition(p)
					region := fileRegion{f, int64(p) << 16, 64 << 10}
					if mode == "copy" {
						fp.Records = []Region{copyRegion{region}}
					} else {
						fp.Records = []Region{region}
					}
					topic.Partitions = append(topic.Partitions, fp)
				}
				body := AcquireBody()
				if err := (&FetchResponse{Topics: []FetchTopic{topic}}).Encode(req.Header.APIVersion, body); err != nil {
					b.Error(err)
				}
				return &Response{Body: body}, true
			}, mod)
			c := newBenchClient(b, ts.addr)
			if mode == "tls" {
				c = newTLSBenchClient(b, ts.addr, pki.clientConfig(false))
			}
			frame, _ := c.rc.frame(fetchRequest([16]byte{}), 12)
			b.SetBytes(6 << 16)
			b.ReportAllocs()
			c.roundTrips(b, frame, 1)
		})
	}
}

// BenchmarkLargeRequest sends produce requests of one uncompressed record
// batch, below and above frameChunk, one at a time, each answered with a
// small response: the cost of reading a large frame (past frameChunk, its
// first chunk read into a pooled buffer and copied) next to decoding and
// answering it.
func BenchmarkLargeRequest(b *testing.B) {
	ts := startServer(b, func(_ context.Context, req *Request) (Result, bool) {
		if _, ok := req.Msg.(*kmsg.ProduceRequest); !ok {
			return nil, false
		}
		return &Response{Msg: kmsg.NewPtrProduceResponse()}, true
	}, nil)
	for _, size := range []int{frameChunk / 2, 4 * frameChunk} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			c := newBenchClient(b, ts.addr)
			frame, _ := c.rc.frame(produceRequest(make([]byte, size)), 9)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			c.roundTrips(b, frame, 1)
		})
	}
}
