package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/keelstream/keel/network/record"
	"github.com/keelstream/keel/storage"
	"github.com/urfave/cli/v2"
)

func dumpLogCommand() *cli.Command {
	return &cli.Command{
		Name:      "dump-log",
		Usage:     "print the batches of segment files and the entries of their indexes (like kafka-dump-log.sh)",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "files", Required: true, Usage: "segment files (.log, .index, .timeindex, .txnindex) to dump"},
			&cli.BoolFlag{Name: "print-data-log", Usage: "print each record's key and value (implies --deep-iteration)"},
			&cli.BoolFlag{Name: "deep-iteration", Usage: "print every record, decompressing batches"},
		},
		Action: func(c *cli.Context) error {
			w := bufio.NewWriter(c.App.Writer)
			defer w.Flush()
			deep := c.Bool("deep-iteration") || c.Bool("print-data-log")
			for _, path := range splitFiles(c.StringSlice("files")) {
				var err error
				switch filepath.Ext(path) {
				case ".log":
					err = dumpSegment(w, path, deep, c.Bool("print-data-log"))
				case ".index":
					err = dumpIndex(w, path, 8)
				case ".timeindex":
					err = dumpIndex(w, path, 12)
				case ".txnindex":
					err = dumpTxnIndex(w, path)
				default:
					err = fmt.Errorf("%s: not a .log, .index, .timeindex or .txnindex file", path)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func segmentBase(path string) int64 {
	name := filepath.Base(path)
	base, _ := strconv.ParseInt(strings.TrimSuffix(name, filepath.Ext(name)), 10, 64)
	return base
}

// dumpSegment prints one line per batch in Kafka's DumpLogSegments format and
// stops at the first invalid batch, reporting where.
func dumpSegment(w io.Writer, path string, deep, data bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Dumping %s\nLog starting offset: %d\n", path, segmentBase(path))
	r := bufio.NewReaderSize(f, 1<<20)
	head := make([]byte, record.HeaderSize)
	var pos int64
	var buf []byte
	for pos < st.Size() {
		if _, err := io.ReadFull(r, head); err != nil {
			fmt.Fprintf(w, "Found %d invalid bytes at the end of %s (a partial batch header)\n", st.Size()-pos, filepath.Base(path))
			return nil
		}
		size, err := record.PeekBatchSize(head)
		if err != nil || int64(size) > st.Size()-pos {
			fmt.Fprintf(w, "Found %d invalid bytes at the end of %s at position %d\n", st.Size()-pos, filepath.Base(path), pos)
			return nil
		}
		buf = append(buf[:0], head...)
		buf = append(buf, make([]byte, size-record.HeaderSize)...)
		if _, err := io.ReadFull(r, buf[record.HeaderSize:]); err != nil {
			return fmt.Errorf("read %s at %d: %w", path, pos, err)
		}
		h, err := record.CheckBatch(buf)
		valid := err == nil
		if errors.Is(err, record.ErrUnsupportedMagic) || h.Magic != record.MagicV2 {
			fmt.Fprintf(w, "Found a batch with magic %d at position %d: only v2 is supported\n", h.Magic, pos)
			return nil
		}
		tsType := "CreateTime"
		if h.TimestampType() == record.LogAppendTime {
			tsType = "LogAppendTime"
		}
		fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d "+
			"partitionLeaderEpoch: %d isTransactional: %t isControl: %t position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
			h.BaseOffset, h.LastOffset(), h.RecordCount, h.BaseSequence, h.LastSequence(), h.ProducerID, h.ProducerEpoch,
			h.PartitionLeaderEpoch, h.IsTransactional(), h.IsControl(), pos, tsType, h.MaxTimestamp, size, h.Magic,
			h.Compression(), h.CRC, valid)
		if deep && valid {
			if err := dumpRecords(w, h, buf, data); err != nil {
				fmt.Fprintf(w, "| cannot decode records: %v\n", err)
			}
		}
		pos += int64(size)
	}
	return nil
}

func dumpRecords(w io.Writer, h record.BatchHeader, batch []byte, data bool) error {
	records := record.RecordsBytes(batch)
	if c := h.Compression(); c != record.CompressionNone {
		var err error
		if records, err = record.Decompress(c, nil, records, 256<<20); err != nil {
			return err
		}
	}
	it := record.NewRecordIterator(h, records)
	var r record.Record
	for it.Next(&r) {
		seq := int32(-1)
		if h.BaseSequence >= 0 {
			seq = record.IncrementSequence(h.BaseSequence, r.OffsetDelta)
		}
		keys := make([]string, len(r.Headers))
		for i, hd := range r.Headers {
			keys[i] = hd.Key
		}
		fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
			r.Offset, map[bool]string{true: "LogAppendTime", false: "CreateTime"}[h.TimestampType() == record.LogAppendTime],
			r.Timestamp, nullableLen(r.Key), nullableLen(r.Value), seq, strings.Join(keys, ","))
		if h.IsControl() {
			if typ, err := record.ParseControlRecord(r.Key); err == nil {
				fmt.Fprintf(w, " endTxnMarker: %s", map[record.ControlType]string{record.ControlAbort: "ABORT", record.ControlCommit: "COMMIT"}[typ])
			}
		} else if data {
			if r.Key != nil {
				fmt.Fprintf(w, " key: %s", r.Key)
			}
			fmt.Fprintf(w, " payload: %s", r.Value)
		}
		fmt.Fprintln(w)
	}
	return it.Err()
}

func nullableLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// dumpIndex prints an .index (8-byte entries) or .timeindex (12-byte
// entries) read-only, stopping at the zero-filled preallocated tail.
func dumpIndex(w io.Writer, path string, entrySize int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	base := segmentBase(path)
	fmt.Fprintf(w, "Dumping %s\n", path)
	for i := 0; i+entrySize <= len(b); i += entrySize {
		e := b[i : i+entrySize]
		if entrySize == 8 {
			rel, pos := binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
			if i > 0 && rel == 0 && pos == 0 {
				break
			}
			fmt.Fprintf(w, "offset: %d position: %d\n", base+int64(rel), pos)
		} else {
			ts, rel := int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
			if ts == 0 && rel == 0 {
				break
			}
			fmt.Fprintf(w, "timestamp: %d offset: %d\n", ts, base+int64(rel))
		}
	}
	return nil
}

// dumpTxnIndex prints a segment's aborted transactions as
// kafka-dump-log.sh does.
func dumpTxnIndex(w io.Writer, path string) error {
	entries, err := storage.ReadTxnIndexFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Dumping %s\n", path)
	for _, e := range entries {
		fmt.Fprintf(w, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
	}
	return nil
}

// splitFiles accepts --files repeated or comma-separated.
func splitFiles(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}
