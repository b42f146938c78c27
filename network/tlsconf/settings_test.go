package tlsconf

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// props is a get func over a map, recording the keys read.
func props(m map[string]string, read *[]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if read != nil {
			*read = append(*read, k)
		}
		v, ok := m[k]
		return v, ok
	}
}

func TestFromPropertiesDefaults(t *testing.T) {
	var read []string
	s, err := FromProperties(props(nil, &read))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, Defaults()) {
		t.Errorf("FromProperties of nothing = %+v, want %+v", s, Defaults())
	}
	if s.EndpointIdentificationAlgorithm != "https" || s.PrincipalMappingRules != "DEFAULT" || s.ClientAuth != "none" ||
		s.KeystoreType != "JKS" || s.TruststoreType != "JKS" || !slices.Equal(s.EnabledProtocols, []string{"TLSv1.2", "TLSv1.3"}) {
		t.Errorf("defaults are not Kafka's: %+v", s)
	}
	// Every key read is listed by Keys, and every listed key is read.
	keys := Keys()
	slices.Sort(keys)
	slices.Sort(read)
	if !slices.Equal(slices.Compact(read), keys) {
		t.Errorf("FromProperties read %v, Keys lists %v", read, keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "ssl.") {
			t.Errorf("Keys lists %q", k)
		}
	}
}

func TestFromProperties(t *testing.T) {
	s, err := FromProperties(props(map[string]string{
		"ssl.keystore.type":                     " PKCS12 ",
		"ssl.keystore.location":                 "/etc/kafka/broker.p12",
		"ssl.keystore.password":                 "secret ",
		"ssl.truststore.type":                   "PEM",
		"ssl.truststore.location":               "/etc/kafka/ca.pem",
		"ssl.client.auth":                       "required",
		"ssl.enabled.protocols":                 "TLSv1.2, TLSv1.3,",
		"ssl.cipher.suites":                     "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 , TLS_AES_128_GCM_SHA256",
		"ssl.endpoint.identification.algorithm": "",
		"ssl.principal.mapping.rules":           "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.KeystoreType, want.KeystoreLocation, want.KeystorePassword = "PKCS12", "/etc/kafka/broker.p12", "secret"
	want.TruststoreType, want.TruststoreLocation = "PEM", "/etc/kafka/ca.pem"
	want.ClientAuth = "required"
	want.EnabledProtocols = []string{"TLSv1.2", "TLSv1.3"}
	want.CipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"}
	want.EndpointIdentificationAlgorithm = "" // explicitly empty: no host name verification
	want.PrincipalMappingRules = "RULE:^CN=(.*?),.*$/$1/L,DEFAULT"
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
}

func TestRefusedSettings(t *testing.T) {
	tests := []struct {
		name  string
		props map[string]string
		want  string
	}{
		// Values FromProperties refuses.
		{"unknown keystore type", map[string]string{"ssl.keystore.type": "JCEKS"}, "ssl.keystore.type=JCEKS"},
		{"unknown truststore type", map[string]string{"ssl.truststore.type": "BKS"}, "ssl.truststore.type=BKS"},
		{"unknown client auth", map[string]string{"ssl.client.auth": "require"}, "ssl.client.auth=require"},
		{"unknown endpoint identification", map[string]string{"ssl.endpoint.identification.algorithm": "ldaps"}, "ssl.endpoint.identification.algorithm=ldaps"},
		{"empty protocols", map[string]string{"ssl.enabled.protocols": " "}, "ssl.enabled.protocols is empty"},
		{"unknown protocol", map[string]string{"ssl.enabled.protocols": "TLSv1.2,TLSv1.4"}, `"TLSv1.4"`},
		{"unknown ssl.protocol", map[string]string{"ssl.protocol": "DTLS"}, "ssl.protocol=DTLS"},
		{"unknown cipher suite", map[string]string{"ssl.cipher.suites": "TLS_BOGUS"}, `"TLS_BOGUS"`},
		{"bad rules", map[string]string{"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1"}, "ssl.principal.mapping.rules"},
		// Combinations Validate (so ServerConfig, ClientConfig) refuses.
		{"inline key, JKS type", map[string]string{"ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c"}, "ssl.keystore.type must be PEM"},
		{"inline key without chain", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.key": "k"}, "ssl.keystore.certificate.chain is not"},
		{"chain without inline key", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "c"}, "ssl.keystore.key is not"},
		{"keystore location and inline key", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.key": "k",
			"ssl.keystore.certificate.chain": "c", "ssl.keystore.location": "/k.pem"}, "both ssl.keystore.location and ssl.keystore.key"},
		{"inline key with keystore password", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.key": "k",
			"ssl.keystore.certificate.chain": "c", "ssl.keystore.password": "pw"}, "ssl.keystore.password cannot be set for a PEM keystore"},
		{"PEM keystore file with password", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem",
			"ssl.keystore.password": "pw"}, "ssl.keystore.password cannot be set"},
		{"JKS keystore without password", map[string]string{"ssl.keystore.location": "/k.jks"}, "ssl.keystore.password is not"},
		{"keystore password without keystore", map[string]string{"ssl.keystore.password": "pw"}, "ssl.keystore.location is not"},
		{"truststore location and inline certificates", map[string]string{"ssl.truststore.type": "PEM",
			"ssl.truststore.location": "/t.pem", "ssl.truststore.certificates": "c"}, "both ssl.truststore.location and ssl.truststore.certificates"},
		{"inline certificates, JKS type", map[string]string{"ssl.truststore.certificates": "c"}, "ssl.truststore.type must be PEM"},
		{"PEM truststore with password", map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": "/t.pem",
			"ssl.truststore.password": "pw"}, "ssl.truststore.password cannot be set for a PEM truststore"},
		{"truststore password without truststore", map[string]string{"ssl.truststore.password": "pw"}, "ssl.truststore.location is not"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromProperties(props(tc.props, nil))
			if err == nil {
				for _, check := range []func() error{
					s.Validate,
					func() error { _, err := s.ServerConfig(); return err },
					func() error { _, err := s.ClientConfig(""); return err },
				} {
					if err = check(); err == nil || !strings.Contains(err.Error(), tc.want) {
						break
					}
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateJoinsErrors(t *testing.T) {
	s := Defaults()
	s.ClientAuth, s.KeystoreType = "sometimes", "BKS"
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "ssl.client.auth") || !strings.Contains(err.Error(), "ssl.keystore.type") {
		t.Fatalf("err = %v, want both problems", err)
	}
	if _, err := s.ServerConfig(); err == nil {
		t.Error("ServerConfig of invalid settings succeeded")
	}
}
