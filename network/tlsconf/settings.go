package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
)

// Kafka's names of the settings, as in server.properties and
// client.properties.
const (
	keystoreTypeKey                    = "ssl.keystore.type"
	keystoreLocationKey                = "ssl.keystore.location"
	keystorePasswordKey                = "ssl.keystore.password"
	keyPasswordKey                     = "ssl.key.password"
	keystoreCertificateChainKey        = "ssl.keystore.certificate.chain"
	keystoreKeyKey                     = "ssl.keystore.key"
	truststoreTypeKey                  = "ssl.truststore.type"
	truststoreLocationKey              = "ssl.truststore.location"
	truststorePasswordKey              = "ssl.truststore.password"
	truststoreCertificatesKey          = "ssl.truststore.certificates"
	clientAuthKey                      = "ssl.client.auth"
	enabledProtocolsKey                = "ssl.enabled.protocols"
	protocolKey                        = "ssl.protocol"
	cipherSuitesKey                    = "ssl.cipher.suites"
	endpointIdentificationAlgorithmKey = "ssl.endpoint.identification.algorithm"
	principalMappingRulesKey           = "ssl.principal.mapping.rules"
)

// Store types (ssl.keystore.type, ssl.truststore.type), upper-case as
// Kafka documents them; the settings are read case-insensitively.
const (
	TypeJKS    = "JKS"
	TypePKCS12 = "PKCS12"
	TypePEM    = "PEM"
)

// ssl.client.auth values.
const (
	ClientAuthNone      = "none"
	ClientAuthRequested = "requested"
	ClientAuthRequired  = "required"
)

// Settings are Kafka's ssl.* configs of one listener or one client. Build
// them with FromProperties, or start from Defaults: the zero value is not
// Kafka's defaults (an empty EndpointIdentificationAlgorithm turns host
// name verification off, empty PrincipalMappingRules map no client).
type Settings struct {
	// KeystoreType is ssl.keystore.type: JKS (Kafka's default, also when
	// empty), PKCS12 or PEM, in any case.
	KeystoreType string
	// KeystoreLocation is ssl.keystore.location, the keystore file.
	KeystoreLocation string
	// KeystorePassword is ssl.keystore.password, the password of a JKS or
	// PKCS12 keystore file (required with one; not allowed with PEM).
	KeystorePassword string
	// KeyPassword is ssl.key.password, the password of the private key:
	// of its JKS key entry (KeystorePassword when empty, as in Kafka), or
	// of an encrypted PEM key. PKCS12 keys are read with KeystorePassword,
	// which keytool makes the key's password too.
	KeyPassword string
	// KeystoreCertificateChain is ssl.keystore.certificate.chain, the
	// certificate chain as PEM text (KIP-651, with KeystoreKey and
	// KeystoreType PEM).
	KeystoreCertificateChain string
	// KeystoreKey is ssl.keystore.key, the private key as PEM text
	// (KIP-651).
	KeystoreKey string
	// TruststoreType is ssl.truststore.type: JKS (the default, also when
	// empty), PKCS12 or PEM.
	TruststoreType string
	// TruststoreLocation is ssl.truststore.location, the truststore file.
	TruststoreLocation string
	// TruststorePassword is ssl.truststore.password. A JKS truststore
	// without it is read without checking its integrity, as in Java.
	TruststorePassword string
	// TruststoreCertificates is ssl.truststore.certificates, the trusted
	// certificates as PEM text (KIP-651, with TruststoreType PEM).
	TruststoreCertificates string
	// ClientAuth is ssl.client.auth, whether a broker asks clients for a
	// certificate: none (the default, also when empty), requested or
	// required. Clients ignore it.
	ClientAuth string
	// EnabledProtocols is ssl.enabled.protocols: TLSv1.2 and TLSv1.3 when
	// empty (Kafka's default); TLSv1 and TLSv1.1 are also known. Go
	// enables the range from the lowest to the highest listed version.
	EnabledProtocols []string
	// Protocol is ssl.protocol, the protocol of Java's SSLContext:
	// TLSv1.3 (Kafka's default), TLS, or an older TLSv1.x. As Kafka
	// documents it, a client with TLSv1.2 (or older) does not use a later
	// version even if EnabledProtocols lists it; brokers ignore it.
	Protocol string
	// CipherSuites is ssl.cipher.suites, by IANA (JSSE) name, e.g.
	// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256; Go's defaults when empty. Go
	// does not make TLS 1.3 suites configurable: their names
	// (TLS_AES_128_GCM_SHA256, ...) are accepted and decide only whether
	// TLS 1.3 may be used, since JSSE cannot negotiate TLS 1.3 when none
	// is enabled (nor TLS 1.2 when only TLS 1.3 suites are).
	CipherSuites []string
	// EndpointIdentificationAlgorithm is
	// ssl.endpoint.identification.algorithm: "https" (Kafka's default)
	// makes a client check that the broker's certificate names the host
	// it dialled; "" turns that check off (the certificate chain is still
	// verified). Brokers ignore it.
	EndpointIdentificationAlgorithm string
	// PrincipalMappingRules is ssl.principal.mapping.rules (KIP-371),
	// "DEFAULT" by default. See ParsePrincipalMappingRules.
	PrincipalMappingRules string
}

