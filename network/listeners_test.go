package network

import (
	"reflect"
	"strings"
	"testing"
)

// The default map as Kafka writes it is the default map.
func TestDefaultSecurityProtocolMapValue(t *testing.T) {
	m, err := ParseSecurityProtocolMap(DefaultSecurityProtocolMapValue)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, DefaultSecurityProtocolMap()) {
		t.Errorf("%s parses to %v, the default map is %v", DefaultSecurityProtocolMapValue, m, DefaultSecurityProtocolMap())
	}
}

func TestParseListeners(t *testing.T) {
	defaults := DefaultSecurityProtocolMap()
	kraft, err := ParseSecurityProtocolMap("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		listeners string
		protocols map[string]SecurityProtocol
		want      []Listener
		wantErr   string
	}{
		{
			name:      "the DESIGN.md combined node",
			listeners: "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
			protocols: kraft,
			want: []Listener{
				{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: Plaintext},
				{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093, SecurityProtocol: Plaintext},
			},
		},
		{
			name: "empty host binds every interface", listeners: "PLAINTEXT://:9092", protocols: defaults,
			want: []Listener{{Name: "PLAINTEXT", Port: 9092, SecurityProtocol: Plaintext}},
		},
		{
			name: "port 0 twice is allowed (tests)", listeners: "PLAINTEXT://127.0.0.1:0, CONTROLLER://127.0.0.1:0", protocols: kraft,
			want: []Listener{
				{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: Plaintext},
				{Name: "CONTROLLER", Host: "127.0.0.1", SecurityProtocol: Plaintext},
			},
		},
		{
			name: "names are case-insensitive, IPv6 in brackets", listeners: "plaintext://[::1]:9092", protocols: defaults,
			want: []Listener{{Name: "PLAINTEXT", Host: "::1", Port: 9092, SecurityProtocol: Plaintext}},
		},
		{
			name: "SSL parses", listeners: "SSL://host:9094", protocols: defaults,
			want: []Listener{{Name: "SSL", Host: "host", Port: 9094, SecurityProtocol: SSL}},
		},
		{
			name: "IPv4 and IPv6 may share a port", listeners: "PLAINTEXT://0.0.0.0:9092,SSL://[::]:9092", protocols: defaults,
			want: []Listener{
				{Name: "PLAINTEXT", Host: "0.0.0.0", Port: 9092, SecurityProtocol: Plaintext},
				{Name: "SSL", Host: "::", Port: 9092, SecurityProtocol: SSL},
			},
		},
		{name: "controller name unmapped", listeners: "PLAINTEXT://:9092,CONTROLLER://:9093", protocols: defaults, wantErr: "no security protocol defined for listener CONTROLLER"},
		{name: "duplicate name", listeners: "PLAINTEXT://:9092,PLAINTEXT://:9093", protocols: defaults, wantErr: "appears twice"},
		{name: "duplicate port", listeners: "PLAINTEXT://:9092,SSL://:9092", protocols: defaults, wantErr: "same port 9092"},
		{name: "no scheme", listeners: "127.0.0.1:9092", protocols: defaults, wantErr: "not of the form"},
		{name: "no port", listeners: "PLAINTEXT://localhost", protocols: defaults, wantErr: "missing port"},
		{name: "bad port", listeners: "PLAINTEXT://localhost:99999", protocols: defaults, wantErr: "not a number in 0..65535"},
		{name: "negative port", listeners: "PLAINTEXT://localhost:-1", protocols: defaults, wantErr: "not a number in 0..65535"},
		{name: "empty", listeners: " , ", protocols: defaults, wantErr: "no listener configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseListeners(tc.listeners, tc.protocols)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseSecurityProtocolMap(t *testing.T) {
	m, err := ParseSecurityProtocolMap("")
	if err != nil || len(m) != 4 || m["SASL_SSL"] != SASLSSL {
		t.Fatalf("default map %v, %v", m, err)
	}
	m, err = ParseSecurityProtocolMap(" internal:sasl_plaintext , EXTERNAL:SSL")
	if err != nil || !reflect.DeepEqual(m, map[string]SecurityProtocol{"INTERNAL": SASLPlaintext, "EXTERNAL": SSL}) {
		t.Fatalf("%v, %v", m, err)
	}
	for value, wantErr := range map[string]string{
		"CONTROLLER":                            "not of the form",
		"CONTROLLER:":                           "not of the form",
		"CONTROLLER:TLS":                        "unknown security protocol",
		"A:PLAINTEXT,a:SSL":                     "mapped twice",
		"PLAINTEXT:PLAINTEXT,CONTROLLER:BOGUS1": "listener CONTROLLER",
	} {
		if _, err := ParseSecurityProtocolMap(value); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want %q", value, err, wantErr)
		}
	}
}

func TestParseAdvertisedListeners(t *testing.T) {
	protocols, _ := ParseSecurityProtocolMap("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT")
	listeners, err := ParseListeners("PLAINTEXT://0.0.0.0:9092,CONTROLLER://127.0.0.1:9093", protocols)
	if err != nil {
		t.Fatal(err)
	}
	adv, err := ParseAdvertisedListeners("PLAINTEXT://broker1.example:9092", listeners, protocols)
	if err != nil || len(adv) != 1 || adv[0].Host != "broker1.example" {
		t.Fatalf("%+v, %v", adv, err)
	}
	adv, err = ParseAdvertisedListeners("", listeners, protocols)
	if err != nil || !reflect.DeepEqual(adv, listeners) {
		t.Fatalf("default advertised %+v, %v", adv, err)
	}
	for value, wantErr := range map[string]string{
		"EXTERNAL://x:1":           "no security protocol defined",
		"PLAINTEXT://0.0.0.0:9092": "non-routable",
		"PLAINTEXT://[::]:9092":    "non-routable",
	} {
		if _, err := ParseAdvertisedListeners(value, listeners, protocols); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want %q", value, err, wantErr)
		}
	}
	withExternal := map[string]SecurityProtocol{"PLAINTEXT": Plaintext, "CONTROLLER": Plaintext, "EXTERNAL": Plaintext}
	if _, err := ParseAdvertisedListeners("EXTERNAL://x:1", listeners, withExternal); err == nil || !strings.Contains(err.Error(), "not in listeners") {
		t.Errorf("advertised name missing from listeners: %v", err)
	}
}
