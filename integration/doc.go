// Package integration runs whole Keel clusters in tests: an in-process
// harness that starts N nodes with any roles on loopback ports, and (for
// fault injection) one that runs the built keel binary as separate
// processes. Third-party clients (franz-go kgo/kadm) talk to them exactly as
// they would to Apache Kafka.
package integration
