// Package tlsconf turns Apache Kafka's ssl.* configuration into Go TLS
// configuration, with the property names and the semantics that Kafka
// brokers (server.properties) and Kafka clients (client.properties, a CLI
// tool's --command-config) give them, so that a Kafka deployment's existing
// SSL settings and Java keystores work unchanged with Keel.
//
// # Settings
//
// [FromProperties] reads the ssl.* keys ([Keys] lists them) into
// [Settings], applying Kafka's defaults to the unset ones.
// [Settings.ServerConfig] builds the *tls.Config of a broker's SSL
// listener, [Settings.ClientConfig] that of a client connecting to one.
//
// # Keystores and truststores
//
// The keystore (ssl.keystore.*) holds this side's private key and
// certificate chain; the truststore (ssl.truststore.*) holds the
// certificates it trusts: on a broker, the CAs that sign client
// certificates (ssl.client.auth); on a client, the CAs that sign the
// brokers' certificates. Three formats are read, as in Kafka:
//
//   - JKS, Java's own keystore format and Kafka's default
//     ssl.keystore.type and ssl.truststore.type;
//   - PKCS12, what keytool writes by default since Java 9, including the
//     PBES2/AES-256 encryption and HMAC-SHA256 MACs of current JDKs;
//   - PEM (KIP-651): a file, or the PEM text itself in
//     ssl.keystore.certificate.chain + ssl.keystore.key and
//     ssl.truststore.certificates.
//
// As in Java (keystore.type.compat), a JKS file configured as PKCS12 or a
// PKCS12 file configured as JKS is read by its actual format.
//
// # Principals
//
// [PrincipalMapper] names the client of an mTLS connection the way Kafka's
// DefaultKafkaPrincipalBuilder does: the RFC 2253 form of the client
// certificate's subject ([DistinguishedName], as Java's
// X500Principal.getName renders it) rewritten by the rules of
// ssl.principal.mapping.rules (KIP-371).
//
// # Differences from the JVM
//
// Go's crypto/tls, not the JVM's JSSE, runs the handshake, so a few
// settings mean slightly less than in Kafka: ssl.enabled.protocols is a
// range from its lowest to its highest version, TLS 1.3 cipher suites are
// not configurable (TLS 1.3 names in ssl.cipher.suites are accepted and
// only decide whether TLS 1.3 may be used), and rules' regular expressions
// are Go's (RE2) rather than java.util.regex: look-arounds and
// back-references are refused when the rules are parsed. The JVM-only
// settings (ssl.provider, ssl.keymanager.algorithm,
// ssl.trustmanager.algorithm, ssl.secure.random.implementation,
// ssl.engine.factory.class) are not read.
package tlsconf