// Defaults returns the Settings Kafka has when no ssl.* property is set:
// JKS stores, ssl.client.auth=none, TLSv1.2 and TLSv1.3, host name
// verification on, and the DEFAULT principal mapping rule.
func Defaults() Settings {
	return Settings{
		KeystoreType:                    TypeJKS,
		TruststoreType:                  TypeJKS,
		ClientAuth:                      ClientAuthNone,
		EnabledProtocols:                []string{"TLSv1.2", "TLSv1.3"},
		Protocol:                        "TLSv1.3",
		EndpointIdentificationAlgorithm: "https",
		PrincipalMappingRules:           "DEFAULT",
	}
}

// Keys lists every property name FromProperties reads, so that a config
// loader can tell them from unknown ones.
func Keys() []string {
	return []string{
		keystoreTypeKey, keystoreLocationKey, keystorePasswordKey, keyPasswordKey,
		keystoreCertificateChainKey, keystoreKeyKey,
		truststoreTypeKey, truststoreLocationKey, truststorePasswordKey, truststoreCertificatesKey,
		clientAuthKey, enabledProtocolsKey, protocolKey, cipherSuitesKey,
		endpointIdentificationAlgorithmKey, principalMappingRulesKey,
	}
}

// FromProperties reads the ssl.* settings through get, which returns a
// property's value and whether it is set (get("ssl.keystore.location")).
// For a listener's settings, get should look up the listener-prefixed key
// (listener.name.<listener>.ssl.keystore.location) first. Unset keys take
// Kafka's defaults (see Defaults); values are trimmed, as Kafka trims
// them. An explicitly empty ssl.endpoint.identification.algorithm turns
// host name verification off; unset, it is "https".
//
// Each value is checked (store types, ssl.client.auth, protocols, cipher
// suites, mapping rules); how the settings combine (a keystore location
// with its password, ...) is checked by Validate, which ServerConfig and
// ClientConfig run, as Kafka checks it when it builds its SslFactory.
func FromProperties(get func(key string) (string, bool)) (Settings, error) {
	s := Defaults()
	str := func(key string, dst *string) {
		if v, ok := get(key); ok {
			*dst = javaTrim(v)
		}
	}
	str(keystoreTypeKey, &s.KeystoreType)
	str(keystoreLocationKey, &s.KeystoreLocation)
	str(keystorePasswordKey, &s.KeystorePassword)
	str(keyPasswordKey, &s.KeyPassword)
	str(keystoreCertificateChainKey, &s.KeystoreCertificateChain)
	str(keystoreKeyKey, &s.KeystoreKey)
	str(truststoreTypeKey, &s.TruststoreType)
	str(truststoreLocationKey, &s.TruststoreLocation)
	str(truststorePasswordKey, &s.TruststorePassword)
	str(truststoreCertificatesKey, &s.TruststoreCertificates)
	str(clientAuthKey, &s.ClientAuth)
	str(protocolKey, &s.Protocol)
	str(endpointIdentificationAlgorithmKey, &s.EndpointIdentificationAlgorithm)
	str(principalMappingRulesKey, &s.PrincipalMappingRules)
	if v, ok := get(enabledProtocolsKey); ok {
		s.EnabledProtocols = splitList(v)
		if len(s.EnabledProtocols) == 0 {
			return Settings{}, fmt.Errorf("%s is empty: list at least one of TLSv1.2, TLSv1.3", enabledProtocolsKey)
		}
	}
	if v, ok := get(cipherSuitesKey); ok {
		s.CipherSuites = splitList(v)
	}
	if err := errors.Join(s.valueErrors()...); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// Validate checks the settings without reading any file: each value (see
// FromProperties) and the combinations Kafka refuses: a keystore location
// together with an inline PEM key, a JKS or PKCS12 keystore without its
// password, a password for a PEM store, and so on. All problems found are
// returned together.
func (s Settings) Validate() error {
	errs := s.valueErrors()
	if err := s.checkKeystore(); err != nil {
		errs = append(errs, err)
	}
	if err := s.checkTruststore(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// valueErrors checks each setting's value.
func (s Settings) valueErrors() []error {
	var errs []error
	if _, err := storeType(keystoreTypeKey, s.KeystoreType); err != nil {
		errs = append(errs, err)
	}
	if _, err := storeType(truststoreTypeKey, s.TruststoreType); err != nil {
		errs = append(errs, err)
	}
	if _, err := s.clientAuth(); err != nil {
		errs = append(errs, err)
	}
	if _, err := s.endpointIdentification(); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := s.versions(false); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParsePrincipalMappingRules(s.PrincipalMappingRules); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", principalMappingRulesKey, err))
	}
	return errs
}

// checkKeystore refuses the keystore settings Kafka's
// DefaultSslEngineFactory refuses.
func (s Settings) checkKeystore() error {
	typ, err := storeType(keystoreTypeKey, s.KeystoreType)
	if err != nil {
		return err
	}
	switch {
	case s.KeystoreKey != "":
		switch {
		case typ != TypePEM:
			return fmt.Errorf("%s is set, so %s must be PEM, not %s", keystoreKeyKey, keystoreTypeKey, typ)
		case s.KeystoreCertificateChain == "":
			return fmt.Errorf("%s is set but %s is not: an inline PEM keystore needs both", keystoreKeyKey, keystoreCertificateChainKey)
		case s.KeystoreLocation != "":
			return fmt.Errorf("both %s and %s are set: use either a keystore file or inline PEM", keystoreLocationKey, keystoreKeyKey)
		case s.KeystorePassword != "":
			return fmt.Errorf("%s cannot be set for a PEM keystore: only %s may be (for an encrypted key)", keystorePasswordKey, keyPasswordKey)
		}
	case s.KeystoreCertificateChain != "":
		return fmt.Errorf("%s is set but %s is not: an inline PEM keystore needs both", keystoreCertificateChainKey, keystoreKeyKey)
	case s.KeystoreLocation != "" && typ == TypePEM:
		if s.KeystorePassword != "" {
			return fmt.Errorf("%s cannot be set for a PEM keystore: only %s may be (for an encrypted key)", keystorePasswordKey, keyPasswordKey)
		}
	case s.KeystoreLocation != "" && s.KeystorePassword == "":
		return fmt.Errorf("%s is set but %s is not: a %s keystore needs its password", keystoreLocationKey, keystorePasswordKey, typ)
	case s.KeystoreLocation == "" && s.KeystorePassword != "":
		return fmt.Errorf("%s is set but %s is not", keystorePasswordKey, keystoreLocationKey)
	}
	return nil
}

// checkTruststore refuses the truststore settings Kafka refuses.
func (s Settings) checkTruststore() error {
	typ, err := storeType(truststoreTypeKey, s.TruststoreType)
	if err != nil {
		return err
	}
	switch {
	case s.TruststoreCertificates != "":
		switch {
		case typ != TypePEM:
			return fmt.Errorf("%s is set, so %s must be PEM, not %s", truststoreCertificatesKey, truststoreTypeKey, typ)
		case s.TruststoreLocation != "":
			return fmt.Errorf("both %s and %s are set: use either a truststore file or inline PEM", truststoreLocationKey, truststoreCertificatesKey)
		case s.TruststorePassword != "":
			return fmt.Errorf("%s cannot be set for a PEM truststore", truststorePasswordKey)
		}
	case s.TruststoreLocation != "" && typ == TypePEM:
		if s.TruststorePassword != "" {
			return fmt.Errorf("%s cannot be set for a PEM truststore", truststorePasswordKey)
		}
	case s.TruststoreLocation == "" && s.TruststorePassword != "":
		return fmt.Errorf("%s is set but %s is not", truststorePasswordKey, truststoreLocationKey)
	}
	return nil
}

// storeType is a store type setting in its canonical spelling, JKS when
// empty.
func storeType(key, v string) (string, error) {
	switch t := strings.ToUpper(v); t {
	case "":
		return TypeJKS, nil
	case TypeJKS, TypePKCS12, TypePEM:
		return t, nil
	default:
		return "", fmt.Errorf("%s=%s is not supported: want JKS, PKCS12 or PEM (convert other keystores with keytool -importkeystore -deststoretype PKCS12)", key, v)
	}
}

// clientAuth maps ssl.client.auth onto Go's ClientAuthType.
func (s Settings) clientAuth() (tls.ClientAuthType, error) {
	switch strings.ToLower(s.ClientAuth) {
	case "", ClientAuthNone:
		return tls.NoClientCert, nil
	case ClientAuthRequested:
		return tls.VerifyClientCertIfGiven, nil
	case ClientAuthRequired:
		return tls.RequireAndVerifyClientCert, nil
	default:
		return 0, fmt.Errorf("%s=%s: want none, requested or required", clientAuthKey, s.ClientAuth)
	}
}

// endpointIdentification reports whether clients verify the broker's host
// name.
func (s Settings) endpointIdentification() (bool, error) {
	switch strings.ToLower(s.EndpointIdentificationAlgorithm) {
	case "https":
		return true, nil
	case "":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%s: want https, or empty to not verify host names", endpointIdentificationAlgorithmKey, s.EndpointIdentificationAlgorithm)
	}
}

// splitList splits a Kafka LIST value: comma separated, items trimmed,
// empty items dropped.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = javaTrim(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// javaTrim trims as Java's String.trim (and so Kafka's ConfigDef) does:
// every character up to and including U+0020 at either end.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}
