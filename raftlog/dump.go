package raftlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/keelstream/keel/metadata"
)

// DumpLog decodes a node's metadata log and latest snapshot offline and
// writes one JSON object per line to w, like `kafka-dump-log
// --cluster-metadata-decoder`. dir is the node's metadata.log.dir or its
// __cluster_metadata-0 directory. The store is opened read-only; a running
// node holds it locked, so DumpLog fails after a second rather than wait.
//
// Output, in order:
//
//	{"snapshot":{"index":I,"term":T,"appliedOffset":A,"imageOffset":O,"records":N}}
//	{"offset":I,"type":"TOPIC_RECORD","version":0,"data":{...}}   (N records of the snapshot, at its index)
//	{"log":{"firstOffset":F,"lastOffset":L}}
//	{"offset":5,"type":"REGISTER_BROKER_RECORD","version":0,"data":{...}}
//	{"offset":6,"type":"RAFT_CONFIGURATION","term":2,"data":{"voters":[...],"observers":[...]}}
//	{"offset":7,"type":"RAFT_NOOP","term":3}
//	{"offset":8,"error":"..."}                                     (an undecodable entry)
//
// The snapshot lines are absent when there is no snapshot. Records of one
// batch share its offset (one Raft entry). Log entries at or below the
// snapshot index are printed too: Raft keeps TrailingLogs of them.
func DumpLog(dir string, w io.Writer) error {
	mdir := dir
	if filepath.Base(filepath.Clean(dir)) != MetadataDirName {
		mdir = filepath.Join(dir, MetadataDirName)
	}
	dbPath := filepath.Join(mdir, raftDBName)
	if _, err := os.Stat(dbPath); err != nil {
		return fmt.Errorf("dump metadata log: no metadata log in %s: %w", dir, err)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)

	if err := dumpSnapshot(mdir, enc); err != nil {
		return err
	}

	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        dbPath,
		BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: time.Second},
	})
	if err != nil {
		return fmt.Errorf("dump metadata log: open %s read-only (is a node running on it?): %w", dbPath, err)
	}
	defer store.Close()
	first, err := store.FirstIndex()
	if err != nil {
		return fmt.Errorf("dump metadata log: %w", err)
	}
	last, err := store.LastIndex()
	if err != nil {
		return fmt.Errorf("dump metadata log: %w", err)
	}
	if err := enc.Encode(map[string]any{"log": map[string]uint64{"firstOffset": first, "lastOffset": last}}); err != nil {
		return err
	}
	for i := first; i <= last && last > 0; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			if err := enc.Encode(dumpError{Offset: i, Error: err.Error()}); err != nil {
				return err
			}
			continue
		}
		if err := dumpEntry(enc, &l); err != nil {
			return err
		}
	}
	return bw.Flush()
}

type dumpRecord struct {
	Offset  uint64 `json:"offset"`
	Type    string `json:"type"`
	Version int16  `json:"version"`
	Data    any    `json:"data"`
}

type dumpControl struct {
	Offset uint64 `json:"offset"`
	Type   string `json:"type"`
	Term   uint64 `json:"term"`
	Data   any    `json:"data,omitempty"`
}

type dumpError struct {
	Offset uint64 `json:"offset"`
	Error  string `json:"error"`
}

type dumpServer struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

func dumpRecords(enc *json.Encoder, offset uint64, records []metadata.Record) error {
	for _, r := range records {
		var data any = r
		if s, ok := r.(metadata.Redactor); ok {
			data = s.Redact() // no SCRAM salts or keys, no passwords, on an operator's screen
		}
		if err := enc.Encode(dumpRecord{Offset: offset, Type: r.Type().String(), Version: r.Version(), Data: data}); err != nil {
			return err
		}
	}
	return nil
}

func dumpEntry(enc *json.Encoder, l *raft.Log) error {
	switch l.Type {
	case raft.LogCommand:
		records, err := metadata.DecodeBatch(l.Data)
		if err != nil {
			return enc.Encode(dumpError{Offset: l.Index, Error: err.Error()})
		}
		return dumpRecords(enc, l.Index, records)
	case raft.LogConfiguration:
		conf := raft.DecodeConfiguration(l.Data)
		data := map[string][]dumpServer{"voters": {}, "observers": {}}
		for _, s := range conf.Servers {
			k := "observers"
			if s.Suffrage == raft.Voter {
				k = "voters"
			}
			data[k] = append(data[k], dumpServer{ID: string(s.ID), Address: string(s.Address)})
		}
		return enc.Encode(dumpControl{Offset: l.Index, Type: "RAFT_CONFIGURATION", Term: l.Term, Data: data})
	case raft.LogNoop:
		return enc.Encode(dumpControl{Offset: l.Index, Type: "RAFT_NOOP", Term: l.Term})
	case raft.LogBarrier:
		return enc.Encode(dumpControl{Offset: l.Index, Type: "RAFT_BARRIER", Term: l.Term})
	default:
		return enc.Encode(dumpControl{Offset: l.Index, Type: "RAFT_" + strings.ToUpper(strings.TrimPrefix(l.Type.String(), "Log")), Term: l.Term})
	}
}

// fileSnapshotMeta is hashicorp's meta.json of a file snapshot.
type fileSnapshotMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// dumpSnapshot prints the latest complete snapshot in mdir/snapshots,
// reading hashicorp's file snapshot layout directly (NewFileSnapshotStore
// would write to the dir).
func dumpSnapshot(mdir string, enc *json.Encoder) error {
	base := filepath.Join(mdir, "snapshots")
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dump metadata snapshots: %w", err)
	}
	var metas []fileSnapshotMeta
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(base, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m fileSnapshotMeta
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		metas = append(metas, m)
	}
	if len(metas) == 0 {
		return nil
	}
	sort.Slice(metas, func(i, j int) bool {
		a, b := metas[i], metas[j]
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		if a.Index != b.Index {
			return a.Index > b.Index
		}
		return a.ID > b.ID
	})
	m := metas[0]
	data, err := os.ReadFile(filepath.Join(base, m.ID, "state.bin"))
	if err != nil {
		return fmt.Errorf("dump metadata snapshot %s: %w", m.ID, err)
	}
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	h.Write(data)
	if !bytes.Equal(h.Sum(nil), m.CRC) {
		return fmt.Errorf("dump metadata snapshot %s: %w: checksum mismatch", m.ID, errCorruptSnapshot)
	}
	snap, err := decodeSnapshot(data)
	if err != nil {
		return fmt.Errorf("dump metadata snapshot %s: %w", m.ID, err)
	}
	if err := enc.Encode(map[string]any{"snapshot": map[string]any{
		"index": m.Index, "term": m.Term, "appliedOffset": snap.applied, "imageOffset": snap.imageOffset, "records": len(snap.records),
	}}); err != nil {
		return err
	}
	return dumpRecords(enc, m.Index, snap.records)
}
