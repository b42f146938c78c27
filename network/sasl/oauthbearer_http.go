package sasl

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/keelstream/keel/network/tlsconf"
)

// OAuthHTTPClient is the HTTP client of an OAUTHBEARER login module's or
// validator's requests to the identity provider (the token endpoint, the
// JWKS endpoint), as Kafka's JaasOptionsUtils sets it up: HTTPS uses the
// client ssl.* settings given as options of the JAAS module
// (ssl.truststore.location, ssl.truststore.type, ssl.truststore.password,
// ssl.truststore.certificates, a keystore for an identity provider that
// asks for a client certificate, ssl.endpoint.identification.algorithm,
// ssl.protocol, ...), with the settings' defaults: the system's roots
// when no truststore is given. Without any ssl.* option it is
// http.DefaultClient, which is the same thing.
//
// The error names the option at fault, not the JAAS setting, which the
// caller knows.
func OAuthHTTPClient(options map[string]string) (*http.Client, error) {
	hasSSL := false
	for k := range options {
		hasSSL = hasSSL || strings.HasPrefix(k, "ssl.")
	}
	if !hasSSL {
		return http.DefaultClient, nil
	}
	settings, err := tlsconf.FromProperties(func(k string) (string, bool) {
		v, ok := options[k]
		return v, ok
	})
	if err != nil {
		return nil, fmt.Errorf("the module's ssl.* options: %w", err)
	}
	cfg, err := settings.ClientConfig("") // the transport names the URL's host
	if err != nil {
		return nil, fmt.Errorf("the module's ssl.* options: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr}, nil
}
