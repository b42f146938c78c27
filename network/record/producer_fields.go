package record

import "encoding/binary"

// SetProducerFields rewrites the idempotent-producer fields of the batch at
// b in place — producer id, producer epoch and base sequence — and
// recomputes the CRC, which covers them. A producer builds a batch once and
// stamps its sequence when it first sends it, or restamps it after an epoch
// bump (KIP-360) resets the partition's sequences, without re-encoding or
// re-compressing the records.
func SetProducerFields(b []byte, producerID int64, producerEpoch int16, baseSequence int32) {
	be := binary.BigEndian
	be.PutUint64(b[offProducerID:], uint64(producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	be.PutUint32(b[offCRC:], ComputeCRC(b))
}
