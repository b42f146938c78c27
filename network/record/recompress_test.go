package record

import (
	"bytes"
	"testing"
)

func TestRecompressKeepsEveryRecord(t *testing.T) {
	codecs := []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for _, from := range codecs {
		for _, to := range codecs {
			opts := DefaultBatchOptions()
			opts.Compression = from
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 42, 3, 7
			bb := NewBatchBuilder(opts)
			for i := 0; i < 50; i++ {
				bb.Append(int64(1000+i), []byte{byte(i)}, bytes.Repeat([]byte{'v'}, i), []RecordHeader{{Key: "h", Value: []byte{byte(i)}}})
			}
			orig, err := bb.Build(nil)
			if err != nil {
				t.Fatal(err)
			}
			h, err := CheckBatch(orig)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := Recompress([]byte("prefix"), orig, h, to, DefaultLevel, nil, 1<<20)
			if err != nil {
				t.Fatalf("%v -> %v: %v", from, to, err)
			}
			if string(out[:6]) != "prefix" {
				t.Fatal("dst prefix lost")
			}
			got := out[6:]
			nh, err := CheckBatch(got)
			if err != nil {
				t.Fatalf("%v -> %v: recompressed batch: %v", from, to, err)
			}
			if nh.Compression() != to || nh.ProducerID != 42 || nh.ProducerEpoch != 3 || nh.BaseSequence != 7 ||
				nh.RecordCount != 50 || nh.MaxTimestamp != h.MaxTimestamp || nh.BaseTimestamp != h.BaseTimestamp {
				t.Fatalf("%v -> %v: header %+v from %+v", from, to, nh, h)
			}
			if _, _, err := ValidateRecords(got, nh, nil, 1<<20); err != nil {
				t.Fatalf("%v -> %v: %v", from, to, err)
			}
			a, b := decodeAll(t, orig, h), decodeAll(t, got, nh)
			if len(a) != len(b) {
				t.Fatalf("%v -> %v: %d records, want %d", from, to, len(b), len(a))
			}
			for i := range a {
				if a[i].Timestamp != b[i].Timestamp || !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) ||
					len(b[i].Headers) != 1 || !bytes.Equal(a[i].Headers[0].Value, b[i].Headers[0].Value) {
					t.Fatalf("%v -> %v: record %d differs", from, to, i)
				}
			}
		}
	}
}

func decodeAll(t *testing.T, batch []byte, h BatchHeader) []Record {
	t.Helper()
	records := RecordsBytes(batch)
	if c := h.Compression(); c != CompressionNone {
		var err error
		if records, err = Decompress(c, nil, records, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	it := NewRecordIterator(h, records)
	var out []Record
	var r Record
	for it.Next(&r) {
		out = append(out, r)
		r = Record{}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}
