package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/keelstream/keel/metadata"
)

// BootstrapRecordsFile holds, in metadata.log.dir, the metadata records a
// new cluster starts with: `keel format --add-scram` writes the SCRAM
// credentials there, as kafka-storage.sh format writes them into its
// bootstrap checkpoint. The first active controller of an empty metadata
// log commits them, in one batch with its first record; once the log holds
// anything, the file is never read again (BootstrapRecords on the
// controller that was formatted with it, ignored on every other).
//
// Layout: a CRC-32C of the rest, then one metadata.EncodeBatch batch. The
// file holds credential keys, so it is written readable by its owner only.
const BootstrapRecordsFile = "bootstrap-records.bin"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteBootstrapRecords writes dir's BootstrapRecordsFile atomically,
// creating dir if needed. A dir formatted with other bootstrap records is an
// error, as formatting twice with other initial voters is; the same
// records again are not (keel format is safe to repeat).
func WriteBootstrapRecords(dir string, records []metadata.Record) error {
	batch, err := metadata.EncodeBatch(records)
	if err != nil {
		return fmt.Errorf("format %s: bootstrap records: %w", dir, err)
	}
	data := binary.BigEndian.AppendUint32(nil, crc32.Checksum(batch, castagnoli))
	data = append(data, batch...)
	path := filepath.Join(dir, BootstrapRecordsFile)
	switch have, err := os.ReadFile(path); {
	case err == nil && bytes.Equal(have, data):
		return nil
	case err == nil:
		return fmt.Errorf("format %s: it was formatted with other bootstrap records (%s): "+
			"change credentials on the running cluster instead (keel users, kafka-configs --entity-type users)", dir, path)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("format %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	if err := writeFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	return nil
}

// ReadBootstrapRecords reads dir's BootstrapRecordsFile: nil records, no
// error, when the dir was formatted without any. A file that does not
// check out is an error naming it: a controller must not start a cluster
// without the credentials it was formatted with.
func ReadBootstrapRecords(dir string) ([]metadata.Record, error) {
	path := filepath.Join(dir, BootstrapRecordsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read bootstrap records: %w", err)
	}
	if len(data) < 4 || binary.BigEndian.Uint32(data) != crc32.Checksum(data[4:], castagnoli) {
		return nil, fmt.Errorf("read bootstrap records %s: checksum mismatch: %w", path, metadata.ErrCorruptRecord)
	}
	records, err := metadata.DecodeBatch(data[4:])
	if err != nil {
		return nil, fmt.Errorf("read bootstrap records %s: %w", path, err)
	}
	return records, nil
}
