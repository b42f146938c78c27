package record

import "testing"

func TestSetProducerFieldsRestampsAValidBatch(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionZstd} {
		opts := DefaultBatchOptions()
		opts.Compression = c
		b := NewBatchBuilder(opts)
		b.Append(1000, []byte("k"), []byte("v"), nil)
		b.Append(1001, nil, []byte("w"), nil)
		batch, err := b.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		SetProducerFields(batch, 42, 3, 17)
		h, err := CheckBatch(batch)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 17 || h.LastSequence() != 18 {
			t.Fatalf("%s: header %+v", c, h)
		}
	}
}
