package sasl

import (
	"maps"
	"strings"
	"testing"
)

func TestParseJAASKafkaDocExamples(t *testing.T) {
	// The broker's PLAIN listener of Kafka's docs, however it is written.
	brokerPlain := JAASConfig{
		LoginModule: PlainLoginModule,
		Flag:        "required",
		Options: map[string]string{
			"username":   "admin",
			"password":   "admin-secret",
			"user_admin": "admin-secret",
			"user_alice": "alice-secret",
		},
	}
	for _, tc := range []struct {
		name   string
		config string
		want   JAASConfig
	}{
		{
			// server.properties in Kafka's "Configuring Kafka Brokers"
			// for SASL/PLAIN, after the properties reader has joined
			// the `\` continuation lines.
			name: "broker listener, continuations joined",
			config: `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
				`username="admin" ` +
				`password="admin-secret" ` +
				`user_admin="admin-secret" ` +
				`user_alice="alice-secret";`,
			want: brokerPlain,
		},
		{
			// The same as a multi-line value (a YAML block, an
			// environment variable), indented.
			name: "broker listener, multi-line",
			config: "org.apache.kafka.common.security.plain.PlainLoginModule required\n" +
				"    username=\"admin\"\n" +
				"    password=\"admin-secret\"\n" +
				"    user_admin=\"admin-secret\"\n" +
				"    user_alice=\"alice-secret\";\n",
			want: brokerPlain,
		},
		{
			name:   "client PLAIN",
			config: `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`,
			want: JAASConfig{
				LoginModule: PlainLoginModule,
				Flag:        "required",
				Options:     map[string]string{"username": "alice", "password": "alice-secret"},
			},
		},
		{
			name:   "client SCRAM",
			config: `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`,
			want: JAASConfig{
				LoginModule: "org.apache.kafka.common.security.scram.ScramLoginModule",
				Flag:        "required",
				Options:     map[string]string{"username": "alice", "password": "alice-secret"},
			},
		},
		{
			// Bare (unquoted) values, as in Kafka's GSSAPI example.
			name: "broker GSSAPI with bare values, multi-line",
			config: "com.sun.security.auth.module.Krb5LoginModule required\n" +
				"    useKeyTab=true\n" +
				"    storeKey=true\n" +
				"    keyTab=\"/etc/security/keytabs/kafka_server.keytab\"\n" +
				"    principal=\"kafka/kafka1.hostname.com@EXAMPLE.COM\";",
			want: JAASConfig{
				LoginModule: "com.sun.security.auth.module.Krb5LoginModule",
				Flag:        "required",
				Options: map[string]string{
					"keyTab":    "/etc/security/keytabs/kafka_server.keytab",
					"principal": "kafka/kafka1.hostname.com@EXAMPLE.COM",
					"storeKey":  "true",
					"useKeyTab": "true",
				},
			},
		},
		{
			name:   "OAUTHBEARER unsecured",
			config: `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";`,
			want: JAASConfig{
				LoginModule: "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
				Flag:        "required",
				Options:     map[string]string{"unsecuredLoginStringClaim_sub": "alice"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseJAAS(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			assertJAAS(t, got, tc.want)
		})
	}
}

func TestParseJAASGSSAPIContinuationsJoined(t *testing.T) {
	got, err := ParseJAAS(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/etc/security/keytabs/kafka_server.keytab" principal="kafka/kafka1.hostname.com@EXAMPLE.COM";`)
	if err != nil {
		t.Fatal(err)
	}
	assertJAAS(t, got, JAASConfig{
		LoginModule: "com.sun.security.auth.module.Krb5LoginModule",
		Flag:        "required",
		Options: map[string]string{
			"useKeyTab": "true",
			"storeKey":  "true",
			"keyTab":    "/etc/security/keytabs/kafka_server.keytab",
			"principal": "kafka/kafka1.hostname.com@EXAMPLE.COM",
		},
	})
}

func TestParseJAASTokens(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		flag         string
		options      map[string]string
	}{
		{"escaped quotes and backslashes", `M required password="p\"a\\ss" other='it\'s';`, "required",
			map[string]string{"password": `p"a\ss`, "other": "it's"}},
		{"the other quote inside quotes", `M required a='say "hi"' b="it's";`, "required",
			map[string]string{"a": `say "hi"`, "b": "it's"}},
		{"control escapes", `M required v="a\tb\nc\rd\be\ff\ag\vh";`, "required",
			map[string]string{"v": "a\tb\nc\rd\be\ff\ag\vh"}},
		{"octal escapes", `M required v="\101\1011\477\0x\7";`, "required",
			map[string]string{"v": "AA1'7\x00x\x07"}},
		{"other escapes are the character", `M required v="\q\;\=\/";`, "required",
			map[string]string{"v": "q;=/"}},
		{"escaped newline is a newline", "M required v=\"a\\\nb\";", "required",
			map[string]string{"v": "a\nb"}},
		{"quoted semicolon, equals, slash, spaces", `M required v=" a;b=c /* d */ // e ";`, "required",
			map[string]string{"v": " a;b=c /* d */ // e "}},
		{"empty value", `M required password="";`, "required",
			map[string]string{"password": ""}},
		{"no options", `M optional;`, "optional", map[string]string{}},
		{"flag is case-insensitive", `M SuFfIcIeNt;`, "sufficient", map[string]string{}},
		{"quoted flag", `M "requisite";`, "requisite", map[string]string{}},
		{"free whitespace", "\t\r\n M \t required\r\n a \t=\n \"x\"\r\n ;\n\t ", "required",
			map[string]string{"a": "x"}},
		{"no whitespace", `M required a="x"b="y";`, "required",
			map[string]string{"a": "x", "b": "y"}},
		{"comments", "// leading\nM /* inline */ required a=\"x\" // to end of line ; not this\n b=y /* multi\n line */;// trailing", "required",
			map[string]string{"a": "x", "b": "y"}},
		{"bare words with punctuation", `M required a=x.y-z_$1@host:9092,\w b=ünïcødé;`, "required",
			map[string]string{"a": `x.y-z_$1@host:9092,\w`, "b": "ünïcødé"}},
		{"bare numbers", `M required retries=3 ratio=0.5 neg=-1;`, "required",
			map[string]string{"retries": "3", "ratio": "0.5", "neg": "-1"}},
		{"quoted key", `M required "user_bob smith"="pw";`, "required",
			map[string]string{"user_bob smith": "pw"}},
		{"duplicate key keeps the last value", `M required a="1" a="2";`, "required",
			map[string]string{"a": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseJAAS(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			assertJAAS(t, got, JAASConfig{LoginModule: "M", Flag: tc.flag, Options: tc.options})
		})
	}
}

func TestParseJAASErrors(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         string // in the error
	}{
		{"empty", "", "no login module"},
		{"only whitespace and comments", " \n// x\n/* y */ ", "no login module"},
		{"missing flag at end", `org.apache.kafka.common.security.plain.PlainLoginModule`, "line 1, column 56: login module control flag not specified"},
		{"missing flag before ;", `M;`, "line 1, column 2: login module control flag expected after M, found ';'"},
		{"missing flag before options", `M username="admin";`, "line 1, column 3: invalid login module control flag \"username\""},
		{"invalid flag", `M mandatory;`, `invalid login module control flag "mandatory"; want required, requisite, sufficient or optional`},
		{"missing ;", `M required username="admin" password="admin-secret"`, "line 1, column 52: JAAS config entry of M not terminated by semi-colon"},
		{"missing ; on a later line", "M required\n  a=\"x\"\n", "line 3, column 1: JAAS config entry of M not terminated by semi-colon"},
		{"two entries", "M required a=\"x\";\n N optional;", "2 login modules, should be 1 module (the second starts at line 2, column 2)"},
		{"three entries", `M required; N required; O required;`, "3 login modules, should be 1 module"},
		{"unterminated quote at end", `M required password="admin-secret;`, "line 1, column 21: unterminated quoted string"},
		{"unterminated quote at end of line", "M required password=\"admin-secret\n;", "line 1, column 21: unterminated quoted string"},
		{"unterminated quote at CR", "M required password='admin-secret\r\n';", "unterminated quoted string"},
		{"backslash at end", `M required password="admin-secret\`, "ends with a backslash"},
		{"unterminated comment", "M required /* a=\"x\";", "line 1, column 12: unterminated /* comment"},
		{"lone slash", `M required keyTab=/etc/kafka.keytab;`, "line 1, column 19: unexpected '/'"},
		{"key without =", `M required username "admin";`, "line 1, column 12: option without '='"},
		{"unquoted value with a space", `M required password=admin secret;`, "line 1, column 27: option without '='"},
		{"unjoined backslash continuation", "M required \\\n  a=\"x\";", "line 1, column 12: option without '='"},
		{"= without key", `M required ="x";`, "line 1, column 12: option name expected, found '='"},
		{"value missing at ;", `M required password=;`, `line 1, column 21: value not specified for key "password"`},
		{"value missing at end", `M required password=`, `value not specified for key "password"`},
		{"value is =", `M required password==x;`, `value not specified for key "password"`},
		{"leading ;", `; M required;`, "line 1, column 1: login module class name expected, found ';'"},
		{"empty login module", `"" required;`, "empty login module class name"},
		{"C1 control character", "M required a=\"x\" \u0085;", "line 1, column 18: option name expected, found an unexpected control character"},
		{"invalid UTF-8", "M required a=\"\xff\";", "not valid UTF-8 (byte 14)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseJAAS(tc.config)
			if err == nil {
				t.Fatalf("parsed %v, want an error with %q", got, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "JAAS config") {
				t.Fatalf("error %q does not say it is about the JAAS config", err)
			}
		})
	}
}

// TestParseJAASErrorsHideValues checks that no syntax error quotes the
// password, wherever the mistake is.
func TestParseJAASErrorsHideValues(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, config := range []string{
		`M required password="` + secret,
		`M required password="` + secret + "\n;",
		`M required password=` + secret,
		`M required password=` + secret + ` user_a="` + secret + `"`,
		`M required password="` + secret + `" ` + secret + `;`,
		`M required password=abc ` + secret + `;`,
		`M required password="` + secret + `" "` + secret + `";`,
		`M required password="` + secret + `" = "` + secret + `";`,
		`M required password=` + secret + `/x;`,
		`M required password="` + secret + `"; N required password="` + secret + `";`,
		`M required password="` + secret + `" \` + "\u0085" + secret + `;`,
		`M required password="` + secret + "\xff" + `";`,
	} {
		_, err := ParseJAAS(config)
		if err == nil {
			t.Fatalf("%q parsed", config)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error for %q shows the password: %v", config, err)
		}
	}
}

func TestJAASConfigStringRedactsValues(t *testing.T) {
	c, err := ParseJAAS(`M required username="admin" password="admin-secret";`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.String(), "M required password=[redacted] username=[redacted];"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func assertJAAS(t *testing.T, got, want JAASConfig) {
	t.Helper()
	if got.LoginModule != want.LoginModule || got.Flag != want.Flag || !maps.Equal(got.Options, want.Options) {
		t.Fatalf("got  %q %q %q\nwant %q %q %q", got.LoginModule, got.Flag, got.Options, want.LoginModule, want.Flag, want.Options)
	}
}
