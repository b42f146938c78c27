package broker

import (
	"strings"
	"testing"
)

func TestParsePropertiesLikeJava(t *testing.T) {
	in := `# a comment
! another comment
process.roles=broker,controller
  node.id = 1
controller.quorum.voters:1@127.0.0.1:9093,\
    2@127.0.0.1:9193
listeners PLAINTEXT://127.0.0.1:9092
escaped\=key=va\:lue\u0041
empty=
log.dirs=/var/lib/keel/n1
node.id=2
`
	props, lines, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"process.roles":            "broker,controller",
		"node.id":                  "2",
		"controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9193",
		"listeners":                "PLAINTEXT://127.0.0.1:9092",
		"escaped=key":              "va:lueA",
		"empty":                    "",
		"log.dirs":                 "/var/lib/keel/n1",
	}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s = %q, want %q", k, props[k], v)
		}
	}
	if len(props) != len(want) {
		t.Errorf("got %d keys: %v", len(props), props)
	}
	if lines["controller.quorum.voters"] != 5 || lines["node.id"] != 11 {
		t.Errorf("lines %v", lines)
	}
}

func TestParsePropertiesRejectsBadEscapes(t *testing.T) {
	for _, in := range []string{`a=\u12`, `a=\uZZZZ`} {
		if _, _, err := ParseProperties(strings.NewReader(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
