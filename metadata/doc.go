// Package metadata is the cluster metadata model: the record types of the
// metadata log (KRaft-style), the immutable Image that applying them
// builds, and the controller logic that turns requests into records.
//
// Everything here is deterministic and free of I/O: records in, image out;
// (image, event) in, records out. The raftlog package replicates the records
// and feeds them back through Apply; the broker reads images. This package
// must never import anything of Keel's, never touch the network or the
// disk, and never read the clock except through values it is given.
package metadata
