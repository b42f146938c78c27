package record

import (
	"bytes"
	"testing"
)

func TestProducerBatchBuilderEncodesLikeBatchBuilder(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		opts := DefaultBatchOptions()
		opts.Compression = c
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 1, 100
		ref := NewBatchBuilder(opts)
		pb := NewProducerBatchBuilder(opts, 16)
		for round := 0; round < 2; round++ { // the second round reuses the buffers
			ref.Reset(opts)
			pb.Reset(opts)
			for i := 0; i < 50; i++ {
				var key []byte
				if i%2 == 0 {
					key = []byte{byte(i)}
				}
				hs := []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "n"}}
				ref.Append(int64(1000+i), key, bytes.Repeat([]byte("x"), i), hs[:i%3])
				pb.Append(int64(1000+i), key, bytes.Repeat([]byte("x"), i), hs[:i%3])
			}
			want, err := ref.Build(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pb.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if c == CompressionNone && !bytes.Equal(got, want) {
				t.Fatalf("%s: batches differ", c)
			}
			h, err := CheckBatch(got)
			if err != nil || h.RecordCount != 50 || h.ProducerID != 7 || h.BaseSequence != 100 {
				t.Fatalf("%s: %+v %v", c, h, err)
			}
			if _, _, err := ValidateRecords(got, h, nil, 1<<20); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
		}
	}
}
