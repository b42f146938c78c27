// Package network owns Keel's bytes on the wire: TCP listeners configured
// the Kafka way (listeners, advertised.listeners,
// listener.security.protocol.map), Kafka framing, request header parsing,
// per-connection pipelining with in-order responses, and response writing,
// including the zero-copy Fetch response (header bytes plus file regions
// sent with sendfile).
//
// # Request path
//
// Each accepted connection gets a reader goroutine and a writer goroutine.
// The reader reads a frame (its 4-byte size checked against
// socket.request.max.bytes before anything is allocated), parses the
// request header by hand, decodes the body with kmsg and calls
// Handler.Handle, in arrival order. Handle returns a Response, a Deferred
// (completed later, e.g. from a purgatory) or nil (acks=0). The reader does
// not wait for responses: it goes on to the next request while earlier ones
// wait, up to MaxInFlightRequests per connection, and then stops reading
// (backpressure through TCP). The writer writes responses strictly in
// request order, batching ready responses into one writev and handing
// Regions to Region.WriteTo (sendfile).
//
// Malformed input never crashes the broker: a bad size, an unknown API key,
// an unsupported version (except ApiVersions, answered per KIP-511) or an
// undecodable body is logged and the connection closed, as Kafka does.
//
// # What this package must not do
//
// It implements no Kafka API semantics (those live in broker), and it
// imports nothing of Keel's (DESIGN §2): storage reaches it only through the
// Region interface, which storage's file regions satisfy.
package network
