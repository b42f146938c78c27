// Package record owns Kafka's record batch format, magic v2: the 61-byte
// batch header, the varint-encoded records inside it, the compression
// codecs, and the hashes Kafka clients use to pick partitions and group
// coordinators.
//
// It is shared by the broker (validating produced batches, rewriting their
// offsets in place), storage (recovering and indexing segment files) and the
// client SDK (building batches). Everything that parses bytes here treats them
// as untrusted: it never panics on malformed input, never allocates in
// proportion to a length field it has not checked against the bytes actually
// present, and bounds every decompression.
//
// The package must never do I/O and must never import anything of Keel's.
package record
