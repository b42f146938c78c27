package main

import (
	"strings"
	"testing"
)

// security.protocol and ssl.* in --command-config: SSL is TLS with the
// truststore and keystore named, PLAINTEXT nothing, SASL a clear refusal,
// a store that does not load an error naming it.
func TestTLSOption(t *testing.T) {
	for _, props := range []map[string]string{{}, {"security.protocol": "PLAINTEXT"}, {"security.protocol": "plaintext", "ssl.truststore.location": "/x"}} {
		if o, err := tlsOption(props); o != nil || err != nil {
			t.Errorf("%v: %v %v, want no TLS", props, o, err)
		}
	}
	if o, err := tlsOption(map[string]string{"security.protocol": "SSL"}); o == nil || err != nil {
		t.Errorf("SSL with the system's roots: %v %v", o, err)
	}
	for props, want := range map[string]string{
		"security.protocol=SASL_SSL":                          "SASL is not supported yet",
		"security.protocol=TLS":                               "want PLAINTEXT or SSL",
		"ssl.truststore.location=/nonexistent/truststore.jks": "/nonexistent/truststore.jks",
	} {
		m := map[string]string{"security.protocol": "SSL"}
		k, v, _ := strings.Cut(props, "=")
		m[k] = v
		if _, err := tlsOption(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", props, err, want)
		}
	}
}
